"""Typed ``resource.k8s.io/v1`` objects for structured-parameters allocation: ResourceSlice, DeviceClass,
ResourceClaim (spec and status) and ResourceClaimTemplate, and the allocation result the allocator writes.

Each ``*_from_dict`` decodes one manifest strictly, as the API server does under
``fieldValidation=Strict``: an unknown field anywhere is ``unknown field "spec.devices[0].atributes"``, a
value of the wrong type names its field (``spec.pool.generation: expected an integer, got string``).
The failure is :class:`~pluginhost.decode.FieldError`. Fields the allocator does not use are kept in the
schema (so ``kubectl get -o yaml`` output decodes) but not in the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pluginhost.decode import (
    FieldError,
    as_map,
    get_bool,
    get_int,
    get_list,
    get_map,
    get_str,
    one_of,
    required_str,
    schemas,
    str_tuple,
    strict_problems,
    timestamp,
    unknown_fields,
)
from pluginhost.manifest._fields import node_selector_terms
from pluginhost.model import NodeSelectorTerm
from pluginhost.quantity import QuantityError, parse_quantity

from .capacity import CapacityPolicy

__all__ = [
    "API_VERSION",
    "AllocationResult",
    "CounterSet",
    "Device",
    "DeviceClass",
    "DeviceConstraint",
    "DeviceID",
    "DeviceRequest",
    "DeviceResult",
    "DeviceTaint",
    "DeviceToleration",
    "ExactRequest",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "ResourceSlice",
    "device_class_from_dict",
    "resource_claim_from_dict",
    "resource_claim_template_from_dict",
    "resource_slice_from_dict",
]

API_VERSION = "resource.k8s.io/v1"
#: A device's identity: (driver, pool, device).
DeviceID = tuple[str, str, str]

_NODE_SELECTOR = {
    "NodeSelector": "nodeSelectorTerms:[NodeSelectorTerm]",
    "NodeSelectorTerm": "matchExpressions:[NodeSelectorRequirement] matchFields:[NodeSelectorRequirement]",
    "NodeSelectorRequirement": "key operator values",
    "Meta": (
        "name generateName namespace selfLink uid resourceVersion generation creationTimestamp "
        "deletionTimestamp deletionGracePeriodSeconds labels annotations ownerReferences finalizers managedFields"
    ),
}
_TYPES = {
    "ResourceSlice": "kind apiVersion metadata:Meta spec:ResourceSliceSpec",
    "ResourceSliceSpec": (
        "driver pool:ResourcePool nodeName nodeSelector:NodeSelector allNodes devices:[Device] "
        "perDeviceNodeSelection sharedCounters:[CounterSet] partitionTypeAttribute skipNodeOperations"
    ),
    "ResourcePool": "name generation resourceSliceCount",
    "CounterSet": "name counters:{Counter}",
    "Counter": "value",
    "Device": (
        "name attributes:{DeviceAttribute} capacity:{DeviceCapacity} consumesCounters:[CounterConsumption] "
        "nodeName nodeSelector:NodeSelector allNodes taints:[DeviceTaint] bindsToNode bindingConditions "
        "bindingFailureConditions allowMultipleAllocations nodeAllocatableResourceMappings "
        "nodeAllocatableResources"
    ),
    "DeviceAttribute": "int bool string version ints bools strings versions",
    "DeviceCapacity": "value requestPolicy:RequestPolicy",
    "RequestPolicy": "default validValues validRange:RequestRange",
    "RequestRange": "min max step",
    "CounterConsumption": "counterSet counters:{Counter} compatibilityGroups",
    "DeviceTaint": "key value effect timeAdded",
    "DeviceClass": "kind apiVersion metadata:Meta spec:DeviceClassSpec",
    "DeviceClassSpec": "selectors:[DeviceSelector] config:[ClassConfig] suitableNodes extendedResourceName",
    "ClassConfig": "opaque:Opaque",
    "Opaque": "driver parameters",
    "DeviceSelector": "cel:CELSelector",
    "CELSelector": "expression",
    "ResourceClaim": "kind apiVersion metadata:Meta spec:ClaimSpec status:ClaimStatus",
    "ResourceClaimTemplate": "kind apiVersion metadata:Meta spec:TemplateSpec",
    "TemplateSpec": "metadata:Meta spec:ClaimSpec",
    "ClaimSpec": "devices:DeviceClaim controller",
    "DeviceClaim": "requests:[DeviceRequest] constraints:[DeviceConstraint] config:[ClaimConfig]",
    "ClaimConfig": "requests opaque:Opaque",
    "DeviceRequest": "name exactly:ExactRequest firstAvailable:[SubRequest]",
    "ExactRequest": (
        "deviceClassName selectors:[DeviceSelector] allocationMode count adminAccess tolerations:[Toleration] "
        "capacity:CapacityRequirements derivedAttributes"
    ),
    "SubRequest": (
        "name deviceClassName selectors:[DeviceSelector] allocationMode count tolerations:[Toleration] "
        "capacity:CapacityRequirements derivedAttributes"
    ),
    "CapacityRequirements": "requests",
    "Toleration": "key operator value effect tolerationSeconds",
    "DeviceConstraint": "requests matchAttribute distinctAttribute",
    "ClaimStatus": "allocation:Allocation reservedFor:[ConsumerRef] deallocationRequested devices",
    "ConsumerRef": "apiGroup resource name uid",
    "Allocation": "devices:DeviceAllocation nodeSelector:NodeSelector controller allocationTimestamp",
    "DeviceAllocation": "results:[Result] config:[AllocConfig]",
    "Result": (
        "request driver pool device adminAccess tolerations:[Toleration] bindingConditions "
        "bindingFailureConditions shareID consumedCapacity skipNodeOperations"
    ),
    "AllocConfig": "source requests opaque:Opaque",
}
_SCHEMAS = schemas(_NODE_SELECTOR, _TYPES)

_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
_ALLOCATION_MODES = ("ExactCount", "All")


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: DeviceTaint) -> bool:
        """Whether this toleration covers ``taint`` (an empty key with Exists covers every taint)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: dict[str, Fraction]


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a slice. ``attributes`` maps a qualified name to an int, bool, str or
    ``("version", text)``; ``capacity`` maps a qualified name to its quantity."""

    name: str
    attributes: dict[str, Any] = field(default_factory=dict)
    capacity: dict[str, Fraction] = field(default_factory=dict)
    #: ``capacity[name].requestPolicy`` of the capacities that have one.
    capacity_policies: dict[str, CapacityPolicy] = field(default_factory=dict)
    consumes_counters: tuple[CounterSet, ...] = ()
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    #: Opaque configurations: (driver, parameters).
    config: tuple[tuple[str, Any], ...] = ()
    extended_resource_name: str = ""
    creation_timestamp: str = ""


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """A request for devices of one class (``exactly``, or one subrequest of ``firstAvailable``)."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    mode: str = "ExactCount"
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: dict[str, Fraction] | None = None


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: ExactRequest | None = None
    first_available: tuple[ExactRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One ``status.allocation.devices.results`` entry."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    #: Set for a device that allows multiple allocations: this allocation's share and what it consumes.
    share_id: str = ""
    consumed_capacity: dict[str, Fraction] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"request": self.request, "driver": self.driver, "pool": self.pool, "device": self.device}
        if self.admin_access is not None:
            out["adminAccess"] = self.admin_access
        if self.tolerations:
            out["tolerations"] = [_toleration_dict(t) for t in self.tolerations]
        if self.binding_conditions:
            out["bindingConditions"] = list(self.binding_conditions)
            out["bindingFailureConditions"] = list(self.binding_failure_conditions)
        if self.share_id:
            out["shareID"] = self.share_id
        if self.consumed_capacity:
            out["consumedCapacity"] = {k: _format_quantity(v) for k, v in self.consumed_capacity.items()}
        return out


