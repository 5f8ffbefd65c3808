"""``outrigger demo``: the framework service scheduling a generated cluster end to end.

It launches the example plugins (``pluginhost/examples``) as sidecar processes on loopback, starts the
framework service on a loopback port (its own event loop in a background thread) with a second
profile, ``gang-scheduler``, that uses them next to the in-tree plugins, applies a generated cluster
(nodes of mixed sizes across three zones, a tainted GPU pool, a few cordoned nodes), a fake DRA driver's
GPUs on the pool (:mod:`.demodevices`) and a workload, some of whose pods claim GPUs,
through the real gRPC API, follows the Watch stream with a progress bar until every pod is bound or
reported unschedulable, and prints a summary: throughput, latencies, each remote plugin's calls and
latencies, what happened to the gangs, and what was left behind (always nothing).

The workload's ``gang-scheduler`` pods are jobs: two gangs that fit (bound together, after their first
members waited at Permit), one gang short of a member (rejected after its timeout, nothing left
reserved), pods that require or prefer node labels, and pods whose PreBind provisions a volume (one
fails once, is unreserved across the process boundary, and is bound on its retry).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from clients.client import SchedulerClient
from clients.types import EventType
from pluginhost.examples.coscheduling import GROUP_LABEL, MIN_AVAILABLE, TIMEOUT
from pluginhost.examples.nodelabels import PREFER, REQUIRE
from pluginhost.examples.provisioner import FAIL, PROVISION

from ..config import SchedulerConfig, load_config
from ..observe.observability import ObservabilityConfig
from ..plugins import Registry
from ..profiles import default_scheduler_config
from ..remote import EndpointConfig, PointStats, load_remote_plugins
from ..service import Server, start_service
from . import demodevices

__all__ = [
    "REMOTE_PROFILE",
    "Progress",
    "Sidecars",
    "free_address",
    "generate_cluster",
    "generate_jobs",
    "generate_workload",
    "keep_serving_console",
    "run_demo",
]

REMOTE_PROFILE = "gang-scheduler"
EXAMPLE_PLUGINS = (
    ("Coscheduling", "pluginhost.examples.coscheduling:Coscheduling"),
    ("NodeLabels", "pluginhost.examples.nodelabels:NodeLabels"),
    ("Provisioner", "pluginhost.examples.provisioner:Provisioner"),
)
GANG_TIMEOUT = 2.0  # seconds the short gang waits at Permit before it is rejected (its own annotation)
# How long a gang that fits waits at Permit for its last member: scheduler-plugins' default. Its members
# arrive one by one (kubectl creates the pods one at a time among hundreds of others), so a timeout of
# seconds rejects a whole gang whose last member is simply not created yet.
GANG_WAIT = 60.0
GANG_PRIORITY = 1000  # gang members are popped before the bulk workload, so a group gathers quickly

ZONES = ("zone-a", "zone-b", "zone-c")
SIZES = (("4", "16Gi"), ("8", "32Gi"), ("16", "64Gi"))


def generate_cluster(n: int, rng: random.Random) -> list[dict[str, Any]]:
    nodes = []
    for i in range(n):
        zone = ZONES[i % len(ZONES)]
        cpu, mem = SIZES[rng.randrange(len(SIZES))]
        labels = {"kubernetes.io/hostname": f"node-{i:04d}", "topology.kubernetes.io/zone": zone,
                  "topology.kubernetes.io/region": "demo"}
        spec: dict[str, Any] = {}
        allocatable = {"cpu": cpu, "memory": mem, "pods": "110", "ephemeral-storage": "100Gi"}
        if i % 10 == 9:  # a GPU pool, tainted so that only pods asking for it land there
            labels["accelerator"] = "gpu"
            spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
            allocatable["nvidia.com/gpu"] = "4"
        if i % 50 == 17:
            spec["unschedulable"] = True
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i:04d}", "labels": labels},
                      "spec": spec, "status": {"allocatable": allocatable, "capacity": allocatable}})
    return nodes


def _pod(name: str, cpu: str, mem: str, *, priority: int = 0, extra: dict[str, Any] | None = None,
         labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "app", "image": "registry.local/app:1",
                        "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
    }
    spec.update(extra or {})
    meta: dict[str, Any] = {"name": name, "namespace": "demo", "labels": labels or {}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def generate_workload(n: int, rng: random.Random) -> list[dict[str, Any]]:
    pods = []
    for i in range(n):
        kind = rng.random()
        if kind < 0.70:
            pods.append(_pod(f"web-{i:05d}", rng.choice(("100m", "250m", "500m")), rng.choice(("128Mi", "512Mi")),
                             labels={"app": "web"}))
        elif kind < 0.90:
            pods.append(_pod(f"batch-{i:05d}", rng.choice(("1", "2")), "2Gi", priority=rng.choice((0, 100)),
                             labels={"app": "batch"}))
        elif kind < 0.97:
            gpu = _pod(f"train-{i:05d}", "2", "8Gi", priority=1000, labels={"app": "train"}, extra={
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
                "nodeSelector": {"accelerator": "gpu"},
            })
            gpu["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
            pods.append(gpu)
        else:  # asks for more than any node has: reported unschedulable, never lost
            pods.append(_pod(f"huge-{i:05d}", "64", "256Gi", labels={"app": "huge"}))
    return pods


def generate_jobs(rng: random.Random, n_labelled: int = 120, n_provisioned: int = 24) -> list[dict[str, Any]]:
    """The ``gang-scheduler`` workload (see the module docstring)."""
    remote = {"schedulerName": REMOTE_PROFILE}
    pods = []

    def gang(name: str, members: int, min_available: int, cpu: str, timeout: float | None = None) -> None:
        ann = {MIN_AVAILABLE: str(min_available), **({TIMEOUT: f"{timeout:g}"} if timeout is not None else {})}
        for i in range(members):
            pods.append(_pod(f"{name}-{i}", cpu, "1Gi", labels={GROUP_LABEL: name, "app": "gang"},
                             annotations=ann, extra=remote, priority=GANG_PRIORITY))

    gang("gang-train", 8, 8, "1")
    gang("gang-eval", 4, 4, "500m")
    gang("gang-short", 3, 4, "500m", GANG_TIMEOUT)  # one member never comes: rejected after GANG_TIMEOUT
    for i in range(n_labelled):
        zone = ZONES[rng.randrange(len(ZONES))]
        ann = {PREFER: f"topology.kubernetes.io/zone={zone}"}
        if i % 3 == 0:
            ann[REQUIRE] = "topology.kubernetes.io/region=demo"
        pods.append(_pod(f"placed-{i:04d}", "100m", "128Mi", labels={"app": "placed"}, annotations=ann,
                         extra=remote))
    for i in range(n_provisioned):
        ann = {PROVISION: f"scratch-{i}"}
        if i == 0:
            ann[FAIL] = "once"  # PreBind fails once: unreserved across processes, bound on its retry
        pods.append(_pod(f"volume-{i:03d}", "250m", "256Mi", labels={"app": "volume"}, annotations=ann,
                         extra=remote))
    rng.shuffle(pods)
    return pods


class Sidecars:
    """The example plugins, each in its own ``outrigger plugin serve`` process on a loopback port."""

    def __init__(self, plugins: Sequence[tuple[str, str]] = EXAMPLE_PLUGINS, otlp: str = "") -> None:
        self.plugins = list(plugins)
        self.procs: list[subprocess.Popen[str]] = []
        self.addresses: dict[str, str] = {}
        self.otlp = otlp  # where the hosts export their spans (the console's receiver), if anywhere

    def start(self, timeout: float = 30.0) -> list[EndpointConfig]:
        for name, target in self.plugins:
            env = dict(os.environ)
            if self.otlp:
                env.update({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{self.otlp}",
                            "OTEL_SERVICE_NAME": f"{name.lower()}-host", "OTEL_BSP_SCHEDULE_DELAY": "200"})
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "framework.cli", "plugin", "serve", target, "--listen", "127.0.0.1:0"],
                stdout=subprocess.PIPE, text=True, env=env,
            ))  # fmt: skip
        endpoints = []
        for (name, _), proc in zip(self.plugins, self.procs, strict=True):
            line = _readline(proc, timeout)
            m = re.search(r"listening on (\S+)", line)
            if m is None:
                self.stop()
                raise RuntimeError(f"plugin host for {name} did not start (exit code {proc.poll()})")
            self.addresses[name] = m.group(1)
            endpoints.append(EndpointConfig(name.lower(), (m.group(1),), {"default": 5.0}))
        return endpoints

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    box: list[str] = []
    t = threading.Thread(target=lambda: box.append(proc.stdout.readline() if proc.stdout else ""), daemon=True)
    t.start()
    t.join(timeout)
    return box[0] if box else ""


def demo_config_text(provision_root: str = "", head: Sequence[str] = ()) -> str:
    """The demo's KubeSchedulerConfiguration: ``head`` lines (top-level settings), kube-scheduler's default
    profile and the ``gang-scheduler`` profile of the example sidecars."""
    args = {"Coscheduling": {"permitWaitingTimeSeconds": GANG_WAIT},
            "Provisioner": {"delaySeconds": 0.02, **({"root": provision_root} if provision_root else {})}}
    return "\n".join([
        "apiVersion: kubescheduler.config.k8s.io/v1",
        "kind: KubeSchedulerConfiguration",
        *head,
        "profiles:",
        "- schedulerName: default-scheduler",
        f"- schedulerName: {REMOTE_PROFILE}",
        "  plugins:",
        "    multiPoint:",
        "      enabled: [{name: Coscheduling}, {name: NodeLabels}, {name: Provisioner}]",
        "  pluginConfig:",
        *(f"  - {{name: {name}, args: {json.dumps(a)}}}" for name, a in args.items()),
    ]) + "\n"  # fmt: skip


def demo_config(registry: Registry, remote: bool, provision_root: str = "") -> SchedulerConfig:
    """kube-scheduler's default profile, plus (with remote plugins) the ``gang-scheduler`` profile."""
    if not remote:
        return default_scheduler_config(registry)
    return load_config(demo_config_text(provision_root), registry.points(), "<demo>")


