"""kube-scheduler's scores, read from its log at ``--vmodule=schedule_one=10``: every Score plugin's
weighted score on every node, and each node's total, for every pod it scored.

::

    scores = parse_kube_scores(log_text)
    scores["default/web-0"].best()      # the nodes with the highest total
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["PodScores", "parse_kube_scores"]


_SCORED = re.compile(r'"Plugin scored node for pod".*? pod="([^"]+)" plugin="([^"]+)" node="([^"]+)" score=(-?\d+)')
_TOTAL = re.compile(r'"Calculated node\'s final score for pod".*? pod="([^"]+)" node="([^"]+)" score=(-?\d+)')


@dataclass
class PodScores:
    """One pod's last scoring: node -> plugin -> weighted score, and node -> total."""

    plugins: dict[str, dict[str, int]] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)

    def best(self) -> set[str]:
        if not self.totals:
            return set()
        top = max(self.totals.values())
        return {n for n, t in self.totals.items() if t == top}


def parse_kube_scores(text: str) -> dict[str, PodScores]:
    """``namespace/name`` -> the pod's scores from a kube-scheduler log at ``schedule_one=10``.

    A pod scored again (a later attempt) starts over: the first plugin line for a node it already
    has a score of that plugin for begins a new table.
    """
    out: dict[str, PodScores] = {}
    for line in text.splitlines():
        m = _SCORED.search(line)
        if m is not None:
            pod, plugin, node, score = m.group(1), m.group(2), m.group(3), int(m.group(4))
            entry = out.setdefault(pod, PodScores())
            if plugin in entry.plugins.get(node, {}) and entry.totals:
                entry = out[pod] = PodScores()
            entry.plugins.setdefault(node, {})[plugin] = score
            continue
        m = _TOTAL.search(line)
        if m is not None:
            entry = out.setdefault(m.group(1), PodScores())
            entry.totals[m.group(2)] = int(m.group(3))
    return out
