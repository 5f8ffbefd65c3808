"""Integration tests for framework.runtime and framework.scheduler: the extension points' rules.

Fake plugins (one class implementing every extension point, enabled only where a test registers it)
are injected into a real :class:`Scheduler` through a :class:`Registry` and a
KubeSchedulerConfiguration, pods and nodes come from manifests, and every fake records its calls in
one shared list so the order in which the framework runs them can be asserted exactly.

kube-scheduler is the reference: ``pkg/scheduler/framework/runtime/framework.go`` (how each point
runs its plugins) and ``pkg/scheduler/schedule_one.go`` (the scheduling and binding cycles, what is
undone on failure, where a failed pod goes).

Backoff: ``podInitialBackoffSeconds`` is an integer in the v1 API (the loader rejects 0.01), so the
tests use 1 s and never wait for a retry: a scenario ends as soon as every pod is bound or parked.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from framework.config import load_config
from framework.outcomes import failed_status, num_feasible_nodes_to_find, quoted, raised_status
from framework.plugins import in_tree_registry
from framework.scheduler import Scheduler
from framework.waiting import MAX_PERMIT_TIMEOUT
from pluginhost.manifest import node_from_dict, parse_objects, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import (
    ActionType,
    BindPlugin,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    NodeToStatus,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from pluginhost.status import SUCCESS, Code, Status

PROFILE = "default-scheduler"
PARKED = frozenset({"unschedulable", "backoff", "gated"})
NO_LEAKS = {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0}
SETTLE_SECONDS = 2.0
NO_VICTIMS = "fake preemption found no victims"

Call = tuple[Any, ...]

# ---------------------------------------------------------------------------------------------------
# The fake plugin


BIND = object()  # a Bind answer: bind through the handle (what DefaultBinder does)


def _answer(value: Any, *args: Any) -> Any:
    return value(*args) if callable(value) else value


class Fake(
    PreEnqueuePlugin,
    PreFilterPlugin,
    FilterPlugin,
    PostFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PermitPlugin,
    PreBindPlugin,
    BindPlugin,
    PostBindPlugin,
):
    """Every extension point; each answer is a constant or ``fn(pod[, node])`` from ``behaviour``.

    Defaults: Success everywhere, score 0, PostFilter Unschedulable (no preemption victims), Bind
    binds through the handle. Every call is appended to ``calls`` as ``(point, plugin, pod, ...)``.
    """

    def __init__(self, name: str, calls: list[Call], handle: Handle | None, behaviour: dict[str, Any]) -> None:
        self.name = name
        self.calls = calls
        self.handle = handle
        self.b = behaviour
        self.post_filter_seen: dict[str, dict[str, Status]] = {}

    def _get(self, point: str, default: Any, *args: Any) -> Any:
        return _answer(self.b.get(point, default), *args)

    async def pre_enqueue(self, pod: Pod) -> Status:
        self.calls.append(("preEnqueue", self.name, pod.name))
        return self._get("preEnqueue", SUCCESS, pod)

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        self.calls.append(("preFilter", self.name, pod.name))
        ans = self._get("preFilter", SUCCESS, pod)
        return ans if isinstance(ans, tuple) else (None, ans)

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        statuses = []
        for node in batch.names:
            self.calls.append(("filter", self.name, pod.name, node))
            statuses.append(self._get("filter", SUCCESS, pod, node))
        return FilterResult.from_statuses(statuses)

    async def post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        self.calls.append(("postFilter", self.name, pod.name))
        assert state.snapshot is not None
        self.post_filter_seen[pod.name] = {n: statuses.get(n) for n in state.snapshot.table.names}
        ans = self._get("postFilter", Status(Code.Unschedulable, (NO_VICTIMS,)), pod)
        return ans if isinstance(ans, tuple) else (None, ans)

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        self.calls.append(("preScore", self.name, pod.name, tuple(nodes.names)))
        return self._get("preScore", SUCCESS, pod)

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        self.calls.append(("score", self.name, pod.name, tuple(batch.names)))
        if "scores" in self.b:  # the whole answer at once (e.g. of the wrong length)
            return np.asarray(_answer(self.b["scores"], pod), dtype=np.int64)
        return np.asarray([self._get("score", 0, pod, n) for n in batch.names], dtype=np.int64)

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.calls.append(("reserve", self.name, pod.name, node_name))
        return self._get("reserve", SUCCESS, pod, node_name)

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.calls.append(("unreserve", self.name, pod.name, node_name))

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        self.calls.append(("permit", self.name, pod.name, node_name))
        ans = self._get("permit", SUCCESS, pod, node_name)
        return ans if isinstance(ans, tuple) else (ans, 0.0)

    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.calls.append(("preBindPreFlight", self.name, pod.name, node_name))
        return self._get("preBindPreFlight", SUCCESS, pod, node_name)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.calls.append(("preBind", self.name, pod.name, node_name))
        return self._get("preBind", SUCCESS, pod, node_name)

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self.calls.append(("bind", self.name, pod.name, node_name))
        ans = self._get("bind", BIND, pod, node_name)
        if ans is BIND:
            assert self.handle is not None
            return await self.handle.bind_pod(pod, node_name)
        return ans

    async def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.calls.append(("postBind", self.name, pod.name, node_name))


class NormalizingFake(Fake, ScoreExtensions):
    """A Fake whose Score has NormalizeScore: ``normalize(scores)`` rewrites the array in place and
    returns a Status or None (Success)."""

    async def normalize_score(
        self, state: CycleState, pod: Pod, batch: NodeBatch, scores: npt.NDArray[np.int64]
    ) -> Status:
        self.calls.append(("normalizeScore", self.name, pod.name, tuple(int(x) for x in scores)))
        fn = self.b.get("normalize")
        out = None if fn is None else fn(scores)
        return SUCCESS if out is None else out


class EventedFake(Fake, EnqueueExtensions):
    """A Fake that registers ``behaviour["events"]`` (a list of ClusterEvent) for requeueing."""

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(ev) for ev in self.b["events"]]


@dataclass
class Spec:
    name: str
    points: frozenset[str]
    weight: int = 0
    behaviour: dict[str, Any] = field(default_factory=dict)


def fake(name: str, *points: str, weight: int = 0, **behaviour: Any) -> Spec:
    """A fake plugin enabled (through multiPoint) at ``points``; ``behaviour`` keys are point names."""
    return Spec(name, frozenset(points), weight, behaviour)


def set_scores(*values: int) -> Callable[[npt.NDArray[np.int64]], None]:
    def normalize(scores: npt.NDArray[np.int64]) -> None:
        scores[:] = values

    return normalize


def reject_nodes(code: Code, reason: str, *nodes: str) -> Callable[[Pod, str], Status]:
    return lambda pod, node: Status(code, (reason,)) if node in nodes else SUCCESS


def by_node(**scores: int) -> Callable[[Pod, str], int]:
    return lambda pod, node: scores.get(node, 0)


def raises(message: str) -> Callable[..., Any]:
    def boom(*args: Any) -> Any:
        raise RuntimeError(message)

    return boom


# ---------------------------------------------------------------------------------------------------
# Cluster objects


def node(name: str, cpu: str = "4", memory: str = "8Gi") -> Node:
    return node_from_dict(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
        }
    )


def pod(name: str, cpu: str = "100m", priority: int = 0) -> Pod:
    return pod_from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": {
                "priority": priority,
                "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}],
            },
        }
    )


def manifest(nodes: Iterable[str], pods: Iterable[str]) -> list[Pod | Node]:
    """Nodes then pods, through the YAML manifest parser (pods queue in the order given)."""
    docs = [
        f"apiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\n"
        f"status: {{allocatable: {{cpu: '4', memory: 8Gi, pods: '110'}}}}\n"
        for n in nodes
    ]
    docs += [
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {p}, uid: uid-{p}}}\n"
        f"spec:\n  containers:\n  - name: c\n    image: busybox\n    resources: {{requests: {{cpu: 100m}}}}\n"
        for p in pods
    ]
    return parse_objects("---\n".join(docs), "test.yaml")


# ---------------------------------------------------------------------------------------------------
# The scheduler under test


def config_yaml(entries: list[tuple[str, int]], percentage: int | None) -> str:
    lines = [
        "apiVersion: kubescheduler.config.k8s.io/v1",
        "kind: KubeSchedulerConfiguration",
        "podInitialBackoffSeconds: 1",
        "podMaxBackoffSeconds: 10",
    ]
    if percentage is not None:
        lines.append(f"percentageOfNodesToScore: {percentage}")
    lines += [
        "profiles:",
        f"- schedulerName: {PROFILE}",
        "  plugins:",
        "    multiPoint:",
        "      enabled:",
    ]
    for name, weight in entries:
        lines.append(f"      - {{name: {name}, weight: {weight}}}" if weight else f"      - {{name: {name}}}")
    lines += ["      disabled:", '      - {name: "*"}']
    return "\n".join(lines) + "\n"


def make_scheduler(
    specs: list[Spec],
    *,
    fit: bool = True,
    binder: bool = True,
    seed: int | None = 0,
    percentage: int | None = None,
) -> tuple[Scheduler, list[Call]]:
    """PrioritySort, [NodeResourcesFit], the fakes in order, [DefaultBinder], all through multiPoint."""
    calls: list[Call] = []
    reg = in_tree_registry()
    for spec in specs:
        cls = NormalizingFake if "normalize" in spec.behaviour else EventedFake if "events" in spec.behaviour else Fake

        def factory(args: dict[str, Any], handle: Handle | None, spec: Spec = spec, cls: type[Fake] = cls) -> Fake:
            return cls(spec.name, calls, handle, spec.behaviour)

        reg.register(spec.name, factory, spec.points)
    entries = [("PrioritySort", 0)]
    if fit:
        entries.append(("NodeResourcesFit", 0))
    entries += [(spec.name, spec.weight) for spec in specs]
    if binder:
        entries.append(("DefaultBinder", 0))
    cfg = load_config(config_yaml(entries, percentage), reg.points(), "test-config.yaml")
    return Scheduler(cfg, reg, seed=seed), calls


def plugin(s: Scheduler, name: str) -> Fake:
    p = s.profiles[PROFILE].plugins[name]
    assert isinstance(p, Fake)
    return p


def settled(s: Scheduler) -> bool:
    """Every pod bound, or parked in a queue with a reason; nothing in flight."""
    if s.leaks()["binding_cycles"] or s.pending_count()["in-flight"]:
        return False
    return all(
        rec.phase == "Bound" or (s.queue_of(uid) in PARKED and rec.last_status is not None)
        for uid, rec in s.pods.items()
    )


def describe(s: Scheduler) -> str:
    return "; ".join(
        f"{rec.pod.name}: phase={rec.phase} queue={s.queue_of(uid)!r} status={rec.last_status}"
        for uid, rec in s.pods.items()
    )


async def wait_for(s: Scheduler, cond: Callable[[], bool], timeout: float = SETTLE_SECONDS) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"not reached within {timeout}s: {describe(s)} leaks={s.leaks()}")
        await asyncio.sleep(0.002)


async def drive(
    s: Scheduler,
    objects: list[Pod | Node],
    during: Callable[[Scheduler], Awaitable[None]] | None = None,
) -> None:
    """Apply the objects, run the scheduler until every pod settled, then drain and stop it."""
    await s.apply(objects)
    task = asyncio.create_task(s.run())
    try:
        if during is not None:
            await during(s)
        await wait_for(s, lambda: settled(s))
    finally:
        await s.drain(timeout=SETTLE_SECONDS)
        await s.stop()
        await asyncio.wait_for(task, SETTLE_SECONDS)


def scenario(
    specs: list[Spec],
    objects: Callable[[], list[Pod | Node]],
    during: Callable[[Scheduler], Awaitable[None]] | None = None,
    **kw: Any,
) -> tuple[Scheduler, list[Call]]:
    async def main() -> tuple[Scheduler, list[Call]]:
        s, calls = make_scheduler(specs, **kw)
        await drive(s, objects(), during)
        return s, calls

    s, calls = asyncio.run(main())
    assert_invariants(s)
    return s, calls


def assert_invariants(s: Scheduler) -> None:
    """Nothing left behind, and no pod lost: each is bound, or queued with the reason why not."""
    assert s.leaks() == NO_LEAKS
    assert len(s.waiting_pods) == 0
    assert s.cache.assumed() == []
    parked = 0
    for uid, rec in s.pods.items():
        if rec.phase == "Bound":
            assert rec.pod.node_name in s.nodes, describe(s)
            assert s.queue_of(uid) == ""
            assert s.cache.node_of(uid) == rec.pod.node_name
        else:
            parked += 1
            assert rec.pod.node_name == ""
            assert s.queue_of(uid) in PARKED, describe(s)
            assert s.cache.node_of(uid) is None
            assert rec.last_status is not None and not rec.last_status.ok
            assert rec.last_status.reasons and all(rec.last_status.reasons), rec.last_status
    assert sum(s.pending_count().values()) == parked


def points(calls: list[Call], *wanted: str) -> list[Call]:
    return [c for c in calls if c[0] in wanted]


def filtered(calls: list[Call], plugin_name: str) -> list[str]:
    """The nodes ``plugin_name``'s Filter was asked about, in order."""
    return [c[3] for c in calls if c[0] == "filter" and c[1] == plugin_name]


