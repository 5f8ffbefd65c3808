"""Debug scores: for each scheduled pod, the top-N nodes with every Score plugin's raw, normalized and
weighted score and the total (Koordinator's ``--debug-scores``).

Switched at runtime (``PUT /debug/flags/scores?top=N`` on the framework's HTTP port, ``0`` switches it
off) or at startup (``outrigger serve --debug-scores N``). Each table is logged (logger
``outrigger.debugscores``, level INFO) and the last one of each pod is kept (bounded) for the Scheduler
API's ``GetDebugScores`` and ``outrigger debug-scores POD``. The numbers come from the same
``Framework.run_score(..., record=True)`` explain uses, so they are explain's numbers for those nodes.
A pod with a single feasible node is not scored, so it has no table (as in kube-scheduler).
"""

from __future__ import annotations

import collections
import logging
import threading
from typing import Any

import numpy as np

__all__ = ["DebugScores", "format_table"]

log = logging.getLogger("outrigger.debugscores")
log.setLevel(logging.INFO)  # the tables are what the switch asks for, whatever the root level is


class DebugScores:
    """The switch (``top``: how many nodes per table, 0 = off) and the last table of each pod."""

    def __init__(self, top: int = 0, keep: int = 1000) -> None:
        self.top = 0
        self.set_top(top)
        self.keep = keep
        self._tables: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.top > 0

    def set_top(self, top: int) -> None:
        if not isinstance(top, int) or isinstance(top, bool) or top < 0:
            raise ValueError(f"debug scores: top must be an integer >= 0 (0 switches them off), got {top!r}")
        self.top = top

    def observe(self, pod: Any, batch: Any, outcome: Any, profile: str, attempt: int) -> dict[str, Any]:
        """Keep and log the table of one Score run (``outcome`` recorded per plugin)."""
        totals = outcome.totals
        n = int(totals.shape[0])
        top = min(self.top, n)
        # Highest totals first, ties by node name (argpartition keeps this off a full sort per pod).
        pick = np.argpartition(-totals, top - 1)[:top] if 0 < top < n else np.arange(n)
        names = batch.snapshot.table.names
        rows = batch.rows
        chosen = sorted(((int(totals[i]), names[int(rows[i])], int(i)) for i in pick.tolist()),
                        key=lambda t: (-t[0], t[1]))
        nodes = []
        for total, name, i in chosen:
            nodes.append({
                "node": name,
                "total": total,
                "scores": {
                    plugin: {"raw": int(ps.raw[i]), "normalized": int(ps.normalized[i]),
                             "weighted": int(ps.weighted[i])}
                    for plugin, ps in outcome.by_plugin.items()
                },
            })
        entry: dict[str, Any] = {
            "pod": pod.key, "uid": pod.uid, "profile": profile, "attempt": attempt, "scored_nodes": n,
            "top": self.top, "selected": None, "nodes": nodes,
        }
        with self._lock:
            self._tables[pod.key] = entry
            self._tables.move_to_end(pod.key)
            while len(self._tables) > self.keep:
                self._tables.popitem(last=False)
        if log.isEnabledFor(logging.INFO):
            log.info("scores of pod %s (attempt %d, %d nodes scored, top %d):\n%s", pod.key, attempt, n,
                     len(nodes), format_table(entry))
        return entry

    def get(self, pod: str) -> dict[str, Any] | None:
        """The last table of ``pod`` (``namespace/name``), or None."""
        with self._lock:
            return self._tables.get(pod)


def format_table(entry: dict[str, Any]) -> str:
    """The table as text: one row per node, one column per plugin (``raw/normalized/weighted``)."""
    nodes = entry["nodes"]
    plugins = sorted({p for n in nodes for p in n["scores"]})
    headers = ["NODE", *plugins, "TOTAL"]
    rows = [[n["node"], *(_cell(n["scores"].get(p)) for p in plugins), str(n["total"])] for n in nodes]
    cells = [headers, *rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.append("(each plugin: raw/normalized/weighted)")
    return "\n".join(lines)


def _cell(s: dict[str, int] | None) -> str:
    return "-" if s is None else f"{s['raw']}/{s['normalized']}/{s['weighted']}"
