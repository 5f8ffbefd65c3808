"""What the four volume plugins share: the arguments they take (none) and their Skip status
(:class:`VolumeFilterPlugin`), lookups worded as the API's listers word their misses, a
PersistentVolume's node affinity compiled once and matched column-wise, StorageClass topologies, the
in-tree disks that CSI drivers took over, and the storage events of :class:`~pluginhost.plugin.ClusterEvent`.

The plugins read the snapshot's :class:`~pluginhost.snapshot.VolumeStore` (``snapshot.volumes``), the
way kube-scheduler's read their informers' listers: lookups by name miss with the API's
``persistentvolumeclaim "data" not found``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import (
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    CSINode,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    StorageClass,
    Volume,
)
from pluginhost.plugin import ActionType, EnqueueExtensions, FilterPlugin, Handle, PreFilterPlugin
from pluginhost.snapshot import NodeTable, VolumeStore
from pluginhost.status import Code, Status

from .noderesources import PluginArgsError
from .nodeselectors import NodeSelectorMatcher, compile_node_selector

__all__ = [
    "CSI_NODE",
    "MIGRATED_DRIVERS",
    "MIGRATED_PROVISIONERS",
    "PERSISTENT_VOLUME",
    "PERSISTENT_VOLUME_CLAIM",
    "SKIP",
    "STORAGE_CLASS",
    "TOPOLOGY_LABELS",
    "UPDATE",
    "ClaimProblem",
    "VolumeAffinity",
    "VolumeFilterPlugin",
    "claim_names",
    "claim_problem",
    "delay_binding",
    "migrated_disk",
    "not_found",
    "not_owner",
    "owned_by",
    "pv_affinity",
    "pv_topologies",
    "topology_mask",
]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

# ClusterEvent resources of the storage objects (kube-scheduler's framework.EventResource names).
PERSISTENT_VOLUME_CLAIM = "PersistentVolumeClaim"
PERSISTENT_VOLUME = "PersistentVolume"
STORAGE_CLASS = "StorageClass"
CSI_NODE = "CSINode"
#: What a storage object's update event carries (every update bit: storage updates are not told apart).
UPDATE = ActionType.Update
#: PreFilter's answer for a pod none of whose volumes the plugin checks.
SKIP = Status(Code.Skip)


class VolumeFilterPlugin(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """The part NodeVolumeLimits, VolumeZone and VolumeRestrictions share: PreFilter, Filter and queueing
    hints, and no arguments (as kube-scheduler's take none: an args document may carry only its
    ``apiVersion`` and ``kind``)."""

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        unknown = set(args or {}) - {"apiVersion", "kind"}
        if unknown:
            raise PluginArgsError(f"{self.name}: unknown args field(s) {sorted(unknown)}")
        self.handle = handle

# The API's resource names as its NotFound errors print them (``<resource>.<group> "<name>" not found``).
_RESOURCE = {
    PERSISTENT_VOLUME_CLAIM: "persistentvolumeclaim",
    PERSISTENT_VOLUME: "persistentvolume",
    STORAGE_CLASS: "storageclass.storage.k8s.io",
    CSI_NODE: "csinode.storage.k8s.io",
}

#: Zone and region labels VolumeZone compares (beta first, as upstream lists them).
TOPOLOGY_LABELS = (
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)

#: In-tree volume plugins whose disks a CSI driver serves on every node with a CSINode (csi-translation-lib;
#: kube-scheduler 1.37's isCSIMigrationOn, which no longer reads the CSINode's migrated-plugins annotation
#: for Portworx either), by the pod volume source: (in-tree plugin, CSI driver). The file and vSphere
#: plugins, never counted, are left out.
MIGRATED_DRIVERS = {
    "gcePersistentDisk": ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
    "awsElasticBlockStore": ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
    "azureDisk": ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
    "cinder": ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
    "portworxVolume": ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
}
#: The same by in-tree provisioner name (a StorageClass's provisioner).
MIGRATED_PROVISIONERS = dict(MIGRATED_DRIVERS.values())


def not_found(kind: str, name: str) -> str:
    """The API's NotFound message: ``persistentvolumeclaim "data" not found``."""
    return f'{_RESOURCE[kind]} "{name}" not found'


