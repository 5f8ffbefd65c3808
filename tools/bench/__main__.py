"""``python -m tools.bench``: scheduling throughput, latency and memory of the framework.

Runs the scenarios named (``--scenarios``; every default one otherwise), prints the machine, a table of
the runs and the targets met or not, and writes the report as JSON (``--out``). Exits 1 when a run did
not schedule every measured pod. ``--child SPEC`` is one run, in the child process the driver starts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from .report import format_table
from .runner import child_main, run_benchmarks
from .runs import RunResult
from .scenarios import SCENARIOS

__all__ = ["main"]

DEFAULT_OUT = "bench-results.json"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, a few seconds (smoke test)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"JSON results file (default {DEFAULT_OUT})")
    p.add_argument("--scenarios", default="", help=f"comma-separated subset of: {', '.join(SCENARIOS)} (default: "
                   "all but apiserver and apiserver-traced)")
    p.add_argument("--repeat", type=int, default=None,
                   help="runs per size, the median reported (default 3, 1 with --quick)")
    p.add_argument("--child", metavar="SPEC", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child_main(args.child)
    names = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    names = names or [name for name, scenario in SCENARIOS.items() if scenario.default]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenario(s) {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 3)
    report = run_benchmarks(names, args.quick, repeat, progress=lambda m: print(m, file=sys.stderr, flush=True))
    runs = [RunResult(**r) for s in report["scenarios"].values() for r in s["runs"]]
    m = report["machine"]
    print(f"\n{m['nproc']} x {m['cpu']}, {m['memory_gib']} GiB, Python {m['python']}, {m['event_loop']}")
    print(format_table(runs))
    for t in report["targets"]:
        print(f"{'MET    ' if t['met'] else 'NOT MET'} {t['target']}: {t['measured']}")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    print(f"results written to {args.out}")
    return 0 if all(r.all_scheduled for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
