"""DynamicResources for pods with ResourceClaims, point by point, as kube-scheduler v1.37.2's plugin
(``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`` with its default gates; the
messages are read from it and from ``k8s.io/dynamic-resource-allocation/resourceclaim``).

Each test builds nodes n0 and n1 and a DraStore (tests/dra_fixtures.py) and calls the plugin as the
framework does; scheduling whole pods through the embedded store is test_dra_scheduling.py's.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from dra_fixtures import (
    DRIVER,
    SnapshotHandle,
    allocated,
    claim,
    cluster,
    device,
    device_class,
    gpu_pod,
    node_slice,
    request,
)

from framework.dra.models import ResourceClaim
from framework.dra.store import FINALIZER, DraConflict, DraStore
from framework.plugins.dynamicresources import DynamicResources, allocated_devices
from pluginhost.model import Pod
from pluginhost.plugin import CycleState, NodeBatch, NodeToStatus, QueueingHint
from pluginhost.snapshot import ClusterTable
from pluginhost.status import Code, Status

UU = Code.UnschedulableAndUnresolvable
NAME = "DynamicResources"
CLASS = device_class()
N0_GPUS = node_slice("n0", device("gpu-0"))


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def plugin(table: ClusterTable, **args: Any) -> DynamicResources:
    return DynamicResources(args or None, SnapshotHandle(table))  # type: ignore[arg-type]


def filter_all(pl: DynamicResources, table: ClusterTable, pod: Pod) -> tuple[CycleState, Status, list[Status]]:
    snap = table.snapshot()
    state = CycleState(snapshot=snap)
    _, status = run(pl.pre_filter(state, pod))
    if not status.ok:
        return state, status, []
    result = run(pl.filter(state, pod, NodeBatch(snap, np.arange(len(snap), dtype=np.int64))))
    return state, status, [result.status_at(i, NAME) for i in range(len(snap))]


def st(code: Code, *reasons: str) -> Status:
    return Status(code, reasons, NAME)


OK = Status()

# ---- PreEnqueue ----------------------------------------------------------------------------------

PRE_ENQUEUE = [  # (store objects, pod, the status)
    pytest.param([claim("c")], gpu_pod(("gpu", "c")), OK, id="named-claim-exists"),
    pytest.param([], gpu_pod(("gpu", "c")), st(UU, 'could not find ResourceClaim "ns/c"'), id="named-claim-missing"),
    pytest.param([claim("c", deleting=True)], gpu_pod(("gpu", "c")), st(UU, 'resourceclaim "c" is being deleted'),
                 id="claim-being-deleted"),
    pytest.param([], gpu_pod(("gpu", "template:t")), st(UU, 'pod "ns/p": ResourceClaim not created yet'),
                 id="template-claim-not-created"),
    pytest.param([claim("p-gpu-x", owner="pod-uid")], gpu_pod(("gpu", "template:t"), statuses={"gpu": "p-gpu-x"}),
                 OK, id="template-claim-owned-by-the-pod"),
    pytest.param([claim("p-gpu-x", owner="other")], gpu_pod(("gpu", "template:t"), statuses={"gpu": "p-gpu-x"}),
                 st(UU, "ResourceClaim ns/p-gpu-x was not created for Pod ns/p (Pod is not owner)"),
                 id="template-claim-of-another-pod"),
    pytest.param([claim("p-gpu-x")], gpu_pod(("gpu", "template:t"), statuses={"gpu": "p-gpu-x"}),
                 st(UU, "ResourceClaim ns/p-gpu-x was not created for Pod ns/p (Pod is not owner)"),
                 id="template-claim-without-owner"),
    pytest.param([], gpu_pod(("gpu", "template:t"), statuses={"gpu": ""}), OK, id="template-claim-not-wanted"),
]


@pytest.mark.parametrize(("objects", "pod", "want"), PRE_ENQUEUE)
def test_pre_enqueue_waits_for_every_claim(objects: list[dict[str, Any]], pod: Pod, want: Status) -> None:
    table, _ = cluster(*objects)
    assert run(plugin(table).pre_enqueue(pod)) == want


# ---- PreFilter -----------------------------------------------------------------------------------

RESERVED_256 = tuple((f"q{i}", f"q-uid-{i}") for i in range(256))
FIRST_AVAILABLE = {"name": "gpu", "firstAvailable": [
    {"name": "a", "deviceClassName": "gpu"}, {"name": "b", "deviceClassName": "missing"}]}

PRE_FILTER = [  # (store objects, pod, the status)
    pytest.param([CLASS, claim("c")], gpu_pod(("gpu", "c")), OK, id="claim-to-allocate"),
    pytest.param([CLASS], gpu_pod(("gpu", "template:t"), statuses={"gpu": ""}), Status(Code.Skip),
                 id="no-claim-after-all-skips"),
    pytest.param([CLASS, claim("c", status=allocated("gpu-0", reserved=RESERVED_256))], gpu_pod(("gpu", "c")),
                 st(UU, "resourceclaim in use"), id="reserved-by-256-pods"),
    pytest.param([CLASS, claim("c", status=allocated("gpu-0", reserved=(*RESERVED_256[:255], ("p", "pod-uid"))))],
                 gpu_pod(("gpu", "c")), OK, id="reserved-by-256-pods-this-one-among-them"),
    pytest.param([claim("c")], gpu_pod(("gpu", "c")), st(UU, "request gpu: device class gpu does not exist"),
                 id="class-missing"),
    pytest.param([CLASS, claim("c", FIRST_AVAILABLE)], gpu_pod(("gpu", "c")),
                 st(UU, "request gpu/b: device class missing does not exist"), id="subrequest-class-missing"),
    pytest.param([claim("c", status=allocated("gpu-0"))], gpu_pod(("gpu", "c")), OK,
                 id="allocated-claims-need-no-class"),
]


@pytest.mark.parametrize(("objects", "pod", "want"), PRE_FILTER)
def test_pre_filter_checks_claims_and_classes(objects: list[dict[str, Any]], pod: Pod, want: Status) -> None:
    table, _ = cluster(*objects)
    state = CycleState(snapshot=table.snapshot())
    assert run(plugin(table).pre_filter(state, pod)) == (None, want)


def test_pre_filter_waits_for_a_claim_another_pod_is_allocating() -> None:
    table, store = cluster(CLASS, N0_GPUS, claim("c"))
    first, second = gpu_pod(("gpu", "c"), name="p1", uid="u1"), gpu_pod(("gpu", "c"), name="p2", uid="u2")
    pl = plugin(table)
    state, _, _ = filter_all(pl, table, first)
    assert run(pl.reserve(state, first, "n0")) == OK
    assert store.pending("uid-c") is not None
    _, status, _ = filter_all(pl, table, second)
    assert status == st(UU, "resource claim ns/c is in the process of being allocated")


# ---- Filter --------------------------------------------------------------------------------------

CEL_ERROR = (f'claim ns/c: selector #0 on device {DRIVER}/n0/gpu-0: CEL runtime error: no such key: missing. '
             "consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for "
             "optional fields")
INVALID_POOL = [node_slice("n1", device("gpu-0"), name="a"), node_slice("n1", device("gpu-0"), name="b")]
for _s in INVALID_POOL:
    _s["spec"]["pool"]["resourceSliceCount"] = 2

FILTER = [  # (store objects, pod, the statuses on n0 and n1)
    pytest.param([CLASS, N0_GPUS, claim("c")], gpu_pod(("gpu", "c")),
                 [OK, st(UU, "cannot allocate all claims")], id="allocated-where-the-device-is"),
    pytest.param([CLASS, N0_GPUS, claim("c", request(count=2))], gpu_pod(("gpu", "c")),
                 [st(UU, "cannot allocate all claims")] * 2, id="too-few-devices"),
    pytest.param([CLASS, N0_GPUS, claim("c"), claim("other", status=allocated("gpu-0"))], gpu_pod(("gpu", "c")),
                 [st(UU, "cannot allocate all claims")] * 2, id="device-taken-by-another-claim"),
    pytest.param([CLASS, N0_GPUS, claim("c"), claim("other", status=allocated("gpu-0", adminAccess=True))],
                 gpu_pod(("gpu", "c")), [OK, st(UU, "cannot allocate all claims")],
                 id="admin-access-takes-no-device"),
    pytest.param([CLASS, N0_GPUS, claim("c", status=allocated("gpu-0", node="n1"))], gpu_pod(("gpu", "c")),
                 [st(UU, "resourceclaim not available on the node"), OK], id="allocated-claim-pinned-to-its-node"),
    pytest.param([CLASS, N0_GPUS, claim("c", request(selectors=[
        {"cel": {"expression": f'device.attributes["{DRIVER}"].missing == 1'}}]))], gpu_pod(("gpu", "c")),
                 [Status(Code.Error, (CEL_ERROR,), NAME), st(UU, "cannot allocate all claims")],
                 id="broken-selector-is-an-error"),
    pytest.param([CLASS, N0_GPUS, *INVALID_POOL, claim("c")], gpu_pod(("gpu", "c")),
                 [OK, st(UU, "invalid resource pools were encountered")], id="invalid-pool-fails-its-node-only"),
]


@pytest.mark.parametrize(("objects", "pod", "want"), FILTER)
def test_filter_allocates_on_each_node(objects: list[dict[str, Any]], pod: Pod, want: list[Status]) -> None:
    table, _ = cluster(*objects)
    _, status, statuses = filter_all(plugin(table), table, pod)
    assert (status, statuses) == (OK, want)


def test_filter_past_its_timeout_is_an_error_naming_the_node(monkeypatch: pytest.MonkeyPatch) -> None:
    table, _ = cluster(CLASS, N0_GPUS, claim("c"))
    # A clock 100 s ahead at every reading: the search is past its 10 s as soon as it looks.
    ticks = itertools.count(0, 100)
    monkeypatch.setattr(time, "monotonic", lambda: float(next(ticks)))
    _, _, statuses = filter_all(plugin(table, filterTimeout="10s"), table, gpu_pod(("gpu", "c")))
    assert statuses == [Status(Code.Error, (f"node n{i}: timed out trying to allocate devices",), NAME)
                        for i in range(2)]


def test_filter_counts_devices_of_allocations_reserve_made() -> None:
    table, _ = cluster(CLASS, N0_GPUS, claim("c1", uid="u-c1"), claim("c2", uid="u-c2"))
    pl = plugin(table)
    first, second = gpu_pod(("gpu", "c1"), name="p1", uid="u1"), gpu_pod(("gpu", "c2"), name="p2", uid="u2")
    state, _, _ = filter_all(pl, table, first)
    assert run(pl.reserve(state, first, "n0")) == OK
    assert filter_all(pl, table, second)[2] == [st(UU, "cannot allocate all claims")] * 2
    run(pl.unreserve(state, first, "n0"))
    assert filter_all(pl, table, second)[2] == [OK, st(UU, "cannot allocate all claims")]


# ---- PostFilter ----------------------------------------------------------------------------------

POST_FILTER = [  # (the claim's reservations, the status, whether the claim is deallocated)
    pytest.param((), st(Code.Unschedulable, "deallocation of ResourceClaim completed"), True, id="reserved-by-none"),
    pytest.param((("p", "pod-uid"),), st(Code.Unschedulable, "deallocation of ResourceClaim completed"), True,
                 id="reserved-by-this-pod-only"),
    pytest.param((("q", "q-uid"),), Status(Code.Unschedulable), False, id="in-use-by-another-pod"),
]


@pytest.mark.parametrize(("reserved", "want", "deallocated"), POST_FILTER)
def test_post_filter_deallocates_an_unusable_claim_nobody_else_uses(reserved: tuple[tuple[str, str], ...],
                                                                   want: Status, deallocated: bool) -> None:
    table, store = cluster(CLASS, node_slice("n2", device("gpu-0")),
                           claim("c", status=allocated("gpu-0", node="n2", reserved=reserved)))
    pl, pod = plugin(table), gpu_pod(("gpu", "c"))
    state, _, statuses = filter_all(pl, table, pod)
    assert statuses == [st(UU, "resourceclaim not available on the node")] * 2
    assert run(pl.post_filter(state, pod, NodeToStatus())) == (None, want)
    c = store.claim("ns", "c")
    assert c is not None and (c.allocation is None, c.reserved_for == ()) == (deallocated, deallocated)


def test_post_filter_without_claims_or_state() -> None:
    table, _ = cluster()
    pl, pod = plugin(table), gpu_pod()
    assert run(pl.post_filter(CycleState(snapshot=table.snapshot()), pod, NodeToStatus())) == (
        None, Status(Code.Error, ("not found",), NAME))
    state, _, _ = filter_all(pl, table, pod)
    assert run(pl.post_filter(state, pod, NodeToStatus())) == (None, Status(Code.Unschedulable))


# ---- Score ---------------------------------------------------------------------------------------


def test_score_prefers_the_node_with_an_earlier_first_available_choice() -> None:
    subrequests = {"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu", "selectors": [
            {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "h100"'}}]},
        {"name": "small", "deviceClassName": "gpu"}]}
    table, _ = cluster(CLASS, node_slice("n0", device("gpu-0", "a100")), node_slice("n1", device("gpu-0", "h100")),
                       claim("c", subrequests), nodes=3)
    pl, pod = plugin(table), gpu_pod(("gpu", "c"))
    state, _, statuses = filter_all(pl, table, pod)
    assert [s.code for s in statuses] == [Code.Success, Code.Success, UU]
    batch = NodeBatch(table.snapshot(), np.arange(2, dtype=np.int64))
    scores = run(pl.score(state, pod, batch))
    assert scores.tolist() == [7, 8]
    run(pl.normalize_score(state, pod, batch, scores))
    assert scores.tolist() == [87, 100]
    assert [d["request"] for d in allocated_devices(state, "n1")] == ["gpu/big"]


# ---- Reserve, PreBind, Unreserve -----------------------------------------------------------------


def bound(table: ClusterTable, pod: Pod, node: str = "n0", **args: Any) -> tuple[DynamicResources, CycleState, Status]:
    pl = plugin(table, **args)
    state, _, _ = filter_all(pl, table, pod)
    assert run(pl.reserve(state, pod, node)) == OK
    assert run(pl.pre_bind_pre_flight(state, pod, node)) == OK
    return pl, state, run(pl.pre_bind(state, pod, node))


def test_pre_bind_writes_the_allocation_and_the_reservation() -> None:
    table, store = cluster(CLASS, N0_GPUS, claim("c"))
    pod = gpu_pod(("gpu", "c"))
    _, _, status = bound(table, pod)
    assert status == OK
    c = store.claim("ns", "c")
    assert c is not None and c.allocation is not None
    assert [(r.request, r.driver, r.pool, r.device) for r in c.allocation.results] == [("gpu", DRIVER, "n0", "gpu-0")]
    assert (c.reserved_for, c.finalizers) == ((("pods", "p", "pod-uid"),), (FINALIZER,))
    assert c.allocated_at is not None and abs(c.allocated_at - time.time()) < 3600
    assert store.pending("uid-c") is None


def test_a_shared_claim_is_reserved_for_each_pod_on_its_node() -> None:
    table, store = cluster(CLASS, N0_GPUS, claim("c"))
    first, second = gpu_pod(("gpu", "c"), name="p1", uid="u1"), gpu_pod(("gpu", "c"), name="p2", uid="u2")
    assert bound(table, first)[2] == OK
    pl = plugin(table)
    state, _, statuses = filter_all(pl, table, second)
    assert statuses == [OK, st(UU, "resourceclaim not available on the node")]
    assert allocated_devices(state, "n0") == [{"claim": "ns/c", "request": "gpu", "driver": DRIVER, "pool": "n0",
                                               "device": "gpu-0", "allocated": True}]
    assert run(pl.reserve(state, second, "n0")) == OK and run(pl.pre_bind(state, second, "n0")) == OK
    c = store.claim("ns", "c")
    assert c is not None and c.reserved_for == (("pods", "p1", "u1"), ("pods", "p2", "u2"))
    run(pl.unreserve(state, second, "n0"))
    c = store.claim("ns", "c")
    assert c is not None and c.reserved_for == (("pods", "p1", "u1"),)


class FlakyWriter:
    """Loses the first ``conflicts`` writes, then writes into the store; ``before`` runs before each try."""

    def __init__(self, store: DraStore, conflicts: int, before: Any = None) -> None:
        self.inner, self.conflicts, self.before, self.calls = store.writer, conflicts, before, 0

    async def write_claim_status(self, c: ResourceClaim, status: Any) -> ResourceClaim:
        self.calls += 1
        if self.before is not None:
            self.before()
        if self.calls <= self.conflicts:
            raise DraConflict("the object has been modified")
        return await self.inner.write_claim_status(c, status)


def test_pre_bind_tries_a_conflicting_write_again() -> None:
    table, store = cluster(CLASS, N0_GPUS, claim("c"))
    store.writer = writer = FlakyWriter(store, conflicts=2)
    assert bound(table, gpu_pod(("gpu", "c")))[2] == OK
    assert writer.calls == 3


def test_pre_bind_gives_up_after_five_conflicts() -> None:
    table, store = cluster(CLASS, N0_GPUS, claim("c"))
    store.writer = writer = FlakyWriter(store, conflicts=99)
    status = bound(table, gpu_pod(("gpu", "c")))[2]
    assert status == Status(Code.Error, ("add allocation and reservation to claim ns/c: the object has been "
                                         "modified",), NAME)
    assert writer.calls == 5


class ReadBackWriter:
    """Loses the first write, reading the claim back as ``latest`` (None: not read back); then records what
    each write started from: (resourceVersion, the reservedFor uids it sends)."""

    def __init__(self, latest: ResourceClaim | None) -> None:
        self.latest = latest
        self.sent: list[tuple[str, list[str]]] = []

    async def write_claim_status(self, c: ResourceClaim, status: Any) -> ResourceClaim:
        self.sent.append((c.resource_version, [r["uid"] for r in status.get("reservedFor") or ()]))
        if len(self.sent) == 1:
            raise DraConflict("the object has been modified", self.latest)
        return replace(c, resource_version="13")


@pytest.mark.parametrize(("read_back", "want"), [
    pytest.param(True, [("10", ["u1", "u2"]), ("12", ["u1", "u3", "u2"])], id="retry-from-the-claim-read-back"),
    pytest.param(False, [("10", ["u1", "u2"]), ("10", ["u1", "u2"])], id="retry-from-the-store"),
])
def test_pre_bind_retries_a_shared_claim_from_the_claim_read_back(read_back: bool,
                                                                  want: list[tuple[str, list[str]]]) -> None:
    # Another pod (u3) reserved the claim meanwhile: the store has not seen it, the writer's read did.
    shared = allocated("gpu-0", reserved=(("p1", "u1"),))
    table, store = cluster(CLASS, N0_GPUS, claim("c", status=shared, rv="10"))
    newer = store.decode("ResourceClaim", claim("c", status=allocated("gpu-0", reserved=(("p1", "u1"), ("p3", "u3"))),
                                                rv="12"))
    assert isinstance(newer, ResourceClaim)
    store.writer = writer = ReadBackWriter(newer if read_back else None)
    assert bound(table, gpu_pod(("gpu", "c"), name="p2", uid="u2"))[2] == OK
    assert writer.sent == want


class LaggingServer:
    """An API server for one claim whose watch has not delivered yet: it keeps the claim's versions apart from
    the store, refuses a write that carries another resourceVersion than its own (a conflict, the claim read
    back), and answers each write after a round trip, so writes sent at once interleave as on the wire."""

    #: The API server's validation of a claim reserved for more pods than it allows.
    TOO_MANY = ('ResourceClaim.resource.k8s.io "c" is invalid: status.reservedFor: Too many: 257: must have at '
                'most 256 items')

    def __init__(self, store: DraStore, key: str) -> None:
        self.store, self.claim = store, store.claims[key]
        self.writes = self.conflicts = 0

    def change(self, status: dict[str, Any]) -> None:
        """Someone else writes the claim's status (a new resourceVersion)."""
        raw = {**self.claim.raw, "status": status}
        raw["metadata"] = {**raw["metadata"], "resourceVersion": str(int(self.claim.resource_version) + 1)}
        stored = self.store.decode("ResourceClaim", raw)
        assert isinstance(stored, ResourceClaim)
        self.claim = stored

    async def write_claim_status(self, c: ResourceClaim, status: Any) -> ResourceClaim:
        self.writes += 1
        await asyncio.sleep(0)
        if c.resource_version != self.claim.resource_version:
            self.conflicts += 1
            raise DraConflict("the object has been modified", self.claim)
        if len(status.get("reservedFor") or ()) > 256:
            raise RuntimeError(self.TOO_MANY)
        self.change(status)
        return self.claim


