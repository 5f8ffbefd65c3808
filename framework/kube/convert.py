"""API objects as the scheduler's model: pods (as the pod informer keeps them, :class:`PodItem`), nodes,
PodDisruptionBudgets, namespaces and the volume plugins' objects, converted once as they come from the
informers, with what keeps Outrigger from scheduling a pod.

::

    item = convert_pod(obj)            # item.pod (None when it does not convert), item.problem ("" or why not)
    item = reconvert_pod(item, newer)  # reuses the conversion when only the binding or the status moved
    node = convert_node(obj)           # one that does not convert: unschedulable, nothing allocatable

Objects from the API server were validated by it, so the manifest decoder's strictness about unknown
fields (meant for hand-written files) is off. What does not convert is logged and kept in a form that
is safe to schedule around (see each function).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pluginhost.manifest import (
    ManifestError,
    csinode_from_dict,
    node_from_dict,
    pdb_from_dict,
    pod_from_dict,
    pv_from_dict,
    pvc_from_dict,
    storage_class_from_dict,
)
from pluginhost.model import Node, Pod, PodDisruptionBudget
from pluginhost.snapshot import StorageObject

__all__ = [
    "PodItem",
    "convert_namespace",
    "convert_node",
    "convert_pdb",
    "convert_pod",
    "csinode_from_api",
    "pv_from_api",
    "pvc_from_api",
    "reconvert_pod",
    "spec_changed",
    "storage_class_from_api",
    "storage_converter",
    "unsupported",
]

log = logging.getLogger("outrigger.kube")


def _lenient(fn: Callable[..., Any]) -> Callable[..., Any]:
    # Objects from the API server were validated by it: the manifest decoder's strictness about
    # unknown fields (meant for hand-written files) is turned off where the decoder offers it.
    if "validate" in inspect.signature(fn).parameters:
        return functools.partial(fn, validate="ignore")
    return fn


_pod_from_api = _lenient(pod_from_dict)
_node_from_api = _lenient(node_from_dict)
_pdb_from_api = _lenient(pdb_from_dict)
pvc_from_api = _lenient(pvc_from_dict)
pv_from_api = _lenient(pv_from_dict)
storage_class_from_api = _lenient(storage_class_from_dict)
csinode_from_api = _lenient(csinode_from_dict)


@dataclass(slots=True)
class PodItem:
    """A pod as the informer keeps it: converted once, with what keeps Outrigger from scheduling it."""

    key: str
    uid: str
    scheduler_name: str
    node_name: str
    #: None when the object could not be converted (``problem`` says why).
    pod: Pod | None
    #: Why Outrigger cannot schedule this pod ("" when it can).
    problem: str
    raw: dict[str, Any] = field(repr=False)


def unsupported(obj: dict[str, Any]) -> str:
    """What in a pod's spec no Outrigger plugin handles, in a user's words ("" when nothing). Volumes
    are the volume plugins' (claims, ephemeral claims, CSI and in-tree disks), ResourceClaims
    DynamicResources'; nothing is left over today."""
    return ""


def convert_pod(obj: dict[str, Any]) -> PodItem:
    """An API Pod as a :class:`PodItem` (``managedFields`` dropped: nothing reads them)."""
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    spec = obj.get("spec") or {}
    key = f"{meta.get('namespace')}/{meta.get('name')}"
    uid = str(meta.get("uid") or "")
    sched_name = str(spec.get("schedulerName") or "default-scheduler")
    node_name = str(spec.get("nodeName") or "")
    try:
        pod: Pod | None = _pod_from_api(obj)
        problem = unsupported(obj)
    except ManifestError as exc:
        pod, problem = None, exc.reason or str(exc)
        if exc.path:
            problem = f"{exc.path}: {problem}"
    return PodItem(key, uid, sched_name, node_name, pod, problem, obj)


