"""A pod's trace as the Scheduler API sends it (``GetTrace``) and as ``outrigger trace POD`` prints it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan

from clients.types import TraceSpan
from pluginhost import pb

__all__ = ["format_tree", "spans_to_proto"]

# Attributes that say what a span did, shown on its line (the rest: ``-o json``).
_SHOWN = (
    "outrigger.pod", "outrigger.attempt", "outrigger.cycle_id", "outrigger.snapshot.generation", "outrigger.result",
    "outrigger.selected_node", "outrigger.feasible_nodes", "outrigger.filter.nodes_in",
    "outrigger.filter.nodes_examined", "outrigger.filter.nodes_out", "outrigger.score.nodes",
    "outrigger.permit.waiting_plugins", "outrigger.status.code", "outrigger.status.reasons",
)


def spans_to_proto(spans: Sequence[ReadableSpan]) -> list[Any]:
    out = []
    for s in spans:
        ctx = s.context
        if ctx is None:
            continue
        out.append(pb.scheduler.TraceSpan(
            trace_id=f"{ctx.trace_id:032x}",
            span_id=f"{ctx.span_id:016x}",
            parent_span_id=f"{s.parent.span_id:016x}" if s.parent is not None else "",
            name=s.name,
            start_unix_nano=s.start_time or 0,
            end_unix_nano=s.end_time or 0,
            attributes_json=json.dumps({k: list(v) if isinstance(v, tuple) else v
                                        for k, v in (s.attributes or {}).items()}),
            status_code=s.status.status_code.name,
            status_message=s.status.description or "",
        ))
    return out


def format_tree(spans: Sequence[TraceSpan]) -> str:
    """Spans (``clients.types.TraceSpan``) as an indented tree: name, duration, the telling attributes."""
    if not spans:
        return "(no spans)"
    ids = {s.span_id for s in spans}
    children: dict[str, list[TraceSpan]] = {}
    roots = []
    for s in sorted(spans, key=lambda s: s.start_unix_nano):
        if s.parent_span_id and s.parent_span_id in ids:
            children.setdefault(s.parent_span_id, []).append(s)
        else:
            roots.append(s)
    lines = [f"trace {spans[0].trace_id}"]

    def walk(s: TraceSpan, prefix: str, last: bool, top: bool) -> None:
        attrs = s.attributes
        shown = " ".join(f"{k.removeprefix('outrigger.')}={_value(attrs[k])}" for k in _SHOWN if k in attrs)
        ms = s.duration_ms
        err = f" ERROR: {s.status_message}" if s.status_code == "ERROR" else ""
        branch = "" if top else ("└── " if last else "├── ")
        lines.append(f"{prefix}{branch}{s.name} {ms:.3f} ms {shown}{err}".rstrip())
        kids = children.get(s.span_id, [])
        for i, c in enumerate(kids):
            walk(c, prefix + ("" if top else ("    " if last else "│   ")), i == len(kids) - 1, False)

    for r in roots:
        walk(r, "", True, True)
    return "\n".join(lines)


def _value(v: Any) -> str:
    if isinstance(v, list):
        return "[" + "; ".join(str(x) for x in v) + "]"
    return str(v)
