"""The live-cluster fault harness: pods through two Outrigger replicas with leader election and two
replicas of a remote plugin, on a real kube-apiserver and etcd, while the harness kills the leader,
restarts the API server, kills and stalls plugin replicas; then every invariant is checked through the
API and a summary printed.

``tests/test_kube_fault_harness.py`` runs a short version in ``make test`` (a few hundred pods, a
4 s lease). The full run, ``make faults-cluster``::

    .venv/bin/python tests/kube_fault_harness.py --pods 2000

(defaults: 2000 pods of 1 CPU on 20 nodes of 95 CPUs, so 1900 fit and 100 cannot; kube-scheduler's
lease of 15 s / 10 s / 2 s; a few minutes on two cores). Everything runs on 127.0.0.1 in a fresh
cluster of its own (``--workdir``), and is bounded: each fault is done once, in order, when enough pods
are bound; the run gives up after ``--timeout`` seconds.

The faults, in order, each when its share of the pods that fit is bound:

1. ``kill-leader`` (15 %): SIGKILL the replica holding the Lease. Its supervisor (what a Deployment's
   kubelet is) starts it again at once; it comes back as a standby. The other replica takes over once
   the lease expires by its clock: *time to take over* is from the kill to the Lease naming it, read
   through the API, and *first binding* to the next pod bound.
2. ``restart-apiserver`` (40 %): SIGKILL the API server, and a second later start it again on the
   same etcd; the replicas must resume by themselves (leader renewals, informers, bindings whose answer
   was lost): measured from the start to the next pod bound.
3. ``kill-plugin`` (60 %): SIGKILL one plugin replica, start it again a second later on its port.
4. ``stall-plugin`` (75 %): SIGSTOP the other plugin replica for 3 s (past the plugin deadline), then
   SIGCONT.

What is checked through the API once every pod is bound or pending with a reason (or at the timeout):
pods bound; pending with ``PodScheduled=False`` and a reason; *lost* (neither, or gone); *bound
twice* (more than one ``Scheduled`` event for a pod, or one naming another node than the pod's); nodes
*over-committed* (their pods' CPU requests above allocatable); leader changes (``leaseTransitions``, and
the holders seen); the replicas' exits (1 on a lost lease, -9 when killed).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import ssl
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

import yaml
from kube_framework import DEPLOY, FrameworkProcess, node_manifest, pod_manifest
from test_remote_harness import HostProcess

from tools.localcluster import LocalCluster, free_ports

PROFILE = "outrigger-scheduler"
LEASE = ("outrigger", "outrigger")  # deploy/kubernetes/rbac.yaml grants this one
FAULTS = (("kill-leader", 0.15), ("restart-apiserver", 0.40), ("kill-plugin", 0.60), ("stall-plugin", 0.75))
STALL_SECONDS = 3.0
PLUGIN_DEADLINE = "2s"


@dataclass
class Options:
    pods: int = 2000
    nodes: int = 20
    node_cpu: int = 95
    lease_duration: int = 15
    renew_deadline: int = 10
    retry_period: int = 2
    timeout: float = 600.0
    faults: tuple[str, ...] = tuple(name for name, _ in FAULTS)


@dataclass
class Report:
    pods: int = 0
    fit: int = 0
    bound: int = 0
    pending_with_reason: int = 0
    lost: int = 0
    bound_twice: int = 0
    bound_without_event: int = 0
    overcommitted_nodes: int = 0
    leader_changes: int = 0
    leaders_seen: list[str] = field(default_factory=list)
    takeover_seconds: list[float] = field(default_factory=list)
    first_binding_after_takeover_seconds: list[float] = field(default_factory=list)
    resumed_after_apiserver_restart_seconds: list[float] = field(default_factory=list)
    faults_done: list[str] = field(default_factory=list)
    replica_exits: list[int] = field(default_factory=list)
    tracebacks: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return (self.lost == 0 and self.bound_twice == 0 and self.overcommitted_nodes == 0 and self.tracebacks == 0
                and self.bound + self.pending_with_reason == self.pods and not self.problems)


# ---- the API, as the admin -----------------------------------------------------------------------------


class Admin:
    """Plain requests to the cluster as its admin (cheap enough to poll)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.server = cluster.server
        self.token = cluster.admin_token
        self.context = ssl.create_default_context(cafile=str(cluster.ca_file))

    def get(self, path: str) -> Any:
        request = urllib.request.Request(self.server + path, headers={"Authorization": f"Bearer {self.token}"})
        with urllib.request.urlopen(request, context=self.context, timeout=30) as resp:
            return json.loads(resp.read())

    def try_get(self, path: str) -> Any:
        try:
            return self.get(path)
        except (urllib.error.URLError, OSError, ValueError):
            return None  # the API server is restarting

    def delete(self, path: str) -> None:
        request = urllib.request.Request(self.server + path, method="DELETE",
                                         headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=60) as resp:
                resp.read()
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise


