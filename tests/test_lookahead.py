"""Lookahead: remote plugins whose Filter and Score read only the pod and the nodes declare
``lookahead``, and the framework asks their hosts for the next queued pods' answers before their
cycles (framework.remote.lookahead).

Covered: which plugin classes may declare it; a burst of pods scheduled from answers asked ahead,
with the same placements and explain output as the same plugin answering in each cycle; answers
asked before a node change are never used; hosts that break the answer contract; a host killed
mid-run; and ``SchedulingQueue.peek``, which tells the framework which pods come next.

Plugin hosts are real gRPC servers on 127.0.0.1: separate processes (``test_lookahead:AheadTier``)
where hosts are killed or only their answers matter, in this process where the test changes what
the host answers or reads its counters.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from test_remote_faults import NO_LEAKS, config
from test_remote_harness import HostProcess, Hosts, RemoteRig, endpoint, remote_rig, until
from test_remote_replicas import only_tier_scores

import pluginhost.host as host_module
from framework.config import load_config
from framework.plugins.basic import PrioritySort
from framework.queue import SchedulingQueue
from framework.remote import RemotePlugin
from framework.remote.lookahead import Lookahead
from framework.scheduler import Scheduler
from pluginhost import pb
from pluginhost.definition import PluginDefinitionError, manifest_of
from pluginhost.host import PluginHost
from pluginhost.manifest import parse_objects
from pluginhost.model import Node, Pod
from pluginhost.plugin import (
    CycleState,
    FilterPlugin,
    FilterResult,
    FilterTransformer,
    NodeBatch,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Status
from pluginhost.view import NodeChange
from tools.bench.plugins import TIER_LABEL, BenchTier

# ---------------------------------------------------------------------------------------------------
# Plugins and clusters


class AheadTier(BenchTier):
    """BenchTier (Filter: the tier label; Score: gold 100, silver 50, bronze 0), answered ahead."""

    name = "BenchTier"
    lookahead = True


class PlainTier(BenchTier):
    """The same plugin answering Filter/Score in each pod's cycle."""

    name = "BenchTier"


def nodes(spec: dict[str, tuple[str | None, str]]) -> list[Pod | Node]:
    """Nodes by name: (tier label or None, CPUs)."""
    docs = []
    for name, (tier, cpu) in spec.items():
        labels = f"{{{TIER_LABEL}: {tier}}}" if tier else "{}"
        docs.append(
            f"apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {labels}}}\n"
            f"status: {{allocatable: {{cpu: '{cpu}', memory: 64Gi, pods: '110'}}}}\n"
        )
    return parse_objects("---\n".join(docs), "nodes.yaml")


def pods(names: list[str], cpu: str = "1") -> list[Pod]:
    docs = [
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {p}, uid: uid-{p}}}\n"
        f"spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}\n"
        for p in names
    ]
    out = parse_objects("---\n".join(docs), "pods.yaml")
    assert all(isinstance(p, Pod) for p in out)
    return [p for p in out if isinstance(p, Pod)]


def tier_text() -> str:
    # NodeResourcesFit (in-process) filters before the remote BenchTier; only BenchTier scores.
    return only_tier_scores(config(["BenchTier"], {}))


async def tier_rig(addresses: str | list[str], **deadlines: float) -> RemoteRig:
    text = tier_text()
    return await remote_rig([endpoint("tier", addresses, **deadlines)], lambda reg: load_config(text, reg.points()))


def adapter(rig: RemoteRig) -> RemotePlugin:
    [a] = [a for a in rig.remote.adapters() if a.name == "BenchTier"]
    return a


def ahead(rig: RemoteRig) -> Lookahead:
    la = adapter(rig).ahead
    assert la is not None
    return la


def counts(s: Scheduler) -> dict[str, int]:
    return dict(sorted(Counter(r.pod.node_name for r in s.pods.values() if r.phase == "Bound").items()))


def settled(s: Scheduler, uids: list[str]) -> bool:
    return all(s.pods[u].phase == "Bound" or s.pods[u].last_status is not None for u in uids)


def all_bound(s: Scheduler, names: Sequence[str]) -> bool:
    return all(s.pods[f"uid-{n}"].phase == "Bound" for n in names)


async def schedule_until_settled(s: Scheduler, names: Sequence[str], what: str = "the pods to settle") -> None:
    """Run the scheduler until the pods ``names`` are bound or reported, and their binding cycles done."""
    task = asyncio.create_task(s.run())
    try:
        uids = [f"uid-{n}" for n in names]
        await until(lambda: settled(s, uids) and not s.leaks()["binding_cycles"], 30, what)
    finally:
        await s.stop()
        await asyncio.wait_for(task, 10)


