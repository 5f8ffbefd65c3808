"""``outrigger demo``: a generated cluster and workload, scheduled end to end (framework/cli/demorun.py)."""

from __future__ import annotations

import argparse

from .registry import command

__all__ = ["DEFAULT_CONSOLE", "cmd_demo"]

#: Where ``demo --console`` serves the console (plain HTTP, loopback).
DEFAULT_CONSOLE = "127.0.0.1:10251"


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=300)
    p.add_argument("--pods", type=int, default=3000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--plugins", metavar="FILE",
                   help="use these remote plugin endpoints instead of launching the example plugin hosts")
    p.add_argument("--in-tree-only", action="store_true", help="no remote plugins: in-tree plugins only")
    p.add_argument("--console", nargs="?", const=DEFAULT_CONSOLE, default="", metavar="ADDR",
                   help=f"serve the web console on ADDR (default {DEFAULT_CONSOLE}), print its address and keep "
                        "serving it after the summary until Ctrl-C (docs/console.md)")


@command("demo", "schedule a generated cluster and workload end to end", _demo_args, examples="""\
  outrigger demo
  outrigger demo --nodes 40 --pods 300 --in-tree-only
  outrigger demo --console                           # then open http://127.0.0.1:10251/ui/""")
def cmd_demo(args: argparse.Namespace) -> int:
    from .demorun import run_demo

    return run_demo(nodes=args.nodes, pods=args.pods, seed=args.seed, plugins=args.plugins,
                    remote=not args.in_tree_only, console=args.console)
