"""Fuzzing the gRPC handlers of every service on real servers on 127.0.0.1: the framework's Scheduler
API, Handle and CycleState services, and a plugin host's Plugin service.

Random and invalid requests (random field values, unknown node ids and names, wrong generations,
unknown cycle ids, oversized batches, random bytes where a serialized message is expected) must be
answered with a deliberate status code (never UNKNOWN or INTERNAL from an unhandled exception); a
refused request changes nothing (snapshot generation, pods, nodes); and the server keeps serving
(a valid request succeeds after every example). Budgets: ``tests/fuzz_settings`` in ``fuzzing.py``.

The servers run once per module on an event loop in a background thread; the examples talk to them
over ordinary blocking channels.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, TypeVar

import grpc
import numpy as np
import pytest
from fuzzing import fuzz_settings
from hypothesis import example, given
from hypothesis import strategies as st
from test_fuzz_parsers import JSON_VALUES, NODE, POD, YAMLISH, mutations

from framework.profiles import build_registry, default_scheduler_config
from framework.service import Server, start_server
from pluginhost import pb
from pluginhost.host import PluginHost
from pluginhost.model import Pod
from pluginhost.plugin import (
    BindPlugin,
    CycleState,
    FilterPlugin,
    FilterResult,
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
    QueuedPodInfo,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from pluginhost.security import bearer_metadata, with_metadata
from pluginhost.status import SUCCESS, Status
from pluginhost.wire import CHANNEL_OPTIONS

T = TypeVar("T")
TIMEOUT = 10.0  # per call: generous, a loaded machine is slow; never asserted on
C = grpc.StatusCode
# What a deliberate refusal may be; UNKNOWN and INTERNAL mean an exception escaped a handler.
REFUSALS = {C.INVALID_ARGUMENT, C.NOT_FOUND, C.FAILED_PRECONDITION}


class FuzzPlugin(PreEnqueuePlugin, QueueSortPlugin, PreFilterPlugin, FilterPlugin, PostFilterPlugin,
                 PreScorePlugin, ScorePlugin, ScoreExtensions, ReservePlugin, PermitPlugin, PreBindPlugin,
                 BindPlugin, PostBindPlugin):
    """Implements every point simply and never fails on valid input (so any error is the host's)."""

    name = "Fuzz"
    state_keys = ("Fuzz/k",)

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        self.args = args or {}

    async def pre_enqueue(self, pod: Pod) -> Status:
        return SUCCESS

    def sort_key(self, info: QueuedPodInfo) -> Any:
        return (-info.pod.priority, info.timestamp)

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        return FilterResult.passing(len(batch))

    async def post_filter(self, state: CycleState, pod: Pod,
                          statuses: NodeToStatus) -> tuple[PostFilterResult | None, Status]:
        return None, Status.unschedulable("no")

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        return SUCCESS

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> Any:
        return np.full(len(batch), 7, dtype=np.int64)

    async def normalize_score(self, state: CycleState, pod: Pod, batch: NodeBatch, scores: Any) -> Status:
        scores[:] = np.clip(scores, 0, 100)
        return SUCCESS

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        return None

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        return SUCCESS, 0.0

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return Status.skip()

    async def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        return None


# ---------------------------------------------------------------------------------------------------
# The rig: the framework service and a plugin host following it, on a loop in a background thread


class Rig:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fuzz-servers", daemon=True)
        self.thread.start()
        self.server: Server = self.call(self._start_framework())
        self.host: PluginHost = self.call(self._start_host())
        # The Handle and CycleState services serve registered plugin hosts only: register one serving the
        # fuzz plugin, and call as it (so requests reach the handlers).
        self.credential = "fuzz-credential"
        assert self.server.services is not None
        self.server.services.grant(self.credential, SimpleNamespace(name="fuzz", manifests={"Fuzz": None}))
        self.on_loop(lambda: self.host.framework_connected(self.server.address, self.credential))
        self.channel = grpc.insecure_channel(self.server.address, options=CHANNEL_OPTIONS)
        self.host_channel = grpc.insecure_channel(self.host.address, options=CHANNEL_OPTIONS)
        self.scheduler = pb.scheduler_grpc.SchedulerStub(self.channel)
        self.handle = with_metadata(pb.handle_grpc.HandleStub(self.channel), bearer_metadata(self.credential))
        self.cycle_state = with_metadata(pb.cyclestate_grpc.CycleStateStub(self.channel),
                                         bearer_metadata(self.credential))
        self.plugin = pb.plugin_grpc.PluginStub(self.host_channel)

    def call(self, coro: Awaitable[T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]
        return future.result(timeout=60)

    def on_loop(self, fn: Callable[[], T]) -> T:
        async def run() -> T:
            return fn()

        return self.call(run())

    async def _start_framework(self) -> Server:
        registry = build_registry()
        return await start_server(default_scheduler_config(registry), registry, "127.0.0.1:0", seed=5)

    async def _start_host(self) -> PluginHost:
        # A short mirror wait: a request naming a generation the framework never reaches fails fast.
        return await PluginHost([FuzzPlugin], listen="127.0.0.1:0", framework=self.server.address,
                                mirror_wait=0.2).start()

    def state(self) -> tuple[int, int, int, frozenset[str], frozenset[str]]:
        """What a refused request must not change: generation, pod and node counts and identities."""
        s = self.server.scheduler
        return self.on_loop(lambda: (s.cache.generation, len(s.pods), len(s.nodes),
                                     frozenset(r.pod.key for r in s.pods.values()), frozenset(s.nodes)))

    def still_serving(self) -> None:
        nodes = self.scheduler.ListNodes(pb.scheduler.ListNodesRequest(), timeout=TIMEOUT)
        assert {"n0", "n1", "n2"} <= {n.name for n in nodes.nodes}
        info = self.handle.ListNodeInfos(pb.handle.ListNodeInfosRequest(), timeout=TIMEOUT)
        assert info.generation == nodes.generation
        reply = self.plugin.Handshake(pb.plugin.HandshakeRequest(framework_version="fuzz", credential=self.credential),
                                      timeout=TIMEOUT)
        assert [p.name for p in reply.plugins] == ["Fuzz"]

    def close(self) -> None:
        self.channel.close()
        self.host_channel.close()
        self.call(self.host.stop(0.5))
        self.call(self.server.stop(0.5))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _manifest(*objs: dict[str, Any]) -> Any:
    return pb.scheduler.Manifest(source="seed.json", content=json.dumps({"kind": "List", "items": list(objs)}))


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    r = Rig()
    try:
        nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
                  "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "20"}}} for i in range(3)]
        bound = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound", "uid": "uid-bound"},
                 "spec": {"nodeName": "n0", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
        # Pods of a profile that does not exist are recorded but never scheduled: nothing changes behind
        # the examples' backs, so "a refused request changed nothing" can be checked exactly.
        parked = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "parked", "uid": "uid-parked"},
                  "spec": {"schedulerName": "nobody", "containers": [{"name": "c"}]}}
        r.scheduler.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(*nodes, bound, parked)]), timeout=TIMEOUT)
        configured = r.plugin.Configure(pb.plugin.ConfigureRequest(plugin="Fuzz", profile="fuzz", args_json="{}"),
                                        timeout=TIMEOUT)
        assert configured.status.code == pb.types.CODE_SUCCESS
        yield r
    finally:
        r.close()


