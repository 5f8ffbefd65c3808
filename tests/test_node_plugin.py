"""The Node.js plugin host (clients/node) as a real process on 127.0.0.1.

End to end: the framework (``outrigger serve``, its own process) with the Node.js TierZone plugin and a
Python plugin (tests/node_plugin_witness.py) as remote plugins; nodes and pods applied over the
Scheduler API; placements, rejections and ``explain`` scores that only TierZone's Filter and Score
explain, and its CycleState entry as the Python plugin reads it.

Direct: the Node.js host's Plugin service called from here (a fake Handle service serves the node
labels), for what the framework does not show: several cycles in sequence on one Filter stream,
concurrent streams, the W3C trace context of each request becoming the parent of the host's spans
(exported with OTLP/gRPC to a collector in this test), and clear errors for bad requests.

Skipped, saying why, when ``node``/``npm`` are missing or clients/node's dependencies cannot be
installed (``npm ci`` runs once when node_modules is missing).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from otlp_sink import CollectedSpan, OtlpSink
from test_remote_harness import ROOT, STARTUP_SECONDS, HostProcess

from clients.client import SchedulerClient
from pluginhost import pb

NODE_DIR = ROOT / "clients" / "node"
SERVER_JS = NODE_DIR / "server.js"
NPM_CI_SECONDS = 300
SETTLE_SECONDS = 30.0
SPANS_SECONDS = 30.0

T = pb.types
P = pb.plugin


# ---------------------------------------------------------------------------------------------------
# Node.js and the host process


def _npm_ci(npm: str) -> str:
    """Install clients/node's locked dependencies; an empty string when done, else why not."""
    try:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, capture_output=True, text=True,
            timeout=NPM_CI_SECONDS,
        )
    except subprocess.TimeoutExpired:
        return f"`npm ci` in clients/node did not finish within {NPM_CI_SECONDS}s"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return f"`npm ci` in clients/node failed: {lines[-1] if lines else f'exit {done.returncode}'}"
    return ""


@pytest.fixture(scope="module")
def node() -> str:
    """The ``node`` executable, with clients/node's dependencies installed (or the tests skip)."""
    node_bin, npm = shutil.which("node"), shutil.which("npm")
    if node_bin is None or npm is None:
        pytest.skip("the Node.js plugin tests need `node` and `npm` on PATH (Node.js 20)")
    # npm writes node_modules/.package-lock.json last: without it an install is missing or partial.
    if not (NODE_DIR / "node_modules" / ".package-lock.json").is_file():
        why = _npm_ci(npm)
        if why:
            pytest.skip(f"cannot install the Node.js plugin's dependencies: {why}")
    return node_bin


class NodeHost(HostProcess):
    """``node clients/node/server.js --listen 127.0.0.1:0`` (stdout's first line gives the address)."""

    def __init__(self, node: str, env: dict[str, str] | None = None) -> None:
        super().__init__(str(SERVER_JS), env)
        self.node = node

    def spawn(self) -> None:
        env = dict(os.environ)
        env.update(self.env)
        self.proc = subprocess.Popen(
            [self.node, str(SERVER_JS), "--listen", self.listen],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
        )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Framework:
    """``outrigger serve --config --plugins --listen`` in a subprocess, stopped with SIGTERM."""

    def __init__(self, config: Path, plugins: Path, env: dict[str, str] | None = None) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        self.args = [sys.executable, "-m", "framework.cli", "serve", "--config", str(config), "--plugins", str(plugins),
                     "--listen", self.address]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> SchedulerClient:
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                     env=self.env, cwd=ROOT)
        client = SchedulerClient(self.address, timeout=30)
        try:
            client.wait_ready(STARTUP_SECONDS * 2)
        except Exception:
            client.close()
            self.__exit__()
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise RuntimeError(f"the framework did not start on {self.address}: {err[-2000:]}") from None
        threading.Thread(target=lambda: self.proc and self.proc.stderr and self.proc.stderr.read(),
                         daemon=True).start()
        return client

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# ---------------------------------------------------------------------------------------------------
# End to end: framework, Node.js TierZone, Python StateWitness


SCHEDULER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled: [{name: PrioritySort}, {name: DefaultBinder}, {name: TierZone}, {name: StateWitness}]
      disabled: [{name: '*'}]
