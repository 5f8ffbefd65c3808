"""Plugins live, end to end on the suite's kube-apiserver: while 2000 pods are being scheduled by
``outrigger serve --kubeconfig``, its configuration and its remote plugin change in turn, and one
change is invalid:

1. a remote plugin (pluginhost.examples.noderank, version 1: Filter only, three replicas) added to
   --plugins, then enabled in the profile (two generations);
2. a weight changed; the invalid change here (refused, nothing changes);
3. NodeResourcesFit's scoringStrategy switched (LeastAllocated -> MostAllocated);
4. the plugin's replicas upgraded one by one to version 2, which adds Score (no generation: the
   endpoint takes up the new manifest once every replica agrees);
5. a second version (version 3, another endpoint) put in shadow;
6. that version canaried at 10% of the pods (by uid);
7. the plugin removed from the profile, then its endpoints from --plugins (two generations).

Between the changes a wave of pods drains, then probe pods are created one at a time: each lands in
the top-score set that offline ``outrigger explain`` computes, with the files of the generation
serving, on the same state (the cluster's nodes and bound pods, without the probe); the probes' asks
make each change visible (the top-score set moves). At the end: same pid; every pod bound once (one
Scheduled event) but the few that fit nowhere, which carry a FailedScheduling event with the reason;
no node over-committed; /configz's generation counts the applied changes.
"""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import test_remote_harness
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for
from test_live_config import HEAD, replace
from test_remote_harness import HostProcess

from framework.canary import BUCKETS, bucket
from framework.cli import main as cli_main
from pluginhost.examples.noderank import MIN_RANK, RANK

PROFILE = "outrigger-sequence"
ZONE = "topology.kubernetes.io/zone"
NODES = 24  # n00-n05 in zone a (a PreferNoSchedule taint), the rest in zone b; rank = 4 * index
CPUS = ("4", "8", "16")  # by index modulo 3: the strategy switch moves a probe between sizes
WAVE = 250  # eight waves: 2000 pods
V1, V2, V3 = (f"pluginhost.examples.noderank:{c}" for c in ("NodeRankV1", "NodeRank", "NodeRankLow"))
EMPTY = "apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins: []\n"


def scheduler_config(affinity: int = 1, taints: int = 5, strategy: str = "LeastAllocated", rank: bool = False,
                     plugin: str = "NodeRank") -> str:
    multi = f"    multiPoint:\n      enabled: [{{name: {plugin}, weight: 10}}]\n" if rank else ""
    return HEAD + f"""\
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {PROFILE}
  plugins:
    score:
      disabled: [{{name: NodeResourcesBalancedAllocation}}, {{name: ImageLocality}}, {{name: PodTopologySpread}},
                 {{name: InterPodAffinity}}]
      enabled: [{{name: NodeAffinity, weight: {affinity}}}, {{name: TaintToleration, weight: {taints}}}]
{multi}  pluginConfig:
  - name: NodeResourcesFit
    args: {{scoringStrategy: {{type: {strategy}, resources: [{{name: cpu, weight: 1}}]}}}}
"""


def remote_plugins(stable: list[str], v3: str | None = None, block: str = "") -> str:
    text = f"apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n- name: rank\n  addresses: {stable}\n"
    if v3 is not None:
        text += f"- name: rank-v3\n  address: {v3}\n{block}"
    return text


SHADOW = "  shadow: {plugins: [NodeRank], points: [Filter, Score], budget: 500ms, queue: 1000}\n"
CANARY = "  canary: {plugin: NodeRank, of: rank, fraction: 0.1}\n"


def cluster_nodes(ns: str) -> list[dict[str, Any]]:
    out = []
    for i in range(NODES):
        node = node_manifest(f"{ns[:40]}-n{i:02d}", cpu=CPUS[i % 3], pods="200",
                             labels={ZONE: "a" if i < 6 else "b", RANK: str(4 * i)})
        if i < 6:
            node["spec"] = {"taints": [{"key": "live.example.com/spare", "effect": "PreferNoSchedule"}]}
        out.append(node)
    return out


