"""The Plugin, Handle and CycleState contracts at their edges: a misbehaving plugin host's answers are
errors naming the plugin (never a silent pass), deadlines, PreFilterExtensions and PreBindPreFlight
both ways, ``pluginhost.context()``, the Handle and CycleState services read directly, and the plugin
host's health service and graceful stop."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from test_remote_fakes import ContractFake
from test_remote_harness import HostProcess, endpoint, remote_rig, until

from framework.config import load_config
from framework.outcomes import Diagnosis
from framework.plugins import in_tree_registry
from framework.remote.services import join_cycle
from framework.scheduler import Scheduler
from framework.service import start_plugin_services
from pluginhost import pb
from pluginhost.host import PluginHost
from pluginhost.manifest import parse_objects
from pluginhost.model import Node, Pod
from pluginhost.plugin import Controller, CycleState
from pluginhost.state import StateValue
from pluginhost.status import Code, Status

E = pb.plugin


def config(plugins: list[str], args: dict[str, Any] | None = None) -> str:
    lines = [
        "apiVersion: kubescheduler.config.k8s.io/v1",
        "kind: KubeSchedulerConfiguration",
        "podInitialBackoffSeconds: 1",
        "podMaxBackoffSeconds: 1",
        "profiles:",
        "- schedulerName: default-scheduler",
        "  plugins:",
        "    multiPoint:",
        "      enabled:",
        "      - {name: PrioritySort}",
        *(f"      - {{name: {p}}}" for p in plugins),
        "      - {name: DefaultBinder}",
        "      disabled:",
        '      - {name: "*"}',
        "  pluginConfig:",
    ]
    for name, a in (args or {}).items():
        lines += [f"  - name: {name}", f"    args: {json.dumps(a)}"]
    return "\n".join(lines) + "\n"


def cluster(nodes: list[str], pods: list[str], bound: dict[str, str] | None = None) -> list[Pod | Node]:
    docs = [f"apiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\n"
            "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n" for n in nodes]
    for p in pods:
        node = (bound or {}).get(p)
        spec = f"nodeName: {node}, " if node else ""
        docs.append(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {p}, uid: uid-{p}}}\n"
                    f"spec: {{{spec}containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]}}\n")
    return parse_objects("---\n".join(docs), "test.yaml")


# ---------------------------------------------------------------------------------------------------
# A misbehaving plugin host


class _BadHost(pb.plugin_grpc.PluginServicer):  # type: ignore[misc]
    """A plugin host (written against the raw contract) that answers Filter/Score wrongly on purpose."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.names: list[str] = []  # node names the framework sent (this host follows no mirror)

    async def Handshake(self, request: Any, context: Any) -> Any:
        manifest = pb.plugin.PluginManifest(
            name="Bad", points=[E.EXTENSION_POINT_FILTER, E.EXTENSION_POINT_SCORE], needs_snapshot=False
        )
        return pb.plugin.HandshakeResponse(plugins=[manifest], host_version="bad")

    async def Configure(self, request: Any, context: Any) -> Any:
        return pb.plugin.ConfigureReply()

    async def Filter(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for req in requests:
            if req.WhichOneof("msg") != "batch":
                continue
            n = len(req.batch.node_ids)
            self.names.extend(req.batch.node_names)
            if self.mode == "eof":
                return
            if self.mode == "hang":
                await asyncio.sleep(30)
            seq = 99 if self.mode == "unknown-seq" else req.batch.batch_seq
            codes = [0] * (n - 1 if self.mode == "short" else n)
            if self.mode == "bad-code":
                codes[0] = 9
            yield pb.plugin.FilterReply(batch_seq=seq, codes=codes)

    async def Score(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for req in requests:
            if req.WhichOneof("msg") != "batch":
                continue
            n = len(req.batch.node_ids)
            scores = [500] * n if self.mode == "score-range" else [1] * (1 if self.mode == "score-short" else n)
            yield pb.plugin.ScoreReply(batch_seq=req.batch.batch_seq, scores=scores)


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        pytest.param("unknown-seq", 'running "Bad" filter plugin: answered Filter batch 99, which was not sent '
                     "(or twice)", id="node-reference-not-sent"),
        pytest.param("short", 'running "Bad" filter plugin: answered 2 of the 3 nodes of Filter batch 0',
                     id="missing-answer"),
        pytest.param("eof", 'running "Bad" filter plugin: the plugin closed its Filter stream with 1 batch(es) '
                     "unanswered (plugin host 'bad' at {address})", id="stream-closed-early"),
        pytest.param("bad-code", 'running "Bad" filter plugin: returned an unknown status code', id="bad-code"),
        pytest.param("hang", 'running "Bad" filter plugin: DEADLINE_EXCEEDED: no answer within 0.3s '
                     "(plugin host 'bad' at {address})", id="deadline"),
        pytest.param("score-short", 'running Score plugins: plugin "Bad" failed with: returned 1 scores for 3 nodes',
                     id="score-missing-answer"),
        pytest.param("score-range", 'applying score defaultWeights on Score plugins: plugin "Bad" returns an invalid '
                     "score 500, it should in the range of [0, 100] after normalizing", id="score-out-of-range"),
    ],
)  # fmt: skip
def test_misbehaving_host_answers_are_errors_naming_the_plugin(mode: str, message: str) -> None:
    bad = _BadHost(mode)

    async def main() -> tuple[Status, str]:
        server = grpc.aio.server()
        pb.plugin_grpc.add_PluginServicer_to_server(bad, server)  # type: ignore[no-untyped-call]
        address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        text = config(["Bad"])
        rig = await remote_rig([endpoint("bad", address, filter=0.3)], lambda r: load_config(text, r.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply(cluster(["n0", "n1", "n2"], ["p1"]))

            def failed() -> bool:
                r = s.get_pod("default", "p1")
                return r is not None and r.last_status is not None

            await until(failed, 10, "the cycle to fail")
            r = s.get_pod("default", "p1")
            assert r is not None and r.last_status is not None and r.phase != "Bound"
            return r.last_status, address
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()
            await server.stop(0)

    status, address = asyncio.run(main())
    assert (status.code, status.plugin) == (Code.Error, "Bad")
    assert sorted(set(bad.names)) == ["n0", "n1", "n2"]  # a host without a mirror gets names with the ids
    assert status.message() == message.format(address=address)


# ---------------------------------------------------------------------------------------------------
# PreFilterExtensions, PreBindPreFlight and the call context, both ways


@pytest.mark.parametrize("mode", ["inprocess", "remote"])
def test_pre_filter_extensions_pre_bind_pre_flight_and_context(mode: str, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    text = config(["Contract"], {"Contract": {"calls": str(calls)}})
    out: dict[str, Any] = {}

    async def exercise(s: Scheduler) -> None:
        await s.apply(cluster(["n0", "n1"], ["p1", "skip-me", "victim", "blocker"], {"victim": "n1", "blocker": "n1"}))
        fwk = s.profiles["default-scheduler"]
        snapshot = s.cache.snapshot()
        pods = {r.pod.name: r.pod for r in s.pods.values()}
        state = CycleState("manual:1", snapshot)  # not a scheduler cycle: remote calls find it in flight
        _, status = await fwk.run_pre_filter(state, pods["p1"], Diagnosis())
        row = snapshot.row("n1")
        assert status.ok and row is not None
        out["add"] = await fwk.run_pre_filter_extension_add_pod(state, pods["p1"], pods["victim"], row)
        out["after_add"] = state.read("Contract/count").as_json()
        out["remove"] = await fwk.run_pre_filter_extension_remove_pod(state, pods["p1"], pods["victim"], row)
        out["after_remove"] = state.read("Contract/count").as_json()
        out["blocked"] = await fwk.run_pre_filter_extension_add_pod(state, pods["p1"], pods["blocker"], row)
        out["preflight"] = await fwk.run_pre_bind_pre_flights(state, pods["p1"], "n0")
        out["preflight_skip"] = await fwk.run_pre_bind_pre_flights(state, pods["skip-me"], "n0")
        out["permit"] = await fwk.run_permit(state, pods["p1"], "n0")

    async def inprocess() -> None:
        reg = in_tree_registry()
        reg.register_class(ContractFake)
        await exercise(Scheduler(load_config(text, reg.points()), reg, seed=0))

    async def remote(address: str) -> None:
        rig = await remote_rig([endpoint("contract", address)], lambda r: load_config(text, r.points()))
        try:
            await exercise(rig.scheduler)
            assert rig.services.services.in_flight_count() == 0
        finally:
            await rig.close()

    if mode == "inprocess":
        asyncio.run(inprocess())
    else:
        with HostProcess("test_remote_fakes:ContractFake") as host:
            asyncio.run(remote(host.address))
    assert out["add"].ok and out["after_add"] == 1
    assert out["remove"].ok and out["after_remove"] == 0
    assert out["blocked"] == Status(
        Code.Error, ('running AddPod on PreFilter plugin "Contract": blocker cannot go to n1',), "Contract"
    )
    assert out["preflight"].ok and out["preflight_skip"].is_skip
    assert out["permit"].ok
    logged = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [c[:4] for c in logged if c[0] != "context"] == [
        ["addPod", "p1", "victim", "n1"], ["removePod", "p1", "victim", "n1"], ["addPod", "p1", "blocker", "n1"],
    ]  # fmt: skip
    (context,) = [c[1] for c in logged if c[0] == "context"]
    if mode == "inprocess":
        assert context is None
    else:
        assert context == {"plugin": "Contract", "point": "Permit", "profile": "default-scheduler",
                           "cycle_id": "manual:1", "pod": "p1", "args": ["calls"], "handle": "HandleClient"}


# ---------------------------------------------------------------------------------------------------
# The Handle and CycleState services, read directly


def test_handle_and_cycle_state_services() -> None:
    async def main() -> None:
        reg = in_tree_registry()
        s = Scheduler(load_config(config([]), reg.points()), reg, seed=0)
        services = await start_plugin_services()
        services.services.attach(s)
        # The caller is a registered plugin host serving plugin "t", which is part of cycle c1.
        services.services.grant("secret", SimpleNamespace(name="test", manifests={"t": None}))
        md = (("authorization", "Bearer secret"),)
        try:
            await s.apply(cluster(["n0", "n1"], ["bound"], {"bound": "n1"}))
            state = CycleState("c1", s.cache.snapshot())
            state.write("a", StateValue.json(1))
            state.write("private", object())  # framework-private: not shared
            join_cycle(state, "t")
            s.cycle_states["c1"] = state
            async with grpc.aio.insecure_channel(services.address) as channel:
                cs = pb.cyclestate_grpc.CycleStateStub(channel)  # type: ignore[no-untyped-call]
                read = await cs.Read(pb.cyclestate.ReadStateRequest(cycle_id="c1", plugin="t"), timeout=5, metadata=md)
                assert [(e.key, e.value) for e in read.entries] == [("a", b"1")]
                await cs.Write(pb.cyclestate.WriteStateRequest(cycle_id="c1", plugin="t", entries=[
                    pb.types.StateEntry(key="b", content_type="text/plain", value=b"x"),
                    pb.types.StateEntry(key="a", deleted=True),
                ]), timeout=5, metadata=md)  # fmt: skip
                assert state.get("a") is None and state.read("b") == StateValue("text/plain", b"x")
                delete = pb.cyclestate.DeleteStateRequest(cycle_id="c1", plugin="t", keys=["b", "zz"])
                deleted = await cs.Delete(delete, timeout=5, metadata=md)
                assert deleted.deleted == 1
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await cs.Read(pb.cyclestate.ReadStateRequest(cycle_id="c1", plugin="t", keys=["private"]),
                                  timeout=5, metadata=md)
                assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await cs.Read(pb.cyclestate.ReadStateRequest(cycle_id="gone", plugin="t"), timeout=5, metadata=md)
                assert err.value.code() == grpc.StatusCode.NOT_FOUND

                handle = pb.handle_grpc.HandleStub(channel)  # type: ignore[no-untyped-call]
                info = await handle.GetNodeInfo(pb.handle.GetNodeInfoRequest(name="n1"), timeout=5, metadata=md)
                assert info.node.metadata.name == "n1" and [p.ref.name for p in info.pods] == ["bound"]
                assert info.requested["cpu"] == 100 and info.non_zero_requested["memory"] == 200 * 1024 * 1024
                same = await handle.GetNodeInfo(pb.handle.GetNodeInfoRequest(id=info.node_id), timeout=5, metadata=md)
                assert same.node.metadata.name == "n1"
                listed = await handle.ListNodeInfos(pb.handle.ListNodeInfosRequest(), timeout=5, metadata=md)
                assert [n.node.metadata.name for n in listed.nodes] == ["n0", "n1"]
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await handle.GetWaitingPod(pb.handle.GetWaitingPodRequest(uid="nobody"), timeout=5, metadata=md)
                assert err.value.code() == grpc.StatusCode.NOT_FOUND
                allowed = await handle.AllowWaitingPod(pb.handle.AllowWaitingPodRequest(uid="nobody"), timeout=5,
                                                       metadata=md)
                assert not allowed.found
                bound = await handle.BindPod(pb.handle.BindPodRequest(
                    pod=pb.types.PodRef(uid="uid-bound", namespace="default", name="bound"), node_name="n0"),
                    timeout=5, metadata=md)
                assert bound.status.code == pb.types.CODE_ERROR and "already bound" in bound.status.reasons[0]
        finally:
            await services.stop()

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------------
# The plugin host's lifecycle


class Tally(ContractFake, Controller):
    """ContractFake holding state of its own (instances made, controller starts and stops)."""

    made: list[Tally] = []

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        super().__init__(args, handle)
        self.events: list[str] = []
        Tally.made.append(self)

    async def start(self) -> None:
        self.events.append("start")

    async def stop(self) -> None:
        self.events.append("stop")


@pytest.mark.parametrize(("second", "stopped_between", "instances", "first_events"), [
    pytest.param('{"calls": "x", "n": 1}', False, 1, ["start"], id="same-args-keep-the-instance"),
    pytest.param(' {"n": 1,  "calls": "x"} ', False, 1, ["start"], id="same-args-other-spelling"),
    pytest.param('{"calls": "x", "n": 2}', False, 2, ["start", "stop"], id="new-args-replace-it"),
    pytest.param('{"calls": "x", "n": 1}', True, 2, ["start", "stop"], id="stopped-controller-is-rebuilt"),
])
def test_configure_again_with_the_same_args_keeps_the_instance_and_its_state(
        second: str, stopped_between: bool, instances: int, first_events: list[str]) -> None:
    """The framework handshakes and configures a host again after any failed call (a slow one too): a
    plugin configured again with equal args keeps its instance and its running controller."""
    Tally.made.clear()

    async def main() -> None:
        host = await PluginHost([Tally], listen="127.0.0.1:0").start()
        try:
            async with grpc.aio.insecure_channel(host.address) as channel:
                stub = pb.plugin_grpc.PluginStub(channel)  # type: ignore[no-untyped-call]
                for args_json in ('{"calls": "x", "n": 1}', second):
                    if stopped_between and args_json == second:
                        await stub.Stop(pb.plugin.StopRequest(profile="p", reason="lost the lease"), timeout=5)
                    reply = await stub.Configure(pb.plugin.ConfigureRequest(
                        plugin="Contract", profile="p", args_json=args_json), timeout=5)
                    assert reply.status.code == pb.types.CODE_SUCCESS
                seen.extend(list(t.events) for t in Tally.made)  # before the host's stop stops them all
        finally:
            await host.stop(0.5)

    seen: list[list[str]] = []
    asyncio.run(main())
    assert len(seen) == instances
    assert seen[0] == first_events
    assert seen[-1] == ["start"]


def test_host_serves_health_and_stops_gracefully() -> None:
    async def main() -> None:
        host = await PluginHost([ContractFake], listen="127.0.0.1:0").start()
        async with grpc.aio.insecure_channel(host.address) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for service in ("", "outrigger.v1.Plugin"):
                reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
                assert reply.status == health_pb2.HealthCheckResponse.SERVING
            manifest = (await pb.plugin_grpc.PluginStub(channel).Handshake(  # type: ignore[no-untyped-call]
                pb.plugin.HandshakeRequest(), timeout=5)).plugins[0]
            assert manifest.name == "Contract" and list(manifest.state_keys) == ["Contract/count"]
            assert set(manifest.points) == {E.EXTENSION_POINT_PRE_FILTER, E.EXTENSION_POINT_PRE_FILTER_EXTENSIONS,
                                            E.EXTENSION_POINT_PERMIT, E.EXTENSION_POINT_PRE_BIND,
                                            E.EXTENSION_POINT_PRE_BIND_PRE_FLIGHT}  # fmt: skip
            await host.stop(0.5)
            await host.stop(0.5)  # idempotent
            with pytest.raises(grpc.aio.AioRpcError):
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=1)

    asyncio.run(main())
    # A host process stops on SIGTERM with exit code 0.
    host = HostProcess("test_remote_fakes:ContractFake")
    host.start()
    host.stop()
    assert host.proc is not None and host.proc.returncode == 0