class Progress:
    """A one-line progress bar on stderr (periodic plain lines when stderr is not a terminal)."""

    def __init__(self, total: int, label: str) -> None:
        self.total = max(total, 1)
        self.label = label
        self.tty = sys.stderr.isatty()
        self._last_pct = -10

    def update(self, done: int, note: str = "") -> None:
        pct = done * 100 // self.total
        if self.tty:
            bar = "#" * (pct // 4) + "." * (25 - pct // 4)
            sys.stderr.write(f"\r{self.label} [{bar}] {done}/{self.total} {note}   ")
            sys.stderr.flush()
        elif pct >= self._last_pct + 10 or done == self.total:
            self._last_pct = pct
            print(f"{self.label}: {done}/{self.total} {note}", file=sys.stderr)

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()  # type: ignore[no-any-return]
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.new_event_loop()


class _ServerThread:
    """The framework service on its own event loop in a background thread."""

    def __init__(self, endpoints: Sequence[EndpointConfig] = (), console: str = "", otlp: str = "") -> None:
        self.endpoints = list(endpoints)
        self.console, self.otlp = console, otlp
        self.loop = _new_loop()
        self.server: Server | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="outrigger-framework", daemon=True)

    def start(self) -> Server:
        self._thread.start()
        self._ready.wait(60)
        if self._error is not None or self.server is None:
            raise RuntimeError(f"framework service failed to start: {self._error}")
        return self.server

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        remote = bool(self.endpoints)

        async def boot() -> None:
            obs = ObservabilityConfig(http=self.console, console_otlp=self.otlp or None) if self.console else None
            self.server = await start_service(
                lambda registry: demo_config(registry, remote), self.endpoints, "127.0.0.1:0", seed=1,
                observability=obs,
            )
            if self.server.observability is not None and self.server.observability.console is not None:
                self.server.observability.console.touch()  # record the demo's attempts for the page

        try:
            self.loop.run_until_complete(boot())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()

    def call(self, coro: Any) -> Any:
        """Run ``coro`` on the framework's loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def stop(self) -> None:
        if self.server is not None:
            asyncio.run_coroutine_threadsafe(self.server.stop(1.0), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


def keep_serving_console(url: str) -> None:
    """Print the console's address and wait for Ctrl-C (``make demo CONSOLE=1``)."""
    print(f"\nweb console: {url}/ui/  (serving until Ctrl-C)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        print("stopping", flush=True)


def run_demo(nodes: int = 300, pods: int = 3000, seed: int = 7, timeout: float = 300.0,
             plugins: str | None = None, remote: bool = True, console: str = "") -> int:
    """Run the demo; 0 if every pod was bound or reported unschedulable, the gangs behaved, and
    nothing was left behind. ``plugins``: a RemotePlugins document to use instead of launching the
    example plugin hosts; ``remote=False``: in-tree plugins only; ``console``: serve the web console on
    this HTTP address and keep serving it after the summary until Ctrl-C."""
    rng = random.Random(seed)
    sidecars: Sidecars | None = None
    endpoints: list[EndpointConfig] = []
    otlp = free_address() if console else ""
    if remote and plugins:
        endpoints = load_remote_plugins(plugins)
    elif remote:
        sidecars = Sidecars(otlp=otlp)
        endpoints = sidecars.start()
        print("plugin hosts (sidecars): " + ", ".join(f"{n} at {a}" for n, a in sidecars.addresses.items()))
    thread = _ServerThread(endpoints, console, otlp)
    try:
        server = thread.start()
        print(f"framework service listening on {server.address} "
              f"(profiles: {', '.join(server.scheduler.profiles)})")
        with SchedulerClient(server.address) as client:
            client.wait_ready()
            node_objects = generate_cluster(nodes, rng)
            node_list = {"apiVersion": "v1", "kind": "List", "items": node_objects}
            client.apply_text(json.dumps(node_list), source="demo-cluster.json")
            print(f"applied {nodes} nodes in {len(ZONES)} zones")
            gpu_workload, fitting = _apply_devices(client, node_objects, max(pods // 100, 1))
            workload = generate_workload(pods, rng) + gpu_workload
            jobs = generate_jobs(rng) if remote else []
            if jobs:
                print(f"plus {len(jobs)} pods for the {REMOTE_PROFILE} profile (gangs, node labels, volumes)")
            everything = jobs + workload
            started = time.perf_counter()
            chunk = 500
            for i in range(0, len(everything), chunk):
                doc = {"apiVersion": "v1", "kind": "List", "items": everything[i : i + chunk]}
                client.apply_text(json.dumps(doc), source=f"demo-pods-{i // chunk}.json")
            bound, unschedulable = _follow(client, len(everything), started + timeout)
            elapsed = time.perf_counter() - started
            thread.call(_quiet(server, 10.0))
            final = client.list_pods(namespace="demo")
        attempts, leaks, stats = thread.call(_settle(server))
        devices = thread.call(_gpu_devices(server))
        code = _report(pods, jobs, everything, final, bound, unschedulable, elapsed, attempts, leaks, stats,
                       (len(gpu_workload), fitting, devices))
        if console and server.observability is not None and server.observability.http is not None:
            keep_serving_console(server.observability.http.url)
        return code
    finally:
        thread.stop()
        if sidecars is not None:
            sidecars.stop()


def _report(pods: int, jobs: list[dict[str, Any]], everything: list[dict[str, Any]], final: list[Any],
            bound: set[str], unschedulable: dict[str, str], elapsed: float, attempts: list[float],
            leaks: dict[str, int], stats: dict[str, dict[str, PointStats]],
            gpus: tuple[int, int, Sequence[tuple[str, str, str, list[str]]]]) -> int:
    """Print the summary; 0 if every pod was bound or reported unschedulable, the gangs behaved and every
    GPU pod that fits got a device (``gpus``: the GPU pods, how many fit, the devices they got)."""
    total = len(everything)
    phases = collections.Counter(p.phase for p in final)
    reasons = collections.Counter(
        p.last_status.reasons[0] for p in final if p.phase != "Bound" and p.last_status.reasons
    )
    lost = [p for p in final if p.phase not in ("Bound", "Unschedulable") and p.phase != "Pending"]
    print()
    counted = f"{pods} + {gpus[0]} claiming GPUs" + (f" + {len(jobs)} for {REMOTE_PROFILE}" if jobs else "")
    print(f"pods: {counted}   bound: {phases.get('Bound', 0)}   unschedulable: {phases.get('Unschedulable', 0)}   "
          f"pending: {phases.get('Pending', 0)}")
    for reason, count in reasons.most_common(5):
        print(f"  {count:5d} x {reason}")
    print(f"throughput: {len(bound) / elapsed:.0f} pods/s bound ({elapsed:.2f}s for {total} pods)")
    print(f"scheduling attempts: {len(attempts)}   p50 {_percentile(attempts, 0.5) * 1000:.2f} ms   "
          f"p99 {_percentile(attempts, 0.99) * 1000:.2f} ms")
    ok = _check_devices(gpus[2], gpus[1])
    if jobs:
        _print_plugin_stats(stats)
        ok = _check_gangs(final) and ok
    print(f"left behind: {leaks}")
    if len(bound) + len(unschedulable) < total or lost or any(leaks.values()):
        print("demo FAILED: not every pod was bound or reported unschedulable", file=sys.stderr)
        return 1
    if not ok:
        print("demo FAILED: the gangs or the GPU pods did not behave", file=sys.stderr)
        return 1
    return 0


def _apply_devices(client: SchedulerClient, nodes: Sequence[dict[str, Any]],
                   count: int) -> tuple[list[dict[str, Any]], int]:
    """A fake driver's GPUs on the GPU pool (dynamic resource allocation), and ``count`` pods that claim
    one each plus one that claims more than a node has: the pods, and how many of them fit."""
    gpu_nodes = [n["metadata"]["name"] for n in nodes if n["metadata"]["labels"].get("accelerator") == "gpu"]
    objects = demodevices.pool_objects(gpu_nodes, "demo")
    client.apply_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}), source="demo-devices.json")
    print(f"applied a fake driver's ResourceSlices ({demodevices.GPUS_PER_NODE} GPUs on each of the "
          f"{len(gpu_nodes)} GPU nodes), DeviceClass {demodevices.CLASS}, ResourceClaimTemplate "
          f"{demodevices.GPU_TEMPLATE}, and {count + 1} pods that claim GPUs")
    return demodevices.gpu_pods(count, "demo"), min(count, demodevices.GPUS_PER_NODE * len(gpu_nodes))