class Sequence:
    """The framework under test, its files, its plugin hosts and the probes' checks."""

    def __init__(self, cluster: Any, ns: str, tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.cluster, self.ns, self.tmp, self.capsys = cluster, ns, tmp, capsys
        self.cfg, self.plugins = tmp / "scheduler.yaml", tmp / "plugins.yaml"
        self.files = {"config": scheduler_config(), "plugins": EMPTY}  # the generation serving
        self.cfg.write_text(self.files["config"])
        self.plugins.write_text(self.files["plugins"])
        self.proc = FrameworkProcess(outrigger_kubeconfig(cluster), self.cfg, self.plugins)
        self.proc.argv += ["--http", "127.0.0.1:0", "--secure-port", "0"]
        self.hosts: list[HostProcess] = []
        self.names: list[str] = []  # every pod created, in order
        self.waves = 0
        self.http = ""
        self.generation = 1

    # ---- the framework and its files ------------------------------------------------------------

    def start(self) -> None:
        self.proc.start()
        self.http = wait_for(lambda: next((m[1] for line in self.proc.lines
                                           if (m := re.search(r"HTTP .* on (\S+)", line))), None), 30, "HTTP")

    def change(self, which: str, text: str, what: str) -> None:
        """Rewrite a file (renamed over) and wait for the next generation, whose summary says ``what``."""
        replace(self.cfg if which == "config" else self.plugins, text)
        self.generation += 1
        line = self.line(f"applied configuration generation {self.generation} ", f"generation {self.generation}")
        assert what in line, line
        self.files[which] = text

    def line(self, needle: str, what: str, timeout: float = 60) -> str:
        return str(wait_for(lambda: next((x for x in self.proc.lines if needle in x), None), timeout, what))

    def get(self, path: str) -> str:
        with urllib.request.urlopen(f"http://{self.http}{path}", timeout=10) as resp:
            body: bytes = resp.read()
        return body.decode()

    def metric(self, name: str, **labels: str) -> int:
        want = [f'{k}="{v}"' for k, v in labels.items()]
        total = 0.0
        for line in self.get("/metrics").splitlines():
            if line.startswith(name + "{") and all(w in line for w in want):
                total += float(line.rsplit(" ", 1)[1])
        return int(total)

    # ---- pods -----------------------------------------------------------------------------------

    def wave(self, n: int = WAVE, cpu: str = "10m") -> list[str]:
        names = [f"w{self.waves}-{i}" for i in range(n)]
        self.waves += 1
        self.apply([pod_manifest(name, self.ns, PROFILE, cpu=cpu) for name in names])
        return names

    def apply(self, pods: list[dict[str, Any]]) -> None:
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(pods))
        self.names += [p["metadata"]["name"] for p in pods]

    def drain(self, timeout: float = 150) -> None:
        """Wait (bounded) until every pod created is bound but those meant to fit nowhere."""
        def pending() -> list[str]:
            out = self.cluster.kubectl("get", "pods", "-n", self.ns, "--field-selector", "spec.nodeName=",
                                       "-o", "name").stdout.split()
            return [p for p in out if not p.startswith("pod/nofit-")]
        try:
            wait_for(lambda: not pending(), timeout, "the wave to drain", interval=0.5)
        except AssertionError:
            raise AssertionError(f"{len(pending())} pods pending; the framework said:\n"
                                 + "\n".join(self.proc.lines[-30:])) from None

    def probe(self, name: str, annotations: dict[str, str] | None = None, **spec: Any) -> Any:
        """Create one pod (the cluster otherwise at rest), wait for its node; the pod, with the state it
        was placed on (the nodes and bound pods without it) written beside it for explain."""
        manifest = pod_manifest(name, self.ns, PROFILE, cpu="1", annotations=annotations, **spec)
        self.apply([manifest])
        pod = self.bound(name)
        self.dump(name, pod)
        return pod

    def bound(self, name: str) -> Any:
        return wait_for(lambda: next((p for p in [get_json(self.cluster, "pod", "-n", self.ns, name)]
                                      if p["spec"].get("nodeName")), None), 60, f"probe {name} bound", interval=0.3)

    def dump(self, name: str, pod: dict[str, Any]) -> None:
        manifest = pod_manifest(name, self.ns, PROFILE, cpu="1", annotations=pod["metadata"].get("annotations"),
                                **{k: v for k, v in pod["spec"].items() if k == "affinity"})
        nodes = get_json(self.cluster, "nodes")["items"]
        bound = [p for p in get_json(self.cluster, "pods", "-A", "--field-selector", "spec.nodeName!=")["items"]
                 if p["metadata"]["uid"] != pod["metadata"]["uid"]]
        (self.tmp / f"{name}.cluster.json").write_text(json.dumps({"kind": "List", "items": nodes + bound}))
        manifest["metadata"]["uid"] = pod["metadata"]["uid"]
        (self.tmp / f"{name}.pod.json").write_text(json.dumps(manifest))

    def top(self, probe: str, config: str | None = None, plugins: str | None = None) -> set[str]:
        """The top-score nodes offline ``outrigger explain`` finds for ``probe`` on its state, with the
        given files (default: the generation serving)."""
        cfg, plg = self.tmp / f"{probe}.config.yaml", self.tmp / f"{probe}.plugins.yaml"
        cfg.write_text(config if config is not None else self.files["config"])
        plg.write_text(plugins if plugins is not None else self.files["plugins"])
        self.capsys.readouterr()
        code = cli_main(["explain", "--cluster", str(self.tmp / f"{probe}.cluster.json"), "--config", str(cfg),
                         "--plugins", str(plg), "-f", str(self.tmp / f"{probe}.pod.json"), "-o", "json"])
        out = self.capsys.readouterr()
        assert code == 0, out.err
        nodes = json.loads(out.out)["nodes"]
        totals = {n: v["total"] for n, v in nodes.items() if v["total"] is not None}
        best = max(totals.values())
        return {n for n, t in totals.items() if t == best}

    def follows(self, name: str, annotations: dict[str, str] | None = None, **spec: Any) -> tuple[str, set[str]]:
        """A probe placed by the generation serving: its node and the top-score set it is in."""
        node = self.probe(name, annotations, **spec)["spec"]["nodeName"]
        top = self.top(name)
        assert node in top, (name, node, top)
        return node, top

    def stop(self) -> None:
        self.proc.stop()
        for host in self.hosts:
            host.stop()


