"""The framework service over real gRPC on 127.0.0.1: apply, schedule, watch, bad input, health."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from framework.profiles import build_registry, default_scheduler_config
from framework.service import Server, start_server
from pluginhost import pb

NODES = [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
     "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}
    for i in range(3)
]


def pod(name: str, cpu: str = "500m", **spec: Any) -> dict[str, Any]:
    body = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}], **spec}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": body}


def manifest(*objs: dict[str, Any]) -> Any:
    doc = {"apiVersion": "v1", "kind": "List", "items": list(objs)}
    return pb.scheduler.Manifest(source="test.json", content=json.dumps(doc))


def run(test: Callable[[Server, Any], Awaitable[None]]) -> None:
    async def main() -> None:
        registry = build_registry()
        server = await start_server(default_scheduler_config(registry), registry, "127.0.0.1:0", seed=3)
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                await test(server, channel)
        finally:
            await server.stop(0.5)

    asyncio.run(asyncio.wait_for(main(), 30))


async def settle(stub: Any, names: list[str], tries: int = 200) -> dict[str, Any]:
    """Poll until every named pod is Bound or Unschedulable (bounded)."""
    states: dict[str, Any] = {}
    for _ in range(tries):
        states = {p.ref.name: p for p in (await stub.ListPods(pb.scheduler.ListPodsRequest(), timeout=5)).pods}
        if all(n in states and states[n].phase in ("Bound", "Unschedulable") for n in names):
            return states
        await asyncio.sleep(0.01)
    raise AssertionError(f"pods did not settle: { {n: s.phase for n, s in states.items()} }")


def test_pods_are_bound_or_reported_unschedulable_never_dropped() -> None:
    async def body(server: Server, channel: Any) -> None:
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        await stub.Apply(pb.scheduler.ApplyRequest(manifests=[manifest(*NODES)]), timeout=5)
        pods = [pod(f"p{i}", "1") for i in range(7)]  # 3 nodes x 2 cpu: 6 fit, 1 does not
        reply = await stub.Apply(pb.scheduler.ApplyRequest(manifests=[manifest(*pods)]), timeout=5)
        assert [(a.ref.name, a.action) for a in reply.applied] == [(f"p{i}", "created") for i in range(7)]
        states = await settle(stub, [f"p{i}" for i in range(7)])
        phases = sorted(s.phase for s in states.values())
        assert phases == ["Bound"] * 6 + ["Unschedulable"]
        loser = next(s for s in states.values() if s.phase == "Unschedulable")
        assert loser.last_status.code == pb.types.CODE_UNSCHEDULABLE
        # Equal priorities: preemption finds no victims (kube-scheduler's message, double period included).
        assert list(loser.last_status.reasons) == [
            "0/3 nodes are available: 3 Insufficient cpu. "
            "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."
        ]
        assert loser.queue == "unschedulable"
        nodes = (await stub.ListNodes(pb.scheduler.ListNodesRequest(), timeout=5)).nodes
        assert sorted((n.name, n.pods, n.requested["cpu"]) for n in nodes) == [
            ("n0", 2, 2000), ("n1", 2, 2000), ("n2", 2, 2000)
        ]
        # Freeing room (deleting a bound pod) moves the unschedulable pod back and it binds.
        bound = next(s for s in states.values() if s.phase == "Bound")
        await stub.Delete(pb.scheduler.DeleteRequest(objects=[pb.scheduler.ObjectRef(
            kind="Pod", namespace="default", name=bound.ref.name)]), timeout=5)
        for _ in range(300):
            got = await stub.GetPod(pb.scheduler.GetPodRequest(name=loser.ref.name), timeout=5)
            if got.phase == "Bound":
                break
            await asyncio.sleep(0.01)
        assert got.phase == "Bound" and got.node_name == bound.node_name
        assert server.scheduler.leaks() == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0,
                                            "binding_cycles": 0}

    run(body)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: Pod\napiVersion: v1\nmetadata: {name: x}\nspec: {containers: [{name: c, resources: "
         "{requests: {cpu: lots}}}]}", 'spec.containers[0].resources.requests.cpu: invalid quantity "lots"'),
        ("kind: Deployment\napiVersion: apps/v1\nmetadata: {name: x}", 'unsupported kind "Deployment"'),
        ("a: [unclosed", "invalid YAML"),
        ("kind: Node\napiVersion: v1\nmetadata: {name: BAD_NAME}", "metadata.name"),
    ],
    ids=["bad-quantity", "unsupported-kind", "yaml-syntax", "invalid-name"],
)
def test_bad_manifest_is_refused_whole_and_changes_nothing(content: str, message: str) -> None:
    async def body(server: Server, channel: Any) -> None:
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        good = manifest(NODES[0])
        bad = pb.scheduler.Manifest(source="bad.yaml", content=content)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Apply(pb.scheduler.ApplyRequest(manifests=[good, bad]), timeout=5)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "bad.yaml" in (err.value.details() or "")
        assert message in (err.value.details() or "")
        # Nothing from the request was applied, and the service still answers.
        assert list((await stub.ListNodes(pb.scheduler.ListNodesRequest(), timeout=5)).nodes) == []
        reply = await stub.Apply(pb.scheduler.ApplyRequest(manifests=[good]), timeout=5)
        assert [a.ref.name for a in reply.applied] == ["n0"]

    run(body)


def test_bad_api_calls_get_clear_errors() -> None:
    async def body(server: Server, channel: Any) -> None:
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        cases = [
            (stub.GetPod(pb.scheduler.GetPodRequest(name="ghost"), timeout=5), grpc.StatusCode.NOT_FOUND,
             "pod default/ghost not found"),
            (stub.Delete(pb.scheduler.DeleteRequest(objects=[pb.scheduler.ObjectRef(kind="Service", name="x")]),
                         timeout=5), grpc.StatusCode.INVALID_ARGUMENT, "cannot delete kind 'Service'"),
            (stub.Explain(pb.scheduler.ExplainRequest(pod=manifest(pod("a"), pod("b"))), timeout=5),
             grpc.StatusCode.INVALID_ARGUMENT, "explain needs exactly one Pod, got 2"),
        ]
        for call, code, text in cases:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await call
            assert err.value.code() == code
            assert text in (err.value.details() or "")
        dup = manifest(pod("same"), pod("same"))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stub.Apply(pb.scheduler.ApplyRequest(manifests=[dup]), timeout=5)
        assert "Pod default/same appears twice in one request" in (err.value.details() or "")
        assert server.scheduler.pods == {}

    run(body)


def test_watch_streams_bound_and_unschedulable_events_and_resumes() -> None:
    async def body(server: Server, channel: Any) -> None:
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        await stub.Apply(pb.scheduler.ApplyRequest(manifests=[manifest(NODES[0], pod("fits"), pod("big", "3"))]),
                         timeout=5)
        await settle(stub, ["fits", "big"])
        wanted = [pb.scheduler.EVENT_TYPE_BOUND, pb.scheduler.EVENT_TYPE_UNSCHEDULABLE]
        events = []
        call = stub.Watch(pb.scheduler.WatchRequest(since_sequence=0, replay=True, types=wanted), timeout=5)
        async for ev in call:
            events.append(ev)
            if len(events) == 2:
                call.cancel()
                break
        got = sorted((ev.object.name, ev.type, ev.node_name) for ev in events)
        assert got == [
            ("big", pb.scheduler.EVENT_TYPE_UNSCHEDULABLE, ""),
            ("fits", pb.scheduler.EVENT_TYPE_BOUND, "n0"),
        ]
        # Resuming after the last sequence seen replays nothing old.
        last = max(ev.sequence for ev in events)
        assert all(ev.sequence <= last for ev in server.scheduler.recent_events(0))
        assert server.scheduler.recent_events(last) == []

    run(body)


def test_health_is_serving_and_explain_answers_over_grpc() -> None:
    async def body(server: Server, channel: Any) -> None:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service="outrigger.v1.Scheduler"), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        await stub.Apply(pb.scheduler.ApplyRequest(manifests=[manifest(*NODES)]), timeout=5)
        result = json.loads((await stub.Explain(pb.scheduler.ExplainRequest(pod=manifest(pod("q"))), timeout=5)).json)
        assert result["pod"] == "default/q"
        assert result["status"] == {"code": "Success", "reasons": []}
        assert result["selected"] in {"n0", "n1", "n2"}
        # 3 empty 2-cpu/4Gi nodes, pod 500m/256Mi: LeastAllocated = ((2000-500)*100//2000 + (4096-256)*100//4096)//2
        assert {n["scores"]["NodeResourcesFit"]["raw"] for n in result["nodes"].values()} == {(75 + 93) // 2}
        assert server.scheduler.pods == {}  # explain reserves and binds nothing

    run(body)
