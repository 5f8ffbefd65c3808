"""The scheduler's objects (what an API server is to kube-scheduler): :class:`ObjectStore` applies and
deletes pods, nodes, reservations, PodDisruptionBudgets and the volume plugins' objects, binds pods,
and takes a source's informer updates; :class:`EmbeddedSource` is the default source, the scheduler
being the source of truth itself."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from pluginhost.manifest import ManifestObject, ResourceObject
from pluginhost.model import RESERVATION_NAMESPACE, Node, PersistentVolumeClaim, Pod, PodDisruptionBudget, Reservation
from pluginhost.plugin import ASSIGNED_POD, ActionType, ClusterEvent
from pluginhost.snapshot import StorageObject, storage_kind
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.workload import PodGroup, Workload

from ..disruption import embedded_status
from ..dra.embedded import apply_object, release_pod, with_template_claims
from ..dra.extended import is_dra_extended_resource_name
from ..dra.store import merged_pod_status
from ..podgroups.embedded import apply_object as apply_pod_group
from ..podgroups.store import POD_GROUP_RESOURCE
from ..queue import ACTIVE, GATED
from ..reservations import EXPIRED, ReservationRecord, is_reserve_pod
from .base import SchedulerBase
from .records import BOUND, EV_APPLIED, EV_BOUND, EV_DELETED, PENDING, ApplyError, ApplyResult, PodRecord

__all__ = ["EmbeddedSource", "ObjectStore"]


class ObjectStore(SchedulerBase):
    """The scheduler's objects: pods, nodes, reservations, PodDisruptionBudgets and the volume plugins'
    objects, changed through the Scheduler API (:meth:`apply`, ``delete_*``, :meth:`bind`) or by a
    source's informers (``observe_*``, kube-scheduler's eventhandlers.go)."""

    async def apply(self, objects: Iterable[ManifestObject], *, dry_run: bool = False) -> list[ApplyResult]:
        """Create or update pods, nodes, reservations, PodDisruptionBudgets and the volume plugins' objects
        (claims, volumes, classes, CSINodes: right after nodes, so pods of the same request find them).
        Checked as a whole first: one bad object changes nothing. Reservations are applied after nodes
        and pods, PDBs last."""
        if not self.source.accepts_apply:
            raise ApplyError(
                "this framework schedules a Kubernetes cluster: create and change pods and nodes through its "
                "API server (kubectl apply)"
            )
        everything = list(objects)
        reservations = [o for o in everything if isinstance(o, Reservation)]
        self._check_reservations(reservations)
        pdbs = [o for o in everything if isinstance(o, PodDisruptionBudget)]
        self._check_pdbs(pdbs)
        storage = [o for o in everything if isinstance(o, StorageObject)]
        self._check_storage(storage)
        resources = [o for o in everything if isinstance(o, ResourceObject)]
        self._check_resources(resources)
        groups = [o for o in everything if isinstance(o, PodGroup | Workload)]
        _check_once([f"{type(o).__name__} {o.key}" for o in groups])
        plain: list[Pod | Node] = [o for o in everything if isinstance(o, Pod | Node)]
        self._check_apply(plain)
        results: list[ApplyResult] = []
        for obj in plain:
            if isinstance(obj, Node):
                action = self._check_node_action(obj)
                if not dry_run:
                    self._apply_node(obj)
                results.append(ApplyResult("Node", "", obj.name, obj.uid, action))
        for item in storage:
            action = self.cache.volumes.apply(item, dry_run=dry_run)
            namespace = item.namespace if isinstance(item, PersistentVolumeClaim) else ""
            results.append(ApplyResult(storage_kind(item), namespace, item.name, item.uid, action))
        results.extend(await self._apply_resources(resources, dry_run))
        # Workloads and PodGroups before pods, so that a gang's pods find their group.
        results.extend(ApplyResult(type(o).__name__, o.namespace, o.name, o.uid,
                                   apply_pod_group(self.cache.podgroups, o, dry_run)) for o in groups)
        for obj in plain:
            if isinstance(obj, Pod):
                uid = self._uid_by_key.get(obj.key)
                action = "created" if uid is None else "configured"
                if uid is not None:
                    obj.uid = uid
                    old = self.pods[uid].pod
                    if old.node_name and not obj.node_name:
                        obj = dataclasses.replace(obj, node_name=old.node_name)  # the binding stays
                    if old.resource_claim_statuses and not obj.resource_claim_statuses:
                        obj = with_template_claims(self.cache.dra, obj, dry_run, old.resource_claim_statuses)
                    obj = _keep_extended_status(old, obj)
                    if obj.raw and obj.raw == old.raw:
                        results.append(ApplyResult("Pod", obj.namespace, obj.name, obj.uid, "unchanged"))
                        continue
                obj = with_template_claims(self.cache.dra, obj, dry_run)
                if not dry_run:
                    await self._apply_pod(obj)
                results.append(ApplyResult("Pod", obj.namespace, obj.name, obj.uid, action))
        for res in reservations:
            action = "configured" if res.name in self.reservations.records else "created"
            if not dry_run:
                await self._apply_reservation(res)
            results.append(ApplyResult("Reservation", "", res.name, res.uid, action))
        for pdb in pdbs:
            results.append(self._apply_pdb(pdb, dry_run))
        return results

    @staticmethod
    def _check_storage(objects: list[StorageObject]) -> None:
        _check_once([f"{storage_kind(obj)} {obj.key}" for obj in objects])

    @staticmethod
    def _check_resources(objects: list[ResourceObject]) -> None:
        _check_once([f"{obj.kind} {obj.key}" for obj in objects])

    async def _apply_resources(self, objects: list[ResourceObject], dry_run: bool) -> list[ApplyResult]:
        """DRA's objects (right after storage objects, so pods of the same request find them); then the
        claims of pending pods whose templates just arrived, as the claim controller would make them."""
        results = [ApplyResult(o.kind, o.namespace, o.name, o.uid, apply_object(self.cache.dra, o, dry_run))
                   for o in objects]
        if dry_run or not any(o.kind == "ResourceClaimTemplate" for o in objects):
            return results
        for rec in list(self.pods.values()):
            if not rec.pod.node_name and rec.pod.resource_claims:
                pod = with_template_claims(self.cache.dra, rec.pod)
                if pod is not rec.pod:
                    await self._apply_pod(pod)
        return results

    def delete_pod_group(self, kind: str, namespace: str, name: str) -> PodGroup | Workload | None:
        """Remove a PodGroup or Workload from the embedded store (None when there is none)."""
        return self.cache.podgroups.remove(kind, namespace, name)

    def delete_storage(self, kind: str, namespace: str, name: str) -> StorageObject | None:
        """Remove a claim, volume, class or CSINode from the embedded store (None when there is none);
        pods the volume plugins rejected may be tried again."""
        return self.cache.volumes.remove(kind, f"{namespace}/{name}" if kind == "PersistentVolumeClaim" else name)

    def _check_pdbs(self, pdbs: list[PodDisruptionBudget]) -> None:
        seen: set[str] = set()
        for pdb in pdbs:
            if pdb.key in seen:
                raise ApplyError(f"PodDisruptionBudget {pdb.key} appears twice in one request")
            seen.add(pdb.key)

    def _apply_pdb(self, pdb: PodDisruptionBudget, dry_run: bool) -> ApplyResult:
        # Only the spec is the user's: the status is worked out when preemption reads it, as the API
        # server ignores a status sent with the object.
        old = self.pdbs.get(pdb.key)
        action = "created"
        if old is not None:
            pdb.uid = old.uid
            same = (old.selector, old.min_available, old.max_unavailable, old.labels) == (
                pdb.selector, pdb.min_available, pdb.max_unavailable, pdb.labels)
            action = "unchanged" if same else "configured"
        if not dry_run and action != "unchanged":
            self.pdbs[pdb.key] = pdb
        return ApplyResult("PodDisruptionBudget", pdb.namespace, pdb.name, pdb.uid, action)

    def delete_pdb(self, namespace: str, name: str) -> PodDisruptionBudget | None:
        """Remove a PodDisruptionBudget from the embedded store (None when there is none)."""
        return self.pdbs.pop(f"{namespace}/{name}", None)

    def _check_reservations(self, reservations: list[Reservation]) -> None:
        seen: set[str] = set()
        for res in reservations:
            if res.name in seen:
                raise ApplyError(f"Reservation {res.name} appears twice in one request")
            seen.add(res.name)
            old = self.reservations.get(res.name)
            if old is not None and old.reservation.requests != res.requests:
                raise ApplyError(
                    f"Reservation {res.name}: spec.template is immutable (delete the reservation and apply it again)"
                )
            if old is None and res.uid in self.pods:
                other = self.pods[res.uid].pod.key
                raise ApplyError(f"Reservation {res.name}: uid {res.uid!r} is already used by {other}")

    async def _apply_reservation(self, res: Reservation) -> None:
        """A new reservation is queued as its reserve pod; an existing one gets its new owners/TTL."""
        if res.name in self.reservations.records:
            self.reservations.update(res)
            return
        rec = self.reservations.add(res)
        await self._apply_pod(self.reservations.reserve_pod(rec))

    def _reservation_released(self, reserve_pod: Pod) -> None:
        # What a reservation held (and its owner did not take) is free: pods waiting for room may fit.
        self._cluster_event(ClusterEvent(ASSIGNED_POD, ActionType.Delete), reserve_pod, None)

    def delete_reservation(self, name: str, *, reason: str = "deleted") -> ReservationRecord | None:
        """Forget a reservation; what its reserve pod held is free again (pending pods are requeued)."""
        rec = self.reservations.remove(name)
        if rec is not None:
            self.delete_pod(RESERVATION_NAMESPACE, name, reason=reason)
        return rec

    def expire_reservations(self) -> list[str]:
        """Release the reservations whose TTL or expiry has passed (phase Expired); their names."""
        out = []
        for rec in self.reservations.due():
            rec.phase = EXPIRED
            rec.last_status = Status(Code.Unschedulable, (f"reservation {rec.name} expired",))
            self.delete_pod(RESERVATION_NAMESPACE, rec.name, reason="expired")
            out.append(rec.name)
        return out

    async def _reservation_loop(self) -> None:
        for _ in itertools.count():  # until the scheduler stops (the task is cancelled)
            await asyncio.sleep(self.reservation_check_seconds)
            if self.reservations.records:
                self.expire_reservations()

    def _check_apply(self, objects: list[Pod | Node]) -> None:
        seen: dict[str, str] = {}  # uid -> ident
        idents: set[str] = set()
        for obj in objects:
            kind = "Node" if isinstance(obj, Node) else "Pod"
            ident = f"{kind} {obj.key if isinstance(obj, Pod) else obj.name}"
            if ident in idents:
                raise ApplyError(f"{ident} appears twice in one request")
            idents.add(ident)
            owner = seen.get(obj.uid) if obj.uid else None
            if owner is not None:
                raise ApplyError(f"{ident} has the same uid {obj.uid!r} as {owner}")
            if obj.uid:
                seen[obj.uid] = ident
            if isinstance(obj, Pod):
                uid = self._uid_by_key.get(obj.key)
                explicit = bool(obj.raw.get("metadata", {}).get("uid")) if obj.raw else False
                if uid is not None and explicit and obj.uid != uid:
                    raise ApplyError(f"{ident}: uid {obj.uid!r} does not match the existing pod's uid {uid!r}")
                if uid is None and obj.uid in self.pods:
                    other = self.pods[obj.uid].pod.key
                    raise ApplyError(f"{ident}: uid {obj.uid!r} is already used by pod {other}")
                if uid is not None:
                    rec = self.pods[uid]
                    # A manifest without nodeName leaves the binding alone (as kubectl apply leaves a
                    # field it never set); one naming another node would move a bound pod.
                    if rec.pod.node_name and obj.node_name and obj.node_name != rec.pod.node_name:
                        raise ApplyError(
                            f"{ident}: spec.nodeName is immutable once bound (bound to {rec.pod.node_name!r})"
                        )
                    if rec.pod.node_name and obj.requests != rec.pod.requests:
                        raise ApplyError(f"{ident}: resource requests of a bound pod are immutable")

    def _check_node_action(self, node: Node) -> str:
        return "created" if node.name not in self.nodes else "configured"

    def _apply_node(self, node: Node) -> None:
        old = self.nodes.get(node.name)
        if old is not None:
            node.uid = old.uid or node.uid
        self.nodes[node.name] = node
        self.cache.add_node(node)
        self._emit(EV_APPLIED, "Node", node)
        if old is None:
            self._cluster_event(ClusterEvent("Node", ActionType.Add), None, node)
        else:
            action = ActionType(0)
            if old.labels != node.labels:
                action |= ActionType.UpdateNodeLabel
            if old.taints != node.taints or old.unschedulable != node.unschedulable:
                action |= ActionType.UpdateNodeTaint
            if old.allocatable != node.allocatable:
                action |= ActionType.UpdateNodeAllocatable
            if old.annotations != node.annotations:
                action |= ActionType.UpdateNodeAnnotation
            if old.declared_features != node.declared_features:
                action |= ActionType.UpdateNodeDeclaredFeature
            if action:
                self._cluster_event(ClusterEvent("Node", action), old, node)

    async def _apply_pod(self, pod: Pod) -> None:
        self.cache.podgroups.track_pod(pod)
        rec = self.pods.get(pod.uid)
        if rec is None:
            self.pods[pod.uid] = rec = PodRecord(pod, profile=pod.scheduler_name)
            self._uid_by_key[pod.key] = pod.uid
            self._emit(EV_APPLIED, "Pod", pod)
            if pod.node_name:
                rec.phase = BOUND
                self.cache.add_pod(pod)
                self._cluster_event(ClusterEvent(ASSIGNED_POD, ActionType.Add), None, pod)
            elif pod.scheduler_name in self.profiles:
                if pod.nominated_node_name:
                    self.nominated[pod.uid] = pod.nominated_node_name
                where = await self.queue.add(pod, pod.scheduler_name)
                self._after_enqueue(rec, where)
            else:
                rec.last_status = Status(
                    Code.UnschedulableAndUnresolvable,
                    (f"no profile for schedulerName {pod.scheduler_name!r}",),
                )
            return
        old = rec.pod
        rec.pod = pod
        self._emit(EV_APPLIED, "Pod", pod)
        if old.node_name:
            self.cache.update_pod(pod)
            if old.labels != pod.labels:
                self._cluster_event(ClusterEvent(ASSIGNED_POD, ActionType.UpdatePodLabel), old, pod)
            return
        requeued = await self.queue.update(pod)
        if requeued is not None:
            self._after_enqueue(rec, requeued)

    def _after_enqueue(self, rec: PodRecord, where: str) -> None:
        if where == GATED:
            info = self.queue.info(rec.pod.uid)
            rec.phase = PENDING
            rec.last_status = info.last_status if info else None
        elif where == ACTIVE:
            rec.phase = PENDING

    def delete_pod(self, namespace: str, name: str, *, reason: str = "deleted") -> Pod | None:
        uid = self._uid_by_key.pop(f"{namespace}/{name}", None)
        if uid is None:
            return None
        rec = self.pods.pop(uid)
        self.cache.podgroups.untrack_pod(rec.pod)
        self.nominated.pop(uid, None)
        self.queue.delete(uid)
        wp = self.waiting_pods.get(uid)
        if wp is not None:
            wp.reject("", f"pod {rec.pod.key} was deleted")
        was_placed = self.cache.remove_pod(uid) is not None
        if self.reservations.records:
            if is_reserve_pod(rec.pod):
                self.reservations.reserve_pod_deleted(rec.pod, reason)
            else:
                self.reservations.owner_deleted(rec.pod)
        if self.source.accepts_apply and (rec.pod.resource_claims or any(map(is_dra_extended_resource_name,
                                                                             rec.pod.requests))):
            release_pod(self.cache.dra, rec.pod)  # the claim controller's part, in the embedded store
        self._emit(EV_DELETED, "Pod", rec.pod, node=rec.pod.node_name)
        if was_placed or rec.pod.node_name:
            self._cluster_event(ClusterEvent(ASSIGNED_POD, ActionType.Delete), rec.pod, None)
        return rec.pod

    def delete_node(self, name: str) -> Node | None:
        node = self.nodes.pop(name, None)
        if node is None:
            return None
        self.cache.remove_node(name)
        self._emit(EV_DELETED, "Node", node)
        self._cluster_event(ClusterEvent("Node", ActionType.Delete), node, None)
        return node

    def _pod_group_changed(self, kind: str, old: Any, new: Any) -> None:
        # Only PodGroups are events (kube-scheduler does not watch Workloads).
        if kind == POD_GROUP_RESOURCE:
            self.custom_resource_changed(kind, old, new)

    def _volume_object_changed(self, kind: str, old: Any, new: Any) -> None:
        # kind is the ClusterEvent resource (PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode).
        action = ActionType.Add if old is None else ActionType.Delete if new is None else ActionType.Update
        self._cluster_event(ClusterEvent(kind, action), old, new)

    # ---- a source's informers (kube-scheduler's eventhandlers.go) ---------------------------------

    async def observe_pod(self, pod: Pod, *, spec_changed: bool = True) -> None:
        """A pod as the cluster's API now has it (added or changed). A pending pod of one of the
        profiles is queued, any bound pod is in the cache whoever bound it (confirming a pod this
        scheduler assumed), a pending pod for another scheduler is only recorded. ``spec_changed``
        False (only the status moved, e.g. this scheduler's own condition) keeps a queued pod where it is."""
        rec = self.pods.get(pod.uid)
        if rec is None:
            if self._uid_by_key.get(pod.key) is not None:
                self.delete_pod(pod.namespace, pod.name)  # the same name, a new pod: the old one is gone
            await self._apply_pod(pod)
            return
        old = rec.pod
        if pod.node_name and not old.node_name:
            self._observe_bound(rec, pod)
            return
        if not pod.node_name and not spec_changed:
            # Only the status moved: the nomination stays the scheduler's own (it may be ahead of the API).
            # An assumed pod (its binding cycle runs) is out of the nominator but keeps the nomination
            # it was scheduled with: kube-scheduler leaves assumed pods alone on update.
            nominated = rec.pod.nominated_node_name if self.cache.node_of(pod.uid) else ""
            rec.pod = dataclasses.replace(pod, nominated_node_name=self.nominated.get(pod.uid, nominated))
            info = self.queue.info(pod.uid)
            if info is not None:
                info.pod = rec.pod
            return
        await self._apply_pod(pod)

    def _observe_bound(self, rec: PodRecord, pod: Pod) -> None:
        uid = pod.uid
        self.nominated.pop(uid, None)
        self.queue.delete(uid)  # pending, or in flight: its cycle finds it bound
        wp = self.waiting_pods.get(uid)
        if wp is not None:
            wp.reject("", f"pod {pod.key} was bound to {pod.node_name!r} meanwhile")
        rec.pod = pod
        rec.phase = BOUND
        self.cache.podgroups.track_pod(pod)
        self.cache.add_pod(pod)  # confirms the pod this scheduler assumed, or places another's
        self._emit(EV_BOUND, "Pod", pod, node=pod.node_name, attempts=rec.attempts)
        self._cluster_event(ClusterEvent(ASSIGNED_POD, ActionType.Add), None, pod)

    def observe_pod_deleted(self, pod: Pod) -> None:
        """A pod deleted from the cluster's API (nothing happens if another pod took its name)."""
        if self._uid_by_key.get(pod.key) == pod.uid:
            self.delete_pod(pod.namespace, pod.name)

    def observe_node(self, node: Node) -> None:
        """A node as the cluster's API now has it (added or changed)."""
        self._apply_node(node)

    def observe_node_deleted(self, name: str) -> None:
        self.delete_node(name)

    def get_pod(self, namespace: str, name: str) -> PodRecord | None:
        uid = self._uid_by_key.get(f"{namespace}/{name}")
        return None if uid is None else self.pods[uid]

    def write_pod_status(self, pod: Pod, status: Mapping[str, Any]) -> None:
        """Status fields a plugin wrote to a pod (DynamicResources' ``extendedResourceClaimStatus``), set on
        the pod held here as the API server's patch sets them (nothing when the pod is gone)."""
        rec = self.pods.get(pod.uid)
        if rec is not None:
            rec.pod = dataclasses.replace(rec.pod, raw=merged_pod_status(rec.pod, status))

    # ---- binding through the "API" -------------------------------------------------------------

    def bind(self, pod: Pod, node_name: str) -> Status:
        """Set ``spec.nodeName`` (what DefaultBinder asks the API server to do)."""
        rec = self.pods.get(pod.uid)
        if rec is None:
            return Status.failure(f"pod {pod.key} not found (deleted while binding)")
        if rec.pod.node_name:
            return Status.failure(f"pod {pod.key} is already bound to {rec.pod.node_name!r}")
        if node_name not in self.nodes:
            return Status.failure(f"node {node_name!r} not found")
        self.nominated.pop(pod.uid, None)
        bound = dataclasses.replace(rec.pod, node_name=node_name, nominated_node_name="")
        rec.pod = bound
        rec.phase = BOUND
        self.cache.add_pod(bound)
        self.queue.done(pod.uid)
        self.stats.bound += 1
        if is_reserve_pod(bound):
            self.reservations.bound(bound, node_name)
        self._emit(EV_BOUND, "Pod", bound, node=node_name, attempts=rec.attempts)
        self._cluster_event(ClusterEvent(ASSIGNED_POD, ActionType.Add), None, bound)
        return SUCCESS


class EmbeddedSource:
    """The scheduler's own in-memory store (the default): objects come from :meth:`Scheduler.apply`,
    a binding sets ``nodeName`` at once, and what happened is told through :meth:`Scheduler.events`."""

    accepts_apply = True

    def __init__(self, scheduler: ObjectStore) -> None:
        self._s = scheduler

    async def bind(self, pod: Pod, node_name: str) -> Status:
        return self._s.bind(pod, node_name)

    async def delete_pod(self, pod: Pod, reason: str) -> Status:
        if self._s.delete_pod(pod.namespace, pod.name, reason=reason) is None:
            return Status.failure(f"pod {pod.key} not found")
        return SUCCESS

    def already_bound(self, pod: Pod) -> bool:
        return False

    def scheduled(self, pod: Pod, node_name: str) -> None:
        pass  # Scheduler.bind recorded it

    def failed(self, pod: Pod, status: Status) -> None:
        pass

    def nominated(self, pod: Pod, node_name: str) -> None:
        pass

    def preempted(self, victim: Pod, preemptor: Pod | PodGroup, node_name: str, in_memory: bool = False) -> None:
        pass

    def pod_disruption_budgets(self) -> list[PodDisruptionBudget]:
        # No disruption controller keeps their status here: it is worked out from the store's pods.
        pods = [rec.pod for rec in self._s.pods.values()]
        return [embedded_status(pdb, pods) for pdb in self._s.pdbs.values()]

    def namespace_labels_of(self, namespace: str) -> Mapping[str, str] | None:
        return None


def _keep_extended_status(old: Pod, new: Pod) -> Pod:
    """``new`` with the ``status.extendedResourceClaimStatus`` DynamicResources wrote on ``old``: a manifest
    applied again does not clear it (the status is not the manifest's to clear)."""
    written = (old.raw.get("status") or {}).get("extendedResourceClaimStatus") if old.raw else None
    if not written or (new.raw and (new.raw.get("status") or {}).get("extendedResourceClaimStatus")):
        return new
    return dataclasses.replace(new, raw=merged_pod_status(new, {"extendedResourceClaimStatus": written}))


def _check_once(idents: list[str]) -> None:
    """Refuse a request that names one object twice (``kind namespace/name`` each)."""
    seen: set[str] = set()
    for ident in idents:
        if ident in seen:
            raise ApplyError(f"{ident} appears twice in one request")
        seen.add(ident)