def node(ns: str, i: int) -> str:
    return f"{ns[:40]}-n{i:02d}"


def rank(name: str) -> int:
    return 4 * int(name[-2:])


PREFER_ZONE_A = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 100, "preference": {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}}]}}


def add_plugin(s: Sequence) -> None:
    """Change 1: the plugin's endpoint (three replicas of version 1), then the plugin in the profile."""
    s.wave()
    s.hosts = [HostProcess(V1) for _ in range(3)]
    for host in s.hosts:
        host.spawn()
    addresses = [host.ready() for host in s.hosts]
    s.change("plugins", remote_plugins(addresses), "endpoints: rank added")
    s.change("config", scheduler_config(rank=True), "plugin NodeRank added")
    s.drain()
    _, top = s.follows("p1", {MIN_RANK: "60"})  # NodeRank filters: only nodes ranked 60 or more
    assert min(rank(n) for n in top) >= 60, top


def weight_and_refusal(s: Sequence) -> None:
    """Change 2: NodeAffinity outweighs TaintToleration; then an invalid change, refused."""
    s.wave()
    s.change("config", scheduler_config(affinity=5, taints=1, rank=True),
             "weight of NodeAffinity 1 -> 5, weight of TaintToleration 5 -> 1")
    replace(s.cfg, scheduler_config(affinity=5, taints=1, rank=True, plugin="NodeRanks"))
    refusal = s.line("refused configuration change", "the refusal")
    assert "NodeRanks" in refusal and f"generation {s.generation} keeps scheduling" in refusal, refusal
    live = json.loads(s.get("/configz"))["liveConfiguration"]
    assert live["generation"] == s.generation and "NodeRanks" in live["lastRefused"]["reason"], live
    s.drain()
    # After the refusal, placements follow the last good generation: the tainted zone a wins now.
    _, top = s.follows("p2", affinity=PREFER_ZONE_A)
    assert all(rank(n) < 24 for n in top), top
    assert all(rank(n) >= 24 for n in s.top("p2", config=scheduler_config(rank=True))), "the weights before"


def strategy(s: Sequence) -> None:
    """Change 3: NodeResourcesFit scores MostAllocated: a 1-cpu probe goes to the most allocated nodes."""
    s.wave()
    s.change("config", scheduler_config(5, 1, "MostAllocated", rank=True), "args of NodeResourcesFit changed")
    s.drain()
    _, top = s.follows("p3")
    before = s.top("p3", config=scheduler_config(5, 1, rank=True))
    assert top.isdisjoint(before), (top, before)  # the most allocated nodes, where it was the least


