"""ImageLocality: scores from image sizes spread over nodes, name normalization, the per-table index.

kube-scheduler v1.37's ``imagelocality`` plugin: each container (init containers too) and image
volume whose image the node has adds ``int(size * nodesWithImage / totalNodes)``; the sum is clamped
to ``[23 MiB, 1000 MiB * images]`` and mapped onto 0..100 with integer division.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from framework.plugins.imagelocality import ImageLocality, normalized_image_name
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import CycleState, NodeBatch
from pluginhost.snapshot import ClusterTable, Snapshot

MB = 1024 * 1024


def node(name: str, *images: tuple[list[str], int]) -> Node:
    return node_from_dict(
        {
            "metadata": {"name": name},
            "status": {
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "images": [{"names": names, "sizeBytes": size} for names, size in images],
            },
        }
    )


def pod(*images: str, init: tuple[str, ...] = (), volumes: tuple[str, ...] = ()) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": img} for i, img in enumerate(images)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", "image": img} for i, img in enumerate(init)]
    if volumes:
        spec["volumes"] = [{"name": f"v{i}", "image": {"reference": ref}} for i, ref in enumerate(volumes)]
    return pod_from_dict({"metadata": {"name": "p"}, "spec": spec})


NGINX = (["nginx:latest", "docker.io/library/nginx:latest"], 500 * MB)
NODES = [
    node("n1", NGINX, (["redis:7"], 30 * MB), (["big:1"], 2000 * MB), (["all:1"], 300 * MB)),
    node("n2", (["nginx:latest"], 500 * MB), (["all:1"], 300 * MB), (["huge:1"], 5000 * MB)),
    node(
        "n3",
        (["all:1"], 300 * MB),
        (["localhost:5000/app:latest"], 100 * MB),
        (["app@sha256:0123abcd"], 80 * MB),
        (["huge:1"], 5000 * MB),
    ),
]


def cluster(nodes: list[Node]) -> Snapshot:
    table = ClusterTable()
    for n in nodes:
        table.upsert_node(n)
    return table.snapshot()


def score(p: Pod, snap: Snapshot, rows: list[int] | None = None) -> list[int]:
    batch = NodeBatch(snap, np.asarray(range(len(snap)) if rows is None else rows, dtype=np.int64))
    out = asyncio.run(ImageLocality().score(CycleState(snapshot=snap), p, batch))
    assert out.dtype == np.int64
    return [int(s) for s in out]


CASES: list[tuple[str, Pod, list[int]]] = [
    # 500 MiB on 2 of 3 nodes -> 333 MiB -> 100 * (333 - 23) / (1000 - 23) = 31
    ("untagged-image-is-latest", pod("nginx"), [31, 31, 0]),
    ("explicit-latest", pod("nginx:latest"), [31, 31, 0]),
    ("other-tag-does-not-match", pod("nginx:1.25"), [0, 0, 0]),
    # the node lists the image under a second name: only n1 has that one -> 166 MiB -> 14
    ("alternative-name", pod("docker.io/library/nginx"), [14, 0, 0]),
    # 30 MiB on one node of three: 10 MiB is under the 23 MiB floor
    ("below-min-threshold", pod("redis:7"), [0, 0, 0]),
    # 2000 MiB on one node -> 666 MiB -> 65
    ("large-rare-image", pod("big:1"), [65, 0, 0]),
    # present everywhere: not scaled down -> 300 MiB -> 28
    ("image-on-every-node", pod("all:1"), [28, 28, 28]),
    # 5000 MiB on 2 of 3 nodes -> 3333 MiB, over the 1000 MiB ceiling -> 100
    ("above-max-threshold", pod("huge:1"), [0, 100, 100]),
    # two containers: n1 333 + 666 = 1000 MiB of a 2000 MiB ceiling -> 49; n2 333 MiB -> 15
    ("two-containers", pod("nginx", "big:1"), [49, 15, 0]),
    ("init-containers-count", pod("nginx", init=("big:1",)), [49, 15, 0]),
    # the same image in two containers counts twice: 666 MiB of 2000 -> 32
    ("same-image-twice", pod("nginx", "nginx"), [32, 32, 0]),
    # a missing image still raises the ceiling: 100 * (300 - 23) / (2000 - 23) = 14 (not 28)
    ("missing-image-raises-ceiling", pod("all:1", "absent:1"), [14, 14, 14]),
    # a registry port is not a tag: "localhost:5000/app" means "localhost:5000/app:latest" (33 MiB -> 1)
    ("registry-port", pod("localhost:5000/app"), [0, 0, 1]),
    # a digest is kept as is: 80 MiB on 1 of 3 nodes -> 26 MiB -> 0; no image at all -> 0
    ("digest", pod("app@sha256:0123abcd"), [0, 0, 0]),
    # kube-scheduler 1.37: image volumes count as images (1.35 ignored them: 28, 28, 28 and 65, 0, 0)
    ("image-volume-counts", pod("nginx", volumes=("big:1",)), [49, 15, 0]),
    ("image-volume-raises-ceiling", pod("all:1", volumes=("absent:1",)), [14, 14, 14]),
    # an untagged reference is ":latest" too: n1 10 + 333 MiB of 2000 -> 16; n2 333 MiB -> 15
    ("untagged-image-volume-is-latest", pod("redis:7", volumes=("nginx",)), [16, 15, 0]),
    # only the volume's image is on a node: 666 MiB of 2000 -> 32
    ("only-the-volume-image-present", pod("absent:1", volumes=("big:1",)), [32, 0, 0]),
]


@pytest.mark.parametrize(("incoming", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_score(incoming: Pod, want: list[int]) -> None:
    assert score(incoming, cluster(NODES)) == want


def test_spread_counts_every_node_not_just_the_batch() -> None:
    snap = cluster(NODES)
    # only n2 and n1 are scored, in that order, but the image is on 2 of the 3 nodes
    assert score(pod("nginx"), snap, rows=[1, 0]) == [31, 31]


def test_spread_changes_with_the_number_of_nodes() -> None:
    # 500 MiB on 2 of 4 nodes -> 250 MiB -> 23
    snap = cluster([*NODES, node("n4")])
    assert score(pod("nginx"), snap) == [23, 23, 0, 0]


def test_size_comes_from_the_first_node_reporting_the_image() -> None:
    # kube-scheduler keeps one size per image name cluster-wide: the first node's
    first_small = cluster([node("x", (["img:1"], 400 * MB)), node("y", (["img:1"], 600 * MB)), node("z")])
    first_large = cluster([node("x", (["img:1"], 600 * MB)), node("y", (["img:1"], 400 * MB)), node("z")])
    assert score(pod("img:1"), first_small) == [24, 24, 0]
    assert score(pod("img:1"), first_large) == [38, 38, 0]


def test_image_listed_twice_on_a_node_counts_that_node_once() -> None:
    snap = cluster([node("x", (["img:1"], 500 * MB), (["img:1"], 700 * MB)), node("y"), node("z")])
    # 1 of 3 nodes, first size: 166 MiB -> 14
    assert score(pod("img:1"), snap) == [14, 0, 0]


def test_index_is_built_once_per_node_table() -> None:
    table = ClusterTable()
    for n in NODES:
        table.upsert_node(n)
    snap = table.snapshot()
    assert score(pod("nginx"), snap) == [31, 31, 0]
    index = snap.table.memo("ImageLocality/images", lambda _: pytest.fail("index rebuilt"))
    # placing a pod changes the snapshot but not the node table: the index is reused
    table.place_pod(pod("nginx"), "n1")
    again = table.snapshot()
    assert again.table is snap.table
    assert again.table.memo("ImageLocality/images", lambda _: pytest.fail("index rebuilt")) is index
    # a node change rebuilds it: nginx is now on 1 of 2 nodes -> 250 MiB -> 23
    table.remove_node("n2")
    assert score(pod("nginx"), table.snapshot()) == [23, 0]


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.25", "nginx:1.25"),
        ("library/nginx", "library/nginx:latest"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        ("localhost:5000/app:v2", "localhost:5000/app:v2"),
        ("app@sha256:0123abcd", "app@sha256:0123abcd"),
        ("", ":latest"),
    ],
)
def test_normalized_image_name(name: str, want: str) -> None:
    assert normalized_image_name(name) == want


def test_args_are_ignored() -> None:
    # ImageLocality has no args type: kube-scheduler hands whatever is configured to it unread.
    snap = cluster(NODES)
    for args in (None, {}, {"threshold": 1}):
        plugin = ImageLocality(args)
        batch = NodeBatch(snap, np.arange(len(snap), dtype=np.int64))
        assert asyncio.run(plugin.score(CycleState(snapshot=snap), pod("nginx"), batch)).tolist() == [31, 31, 0]
