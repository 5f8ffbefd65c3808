"""Volumes: a pod's volumes, and the storage objects the volume plugins read (PersistentVolumeClaim,
PersistentVolume, StorageClass, CSINode), with the API server's defaults and the checks the plugins
rely on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pluginhost.decode import (
    FieldError,
    as_list,
    get_bool,
    get_int,
    get_list,
    get_map,
    get_str,
    item_map,
    join,
    one_of,
    required_str,
    str_map,
    str_tuple,
    timestamp,
    wrong_type,
)
from pluginhost.kubefields import TYPES
from pluginhost.model import (
    BINDING_IMMEDIATE,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    READ_WRITE_ONCE_POD,
    VOLUME_CSI,
    VOLUME_EPHEMERAL,
    VOLUME_IMAGE,
    VOLUME_PVC,
    ClaimRef,
    CSINode,
    CSINodeDriver,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    Volume,
)

from ._fields import label_selector, node_selector_terms, resource_list
from ._meta import dns_label_problem, invalid, object_meta, quoted, uid

__all__ = ["build_csinode", "build_pv", "build_pvc", "build_storage_class", "pod_volumes"]

_ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", READ_WRITE_ONCE_POD)
_VOLUME_MODES = ("Filesystem", "Block")
_BINDING_MODES = (BINDING_IMMEDIATE, BINDING_WAIT_FOR_FIRST_CONSUMER)
_CLAIM_PHASES = ("Pending", "Bound", "Lost")
_VOLUME_PHASES = ("Pending", "Available", "Bound", "Released", "Failed")
# Every source a pod's Volume may set (the API server wants exactly one) and a PersistentVolume's.
_POD_VOLUME_SOURCES = tuple(f.partition(":")[0] for f in TYPES["Volume"].split()[1:])
_PV_SOURCES = tuple(
    f.partition(":")[0] for f in TYPES["PersistentVolumeSpec"].split()
    if f.partition(":")[0] not in {"capacity", "accessModes", "claimRef", "persistentVolumeReclaimPolicy",
                                   "storageClassName", "mountOptions", "volumeMode", "nodeAffinity",
                                   "volumeAttributesClassName"}
)
# A pod volume source -> the field naming its disk: the sources the volume plugins compare among
# pods (VolumeRestrictions' conflicts, NodeVolumeLimits' migrated in-tree disks).
_DISK_FIELDS = {
    "gcePersistentDisk": "pdName",
    "awsElasticBlockStore": "volumeID",
    "iscsi": "iqn",
    "rbd": "image",
    "azureDisk": "diskURI",
    "cinder": "volumeID",
    "portworxVolume": "volumeID",
}
# The same for a PersistentVolume's source (and a CSI volume's handle).
_PV_DISK_FIELDS = {**_DISK_FIELDS, "csi": "volumeHandle", "local": "path"}


def _one_source(v: Mapping[str, Any], sources: tuple[str, ...], path: str) -> str:
    """The one volume source ``v`` sets (validateVolumeSource / validatePersistentVolumeSpec)."""
    found = [k for k in sources if v.get(k) is not None]
    if not found:
        raise FieldError(path, "must specify a volume type")
    if len(found) > 1:
        raise FieldError(join(path, found[1]), "may not specify more than 1 volume type")
    return found[0]


def _pod_volume(v: object, path: str, pod_name: str) -> tuple[str, Volume | None]:
    m = item_map(v, path)
    name = required_str(m, "name", path)
    problem = dns_label_problem(name)
    if problem is not None:
        raise invalid(f"{path}.name", name, problem)
    source = _one_source(m, _POD_VOLUME_SOURCES, path)
    spath = f"{path}.{source}"
    src = get_map(m, source, path)
    read_only = get_bool(src, "readOnly", spath)
    if source == VOLUME_PVC:
        return name, Volume(name, source, claim_name=required_str(src, "claimName", spath), read_only=read_only)
    if source == VOLUME_EPHEMERAL:
        if src.get("volumeClaimTemplate") is None:
            raise FieldError(f"{spath}.volumeClaimTemplate", "required field is missing")
        template = get_map(src, "volumeClaimTemplate", spath)
        _claim_spec(get_map(template, "spec", f"{spath}.volumeClaimTemplate"),
                    f"{spath}.volumeClaimTemplate.spec", claim_name=f"{pod_name}-{name}")
        return name, Volume(name, source)
    if source == VOLUME_CSI:
        return name, Volume(name, source, driver=required_str(src, "driver", spath), read_only=read_only)
    if source == VOLUME_IMAGE:
        return name, Volume(name, source, disk=required_str(src, "reference", spath))
    disk_field = _DISK_FIELDS.get(source)
    if disk_field is None:
        return name, None  # configMap, secret, emptyDir, ...: no volume plugin looks at them
    disk = required_str(src, disk_field, spath)
    if source == "rbd":
        monitors = str_tuple(src, "monitors", spath)
        if not monitors:
            raise FieldError(f"{spath}.monitors", "required field is missing")
        pool = get_str(src, "pool", spath) or "rbd"  # the API server's default
        return name, Volume(name, source, read_only=read_only, disk=disk, pool=pool, monitors=monitors)
    return name, Volume(name, source, read_only=read_only, disk=disk)


def pod_volumes(raw: object, pod_name: str) -> tuple[Volume, ...]:
    """``spec.volumes``: names unique DNS labels, one source each; only what a volume plugin reads is kept."""
    out: list[Volume] = []
    seen: set[str] = set()
    claims: dict[str, int] = {}
    for i, v in enumerate(as_list(raw, "spec.volumes")):
        path = f"spec.volumes[{i}]"
        name, volume = _pod_volume(v, path, pod_name)
        if name in seen:
            raise FieldError(f"{path}.name", f"Duplicate value: {quoted(name)}")
        seen.add(name)
        if volume is not None:
            out.append(volume)
            if volume.source == VOLUME_PVC:
                claims[volume.claim_name] = i
    for volume in out:
        if volume.source == VOLUME_EPHEMERAL and volume.claim(pod_name) in claims:
            claim = volume.claim(pod_name)
            raise invalid(
                f"spec.volumes[{claims[claim]}].persistentVolumeClaim.claimName",
                claim,
                "must not reference a PVC that gets created for an ephemeral volume",
            )
    return tuple(out)


def _access_modes(m: Mapping[str, Any], parent: str) -> tuple[str, ...]:
    modes = str_tuple(m, "accessModes", parent)
    if not modes:
        raise FieldError(f"{parent}.accessModes", "at least 1 access mode is required")
    for i, mode in enumerate(modes):
        one_of(mode, _ACCESS_MODES, f"{parent}.accessModes[{i}]", "access mode")
    if READ_WRITE_ONCE_POD in modes and len(modes) > 1:
        raise FieldError(f"{parent}.accessModes", "may not use ReadWriteOncePod with other access modes")
    return modes


def _storage(m: Mapping[str, Any], key: str, parent: str) -> int | None:
    amounts = resource_list(m, key, parent)
    return amounts.get("storage")


def _claim_spec(spec: Mapping[str, Any], path: str, claim_name: str) -> tuple[tuple[str, ...], int]:
    """A PersistentVolumeClaimSpec's access modes and storage request, checked as the API server does."""
    modes = _access_modes(spec, path)
    requests = _storage(get_map(spec, "resources", path), "requests", f"{path}.resources")
    if requests is None:
        raise FieldError(f"{path}.resources.requests.storage", f"required for claim {quoted(claim_name)}")
    if requests <= 0:
        raise FieldError(f"{path}.resources.requests.storage", "must be greater than zero")
    one_of(get_str(spec, "volumeMode", path) or "Filesystem", _VOLUME_MODES, f"{path}.volumeMode", "volumeMode")
    label_selector(spec, "selector", path)
    return modes, requests