# ---------------------------------------------------------------------------------------------------
# Which plugin classes may declare lookahead


class _Filter(FilterPlugin):
    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        return FilterResult.passing(len(batch))


class _Score(ScorePlugin):
    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        return np.zeros(len(batch), dtype=np.int64)


class _PreFilter(PreFilterPlugin):
    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS


class _PreScore(PreScorePlugin):
    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        return SUCCESS


class _Reserve(ReservePlugin):
    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS


class _OnlyTransforms(FilterTransformer):
    async def before_filter(self, state: CycleState, pod: Pod,
                            snapshot: Snapshot) -> tuple[Sequence[NodeChange] | None, Status]:
        return None, SUCCESS


def _cls(name: str, *bases: type, **attrs: Any) -> type:
    return type(name, bases, {"name": name, "lookahead": True, **attrs})


NEEDS_CYCLE_STATE = ("lookahead answers are computed before the pod's cycle, so its Filter and Score cannot depend "
                     "on CycleState (state_keys, PreFilter or PreScore)")
MANIFEST_CASES: list[tuple[str, type, str | None]] = [
    ("filter and score", _cls("FS", _Filter, _Score), None),
    ("filter and score in one exchange", _cls("FSOne", _Filter, _Score, filter_and_score=True), None),
    ("filter only", _cls("F", _Filter), None),
    ("score only", _cls("S", _Score), None),
    ("filter with reserve", _cls("FR", _Filter, _Reserve), None),
    ("state keys", _cls("FK", _Filter, _Score, state_keys=("k",)), NEEDS_CYCLE_STATE),
    ("prefilter", _cls("PF", _PreFilter, _Filter), NEEDS_CYCLE_STATE),
    ("prescore", _cls("PS", _PreScore, _Score), NEEDS_CYCLE_STATE),
    ("neither filter nor score", _cls("R", _Reserve), "lookahead needs Filter or Score"),
    ("a filter transformer that only transforms", _cls("T", _OnlyTransforms), "lookahead needs Filter or Score"),
]


@pytest.mark.parametrize(("case", "cls", "problem"), MANIFEST_CASES, ids=[c[0] for c in MANIFEST_CASES])
def test_only_plugins_whose_filter_and_score_read_no_cycle_state_declare_lookahead(
    case: str, cls: type, problem: str | None
) -> None:
    if problem is None:
        assert manifest_of(cls).lookahead is True
        without = type(cls.__name__, (cls,), {"lookahead": False})
        assert manifest_of(without).lookahead is False
        return
    with pytest.raises(PluginDefinitionError) as err:
        manifest_of(cls)
    where = f"plugin class {cls.__module__}.{cls.__qualname__} ({cls.__name__!r})"
    assert str(err.value) == f"{where}: {problem}"


# ---------------------------------------------------------------------------------------------------
# End to end: a burst answered ahead, compared with the same plugin answering in each cycle

# Labeled nodes hold 11 one-CPU pods: gold fills first (2 + 2), then silver (3), then bronze (4). u0 has
# room for all of them but no tier label, so BenchTier keeps every pod off it.
BURST_NODES = {"g0": ("gold", "20"), "g1": ("gold", "20"), "s0": ("silver", "30"), "b0": ("bronze", "40"),
               "u0": (None, "200")}
BURST = [f"p{i:03d}" for i in range(111)]  # the last one finds no room


async def burst_run(address: str) -> dict[str, Any]:
    from framework.scheduler import explain_pod

    rig = await tier_rig(address, filter=30.0, score=30.0)
    s = rig.scheduler
    a = adapter(rig)
    try:
        # Everything is queued before the scheduler starts: the first cycle sees the whole burst.
        await s.apply([*nodes(BURST_NODES), *pods(BURST)])
        await schedule_until_settled(s, BURST, "the burst to settle")
        out: dict[str, Any] = {
            "counts": counts(s),
            "failed": {r.pod.name: r.last_status.message() for r in s.pods.values() if r.phase != "Bound"},
            "attempts": s.stats.attempts,
            "points": sorted(p for p, st in a.stats.items() if st.calls),
            "leaks": s.leaks(),
        }
        if a.ahead is not None:
            la = a.ahead
            out["ahead"] = {"hits": la.hits, "misses": la.misses, "asked": la.asked, "bad": la.bad_answers}
            out["filter_ahead"] = a.stats["Filter (lookahead)"].calls
        # Explain a pod that fits nowhere and one that fits everywhere; under lookahead, from answers
        # asked for by hand (what the scheduler does before a cycle).
        fwk = s.profiles["default-scheduler"]
        snapshot = s.cache.snapshot()
        explained = []
        for probe in (s.pods["uid-p110"].pod, *pods(["probe"], cpu="0")):
            if a.ahead is not None:
                a.ahead.ask(snapshot.table, [probe], True, True)
            explained.append(await explain_pod(fwk, snapshot, probe))
        out["explain"] = explained
        if a.ahead is not None:
            out["explain_hits"] = a.ahead.hits - out["ahead"]["hits"]
        return out
    finally:
        await rig.close()