def _code(call: Callable[[], Any]) -> tuple[C, Any]:
    try:
        return C.OK, call()
    except grpc.RpcError as err:
        return err.code(), err.details()


def _refused_or_ok(code: C, details: Any, extra: frozenset[C] | set[C] = frozenset()) -> None:
    assert code == C.OK or code in REFUSALS | extra, (code, details)
    if code != C.OK:
        assert isinstance(details, str) and details and "\n" not in details, details


# ---------------------------------------------------------------------------------------------------
# Scheduler API


def _park(case: tuple[tuple[Any, ...], dict[str, Any]]) -> dict[str, Any]:
    doc = case[1]
    spec = doc.get("spec")
    if doc.get("kind") == "Pod" and isinstance(spec, dict):
        spec["schedulerName"] = "nobody"  # see the rig: accepted pods are never scheduled
    return doc


MANIFEST_TEXT = st.one_of(
    st.one_of(mutations(POD), mutations(NODE)).map(_park).map(lambda d: json.dumps(d, allow_nan=True)),
    YAMLISH,
    st.builds(lambda n: f"kind: Pod\napiVersion: v1\nmetadata: {{name: p{n}}}\nspec: {{nodeName: ghost, "
                        f"schedulerName: nobody, containers: [{{name: c}}]}}", st.integers(0, 9)),
    st.builds(lambda u: f"kind: Node\napiVersion: v1\nmetadata: {{name: nx, uid: {u}}}", st.sampled_from(
        ["uid-bound", "uid-parked", "fresh"])),
)
REF = st.builds(
    lambda kind, ns, name, uid: pb.scheduler.ObjectRef(kind=kind, namespace=ns, name=name, uid=uid),
    st.one_of(st.sampled_from(["Pod", "Node", "", "Deployment"]), st.text(max_size=5)),
    st.text(max_size=5), st.text(max_size=8), st.text(max_size=8),
)


