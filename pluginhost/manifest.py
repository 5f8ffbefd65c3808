"""Kubernetes ``v1`` manifests (YAML or JSON) to the scheduling model, and back for display.

A file may hold several YAML documents separated by ``---``, a single JSON object, and ``kind: List``
(or ``PodList``, ``NodeList``, ...) documents whose ``items`` are expanded in place. Only ``Pod`` and
``Node`` objects are understood; everything else is an error, as is anything the API server would
reject that the scheduler depends on (operators, effects, weights, ports, quantities, names, types).

Errors are :class:`ManifestError` and say where the problem is, e.g.::

    pods.yaml: document 3 (Pod default/web-1): spec.containers[0].resources.requests.cpu:
        invalid quantity "abc"

(one line in practice).

The API server's defaulting that scheduling relies on is applied here, since there is no API server:
a container limit without a request becomes the request, ``hostNetwork`` pods expose their container
ports as host ports, and the documented defaults of optional fields are filled in. The pod's
aggregate ``requests`` (what ``NodeResourcesFit`` compares with a node's allocatable) is computed
once, by :func:`compute_requests`.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from typing import Any, NoReturn

import yaml

from pluginhost.model import (
    DEFAULT_RESERVATION_TTL,
    RESERVATION_ANNOTATION,
    RESERVATION_API_VERSIONS,
    RESERVATION_NAMESPACE,
    Affinity,
    Container,
    ContainerImage,
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    Reservation,
    ReservationOwner,
    ResourceList,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from pluginhost.quantity import MAX_CANONICAL, QuantityError, canonical, format_quantity
from pluginhost.safeyaml import MAX_DEPTH, harden, reader_error, too_deep

try:  # The libyaml loader is several times faster; fall back to pure Python where it is missing.
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]


@harden
class _HardenedLoader(_Loader):
    """Scalar values YAML recognises but Python cannot build (``2024-13-45``) are YAML errors."""

__all__ = [
    "SUPPORTED_KINDS",
    "ManifestError",
    "compute_requests",
    "finish_pod",
    "load_documents",
    "node_from_dict",
    "node_to_dict",
    "one_line",
    "parse_objects",
    "pod_from_dict",
    "pod_to_dict",
    "reservation_from_dict",
]

SUPPORTED_KINDS = ("Pod", "Node", "Reservation")

_LABEL_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_SELECTOR_OPERATORS = _LABEL_SELECTOR_OPERATORS | {"Gt", "Lt"}
_TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
_PREEMPTION_POLICIES = frozenset({"PreemptLowerPriority", "Never"})
_WHEN_UNSATISFIABLE = frozenset({"DoNotSchedule", "ScheduleAnyway"})
_INCLUSION_POLICIES = frozenset({"Honor", "Ignore"})
_PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1

# k8s.io/apimachinery/pkg/util/validation: IsDNS1123Subdomain (names) and IsDNS1123Label (namespaces).
_DNS1123_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_RE = re.compile(rf"{_DNS1123_LABEL}(?:\.{_DNS1123_LABEL})*")
_LABEL_RE = re.compile(_DNS1123_LABEL)
_RFC3339_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)
# Keys that can follow a '.' in a field path unambiguously; others ("nvidia.com/gpu") get brackets.
_PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_INTEGER_RE = re.compile(r"[+-]?\d+")

_EMPTY: Mapping[str, Any] = {}


# Characters that would break a message over several lines (str.splitlines' set) or hide in a
# terminal, shown escaped instead: values from the input are quoted in messages.
_LINE_BREAKING = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)
}
_LINE_BREAKING.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (``\\n``, ``\\x1f``)."""
    return text.translate(_LINE_BREAKING)


class ManifestError(ValueError):
    """A manifest that cannot be turned into the model.

    ``str(err)`` is the full message, always one line (values quoted from the input have their
    control characters escaped); ``location`` (source, document and object), ``path`` (the field,
    may be empty) and ``reason`` are also kept separately for callers that render them.
    """

    def __init__(self, message: str, *, location: str = "", path: str = "", reason: str = "") -> None:
        super().__init__(one_line(message))
        self.location = one_line(location)
        self.path = one_line(path)
        self.reason = one_line(reason)