@pytest.mark.parametrize(("pods", "foreign", "writes", "conflicts"), [
    pytest.param(1, False, 1, 0, id="one-pod"),
    pytest.param(5, False, 5, 0, id="five-pods-at-once-one-write-each"),
    pytest.param(12, False, 12, 0, id="twelve-pods-at-once-one-write-each"),
    # Another writer changed the claim after the pods read it: the first write is refused once and retried
    # from the claim read back; the others start from the version it stored.
    pytest.param(5, True, 6, 1, id="changed-by-someone-else-first"),
])
def test_pods_sharing_a_claim_reserve_it_one_write_each_without_racing_to_conflicts(
        pods: int, foreign: bool, writes: int, conflicts: int) -> None:
    shared = allocated("gpu-0", reserved=(("p0", "u0"),))
    table, store = cluster(CLASS, N0_GPUS, claim("c", status=shared, rv="10"))
    store.writer = server = LaggingServer(store, "ns/c")
    pl = plugin(table)
    cycles = []
    for i in range(1, pods + 1):  # each pod's scheduling cycle, one after the other, all reading version 10
        pod = gpu_pod(("gpu", "c"), name=f"p{i}", uid=f"u{i}")
        state, status, statuses = filter_all(pl, table, pod)
        assert (status, statuses[0]) == (OK, OK)
        assert run(pl.reserve(state, pod, "n0")) == OK
        cycles.append((state, pod))
    if foreign:
        server.change({**shared, "devices": [{"driver": DRIVER, "pool": "n0", "device": "gpu-0"}]})

    async def bind_all() -> list[Status]:  # their binding cycles at once
        return list(await asyncio.gather(*(pl.pre_bind(state, pod, "n0") for state, pod in cycles)))

    assert run(bind_all()) == [OK] * pods
    assert (server.writes, server.conflicts) == (writes, conflicts)
    assert server.claim.reserved_for == tuple(("pods", f"p{i}", f"u{i}") for i in range(pods + 1))
    assert server.claim.resource_version == str(10 + pods + foreign)
    c = store.claim("ns", "c")  # the last write's answer, read until the watch delivers it
    assert c is not None and c.resource_version == server.claim.resource_version
    assert store.is_assumed("ns/c")


