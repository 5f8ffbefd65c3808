"""Watching the framework: ``outrigger watch`` streams its scheduling events, ``outrigger trace`` shows
a pod's last scheduling attempt as a span tree, ``outrigger debug-scores`` its top nodes' scores,
``outrigger shadow-report`` what the shadow plugins found on live cycles."""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml

from .flags import OUTPUTS, add_namespace, add_output, add_server, client, pod_ref
from .output import emit, table
from .registry import command

__all__ = ["cmd_debug_scores", "cmd_shadow_report", "cmd_trace", "cmd_watch", "format_shadow_report"]

_EVENT_NAMES = ("bound", "unschedulable", "preempted", "applied", "deleted", "error", "nominated")


def _watch_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", type=int, default=0, metavar="SEQ", help="only events after this sequence number")
    p.add_argument("--type", action="append", choices=_EVENT_NAMES, dest="types", default=None,
                   help="only events of this type (repeatable)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="stop after this long")
    p.add_argument("--count", type=int, default=None, metavar="N", help="stop after N events")
    p.add_argument("--no-replay", action="store_true", help="only live events, not the retained ones")
    p.add_argument("-o", "--output", choices=OUTPUTS, default="table",
                   help="table: one line per event; json: one object per line; yaml: one document each")
    add_server(p)


@command("watch", "stream scheduling events (reconnects and resumes if the stream breaks)", _watch_args,
         examples="""\
  outrigger watch                                    # retained events, then live ones, until Ctrl-C
  outrigger watch --type bound --type unschedulable --timeout 60
  outrigger watch --since 1200 -o json""")
def cmd_watch(args: argparse.Namespace) -> int:
    from clients.types import EventType

    types = [EventType[t.upper()] for t in args.types or []]
    with client(args) as c:
        c.ping()  # an unreachable address is an error now; later breaks are waited out and resumed
        stream = c.watch(since=args.since, types=types, replay=not args.no_replay, timeout=args.timeout)
        with stream:
            for n, ev in enumerate(stream, 1):
                if args.output == "json":
                    print(json.dumps(ev.to_dict()), flush=True)
                elif args.output == "yaml":
                    print("---\n" + yaml.safe_dump(ev.to_dict(), sort_keys=False), end="", flush=True)
                else:
                    detail = ev.node_name if ev.type != EventType.UNSCHEDULABLE else "; ".join(ev.status.reasons)
                    print(f"{ev.sequence:>7}  {ev.type.label:<13}  {ev.object}  {detail}".rstrip(), flush=True)
                if args.count is not None and n >= args.count:
                    break
    return 0


def _trace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("pod", help="NAME or NAMESPACE/NAME")
    add_namespace(p, "default")
    p.add_argument("-o", "--output", choices=("tree", "json", "yaml"), default="tree",
                   help="output format (default tree; json and yaml carry every attribute)")
    add_server(p)


@command("trace", "the span tree of a pod's last scheduling attempt (serve --trace-store N)", _trace_args,
         examples="""\
  outrigger trace web-1
  outrigger trace prod/web-1 -o json""")
def cmd_trace(args: argparse.Namespace) -> int:
    from ..observe.tracecli import format_tree

    ns, name = pod_ref(args.pod, args.namespace)
    with client(args) as c:
        spans = c.get_trace(name, ns)
    emit(args.output, [s.to_dict() for s in spans], lambda: format_tree(spans))
    return 0


def _debug_scores_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("pod", help="NAME or NAMESPACE/NAME")
    add_namespace(p, "default")
    add_output(p)
    add_server(p)


@command("debug-scores", "a pod's top-N per-plugin scores (serve --debug-scores N, or switched on over HTTP)",
         _debug_scores_args, examples="""\
  outrigger debug-scores web-1
  outrigger debug-scores prod/web-1 -o json""")
def cmd_debug_scores(args: argparse.Namespace) -> int:
    from ..observe.debugscores import format_table

    ns, name = pod_ref(args.pod, args.namespace)
    with client(args) as c:
        data = c.debug_scores(name, ns).to_dict()

    def as_table() -> str:
        head = (f"pod {data['pod']} attempt {data['attempt']}: {data['scored_nodes']} nodes scored"
                + (f", selected {data['selected']}" if data.get("selected") else ""))
        return head + "\n" + format_table(data)

    emit(args.output, data, as_table)
    return 0


def _shadow_report_args(p: argparse.ArgumentParser) -> None:
    add_output(p)
    add_server(p)


@command("shadow-report", "what the shadow plugins found on live cycles (RemotePlugins shadow blocks)",
         _shadow_report_args, examples="""\
  outrigger shadow-report
  outrigger shadow-report -o json""")
def cmd_shadow_report(args: argparse.Namespace) -> int:
    with client(args) as c:
        report = c.shadow_report()
    emit(args.output, report, lambda: format_shadow_report(report))
    return 0


def format_shadow_report(report: list[dict[str, Any]]) -> str:
    """One line per shadow plugin (its counts and latency), then its examples."""
    heads = ("PLUGIN", "ENDPOINT", "OBSERVED", "EVALUATED", "DROPPED", "ERRORS", "TIMEOUTS", "CHANGED",
             "REJECTED", "PLACED", "SCORE", "P50(ms)", "P99(ms)")
    keys = ("plugin", "endpoint", "observed", "evaluated", "dropped", "errors", "timeouts", "changed", "rejected",
            "placed", "scoreChanged")
    rows = [[r[k] for k in keys] + [r["latencyMs"][q] for q in ("p50", "p99")]
            for r in report]
    out = [table(heads, rows)]
    for r in report:
        examples = r["examples"]
        if not examples:
            continue
        out.append(f"\nexamples of {r['plugin']} ({r['endpoint']}):")
        out.append(table(("POD", "KIND", "LIVE NODE", "SHADOW NODE", "LIVE SCORE", "SHADOW SCORE"), [
            [e["pod"], e["kind"], e["liveNode"] or "-", e["shadowNode"] or "-",
             "-" if e["liveScore"] is None else e["liveScore"],
             "-" if e["shadowScore"] is None else f"{e['shadowScore']} (live node: {e['shadowScoreOfLiveNode']})"]
            for e in examples
        ]))
    return "\n".join(out)
