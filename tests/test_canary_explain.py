"""``outrigger explain`` of a pod in a profile with a canary plugin: the variant that schedules the pod
explains it, and the answer says which variant that is and which one ran the pod's last cycle.

Real plugin host processes (``test_remote_fakes``, as in ``test_canary``): the stable F scores node n0
highest, the canary F node n3. A real framework service on loopback, asked by the ``outrigger`` CLI.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from test_canary import TEXT, host, nodes, plugins_doc, schedule
from test_live_config import replace
from test_remote_harness import Hosts

from framework.liveconfig import LiveConfig, WatchedFiles
from framework.profiles import load_scheduler_config
from framework.remote import load_remote_plugins
from framework.service import start_service

CANARY_BLOCK = "  canary: {plugin: F, of: live, selector: {matchLabels: {track: canary}}}\n"
OTHER_BLOCK = "  canary: {plugin: F, of: live, selector: {matchLabels: {track: other}}}\n"
NEW_POD = ("apiVersion: v1\nkind: Pod\nmetadata: {name: q, uid: uid-q, labels: {track: canary}}\n"
           "spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}\n")


async def outrigger(*args: str) -> str:
    """The CLI in its own process (the framework's event loop keeps serving meanwhile)."""
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "framework.cli", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def about(variant: str, last: str = "") -> dict[str, Any]:
    doc = {"variant": variant, "plugin": "F", "canary": "v2", "stable": "live"}
    return {**doc, "lastCycle": last} if last else doc


def test_explain_runs_and_names_the_variant_that_schedules_the_pod(tmp_path: Path) -> None:
    cfg, plugins, pod_file = tmp_path / "sched.yaml", tmp_path / "plugins.yaml", tmp_path / "q.yaml"
    cluster = tmp_path / "cluster.yaml"
    cfg.write_text(TEXT)
    pod_file.write_text(NEW_POD)

    async def main(stable: str, canary: str) -> dict[str, Any]:
        plugins.write_text(plugins_doc(stable, canary, CANARY_BLOCK))
        srv = await start_service(lambda registry: load_scheduler_config(cfg, registry),
                                  load_remote_plugins(plugins), "127.0.0.1:0")
        live = LiveConfig(srv, WatchedFiles(str(cfg), str(plugins)), srv.address)
        got: dict[str, Any] = {}
        try:
            await srv.scheduler.apply(nodes())
            got["placed"] = await schedule(srv.scheduler, ["p0", "p1"], frozenset({"p1"}))

            async def explain(*args: str) -> Any:
                return json.loads(await outrigger("explain", *args, "-o", "json", "--server", srv.address))

            for name in ("p0", "p1"):
                doc = await explain(name)
                got[name] = (doc["selected"], doc["variant"])
            doc = await explain("-f", str(pod_file))
            got["q"] = (doc["selected"], doc["variant"])
            got["table"] = (await outrigger("explain", "p1", "--server", srv.address)).splitlines()[:2]
            # The canary no longer chooses p1: explain follows the configuration now, and still says that
            # p1's last cycle ran the canary.
            replace(plugins, plugins_doc(stable, canary, OTHER_BLOCK))
            assert await live.apply()
            doc = await explain("p1")
            got["p1 after"] = (doc["selected"], doc["variant"])
            got["table after"] = (await outrigger("explain", "p1", "--server", srv.address)).splitlines()[:2]
        finally:
            await live.stop()
            await srv.stop(0.5)
            await live.close()
        # Offline (--cluster): the same choice, from the documents given.
        cluster.write_text("---\n".join(f"apiVersion: v1\nkind: Node\nmetadata: {{name: {n.name}}}\n"
                                        "status: {allocatable: {cpu: '8', memory: 8Gi, pods: '110'}}\n"
                                        for n in nodes()))
        got["offline"] = []
        for block in (CANARY_BLOCK, OTHER_BLOCK):
            plugins.write_text(plugins_doc(stable, canary, block))
            doc = json.loads(await outrigger("explain", "--config", str(cfg), "--plugins", str(plugins),
                                             "--cluster", str(cluster), "-f", str(pod_file), "-o", "json"))
            got["offline"].append((doc["selected"], doc["variant"]))
        return got

    with Hosts(host("n0"), host("n3")) as (stable, canary):
        got = asyncio.run(asyncio.wait_for(main(stable, canary), 120))
    assert got == {
        "placed": {"p0": "n0", "p1": "n3"},
        "p0": ("n0", about("stable", "stable")),
        "p1": ("n3", about("canary", "canary")),
        "q": ("n3", about("canary")),  # not held: no last cycle
        "table": ["pod default/p1: Success -> n3",
                  "variant: canary (F from endpoint v2 in place of live); its last cycle ran canary"],
        "p1 after": ("n0", about("stable", "canary")),
        "table after": ["pod default/p1: Success -> n0",
                        "variant: stable (F from endpoint live; its canary is v2); its last cycle ran canary"],
        "offline": [("n3", about("canary")), ("n0", about("stable"))],
    }