def test_a_burst_answered_ahead_places_and_explains_like_answers_in_each_cycle() -> None:
    got = {}
    for target in ("test_lookahead:AheadTier", "test_lookahead:PlainTier"):
        with HostProcess(target) as host:
            got[target] = asyncio.run(burst_run(host.address))
    ahead, plain = got["test_lookahead:AheadTier"], got["test_lookahead:PlainTier"]
    want_counts = {"b0": 40, "g0": 20, "g1": 20, "s0": 30}
    fit_error = (f"0/5 nodes are available: 1 node(s) didn't have label {TIER_LABEL}, 4 Insufficient cpu.")
    for run in (ahead, plain):
        assert run["counts"] == want_counts
        assert run["failed"] == {"p110": fit_error}
        assert run["leaks"] == NO_LEAKS
    # Every cycle read its pod's answer: the whole burst was queued when the first cycle asked, and
    # later pods were asked again long before their turn (40 per message, more once fewer than 24
    # wait). A pod tried again is asked within its own cycle, whose Filter waits for the answer.
    cycles = ahead["attempts"]
    assert cycles >= len(BURST)
    assert ahead["ahead"] == {"hits": cycles, "misses": 0, "asked": cycles, "bad": 0}
    assert ahead["filter_ahead"] == cycles
    # No Filter/Score exchange at all under lookahead; the plain plugin has nothing else.
    assert ahead["points"] == ["Filter (lookahead)", "Lookahead", "Score (lookahead)"]
    assert plain["points"] == ["Filter", "Score"]
    # Explain reads the answers asked for it, and says what the plain plugin says.
    assert ahead["explain_hits"] == 2
    unschedulable, probe = ahead["explain"]
    assert unschedulable == plain["explain"][0]
    assert unschedulable["status"] == {"code": "Unschedulable", "reasons": [fit_error]}
    no_room = {"code": "Unschedulable", "plugin": "NodeResourcesFit", "reasons": ["Insufficient cpu"]}
    no_label = {"code": "UnschedulableAndUnresolvable", "plugin": "BenchTier",
                "reasons": [f"node(s) didn't have label {TIER_LABEL}"]}
    assert {n: e["filter"] for n, e in unschedulable["nodes"].items()} == {
        "g0": no_room, "g1": no_room, "s0": no_room, "b0": no_room, "u0": no_label}
    # The probe asks for nothing, so it fits every node; ties between the gold nodes are broken at
    # random, so "selected" is compared as a set.
    plain_probe = plain["explain"][1]
    assert {**probe, "selected": None} == {**plain_probe, "selected": None}
    assert {probe["selected"], plain_probe["selected"]} <= {"g0", "g1"}
    assert {n: e["total"] for n, e in probe["nodes"].items()} == {"g0": 100, "g1": 100, "s0": 50, "b0": 0, "u0": None}
    assert probe["nodes"]["u0"]["filter"] == no_label


# ---------------------------------------------------------------------------------------------------
# Answers asked before a node change


async def answers_ready(la: Lookahead) -> None:
    await until(lambda: not la.requests and all(e.future.done() for e in la.entries.values()), 20, "the answers")


