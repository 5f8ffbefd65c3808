"""The cluster model: Kubernetes-shaped Pods and Nodes, reduced to what scheduling reads.

Objects come from ordinary ``v1`` manifests (see :mod:`pluginhost.manifest`). Resource amounts are
integers in canonical units: ``cpu`` in millicores, everything else (memory, ephemeral-storage,
extended resources, ``pods``) in whole units, rounded up as Kubernetes' ``Quantity.Value()`` does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "DEFAULT_RESERVATION_TTL",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "RESERVATION_ANNOTATION",
    "RESERVATION_API_VERSIONS",
    "RESERVATION_NAMESPACE",
    "Affinity",
    "Container",
    "ContainerImage",
    "ContainerPort",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Node",
    "NodeAffinity",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "Pod",
    "PodAffinity",
    "PodAffinityTerm",
    "PreferredSchedulingTerm",
    "Reservation",
    "ReservationOwner",
    "ResourceList",
    "Taint",
    "Toleration",
    "TopologySpreadConstraint",
    "WeightedPodAffinityTerm",
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