async def _gpu_devices(server: Server) -> list[tuple[str, str, str, list[str]]]:
    """The bound GPU pods whose claim got devices of their node (see :func:`demodevices.devices_on_their_nodes`)."""
    s = server.scheduler
    claims = [{"metadata": {"name": c.name}, "status": {"allocation": c.allocation.to_dict()} if c.allocation else {}}
              for c in s.cache.dra.all_claims() if c.namespace == "demo"]
    pods = [{"metadata": {"name": r.pod.name}, "spec": {"nodeName": r.pod.node_name},
             "status": {"resourceClaimStatuses": [{"name": k, "resourceClaimName": v}
                                                  for k, v in r.pod.resource_claim_statuses.items()]}}
            for r in s.pods.values() if r.pod.namespace == "demo" and r.phase == "Bound"]
    return demodevices.devices_on_their_nodes(claims, pods)


def _check_devices(devices: Sequence[tuple[str, str, str, list[str]]], fitting: int) -> bool:
    """Print the GPU pods' devices; whether every GPU pod that fits got one on its node."""
    print(f"GPU pods (dynamic resource allocation): {len(devices)} of the {fitting} that fit bound, each with "
          "its claim's device on its node")
    for name, node, claim, allocated in devices[:3]:
        print(f"  {name} on {node}: claim {claim} -> {', '.join(allocated)}")
    return len(devices) == fitting