# ---- processes ------------------------------------------------------------------------------------------


class Supervised:
    """An Outrigger replica under a supervisor that starts it again whenever it exits (what the kubelet
    does for a Deployment's pod), until :meth:`stop`."""

    def __init__(self, name: str, make: Callable[[], FrameworkProcess], say: Callable[[str], None]) -> None:
        self.name, self.make, self.say = name, make, say
        self.proc = make()
        self.generations: list[FrameworkProcess] = []
        self.exits: list[int] = []
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._supervise, name=f"supervise-{name}", daemon=True)

    def start(self) -> None:
        self.proc.start(wait_synced=False)
        self.generations.append(self.proc)
        self._thread.start()

    def _supervise(self) -> None:
        while not self._stopping.is_set():
            proc = self.proc.proc
            if proc is not None and proc.poll() is not None:
                self.exits.append(proc.returncode)
                if self._stopping.is_set():
                    return
                self.say(f"{self.name} exited {proc.returncode}; starting it again")
                time.sleep(0.5)
                self.proc = self.make()
                self.proc.start(wait_synced=False)
                self.generations.append(self.proc)
            time.sleep(0.05)

    def identity(self) -> str:
        for line in list(self.proc.lines):
            if line.startswith("outrigger framework standing by as "):
                return line.split(" as ", 1)[1].split(":", 1)[0]
        return ""

    def identities(self) -> set[str]:
        out = set()
        for gen in self.generations:
            for line in list(gen.lines):
                if line.startswith("outrigger framework standing by as "):
                    out.add(line.split(" as ", 1)[1].split(":", 1)[0])
        return out

    def kill(self) -> None:
        self.proc.kill()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(5)
        self.proc.stop()

    def output(self) -> str:
        return "\n".join(gen.output() for gen in self.generations)


class Plugins:
    """Two replicas of the Chaos plugin (tests/fault_plugins.py) on fixed ports, so a restarted one is
    found where it was."""

    def __init__(self, count: int = 2) -> None:
        self.addresses = [f"127.0.0.1:{p}" for p in free_ports(count)]
        self.hosts = [HostProcess("fault_plugins:Chaos", listen=a) for a in self.addresses]

    def start(self) -> None:
        for host in self.hosts:
            host.start()

    def kill_and_restart(self, i: int) -> None:
        self.hosts[i].kill()
        time.sleep(1.0)
        self.hosts[i] = HostProcess("fault_plugins:Chaos", listen=self.addresses[i])
        self.hosts[i].start()

    def stall(self, i: int, seconds: float) -> None:
        proc = self.hosts[i].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        for host in self.hosts:
            proc = host.proc
            if proc is not None and proc.poll() is None:
                os.kill(proc.pid, signal.SIGCONT)
            host.kill()


# ---- the run --------------------------------------------------------------------------------------------


def scheduler_config(opts: Options) -> str:
    return f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 2000, burst: 2000}}
leaderElection:
  leaderElect: true
  resourceNamespace: {LEASE[0]}
  resourceName: {LEASE[1]}
  leaseDuration: {opts.lease_duration}s
  renewDeadline: {opts.renew_deadline}s
  retryPeriod: {opts.retry_period}s
profiles:
- schedulerName: {PROFILE}
  plugins:
    multiPoint:
      enabled:
      - name: Chaos
  pluginConfig:
  - name: Chaos
    args: {{stall: 0, garbage: 0}}