@dataclass(frozen=True, slots=True)
class ClaimProblem:
    """Why a pod's claim is not usable, in kube-scheduler's words."""

    message: str


def claim_problem(store: VolumeStore, pod: Pod, name: str, ephemeral: bool) -> ClaimProblem | PersistentVolumeClaim:
    """The claim ``name`` of ``pod`` as the API has it, or what is wrong with it (VolumeBinding's
    podHasPVCs): missing (an ephemeral one is waited for), lost, being deleted, or an ephemeral claim
    that another pod owns."""
    pvc = store.claims.get(f"{pod.namespace}/{name}")
    if pvc is None:
        if ephemeral:
            return ClaimProblem(f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{name}"')
        return ClaimProblem(not_found(PERSISTENT_VOLUME_CLAIM, name))
    if pvc.phase == "Lost":
        return ClaimProblem(f'persistentvolumeclaim "{pvc.name}" bound to non-existent persistentvolume '
                            f'"{pvc.volume_name}"')
    if pvc.deletion_timestamp is not None:
        return ClaimProblem(f'persistentvolumeclaim "{pvc.name}" is being deleted')
    if ephemeral and not owned_by(pvc, pod):
        return ClaimProblem(not_owner(pvc, pod))
    return pvc


def owned_by(pvc: PersistentVolumeClaim, pod: Pod) -> bool:
    """ephemeral.VolumeIsForPod: the claim is in the pod's namespace and the pod controls it."""
    return pvc.namespace == pod.namespace and bool(pvc.owner_uid) and pvc.owner_uid == pod.uid


def not_owner(pvc: PersistentVolumeClaim, pod: Pod) -> str:
    return f"PVC {pvc.namespace}/{pvc.name} was not created for pod {pod.namespace}/{pod.name} (pod is not owner)"


def delay_binding(store: VolumeStore, pvc: PersistentVolumeClaim) -> bool:
    """IsDelayBindingMode: the claim's class exists and binds on the first consumer (a claim without
    a class, or whose class is missing, binds at once)."""
    name = pvc.storage_class
    if not name:
        return False
    cls = store.storage_class(name)
    return cls is not None and cls.volume_binding_mode == BINDING_WAIT_FOR_FIRST_CONSUMER


# ---- node affinity and topologies, column-wise -------------------------------------------------


@dataclass(frozen=True, slots=True)
class VolumeAffinity:
    """A PersistentVolume's required node affinity, compiled (None: every node)."""

    selector: NodeSelectorMatcher | None

    def mask(self, table: NodeTable, rows: IntArray) -> BoolArray:
        """CheckNodeAffinity for each node row: whether the volume may be used there."""
        if self.selector is None:
            return np.ones(int(rows.shape[0]), dtype=np.bool_)
        return self.selector.mask(table, rows)


_AFFINITY_CACHE: dict[tuple[str, str, int], VolumeAffinity] = {}
_AFFINITY_CACHE_SIZE = 10_000


def pv_affinity(pv: PersistentVolume) -> VolumeAffinity:
    """``pv``'s node affinity compiled, once per version of the volume."""
    key = (pv.name, pv.resource_version, id(pv.node_affinity))
    hit = _AFFINITY_CACHE.get(key)
    if hit is not None:
        return hit
    terms = None if pv.node_affinity is None else _labels_only(pv.node_affinity)
    out = VolumeAffinity(None if terms is None else compile_node_selector(terms))
    if len(_AFFINITY_CACHE) >= _AFFINITY_CACHE_SIZE:
        _AFFINITY_CACHE.clear()
    _AFFINITY_CACHE[key] = out
    return out


def _labels_only(terms: list[NodeSelectorTerm]) -> list[NodeSelectorTerm] | None:
    """CheckNodeAffinity matches a node made of the labels alone (no name): a ``metadata.name In``
    field requirement never holds there (its term is dropped), a ``NotIn`` one always does (None:
    a term that only had those matches every node)."""
    out = []
    for term in terms:
        if not term.match_fields:
            out.append(term)
        elif all(f.operator == "NotIn" for f in term.match_fields):
            if not term.match_expressions:
                return None
            out.append(NodeSelectorTerm(match_expressions=term.match_expressions))
    return out


def topology_mask(cls: StorageClass, table: NodeTable, rows: IntArray) -> BoolArray:
    """MatchTopologySelectorTerms for each node row: no terms allow every node; a term needs each of
    its labels to hold one of its values; an empty term allows nothing."""
    n = int(rows.shape[0])
    if not cls.allowed_topologies:
        return np.ones(n, dtype=np.bool_)
    terms: Sequence[NodeSelectorTerm] = cls.allowed_topologies
    return compile_node_selector(terms).mask(table, rows)


def pv_topologies(pv: PersistentVolume) -> list[tuple[str, frozenset[str]]]:
    """VolumeZone's view of a volume: (label, zones) for each zone or region label it has, a
    ``__``-separated value read as a set (a value with an empty member is ignored)."""
    out = []
    for key in TOPOLOGY_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        zones = [z.strip() for z in value.split("__")]
        if any(not z for z in zones):
            continue
        out.append((key, frozenset(zones)))
    return out


# ---- in-tree disks served by CSI drivers ------------------------------------------------------


def _aws_volume_id(volume_id: str) -> str:
    """KubernetesVolumeIDToEBSVolumeID: ``aws://<zone>/<id>`` -> ``<id>``."""
    if not volume_id.startswith("aws://"):
        return volume_id
    return volume_id.removeprefix("aws://").partition("/")[2].strip("/")


def _gce_handle(pd_name: str, zones: str | None) -> str:
    if zones:
        parts = zones.split("__")
        if len(parts) == 1:
            return f"projects/UNSPECIFIED/zones/{parts[0]}/disks/{pd_name}"
        region = parts[0].rsplit("-", 1)[0]
        return f"projects/UNSPECIFIED/regions/{region}/disks/{pd_name}"
    return f"projects/UNSPECIFIED/zones/UNSPECIFIED/disks/{pd_name}"


def migrated_disk(source: str, disk: str, csinode: CSINode | None, labels: dict[str, str] | None = None
                  ) -> tuple[str, str] | None:
    """An in-tree disk (a pod's inline volume, or a PV's source when ``labels`` are the PV's) as the
    CSI driver that took it over on this node counts it: (driver, volume handle), or None when the
    node has no CSINode (isCSIMigrationOn)."""
    plugin_driver = MIGRATED_DRIVERS.get(source)
    if plugin_driver is None or csinode is None:
        return None
    driver = plugin_driver[1]
    if source == "gcePersistentDisk":
        zones = None
        if labels is not None:
            zones = labels.get("topology.kubernetes.io/zone") or labels.get("failure-domain.beta.kubernetes.io/zone")
        return driver, _gce_handle(disk, zones)
    if source == "awsElasticBlockStore":
        return driver, _aws_volume_id(disk)
    return driver, disk


def claim_names(pod: Pod, *, ephemeral: bool = True) -> Iterable[tuple[Volume, str, bool]]:
    """The pod's claim volumes: (volume, claim name, ephemeral) each; ``ephemeral`` False leaves out
    ephemeral volumes (the plugins that read only ``persistentVolumeClaim`` sources)."""
    for v in pod.volumes:
        if v.source == "persistentVolumeClaim":
            yield v, v.claim_name, False
        elif ephemeral and v.source == "ephemeral":
            yield v, v.claim(pod.name), True

