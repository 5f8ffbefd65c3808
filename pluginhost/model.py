"""The cluster model: Kubernetes-shaped Pods and Nodes, reduced to what scheduling reads, and the
storage objects the volume plugins read (PersistentVolumeClaims, PersistentVolumes, StorageClasses,
CSINodes).

Objects come from ordinary ``v1`` manifests (see :mod:`pluginhost.manifest`). Resource amounts are
integers in canonical units: ``cpu`` in millicores, everything else (memory, ephemeral-storage,
extended resources, ``pods``) in whole units, rounded up as Kubernetes' ``Quantity.Value()`` does.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = [
    "ANN_BETA_STORAGE_CLASS",
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_MIGRATED_PLUGINS",
    "ANN_PROVISIONED_BY",
    "ANN_SELECTED_NODE",
    "BINDING_IMMEDIATE",
    "BINDING_WAIT_FOR_FIRST_CONSUMER",
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "DEFAULT_RESERVATION_TTL",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "NO_PROVISIONER",
    "PODS",
    "READ_WRITE_ONCE_POD",
    "RESERVATION_ANNOTATION",
    "RESERVATION_API_VERSIONS",
    "RESERVATION_NAMESPACE",
    "VOLUME_CSI",
    "VOLUME_EPHEMERAL",
    "VOLUME_IMAGE",
    "VOLUME_PVC",
    "Affinity",
    "CSINode",
    "CSINodeDriver",
    "ClaimRef",
    "Container",
    "ContainerImage",
    "ContainerPort",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Node",
    "NodeAffinity",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PodDisruptionBudget",
    "PodResourceClaim",
    "PreferredSchedulingTerm",
    "Reservation",
    "ReservationOwner",
    "ResourceList",
    "StorageClass",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "WeightedPodAffinityTerm",
    "pod_on_node",
]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# kube-scheduler counts a container without requests as this much when *scoring* (not filtering).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

ResourceList = dict[str, int]


@dataclass(slots=True)
class LabelSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...] = ()


@dataclass(slots=True)
class LabelSelector:
    """A metav1.LabelSelector. An empty selector matches everything; ``None`` where it is optional
    in the API means "matches nothing" in most scheduling uses."""

    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = field(default_factory=list)


@dataclass(slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()


@dataclass(slots=True)
class NodeSelectorTerm:
    match_expressions: list[NodeSelectorRequirement] = field(default_factory=list)
    match_fields: list[NodeSelectorRequirement] = field(default_factory=list)


@dataclass(slots=True)
class PreferredSchedulingTerm:
    weight: int
    preference: NodeSelectorTerm


@dataclass(slots=True)
class NodeAffinity:
    # None: no required terms. A list: the node must match at least one term.
    required: list[NodeSelectorTerm] | None = None
    preferred: list[PreferredSchedulingTerm] = field(default_factory=list)


@dataclass(slots=True)
class PodAffinityTerm:
    topology_key: str
    label_selector: LabelSelector | None = None
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    mismatch_label_keys: tuple[str, ...] = ()


@dataclass(slots=True)
class WeightedPodAffinityTerm:
    weight: int
    term: PodAffinityTerm


@dataclass(slots=True)
class PodAffinity:
    required: list[PodAffinityTerm] = field(default_factory=list)
    preferred: list[WeightedPodAffinityTerm] = field(default_factory=list)


@dataclass(slots=True)
class Affinity:
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


@dataclass(slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"  # Equal or Exists
    value: str = ""
    effect: str = ""  # "" (all), NoSchedule, PreferNoSchedule, NoExecute
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """kube-scheduler's ``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Equal", ""):
            return self.value == taint.value
        return False


@dataclass(slots=True, frozen=True)
class Taint:
    key: str
    effect: str  # NoSchedule, PreferNoSchedule, NoExecute
    value: str = ""


@dataclass(slots=True)
class TopologySpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule or ScheduleAnyway
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"  # Honor or Ignore
    node_taints_policy: str = "Ignore"  # Honor or Ignore
    match_label_keys: tuple[str, ...] = ()


@dataclass(slots=True, frozen=True)
class ContainerPort:
    container_port: int
    host_port: int = 0
    protocol: str = "TCP"
    host_ip: str = ""


@dataclass(slots=True)
class Container:
    name: str
    image: str = ""
    requests: ResourceList = field(default_factory=dict)
    limits: ResourceList = field(default_factory=dict)
    ports: list[ContainerPort] = field(default_factory=list)
    restart_policy: str = ""  # "Always" marks a sidecar init container


