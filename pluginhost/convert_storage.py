"""Storage objects (PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes) in their wire
form (``types.StorageObject``), as the snapshot mirror carries them to hosts that follow it with
``FollowRequest.volumes``. ``raw`` is not carried; everything the volume plugins read is."""

from __future__ import annotations

from typing import Any

from pluginhost import model as m
from pluginhost.convert import (
    _label_selector_from_proto,
    _label_selector_to_proto,
    _node_term_from_proto,
    _node_term_to_proto,
)
from pluginhost.pb import types
from pluginhost.snapshot import StorageObject, storage_kind

__all__ = ["STORAGE_KINDS", "storage_from_proto", "storage_key", "storage_ref", "storage_to_proto"]

#: The kinds a ``StorageObjectRef`` names, each with the ``StorageObject`` field that carries it.
STORAGE_KINDS = {
    "PersistentVolumeClaim": "persistent_volume_claim",
    "PersistentVolume": "persistent_volume",
    "StorageClass": "storage_class",
    "CSINode": "csi_node",
}


def _meta(msg: Any, obj: Any, namespace: str = "") -> None:
    meta = msg.metadata
    meta.name = obj.name
    meta.namespace = namespace
    meta.uid = obj.uid
    meta.resource_version = obj.resource_version
    labels = getattr(obj, "labels", None)  # (CSINodes have none)
    if labels:
        meta.labels.update(labels)
    if obj.annotations:
        meta.annotations.update(obj.annotations)
    deleted = getattr(obj, "deletion_timestamp", None)
    if deleted is not None:
        meta.deletion_timestamp = deleted


def _claim_to_proto(pvc: m.PersistentVolumeClaim) -> types.PersistentVolumeClaim:
    msg = types.PersistentVolumeClaim(
        access_modes=pvc.access_modes, volume_name=pvc.volume_name, volume_mode=pvc.volume_mode,
        volume_attributes_class_name=pvc.volume_attributes_class_name, phase=pvc.phase, owner_uid=pvc.owner_uid,
    )
    _meta(msg, pvc, pvc.namespace)
    if pvc.selector is not None:
        msg.selector.CopyFrom(_label_selector_to_proto(pvc.selector))
    if pvc.storage is not None:
        msg.storage = pvc.storage
    if pvc.storage_class_name is not None:
        msg.storage_class_name = pvc.storage_class_name
    return msg


def _volume_to_proto(pv: m.PersistentVolume) -> types.PersistentVolume:
    msg = types.PersistentVolume(
        storage=pv.storage, access_modes=pv.access_modes, storage_class_name=pv.storage_class_name,
        volume_mode=pv.volume_mode, volume_attributes_class_name=pv.volume_attributes_class_name,
        phase=pv.phase, source=pv.source, disk=pv.disk, driver=pv.driver,
    )
    _meta(msg, pv)
    if pv.claim_ref is not None:
        ref = pv.claim_ref
        msg.claim_ref.CopyFrom(types.ClaimRef(namespace=ref.namespace, name=ref.name, uid=ref.uid))
    if pv.node_affinity is not None:
        msg.node_affinity.SetInParent()
        msg.node_affinity.terms.extend(_node_term_to_proto(t) for t in pv.node_affinity)
    return msg


def _class_to_proto(sc: m.StorageClass) -> types.StorageClass:
    msg = types.StorageClass(
        provisioner=sc.provisioner, volume_binding_mode=sc.volume_binding_mode,
        allowed_topologies=[_node_term_to_proto(t) for t in sc.allowed_topologies], parameters=sc.parameters,
    )
    _meta(msg, sc)
    return msg


def _csinode_to_proto(cn: m.CSINode) -> types.CSINode:
    msg = types.CSINode()
    _meta(msg, cn)
    for d in cn.drivers:
        driver = msg.drivers.add(name=d.name, node_id=d.node_id, topology_keys=d.topology_keys)
        if d.allocatable is not None:
            driver.allocatable = d.allocatable
    return msg


def storage_to_proto(obj: StorageObject) -> types.StorageObject:
    """One storage object as ``types.StorageObject``."""
    if isinstance(obj, m.PersistentVolumeClaim):
        return types.StorageObject(persistent_volume_claim=_claim_to_proto(obj))
    if isinstance(obj, m.PersistentVolume):
        return types.StorageObject(persistent_volume=_volume_to_proto(obj))
    if isinstance(obj, m.StorageClass):
        return types.StorageObject(storage_class=_class_to_proto(obj))
    return types.StorageObject(csi_node=_csinode_to_proto(obj))