@pytest.mark.parametrize("queued", [6, 40], ids=["few-queued", "more-than-refill-queued"])
def test_answers_asked_before_a_node_change_are_not_used(queued: int) -> None:
    from framework.scheduler import explain_pod

    names = [f"q{i:02d}" for i in range(queued)]

    async def main() -> dict[str, Any]:
        host = await PluginHost([AheadTier], listen="127.0.0.1:0").start()
        rig = await tier_rig(host.address, filter=30.0, score=30.0)
        s = rig.scheduler
        la = ahead(rig)
        out: dict[str, Any] = {}
        try:
            # g0 is gold when the answers are asked for; s0 (silver) holds every pod.
            await s.apply([*nodes({"g0": ("gold", "64"), "s0": ("silver", "64"), "u0": (None, "64")}),
                           *pods(names)])
            before = s.cache.snapshot()
            queued_pods = [s.pods[f"uid-{n}"].pod for n in names]
            la.ask(before.table, queued_pods, True, True)
            await answers_ready(la)
            first = la.entries["uid-q00"].future.result()
            assert first is not None and first.codes is not None and first.scores is not None
            out["answered"] = (first.codes.tolist(), first.scores.tolist(), host.lookahead_pods)
            # g0 loses its tier label: a new node table, on which every answer above is stale.
            await s.apply(nodes({"g0": (None, "64")}))
            after = s.cache.snapshot()
            assert after.table is not before.table
            explained = await explain_pod(s.profiles["default-scheduler"], after, queued_pods[0])
            out["explained"] = {n: (e["filter"]["plugin"], e["total"]) for n, e in explained["nodes"].items()}
            out["after_explain"] = (la.hits, la.misses)
            await schedule_until_settled(s, names)
            out.update(counts=counts(s), attempts=s.stats.attempts, hits=la.hits, misses=la.misses, asked=la.asked,
                       leaks=s.leaks())
            return out
        finally:
            await rig.close()
            await host.stop(0.5)

    got = asyncio.run(main())
    # Rows g0, s0, u0: what BenchTier answered for the old node table.
    assert got["answered"] == ([0, 0, 3], [100, 50, 0], queued)
    # Explain on the new table ignores the stale answer: g0 is rejected by BenchTier.
    assert got["explained"] == {"g0": ("BenchTier", None), "s0": (None, 50), "u0": ("BenchTier", None)}
    assert got["after_explain"] == (0, 1)
    assert got["counts"] == {"s0": queued}  # never g0
    assert got["leaks"] == NO_LEAKS
    # The first cycle after the change asks for every queued pod again, on the new table, and every
    # cycle reads its answer (the stale ones are replaced, not read).
    assert got["attempts"] == queued
    assert (got["hits"], got["misses"], got["asked"]) == (queued, 1, 2 * queued)


# ---------------------------------------------------------------------------------------------------
# Hosts whose answers break the contract


def _u4(raw: bytes) -> npt.NDArray[np.uint32]:
    return np.frombuffer(raw, dtype="<u4")


def _codes_short(reply: Any) -> None:
    for v in reply.verdicts:
        v.codes = v.codes[:-1]


def _unknown_code(reply: Any) -> None:
    for v in reply.verdicts:
        v.codes = bytes([9]) + v.codes[1:]


def _negative_code(reply: Any) -> None:
    for v in reply.verdicts:
        v.codes = np.int8(-1).tobytes() + v.codes[1:]


def _wrong_uid(reply: Any) -> None:
    for v in reply.verdicts:
        v.uid = "uid-someone-else"


def _foreign_node_ids(reply: Any) -> None:
    reply.node_ids = (_u4(reply.node_ids) + 1000).astype("<u4").tobytes()


def _repeated_node_id(reply: Any) -> None:
    ids = _u4(reply.node_ids).copy()
    ids[1] = ids[0]
    reply.node_ids = ids.tobytes()


def _verdict_missing(reply: Any) -> None:
    del reply.verdicts[-1]


def _scores_three_wide(reply: Any) -> None:
    for v in reply.verdicts:
        v.score_width = 3


def _scores_short(reply: Any) -> None:
    for v in reply.verdicts:
        v.scores = v.scores[: -(v.score_width or 8)]


def _reason_past_table(reply: Any) -> None:
    for v in reply.verdicts:
        n = len(v.codes)
        v.reason_index = np.full(n, 5, dtype="<u4").tobytes()


def _nodes_reversed(reply: Any) -> None:
    # A valid answer in another node order: the framework maps it back to its rows.
    reply.node_ids = _u4(reply.node_ids)[::-1].astype("<u4").tobytes()
    for v in reply.verdicts:
        v.codes = v.codes[::-1]
        width = v.score_width or 8
        v.scores = np.frombuffer(v.scores, dtype=f"<i{width}")[::-1].tobytes()
        if v.reason_index:
            v.reason_index = _u4(v.reason_index)[::-1].astype("<u4").tobytes()


def _pod_failed(reply: Any) -> None:
    # Allowed: the host says it could not answer for the pod; its cycle asks.
    for v in reply.verdicts:
        v.Clear()
        v.error.code = pb.types.CODE_ERROR


