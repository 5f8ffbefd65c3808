"""DynamicResources throughput in process: scheduler_perf's SchedulingWithResourceClaimTemplate shape on
the embedded store, no API server. ``nodes`` nodes each with one ResourceSlice of ``devices`` GPUs (the
demos' fake driver, :func:`~framework.cli.demodevices.gpu_slice`), the DeviceClass with its CEL selector,
``init`` claims allocated up front (the first GPUs of each node, round robin) and ``pods`` measured pods,
each claiming one GPU from a template. Prints pods/s and CPU ms per pod; ``--profile FILE`` writes a
cProfile of the measured window, timed by the process's CPU clock (``python -m pstats FILE``).

::

    .venv/bin/python -m tools.bench.dra --nodes 500 --devices 10 --init 2500 --pods 500
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import time
from typing import Any

from framework.cli.demodevices import CLASS, DRIVER, claim_template, device_class, gpu_slice
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import Scheduler
from framework.scheduler.scheduler import tune_gc
from pluginhost.manifest import parse_objects

__all__ = ["main", "run"]

_TEMPLATE = "one-gpu"
#: The longest the measured pods may take before the run gives up (a bound, not an expectation).
_LIMIT = 1800.0


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}}}


def _allocated_claim(i: int, node: str, device: int) -> dict[str, Any]:
    pin = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    result = {"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{device}"}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"init-{i}", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
            "status": {"allocation": {"devices": {"results": [result]}, "nodeSelector": pin}}}


def _pod(i: int) -> dict[str, Any]:
    resources = {"requests": {"cpu": "10m"}, "claims": [{"name": "gpu"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"measured-{i}", "namespace": "default"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": _TEMPLATE}],
                     "containers": [{"name": "c", "resources": resources}]}}


def _objects(docs: list[dict[str, Any]]) -> Any:
    return parse_objects(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))


def _is_bound(s: Scheduler, name: str) -> bool:
    rec = s.get_pod("default", name)
    return rec is not None and rec.phase == "Bound"


def _settle(s: Scheduler, waiting: list[str]) -> None:
    # Pods bind about in the order they were created: drop the bound ones from the front, so that a
    # poll costs what was bound since the last one (a count over every pod each poll grew with the
    # square of the pods, and was charged to the scheduler's CPU per pod).
    while waiting and _is_bound(s, waiting[-1]):
        waiting.pop()


async def run(nodes: int, devices: int, init: int, pods: int, profile: str = "") -> dict[str, float]:
    """One run; the measured window's pods/s, CPU ms per pod and bound count."""
    registry = build_registry()
    s = Scheduler(default_scheduler_config(registry), registry, seed=1)
    task = asyncio.get_running_loop().create_task(s.run())
    try:
        names = [f"n{i:04d}" for i in range(nodes)]
        await s.apply(_objects([_node(n) for n in names]))
        await s.apply(_objects([device_class(), claim_template(_TEMPLATE, "default"),
                                *(gpu_slice(n, devices) for n in names)]))
        await s.apply(_objects([_allocated_claim(i, names[i % nodes], i // nodes) for i in range(init)]))
        pod_names = [f"measured-{i}" for i in range(pods)]
        # Timed by the process's CPU clock: on a shared machine wall time charges other processes' turns
        # to whatever function was running when they came.
        profiler = cProfile.Profile(time.process_time) if profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profiler is not None:
            profiler.enable()
        await s.apply(_objects([_pod(i) for i in range(pods)]))
        waiting = pod_names[::-1]
        while waiting and time.perf_counter() - wall < _LIMIT:
            await asyncio.sleep(0.05)
            _settle(s, waiting)
            if waiting and len(waiting) < 50:  # the last few may bind out of order
                waiting[:] = [n for n in waiting if not _is_bound(s, n)]
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        bound = sum(1 for n in pod_names if _is_bound(s, n))
        return {"bound": bound, "seconds": wall, "pods_per_second": bound / wall,
                "cpu_ms_per_pod": 1000 * cpu / max(1, bound)}
    finally:
        await s.stop()
        task.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.dra", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--devices", type=int, default=10)
    parser.add_argument("--init", type=int, default=2500, help="claims allocated up front")
    parser.add_argument("--pods", type=int, default=500, help="measured pods")
    parser.add_argument("--profile", default="", help="write a cProfile of the measured window here")
    args = parser.parse_args(argv)
    if args.init > args.nodes * args.devices:
        parser.error(f"--init {args.init}: more claims than the {args.nodes * args.devices} devices")
    tune_gc()
    out = asyncio.run(run(args.nodes, args.devices, args.init, args.pods, args.profile))
    print(json.dumps({"nodes": args.nodes, "devices": args.devices, "init": args.init, "pods": args.pods,
                      **{k: round(v, 2) for k, v in out.items()}}))


if __name__ == "__main__":
    main()
