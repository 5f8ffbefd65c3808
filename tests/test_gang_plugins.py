"""kube-scheduler 1.37's workload-aware plugins (framework/plugins/gangscheduling.py): GangScheduling's
PreEnqueue, Permit, PlacementFeasible and queueing hints, PodGroupPodsCount's placement scores and
TopologyPlacementGenerator's placements, with kube-scheduler's exact messages; and GangScheduling in a
scheduler with the GenericWorkload gate on (pods held until their gang is complete, let in by the
PodGroup and pod events)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from framework import features
from framework.config import default_config
from framework.plugins import in_tree_registry
from framework.plugins.gangscheduling import (
    PERMIT_TIMEOUT_SECONDS,
    GangScheduling,
    PodGroupPodsCount,
    TopologyPlacementGenerator,
)
from framework.podgroups.store import ASSIGNED, ASSUMED, PodGroupStore
from framework.scheduler import Scheduler
from pluginhost.manifest import parse_objects
from pluginhost.model import Node, Pod
from pluginhost.placement import (
    Placement,
    PlacementProgress,
    PlacementScore,
    PodGroupAssignments,
    PodGroupInfo,
    ProposedAssignment,
)
from pluginhost.plugin import CycleState, QueueingHint
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import Code, Status
from pluginhost.workload import BASIC, GANG, PodGroup

PLUGIN = "GangScheduling"


def group(name: str = "g", min_count: int | None = 3, topology: tuple[str, ...] = ()) -> PodGroup:
    """A gang of ``min_count`` (None: the basic policy)."""
    if min_count is None:
        return PodGroup(name, uid=f"uid-{name}", policy=BASIC, topology_keys=topology)
    return PodGroup(name, uid=f"uid-{name}", policy=GANG, min_count=min_count, topology_keys=topology)


def member(name: str, group_name: str | None = "g", node: str = "") -> Pod:
    return Pod(name, uid=name, scheduling_group=group_name, node_name=node)


class FakeWaiting:
    def __init__(self, allowed: list[str], uid: str) -> None:
        self.allowed, self.uid = allowed, uid

    def allow(self, plugin: str) -> None:
        self.allowed.append(f"{self.uid}:{plugin}")


class FakeHandle:
    """The handle's parts the plugins read: the PodGroup store, waiting pods, the snapshot."""

    def __init__(self, store: PodGroupStore, waiting: frozenset[str] = frozenset(),
                 snapshot: Snapshot | None = None) -> None:
        self.store, self.waiting, self._snapshot = store, waiting, snapshot
        self.allowed: list[str] = []

    def pod_group_manager(self) -> PodGroupStore:
        return self.store

    def waiting_pod(self, uid: str) -> FakeWaiting | None:
        return FakeWaiting(self.allowed, uid) if uid in self.waiting else None

    def snapshot(self) -> Snapshot:
        assert self._snapshot is not None
        return self._snapshot


def store_with(groups: list[PodGroup], pods: list[Pod], placed: dict[str, str] | None = None,
               nodes: dict[str, str] | None = None) -> PodGroupStore:
    """A store holding ``groups`` and tracking ``pods``; ``placed``: uid -> assumed/assigned, ``nodes``:
    uid -> the node the cache holds it on."""
    placed, nodes = placed or {}, nodes or {}
    store = PodGroupStore(placed.get, nodes.get)
    for g in groups:
        store.put(g)
    for p in pods:
        store.track_pod(p)
    return store


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# ---- PreEnqueue ------------------------------------------------------------------------------------