@dataclass(slots=True)
class Pod:
    """A pod as scheduling sees it. ``requests`` is computed once when the pod is built."""

    name: str
    namespace: str = "default"
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    priority: int = 0
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = field(default_factory=list)
    topology_spread_constraints: list[TopologySpreadConstraint] = field(default_factory=list)
    scheduling_gates: tuple[str, ...] = ()
    #: ``spec.schedulingGroup.podGroupName``: the PodGroup (of the pod's namespace) the pod is scheduled
    #: with, None for a pod scheduled on its own (see :mod:`pluginhost.workload`).
    scheduling_group: str | None = None
    #: The volumes a volume plugin looks at (claims, ephemeral claims, CSI and the in-tree disks);
    #: configMaps, secrets, emptyDirs and the like are not kept, so most pods have none.
    volumes: tuple[Volume, ...] = ()
    #: ``spec.resourceClaims``: the ResourceClaims (DRA) the pod uses, named or made from a template.
    resource_claims: tuple[PodResourceClaim, ...] = ()
    #: ``status.resourceClaimStatuses``: the name of the claim made for each template entry, by entry
    #: name ("" when the claim controller deliberately made none).
    resource_claim_statuses: dict[str, str] = field(default_factory=dict)
    containers: list[Container] = field(default_factory=list)
    init_containers: list[Container] = field(default_factory=list)
    overhead: ResourceList = field(default_factory=dict)
    creation_timestamp: float = 0.0
    nominated_node_name: str = ""
    deletion_timestamp: float | None = None
    # Derived at construction by pluginhost.manifest.finish_pod / compute_requests.
    requests: ResourceList = field(default_factory=dict)
    # The manifest the pod was built from (JSON-compatible), for round-tripping to clients.
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        """``namespace/name``, the pod's identity in queues and caches."""
        return f"{self.namespace}/{self.name}"

    def host_ports(self) -> list[ContainerPort]:
        return [p for c in self.containers for p in c.ports if p.host_port > 0]

    def claim_names(self) -> list[tuple[str, bool]]:
        """The PersistentVolumeClaims the pod's volumes use, in order: (name, ephemeral) each. An
        ephemeral volume's claim is named ``<pod>-<volume>`` and is made for the pod by the
        ephemeral volume controller."""
        return [(v.claim(self.name), v.source == VOLUME_EPHEMERAL) for v in self.volumes if v.source in _CLAIM_SOURCES]


#: Every field of a Pod, in the order of its constructor's parameters.
_POD_VALUES = operator.attrgetter(*(f.name for f in fields(Pod)))


def pod_on_node(pod: Pod, node: str) -> Pod:
    """A copy of ``pod`` with ``node_name`` set to ``node``: ``dataclasses.replace(pod, node_name=node)``
    at a quarter of its cost (a group cycle assumes each of its pods so, once per placement tried)."""
    copy = Pod(*_POD_VALUES(pod))
    copy.node_name = node
    return copy


@dataclass(slots=True, frozen=True)
class ContainerImage:
    names: tuple[str, ...]
    size_bytes: int = 0


@dataclass(slots=True)
class Node:
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    unschedulable: bool = False
    capacity: ResourceList = field(default_factory=dict)
    allocatable: ResourceList = field(default_factory=dict)
    images: list[ContainerImage] = field(default_factory=list)
    #: ``status.declaredFeatures``: the features the node says it has (sorted, as the API keeps them),
    #: which NodeDeclaredFeatures matches pods' needs against.
    declared_features: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)


# Reservations (Koordinator's scheduling.koordinator.sh/v1alpha1 Reservation): resources held on a
# node for the pods a reservation's owners select.

RESERVATION_API_VERSIONS = ("scheduling.koordinator.sh/v1alpha1", "outrigger.io/v1alpha1")
# The annotation that marks a reservation's reserve pod (its value: the reservation's name).
RESERVATION_ANNOTATION = "outrigger.io/reservation"
# Reserve pods live in no namespace (Reservations are cluster-scoped), so they never meet applied pods.
RESERVATION_NAMESPACE = ""
DEFAULT_RESERVATION_TTL = 24 * 3600.0


@dataclass(slots=True)
class ReservationOwner:
    """Who may consume a reservation: one pod (namespace/name, and uid when given) or the pods a
    label selector matches."""

    namespace: str = ""
    name: str = ""
    uid: str = ""
    label_selector: LabelSelector | None = None