@fuzz_settings(120)
@given(
    st.lists(st.builds(lambda src, text: pb.scheduler.Manifest(source=src, content=text),
                       st.text(max_size=10), MANIFEST_TEXT), max_size=3),
    st.booleans(),
    st.booleans(),
)
def test_apply_answers_ok_or_a_refusal_that_changes_nothing(rig: Rig, manifests: list[Any], dry_run: bool,
                                                             with_valid_node: bool) -> None:
    if with_valid_node:  # a valid object first: it must not be applied when the rest is refused
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "fresh-node"}}
        manifests = [_manifest(node), *manifests]
    before = rig.state()
    code, details = _code(lambda: rig.scheduler.Apply(
        pb.scheduler.ApplyRequest(manifests=manifests, dry_run=dry_run), timeout=TIMEOUT))
    _refused_or_ok(code, details)
    if code != C.OK or dry_run:
        assert rig.state() == before
    rig.still_serving()


@fuzz_settings(80)
@given(st.sampled_from(["Delete", "GetPod", "ListPods", "Explain", "Watch", "ListWaitingPods"]),
       st.lists(REF, max_size=3), st.text(max_size=8), st.text(max_size=8), MANIFEST_TEXT,
       st.lists(st.integers(0, 20), max_size=3), st.integers(0, 2**64 - 1))
def test_scheduler_reads_and_deletes_answer_deliberately(rig: Rig, method: str, refs: list[Any], ns: str,
                                                          name: str, text: str, types: list[int],
                                                          since: int) -> None:
    before = rig.state()
    s = rig.scheduler
    calls: dict[str, Callable[[], Any]] = {
        "Delete": lambda: s.Delete(pb.scheduler.DeleteRequest(objects=refs), timeout=TIMEOUT),
        "GetPod": lambda: s.GetPod(pb.scheduler.GetPodRequest(namespace=ns, name=name), timeout=TIMEOUT),
        "ListPods": lambda: s.ListPods(pb.scheduler.ListPodsRequest(namespace=ns, phase=name), timeout=TIMEOUT),
        "Explain": lambda: s.Explain(pb.scheduler.ExplainRequest(
            pod=pb.scheduler.Manifest(source="x", content=text), profile=name), timeout=TIMEOUT),
        # A watch is endless: the first event (or the refusal) is enough.
        "Watch": lambda: next(iter(s.Watch(pb.scheduler.WatchRequest(
            types=types, since_sequence=since, replay=True), timeout=0.5)), None),
        "ListWaitingPods": lambda: s.ListWaitingPods(pb.handle.ListWaitingPodsRequest(profile=name),
                                                     timeout=TIMEOUT),
    }
    code, details = _code(calls[method])
    _refused_or_ok(code, details, {C.DEADLINE_EXCEEDED} if method == "Watch" else set())
    if method == "Delete":
        # Random references name nothing that exists (seeded names are not drawn) unless they do.
        existing = {("Pod", "bound"), ("Pod", "parked"), ("Node", "n0"), ("Node", "n1"), ("Node", "n2")}
        if not any((r.kind, r.name) in existing for r in refs):
            assert rig.state() == before
    else:
        assert rig.state() == before
    rig.still_serving()


