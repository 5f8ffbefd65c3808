"""The example plugins (pluginhost/examples), each in its own plugin host process on 127.0.0.1, and
the same classes in-process: gang scheduling with Permit waits released through the Handle, node
labels handed from PreFilter to Filter/Score in CycleState, a slow PreBind whose failure unreserves
across processes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from test_remote_harness import HostProcess, Hosts, endpoint, remote_rig, until

from framework.config import load_config
from framework.plugins import in_tree_registry
from framework.scheduler import Scheduler
from pluginhost.examples import Coscheduling, NodeLabels, Provisioner
from pluginhost.examples.coscheduling import GROUP_LABEL, MIN_AVAILABLE, TIMEOUT
from pluginhost.examples.nodelabels import PREFER, REQUIRE
from pluginhost.examples.provisioner import FAIL, PROVISION
from pluginhost.manifest import parse_objects
from pluginhost.model import Node, Pod

MODES = ["inprocess", "remote"]
NO_LEAKS = {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0}
EXAMPLES = {"Coscheduling": Coscheduling, "NodeLabels": NodeLabels, "Provisioner": Provisioner}


def config(enabled: list[str], args: dict[str, dict[str, Any]]) -> str:
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
        *(f"      - name: {name}" for name in enabled),
        "  pluginConfig:",
    ]
    for name, a in args.items():
        lines += [f"  - name: {name}", f"    args: {json.dumps(a)}"]
    return "\n".join(lines) + "\n"


def nodes(n: int, cpu: str = "4", labels: dict[int, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Node",
         "metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}", **(labels or {}).get(i, {})}},
         "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}
        for i in range(n)
    ]  # fmt: skip


def pod(name: str, cpu: str = "1", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta = {"name": name, "uid": f"uid-{name}", "labels": labels or {}, "annotations": annotations or {}}
    container = {"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container]}}


def gang(group: str, n: int, min_available: int, timeout: float | None = None, cpu: str = "1") -> list[dict[str, Any]]:
    ann = {MIN_AVAILABLE: str(min_available)}
    if timeout is not None:
        ann[TIMEOUT] = str(timeout)
    return [pod(f"{group}-{i}", cpu, {GROUP_LABEL: group}, ann) for i in range(n)]


def objects(*docs: dict[str, Any]) -> list[Pod | Node]:
    return parse_objects(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}), "test.json")


def settled(s: Scheduler) -> bool:
    if s.leaks()["binding_cycles"] or s.pending_count()["in-flight"]:
        return False
    return all(r.phase == "Bound" or (r.phase == "Unschedulable" and r.last_status) for r in s.pods.values())


Watch = Callable[[Scheduler], Awaitable[None]]


async def drive(s: Scheduler, objs: list[Pod | Node], watch: Watch | None = None, timeout: float = 10) -> None:
    # The watcher starts first, so what it installs is in place before the first pod is scheduled.
    watcher = asyncio.create_task(watch(s)) if watch is not None else None
    await asyncio.sleep(0)
    await s.apply(objs)
    task = asyncio.create_task(s.run())
    try:
        await until(lambda: settled(s), timeout, "every pod bound or unschedulable")
    finally:
        if watcher is not None:
            watcher.cancel()
        await s.drain(timeout=5)
        await s.stop()
        await asyncio.wait_for(task, 5)


def run(mode: str, names: list[str], args: dict[str, dict[str, Any]], objs: list[Pod | Node],
        watch: Watch | None = None) -> tuple[Scheduler, dict[str, Any]]:
    """Schedule ``objs`` with the default profile plus the example plugins ``names``, in-process or
    each served by its own plugin host process. Returns the scheduler and the remote call stats."""
    text = config(names, args)

    async def inprocess() -> tuple[Scheduler, dict[str, Any]]:
        reg = in_tree_registry()
        for name in names:
            reg.register_class(EXAMPLES[name])
        s = Scheduler(load_config(text, reg.points()), reg, seed=0)
        await drive(s, objs, watch)
        return s, {}

    async def remote(addresses: list[str]) -> tuple[Scheduler, dict[str, Any]]:
        eps = [endpoint(name.lower(), addr) for name, addr in zip(names, addresses, strict=True)]
        rig = await remote_rig(eps, lambda reg: load_config(text, reg.points()))
        try:
            await drive(rig.scheduler, objs, watch)
            await rig.remote.drain()
            assert rig.services.services.in_flight_count() == 0
            return rig.scheduler, rig.remote.stats()
        finally:
            await rig.close()

    if mode == "inprocess":
        return asyncio.run(inprocess())
    targets = {"Coscheduling": "pluginhost.examples.coscheduling:Coscheduling",
               "NodeLabels": "pluginhost.examples.nodelabels:NodeLabels",
               "Provisioner": "pluginhost.examples.provisioner:Provisioner"}  # fmt: skip
    with Hosts(*(HostProcess(targets[n]) for n in names)) as addresses:
        return asyncio.run(remote(addresses))


def phase(s: Scheduler, name: str) -> tuple[str, str]:
    r = s.get_pod("default", name)
    assert r is not None
    return r.phase, r.pod.node_name


# ---------------------------------------------------------------------------------------------------
# Coscheduling


@pytest.mark.parametrize("mode", MODES)
def test_gang_that_fits_binds_together(mode: str) -> None:
    most_waiting = [0]

    async def watch(s: Scheduler) -> None:
        # Count at every Permit wait (sampling on a timer would depend on how fast cycles run).
        add = s.waiting_pods.add

        def counting_add(*args: Any, **kwargs: Any) -> Any:
            handle = add(*args, **kwargs)
            most_waiting[0] = max(most_waiting[0], len(s.waiting_pods))
            return handle

        most_waiting[0] = len(s.waiting_pods)
        s.waiting_pods.add = counting_add  # type: ignore[method-assign]

    objs = objects(*nodes(4), *gang("train", 4, 4), pod("web"))
    s, stats = run(mode, ["Coscheduling"], {"Coscheduling": {"permitWaitingTimeSeconds": 10}}, objs, watch)
    assert {phase(s, f"train-{i}")[0] for i in range(4)} == {"Bound"}
    assert phase(s, "web")[0] == "Bound"
    # The first three members waited at Permit until the fourth completed the group.
    assert most_waiting[0] == 3
    bound_at = sorted(ev.sequence for ev in s.recent_events() if ev.type == "Bound" and ev.name.startswith("train"))
    assert len(bound_at) == 4
    assert s.leaks() == NO_LEAKS
    if mode == "remote":
        assert stats["Coscheduling"]["Permit"].calls == 5 and stats["Coscheduling"]["Permit"].errors == 0


@pytest.mark.parametrize("mode", MODES)
def test_gang_short_of_members_is_rejected_after_timeout_with_nothing_left_reserved(mode: str) -> None:
    objs = objects(*nodes(4), *gang("short", 3, 4, timeout=0.3), pod("web"))
    s, stats = run(mode, ["Coscheduling"], {}, objs)
    statuses = {}
    for i in range(3):
        r = s.get_pod("default", f"short-{i}")
        assert r is not None and r.phase == "Unschedulable" and r.pod.node_name == ""
        assert r.last_status is not None and r.last_status.plugin == "Coscheduling"
        statuses[r.pod.name] = r.last_status.message()
    # One member timed out; its Unreserve rejected the others at once (the group fails together).
    timed_out = [m for m in statuses.values() if m.startswith("rejected due to timeout after waiting 300ms")]
    assert len(timed_out) >= 1
    assert all(m in timed_out or "pod group 'short' was rejected" in m for m in statuses.values())
    assert phase(s, "web") == ("Bound", phase(s, "web")[1])
    assert s.leaks() == NO_LEAKS
    assert s.cache.assumed() == [] and s.cycle_states == {}
    assert all(p.name == "web" for pods in s.cache.snapshot().pods for p in pods)
    if mode == "remote":
        assert stats["Coscheduling"]["Unreserve"].calls == 3


def test_gang_that_cannot_fit_is_rejected_at_pre_filter() -> None:
    objs = objects(*nodes(2, cpu="2"), *gang("huge", 2, 6))
    s, _ = run("remote", ["Coscheduling"], {}, objs)
    r = s.get_pod("default", "huge-0")
    assert r is not None and r.last_status is not None
    expected = "pod group 'huge' needs 6 more member(s) like 'huge-0' but the cluster has room for 4"
    assert expected in r.last_status.message()
    assert s.leaks() == NO_LEAKS


# ---------------------------------------------------------------------------------------------------
# NodeLabels: PreFilter -> CycleState -> Filter/Score, in one exchange


@pytest.mark.parametrize("mode", MODES)
def test_node_labels_prefilter_state_reaches_filter_and_score(mode: str) -> None:
    labels = {0: {"disk": "hdd"}, 1: {"disk": "ssd", "rack": "r1"}, 2: {"disk": "ssd", "rack": "r2"}, 3: {}}
    objs = objects(
        *nodes(4, labels=labels),
        pod("needs-ssd", annotations={REQUIRE: "disk=ssd", PREFER: "rack=r2"}),
        pod("needs-rack", annotations={REQUIRE: "rack"}),
        pod("impossible", annotations={REQUIRE: "disk=nvme"}),
        pod("plain"),
    )
    s, stats = run(mode, ["NodeLabels"], {}, objs)
    assert phase(s, "needs-ssd") == ("Bound", "n2")
    assert phase(s, "needs-rack")[1] in ("n1", "n2")
    assert phase(s, "plain")[0] == "Bound"
    r = s.get_pod("default", "impossible")
    assert r is not None and r.phase == "Unschedulable" and r.last_status is not None
    assert r.last_status.message().startswith("0/4 nodes are available: 4 node(s) didn't have the required label(s)")
    if mode == "remote":
        st = stats["NodeLabels"]
        # Annotated pods: PreFilter + one Filter stream answering Filter and Score; no Score stream for
        # them. Only "plain" (PreFilter Skip: no Filter call) needs a Score stream.
        assert st["Filter"].calls >= 3 and st["Filter"].errors == 0
        assert st["Score (with Filter)"].calls == 2  # needs-ssd and needs-rack had several feasible nodes
        assert st["Score"].calls == 1


# ---------------------------------------------------------------------------------------------------
# Provisioner: a failing PreBind unreserves across processes


def test_provisioner_failure_unreserves_across_processes(tmp_path: Path) -> None:
    root = tmp_path / "claims"
    objs = objects(
        *nodes(2),
        pod("flaky", annotations={PROVISION: "scratch", FAIL: "once"}),
        pod("broken", annotations={PROVISION: "scratch", FAIL: "always"}),
        pod("fine", annotations={PROVISION: "scratch"}),
        pod("plain"),
    )
    seen_broken = [0]

    async def watch(s: Scheduler) -> None:
        # "broken" fails forever (Error, backoff): stop once it failed twice, i.e. was retried.
        while True:
            r = s.get_pod("default", "broken")
            if r is not None and r.attempts >= 2 and r.phase == "Pending":
                seen_broken[0] = r.attempts
                s.delete_pod("default", "broken")
                return
            await asyncio.sleep(0.01)

    s, stats = run("remote", ["Provisioner"], {"Provisioner": {"root": str(root), "delaySeconds": 0.05}}, objs,
                   watch)
    assert phase(s, "flaky")[0] == "Bound"
    assert phase(s, "fine")[0] == "Bound"
    assert phase(s, "plain")[0] == "Bound"
    flaky = s.get_pod("default", "flaky")
    assert flaky is not None and flaky.attempts == 2  # failed at PreBind once, unreserved, retried
    assert seen_broken[0] >= 2
    # Only bound pods hold a claim: every failed attempt's claim was released by a remote Unreserve.
    claims = sorted(p.name.removesuffix(".claim") for p in root.glob("*.claim"))
    assert claims == ["uid-fine", "uid-flaky"]
    pb = stats["Provisioner"]
    assert pb["Unreserve"].calls >= 3 and pb["PreBind"].errors == 0  # failures are statuses, not RPC errors
    assert s.leaks() == NO_LEAKS


@pytest.mark.parametrize(
    ("cls", "args", "message"),
    [
        (Coscheduling, {"permitWaitingTimeSecond": 5},
         "plugin Coscheduling does not know args permitWaitingTimeSecond (known: permitWaitingTimeSeconds, "
         "groupTimeoutSeconds, controllerIntervalSeconds)"),
        (Provisioner, {"root": "/tmp/x", "delay": 1, "Root": "/y"},
         "plugin Provisioner does not know args Root, delay (known: root, delaySeconds)"),
        (NodeLabels, {"label": "x"}, "plugin NodeLabels does not know args label (known: none)"),
    ],
    ids=["coscheduling-typo", "provisioner-two-unknown", "nodelabels-takes-none"],
)  # fmt: skip
def test_example_plugins_refuse_args_they_do_not_know(cls: type, args: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError) as err:
        cls(args, None)
    assert str(err.value) == message
    cls({}, None)  # no args: the defaults
