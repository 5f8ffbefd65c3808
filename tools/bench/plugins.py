"""The benchmark's own plugins: :class:`BenchTier` (a cheap label Filter + Score plugin) and
:class:`HeavyScore` (a CPU-heavy Score plugin), with the classes a plugin host serves them as.

The scenarios start their plugin hosts with ``outrigger plugin serve tools.bench.plugins:<class>``:
:class:`RemoteBenchTier` (``remote``, lookahead), :class:`RemoteStreamsBenchTier` (``remote-streams``)
and :class:`HeavyScore` (``replicas-N``). The Go SDK's ``outrigger-benchtier`` (clients/go) and the
extender (:mod:`tools.bench.httpextender`) implement BenchTier's logic too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterPlugin, FilterResult, Handle, NodeBatch, ScorePlugin
from pluginhost.status import Code

__all__ = ["HEAVY_ROUNDS", "TIER_LABEL", "BenchTier", "HeavyScore", "RemoteBenchTier", "RemoteStreamsBenchTier"]

IntArray = npt.NDArray[np.int64]

TIER_LABEL = "bench.outrigger.dev/tier"
TIER_SCORES = {"gold": 100, "silver": 50, "bronze": 0}


class BenchTier(FilterPlugin, ScorePlugin):
    """Keeps pods off nodes without the tier label and prefers gold over silver over bronze nodes.

    Written as any in-process plugin would be: the label's per-node codes come from the node table
    (built once per node set), so Filter and Score are a gather over the batch's rows.
    """

    name = "BenchTier"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.key = str((args or {}).get("label", TIER_LABEL))

    def _score_by_code(self, vocab: dict[str, int]) -> IntArray:
        by_code = np.zeros(len(vocab) + 1, dtype=np.int64)  # the last slot: no label
        for value, code in vocab.items():
            by_code[code] = TIER_SCORES.get(value, 0)
        return by_code

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        codes, _ = batch.snapshot.table.label_codes(self.key)
        return FilterResult.from_mask(
            codes[batch.rows] < 0, Code.UnschedulableAndUnresolvable, f"node(s) didn't have label {self.key}"
        )

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        table = batch.snapshot.table
        codes, vocab = table.label_codes(self.key)
        by_code: IntArray = table.memo(f"BenchTier/scores:{self.key}", lambda _t: self._score_by_code(vocab))
        picked: IntArray = by_code[codes[batch.rows]]  # code -1 (no label) takes the last slot
        return picked


class RemoteBenchTier(BenchTier):
    """:class:`BenchTier` as served by a plugin host. It reads only node labels, so it declares
    ``lookahead``: the framework asks for its answers before the pods' cycles, several pods per message."""

    filter_and_score = True
    lookahead = True


class RemoteStreamsBenchTier(BenchTier):
    """:class:`BenchTier` without lookahead: Filter and Score answered in one exchange in each cycle."""

    filter_and_score = True


class HeavyScore(ScorePlugin):
    """A CPU-heavy Score plugin: a fixed amount of pure-Python work per node (``rounds`` multiply-xor
    steps on the node's name), the kind of plugin that is worth more replicas. Deterministic."""

    name = "HeavyScore"
    nodes_only = True  # a node's score depends on the node alone: its hosts follow the mirror nodes-only

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.rounds = int((args or {}).get("rounds", HEAVY_ROUNDS))

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        out = np.empty(len(batch), dtype=np.int64)
        for i, name in enumerate(batch.names):
            h = 2166136261
            for j in range(self.rounds):
                h = ((h ^ (ord(name[j % len(name)]) + j)) * 16777619) & 0xFFFFFFFF
            out[i] = h % 101
        return out


HEAVY_ROUNDS = 300  # ~20 us of one core per node on the development machine
