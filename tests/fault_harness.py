"""The fault harness: pods through the framework while the replicas of a remote plugin are killed
(SIGKILL) and restarted, stall past their deadlines and answer with garbage; then every invariant is
checked and a summary printed.

``tests/test_fault_harness.py`` runs a short version in ``make test``. The full run (a few thousand
pods, a minute or two on two cores)::

    .venv/bin/python tests/fault_harness.py --pods 3000 --kills 12

(defaults: 100 nodes, each remote call stalls past its 0.5 s deadline with probability 0.002 and answers
garbage with probability 0.005; a stall costs the serial scheduling loop its deadline, so stalls are
kept rarer than garbage).

Everything stays on 127.0.0.1 and is bounded in count and time: the chaos loop does ``kills`` kills
and stops, the run gives up after ``timeout`` seconds. The invariants:

- every pod is bound exactly once (one Bound event, one place in the cache), or is still queued with
  the reason of its last failure (nothing is lost);
- every pod that reached Reserve was unreserved on its failure paths (the Ledger plugin's books);
- when idle: no CycleState, no waiting pod, no assumed pod, no binding cycle, no remote call in flight.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from fault_plugins import Ledger
from test_remote_harness import HostProcess, endpoint, remote_rig

from framework.config import load_config
from framework.remote import EndpointConfig
from framework.scheduler.records import EV_BOUND, EV_ERROR
from pluginhost.manifest import parse_objects
from pluginhost.model import Node, Pod

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - {{name: PrioritySort}}
      - {{name: NodeResourcesFit}}
      - {{name: Ledger}}
      - {{name: Chaos}}
      - {{name: DefaultBinder}}
      disabled:
      - {{name: "*"}}
  pluginConfig:
  - name: Chaos
    args: {args}
"""


@dataclass
class Summary:
    pods: int = 0
    bound: int = 0
    still_queued: int = 0
    lost: int = 0
    double_bound: int = 0
    failed_cycles: int = 0
    failure_reasons: dict[str, int] = field(default_factory=dict)  # the most common, shortened
    retried_batches: int = 0
    unreserved: int = 0  # Unreserve calls: cycles that failed after Reserve
    kills: int = 0
    restarts: int = 0
    leaked: dict[str, int] = field(default_factory=dict)
    queued: list[str] = field(default_factory=list)  # the first few still-queued pods: queue and last failure
    ledger_errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def clean(self) -> bool:
        return (
            self.lost == 0 and self.double_bound == 0 and not any(self.leaked.values())
            and not self.ledger_errors and self.bound + self.still_queued == self.pods
        )


def cluster(nodes: int, pods: int) -> tuple[list[Node], list[Pod]]:
    docs = [
        f"apiVersion: v1\nkind: Node\nmetadata: {{name: node-{i}}}\n"
        "status: {allocatable: {cpu: '64', memory: 256Gi, pods: '500'}}\n"
        for i in range(nodes)
    ]
    docs += [
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: pod-{i}, uid: uid-{i}}}\n"
        "spec: {containers: [{name: c, resources: {requests: {cpu: 10m, memory: 16Mi}}}]}\n"
        for i in range(pods)
    ]
    objs = parse_objects("---\n".join(docs), "harness.yaml")
    return [o for o in objs if isinstance(o, Node)], [o for o in objs if isinstance(o, Pod)]