def upgrade(s: Sequence) -> None:
    """Change 4: the replicas replaced one by one by version 2 (it adds Score) on their ports."""
    s.wave()
    for i, host in enumerate(list(s.hosts)):
        host.stop()
        s.hosts[i] = HostProcess(V2, listen=host.address)
        s.hosts[i].start()
    line = s.line("endpoint 'rank' takes up its hosts' new manifest", "the upgrade taken up", 90)
    assert line.endswith("NodeRank: +SCORE"), line
    s.drain()
    _, top = s.follows("p4")  # the rank decides now (weight 10): the highest-ranked node with room
    assert min(rank(n) for n in top) >= 80, top


def shadow_counts(s: Sequence) -> dict[str, int]:
    labels = {"endpoint": "rank-v3", "plugin": "NodeRank"}
    counts = {"observed": s.metric("outrigger_shadow_observed_cycles_total", **labels)}
    for result in ("evaluated", "dropped", "error", "timeout"):
        counts[result] = s.metric("outrigger_shadow_cycles_total", result=result, **labels)
    for kind in ("rejected", "placed", "score"):
        counts[kind] = s.metric("outrigger_shadow_disagreements_total", kind=kind, **labels)
    return counts


def shadow(s: Sequence) -> None:
    """Change 5: version 3 (it prefers low ranks) in shadow: counted, never placing."""
    s.wave()
    v3 = HostProcess(V3)
    s.hosts.append(v3)
    v3.start()
    s.change("plugins", remote_plugins([h.address for h in s.hosts[:3]], v3.address, SHADOW),
             "endpoints: rank-v3 added")
    s.drain()
    _, top = s.follows("p5")
    assert min(rank(n) for n in top) >= 80, top  # the live version 2 still decides

    def caught_up() -> dict[str, int] | None:
        c = shadow_counts(s)
        return c if c["observed"] and c["observed"] == sum(c[r] for r in ("evaluated", "dropped", "error",
                                                                            "timeout")) else None
    counts = wait_for(caught_up, 60, "the shadow to evaluate what it observed")
    # Version 3's top-score nodes are the lowest-ranked: every evaluated cycle is a score disagreement.
    assert counts["evaluated"] >= 1 and counts["score"] == counts["evaluated"], counts
    assert counts["rejected"] == counts["placed"] == 0, counts


def canary_counts(s: Sequence) -> dict[str, int]:
    return {v: s.metric("outrigger_canary_pods_total", plugin="NodeRank", variant=v, result="scheduled")
            for v in ("stable", "canary")}