@dataclass(slots=True)
class Reservation:
    """A Reservation: ``template`` is scheduled like a pod (its reserve pod) and, once bound, holds its
    requests on the node until an owner pod consumes them, it expires or it is deleted.

    ``ttl_seconds`` counts from creation (0: never expires); ``expires`` (seconds since the epoch) wins
    when set. ``allocate_once``: the first owner uses it up (Succeeded); otherwise owners keep taking
    what is left."""

    name: str
    template: Pod
    uid: str = ""
    owners: list[ReservationOwner] = field(default_factory=list)
    ttl_seconds: float = DEFAULT_RESERVATION_TTL
    expires: float | None = None
    allocate_once: bool = True
    creation_timestamp: float = 0.0
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.name

    @property
    def namespace(self) -> str:
        return RESERVATION_NAMESPACE

    @property
    def requests(self) -> ResourceList:
        return self.template.requests

    def expires_at(self) -> float | None:
        """When it expires (seconds since the epoch), None for never."""
        if self.expires is not None:
            return self.expires
        if self.ttl_seconds <= 0:
            return None
        return self.creation_timestamp + self.ttl_seconds


# Volumes and the storage objects behind them, as kube-scheduler's volume plugins read them
# (VolumeBinding, VolumeRestrictions, VolumeZone, NodeVolumeLimits).

#: PVC/PV annotations of the volume binder and the PV controller (k8s.io/component-helpers storage/volume).
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
#: The storage class annotation that predates ``storageClassName`` (still read first, as upstream does).
ANN_BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
#: The in-tree plugins a node's CSI drivers took over (CSINode annotation, comma-separated).
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"
#: A StorageClass provisioner meaning "no dynamic provisioning" (local volumes, say).
NO_PROVISIONER = "kubernetes.io/no-provisioner"
BINDING_IMMEDIATE = "Immediate"
BINDING_WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

# Volume.source values (the pod's VolumeSource field that is set).
VOLUME_PVC = "persistentVolumeClaim"
VOLUME_EPHEMERAL = "ephemeral"
VOLUME_CSI = "csi"
VOLUME_IMAGE = "image"
_CLAIM_SOURCES = frozenset({VOLUME_PVC, VOLUME_EPHEMERAL})


@dataclass(slots=True, frozen=True)
class Volume:
    """One of a pod's volumes, reduced to what the volume plugins compare.

    ``source`` names the VolumeSource field that is set (``persistentVolumeClaim``, ``ephemeral``,
    ``csi``, ``gcePersistentDisk``, ``awsElasticBlockStore``, ``iscsi``, ``rbd``, ``azureDisk``,
    ``cinder``, ``image``); ``disk`` is what identifies the disk among pods (GCE ``pdName``, EBS/Cinder
    ``volumeID``, iSCSI ``iqn``, RBD ``image``, Azure ``diskURI``), with RBD's ``pool`` and ``monitors``;
    for an ``image`` volume (an OCI image mounted read-only, which ImageLocality scores) it is the image
    ``reference``.
    """

    name: str
    source: str
    claim_name: str = ""
    read_only: bool = False
    disk: str = ""
    pool: str = ""
    monitors: tuple[str, ...] = ()
    driver: str = ""

    def claim(self, pod_name: str) -> str:
        """The claim this volume uses: its ``claimName``, or ``<pod>-<volume>`` for an ephemeral one."""
        return f"{pod_name}-{self.name}" if self.source == VOLUME_EPHEMERAL else self.claim_name


@dataclass(slots=True, frozen=True)
class PodResourceClaim:
    """One of ``spec.resourceClaims``: ``claim_name`` (``resourceClaimName``) names an existing claim,
    ``template_name`` (``resourceClaimTemplateName``) a template the claim controller makes one from."""

    name: str
    claim_name: str = ""
    template_name: str = ""


@dataclass(slots=True, frozen=True)
class ClaimRef:
    """A PersistentVolume's ``spec.claimRef``: the claim it is (pre-)bound to (``uid`` may be empty)."""

    namespace: str
    name: str
    uid: str = ""