# ---------------------------------------------------------------------------------------------------
# Handle and CycleState


@fuzz_settings(150)
@given(
    st.sampled_from(["GetNodeInfo", "ListNodeInfos", "GetWaitingPod", "AllowWaitingPod", "RejectWaitingPod",
                     "BindPod", "DeletePod", "FollowSnapshot", "Read", "Write", "Delete"]),
    st.one_of(st.integers(0, 2**32 - 1), st.sampled_from([0, 1, 2, 3, 4, 99])),
    st.one_of(st.text(max_size=8), st.sampled_from(["n0", "n1", "ghost", ""])),
    st.one_of(st.integers(0, 2**64 - 1), st.just(0)),
    st.text(max_size=12),
    st.lists(st.builds(lambda k, v, d: pb.types.StateEntry(key=k, value=v, deleted=d),
                       st.text(max_size=6), st.binary(max_size=16), st.booleans()), max_size=3),
)
@example("GetNodeInfo", 99, "ghost", 0, "", [])
@example("ListNodeInfos", 0, "", 2**64 - 1, "", [])
@example("BindPod", 0, "ghost", 0, "uid-parked", [])
def test_handle_and_cycle_state_answer_deliberately(rig: Rig, method: str, node_id: int, node: str,
                                                     generation: int, text: str, entries: list[Any]) -> None:
    before = rig.state()
    h, cs = rig.handle, rig.cycle_state
    by_id = pb.handle.GetNodeInfoRequest(id=node_id, generation=generation)
    by_name = pb.handle.GetNodeInfoRequest(name=node, generation=generation)
    ref = pb.types.PodRef(uid=text, namespace="default", name=text)
    calls: dict[str, Callable[[], Any]] = {
        "GetNodeInfo": lambda: h.GetNodeInfo(by_id if node_id % 2 else by_name, timeout=TIMEOUT),
        "ListNodeInfos": lambda: h.ListNodeInfos(pb.handle.ListNodeInfosRequest(generation=generation),
                                                 timeout=TIMEOUT),
        "GetWaitingPod": lambda: h.GetWaitingPod(pb.handle.GetWaitingPodRequest(uid=text), timeout=TIMEOUT),
        "AllowWaitingPod": lambda: h.AllowWaitingPod(pb.handle.AllowWaitingPodRequest(uid=text, plugin=node),
                                                     timeout=TIMEOUT),
        "RejectWaitingPod": lambda: h.RejectWaitingPod(pb.handle.RejectWaitingPodRequest(uid=text, plugin=node),
                                                       timeout=TIMEOUT),
        # The parked pod's uid with a node that does not exist: refused in the reply's status.
        "BindPod": lambda: h.BindPod(pb.handle.BindPodRequest(pod=ref, node_name=node if node not in (
            "n0", "n1", "n2") else "ghost"), timeout=TIMEOUT),
        "DeletePod": lambda: h.DeletePod(pb.handle.DeletePodRequest(pod=pb.types.PodRef(uid=text + "-x")),
                                         timeout=TIMEOUT),
        "FollowSnapshot": lambda: next(iter(h.FollowSnapshot(
            pb.handle.FollowRequest(from_generation=generation, plugin=text), timeout=TIMEOUT))),
        "Read": lambda: cs.Read(pb.cyclestate.ReadStateRequest(cycle_id=text, plugin="Fuzz", keys=[node]),
                                timeout=TIMEOUT),
        "Write": lambda: cs.Write(pb.cyclestate.WriteStateRequest(cycle_id=text, plugin="Fuzz", entries=entries),
                                  timeout=TIMEOUT),
        "Delete": lambda: cs.Delete(pb.cyclestate.DeleteStateRequest(cycle_id=text, plugin="Fuzz", keys=[node]),
                                    timeout=TIMEOUT),
    }
    code, reply = _code(calls[method])
    # Allowing or rejecting on behalf of a plugin the caller does not serve is refused as such.
    acting_for_another = method in ("AllowWaitingPod", "RejectWaitingPod") and node not in ("", "Fuzz")
    _refused_or_ok(code, reply, {C.PERMISSION_DENIED} if acting_for_another else frozenset())
    if acting_for_another:
        assert code == C.PERMISSION_DENIED
    if method in ("BindPod", "DeletePod"):
        assert code == C.OK and reply.status.code == pb.types.CODE_ERROR and reply.status.reasons
    if method in ("Read", "Write", "Delete"):  # no scheduling context is running: none can be found
        assert code == C.NOT_FOUND
    assert rig.state() == before
    rig.still_serving()