PRE_ENQUEUE_CASES = [
    ("no scheduling group", [group()], [member("p", None)], Status(Code.Success)),
    ("group not there yet", [], [member("p")],
     Status(Code.UnschedulableAndUnresolvable,
            ('waiting for pods\'s pod group "g" to appear in scheduling queue',), PLUGIN)),
    ("basic policy", [group(min_count=None)], [member("p")], Status(Code.Success)),
    ("gang short of minCount", [group(min_count=3)], [member("p"), member("q")],
     Status(Code.UnschedulableAndUnresolvable,
            ("waiting for minCount pods from a gang to appear in scheduling queue",), PLUGIN)),
    ("gang of minCount", [group(min_count=2)], [member("p"), member("q")], Status(Code.Success)),
    ("bound members count", [group(min_count=3)], [member("p"), member("q", node="n1"), member("r", node="n2")],
     Status(Code.Success)),
    ("pods of another group do not count", [group(min_count=2), group("h", 1)], [member("p"), member("q", "h")],
     Status(Code.UnschedulableAndUnresolvable,
            ("waiting for minCount pods from a gang to appear in scheduling queue",), PLUGIN)),
]


@pytest.mark.parametrize(("groups", "pods", "want"), [c[1:] for c in PRE_ENQUEUE_CASES],
                         ids=[c[0] for c in PRE_ENQUEUE_CASES])
def test_pre_enqueue(groups: list[PodGroup], pods: list[Pod], want: Status) -> None:
    plugin = GangScheduling(None, FakeHandle(store_with(groups, pods)))  # type: ignore[arg-type]
    got = run(plugin.pre_enqueue(pods[0]))
    assert (got.code, got.reasons, got.plugin if got.code else "") == (want.code, want.reasons, want.plugin)


# ---- Permit ----------------------------------------------------------------------------------------

PERMIT_CASES = [
    # name, group, members, placed (uid -> state), waiting uids, want code, reasons, timeout, activated, allowed
    ("no scheduling group", group(), [member("p", None)], {}, set(), Code.Success, (), 0.0, None, []),
    ("basic policy", group(min_count=None), [member("p")], {"p": ASSUMED}, set(), Code.Success, (), 0.0, None, []),
    ("first of three waits and activates the rest", group(min_count=3), [member("p"), member("q"), member("r")],
     {"p": ASSUMED}, set(), Code.Wait, ("waiting for minCount pods from a gang to be scheduled",),
     PERMIT_TIMEOUT_SECONDS, ["default/q", "default/r"], []),
    ("bound pods count towards minCount", group(min_count=3), [member("p"), member("q", node="n"), member("r")],
     {"p": ASSUMED, "q": ASSIGNED}, set(), Code.Wait, ("waiting for minCount pods from a gang to be scheduled",),
     PERMIT_TIMEOUT_SECONDS, ["default/r"], []),
    ("the last one allows the waiting", group(min_count=3), [member("p"), member("q"), member("r")],
     {"p": ASSUMED, "q": ASSUMED, "r": ASSUMED}, {"p", "q"}, Code.Success, (), 0.0, None,
     ["p:GangScheduling", "q:GangScheduling"]),
    ("quorum with a bound member", group(min_count=2), [member("p"), member("q", node="n")],
     {"p": ASSUMED, "q": ASSIGNED}, set(), Code.Success, (), 0.0, None, []),
]


@pytest.mark.parametrize(("pg", "pods", "placed", "waiting", "code", "reasons", "timeout", "activated", "allowed"),
                         [c[1:] for c in PERMIT_CASES], ids=[c[0] for c in PERMIT_CASES])
def test_permit(pg: PodGroup, pods: list[Pod], placed: dict[str, str], waiting: frozenset[str], code: Code,
                reasons: tuple[str, ...], timeout: float, activated: list[str] | None, allowed: list[str]) -> None:
    handle = FakeHandle(store_with([pg], pods, placed), frozenset(waiting))
    plugin = GangScheduling(None, handle)  # type: ignore[arg-type]
    state = CycleState()
    status, got_timeout = run(plugin.permit(state, pods[0], "n1"))
    assert (status.code, status.reasons, got_timeout) == (code, reasons, timeout)
    assert state.get("kubernetes.io/pods-to-activate") == activated
    assert sorted(handle.allowed) == allowed


