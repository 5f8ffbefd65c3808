"""Remote plugins over long-lived streams and several replicas: streams reused across cycles, windows
sent ahead of the plugin's turn, batches spread over replicas and failed over when one dies,
failurePolicy Ignore and Fail when every replica is gone, dns:/// endpoints and health-driven drain.

Plugin hosts are real gRPC servers on 127.0.0.1: in this process where the test needs to look inside
the host (streams opened, health), separate processes where replicas are killed."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from grpc_health.v1 import health_pb2
from test_remote_faults import NO_LEAKS, config, fakes_env
from test_remote_harness import HostProcess, Hosts, endpoint, remote_rig, until

from framework.config import load_config
from framework.remote import EndpointConfig, parse_remote_plugins
from pluginhost.host import PluginHost
from pluginhost.manifest import parse_objects
from pluginhost.model import Node, Pod
from pluginhost.status import Code
from tools.bench.plugins import TIER_LABEL, BenchTier

TIERS = {"n0": "bronze", "n1": "gold", "n2": None, "n3": "silver"}  # n2 has no tier label: BenchTier rejects it


def tier_cluster(pods: list[str], cpu: str = "100m") -> list[Pod | Node]:
    docs = []
    for name, tier in TIERS.items():
        labels = f"{{{TIER_LABEL}: {tier}}}" if tier else "{}"
        docs.append(
            f"apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {labels}}}\n"
            "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n"
        )
    docs += [
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {p}, uid: uid-{p}}}\n"
        f"spec: {{containers: [{{name: c, resources: {{requests: {{cpu: {cpu}}}}}}}]}}\n"
        for p in pods
    ]
    return parse_objects("---\n".join(docs), "test.yaml")


def pod(name: str, cpu: str) -> Pod:
    text = (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, uid: uid-{name}}}\n"
            f"spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '{cpu}'}}}}}}]}}\n")
    obj = parse_objects(text, "pod.yaml")[0]
    assert isinstance(obj, Pod)
    return obj


def tier_config() -> str:
    # NodeResourcesFit (in-process) comes before the remote BenchTier, so BenchTier gets each window
    # ahead of its turn.
    return config(["BenchTier"], {})


def only_tier_scores(text: str) -> str:
    """Disable NodeResourcesFit's Score so BenchTier's tiers decide alone."""
    return text.replace(
        "    multiPoint:\n",
        "    score:\n      disabled:\n      - {name: NodeResourcesFit}\n    multiPoint:\n",
    )


# ---------------------------------------------------------------------------------------------------
# One stream for many cycles


def test_one_filter_stream_carries_every_cycle_and_late_answers_are_dropped() -> None:
    async def main() -> dict[str, Any]:
        host = await PluginHost([BenchTier], listen="127.0.0.1:0").start()
        text = only_tier_scores(tier_config())
        rig = await remote_rig([endpoint("tier", host.address)], lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            # Each 1.5-CPU pod goes to the best tier with room left (two fit on a 4-CPU node).
            await s.apply(tier_cluster([]))
            placed: dict[str, str] = {}
            for i in range(6):
                await s.apply([pod(f"p{i}", "1500m")])
                await until(lambda i=i: s.pods[f"uid-p{i}"].phase == "Bound", 10, f"p{i} to bind")
                placed[f"p{i}"] = s.pods[f"uid-p{i}"].pod.node_name
            # Every node is rejected by NodeResourcesFit before BenchTier's turn: the window was sent to
            # the host ahead, its answers are never read, and the next cycle on the stream drops them.
            await s.apply([pod("huge", "8")])
            await until(lambda: s.pods["uid-huge"].last_status is not None, 10, "huge to be rejected")
            huge = s.pods["uid-huge"].last_status
            await s.apply([pod("after", "500m")])
            await until(lambda: s.pods["uid-after"].phase == "Bound", 10, "after to bind")
            placed["after"] = s.pods["uid-after"].pod.node_name
            await s.drain(5)
            return {"placed": placed, "huge": huge, "streams": dict(host.streams_opened),
                    "cycles": dict(host.cycles_started), "leaks": s.leaks()}
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()
            await host.stop(1.0)

    got = asyncio.run(main())
    # gold fits two 1.5-CPU pods, then silver two, then bronze two; n2 (no tier) never.
    assert got["placed"] == {"p0": "n1", "p1": "n1", "p2": "n3", "p3": "n3", "p4": "n0", "p5": "n0", "after": "n1"}
    huge = got["huge"]
    assert (huge.code, huge.message()) == (Code.Unschedulable, "0/4 nodes are available: 4 Insufficient cpu.")
    assert got["streams"] == {"Filter": 1, "Score": 1}
    # Filter: 6 pods + huge (its window sent ahead, never read) + after. Score: not huge, and not p4/p5,
    # which fit on n0 alone (a single feasible node is not scored).
    assert got["cycles"] == {"Filter": 8, "Score": 5}
    assert got["leaks"] == NO_LEAKS


def test_a_host_handshaken_again_by_the_same_framework_keeps_its_mirror() -> None:
    """After a failed call the framework handshakes the replica again before its next call (it may have
    restarted). A host that did not restart keeps the snapshot mirror it follows: no resync, the same
    generation, and the next cycle is answered at once. (A resync per failed call left every call
    waiting for it, failing at its deadline and bringing the next handshake: a loaded host never
    caught up.)"""

    async def main() -> dict[str, Any]:
        host = await PluginHost([BenchTier], listen="127.0.0.1:0").start()
        text = only_tier_scores(tier_config())
        rig = await remote_rig([endpoint("tier", host.address)], lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply(tier_cluster(["warm"]))
            await until(lambda: s.pods["uid-warm"].phase == "Bound", 10, "warm to bind")
            publisher = rig.remote.publisher
            assert publisher is not None
            before = (publisher.resyncs_sent, host.mirror.generation)
            [ep] = rig.remote.endpoints
            [replica] = ep.replicas
            handshakes = []
            for _ in range(3):  # as three failed calls in a row do
                ep.failed(replica)
                await ep.ready(replica)
                handshakes.append((publisher.resyncs_sent, host.mirror.generation))
            await s.apply([pod("next", "1500m")])
            await until(lambda: s.pods["uid-next"].phase == "Bound", 10, "next to bind")
            await s.drain(5)
            return {"before": before, "handshakes": handshakes, "suspect": replica.suspect,
                    "next": s.pods["uid-next"].pod.node_name, "errors": [ev for ev in s.recent_events()
                                                                          if ev.type == "Error"]}
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()
            await host.stop(1.0)

    got = asyncio.run(main())
    resyncs, generation = got["before"]
    assert resyncs == 1 and generation > 0  # the one resync of the host's first Handshake
    assert [r for r, _ in got["handshakes"]] == [1, 1, 1]
    # Never reset: at the generation it had, or later (the warm pod's binding may follow in a delta).
    assert all(g >= generation for _, g in got["handshakes"])
    assert (got["suspect"], got["next"], got["errors"]) == (False, "n1", [])


# ---------------------------------------------------------------------------------------------------
# Replicas: batches spread and failed over


def _pods(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(n)]


def test_a_replica_killed_between_cycles_fails_no_cycle(tmp_path: Path) -> None:
    env = fakes_env({"name": "F", "points": ["filter"]})
    text = config(["F"], {"F": {"calls": str(tmp_path / "calls.jsonl")}})

    async def main(hosts: list[HostProcess], addresses: list[str]) -> dict[str, Any]:
        rig = await remote_rig([endpoint("fakes", addresses)], lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply(tier_cluster(_pods("a", 10)))
            await until(lambda: all(r.phase == "Bound" for r in s.pods.values()), 15, "the first pods to bind")
            hosts[0].kill()  # SIGKILL: its open streams break mid-life
            await s.apply([p for p in tier_cluster(_pods("b", 10)) if isinstance(p, Pod)])
            await until(lambda: all(r.phase == "Bound" for r in s.pods.values()), 15, "every pod to bind")
            await s.drain(5)  # the last binding cycle may still be finishing
            errors = [ev for ev in s.recent_events() if ev.type == "Error"]
            return {"bound": sum(r.phase == "Bound" for r in s.pods.values()), "errors": errors, "leaks": s.leaks()}
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()

    hosts = [HostProcess("test_remote_fakes:fake_plugins", env) for _ in range(2)]
    with Hosts(*hosts) as addresses:
        got = asyncio.run(main(hosts, addresses))
    assert got["bound"] == 20
    # No cycle failed: batches sent to the dead replica went to the live one, or its health watch
    # took it out of rotation first.
    assert got["errors"] == []
    assert got["leaks"] == NO_LEAKS


class Gate(BenchTier):
    """BenchTier whose first Filter batch after :meth:`arm` hangs until its stream is cancelled."""

    name = "BenchTier"
    replica = -1  # which host serves this class (one subclass per host)
    armed = False
    hanging: asyncio.Event | None = None
    hung_in = -1

    @classmethod
    def arm(cls) -> None:
        cls.armed, cls.hanging = True, asyncio.Event()

    async def filter(self, state: Any, pod: Any, batch: Any) -> Any:
        if Gate.armed:
            Gate.armed = False
            Gate.hung_in = self.replica
            assert Gate.hanging is not None
            Gate.hanging.set()
            await asyncio.sleep(3600)  # until the host dies and cancels the stream
        return await super().filter(state, pod, batch)


def test_a_replica_dying_mid_stream_has_its_batches_answered_by_the_other() -> None:
    async def main() -> dict[str, Any]:
        gates = [type(f"Gate{i}", (Gate,), {"replica": i}) for i in range(2)]
        hosts = [await PluginHost([g], listen="127.0.0.1:0").start() for g in gates]
        text = only_tier_scores(tier_config())
        rig = await remote_rig([endpoint("tier", [h.address for h in hosts])],
                               lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply(tier_cluster(["warm"]))
            await until(lambda: s.pods["uid-warm"].phase == "Bound", 10, "warm to bind")
            before = [h.cycles_started["Filter"] for h in hosts]
            Gate.arm()
            await s.apply([pod("p", "100m")])  # its 4 nodes go out as 2 batches, one per replica
            assert Gate.hanging is not None
            await asyncio.wait_for(Gate.hanging.wait(), 10)
            # Both replicas got a batch; one of them hangs. Stop that one hard: its stream is cut.
            await until(lambda: all(h.cycles_started["Filter"] > b for h, b in zip(hosts, before, strict=True)),
                        10, "both replicas to start the cycle")
            await hosts[Gate.hung_in].stop(0)
            await until(lambda: s.pods["uid-p"].phase == "Bound", 10, "p to bind")
            await s.drain(5)
            return {"node": s.pods["uid-p"].pod.node_name, "retries": rig.remote.stats()["BenchTier"]["Filter"].retries,
                    "errors": [ev for ev in s.recent_events() if ev.type == "Error"], "leaks": s.leaks()}
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()
            for h in hosts:
                await h.stop(0)

    got = asyncio.run(main())
    assert got["node"] == "n1"  # gold: the answers of the live replica for the dead one's nodes count
    assert got["retries"] == 1  # the hung batch, sent again
    assert got["errors"] == []
    assert got["leaks"] == NO_LEAKS


@pytest.mark.parametrize("policy", ["Ignore", "Fail"])
def test_every_replica_killed_ignore_keeps_scheduling_fail_holds_pods_until_one_returns(
    policy: str, tmp_path: Path
) -> None:
    # The plugin rejects n0..n2, so with it pods land on n3 only; without it (ignored) anywhere.
    env = fakes_env({"name": "F", "points": ["filter"]})
    reject = {"code": "Unschedulable", "reasons": ["not n3"]}
    behaviour = {"filter": {"nodes": {"n0": reject, "n1": reject, "n2": reject}, "default": None}}
    text = config(["F"], {"F": {"behaviour": behaviour, "calls": str(tmp_path / "calls.jsonl")}})
    hosts = [HostProcess("test_remote_fakes:fake_plugins", env) for _ in range(2)]

    async def main(addresses: list[str]) -> dict[str, Any]:
        ep = dataclasses.replace(endpoint("fakes", addresses, filter=2.0), failure_policy=policy)
        rig = await remote_rig([ep], lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        out: dict[str, Any] = {}
        try:
            await s.apply(tier_cluster(_pods("a", 4)))
            await until(lambda: all(r.phase == "Bound" for r in s.pods.values()), 15, "the first pods to bind")
            out["before"] = sorted({r.pod.node_name for r in s.pods.values()})
            for h in hosts:
                h.kill()
            await s.apply([p for p in tier_cluster(_pods("b", 4)) if isinstance(p, Pod)])
            later = [f"uid-b{i}" for i in range(4)]
            if policy == "Ignore":
                await until(lambda: all(s.pods[u].phase == "Bound" for u in later), 15, "pods to bind without F")
                out["ignored"] = rig.remote.stats()["F"]["Filter"].ignored
            else:
                await until(lambda: all(s.pods[u].last_status is not None for u in later), 15, "cycles to fail")
                out["held"] = sorted({s.pods[u].phase for u in later})
                out["reason"] = s.pods["uid-b0"].last_status.message()
                # A replica comes back on its old port: the held pods bind with no action from anyone.
                back = HostProcess("test_remote_fakes:fake_plugins", env, listen=addresses[1])
                back.start()
                hosts.append(back)
                await until(lambda: all(s.pods[u].phase == "Bound" for u in later), 30, "pods to bind after restart")
                out["after"] = sorted({s.pods[u].pod.node_name for u in later})
            await s.drain(5)
            out["leaks"] = s.leaks()
            out["bound"] = sum(r.phase == "Bound" for r in s.pods.values())
            return out
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()

    with Hosts(*hosts) as addresses:
        try:
            got = asyncio.run(main(addresses))
        finally:
            for h in hosts[2:]:
                h.stop()
    assert got["before"] == ["n3"]
    assert got["bound"] == 8
    assert got["leaks"] == NO_LEAKS
    if policy == "Ignore":
        assert got["ignored"] >= 4  # every later pod's cycle skipped F
    else:
        assert got["held"] == ["Pending"]
        assert got["reason"].startswith('running "F" filter plugin: ')
        assert got["after"] == ["n3"]


# ---------------------------------------------------------------------------------------------------
# dns:/// endpoints and health


def test_dns_endpoint_resolves_to_the_replicas_addresses() -> None:
    async def main() -> tuple[int, list[str], dict[str, str]]:
        host = await PluginHost([BenchTier], listen="127.0.0.1:0").start()
        port = host.port
        text = only_tier_scores(tier_config())
        doc = (f"apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
               f"- name: tier\n  address: dns:///localhost:{port}\n  connectTimeout: 20s\n")
        [ep] = parse_remote_plugins(doc, "plugins.yaml")
        rig = await remote_rig([ep], lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply(tier_cluster(["p0", "p1"]))
            await until(lambda: all(r.phase == "Bound" for r in s.pods.values()), 10, "pods to bind")
            replicas = [r.address for r in rig.remote.endpoints[0].replicas if not r.suspect]
            return port, replicas, {r.pod.name: r.pod.node_name for r in s.pods.values()}
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()
            await host.stop(1.0)

    port, replicas, placed = asyncio.run(main())
    # localhost's IPv4 address answers; an IPv6 one (where the resolver gives it) is left for later.
    assert replicas == [f"127.0.0.1:{port}"]
    assert placed == {"p0": "n1", "p1": "n1"}


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("dns:///nohost", "invalid dns target 'dns:///nohost' (use dns:///name:port)"),
        ("dns:///a b:1", "invalid dns target 'dns:///a b:1' (use dns:///name:port)"),
    ],
)
def test_bad_dns_targets_are_config_errors(address: str, problem: str) -> None:
    doc = f"apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n- name: x\n  address: '{address}'\n"
    with pytest.raises(Exception) as err:
        parse_remote_plugins(doc, "plugins.yaml")
    assert f"plugins[0].address: {problem}" in str(err.value)


def test_a_draining_replica_gets_no_new_cycles() -> None:
    async def main() -> dict[str, Any]:
        a = await PluginHost([BenchTier], listen="127.0.0.1:0").start()
        b = await PluginHost([BenchTier], listen="127.0.0.1:0").start()
        text = only_tier_scores(tier_config())
        ep: EndpointConfig = endpoint("tier", [a.address, b.address])
        rig = await remote_rig([ep], lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            replica_a = next(r for r in rig.remote.endpoints[0].replicas if r.address == a.address)
            await until(lambda: replica_a.watcher is not None, 5, "the health watch")
            # a says NOT_SERVING (what a host does first when it is asked to stop).
            assert a._health is not None
            await a._health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
            await until(lambda: not replica_a.serving, 10, "the framework to see a drain")
            before = sum(a.cycles_started.values())
            await s.apply(tier_cluster(_pods("p", 6)))
            await until(lambda: all(r.phase == "Bound" for r in s.pods.values()), 15, "pods to bind")
            return {"a": sum(a.cycles_started.values()) - before, "b": b.cycles_started["Filter"],
                    "bound": sum(r.phase == "Bound" for r in s.pods.values())}
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()
            await a.stop(1.0)
            await b.stop(1.0)

    got = asyncio.run(main())
    assert got == {"a": 0, "b": 6, "bound": 6}


def test_failure_policy_is_parsed() -> None:
    doc = ("apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
           "- {name: x, address: '127.0.0.1:1', failurePolicy: Ignore, resolveInterval: 2s}\n")
    [ep] = parse_remote_plugins(doc, "plugins.yaml")
    assert (ep.failure_policy, ep.resolve_interval) == ("Ignore", 2.0)
    assert json.dumps(ep.addresses) == '["127.0.0.1:1"]'


@pytest.mark.parametrize("features", [("start-batch",), ()], ids=["start-batch", "separate-start"])
def test_hosts_with_and_without_the_start_batch_feature_answer_alike(
    features: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A host that does not list "start-batch" (another SDK, an older one) gets start and batch apart.
    monkeypatch.setattr("pluginhost.servicer.HOST_FEATURES", features)

    async def main() -> tuple[bool, dict[str, str], dict[str, int]]:
        host = await PluginHost([BenchTier], listen="127.0.0.1:0").start()
        text = only_tier_scores(tier_config())
        rig = await remote_rig([endpoint("tier", host.address)], lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply(tier_cluster([]))
            for i in range(4):
                await s.apply([pod(f"p{i}", "1500m")])
                await until(lambda i=i: s.pods[f"uid-p{i}"].phase == "Bound", 10, f"p{i} to bind")
            uses = rig.remote.endpoints[0].replicas[0].start_batch
            return uses, {r.pod.name: r.pod.node_name for r in s.pods.values()}, dict(host.cycles_started)
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()
            await host.stop(1.0)

    uses, placed, cycles = asyncio.run(main())
    assert uses is bool(features)
    assert placed == {"p0": "n1", "p1": "n1", "p2": "n3", "p3": "n3"}
    assert cycles == {"Filter": 4, "Score": 4}


# ---------------------------------------------------------------------------------------------------
# What the console's endpoint table shows of each replica


def test_a_replica_counts_its_calls_in_flight_and_averages_its_answer_times() -> None:
    # Every call of the Chaos plugin stalls 0.3 s (well inside the 5 s deadlines): while the pod is being
    # scheduled a call or a node batch is in flight on the replica; once it is bound, none is, and every
    # answer took at least 0.3 s, so their moving average does too.
    from fault_plugins import Chaos

    async def main() -> tuple[int, int, float | None, float | None, dict[str, int]]:
        host = await PluginHost([Chaos], listen="127.0.0.1:0").start()
        text = config(["Chaos"], {"Chaos": {"stall": 1.0, "stallSeconds": 0.3}})
        rig = await remote_rig([endpoint("chaos", host.address)], lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        replica = rig.remote.endpoints[0].replicas[0]
        before = replica.latency_ms
        task = asyncio.create_task(s.run())
        try:
            await s.apply(tier_cluster(["p0"]))
            busiest = 0
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 30
            while s.pods["uid-p0"].phase != "Bound" and loop.time() < deadline:
                busiest = max(busiest, replica.in_flight)
                await asyncio.sleep(0.02)
            await s.drain(5)
            return busiest, replica.in_flight, before, replica.latency_ms, s.leaks()
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()
            await host.stop(1.0)

    busiest, after, before, latency, leaks = asyncio.run(main())
    assert (before, busiest >= 1, after) == (None, True, 0)
    assert latency is not None and latency >= 300.0
    assert leaks == NO_LEAKS