# ---------------------------------------------------------------------------------------------------
# The plugin host's Plugin service

PROTO_POD = st.builds(
    lambda name, uid, req, labels: pb.types.Pod(
        metadata=pb.types.ObjectMeta(name=name, namespace="default", uid=uid, labels=labels), requests=req),
    st.text(max_size=6), st.text(max_size=6),
    st.dictionaries(st.sampled_from(["cpu", "memory", "x"]), st.integers(-(2**63), 2**63 - 1), max_size=2),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
)
NODE_IDS = st.one_of(
    st.lists(st.integers(0, 2**32 - 1), max_size=5),
    st.lists(st.sampled_from([1, 2, 3]), max_size=5),
    st.integers(0, 200_000).map(lambda n: list(range(n))),  # oversized batches
)


def _ctx(plugin: str, profile: str, generation: int, cycle: str, pod: Any, entries: list[Any]) -> Any:
    return pb.plugin.CycleContext(cycle_id=cycle, plugin=plugin, profile=profile, snapshot_generation=generation,
                                  pod=pod, state=entries)


@fuzz_settings(150)
@given(
    st.sampled_from(["PreEnqueue", "QueueSortKey", "EventsToRegister", "QueueingHint", "PreFilter",
                     "PreFilterAddPod", "Filter", "PostFilter", "PreScore", "Score", "NormalizeScore", "Reserve",
                     "Unreserve", "Permit", "PreBindPreFlight", "PreBind", "Bind", "PostBind", "Configure",
                     "Handshake"]),
    st.one_of(st.just("Fuzz"), st.text(max_size=5)),
    st.one_of(st.just("fuzz"), st.text(max_size=5)),
    st.one_of(st.just(0), st.integers(0, 2**64 - 1), st.integers(1, 12)),
    st.text(max_size=6),
    PROTO_POD,
    st.lists(st.builds(lambda k, v: pb.types.StateEntry(key=k, value=v), st.sampled_from(["Fuzz/k", "other"]),
                       st.binary(max_size=8)), max_size=2),
    NODE_IDS,
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
    st.one_of(st.text(max_size=5), st.sampled_from(["n0", "n1"])),
    st.one_of(st.sampled_from(["{}", '{"a": 1}', "[]", "nope", ""]), st.text(max_size=10)),
    st.binary(max_size=20),
)
@example("Filter", "Fuzz", "fuzz", 0, "c1", pb.types.Pod(), [], [2**32 - 1], [], "", "", b"")
@example("PreScore", "Fuzz", "fuzz", 0, "c1", pb.types.Pod(), [], list(range(200_000)), [], "", "", b"")
@example("Reserve", "Fuzz", "no-profile", 0, "c1", pb.types.Pod(), [], [], [], "n0", "", b"")
@example("Reserve", "Nobody", "fuzz", 0, "c1", pb.types.Pod(), [], [], [], "n0", "", b"")
@example("PreFilter", "Fuzz", "fuzz", 2**63, "c1", pb.types.Pod(), [], [], [], "n0", "", b"")
def test_plugin_service_answers_deliberately(rig: Rig, method: str, plugin: str, profile: str, generation: int,
                                             cycle: str, pod: Any, entries: list[Any], ids: list[int],
                                             scores: list[int], node: str, args: str, blob: bytes) -> None:
    p = rig.plugin
    ctx = _ctx(plugin, profile, generation, cycle, pod, entries)
    batch = pb.types.NodeBatch(snapshot_generation=generation, batch_seq=0, node_ids=ids)
    configured = dict(rig.on_loop(lambda: {k: dict(h.instances) for k, h in rig.host.plugins.items()}))

    def stream(rpc: Any, start: Any, request: Any) -> list[Any]:
        return list(rpc(iter([start, request]), timeout=TIMEOUT))

    calls: dict[str, Callable[[], Any]] = {
        "PreEnqueue": lambda: p.PreEnqueue(pb.plugin.PodRequest(plugin=plugin, profile=profile, pod=pod),
                                           timeout=TIMEOUT),
        "QueueSortKey": lambda: p.QueueSortKey(pb.plugin.QueueSortKeyRequest(
            plugin=plugin, profile=profile, pod=pod, enqueue_timestamp=float(generation)), timeout=TIMEOUT),
        "EventsToRegister": lambda: p.EventsToRegister(pb.plugin.EventsRequest(plugin=plugin, profile=profile),
                                                       timeout=TIMEOUT),
        "QueueingHint": lambda: p.QueueingHint(pb.plugin.QueueingHintRequest(
            plugin=plugin, profile=profile, pod=pod, event=pb.types.ClusterEvent(resource=node, action=args),
            old_object_json=blob, new_object_json=args.encode()), timeout=TIMEOUT),
        "PreFilter": lambda: p.PreFilter(pb.plugin.CycleRequest(ctx=ctx), timeout=TIMEOUT),
        "PreFilterAddPod": lambda: p.PreFilterAddPod(pb.plugin.PreFilterExtensionRequest(
            ctx=ctx, other_pod=pod, node_id=ids[0] if ids else 0, node_name=node), timeout=TIMEOUT),
        "Filter": lambda: stream(p.Filter, pb.plugin.FilterRequest(start=pb.plugin.FilterStart(ctx=ctx)),
                                 pb.plugin.FilterRequest(batch=batch)),
        "PostFilter": lambda: p.PostFilter(pb.plugin.PostFilterRequest(
            ctx=ctx, node_statuses={node: pb.types.Status(code=int(generation % 9), reasons=[args])}),
            timeout=TIMEOUT),
        "PreScore": lambda: p.PreScore(pb.plugin.PreScoreRequest(ctx=ctx, feasible_node_ids=ids), timeout=TIMEOUT),
        "Score": lambda: stream(p.Score, pb.plugin.ScoreRequest(start=pb.plugin.ScoreStart(ctx=ctx)),
                                pb.plugin.ScoreRequest(batch=batch)),
        "NormalizeScore": lambda: p.NormalizeScore(pb.plugin.NormalizeScoreRequest(
            ctx=ctx, node_ids=ids, scores=scores), timeout=TIMEOUT),
        "Configure": lambda: p.Configure(pb.plugin.ConfigureRequest(plugin=plugin, profile=profile,
                                                                    args_json=args), timeout=TIMEOUT),
        "Handshake": lambda: p.Handshake(pb.plugin.HandshakeRequest(framework_version=args, profile=profile,
                                                                    framework_address=node), timeout=TIMEOUT),
    }
    for point in ("Reserve", "Unreserve", "Permit", "PreBindPreFlight", "PreBind", "Bind", "PostBind"):
        rpc = getattr(p, point)
        calls[point] = lambda rpc=rpc: rpc(pb.plugin.NodeRequest(ctx=ctx, node_name=node,
                                                                 node_id=ids[0] if ids else 0), timeout=TIMEOUT)
    code, details = _code(calls[method])
    # UNAVAILABLE: the host's snapshot mirror does not hold the generation named (not reached within
    # the wait, or no longer held); the framework retries or fails the cycle with that message.
    _refused_or_ok(code, details, {C.UNAVAILABLE})
    if code != C.OK or method != "Configure":
        assert rig.on_loop(lambda: {k: dict(h.instances) for k, h in rig.host.plugins.items()}) == configured
    elif method == "Configure" and profile not in configured.get("Fuzz", {}):
        rig.on_loop(lambda: rig.host.plugins["Fuzz"].instances.pop(profile, None))  # keep the rig as it was
    rig.still_serving()