def test_pods_past_the_reserved_for_limit_are_refused_by_the_api_server_then_turned_away() -> None:
    # 254 pods hold the claim; four more passed PreFilter at once: two fit in reservedFor's 256, the other
    # two are refused by the API server (as kube-scheduler's are), and a pod scheduled next sees it in use.
    shared = allocated("gpu-0", reserved=tuple((f"q{i}", f"v{i}") for i in range(254)))
    table, store = cluster(CLASS, N0_GPUS, claim("c", status=shared, rv="10"))
    store.writer = server = LaggingServer(store, "ns/c")
    pl = plugin(table)
    cycles = []
    for i in range(1, 5):
        pod = gpu_pod(("gpu", "c"), name=f"p{i}", uid=f"u{i}")
        state, status, _ = filter_all(pl, table, pod)
        assert status == OK and run(pl.reserve(state, pod, "n0")) == OK
        cycles.append((state, pod))

    async def bind_all() -> list[Status]:
        return list(await asyncio.gather(*(pl.pre_bind(state, pod, "n0") for state, pod in cycles)))

    refused = st(Code.Error, f"add reservation to claim ns/c: {LaggingServer.TOO_MANY}")
    assert run(bind_all()) == [OK, OK, refused, refused]
    assert (server.writes, server.conflicts) == (4, 0)
    assert [r[1] for r in server.claim.reserved_for[254:]] == ["p1", "p2"]
    store.put(server.claim)  # the watch delivers it
    assert filter_all(pl, table, gpu_pod(("gpu", "c"), name="p3", uid="u3"))[1] == st(UU, "resourceclaim in use")