def reconvert_pod(old: PodItem, obj: dict[str, Any]) -> PodItem:
    """A changed API Pod as a :class:`PodItem`. When only its binding (``spec.nodeName``) or its status
    (other than ``nominatedNodeName``) changed, the pod converted before is reused with the new node:
    what the scheduler reads comes from the spec, the identity, labels and annotations. That is the
    change every pod this scheduler binds goes through once, so it skips a second full conversion. The
    claim controller's ``status.resourceClaimStatuses`` is read by DynamicResources: a change converts again."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    pod = old.pod
    if pod is None or old.problem or meta.get("uid") != old.uid:
        return convert_pod(obj)
    old_meta, old_spec = old.raw.get("metadata") or {}, old.raw.get("spec") or {}
    node_name = spec.get("nodeName") or ""
    if (
        len(spec) - ("nodeName" in spec) != len(old_spec) - ("nodeName" in old_spec)
        or any(v != old_spec.get(k) for k, v in spec.items() if k != "nodeName")
        or any(meta.get(k) != old_meta.get(k) for k in _POD_META)
        or ((obj.get("status") or {}).get("nominatedNodeName") or "") != pod.nominated_node_name
        or (obj.get("status") or {}).get("resourceClaimStatuses") != (old.raw.get("status") or {}).get(
            "resourceClaimStatuses")
    ):
        return convert_pod(obj)
    meta.pop("managedFields", None)
    new = dataclasses.replace(pod, node_name=node_name, raw=obj)
    return PodItem(old.key, old.uid, old.scheduler_name, node_name, new, "", obj)


# What a Pod takes from its metadata besides its name and namespace (pluginhost.manifest).
_POD_META = ("labels", "annotations", "creationTimestamp", "deletionTimestamp")


def convert_node(obj: dict[str, Any]) -> Node:
    """An API Node as a :class:`Node`. One that cannot be converted is kept as an unschedulable node
    with nothing allocatable (its bound pods are still counted, nothing new goes there), and logged."""
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    try:
        node: Node = _node_from_api(obj)
        return node
    except ManifestError as exc:
        name = str(meta.get("name") or "")
        log.warning("node %s cannot be modelled, no pod will be scheduled to it: %s", name, exc)
        return Node(name=name, uid=str(meta.get("uid") or ""), unschedulable=True, raw=obj)


def convert_pdb(obj: dict[str, Any]) -> PodDisruptionBudget:
    """An API PodDisruptionBudget as a :class:`PodDisruptionBudget`. One that cannot be converted is kept
    as matching no pod (kube-scheduler's preemption treats a selector it cannot read so), and logged."""
    meta = obj.get("metadata") or {}
    meta.pop("managedFields", None)
    try:
        pdb: PodDisruptionBudget = _pdb_from_api(obj)
        return pdb
    except ManifestError as exc:
        name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "")
        log.warning("PodDisruptionBudget %s/%s cannot be modelled, preemption ignores it: %s", namespace, name, exc)
        return PodDisruptionBudget(name=name, namespace=namespace, uid=str(meta.get("uid") or ""), raw=obj)


def spec_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether more than the status changed (kube-scheduler's isPodUpdated), or the claims the claim
    controller made for the pod (``status.resourceClaimStatuses``, the TargetPod
    UpdatePodGeneratedResourceClaim event that may let DynamicResources' PreEnqueue through)."""
    if old.get("spec") != new.get("spec"):
        return True
    if (old.get("status") or {}).get("resourceClaimStatuses") != (new.get("status") or {}).get(
            "resourceClaimStatuses"):
        return True
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    return any(om.get(k) != nm.get(k) for k in ("labels", "annotations", "deletionTimestamp", "ownerReferences"))


def convert_namespace(obj: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """An API Namespace as what the scheduler reads of it: its name and labels."""
    meta = obj.get("metadata") or {}
    return str(meta.get("name")), dict(meta.get("labels") or {})


def storage_converter(build: Callable[[dict[str, Any]], StorageObject], kind: str
                      ) -> Callable[[dict[str, Any]], StorageObject | None]:
    """An informer's converter for one storage kind: None (logged) for an object that does not convert."""

    def convert(obj: dict[str, Any]) -> StorageObject | None:
        meta = obj.get("metadata") or {}
        meta.pop("managedFields", None)
        try:
            return build(obj)
        except ManifestError as exc:
            log.warning("%s %s cannot be modelled, the volume plugins do not see it: %s", kind,
                        meta.get("name"), exc)
            return None

    return convert