def rec(s: Scheduler, name: str) -> Any:
    r = s.get_pod("default", name)
    assert r is not None
    return r


def status_of(s: Scheduler, name: str) -> Status:
    st = rec(s, name).last_status
    assert st is not None
    return st


def events_of(s: Scheduler, name: str) -> list[str]:
    return [ev.type for ev in s.recent_events() if ev.kind == "Pod" and ev.name == name]


def three_nodes_one_pod() -> list[Pod | Node]:
    return manifest(["n1", "n2", "n3"], ["p1"])


def two_nodes_one_pod() -> list[Pod | Node]:
    return manifest(["n1", "n2"], ["p1"])


def one_node_one_pod() -> list[Pod | Node]:
    return manifest(["n1"], ["p1"])


# ---------------------------------------------------------------------------------------------------
# The whole cycle


def test_successful_pod_meets_every_extension_point_once_in_order() -> None:
    everything = (
        "preEnqueue", "preFilter", "filter", "postFilter", "preScore", "score",
        "reserve", "permit", "preBind", "bind", "postBind",
    )  # fmt: skip
    spec = fake("A", *everything, score=by_node(n1=5, n2=10), normalize=lambda scores: None)
    s, calls = scenario([spec], two_nodes_one_pod, fit=False, binder=False)

    assert calls == [
        ("preEnqueue", "A", "p1"),
        ("preFilter", "A", "p1"),
        ("filter", "A", "p1", "n1"),
        ("filter", "A", "p1", "n2"),
        ("preScore", "A", "p1", ("n1", "n2")),
        ("score", "A", "p1", ("n1", "n2")),
        ("normalizeScore", "A", "p1", (5, 10)),
        ("reserve", "A", "p1", "n2"),
        ("permit", "A", "p1", "n2"),
        ("preBindPreFlight", "A", "p1", "n2"),
        ("preBind", "A", "p1", "n2"),
        ("bind", "A", "p1", "n2"),
        ("postBind", "A", "p1", "n2"),
    ]
    r = rec(s, "p1")
    assert (r.phase, r.pod.node_name, r.attempts, r.last_status) == ("Bound", "n2", 1, None)
    assert events_of(s, "p1") == ["Applied", "Bound"]
    assert s.stats.bound == 1 and s.stats.scheduled == 1 and s.stats.attempts == 1


# ---------------------------------------------------------------------------------------------------
# PreEnqueue


@pytest.mark.parametrize(
    ("answer", "code", "message"),
    [
        pytest.param(Status.unschedulable("gate closed"), Code.Unschedulable, "gate closed", id="unschedulable"),
        pytest.param(
            Status.unresolvable("gate closed"), Code.UnschedulableAndUnresolvable, "gate closed", id="unresolvable"
        ),
        pytest.param(Status.failure("boom"), Code.Error, 'running PreEnqueue plugin "G": boom', id="error"),
        pytest.param(raises("kaboom"), Code.Error, 'running PreEnqueue plugin "G": kaboom', id="raises"),
    ],
)
def test_pre_enqueue_rejection_gates_pod_without_attempting_it(answer: Any, code: Code, message: str) -> None:
    def behaviour(p: Pod) -> Status:
        return _answer(answer, p) if p.name == "p1" else SUCCESS

    s, calls = scenario(
        [fake("G", "preEnqueue", preEnqueue=behaviour), fake("F", "filter")],
        lambda: manifest(["n1"], ["p1", "p2"]),
    )

    r = rec(s, "p1")
    assert (r.phase, r.attempts, r.pod.node_name) == ("Pending", 0, "")
    assert s.queue_of("uid-p1") == "gated"
    assert r.last_status == Status(code, (message,), "G")
    assert [c for c in calls if c[2] == "p1"] == [("preEnqueue", "G", "p1")]  # never reached PreFilter
    assert events_of(s, "p1") == ["Applied"]
    # The other pod is not held up.
    assert rec(s, "p2").phase == "Bound"
    assert s.pending_count() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 1, "in-flight": 0}


def test_pre_enqueue_success_lets_pod_through() -> None:
    s, calls = scenario([fake("G", "preEnqueue"), fake("F", "filter")], one_node_one_pod)
    assert rec(s, "p1").phase == "Bound"
    assert calls == [("preEnqueue", "G", "p1"), ("filter", "F", "p1", "n1")]


# ---------------------------------------------------------------------------------------------------
# PreFilter


@dataclass
class PreFilterCase:
    answer: Any
    pf2_called: bool
    filters_run: tuple[str, ...]  # fakes whose Filter ran (on every node)
    code: Code | None  # None: the pod is bound
    message: str = ""
    queue: str = ""
    post_filter: bool = False


