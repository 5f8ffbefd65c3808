"""Shadow plugins: a new version of a remote plugin called on live cycles never changes a placement,
and its report counts exactly the disagreements of a small fixed workload.

Real plugin host processes: the live plugin F (``test_remote_fakes``, behaviour from its pluginConfig
args) and a shadow endpoint serving another version of F, whose behaviour comes from
``$OUTRIGGER_TEST_BEHAVIOUR`` (it is configured with the live F's args, as a shadow is).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_remote_fakes import BEHAVIOUR_ENV, SPEC_ENV, boom, per_node, per_pod, st
from test_remote_faults import NO_LEAKS, config
from test_remote_harness import ROOT, HostProcess, Hosts, endpoint, remote_rig, until
from test_remote_replicas import tier_cluster
from test_remote_upgrade import no_fit_scores

from framework.config import load_config
from framework.observe.metrics import SchedulerMetrics
from framework.remote.config import ShadowConfig
from framework.remote.shadow import ShadowPlugin
from framework.service import start_service
from pluginhost.model import Pod

TARGET = "test_remote_fakes:fake_plugins"
SPEC = {"name": "F", "points": ["filter", "score"]}
NO = st("Unschedulable", "live F says no")
# Live F: every pod to n0 (score 100, the only scorer); pod u0 fits nowhere.
LIVE = {"filter": per_pod(None, u0=NO), "score": per_node(0, n0=100)}
PODS = [f"p{i}" for i in range(6)]


def shadow_env(behaviour: dict[str, Any]) -> dict[str, str]:
    return {SPEC_ENV: json.dumps([SPEC]), BEHAVIOUR_ENV: json.dumps(behaviour)}


async def run(text: str, live: str, shadow: str | None, shadow_config: ShadowConfig | None,
              pods: list[str]) -> dict[str, Any]:
    """Schedule ``pods`` (each bound), then u0 (which fits nowhere) until its first failure; stop; the
    placements and the shadow report once every evaluation is done."""
    endpoints = [endpoint("live", live)]
    if shadow is not None:
        endpoints.append(dataclasses.replace(endpoint("v2", shadow), shadow=shadow_config))
    rig = await remote_rig(endpoints, lambda reg: load_config(text, reg.points()))
    s = rig.scheduler
    task = asyncio.create_task(s.run())
    out: dict[str, Any] = {}
    try:
        await s.apply([o for o in tier_cluster([]) if not isinstance(o, Pod)])
        for name in pods:  # one at a time: one cycle each, in this order
            await s.apply([p for p in tier_cluster([name]) if isinstance(p, Pod)])
            rec = s.pods[f"uid-{name}"]
            await until(lambda rec=rec: rec.phase == "Bound", 30, f"{name} to bind")
        await s.apply([p for p in tier_cluster(["u0"]) if isinstance(p, Pod)])
        await until(lambda: s.pods["uid-u0"].last_status is not None, 30, "u0's cycle to fail")
        await s.stop()
        await asyncio.wait_for(task, 5)
        await s.drain(5)
        await rig.remote.shadows.idle(30)
        out["placements"] = {n: s.pods[f"uid-{n}"].pod.node_name for n in pods}
        out["errors"] = [ev.status.message() for ev in s.recent_events() if ev.type == "Error" and ev.status]
        out["leaks"] = s.leaks()
        out["report"] = rig.remote.shadows.report()
        metrics = SchedulerMetrics()
        metrics.attach(s, rig.remote)
        out["metrics"] = sorted(line for line in metrics.exposition().decode().splitlines()
                                if line.startswith("outrigger_shadow_") and "latency" not in line)
        return out
    finally:
        if not task.done():
            await s.stop()
            await asyncio.wait_for(task, 5)
        await rig.close()


def test_a_shadow_that_disagrees_changes_no_placement_and_counts_each_disagreement(tmp_path: Path) -> None:
    text = no_fit_scores(config(["F"], {"F": {"behaviour": LIVE, "calls": str(tmp_path / "calls.jsonl")}}))
    reject_n0 = per_node(None, n0=NO)
    v2 = {
        "filter": per_pod(None, p0=reject_n0, p1=reject_n0),  # rejects the chosen node of p0 and p1
        "score": per_pod(per_node(0, n0=100), p2=per_node(0, n3=100), p3=per_node(0, n3=100)),  # p2, p3: n3
    }  # and it lets u0 on every node
    live = HostProcess(TARGET, {SPEC_ENV: json.dumps([SPEC])})
    shadow = HostProcess(TARGET, shadow_env(v2))
    with Hosts(live, shadow) as (live_address, shadow_address):
        without = asyncio.run(run(text, live_address, None, None, PODS))
        got = asyncio.run(run(text, live_address, shadow_address, ShadowConfig(budget=5.0), PODS))
    assert without["placements"] == {n: "n0" for n in PODS}
    assert got["placements"] == without["placements"]  # the shadow decided nothing
    assert got["errors"] == without["errors"] == []
    assert got["leaks"] == NO_LEAKS
    [report] = got["report"]
    counts = {k: report[k] for k in ("observed", "dropped", "evaluated", "errors", "timeouts", "changed",
                                     "rejected", "placed", "scoreChanged")}
    assert counts == {"observed": 7, "dropped": 0, "evaluated": 7, "errors": 0, "timeouts": 0, "changed": 5,
                      "rejected": 2, "placed": 1, "scoreChanged": 2}
    assert (report["plugin"], report["endpoint"], report["profiles"]) == ("F", "v2", ["default-scheduler"])
    examples = {e["pod"]: {k: v for k, v in e.items() if k not in ("pod", "profile")} for e in report["examples"]}
    rejected = {"kind": "rejected", "liveNode": "n0", "shadowNode": "n1", "liveScore": None, "shadowScore": None,
                "shadowScoreOfLiveNode": None}
    moved = {"kind": "score", "liveNode": "n0", "shadowNode": "n3", "liveScore": 100, "shadowScore": 100,
             "shadowScoreOfLiveNode": 0}
    placed = {"kind": "placed", "liveNode": "", "shadowNode": "n0", "liveScore": None, "shadowScore": None,
              "shadowScoreOfLiveNode": None}
    assert examples == {"default/p0": rejected, "default/p1": rejected, "default/p2": moved, "default/p3": moved,
                        "default/u0": placed}
    labels = '{endpoint="v2",plugin="F"}'
    assert got["metrics"] == sorted([
        f"outrigger_shadow_cycles_total{{endpoint=\"v2\",plugin=\"F\",result=\"{r}\"}} {n:.1f}"
        for r, n in (("evaluated", 7), ("dropped", 0), ("error", 0), ("timeout", 0))
    ] + [
        f"outrigger_shadow_disagreements_total{{endpoint=\"v2\",kind=\"{k}\",plugin=\"F\"}} {n:.1f}"
        for k, n in (("rejected", 2), ("placed", 1), ("score", 2))
    ] + [f"outrigger_shadow_observed_cycles_total{labels} 7.0"])


def test_shadow_errors_and_timeouts_are_counted_and_harmless(tmp_path: Path) -> None:
    text = no_fit_scores(config(["F"], {"F": {"behaviour": LIVE, "calls": str(tmp_path / "calls.jsonl")}}))
    v2 = {
        "filter": per_pod(None, p1=boom("v2 crashed"), p4=boom("v2 crashed")),  # two errors
        "score": per_node(0, n0=100),
        # The first Filter call takes 60 s: over the 3 s budget, abandoned (p0's evaluation).
        "slow": {"point": "filter", "seconds": 60, "marker": str(tmp_path / "slow-marker")},
    }
    live = HostProcess(TARGET, {SPEC_ENV: json.dumps([SPEC])})
    shadow = HostProcess(TARGET, shadow_env(v2))
    with Hosts(live, shadow) as (live_address, shadow_address):
        got = asyncio.run(run(text, live_address, shadow_address, ShadowConfig(budget=3.0), PODS))
    assert got["placements"] == {n: "n0" for n in PODS}
    assert got["errors"] == []
    assert got["leaks"] == NO_LEAKS
    [report] = got["report"]
    counts = {k: report[k] for k in ("observed", "evaluated", "errors", "timeouts", "rejected", "scoreChanged")}
    # u0: the shadow lets it on n0 (placed); p0 timed out; p1 and p4 failed; the rest agree.
    assert counts == {"observed": 7, "evaluated": 4, "errors": 2, "timeouts": 1, "rejected": 0, "scoreChanged": 0}
    assert report["placed"] == 1


def test_a_full_queue_drops_and_counts_the_cycles_it_cannot_hold() -> None:
    async def main() -> tuple[int, int, int]:
        sp = ShadowPlugin("F", None, ShadowConfig(queue=2))  # type: ignore[arg-type]
        sp.adapters["default-scheduler"] = None  # type: ignore[assignment]
        outcome = type("Outcome", (), {"profile": "default-scheduler"})()
        other = type("Outcome", (), {"profile": "elsewhere"})()  # a profile it does not shadow
        for o in (outcome, outcome, outcome, other, outcome):
            sp.offer(o)
        return sp.stats.observed, sp.stats.dropped, sp.queue.qsize()

    assert asyncio.run(main()) == (5, 2, 2)


@pytest.mark.parametrize(("block", "problem"), [
    ("{points: [Bind]}", "plugins[0].shadow.points: must be a non-empty list of Filter and Score"),
    ("{budget: 0s}", "plugins[0].shadow.budget: duration must be positive, got '0s'"),
    ("{queue: 0}", "plugins[0].shadow.queue: must be an integer from 1 to 1000000, got 0"),
    ("{plugins: F}", "plugins[0].shadow.plugins: must be a list of plugin names"),
    ("{weight: 1.5}", "plugins[0].shadow.weight: must be an integer from 1 to 1000000, got 1.5"),
    ("{bogus: 1}", "plugins[0].shadow.bogus: unknown field (allowed: plugins, points, budget, queue, examples, "
                   "weight)"),
    ("[F]", "plugins[0].shadow: expected a mapping, got list"),
])
def test_bad_shadow_blocks_are_refused_naming_the_field(block: str, problem: str) -> None:
    from framework.config import ConfigError
    from framework.remote import parse_remote_plugins

    text = ("apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
            f"- {{name: v2, address: '127.0.0.1:1', shadow: {block}}}\n")
    with pytest.raises(ConfigError) as err:
        parse_remote_plugins(text, "plugins.yaml")
    assert str(err.value) == f"plugins.yaml: {problem}"


def test_a_shadow_block_parses_with_its_defaults() -> None:
    from framework.remote import parse_remote_plugins

    text = ("apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
            "- {name: v2, address: '127.0.0.1:1', shadow: {plugins: [F], points: [Score], budget: 50ms}}\n"
            "- {name: v3, address: '127.0.0.1:2', shadow: {}}\n")
    [v2, v3] = parse_remote_plugins(text)
    assert v2.shadow == ShadowConfig(("F",), ("Score",), 0.05, 100, 20, 1)
    assert v3.shadow == ShadowConfig((), ("Filter", "Score"), 0.1, 100, 20, 1)


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framework.cli", *argv], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)


def test_outrigger_shadow_report_reads_the_running_service(tmp_path: Path) -> None:
    text = no_fit_scores(config(["F"], {"F": {"behaviour": LIVE, "calls": str(tmp_path / "calls.jsonl")}}))
    v2 = {"filter": per_pod(None, p0=per_node(None, n0=NO)), "score": per_node(0, n0=100)}

    async def main(live: str, shadow: str) -> tuple[list[subprocess.CompletedProcess[str]], Any]:
        shadowed = dataclasses.replace(endpoint("v2", shadow), shadow=ShadowConfig(budget=5.0))
        srv = await start_service(lambda reg: load_config(text, reg.points()), [endpoint("live", live), shadowed])
        bare = None
        try:
            s = srv.scheduler
            await s.apply([o for o in tier_cluster([]) if not isinstance(o, Pod)])
            await s.apply([p for p in tier_cluster(["p0", "p1"]) if isinstance(p, Pod)])
            await until(lambda: all(r.phase == "Bound" for r in s.pods.values()), 30, "pods to bind")
            assert srv.remote is not None
            await srv.remote.shadows.idle(30)
            runs = [await asyncio.to_thread(_cli, "shadow-report", "--server", srv.address, *o)
                    for o in ([], ["-o", "json"])]
            report = srv.remote.shadows.report()
            # A service without shadow plugins (started once the first is done with the live host).
            bare = await start_service(lambda reg: load_config(text, reg.points()), [endpoint("live", live)])
            runs.append(await asyncio.to_thread(_cli, "shadow-report", "--server", bare.address))
            return runs, report
        finally:
            await srv.stop(0.2)
            if bare is not None:
                await bare.stop(0.2)

    live = HostProcess(TARGET, {SPEC_ENV: json.dumps([SPEC])})
    shadow = HostProcess(TARGET, shadow_env(v2))
    with Hosts(live, shadow) as (live_address, shadow_address):
        (as_table, as_json, none), report = asyncio.run(main(live_address, shadow_address))
    assert (as_table.returncode, as_table.stderr) == (0, "")
    lines = as_table.stdout.splitlines()
    assert lines[0].split() == ["PLUGIN", "ENDPOINT", "OBSERVED", "EVALUATED", "DROPPED", "ERRORS", "TIMEOUTS",
                                "CHANGED", "REJECTED", "PLACED", "SCORE", "P50(ms)", "P99(ms)"]
    assert lines[1].split()[:11] == ["F", "v2", "2", "2", "0", "0", "0", "1", "1", "0", "0"]
    assert lines[3] == "examples of F (v2):"
    assert lines[5].split() == ["default/p0", "rejected", "n0", "n1", "-", "-"]
    assert (as_json.returncode, json.loads(as_json.stdout)) == (0, report)
    assert none.returncode == 1
    assert "no shadow plugins (a RemotePlugins endpoint with a shadow block)" in none.stderr
