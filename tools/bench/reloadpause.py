"""The scheduling pause of a live configuration change (docs/benchmarks.md, "Live configuration"):
``python -m tools.bench.reloadpause [--nodes 500] [--pods 6000] [--reloads 10]``.

A framework service (in-process, the embedded store, no remote plugin) schedules scheduler_perf's pods
on scheduler_perf's nodes while its ``--config`` file is replaced by rename ``--reloads`` times, the
NodeResourcesFit weight switching between 1 and 2 each time (every change applied, a new generation).
For each change it reports:

- ``switch``: how long scheduling waited for the switch itself (``Scheduler.reconfigure``: installing
  the new Frameworks and the queue following; the cycle under way finishes first);
- ``apply``: the whole change, from reading the file to the new generation serving. With no remote
  endpoint to handshake it is all work on the event loop, so scheduling pauses for it too;
- ``gap``: the longest time between two pods bound across the change, against the median time between
  two pods bound over the whole run: the pause as the pods see it.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import statistics
import tempfile
import time
from pathlib import Path

from framework.liveconfig import LiveConfig, WatchedFiles
from framework.profiles import load_scheduler_config
from framework.scheduler import tune_gc
from framework.service import start_service
from pluginhost.manifest import node_from_dict, pod_from_dict

from ..workloads import scheduler_perf_node, scheduler_perf_pod

__all__ = ["main", "measure"]

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      enabled: [{{name: NodeResourcesFit, weight: {weight}}}]
"""


async def measure(nodes: int, pods: int, reloads: int) -> list[dict[str, float]]:
    """One run (see the module docstring): per change, its switch, apply and gap (ms) and the median gap."""
    tune_gc()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scheduler.yaml"
        path.write_text(CONFIG.format(weight=1))
        srv = await start_service(lambda registry: load_scheduler_config(path, registry), (), "127.0.0.1:0")
        live = LiveConfig(srv, WatchedFiles(str(path)), srv.address)
        s = srv.scheduler
        try:
            await s.apply([node_from_dict(scheduler_perf_node(i)) for i in range(nodes)])
            await s.apply([pod_from_dict(scheduler_perf_pod("measured", i)) for i in range(pods)])
            out: list[dict[str, float]] = []
            for n in range(reloads):
                await asyncio.sleep(0.3)  # scheduling goes on between changes
                staged = path.with_name("scheduler.yaml.new")
                staged.write_text(CONFIG.format(weight=2 if n % 2 == 0 else 1))
                os.replace(staged, path)
                before = time.time()
                assert await live.apply(), live.last_refused
                out.append({"start": before, "end": time.time(), "switch": live.last_pause_ms,
                            "apply": live.last_apply_ms})
            await asyncio.sleep(0.3)
            bound = sorted(ev.timestamp for ev in s.recent_events() if ev.type == "Bound")
        finally:
            await srv.stop(0.5)
    gaps = [b - a for a, b in itertools.pairwise(bound)]
    median = statistics.median(gaps) * 1000 if gaps else 0.0
    p99 = statistics.quantiles(gaps, n=100)[98] * 1000 if len(gaps) > 100 else 0.0
    for change in out:
        around = [b - a for a, b in itertools.pairwise(bound)
                  if b >= change["start"] - 0.001 and a <= change["end"] + 0.001]
        change["gap"] = max(around, default=0.0) * 1000
        change["median"] = median
        change["p99"] = p99
        change["bound"] = float(len(bound))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench.reloadpause", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--pods", type=int, default=6000)
    p.add_argument("--reloads", type=int, default=10)
    args = p.parse_args(argv)
    changes = asyncio.run(measure(args.nodes, args.pods, args.reloads))
    print(f"{args.nodes} nodes, {int(changes[0]['bound']) if changes else 0} pods bound, {len(changes)} changes; "
          f"time between two pods bound: median {changes[0]['median'] if changes else 0:.2f} ms, "
          f"p99 {changes[0]['p99'] if changes else 0:.2f} ms")
    print("change  switch ms  apply ms  gap ms")
    for i, c in enumerate(changes, 1):
        print(f"{i:6d}  {c['switch']:9.2f}  {c['apply']:8.2f}  {c['gap']:6.2f}")
    for key in ("switch", "apply", "gap"):
        values = [c[key] for c in changes]
        print(f"{key}: median {statistics.median(values):.2f} ms, max {max(values):.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
