"""Running the benchmark: each run in a fresh child process (so its peak RSS is its own), rounds over
the scenarios, and the median of each run's repeats.

A child (``python -m tools.bench --child SPEC``) measures its run with :func:`run_one` and prints
the :class:`~tools.bench.runs.RunResult` as one ``BENCH-RESULT`` line; :func:`run_in_child` reads
it back. An in-process run drives a :class:`~framework.scheduler.Scheduler` without gRPC, the way
kube-scheduler's ``scheduler_perf`` drives kube-scheduler:

1. create the nodes (scheduler_perf's ``node-default.yaml``: 4 CPU, 32 GiB, 110 pods);
2. create the initial pods and wait until they are bound (not measured; a scenario whose plugin is slow
   on purpose applies them already bound, :attr:`~tools.bench.scenario.Scenario.bind_init_pods`);
3. start the clock, create the measured pods in chunks while the scheduling loop runs, and stop the
   clock when the last one is bound. Throughput is measured pods / that window, so it includes the
   framework ingesting the pods (queueing, PreEnqueue), scheduling them and binding them. A chunk is
   created once fewer than a chunk of those before it wait, so the queue holds at most two; with a
   budget (:attr:`~tools.bench.runs.RunSpec.budget`) no chunk is created after it, and the window ends
   when the pods created by then are bound.

The latency figures are the scheduling-attempt durations the scheduler records
(``Scheduler.stats.attempt_seconds``) for the measured pods.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from framework.outcomes import num_feasible_nodes_to_find
from framework.scheduler import Scheduler, tune_gc
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod

from ..workloads import node_name, scheduler_perf_node, scheduler_perf_pod
from .report import evaluate_targets, machine_info
from .runs import RunResult, RunSpec, failed_result
from .scenarios import SCENARIOS

__all__ = ["child_main", "initial_pods", "median_run", "peak_rss_mib", "run_benchmarks", "run_in_child", "run_one"]

RESULT_PREFIX = "BENCH-RESULT "
MIB = 1024 * 1024


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))]


def peak_rss_mib() -> float:
    # ru_maxrss is in KiB on Linux (bytes on macOS).
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / MIB if sys.platform == "darwin" else rss / 1024


async def _settle(s: Scheduler, target: int, deadline: float) -> None:
    """Until ``target`` pods are bound, or nothing is left that could bind one, or the deadline.

    Polls the bound counter every 2 ms (the window's resolution); the costlier "is anything still
    queued or binding?" check (it walks the queue and the cache) only every 100 ms.
    """
    checked = time.perf_counter()
    while s.stats.bound < target:
        now = time.perf_counter()
        if now >= deadline:
            break
        if now - checked >= 0.1:
            checked = now
            pending = s.pending_count()
            busy = pending["active"] + pending["backoff"] + pending["in-flight"] + s.leaks()["binding_cycles"]
            if not busy:
                break
        await asyncio.sleep(0.002)


async def _feed(s: Scheduler, pods: Sequence[Pod], spec: RunSpec, base_bound: int, started: float) -> int:
    """Create ``pods`` a chunk at a time while the scheduling loop runs, each chunk once fewer than a
    chunk of the pods created before it are still unbound, until all are created, the budget is spent
    or the run's timeout (the first chunk is always created); the number created."""
    deadline = started + (spec.budget if spec.budget > 0 else spec.timeout)
    created = 0
    while created < len(pods) and (created == 0 or time.perf_counter() < deadline):
        if created - (s.stats.bound - base_bound) > spec.chunk:
            await asyncio.sleep(0.002)  # the window's resolution, as _settle's
            continue
        await s.apply(pods[created : created + spec.chunk])
        created = min(len(pods), created + spec.chunk)
        await asyncio.sleep(0)  # let the scheduling loop run between requests
    return created


def initial_pods(spec: RunSpec, bound: bool) -> list[Pod]:
    """The run's initial pods; ``bound``: each already on a node, round-robin (pod ``i`` on node ``i mod
    nodes``), so the store places them without a scheduling cycle."""
    return [pod_from_dict(scheduler_perf_pod("init", i, node=node_name(i % spec.nodes) if bound else ""))
            for i in range(spec.init_pods)]


async def run_one(spec: RunSpec) -> RunResult:
    """Run ``spec`` in this process and measure it."""
    scenario = SCENARIOS[spec.scenario]
    custom = await scenario.measure(spec)
    if custom is not None:
        return custom
    nodes: list[Node] = [node_from_dict(scheduler_perf_node(i, scenario.node_labels(i))) for i in range(spec.nodes)]
    bind = scenario.bind_init_pods
    init_pods = initial_pods(spec, bind)
    measured: list[Pod] = [pod_from_dict(scheduler_perf_pod("measured", i)) for i in range(spec.measure_pods)]
    async with scenario.environment(spec):
        registry, config = await scenario.prepare(spec)
        s = Scheduler(config, registry, seed=1)
        await scenario.attach(s)
        loop_task = asyncio.get_running_loop().create_task(s.run())
        try:
            setup_started = time.perf_counter()
            for i in range(0, len(nodes), 1000):
                await s.apply(nodes[i : i + 1000])
            for i in range(0, len(init_pods), spec.chunk):
                await s.apply(init_pods[i : i + spec.chunk])
                await asyncio.sleep(0)
            if not bind:
                await _settle(s, spec.init_pods, time.perf_counter() + spec.timeout)
            setup = time.perf_counter() - setup_started
            setup_rss = peak_rss_mib()
            base_bound, base_unsched, base_errors = s.stats.bound, s.stats.unschedulable, s.stats.errors
            first_attempt = len(s.stats.attempt_seconds)
            scenario.mark()

            started = time.perf_counter()
            cpu_started = time.process_time()
            created = await _feed(s, measured, spec, base_bound, started)
            await _settle(s, base_bound + created, started + spec.timeout)
            window = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
        finally:
            await s.stop()
            loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await loop_task
            await scenario.detach()
    attempts = sorted(s.stats.attempt_seconds[first_attempt:])
    bound = s.stats.bound - base_bound
    unschedulable = s.stats.unschedulable - base_unsched
    errors = s.stats.errors - base_errors
    in_cycles = sum(attempts)
    return RunResult(
        scenario=spec.scenario,
        nodes=spec.nodes,
        init_pods=spec.init_pods,
        measure_pods=created,
        nodes_scored=num_feasible_nodes_to_find(config.percentage_of_nodes_to_score, spec.nodes),
        bound=bound,
        unschedulable=unschedulable,
        errors=errors,
        all_scheduled=created > 0 and bound == created and unschedulable == 0 and errors == 0,
        seconds=round(window, 3),
        pods_per_second=round(bound / window, 1) if window > 0 else 0.0,
        cycle_pods_per_second=round(bound / in_cycles, 1) if in_cycles > 0 else 0.0,
        attempt_p50_ms=round(_percentile(attempts, 0.50) * 1000, 3),
        attempt_p99_ms=round(_percentile(attempts, 0.99) * 1000, 3),
        attempt_max_ms=round((attempts[-1] if attempts else 0.0) * 1000, 3),
        setup_seconds=round(setup, 3),
        peak_rss_mib=round(peak_rss_mib(), 1),
        setup_rss_mib=round(setup_rss, 1),
        leaks={k: v for k, v in s.leaks().items() if v},
        metrics=scenario.metrics(created),
        cpu_ms_per_pod=round(cpu * 1000 / bound, 4) if bound else 0.0,
    )


def _run_loop(coro: Coroutine[Any, Any, RunResult]) -> RunResult:
    """The event loop ``outrigger serve`` uses (uvloop when installed)."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency
        return asyncio.run(coro)
    result: RunResult = uvloop.run(coro)
    return result


def child_main(spec_json: str) -> int:
    tune_gc()  # as `outrigger serve` does
    result = _run_loop(run_one(RunSpec.from_json(spec_json)))
    print(RESULT_PREFIX + json.dumps(dataclasses.asdict(result)), flush=True)
    return 0


def run_in_child(spec: RunSpec) -> RunResult:
    """Run ``spec`` in a fresh interpreter (so peak RSS is this run's alone)."""
    cmd = [sys.executable, "-m", "tools.bench", "--child", spec.to_json()]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=spec.timeout + 300)
    except subprocess.TimeoutExpired:
        return failed_result(spec, "timed out")
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return RunResult(**json.loads(line[len(RESULT_PREFIX) :]))
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
    return failed_result(spec, f"exit {proc.returncode}: " + " | ".join(tail))


def median_run(runs: Sequence[RunResult]) -> RunResult:
    """The repeat with the median pods/s, with every repeat's pods/s and the highest peak RSS."""
    ordered = sorted(runs, key=lambda r: r.pods_per_second)
    mid = ordered[(len(ordered) - 1) // 2]
    failed = next((r for r in runs if r.error or not r.all_scheduled), None)
    return dataclasses.replace(
        failed if failed is not None else mid,
        pods_per_second_samples=[r.pods_per_second for r in runs],
        peak_rss_mib=max(r.peak_rss_mib for r in runs),
    )


def run_benchmarks(
    names: Sequence[str], quick: bool, repeat: int = 1, progress: Callable[[str], None] = lambda _m: None
) -> dict[str, Any]:
    started = time.time()
    results: dict[str, list[RunResult]] = {}
    specs = [(name, spec if quick else SCENARIOS[name].full(spec))
             for name in names for spec in SCENARIOS[name].runs(quick)]
    runs: dict[int, list[RunResult]] = {i: [] for i in range(len(specs))}
    # Rounds over every scenario rather than each scenario's repeats back to back: the machine's speed
    # drifts (a VM's neighbours), and the ratio targets compare scenarios, so each round measures them
    # all under the same conditions and the medians are taken over rounds.
    for round_ in range(max(repeat, 1)):
        for i, (name, spec) in enumerate(specs):
            if runs[i] and runs[i][-1].error:
                continue
            budget = f", at most {spec.budget:.0f} s of them" if spec.budget else ""
            progress(f"{name}: {spec.nodes} nodes, {spec.init_pods} initial + {spec.measure_pods} measured pods"
                     f"{budget} (round {round_ + 1}) ...")
            runs[i].append(run_in_child(spec))
            last = runs[i][-1]
            progress(f"  {last.pods_per_second:.0f} pods/s, peak RSS {last.peak_rss_mib:.0f} MiB"
                     + (f", error: {last.error}" if last.error else ""))
    for i, (name, _spec) in enumerate(specs):
        results.setdefault(name, []).append(median_run(runs[i]))
    return {
        "version": 1,
        "quick": quick,
        "repeat": max(repeat, 1),
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_seconds": round(time.time() - started, 1),
        "machine": machine_info(),
        "scenarios": {
            name: {
                "description": SCENARIOS[name].description,
                "runs": [dataclasses.asdict(r) for r in results.get(name, [])],
            }
            for name in names
        },
        "targets": [] if quick else evaluate_targets(results),
    }