def _controller_uid(meta: Mapping[str, Any]) -> str:
    """The uid of the owner reference marked ``controller: true`` ("" when there is none)."""
    for i, ref in enumerate(get_list(meta, "ownerReferences", "metadata")):
        rm = item_map(ref, f"metadata.ownerReferences[{i}]")
        if get_bool(rm, "controller", f"metadata.ownerReferences[{i}]"):
            return get_str(rm, "uid", f"metadata.ownerReferences[{i}]")
    return ""


def build_pvc(obj: dict[str, Any]) -> PersistentVolumeClaim:
    """The :class:`PersistentVolumeClaim` of a decoded v1 manifest."""
    meta, name, namespace, labels, annotations = object_meta(obj, namespaced=True)
    spec = get_map(obj, "spec", "")
    status = get_map(obj, "status", "")
    modes, storage = _claim_spec(spec, "spec", name)
    class_name = spec.get("storageClassName")
    if class_name is not None and not isinstance(class_name, str):
        wrong_type("spec.storageClassName", "a string", class_name)
    return PersistentVolumeClaim(
        name=name,
        namespace=namespace,
        uid=uid(meta),
        resource_version=get_str(meta, "resourceVersion", "metadata"),
        labels=labels,
        annotations=annotations,
        access_modes=modes,
        selector=label_selector(spec, "selector", "spec"),
        storage=storage,
        volume_name=get_str(spec, "volumeName", "spec"),
        storage_class_name=class_name,
        volume_mode=get_str(spec, "volumeMode", "spec") or "Filesystem",
        volume_attributes_class_name=get_str(spec, "volumeAttributesClassName", "spec"),
        phase=one_of(get_str(status, "phase", "status") or "Pending", _CLAIM_PHASES, "status.phase", "phase"),
        owner_uid=_controller_uid(meta),
        deletion_timestamp=timestamp(meta, "deletionTimestamp", "metadata"),
        raw=obj,
    )