PRE_FILTER_CASES = [
    pytest.param(PreFilterCase(SUCCESS, True, ("PF1", "PF2"), None), id="success"),
    pytest.param(PreFilterCase(Status.skip(), True, ("PF2",), None), id="skip-skips-own-filter"),
    pytest.param(
        PreFilterCase(
            Status.unschedulable("pf1 says no"),
            True,  # Unschedulable: the others still run (they prepare state for preemption)
            (),
            Code.Unschedulable,
            f"0/3 nodes are available: pf1 says no. {NO_VICTIMS}",
            "unschedulable",
            post_filter=True,
        ),
        id="unschedulable",
    ),
    pytest.param(
        PreFilterCase(
            Status.unresolvable("pf1 says never"),
            False,  # UnschedulableAndUnresolvable stops at once
            (),
            Code.UnschedulableAndUnresolvable,
            f"0/3 nodes are available: pf1 says never. {NO_VICTIMS}",
            "unschedulable",
            post_filter=True,
        ),
        id="unresolvable",
    ),
    pytest.param(
        PreFilterCase(Status.failure("boom"), False, (), Code.Error, 'running PreFilter plugin "PF1": boom', "backoff"),
        id="error",
    ),
    pytest.param(
        PreFilterCase(raises("kaboom"), False, (), Code.Error, 'running PreFilter plugin "PF1": kaboom', "backoff"),
        id="raises",
    ),
]


@pytest.mark.parametrize("case", PRE_FILTER_CASES)
def test_pre_filter_status_decides_what_runs_next(case: PreFilterCase) -> None:
    specs = [
        fake("PF1", "preFilter", "filter", preFilter=case.answer),
        fake("PF2", "preFilter", "filter"),
        fake("Post", "postFilter"),
    ]
    s, calls = scenario(specs, three_nodes_one_pod)

    expected_pre = [("preFilter", "PF1", "p1")] + ([("preFilter", "PF2", "p1")] if case.pf2_called else [])
    assert points(calls, "preFilter") == expected_pre
    for name in ("PF1", "PF2"):
        assert filtered(calls, name) == (["n1", "n2", "n3"] if name in case.filters_run else [])
    assert points(calls, "postFilter") == ([("postFilter", "Post", "p1")] if case.post_filter else [])
    r = rec(s, "p1")
    if case.code is None:
        assert r.phase == "Bound" and r.last_status is None
        return
    assert r.last_status == Status(case.code, (case.message,), "PF1")
    assert s.queue_of("uid-p1") == case.queue
    assert r.phase == ("Unschedulable" if case.queue == "unschedulable" else "Pending")
    assert events_of(s, "p1")[-1] == ("Error" if case.code is Code.Error else "Unschedulable")


@pytest.mark.parametrize(
    ("answer", "code"),
    [
        pytest.param(Status.unschedulable("pf1 says no"), Code.Unschedulable, id="unschedulable"),
        pytest.param(Status.unresolvable("pf1 says no"), Code.UnschedulableAndUnresolvable, id="unresolvable"),
    ],
)
def test_pre_filter_rejection_gives_every_node_that_status(answer: Status, code: Code) -> None:
    s, _ = scenario([fake("PF1", "preFilter", preFilter=answer), fake("Post", "postFilter")], three_nodes_one_pod)
    expected = Status(code, ("pf1 says no",), "PF1")
    assert plugin(s, "Post").post_filter_seen["p1"] == {"n1": expected, "n2": expected, "n3": expected}
    info = s.queue.info("uid-p1")
    assert info is not None and info.unschedulable_plugins == {"PF1"}


# ---------------------------------------------------------------------------------------------------
# PreFilter results: narrowing the nodes


def _only(*names: str) -> tuple[PreFilterResult, Status]:
    return PreFilterResult(frozenset(names)), SUCCESS


@pytest.mark.parametrize(
    ("n1_result", "n2_result", "seen", "bound_to"),
    [
        pytest.param(SUCCESS, SUCCESS, ["n1", "n2", "n3"], {"n1", "n2", "n3"}, id="no-result-all-nodes"),
        pytest.param(_only("n2", "n3"), SUCCESS, ["n2", "n3"], {"n2", "n3"}, id="one-result"),
        pytest.param(_only("n2", "n3"), _only("n3", "ghost"), ["n3"], {"n3"}, id="intersection-ignores-unknown"),
        pytest.param((None, SUCCESS), _only("n1"), ["n1"], {"n1"}, id="none-result-means-all"),
    ],
)
def test_pre_filter_result_narrows_the_nodes_filter_sees(
    n1_result: Any, n2_result: Any, seen: list[str], bound_to: set[str]
) -> None:
    specs = [
        fake("N1", "preFilter", preFilter=n1_result),
        fake("N2", "preFilter", preFilter=n2_result),
        fake("F", "filter"),
    ]
    s, calls = scenario(specs, three_nodes_one_pod)
    assert filtered(calls, "F") == seen
    assert rec(s, "p1").pod.node_name in bound_to


@pytest.mark.parametrize(
    ("n1_result", "n2_result", "fragment"),
    [
        pytest.param(_only("n1"), _only("n3"), "node(s) didn't satisfy plugin(s) [N1 N2] simultaneously",
                     id="disjoint-results"),
        pytest.param(_only(), SUCCESS, "node(s) didn't satisfy plugin N1", id="one-empty-result"),
    ],
)
def test_pre_filter_empty_intersection_is_unresolvable(n1_result: Any, n2_result: Any, fragment: str) -> None:
    specs = [
        fake("N1", "preFilter", preFilter=n1_result),
        fake("N2", "preFilter", preFilter=n2_result),
        fake("F", "filter"),
        fake("Post", "postFilter"),
    ]
    s, calls = scenario(specs, three_nodes_one_pod)
    st = status_of(s, "p1")
    assert st.code is Code.UnschedulableAndUnresolvable
    assert st.message().startswith("0/3 nodes are available: ")
    assert fragment in st.message()
    if n2_result is not SUCCESS:
        assert "N1" in st.message() and "N2" in st.message()
        assert points(calls, "preFilter") == [("preFilter", "N1", "p1"), ("preFilter", "N2", "p1")]
    else:  # the empty result stops PreFilter at once
        assert points(calls, "preFilter") == [("preFilter", "N1", "p1")]
    assert filtered(calls, "F") == []
    assert s.queue_of("uid-p1") == "unschedulable"


def test_pre_filter_result_naming_only_unknown_nodes_is_unresolvable() -> None:
    specs = [fake("N1", "preFilter", preFilter=_only("ghost")), fake("F", "filter")]
    s, calls = scenario(specs, three_nodes_one_pod)
    assert filtered(calls, "F") == []
    st = status_of(s, "p1")
    assert st.code is Code.UnschedulableAndUnresolvable
    assert st.message().startswith("0/3 nodes are available:")


def test_pre_filter_narrowing_plugins_are_recorded_as_rejectors() -> None:
    """kube-scheduler: ``diagnosis.UnschedulablePlugins = unscheduledPlugins`` (the plugins whose
    PreFilterResult narrowed the nodes), so only their events requeue the pod."""
    specs = [fake("N1", "preFilter", preFilter=_only("n1")), fake("N2", "preFilter", preFilter=_only("n3"))]
    s, _ = scenario(specs, three_nodes_one_pod)
    info = s.queue.info("uid-p1")
    assert info is not None
    assert info.unschedulable_plugins == {"N1", "N2"}


def test_nodes_outside_pre_filter_result_count_in_fit_error() -> None:
    """kube-scheduler's FitError counts the nodes absent from NodeToStatus with the absent status's
    reasons ("1 node(s) didn't satisfy plugin(s) [N1]" in kube-scheduler's words)."""
    specs = [
        fake("N1", "preFilter", preFilter=_only("n2", "n3")),
        fake("F", "filter", filter=reject_nodes(Code.Unschedulable, "f says no", "n1", "n2", "n3")),
        fake("Post", "postFilter"),
    ]
    s, calls = scenario(specs, three_nodes_one_pod)
    assert filtered(calls, "F") == ["n2", "n3"]
    seen = plugin(s, "Post").post_filter_seen["p1"]
    assert seen["n1"].code is Code.UnschedulableAndUnresolvable
    assert seen["n2"] == seen["n3"] == Status(Code.Unschedulable, ("f says no",), "F")
    assert seen["n1"].reasons == ("node(s) didn't satisfy plugin(s) [N1]",)
    assert status_of(s, "p1").message() == (
        f"0/3 nodes are available: 1 node(s) didn't satisfy plugin(s) [N1], 2 f says no. {NO_VICTIMS}"
    )


# ---------------------------------------------------------------------------------------------------
# Filter


