"""Canary plugins: a fraction of pods (stable by uid, or chosen by labels) is scheduled by a variant of
the profile in which one plugin is served by another endpoint; the fraction changes live; the
attempts are counted by variant.

Real plugin host processes (``test_remote_fakes``): the stable F scores node n0 highest, the canary F
node n3, so a pod's node says which variant scheduled it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pytest
from test_live_config import replace
from test_remote_fakes import BEHAVIOUR_ENV, SPEC_ENV, per_node, per_pod
from test_remote_faults import NO_LEAKS, config
from test_remote_harness import HostProcess, Hosts, endpoint, remote_rig, until
from test_remote_upgrade import no_fit_scores

from framework.canary import BUCKETS, bucket
from framework.config import ConfigError, load_config
from framework.liveconfig import LiveConfig, WatchedFiles
from framework.observe.metrics import SchedulerMetrics
from framework.profiles import build_registry_with_remote, load_scheduler_config
from framework.remote import RemotePluginsError, load_remote_plugins, parse_remote_plugins
from framework.remote.config import CanaryConfig
from framework.service import start_plugin_services, start_service
from pluginhost.manifest import parse_objects
from pluginhost.model import Node, Pod

TARGET = "test_remote_fakes:fake_plugins"
SPEC = {"name": "F", "points": ["filter", "score"]}
NODES = ("n0", "n1", "n2", "n3")
# F's scores alone decide: the stable F picks n0, the canary n3 (the calls they log are not read here).
TEXT = no_fit_scores(config(["F"], {"F": {"calls": os.devnull}}))


def host(favourite: str, spec: dict[str, Any] = SPEC) -> HostProcess:
    behaviour = {"filter": per_pod(None), "score": per_node(0, **{favourite: 100})}
    return HostProcess(TARGET, {SPEC_ENV: json.dumps([spec]), BEHAVIOUR_ENV: json.dumps(behaviour)})


def nodes() -> list[Node]:
    docs = [f"apiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\n"
            "status: {allocatable: {cpu: '8', memory: 8Gi, pods: '110'}}\n" for n in NODES]
    return [o for o in parse_objects("---\n".join(docs), "nodes.yaml") if isinstance(o, Node)]


def pods(names: list[str], labelled: frozenset[str] = frozenset()) -> list[Pod]:
    docs = [f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {p}, uid: uid-{p}, "
            f"labels: {{track: {'canary' if p in labelled else 'main'}}}}}\n"
            "spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}\n" for p in names]
    return [o for o in parse_objects("---\n".join(docs), "pods.yaml") if isinstance(o, Pod)]


def in_fraction(names: list[str], fraction: float) -> set[str]:
    """The pods the canary schedules at ``fraction``: computed here from the documented hash."""
    return {p for p in names if bucket(f"uid-{p}") < fraction * BUCKETS}


async def schedule(s: Any, names: list[str], labelled: frozenset[str] = frozenset()) -> dict[str, str]:
    await s.apply(pods(names, labelled))
    for name in names:
        rec = s.pods[f"uid-{name}"]
        await until(lambda rec=rec: rec.phase == "Bound", 30, f"{name} to bind")
    return {n: s.pods[f"uid-{n}"].pod.node_name for n in names}


def canary_metrics(s: Any, remote: Any) -> list[str]:
    metrics = SchedulerMetrics()
    metrics.attach(s, remote)
    return sorted(line for line in metrics.exposition().decode().splitlines()
                  if line.startswith("outrigger_canary_pods_total"))


async def run(stable: str, canary: str, canary_config: CanaryConfig, names: list[str],
              labelled: frozenset[str] = frozenset()) -> dict[str, Any]:
    endpoints = [endpoint("live", stable), dataclasses.replace(endpoint("v2", canary), canary=canary_config)]
    rig = await remote_rig(endpoints, lambda reg: load_config(TEXT, reg.points()))
    s = rig.scheduler
    task = asyncio.create_task(s.run())
    try:
        await s.apply(nodes())
        placements = await schedule(s, names, labelled)
        await s.stop()
        await asyncio.wait_for(task, 5)
        await s.drain(5)
        return {"placements": placements, "variants": {n: s.pods[f"uid-{n}"].variant for n in names},
                "metrics": canary_metrics(s, rig.remote), "leaks": s.leaks()}
    finally:
        if not task.done():
            await s.stop()
            await asyncio.wait_for(task, 5)
        await rig.close()


NAMES = [f"p{i}" for i in range(16)]
LABELLED = frozenset({"p1", "p4", "p5", "p11"})


def metric(variant: str, n: int) -> str:
    return f'outrigger_canary_pods_total{{plugin="F",result="scheduled",variant="{variant}"}} {n:.1f}'


@pytest.mark.parametrize(("canary_config", "labelled", "chosen"), [
    pytest.param(CanaryConfig("F", "live", 0.5), frozenset(), in_fraction(NAMES, 0.5), id="fraction-by-uid"),
    pytest.param(CanaryConfig("F", "live", 1.0, {"track": "canary"}), LABELLED, set(LABELLED), id="selector"),
    pytest.param(CanaryConfig("F", "live", 0.5, {"track": "canary"}), LABELLED,
                 in_fraction(sorted(LABELLED), 0.5), id="selector-and-fraction"),
])
def test_exactly_the_chosen_pods_are_scheduled_by_the_canary(
        canary_config: CanaryConfig, labelled: frozenset[str], chosen: set[str]) -> None:
    # The workload is one where both variants have pods (the hash is fixed, so this holds for good).
    assert 0 < len(chosen) < len(NAMES)
    with Hosts(host("n0"), host("n3")) as (stable, canary):
        got = asyncio.run(run(stable, canary, canary_config, NAMES, labelled))
    assert got["placements"] == {n: "n3" if n in chosen else "n0" for n in NAMES}
    assert got["variants"] == {n: "canary" if n in chosen else "stable" for n in NAMES}
    assert got["metrics"] == [metric("canary", len(chosen)), metric("stable", len(NAMES) - len(chosen))]
    assert got["leaks"] == NO_LEAKS


def test_bucket_is_crc32_of_the_uid() -> None:
    assert [bucket(u) for u in ("", "uid-p0", "a")] == [0, 7856, 5907]


def plugins_doc(stable: str, canary: str, block: str) -> str:
    return ("apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
            f"- name: live\n  address: {stable}\n- name: v2\n  address: {canary}\n{block}")


def test_the_fraction_changes_live_for_pods_scheduled_after(tmp_path: Path) -> None:
    cfg, plugins = tmp_path / "sched.yaml", tmp_path / "plugins.yaml"
    cfg.write_text(TEXT)
    first, second = [f"a{i}" for i in range(12)], [f"b{i}" for i in range(12)]

    async def main(stable: str, canary: str) -> None:
        plugins.write_text(plugins_doc(stable, canary, "  canary: {plugin: F, of: live, fraction: 0.25}\n"))
        srv = await start_service(lambda registry: load_scheduler_config(cfg, registry),
                                  load_remote_plugins(plugins), "127.0.0.1:0")
        live = LiveConfig(srv, WatchedFiles(str(cfg), str(plugins)), srv.address)
        s = srv.scheduler
        try:
            await s.apply(nodes())
            got = await schedule(s, first)
            assert got == {n: "n3" if n in in_fraction(first, 0.25) else "n0" for n in first}
            bad = plugins_doc(stable, canary, "  canary: {plugin: F, of: live, fraction: 2}\n")
            replace(plugins, bad)
            assert not await live.apply()
            assert live.last_refused is not None
            assert f"{plugins}: plugins[1].canary.fraction: must be a number from 0 to 1, got 2" in \
                live.last_refused["reason"], live.last_refused
            replace(plugins, plugins_doc(stable, canary, "  canary: {plugin: F, of: live, fraction: 0.75}\n"))
            assert await live.apply()
            got = await schedule(s, second)
            assert got == {n: "n3" if n in in_fraction(second, 0.75) else "n0" for n in second}
            # The pods scheduled before the change stay where the earlier fraction put them.
            assert {n: s.pods[f"uid-{n}"].pod.node_name for n in first} == \
                {n: "n3" if n in in_fraction(first, 0.25) else "n0" for n in first}
            want_canary = len(in_fraction(first, 0.25)) + len(in_fraction(second, 0.75))
            assert canary_metrics(s, srv.remote) == [metric("canary", want_canary),
                                                     metric("stable", len(first) + len(second) - want_canary)]
        finally:
            await live.stop()
            await srv.stop(0.5)
            await live.close()

    # The workload is one where each fraction sends a different set of pods to the canary.
    assert in_fraction(first, 0.25) and in_fraction(second, 0.75) != in_fraction(second, 0.25)
    with Hosts(host("n0"), host("n3")) as (stable, canary):
        asyncio.run(asyncio.wait_for(main(stable, canary), 90))


HEAD = "apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n- name: live\n  address: 127.0.0.1:1\n"


@pytest.mark.parametrize(("block", "want"), [
    ("  canary: [F]\n", "plugins[1].canary: expected a mapping, got list"),
    ("  canary: {of: live, fraction: 0.1}\n",
     "plugins[1].canary.plugin: required: the plugin this endpoint serves as a canary"),
    ("  canary: {plugin: F, fraction: 0.1}\n", "plugins[1].canary.of: required: the stable endpoint's name"),
    ("  canary: {plugin: F, of: live}\n",
     "plugins[1].canary.fraction: required (from 0 to 1) unless a selector chooses the pods"),
    ("  canary: {plugin: F, of: live, fraction: -0.1}\n",
     "plugins[1].canary.fraction: must be a number from 0 to 1, got -0.1"),
    ("  canary: {plugin: F, of: live, fraction: true}\n",
     "plugins[1].canary.fraction: must be a number from 0 to 1, got True"),
    ("  canary: {plugin: F, of: live, fraction: 0.1, selector: {matchLabels: {}}}\n",
     "plugins[1].canary.selector.matchLabels: must be a non-empty mapping of label to value"),
    ("  canary: {plugin: F, of: live, fraction: 0.1, selector: {matchExpressions: []}}\n",
     "plugins[1].canary.selector.matchExpressions: unknown field (allowed: matchLabels)\n"
     "plugins.yaml: plugins[1].canary.selector.matchLabels: must be a non-empty mapping of label to value"),
    ("  canary: {plugin: F, of: live, fraction: 0.1, weights: 2}\n",
     "plugins[1].canary.weights: unknown field (allowed: plugin, of, fraction, selector, args, weight)"),
    ("  canary: {plugin: F, of: live, fraction: 0.1, weight: 0}\n",
     "plugins[1].canary.weight: must be a positive integer, got 0"),
    ("  canary: {plugin: F, of: live, fraction: 0.1, weight: 1.5}\n",
     "plugins[1].canary.weight: must be a positive integer, got 1.5"),
    ("  canary: {plugin: F, of: live, fraction: 0.1, args: [zone-c]}\n",
     "plugins[1].canary.args: must be a mapping (the plugin's args), got ['zone-c']"),
    ("  canary: {plugin: F, of: nowhere, fraction: 0.1}\n",
     "plugins[1].canary.of: no other endpoint named 'nowhere' in this document"),
    ("  canary: {plugin: F, of: v2, fraction: 0.1}\n",
     "plugins[1].canary.of: no other endpoint named 'v2' in this document"),
    ("  canary: {plugin: F, of: live, fraction: 0.1}\n  shadow: {}\n",
     "plugins[1].canary: an endpoint is either a shadow or a canary, not both"),
    ("  canary: {plugin: F, of: live, fraction: 0.1}\n- name: v3\n  address: 127.0.0.1:3\n"
     "  canary: {plugin: F, of: live, fraction: 0.2}\n",
     "plugins[2].canary.plugin: plugin 'F' already has a canary (endpoint 'v2')"),
    ("  canary: {plugin: F, of: live, fraction: 0.1}\n- name: v3\n  address: 127.0.0.1:3\n"
     "  canary: {plugin: G, of: v2, fraction: 0.2}\n",
     "plugins[2].canary.of: endpoint 'v2' is a shadow or a canary, not a live one"),
    ("  canary: {plugin: F, of: live, fraction: 0.1}\n- name: v3\n  addresses: [127.0.0.1:4, 127.0.0.1:1]\n"
     "  canary: {plugin: G, of: live, fraction: 0.2}\n",
     "plugins[2].canary: 127.0.0.1:1 is also an address of endpoint 'live': a canary needs plugin hosts of its own"),
])
def test_a_bad_canary_block_is_refused_naming_the_field(block: str, want: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_remote_plugins(HEAD + "- name: v2\n  address: 127.0.0.1:2\n" + block, "plugins.yaml")
    assert str(err.value) == f"plugins.yaml: {want}"


@pytest.mark.parametrize(("canary_spec", "want"), [
    ({"name": "G", "points": ["filter", "score"]},
     "canary endpoint 'v2': endpoint 'v2' does not serve plugin 'F' (its plugins: G)"),
    ({"name": "F", "points": ["filter"]},
     "canary endpoint 'v2': plugin 'F' has points filter, but endpoint 'live' serves it at filter, score "
     "(a canary changes the plugin, not its points)"),
])
def test_a_canary_whose_host_does_not_match_its_stable_endpoint_is_refused(
        canary_spec: dict[str, Any], want: str) -> None:
    async def main(stable: str, canary: str) -> None:
        endpoints = [endpoint("live", stable),
                     dataclasses.replace(endpoint("v2", canary), canary=CanaryConfig("F", "live", 0.5))]
        services = await start_plugin_services()
        try:
            with pytest.raises(RemotePluginsError) as err:
                await build_registry_with_remote(endpoints, services.address, services.services)
        finally:
            await services.stop(0.2)
        assert str(err.value) == want

    with Hosts(host("n0"), host("n3", canary_spec)) as (stable, canary):
        asyncio.run(asyncio.wait_for(main(stable, canary), 60))
