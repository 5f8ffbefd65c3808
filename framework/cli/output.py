"""How ``outrigger`` commands print what they were asked for: ``-o json`` and ``-o yaml`` as documents,
``-o table`` as an aligned plain-text table (kubectl style)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import yaml

__all__ = ["emit", "table", "utc"]


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Rows as an aligned plain-text table (kubectl style)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def emit(output: str, data: Any, as_table: Callable[[], str]) -> None:
    """Print ``data`` as JSON or YAML, or ``as_table()`` for ``-o table``."""
    if output == "json":
        print(json.dumps(data, indent=2))
    elif output == "yaml":
        print(yaml.safe_dump(data, sort_keys=False, default_flow_style=False), end="")
    else:
        print(as_table())


def utc(ts: float) -> str:
    """A Unix time as an RFC 3339 UTC timestamp, to the second."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
