"""The PodGroups and Workloads the scheduler knows, and the state of each group's pods:
:class:`PodGroupStore`, one per scheduler (``cache.podgroups``), filled by the cluster source.

Both sources feed it the same way, as they feed the DRA store: the embedded store applies the
documents a user gives (``outrigger apply``), a live cluster's informer applies what the API server
sends. Each object is decoded strictly on the way in (:meth:`PodGroupStore.apply`; a failure is a
:class:`PodGroupDecodeError` naming the field, and changes nothing) and every change is told to the
listeners as ``listener(kind, old, new)`` (``old`` None for an addition, ``new`` None for a deletion):
the scheduler turns a PodGroup's into the cluster event ``PodGroup`` Add, Update or Delete.

The pods of a group (every pod whose ``spec.schedulingGroup.podGroupName`` names it, in its namespace)
are tracked by the scheduler's object store (:meth:`PodGroupStore.track_pod`,
:meth:`PodGroupStore.untrack_pod`), whether the group exists yet or not; whether each is assumed or
bound is the cache's (the ``placement`` function it gives the store). :meth:`PodGroupStore.state`
answers kube-scheduler's ``PodGroupState`` from both: GangScheduling reads ``all_pods_count`` and
``scheduled_pods_count`` (assumed plus bound).

The PodGroup cycle writes the group's ``PodGroupInitiallyScheduled`` condition through
:attr:`PodGroupStore.writer`, a :class:`PodGroupStatusWriter`: :class:`MemoryPodGroupStatusWriter`
(this store, the embedded cluster's API server) unless a live source sets its own (a strategic-merge
PATCH of ``status.conditions``).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from pluginhost.decode import FieldError
from pluginhost.manifest import decode_pod_group, decode_workload
from pluginhost.model import Pod
from pluginhost.workload import PodGroup, PodGroupCondition, Workload

__all__ = [
    "ASSIGNED",
    "ASSUMED",
    "POD_GROUP_RESOURCE",
    "WORKLOAD_KINDS",
    "GroupState",
    "MemoryPodGroupStatusWriter",
    "PodGroupDecodeError",
    "PodGroupListener",
    "PodGroupStatusWriter",
    "PodGroupStore",
    "pod_group_manifest",
]

#: The ClusterEvent resource of a PodGroup change (kube-scheduler's ``fwk.PodGroup``).
POD_GROUP_RESOURCE = "PodGroup"
#: The kinds :meth:`PodGroupStore.apply` takes, both namespaced.
WORKLOAD_KINDS = ("Workload", "PodGroup")
#: What the cache's ``placement(uid)`` answers for a pod it holds.
ASSUMED, ASSIGNED = "assumed", "assigned"

#: ``listener(kind, old, new)`` after every change (see the module docstring).
PodGroupListener = Callable[[str, Any, Any], None]
_DECODERS: dict[str, Callable[[Mapping[str, Any]], PodGroup | Workload]] = {
    "PodGroup": decode_pod_group,
    "Workload": decode_workload,
}


class PodGroupDecodeError(FieldError):
    """A PodGroup or Workload that does not decode: the kind, the object (``namespace/name`` when its
    name could be read) and the field."""

    def __init__(self, kind: str, ident: str, error: FieldError) -> None:
        super().__init__(error.path, error.reason)
        self.kind = kind
        self.ident = ident
        where = f"{kind} {ident}" if ident else kind
        self.args = (f"{where}: {error}",)


class PodGroupStatusWriter(Protocol):
    """Where the PodGroup cycle's status writes go: the embedded store itself, or a cluster's API server."""

    async def write_condition(self, pg: PodGroup, condition: PodGroupCondition) -> None:
        """Set ``condition`` in ``pg``'s ``status.conditions`` (replacing the one of its type), as
        kube-scheduler's strategic-merge patch of the status subresource does. A group that is gone is
        not an error (the write is dropped)."""
        ...


def _ident(obj: object) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        return ""
    namespace = meta.get("namespace")
    return f"{namespace if isinstance(namespace, str) and namespace else 'default'}/{meta['name']}"


class GroupState:
    """The pods of one group as the cache knows them now (kube-scheduler's ``PodGroupState``, read by
    GangScheduling and PodGroupPodsCount; :class:`pluginhost.placement.PodGroupState`)."""

    __slots__ = ("_members", "_node_of", "_placement")

    def __init__(self, members: Mapping[str, Pod], placement: Callable[[str], str | None],
                 node_of: Callable[[str], str | None] = lambda uid: None) -> None:
        self._members = members
        self._placement = placement
        self._node_of = node_of

    def all_pods(self) -> frozenset[str]:
        return frozenset(self._members)

    def all_pods_count(self) -> int:
        return len(self._members)

    def unscheduled_pods(self) -> dict[str, Pod]:
        return {uid: pod for uid, pod in self._members.items() if self._placement(uid) is None}

    def assumed_pods(self) -> frozenset[str]:
        return frozenset(uid for uid in self._members if self._placement(uid) == ASSUMED)

    def assigned_pods(self) -> frozenset[str]:
        return frozenset(uid for uid in self._members if self._placement(uid) == ASSIGNED)

    def scheduled_pods(self) -> list[Pod]:
        """The assumed and bound pods, each with ``node_name`` the node the cache holds it on."""
        out = []
        for uid, pod in self._members.items():
            if self._placement(uid) is not None:
                node = self._node_of(uid) or pod.node_name
                out.append(pod if pod.node_name == node else dataclasses.replace(pod, node_name=node))
        return out

    def scheduled_pods_count(self) -> int:
        return sum(1 for uid in self._members if self._placement(uid) is not None)


def _nowhere(uid: str) -> str | None:
    return None


class PodGroupStore:
    """The PodGroups and Workloads (``pod_groups``, ``workloads``: keyed ``namespace/name``, the source's
    versions) and the pods of each group (see the module docstring)."""

    def __init__(self, placement: Callable[[str], str | None] = _nowhere,
                 node_of: Callable[[str], str | None] = _nowhere) -> None:
        self.pod_groups: dict[str, PodGroup] = {}
        self.workloads: dict[str, Workload] = {}
        #: ``placement(uid)``: :data:`ASSUMED`, :data:`ASSIGNED`, or None for a pod not in the cache.
        self.placement = placement
        #: ``node_of(uid)``: the node the cache holds the pod on, None for a pod not in the cache.
        self.node_of = node_of
        self._members: dict[str, dict[str, Pod]] = {}  # group key -> uid -> pod
        self._group_of: dict[str, str] = {}  # uid -> group key
        self._listeners: list[PodGroupListener] = []
        #: Advances with every change of the objects.
        self.generation = 0
        self._versions = itertools.count(1_000_000_001)
        #: Takes the PodGroup cycle's condition writes (the embedded default writes into this store).
        self.writer: PodGroupStatusWriter = MemoryPodGroupStatusWriter(self)

    def __len__(self) -> int:
        return len(self.pod_groups) + len(self.workloads)

    def next_version(self) -> int:
        """A new resourceVersion for an object changed in this store (the embedded cluster's)."""
        return next(self._versions)

    def add_listener(self, listener: PodGroupListener) -> None:
        """Call ``listener(kind, old, new)`` after every change :meth:`put` and :meth:`remove` make."""
        self._listeners.append(listener)

    def remove_listener(self, listener: PodGroupListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    # ---- the source's objects ------------------------------------------------------------------

    @staticmethod
    def decode(kind: str, obj: Mapping[str, Any]) -> PodGroup | Workload:
        """``obj`` (API JSON) decoded as ``kind``, strictly; :class:`PodGroupDecodeError` names what is wrong."""
        decoder = _DECODERS.get(kind)
        if decoder is None:
            raise PodGroupDecodeError(kind, "", FieldError("kind", f"expected one of {', '.join(WORKLOAD_KINDS)}"))
        try:
            return decoder(obj)
        except FieldError as exc:
            raise PodGroupDecodeError(kind, _ident(obj), exc) from None

    def apply(self, kind: str, obj: Mapping[str, Any]) -> PodGroup | Workload:
        """Add or replace an object from its API JSON (``kind`` one of :data:`WORKLOAD_KINDS`); the object
        as stored. A failed decode raises :class:`PodGroupDecodeError` and changes nothing."""
        new = self.decode(kind, obj)
        self.put(new)
        return new

    def put(self, new: PodGroup | Workload) -> None:
        """Add or replace a decoded object."""
        kind = type(new).__name__
        table = self._table(kind)
        old = table.get(new.key)
        table[new.key] = new
        self._changed(kind, old, new)

    def remove(self, kind: str, namespace: str, name: str) -> PodGroup | Workload | None:
        """Delete an object; the old object, None if absent."""
        old: PodGroup | Workload | None = self._table(kind).pop(f"{namespace}/{name}", None)
        if old is not None:
            self._changed(kind, old, None)
        return old

    def _table(self, kind: str) -> dict[str, Any]:
        if kind == "PodGroup":
            return self.pod_groups
        if kind == "Workload":
            return self.workloads
        raise PodGroupDecodeError(kind, "", FieldError("kind", f"expected one of {', '.join(WORKLOAD_KINDS)}"))

    def _changed(self, kind: str, old: Any, new: Any) -> None:
        self.generation += 1
        for listener in list(self._listeners):
            listener(kind, old, new)

    # ---- reading -------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> PodGroup | None:
        """The PodGroup ``namespace/name``, None when there is none."""
        return self.pod_groups.get(f"{namespace}/{name}")

    def workload(self, namespace: str, name: str) -> Workload | None:
        return self.workloads.get(f"{namespace}/{name}")

    def group_of(self, pod: Pod) -> PodGroup | None:
        """The PodGroup ``pod`` names (None for a pod without one, or whose group does not exist yet)."""
        return None if pod.scheduling_group is None else self.get(pod.namespace, pod.scheduling_group)

    # ---- the pods of each group ----------------------------------------------------------------

    def track_pod(self, pod: Pod) -> None:
        """A pod added or changed (pending or bound): a member of the group it names, if any."""
        key = None if pod.scheduling_group is None else f"{pod.namespace}/{pod.scheduling_group}"
        previous = self._group_of.get(pod.uid)
        if previous is not None and previous != key:
            self._drop(previous, pod.uid)
        if key is None:
            return
        self._members.setdefault(key, {})[pod.uid] = pod
        self._group_of[pod.uid] = key

    def untrack_pod(self, pod: Pod) -> None:
        """A pod deleted: no longer a member of its group."""
        key = self._group_of.get(pod.uid)
        if key is not None:
            self._drop(key, pod.uid)

    def _drop(self, key: str, uid: str) -> None:
        members = self._members.get(key)
        if members is not None:
            members.pop(uid, None)
            if not members:
                del self._members[key]
        self._group_of.pop(uid, None)

    def members(self, namespace: str, name: str) -> list[Pod]:
        """Every pod naming the group ``namespace/name``, in the order they were first seen."""
        return list(self._members.get(f"{namespace}/{name}", {}).values())

    def state(self, namespace: str, name: str) -> GroupState:
        """The state of the group's pods now (an empty state for a group no pod names)."""
        return GroupState(dict(self._members.get(f"{namespace}/{name}", {})), self.placement, self.node_of)


class MemoryPodGroupStatusWriter:
    """The embedded cluster's PodGroup condition writes: into the store itself, with a new resourceVersion,
    as the API server would (its listeners hear an update)."""

    def __init__(self, store: PodGroupStore) -> None:
        self.store = store

    async def write_condition(self, pg: PodGroup, condition: PodGroupCondition) -> None:
        current = self.store.get(pg.namespace, pg.name)
        if current is None or current.uid != pg.uid:
            return
        raw = copy.deepcopy(current.raw) if current.raw else _manifest(current)
        meta = raw.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.store.next_version())
        status = raw.setdefault("status", {})
        kept = [c for c in status.get("conditions") or [] if c.get("type") != condition.type]
        status["conditions"] = [*kept, condition.as_dict()]
        self.store.apply("PodGroup", raw)


def pod_group_manifest(pg: PodGroup) -> dict[str, Any]:
    """``pg`` as API JSON: a copy of the object as decoded, or for a group built in code (no manifest),
    the fields the model has."""
    return copy.deepcopy(pg.raw) if pg.raw else _manifest(pg)


def _manifest(pg: PodGroup) -> dict[str, Any]:
    # A group built in code has no manifest: what a condition write needs to start from.
    policy: dict[str, Any] = {"gang": {"minCount": pg.min_count}} if pg.is_gang else {"basic": {}}
    meta: dict[str, Any] = {"name": pg.name, "namespace": pg.namespace, "uid": pg.uid,
                            "resourceVersion": pg.resource_version}
    if pg.generation:
        meta["generation"] = pg.generation
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    # Everything scheduling reads of the spec, so a group retried after the write is the same group.
    if pg.priority is not None:
        spec["priority"] = pg.priority
    if pg.priority_class_name:
        spec["priorityClassName"] = pg.priority_class_name
    alpha = pg.api_version.endswith("v1alpha2")  # a 1.36 group: the mode is a string, no preemptionPolicy
    if pg.disruption_mode:
        spec["disruptionMode"] = ({"Single": "Pod", "All": "PodGroup"}[pg.disruption_mode] if alpha
                                  else {pg.disruption_mode.lower(): {}})
    if pg.preemption_policy and not alpha:
        spec["preemptionPolicy"] = pg.preemption_policy
    if pg.topology_keys:
        spec["schedulingConstraints"] = {"topology": [{"key": k} for k in pg.topology_keys]}
    return {"apiVersion": pg.api_version, "kind": "PodGroup", "metadata": meta, "spec": spec}
