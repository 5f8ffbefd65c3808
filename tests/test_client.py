"""The client library (clients/) against a real framework service on 127.0.0.1: typed answers, one
error type with readable messages, and watches that resume across cancelled and broken streams and a
restarted framework with no event twice and none missed."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from framework_thread import FrameworkThread, Proxy

from clients import (
    Applied,
    AsyncSchedulerClient,
    ClientError,
    Event,
    EventType,
    NodeSummary,
    ObjectRef,
    PodState,
    SchedulerClient,
    Status,
    WaitingPod,
)
from clients.selector import SelectorError, parse_selector
from clients.types import PROTO_EVENT_TYPES
from framework.config import SchedulerConfig, load_config
from framework.observe.observability import ObservabilityConfig
from framework.plugins import Registry
from framework.service import start_server
from pluginhost.plugin import CycleState, PermitPlugin
from pluginhost.status import Status as PluginStatus

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0", "labels": {"zone": "a"}},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}
FULL = ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
        "available: 1 Preemption is not helpful for scheduling.")


def pod(name: str, cpu: str = "500m", namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}}


@pytest.fixture
def framework() -> Iterator[FrameworkThread]:
    with FrameworkThread() as fw:
        yield fw


@pytest.fixture
def client(framework: FrameworkThread) -> Iterator[SchedulerClient]:
    with SchedulerClient(framework.address, timeout=10) as c:
        yield c


def settle(c: SchedulerClient, names: list[str], tries: int = 500) -> dict[str, PodState]:
    """Poll (bounded) until every named pod is Bound or Unschedulable."""
    states: dict[str, PodState] = {}
    for _ in range(tries):
        states = {p.ref.name: p for p in c.list_pods()}
        if all(n in states and states[n].phase in ("Bound", "Unschedulable") for n in names):
            return states
        time.sleep(0.02)
    raise AssertionError(f"pods did not settle: { {n: s.phase for n, s in states.items()} }")


def strip(events: list[Event]) -> list[tuple[int, str, str, str]]:
    """Events without uids and timestamps: (sequence, type, object, node)."""
    return [(e.sequence, e.type.label, str(e.object), e.node_name) for e in events]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_event_types_match_the_proto() -> None:
    assert {t.name: int(t) for t in EventType} == PROTO_EVENT_TYPES


def test_apply_get_list_delete_answer_typed_values(client: SchedulerClient, tmp_path: Path) -> None:
    (tmp_path / "pods.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: fits}\n"
                                        "spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}\n")
    relabelled = {**NODE, "metadata": {"name": "n0", "labels": {"zone": "b"}}}
    applied = client.apply([NODE])
    assert [(a.ref.kind, a.ref.key, a.action) for a in applied] == [("Node", "n0", "created")]
    cases: list[tuple[str, Callable[[], list[Applied]], list[tuple[str, str]]]] = [
        ("objects", lambda: client.apply([pod("big", "3", "shop")]), [("pod/shop/big", "created")]),
        ("file", lambda: client.apply_files([tmp_path / "pods.yaml"]), [("pod/default/fits", "created")]),
        ("text", lambda: client.apply_text(json.dumps(relabelled), "node.json"), [("node/n0", "configured")]),
        ("dry run", lambda: client.apply([pod("ghost")], dry_run=True), [("pod/default/ghost", "created")]),
    ]
    for name, call, want in cases:
        assert [(str(a.ref), a.action) for a in call()] == want, name
    states = settle(client, ["fits", "big"])
    assert sorted(states) == ["big", "fits"]  # the dry run created nothing
    fits = client.get_pod("fits")
    assert fits == PodState(ref=ObjectRef("Pod", "fits", "default", fits.ref.uid), phase="Bound", node_name="n0",
                            attempts=1, profile="default-scheduler", manifest=fits.manifest)
    big = client.get_pod("big", "shop")
    assert big == PodState(ref=ObjectRef("Pod", "big", "shop", big.ref.uid), phase="Unschedulable",
                           last_status=Status("Unschedulable", (FULL,)), attempts=1, queue="unschedulable",
                           profile="default-scheduler", manifest=big.manifest)
    # The v1 objects: the manifest as applied, with what the server fills in.
    assert (fits.manifest["spec"]["nodeName"], fits.manifest["status"]) == (
        "n0", {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]})
    assert big.manifest["status"] == {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": FULL}]}
    assert big.reason == FULL and fits.reason == ""
    assert [p.ref.name for p in client.list_pods(namespace="shop")] == ["big"]
    assert [p.ref.name for p in client.list_pods(phase="Bound")] == ["fits"]
    assert client.list_nodes() == [NodeSummary(
        name="n0", allocatable={"cpu": 2000, "ephemeral-storage": 0, "memory": 4 << 30, "pods": 10},
        requested={"cpu": 1000, "ephemeral-storage": 0, "memory": 0, "pods": 1}, pods=1, unschedulable=False,
        taints=(), labels={"zone": "b"})]
    assert (client.delete_pod("fits"), client.delete_pod("fits"), client.delete_node("nope")) == (True, False, False)
    assert [p.ref.name for p in client.list_pods()] == ["big"]


def test_explain_a_manifest_and_a_held_pod_give_the_same_answer(client: SchedulerClient) -> None:
    client.apply([NODE, pod("other", "1")])
    settle(client, ["other"])
    before = client.explain(pod("web"))
    # n0: 2 cpu/4Gi with 1 cpu/256Mi requested; web 500m/256Mi -> cpu (2000-1500)*100//2000 = 25,
    # memory (4096-512)*100//4096 = 87 -> NodeResourcesFit (25+87)//2 = 56
    assert (before.pod, before.selected, before.status) == ("default/web", "n0", Status("Success"))
    assert before.nodes["n0"].scores["NodeResourcesFit"].raw == 56
    client.apply([pod("web")])
    settle(client, ["web", "other"])
    # Bound now: explained as if taken off its node, so its own requests do not count twice.
    assert client.explain_pod("web") == before
    client.apply([pod("huge", "8")])
    settle(client, ["huge"])
    huge = client.explain_pod("huge")
    assert (huge.selected, huge.status.code) == (None, "Unschedulable")
    # More cpu than the node has at all: preemption could not help.
    assert huge.nodes["n0"].filter == Status("UnschedulableAndUnresolvable", ("Insufficient cpu",), "NodeResourcesFit")
    assert huge.nodes["n0"].total is None


def test_every_failure_is_one_client_error_with_a_readable_message(client: SchedulerClient, tmp_path: Path) -> None:
    dead = SchedulerClient(f"127.0.0.1:{free_port()}", timeout=5)
    bad_quantity = ("kind: Pod\napiVersion: v1\nmetadata: {name: x}\n"
                    "spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}")
    cases: list[tuple[str, Callable[[], Any], grpc.StatusCode | None, str]] = [
        ("unreachable", dead.list_pods, grpc.StatusCode.UNAVAILABLE, f"cannot reach the framework at {dead.address}"),
        ("ping unreachable", dead.ping, grpc.StatusCode.UNAVAILABLE, f"cannot reach the framework at {dead.address}"),
        ("bad quantity", lambda: client.apply_text(bad_quantity, "bad.yaml"), grpc.StatusCode.INVALID_ARGUMENT,
         'bad.yaml: document 1 (Pod default/x): spec.containers[0].resources.requests.cpu: invalid quantity "lots"'),
        ("bad yaml", lambda: client.apply_text("a: [unclosed", "bad.yaml"), grpc.StatusCode.INVALID_ARGUMENT,
         "bad.yaml: document 1: line 2, column 1: invalid YAML: while parsing a flow sequence, "
         "did not find expected ',' or ']'"),
        ("unknown pod", lambda: client.get_pod("ghost"), grpc.StatusCode.NOT_FOUND, "pod default/ghost not found"),
        ("explain unknown pod", lambda: client.explain_pod("ghost", "shop"), grpc.StatusCode.NOT_FOUND,
         "pod shop/ghost not found"),
        ("explain two pods", lambda: client.explain(json.dumps({"kind": "List", "items": [pod("a"), pod("b")]})),
         grpc.StatusCode.INVALID_ARGUMENT, "explain needs exactly one Pod, got 2"),
        ("explain unknown profile", lambda: client.explain(pod("a"), profile="nope"),
         grpc.StatusCode.INVALID_ARGUMENT, "no profile named 'nope'"),
        ("missing file", lambda: client.apply_files([tmp_path / "missing.yaml"]), None,
         f"cannot read {tmp_path / 'missing.yaml'}: No such file or directory"),
    ]
    client.ping()  # the live one answers
    try:
        for name, call, code, message in cases:
            with pytest.raises(ClientError) as err:
                call()
            assert (err.value.code, str(err.value)) == (code, message), name
    finally:
        dead.close()
    assert client.list_pods() == []  # nothing was applied


# ---- waiting pods ---------------------------------------------------------------------------------


class HoldPermit(PermitPlugin):
    """Holds every pod in Permit for five minutes (released by the Handle, or by the test's end)."""

    name = "HoldPermit"

    def __init__(self, args: Any, handle: Any) -> None:
        pass

    async def permit(self, state: CycleState, pod: Any, node_name: str) -> tuple[PluginStatus, float]:
        return PluginStatus.wait(), 300.0


def holding_config(registry: Registry) -> SchedulerConfig:
    text = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
- schedulerName: holding
  plugins:
    permit: {enabled: [{name: HoldPermit}]}
"""
    return load_config(text, registry.points(), "<test>")


def holding_framework() -> FrameworkThread:
    from framework.profiles import build_registry

    registry = build_registry()
    registry.register_class(HoldPermit)
    return FrameworkThread(holding_config, registry)


def test_list_waiting_pods_shows_pods_held_in_permit() -> None:
    with holding_framework() as fw, SchedulerClient(fw.address) as c:
        held = pod("held")
        held["spec"]["schedulerName"] = "holding"
        c.apply([NODE, held, pod("free")])
        for _ in range(500):
            waiting = c.list_waiting_pods()
            if waiting:
                break
            time.sleep(0.02)
        now = time.time()
        assert waiting == [WaitingPod(ref=ObjectRef("Pod", "held", "default", waiting[0].ref.uid), node_name="n0",
                                      pending_plugins=("HoldPermit",), deadline=waiting[0].deadline,
                                      profile="holding")]
        assert now < waiting[0].deadline <= now + 300
        assert c.list_waiting_pods(profile="default-scheduler") == []
        assert c.get_pod("held").phase == "Waiting"

        async def allow() -> None:
            assert fw.server is not None
            wp = fw.server.scheduler.handle.waiting_pod(waiting[0].ref.uid)
            assert wp is not None
            wp.allow("HoldPermit")

        fw.call(allow())
        assert settle(c, ["held"])["held"].node_name == "n0"
        assert c.list_waiting_pods() == []


# ---- watch ----------------------------------------------------------------------------------------


def test_watch_resumes_from_a_cursor_after_cancel_without_duplicates(client: SchedulerClient) -> None:
    client.apply([NODE, pod("a"), pod("b")])
    settle(client, ["a", "b"])
    stream = client.watch()
    first = [next(stream), next(stream)]
    stream.close()
    assert list(stream) == []  # closed: ends quietly
    client.apply([pod("c")])
    settle(client, ["c"])
    with client.watch(resume=stream.cursor, timeout=1.0) as resumed:
        rest = list(resumed)
    assert strip(first + rest) == [
        (1, "Applied", "node/n0", ""), (2, "Applied", "pod/default/a", ""), (3, "Applied", "pod/default/b", ""),
        (4, "Bound", "pod/default/a", "n0"), (5, "Bound", "pod/default/b", "n0"),
        (6, "Applied", "pod/default/c", ""), (7, "Bound", "pod/default/c", "n0"),
    ]
    # A filtered watch resumes the same way.
    bound = client.watch(types=[EventType.BOUND], timeout=1.0)
    assert [next(bound).object.name] == ["a"]
    bound.close()
    with client.watch(resume=bound.cursor, types=[EventType.BOUND], timeout=1.0) as more:
        assert [e.object.name for e in more] == ["b", "c"]


def collect(stream: Iterator[Event], count: int, during: Callable[[int], None]) -> list[Event]:
    """Take ``count`` events, calling ``during(n)`` after the n-th (a watch timeout bounds it)."""
    got: list[Event] = []
    for ev in stream:
        got.append(ev)
        during(len(got))
        if len(got) == count:
            break
    return got


def test_watch_reconnects_through_a_broken_connection(framework: FrameworkThread) -> None:
    proxy = Proxy(framework.loop, framework.port).start()
    direct = SchedulerClient(framework.address)
    try:
        with SchedulerClient(proxy.address) as c:
            c.apply([NODE, pod("a")])
            settle(c, ["a"])

            def during(n: int) -> None:
                if n == 2:  # the connection drops mid-stream; events keep happening meanwhile
                    proxy.cut()
                    direct.apply([pod("b")])

            with c.watch(timeout=60) as stream:
                events = collect(stream, 5, during)
                reconnects = stream.reconnects
        assert strip(events) == [
            (1, "Applied", "node/n0", ""), (2, "Applied", "pod/default/a", ""), (3, "Bound", "pod/default/a", "n0"),
            (4, "Applied", "pod/default/b", ""), (5, "Bound", "pod/default/b", "n0"),
        ]
        assert reconnects >= 1 and proxy.accepted >= 2
    finally:
        direct.close()
        proxy.stop()


def test_watch_resumes_after_the_framework_restarts(framework: FrameworkThread) -> None:
    with SchedulerClient(framework.address) as c:
        c.apply([NODE, pod("a")])
        settle(c, ["a"])
        runs: list[str] = []

        def during(n: int) -> None:
            if n == 3:  # everything of the first run seen: restart (empty) and apply again
                runs.append(events_seen[-1].run_id)
                framework.stop()
                framework.start()
                with SchedulerClient(framework.address) as again:
                    again.apply([NODE, pod("b", "3")])

        events_seen: list[Event] = []
        with c.watch(timeout=60) as stream:
            for ev in stream:
                events_seen.append(ev)
                during(len(events_seen))
                if len(events_seen) == 6:
                    break
            reconnects = stream.reconnects
    assert strip(events_seen) == [
        (1, "Applied", "node/n0", ""), (2, "Applied", "pod/default/a", ""), (3, "Bound", "pod/default/a", "n0"),
        # The new run counts from 1 again: nothing of it is skipped for having a small sequence.
        (1, "Applied", "node/n0", ""), (2, "Applied", "pod/default/b", ""), (3, "Unschedulable", "pod/default/b", ""),
    ]
    assert [e.run_id == runs[0] for e in events_seen] == [True] * 3 + [False] * 3
    assert len({e.run_id for e in events_seen[3:]}) == 1 and reconnects >= 1


def test_watch_gives_up_with_a_readable_error_when_the_framework_stays_away(framework: FrameworkThread) -> None:
    with SchedulerClient(framework.address) as c:
        c.apply([NODE])
        stream = c.watch(reconnect_timeout=0.5)
        assert next(stream).sequence == 1
        framework.stop()
        with pytest.raises(ClientError) as err:
            next(stream)
        assert (err.value.code, str(err.value)) == (grpc.StatusCode.UNAVAILABLE,
                                                     f"cannot reach the framework at {framework.address}")


@pytest.mark.parametrize("kind", ["blocking", "asyncio"])
def test_a_framework_slow_to_answer_a_new_connection_is_waited_for_not_unreachable(
        framework: FrameworkThread, kind: str) -> None:
    # A busy framework can take more than a moment to answer a connection's handshake (`outrigger delete`
    # said "cannot reach the framework" at a load average of 35): the attempt gets gRPC's connect timeout.
    proxy = Proxy(framework.loop, framework.port, delay=1.0).start()
    try:
        if kind == "blocking":
            with SchedulerClient(proxy.address, timeout=10) as c:
                applied = c.apply([NODE])
                names = [n.name for n in c.list_nodes()]
        else:
            async def calls() -> tuple[list[Applied], list[str]]:
                async with AsyncSchedulerClient(proxy.address, timeout=10) as c:
                    return await c.apply([NODE]), [n.name for n in await c.list_nodes()]

            applied, names = asyncio.run(calls())
    finally:
        proxy.stop()
    assert ([(str(a.ref), a.action) for a in applied], names) == ([("node/n0", "created")], ["n0"])
    assert proxy.accepted == 1  # the one connection was waited for, not given up on and tried again


# ---- asyncio --------------------------------------------------------------------------------------


def test_async_client_answers_the_same_and_resumes_a_broken_watch() -> None:
    from framework.profiles import build_registry, default_scheduler_config

    async def main() -> None:
        registry = build_registry()
        server = await start_server(default_scheduler_config(registry), registry, "127.0.0.1:0", seed=3)
        proxy = Proxy(asyncio.get_running_loop(), server.port)
        await proxy.serve()
        try:
            async with AsyncSchedulerClient(f"127.0.0.1:{free_port()}") as dead:
                with pytest.raises(ClientError) as err:
                    await dead.ping()
                assert (err.value.code, str(err.value)) == (grpc.StatusCode.UNAVAILABLE,
                                                             f"cannot reach the framework at {dead.address}")
            async with AsyncSchedulerClient(proxy.address, timeout=10) as c:
                await c.ping()
                applied = await c.apply([NODE, pod("a")])
                assert [(str(a.ref), a.action) for a in applied] == [("node/n0", "created"),
                                                                     ("pod/default/a", "created")]
                with pytest.raises(ClientError) as err:
                    await c.get_pod("ghost")
                assert (err.value.code, str(err.value)) == (grpc.StatusCode.NOT_FOUND, "pod default/ghost not found")
                events: list[Event] = []
                async with c.watch(timeout=60) as stream:
                    async for ev in stream:
                        events.append(ev)
                        if len(events) == 2:  # the connection drops; a pod arrives meanwhile
                            proxy.abort_all()
                            async with AsyncSchedulerClient(server.address) as direct:
                                await direct.apply([pod("b")])
                        if len(events) == 5:
                            break
                    reconnects = stream.reconnects
                assert strip(events) == [(1, "Applied", "node/n0", ""), (2, "Applied", "pod/default/a", ""),
                                         (3, "Bound", "pod/default/a", "n0"), (4, "Applied", "pod/default/b", ""),
                                         (5, "Bound", "pod/default/b", "n0")]
                assert reconnects >= 1
                assert [p.phase for p in await c.list_pods()] == ["Bound", "Bound"]
                assert [n.name for n in await c.list_nodes()] == ["n0"]
                assert (await c.explain_pod("a")).selected == "n0"
                assert await c.list_waiting_pods() == []
        finally:
            proxy.abort_all(close=True)
            await server.stop(0.2)

    asyncio.run(asyncio.wait_for(main(), 60))


def test_sync_and_async_clients_answer_alike(framework: FrameworkThread, client: SchedulerClient) -> None:
    client.apply([NODE, pod("a"), pod("big", "3")])
    settle(client, ["a", "big"])
    template = {**NODE, "metadata": {"name": "extra"},
                "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"}}}
    calls: list[tuple[str, Callable[[Any], Any]]] = [
        ("list_pods", lambda c: c.list_pods()),
        ("list_pods(phase)", lambda c: c.list_pods(phase="Unschedulable")),
        ("get_pod", lambda c: c.get_pod("big")),
        ("list_nodes", lambda c: c.list_nodes()),
        ("list_pods(selector, objects)", lambda c: c.list_pods(label_selector="!app", objects=True)),
        ("list_nodes(objects)", lambda c: c.list_nodes(name="n0", objects=True)),
        ("list_events", lambda c: c.list_events("Pod", "big")),
        ("list_waiting_pods", lambda c: c.list_waiting_pods()),
        ("list_reservations", lambda c: c.list_reservations()),
        ("explain", lambda c: c.explain(pod("q"))),
        ("explain_pod", lambda c: c.explain_pod("big")),
        ("what_if", lambda c: c.what_if(template, 1)),
        ("apply dry run", lambda c: c.apply([{**pod("z"), "metadata": {"name": "z", "uid": "uid-z"}}], dry_run=True)),
    ]
    sync = [(name, call(client)) for name, call in calls]

    async def main() -> list[tuple[str, Any]]:
        async with AsyncSchedulerClient(framework.address) as c:
            return [(name, await call(c)) for name, call in calls]

    assert asyncio.run(asyncio.wait_for(main(), 60)) == sync
    assert dict(sync)["what_if"]["admitted"] == ["default/big"]


def test_debug_scores_and_traces_through_both_clients() -> None:
    nodes = [{**NODE, "metadata": {"name": f"n{i}"},
              "status": {"allocatable": {"cpu": str(2 + i), "memory": "4Gi", "pods": "10"}}} for i in range(3)]
    with FrameworkThread(observability=ObservabilityConfig(debug_scores=2)) as fw, SchedulerClient(fw.address) as c:
        c.apply([*nodes, pod("a")])
        settle(c, ["a"])
        table = c.debug_scores("a")
        # Explain now (a on its node) gives the table's numbers for the nodes a is not on.
        explained = c.explain(pod("a2"))
        assert (table.pod, table.attempt, table.scored_nodes, table.top) == ("default/a", 1, 3, 2)
        assert table.selected == c.get_pod("a").node_name
        assert [n.node for n in table.nodes] == ["n2", "n1"]  # the most free cpu first
        others = [n for n in table.nodes if n.node != table.selected]
        assert [(n.total, n.scores) for n in others] == [
            (explained.nodes[n.node].total, explained.nodes[n.node].scores) for n in others]

        async def both() -> tuple[Any, Any, str, str]:
            async with AsyncSchedulerClient(fw.address) as ac:
                got = await ac.debug_scores("a")
                with pytest.raises(ClientError) as missing:
                    await ac.debug_scores("ghost")
                with pytest.raises(ClientError) as no_store:
                    await ac.get_trace("a")
                return got, missing.value.code, str(missing.value), str(no_store.value)

        got, code, missing, no_store = asyncio.run(asyncio.wait_for(both(), 60))
        assert got == table
        assert code == grpc.StatusCode.NOT_FOUND and "default/ghost" in missing
        with pytest.raises(ClientError) as err:
            c.get_trace("a")
        assert str(err.value) == no_store


# ---- kubectl's habits: label selectors, v1 objects, events, list-then-watch ------------------------

CREATED = "2024-05-01T12:00:00Z"


def labelled(name: str, labels: dict[str, str], cpu: str = "100m", **spec: Any) -> dict[str, Any]:
    out = pod(name, cpu)
    out["metadata"] = {"name": name, "labels": labels, "creationTimestamp": CREATED}
    out["spec"] = {**out["spec"], **spec}
    return out


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        ("", {}, True),
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {}, True),  # != also matches objects without the label, as the API server's
        ("app!=web", {"app": "web"}, False),
        ("app in (web, db)", {"app": "db"}, True),
        ("app notin (web,db)", {"app": "db"}, False),
        ("app notin (web,db)", {"tier": "x"}, True),
        ("app", {"app": ""}, True),
        ("!app", {"app": "web"}, False),
        ("a=b,c!=d,e in (x,y),!f,g", {"a": "b", "e": "y", "g": "1"}, True),
        ("a=b,c!=d,e in (x,y),!f,g", {"a": "b", "e": "y", "g": "1", "f": "2"}, False),
        ("example.com/tier=gold", {"example.com/tier": "gold"}, True),
        ("a=", {"a": ""}, True),
        ("size>3", {"size": "4"}, True),
        ("size<3", {"size": "x"}, False),
    ],
)
def test_label_selectors_match_as_the_api_server_does(selector: str, labels: dict[str, str], want: bool) -> None:
    assert parse_selector(selector).matches(labels) is want


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("app in web", "invalid label selector 'app in web': expected '(' after 'in', found 'web'"),
        ("=web", "invalid label selector '=web': expected a label key, found '='"),
        ("app web", "invalid label selector 'app web': expected an operator (=, ==, !=, in, notin, <, >) or ',' "
                    "after 'app', found 'web'"),
        ("a=b c", "invalid label selector 'a=b c': expected ',' or the end, found 'c'"),
        ("app in (a", "invalid label selector 'app in (a': expected ',' or ')' in the values of 'in', "
                      "found the end"),
        ("app in ()", "invalid label selector 'app in ()': 'in' needs at least one value"),
        ("-app=x", "invalid label selector '-app=x': label key '-app': the name must be 63 characters or less, of "
                   "letters, digits, '-', '_' or '.', starting and ending with a letter or digit"),
        ("a=-x", "invalid label selector 'a=-x': label value '-x' must be 63 characters or less, of letters, "
                 "digits, '-', '_' or '.', starting and ending with a letter or digit"),
        ("size>big", "invalid label selector 'size>big': size>big: '>' compares with an integer, got 'big'"),
    ],
)
def test_a_selector_that_does_not_parse_names_the_problem(selector: str, message: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_selector(selector)
    assert str(err.value) == message


def test_lists_filter_by_selector_node_and_name_and_carry_v1_objects(client: SchedulerClient) -> None:
    other = {**NODE, "metadata": {"name": "n1", "labels": {"zone": "b"}, "creationTimestamp": CREATED}}
    client.apply([NODE, other, labelled("web", {"app": "web"}, nodeName="n1"), labelled("db", {"app": "db"}),
                  labelled("job", {"app": "job", "tier": "batch"}, "64")])
    settle(client, ["web", "db", "job"])
    cases: list[tuple[str, Callable[[], list[Any]], list[str]]] = [
        ("pods by selector", lambda: client.list_pods(label_selector="app in (web,db)"), ["db", "web"]),
        ("pods without a label", lambda: client.list_pods(label_selector="!tier"), ["db", "web"]),
        ("pods on a node", lambda: client.list_pods(node_name="n1"), ["web"]),
        ("pods by selector and phase", lambda: client.list_pods(phase="Bound", label_selector="app!=web"), ["db"]),
        ("nodes by selector", lambda: client.list_nodes(label_selector="zone=b"), ["n1"]),
        ("a node by name", lambda: client.list_nodes(name="n0"), ["n0"]),
        ("no such node", lambda: client.list_nodes(name="n9"), []),
    ]
    for case, call, want in cases:
        assert [o.ref.name if isinstance(o, PodState) else o.name for o in call()] == want, case
    assert [p.manifest for p in client.list_pods()] == [{}, {}, {}]  # objects only when asked
    web = client.list_pods(label_selector="app=web", objects=True)[0]
    assert web.manifest == {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default", "uid": web.ref.uid, "creationTimestamp": CREATED,
                     "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}}}],
                 "nodeName": "n1"},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]},
    }
    (n1,) = client.list_nodes(name="n1", objects=True)
    assert n1.manifest == {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "uid": n1.manifest["metadata"]["uid"], "creationTimestamp": CREATED,
                     "labels": {"zone": "b"}},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}},
    }
    with pytest.raises(ClientError) as err:
        client.list_pods(label_selector="app in web")
    assert (err.value.code, str(err.value)) == (
        grpc.StatusCode.INVALID_ARGUMENT, "invalid label selector 'app in web': expected '(' after 'in', found 'web'")


def test_objects_from_get_apply_back_unchanged(client: SchedulerClient) -> None:
    client.apply([NODE, labelled("web", {"app": "web"}), labelled("big", {"app": "big"}, "64")])
    settle(client, ["web", "big"])
    pods = [p.manifest for p in client.list_pods(objects=True)]
    nodes = [n.manifest for n in client.list_nodes(objects=True)]
    relabelled = {**pods[1], "metadata": {**pods[1]["metadata"], "labels": {"app": "web", "v": "2"}}}
    wrong_uid = {**pods[1], "metadata": {**pods[1]["metadata"], "uid": "not-its-uid"}}
    cases: list[tuple[str, list[dict[str, Any]], list[tuple[str, str]]]] = [
        ("pods as listed", pods, [("pod/default/big", "unchanged"), ("pod/default/web", "unchanged")]),
        ("nodes as listed", nodes, [("node/n0", "unchanged")]),
        ("a label changed", [relabelled], [("pod/default/web", "configured")]),
    ]
    for case, objects, want in cases:
        assert [(str(a.ref), a.action) for a in client.apply(objects, dry_run=True)] == want, case
    with pytest.raises(ClientError) as err:
        client.apply([wrong_uid])
    assert str(err.value).endswith("uid 'not-its-uid' does not match the existing pod's uid "
                                   f"{pods[1]['metadata']['uid']!r}")
    # A real change keeps the pod's creation time, as the API server keeps creationTimestamp.
    without_time = {**relabelled, "metadata": {k: v for k, v in relabelled["metadata"].items()
                                               if k != "creationTimestamp"}}
    assert [a.action for a in client.apply([without_time])] == ["configured"]
    assert client.get_pod("web").manifest["metadata"]["creationTimestamp"] == CREATED


def test_list_events_answers_one_objects_events(client: SchedulerClient) -> None:
    client.apply([NODE, labelled("web", {}), labelled("big", {}, "64")])
    settle(client, ["web", "big"])
    web = client.get_pod("web")

    def kinds(events: list[Event]) -> list[tuple[str, str, str]]:
        return [(e.type.label, str(e.object), e.node_name) for e in events]

    assert kinds(client.list_events("Pod", "web")) == [("Applied", "pod/default/web", ""),
                                                       ("Bound", "pod/default/web", "n0")]
    assert kinds(client.list_events("Pod", "web", uid="another-uid")) == []
    assert kinds(client.list_events("Pod", "web", "default", uid=web.ref.uid))[-1] == ("Bound", "pod/default/web", "n0")
    assert kinds(client.list_events("Node", "n0")) == [("Applied", "node/n0", "")]
    (_, failed) = client.list_events("Pod", "big")
    assert (failed.type, failed.status.reasons) == (EventType.UNSCHEDULABLE, (FULL,))
    with pytest.raises(ClientError) as err:
        client.list_events("Reservation", "r")
    assert str(err.value) == "events of kind 'Reservation': Pod or Node"


def test_watch_objects_lists_then_follows_changes_like_kubectl_get_w(framework: FrameworkThread,
                                                                     client: SchedulerClient) -> None:
    client.apply([NODE, labelled("web", {"app": "web"}), labelled("api", {"app": "web"}),
                  labelled("db", {"app": "db"})])
    settle(client, ["web", "api", "db"])
    with client.watch_objects("Pod", namespace="default", label_selector="app=web", timeout=30) as watch:
        assert sorted(p.ref.name for p in watch.items) == ["api", "web"]
        # After the list: a gated pod appears, api leaves the selection, web is deleted.
        client.apply([labelled("gated", {"app": "web"}, schedulingGates=[{"name": "wait"}]),
                      labelled("api", {"app": "api"})])
        client.delete_pod("web")
        changes = [next(watch) for _ in range(3)]
    assert [(c.type, c.object.ref.name, c.object.phase) for c in changes] == [
        ("ADDED", "gated", "Pending"), ("DELETED", "api", "Bound"), ("DELETED", "web", "Bound")]
    assert changes[0].object.manifest["status"]["conditions"] == [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated",
         "message": "Scheduling is blocked due to non-empty scheduling gates"}]

    async def nodes() -> tuple[list[str], list[tuple[str, str]]]:
        async with AsyncSchedulerClient(framework.address) as c:
            watch = await c.watch_objects("Node", timeout=30)
            async with watch:
                await c.apply([{**NODE, "metadata": {"name": "n0", "labels": {"zone": "b"}}}])
                change = await watch.__anext__()
                return [n.name for n in watch.items], [(change.type, change.object.labels["zone"])]

    assert asyncio.run(asyncio.wait_for(nodes(), 60)) == (["n0"], [("MODIFIED", "b")])
