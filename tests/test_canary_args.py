"""A canary of other args or another weight: the canary block's ``args`` and ``weight`` apply to the
variant only, so one plugin version can be tried with other settings on the chosen pods.

Two real plugin host processes serving the same code, docs/examples/mypkg/zones.py's ``PreferZone``
(100 on the nodes of its args' zone): the stable one with the profile's args (zone-b), the canary
with ``args: {zone: zone-c}`` and ``weight: 2``, on the walk-through's three nodes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from test_canary import schedule
from test_remote_harness import ROOT, HostProcess, Hosts

from framework.profiles import load_scheduler_config
from framework.remote import load_remote_plugins
from framework.service import start_service
from pluginhost.manifest import parse_objects
from pluginhost.model import Node

EXAMPLES = ROOT / "docs" / "examples"
PROFILE = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: PrioritySort
      - name: NodeResourcesFit
      - name: PreferZone
        weight: 5
      - name: DefaultBinder
      disabled:
      - name: "*"
"""


def zones_host() -> HostProcess:
    return HostProcess("mypkg.zones:PreferZone", {"PYTHONPATH": str(EXAMPLES)})


async def explain_scores(address: str, name: str) -> dict[str, Any]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "framework.cli", "explain", name, "-o", "json", "--server", address,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    doc = json.loads(out)
    return {"selected": doc["selected"], "variant": doc["variant"]["variant"],
            "PreferZone": {n: v["scores"]["PreferZone"]["weighted"] for n, v in doc["nodes"].items()}}


def test_a_canary_with_other_args_and_weight_schedules_the_chosen_pods_with_them(tmp_path: Path) -> None:
    cfg, plugins = tmp_path / "sched.yaml", tmp_path / "plugins.yaml"
    cfg.write_text(PROFILE)
    cluster = [o for o in parse_objects((EXAMPLES / "live" / "cluster.yaml").read_text(), "cluster.yaml")
               if isinstance(o, Node)]

    async def main(stable: str, canary: str) -> dict[str, Any]:
        plugins.write_text(
            "apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
            f"- name: zones\n  address: {stable}\n- name: zones-c\n  address: {canary}\n"
            "  canary: {plugin: PreferZone, of: zones, selector: {matchLabels: {track: canary}}, "
            "args: {zone: zone-c}, weight: 2}\n")
        srv = await start_service(lambda registry: load_scheduler_config(cfg, registry),
                                  load_remote_plugins(plugins), "127.0.0.1:0")
        try:
            fwk = srv.scheduler.profiles["default-scheduler"]
            got: dict[str, Any] = {"weights": (fwk.score_weights, fwk.canary.variant.score_weights)}
            await srv.scheduler.apply(cluster)
            got["placed"] = await schedule(srv.scheduler, ["p0", "p1"], frozenset({"p1"}))
            got["p0"] = await explain_scores(srv.address, "p0")
            got["p1"] = await explain_scores(srv.address, "p1")
            return got
        finally:
            await srv.stop(0.5)

    with Hosts(zones_host(), zones_host()) as (stable, canary):
        got = asyncio.run(asyncio.wait_for(main(stable, canary), 120))
    assert got == {
        "weights": ({"NodeResourcesFit": 1, "PreferZone": 5}, {"NodeResourcesFit": 1, "PreferZone": 2}),
        "placed": {"p0": "b1", "p1": "c1"},
        "p0": {"selected": "b1", "variant": "stable", "PreferZone": {"a1": 0, "b1": 500, "c1": 0}},
        "p1": {"selected": "c1", "variant": "canary", "PreferZone": {"a1": 0, "b1": 0, "c1": 200}},
    }
