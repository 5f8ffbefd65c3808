"""NodeRank, in three versions: a plugin whose releases change its manifest, to show a rolling upgrade,
a shadow and a canary of a remote plugin (docs/plugins-live.md).

Nodes carry a rank label, pods may ask for a minimum rank::

    metadata:
      labels:
        example.outrigger.io/rank: "70"          # a node's rank, 0 to 100
      annotations:
        example.outrigger.io/min-rank: "50"      # a pod's minimum rank

- :class:`NodeRankV1` (version 1) serves **Filter** only: a pod with the annotation fits only on nodes of
  at least that rank (a node without the label has rank 0); a pod without it fits everywhere.
- :class:`NodeRank` (version 2) adds **Score**: a node scores its rank, so pods go to high-rank nodes.
  Its manifest declares one more extension point than version 1's: hosts replaced one by one with it
  are a rolling upgrade that changes the manifest.
- :class:`NodeRankLow` (version 3, a candidate) filters the same way and scores ``100 - rank``: it
  disagrees with version 2 on every placement, so as a shadow or a canary its effect is plain.

All three are named ``NodeRank``; serve one per host::

    outrigger plugin serve pluginhost.examples.noderank:NodeRankV1 --listen 127.0.0.1:50065
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import Pod
from pluginhost.plugin import (
    MAX_NODE_SCORE,
    CycleState,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    ScorePlugin,
    check_args,
)
from pluginhost.status import Code

__all__ = ["MIN_RANK", "RANK", "NodeRank", "NodeRankLow", "NodeRankV1", "ranks"]

RANK = "example.outrigger.io/rank"
MIN_RANK = "example.outrigger.io/min-rank"


def ranks(batch: NodeBatch) -> npt.NDArray[np.int64]:
    """The batch's nodes' ranks (0 where the label is missing or not a whole number; clipped to 0..100)."""
    codes, vocab = batch.snapshot.table.label_codes(RANK)
    by_code = np.zeros(len(vocab) + 1, dtype=np.int64)  # the last entry: code -1, no label
    for value, code in vocab.items():
        by_code[code] = int(value) if value.strip().isdigit() else 0
    out: npt.NDArray[np.int64] = np.clip(by_code[codes[batch.rows]], 0, MAX_NODE_SCORE)
    return out


class NodeRankV1(FilterPlugin):
    """Version 1: Filter on the pod's minimum rank (see the module docstring)."""

    name = "NodeRank"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = check_args(args, self.name)  # it takes none

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        wanted = pod.annotations.get(MIN_RANK, "").strip()
        if not wanted:
            return FilterResult.passing(len(batch))
        if not wanted.isdigit():
            return FilterResult.from_mask(np.ones(len(batch), dtype=np.bool_), Code.UnschedulableAndUnresolvable,
                                          f"annotation {MIN_RANK} must be a whole number, got {wanted!r}")
        low = ranks(batch) < int(wanted)
        if not low.any():
            return FilterResult.passing(len(batch))
        return FilterResult.from_mask(low, Code.UnschedulableAndUnresolvable, f"node(s) ranked below {wanted}")


class NodeRank(NodeRankV1, ScorePlugin):
    """Version 2: version 1's Filter, and Score = the node's rank."""

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        return ranks(batch)


class NodeRankLow(NodeRankV1, ScorePlugin):
    """Version 3, a candidate: version 1's Filter, and Score = 100 - the node's rank."""

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        out: npt.NDArray[np.int64] = MAX_NODE_SCORE - ranks(batch)
        return out