def test_permit_without_the_pod_group_is_an_error() -> None:
    plugin = GangScheduling(None, FakeHandle(store_with([], [member("p")])))  # type: ignore[arg-type]
    status, timeout = run(plugin.permit(CycleState(), member("p"), "n1"))
    assert (status.code, status.message(), timeout) == (
        Code.Error, 'failed to get podGroup default/g: podgroup.scheduling.k8s.io "g" not found', 0.0)


# ---- PlacementFeasible -----------------------------------------------------------------------------

FEASIBLE_CASES = [
    ("cannot reach minCount", 3, 0, 2, Code.Unschedulable,
     ("minCount (3) cannot be satisfied: 0 scheduled, 2 remaining",)),
    ("scheduled plus remaining short", 4, 1, 2, Code.Unschedulable,
     ("minCount (4) cannot be satisfied: 1 scheduled, 2 remaining",)),
    ("not yet", 3, 1, 2, Code.Wait, ("minCount (3) is not yet satisfied: 1 scheduled, 2 remaining",)),
    ("nothing tried yet", 2, 0, 5, Code.Wait, ("minCount (2) is not yet satisfied: 0 scheduled, 5 remaining",)),
    ("reached", 3, 3, 0, Code.Success, ()),
    ("more than reached", 3, 4, 1, Code.Success, ()),
    ("basic policy needs one", None, 1, 0, Code.Success, ()),
    ("basic policy, nothing placed", None, 0, 0, Code.Unschedulable,
     ("minCount (1) cannot be satisfied: 0 scheduled, 0 remaining",)),
]


@pytest.mark.parametrize(("min_count", "scheduled", "remaining", "code", "reasons"), [c[1:] for c in FEASIBLE_CASES],
                         ids=[c[0] for c in FEASIBLE_CASES])
def test_placement_feasible(min_count: int | None, scheduled: int, remaining: int, code: Code,
                            reasons: tuple[str, ...]) -> None:
    plugin = GangScheduling(None, None)
    status = run(plugin.placement_feasible(CycleState(), PodGroupInfo(group(min_count=min_count)),
                                           PlacementProgress(remaining=remaining, scheduled=scheduled)))
    assert (status.code, status.reasons) == (code, reasons)


# ---- queueing hints --------------------------------------------------------------------------------


def _hint(resource: str, action: str) -> Any:
    plugin = GangScheduling(None, None)
    return next(r.hint for r in plugin.events_to_register()
                if r.event.resource == resource and r.event.action.name == action)


HINT_CASES = [
    ("a pod of the group added", "UnscheduledPod", "Add", None, member("q"), QueueingHint.Queue),
    ("a bound pod of the group added", "AssignedPod", "Add", None, member("q", node="n"), QueueingHint.Queue),
    ("a pod of another group", "UnscheduledPod", "Add", None, member("q", "h"), QueueingHint.QueueSkip),
    ("a pod of no group", "AssignedPod", "Add", None, member("q", None), QueueingHint.QueueSkip),
    ("its PodGroup added", "PodGroup", "Add", None, group(), QueueingHint.Queue),
    ("another PodGroup added", "PodGroup", "Add", None, group("h"), QueueingHint.QueueSkip),
    ("minCount decreased", "PodGroup", "Update", group(min_count=4), group(min_count=3), QueueingHint.Queue),
    ("minCount unchanged", "PodGroup", "Update", group(min_count=3), group(min_count=3), QueueingHint.QueueSkip),
    ("minCount increased", "PodGroup", "Update", group(min_count=3), group(min_count=5), QueueingHint.QueueSkip),
    ("gang to basic", "PodGroup", "Update", group(min_count=3), group(min_count=None), QueueingHint.QueueSkip),
    ("another group's minCount decreased", "PodGroup", "Update", group("h", 4), group("h", 3),
     QueueingHint.QueueSkip),
]