class _Invalid(Exception):
    """Raised inside the builders with the field path; turned into ManifestError at the top."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason


# --------------------------------------------------------------------------------------------
# Field access. Paths are built only when an error is raised, so the happy path stays cheap.


def _join(parent: str, key: str) -> str:
    if _PLAIN_KEY_RE.fullmatch(key) is None:
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _type_name(v: object) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "mapping"
    if isinstance(v, list):
        return "list"
    if isinstance(v, datetime):
        return "timestamp"
    if isinstance(v, date):
        return "date"
    return type(v).__name__


def _wrong_type(path: str, expected: str, v: object) -> NoReturn:
    raise _Invalid(path, f"expected {expected}, got {_type_name(v)}")


def _map(m: Mapping[str, Any], key: str, parent: str) -> Mapping[str, Any]:
    v = m.get(key)
    if v is None:
        return _EMPTY
    if isinstance(v, dict):
        return v
    _wrong_type(_join(parent, key), "a mapping", v)


def _list(m: Mapping[str, Any], key: str, parent: str) -> list[Any]:
    v = m.get(key)
    if v is None:
        return []
    if isinstance(v, list):
        return v
    _wrong_type(_join(parent, key), "a list", v)


def _str(m: Mapping[str, Any], key: str, parent: str, default: str = "") -> str:
    v = m.get(key)
    if v is None:
        return default
    if isinstance(v, str):
        return v
    _wrong_type(_join(parent, key), "a string", v)


def _required_str(m: Mapping[str, Any], key: str, parent: str) -> str:
    v = _str(m, key, parent)
    if not v:
        raise _Invalid(_join(parent, key), "required field is missing")
    return v


def _int(m: Mapping[str, Any], key: str, parent: str, default: int) -> int:
    v = m.get(key)
    if v is None:
        return default
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    _wrong_type(_join(parent, key), "an integer", v)


def _bool(m: Mapping[str, Any], key: str, parent: str) -> bool:
    v = m.get(key)
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    _wrong_type(_join(parent, key), "a boolean", v)


def _item_map(v: object, path: str) -> Mapping[str, Any]:
    if isinstance(v, dict):
        return v
    _wrong_type(path, "a mapping", v)


def _str_map(m: Mapping[str, Any], key: str, parent: str) -> dict[str, str]:
    v = _map(m, key, parent)
    for k, val in v.items():
        if not isinstance(k, str):
            raise _Invalid(_join(parent, key), f"keys must be strings, got {_type_name(k)} {k!r}")
        if not isinstance(val, str):
            _wrong_type(_join(_join(parent, key), k), "a string", val)
    return dict(v)


def _str_tuple(m: Mapping[str, Any], key: str, parent: str) -> tuple[str, ...]:
    v = _list(m, key, parent)
    for i, s in enumerate(v):
        if not isinstance(s, str):
            _wrong_type(f"{_join(parent, key)}[{i}]", "a string", s)
    return tuple(v)


def _one_of(value: str, allowed: Iterable[str], path: str, what: str) -> str:
    if value not in allowed:
        choices = ", ".join(sorted(allowed))
        raise _Invalid(path, f'unsupported {what} "{value}" (supported: {choices})')
    return value


def _resource_list(m: Mapping[str, Any], key: str, parent: str) -> ResourceList:
    v = _map(m, key, parent)
    out: ResourceList = {}
    for name, raw in v.items():
        if not isinstance(name, str) or not name:
            raise _Invalid(_join(parent, key), f"invalid resource name {name!r}")
        try:
            out[name] = canonical(name, raw)
        except QuantityError as e:
            raise _Invalid(_join(_join(parent, key), name), str(e)) from None
    return out


def _timestamp(m: Mapping[str, Any], key: str, parent: str) -> float | None:
    v = m.get(key)
    if v is None:
        return None
    # PyYAML already turns unquoted timestamps into datetimes; YAML says a zone-less one is UTC.
    if isinstance(v, datetime):
        return (v if v.tzinfo is not None else v.replace(tzinfo=UTC)).timestamp()
    if not isinstance(v, str):
        _wrong_type(_join(parent, key), "an RFC3339 timestamp string", v)
    match = _RFC3339_RE.fullmatch(v)
    if match is not None:
        y, mo, d, h, mi, s, frac, zulu, sign, oh, om = match.groups()
        try:
            ts = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC).timestamp()
        except ValueError:
            pass  # out-of-range field, e.g. month 13: reported below
        else:
            if not zulu:
                offset = int(oh) * 3600 + int(om) * 60
                ts -= offset if sign == "+" else -offset
            return ts + float(frac) if frac else ts
    raise _Invalid(
        _join(parent, key), f'invalid timestamp "{v}" (expected RFC3339, e.g. 2024-01-02T03:04:05Z)'
    )


# --------------------------------------------------------------------------------------------
# Shared pieces.


def _metadata_name(meta: Mapping[str, Any]) -> str:
    name = _required_str(meta, "name", "metadata")
    if len(name) > 253 or _SUBDOMAIN_RE.fullmatch(name) is None:
        raise _Invalid(
            "metadata.name",
            f'invalid name "{name}": must be a lowercase RFC 1123 subdomain (lowercase letters, digits, '
            "'-' and '.', starting and ending with a letter or digit, at most 253 characters)",
        )
    return name


def _label_selector(m: Mapping[str, Any], key: str, parent: str) -> LabelSelector | None:
    v = m.get(key)
    if v is None:
        return None
    path = _join(parent, key)
    sel = _item_map(v, path)
    exprs = []
    for i, e in enumerate(_list(sel, "matchExpressions", path)):
        epath = f"{path}.matchExpressions[{i}]"
        req = _item_map(e, epath)
        k = _required_str(req, "key", epath)
        op = _one_of(
            _required_str(req, "operator", epath), _LABEL_SELECTOR_OPERATORS, f"{epath}.operator", "operator"
        )
        values = _str_tuple(req, "values", epath)
        _check_values(op, values, epath)
        exprs.append(LabelSelectorRequirement(key=k, operator=op, values=values))
    return LabelSelector(match_labels=_str_map(sel, "matchLabels", path), match_expressions=exprs)


def _check_values(op: str, values: tuple[str, ...], path: str) -> None:
    """metav1/core validation of a requirement's values for its operator."""
    if op in ("In", "NotIn"):
        if not values:
            raise _Invalid(f"{path}.values", f"must be non-empty when operator is {op}")
    elif op in ("Exists", "DoesNotExist"):
        if values:
            raise _Invalid(f"{path}.values", f"must be empty when operator is {op}")
    elif len(values) != 1 or _INTEGER_RE.fullmatch(values[0]) is None:
        # Gt/Lt: the node's label value is compared as an integer with this single value.
        raise _Invalid(f"{path}.values", f"must be a single integer when operator is {op}")


def _node_selector_term(v: object, path: str) -> NodeSelectorTerm:
    term = _item_map(v, path)
    exprs = []
    for i, e in enumerate(_list(term, "matchExpressions", path)):
        epath = f"{path}.matchExpressions[{i}]"
        req = _item_map(e, epath)
        k = _required_str(req, "key", epath)
        op = _one_of(
            _required_str(req, "operator", epath), _NODE_SELECTOR_OPERATORS, f"{epath}.operator", "operator"
        )
        values = _str_tuple(req, "values", epath)
        _check_values(op, values, epath)
        exprs.append(NodeSelectorRequirement(key=k, operator=op, values=values))
    fields = []
    for i, e in enumerate(_list(term, "matchFields", path)):
        epath = f"{path}.matchFields[{i}]"
        req = _item_map(e, epath)
        # The API server accepts only metadata.name here, with In/NotIn and exactly one value.
        k = _required_str(req, "key", epath)
        if k != "metadata.name":
            raise _Invalid(f"{epath}.key", f'unsupported field "{k}" (supported: metadata.name)')
        op = _one_of(_required_str(req, "operator", epath), ("In", "NotIn"), f"{epath}.operator", "operator")
        values = _str_tuple(req, "values", epath)
        if len(values) != 1:
            raise _Invalid(f"{epath}.values", f"must have exactly one value when operator is {op}")
        fields.append(NodeSelectorRequirement(key=k, operator=op, values=values))
    return NodeSelectorTerm(match_expressions=exprs, match_fields=fields)


