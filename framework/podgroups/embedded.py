"""Workloads and PodGroups in the embedded store (the cluster ``outrigger apply`` changes): applying them
from manifests as the API server would, and printing them as ``kubectl get`` and ``kubectl describe``
do on a 1.37 API server.

- :func:`apply_object` adds or replaces one object, keeping its uid and (for a PodGroup applied again
  without a status) its status, as the status is its own subresource; every change gets a new
  resourceVersion. Like a 1.37 API server, the store gives these objects no ``metadata.generation`` (so
  a condition's ``observedGeneration`` is 0, left out); one the manifest gives is kept.
- :func:`pod_group_rows` / :func:`workload_rows`: ``kubectl get podgroups`` (``NAME``, ``POLICY``,
  ``WORKLOAD``, ``STATUS``, ``AGE``) / ``workloads`` (``NAME``, ``AGE``), the API server's tables.
- :func:`describe_pod_group`: ``kubectl describe podgroup``'s text.

The printing is the CLI's (:mod:`clients.printers`, :mod:`clients.describe`), from each object as API JSON.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from typing import Any

from clients.describe import describe_object
from clients.printers import POD_GROUP_COLUMNS, human_duration, pod_group_row
from pluginhost.workload import PodGroup, Workload

from .store import PodGroupStore, pod_group_manifest

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


def pod_group_rows(groups: Sequence[PodGroup], all_namespaces: bool = False,
                   now: float | None = None) -> list[list[str]]:
    """``kubectl get podgroups``: the header, then a row per group by namespace and name
    (:func:`clients.printers.pod_group_row`, the columns ``outrigger get podgroups`` prints)."""
    now = time.time() if now is None else now
    head = ["NAMESPACE", *POD_GROUP_COLUMNS] if all_namespaces else list(POD_GROUP_COLUMNS)
    return [head, *(pod_group_row(pod_group_manifest(g), now, namespace=all_namespaces)
                    for g in sorted(groups, key=lambda g: (g.namespace, g.name)))]


def workload_rows(workloads: Sequence[Workload], all_namespaces: bool = False,
                  now: float | None = None) -> list[list[str]]:
    """``kubectl get workloads``: ``NAME``, ``AGE`` (the API server's table for Workloads has no other)."""
    now = time.time() if now is None else now
    rows = [["NAMESPACE", "NAME", "AGE"] if all_namespaces else ["NAME", "AGE"]]
    for w in sorted(workloads, key=lambda w: (w.namespace, w.name)):
        row = [w.name, human_duration(now - w.creation_timestamp)]
        rows.append([w.namespace, *row] if all_namespaces else row)
    return rows


def describe_pod_group(pg: PodGroup, members: Callable[[], Sequence[str]] | None = None) -> str:
    """``kubectl describe podgroup``'s text (:func:`clients.describe.describe_object`: every field of the
    object, then ``Events: <none>``: the scheduler writes no events on PodGroups). ``members``
    (optional): the names of its pods, shown as Outrigger's own ``Pods:`` line."""
    extra = [] if members is None else [("Pods", ", ".join(members()) or "<none>")]
    return describe_object(pod_group_manifest(pg), extra)