@pytest.mark.parametrize(
    ("f1", "f2", "f3", "seen", "statuses"),
    [
        pytest.param(
            reject_nodes(Code.Unschedulable, "f1 no", "n1", "n2", "n3"),
            SUCCESS,
            SUCCESS,
            {"F1": ["n1", "n2", "n3"], "F2": [], "F3": []},
            {"n1": ("F1", Code.Unschedulable, "f1 no"), "n2": ("F1", Code.Unschedulable, "f1 no"),
             "n3": ("F1", Code.Unschedulable, "f1 no")},
            id="first-plugin-rejects-all",
        ),
        pytest.param(
            reject_nodes(Code.Unschedulable, "f1 no", "n1"),
            reject_nodes(Code.UnschedulableAndUnresolvable, "f2 no", "n1", "n2"),
            reject_nodes(Code.Unschedulable, "f3 no", "n1", "n2", "n3"),
            {"F1": ["n1", "n2", "n3"], "F2": ["n2", "n3"], "F3": ["n3"]},
            {"n1": ("F1", Code.Unschedulable, "f1 no"),
             "n2": ("F2", Code.UnschedulableAndUnresolvable, "f2 no"),
             "n3": ("F3", Code.Unschedulable, "f3 no")},
            id="staggered",
        ),
    ],
)  # fmt: skip
def test_filter_reports_first_rejecting_plugin_and_skips_later_ones(
    f1: Any, f2: Any, f3: Any, seen: dict[str, list[str]], statuses: dict[str, tuple[str, Code, str]]
) -> None:
    specs = [
        fake("F1", "filter", filter=f1),
        fake("F2", "filter", filter=f2),
        fake("F3", "filter", filter=f3),
        fake("Post", "postFilter"),
    ]
    s, calls = scenario(specs, three_nodes_one_pod)

    assert {name: filtered(calls, name) for name in seen} == seen
    expected = {n: Status(code, (reason,), name) for n, (name, code, reason) in statuses.items()}
    assert plugin(s, "Post").post_filter_seen["p1"] == expected
    counts = collections.Counter(reason for _, _, reason in statuses.values())
    histogram = ", ".join(sorted(f"{k} {r}" for r, k in counts.items()))
    assert status_of(s, "p1") == Status(Code.Unschedulable, (f"0/3 nodes are available: {histogram}. {NO_VICTIMS}",))
    assert points(calls, "postFilter") == [("postFilter", "Post", "p1")]
    assert (rec(s, "p1").phase, s.queue_of("uid-p1")) == ("Unschedulable", "unschedulable")
    info = s.queue.info("uid-p1")
    assert info is not None and info.unschedulable_plugins == {name for name, _, _ in statuses.values()}


def test_filter_single_feasible_node_is_chosen_without_scoring() -> None:
    specs = [
        fake("F1", "filter", filter=reject_nodes(Code.Unschedulable, "f1 no", "n1")),
        fake("F2", "filter", filter=reject_nodes(Code.Unschedulable, "f2 no", "n2")),
        fake("S", "preScore", "score"),
        fake("Post", "postFilter"),
    ]
    s, calls = scenario(specs, three_nodes_one_pod)
    assert rec(s, "p1").pod.node_name == "n3"
    assert filtered(calls, "F2") == ["n2", "n3"]
    assert points(calls, "preScore", "score", "postFilter") == []


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        pytest.param(Status.failure("disk on fire"), 'running "F2" filter plugin: disk on fire', id="error"),
        pytest.param(Status.skip(), 'running "F2" filter plugin: %!w(<nil>)', id="skip-is-not-a-filter-answer"),
        pytest.param(raises("kaboom"), 'running "F2" filter plugin: kaboom', id="raises"),
    ],
)
def test_filter_error_aborts_cycle_without_post_filter(answer: Any, message: str) -> None:
    def f2(p: Pod, n: str) -> Status:
        return _answer(answer, p, n) if n == "n2" else SUCCESS

    specs = [
        fake("F1", "filter"),
        fake("F2", "filter", filter=f2),
        fake("F3", "filter"),
        fake("Post", "postFilter"),
    ]
    s, calls = scenario(specs, three_nodes_one_pod)
    st = status_of(s, "p1")
    assert (st.code, st.plugin) == (Code.Error, "F2")
    assert st.message().lower() == message.lower()
    assert filtered(calls, "F3") == []
    assert points(calls, "postFilter", "reserve") == []
    assert (rec(s, "p1").phase, s.queue_of("uid-p1")) == ("Pending", "backoff")
    assert events_of(s, "p1")[-1] == "Error"
    assert s.stats.errors == 1


# ---------------------------------------------------------------------------------------------------
# PostFilter


REJECT_ALL = reject_nodes(Code.Unschedulable, "nope", "n1", "n2", "n3")


@pytest.mark.parametrize(
    ("first", "second_called", "message_tail", "nominated"),
    [
        pytest.param(
            Status(Code.Unschedulable, ("pf1 found nothing",)),
            True,
            " pf1 found nothing, second found nothing",
            "",
            id="unschedulable-runs-next",
        ),
        pytest.param((PostFilterResult("n2"), SUCCESS), False, "", "n2", id="success-nominates-and-stops"),
        pytest.param(
            Status(Code.UnschedulableAndUnresolvable, ("pf1 gives up",)),
            False,
            " pf1 gives up",
            "",
            id="unresolvable-stops",
        ),
        pytest.param(
            Status.failure("preemption broke"),
            False,
            " preemption broke",
            "",
            id="error-stops",
        ),
    ],
)
def test_post_filter_runs_in_order_until_one_decides(
    first: Any, second_called: bool, message_tail: str, nominated: str
) -> None:
    specs = [
        fake("F", "filter", filter=REJECT_ALL),
        fake("Post1", "postFilter", postFilter=first),
        fake("Post2", "postFilter", postFilter=Status(Code.Unschedulable, ("second found nothing",))),
    ]
    s, calls = scenario(specs, three_nodes_one_pod)
    expected_calls = [("postFilter", "Post1", "p1")]
    if second_called:
        expected_calls.append(("postFilter", "Post2", "p1"))
    assert points(calls, "postFilter") == expected_calls
    st = status_of(s, "p1")
    assert st.code is Code.Unschedulable
    assert st.message() == "0/3 nodes are available: 3 nope." + message_tail
    r = rec(s, "p1")
    assert r.nominated_node == nominated
    assert ("Nominated" in events_of(s, "p1")) == bool(nominated)


def nominated_pod() -> list[Pod | Node]:
    """Three nodes and a pod that a former preemption nominated to n1 (status.nominatedNodeName)."""
    p1 = pod_from_dict({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "uid": "uid-p1"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}]},
        "status": {"nominatedNodeName": "n1"},
    })  # fmt: skip
    return [node("n1"), node("n2"), node("n3"), p1]


@pytest.mark.parametrize(
    ("specs", "nominated"),
    [
        # kube-scheduler's DefaultPreemption answers NewPostFilterResultWithNominatedNode("") when no node
        # can be made room on (ModeOverride, ""): handleSchedulingFailure clears the nomination.
        pytest.param([fake("F", "filter", filter=REJECT_ALL),
                      fake("Post", "postFilter", postFilter=(PostFilterResult(""), Status.unschedulable("none")))],
                     "", id="post-filter-result-without-node-clears"),
        # No result at all (a pod not eligible to preempt) is ModeNoop: the nomination stays.
        pytest.param([fake("F", "filter", filter=REJECT_ALL),
                      fake("Post", "postFilter", postFilter=Status.unschedulable("not eligible"))],
                     "n1", id="no-post-filter-result-keeps"),
        pytest.param([fake("F", "filter", filter=REJECT_ALL),
                      fake("Post", "postFilter", postFilter=(PostFilterResult("n2"), SUCCESS))],
                     "n2", id="post-filter-result-nominates"),
        # Every other failure passes clearNominatedNode: no PostFilter plugin, Reserve, Permit.
        pytest.param([fake("F", "filter", filter=REJECT_ALL)], "", id="no-post-filter-plugin-clears"),
        pytest.param([fake("R", "reserve", reserve=Status.unschedulable("full"))], "", id="reserve-failure-clears"),
        pytest.param([fake("W", "permit", permit=Status.failure("broken"))], "", id="permit-failure-clears"),
    ],
)  # fmt: skip
def test_a_failed_attempt_sets_the_nomination_as_kube_scheduler_does(specs: list[Spec], nominated: str) -> None:
    s, _ = scenario(specs, nominated_pod)
    r = rec(s, "p1")
    assert (r.nominated_node, s.nominated.get("uid-p1", "")) == (nominated, nominated)
    info = s.queue.info("uid-p1")
    assert info is not None and info.pod.nominated_node_name == nominated


def test_post_filter_not_called_when_a_node_fits() -> None:
    specs = [fake("F", "filter", filter=reject_nodes(Code.Unschedulable, "nope", "n1")), fake("Post", "postFilter")]
    s, calls = scenario(specs, three_nodes_one_pod)
    assert rec(s, "p1").pod.node_name in {"n2", "n3"}
    assert points(calls, "postFilter") == []