def canary(s: Sequence) -> None:
    """Change 6: version 3 canaried at 10% of the pods by uid; the counts are exactly the rule's."""
    s.wave()
    stable = [h.address for h in s.hosts[:3]]
    s.change("plugins", remote_plugins(stable, s.hosts[3].address, CANARY), "rank-v3")
    s.drain()
    before = canary_counts(s)
    names = set(s.wave())
    s.drain()
    after = canary_counts(s)
    uids = [p["metadata"]["uid"] for p in get_json(s.cluster, "pods", "-n", s.ns)["items"]
            if p["metadata"]["name"] in names]
    chosen = sum(bucket(uid) < 0.1 * BUCKETS for uid in uids)
    assert len(uids) == WAVE and 0 < chosen < WAVE // 4, chosen
    assert (after["canary"] - before["canary"], after["stable"] - before["stable"]) == (chosen, WAVE - chosen)
    # One probe of each variant: sixty pods created held by a scheduling gate, so their uids are known
    # before they are scheduled; one canary and one stable are released in turn, the others deleted.
    held = [f"p6-{i}" for i in range(60)]
    s.apply([pod_manifest(n, s.ns, PROFILE, cpu="1", schedulingGates=[{"name": "example.com/hold"}]) for n in held])
    uids = {p["metadata"]["name"]: p["metadata"]["uid"] for p in get_json(s.cluster, "pods", "-n", s.ns)["items"]
            if p["metadata"]["name"] in held}
    picked = {True: "", False: ""}
    for name in held:
        picked[bucket(uids[name]) < 0.1 * BUCKETS] = picked[bucket(uids[name]) < 0.1 * BUCKETS] or name
    assert all(picked.values()), picked
    s.cluster.kubectl("delete", "pod", "-n", s.ns, "--wait=false", *(n for n in held if n not in picked.values()))
    s.names = [n for n in s.names if n not in held or n in picked.values()]
    for is_canary, name in picked.items():
        s.cluster.kubectl("patch", "pod", "-n", s.ns, name, "--type=json",
                          "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')
        pod = s.bound(name)
        s.dump(name, pod)
        # The canary variant is the profile with version 3 serving NodeRank.
        top = s.top(name, plugins=remote_plugins([s.hosts[3].address]) if is_canary else None)
        assert pod["spec"]["nodeName"] in top, (is_canary, pod["spec"]["nodeName"], top)
        # (the highest ranks are full by now: 200 pods a node)
        assert max(rank(n) for n in top) <= 20 if is_canary else min(rank(n) for n in top) >= 60, (is_canary, top)


def remove(s: Sequence) -> None:
    """Change 7: the plugin out of the profile, then its endpoints out of --plugins."""
    s.wave()
    s.change("config", scheduler_config(5, 1, "MostAllocated"), "plugin NodeRank removed")
    s.change("plugins", EMPTY, "removed")
    s.drain()
    # No node is ranked 100: this pod fits only because NodeRank is gone.
    s.follows("p7", {MIN_RANK: "100"})


def final_checks(s: Sequence, nofit: list[str]) -> None:
    """Every pod bound once (or, for those that fit nowhere, reported with the reason); no node
    over-committed; the generations counted; the same process throughout."""
    pods = {p["metadata"]["name"]: p for p in get_json(s.cluster, "pods", "-n", s.ns)["items"]}
    assert set(pods) == set(s.names) and len(s.names) >= 2000
    bound = {n for n, p in pods.items() if p["spec"].get("nodeName")}
    assert bound == set(s.names) - set(nofit)
    nodes = {n["metadata"]["name"]: n for n in get_json(s.cluster, "nodes")["items"]}
    cpu: dict[str, int] = {}
    count: dict[str, int] = {}
    for name in bound:
        host = pods[name]["spec"]["nodeName"]
        request = pods[name]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        cpu[host] = cpu.get(host, 0) + (int(request[:-1]) if request.endswith("m") else 1000 * int(request))
        count[host] = count.get(host, 0) + 1
    assert set(cpu) <= {node(s.ns, i) for i in range(NODES)}
    for host, used in cpu.items():
        allocatable = nodes[host]["status"]["allocatable"]
        assert used <= 1000 * int(allocatable["cpu"]) and count[host] <= int(allocatable["pods"]), host

    def events() -> tuple[dict[str, int], dict[str, str]] | None:
        scheduled: dict[str, int] = {}
        failed: dict[str, str] = {}
        for ev in get_json(s.cluster, "events.events.k8s.io", "-n", s.ns)["items"]:
            who = ev["regarding"]["name"]
            if ev.get("reason") == "Scheduled":
                scheduled[who] = scheduled.get(who, 0) + ev.get("deprecatedCount", 1)
            elif ev.get("reason") == "FailedScheduling":
                failed[who] = ev.get("note", "")
        return (scheduled, failed) if set(scheduled) == bound and set(nofit) <= set(failed) else None

    scheduled, failed = wait_for(events, 60, "the pods' events", interval=1)
    assert scheduled == dict.fromkeys(bound, 1)  # every pod bound once
    for name in nofit:
        assert f"{NODES} Insufficient cpu" in failed[name], failed[name]
    assert json.loads(s.get("/configz"))["liveConfiguration"]["generation"] == s.generation == 9
    assert s.proc.proc is not None and s.proc.proc.poll() is None


@pytest.mark.kube
def test_two_thousand_pods_while_plugins_change_live(kube_cluster: Any, kube_namespace: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Eight plugin host start-ups while the machine is busy scheduling: allow each more than the usual.
    monkeypatch.setattr(test_remote_harness, "STARTUP_SECONDS", 90.0)
    ns = kube_namespace
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(cluster_nodes(ns)))
    s = Sequence(kube_cluster, ns, tmp_path, capsys)
    try:
        s.start()
        pid = s.proc.proc.pid if s.proc.proc else 0
        for step in (add_plugin, weight_and_refusal, strategy, upgrade, shadow, canary, remove):
            step(s)
        nofit = [f"nofit-{i}" for i in range(3)]
        s.apply([pod_manifest(name, ns, PROFILE, cpu="100") for name in nofit])
        s.drain()
        final_checks(s, nofit)
        assert s.proc.proc is not None and s.proc.proc.pid == pid
    finally:
        s.stop()