async def _quiet(server: Server, timeout: float) -> None:
    """Wait (bounded) until no pod is queued to be tried again soon: a late cluster event (a gang
    released, a pod unreserved) requeues unschedulable pods, and they are retried in a moment."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        counts = server.scheduler.pending_count()
        if not (counts["active"] or counts["backoff"] or counts["in-flight"]):
            return
        await asyncio.sleep(0.05)


async def _settle(server: Server) -> tuple[list[float], dict[str, int], dict[str, dict[str, PointStats]]]:
    """Let binding cycles in flight finish, then read what was left behind and the plugin stats."""
    await server.scheduler.drain(10)
    if server.remote is not None:
        await server.remote.drain()
    stats = server.remote.stats() if server.remote is not None else {}
    return list(server.scheduler.stats.attempt_seconds), server.scheduler.leaks(), stats


def _print_plugin_stats(stats: dict[str, dict[str, PointStats]]) -> None:
    print("remote plugins (calls, latency per call as the framework sees it):")
    rows = []
    for plugin, points in sorted(stats.items()):
        for point, st in sorted(points.items(), key=lambda kv: -kv[1].calls):
            lat = st.latencies
            rows.append((plugin, point, st.calls, f"{_percentile(lat, 0.5) * 1000:.2f} ms",
                         f"{_percentile(lat, 0.99) * 1000:.2f} ms", st.errors))
    header = ("PLUGIN", "POINT", "CALLS", "P50", "P99", "ERRORS")
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for r in (header, *rows):
        print("  " + "   ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


def _check_gangs(final: Sequence[Any]) -> bool:
    """Gangs that fit are bound whole; the short gang is rejected whole, nothing of it placed."""
    by_gang: dict[str, list[Any]] = collections.defaultdict(list)
    for p in final:
        name = re.sub(r"-\d+$", "", p.ref.name)
        if name.startswith("gang-"):
            by_gang[name].append(p)
    ok = True
    for name, members in sorted(by_gang.items()):
        phases = collections.Counter(p.phase for p in members)
        if name == "gang-short":
            reason = next((p.last_status.reasons[0] for p in members if p.last_status.reasons), "")
            good = phases == {"Unschedulable": len(members)} and not any(p.node_name for p in members)
            print(f"{name}: {len(members)} of 4 members, rejected together after {GANG_TIMEOUT:g}s, nothing "
                  f"reserved ({reason})" if good else f"{name}: WRONG {dict(phases)}")
        else:
            good = phases == {"Bound": len(members)}
            nodes = len({p.node_name for p in members})
            print(f"{name}: {len(members)} members bound together on {nodes} node(s)" if good
                  else f"{name}: WRONG {dict(phases)}")
        ok = ok and good
    return ok


def _follow(client: SchedulerClient, total: int, deadline: float) -> tuple[set[str], dict[str, str]]:
    """Follow Watch until every pod is bound or its latest word is Unschedulable (or the deadline)."""
    bound: set[str] = set()
    unschedulable: dict[str, str] = {}
    progress = Progress(total, "scheduling")
    remaining = max(deadline - time.perf_counter(), 1.0)
    for ev in client.watch(since=0, replay=True, timeout=remaining):
        if ev.object.kind != "Pod":
            continue
        uid = ev.object.uid
        if ev.type == EventType.BOUND:
            bound.add(uid)
            unschedulable.pop(uid, None)
        elif ev.type == EventType.UNSCHEDULABLE and uid not in bound:
            unschedulable[uid] = ev.status.reasons[0] if ev.status.reasons else ""
        else:
            continue
        settled = len(bound) + len(unschedulable)
        progress.update(settled, f"bound {len(bound)}, unschedulable {len(unschedulable)}")
        if settled >= total:
            break
    progress.close()
    return bound, unschedulable