def test_pre_bind_stops_when_the_claim_got_allocated_elsewhere() -> None:
    table, store = cluster(CLASS, N0_GPUS, node_slice("n1", device("gpu-0")), claim("c"))

    def elsewhere() -> None:
        store.apply("ResourceClaim", claim("c", status=allocated("gpu-0", node="n1"), rv="11"))

    store.writer = FlakyWriter(store, conflicts=1, before=elsewhere)
    status = bound(table, gpu_pod(("gpu", "c")))[2]
    assert status == Status(Code.Error, ("claim ns/c got allocated elsewhere in the meantime",), NAME)


BINDING: dict[str, Any] = {"bindingConditions": ["attached"], "bindingFailureConditions": ["failed"]}


def conditions(**state: str) -> list[dict[str, Any]]:
    return [{"type": t, "status": s, "reason": "R", "message": f"{t} is {s}", "lastTransitionTime":
             "2026-01-01T00:00:00Z"} for t, s in state.items()]


BINDING_CASES = [  # (the claim's status.devices conditions, allocation timestamp, PreBind's status)
    pytest.param(conditions(attached="True"), None, OK, id="conditions-met"),
    pytest.param(conditions(attached="False", failed="True"), None,
                 Status(Code.Error, ('device binding failed: claim=c, reason=R, message="failed is True"',), NAME),
                 id="failure-condition"),
    pytest.param(conditions(attached="False"), "2020-01-01T00:00:00Z",
                 Status(Code.Error, ("device binding timeout: claim=c",), NAME), id="waited-too-long-already"),
]