# ---------------------------------------------------------------------------------------------------
# PreScore / Score / NormalizeScore


@pytest.mark.parametrize(
    ("pre_score", "expected_calls", "code", "message"),
    [
        pytest.param(
            Status.skip(),
            [("preScore", "P1"), ("preScore", "P2"), ("score", "P2")],
            None,
            "",
            id="skip-skips-own-score",
        ),
        pytest.param(
            SUCCESS,
            [("preScore", "P1"), ("preScore", "P2"), ("score", "P1"), ("score", "P2")],
            None,
            "",
            id="success",
        ),
        pytest.param(
            Status.failure("no data"),
            [("preScore", "P1")],
            Code.Error,
            'running PreScore plugin "P1": no data',
            id="error",
        ),
        pytest.param(
            Status.unschedulable("not a prescore answer"),
            [("preScore", "P1")],
            Code.Error,
            'running PreScore plugin "P1": not a prescore answer',
            id="rejection-is-an-error",
        ),
    ],
)
def test_pre_score_status_decides_which_scores_run(
    pre_score: Status, expected_calls: list[tuple[str, str]], code: Code | None, message: str
) -> None:
    specs = [
        fake("P1", "preScore", "score", preScore=pre_score),
        fake("P2", "preScore", "score"),
        fake("Post", "postFilter"),
    ]
    s, calls = scenario(specs, two_nodes_one_pod)
    assert [(c[0], c[1]) for c in points(calls, "preScore", "score", "postFilter")] == expected_calls
    if code is None:
        assert rec(s, "p1").phase == "Bound"
    else:
        assert status_of(s, "p1") == Status(code, (message,), "P1")
        assert s.queue_of("uid-p1") == "backoff"


INVALID_SCORE = (
    'applying score defaultWeights on Score plugins: plugin "S" returns an invalid score {}, it should in the range of '
    "[0, 100] after normalizing"
)


@pytest.mark.parametrize(
    ("behaviour", "message"),
    [
        pytest.param(
            {"score": by_node(n1=101)},
            INVALID_SCORE.format(101),
            id="raw-101",
        ),
        pytest.param(
            {"score": by_node(n1=-1)},
            INVALID_SCORE.format(-1),
            id="raw-minus-1",
        ),
        pytest.param(
            {"score": by_node(n1=50, n2=60), "normalize": set_scores(101, 0)},
            INVALID_SCORE.format(101),
            id="normalized-101",
        ),
        pytest.param(
            {"score": by_node(n1=50, n2=60), "normalize": set_scores(0, -1)},
            INVALID_SCORE.format(-1),
            id="normalized-minus-1",
        ),
        pytest.param(
            {"score": by_node(n1=50), "normalize": lambda scores: Status.failure("cannot normalize")},
            'running Normalize on Score plugins: plugin "S" failed with: cannot normalize',
            id="normalize-error",
        ),
        pytest.param(
            {"score": raises("kaboom")}, 'running Score plugins: plugin "S" failed with: kaboom', id="score-raises"
        ),
        pytest.param(
            {"scores": lambda p: [1]},
            'running Score plugins: plugin "S" failed with: returned 1 scores for 2 nodes',
            id="wrong-length",
        ),
    ],
)
def test_score_failure_aborts_cycle(behaviour: dict[str, Any], message: str) -> None:
    specs = [fake("S", "score", "reserve", **behaviour), fake("Post", "postFilter")]
    s, calls = scenario(specs, two_nodes_one_pod)
    st = status_of(s, "p1")
    assert (st.code, st.reasons, st.plugin) == (Code.Error, (message,), "S")
    assert points(calls, "reserve", "postFilter") == []
    assert (rec(s, "p1").phase, s.queue_of("uid-p1")) == ("Pending", "backoff")


def test_normalize_score_brings_raw_scores_into_range() -> None:
    def tenth(scores: npt.NDArray[np.int64]) -> None:
        scores //= 10

    spec = fake("S", "score", score=by_node(n1=500, n2=1000), normalize=tenth)
    s, calls = scenario([spec], two_nodes_one_pod)
    assert points(calls, "normalizeScore") == [("normalizeScore", "S", "p1", (500, 1000))]
    assert rec(s, "p1").pod.node_name == "n2"


@pytest.mark.parametrize(
    ("w1", "w2", "winner"),
    [
        pytest.param(2, 1, "n1", id="s1-heavier"),  # n1: 2*30=60, n2: 1*50=50
        pytest.param(1, 1, "n2", id="equal-weights"),  # n1: 30, n2: 50
        pytest.param(1, 3, "n2", id="s2-heavier"),
    ],
)
def test_score_weights_decide_the_node(w1: int, w2: int, winner: str) -> None:
    specs = [
        fake("S1", "score", weight=w1, score=by_node(n1=30)),
        fake("S2", "score", weight=w2, score=by_node(n2=50)),
    ]
    s, _ = scenario(specs, two_nodes_one_pod)
    assert rec(s, "p1").pod.node_name == winner


# ---------------------------------------------------------------------------------------------------
# Reserve


REVERSE_UNRESERVE = [("unreserve", "R3", "p1", "n1"), ("unreserve", "R2", "p1", "n1"), ("unreserve", "R1", "p1", "n1")]


@pytest.mark.parametrize(
    ("failing", "answer", "reserved", "code", "message", "queue"),
    [
        pytest.param("R3", Status.unschedulable("r3 full"), ["R1", "R2", "R3"], Code.Unschedulable, "r3 full",
                     "unschedulable", id="last-rejects"),
        pytest.param("R2", Status.unresolvable("r2 never"), ["R1", "R2"], Code.UnschedulableAndUnresolvable,
                     "r2 never", "unschedulable", id="middle-rejects"),
        pytest.param("R1", Status.failure("disk on fire"), ["R1"], Code.Error,
                     'running Reserve plugin "R1": disk on fire', "backoff", id="first-errors"),
        pytest.param("R2", raises("kaboom"), ["R1", "R2"], Code.Error, 'running Reserve plugin "R2": kaboom',
                     "backoff", id="middle-raises"),
        pytest.param("R2", Status.skip(), ["R1", "R2"], Code.Error, 'running Reserve plugin "R2": %!w(<nil>)',
                     "backoff", id="skip-is-an-error"),
    ],
)  # fmt: skip
def test_reserve_failure_unreserves_all_in_reverse_order(
    failing: str, answer: Any, reserved: list[str], code: Code, message: str, queue: str
) -> None:
    specs = [fake(name, "reserve", reserve=answer if name == failing else SUCCESS) for name in ("R1", "R2", "R3")] + [
        fake("W", "permit")
    ]
    s, calls = scenario(specs, one_node_one_pod)

    assert (
        points(calls, "reserve", "unreserve", "permit")
        == [("reserve", name, "p1", "n1") for name in reserved] + REVERSE_UNRESERVE
    )
    assert status_of(s, "p1") == Status(code, (message,), failing)
    assert s.cache.pod_count() == 0  # the assumed pod was forgotten
    assert events_of(s, "p1")[-1] == ("Error" if code is Code.Error else "Unschedulable")
    # Requeued (which pool a rejected pod must be in: test_rejected_pod_is_not_requeued_by_its_own_forget).
    assert s.queue_of("uid-p1") in ({queue} if queue == "backoff" else PARKED)


# ---------------------------------------------------------------------------------------------------
# Permit


@pytest.mark.parametrize(
    ("answer", "code", "message", "queue"),
    [
        pytest.param(Status.unschedulable("not now"), Code.Unschedulable, "not now", "unschedulable", id="reject"),
        pytest.param(Status.failure("broken"), Code.Error, 'running Permit plugin "W": broken', "backoff",
                     id="error"),
        pytest.param(raises("kaboom"), Code.Error, 'running Permit plugin "W": kaboom', "backoff", id="raises"),
        pytest.param(Status.skip(), Code.Error, 'running Permit plugin "W": %!w(<nil>)', "backoff", id="skip"),
    ],
)  # fmt: skip
def test_permit_failure_unreserves_and_requeues(answer: Any, code: Code, message: str, queue: str) -> None:
    specs = [fake("R", "reserve"), fake("W", "permit", permit=answer), fake("B", "preBind")]
    s, calls = scenario(specs, one_node_one_pod)
    assert points(calls, "reserve", "permit", "unreserve", "preBind") == [
        ("reserve", "R", "p1", "n1"),
        ("permit", "W", "p1", "n1"),
        ("unreserve", "R", "p1", "n1"),
    ]
    assert status_of(s, "p1") == Status(code, (message,), "W")
    assert s.queue_of("uid-p1") in ({queue} if queue == "backoff" else PARKED)


def test_permit_rejection_stops_later_permits_even_after_a_wait() -> None:
    specs = [
        fake("W1", "permit", permit=(Status.wait(), 30.0)),
        fake("W2", "permit", permit=Status.unschedulable("w2 no")),
        fake("W3", "permit"),
    ]
    s, calls = scenario(specs, one_node_one_pod)
    assert [c[1] for c in points(calls, "permit")] == ["W1", "W2"]
    assert status_of(s, "p1") == Status(Code.Unschedulable, ("w2 no",), "W2")