def _weight(m: Mapping[str, Any], path: str) -> int:
    if m.get("weight") is None:
        raise _Invalid(f"{path}.weight", "required field is missing")
    w = _int(m, "weight", path, 0)
    if not 1 <= w <= 100:
        raise _Invalid(f"{path}.weight", f"must be in the range 1-100, got {w}")
    return w


def _node_affinity(v: Mapping[str, Any], path: str) -> NodeAffinity:
    required: list[NodeSelectorTerm] | None = None
    req = v.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        rpath = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        sel = _item_map(req, rpath)
        terms = _list(sel, "nodeSelectorTerms", rpath)
        if not terms:
            raise _Invalid(f"{rpath}.nodeSelectorTerms", "must have at least one node selector term")
        required = [_node_selector_term(t, f"{rpath}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms)]
    preferred = []
    for i, p in enumerate(_list(v, "preferredDuringSchedulingIgnoredDuringExecution", path)):
        ppath = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        pm = _item_map(p, ppath)
        weight = _weight(pm, ppath)
        if pm.get("preference") is None:
            raise _Invalid(f"{ppath}.preference", "required field is missing")
        preferred.append(
            PreferredSchedulingTerm(weight, _node_selector_term(pm["preference"], f"{ppath}.preference"))
        )
    return NodeAffinity(required=required, preferred=preferred)


def _pod_affinity_term(v: object, path: str) -> PodAffinityTerm:
    t = _item_map(v, path)
    selector = _label_selector(t, "labelSelector", path)
    match_keys = _str_tuple(t, "matchLabelKeys", path)
    mismatch_keys = _str_tuple(t, "mismatchLabelKeys", path)
    if (match_keys or mismatch_keys) and selector is None:
        which = "matchLabelKeys" if match_keys else "mismatchLabelKeys"
        raise _Invalid(f"{path}.{which}", "must not be set when labelSelector is not set")
    both = set(match_keys) & set(mismatch_keys)
    if both:
        raise _Invalid(f"{path}.mismatchLabelKeys", f'key "{min(both)}" is also in matchLabelKeys')
    return PodAffinityTerm(
        topology_key=_required_str(t, "topologyKey", path),
        label_selector=selector,
        namespaces=_str_tuple(t, "namespaces", path),
        namespace_selector=_label_selector(t, "namespaceSelector", path),
        match_label_keys=match_keys,
        mismatch_label_keys=mismatch_keys,
    )


def _pod_affinity(v: Mapping[str, Any], path: str) -> PodAffinity:
    required = [
        _pod_affinity_term(t, f"{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        for i, t in enumerate(_list(v, "requiredDuringSchedulingIgnoredDuringExecution", path))
    ]
    preferred = []
    for i, p in enumerate(_list(v, "preferredDuringSchedulingIgnoredDuringExecution", path)):
        ppath = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        pm = _item_map(p, ppath)
        weight = _weight(pm, ppath)
        if pm.get("podAffinityTerm") is None:
            raise _Invalid(f"{ppath}.podAffinityTerm", "required field is missing")
        preferred.append(
            WeightedPodAffinityTerm(
                weight, _pod_affinity_term(pm["podAffinityTerm"], f"{ppath}.podAffinityTerm")
            )
        )
    return PodAffinity(required=required, preferred=preferred)


def _affinity(spec: Mapping[str, Any]) -> Affinity | None:
    a = _map(spec, "affinity", "spec")
    if not a:
        return None
    node = a.get("nodeAffinity")
    pod = a.get("podAffinity")
    anti = a.get("podAntiAffinity")
    affinity = Affinity(
        node_affinity=None
        if node is None
        else _node_affinity(_item_map(node, "spec.affinity.nodeAffinity"), "spec.affinity.nodeAffinity"),
        pod_affinity=None
        if pod is None
        else _pod_affinity(_item_map(pod, "spec.affinity.podAffinity"), "spec.affinity.podAffinity"),
        pod_anti_affinity=None
        if anti is None
        else _pod_affinity(_item_map(anti, "spec.affinity.podAntiAffinity"), "spec.affinity.podAntiAffinity"),
    )
    # Callers test "pod.affinity is None" to skip work; an affinity with nothing in it is None.
    if (
        affinity.node_affinity is None
        and affinity.pod_affinity is None
        and affinity.pod_anti_affinity is None
    ):
        return None
    return affinity


def _toleration(v: object, path: str) -> Toleration:
    t = _item_map(v, path)
    key = _str(t, "key", path)
    # "" is a valid operator meaning Equal; store the explicit form.
    operator = _str(t, "operator", path) or "Equal"
    _one_of(operator, ("Equal", "Exists"), f"{path}.operator", "operator")
    value = _str(t, "value", path)
    if operator == "Exists" and value:
        raise _Invalid(f"{path}.value", "must be empty when operator is Exists")
    if not key and operator != "Exists":
        raise _Invalid(f"{path}.operator", "must be Exists when key is empty")
    effect = _str(t, "effect", path)
    if effect:
        _one_of(effect, _TAINT_EFFECTS, f"{path}.effect", "effect")
    seconds = t.get("tolerationSeconds")
    if seconds is not None:
        seconds = _int(t, "tolerationSeconds", path, 0)
    return Toleration(key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds)


def _spread_constraint(v: object, path: str) -> TopologySpreadConstraint:
    c = _item_map(v, path)
    if c.get("maxSkew") is None:
        raise _Invalid(f"{path}.maxSkew", "required field is missing")
    max_skew = _int(c, "maxSkew", path, 0)
    if max_skew < 1:
        raise _Invalid(f"{path}.maxSkew", f"must be greater than zero, got {max_skew}")
    topology_key = _required_str(c, "topologyKey", path)
    when = _one_of(
        _required_str(c, "whenUnsatisfiable", path),
        _WHEN_UNSATISFIABLE,
        f"{path}.whenUnsatisfiable",
        "whenUnsatisfiable",
    )
    min_domains: int | None = None
    if c.get("minDomains") is not None:
        min_domains = _int(c, "minDomains", path, 0)
        if min_domains < 1:
            raise _Invalid(f"{path}.minDomains", f"must be greater than zero, got {min_domains}")
        if when != "DoNotSchedule":
            raise _Invalid(f"{path}.minDomains", "can only be set when whenUnsatisfiable is DoNotSchedule")
    selector = _label_selector(c, "labelSelector", path)
    match_keys = _str_tuple(c, "matchLabelKeys", path)
    if match_keys and selector is None:
        raise _Invalid(f"{path}.matchLabelKeys", "must not be set when labelSelector is not set")
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        when_unsatisfiable=when,
        label_selector=selector,
        min_domains=min_domains,
        node_affinity_policy=_one_of(
            _str(c, "nodeAffinityPolicy", path, "Honor") or "Honor",
            _INCLUSION_POLICIES,
            f"{path}.nodeAffinityPolicy",
            "policy",
        ),
        node_taints_policy=_one_of(
            _str(c, "nodeTaintsPolicy", path, "Ignore") or "Ignore",
            _INCLUSION_POLICIES,
            f"{path}.nodeTaintsPolicy",
            "policy",
        ),
        match_label_keys=match_keys,
    )


def _port(v: object, path: str, host_network: bool) -> ContainerPort:
    p = _item_map(v, path)
    if p.get("containerPort") is None:
        raise _Invalid(f"{path}.containerPort", "required field is missing")
    container_port = _int(p, "containerPort", path, 0)
    if not 1 <= container_port <= 65535:
        raise _Invalid(f"{path}.containerPort", f"must be between 1 and 65535, got {container_port}")
    host_port = _int(p, "hostPort", path, 0)
    if not 0 <= host_port <= 65535:
        raise _Invalid(f"{path}.hostPort", f"must be between 1 and 65535 (or 0 for none), got {host_port}")
    if host_network and host_port == 0:
        # API server defaulting: with hostNetwork the container port *is* a host port.
        host_port = container_port
    protocol = _str(p, "protocol", path) or "TCP"
    _one_of(protocol, _PROTOCOLS, f"{path}.protocol", "protocol")
    return ContainerPort(
        container_port=container_port, host_port=host_port, protocol=protocol, host_ip=_str(p, "hostIP", path)
    )


def _container(v: object, path: str, host_network: bool) -> Container:
    c = _item_map(v, path)
    name = _required_str(c, "name", path)
    resources = _map(c, "resources", path)
    rpath = f"{path}.resources"
    requests = _resource_list(resources, "requests", rpath)
    limits = _resource_list(resources, "limits", rpath)
    for resource, limit in limits.items():
        request = requests.get(resource)
        if request is None:
            # API server defaulting: a limit without a request is also the request.
            requests[resource] = limit
        elif request > limit:
            raise _Invalid(
                _join(f"{rpath}.requests", resource),
                f"must be less than or equal to {resource} limit of {format_quantity(resource, limit)}",
            )
    return Container(
        name=name,
        image=_str(c, "image", path),
        requests=requests,
        limits=limits,
        ports=[_port(p, f"{path}.ports[{i}]", host_network) for i, p in enumerate(_list(c, "ports", path))],
        restart_policy=_str(c, "restartPolicy", path),
    )


# --------------------------------------------------------------------------------------------
# Pods and nodes.


def _build_pod(obj: dict[str, Any]) -> Pod:
    meta = _map(obj, "metadata", "")
    name = _metadata_name(meta)
    namespace = _str(meta, "namespace", "metadata") or "default"
    if len(namespace) > 63 or _LABEL_RE.fullmatch(namespace) is None:
        raise _Invalid(
            "metadata.namespace", f'invalid namespace "{namespace}": must be a lowercase RFC 1123 label'
        )
    created = _timestamp(meta, "creationTimestamp", "metadata")
    spec = _map(obj, "spec", "")
    status = _map(obj, "status", "")

    host_network = _bool(spec, "hostNetwork", "spec")
    raw_containers = _list(spec, "containers", "spec")
    if not raw_containers:
        raise _Invalid("spec.containers", "a pod must have at least one container")
    containers = [_container(c, f"spec.containers[{i}]", host_network) for i, c in enumerate(raw_containers)]
    init_containers = [
        _container(c, f"spec.initContainers[{i}]", host_network)
        for i, c in enumerate(_list(spec, "initContainers", "spec"))
    ]
    seen: set[str] = set()
    for field_name, group in (("containers", containers), ("initContainers", init_containers)):
        for i, c in enumerate(group):
            if c.name in seen:
                raise _Invalid(f"spec.{field_name}[{i}].name", f'duplicate container name "{c.name}"')
            seen.add(c.name)

    priority = _int(spec, "priority", "spec", 0)
    if not _INT32_MIN <= priority <= _INT32_MAX:
        raise _Invalid("spec.priority", f"must fit in a 32-bit integer, got {priority}")
    preemption_policy = _str(spec, "preemptionPolicy", "spec") or "PreemptLowerPriority"
    _one_of(preemption_policy, _PREEMPTION_POLICIES, "spec.preemptionPolicy", "preemptionPolicy")

    constraints = [
        _spread_constraint(c, f"spec.topologySpreadConstraints[{i}]")
        for i, c in enumerate(_list(spec, "topologySpreadConstraints", "spec"))
    ]
    pairs: set[tuple[str, str]] = set()
    for i, tsc in enumerate(constraints):
        pair = (tsc.topology_key, tsc.when_unsatisfiable)
        if pair in pairs:
            raise _Invalid(
                f"spec.topologySpreadConstraints[{i}]",
                f'duplicate constraint for topologyKey "{tsc.topology_key}" '
                f"and whenUnsatisfiable {tsc.when_unsatisfiable}",
            )
        pairs.add(pair)

    gates = []
    for i, g in enumerate(_list(spec, "schedulingGates", "spec")):
        gates.append(
            _required_str(_item_map(g, f"spec.schedulingGates[{i}]"), "name", f"spec.schedulingGates[{i}]")
        )

    pod = Pod(
        name=name,
        namespace=namespace,
        uid=_str(meta, "uid", "metadata") or str(uuid.uuid4()),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        scheduler_name=_str(spec, "schedulerName", "spec") or "default-scheduler",
        node_name=_str(spec, "nodeName", "spec"),
        priority=priority,
        priority_class_name=_str(spec, "priorityClassName", "spec"),
        preemption_policy=preemption_policy,
        node_selector=_str_map(spec, "nodeSelector", "spec"),
        affinity=_affinity(spec),
        tolerations=[
            _toleration(t, f"spec.tolerations[{i}]") for i, t in enumerate(_list(spec, "tolerations", "spec"))
        ],
        topology_spread_constraints=constraints,
        scheduling_gates=tuple(gates),
        containers=containers,
        init_containers=init_containers,
        overhead=_resource_list(spec, "overhead", "spec"),
        creation_timestamp=time.time() if created is None else created,
        nominated_node_name=_str(status, "nominatedNodeName", "status"),
        deletion_timestamp=_timestamp(meta, "deletionTimestamp", "metadata"),
        raw=obj,
    )
    pod.requests = compute_requests(pod)
    for resource, amount in pod.requests.items():
        if amount > MAX_CANONICAL:
            # Each quantity fits an int64; their sum must too (the snapshot's columns are int64).
            raise _Invalid(
                "spec.containers", f"the pod's {resource} requests add up to more than the largest quantity"
            )
    return pod


def _build_node(obj: dict[str, Any]) -> Node:
    meta = _map(obj, "metadata", "")
    name = _metadata_name(meta)
    spec = _map(obj, "spec", "")
    status = _map(obj, "status", "")
    taints = []
    for i, t in enumerate(_list(spec, "taints", "spec")):
        path = f"spec.taints[{i}]"
        tm = _item_map(t, path)
        key = _required_str(tm, "key", path)
        effect = _one_of(_required_str(tm, "effect", path), _TAINT_EFFECTS, f"{path}.effect", "effect")
        taints.append(Taint(key=key, effect=effect, value=_str(tm, "value", path)))
    capacity = _resource_list(status, "capacity", "status")
    # The kubelet always reports both; hand-written nodes often give only capacity.
    allocatable = (
        _resource_list(status, "allocatable", "status")
        if status.get("allocatable") is not None
        else dict(capacity)
    )
    images = []
    for i, img in enumerate(_list(status, "images", "status")):
        path = f"status.images[{i}]"
        im = _item_map(img, path)
        size = _int(im, "sizeBytes", path, 0)
        if size < 0:
            raise _Invalid(f"{path}.sizeBytes", f"must not be negative, got {size}")
        images.append(ContainerImage(names=_str_tuple(im, "names", path), size_bytes=size))
    return Node(
        name=name,
        uid=_str(meta, "uid", "metadata") or str(uuid.uuid4()),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        taints=taints,
        unschedulable=_bool(spec, "unschedulable", "spec"),
        capacity=capacity,
        allocatable=allocatable,
        images=images,
        raw=obj,
    )


def _describe(kind: str, obj: Mapping[str, Any]) -> str:
    """``Pod default/web-1`` / ``Node n1`` / ``Pod``: as much identity as the object gives."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        return kind
    if kind == "Node":
        return f"{kind} {name}"
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return f"{kind} {ns if isinstance(ns, str) and ns else 'default'}/{name}"


def _error(where: str, kind: str, obj: Mapping[str, Any], path: str, reason: str) -> ManifestError:
    ident = _describe(kind, obj)
    location = f"{where} ({ident})" if where else ident
    message = f"{location}: {path}: {reason}" if path else f"{location}: {reason}"
    return ManifestError(message, location=location, path=path, reason=reason)


def pod_from_dict(obj: dict[str, Any], where: str = "") -> Pod:
    """Build a :class:`Pod` from a ``v1`` Pod manifest; ``where`` prefixes error messages."""
    if not isinstance(obj, dict):
        raise ManifestError(f"{where or 'Pod'}: expected a mapping, got {_type_name(obj)}", location=where)
    try:
        return _build_pod(obj)
    except _Invalid as e:
        raise _error(where, "Pod", obj, e.path, e.reason) from None


def node_from_dict(obj: dict[str, Any], where: str = "") -> Node:
    """Build a :class:`Node` from a ``v1`` Node manifest; ``where`` prefixes error messages."""
    if not isinstance(obj, dict):
        raise ManifestError(f"{where or 'Node'}: expected a mapping, got {_type_name(obj)}", location=where)
    try:
        return _build_node(obj)
    except _Invalid as e:
        raise _error(where, "Node", obj, e.path, e.reason) from None


# --------------------------------------------------------------------------------------------
# Reservations.

_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration(m: Mapping[str, Any], key: str, parent: str) -> float | None:
    """A Go-style duration ("1h30m", "90s", "0") in seconds."""
    v = m.get(key)
    if v is None:
        return None
    path = _join(parent, key)
    if isinstance(v, int | float) and not isinstance(v, bool):
        raise _Invalid(path, f'invalid duration {v!r}: give a unit, e.g. "{v}s"')
    if not isinstance(v, str):
        _wrong_type(path, 'a duration string such as "1h" or "30m"', v)
    text = v.strip()
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION_PART_RE.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise _Invalid(path, f'invalid duration "{v}" (e.g. "1h", "30m", "1h30m", "90s", "0" for never)')
    return total


def _reservation_owner(v: object, path: str) -> ReservationOwner:
    m = _item_map(v, path)
    obj = m.get("object")
    owner = ReservationOwner(label_selector=_label_selector(m, "labelSelector", path))
    if obj is not None:
        opath = f"{path}.object"
        ref = _item_map(obj, opath)
        kind = _str(ref, "kind", opath, "Pod")
        if kind != "Pod":
            raise _Invalid(f"{opath}.kind", f'unsupported owner kind "{kind}" (Pod)')
        owner.name = _required_str(ref, "name", opath)
        owner.namespace = _str(ref, "namespace", opath) or "default"
        owner.uid = _str(ref, "uid", opath)
    if obj is None and owner.label_selector is None:
        raise _Invalid(path, "an owner needs an object (a pod) or a labelSelector")
    return owner


def _build_reservation(obj: dict[str, Any], where: str) -> Reservation:
    api_version = obj.get("apiVersion")
    if api_version not in RESERVATION_API_VERSIONS:
        allowed = " or ".join(f'"{a}"' for a in RESERVATION_API_VERSIONS)
        shown = json.dumps(api_version)
        raise _Invalid("apiVersion", f"unsupported apiVersion {shown} for Reservation (expected {allowed})")
    meta = _map(obj, "metadata", "")
    name = _metadata_name(meta)
    spec = _map(obj, "spec", "")
    if "template" not in spec:
        raise _Invalid("spec.template", "required field is missing (the reserve pod: resources, nodeSelector, ...)")
    template = _map(spec, "template", "spec")
    tmeta = _map(template, "metadata", "spec.template")
    pod_doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": dict(_str_map(tmeta, "labels", "spec.template.metadata")),
            "annotations": dict(_str_map(tmeta, "annotations", "spec.template.metadata")),
        },
        "spec": dict(_map(template, "spec", "spec.template")),
    }
    try:
        pod = _build_pod(pod_doc)
    except _Invalid as e:
        raise _Invalid(_join("spec.template", e.path), e.reason) from None
    if pod.node_name:
        raise _Invalid(
            "spec.template.spec.nodeName", "a reservation is placed by the scheduler; nodeName is not allowed"
        )
    owners = [_reservation_owner(v, f"spec.owners[{i}]") for i, v in enumerate(_list(spec, "owners", "spec"))]
    if not owners:
        raise _Invalid("spec.owners", "required: at least one owner (an object or a labelSelector)")
    ttl = _duration(spec, "ttl", "spec")
    expires = _timestamp(spec, "expires", "spec")
    allocate_once = spec.get("allocateOnce", True)
    if not isinstance(allocate_once, bool):
        _wrong_type("spec.allocateOnce", "a boolean", allocate_once)
    created = _timestamp(meta, "creationTimestamp", "metadata")
    uid = _str(meta, "uid", "metadata") or str(uuid.uuid4())
    pod.uid = uid
    pod.namespace = RESERVATION_NAMESPACE
    pod.annotations = {**pod.annotations, RESERVATION_ANNOTATION: name}
    return Reservation(
        name=name,
        template=pod,
        uid=uid,
        owners=owners,
        ttl_seconds=DEFAULT_RESERVATION_TTL if ttl is None else ttl,
        expires=expires,
        allocate_once=allocate_once,
        creation_timestamp=created if created is not None else time.time(),
        raw=obj,
    )


def reservation_from_dict(obj: dict[str, Any], where: str = "") -> Reservation:
    """Build a :class:`Reservation` from its manifest; ``where`` prefixes error messages."""
    if not isinstance(obj, dict):
        raise ManifestError(f"{where or 'Reservation'}: expected a mapping, got {_type_name(obj)}", location=where)
    try:
        return _build_reservation(obj, where)
    except _Invalid as e:
        raise _error(where, "Reservation", obj, e.path, e.reason) from None


# --------------------------------------------------------------------------------------------
# Requests.


def _add_into(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for r, q in amounts.items():
        total[r] = total.get(r, 0) + q


def _max_into(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for r, q in amounts.items():
        if q > total.get(r, -1):
            total[r] = q


def compute_requests(pod: Pod) -> ResourceList:
    """The pod's effective requests, as ``resource.PodRequests`` in k8s.io/component-helpers.

    Regular containers run together, so they add up. Init containers run one after another, each
    alongside the sidecars (``restartPolicy: Always`` init containers) started before it; sidecars
    keep running, so they also add to the regular containers' sum. The pod needs the larger of the
    two phases, plus its overhead.
    """
    total: dict[str, int] = {}
    for c in pod.containers:
        _add_into(total, c.requests)
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in pod.init_containers:
        if c.restart_policy == "Always":
            _add_into(total, c.requests)
            _add_into(sidecars, c.requests)
            _max_into(init_max, sidecars)
        else:
            effective = dict(c.requests)
            _add_into(effective, sidecars)
            _max_into(init_max, effective)
    _max_into(total, init_max)
    _add_into(total, pod.overhead)
    return total


def finish_pod(pod: Pod) -> Pod:
    """Complete a pod built in code rather than from a manifest: default each container's missing
    requests from its limits (as the API server does) and compute ``pod.requests``."""
    for c in (*pod.containers, *pod.init_containers):
        for resource, limit in c.limits.items():
            c.requests.setdefault(resource, limit)
    pod.requests = compute_requests(pod)
    return pod


# --------------------------------------------------------------------------------------------
# Documents.


def _yaml_error(source: str, index: int, err: yaml.YAMLError, text: str) -> ManifestError:
    location = f"{source}: document {index}"
    refused = reader_error(err, text)
    if refused is not None:
        where, problem = refused
        reason = f"invalid YAML: {problem}"
        return ManifestError(f"{location}: {where}: {reason}", location=location, path="", reason=reason)
    mark = getattr(err, "problem_mark", None)
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    context = getattr(err, "context", None)
    reason = f"invalid YAML: {context}, {problem}" if context else f"invalid YAML: {problem}"
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else f"document {index}"
    return ManifestError(f"{location}: {where}: {reason}", location=location, path="", reason=reason)


def _raw_documents(text: str, source: str) -> list[tuple[int, Any]]:
    if text.lstrip().startswith("{"):
        # JSON is valid YAML, but the json module is faster and accepts tab indentation.
        try:
            return [(1, json.loads(text))]
        except json.JSONDecodeError:
            pass  # maybe YAML flow style; let the YAML parser have it and report its errors
        except RecursionError:
            raise _text_error(source, "invalid JSON: nested too deeply") from None
        except ValueError:  # not a JSONDecodeError: an integer beyond Python's limit on digits
            raise _text_error(source, "invalid JSON: a number has too many digits") from None
    docs: list[tuple[int, Any]] = []
    index = 0
    try:
        where = too_deep(text)
        if where is not None:
            raise _text_error(source, f"{where}: invalid YAML: collections nested deeper than {MAX_DEPTH} levels")
        for doc in yaml.load_all(text, Loader=_HardenedLoader):
            index += 1
            docs.append((index, doc))
    except yaml.YAMLError as e:
        raise _yaml_error(source, index + 1, e, text) from None
    except UnicodeError as e:  # lone surrogates: only Python callers can pass such a str
        raise _text_error(source, f"not valid Unicode text: {getattr(e, 'reason', e)}") from None
    return docs


def _text_error(source: str, reason: str) -> ManifestError:
    return ManifestError(f"{source}: {reason}", location=source, path="", reason=reason)


def load_documents(text: str, source: str = "<input>") -> list[tuple[str, dict[str, Any]]]:
    """Split ``text`` into object dicts, each with a location label for error messages.

    Labels look like ``pods.yaml: document 3`` or ``pods.yaml: document 2, items[4]`` (documents
    count from 1, including empty ones, so the number matches the file). Items of a ``PodList``,
    ``NodeList``, ... without their own ``kind``/``apiVersion`` inherit them from the list, as the
    API server's list responses omit them.
    """
    out: list[tuple[str, dict[str, Any]]] = []
    for index, doc in _raw_documents(text, source):
        if doc is None:
            continue
        label = f"{source}: document {index}"
        if not isinstance(doc, dict):
            raise ManifestError(
                f"{label}: expected a mapping (a Kubernetes object), got {_type_name(doc)}",
                location=label,
                reason="expected a mapping",
            )
        kind = doc.get("kind")
        if not (isinstance(kind, str) and kind.endswith("List")):
            out.append((label, doc))
            continue
        items = doc.get("items")
        if items is None:
            continue
        if not isinstance(items, list):
            reason = f"expected a list, got {_type_name(items)}"
            raise ManifestError(
                f"{label} ({kind}): items: {reason}",
                location=f"{label} ({kind})",
                path="items",
                reason=reason,
            )
        item_kind = kind[: -len("List")]
        api_version = doc.get("apiVersion")
        for i, item in enumerate(items):
            item_label = f"{label}, items[{i}]"
            if not isinstance(item, dict):
                raise ManifestError(
                    f"{item_label}: expected a mapping (a Kubernetes object), got {_type_name(item)}",
                    location=item_label,
                    reason="expected a mapping",
                )
            if item_kind and "kind" not in item:
                item = {
                    "kind": item_kind,
                    **({"apiVersion": api_version} if api_version is not None else {}),
                    **item,
                }
            out.append((item_label, item))
    return out


def parse_objects(text: str, source: str = "<input>") -> list[Pod | Node | Reservation]:
    """Parse every Pod, Node and Reservation in ``text`` (YAML or JSON), in document order."""
    objects: list[Pod | Node | Reservation] = []
    for label, obj in load_documents(text, source):
        kind = obj.get("kind")
        if kind == "Reservation":
            objects.append(reservation_from_dict(obj, label))
        elif kind == "Pod" or kind == "Node":
            api_version = obj.get("apiVersion")
            if api_version is not None and api_version != "v1":
                shown = f'"{api_version}"' if isinstance(api_version, str) else _type_name(api_version)
                raise _error(
                    label,
                    kind,
                    obj,
                    "apiVersion",
                    f'unsupported apiVersion {shown} for {kind} (expected "v1")',
                )
            objects.append(pod_from_dict(obj, label) if kind == "Pod" else node_from_dict(obj, label))
        elif kind is None:
            raise ManifestError(
                f"{label}: kind: required field is missing (supported: Pod, Node, Reservation)",
                location=label,
                path="kind",
            )
        elif isinstance(kind, str):
            raise _error(label, kind, obj, "", f'unsupported kind "{kind}" (supported: Pod, Node, Reservation)')
        else:
            raise ManifestError(
                f"{label}: kind: expected a string, got {_type_name(kind)}", location=label, path="kind"
            )
    return objects


# --------------------------------------------------------------------------------------------
# Back to manifests (display, and clients that want a v1 object).


def _format_timestamp(ts: float) -> str:
    dt = datetime.fromtimestamp(ts, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if dt.microsecond else "%Y-%m-%dT%H:%M:%SZ")


def _resources_to_dict(amounts: Mapping[str, int]) -> dict[str, str]:
    return {r: format_quantity(r, q) for r, q in amounts.items()}


def _selector_to_dict(sel: LabelSelector) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if sel.match_labels:
        out["matchLabels"] = dict(sel.match_labels)
    if sel.match_expressions:
        out["matchExpressions"] = [
            _requirement_to_dict(r.key, r.operator, r.values) for r in sel.match_expressions
        ]
    return out


def _requirement_to_dict(key: str, operator: str, values: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def _term_to_dict(term: NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if term.match_expressions:
        out["matchExpressions"] = [
            _requirement_to_dict(r.key, r.operator, r.values) for r in term.match_expressions
        ]
    if term.match_fields:
        out["matchFields"] = [_requirement_to_dict(r.key, r.operator, r.values) for r in term.match_fields]
    return out


def _pod_term_to_dict(term: PodAffinityTerm) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": term.topology_key}
    if term.label_selector is not None:
        out["labelSelector"] = _selector_to_dict(term.label_selector)
    if term.namespaces:
        out["namespaces"] = list(term.namespaces)
    if term.namespace_selector is not None:
        out["namespaceSelector"] = _selector_to_dict(term.namespace_selector)
    if term.match_label_keys:
        out["matchLabelKeys"] = list(term.match_label_keys)
    if term.mismatch_label_keys:
        out["mismatchLabelKeys"] = list(term.mismatch_label_keys)
    return out


def _pod_affinity_to_dict(a: PodAffinity) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if a.required:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = [_pod_term_to_dict(t) for t in a.required]
    if a.preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w.weight, "podAffinityTerm": _pod_term_to_dict(w.term)} for w in a.preferred
        ]
    return out


def _affinity_to_dict(a: Affinity) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if a.node_affinity is not None:
        na: dict[str, Any] = {}
        if a.node_affinity.required is not None:
            na["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [_term_to_dict(t) for t in a.node_affinity.required]
            }
        if a.node_affinity.preferred:
            na["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": p.weight, "preference": _term_to_dict(p.preference)}
                for p in a.node_affinity.preferred
            ]
        out["nodeAffinity"] = na
    if a.pod_affinity is not None:
        out["podAffinity"] = _pod_affinity_to_dict(a.pod_affinity)
    if a.pod_anti_affinity is not None:
        out["podAntiAffinity"] = _pod_affinity_to_dict(a.pod_anti_affinity)
    return out


def _container_to_dict(c: Container) -> dict[str, Any]:
    out: dict[str, Any] = {"name": c.name}
    if c.image:
        out["image"] = c.image
    resources: dict[str, Any] = {}
    if c.requests:
        resources["requests"] = _resources_to_dict(c.requests)
    if c.limits:
        resources["limits"] = _resources_to_dict(c.limits)
    if resources:
        out["resources"] = resources
    if c.ports:
        ports = []
        for p in c.ports:
            port: dict[str, Any] = {"containerPort": p.container_port, "protocol": p.protocol}
            if p.host_port:
                port["hostPort"] = p.host_port
            if p.host_ip:
                port["hostIP"] = p.host_ip
            ports.append(port)
        out["ports"] = ports
    if c.restart_policy:
        out["restartPolicy"] = c.restart_policy
    return out


def _toleration_to_dict(t: Toleration) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": t.operator}
    if t.key:
        out["key"] = t.key
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


def _spread_to_dict(c: TopologySpreadConstraint) -> dict[str, Any]:
    out: dict[str, Any] = {
        "maxSkew": c.max_skew,
        "topologyKey": c.topology_key,
        "whenUnsatisfiable": c.when_unsatisfiable,
    }
    if c.label_selector is not None:
        out["labelSelector"] = _selector_to_dict(c.label_selector)
    if c.min_domains is not None:
        out["minDomains"] = c.min_domains
    if c.node_affinity_policy != "Honor":
        out["nodeAffinityPolicy"] = c.node_affinity_policy
    if c.node_taints_policy != "Ignore":
        out["nodeTaintsPolicy"] = c.node_taints_policy
    if c.match_label_keys:
        out["matchLabelKeys"] = list(c.match_label_keys)
    return out


def pod_to_dict(pod: Pod) -> dict[str, Any]:
    """The pod as a ``v1`` manifest: the one it was parsed from, else one built from the model
    (omitting defaults) that :func:`pod_from_dict` reads back to an equal pod."""
    if pod.raw:
        return pod.raw
    meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace}
    if pod.uid:
        meta["uid"] = pod.uid
    if pod.labels:
        meta["labels"] = dict(pod.labels)
    if pod.annotations:
        meta["annotations"] = dict(pod.annotations)
    meta["creationTimestamp"] = _format_timestamp(pod.creation_timestamp)
    if pod.deletion_timestamp is not None:
        meta["deletionTimestamp"] = _format_timestamp(pod.deletion_timestamp)
    spec: dict[str, Any] = {}
    if pod.scheduler_name != "default-scheduler":
        spec["schedulerName"] = pod.scheduler_name
    if pod.node_name:
        spec["nodeName"] = pod.node_name
    if pod.priority:
        spec["priority"] = pod.priority
    if pod.priority_class_name:
        spec["priorityClassName"] = pod.priority_class_name
    if pod.preemption_policy != "PreemptLowerPriority":
        spec["preemptionPolicy"] = pod.preemption_policy
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.affinity is not None:
        spec["affinity"] = _affinity_to_dict(pod.affinity)
    if pod.tolerations:
        spec["tolerations"] = [_toleration_to_dict(t) for t in pod.tolerations]
    if pod.topology_spread_constraints:
        spec["topologySpreadConstraints"] = [_spread_to_dict(c) for c in pod.topology_spread_constraints]
    if pod.scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in pod.scheduling_gates]
    if pod.init_containers:
        spec["initContainers"] = [_container_to_dict(c) for c in pod.init_containers]
    spec["containers"] = [_container_to_dict(c) for c in pod.containers]
    if pod.overhead:
        spec["overhead"] = _resources_to_dict(pod.overhead)
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if pod.nominated_node_name:
        out["status"] = {"nominatedNodeName": pod.nominated_node_name}
    return out


def node_to_dict(node: Node) -> dict[str, Any]:
    """The node as a ``v1`` manifest: the one it was parsed from, else one built from the model."""
    if node.raw:
        return node.raw
    meta: dict[str, Any] = {"name": node.name}
    if node.uid:
        meta["uid"] = node.uid
    if node.labels:
        meta["labels"] = dict(node.labels)
    if node.annotations:
        meta["annotations"] = dict(node.annotations)
    spec: dict[str, Any] = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [
            {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect} for t in node.taints
        ]
    status: dict[str, Any] = {
        "capacity": _resources_to_dict(node.capacity),
        "allocatable": _resources_to_dict(node.allocatable),
    }
    if node.images:
        status["images"] = [{"names": list(i.names), "sizeBytes": i.size_bytes} for i in node.images]
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}
