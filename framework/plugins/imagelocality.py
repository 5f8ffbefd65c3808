"""ImageLocality: favour nodes that already have the pod's container images.

Each of the pod's images that the node reports adds the image's size scaled by the share of nodes
that have it (``size * nodesWithImage / totalNodes``), so an image present everywhere does not pull
every pod to the same nodes. The images are those of the init containers, the containers and, since
kube-scheduler 1.37, the image volumes (``spec.volumes[].image.reference``). The sum is clamped to
``[23 MiB, 1000 MiB * images]`` (``images`` counts every container and image volume, present on the
node or not) and mapped linearly onto 0..100, as kube-scheduler v1.37's ``imagelocality`` plugin
does. Image names are matched as written, with ``:latest`` added to a name that has neither tag nor
digest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import VOLUME_IMAGE, Pod
from pluginhost.plugin import MAX_NODE_SCORE, CycleState, Handle, NodeBatch, ScorePlugin
from pluginhost.snapshot import NodeTable

__all__ = ["ImageLocality", "normalized_image_name"]

IntArray = npt.NDArray[np.int64]

_MB = 1024 * 1024
MIN_THRESHOLD = 23 * _MB
MAX_CONTAINER_THRESHOLD = 1000 * _MB
_MEMO_KEY = "ImageLocality/images"


@dataclass(frozen=True, slots=True)
class _ImageState:
    rows: IntArray  # node rows that report the image
    size: int  # bytes, as reported by the first node (in row order) that has it

    @property
    def num_nodes(self) -> int:
        return int(self.rows.shape[0])


def normalized_image_name(name: str) -> str:
    """The name the container runtime reports: ``:latest`` is implied when no tag is given."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def _image_index(table: NodeTable) -> dict[str, _ImageState]:
    """Image name → the rows of the nodes reporting it and its size, for one node table."""
    rows: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    for row, node in enumerate(table.nodes):
        for image in node.images:
            for name in image.names:
                on_node = rows.setdefault(name, [])
                if on_node and on_node[-1] == row:
                    continue  # listed twice by the same node: counted once, first size kept
                on_node.append(row)
                sizes.setdefault(name, image.size_bytes)
    return {name: _ImageState(np.asarray(r, dtype=np.int64), sizes[name]) for name, r in rows.items()}


class ImageLocality(ScorePlugin):
    """Scores nodes by how much of the pod's container and volume images they already hold."""

    name = "ImageLocality"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        pass  # ImageLocality has no args; kube-scheduler ignores whatever pluginConfig gives it

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        table = batch.snapshot.table
        index: dict[str, _ImageState] = table.memo(_MEMO_KEY, _image_index)
        total_nodes = len(table.nodes)
        images = [c.image for c in (*pod.init_containers, *pod.containers)]
        images += [v.disk for v in pod.volumes if v.source == VOLUME_IMAGE]
        sums: IntArray | None = None
        for name in images:
            image = index.get(normalized_image_name(name))
            if image is None:
                continue
            # int64(float64(size) * spread), spread = float64(numNodes) / float64(totalNumNodes)
            scaled = int(float(image.size) * (image.num_nodes / total_nodes))
            if sums is None:
                sums = np.zeros(total_nodes, dtype=np.int64)
            sums[image.rows] += scaled
        n = len(batch)
        if sums is None or not images:
            return np.zeros(n, dtype=np.int64)
        max_threshold = MAX_CONTAINER_THRESHOLD * len(images)
        clamped = np.clip(sums[batch.rows], MIN_THRESHOLD, max_threshold)
        return (MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)).astype(np.int64)