def _common(meta: Any) -> dict[str, Any]:
    return {"name": meta.name, "uid": meta.uid, "resource_version": meta.resource_version,
            "annotations": dict(meta.annotations)}


def _deleted(meta: Any) -> float | None:
    return meta.deletion_timestamp if meta.HasField("deletion_timestamp") else None


def _claim_from_proto(msg: types.PersistentVolumeClaim) -> m.PersistentVolumeClaim:
    return m.PersistentVolumeClaim(
        **_common(msg.metadata), namespace=msg.metadata.namespace, labels=dict(msg.metadata.labels),
        access_modes=tuple(msg.access_modes),
        selector=_label_selector_from_proto(msg.selector) if msg.HasField("selector") else None,
        storage=msg.storage if msg.HasField("storage") else None, volume_name=msg.volume_name,
        storage_class_name=msg.storage_class_name if msg.HasField("storage_class_name") else None,
        volume_mode=msg.volume_mode or "Filesystem", volume_attributes_class_name=msg.volume_attributes_class_name,
        phase=msg.phase or "Pending", owner_uid=msg.owner_uid, deletion_timestamp=_deleted(msg.metadata),
    )


def _volume_from_proto(msg: types.PersistentVolume) -> m.PersistentVolume:
    ref = msg.claim_ref
    return m.PersistentVolume(
        **_common(msg.metadata), labels=dict(msg.metadata.labels), storage=msg.storage,
        access_modes=tuple(msg.access_modes), storage_class_name=msg.storage_class_name,
        claim_ref=m.ClaimRef(ref.namespace, ref.name, ref.uid) if msg.HasField("claim_ref") else None,
        node_affinity=([_node_term_from_proto(t) for t in msg.node_affinity.terms]
                       if msg.HasField("node_affinity") else None),
        volume_mode=msg.volume_mode or "Filesystem", volume_attributes_class_name=msg.volume_attributes_class_name,
        phase=msg.phase or "Available", source=msg.source, disk=msg.disk, driver=msg.driver,
        deletion_timestamp=_deleted(msg.metadata),
    )


def _class_from_proto(msg: types.StorageClass) -> m.StorageClass:
    return m.StorageClass(
        **_common(msg.metadata), labels=dict(msg.metadata.labels), provisioner=msg.provisioner,
        volume_binding_mode=msg.volume_binding_mode or m.BINDING_IMMEDIATE,
        allowed_topologies=[_node_term_from_proto(t) for t in msg.allowed_topologies],
        parameters=dict(msg.parameters),
    )


def _csinode_from_proto(msg: types.CSINode) -> m.CSINode:
    drivers = tuple(
        m.CSINodeDriver(name=d.name, node_id=d.node_id, topology_keys=tuple(d.topology_keys),
                        allocatable=d.allocatable if d.HasField("allocatable") else None)
        for d in msg.drivers
    )
    return m.CSINode(**_common(msg.metadata), drivers=drivers)


def storage_from_proto(msg: types.StorageObject) -> StorageObject:
    """A ``types.StorageObject`` as its model object; ``ValueError`` when it carries none."""
    which = msg.WhichOneof("object")
    if which == "persistent_volume_claim":
        return _claim_from_proto(msg.persistent_volume_claim)
    if which == "persistent_volume":
        return _volume_from_proto(msg.persistent_volume)
    if which == "storage_class":
        return _class_from_proto(msg.storage_class)
    if which == "csi_node":
        return _csinode_from_proto(msg.csi_node)
    raise ValueError("a StorageObject with no object set")


def storage_key(msg: types.StorageObjectRef) -> tuple[str, str]:
    """(kind, key) of a ``StorageObjectRef`` as :meth:`~pluginhost.snapshot.VolumeStore.remove` takes
    them (``namespace/name`` for a claim); ``ValueError`` for an unknown kind."""
    if msg.kind not in STORAGE_KINDS:
        raise ValueError(f"not a storage kind: {msg.kind!r} (one of {', '.join(STORAGE_KINDS)})")
    return msg.kind, f"{msg.namespace}/{msg.name}" if msg.kind == "PersistentVolumeClaim" else msg.name


def storage_ref(kind: str, obj: StorageObject) -> types.StorageObjectRef:
    """The ``StorageObjectRef`` of ``obj`` (of ``kind``, see :func:`~pluginhost.snapshot.storage_kind`)."""
    namespace = obj.namespace if isinstance(obj, m.PersistentVolumeClaim) else ""
    return types.StorageObjectRef(kind=kind or storage_kind(obj), namespace=namespace, name=obj.name)