async def run(*, pods: int = 300, nodes: int = 30, kills: int = 3, stall: float = 0.01, garbage: float = 0.01,
              deadline: float = 0.5, seed: int = 1, timeout: float = 120.0, log: Any = None) -> Summary:
    """One harness run (see the module docstring)."""
    say = log or (lambda *_: None)
    rng = random.Random(seed)
    args = json.dumps({"stall": stall, "stallSeconds": deadline * 2, "garbage": garbage, "seed": seed})
    hosts = [HostProcess("fault_plugins:Chaos") for _ in range(2)]
    for h in hosts:
        h.spawn()
    addresses = [h.ready() for h in hosts]
    ledger: list[Ledger] = []

    def extra(registry: Any) -> None:
        def factory(a: dict[str, Any], handle: Any) -> Ledger:
            plugin = Ledger(a, handle)
            ledger.append(plugin)
            return plugin

        registry.register("Ledger", factory, frozenset({"reserve", "postBind"}))

    ep: EndpointConfig = endpoint("chaos", addresses, filter=deadline, score=deadline, reserve=deadline,
                                  permit=deadline, preBind=deadline)
    text = CONFIG.format(args=args)
    out = Summary(pods=pods)
    started = time.monotonic()
    rig = await remote_rig([ep], lambda reg: load_config(text, reg.points()), extra=extra)
    s = rig.scheduler
    loop_task = asyncio.create_task(s.run())

    async def chaos() -> None:
        for _ in range(kills):
            await asyncio.sleep(rng.uniform(0.2, 0.8))
            i = rng.randrange(len(hosts))
            hosts[i].kill()
            out.kills += 1
            say(f"killed replica {addresses[i]}")
            await asyncio.sleep(rng.uniform(0.1, 0.5))
            hosts[i] = HostProcess("fault_plugins:Chaos", listen=addresses[i])
            await asyncio.to_thread(hosts[i].start)
            out.restarts += 1
            say(f"restarted replica {addresses[i]}")

    try:
        node_objs, pod_objs = cluster(nodes, pods)
        await s.apply(node_objs)
        chaos_task = asyncio.create_task(chaos())
        chunk = max(pods // 10, 1)
        for lo in range(0, pods, chunk):
            await s.apply(pod_objs[lo : lo + chunk])
            await asyncio.sleep(0.05)
        limit = time.monotonic() + timeout
        while time.monotonic() < limit:
            done = sum(r.phase == "Bound" for r in s.pods.values())
            if done == pods and chaos_task.done():
                break
            await asyncio.sleep(0.1)
        await chaos_task
        # Idle: no new cycle starts; the one running finishes; binding cycles and informational calls end.
        await s.stop()
        await asyncio.wait_for(loop_task, 30)
        await s.drain(30)
        await rig.remote.drain(5)
        # The books.
        bound_events: dict[str, int] = {}
        reasons: dict[str, int] = {}
        for ev in s.recent_events():
            if ev.type == EV_BOUND:
                bound_events[ev.uid] = bound_events.get(ev.uid, 0) + 1
            elif ev.type == EV_ERROR:
                out.failed_cycles += 1
                why = re.sub(r"\d+", "N", ev.status.message() if ev.status is not None else "")[:90]
                reasons[why] = reasons.get(why, 0) + 1
        out.failure_reasons = dict(sorted(reasons.items(), key=lambda kv: -kv[1])[:6])
        for uid, rec in s.pods.items():
            if rec.phase == "Bound":
                out.bound += 1
                if bound_events.get(uid, 0) != 1 or s.cache.node_of(uid) != rec.pod.node_name:
                    out.double_bound += 1
            elif s.queue_of(uid) and rec.last_status is not None:
                out.still_queued += 1
                if len(out.queued) < 5:
                    out.queued.append(f"{rec.pod.name} in {s.queue_of(uid)}: {rec.last_status.message()[:120]}")
            else:
                out.lost += 1
        out.lost += pods - len(s.pods)
        out.retried_batches = sum(st.retries for st in rig.remote.stats().get("Chaos", {}).values())
        books = ledger[0] if ledger else Ledger()
        out.ledger_errors = list(books.errors)
        out.unreserved = books.unreserved
        if books.reserved:
            out.ledger_errors.append(f"{len(books.reserved)} pod(s) still reserved: {sorted(books.reserved)[:5]}")
        leaks = dict(s.leaks())
        # Resources: the cache holds exactly the bound pods, and the nodes' requested CPU is theirs.
        leaks["pods_in_cache_not_bound"] = s.cache.pod_count() - out.bound
        requested_cpu = int(s.cache.snapshot().requested_of("cpu").sum())
        leaks["cpu_millis_reserved_not_bound"] = requested_cpu - 10 * out.bound
        leaks["remote_calls_in_flight"] = rig.services.services.in_flight_count()
        out.leaked = leaks
    finally:
        await s.stop()
        await asyncio.wait_for(loop_task, 30)
        await rig.close()
        for h in hosts:
            h.kill()
    out.seconds = round(time.monotonic() - started, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=3000)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--kills", type=int, default=12)
    ap.add_argument("--stall", type=float, default=0.002, help="probability a call stalls past its deadline")
    ap.add_argument("--garbage", type=float, default=0.005, help="probability a call answers garbage")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900.0)
    a = ap.parse_args(argv)
    summary = asyncio.run(run(pods=a.pods, nodes=a.nodes, kills=a.kills, stall=a.stall, garbage=a.garbage,
                              seed=a.seed, timeout=a.timeout, log=lambda m: print(m, file=sys.stderr)))
    print(json.dumps(asdict(summary), indent=2))
    print("invariants hold" if summary.clean else "INVARIANTS BROKEN")
    return 0 if summary.clean else 1


if __name__ == "__main__":
    sys.exit(main())
