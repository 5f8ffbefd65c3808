"""Workload-aware scheduling's objects (``scheduling.k8s.io/v1beta1``, or ``v1alpha2`` as a 1.36 API
server serves them): PodGroup and Workload to :mod:`pluginhost.workload`'s model.

Each version has its own field names (:data:`SCHEMAS`, keyed by kind and apiVersion), so that strict
decoding refuses a 1.37 field in a 1.36 object as that API server would. The checks are those of the
API server that scheduling depends on: one scheduling policy, a positive ``minCount``, at most one
topology constraint, at most four resource claims, the preemption policy and disruption mode values.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pluginhost import decode
from pluginhost.decode import FieldError, Schema, get_int, get_list, get_map, get_str, item_map, required_str, timestamp
from pluginhost.kubefields import TYPES
from pluginhost.workload import (
    BASIC,
    GANG,
    SCHEDULING_API_VERSIONS,
    PodGroup,
    PodGroupClaim,
    PodGroupCondition,
    PodGroupTemplate,
    Workload,
    WorkloadRef,
)

from ._fields import INT32_MAX, INT32_MIN, shown
from ._meta import object_meta, uid

__all__ = [
    "POD_GROUP_KINDS",
    "SCHEMAS",
    "build_pod_group",
    "build_workload",
    "check_pod_group_version",
    "decode_pod_group",
    "decode_workload",
]

V1BETA1, V1ALPHA2 = SCHEDULING_API_VERSIONS
#: The kinds read here, both namespaced.
POD_GROUP_KINDS = ("Workload", "PodGroup")
_MAX_CLAIMS = 4
_MAX_TEMPLATES = 8
_PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")
#: v1alpha2's disruption modes, as the model (v1beta1's) names them.
_V1ALPHA2_MODES = {"Pod": "Single", "PodGroup": "All"}

_COMMON = {
    "Condition": "type status observedGeneration lastTransitionTime reason message",
    "PodGroupSchedulingPolicy": "basic:BasicSchedulingPolicy gang:GangSchedulingPolicy",
    "BasicSchedulingPolicy": "",
    "GangSchedulingPolicy": "minCount",
    "PodGroupSchedulingConstraints": "topology:[TopologyConstraint]",
    "TopologyConstraint": "key",
    "PodGroupResourceClaim": "name resourceClaimName resourceClaimTemplateName",
    "PodGroupResourceClaimStatus": "name resourceClaimName",
    "PodGroupStatus": "conditions:[Condition] resourceClaimStatuses:[PodGroupResourceClaimStatus]",
    "TypedLocalObjectReference": "apiGroup kind name",
    "PodGroup": "apiVersion kind metadata:ObjectMeta spec:PodGroupSpec status:PodGroupStatus",
    "Workload": "apiVersion kind metadata:ObjectMeta spec:WorkloadSpec",
}
_V1BETA1 = {
    **_COMMON,
    "DisruptionMode": "single:Empty all:Empty",
    "Empty": "",
    "WorkloadReference": "workloadName templateName",
    "PodGroupSpec": (
        "parentCompositePodGroupName workloadRef:WorkloadReference schedulingPolicy:PodGroupSchedulingPolicy "
        "schedulingConstraints:PodGroupSchedulingConstraints resourceClaims:[PodGroupResourceClaim] "
        "disruptionMode:DisruptionMode priorityClassName priority preemptionPolicy"
    ),
    "PodGroupTemplate": (
        "name schedulingPolicy:PodGroupSchedulingPolicy schedulingConstraints:PodGroupSchedulingConstraints "
        "resourceClaims:[PodGroupResourceClaim] disruptionMode:DisruptionMode priorityClassName priority "
        "preemptionPolicy"
    ),
    # compositePodGroupTemplates is a list of free-form objects here: CompositePodGroup is not modelled.
    "WorkloadSpec": "controllerRef:TypedLocalObjectReference podGroupTemplates:[PodGroupTemplate] "
                    "compositePodGroupTemplates",
}
_V1ALPHA2 = {
    **_COMMON,
    "WorkloadPodGroupTemplateReference": "workloadName podGroupTemplateName",
    "PodGroupTemplateReference": "workload:WorkloadPodGroupTemplateReference",
    "PodGroupSpec": (
        "podGroupTemplateRef:PodGroupTemplateReference schedulingPolicy:PodGroupSchedulingPolicy "
        "schedulingConstraints:PodGroupSchedulingConstraints resourceClaims:[PodGroupResourceClaim] "
        "disruptionMode priorityClassName priority"
    ),
    "PodGroupTemplate": (
        "name schedulingPolicy:PodGroupSchedulingPolicy schedulingConstraints:PodGroupSchedulingConstraints "
        "resourceClaims:[PodGroupResourceClaim] disruptionMode priorityClassName priority"
    ),
    "WorkloadSpec": "controllerRef:TypedLocalObjectReference podGroupTemplates:[PodGroupTemplate]",
}
_BY_VERSION = {V1BETA1: decode.schemas(TYPES, _V1BETA1), V1ALPHA2: decode.schemas(TYPES, _V1ALPHA2)}
#: (kind, apiVersion) -> the strict schema of that version's object.
SCHEMAS: dict[tuple[str, str], Schema] = {
    (kind, version): table[kind] for version, table in _BY_VERSION.items() for kind in POD_GROUP_KINDS
}


def check_pod_group_version(kind: str, obj: Mapping[str, Any]) -> str:
    """The object's apiVersion, one of :data:`~pluginhost.workload.SCHEDULING_API_VERSIONS` (1.37's when
    absent)."""
    version = obj.get("apiVersion")
    if version is None:
        return V1BETA1
    if version not in SCHEDULING_API_VERSIONS:
        raise FieldError("apiVersion", f'unsupported apiVersion {shown(version)} for {kind} '
                                       f'(expected "{V1BETA1}" or "{V1ALPHA2}")')
    return str(version)


def _policy(m: Mapping[str, Any], path: str) -> tuple[str, int]:
    """``schedulingPolicy``: exactly one of ``basic`` and ``gang`` (minCount 1 for basic)."""
    policy = get_map(m, "schedulingPolicy", path)
    ppath = f"{path}.schedulingPolicy"
    given = [k for k in ("basic", "gang") if policy.get(k) is not None]
    if len(given) != 1:
        which = "must specify one of: `basic`, `gang`" if not given else "must specify exactly one of: `basic`, `gang`"
        raise FieldError(ppath, f"Invalid value: {which}")
    if given[0] == "basic":
        get_map(policy, "basic", ppath)
        return BASIC, 1
    gang = get_map(policy, "gang", ppath)
    min_count = get_int(gang, "minCount", f"{ppath}.gang", 0)
    if min_count <= 0:
        raise FieldError(f"{ppath}.gang.minCount", f"Invalid value: {min_count}: must be greater than zero")
    if min_count > INT32_MAX:
        raise FieldError(f"{ppath}.gang.minCount", f"must fit in a 32-bit integer, got {min_count}")
    return GANG, min_count


def _topology(m: Mapping[str, Any], path: str) -> tuple[str, ...]:
    constraints = get_map(m, "schedulingConstraints", path)
    cpath = f"{path}.schedulingConstraints"
    entries = get_list(constraints, "topology", cpath)
    if len(entries) > 1:
        raise FieldError(f"{cpath}.topology", f"Too many: {len(entries)}: must have at most 1 item")
    return tuple(required_str(item_map(t, f"{cpath}.topology[{i}]"), "key", f"{cpath}.topology[{i}]")
                 for i, t in enumerate(entries))


def _claims(m: Mapping[str, Any], path: str) -> tuple[PodGroupClaim, ...]:
    entries = get_list(m, "resourceClaims", path)
    if len(entries) > _MAX_CLAIMS:
        raise FieldError(f"{path}.resourceClaims", f"Too many: {len(entries)}: must have at most {_MAX_CLAIMS} items")
    out, seen = [], set()
    for i, c in enumerate(entries):
        cpath = f"{path}.resourceClaims[{i}]"
        entry = item_map(c, cpath)
        name = required_str(entry, "name", cpath)
        if name in seen:
            raise FieldError(f"{cpath}.name", f'Duplicate value: "{name}"')
        seen.add(name)
        claim = PodGroupClaim(name, get_str(entry, "resourceClaimName", cpath),
                              get_str(entry, "resourceClaimTemplateName", cpath))
        if bool(claim.claim_name) == bool(claim.template_name):
            raise FieldError(cpath, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`")
        out.append(claim)
    return tuple(out)


def _disruption_mode(m: Mapping[str, Any], path: str, version: str) -> str:
    if version == V1ALPHA2:
        # A string there (1.36's API server defaults it to "Pod"): v1beta1's single and all.
        mode = get_str(m, "disruptionMode", path)
        if not mode:
            return ""
        decode.one_of(mode, _V1ALPHA2_MODES, f"{path}.disruptionMode", "disruptionMode")
        return _V1ALPHA2_MODES[mode]
    raw = m.get("disruptionMode")
    if raw is None:
        return ""
    mode_map = get_map(m, "disruptionMode", path)
    given = [k for k in ("single", "all") if mode_map.get(k) is not None]
    if len(given) != 1:
        raise FieldError(f"{path}.disruptionMode", "Invalid value: must specify exactly one of: `single`, `all`")
    return "Single" if given[0] == "single" else "All"


def _priority(m: Mapping[str, Any], path: str) -> tuple[str, int | None, str]:
    priority: int | None = None
    if m.get("priority") is not None:
        priority = get_int(m, "priority", path, 0)
        if not INT32_MIN <= priority <= INT32_MAX:
            raise FieldError(f"{path}.priority", f"must fit in a 32-bit integer, got {priority}")
    preemption = get_str(m, "preemptionPolicy", path)
    if preemption:
        decode.one_of(preemption, _PREEMPTION_POLICIES, f"{path}.preemptionPolicy", "preemptionPolicy")
    return get_str(m, "priorityClassName", path), priority, preemption


def _template(v: object, path: str, version: str) -> PodGroupTemplate:
    t = item_map(v, path)
    name = required_str(t, "name", path)
    policy, min_count = _policy(t, path)
    priority_class, priority, preemption = _priority(t, path)
    return PodGroupTemplate(name, policy, min_count, _topology(t, path), _claims(t, path),
                            _disruption_mode(t, path, version), priority_class, priority, preemption)


def _workload_ref(spec: Mapping[str, Any], version: str) -> WorkloadRef | None:
    if version == V1ALPHA2:
        ref = get_map(get_map(spec, "podGroupTemplateRef", "spec"), "workload", "spec.podGroupTemplateRef")
        path, template_key = "spec.podGroupTemplateRef.workload", "podGroupTemplateName"
    else:
        ref = get_map(spec, "workloadRef", "spec")
        path, template_key = "spec.workloadRef", "templateName"
    if not ref:
        return None
    return WorkloadRef(required_str(ref, "workloadName", path), required_str(ref, template_key, path))


def _conditions(status: Mapping[str, Any]) -> tuple[PodGroupCondition, ...]:
    out = []
    for i, c in enumerate(get_list(status, "conditions", "status")):
        path = f"status.conditions[{i}]"
        entry = item_map(c, path)
        ltt = entry.get("lastTransitionTime")
        if ltt is not None and not isinstance(ltt, str):
            ltt = _rfc3339(timestamp(entry, "lastTransitionTime", path))
        out.append(PodGroupCondition(
            required_str(entry, "type", path), required_str(entry, "status", path), get_str(entry, "reason", path),
            get_str(entry, "message", path), get_int(entry, "observedGeneration", path, 0),
            ltt or "",
        ))
    return tuple(out)


def _rfc3339(ts: float | None) -> str:
    # YAML reads an unquoted timestamp as a datetime: kept as the API would print it.
    return "" if ts is None else datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_pod_group(obj: dict[str, Any]) -> PodGroup:
    """The :class:`~pluginhost.workload.PodGroup` of a decoded manifest (fields already strictly checked)."""
    version = check_pod_group_version("PodGroup", obj)
    meta, name, namespace, labels, annotations = object_meta(obj, namespaced=True)
    if obj.get("spec") is None:
        raise FieldError("spec", "Required value")
    spec = get_map(obj, "spec", "")
    policy, min_count = _policy(spec, "spec")
    priority_class, priority, preemption = _priority(spec, "spec")
    created = timestamp(meta, "creationTimestamp", "metadata")
    return PodGroup(
        name=name, namespace=namespace, uid=uid(meta), generation=get_int(meta, "generation", "metadata", 0),
        resource_version=get_str(meta, "resourceVersion", "metadata"), api_version=version,
        workload_ref=_workload_ref(spec, version), policy=policy, min_count=min_count,
        topology_keys=_topology(spec, "spec"),
        parent_composite_pod_group=get_str(spec, "parentCompositePodGroupName", "spec"),
        resource_claims=_claims(spec, "spec"), disruption_mode=_disruption_mode(spec, "spec", version),
        priority_class_name=priority_class, priority=priority, preemption_policy=preemption,
        conditions=_conditions(get_map(obj, "status", "")), labels=labels, annotations=annotations,
        creation_timestamp=0.0 if created is None else created,
        deletion_timestamp=timestamp(meta, "deletionTimestamp", "metadata"), raw=obj,
    )


def build_workload(obj: dict[str, Any]) -> Workload:
    """The :class:`~pluginhost.workload.Workload` of a decoded manifest (fields already strictly checked)."""
    version = check_pod_group_version("Workload", obj)
    meta, name, namespace, labels, annotations = object_meta(obj, namespaced=True)
    spec = get_map(obj, "spec", "")
    raw_templates = get_list(spec, "podGroupTemplates", "spec")
    if not raw_templates and not spec.get("compositePodGroupTemplates"):
        raise FieldError("spec.podGroupTemplates", "Required value: must have at least one item")
    if len(raw_templates) > _MAX_TEMPLATES:
        raise FieldError("spec.podGroupTemplates",
                         f"Too many: {len(raw_templates)}: must have at most {_MAX_TEMPLATES} items")
    templates = tuple(_template(t, f"spec.podGroupTemplates[{i}]", version) for i, t in enumerate(raw_templates))
    seen: set[str] = set()
    for i, t in enumerate(templates):
        if t.name in seen:
            raise FieldError(f"spec.podGroupTemplates[{i}].name", f'Duplicate value: "{t.name}"')
        seen.add(t.name)
    ref = get_map(spec, "controllerRef", "spec")
    controller = ""
    if ref:
        rpath = "spec.controllerRef"
        kind, ref_name = required_str(ref, "kind", rpath), required_str(ref, "name", rpath)
        controller = f"{get_str(ref, 'apiGroup', rpath)}/{kind}/{ref_name}"
    created = timestamp(meta, "creationTimestamp", "metadata")
    return Workload(
        name=name, namespace=namespace, uid=uid(meta), generation=get_int(meta, "generation", "metadata", 0),
        resource_version=get_str(meta, "resourceVersion", "metadata"), api_version=version,
        controller_ref=controller, pod_group_templates=templates, labels=labels, annotations=annotations,
        creation_timestamp=0.0 if created is None else created, raw=obj,
    )


def _strict(kind: str, obj: Mapping[str, Any]) -> None:
    version = check_pod_group_version(kind, obj)
    unknown = decode.unknown_fields(obj, SCHEMAS[(kind, version)])
    if unknown:
        raise FieldError("", ", ".join(decode.strict_problems((), unknown)))


def decode_pod_group(obj: Mapping[str, Any]) -> PodGroup:
    """API JSON (an informer's, an embedded store's) to a :class:`~pluginhost.workload.PodGroup`,
    strictly: a :class:`~pluginhost.decode.FieldError` names the first thing wrong."""
    if not isinstance(obj, dict):
        decode.wrong_type("", "a mapping", obj)
    _strict("PodGroup", obj)
    return build_pod_group(obj)


def decode_workload(obj: Mapping[str, Any]) -> Workload:
    """API JSON to a :class:`~pluginhost.workload.Workload`, strictly, as :func:`decode_pod_group`."""
    if not isinstance(obj, dict):
        decode.wrong_type("", "a mapping", obj)
    _strict("Workload", obj)
    return build_workload(obj)
