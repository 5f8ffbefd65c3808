"""The framework service over real gRPC on 127.0.0.1: apply, schedule, watch, bad input, health."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from clients import AsyncSchedulerClient, EventType, PodState, Status
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
    """``test(server, channel)`` against a fresh framework service (raw stubs: the wire contract)."""

    async def main() -> None:
        registry = build_registry()
        server = await start_server(default_scheduler_config(registry), registry, "127.0.0.1:0", seed=3)
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                await test(server, channel)
        finally:
            await server.stop(0.5)

    asyncio.run(asyncio.wait_for(main(), 30))


def run_client(test: Callable[[Server, AsyncSchedulerClient], Awaitable[None]]) -> None:
    """``test(server, client)`` against a fresh framework service, through the typed client."""

    async def body(server: Server, channel: Any) -> None:
        async with AsyncSchedulerClient(server.address, timeout=5) as client:
            await test(server, client)

    run(body)


async def settle(client: AsyncSchedulerClient, names: list[str], tries: int = 200) -> dict[str, PodState]:
    """Poll until every named pod is Bound or Unschedulable (bounded)."""
    states: dict[str, PodState] = {}
    for _ in range(tries):
        states = {p.ref.name: p for p in await client.list_pods()}
        if all(n in states and states[n].phase in ("Bound", "Unschedulable") for n in names):
            return states
        await asyncio.sleep(0.01)
    raise AssertionError(f"pods did not settle: { {n: s.phase for n, s in states.items()} }")


def test_pods_are_bound_or_reported_unschedulable_never_dropped() -> None:
    async def body(server: Server, client: AsyncSchedulerClient) -> None:
        await client.apply(NODES)
        pods = [pod(f"p{i}", "1") for i in range(7)]  # 3 nodes x 2 cpu: 6 fit, 1 does not
        applied = await client.apply(pods)
        assert [(a.ref.name, a.action) for a in applied] == [(f"p{i}", "created") for i in range(7)]
        states = await settle(client, [f"p{i}" for i in range(7)])
        phases = sorted(s.phase for s in states.values())
        assert phases == ["Bound"] * 6 + ["Unschedulable"]
        loser = next(s for s in states.values() if s.phase == "Unschedulable")
        # Equal priorities: preemption finds no victims (kube-scheduler's message, double period included).
        assert loser.last_status == Status("Unschedulable", (
            "0/3 nodes are available: 3 Insufficient cpu. "
            "preemption: 0/3 nodes are available: 3 No preemption victims found for "
            "incoming pod.",
        ))
        assert loser.queue == "unschedulable"
        nodes = await client.list_nodes()
        assert sorted((n.name, n.pods, n.requested["cpu"]) for n in nodes) == [
            ("n0", 2, 2000), ("n1", 2, 2000), ("n2", 2, 2000)
        ]
        # Freeing room (deleting a bound pod) moves the unschedulable pod back and it binds.
        bound = next(s for s in states.values() if s.phase == "Bound")
        assert await client.delete_pod(bound.ref.name)
        for _ in range(300):
            got = await client.get_pod(loser.ref.name)
            if got.phase == "Bound":
                break
            await asyncio.sleep(0.01)
        assert got.phase == "Bound" and got.node_name == bound.node_name
        assert server.scheduler.leaks() == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0,
                                            "binding_cycles": 0}

    run_client(body)


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
    async def body(server: Server, client: AsyncSchedulerClient) -> None:
        await client.apply([NODES[0], pod("fits"), pod("big", "3")])
        await settle(client, ["fits", "big"])
        wanted = [EventType.BOUND, EventType.UNSCHEDULABLE]
        events = []
        async with client.watch(types=wanted, timeout=5) as stream:
            async for ev in stream:
                events.append(ev)
                if len(events) == 2:
                    break
        got = sorted((ev.object.name, ev.type, ev.node_name) for ev in events)
        assert got == [("big", EventType.UNSCHEDULABLE, ""), ("fits", EventType.BOUND, "n0")]
        # Resuming after the last event seen replays nothing old.
        assert stream.cursor.sequence == max(ev.sequence for ev in events)
        assert server.scheduler.recent_events(stream.cursor.sequence) == []
        async with client.watch(resume=stream.cursor, timeout=0.5) as resumed:
            assert [ev async for ev in resumed] == []

    run_client(body)


def test_health_is_serving_and_explain_answers_over_grpc() -> None:
    async def body(server: Server, channel: Any) -> None:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service="outrigger.v1.Scheduler"), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        async with AsyncSchedulerClient(server.address, timeout=5) as client:
            await client.apply(NODES)
            result = await client.explain(pod("q"))
        assert (result.pod, result.status) == ("default/q", Status("Success"))
        assert result.selected in {"n0", "n1", "n2"}
        # 3 empty 2-cpu/4Gi nodes, pod 500m/256Mi: LeastAllocated = ((2000-500)*100//2000 + (4096-256)*100//4096)//2
        assert {n.scores["NodeResourcesFit"].raw for n in result.nodes.values()} == {(75 + 93) // 2}
        assert server.scheduler.pods == {}  # explain reserves and binds nothing

    run(body)
