"""Plugin host upgrades: a replica restarted with another manifest is taken as it now is.

Real plugin host processes (``outrigger plugin serve test_remote_fakes:fake_plugins``) are restarted
on their own ports with another manifest. Each host logs its calls to its own file
(``$OUTRIGGER_TEST_REPLICA``), so calls are counted per replica: during a rolling upgrade no replica
gets a call for a point it does not declare; once every replica agrees, the profiles are resolved
again (multiPoint follows the new points) and rebuilt without a restart; a plugin no replica serves
any more meets the endpoint's failure policy.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_remote_fakes import REPLICA_ENV, SPEC_ENV, per_node
from test_remote_faults import NO_LEAKS, config
from test_remote_harness import HostProcess, RemoteRig, endpoint, remote_rig, until
from test_remote_replicas import tier_cluster

from framework.config import load_config
from framework.observe.metrics import SchedulerMetrics
from framework.remote.endpoint import POINT_ENUMS, Endpoint
from pluginhost.model import Pod

TARGET = "test_remote_fakes:fake_plugins"


def host_env(replica: int, *specs: dict[str, Any]) -> dict[str, str]:
    return {SPEC_ENV: json.dumps(list(specs)), REPLICA_ENV: f"r{replica}"}


def calls(log: Path, replica: int) -> list[list[Any]]:
    path = Path(f"{log}.r{replica}")
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def count(log: Path, replica: int, point: str, pods: set[str] | None = None) -> int:
    """Nodes replica ``replica`` answered at ``point`` (Filter logs a line per node, Score per batch)."""
    return sum(len(c[3]) if point == "score" else 1 for c in calls(log, replica)
               if c[0] == point and (pods is None or c[2] in pods))


def no_fit_scores(text: str) -> str:
    """Disable NodeResourcesFit's Score: F's scores (once it has Score) decide alone."""
    return text.replace("    multiPoint:\n", "    score:\n      disabled:\n      - {name: NodeResourcesFit}\n"
                        "    multiPoint:\n")


def restart(hosts: list[HostProcess], i: int, env: dict[str, str]) -> None:
    """Stop replica ``i`` and start the new version on its port (a rolling upgrade's step)."""
    address = hosts[i].address
    hosts[i].stop()
    hosts[i] = HostProcess(TARGET, env, listen=address)
    hosts[i].start()


async def handshaken(ep: Endpoint, i: int, plugin: str, point: str, declared: bool) -> None:
    """Wait until replica ``i`` is handshaken again (its health watch saw it back) with the new manifest."""
    r = ep.replicas[i]
    await until(lambda: not r.suspect and r.declares(plugin, POINT_ENUMS[point]) == declared, 30,
                f"replica {i} handshaken again")


async def schedule(rig: RemoteRig, names: list[str]) -> dict[str, str]:
    """Apply pods ``names`` and wait until each is bound: pod -> node."""
    s = rig.scheduler
    await s.apply([p for p in tier_cluster(names) if isinstance(p, Pod)])
    await until(lambda: all(s.pods[f"uid-{n}"].phase == "Bound" for n in names), 30, f"{names} to bind")
    return {n: s.pods[f"uid-{n}"].pod.node_name for n in names}


async def run_rig(text: str, addresses: list[str], body: Callable[[RemoteRig], Any], policy: str = "Fail") -> Any:
    ep = dataclasses.replace(endpoint("fakes", addresses), failure_policy=policy)
    rig = await remote_rig([ep], lambda reg: load_config(text, reg.points()))
    s = rig.scheduler
    task = asyncio.create_task(s.run())
    try:
        await s.apply([o for o in tier_cluster([]) if not isinstance(o, Pod)])
        out = await body(rig)
        await s.drain(5)
        out["errors"] = [ev.status.message() for ev in s.recent_events() if ev.type == "Error" and ev.status]
        out["leaks"] = s.leaks()
        return out
    finally:
        await s.stop()
        await asyncio.wait_for(task, 5)
        await rig.close()


def test_a_plugin_that_gains_score_is_called_at_score_once_every_replica_declares_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "calls.jsonl"
    old = {"name": "F", "points": ["filter"]}
    new = {"name": "F", "points": ["filter", "score"]}
    behaviour = {"score": per_node(0, n2=100)}  # once at Score, F sends every pod to n2
    text = no_fit_scores(config(["F"], {"F": {"behaviour": behaviour, "calls": str(log)}}))
    hosts = [HostProcess(TARGET, host_env(i, old)) for i in range(2)]
    for h in hosts:
        h.start()

    async def body(rig: RemoteRig) -> dict[str, Any]:
        ep = rig.remote.endpoints[0]
        out: dict[str, Any] = {}
        out["v1"] = await schedule(rig, [f"a{i}" for i in range(6)])
        restart(hosts, 1, host_env(1, new))  # half-way: replica 1 declares Score, replica 0 does not
        await handshaken(ep, 1, "F", "Score", True)
        out["mixed"] = await schedule(rig, [f"b{i}" for i in range(6)])
        out["mixed_filter_r1"] = count(log, 1, "filter", {f"b{i}" for i in range(6)})
        out["score_before"] = [count(log, 0, "score"), count(log, 1, "score")]
        out["profile_before"] = rig.scheduler.config.profiles[0].names("score")
        restart(hosts, 0, host_env(0, new))
        await handshaken(ep, 0, "F", "Score", True)
        await until(lambda: rig.remote.manifest_changes == 1, 30, "the profiles to be rebuilt")
        out["profile_after"] = rig.scheduler.config.profiles[0].names("score")
        out["v2"] = await schedule(rig, [f"c{i}" for i in range(6)])
        c_pods = {f"c{i}" for i in range(6)}
        out["score_after"] = [count(log, 0, "score", c_pods), count(log, 1, "score", c_pods)]
        return out

    try:
        got = asyncio.run(run_rig(text, [h.address for h in hosts], body))
    finally:
        for h in hosts:
            h.stop()
    # Before every replica agreed, no replica was called at Score (the profile had F at Filter only),
    # while the upgraded replica took its share of Filter.
    assert got["score_before"] == [0, 0]
    assert got["mixed_filter_r1"] > 0
    assert got["profile_before"] == []
    assert got["profile_after"] == ["F"]
    # After: each c pod's Score went to both replicas (its 4 nodes split over the 2) and decided.
    assert got["score_after"] == [6 * 2, 6 * 2]
    assert set(got["v2"].values()) == {"n2"}
    assert set(got["v1"].values()) != {"n2"}
    assert got["errors"] == []
    assert got["leaks"] == NO_LEAKS
    # Printed once, at any log level, as an applied configuration generation is.
    taken = [line for line in capsys.readouterr().out.splitlines() if "new manifest" in line]
    assert taken == ["endpoint 'fakes' takes up its hosts' new manifest: F: +SCORE"]


def test_a_rolling_upgrade_that_drops_score_never_sends_score_to_a_new_replica(tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    old = {"name": "F", "points": ["filter", "score"]}
    new = {"name": "F", "points": ["filter"]}
    text = no_fit_scores(config(["F"], {"F": {"behaviour": {"score": per_node(0, n2=100)}, "calls": str(log)}}))
    hosts = [HostProcess(TARGET, host_env(i, old)) for i in range(2)]
    for h in hosts:
        h.start()

    async def body(rig: RemoteRig) -> dict[str, Any]:
        ep = rig.remote.endpoints[0]
        out: dict[str, Any] = {}
        out["v1"] = await schedule(rig, [f"a{i}" for i in range(4)])
        restart(hosts, 1, host_env(1, new))
        await handshaken(ep, 1, "F", "Score", False)
        mixed = {f"b{i}" for i in range(6)}
        out["mixed"] = await schedule(rig, sorted(mixed))
        # Every Score of the mixed pods went to replica 0, the only one declaring it: 4 nodes each.
        out["mixed_score"] = [count(log, 0, "score", mixed), count(log, 1, "score", mixed)]
        out["mixed_filter_r1"] = count(log, 1, "filter", mixed)
        restart(hosts, 0, host_env(0, new))
        await handshaken(ep, 0, "F", "Score", False)
        await until(lambda: rig.remote.manifest_changes == 1, 30, "the profiles to be rebuilt")
        after = {f"c{i}" for i in range(4)}
        await schedule(rig, sorted(after))
        out["after_score"] = [count(log, 0, "score", after), count(log, 1, "score", after)]
        out["after_filter"] = count(log, 0, "filter", after) + count(log, 1, "filter", after)
        out["profile_after"] = rig.scheduler.config.profiles[0].names("score")
        return out

    try:
        got = asyncio.run(run_rig(text, [h.address for h in hosts], body))
    finally:
        for h in hosts:
            h.stop()
    assert set(got["v1"].values()) == {"n2"}
    assert got["mixed_score"] == [6 * 4, 0]
    assert set(got["mixed"].values()) == {"n2"}  # the old replica's scores still decide
    assert got["mixed_filter_r1"] > 0  # the new replica serves Filter meanwhile
    assert got["after_score"] == [0, 0]
    assert got["after_filter"] == 4 * 4
    assert got["profile_after"] == []
    assert got["errors"] == []
    assert got["leaks"] == NO_LEAKS


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_a_plugin_gone_from_every_replica_meets_the_failure_policy(policy: str, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    log = tmp_path / "calls.jsonl"
    reject = {"code": "Unschedulable", "reasons": ["not n3"]}
    behaviour = {"filter": per_node(None, n0=reject, n1=reject, n2=reject)}  # F lets n3 only
    text = config(["F"], {"F": {"behaviour": behaviour, "calls": str(log)}})
    hosts = [HostProcess(TARGET, host_env(0, {"name": "F", "points": ["filter"]}))]
    hosts[0].start()

    async def body(rig: RemoteRig) -> dict[str, Any]:
        s = rig.scheduler
        out: dict[str, Any] = {"v1": await schedule(rig, ["a0", "a1"])}
        restart(hosts, 0, host_env(0, {"name": "G", "points": ["filter"]}))  # the new version serves G only
        await handshaken(rig.remote.endpoints[0], 0, "F", "Filter", False)
        names = ["b0", "b1"]
        await s.apply([p for p in tier_cluster(names) if isinstance(p, Pod)])
        if policy == "Ignore":
            await until(lambda: all(s.pods[f"uid-{n}"].phase == "Bound" for n in names), 30, "pods to bind")
            out["bound"] = sorted(s.pods[f"uid-{n}"].phase for n in names)
            out["ignored"] = rig.remote.stats()["F"]["Filter"].ignored
        else:
            await until(lambda: all(s.pods[f"uid-{n}"].last_status is not None for n in names), 30, "cycles to fail")
            out["phase"] = sorted(s.pods[f"uid-{n}"].phase for n in names)
            status = s.pods["uid-b0"].last_status
            out["reason"] = status.message() if status is not None else ""
        out["unserved"] = rig.remote.unserved().get(("fakes", "F", "Filter"), 0)
        metrics = SchedulerMetrics()
        metrics.attach(s, rig.remote)
        text = metrics.exposition().decode()
        out["metric"] = [line for line in text.splitlines()
                         if line.startswith(("outrigger_remote_plugin_unserved_calls_total",
                                             "outrigger_remote_manifest_changes_total"))]
        return out

    try:
        with caplog.at_level("ERROR", logger="outrigger.remote"):
            got = asyncio.run(run_rig(text, [h.address for h in hosts], body, policy))
    finally:
        for h in hosts:
            h.stop()
    assert set(got["v1"].values()) == {"n3"}
    assert got["unserved"] >= 2  # one per cycle of b0 and b1 at least
    # The host's manifest now has G only: taken up (F stays registered, so the profile still resolves).
    assert got["metric"] == [
        f'outrigger_remote_plugin_unserved_calls_total{{endpoint="fakes",plugin="F",rpc="Filter"}} '
        f'{float(got["unserved"])}',
        'outrigger_remote_manifest_changes_total{result="applied"} 1.0',
        'outrigger_remote_manifest_changes_total{result="failed"} 0.0',
    ]
    unserved = "no replica of endpoint 'fakes' serves plugin 'F'"
    logged = [r.getMessage() for r in caplog.records if unserved in r.getMessage()]
    assert logged and logged[0].endswith(f"(1 calls so far; failurePolicy {policy})")
    assert any("no longer serves F" in r.getMessage() for r in caplog.records)
    if policy == "Ignore":
        assert got["bound"] == ["Bound", "Bound"]
        assert got["ignored"] >= 2
    else:
        assert got["phase"] == ["Pending", "Pending"]
        assert got["reason"] == (
            "running \"F\" filter plugin: no replica of endpoint 'fakes' serves plugin 'F' any more"
        )
    assert got["leaks"] == NO_LEAKS