"""


def remote_plugins(addresses: list[str]) -> str:
    return yaml.safe_dump({"apiVersion": "outrigger.io/v1alpha1", "kind": "RemotePlugins", "plugins": [
        {"name": "chaos", "addresses": addresses, "connectTimeout": "10s",
         "deadlines": {"default": PLUGIN_DEADLINE}}]})


class Watcher:
    """Polls the Lease (every 0.1 s) and the bound count (every 0.5 s) through the API."""

    def __init__(self, admin: Admin, namespace: str) -> None:
        self.admin, self.namespace = admin, namespace
        self.holders: list[tuple[float, str]] = []  # (monotonic time, holder) at each change
        self.bound: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._leases, daemon=True),
                         threading.Thread(target=self._bindings, daemon=True)]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(5)

    def _leases(self) -> None:
        while not self._stop.is_set():
            lease = self.admin.try_get(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE[0]}/leases/{LEASE[1]}")
            holder = (lease or {}).get("spec", {}).get("holderIdentity") if lease else None
            if holder and (not self.holders or self.holders[-1][1] != holder):
                self.holders.append((time.monotonic(), holder))
            self._stop.wait(0.1)

    def _bindings(self) -> None:
        while not self._stop.is_set():
            pods = self.admin.try_get(f"/api/v1/namespaces/{self.namespace}/pods?fieldSelector=spec.nodeName%21%3D")
            if pods is not None:
                self.bound.append((time.monotonic(), len(pods["items"])))
            self._stop.wait(0.5)

    def bound_now(self) -> int:
        return self.bound[-1][1] if self.bound else 0

    def holder_after(self, t: float, not_: str) -> tuple[float, str] | None:
        for at, holder in list(self.holders):
            if at >= t and holder != not_:
                return at, holder
        return None

    def first_binding_after(self, t: float) -> float | None:
        before = max((n for at, n in self.bound if at <= t), default=0)
        for at, n in list(self.bound):
            if at > t and n > before:
                return at
        return None


def wait(check: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(interval)
    return None


def run(cluster: LocalCluster, opts: Options, workdir: Path, say: Callable[[str], None] = lambda _: None) -> Report:
    """One harness run against ``cluster`` (see the module docstring); ``workdir`` holds its files."""
    started = time.monotonic()
    report = Report(pods=opts.pods, fit=min(opts.pods, opts.nodes * opts.node_cpu))
    admin = Admin(cluster)
    namespace = f"faults-{int(time.time())}"
    nodes = [f"{namespace}-{i}" for i in range(opts.nodes)]
    cluster.kubectl("apply", "-f", str(DEPLOY / "namespace.yaml"), "-f", str(DEPLOY / "rbac.yaml"))
    kubeconfig = cluster.service_account_kubeconfig("outrigger", "outrigger")
    cluster.kubectl("create", "namespace", namespace)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([node_manifest(n, str(opts.node_cpu), "500")
                                                                  for n in nodes]))
    admin.delete(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE[0]}/leases/{LEASE[1]}")  # a fresh election
    plugins = Plugins()
    plugins.start()
    config = workdir / "scheduler.yaml"
    config.write_text(scheduler_config(opts))
    endpoints = workdir / "remote-plugins.yaml"
    endpoints.write_text(remote_plugins(plugins.addresses))
    replicas = [Supervised(name, lambda: FrameworkProcess(kubeconfig, config, endpoints), say)
                for name in ("replica-a", "replica-b")]
    watcher = Watcher(admin, namespace)
    creators: list[threading.Thread] = []
    try:
        for r in replicas:
            r.start()
        watcher.start()
        if not wait(lambda: watcher.holders, 60):
            report.problems.append("no replica took the lease within 60 s")
            return report
        first_holder = watcher.holders[0][1]
        say(f"leader: {first_holder}")
        batches = [[pod_manifest(f"p{i}", namespace, PROFILE) for i in range(b, opts.pods, 4)] for b in range(4)]
        for batch in batches:  # four users creating pods at once
            t = threading.Thread(target=cluster.kubectl, args=("create", "-f", "-"),
                                 kwargs={"input": yaml.safe_dump_all(batch), "timeout": opts.timeout}, daemon=True)
            t.start()
            creators.append(t)
        limit = started + opts.timeout
        for name, share in FAULTS:
            if name not in opts.faults:
                continue
            target = int(report.fit * share)
            if not wait(lambda target=target: watcher.bound_now() >= target,  # type: ignore[misc]
                        max(limit - time.monotonic(), 0), 0.2):
                report.problems.append(f"{name}: {target} pods were not bound in time")
                break
            if name == "restart-apiserver":  # the pods' creators would fail with it: let them finish first
                for t in creators:
                    t.join(max(limit - time.monotonic(), 1))
            say(f"{name} at {watcher.bound_now()} pods bound")
            do_fault(name, cluster, replicas, plugins, watcher, report, say)
            report.faults_done.append(name)
        for t in creators:
            t.join(max(limit - time.monotonic(), 1))
        if not wait(lambda: settled(admin, namespace, opts.pods), max(limit - time.monotonic(), 1), 2.0):
            report.problems.append(f"not every pod bound or pending with a reason after {opts.timeout:.0f} s")
        time.sleep(3)  # the last events on their way
        check(admin, namespace, opts, report)
        lease = admin.get(f"/apis/coordination.k8s.io/v1/namespaces/{LEASE[0]}/leases/{LEASE[1]}")
        report.leader_changes = int(lease["spec"].get("leaseTransitions") or 0)
        report.leaders_seen = [h for _, h in watcher.holders]
    finally:
        watcher.stop()
        for t in creators:
            t.join(1)
        for r in replicas:
            r.stop()
        plugins.stop()
        report.replica_exits = [code for r in replicas for code in r.exits]
        report.tracebacks = sum(r.output().count("Traceback") for r in replicas)
        admin.delete(f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0")
        cluster.kubectl("delete", "node", *nodes, check=False, timeout=120)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    report.seconds = round(time.monotonic() - started, 1)
    return report


def do_fault(name: str, cluster: LocalCluster, replicas: list[Supervised], plugins: Plugins, watcher: Watcher,
             report: Report, say: Callable[[str], None]) -> None:
    if name == "kill-leader":
        holder = watcher.holders[-1][1]
        leader = next((r for r in replicas if holder in r.identities()), None)
        if leader is None:
            report.problems.append(f"kill-leader: no replica holds the lease ({holder})")
            return
        killed = time.monotonic()
        leader.kill()
        took = wait(lambda: watcher.holder_after(killed, holder), 120)
        if took is None:
            report.problems.append("kill-leader: no replica took over within 120 s")
            return
        report.takeover_seconds.append(round(took[0] - killed, 1))
        say(f"{took[1]} took over after {took[0] - killed:.1f}s")
        first = wait(lambda: watcher.first_binding_after(took[0]), 60, 0.2)
        if first is not None:
            report.first_binding_after_takeover_seconds.append(round(first - killed, 1))
    elif name == "restart-apiserver":
        cluster.stop_apiserver(graceful=False)
        time.sleep(1.0)
        back = time.monotonic()  # bindings can resume as soon as it answers, before it reports ready
        cluster.start_apiserver()
        first = wait(lambda: watcher.first_binding_after(back), 60, 0.2)
        if first is None:
            report.problems.append("restart-apiserver: no binding within 60 s after the API server was started")
        else:
            report.resumed_after_apiserver_restart_seconds.append(round(first - back, 1))
            say(f"bindings resumed {first - back:.1f}s after the API server was started again")
    elif name == "kill-plugin":
        plugins.kill_and_restart(0)
    elif name == "stall-plugin":
        plugins.stall(1, STALL_SECONDS)


def settled(admin: Admin, namespace: str, count: int) -> bool:
    """Every pod bound, or unschedulable with the fit message (a pod whose attempt failed with an error
    is retried: not settled yet)."""
    pods = admin.try_get(f"/api/v1/namespaces/{namespace}/pods")
    if pods is None or len(pods["items"]) < count:
        return False
    for pod in pods["items"]:
        conds = {c["type"]: c for c in pod["status"].get("conditions") or ()}
        if not pod["spec"].get("nodeName") and conds.get("PodScheduled", {}).get("reason") != "Unschedulable":
            return False
    return True


def cpu_millis(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def check(admin: Admin, namespace: str, opts: Options, report: Report) -> None:
    pods = admin.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    events = admin.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events?fieldSelector=reason%3DScheduled")
    scheduled = collections.defaultdict(list)
    for e in events["items"]:
        scheduled[e["regarding"]["name"]].append(e["note"])
    per_node: dict[str, int] = collections.Counter()
    names = set()
    for pod in pods:
        name = pod["metadata"]["name"]
        names.add(name)
        node = pod["spec"].get("nodeName")
        conds = {c["type"]: c for c in pod["status"].get("conditions") or ()}
        if node:
            report.bound += 1
            per_node[node] += sum(cpu_millis(c["resources"]["requests"]["cpu"]) for c in pod["spec"]["containers"])
            notes = scheduled.get(name, [])
            if len(notes) > 1 or any(not n.endswith(f" to {node}") for n in notes):
                report.bound_twice += 1
            elif not notes:
                report.bound_without_event += 1  # the leader died between the binding and its event
        elif conds.get("PodScheduled", {}).get("status") == "False" and conds["PodScheduled"].get("reason"):
            report.pending_with_reason += 1
        else:
            report.lost += 1
    report.lost += opts.pods - len(names)
    report.overcommitted_nodes = sum(1 for used in per_node.values() if used > opts.node_cpu * 1000)


def render(report: Report) -> str:
    rows = [
        ("pods", report.pods), ("bound", report.bound), ("pending with a reason", report.pending_with_reason),
        ("lost", report.lost), ("bound twice", report.bound_twice),
        ("bound, Scheduled event lost with its leader", report.bound_without_event),
        ("nodes over-committed", report.overcommitted_nodes), ("leader changes (leaseTransitions)",
                                                               report.leader_changes),
        ("time to take over (s)", ", ".join(map(str, report.takeover_seconds)) or "-"),
        ("kill to first binding of the new leader (s)",
         ", ".join(map(str, report.first_binding_after_takeover_seconds)) or "-"),
        ("API server started again to the next binding (s)",
         ", ".join(map(str, report.resumed_after_apiserver_restart_seconds)) or "-"),
        ("faults", ", ".join(report.faults_done) or "-"), ("replica exits", report.replica_exits),
        ("run (s)", report.seconds),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    lines += [f"problem: {p}" for p in report.problems]
    lines.append("invariants hold" if report.clean else "INVARIANTS BROKEN")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    defaults = Options()
    ap.add_argument("--pods", type=int, default=defaults.pods)
    ap.add_argument("--nodes", type=int, default=defaults.nodes)
    ap.add_argument("--node-cpu", type=int, default=defaults.node_cpu)
    ap.add_argument("--lease-duration", type=int, default=defaults.lease_duration, metavar="S")
    ap.add_argument("--renew-deadline", type=int, default=defaults.renew_deadline, metavar="S")
    ap.add_argument("--retry-period", type=int, default=defaults.retry_period, metavar="S")
    ap.add_argument("--faults", default=",".join(defaults.faults),
                    help=f"comma-separated, from {', '.join(n for n, _ in FAULTS)} (done in that order)")
    ap.add_argument("--timeout", type=float, default=defaults.timeout)
    ap.add_argument("--workdir", type=Path, help="where the cluster and the files live (default: a temporary folder)")
    ap.add_argument("--json", action="store_true", help="print the report as JSON too")
    a = ap.parse_args(argv)
    unknown = set(a.faults.split(",")) - {n for n, _ in FAULTS}
    if unknown:
        ap.error(f"--faults: unknown {', '.join(sorted(unknown))}")
    opts = Options(pods=a.pods, nodes=a.nodes, node_cpu=a.node_cpu, lease_duration=a.lease_duration,
                   renew_deadline=a.renew_deadline, retry_period=a.retry_period, timeout=a.timeout,
                   faults=tuple(f for f in a.faults.split(",") if f))
    os.environ.setdefault("OUTRIGGER_SECURE_PORT", "0")  # two replicas on one machine: no default port
    with tempfile.TemporaryDirectory(prefix="outrigger-faults-") as tmp:
        workdir = a.workdir or Path(tmp)
        with LocalCluster.start(workdir / "cluster") as cluster:
            report = run(cluster, opts, workdir, say=lambda m: print(m, file=sys.stderr, flush=True))
    print(render(report))
    if a.json:
        print(json.dumps(asdict(report), indent=2))
    return 0 if report.clean else 1


if __name__ == "__main__":
    sys.exit(main())
