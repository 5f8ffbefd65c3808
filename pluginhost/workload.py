"""Workload-aware scheduling's API objects, as kube-scheduler 1.37 reads them: the PodGroup (a group of
pods scheduled as one unit, ``scheduling.k8s.io/v1beta1``, or ``v1alpha2`` as a 1.36 API server serves
it) and the Workload (its templates; a controller makes the PodGroups from them, and the scheduler itself
never reads a Workload).

A pod belongs to a PodGroup through ``spec.schedulingGroup.podGroupName``
(:attr:`pluginhost.model.Pod.scheduling_group`), a PodGroup of the pod's namespace. Its policy is
``basic`` (each pod on its own merits, the group still scheduled in one cycle) or ``gang`` (at least
``minCount`` pods placed together, or none). Decoding is :mod:`pluginhost.manifest`'s
(:func:`pluginhost.manifest.pod_group_from_dict`, :func:`pluginhost.manifest.workload_from_dict`).

Not modelled: CompositePodGroup (``v1alpha3``, the CompositePodGroup gate): a PodGroup's
``parentCompositePodGroupName`` is kept, not followed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "BASIC",
    "CONDITION_DISRUPTION_TARGET",
    "CONDITION_INITIALLY_SCHEDULED",
    "GANG",
    "REASON_PREEMPTION_BY_SCHEDULER",
    "REASON_SCHEDULED",
    "REASON_SCHEDULER_ERROR",
    "REASON_UNSCHEDULABLE",
    "SCHEDULING_API_VERSIONS",
    "PodGroup",
    "PodGroupClaim",
    "PodGroupCondition",
    "PodGroupTemplate",
    "Workload",
    "WorkloadRef",
]

#: The API versions of Workload and PodGroup that are understood: 1.37's first, then a 1.36 API
#: server's (read the same way; it lacks ``preemptionPolicy``, ``parentCompositePodGroupName``, names
#: its workload reference ``podGroupTemplateRef.workload``, and its ``disruptionMode`` is a string,
#: ``Pod`` or ``PodGroup``, read as ``Single`` and ``All``).
SCHEDULING_API_VERSIONS = ("scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha2")

#: A PodGroup's scheduling policies.
BASIC = "basic"
GANG = "gang"

#: ``status.conditions`` types and reasons (``scheduling/v1beta1``).
CONDITION_INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
CONDITION_DISRUPTION_TARGET = "DisruptionTarget"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_SCHEDULER_ERROR = "SchedulerError"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


@dataclass(frozen=True, slots=True)
class WorkloadRef:
    """The Workload and the template of it a PodGroup was made from (``spec.workloadRef``)."""

    workload_name: str
    template_name: str


@dataclass(frozen=True, slots=True)
class PodGroupClaim:
    """One of ``spec.resourceClaims`` (a claim named, or made from a template, for the whole group)."""

    name: str
    claim_name: str = ""
    template_name: str = ""


@dataclass(frozen=True, slots=True)
class PodGroupCondition:
    """A ``metav1.Condition`` of ``status.conditions``; ``status`` is ``"True"``, ``"False"`` or
    ``"Unknown"``; ``last_transition_time`` as the API writes it (RFC 3339)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    observed_generation: int = 0
    last_transition_time: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The condition as API JSON (the fields a strategic-merge patch of ``status.conditions`` sends)."""
        out: dict[str, Any] = {"type": self.type, "status": self.status}
        if self.observed_generation:
            out["observedGeneration"] = self.observed_generation
        out["lastTransitionTime"] = self.last_transition_time
        out["reason"] = self.reason
        out["message"] = self.message
        return out


@dataclass(frozen=True, slots=True)
class PodGroupTemplate:
    """A PodGroup's spec as a Workload's ``podGroupTemplates`` entry states it (the fields a PodGroup
    made from it copies). ``min_count`` is the gang's (1 for ``basic``)."""

    name: str
    policy: str = BASIC
    min_count: int = 1
    topology_keys: tuple[str, ...] = ()
    resource_claims: tuple[PodGroupClaim, ...] = ()
    disruption_mode: str = ""  # "", "Single" or "All"
    priority_class_name: str = ""
    priority: int | None = None
    preemption_policy: str = ""  # "", "PreemptLowerPriority" or "Never"


@dataclass(slots=True)
class PodGroup:
    """A ``PodGroup``: the pods that name it in ``spec.schedulingGroup.podGroupName`` are scheduled
    together. ``min_count`` is what GangScheduling needs placed at once: the gang's ``minCount``, 1 for
    the ``basic`` policy. ``topology_keys``: ``spec.schedulingConstraints.topology[*].key`` (only the
    first is used, by TopologyPlacementGenerator). ``priority`` is ``spec.priority`` (None when unset;
    the group's queue priority is then 0)."""

    name: str
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    api_version: str = SCHEDULING_API_VERSIONS[0]
    workload_ref: WorkloadRef | None = None
    policy: str = BASIC
    min_count: int = 1
    topology_keys: tuple[str, ...] = ()
    parent_composite_pod_group: str = ""
    resource_claims: tuple[PodGroupClaim, ...] = ()
    disruption_mode: str = ""  # "", "Single" or "All"
    priority_class_name: str = ""
    priority: int | None = None
    preemption_policy: str = ""  # "", "PreemptLowerPriority" or "Never"
    conditions: tuple[PodGroupCondition, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    creation_timestamp: float = 0.0
    deletion_timestamp: float | None = None
    #: The object as decoded (API JSON), for printing and writing back.
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        """``namespace/name``, the group's identity (a pod names it within its own namespace)."""
        return f"{self.namespace}/{self.name}"

    @property
    def is_gang(self) -> bool:
        return self.policy == GANG

    @property
    def queue_priority(self) -> int:
        """The group's priority in the scheduling queue: ``spec.priority``, 0 when unset (kube-scheduler's
        ``PodGroupPriority``)."""
        return self.priority or 0

    def condition(self, type_: str) -> PodGroupCondition | None:
        """The condition of type ``type_``, None when there is none."""
        return next((c for c in self.conditions if c.type == type_), None)


@dataclass(slots=True)
class Workload:
    """A ``Workload``: the templates of the PodGroups a controller makes for one job
    (``spec.podGroupTemplates``), and the object that controls it (``spec.controllerRef``, as
    ``apiGroup/kind/name``, "" when unset)."""

    name: str
    namespace: str = "default"
    uid: str = ""
    generation: int = 0
    resource_version: str = ""
    api_version: str = SCHEDULING_API_VERSIONS[0]
    controller_ref: str = ""
    pod_group_templates: tuple[PodGroupTemplate, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    creation_timestamp: float = 0.0
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def template(self, name: str) -> PodGroupTemplate | None:
        return next((t for t in self.pod_group_templates if t.name == name), None)
