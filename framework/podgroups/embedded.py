"""Workloads and PodGroups in the embedded store (the cluster ``outrigger apply`` changes): applying them
from manifests as the API server would, and printing them as ``kubectl get`` and ``kubectl describe``
do on a 1.37 API server.

- :func:`apply_object` adds or replaces one object, keeping its uid and (for a PodGroup applied again
  without a status) its status, as the status is its own subresource; ``metadata.generation`` starts at
  1 and moves with each change of the spec; every change gets a new resourceVersion.
- :func:`pod_group_rows` / :func:`workload_rows`: ``kubectl get podgroups`` / ``workloads`` columns
  (``NAME``, ``AGE``: the API server's table for these types has no other column).
- :func:`describe_pod_group`: ``kubectl describe podgroup``'s text.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

from pluginhost.workload import PodGroup, Workload

from .store import PodGroupStore

__all__ = ["apply_object", "describe_pod_group", "pod_group_rows", "workload_rows"]


def apply_object(store: PodGroupStore, obj: PodGroup | Workload, dry_run: bool = False) -> str:
    """Add or replace ``obj`` in ``store``: ``created``, ``configured`` or ``unchanged``. A failed decode
    raises :class:`~framework.podgroups.store.PodGroupDecodeError` and changes nothing."""
    kind = type(obj).__name__
    old = store.get(obj.namespace, obj.name) if kind == "PodGroup" else store.workload(obj.namespace, obj.name)
    raw = copy.deepcopy(obj.raw) if obj.raw else {}
    raw.setdefault("apiVersion", obj.api_version)
    raw.setdefault("kind", kind)
    meta = raw.setdefault("metadata", {})
    meta.setdefault("namespace", obj.namespace)
    if old is not None and old.raw.get("spec") == raw.get("spec") and (
            "status" not in raw or old.raw.get("status") == raw.get("status")) and _same_meta(old.raw, raw):
        return "unchanged"
    meta["uid"] = old.uid if old is not None else obj.uid
    generation = old.generation if old is not None else 0
    if old is None or old.raw.get("spec") != raw.get("spec"):
        generation += 1
    meta["generation"] = generation
    meta.setdefault("creationTimestamp", _rfc3339(old.creation_timestamp if old is not None and
                                                  old.creation_timestamp else time.time()))
    if isinstance(old, PodGroup) and "status" not in raw and old.raw.get("status"):
        raw["status"] = copy.deepcopy(old.raw["status"])
    store.decode(kind, raw)  # checked before anything changes
    if not dry_run:
        meta["resourceVersion"] = str(store.next_version())
        store.apply(kind, raw)
    return "created" if old is None else "configured"


def _same_meta(old: dict[str, Any], new: dict[str, Any]) -> bool:
    keep = ("labels", "annotations")
    old_meta, new_meta = old.get("metadata") or {}, new.get("metadata") or {}
    return all(old_meta.get(k) == new_meta.get(k) for k in keep)


def _rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(ts)))


def _age(created: float, now: float) -> str:
    """kubectl's ``HumanDuration`` of an object's age."""
    seconds = max(0, int(now - created))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d" if days < 730 else f"{days // 365}y"


def _rows(objects: Sequence[PodGroup | Workload], all_namespaces: bool, now: float | None) -> list[list[str]]:
    now = time.time() if now is None else now
    head = ["NAMESPACE", "NAME", "AGE"] if all_namespaces else ["NAME", "AGE"]
    rows = [head]
    for obj in sorted(objects, key=lambda o: (o.namespace, o.name)):
        row = [obj.name, _age(obj.creation_timestamp, now)]
        rows.append([obj.namespace, *row] if all_namespaces else row)
    return rows


def pod_group_rows(groups: Sequence[PodGroup], all_namespaces: bool = False,
                   now: float | None = None) -> list[list[str]]:
    """``kubectl get podgroups``: the header, then a row per group by namespace and name."""
    return _rows(groups, all_namespaces, now)


def workload_rows(workloads: Sequence[Workload], all_namespaces: bool = False,
                  now: float | None = None) -> list[list[str]]:
    """``kubectl get workloads``: as :func:`pod_group_rows`."""
    return _rows(workloads, all_namespaces, now)


def _policy(pg: PodGroup) -> list[str]:
    if pg.is_gang:
        return ["  Scheduling Policy:", "    Gang:", f"      Min Count:  {pg.min_count}"]
    return ["  Scheduling Policy:", "    Basic:"]


def describe_pod_group(pg: PodGroup, members: Callable[[], Sequence[str]] | None = None) -> str:
    """``kubectl describe podgroup``: the object's fields, then its conditions, then ``Events: <none>``
    (the scheduler writes no events on PodGroups). ``members`` (optional): the names of its pods, shown
    as Outrigger's own ``Pods:`` line."""
    lines = [f"Name:         {pg.name}", f"Namespace:    {pg.namespace}",
             "Labels:       " + (_pairs(pg.labels) or "<none>"),
             "Annotations:  " + (_pairs(pg.annotations) or "<none>"),
             f"API Version:  {pg.api_version}", "Kind:         PodGroup", "Spec:"]
    if pg.priority is not None:
        lines.append(f"  Priority:             {pg.priority}")
    if pg.priority_class_name:
        lines.append(f"  Priority Class Name:  {pg.priority_class_name}")
    lines += _policy(pg)
    if pg.topology_keys:
        lines += ["  Scheduling Constraints:", "    Topology:", *(f"      Key:  {k}" for k in pg.topology_keys)]
    if pg.workload_ref is not None:
        lines += ["  Workload Ref:", f"    Template Name:  {pg.workload_ref.template_name}",
                  f"    Workload Name:  {pg.workload_ref.workload_name}"]
    if pg.conditions:
        lines += ["Status:", "  Conditions:"]
        for c in pg.conditions:
            lines += [f"    Last Transition Time:  {c.last_transition_time}", f"    Message:               {c.message}"]
            if c.observed_generation:
                lines.append(f"    Observed Generation:   {c.observed_generation}")
            lines += [f"    Reason:                {c.reason}", f"    Status:                {c.status}",
                      f"    Type:                  {c.type}"]
    if members is not None:
        names = list(members())
        lines.append("Pods:         " + (", ".join(names) if names else "<none>"))
    lines.append("Events:       <none>")
    return "\n".join(lines) + "\n"


def _pairs(values: dict[str, str]) -> str:
    return "\n              ".join(f"{k}={v}" for k, v in sorted(values.items()))
