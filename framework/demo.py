"""``outrigger demo``: the framework service scheduling a generated cluster end to end.

It starts the framework service on a loopback port (its own event loop in a background thread),
applies a generated cluster (nodes of mixed sizes across three zones, a tainted GPU pool, a few
cordoned nodes) and a workload through the real gRPC API, follows the Watch stream with a progress
bar until every pod is bound or reported unschedulable, and prints a summary.
"""

from __future__ import annotations

import asyncio
import collections
import json
import random
import sys
import threading
import time
from typing import Any

from clients.client import SchedulerClient
from pluginhost import pb

from .profiles import build_registry, default_scheduler_config
from .service import Server, start_server

__all__ = ["Progress", "generate_cluster", "generate_workload", "run_demo"]

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
         labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priority": priority,
        "containers": [{"name": "app", "image": "registry.local/app:1",
                        "resources": {"requests": {"cpu": cpu, "memory": mem}}}],
    }
    spec.update(extra or {})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "demo", "labels": labels or {}}, "spec": spec}


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


class _ServerThread:
    """The framework service on its own event loop in a background thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.server: Server | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="outrigger-framework", daemon=True)

    def start(self) -> Server:
        self._thread.start()
        self._ready.wait(30)
        if self._error is not None or self.server is None:
            raise RuntimeError(f"framework service failed to start: {self._error}")
        return self.server

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)

        async def boot() -> None:
            registry = build_registry()
            self.server = await start_server(default_scheduler_config(registry), registry, "127.0.0.1:0", seed=1)

        try:
            self.loop.run_until_complete(boot())
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()

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


def run_demo(nodes: int = 300, pods: int = 3000, seed: int = 7, timeout: float = 300.0,
             plugins: str | None = None, remote: bool = True) -> int:
    rng = random.Random(seed)
    thread = _ServerThread()
    server = thread.start()
    print(f"framework service listening on {server.address} "
          f"(profiles: {', '.join(server.scheduler.profiles)})")
    try:
        with SchedulerClient(server.address) as client:
            client.wait_ready()
            node_list = {"apiVersion": "v1", "kind": "List", "items": generate_cluster(nodes, rng)}
            client.apply_text(json.dumps(node_list), source="demo-cluster.json")
            print(f"applied {nodes} nodes in {len(ZONES)} zones")
            workload = generate_workload(pods, rng)
            started = time.perf_counter()
            chunk = 500
            for i in range(0, len(workload), chunk):
                doc = {"apiVersion": "v1", "kind": "List", "items": workload[i : i + chunk]}
                client.apply_text(json.dumps(doc), source=f"demo-pods-{i // chunk}.json")
            bound, unschedulable = _follow(client, pods, started + timeout)
            elapsed = time.perf_counter() - started
            final = client.list_pods(namespace="demo")
    finally:
        attempts = list(server.scheduler.stats.attempt_seconds)
        leaks = server.scheduler.leaks()
        thread.stop()
    phases = collections.Counter(p.phase for p in final)
    reasons = collections.Counter(
        p.last_status.reasons[0] for p in final if p.phase != "Bound" and p.last_status.reasons
    )
    lost = [p for p in final if p.phase not in ("Bound", "Unschedulable") and p.phase != "Pending"]
    print()
    print(f"pods: {pods}   bound: {phases.get('Bound', 0)}   unschedulable: {phases.get('Unschedulable', 0)}   "
          f"pending: {phases.get('Pending', 0)}")
    for reason, count in reasons.most_common(5):
        print(f"  {count:5d} x {reason}")
    print(f"throughput: {len(bound) / elapsed:.0f} pods/s bound ({elapsed:.2f}s for {pods} pods)")
    print(f"scheduling attempts: {len(attempts)}   p50 {_percentile(attempts, 0.5) * 1000:.2f} ms   "
          f"p99 {_percentile(attempts, 0.99) * 1000:.2f} ms")
    print(f"left behind: {leaks}")
    if len(bound) + len(unschedulable) < pods or lost or any(leaks.values()):
        print("demo FAILED: not every pod was bound or reported unschedulable", file=sys.stderr)
        return 1
    return 0


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
        if ev.type == pb.scheduler.EVENT_TYPE_BOUND:
            bound.add(uid)
            unschedulable.pop(uid, None)
        elif ev.type == pb.scheduler.EVENT_TYPE_UNSCHEDULABLE and uid not in bound:
            unschedulable[uid] = ev.status.reasons[0] if ev.status.reasons else ""
        else:
            continue
        settled = len(bound) + len(unschedulable)
        progress.update(settled, f"bound {len(bound)}, unschedulable {len(unschedulable)}")
        if settled >= total:
            break
    progress.close()
    return bound, unschedulable
