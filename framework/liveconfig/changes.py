"""What a new configuration changes, decided before anything is applied: the fields that need a restart
(:func:`restart_problems`, :func:`queue_sort_problem`) and the one-line summary of an applied
generation (:func:`summary`).

Only the scheduling model changes live: profiles, their plugins, order, weights and args,
``percentageOfNodesToScore``, the pods' backoff, and the RemotePlugins document's endpoints. The rest
of a KubeSchedulerConfiguration is read once, at start-up (the connection to the API server, leader
election, the profiling switches), and so is the queue's order, which every queued pod is sorted by.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import SchedulerConfig
from ..config.model import ProfileConfig

__all__ = ["RESTART_FIELDS", "queue_sort_problem", "restart_problems", "summary"]

#: Top-level KubeSchedulerConfiguration fields read only at start-up, in the order they are reported.
RESTART_FIELDS: tuple[str, ...] = (
    "leaderElection",
    "clientConnection",
    "parallelism",
    "enableProfiling",
    "enableContentionProfiling",
    "delayCacheUntilActive",
    "extenders",
    "healthzBindAddress",
    "metricsBindAddress",
)

_MISSING = object()


def restart_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """``"<field> needs a restart"`` for each start-up field whose value differs between the two
    documents (as written: an absent field differs from one set to its default)."""
    return [f"{name} needs a restart" for name in RESTART_FIELDS
            if old.get(name, _MISSING) != new.get(name, _MISSING)]


def queue_sort_problem(old: SchedulerConfig, new: SchedulerConfig) -> str | None:
    """The queue sorts every pending pod with the first profile's QueueSort plugin: another plugin
    there, or other args, need a restart."""
    before, after = old.profiles[0], new.profiles[0]
    names = before.names("queueSort"), after.names("queueSort")
    if names[0] != names[1] or any(before.plugin_args.get(n) != after.plugin_args.get(n) for n in names[1]):
        return f"{after.path or 'profiles[0]'}.plugins.queueSort needs a restart (it orders the whole queue)"
    return None


def _points(prof: ProfileConfig) -> dict[str, list[str]]:
    """Each plugin's extension points, in the order the points run."""
    out: dict[str, list[str]] = {}
    for point, refs in prof.plugins.items():
        for ref in refs:
            out.setdefault(ref.name, []).append(point)
    return out


def _profile_changes(old: ProfileConfig, new: ProfileConfig) -> list[str]:
    before, after = _points(old), _points(new)
    out = [f"plugin {n} added ({', '.join(after[n])})" for n in after if n not in before]
    out += [f"plugin {n} removed" for n in before if n not in after]
    for name, weight in new.score_weights.items():
        was = old.score_weights.get(name)
        if was is not None and was != weight and name in before:
            out.append(f"weight of {name} {was} -> {weight}")
    for name in after:
        if name not in before:
            continue
        gone = [p for p in before[name] if p not in after[name]]
        new_points = [p for p in after[name] if p not in before[name]]
        if gone:
            out.append(f"{name} no longer at {', '.join(gone)}")
        if new_points:
            out.append(f"{name} now at {', '.join(new_points)}")
        if old.plugin_args.get(name, {}) != new.plugin_args.get(name, {}):
            out.append(f"args of {name} changed")
    order = [p for p in new.plugins if [r.name for r in old.plugins.get(p, [])] != [r.name for r in new.plugins[p]]
             and {r.name for r in old.plugins.get(p, [])} == {r.name for r in new.plugins[p]}]
    out += [f"order at {p} changed" for p in order]
    if old.percentage_of_nodes_to_score != new.percentage_of_nodes_to_score:
        out.append(f"percentageOfNodesToScore {old.percentage_of_nodes_to_score} -> "
                   f"{new.percentage_of_nodes_to_score}")
    return out


def summary(old: SchedulerConfig, new: SchedulerConfig, old_endpoints: Sequence[Any] = (),
            new_endpoints: Sequence[Any] = ()) -> str:
    """What changed from ``old`` to ``new``, in one line: ``profile default-scheduler: weight of
    NodeAffinity 5 -> 1; plugin Gang added (filter, score); endpoints: gang added``; ``"no change in
    meaning"`` when nothing did (a comment, the fields' order)."""
    parts: list[str] = []
    old_names = [p.scheduler_name for p in old.profiles]
    for prof in new.profiles:
        before = old.profile(prof.scheduler_name)
        if before is None:
            parts.append(f"profile {prof.scheduler_name} added")
            continue
        changes = _profile_changes(before, prof)
        if changes:
            parts.append(f"profile {prof.scheduler_name}: {', '.join(changes)}")
    parts += [f"profile {n} removed" for n in old_names if new.profile(n) is None]
    for label, a, b in (("percentageOfNodesToScore", old.percentage_of_nodes_to_score,
                         new.percentage_of_nodes_to_score),
                        ("podInitialBackoffSeconds", old.pod_initial_backoff_seconds, new.pod_initial_backoff_seconds),
                        ("podMaxBackoffSeconds", old.pod_max_backoff_seconds, new.pod_max_backoff_seconds)):
        if a != b:
            parts.append(f"{label} {a} -> {b}")
    before_eps = {e.name: e for e in old_endpoints}
    after_eps = {e.name: e for e in new_endpoints}
    eps = [f"{n} added" for n in after_eps if n not in before_eps]
    eps += [f"{n} removed" for n in before_eps if n not in after_eps]
    eps += [f"{n} changed" for n, e in after_eps.items() if n in before_eps and before_eps[n] != e]
    if eps:
        parts.append(f"endpoints: {', '.join(eps)}")
    return "; ".join(parts) or "no change in meaning"