@pytest.mark.parametrize(("resource", "action", "old", "new", "want"), [c[1:] for c in HINT_CASES],
                         ids=[c[0] for c in HINT_CASES])
def test_queueing_hints(resource: str, action: str, old: Any, new: Any, want: QueueingHint) -> None:
    assert _hint(resource, action)(member("p"), old, new) is want


def test_events_registered() -> None:
    events = [(r.event.resource, r.event.action.name) for r in GangScheduling(None, None).events_to_register()]
    assert events == [("UnscheduledPod", "Add"), ("AssignedPod", "Add"), ("PodGroup", "Add"), ("PodGroup", "Update")]


# ---- PodGroupPodsCount -----------------------------------------------------------------------------


def _assignments(name: str, count: int) -> PodGroupAssignments:
    return PodGroupAssignments(Placement(name, ("n1",)),
                               [ProposedAssignment(member(f"{name}-{i}"), "n1") for i in range(count)])


SCORE_CASES = [
    # name, already scheduled, proposed per placement, raw scores, normalized
    ("none scheduled before", 0, [3, 1, 2], [3, 1, 2], [100, 33, 66]),
    ("two scheduled before", 2, [3, 0, 1], [5, 2, 3], [100, 40, 60]),
    ("one placement", 0, [4], [4], [100]),
]


@pytest.mark.parametrize(("scheduled", "proposed", "raw", "normalized"), [c[1:] for c in SCORE_CASES],
                         ids=[c[0] for c in SCORE_CASES])
def test_pod_group_pods_count(scheduled: int, proposed: list[int], raw: list[int], normalized: list[int]) -> None:
    pods = [member(f"s{i}", node="n1") for i in range(scheduled)]
    store = store_with([group()], pods, {p.uid: ASSIGNED for p in pods})
    plugin = PodGroupPodsCount(None, FakeHandle(store))  # type: ignore[arg-type]
    info = PodGroupInfo(group())
    scores = []
    for i, n in enumerate(proposed):
        score, status = run(plugin.score_placement(CycleState(), info, _assignments(f"p{i}", n)))
        assert status.ok
        scores.append(PlacementScore(Placement(f"p{i}", ()), score))
    assert [s.score for s in scores] == raw
    assert plugin.placement_score_extensions() is plugin
    assert run(plugin.normalize_placement_score(CycleState(), info, scores)).ok
    assert [s.score for s in scores] == normalized


def test_pod_group_pods_count_refuses_all_zero() -> None:
    plugin = PodGroupPodsCount(None, FakeHandle(store_with([group()], [])))  # type: ignore[arg-type]
    scores = [PlacementScore(Placement("a", ()), 0), PlacementScore(Placement("b", ()), 0)]
    status = run(plugin.normalize_placement_score(CycleState(), PodGroupInfo(group()), scores))
    assert (status.code, status.message()) == (
        Code.Error, "no pods from pod group are assigned to any of the candidate placements")


# ---- TopologyPlacementGenerator --------------------------------------------------------------------

ZONES = {"n1": "a", "n2": "b", "n3": "a", "n4": "c", "n5": ""}


def _snapshot() -> Snapshot:
    table = ClusterTable()
    for name, zone in ZONES.items():
        labels = {"zone": zone} if zone else {}
        table.upsert_node(Node(name, labels={**labels, "rack": f"r-{name}"}, allocatable={"cpu": 1000}))
    return table.snapshot()


PLACEMENT_CASES = [
    # name, topology keys, scheduled pods (name -> node), want placements (name, nodes)
    ("no topology key: the parent", (), {}, [("", ("n1", "n2", "n3", "n4", "n5"))]),
    ("one placement per zone, nodes without the label left out", ("zone",), {},
     [("a", ("n1", "n3")), ("b", ("n2",)), ("c", ("n4",))]),
    ("only the first key is used", ("zone", "rack"), {}, [("a", ("n1", "n3")), ("b", ("n2",)), ("c", ("n4",))]),
    ("scheduled pods pin their zone", ("zone",), {"s1": "n3"}, [("a", ("n1", "n3"))]),
    ("a key no node has", ("missing",), {}, []),
]


