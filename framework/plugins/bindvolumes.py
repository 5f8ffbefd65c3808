"""Binding a pod's volumes, the half of kube-scheduler's volume binder (``binder.go``) that works on
the cluster's objects once a node is chosen: :func:`bind_volume_to_claim` (what Reserve assumes for
each chosen volume), :func:`revert_assumed` (what Unreserve and a failed write roll back) and
:func:`bind_pod_volumes` (PreBind: ``BindPodVolumes`` writes the bindings through the cluster's
:class:`~pluginhost.snapshot.VolumeWriter`, completes each static binding as the PV controller does,
and polls ``checkBindings`` until the cluster shows every claim fully bound).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field

from pluginhost.model import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    ClaimRef,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
)
from pluginhost.snapshot import VolumeStore, VolumeStoreError
from pluginhost.status import SUCCESS, Status

from .volumeutil import PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, not_found, pv_affinity

__all__ = ["POLL_SECONDS", "PodVolumes", "bind_pod_volumes", "bind_volume_to_claim", "revert_assumed"]

#: How often PreBind looks whether the cluster shows the claims bound.
POLL_SECONDS = 0.1


@dataclass(slots=True)
class PodVolumes:
    """What binding the pod's claims on one node takes: volumes to bind to claims (static) and claims
    to provision (dynamic)."""

    static: list[tuple[PersistentVolume, PersistentVolumeClaim]] = field(default_factory=list)
    dynamic: list[PersistentVolumeClaim] = field(default_factory=list)


def bind_volume_to_claim(pv: PersistentVolume, pvc: PersistentVolumeClaim) -> tuple[PersistentVolume, bool]:
    """GetBindVolumeToClaim: ``pv`` with its ``claimRef`` on ``pvc`` and, when the binding is new,
    ``pv.kubernetes.io/bound-by-controller``; and whether anything changed."""
    dirty = False
    new = pv
    if not pv.bound_to(pvc) or pv.claim_ref is None or pv.claim_ref.uid != pvc.uid:
        new = dataclasses.replace(new, claim_ref=ClaimRef(pvc.namespace, pvc.name, pvc.uid))
        dirty = True
    if not pv.bound_to(pvc) and ANN_BOUND_BY_CONTROLLER not in pv.annotations:
        new = dataclasses.replace(new, annotations={**new.annotations, ANN_BOUND_BY_CONTROLLER: "yes"})
        dirty = True
    return new, dirty


def revert_assumed(store: VolumeStore, volumes: PodVolumes) -> None:
    """RevertAssumedPodVolumes: the assumed volumes and claims read as the cluster has them again."""
    for pv, _ in volumes.static:
        store.restore_volume(pv)
    for pvc in volumes.dynamic:
        store.restore_claim(pvc)


async def bind_pod_volumes(store: VolumeStore, node: Node, volumes: PodVolumes, *, timeout: float,
                           plugin: str) -> Status:
    """BindPodVolumes for ``node``: write the bindings, then wait up to ``timeout`` seconds until the
    cluster shows every claim fully bound. SUCCESS, or the failure PreBind answers for ``plugin``."""
    try:
        written = await _write(store, volumes)
        await _wait(store, node, written, timeout)
    except (VolumeStoreError, _BindError) as exc:
        return Status.failure(str(exc), plugin=plugin)
    except Exception as exc:  # a source's own error (the API refused a write, or is gone)
        return Status.failure(str(exc), plugin=plugin, error=exc)
    return SUCCESS


class _BindError(RuntimeError):
    """Binding the pod's volumes failed, and scheduling the pod is to be retried."""


async def _write(store: VolumeStore, volumes: PodVolumes) -> PodVolumes:
    """bindAPIUpdate, then the PV controller's half of each static binding. Assumed objects not
    yet written are rolled back when a write fails."""
    writer = store.writer
    static: list[tuple[PersistentVolume, PersistentVolumeClaim]] = []
    dynamic: list[PersistentVolumeClaim] = []
    done_static = done_dynamic = 0
    try:
        for pv, pvc in volumes.static:
            static.append((await writer.update_volume(pv), pvc))
            done_static += 1
        for pvc in volumes.dynamic:
            dynamic.append(await writer.update_claim(pvc))
            done_dynamic += 1
    finally:
        revert_assumed(store, PodVolumes(volumes.static[done_static:], volumes.dynamic[done_dynamic:]))
    for i, (pv, pvc) in enumerate(static):
        static[i] = (pv, await _complete(store, pv, pvc))
    return PodVolumes(static, dynamic)


