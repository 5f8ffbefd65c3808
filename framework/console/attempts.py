"""What the console keeps of each scheduling attempt while someone looks: the Filter verdicts grouped by
rejecting plugin and reason (counts, and the first few node names of each group), the Score table of the
best nodes (raw, normalized and weighted per plugin, and the total), the chosen node, the result and the
attempt's trace id.

Bounded whatever the cluster size: :data:`TOP_NODES` scored nodes, :data:`GROUP_NODES` names per Filter
group, :data:`ATTEMPTS_PER_POD` attempts per pod and :data:`MAX_PODS` pods (the least recently scheduled
pod is dropped first). A 5,000-node cluster costs the same per attempt as a 50-node one.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import numpy as np

__all__ = ["ATTEMPTS_PER_POD", "GROUP_NODES", "MAX_PODS", "TOP_NODES", "Attempt", "AttemptLog",
           "filter_groups", "top_scores"]

#: Scored nodes kept per attempt (the best ones, by total; ties by node name).
TOP_NODES = 10
#: Node names kept per Filter group (the rest are counted).
GROUP_NODES = 20
#: Attempts kept per pod (the latest ones).
ATTEMPTS_PER_POD = 8
#: Pods whose attempts are kept.
MAX_PODS = 2000


def filter_groups(statuses: dict[str, Any]) -> list[dict[str, Any]]:
    """Rejected nodes grouped by (plugin, code, reasons): count and the first :data:`GROUP_NODES`
    names, largest group first."""
    groups: dict[tuple[str, str, tuple[str, ...]], dict[str, Any]] = {}
    for node, st in statuses.items():
        key = (st.plugin or "", st.code.name, tuple(st.reasons))
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"plugin": key[0], "code": key[1], "reasons": list(key[2]), "count": 0, "nodes": []}
        g["count"] += 1
        if len(g["nodes"]) < GROUP_NODES:
            g["nodes"].append(node)
    out = sorted(groups.values(), key=lambda g: (-g["count"], g["plugin"], g["reasons"]))
    for g in out:
        g["nodes"].sort()
    return out


def top_scores(names: Any, rows: Any, outcome: Any, top: int = TOP_NODES) -> list[dict[str, Any]]:
    """The ``top`` best nodes of a recorded Score run, explain's shape per node:
    ``{"node", "total", "scores": {plugin: {"raw", "normalized", "weighted"}}}``."""
    totals = outcome.totals
    n = int(totals.shape[0])
    k = min(top, n)
    if k <= 0:
        return []
    pick = np.argpartition(-totals, k - 1)[:k] if k < n else np.arange(n)
    chosen = sorted(zip(totals[pick].tolist(), [names[r] for r in rows[pick].tolist()], pick.tolist(), strict=True),
                    key=lambda t: (-t[0], t[1]))
    order = np.asarray([i for _, _, i in chosen], dtype=np.int64)
    # Whole columns to Python ints at once: a numpy scalar read per cell costs more than the rest.
    columns = {plugin: (ps.raw[order].tolist(), ps.normalized[order].tolist(), ps.weighted[order].tolist())
               for plugin, ps in outcome.by_plugin.items()}
    return [{
        "node": name, "total": total,
        "scores": {plugin: {"raw": r[j], "normalized": m[j], "weighted": w[j]}
                   for plugin, (r, m, w) in columns.items()},
    } for j, (total, name, _) in enumerate(chosen)]


class Attempt:
    """One scheduling attempt of a pod, filled in as the cycle runs."""

    __slots__ = ("attempt", "duration", "feasible", "filter", "nodes", "pod", "profile", "result", "scored",
                 "scores", "selected", "started", "status", "trace_id")

    def __init__(self, pod: str, profile: str, attempt: int) -> None:
        self.pod = pod
        self.profile = profile
        self.attempt = attempt
        self.started = time.time()
        self.duration = 0.0
        self.result = ""
        self.status: dict[str, Any] | None = None
        self.selected = ""
        self.nodes = -1  # nodes the Filter examined
        self.feasible = -1
        self.filter: list[dict[str, Any]] = []
        self.scores: list[dict[str, Any]] = []
        self.scored = 0  # nodes scored (the table keeps the best TOP_NODES)
        self.trace_id = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod, "profile": self.profile, "attempt": self.attempt, "started": self.started,
            "durationMs": round(self.duration * 1000, 3), "result": self.result, "status": self.status,
            "selected": self.selected or None, "nodesExamined": self.nodes, "feasible": self.feasible,
            "filter": self.filter, "scores": self.scores, "scoredNodes": self.scored, "traceId": self.trace_id,
        }


class AttemptLog:
    """The kept attempts, by pod (``namespace/name``), least recently attempted pod dropped first."""

    def __init__(self, max_pods: int = MAX_PODS, per_pod: int = ATTEMPTS_PER_POD) -> None:
        self.max_pods = max_pods
        self.per_pod = per_pod
        self._pods: collections.OrderedDict[str, collections.deque[Attempt]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def add(self, attempt: Attempt) -> None:
        with self._lock:
            kept = self._pods.get(attempt.pod)
            if kept is None:
                kept = self._pods[attempt.pod] = collections.deque(maxlen=self.per_pod)
            else:
                self._pods.move_to_end(attempt.pod)
            kept.append(attempt)
            while len(self._pods) > self.max_pods:
                self._pods.popitem(last=False)

    def of(self, pod: str) -> list[Attempt]:
        with self._lock:
            return list(self._pods.get(pod, ()))

    def __len__(self) -> int:
        return len(self._pods)