def _claim_ref(spec: Mapping[str, Any]) -> ClaimRef | None:
    if spec.get("claimRef") is None:
        return None
    ref = get_map(spec, "claimRef", "spec")
    return ClaimRef(namespace=get_str(ref, "namespace", "spec.claimRef") or "default",
                    name=required_str(ref, "name", "spec.claimRef"),
                    uid=get_str(ref, "uid", "spec.claimRef"))


def _pv_node_affinity(spec: Mapping[str, Any]) -> list[NodeSelectorTerm] | None:
    """``spec.nodeAffinity.required``'s terms: the nodes that can reach the volume (None: all)."""
    if spec.get("nodeAffinity") is None:
        return None
    apath = "spec.nodeAffinity"
    na = get_map(spec, "nodeAffinity", "spec")
    if na.get("required") is None:
        return None
    return node_selector_terms(get_map(na, "required", apath), f"{apath}.required")


def build_pv(obj: dict[str, Any]) -> PersistentVolume:
    """The :class:`PersistentVolume` of a decoded v1 manifest."""
    meta, name, _, labels, annotations = object_meta(obj, namespaced=False)
    spec = get_map(obj, "spec", "")
    status = get_map(obj, "status", "")
    storage = _storage(spec, "capacity", "spec")
    if storage is None:
        raise FieldError("spec.capacity.storage", "required field is missing")
    modes = _access_modes(spec, "spec")
    source = _one_source(spec, _PV_SOURCES, "spec")
    src = get_map(spec, source, "spec")
    disk_field = _PV_DISK_FIELDS.get(source)
    disk = required_str(src, disk_field, f"spec.{source}") if disk_field else ""
    driver = required_str(src, "driver", "spec.csi") if source == VOLUME_CSI else ""
    claim_ref = _claim_ref(spec)
    affinity = _pv_node_affinity(spec)
    if source == "local" and affinity is None:
        raise FieldError("spec.nodeAffinity", "Local volumes require node affinity")
    # The PV controller makes a new volume Available (Bound once claimed); with no controller here,
    # a manifest without status starts where the controller would put it.
    phase = get_str(status, "phase", "status") or ("Bound" if claim_ref is not None and claim_ref.uid else "Available")
    return PersistentVolume(
        name=name,
        uid=uid(meta),
        resource_version=get_str(meta, "resourceVersion", "metadata"),
        labels=labels,
        annotations=annotations,
        storage=storage,
        access_modes=modes,
        storage_class_name=get_str(spec, "storageClassName", "spec"),
        claim_ref=claim_ref,
        node_affinity=affinity,
        volume_mode=one_of(get_str(spec, "volumeMode", "spec") or "Filesystem", _VOLUME_MODES, "spec.volumeMode",
                           "volumeMode"),
        volume_attributes_class_name=get_str(spec, "volumeAttributesClassName", "spec"),
        phase=one_of(phase, _VOLUME_PHASES, "status.phase", "phase"),
        source=source,
        disk=disk,
        driver=driver,
        deletion_timestamp=timestamp(meta, "deletionTimestamp", "metadata"),
        raw=obj,
    )