@dataclass(slots=True)
class PersistentVolumeClaim:
    """A PersistentVolumeClaim. ``storage_class_name`` None is an unset field (the API server's default
    class may be filled in), "" asks for no class; ``storage`` is ``resources.requests.storage`` in
    bytes (None when not requested). ``owner_uid`` is the uid of the controlling owner (an ephemeral
    volume's pod)."""

    name: str
    namespace: str = "default"
    uid: str = ""
    resource_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    access_modes: tuple[str, ...] = ()
    selector: LabelSelector | None = None
    storage: int | None = None
    volume_name: str = ""
    storage_class_name: str | None = None
    volume_mode: str = "Filesystem"
    volume_attributes_class_name: str = ""
    phase: str = "Pending"
    owner_uid: str = ""
    deletion_timestamp: float | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def storage_class(self) -> str:
        """The class the claim asks for ("" for none), the beta annotation first (GetPersistentVolumeClaimClass)."""
        beta = self.annotations.get(ANN_BETA_STORAGE_CLASS)
        if beta is not None:
            return beta
        return self.storage_class_name or ""

    @property
    def fully_bound(self) -> bool:
        """Bound to a volume and past the binder's setup (``volumeName`` and the bind-completed annotation)."""
        return bool(self.volume_name) and ANN_BIND_COMPLETED in self.annotations


@dataclass(slots=True)
class PersistentVolume:
    """A PersistentVolume. ``node_affinity`` is ``spec.nodeAffinity.required``'s terms (None: no
    affinity); ``storage`` is ``capacity.storage`` in bytes; ``source`` names the volume source that is
    set (``csi``, ``gcePersistentDisk``, ``local``, ...) with ``disk`` its identity (a CSI volume's
    ``volumeHandle``) and ``driver`` a CSI volume's driver."""

    name: str
    uid: str = ""
    resource_version: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    storage: int = 0
    access_modes: tuple[str, ...] = ()
    storage_class_name: str = ""
    claim_ref: ClaimRef | None = None
    node_affinity: list[NodeSelectorTerm] | None = None
    volume_mode: str = "Filesystem"
    volume_attributes_class_name: str = ""
    phase: str = "Available"
    source: str = ""
    disk: str = ""
    driver: str = ""
    deletion_timestamp: float | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.name

    @property
    def storage_class(self) -> str:
        """The volume's class, the beta annotation first (GetPersistentVolumeClass)."""
        beta = self.annotations.get(ANN_BETA_STORAGE_CLASS)
        return beta if beta is not None else self.storage_class_name

    def bound_to(self, claim: PersistentVolumeClaim) -> bool:
        """Pre-bound or bound to ``claim`` (IsVolumeBoundToClaim: names match, and the uid when set)."""
        ref = self.claim_ref
        if ref is None or ref.name != claim.name or ref.namespace != claim.namespace:
            return False
        return not ref.uid or ref.uid == claim.uid


@dataclass(slots=True)
class StorageClass:
    """A storage.k8s.io/v1 StorageClass. ``allowed_topologies``: each term's requirements are ``In``
    requirements on node labels; the node must match one term (none: every node)."""

    name: str
    provisioner: str = ""
    volume_binding_mode: str = BINDING_IMMEDIATE
    allowed_topologies: list[NodeSelectorTerm] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    uid: str = ""
    resource_version: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.name


@dataclass(slots=True, frozen=True)
class CSINodeDriver:
    """A CSI driver registered on a node; ``allocatable`` is how many of its volumes the node can
    attach (None: no limit)."""

    name: str
    node_id: str = ""
    topology_keys: tuple[str, ...] = ()
    allocatable: int | None = None


@dataclass(slots=True)
class CSINode:
    """A storage.k8s.io/v1 CSINode: the CSI drivers of the node of the same name."""

    name: str
    drivers: tuple[CSINodeDriver, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    uid: str = ""
    resource_version: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.name

    def migrated(self, plugin: str) -> bool:
        """Whether the in-tree ``plugin`` (``kubernetes.io/gce-pd``) is served by a CSI driver here."""
        value = self.annotations.get(ANN_MIGRATED_PLUGINS, "")
        return bool(value) and plugin in value.split(",")

    def limits(self) -> dict[str, int]:
        """Driver name -> the most volumes the node can attach (drivers without a limit are absent)."""
        return {d.name: d.allocatable for d in self.drivers if d.allocatable is not None}


# PodDisruptionBudgets (policy/v1): what preemption reads to prefer victims whose eviction keeps an
# application within its budget.


@dataclass(slots=True)
class PodDisruptionBudget:
    """A policy/v1 PodDisruptionBudget.

    ``selector`` picks the pods of its namespace it covers (``None``: the field is absent).
    ``min_available`` / ``max_unavailable`` are the spec's int-or-percent (``"50%"``), at most one set.
    ``disruptions_allowed`` and ``disrupted_pods`` (pod name -> when its eviction was admitted) are the
    status a disruption controller keeps: kube-scheduler's preemption reads nothing else."""

    name: str
    namespace: str = "default"
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    selector: LabelSelector | None = None
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    disruptions_allowed: int = 0
    disrupted_pods: dict[str, float] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"
