"""``python -m tools.compare`` (``make compare``): Outrigger side by side with the real
kube-scheduler on the same API server — speed, placements and reasons.

What runs (:class:`Plan`: throughput workloads with their rounds, placement workloads, reasons), running
it (:func:`run_compare`), and the command line (:func:`main`) that writes the report.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..localcluster import find_bin_dir
from ..workloads import WORKLOADS, Workload
from .dra import run_dra
from .group_workloads import GroupWorkload, group_workloads
from .groups import run_groups
from .placement_workloads import PlacementWorkload, placement_workloads
from .placements import run_placements
from .reasons import run_reasons
from .report import CompareResults, to_json, to_markdown
from .schedulers import KUBE, OUTRIGGER
from .throughput import run_throughput

__all__ = ["Plan", "default_plan", "main", "run_compare"]


ROOT = Path(__file__).resolve().parents[2]
DEFAULT_OUT = "compare-results"


@dataclass(frozen=True)
class Plan:
    """What ``make compare`` runs: throughput workloads with their rounds, placements, reasons, and the
    devices comparison (:mod:`.dra`)."""

    throughput: list[tuple[Workload, int]]
    placements: list[PlacementWorkload]
    reasons: bool = True
    dra: bool = True
    #: The PodGroup comparison's workloads (:mod:`.groups`).
    groups: list[GroupWorkload] = dataclasses.field(default_factory=list)


def default_plan(quick: bool = False, rounds: int | None = None) -> Plan:
    """The sizes that fit ``make compare``'s 15 minutes on two cores: SchedulingBasic at its
    performance size (5000 nodes, 1000 + 10000 pods), the others at scheduler_perf's own 500-node
    sizes (``500Nodes``); the DRA workloads at the sizes of their thresholds (``5000pods_500nodes``: 2500
    claims allocated, 2500 pods measured) and ``2000pods_200nodes`` for the shared claims."""
    if quick:
        small = [WORKLOADS["SchedulingBasic"].sized(nodes=50, init_pods=20, measure_pods=100), *QUICK_DRA]
        return Plan([(w, rounds or 1) for w in small], placement_workloads(quick=True),
                    groups=group_workloads(quick=True))
    return Plan([
        (WORKLOADS["SchedulingBasic"], rounds or 2),
        (WORKLOADS["SchedulingPodAntiAffinity"].sized(nodes=500, init_pods=100, measure_pods=400), rounds or 3),
        (WORKLOADS["SchedulingPodAffinity"].sized(nodes=500, init_pods=500, measure_pods=1000), rounds or 3),
        (WORKLOADS["TopologySpreading"].sized(nodes=500, init_pods=1000, measure_pods=1000), rounds or 3),
        (WORKLOADS["SchedulingWithResourceClaimTemplate"], rounds or 1),
        (WORKLOADS["SchedulingWithResourceClaim"].sized(nodes=200, init_pods=1000, measure_pods=1000), rounds or 1),
    ], placement_workloads(), groups=group_workloads())


#: The DRA workloads of ``--quick``.
QUICK_DRA = [
    WORKLOADS["SchedulingWithResourceClaimTemplate"].sized(nodes=10, init_claims=20, measure_pods=50),
    WORKLOADS["SchedulingWithResourceClaim"].sized(nodes=10, init_pods=20, measure_pods=30),
]



def run_compare(plan: Plan, workdir: Path, bin_dir: Path,
                progress: Callable[[str], None] = lambda _: None) -> CompareResults:
    results = CompareResults()
    started = time.monotonic()
    for workload, rounds in plan.throughput:
        results.sizes[workload.name] = workload.describe()
        for r in range(rounds):
            order = (KUBE, OUTRIGGER) if r % 2 == 0 else (OUTRIGGER, KUBE)
            for sched in order:
                run = run_throughput(workload, sched, r + 1, workdir / f"{workload.name}-{sched}-{r + 1}", bin_dir)
                results.throughput.append(run)
                conflicts = sum(n for k, n in run.claim_requests.items() if k.endswith(" 409"))
                progress(f"throughput {workload.name} round {r + 1} {sched}: "
                         + (run.error or f"{run.pods_per_second:.0f} pods/s")
                         + (f", {conflicts} claim writes refused with 409" if run.claim_requests else ""))
    for pw in plan.placements:
        report = run_placements(pw, workdir / f"placements-{pw.name}", bin_dir)
        results.placements.append(report)
        progress(f"placements {pw.name}: " + (report.error or f"{len(report.pods)} pods, {report.moved} moved"))
    if plan.reasons:
        results.reasons = run_reasons(workdir / "reasons", bin_dir)
        same = sum(p.identical for p in results.reasons.pods)
        progress(f"reasons: {same}/{len(results.reasons.pods)} identical" + (
            f" ({results.reasons.error})" if results.reasons.error else ""))
    if plan.dra:
        results.dra = run_dra(workdir / "dra", bin_dir)
        same = sum(p.agrees for p in results.dra.pods)
        progress(f"devices: {same}/{len(results.dra.pods)} pods agree, devices per node "
                 + ("equal" if results.dra.kube_devices == results.dra.outrigger_devices else "differ")
                 + (f" ({results.dra.error})" if results.dra.error else ""))
    for gw in plan.groups:
        # workload_preemption's waves bind 1100 pods before the timed one (GangPreemptionAffinity at 100
        # nodes took 116 s under kube-scheduler, 160 s under Outrigger, at a load average near 27).
        rep = run_groups(gw, workdir / f"groups-{gw.name.replace('/', '-')}", bin_dir,
                         timeout=600.0 if gw.waves else 120.0)
        results.groups.append(rep)
        progress(f"groups {gw.name}: {sum(g.agrees for g in rep.groups)}/{len(rep.groups)} agree"
                 + (f" ({rep.error})" if rep.error else ""))
    results.seconds = time.monotonic() - started
    return results


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=False)
    return out.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=DEFAULT_OUT, help=f"report files OUT.md and OUT.json (default {DEFAULT_OUT})")
    p.add_argument("--rounds", type=int, help="rounds per throughput workload (default: 2 for SchedulingBasic, "
                                              "3 for the affinity and spreading ones, 1 for the DRA ones)")
    p.add_argument("--workloads", help="throughput workloads to run, comma-separated (default: all six; "
                                       "'none' for placements, reasons and devices only)")
    p.add_argument("--no-placements", action="store_true", help="skip the placement comparison")
    p.add_argument("--no-reasons", action="store_true", help="skip the FailedScheduling comparison")
    p.add_argument("--no-dra", action="store_true", help="skip the devices (DRA) comparison")
    p.add_argument("--no-groups", action="store_true", help="skip the PodGroup (gangs) comparison")
    p.add_argument("--quick", action="store_true", help="small sizes, one round (a minute or two)")
    p.add_argument("--workdir", help="where the clusters live (default: a temporary folder, removed after)")
    p.add_argument("--commit", help="the commit the report names (default: git rev-parse --short HEAD)")
    args = p.parse_args(argv)
    if args.rounds is not None and args.rounds < 1:
        p.error(f"--rounds must be at least 1, got {args.rounds}")
    plan = default_plan(args.quick, args.rounds)
    if args.workloads:
        wanted = [] if args.workloads == "none" else args.workloads.split(",")
        unknown = [w for w in wanted if w not in WORKLOADS]
        if unknown:
            p.error(f"unknown workload(s) {', '.join(unknown)} (known: {', '.join(WORKLOADS)})")
        plan = dataclasses.replace(plan, throughput=[(w, r) for w, r in plan.throughput if w.name in wanted])
    if args.no_placements:
        plan = dataclasses.replace(plan, placements=[])
    if args.no_reasons:
        plan = dataclasses.replace(plan, reasons=False)
    if args.no_dra:
        plan = dataclasses.replace(plan, dra=False)
    if args.no_groups:
        plan = dataclasses.replace(plan, groups=[])
    bin_dir = find_bin_dir()
    missing = [b for b in ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager")
               if not (bin_dir / b).exists()]
    if missing:
        print(f"error: {', '.join(missing)} not found in {bin_dir}: build them with `make k8s`", file=sys.stderr)
        return 2
    with contextlib.ExitStack() as stack:
        if args.workdir:
            workdir = Path(args.workdir)
            workdir.mkdir(parents=True, exist_ok=True)
        else:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="outrigger-compare-")))
        results = run_compare(plan, workdir, bin_dir, progress=lambda line: print(line, flush=True))
    doc = to_json(results, args.commit or _commit())
    Path(f"{args.out}.json").write_text(json.dumps(doc, indent=2) + "\n")
    Path(f"{args.out}.md").write_text(to_markdown(doc))
    print(to_markdown(doc))
    print(f"wrote {args.out}.md and {args.out}.json")
    return 0