@pytest.mark.parametrize(
    "allow_order",
    [pytest.param(["W1", "W2"], id="in-order"), pytest.param(["W2", "W1"], id="reverse-order")],
)
def test_permit_wait_then_allowed_via_handle_binds(allow_order: list[str]) -> None:
    observed: dict[str, Any] = {}

    async def allow(s: Scheduler) -> None:
        await wait_for(s, lambda: s.handle.waiting_pod("uid-p1") is not None)
        wp = s.handle.waiting_pod("uid-p1")
        assert wp is not None
        observed["phase"] = rec(s, "p1").phase
        observed["node"] = wp.node_name
        observed["pending"] = sorted(wp.pending_plugins())
        observed["listed"] = [w.pod.name for w in s.handle.waiting_pods()]
        wp.allow(allow_order[0])
        await asyncio.sleep(0.02)
        observed["after_first"] = (rec(s, "p1").phase, wp.pending_plugins())
        observed["bind_before_all_allowed"] = points(calls_box[0], "preBind", "bind")
        wp.allow(allow_order[1])

    calls_box: list[list[Call]] = []

    async def main() -> tuple[Scheduler, list[Call]]:
        specs = [
            fake("R", "reserve"),
            fake("W1", "permit", permit=(Status.wait(), 30.0)),
            fake("W2", "permit", permit=(Status.wait(), 30.0)),
            fake("PB", "preBind"),
        ]
        s, calls = make_scheduler(specs)
        calls_box.append(calls)
        await drive(s, one_node_one_pod(), allow)
        return s, calls

    s, calls = asyncio.run(main())
    assert_invariants(s)
    assert observed == {
        "phase": "Waiting",
        "node": "n1",
        "pending": ["W1", "W2"],
        "listed": ["p1"],
        "after_first": ("Waiting", [allow_order[1]]),
        "bind_before_all_allowed": [],
    }
    assert points(calls, "reserve", "permit", "preBind", "unreserve") == [
        ("reserve", "R", "p1", "n1"),
        ("permit", "W1", "p1", "n1"),
        ("permit", "W2", "p1", "n1"),
        ("preBind", "PB", "p1", "n1"),
    ]
    assert (rec(s, "p1").phase, rec(s, "p1").pod.node_name) == ("Bound", "n1")


def test_permit_wait_timeout_rejects_and_unreserves() -> None:
    specs = [
        fake("R1", "reserve"),
        fake("R2", "reserve"),
        fake("W", "permit", permit=(Status.wait(), 0.05)),
        fake("PB", "preBind"),
    ]
    s, calls = scenario(specs, one_node_one_pod)
    st = status_of(s, "p1")
    assert (st.code, st.plugin) == (Code.Unschedulable, "W")
    assert st.message().startswith("rejected due to timeout after waiting 50ms at plugin W")
    assert points(calls, "unreserve", "preBind", "bind") == [
        ("unreserve", "R2", "p1", "n1"),
        ("unreserve", "R1", "p1", "n1"),
    ]
    assert len(s.waiting_pods) == 0 and s.handle.waiting_pods() == []
    info = s.queue.info("uid-p1")
    assert info is not None and info.unschedulable_plugins == {"W"}
    assert s.queue_of("uid-p1") in PARKED


def test_permit_timeout_parks_pod_unschedulable() -> None:
    """handleBindingCycleError: a pod rejected while waiting at Permit goes to the unschedulable pool
    (with the Permit plugin as rejector); the AssignedPodDelete move that follows its forget
    excludes the pod itself ("Avoid moving the assumed Pod itself as it's always Unschedulable")."""
    specs = [fake("R", "reserve"), fake("W", "permit", permit=(Status.wait(), 0.05))]
    s, _ = scenario(specs, one_node_one_pod)
    assert status_of(s, "p1").code is Code.Unschedulable
    assert (rec(s, "p1").phase, s.queue_of("uid-p1")) == ("Unschedulable", "unschedulable")


def test_permit_waiting_pod_rejected_via_handle() -> None:
    async def reject(s: Scheduler) -> None:
        await wait_for(s, lambda: s.handle.waiting_pod("uid-p1") is not None)
        assert s.handle.reject_waiting_pod("uid-p1", "W", "go away")
        assert not s.handle.reject_waiting_pod("uid-nope", "W", "go away")

    async def main() -> tuple[Scheduler, list[Call]]:
        s, calls = make_scheduler([fake("R", "reserve"), fake("W", "permit", permit=(Status.wait(), 30.0))])
        await drive(s, one_node_one_pod(), reject)
        return s, calls

    s, calls = asyncio.run(main())
    assert_invariants(s)
    assert status_of(s, "p1") == Status(Code.Unschedulable, ("go away",), "W")
    assert points(calls, "unreserve") == [("unreserve", "R", "p1", "n1")]


def test_permit_timeout_is_capped_at_fifteen_minutes() -> None:
    async def check(s: Scheduler) -> None:
        await wait_for(s, lambda: s.handle.waiting_pod("uid-p1") is not None)
        wp = s.waiting_pods.get("uid-p1")
        assert wp is not None
        remaining = wp.deadline - asyncio.get_running_loop().time()
        assert MAX_PERMIT_TIMEOUT - 5 < remaining <= MAX_PERMIT_TIMEOUT
        wp.allow("W")

    async def main() -> Scheduler:
        s, _ = make_scheduler([fake("W", "permit", permit=(Status.wait(), 10 * 3600.0))])
        await drive(s, one_node_one_pod(), check)
        return s

    s = asyncio.run(main())
    assert_invariants(s)
    assert rec(s, "p1").phase == "Bound"


# ---------------------------------------------------------------------------------------------------
# PreBind


@pytest.mark.parametrize(
    ("answer", "code", "message"),
    [
        pytest.param(Status.unschedulable("volume not ready"), Code.Unschedulable, "volume not ready",
                     id="reject"),
        pytest.param(Status.failure("attach failed"), Code.Error, 'running PreBind plugin "PB1": attach failed',
                     id="error"),
        pytest.param(raises("kaboom"), Code.Error, 'running PreBind plugin "PB1": kaboom', id="raises"),
    ],
)  # fmt: skip
def test_pre_bind_failure_unreserves_and_requeues(answer: Any, code: Code, message: str) -> None:
    specs = [
        fake("R1", "reserve"),
        fake("R2", "reserve"),
        fake("PB1", "preBind", preBind=answer),
        fake("PB2", "preBind"),
        fake("B", "bind"),
        fake("PostB", "postBind"),
    ]
    s, calls = scenario(specs, one_node_one_pod, binder=False)
    assert points(calls, "preBind", "bind", "unreserve", "postBind") == [
        ("preBind", "PB1", "p1", "n1"),
        ("unreserve", "R2", "p1", "n1"),
        ("unreserve", "R1", "p1", "n1"),
    ]
    assert status_of(s, "p1") == Status(code, (message,), "PB1")
    # An error is retried after backoff; a rejection with no rejector plugin waits in the unschedulable
    # pool until any cluster event (kube-scheduler's queueSkip when no event happened in flight).
    expected = ("Pending", "backoff") if code is Code.Error else ("Unschedulable", "unschedulable")
    assert (rec(s, "p1").phase, s.queue_of("uid-p1")) == expected
    assert s.cache.pod_count() == 0


@pytest.mark.parametrize(
    ("pb1", "pb2", "pre_bind_calls", "outcome"),
    [
        # kube-scheduler's RunPreBindPreFlights: the plugins answering Skip go into the cycle's
        # SkipPreBindPlugins, which RunPreBindPlugins does not call.
        pytest.param(Status.skip(), SUCCESS, ["PB2"], "Bound", id="first-skips"),
        pytest.param(Status.skip(), Status.skip(), [], "Bound", id="both-skip"),
        pytest.param(SUCCESS, SUCCESS, ["PB1", "PB2"], "Bound", id="none-skips"),
        # An Error fails the binding cycle before PreBind; a rejection is not a pre-flight answer.
        pytest.param(Status.failure("no api"), SUCCESS, [], 'running PreBindPreFlight "PB1": no api', id="error"),
        pytest.param(Status.unschedulable("later"), SUCCESS, [],
                     'PreBindPreFlight PB1 returned "Unschedulable", which is unsupported. It is supposed to return '
                     "Success, Skip, or Error status", id="rejection-is-an-error"),
    ],
)  # fmt: skip
def test_pre_bind_skips_the_plugins_whose_pre_flight_skipped(
    pb1: Status, pb2: Status, pre_bind_calls: list[str], outcome: str
) -> None:
    specs = [fake("PB1", "preBind", preBindPreFlight=pb1), fake("PB2", "preBind", preBindPreFlight=pb2)]
    s, calls = scenario(specs, one_node_one_pod)
    # Every plugin is asked unless one fails the pre-flights.
    asked = ["PB1"] if outcome != "Bound" else ["PB1", "PB2"]
    assert [c[1] for c in points(calls, "preBindPreFlight")] == asked
    assert [c[1] for c in points(calls, "preBind")] == pre_bind_calls
    if outcome == "Bound":
        assert rec(s, "p1").phase == "Bound"
    else:
        assert status_of(s, "p1") == Status(Code.Error, (outcome,), "PB1")
        assert s.queue_of("uid-p1") == "backoff" and s.cache.pod_count() == 0