def build_storage_class(obj: dict[str, Any]) -> StorageClass:
    """The :class:`StorageClass` of a decoded ``storage.k8s.io/v1`` manifest."""
    meta, name, _, labels, annotations = object_meta(obj, namespaced=False)
    mode = get_str(obj, "volumeBindingMode", "") or BINDING_IMMEDIATE  # the API server's default
    one_of(mode, _BINDING_MODES, "volumeBindingMode", "volumeBindingMode")
    terms = []
    for i, t in enumerate(get_list(obj, "allowedTopologies", "")):
        tpath = f"allowedTopologies[{i}]"
        exprs = []
        for j, e in enumerate(get_list(item_map(t, tpath), "matchLabelExpressions", tpath)):
            epath = f"{tpath}.matchLabelExpressions[{j}]"
            req = item_map(e, epath)
            values = str_tuple(req, "values", epath)
            if not values:
                raise FieldError(f"{epath}.values", "must specify as least one value")
            exprs.append(NodeSelectorRequirement(key=required_str(req, "key", epath), operator="In", values=values))
        terms.append(NodeSelectorTerm(match_expressions=exprs))
    return StorageClass(
        name=name,
        provisioner=required_str(obj, "provisioner", ""),
        volume_binding_mode=mode,
        allowed_topologies=terms,
        parameters=str_map(obj, "parameters", ""),
        labels=labels,
        annotations=annotations,
        uid=uid(meta),
        resource_version=get_str(meta, "resourceVersion", "metadata"),
        raw=obj,
    )


def build_csinode(obj: dict[str, Any]) -> CSINode:
    """The :class:`CSINode` of a decoded ``storage.k8s.io/v1`` manifest."""
    meta, name, _, _, annotations = object_meta(obj, namespaced=False)
    spec = get_map(obj, "spec", "")
    drivers = []
    for i, d in enumerate(get_list(spec, "drivers", "spec")):
        path = f"spec.drivers[{i}]"
        dm = item_map(d, path)
        count = None
        allocatable = get_map(dm, "allocatable", path)
        if allocatable.get("count") is not None:
            count = get_int(allocatable, "count", f"{path}.allocatable", 0)
            if count < 0:
                raise FieldError(f"{path}.allocatable.count", f"must be greater than or equal to 0, got {count}")
        drivers.append(CSINodeDriver(name=required_str(dm, "name", path), node_id=get_str(dm, "nodeID", path),
                                     topology_keys=str_tuple(dm, "topologyKeys", path), allocatable=count))
    return CSINode(
        name=name,
        drivers=tuple(drivers),
        annotations=annotations,
        uid=uid(meta),
        resource_version=get_str(meta, "resourceVersion", "metadata"),
        raw=obj,
    )