"""

NODES = {  # name -> (tier, zone)
    "gold-a": ("gold", "zone-a"),
    "gold-b": ("gold", "zone-b"),
    "silver-b": ("silver", "zone-b"),
    "gold-c": ("gold", "zone-c"),
}


def node_doc(name: str, tier: str, zone: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"example.com/tier": tier, "topology.kubernetes.io/zone": zone}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def pod_doc(name: str, tier: str = "", zones: str = "", witness: bool = False) -> dict[str, Any]:
    labels = {"example.com/tier": tier} if tier else {}
    annotations = {"example.com/preferred-zones": zones} if zones else {}
    if witness:
        annotations["example.com/witness"] = "reject"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}


BRONZE = "0/4 nodes are available: 4 node(s) didn't have label example.com/tier=bronze."
WITNESSED = 'TierZone/want on gold-a: application/json {"tier":"gold","zones":["zone-a"]}'

# name, tier label, preferred zones, witnessed,
# (phase, node or the nodes it may take, last reason, plugin named by the last status)
PLACEMENTS: list[tuple[str, str, str, bool, tuple[str, str | frozenset[str], str, str]]] = [
    # Filter keeps gold nodes; Score: zone-b 100, zone-a 50, zone-c 0.
    ("gold-prefers-b", "gold", "zone-b,zone-a", False, ("Bound", "gold-b", "", "")),
    ("gold-prefers-c", "gold", "zone-c,zone-b", False, ("Bound", "gold-c", "", "")),
    # Only silver-b is silver; its zone is not preferred (score 0), it still wins alone.
    ("silver-anywhere", "silver", "zone-a", False, ("Bound", "silver-b", "", "")),
    # No node is bronze: every node is rejected by TierZone, with its reason (the framework's summary
    # of a whole-cluster Filter failure names no single plugin, as kube-scheduler's FitError).
    ("bronze-nowhere", "bronze", "", False, ("Unschedulable", "", BRONZE, "")),
    # No tier: Filter lets every node pass; Score prefers zone-c.
    ("any-tier-zone-c", "", "zone-c", False, ("Bound", "gold-c", "", "")),
    # Neither: PreFilter skips, every node scores 0, any node will do.
    ("no-preference", "", "", False, ("Bound", frozenset(NODES), "", "")),
    # The Python plugin rejects at Permit, quoting the entry TierZone (Node.js) wrote in PreFilter.
    ("witnessed", "gold", "zone-a", True, ("Unschedulable", "", WITNESSED, "StateWitness")),
]


def _settled(pods: list[Any], names: set[str]) -> bool:
    got = {p.ref.name: p for p in pods}
    return names <= set(got) and all(
        got[n].phase == "Bound" or (got[n].phase == "Unschedulable" and got[n].last_status.reasons) for n in names
    )


@pytest.fixture(scope="module")
def cluster(node: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SchedulerClient]:
    """The framework with TierZone (Node.js) and StateWitness (Python), every PLACEMENTS pod scheduled."""
    tmp = tmp_path_factory.mktemp("node-e2e")
    with NodeHost(node) as tierzone, HostProcess("node_plugin_witness:StateWitness") as witness:
        config = tmp / "scheduler.yaml"
        config.write_text(SCHEDULER_CONFIG)
        plugins = tmp / "remote-plugins.yaml"
        plugins.write_text(
            "apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
            f"- name: tierzone\n  address: {tierzone.address}\n  deadlines: {{default: 10s}}\n"
            f"- name: witness\n  address: {witness.address}\n  deadlines: {{default: 10s}}\n"
        )
        with Framework(config, plugins) as client:
            docs = [node_doc(n, tier, zone) for n, (tier, zone) in NODES.items()]
            docs += [pod_doc(name, tier, zones, witness) for name, tier, zones, witness, _ in PLACEMENTS]
            client.apply_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}), "cluster.json")
            names = {p[0] for p in PLACEMENTS}
            deadline = time.monotonic() + SETTLE_SECONDS
            while not _settled(pods := client.list_pods(), names):
                if time.monotonic() > deadline:
                    raise AssertionError(f"pods not settled within {SETTLE_SECONDS}s: "
                                         f"{[(p.ref.name, p.phase, list(p.last_status.reasons)) for p in pods]}")
                time.sleep(0.05)
            yield client


@pytest.mark.parametrize(("name", "tier", "zones", "witness", "want"), PLACEMENTS, ids=[p[0] for p in PLACEMENTS])
def test_node_plugin_places_and_rejects_pods(
    cluster: SchedulerClient, name: str, tier: str, zones: str, witness: bool,
    want: tuple[str, str | frozenset[str], str, str],
) -> None:
    phase, node_name, reason, plugin = want
    got = cluster.get_pod(name)
    assert got.phase == phase
    if isinstance(node_name, frozenset):
        assert got.node_name in node_name
    else:
        assert got.node_name == node_name
    assert list(got.last_status.reasons) == ([reason] if reason else [])
    assert got.last_status.plugin == plugin


def test_explain_shows_the_node_plugin_filter_and_scores(cluster: SchedulerClient) -> None:
    pod = json.dumps(pod_doc("explained", "gold", "zone-b,zone-a"))
    result = cluster.explain(pod, source="explained.json").document
    assert result["selected"] == "gold-b"
    nodes = result["nodes"]
    ok = {"code": "Success", "plugin": None, "reasons": []}
    assert {n: nodes[n]["filter"] for n in NODES} == {
        "gold-a": ok, "gold-b": ok, "gold-c": ok,
        "silver-b": {"code": "UnschedulableAndUnresolvable", "plugin": "TierZone",
                     "reasons": ["node(s) didn't have label example.com/tier=gold"]},
    }
    assert {n: nodes[n]["scores"] for n in NODES} == {
        "gold-a": {"TierZone": {"raw": 50, "normalized": 50, "weighted": 50}},
        "gold-b": {"TierZone": {"raw": 100, "normalized": 100, "weighted": 100}},
        "gold-c": {"TierZone": {"raw": 0, "normalized": 0, "weighted": 0}},
        "silver-b": {},
    }


# ---------------------------------------------------------------------------------------------------
# Direct: a fake Handle service, an OTLP collector, the Node.js host's Plugin service


class FakeHandle(pb.handle_grpc.HandleServicer):  # type: ignore[misc]
    """ListNodeInfos of a fixed set of nodes, at any generation (counts the reads per generation)."""

    def __init__(self) -> None:
        self.reads: dict[int, int] = {}

    def ListNodeInfos(self, request: Any, context: grpc.ServicerContext) -> Any:
        self.reads[request.generation] = self.reads.get(request.generation, 0) + 1
        infos = []
        for i, (name, (tier, zone)) in enumerate(NODES.items()):
            meta = T.ObjectMeta(name=name, labels={"example.com/tier": tier, "topology.kubernetes.io/zone": zone})
            infos.append(T.NodeInfo(node=T.Node(metadata=meta), node_id=i + 1, generation=request.generation))
        return pb.handle.ListNodeInfosResponse(generation=request.generation, nodes=infos)


class Collector(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
    """An OTLP/gRPC trace collector keeping every span it receives (with its service name)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, Any]] = []
        self.lock = threading.Lock()

    def Export(self, request: Any, context: grpc.ServicerContext) -> Any:
        with self.lock:
            for rs in request.resource_spans:
                service = next((a.value.string_value for a in rs.resource.attributes if a.key == "service.name"), "")
                for ss in rs.scope_spans:
                    self.spans.extend((service, span) for span in ss.spans)
        return trace_service_pb2.ExportTraceServiceResponse()

    def wait_for(self, pred: Callable[[list[tuple[str, Any]]], bool], what: str) -> list[tuple[str, Any]]:
        deadline = time.monotonic() + SPANS_SECONDS
        while True:
            with self.lock:
                spans = list(self.spans)
            if pred(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not exported within {SPANS_SECONDS}s; got {[s.name for _, s in spans]}")
            time.sleep(0.05)


def serve(add: Callable[[grpc.Server], None]) -> tuple[grpc.Server, str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    add(server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"


TRACE_A, SPAN_A = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
TRACE_B, SPAN_B = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACE_C, SPAN_C = "5c0b6d7e8f9a0b1c2d3e4f5a6b7c8d9e", "1a2b3c4d5e6f7a8b"


def traceparent(trace: str, span: str) -> str:
    return f"00-{trace}-{span}-01"


def want_entry(tier: str, zones: list[str]) -> Any:
    value = json.dumps({"tier": tier, "zones": zones}, separators=(",", ":"), sort_keys=True).encode()
    return T.StateEntry(key="TierZone/want", content_type="application/json", value=value)


def ctx(cycle: str, generation: int, pod: str = "p", state: list[Any] | None = None,
        trace: dict[str, str] | None = None) -> Any:
    return P.CycleContext(
        cycle_id=cycle, plugin="TierZone", profile="default-scheduler", snapshot_generation=generation,
        pod=T.Pod(metadata=T.ObjectMeta(name=pod, namespace="default")), state=state or [], attempt=1,
        trace_context=trace or {},
    )


def batch(seq: int, generation: int, names: list[str]) -> Any:
    ids = [list(NODES).index(n) + 1 for n in names]
    return T.NodeBatch(snapshot_generation=generation, batch_seq=seq, node_ids=ids, node_names=names)


OK, NO = T.CODE_SUCCESS, T.CODE_UNSCHEDULABLE_AND_UNRESOLVABLE


class Direct:
    """A Node.js host exporting spans to a collector here, handshaken with a fake Handle service."""

    def __init__(self, node: str) -> None:
        self.handle = FakeHandle()
        self.collector = Collector()
        self._handle_server, self.handle_address = serve(lambda s: pb.handle_grpc.add_HandleServicer_to_server(
            self.handle, s))
        self._otlp_server, otlp = serve(lambda s: trace_service_pb2_grpc.add_TraceServiceServicer_to_server(
            self.collector, s))
        self.host = NodeHost(node, env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{otlp}", "OTEL_SERVICE_NAME": "tierzone-under-test",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        })

    def __enter__(self) -> Direct:
        try:
            self.host.start()
        except BaseException:
            self.close_servers()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.host.stop()  # SIGTERM: the host flushes its spans first
        self.close_servers()

    def close_servers(self) -> None:
        self._handle_server.stop(0)
        self._otlp_server.stop(0)

    async def configured(self) -> tuple[grpc.aio.Channel, Any]:
        channel = grpc.aio.insecure_channel(self.host.address)
        stub = pb.plugin_grpc.PluginStub(channel)  # type: ignore[no-untyped-call]
        hs = await stub.Handshake(P.HandshakeRequest(framework_version="test", framework_address=self.handle_address),
                                  timeout=10)
        assert [(m.name, list(m.state_keys), m.needs_snapshot) for m in hs.plugins] == [
            ("TierZone", ["TierZone/want"], False), ("SharedLabelPlacement", [], False), ("PoolFit", [], False),
            ("EvictLower", [], False)]
        assert set(hs.plugins[0].points) == {P.EXTENSION_POINT_PRE_FILTER, P.EXTENSION_POINT_FILTER,
                                             P.EXTENSION_POINT_SCORE}
        reply = await stub.Configure(P.ConfigureRequest(plugin="TierZone", profile="default-scheduler",
                                                        args_json="{}"), timeout=10)
        assert reply.status.code == OK
        return channel, stub


@pytest.fixture(scope="module")
def direct(node: str) -> Iterator[Direct]:
    with Direct(node) as d:
        yield d


def _codes(reply: Any) -> list[tuple[int, list[str]]]:
    return [
        (c, list(reply.reason_table[reply.reason_index[i]].reasons) if c != OK else [])
        for i, c in enumerate(reply.codes)
    ]


GOLD_MISSING = ["node(s) didn't have label example.com/tier=gold"]
SILVER_MISSING = ["node(s) didn't have label example.com/tier=silver"]


def test_one_filter_stream_carries_cycles_in_sequence_each_under_its_own_trace(direct: Direct) -> None:
    async def body() -> None:
        channel, stub = await direct.configured()
        async with channel:
            call = stub.Filter(timeout=20)
            cycles = [  # cycle id, generation, wanted tier, trace, batches (seq, nodes), expected answers
                ("c1", 7, "gold", (TRACE_A, SPAN_A), [(0, ["gold-a", "silver-b"]), (1, ["gold-c"])],
                 [[(OK, []), (NO, GOLD_MISSING)], [(OK, [])]]),
                ("c2", 8, "silver", (TRACE_B, SPAN_B), [(2, ["gold-b", "silver-b", "gold-a"])],
                 [[(NO, SILVER_MISSING), (OK, []), (NO, SILVER_MISSING)]]),
            ]
            for cycle, gen, tier, (trace, span), batches, answers in cycles:
                start = P.FilterStart(ctx=ctx(cycle, gen, state=[want_entry(tier, [])],
                                              trace={"traceparent": traceparent(trace, span)}))
                await call.write(P.FilterRequest(start=start))
                for seq, names in batches:
                    await call.write(P.FilterRequest(batch=batch(seq, gen, names)))
                got = {}
                for _ in batches:
                    reply = await call.read()
                    assert list(reply.state_writes) == []
                    got[reply.batch_seq] = _codes(reply)
                assert got == {seq: a for (seq, _), a in zip(batches, answers, strict=True)}
            await call.done_writing()
            assert await call.read() == grpc.aio.EOF
            assert await call.code() == grpc.StatusCode.OK

    asyncio.run(body())
    # One read of the node list per generation, however many batches used it.
    assert direct.handle.reads == {7: 1, 8: 1}
    spans = direct.collector.wait_for(
        lambda s: sum(sp.name == "outrigger.v1.Plugin/Filter" for _, sp in s) >= 3, "three Filter spans")
    got = sorted(
        (sp.trace_id.hex(), sp.parent_span_id.hex(), service, _attr(sp, "outrigger.cycle_id"),
         _attr(sp, "outrigger.batch_seq"), _attr(sp, "outrigger.rejected"))
        for service, sp in spans if sp.name == "outrigger.v1.Plugin/Filter"
    )
    assert got == sorted([
        (TRACE_A, SPAN_A, "tierzone-under-test", "c1", 0, 1),
        (TRACE_A, SPAN_A, "tierzone-under-test", "c1", 1, 0),
        (TRACE_B, SPAN_B, "tierzone-under-test", "c2", 2, 2),
    ])


def _attr(span: Any, key: str) -> Any:
    for a in span.attributes:
        if a.key == key:
            kind = a.value.WhichOneof("value")
            return getattr(a.value, kind)
    return None


def test_concurrent_score_streams_answer_each_their_own_cycle(direct: Direct) -> None:
    async def body() -> dict[str, list[int]]:
        channel, stub = await direct.configured()
        async with channel:
            a, b = stub.Score(timeout=20), stub.Score(timeout=20)
            start_a = P.ScoreStart(ctx=ctx("sa", 11, state=[want_entry("", ["zone-b", "zone-a"])]))
            start_b = P.ScoreStart(ctx=ctx("sb", 12, state=[want_entry("", ["zone-c"])]))
            await a.write(P.ScoreRequest(start=start_a))
            await b.write(P.ScoreRequest(start=start_b))
            names = ["gold-a", "gold-b", "silver-b", "gold-c"]
            await b.write(P.ScoreRequest(batch=batch(0, 12, names)))
            await a.write(P.ScoreRequest(batch=batch(0, 11, names)))
            got_b, got_a = await b.read(), await a.read()
            for call in (a, b):
                await call.done_writing()
                assert await call.read() == grpc.aio.EOF
            return {"a": list(got_a.scores), "b": list(got_b.scores)}

    assert asyncio.run(body()) == {"a": [50, 100, 100, 0], "b": [0, 0, 0, 100]}


def test_pre_filter_writes_cycle_state_and_joins_the_trace_from_metadata(direct: Direct) -> None:
    async def body() -> Any:
        channel, stub = await direct.configured()
        async with channel:
            pod = T.Pod(metadata=T.ObjectMeta(name="web", namespace="default", labels={"example.com/tier": "gold"},
                                              annotations={"example.com/preferred-zones": "zone-b, zone-a"}))
            request = P.CycleRequest(ctx=ctx("c3", 9))
            request.ctx.pod.CopyFrom(pod)
            # No trace_context in the request: the gRPC metadata of the unary call is the parent.
            return await stub.PreFilter(request, timeout=10, metadata=(("traceparent", traceparent(TRACE_C, SPAN_C)),))

    reply = asyncio.run(body())
    assert reply.status.code == OK
    assert [(e.key, e.content_type, e.value, e.deleted) for e in reply.state_writes] == [
        ("TierZone/want", "application/json", b'{"tier":"gold","zones":["zone-b","zone-a"]}', False)]
    spans = direct.collector.wait_for(lambda s: any(sp.name == "outrigger.v1.Plugin/PreFilter" for _, sp in s),
                                      "the PreFilter span")
    got = [(sp.trace_id.hex(), sp.parent_span_id.hex(), sp.kind, {a.key: _attr(sp, a.key) for a in sp.attributes})
           for _, sp in spans if _attr(sp, "outrigger.cycle_id") == "c3"]
    assert got == [(TRACE_C, SPAN_C, 2, {  # 2: SPAN_KIND_SERVER
        "rpc.system": "grpc", "rpc.service": "outrigger.v1.Plugin", "rpc.method": "PreFilter",
        "outrigger.plugin": "TierZone", "outrigger.profile": "default-scheduler", "outrigger.cycle_id": "c3",
        "outrigger.attempt": 1, "outrigger.snapshot.generation": 9, "outrigger.pod": "default/web",
        "outrigger.code": "CODE_SUCCESS"})]


def test_pre_filter_skips_a_pod_without_tier_or_zones_and_a_call_without_trace_context_has_no_span(
    direct: Direct,
) -> None:
    async def body() -> tuple[Any, Any]:
        channel, stub = await direct.configured()
        async with channel:
            untraced = await stub.PreFilter(P.CycleRequest(ctx=ctx("c4", 9)), timeout=10)
            traced = await stub.PreFilter(
                P.CycleRequest(ctx=ctx("c4-traced", 9, trace={"traceparent": traceparent(TRACE_B, SPAN_C)})),
                timeout=10)
            return untraced, traced

    untraced, traced = asyncio.run(body())
    assert (untraced.status.code, list(untraced.state_writes)) == (T.CODE_SKIP, [])
    assert (traced.status.code, list(traced.state_writes)) == (T.CODE_SKIP, [])
    # Spans are exported in the order they end: once the second call's span is in, the first one would be.
    spans = direct.collector.wait_for(
        lambda s: any(_attr(sp, "outrigger.cycle_id") == "c4-traced" for _, sp in s), "the traced call's span")
    assert [(_attr(sp, "outrigger.cycle_id"), sp.parent_span_id.hex()) for _, sp in spans
            if _attr(sp, "outrigger.cycle_id") in ("c4", "c4-traced")] == [("c4-traced", SPAN_C)]


BAD_CONFIGURE = [
    ('{"bogus": "x"}', "unknown TierZone arg 'bogus' (allowed: tierLabel, zoneLabel, zonesAnnotation)"),
    ('{"tierLabel": 3}', "TierZone arg 'tierLabel' must be a non-empty string"),
    ("[1]", "invalid args: args must be a JSON object, got [1]"),
    # After the prefix comes the JSON parser's own message, which varies between Node.js versions.
    ("{", "invalid args: not valid JSON: "),
]


@pytest.mark.parametrize(("args_json", "message"), BAD_CONFIGURE, ids=[c[0] for c in BAD_CONFIGURE])
def test_bad_args_are_refused_with_a_clear_status(direct: Direct, args_json: str, message: str) -> None:
    async def body() -> Any:
        async with grpc.aio.insecure_channel(direct.host.address) as channel:
            stub = pb.plugin_grpc.PluginStub(channel)  # type: ignore[no-untyped-call]
            return await stub.Configure(P.ConfigureRequest(plugin="TierZone", profile="other", args_json=args_json),
                                        timeout=10)

    reply = asyncio.run(body())
    assert reply.status.code == T.CODE_ERROR and len(reply.status.reasons) == 1
    if message.endswith(": "):
        assert reply.status.reasons[0].startswith(message) and "position 1" in reply.status.reasons[0]
    else:
        assert reply.status.reasons[0] == message


async def _filter_batch_first(stub: Any) -> None:
    call = stub.Filter(timeout=10)
    await call.write(P.FilterRequest(batch=batch(0, 1, ["gold-a"])))
    await call.read()


async def _unknown_plugin(stub: Any) -> None:
    request = P.CycleRequest(ctx=ctx("c5", 1))
    request.ctx.plugin = "Nope"
    await stub.PreFilter(request, timeout=10)


async def _unconfigured_profile(stub: Any) -> None:
    request = P.CycleRequest(ctx=ctx("c6", 1))
    request.ctx.profile = "never-configured"
    await stub.PreFilter(request, timeout=10)


BAD_CALLS: list[tuple[str, Callable[[Any], Any], grpc.StatusCode, str]] = [
    ("batch-before-start", _filter_batch_first, grpc.StatusCode.INVALID_ARGUMENT,
     "a Filter stream must start with FilterStart"),
    ("unknown-plugin", _unknown_plugin, grpc.StatusCode.NOT_FOUND,
     "this plugin host has no plugin named 'Nope' (it hosts TierZone, SharedLabelPlacement, PoolFit, EvictLower)"),
    ("unconfigured-profile", _unconfigured_profile, grpc.StatusCode.FAILED_PRECONDITION,
     "plugin 'TierZone' is not configured for profile 'never-configured'"),
]


@pytest.mark.parametrize(("case", "fn", "code", "message"), BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_calls_fail_with_a_clear_error_and_the_host_keeps_serving(
    direct: Direct, case: str, fn: Callable[[Any], Any], code: grpc.StatusCode, message: str,
) -> None:
    async def body() -> tuple[grpc.StatusCode, str, int]:
        async with grpc.aio.insecure_channel(direct.host.address) as channel:
            stub = pb.plugin_grpc.PluginStub(channel)  # type: ignore[no-untyped-call]
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await fn(stub)
            health = health_pb2_grpc.HealthStub(channel)
            status = await health.Check(health_pb2.HealthCheckRequest(service="outrigger.v1.Plugin"), timeout=10)
            return err.value.code(), err.value.details() or "", status.status

    assert asyncio.run(body()) == (code, message, health_pb2.HealthCheckResponse.SERVING)


# ---------------------------------------------------------------------------------------------------
# The guide's commands (docs/plugin-other-languages.md, "Run the worked example")


GUIDE = ROOT / "docs" / "plugin-other-languages.md"
GUIDE_SECONDS = 120


def guide_script() -> str:
    text = GUIDE.read_text()
    section = text[text.index("## Run the worked example"):]
    start = section.index("```sh\n") + len("```sh\n")
    return section[start:section.index("```", start)]


def test_the_guide_runs_the_worked_example(node: str, tmp_path: Path) -> None:
    script = guide_script()
    framework, plugin_host = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    install = "cd clients/node && npm ci && cd ../..\n"
    assert script.startswith(install)
    # The `node` fixture ran the install (npm ci --no-audit --no-fund); the rest runs as written, in a
    # scratch directory, on free ports.
    script = (script[len(install):].replace("node clients/node/server.js", f"{node} {SERVER_JS}")
              .replace("127.0.0.1:50051", framework).replace("127.0.0.1:50071", plugin_host))
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    out_path = tmp_path / "out.txt"
    with out_path.open("w") as out:
        # Its own session: the background processes it starts are stopped with it, as a group.
        proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        try:
            proc.wait(GUIDE_SECONDS)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the guide's commands did not finish within {GUIDE_SECONDS}s: "
                                 f"{out_path.read_text()[-2000:]}") from None
        output = out_path.read_text()
        assert proc.returncode == 0, output
        lines = output.splitlines()
        assert lines[0].startswith(
            f"outrigger node plugin host listening on {plugin_host} (plugins: TierZone, SharedLabelPlacement, PoolFit, "
            "EvictLower;")
        assert lines[1] == f"outrigger: serving the Scheduler API on {framework}"  # serve's ready line
        del lines[1]
        assert lines[1:5] == ["node/gold-a created", "node/gold-b created", "node/silver-b created",
                              "pod/default/web created"]
        assert lines[5].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE",
                                    "READINESS", "GATES"]
        with SchedulerClient(framework) as client:
            deadline = time.monotonic() + SETTLE_SECONDS
            while (pod := client.get_pod("web")).phase != "Bound" and time.monotonic() < deadline:
                time.sleep(0.05)
            assert (pod.phase, pod.node_name) == ("Bound", "gold-b")
        listed = subprocess.run(["outrigger", "get", "pods", "-o", "wide", "--server", framework], env=env,
                                capture_output=True, text=True, timeout=30)
        row = listed.stdout.splitlines()[1].split()
        assert [row[0], row[2], row[6]] == ["web", "Bound", "gold-b"]
    finally:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        _wait_group(proc.pid)


def _wait_group(pgid: int) -> None:
    """Wait (bounded) for every process of group ``pgid`` to exit; SIGKILL what is left."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def test_host_serves_health_and_exits_cleanly_on_sigterm(node: str) -> None:
    host = NodeHost(node)
    host.start()
    try:
        with grpc.insecure_channel(host.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            got = [stub.Check(health_pb2.HealthCheckRequest(service=s), timeout=10).status
                   for s in ("", "outrigger.v1.Plugin")]
        assert got == [health_pb2.HealthCheckResponse.SERVING] * 2
    finally:
        host.stop()
    assert host.proc is not None and host.proc.returncode == 0


def test_filter_and_score_see_the_request_node_view(direct: Direct) -> None:
    """What-if nodes and transformers' label changes (CycleContext.node_view) apply on top of the snapshot."""
    view = P.NodeView(
        added_nodes=[P.AddedNode(id=100, node=T.Node(metadata=T.ObjectMeta(
            name="what-if-1", labels={"example.com/tier": "gold", "topology.kubernetes.io/zone": "zone-a"})))],
        changes=[P.NodeChange(node_name="gold-a", remove_labels=["example.com/tier"]),
                 P.NodeChange(node_name="gold-c", labels={"topology.kubernetes.io/zone": "zone-b"})],
    )

    async def body() -> tuple[list[tuple[int, list[str]]], list[int], Any]:
        channel, stub = await direct.configured()
        async with channel:
            names = ["gold-a", "what-if-1", "gold-b", "gold-c"]
            ids = [1, 100, 2, 4]
            c = ctx("v1", 21, state=[want_entry("gold", ["zone-b", "zone-a"])])
            c.node_view.CopyFrom(view)
            nodes = T.NodeBatch(snapshot_generation=21, batch_seq=0, node_ids=ids, node_names=names)
            f, s = stub.Filter(timeout=20), stub.Score(timeout=20)
            await f.write(P.FilterRequest(start=P.FilterStart(ctx=c)))
            await f.write(P.FilterRequest(batch=nodes))
            await s.write(P.ScoreRequest(start=P.ScoreStart(ctx=c)))
            await s.write(P.ScoreRequest(batch=nodes))
            filtered, scored = await f.read(), await s.read()
            for call in (f, s):
                await call.done_writing()
            stopped = await stub.Stop(P.StopRequest(reason="test"), timeout=10)
            return _codes(filtered), list(scored.scores), stopped

    codes, scores, stopped = asyncio.run(body())
    assert codes == [(NO, GOLD_MISSING), (OK, []), (OK, []), (OK, [])]
    # gold-a keeps zone-a (50); what-if-1 is in zone-a (50); gold-b zone-b (100); gold-c moved to zone-b (100).
    assert scores == [50, 50, 100, 100]
    assert stopped == P.Ack()


# ---------------------------------------------------------------------------------------------------
# One trace across the framework (Python) and the Node.js plugin host


FRAMEWORK_SERVICE = "outrigger-framework"
NODE_SERVICE = "tierzone-host"


def _chain(span: CollectedSpan, ids: dict[str, CollectedSpan]) -> list[str]:
    """The span's name and its ancestors' names up to the root ("service:name" for the Node.js host's)."""
    out = []
    cur: CollectedSpan | None = span
    while cur is not None:
        out.append(cur.name if cur.service == FRAMEWORK_SERVICE else f"{cur.service}:{cur.name}")
        cur = ids.get(cur.parent_span_id) if cur.parent_span_id else None
    return out


def test_one_trace_holds_the_framework_and_the_node_plugin_spans(node: str, tmp_path: Path) -> None:
    with OtlpSink() as sink:
        otel = {"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint,
                "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with NodeHost(node, env={**otel, "OTEL_SERVICE_NAME": NODE_SERVICE}) as tierzone:
            config = tmp_path / "scheduler.yaml"
            config.write_text(SCHEDULER_CONFIG.replace(", {name: StateWitness}", ""))
            plugins = tmp_path / "remote-plugins.yaml"
            plugins.write_text("apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
                               f"- name: tierzone\n  address: {tierzone.address}\n  deadlines: {{default: 10s}}\n")
            framework = Framework(config, plugins, env={**otel, "OTEL_SERVICE_NAME": FRAMEWORK_SERVICE})
            with framework as client:
                docs = [node_doc(n, tier, zone) for n, (tier, zone) in NODES.items()]
                docs.append(pod_doc("traced", "gold", "zone-b,zone-a"))
                client.apply_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}), "traced.json")
                deadline = time.monotonic() + SETTLE_SECONDS
                while (pod := client.get_pod("traced")).phase != "Bound" and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert (pod.phase, pod.node_name) == ("Bound", "gold-b")
            # Both processes were stopped with SIGTERM: each flushed its spans on the way out.
        assert framework.proc is not None and framework.proc.returncode == 0

        def complete(spans: list[CollectedSpan]) -> bool:
            roots = [s for s in spans
                     if s.name == "SchedulePod" and s.attributes.get("outrigger.pod") == "default/traced"]
            return len(roots) == 1 and any(s.service == NODE_SERVICE and s.trace_id == roots[0].trace_id
                                           and s.name == "outrigger.v1.Plugin/Score" for s in spans)

        spans = sink.wait_for(complete, SPANS_SECONDS)

    root = next(s for s in spans if s.name == "SchedulePod" and s.attributes.get("outrigger.pod") == "default/traced")
    trace = [s for s in spans if s.trace_id == root.trace_id]
    ids = {s.span_id: s for s in trace}
    assert {s.service for s in trace} == {FRAMEWORK_SERVICE, NODE_SERVICE}
    # One tree: a single root, every parent in the trace.
    assert [s.name for s in trace if not s.parent_span_id] == ["SchedulePod"]
    assert all(s.parent_span_id in ids for s in trace if s.parent_span_id)
    cycle_id = root.attributes["outrigger.cycle_id"]
    hosted = [s for s in trace if s.service == NODE_SERVICE]
    # PreFilter once; one Filter batch and one Score batch (four nodes fit in one batch each).
    assert sorted(s.name for s in hosted) == ["outrigger.v1.Plugin/Filter", "outrigger.v1.Plugin/PreFilter",
                                              "outrigger.v1.Plugin/Score"]
    for s in hosted:
        point = s.name.rsplit("/", 1)[1]
        assert s.kind == "SERVER"
        assert (s.attributes["outrigger.plugin"], s.attributes["outrigger.cycle_id"], s.attributes["outrigger.pod"]) \
            == ("TierZone", cycle_id, "default/traced")
        # The host's span is a child of the framework's span for the call to TierZone at that point.
        assert _chain(s, ids)[:2] == [f"{NODE_SERVICE}:{s.name}", f"{point}/TierZone"]
        assert _chain(s, ids)[-2:] == ["SchedulingCycle", "SchedulePod"]
    filtered = next(s for s in hosted if s.name.endswith("/Filter"))
    assert (filtered.attributes["outrigger.nodes"], filtered.attributes["outrigger.rejected"]) == (4, 1)


def test_the_host_unit_tests_pass(node: str) -> None:
    """clients/node/test (node:test): what the Plugin service does not show, e.g. node views with pods,
    the nominating mode of each kind of postFilter answer, the storage mirror of needsVolumes plugins, the
    device mirror of needsDevices plugins, the PodGroup points' answers and refusals, PodGroupPostFilter's
    stream, SignPod's fragments."""
    done = subprocess.run([node, "--test", "test/"], cwd=NODE_DIR, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout and "# pass 36" in done.stdout