@pytest.mark.parametrize(("conds", "since", "want"), BINDING_CASES)
def test_pre_bind_waits_for_binding_conditions(conds: list[dict[str, Any]], since: str | None, want: Status) -> None:
    status = allocated("gpu-0", **BINDING)
    status["devices"] = [{"driver": DRIVER, "pool": "n0", "device": "gpu-0", "conditions": conds}]
    if since:
        status["allocation"]["allocationTimestamp"] = since
    table, _ = cluster(CLASS, node_slice("n0", device("gpu-0", **BINDING)), claim("c", status=status))
    assert bound(table, gpu_pod(("gpu", "c")))[2] == want


def test_pre_bind_gives_up_on_binding_conditions_after_the_binding_timeout() -> None:
    table, _ = cluster(CLASS, node_slice("n0", device("gpu-0", **BINDING)), claim("c"))
    status = bound(table, gpu_pod(("gpu", "c")), bindingTimeout="1s")[2]
    assert status == Status(Code.Error, ("device binding timeout: context deadline exceeded",), NAME)


def test_filter_turns_away_a_claim_whose_binding_failed() -> None:
    status = allocated("gpu-0", **BINDING)
    status["devices"] = [{"driver": DRIVER, "pool": "n0", "device": "gpu-0",
                          "conditions": conditions(failed="True")}]
    table, _ = cluster(CLASS, claim("c", status=status))
    statuses = filter_all(plugin(table), table, gpu_pod(("gpu", "c")))[2]
    assert statuses == [st(UU, "resourceclaim not available on the node")] * 2