async def _complete(store: VolumeStore, pv: PersistentVolume, pvc: PersistentVolumeClaim
                    ) -> PersistentVolumeClaim:
    """The PV controller's bind (bindVolumeToClaim's status, bindClaimToVolume, the claim's
    status), done here since a cluster need not run one; a claim the controller bound to this
    volume meanwhile is taken as it is."""
    writer = store.writer
    current = store.claims.get(pvc.key) or pvc
    if current.uid != pvc.uid:
        raise _BindError(f'persistentvolumeclaim "{pvc.name}" was replaced while binding')
    if current.volume_name and current.volume_name != pv.name:
        raise _BindError(f'persistentvolumeclaim "{pvc.name}" was bound to "{current.volume_name}" meanwhile')
    if pv.phase != "Bound":
        try:
            await writer.volume_phase(pv, "Bound")
        except VolumeStoreError:
            pass  # the controller got there first; the claim's side below decides
    claim = current
    if not claim.fully_bound:
        annotations = {**claim.annotations, ANN_BIND_COMPLETED: "yes"}
        if not claim.volume_name:
            annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        try:
            claim = await writer.update_claim(dataclasses.replace(claim, volume_name=pv.name,
                                                                  annotations=annotations))
        except VolumeStoreError:
            latest = store.claims.get(pvc.key)
            if latest is None or latest.volume_name != pv.name:
                raise
            claim = latest
    if claim.phase != "Bound":
        try:
            claim = await writer.claim_bound(claim, pv)
        except VolumeStoreError:
            pass  # the controller set it meanwhile
    return claim


async def _wait(store: VolumeStore, node: Node, volumes: PodVolumes, timeout: float) -> None:
    """Poll (checkBindings) until every claim is fully bound, within bindTimeoutSeconds."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / POLL_SECONDS) + 2):
        if _check(store, node, volumes):
            return
        if time.monotonic() >= deadline:
            break
        await asyncio.sleep(POLL_SECONDS)
    raise _BindError("binding volumes: context deadline exceeded")


def _check(store: VolumeStore, node: Node, volumes: PodVolumes) -> bool:
    """checkBindings on the cluster's own objects (not the assumed ones): True when all bound,
    False to look again, _BindError when binding must be retried."""
    for pv_written, pvc in volumes.static:
        pv = store.volumes.get(pv_written.name)
        if pv is None:
            missing = not_found(PERSISTENT_VOLUME, pv_written.name)
            raise _BindError(f"binding volumes: failed to check binding: {missing}")
        claim = store.claims.get(pvc.key)
        if claim is None:
            raise _BindError(
                f"binding volumes: failed to check binding: {not_found(PERSISTENT_VOLUME_CLAIM, pvc.key)}"
            )
        if _version(pv_written.resource_version) > _version(pv.resource_version):
            return False
        if not _affinity_allows(pv, node):
            raise _BindError(_affinity_message(pv, node))
        if pv.claim_ref is None or not pv.claim_ref.uid:
            raise _BindError(f'binding volumes: ClaimRef got reset for pv "{pv.name}"')
        if not claim.fully_bound:
            return False
    for written in volumes.dynamic:
        claim = store.claims.get(written.key)
        if claim is None:
            raise _BindError(f"binding volumes: failed to check provisioning pvc: "
                             f"{not_found(PERSISTENT_VOLUME_CLAIM, written.key)}")
        if _version(written.resource_version) > _version(claim.resource_version):
            return False
        if claim.annotations.get(ANN_SELECTED_NODE) != node.name:
            raise _BindError(f'binding volumes: provisioning failed for PVC "{claim.name}"')
        if claim.volume_name:
            pv = store.volumes.get(claim.volume_name)
            if pv is None:
                return False
            if not _affinity_allows(pv, node):
                raise _BindError(_affinity_message(pv, node))
        if not claim.fully_bound:
            return False
    return True


def _version(rv: str) -> int:
    """A resourceVersion for comparison (the API's are integers; none is 0)."""
    try:
        return int(rv)
    except ValueError:
        return 0


def _affinity_allows(pv: PersistentVolume, node: Node) -> bool:
    affinity = pv_affinity(pv)
    return affinity.selector is None or affinity.selector.matches(node)


def _affinity_message(pv: PersistentVolume, node: Node) -> str:
    return (f'binding volumes: pv "{pv.name}" node affinity doesn\'t match node "{node.name}": '
            "no matching NodeSelectorTerms")