def test_pre_flight_error_of_a_pod_waiting_at_permit_ends_its_wait() -> None:
    """kube-scheduler runs the pre-flights before WaitOnPermit: an Error fails the binding cycle at
    once, and the pod's wait (with its timer) is dropped rather than left behind."""
    specs = [fake("W", "permit", permit=(Status.wait(), 60.0)), fake("PB", "preBind", preBindPreFlight=raises("gone"))]
    s, calls = scenario(specs, one_node_one_pod)  # the invariants: no waiting pod, nothing assumed
    assert status_of(s, "p1") == Status(Code.Error, ('running PreBindPreFlight "PB": gone',), "PB")
    assert points(calls, "preBind") == []


def test_pre_bind_plugins_all_run_before_bind() -> None:
    specs = [fake("PB1", "preBind"), fake("PB2", "preBind"), fake("PostB", "postBind")]
    s, calls = scenario(specs, one_node_one_pod)
    assert points(calls, "preBind", "postBind") == [
        ("preBind", "PB1", "p1", "n1"),
        ("preBind", "PB2", "p1", "n1"),
        ("postBind", "PostB", "p1", "n1"),
    ]
    assert rec(s, "p1").phase == "Bound"


# ---------------------------------------------------------------------------------------------------
# Bind / PostBind


@pytest.mark.parametrize(
    ("b1", "b2", "bind_calls", "bound_by"),
    [
        pytest.param(Status.skip(), BIND, ["B1", "B2"], "B2", id="skip-then-bind"),
        pytest.param(BIND, BIND, ["B1"], "B1", id="first-binds-second-never-called"),
    ],
)
def test_bind_first_non_skip_plugin_wins(b1: Any, b2: Any, bind_calls: list[str], bound_by: str) -> None:
    specs = [fake("R", "reserve"), fake("B1", "bind", bind=b1), fake("B2", "bind", bind=b2), fake("PB", "postBind")]
    s, calls = scenario(specs, one_node_one_pod, binder=False)
    assert points(calls, "bind", "postBind", "unreserve") == [
        *(("bind", name, "p1", "n1") for name in bind_calls),
        ("postBind", "PB", "p1", "n1"),
    ]
    r = rec(s, "p1")
    assert (r.phase, r.pod.node_name) == ("Bound", "n1")
    assert s.stats.bound == 1


@pytest.mark.parametrize(
    ("b1", "b2", "bind_calls", "message"),
    [
        # kube-scheduler's RunBindPlugins hands the last Skip on: its reasons are the pod's failure.
        pytest.param(Status(Code.Skip, ("not mine",)), Status(Code.Skip, ("not mine either",)), ["B1", "B2"],
                     "not mine either", id="all-skip"),
        pytest.param(Status.failure("api down"), BIND, ["B1"], 'running Bind plugin "B1": api down',
                     id="first-errors"),
        pytest.param(raises("kaboom"), BIND, ["B1"], 'running Bind plugin "B1": kaboom', id="first-raises"),
    ],
)  # fmt: skip
def test_bind_failure_unreserves_and_requeues_with_backoff(
    b1: Any, b2: Any, bind_calls: list[str], message: str
) -> None:
    specs = [fake("R", "reserve"), fake("B1", "bind", bind=b1), fake("B2", "bind", bind=b2), fake("PB", "postBind")]
    s, calls = scenario(specs, one_node_one_pod, binder=False)
    assert points(calls, "bind", "postBind", "unreserve") == [
        *(("bind", name, "p1", "n1") for name in bind_calls),
        ("unreserve", "R", "p1", "n1"),
    ]
    st = status_of(s, "p1")
    assert st.code is Code.Error
    assert st.message() == message
    assert (rec(s, "p1").phase, s.queue_of("uid-p1")) == ("Pending", "backoff")
    assert s.cache.pod_count() == 0
    assert events_of(s, "p1")[-1] == "Error"


def test_post_bind_runs_after_the_pod_is_bound() -> None:
    phases: list[tuple[str, str]] = []
    box: list[Scheduler] = []

    class Recorder(Fake):
        async def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
            await super().post_bind(state, pod, node_name)
            r = box[0].pods[pod.uid]
            phases.append((r.phase, r.pod.node_name))

    async def main() -> tuple[Scheduler, list[Call]]:
        calls: list[Call] = []
        reg = in_tree_registry()
        reg.register("PostB", lambda args, handle: Recorder("PostB", calls, handle, {}), frozenset({"postBind"}))
        cfg = load_config(
            config_yaml([("PrioritySort", 0), ("NodeResourcesFit", 0), ("PostB", 0), ("DefaultBinder", 0)], None),
            reg.points(),
        )
        s = Scheduler(cfg, reg, seed=0)
        box.append(s)
        await drive(s, manifest(["n1"], ["p1", "p2"]))
        return s, calls

    s, calls = asyncio.run(main())
    assert_invariants(s)
    assert calls == [("postBind", "PostB", "p1", "n1"), ("postBind", "PostB", "p2", "n1")]
    assert phases == [("Bound", "n1"), ("Bound", "n1")]


# ---------------------------------------------------------------------------------------------------
# How many nodes Filter looks for


@pytest.mark.parametrize(
    ("percentage", "nodes", "expected"),
    [
        pytest.param(None, 50, 50, id="few-nodes-all"),
        pytest.param(None, 99, 99, id="just-under-minimum"),
        pytest.param(None, 100, 100, id="minimum-100"),
        pytest.param(None, 200, 100, id="200-nodes-at-least-100"),
        pytest.param(None, 1000, 420, id="adaptive-42-percent"),
        pytest.param(None, 5000, 500, id="adaptive-10-percent"),
        pytest.param(None, 6000, 300, id="adaptive-floor-5-percent"),  # 50 - 6000/125 = 2 -> 5%
        pytest.param(None, 10000, 500, id="adaptive-floor-5-percent-large"),
        pytest.param(0, 1000, 420, id="zero-means-adaptive"),
        pytest.param(30, 1000, 300, id="configured-30"),
        pytest.param(1, 5000, 100, id="configured-1-at-least-100"),
        pytest.param(50, 150, 100, id="configured-50-at-least-100"),
        pytest.param(100, 5000, 5000, id="configured-100-all"),
        pytest.param(100, 40, 40, id="configured-100-few"),
    ],
)
def test_num_feasible_nodes_to_find(percentage: int | None, nodes: int, expected: int) -> None:
    assert num_feasible_nodes_to_find(percentage, nodes) == expected


def _big_cluster(n: int, pods: list[str]) -> Callable[[], list[Pod | Node]]:
    return lambda: [node(f"n{i:03d}") for i in range(n)] + [pod(p) for p in pods]


def _scored_nodes(calls: list[Call], pod_name: str) -> list[str]:
    (call,) = [c for c in calls if c[0] == "preScore" and c[2] == pod_name]
    return list(call[3])


def test_filter_stops_at_100_feasible_nodes_and_start_index_rotates() -> None:
    names = [f"n{i:03d}" for i in range(200)]
    specs = [fake("Count", "filter"), fake("S", "preScore", "score")]
    s, calls = scenario(specs, _big_cluster(200, ["p1", "p2", "p3"]))

    # Exactly 100 feasible nodes go on to scoring, starting where the previous pod stopped.
    assert _scored_nodes(calls, "p1") == names[:100]
    assert _scored_nodes(calls, "p2") == names[100:]
    assert _scored_nodes(calls, "p3") == names[:100]
    for p in ("p1", "p2", "p3"):
        seen = [c[3] for c in calls if c[0] == "filter" and c[2] == p]
        assert len(seen) == len(set(seen)) >= 100
        assert set(_scored_nodes(calls, p)) <= set(seen)
    assert rec(s, "p1").pod.node_name in names[:100]
    assert rec(s, "p2").pod.node_name in names[100:]


def test_start_index_advances_by_feasible_plus_rejected_nodes() -> None:
    """kube-scheduler: ``processedNodes := len(feasibleNodes) + diagnosis.NodeToStatus.Len()``."""
    names = [f"n{i:03d}" for i in range(200)]
    rejected = set(names[:50])
    specs = [
        fake("Count", "filter", filter=lambda p, n: Status.unschedulable("cold") if n in rejected else SUCCESS),
        fake("S", "preScore", "score"),
    ]
    _, calls = scenario(specs, _big_cluster(200, ["p1", "p2"]))
    # p1 walks n000..n149: 50 rejected + 100 feasible, so p2 starts at n150 and wraps around.
    assert _scored_nodes(calls, "p1") == names[50:150]
    assert _scored_nodes(calls, "p2") == names[150:] + names[50:100]