# ---------------------------------------------------------------------------------------------------
# Random bytes where a serialized message is expected

def _methods(module: Any, service: str) -> list[tuple[str, str, bool, bool]]:
    """Every method of ``service`` from the proto descriptors (so a new RPC is fuzzed without a list
    to update): (service, method, client streaming, server streaming)."""
    desc = module.DESCRIPTOR.services_by_name[service]
    return [(desc.full_name, m.name, m.client_streaming, m.server_streaming) for m in desc.methods]


_ALL = [*_methods(pb.scheduler, "Scheduler"), *_methods(pb.handle, "Handle"), *_methods(pb.cyclestate, "CycleState"),
        *_methods(pb.plugin, "Plugin")]
ALL_METHODS = [(service, method) for service, method, _, _ in _ALL]
_STREAMING = {(service, method): (client, server) for service, method, client, server in _ALL}
# Not a message: field 1 (length-delimited) claims 3 bytes and the input ends after one.
CORRUPT = b"\x0a\x03\x12"


def _raw_call(rig: Rig, service: str, method: str, data: bytes, timeout: float = TIMEOUT) -> tuple[C, Any]:
    path = f"/{service}/{method}"
    channel = rig.host_channel if service == "outrigger.v1.Plugin" else rig.channel
    identity: Callable[[bytes], bytes] = lambda b: b  # noqa: E731
    client_streaming, server_streaming = _STREAMING[(service, method)]
    # The framework's services answer registered plugin hosts only: call as the rig's.
    md = None if service == "outrigger.v1.Plugin" else bearer_metadata(rig.credential)
    if client_streaming:
        rpc: Any = channel.stream_stream(path, request_serializer=identity, response_deserializer=identity)
        return _code(lambda: list(rpc(iter([data]), timeout=timeout, metadata=md)))
    if server_streaming:
        rpc = channel.unary_stream(path, request_serializer=identity, response_deserializer=identity)
        return _code(lambda: next(iter(rpc(data, timeout=timeout, metadata=md)), None))
    rpc = channel.unary_unary(path, request_serializer=identity, response_deserializer=identity)
    return _code(lambda: rpc(data, timeout=timeout, metadata=md))