@pytest.mark.parametrize(("keys", "scheduled", "want"), [c[1:] for c in PLACEMENT_CASES],
                         ids=[c[0] for c in PLACEMENT_CASES])
def test_topology_placements(keys: tuple[str, ...], scheduled: dict[str, str],
                             want: list[tuple[str, tuple[str, ...]]]) -> None:
    pods = [member(name) for name in scheduled]
    store = store_with([group(topology=keys)], pods, {p: ASSIGNED for p in scheduled}, scheduled)
    plugin = TopologyPlacementGenerator(None, FakeHandle(store, snapshot=_snapshot()))  # type: ignore[arg-type]
    parent = Placement("", tuple(ZONES))
    placements, status = run(plugin.generate_placements(CycleState(), PodGroupInfo(group(topology=keys)), parent))
    assert status.ok
    assert [(p.name, p.nodes) for p in placements] == want


def test_topology_placements_of_a_narrower_parent_keep_its_nodes_and_order() -> None:
    store = store_with([group(topology=("zone",))], [])
    plugin = TopologyPlacementGenerator(None, FakeHandle(store, snapshot=_snapshot()))  # type: ignore[arg-type]
    parent = Placement("p", ("n4", "n3", "n2", "n1"))
    placements, status = run(plugin.generate_placements(CycleState(), PodGroupInfo(group(topology=("zone",))), parent))
    assert status.ok
    assert [(p.name, p.nodes) for p in placements] == [("c", ("n4",)), ("a", ("n3", "n1")), ("b", ("n2",))]


def test_topology_domains_follow_the_nodes_from_one_snapshot_to_the_next() -> None:
    # The domains of every node are worked out once per node table: a pod placed keeps the table (the
    # same domains, not built again); a node relabelled makes a new one, whose domains show it.
    table = ClusterTable()
    for name, zone in ZONES.items():
        table.upsert_node(Node(name, labels={"zone": zone} if zone else {}, allocatable={"cpu": 1000}))
    handle = FakeHandle(store_with([group(topology=("zone",))], []), snapshot=table.snapshot())
    plugin = TopologyPlacementGenerator(None, handle)  # type: ignore[arg-type]
    info = PodGroupInfo(group(topology=("zone",)))

    def placements() -> list[Placement]:
        snap = handle.snapshot()
        got, status = run(plugin.generate_placements(CycleState(), info, Placement("", snap.names)))
        assert status.ok
        return got

    first = placements()
    table.place_pod(member("s1"), "n1")
    handle._snapshot = table.snapshot()
    again = placements()
    assert [p.nodes for p in again] == [("n1", "n3"), ("n2",), ("n4",)]
    assert all(a.nodes is b.nodes for a, b in zip(first, again, strict=True))
    table.upsert_node(Node("n5", labels={"zone": "c"}, allocatable={"cpu": 1000}))
    handle._snapshot = table.snapshot()
    assert [(p.name, p.nodes) for p in placements()] == [("a", ("n1", "n3")), ("b", ("n2",)), ("c", ("n4", "n5"))]


PLACEMENT_ERRORS = [
    ("scheduled pods in two zones", {"s1": "n1", "s2": "n2"},
     "cannot determine domain for already scheduled pods: more than 1 domain found for pod group: a, b"),
    ("a scheduled pod on a node without the label", {"s1": "n5"},
     "cannot determine domain for already scheduled pods: no topology domain found for pod default/s1"),
]


@pytest.mark.parametrize(("scheduled", "message"), [c[1:] for c in PLACEMENT_ERRORS],
                         ids=[c[0] for c in PLACEMENT_ERRORS])
