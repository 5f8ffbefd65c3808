"""The Filter phase's windows (framework.filterwindow): a plugin that declares its Filter costly is
sent only the nodes the cycle needs, a few at a time, and the cycle's results (feasible nodes in
order, nodes processed, each node's status) are those of sending it the whole window."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from framework.filterwindow import MIN_COSTLY_CHUNK, WindowedFilter
from framework.hooks import CostlyFilter
from framework.outcomes import Diagnosis, FilterOutcome
from pluginhost.manifest import pod_from_dict
from pluginhost.model import Node
from pluginhost.plugin import CycleState, FilterPlugin, FilterResult, NodeBatch
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import Code, Status

N = 600


class Rejects(FilterPlugin):
    """Rejects nodes whose index ``i`` has ``i % every == 0`` (every 0: none); records the nodes it saw."""

    def __init__(self, name: str, every: int, costly: bool = False, code: Code = Code.Unschedulable) -> None:
        self.name = name
        self.every = every
        self.costly = costly
        self.code = code
        self.seen: list[int] = []

    async def filter(self, state: CycleState, pod: Any, batch: NodeBatch) -> FilterResult:
        idx = [int(n.name[1:]) for _, n in batch.nodes()]
        self.seen.extend(idx)
        return FilterResult.from_statuses([
            Status(self.code, (f"{self.name} says no",), self.name) if self.every and i % self.every == 0
            else Status() for i in idx])


class CostlyRejects(Rejects, CostlyFilter):
    def filter_is_costly(self, state: CycleState) -> bool:
        return self.costly


async def _observe(point: str, pl: Any, call: Any, nodes: int = -1, **_: Any) -> Any:
    return await call


def _snapshot() -> Snapshot:
    table = ClusterTable()
    for i in range(N):
        table.upsert_node(Node(name=f"n{i}", uid=f"u{i}"))
    return table.snapshot()


def _run(plugins: list[FilterPlugin], start: int, num_to_find: int) -> tuple[FilterOutcome, dict[str, str]]:
    snap = _snapshot()
    pod = pod_from_dict({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})
    state = CycleState(snapshot=snap)
    candidates = np.roll(np.arange(N, dtype=np.int64), -start)
    diagnosis = Diagnosis()
    out = asyncio.run(WindowedFilter(_observe, state, pod, snap, plugins).run(candidates, num_to_find, diagnosis))
    statuses = {node: f"{st.plugin}: {st.message}" for node, st in diagnosis.node_to_status.statuses.items()}
    return out, statuses


CASES = [
    # id, cheap plugin's every, costly plugin's every, a plugin after it (every), start, num_to_find
    pytest.param(3, 2, 0, 0, 230, id="a-few-rejected-by-each"),
    pytest.param(0, 5, 7, 450, 100, id="rejections-after-the-costly-plugin-wrapping-around"),
    pytest.param(0, 1, 0, 0, 230, id="costly-rejects-every-node"),
    pytest.param(2, 0, 0, 17, 1, id="one-to-find"),
    pytest.param(0, 0, 0, 0, N, id="every-node-wanted"),
    pytest.param(4, 3, 0, 100, 150, id="fewer-feasible-than-wanted-in-the-first-window"),
]


@pytest.mark.parametrize(("cheap", "costly", "after", "start", "num_to_find"), CASES)
def test_a_costly_plugin_gets_fewer_nodes_and_the_results_do_not_change(
    cheap: int, costly: int, after: int, start: int, num_to_find: int
) -> None:
    outcomes = {}
    seen = {}
    for is_costly in (False, True):
        expensive = CostlyRejects("Costly", costly, costly=is_costly)
        last = Rejects("After", after, code=Code.UnschedulableAndUnresolvable)
        plugins: list[FilterPlugin] = [Rejects("Cheap", cheap), expensive, last]
        outcomes[is_costly] = _run(plugins, start, num_to_find)
        seen[is_costly] = expensive.seen
    (whole, whole_statuses), (chunked, chunked_statuses) = outcomes[False], outcomes[True]
    assert chunked.feasible.tolist() == whole.feasible.tolist()
    assert chunked.processed == whole.processed
    assert chunked.error is None and whole.error is None
    assert chunked_statuses == whole_statuses
    # It saw a prefix of what it saw with the whole window, in the same order...
    assert seen[True] == seen[False][: len(seen[True])]
    # ...no more than the nodes processed plus the last chunk's overshoot.
    assert len(seen[True]) <= whole.processed + MIN_COSTLY_CHUNK


def test_the_costly_plugin_sees_about_what_is_needed_not_twice_as_many() -> None:
    expensive = CostlyRejects("Costly", 0, costly=True)
    out, statuses = _run([Rejects("Cheap", 0), expensive], 0, 230)
    # 231 tried: one more than needed decides where the window is cut, as the whole window would.
    assert (len(expensive.seen), out.processed, out.feasible.tolist(), statuses) == (231, 230, list(range(230)), {})
    whole = CostlyRejects("Costly", 0)
    _run([Rejects("Cheap", 0), whole], 0, 230)
    assert len(whole.seen) == 460


def test_a_costly_plugin_error_past_the_cut_is_not_seen_but_one_before_it_fails_the_cycle() -> None:
    class Broken(CostlyRejects):
        async def filter(self, state: CycleState, pod: Any, batch: NodeBatch) -> FilterResult:
            idx = [int(n.name[1:]) for _, n in batch.nodes()]
            return FilterResult.from_statuses([
                Status(Code.Error, ("broken",), self.name) if i == self.every else Status() for i in idx])

    out, _ = _run([Broken("Costly", 300, costly=True)], 0, 100)
    assert (out.error, out.processed, out.feasible.tolist()) == (None, 100, list(range(100)))
    out, _ = _run([Broken("Costly", 50, costly=True)], 0, 100)
    assert out.error is not None and out.error.reasons == ('running "Costly" filter plugin: broken',)