@pytest.mark.parametrize(("service", "method"), ALL_METHODS, ids=[f"{s.split('.')[-1]}.{m}" for s, m in ALL_METHODS])
def test_undecodable_request_is_invalid_argument_and_changes_nothing(rig: Rig, service: str, method: str) -> None:
    before = rig.state()
    code, details = _raw_call(rig, service, method, CORRUPT)
    assert code == C.INVALID_ARGUMENT
    assert details.startswith(f"/{service}/{method}: the request is not a valid message (Error parsing message")
    assert rig.state() == before
    rig.still_serving()


@fuzz_settings(150)
@given(st.sampled_from(ALL_METHODS), st.binary(max_size=64))
def test_random_bytes_are_decoded_or_refused(rig: Rig, target: tuple[str, str], data: bytes) -> None:
    service, method = target
    code, details = _raw_call(rig, service, method, data, timeout=0.5)
    # Random bytes may happen to be a valid message; then the call answers like any other. Streams may
    # simply wait for events (DEADLINE_EXCEEDED); a mirror may not hold a random generation (UNAVAILABLE);
    # a random plugin name is not one the caller serves (PERMISSION_DENIED).
    _refused_or_ok(code, details, {C.DEADLINE_EXCEEDED, C.UNAVAILABLE, C.PERMISSION_DENIED})
    rig.still_serving()


# ---------------------------------------------------------------------------------------------------
# JSON values are the other shape random input takes: plugin arguments of Configure


@fuzz_settings(60)
@given(JSON_VALUES)
def test_configure_with_any_json_args_answers_a_status(rig: Rig, args: Any) -> None:
    reply = rig.plugin.Configure(pb.plugin.ConfigureRequest(plugin="Fuzz", profile="json-args",
                                                            args_json=json.dumps(args, allow_nan=True)),
                                 timeout=TIMEOUT)
    if isinstance(args, dict):
        assert reply.status.code == pb.types.CODE_SUCCESS
    else:
        assert reply.status.code == pb.types.CODE_ERROR
        assert list(reply.status.reasons) == [f"invalid args: args must be a JSON object, got {type(args).__name__}"]
    rig.on_loop(lambda: rig.host.plugins["Fuzz"].instances.pop("json-args", None))
    rig.still_serving()