BAD_CASES: list[tuple[str, Callable[[Any], None], str]] = [
    ("one Filter code short", _codes_short, "per pod"),
    ("unknown Filter code", _unknown_code, "per pod"),
    ("negative Filter code", _negative_code, "per pod"),
    ("another pod's uid", _wrong_uid, "per pod"),
    ("node ids not the framework's", _foreign_node_ids, "per request"),
    ("a node id twice", _repeated_node_id, "per request"),
    ("a pod's verdict missing", _verdict_missing, "per request"),
    ("scores 3 bytes wide", _scores_three_wide, "per pod"),
    ("one score short", _scores_short, "per pod"),
    ("reason index past its table", _reason_past_table, "per pod"),
    ("pod failed on the host", _pod_failed, "none"),
    ("valid, nodes in reverse order", _nodes_reversed, "good"),
]

BAD_PODS = [f"b{i}" for i in range(6)]


@pytest.mark.parametrize(("case", "mangle", "kind"), BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_answers_breaking_the_contract_are_not_used_and_cycles_call_filter_and_score(
    case: str, mangle: Callable[[Any], None], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Mangling(host_module.Servicer):
        async def _lookahead(self, req: Any) -> Any:
            reply = await super()._lookahead(req)
            mangle(reply)
            return reply

    monkeypatch.setattr(host_module, "Servicer", Mangling)

    async def main() -> dict[str, Any]:
        host = await PluginHost([AheadTier], listen="127.0.0.1:0").start()
        rig = await tier_rig(host.address, filter=30.0, score=30.0)
        s = rig.scheduler
        la = ahead(rig)
        try:
            # Each tiered node holds two pods; u0 (no label) always has a rejection to explain.
            await s.apply([*nodes({"g0": ("gold", "2"), "s0": ("silver", "2"), "b0": ("bronze", "2"),
                                   "u0": (None, "16")}), *pods(BAD_PODS)])
            await schedule_until_settled(s, BAD_PODS)
            stats = adapter(rig).stats
            return {"counts": counts(s), "attempts": s.stats.attempts, "hits": la.hits, "misses": la.misses,
                    "bad": la.bad_answers, "filter_calls": stats["Filter"].calls if "Filter" in stats else 0,
                    "left": (len(la.entries), len(la.requests)), "answered": host.lookahead_pods,
                    "errors": [ev for ev in s.recent_events() if ev.type == "Error"], "leaks": s.leaks()}
        finally:
            await rig.close()
            await host.stop(0.5)

    got = asyncio.run(main())
    n = len(BAD_PODS)
    assert got["counts"] == {"b0": 2, "g0": 2, "s0": 2}
    assert got["attempts"] == n
    assert got["errors"] == []
    assert got["leaks"] == NO_LEAKS
    assert got["left"] == (0, 0)
    # The whole queue went out in the first cycle's one request.
    assert got["answered"] == n
    if kind == "good":
        assert (got["hits"], got["misses"], got["bad"], got["filter_calls"]) == (n, 0, 0, 0)
        return
    bad = {"per pod": n, "per request": 1, "none": 0}[kind]
    # Every cycle found no answer to use and asked over its Filter stream.
    assert (got["hits"], got["misses"], got["bad"], got["filter_calls"]) == (0, n, bad, n)


# ---------------------------------------------------------------------------------------------------
# A host killed mid-run


KILL_NODES = {"g0": ("gold", "10"), "g1": ("gold", "10"), "s0": ("silver", "20"), "b0": ("bronze", "40"),
              "u0": (None, "200")}


def test_a_replica_killed_mid_burst_loses_no_pod_and_lookahead_goes_on_with_the_other() -> None:
    phases = [[f"{p}{i:02d}" for i in range(n)] for p, n in (("a", 40), ("b", 30))]
    hosts = [HostProcess("test_lookahead:AheadTier") for _ in range(2)]

    async def main(addresses: list[str]) -> dict[str, Any]:
        rig = await tier_rig(addresses, filter=30.0, score=30.0)
        s = rig.scheduler
        la = ahead(rig)
        killed = next(r for r in rig.remote.endpoints[0].replicas if r.address == addresses[0])
        out: dict[str, Any] = {}

        task = asyncio.create_task(s.run())
        try:
            await s.apply([*nodes(KILL_NODES), *pods(phases[0])])
            await until(lambda: sum(s.pods[f"uid-{n}"].phase == "Bound" for n in phases[0]) >= 5, 30, "a few to bind")
            hosts[0].kill()  # SIGKILL mid-burst: its Filter/Score and Lookahead streams break
            await until(lambda: all_bound(s, phases[0]), 60, "the first burst to bind on the other replica")
            await until(lambda: not killed.serving, 30, "the framework to see the kill")
            out["hits_before"] = la.hits
            await s.apply(pods(phases[1]))
            await until(lambda: all_bound(s, phases[0] + phases[1]), 60, "the second burst to bind")
            await s.drain(10)
        finally:
            await s.stop()
            await asyncio.wait_for(task, 10)
            await rig.close()
        out.update(counts=counts(s), bound=sorted(r.pod.name for r in s.pods.values() if r.phase == "Bound"),
                   attempts=s.stats.attempts, hits=la.hits, misses=la.misses, leaks=s.leaks())
        return out

    with Hosts(*hosts) as addresses:
        got = asyncio.run(main(addresses))
    assert got["bound"] == sorted(n for phase in phases for n in phase)
    assert got["counts"] == {"b0": 30, "g0": 10, "g1": 10, "s0": 20}
    assert got["leaks"] == NO_LEAKS
    assert got["hits"] + got["misses"] == got["attempts"]
    # The second burst is asked of the live replica alone, all of it in its first cycle.
    assert got["hits"] - got["hits_before"] == len(phases[1])


def test_lookahead_resumes_on_a_host_restarted_on_its_port() -> None:
    phases = [[f"{p}{i:02d}" for i in range(n)] for p, n in (("a", 30), ("c", 30))]
    host = HostProcess("test_lookahead:AheadTier")

    async def main() -> dict[str, Any]:
        rig = await tier_rig(host.address, filter=30.0, score=30.0)
        s = rig.scheduler
        la = ahead(rig)
        [replica] = rig.remote.endpoints[0].replicas
        out: dict[str, Any] = {}

        task = asyncio.create_task(s.run())
        try:
            await s.apply([*nodes(KILL_NODES), *pods(phases[0])])
            await until(lambda: all_bound(s, phases[0]), 60, "the first burst to bind")
            out["first"] = (la.hits, la.misses)
            # Killed between bursts and back on the same port: it lost its configuration and mirror.
            host.kill()
            await until(lambda: not replica.serving, 30, "the framework to see the kill")
            await asyncio.to_thread(host.start)
            await until(lambda: replica.serving, 30, "the framework to see the host back")
            await s.apply(pods(phases[1]))
            await until(lambda: all_bound(s, phases[0] + phases[1]), 60, "the second burst to bind")
            await s.drain(10)
        finally:
            await s.stop()
            await asyncio.wait_for(task, 10)
            await rig.close()
        out.update(counts=counts(s), attempts=s.stats.attempts, hits=la.hits, misses=la.misses, leaks=s.leaks())
        return out

    host.start()
    host.listen = host.address  # the restart comes back on the same address
    try:
        got = asyncio.run(main())
    finally:
        host.stop()
    assert got["first"] == (30, 0)
    assert got["counts"] == {"b0": 20, "g0": 10, "g1": 10, "s0": 20}
    assert got["leaks"] == NO_LEAKS
    assert got["attempts"] >= 60  # a cycle may fail on the restarted host and be tried again
    assert got["hits"] + got["misses"] == got["attempts"]
    # The restarted host must be handshaken and configured again before it can answer: at most the
    # first cycle of the second burst does that over Filter/Score; every later pod is answered ahead.
    assert got["hits"] - 30 >= len(phases[1]) - 1


# ---------------------------------------------------------------------------------------------------
# SchedulingQueue.peek: the pods the next pop() calls return


def _queue() -> SchedulingQueue:
    sort = PrioritySort()
    ticks = iter(range(1, 1_000_000))
    return SchedulingQueue(sort.less, sort.sort_key, clock=lambda: float(next(ticks)))


def _qpod(name: str, priority: int) -> Pod:
    return Pod(name, uid=f"uid-{name}", priority=priority)


# Steps: ("add", name, priority), ("update", name, priority) of a queued pod, ("delete", name).
PEEK_CASES: list[tuple[str, list[tuple[Any, ...]], int, list[str]]] = [
    ("empty queue", [], 3, []),
    ("k is zero", [("add", "a", 0)], 0, []),
    ("priorities first", [("add", "low", 0), ("add", "high", 10), ("add", "mid", 5)], 3, ["high", "mid", "low"]),
    ("equal priorities in arrival order", [("add", n, 1) for n in "dcba"], 4, ["d", "c", "b", "a"]),
    ("k larger than the queue", [("add", "x", 0), ("add", "y", 2)], 64, ["y", "x"]),
    ("only the first k", [("add", f"p{i}", i % 3) for i in range(9)], 4, ["p2", "p5", "p8", "p1"]),
    ("an updated pod keeps its queue time",
     [("add", "a", 1), ("add", "b", 1), ("add", "c", 1), ("update", "a", 1)], 3, ["a", "b", "c"]),
    ("an updated priority moves it", [("add", "a", 1), ("add", "b", 1), ("update", "b", 9)], 2, ["b", "a"]),
    ("deleted pods are skipped",
     [("add", "a", 5), ("add", "b", 4), ("add", "c", 3), ("add", "d", 2), ("delete", "a"), ("delete", "c")],
     4, ["b", "d"]),
    ("many stale entries above the live ones",
     [*(("add", f"s{i}", 9) for i in range(20)), ("add", "live1", 1), ("add", "live2", 0),
      *(("delete", f"s{i}") for i in range(20))], 2, ["live1", "live2"]),
]


@pytest.mark.parametrize(("case", "steps", "k", "want"), PEEK_CASES, ids=[c[0] for c in PEEK_CASES])
def test_peek_returns_what_the_next_pops_return(case: str, steps: list[tuple[Any, ...]], k: int,
                                               want: list[str]) -> None:
    async def main() -> tuple[list[str], list[str], list[int], int]:
        q = _queue()
        for step in steps:
            if step[0] == "add":
                await q.add(_qpod(step[1], step[2]))
            elif step[0] == "update":
                await q.update(_qpod(step[1], step[2]))
            else:
                assert q.delete(f"uid-{step[1]}")
        peeked = q.peek(k)
        again = [i.pod.name for i in q.peek(k)]
        attempts = [i.attempts for i in peeked]  # peek takes nothing: no attempt counted
        active = q.stats().active
        popped: list[str] = []
        for _ in range(min(k, active)):
            info = await asyncio.wait_for(q.pop(), 5)
            assert info is not None
            popped.append(info.pod.name)
        assert again == [i.pod.name for i in peeked]
        return [i.pod.name for i in peeked], popped, attempts, active

    peeked, popped, attempts, active = asyncio.run(main())
    assert peeked == want
    assert popped == want
    assert attempts == [0] * len(want)
    assert active == len({s[1] for s in steps if s[0] == "add"} - {s[1] for s in steps if s[0] == "delete"})


# ---------------------------------------------------------------------------------------------------
# Hosts whose plugins read node objects only


class NodesOnlyTier(BenchTier):
    """The tier plugin answering in each cycle, declaring that it reads node objects only."""

    name = "BenchTier"
    nodes_only = True


@pytest.mark.parametrize(
    ("cls", "lookahead", "nodes_only"),
    [(PlainTier, False, False), (NodesOnlyTier, False, True), (AheadTier, True, True)],
    ids=["plain", "nodes only", "lookahead implies nodes only"],
)
def test_nodes_only_manifest(cls: type, lookahead: bool, nodes_only: bool) -> None:
    manifest = manifest_of(cls)
    assert (manifest.lookahead, manifest.nodes_only) == (lookahead, nodes_only)


def test_a_nodes_only_host_follows_nodes_and_answers_without_waiting_for_placements() -> None:
    names = [f"n{i:02d}" for i in range(12)]

    async def main() -> dict[str, Any]:
        host = await PluginHost([NodesOnlyTier], listen="127.0.0.1:0").start()
        rig = await tier_rig(host.address, filter=30.0, score=30.0)
        s = rig.scheduler
        try:
            assert host.nodes_only and rig.remote.endpoints[0].nodes_only
            await s.apply([*nodes({"g0": ("gold", "4"), "s0": ("silver", "4"), "b0": ("bronze", "16"),
                                   "u0": (None, "16")}), *pods(names)])
            await schedule_until_settled(s, names)
            assert rig.remote.publisher is not None
            rig.remote.publisher.publish_all()
            await until(lambda: host.mirror.generation == s.cache.snapshot().generation, 10, "the mirror to catch up")
            latest = host.mirror.latest()
            stats = adapter(rig).stats
            return {
                "counts": counts(s),
                # The host's mirror has the nodes (and their generation) but none of the pods placed.
                "mirror": (sorted(latest.names), sum(len(p) for p in latest.pods)),
                "framework pods placed": sum(len(p) for p in s.cache.snapshot().pods),
                "filter calls": stats["Filter"].calls,
                "errors": [ev for ev in s.recent_events() if ev.type == "Error"],
                "leaks": s.leaks(),
            }
        finally:
            await rig.close()
            await host.stop(0.5)

    got = asyncio.run(main())
    assert got["counts"] == {"b0": 4, "g0": 4, "s0": 4}
    assert got["mirror"] == (["b0", "g0", "s0", "u0"], 0)
    assert got["framework pods placed"] == 12
    assert got["filter calls"] == 12
    assert got["errors"] == []
    assert got["leaks"] == NO_LEAKS


def test_mirror_with_nodes_of_a_generation() -> None:
    from framework.remote.publisher import SnapshotPublisher
    from pluginhost.mirror import MirrorError, SnapshotMirror
    from pluginhost.snapshot import ClusterTable

    async def main() -> list[Any]:
        table = ClusterTable()
        for n in nodes({"a": ("gold", "4")}):
            assert isinstance(n, Node)
            table.upsert_node(n)
        publisher = SnapshotPublisher(table, flush_delay=3600)
        follower = publisher.follow(0, "t", nodes_only=True)
        mirror = SnapshotMirror(retain=1)
        mirror.apply(await anext(follower))
        node_gen = table.generation
        for p in pods(["x", "y"]):
            table.place_pod(p, "a")
        publisher.publish_all()
        mirror.apply(await anext(follower))
        out: list[Any] = []
        # Generation node_gen + 1 was never sent on its own (one delta brought both pods): the latest
        # snapshot has the same nodes, so it serves a cycle of that generation.
        snap = await mirror.with_nodes_of(node_gen, node_gen + 1, 1.0)
        out.append((mirror.generation, list(snap.names), mirror.node_generation, snap is mirror.latest()))
        for n in nodes({"b": ("silver", "4")}):
            assert isinstance(n, Node)
            table.upsert_node(n)
        publisher.publish_all()
        mirror.apply(await anext(follower))
        try:
            await mirror.with_nodes_of(node_gen, node_gen + 1, 1.0)
        except MirrorError as exc:
            out.append(str(exc))
        now = await mirror.with_nodes_of(table.generation, table.generation, 1.0)
        out.append((now.names, mirror.node_generation))
        await follower.aclose()
        return out

    got = asyncio.run(main())
    assert got == [
        (3, ["a"], 1, True),
        "the nodes changed since snapshot generation 2 (the mirror is at generation 4, its last node change at 4)",
        (("a", "b"), 4),
    ]


def test_a_host_that_stops_answering_lookahead_is_worked_around_and_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first Lookahead requests hang (a stalled stream): their pods' cycles wait at most the Filter
    deadline and call Filter; once the oldest request is older than the deadline the stream is dropped
    and asking starts over on a new one, which answers."""
    stalled: list[int] = []
    release = asyncio.Event()

    class Stalling(host_module.Servicer):
        async def _lookahead(self, req: Any) -> Any:
            if req.seq < 2:  # the first stream's requests
                stalled.append(req.seq)
                await release.wait()  # until the test ends
            return await super()._lookahead(req)

    monkeypatch.setattr(host_module, "Servicer", Stalling)
    first, second = [f"s{i:02d}" for i in range(4)], [f"t{i:02d}" for i in range(20)]

    async def main() -> dict[str, Any]:
        host = await PluginHost([AheadTier], listen="127.0.0.1:0").start()
        rig = await tier_rig(host.address, filter=0.5, score=30.0)
        s = rig.scheduler
        la = ahead(rig)
        try:
            await s.apply([*nodes({"g0": ("gold", "64"), "u0": (None, "64")}), *pods(first)])
            task = asyncio.create_task(s.run())
            try:
                await until(lambda: settled(s, [f"uid-{n}" for n in first]), 30, "the first pods to settle")
                stalled_phase = {"hits": la.hits, "filter_calls": adapter(rig).stats["Filter"].calls}
                await asyncio.sleep(0.6)  # the stalled requests are now older than the Filter deadline
                await s.apply(pods(second))
                await until(lambda: settled(s, [f"uid-{n}" for n in second]) and not s.leaks()["binding_cycles"],
                            30, "the second pods to settle")
            finally:
                await s.stop()
                await asyncio.wait_for(task, 10)
            return {"stalled": stalled_phase, "counts": counts(s), "stalled_requests": len(stalled),
                    "hits_after": la.hits - stalled_phase["hits"], "leaks": s.leaks()}
        finally:
            release.set()
            await rig.close()
            await host.stop(0.5)

    got = asyncio.run(main())
    assert got["counts"] == {"g0": 24}
    assert got["stalled_requests"] == 1  # the second request waited behind the first, unread
    # While stalled: no answer used, every first pod filtered over its own stream.
    assert got["stalled"] == {"hits": 0, "filter_calls": 4}
    # After: a new stream answers; all but the first cycle of the burst (asked in its own cycle and
    # possibly not answered in time) use an answer.
    assert got["hits_after"] >= len(second) - 1
    assert got["leaks"] == NO_LEAKS
