"""PodGroup cycles in process: scheduler_perf's ``podgroup`` shapes (:func:`~tools.compare.group_workloads.perf_shape`)
on the embedded store, no API server, with the profile and gates the group comparison runs
(:mod:`tools.compare.groups`: GenericWorkload and TopologyAwareWorkloadScheduling on, the default
profile without DefaultPreemption and DynamicResources). The nodes and PodGroups are applied first, then
every pod at once, timed until the last is bound. Prints pods/s, CPU ms per pod, Python function calls
(``--calls``: a cProfile run, whose count the machine's load does not move, and its top entries by own
time; ``--dump`` writes each profile) and the outcome, to compare before and after a change: how many
nodes ended with each number of pods and, for TAS, how many pods each rack holds.

::

    .venv/bin/python -m tools.bench.groups --shape basic:500:100:3 --shape tas:500:75:4 --calls
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import io
import json
import pstats
import time
from typing import Any

from framework import features
from framework.config import load_config
from framework.profiles import build_registry, unavailable_plugins
from framework.scheduler import Scheduler
from framework.scheduler.scheduler import tune_gc
from pluginhost.manifest import parse_objects

from ..compare.group_workloads import GroupWorkload, perf_shape
from ..compare.groups import GATES, PROFILES

__all__ = ["main", "run", "shape"]

#: The longest the pods may take before the run gives up (a bound, not an expectation).
_LIMIT = 600.0
#: scheduler_perf's three shapes behind kube-scheduler (docs/benchmarks.md), as ``--shape`` takes them.
DEFAULT_SHAPES = ("basic:500:100:3", "basic:500:3:100", "tas:500:75:4")


def shape(text: str) -> GroupWorkload:
    """``kind:nodes:groups:per_group`` (kind: basic, gang or tas) as its workload."""
    parts = text.split(":")
    if len(parts) != 4 or parts[0] not in ("basic", "gang", "tas") or not all(p.isdigit() for p in parts[1:]):
        raise ValueError(f"shape {text!r}: want kind:nodes:groups:per_group, kind one of basic, gang, tas")
    return perf_shape(parts[0], int(parts[1]), int(parts[2]), int(parts[3]))


def _objects(docs: list[dict[str, Any]]) -> Any:
    return parse_objects(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))


def _scheduler() -> Scheduler:
    registry = build_registry()
    text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n" + PROFILES
    cfg = load_config(text, registry.points(), "groups", unavailable=unavailable_plugins(registry))
    return Scheduler(cfg, registry, seed=1)


def _unbound(s: Scheduler, ns: str, names: list[str]) -> list[str]:
    out = []
    for name in names:
        rec = s.get_pod(ns, name)
        if rec is None or rec.phase != "Bound":
            out.append(name)
    return out


async def run(workload: GroupWorkload, calls: bool = False, top: int = 25, dump: str = "") -> dict[str, Any]:
    """One run of ``workload``: its pods/s, CPU ms per pod, bound count, pods per node and, with
    ``calls``, the function calls counted and the top entries of their profile (written to ``dump``
    when given, for ``python -m pstats``)."""
    s = _scheduler()
    task = asyncio.get_running_loop().create_task(s.run())
    try:
        await s.apply(_objects(workload.nodes))
        if workload.objects:
            await s.apply(_objects(workload.objects))
        names = [p["metadata"]["name"] for p in workload.pods]
        profiler = cProfile.Profile(time.process_time) if calls else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        await s.apply(_objects(workload.pods))
        waiting = names
        while waiting and time.perf_counter() - wall < _LIMIT:
            await asyncio.sleep(0.05)
            waiting = _unbound(s, workload.namespace, waiting)
        if profiler is not None:
            profiler.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        bound = len(names) - len(waiting)
        per_node = collections.Counter(collections.Counter(
            rec.pod.node_name for n in names if (rec := s.get_pod(workload.namespace, n)) is not None).values())
        out: dict[str, Any] = {"workload": workload.name, "bound": bound, "seconds": round(wall, 2),
                               "pods_per_second": round(bound / wall, 1),
                               "cpu_ms_per_pod": round(1000 * cpu / max(1, bound), 2),
                               "nodes_by_pods": dict(sorted(per_node.items()))}
        if workload.symmetric_labels:  # the TAS racks: how many pods each ended with
            key = workload.symmetric_labels[-1]
            domain = {n["metadata"]["name"]: n["metadata"]["labels"].get(key, "") for n in workload.nodes}
            out["pods_by_domain"] = dict(sorted(collections.Counter(
                domain.get(rec.pod.node_name, "") for n in names
                if (rec := s.get_pod(workload.namespace, n)) is not None and rec.pod.node_name).items()))
        if profiler is not None:
            if dump:
                profiler.dump_stats(dump)
            stats = pstats.Stats(profiler, stream=io.StringIO())
            out["calls"] = stats.total_calls  # type: ignore[attr-defined]
            text = io.StringIO()
            stats.stream = text  # type: ignore[attr-defined]
            stats.sort_stats("tottime").print_stats(top)
            out["profile"] = text.getvalue()
        return out
    finally:
        await s.stop()
        task.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.groups", description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", action="append", default=[],
                        help=f"kind:nodes:groups:per_group (repeatable; default {' '.join(DEFAULT_SHAPES)})")
    parser.add_argument("--calls", action="store_true", help="count function calls (cProfile) and print the top")
    parser.add_argument("--top", type=int, default=25, help="profile entries printed with --calls")
    parser.add_argument("--dump", default="", help="with --calls, write each shape's profile to DUMP.<kind>-<groups>")
    args = parser.parse_args(argv)
    try:
        workloads = [shape(t) for t in args.shape or DEFAULT_SHAPES]
    except ValueError as exc:
        parser.error(str(exc))
    tune_gc()
    features.install(features.parse(GATES))
    for text, workload in zip(args.shape or DEFAULT_SHAPES, workloads, strict=True):
        kind, _, groups, _ = text.split(":")
        dump = f"{args.dump}.{kind}-{groups}" if args.dump else ""
        out = asyncio.run(run(workload, args.calls, args.top, dump))
        profile = out.pop("profile", "")
        print(json.dumps(out), flush=True)
        if profile:
            print(profile, flush=True)


if __name__ == "__main__":
    main()