def test_topology_placement_errors(scheduled: dict[str, str], message: str) -> None:
    pods = [member(name) for name in scheduled]
    store = store_with([group(topology=("zone",))], pods, {p: ASSUMED for p in scheduled}, scheduled)
    plugin = TopologyPlacementGenerator(None, FakeHandle(store, snapshot=_snapshot()))  # type: ignore[arg-type]
    placements, status = run(plugin.generate_placements(CycleState(), PodGroupInfo(group(topology=("zone",))),
                                                        Placement("", tuple(ZONES))))
    assert (placements, status.code, status.message()) == ([], Code.Error, message)


# ---- in a scheduler ----------------------------------------------------------------------------------


@pytest.fixture
def workload_gates() -> Iterator[None]:
    old = features.install(features.parse("GenericWorkload=true,TopologyAwareWorkloadScheduling=true"))
    try:
        yield
    finally:
        features.install(old)


GANG_POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  schedulingGroup: {{podGroupName: train}}
  containers: [{{name: c, image: x}}]
"""
TRAIN = """
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {{name: train}}
spec:
  schedulingPolicy: {{gang: {{minCount: {min_count}}}}}
"""


def test_gang_scheduling_in_a_scheduler_reads_the_embedded_store(workload_gates: None) -> None:
    """With GenericWorkload on, the default profile's GangScheduling reads the scheduler's PodGroup store:
    the pods applied name their group, PreEnqueue answers from the group applied, and a deleted pod
    leaves its group."""

    async def scenario() -> None:
        registry = in_tree_registry()
        sched = Scheduler(default_config(registry.points()), registry)
        gang = next(p for p in sched.profiles["default-scheduler"].pre_enqueue_plugins if p.name == PLUGIN)
        await sched.apply(parse_objects(GANG_POD.format(name="w0") + "---" + GANG_POD.format(name="w1")))
        w0 = sched.get_pod("default", "w0")
        assert w0 is not None
        assert (await gang.pre_enqueue(w0.pod)).message() == \
            'waiting for pods\'s pod group "train" to appear in scheduling queue'
        results = await sched.apply(parse_objects(TRAIN.format(min_count=3)))
        assert [(r.kind, r.name, r.action) for r in results] == [("PodGroup", "train", "created")]
        assert (await gang.pre_enqueue(w0.pod)).message() == \
            "waiting for minCount pods from a gang to appear in scheduling queue"
        assert [p.name for p in sched.cache.podgroups.members("default", "train")] == ["w0", "w1"]
        await sched.apply(parse_objects(TRAIN.format(min_count=2)))
        assert (await gang.pre_enqueue(w0.pod)).ok
        sched.delete_pod("default", "w1")
        assert [p.name for p in sched.cache.podgroups.members("default", "train")] == ["w0"]
        assert (await gang.pre_enqueue(w0.pod)).message() == \
            "waiting for minCount pods from a gang to appear in scheduling queue"

    asyncio.run(scenario())


def test_the_in_tree_registry_runs_the_workload_plugins(workload_gates: None) -> None:
    """Nothing dropped: the default profile runs GangScheduling at PreEnqueue and Permit, and lists the
    placement plugins at their pod-group points, with kube-scheduler 1.37's weights."""
    registry = in_tree_registry()
    cfg = default_config(registry.points())
    assert not [w for w in cfg.warnings if "GangScheduling" in w or "Placement" in w or "PodGroupPodsCount" in w]
    profile = cfg.profiles[0]
    assert [ref.name for ref in profile.plugins["permit"]] == [PLUGIN]
    assert [ref.name for ref in profile.plugins["preEnqueue"]][-1] == PLUGIN
    assert {point: [(r.name, r.weight) for r in refs] for point, refs in profile.pod_group_plugins.items()} == {
        "placementGenerate": [("TopologyPlacementGenerator", 0)],
        "placementScore": [("NodeResourcesFit", 1), ("PodGroupPodsCount", 1)],
        "podGroupPostFilter": [("DynamicResources", 0), ("DefaultPreemption", 0)],
    }