@dataclass(frozen=True, slots=True)
class AllocationResult:
    """``status.allocation``: the devices, and the nodes they can be used on (None: any node)."""

    results: tuple[DeviceResult, ...]
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    #: ``status.allocation.devices.config`` entries: (source, requests, driver, parameters).
    config: tuple[tuple[str, tuple[str, ...], str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"devices": {"results": [r.to_dict() for r in self.results]}}
        if self.config:
            out["devices"]["config"] = [
                {"source": s, **({"requests": list(r)} if r else {}), "opaque": {"driver": d, "parameters": p}}
                for s, r, d, p in self.config
            ]
        if self.node_selector is not None:
            out["nodeSelector"] = {"nodeSelectorTerms": [_term_dict(t) for t in self.node_selector]}
        return out


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    name: str
    namespace: str = "default"
    uid: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    #: ``spec.devices.config``: (requests, driver, parameters).
    config: tuple[tuple[tuple[str, ...], str, Any], ...] = ()
    allocation: AllocationResult | None = None
    #: ``status.reservedFor``: (resource, name, uid).
    reserved_for: tuple[tuple[str, str, str], ...] = ()
    resource_version: str = ""
    #: ``metadata.deletionTimestamp`` is set: the claim is being deleted.
    deleting: bool = False
    #: The controlling ``metadata.ownerReferences`` entry: (kind, name, uid), or None.
    owner: tuple[str, str, str] | None = None
    finalizers: tuple[str, ...] = ()
    #: ``status.allocation.allocationTimestamp`` (seconds since the epoch), None when not set.
    allocated_at: float | None = None
    annotations: dict[str, str] = field(default_factory=dict, compare=False)
    #: The manifest the claim was decoded from (JSON-compatible): what a status write starts from.
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def reserved_for_pod(self, uid: str) -> bool:
        """Whether ``status.reservedFor`` names the pod with ``uid``."""
        return any(r[0] == "pods" and r[2] == uid for r in self.reserved_for)


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    name: str
    namespace: str
    spec: ResourceClaim
    #: The manifest's ``spec`` (``metadata`` and ``spec`` of the claims it makes), JSON-compatible.
    raw_spec: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def _format_quantity(q: Fraction) -> str:
    if q.denominator == 1:
        return str(q.numerator)
    milli = q * 1000
    return f"{milli.numerator}m" if milli.denominator == 1 else f"{float(q)!r}"


def _toleration_dict(t: DeviceToleration) -> dict[str, Any]:
    out = {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
    return {k: v for k, v in out.items() if v}


def _term_dict(t: NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, reqs in (("matchExpressions", t.match_expressions), ("matchFields", t.match_fields)):
        if reqs:
            out[name] = [{"key": r.key, "operator": r.operator, "values": list(r.values)} for r in reqs]
    return out


# ---------------------------------------------------------------------------------------------------
# Decoding


def _check(obj: object, kind: str) -> Mapping[str, Any]:
    doc = as_map(obj, "")
    api = doc.get("apiVersion")
    if api is not None and api != API_VERSION:
        raise FieldError("apiVersion", f'expected "{API_VERSION}", got "{api}"')
    got = doc.get("kind")
    if got is not None and got != kind:
        raise FieldError("kind", f'expected "{kind}", got "{got}"')
    problems = strict_problems((), unknown_fields(doc, _SCHEMAS[kind]))
    if problems:
        raise FieldError("", ", ".join(problems))
    return doc


def _quantity(v: object, path: str) -> Fraction:
    if v is None:
        raise FieldError(path, "required field is missing")
    try:
        return parse_quantity(v)  # type: ignore[arg-type]
    except QuantityError as exc:
        raise FieldError(path, str(exc)) from None


def _counters(m: Mapping[str, Any], path: str) -> dict[str, Fraction]:
    out = {}
    for name, c in get_map(m, "counters", path).items():
        cpath = f"{path}.counters.{name}"
        out[str(name)] = _quantity(as_map(c, cpath).get("value"), f"{cpath}.value")
    return out


def _node_selector(m: Mapping[str, Any], path: str) -> tuple[NodeSelectorTerm, ...] | None:
    if m.get("nodeSelector") is None:
        return None
    return tuple(node_selector_terms(get_map(m, "nodeSelector", path), f"{path}.nodeSelector"))


def _attribute(v: object, path: str) -> Any:
    a = as_map(v, path)
    set_fields = [
        k for k in ("int", "bool", "string", "version", "ints", "bools", "strings", "versions") if a.get(k) is not None
    ]
    if len(set_fields) != 1:
        raise FieldError(path, f"must have exactly one value, got {len(set_fields)}")
    kind = set_fields[0]
    if kind == "int":
        return get_int(a, "int", path, 0)
    if kind == "bool":
        return get_bool(a, "bool", path)
    if kind == "string":
        return get_str(a, "string", path)
    if kind == "version":
        return ("version", get_str(a, "version", path))
    raise FieldError(f"{path}.{kind}", "list-valued attributes need the DRAListTypeAttributes feature (off in 1.37)")


def _optional_quantity(m: Mapping[str, Any], key: str, path: str) -> Fraction | None:
    return None if m.get(key) is None else _quantity(m[key], f"{path}.{key}")


def _policy(p: Mapping[str, Any], path: str) -> CapacityPolicy:
    values = tuple(_quantity(v, f"{path}.validValues[{i}]") for i, v in enumerate(get_list(p, "validValues", path)))
    if p.get("validRange") is not None and values:
        raise FieldError(path, "only one of validValues, validRange may be set")
    rng = get_map(p, "validRange", path)
    rpath = f"{path}.validRange"
    low = _optional_quantity(rng, "min", rpath)
    if p.get("validRange") is not None and low is None:
        raise FieldError(f"{rpath}.min", "required field is missing")
    return CapacityPolicy(
        _optional_quantity(p, "default", path),
        values,
        low,
        _optional_quantity(rng, "max", rpath),
        _optional_quantity(rng, "step", rpath),
    )


def _device(v: object, path: str) -> Device:
    d = as_map(v, path)
    attrs = {str(k): _attribute(a, f"{path}.attributes.{k}") for k, a in get_map(d, "attributes", path).items()}
    capacity, policies = {}, {}
    for k, c in get_map(d, "capacity", path).items():
        cpath = f"{path}.capacity.{k}"
        capacity[str(k)] = _quantity(as_map(c, cpath).get("value"), f"{cpath}.value")
        if c.get("requestPolicy") is not None:
            policies[str(k)] = _policy(get_map(c, "requestPolicy", cpath), f"{cpath}.requestPolicy")
    consumes = tuple(
        CounterSet(
            required_str(c, "counterSet", f"{path}.consumesCounters[{i}]"),
            _counters(c, f"{path}.consumesCounters[{i}]"),
        )
        for i, c in enumerate(get_list(d, "consumesCounters", path))
    )
    taints = []
    for i, t in enumerate(get_list(d, "taints", path)):
        tpath = f"{path}.taints[{i}]"
        effect = one_of(required_str(t, "effect", tpath), _TAINT_EFFECTS, f"{tpath}.effect", "effect")
        taints.append(DeviceTaint(required_str(t, "key", tpath), get_str(t, "value", tpath), effect))
    return Device(
        name=required_str(d, "name", path),
        attributes=attrs,
        capacity=capacity,
        capacity_policies=policies,
        consumes_counters=consumes,
        node_name=get_str(d, "nodeName", path),
        node_selector=_node_selector(d, path),
        all_nodes=get_bool(d, "allNodes", path),
        taints=tuple(taints),
        binds_to_node=get_bool(d, "bindsToNode", path),
        binding_conditions=str_tuple(d, "bindingConditions", path),
        binding_failure_conditions=str_tuple(d, "bindingFailureConditions", path),
        allow_multiple_allocations=get_bool(d, "allowMultipleAllocations", path),
    )


def resource_slice_from_dict(obj: object) -> ResourceSlice:
    """Decode a ResourceSlice manifest (see the module docstring for the errors)."""
    doc = _check(obj, "ResourceSlice")
    spec = get_map(doc, "spec", "")
    pool = get_map(spec, "pool", "spec")
    node_sel = _node_selector(spec, "spec")
    selection = [
        name
        for name, on in (
            ("nodeName", bool(get_str(spec, "nodeName", "spec"))),
            ("nodeSelector", node_sel is not None),
            ("allNodes", get_bool(spec, "allNodes", "spec")),
            ("perDeviceNodeSelection", get_bool(spec, "perDeviceNodeSelection", "spec")),
        )
        if on
    ]
    if spec.get("devices") and spec.get("sharedCounters"):
        raise FieldError("spec", "only one of devices, sharedCounters may be set")
    if len(selection) != 1:
        raise FieldError(
            "spec",
            "exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required,"
            f" got {len(selection)}",
        )
    return ResourceSlice(
        name=required_str(get_map(doc, "metadata", ""), "name", "metadata"),
        driver=required_str(spec, "driver", "spec"),
        pool=required_str(pool, "name", "spec.pool"),
        generation=get_int(pool, "generation", "spec.pool", 0),
        slice_count=get_int(pool, "resourceSliceCount", "spec.pool", 0),
        node_name=get_str(spec, "nodeName", "spec"),
        node_selector=node_sel,
        all_nodes=get_bool(spec, "allNodes", "spec"),
        per_device_node_selection=get_bool(spec, "perDeviceNodeSelection", "spec"),
        devices=tuple(_device(d, f"spec.devices[{i}]") for i, d in enumerate(get_list(spec, "devices", "spec"))),
        shared_counters=tuple(
            CounterSet(required_str(c, "name", f"spec.sharedCounters[{i}]"), _counters(c, f"spec.sharedCounters[{i}]"))
            for i, c in enumerate(get_list(spec, "sharedCounters", "spec"))
        ),
    )


def _selectors(m: Mapping[str, Any], path: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(get_list(m, "selectors", path)):
        spath = f"{path}.selectors[{i}]"
        out.append(required_str(get_map(as_map(s, spath), "cel", spath), "expression", f"{spath}.cel"))
    return tuple(out)


def _opaque(m: Mapping[str, Any], path: str) -> tuple[str, Any]:
    op = get_map(m, "opaque", path)
    return required_str(op, "driver", f"{path}.opaque"), op.get("parameters")


def device_class_from_dict(obj: object) -> DeviceClass:
    """Decode a DeviceClass manifest."""
    doc = _check(obj, "DeviceClass")
    spec = get_map(doc, "spec", "")
    config = tuple(_opaque(as_map(c, f"spec.config[{i}]"), f"spec.config[{i}]")
                   for i, c in enumerate(get_list(spec, "config", "spec")))
    meta = get_map(doc, "metadata", "")
    return DeviceClass(required_str(meta, "name", "metadata"), _selectors(spec, "spec"), config,
                       get_str(spec, "extendedResourceName", "spec"), get_str(meta, "creationTimestamp", "metadata"))


def _tolerations(m: Mapping[str, Any], path: str) -> tuple[DeviceToleration, ...]:
    out = []
    for i, t in enumerate(get_list(m, "tolerations", path)):
        tpath = f"{path}.tolerations[{i}]"
        op = one_of(get_str(t, "operator", tpath, "Equal"), ("Exists", "Equal"), f"{tpath}.operator", "operator")
        effect = get_str(t, "effect", tpath)
        if effect:
            one_of(effect, _TAINT_EFFECTS, f"{tpath}.effect", "effect")
        out.append(DeviceToleration(get_str(t, "key", tpath), op, get_str(t, "value", tpath), effect))
    return tuple(out)


def _exact(m: Mapping[str, Any], name: str, path: str, sub: bool) -> ExactRequest:
    mode = one_of(
        get_str(m, "allocationMode", path, "ExactCount"), _ALLOCATION_MODES, f"{path}.allocationMode", "allocationMode"
    )
    count = get_int(m, "count", path, 1 if mode == "ExactCount" else 0)
    if mode == "ExactCount" and count <= 0:
        raise FieldError(f"{path}.count", f"must be greater than zero, got {count}")
    if mode == "All" and m.get("count") is not None:
        raise FieldError(f"{path}.count", "must not be set when allocationMode is All")
    admin = None if sub or m.get("adminAccess") is None else get_bool(m, "adminAccess", path)
    capacity = None
    if m.get("capacity") is not None:
        reqs = get_map(get_map(m, "capacity", path), "requests", f"{path}.capacity")
        capacity = {str(k): _quantity(v, f"{path}.capacity.requests.{k}") for k, v in reqs.items()}
    return ExactRequest(
        name=name,
        device_class=required_str(m, "deviceClassName", path),
        selectors=_selectors(m, path),
        mode=mode,
        count=count,
        admin_access=admin,
        tolerations=_tolerations(m, path),
        capacity=capacity,
    )


def _request(v: object, path: str) -> DeviceRequest:
    r = as_map(v, path)
    name = required_str(r, "name", path)
    has_exact, subs = r.get("exactly") is not None, get_list(r, "firstAvailable", path)
    if has_exact == bool(subs):
        raise FieldError(path, "exactly one of exactly, firstAvailable is required")
    if has_exact:
        return DeviceRequest(name, exactly=_exact(get_map(r, "exactly", path), name, f"{path}.exactly", False))
    items = []
    for i, s in enumerate(subs):
        spath = f"{path}.firstAvailable[{i}]"
        items.append(_exact(as_map(s, spath), required_str(s, "name", spath), spath, True))
    return DeviceRequest(name, first_available=tuple(items))


def _claim_spec(spec: Mapping[str, Any], path: str, meta: Mapping[str, Any]) -> ResourceClaim:
    dpath = f"{path}.devices"
    devices = get_map(spec, "devices", path)
    requests = tuple(_request(r, f"{dpath}.requests[{i}]") for i, r in enumerate(get_list(devices, "requests", dpath)))
    constraints = []
    for i, c in enumerate(get_list(devices, "constraints", dpath)):
        cpath = f"{dpath}.constraints[{i}]"
        constraints.append(
            DeviceConstraint(
                str_tuple(c, "requests", cpath),
                get_str(c, "matchAttribute", cpath),
                get_str(c, "distinctAttribute", cpath),
            )
        )
    config = []
    for i, c in enumerate(get_list(devices, "config", dpath)):
        cpath = f"{dpath}.config[{i}]"
        config.append((str_tuple(c, "requests", cpath), *_opaque(as_map(c, cpath), cpath)))
    return ResourceClaim(
        name=get_str(meta, "name", "metadata"),
        namespace=get_str(meta, "namespace", "metadata", "default"),
        uid=get_str(meta, "uid", "metadata"),
        requests=requests,
        constraints=tuple(constraints),
        config=tuple(config),
    )


def _allocation(status: Mapping[str, Any]) -> AllocationResult | None:
    if status.get("allocation") is None:
        return None
    alloc = get_map(status, "allocation", "status")
    path = "status.allocation.devices"
    results = []
    for i, r in enumerate(get_list(get_map(alloc, "devices", "status.allocation"), "results", path)):
        rpath = f"{path}.results[{i}]"
        admin = None if r.get("adminAccess") is None else get_bool(r, "adminAccess", rpath)
        consumed = get_map(r, "consumedCapacity", rpath)
        results.append(
            DeviceResult(
                required_str(r, "request", rpath),
                required_str(r, "driver", rpath),
                required_str(r, "pool", rpath),
                required_str(r, "device", rpath),
                admin,
                _tolerations(r, rpath),
                str_tuple(r, "bindingConditions", rpath),
                str_tuple(r, "bindingFailureConditions", rpath),
                get_str(r, "shareID", rpath),
                {str(k): _quantity(v, f"{rpath}.consumedCapacity.{k}") for k, v in consumed.items()} or None,
            )
        )
    return AllocationResult(tuple(results), _node_selector(alloc, "status.allocation"))


def resource_claim_from_dict(obj: object) -> ResourceClaim:
    """Decode a ResourceClaim manifest, its status (allocation, reservedFor) included."""
    doc = _check(obj, "ResourceClaim")
    meta = get_map(doc, "metadata", "")
    claim = _claim_spec(get_map(doc, "spec", ""), "spec", meta)
    if not claim.name:
        raise FieldError("metadata.name", "required field is missing")
    status = get_map(doc, "status", "")
    reserved = []
    for i, c in enumerate(get_list(status, "reservedFor", "status")):
        cpath = f"status.reservedFor[{i}]"
        reserved.append(
            (required_str(c, "resource", cpath), required_str(c, "name", cpath), required_str(c, "uid", cpath))
        )
    return ResourceClaim(
        claim.name,
        claim.namespace,
        claim.uid,
        claim.requests,
        claim.constraints,
        claim.config,
        _allocation(status),
        tuple(reserved),
        resource_version=get_str(meta, "resourceVersion", "metadata"),
        deleting=meta.get("deletionTimestamp") is not None,
        owner=_controller(meta),
        finalizers=str_tuple(meta, "finalizers", "metadata"),
        allocated_at=timestamp(get_map(status, "allocation", "status"), "allocationTimestamp", "status.allocation"),
        annotations={str(k): str(v) for k, v in get_map(meta, "annotations", "metadata").items()},
        raw=dict(doc),
    )


def _controller(meta: Mapping[str, Any]) -> tuple[str, str, str] | None:
    for i, ref in enumerate(get_list(meta, "ownerReferences", "metadata")):
        path = f"metadata.ownerReferences[{i}]"
        if get_bool(as_map(ref, path), "controller", path):
            return (get_str(ref, "kind", path), get_str(ref, "name", path), get_str(ref, "uid", path))
    return None


def resource_claim_template_from_dict(obj: object) -> ResourceClaimTemplate:
    """Decode a ResourceClaimTemplate manifest; its ``spec`` is the claim it makes (unnamed)."""
    doc = _check(obj, "ResourceClaimTemplate")
    meta = get_map(doc, "metadata", "")
    spec = get_map(doc, "spec", "")
    claim = _claim_spec(get_map(spec, "spec", "spec"), "spec.spec", get_map(spec, "metadata", "spec"))
    return ResourceClaimTemplate(
        required_str(meta, "name", "metadata"), get_str(meta, "namespace", "metadata", "default"), claim, dict(spec)
    )
