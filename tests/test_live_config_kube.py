"""Live configuration on the suite's kube-apiserver: ``outrigger serve --kubeconfig`` changes its
configuration twice under load (a weight; a remote plugin host's endpoint added to --plugins and its
plugin enabled) and refuses an invalid change; every pod bound once, no node over-committed, same pid.
The embedded-store and unit tests are in tests/test_live_config.py."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for
from test_live_config import HEAD, replace
from test_remote_harness import HostProcess

from pluginhost.examples.nodelabels import REQUIRE

KUBE_PROFILE = "outrigger-live"
RACK = "live.example.com/rack"


def kube_config(fit_weight: int, labels: bool = False) -> str:
    extra = "    multiPoint:\n      enabled: [{name: NodeLabels}]\n" if labels else ""
    return HEAD + f"""\
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {KUBE_PROFILE}
  plugins:
    score:
      enabled: [{{name: NodeResourcesFit, weight: {fit_weight}}}]
{extra}"""


@pytest.mark.kube
def test_serve_on_a_cluster_changes_its_configuration_twice_under_load(kube_cluster: Any, kube_namespace: str,
                                                                       tmp_path: Path) -> None:
    ns = kube_namespace
    nodes = [f"{ns[:40]}-n{i}" for i in range(6)]
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
        [node_manifest(n, cpu="20", labels={RACK: "r1" if i < 2 else "r2"}) for i, n in enumerate(nodes)]))
    cfg, plugins = tmp_path / "scheduler.yaml", tmp_path / "plugins.yaml"
    cfg.write_text(kube_config(1))
    plugins.write_text("apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins: []\n")

    def create(prefix: str, n: int, **annotations: str) -> list[str]:
        names = [f"{prefix}{i}" for i in range(n)]
        kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(
            [pod_manifest(name, ns, KUBE_PROFILE, cpu="100m", annotations=annotations) for name in names]))
        return names

    with HostProcess("pluginhost.examples.nodelabels:NodeLabels") as host:
        proc = FrameworkProcess(outrigger_kubeconfig(kube_cluster), cfg, plugins)
        proc.argv += ["--http", "127.0.0.1:0", "--secure-port", "0"]
        proc.start()
        try:
            pid = proc.proc.pid if proc.proc else 0
            http = wait_for(lambda: next((m[1] for line in proc.lines if (m := re.search(r"HTTP .* on (\S+)", line))),
                                         None), 30, "the HTTP address")
            names = create("a", 100)
            replace(cfg, kube_config(5))  # while the first hundred are being scheduled
            wait_for(lambda: any(line.endswith("profile outrigger-live: weight of NodeResourcesFit 1 -> 5")
                                 for line in proc.lines), 30, "generation 2")
            names += create("b", 100)
            replace(plugins, "apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
                             f"- name: labels\n  address: {host.address}\n")
            wait_for(lambda: any(line.endswith("endpoints: labels added") for line in proc.lines), 30, "generation 3")
            replace(cfg, kube_config(5, labels=True))
            wait_for(lambda: any("generation 4" in line and "plugin NodeLabels added" in line for line in proc.lines),
                     30, "generation 4")
            # NodeLabels (remote) filters now: these go to the two r1 nodes only.
            labelled = create("c", 100, **{REQUIRE: f"{RACK}=r1"})
            replace(cfg, kube_config(5, labels=True).replace("NodeResourcesFit", "NodeResourcesFits"))
            wait_for(lambda: any("refused configuration change" in line and "NodeResourcesFits" in line
                                 for line in proc.lines), 30, "the refusal")

            def all_bound() -> dict[str, Any] | None:
                pods = {p["metadata"]["name"]: p for p in get_json(kube_cluster, "pods", "-n", ns)["items"]}
                ok = len(pods) == 300 and all(p["spec"].get("nodeName") for p in pods.values())
                return pods if ok else None

            try:
                pods = wait_for(all_bound, 180, "300 pods bound")
            except AssertionError:
                left = [p["metadata"]["name"] for p in get_json(kube_cluster, "pods", "-n", ns)["items"]
                        if not p["spec"].get("nodeName")]
                raise AssertionError(f"{len(left)} pods not bound ({left[:5]}); the framework said:\n"
                                     + "\n".join(proc.lines[-40:])) from None
            assert {pods[n]["spec"]["nodeName"] for n in labelled} <= set(nodes[:2])
            assert set(pods) == set(names + labelled)
            used: dict[str, int] = {}
            for p in pods.values():
                used[p["spec"]["nodeName"]] = used.get(p["spec"]["nodeName"], 0) + 100
            assert max(used.values()) <= 20000 and set(used) <= set(nodes)  # no node over-committed

            def scheduled_events() -> dict[str, int] | None:
                # Events are written after the binding, by the framework's event writer: the last
                # pods' may still be on their way when the pods read bound.
                counts: dict[str, int] = {}
                for ev in get_json(kube_cluster, "events.events.k8s.io", "-n", ns)["items"]:
                    if ev.get("reason") == "Scheduled":
                        name = ev["regarding"]["name"]
                        counts[name] = counts.get(name, 0) + ev.get("deprecatedCount", 1)
                return counts if set(counts) >= set(pods) else None

            assert wait_for(scheduled_events, 30, "a Scheduled event for every pod", 1) == dict.fromkeys(pods, 1)
            with urllib.request.urlopen(f"http://{http}/configz", timeout=10) as resp:
                live = json.loads(resp.read())["liveConfiguration"]
            assert live["generation"] == 4
            assert "NodeResourcesFits" in live["lastRefused"]["reason"]
            assert proc.proc is not None and proc.proc.poll() is None and proc.proc.pid == pid
        finally:
            proc.stop()