# ---- queueing hints ------------------------------------------------------------------------------

Q, SKIP = QueueingHint.Queue, QueueingHint.QueueSkip
C_NEW = claim("c")
C_ALLOCATED = claim("c", status=allocated("gpu-0"), rv="11")
OTHER_ALLOCATED = claim("other", status=allocated("gpu-1"), rv="11")
OTHER_FREE = claim("other", rv="12")
C_LABELLED = {**C_NEW, "metadata": {**C_NEW["metadata"], "labels": {"a": "b"}, "resourceVersion": "12"}}

CLAIM_HINTS = [  # (store objects, old, new, the hint for a pod using claim c)
    pytest.param([C_NEW], None, C_NEW, Q, id="its-claim-created"),
    pytest.param([C_NEW, OTHER_FREE], None, OTHER_FREE, SKIP, id="another-claim-created"),
    pytest.param([], C_NEW, None, SKIP, id="unallocated-claim-deleted"),
    pytest.param([], C_ALLOCATED, None, Q, id="allocated-claim-deleted"),
    pytest.param([C_NEW, OTHER_FREE], OTHER_ALLOCATED, OTHER_FREE, Q, id="another-claim-deallocated"),
    pytest.param([C_ALLOCATED], C_NEW, C_ALLOCATED, Q, id="its-claim-status-changed"),
    pytest.param([C_LABELLED], C_NEW, C_LABELLED, SKIP, id="its-claim-changed-not-its-status"),
    pytest.param([OTHER_FREE], None, OTHER_FREE, SKIP, id="its-claim-still-missing"),
]


@pytest.mark.parametrize(("objects", "old", "new", "want"), CLAIM_HINTS)
def test_claim_events_queue_the_pods_they_may_help(objects: list[dict[str, Any]], old: Any, new: Any,
                                                   want: QueueingHint) -> None:
    table, store = cluster(*objects)
    (hint,) = [e.hint for e in plugin(table).events_to_register() if e.event.resource == "ResourceClaim"]
    assert hint is not None
    decoded = [None if o is None else store.decode("ResourceClaim", o) for o in (old, new)]
    assert hint(gpu_pod(("gpu", "c")), decoded[0], decoded[1]) == want


def test_a_pod_whose_claim_was_made_is_queued() -> None:
    table, _ = cluster(claim("p-gpu-x", owner="pod-uid"))
    (hint,) = [e.hint for e in plugin(table).events_to_register() if e.event.resource == "TargetPod"]
    assert hint is not None
    waiting = gpu_pod(("gpu", "template:t"))
    made = gpu_pod(("gpu", "template:t"), statuses={"gpu": "p-gpu-x"})
    assert (hint(waiting, waiting, made), hint(waiting, made, waiting)) == (Q, SKIP)