def test_percentage_of_nodes_to_score_limits_feasible_nodes() -> None:
    names = [f"n{i:03d}" for i in range(200)]
    specs = [fake("Count", "filter"), fake("S", "preScore", "score")]
    _, calls = scenario(specs, _big_cluster(200, ["p1"]), percentage=100)
    assert _scored_nodes(calls, "p1") == names


# ---------------------------------------------------------------------------------------------------
# Selecting the host


def _tie_run(seed: int | None, n_pods: int = 40) -> dict[str, str]:
    pods = [f"p{i:02d}" for i in range(n_pods)]
    s, calls = scenario([fake("Tie", "score", score=50)], lambda: manifest(["n1", "n2"], pods), fit=False, seed=seed)
    assert len(points(calls, "score")) == n_pods
    return {p: rec(s, p).pod.node_name for p in pods}


def test_score_ties_are_broken_at_random() -> None:
    placement = _tie_run(seed=None)
    counts = collections.Counter(placement.values())
    assert set(counts) == {"n1", "n2"}, counts  # 40 fair coin flips: P(all one side) = 2**-39


def test_seeded_scheduler_breaks_ties_reproducibly() -> None:
    first = _tie_run(seed=1234)
    assert _tie_run(seed=1234) == first
    assert set(first.values()) == {"n1", "n2"}


def test_highest_score_wins_over_ties() -> None:
    specs = [fake("S", "score", score=by_node(n1=10, n2=90, n3=90))]
    s, _ = scenario(specs, lambda: manifest(["n1", "n2", "n3"], [f"p{i}" for i in range(10)]), fit=False)
    assert {rec(s, f"p{i}").pod.node_name for i in range(10)} <= {"n2", "n3"}


# ---------------------------------------------------------------------------------------------------
# No pod lost


def test_mixed_outcomes_leave_every_pod_accounted_for() -> None:
    """Pods failing at different points in one run: each ends bound or parked with its reason."""
    fail_at = {"p1": "preFilter", "p2": "filter", "p3": "reserve", "p4": "permit", "p5": "preBind", "p6": "bind"}

    def fails(point: str, status: Status) -> Callable[..., Any]:
        return lambda p, *rest: status if fail_at.get(p.name) == point else SUCCESS

    specs = [
        fake("X", "preFilter", "filter", "reserve", "permit", "preBind",
             preFilter=fails("preFilter", Status.unschedulable("pf")),
             filter=fails("filter", Status.unschedulable("f")),
             reserve=fails("reserve", Status.unschedulable("r")),
             permit=fails("permit", Status.unschedulable("pm")),
             preBind=fails("preBind", Status.failure("pb"))),
        fake("B", "bind", bind=lambda p, n: Status.failure("b") if fail_at.get(p.name) == "bind" else BIND),
    ]  # fmt: skip
    pods = ["p1", "p2", "p3", "p4", "p5", "p6", "p7"]
    s, calls = scenario(specs, lambda: manifest(["n1", "n2"], pods), binder=False)
    assert [p for p in pods if rec(s, p).phase == "Bound"] == ["p7"]
    for p in pods[:-1]:
        assert not status_of(s, p).ok
    # Every attempt that got past Reserve was unreserved exactly once, the bound pod's never. A pod X
    # rejected may be moved to backoffQ by the cycles beside its own and taken from it early once
    # activeQ is empty (SchedulerPopFromBackoffQ, on by default), so it may be tried more than once; p5
    # and p6 failed with an error and wait their backoff out, past the test's end.
    tries = {p: rec(s, p).attempts for p in pods}
    assert (tries["p5"], tries["p6"], tries["p7"]) == (1, 1, 1) and min(tries.values()) == 1
    unreserved = collections.Counter(c[2] for c in points(calls, "unreserve"))
    assert unreserved == {p: tries[p] for p in ("p3", "p4", "p5", "p6")}
    assert s.stats.attempts == sum(tries.values())


def test_no_nodes_is_unresolvable_and_skips_post_filter() -> None:
    """schedule_one.go: ``ErrNoNodesAvailable`` becomes UnschedulableAndUnresolvable at once; it is
    not a FitError, so PostFilter (preemption) does not run."""
    s, calls = scenario([fake("F", "filter"), fake("Post", "postFilter")], lambda: manifest([], ["p1"]))
    assert calls == []
    st = status_of(s, "p1")
    assert st.code is Code.UnschedulableAndUnresolvable
    assert st.message() == "no nodes available to schedule pods"
    assert s.queue_of("uid-p1") == "unschedulable"


def test_binding_a_pod_requeues_pods_waiting_for_an_assigned_pod() -> None:
    """A bound pod is an AssignedPodAdd event (kube-scheduler's informer adds it to the cache and
    moves the unschedulable pods whose rejecting plugins registered Pod/Add, e.g. InterPodAffinity)."""
    specs = [
        fake(
            "Affinity",
            "filter",
            events=[ClusterEvent("Pod", ActionType.Add)],
            filter=lambda p, n: Status.unschedulable("waiting for a peer") if p.name == "waiter" else SUCCESS,
        )
    ]
    s, _ = scenario(specs, lambda: [node("n1"), pod("waiter", priority=10), pod("peer")])
    assert rec(s, "peer").phase == "Bound"
    info = s.queue.info("uid-waiter")
    assert info is not None and info.unschedulable_plugins == {"Affinity"}
    # Moved to backoffQ by the binding, and taken from it at once since nothing else waits
    # (SchedulerPopFromBackoffQ, on by default): tried a second time, rejected again.
    assert (rec(s, "waiter").attempts, s.queue_of("uid-waiter")) == (2, "unschedulable")


def test_rejected_pod_is_not_requeued_by_its_own_forget() -> None:
    """A Reserve rejection parks the pod in the unschedulable pool even when the rejecting plugin
    registered assigned-pod deletes: undoing the pod's own assumption is not a cluster change that
    could help it (schedule_one.go moves no pod there, and handleBindingCycleError excludes the pod
    itself)."""
    specs = [
        fake(
            "Quota",
            "reserve",
            events=[ClusterEvent("Pod", ActionType.Delete)],
            reserve=Status.unschedulable("quota exceeded"),
        )
    ]
    s, _ = scenario(specs, one_node_one_pod)
    assert status_of(s, "p1") == Status(Code.Unschedulable, ("quota exceeded",), "Quota")
    assert (rec(s, "p1").phase, s.queue_of("uid-p1")) == ("Unschedulable", "unschedulable")


@dataclass
class _Named:
    name: str


@pytest.mark.parametrize(
    ("point", "message"),
    [
        # pkg/scheduler/framework/runtime/framework.go, v1.37 (as v1.35): the format string each point uses.
        pytest.param("PreFilter", 'running PreFilter plugin "X": why', id="running PreFilter plugin %q: %w"),
        pytest.param("filter", 'running "X" filter plugin: why', id="running %q filter plugin: %w"),
        pytest.param("PreFilterExtensionAddPod", 'running AddPod on PreFilter plugin "X": why',
                     id="running AddPod on PreFilter plugin %q: %w"),
        pytest.param("PreFilterExtensionRemovePod", 'running RemovePod on PreFilter plugin "X": why',
                     id="running RemovePod on PreFilter plugin %q: %w"),
        pytest.param("PreScore", 'running PreScore plugin "X": why', id="running PreScore plugin %q: %w"),
        pytest.param("Score", 'running Score plugins: plugin "X" failed with: why',
                     id="running Score plugins: plugin %q failed with: %w"),
        pytest.param("NormalizeScore", 'running Normalize on Score plugins: plugin "X" failed with: why',
                     id="running Normalize on Score plugins: plugin %q failed with: %w"),
        pytest.param("Reserve", 'running Reserve plugin "X": why', id="running Reserve plugin %q: %w"),
        pytest.param("Permit", 'running Permit plugin "X": why', id="running Permit plugin %q: %w"),
        pytest.param("PreBindPreFlight", 'running PreBindPreFlight "X": why', id="running PreBindPreFlight %q: %w"),
        pytest.param("PreBind", 'running PreBind plugin "X": why', id="running PreBind plugin %q: %w"),
        pytest.param("Bind", 'running Bind plugin "X": why', id="running Bind plugin %q: %w"),
    ],
)  # fmt: skip
def test_a_plugin_failure_is_worded_as_kube_scheduler_words_it(point: str, message: str) -> None:
    assert failed_status(point, _Named("X"), Status.failure("why")) == Status(Code.Error, (message,), "X")
    assert raised_status(point, _Named("X"), RuntimeError("why")).reasons == (message,)
    assert quoted('a"b\\c') == '"a\\"b\\\\c"'  # Go's %q escapes quotes and backslashes
