"""Kubernetes ``v1`` manifests (YAML or JSON) to the scheduling model, and back for display.

A file may hold several YAML documents separated by ``---``, a single JSON object, and ``kind: List``
(or ``PodList``, ``NodeList``, ...) documents whose ``items`` are expanded in place. Only ``Pod``,
``Node``, ``Reservation``, ``PodDisruptionBudget`` (``policy/v1``) and the volume plugins' objects
(``PersistentVolumeClaim``, ``PersistentVolume``, ``StorageClass`` and ``CSINode``) are understood (the
kinds of :data:`SUPPORTED_KINDS`); everything else is an error, as is anything the
API server would reject that the scheduler depends on (operators, effects, weights, ports, quantities,
names, labels, annotations, types). Decoding is the API server's strict decoding
(:mod:`pluginhost.decode`, with the field names of :mod:`pluginhost.kubefields`): a field the type does
not have, at any depth, or a key given twice is named by its path, or reported as a warning, or
ignored, as ``kubectl apply --validate`` asks (:data:`VALIDATE_MODES`).

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
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from pluginhost.errors import OutriggerError
from pluginhost.model import (
    BINDING_IMMEDIATE,
    BINDING_WAIT_FOR_FIRST_CONSUMER,
    DEFAULT_RESERVATION_TTL,
    READ_WRITE_ONCE_POD,
    RESERVATION_ANNOTATION,
    RESERVATION_API_VERSIONS,
    RESERVATION_NAMESPACE,
    VOLUME_CSI,
    VOLUME_EPHEMERAL,
    VOLUME_PVC,
    Affinity,
    ClaimRef,
    Container,
    ContainerImage,
    ContainerPort,
    CSINode,
    CSINodeDriver,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodDisruptionBudget,
    PreferredSchedulingTerm,
    Reservation,
    ReservationOwner,
    ResourceList,
    StorageClass,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    Volume,
    WeightedPodAffinityTerm,
)
from pluginhost.quantity import MAX_CANONICAL, QuantityError, canonical, format_quantity

from . import decode
from .decode import (
    VALIDATE_MODES,
    FieldError,
    Schema,
    TextError,
    as_list,
    get_bool,
    get_int,
    get_list,
    get_map,
    get_str,
    item_map,
    join,
    one_line,
    one_of,
    required_str,
    str_map,
    str_tuple,
    timestamp,
    type_name,
    wrong_type,
)
from .kubefields import TYPES

__all__ = [
    "SUPPORTED_KINDS",
    "VALIDATE_MODES",
    "ManifestError",
    "ManifestObject",
    "compute_requests",
    "csinode_from_dict",
    "finish_pod",
    "load_documents",
    "node_from_dict",
    "node_to_dict",
    "one_line",
    "parse_objects",
    "pdb_from_dict",
    "pod_from_dict",
    "pod_to_dict",
    "pv_from_dict",
    "pvc_from_dict",
    "reservation_from_dict",
    "storage_class_from_dict",
]

SUPPORTED_KINDS = ("Pod", "Node", "Reservation", "PodDisruptionBudget", "PersistentVolumeClaim", "PersistentVolume",
                   "StorageClass", "CSINode")
#: Every object :func:`parse_objects` returns.
ManifestObject = (
    Pod | Node | Reservation | PodDisruptionBudget | PersistentVolumeClaim | PersistentVolume | StorageClass | CSINode
)
# The volume plugins' kinds and the apiVersion each is under.
_STORAGE_KINDS = {
    "PersistentVolumeClaim": "v1",
    "PersistentVolume": "v1",
    "StorageClass": "storage.k8s.io/v1",
    "CSINode": "storage.k8s.io/v1",
}

_LABEL_SELECTOR_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
_NODE_SELECTOR_OPERATORS = _LABEL_SELECTOR_OPERATORS | {"Gt", "Lt"}
_TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
_PREEMPTION_POLICIES = frozenset({"PreemptLowerPriority", "Never"})
_WHEN_UNSATISFIABLE = frozenset({"DoNotSchedule", "ScheduleAnyway"})
_INCLUSION_POLICIES = frozenset({"Honor", "Ignore"})
_PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INTEGER_RE = re.compile(r"[+-]?\d+")
_T = TypeVar(
    "_T", Pod, Node, Reservation, PodDisruptionBudget, PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode
)

# The objects parsed here, as strict decoding knows them: core/v1's Pod and Node, koordinator's
# Reservation (scheduling.koordinator.sh/v1alpha1) and the List wrapping any of them.
_SCHEMAS = decode.schemas(
    TYPES,
    {
        "Reservation": "apiVersion kind metadata:ObjectMeta spec:ReservationSpec status:ReservationStatus",
        "ReservationSpec": (
            "template:PodTemplateSpec owners:[ReservationOwner] ttl expires preAllocation allocateOnce "
            "allocatePolicy unschedulable taints:[Taint]"
        ),
        "ReservationOwner": (
            "object:ObjectReference controller:ReservationControllerReference labelSelector:LabelSelector"
        ),
        "ReservationControllerReference": "apiVersion kind name uid controller blockOwnerDeletion namespace",
        "ReservationStatus": (
            "phase conditions:[ReservationCondition] currentOwners:[ObjectReference] nodeName allocatable allocated"
        ),
        "ReservationCondition": "type status reason message lastProbeTime lastTransitionTime",
        "List": "apiVersion kind metadata:ListMeta items",
        # policy/v1's PodDisruptionBudget.
        "PodDisruptionBudget": (
            "apiVersion kind metadata:ObjectMeta spec:PodDisruptionBudgetSpec status:PodDisruptionBudgetStatus"
        ),
        "PodDisruptionBudgetSpec": "minAvailable selector:LabelSelector maxUnavailable unhealthyPodEvictionPolicy",
        "PodDisruptionBudgetStatus": (
            "observedGeneration disruptedPods disruptionsAllowed currentHealthy desiredHealthy expectedPods "
            "conditions:[PodDisruptionBudgetCondition]"
        ),
        "PodDisruptionBudgetCondition": "type status observedGeneration lastTransitionTime reason message",
    },
)
_POD: Schema = _SCHEMAS["Pod"]
_NODE: Schema = _SCHEMAS["Node"]
_RESERVATION: Schema = _SCHEMAS["Reservation"]
_PVC: Schema = _SCHEMAS["PersistentVolumeClaim"]
_PV: Schema = _SCHEMAS["PersistentVolume"]
_STORAGE_CLASS: Schema = _SCHEMAS["StorageClass"]
_CSINODE: Schema = _SCHEMAS["CSINode"]
_LIST: Schema = _SCHEMAS["List"]
_PDB: Schema = _SCHEMAS["PodDisruptionBudget"]


class ManifestError(OutriggerError, ValueError):
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


# --------------------------------------------------------------------------------------------
# The API server's validation of names, labels and annotations (k8s.io/apimachinery's
# util/validation and api/validation), with its messages.

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_LABEL_KEY_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_NAME_FMT + ")?"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_LABEL_KEY_NAME_RE = re.compile(_LABEL_KEY_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
#: The most bytes all annotations of an object may hold, keys and values together (256 KiB).
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def _regex_error(message: str, fmt: str, *examples: str) -> str:
    # RegexError's wording, its double space before "or" included.
    shown = "".join(f"{' or ' if i else ''}'{example}', " for i, example in enumerate(examples))
    return f"{message} (e.g. {shown}regex used for validation is '{fmt}')"


_SUBDOMAIN_MESSAGE = _regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character",
    _DNS1123_SUBDOMAIN_FMT,
    "example.com",
)
_DNS_LABEL_MESSAGE = _regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character",
    _DNS1123_LABEL_FMT,
    "my-name",
    "123-abc",
)
_LABEL_KEY_NAME_MESSAGE = "name part " + _regex_error(
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character",
    _LABEL_KEY_NAME_FMT,
    "MyName",
    "my.name",
    "123-abc",
)
_LABEL_VALUE_MESSAGE = _regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character",
    _LABEL_VALUE_FMT,
    "MyValue",
    "my_value",
    "12345",
)


def _subdomain_problem(value: str) -> str | None:
    """IsDNS1123Subdomain: the first of its messages that applies, or None."""
    if len(value) > 253:
        return "must be no more than 253 characters"
    if _DNS1123_SUBDOMAIN_RE.fullmatch(value) is None:
        return _SUBDOMAIN_MESSAGE
    return None


def _dns_label_problem(value: str) -> str | None:
    """IsDNS1123Label: the first of its messages that applies, or None."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if _DNS1123_LABEL_RE.fullmatch(value) is None:
        return "must not contain dots" if _DNS1123_SUBDOMAIN_RE.fullmatch(value) else _DNS_LABEL_MESSAGE
    return None


def _label_key_problem(key: str) -> str | None:
    """IsQualifiedName (label keys, annotation keys): ``[prefix/]name``."""
    parts = key.split("/")
    if len(parts) > 2:
        return "a valid label key " + _LABEL_KEY_NAME_MESSAGE[len("name part ") :] + (
            " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        )
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "prefix part must be non-empty"
        problem = _subdomain_problem(prefix)
        if problem is not None:
            return "prefix part " + problem
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if _LABEL_KEY_NAME_RE.fullmatch(name) is None:
        return _LABEL_KEY_NAME_MESSAGE
    return None


def _label_value_problem(value: str) -> str | None:
    """IsValidLabelValue: at most 63 characters of the label alphabet, or empty."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if _LABEL_VALUE_RE.fullmatch(value) is None:
        return _LABEL_VALUE_MESSAGE
    return None


def _quoted(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


# Keys and values seen valid already: labels repeat across the objects of a manifest, so most are
# checked once. Bounded: cleared when full.
_VALID_KEYS: set[str] = set()
_VALID_VALUES: set[str] = set()
_VALID_CACHE_SIZE = 4096


def _check_labels(labels: Mapping[str, str], path: str) -> None:
    """ValidateLabels: every key a qualified name, every value a label value."""
    for key, value in labels.items():
        if key not in _VALID_KEYS:
            problem = _label_key_problem(key)
            if problem is not None:
                raise FieldError(path, f"Invalid value: {_quoted(key)}: {problem}")
            if len(_VALID_KEYS) >= _VALID_CACHE_SIZE:
                _VALID_KEYS.clear()
            _VALID_KEYS.add(key)
        if value not in _VALID_VALUES:
            problem = _label_value_problem(value)
            if problem is not None:
                raise FieldError(path, f"Invalid value: {_quoted(value)}: {problem}")
            if len(_VALID_VALUES) >= _VALID_CACHE_SIZE:
                _VALID_VALUES.clear()
            _VALID_VALUES.add(value)


def _check_annotations(annotations: Mapping[str, str], path: str) -> None:
    """ValidateAnnotations: keys are qualified names (in any case); keys and values together hold at
    most TOTAL_ANNOTATION_SIZE_LIMIT bytes."""
    chars = 0
    for key, value in annotations.items():
        chars += len(key) + len(value)
        if key not in _VALID_KEYS:
            problem = _label_key_problem(key.lower())
            if problem is not None:
                raise FieldError(path, f"Invalid value: {_quoted(key)}: {problem}")
    # UTF-8 takes at most 4 bytes a character: count bytes only when characters alone do not decide.
    if chars * 4 > TOTAL_ANNOTATION_SIZE_LIMIT and (
        chars > TOTAL_ANNOTATION_SIZE_LIMIT
        or sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items()) > TOTAL_ANNOTATION_SIZE_LIMIT
    ):
        raise FieldError(path, f"Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes")


def _metadata(meta: Mapping[str, Any]) -> tuple[str, dict[str, str], dict[str, str]]:
    """The object's name, labels and annotations, checked as the API server checks them."""
    name = get_str(meta, "name", "metadata")
    if not name:
        raise FieldError("metadata.name", "Required value: name or generateName is required")
    problem = _subdomain_problem(name)
    if problem is not None:
        raise FieldError("metadata.name", f"Invalid value: {_quoted(name)}: {problem}")
    labels = str_map(meta, "labels", "metadata")
    _check_labels(labels, "metadata.labels")
    annotations = str_map(meta, "annotations", "metadata")
    if annotations:
        _check_annotations(annotations, "metadata.annotations")
    return name, labels, annotations


def _resource_list(m: Mapping[str, Any], key: str, parent: str) -> ResourceList:
    v = get_map(m, key, parent)
    out: ResourceList = {}
    for name, raw in v.items():
        if not isinstance(name, str) or not name:
            raise FieldError(join(parent, key), f"invalid resource name {name!r}")
        try:
            out[name] = canonical(name, raw)
        except QuantityError as e:
            raise FieldError(join(join(parent, key), name), str(e)) from None
    return out


# --------------------------------------------------------------------------------------------
# Shared pieces.


def _label_selector(m: Mapping[str, Any], key: str, parent: str) -> LabelSelector | None:
    v = m.get(key)
    if v is None:
        return None
    path = join(parent, key)
    sel = item_map(v, path)
    exprs = []
    for i, e in enumerate(get_list(sel, "matchExpressions", path)):
        epath = f"{path}.matchExpressions[{i}]"
        req = item_map(e, epath)
        k = required_str(req, "key", epath)
        op = one_of(
            required_str(req, "operator", epath), _LABEL_SELECTOR_OPERATORS, f"{epath}.operator", "operator"
        )
        values = str_tuple(req, "values", epath)
        _check_values(op, values, epath)
        exprs.append(LabelSelectorRequirement(key=k, operator=op, values=values))
    return LabelSelector(match_labels=str_map(sel, "matchLabels", path), match_expressions=exprs)


def _check_values(op: str, values: tuple[str, ...], path: str) -> None:
    """metav1/core validation of a requirement's values for its operator."""
    if op in ("In", "NotIn"):
        if not values:
            raise FieldError(f"{path}.values", f"must be non-empty when operator is {op}")
    elif op in ("Exists", "DoesNotExist"):
        if values:
            raise FieldError(f"{path}.values", f"must be empty when operator is {op}")
    elif len(values) != 1 or _INTEGER_RE.fullmatch(values[0]) is None:
        # Gt/Lt: the node's label value is compared as an integer with this single value.
        raise FieldError(f"{path}.values", f"must be a single integer when operator is {op}")


def _node_selector_term(v: object, path: str) -> NodeSelectorTerm:
    term = item_map(v, path)
    exprs = []
    for i, e in enumerate(get_list(term, "matchExpressions", path)):
        epath = f"{path}.matchExpressions[{i}]"
        req = item_map(e, epath)
        k = required_str(req, "key", epath)
        op = one_of(
            required_str(req, "operator", epath), _NODE_SELECTOR_OPERATORS, f"{epath}.operator", "operator"
        )
        values = str_tuple(req, "values", epath)
        _check_values(op, values, epath)
        exprs.append(NodeSelectorRequirement(key=k, operator=op, values=values))
    fields = []
    for i, e in enumerate(get_list(term, "matchFields", path)):
        epath = f"{path}.matchFields[{i}]"
        req = item_map(e, epath)
        # The API server accepts only metadata.name here, with In/NotIn and exactly one value.
        k = required_str(req, "key", epath)
        if k != "metadata.name":
            raise FieldError(f"{epath}.key", f'unsupported field "{k}" (supported: metadata.name)')
        op = one_of(required_str(req, "operator", epath), ("In", "NotIn"), f"{epath}.operator", "operator")
        values = str_tuple(req, "values", epath)
        if len(values) != 1:
            raise FieldError(f"{epath}.values", f"must have exactly one value when operator is {op}")
        fields.append(NodeSelectorRequirement(key=k, operator=op, values=values))
    return NodeSelectorTerm(match_expressions=exprs, match_fields=fields)


def _weight(m: Mapping[str, Any], path: str) -> int:
    if m.get("weight") is None:
        raise FieldError(f"{path}.weight", "required field is missing")
    w = get_int(m, "weight", path, 0)
    if not 1 <= w <= 100:
        raise FieldError(f"{path}.weight", f"must be in the range 1-100, got {w}")
    return w


def _node_affinity(v: Mapping[str, Any], path: str) -> NodeAffinity:
    required: list[NodeSelectorTerm] | None = None
    req = v.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        rpath = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        sel = item_map(req, rpath)
        terms = get_list(sel, "nodeSelectorTerms", rpath)
        if not terms:
            raise FieldError(f"{rpath}.nodeSelectorTerms", "must have at least one node selector term")
        required = [_node_selector_term(t, f"{rpath}.nodeSelectorTerms[{i}]") for i, t in enumerate(terms)]
    preferred = []
    for i, p in enumerate(get_list(v, "preferredDuringSchedulingIgnoredDuringExecution", path)):
        ppath = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        pm = item_map(p, ppath)
        weight = _weight(pm, ppath)
        if pm.get("preference") is None:
            raise FieldError(f"{ppath}.preference", "required field is missing")
        preferred.append(
            PreferredSchedulingTerm(weight, _node_selector_term(pm["preference"], f"{ppath}.preference"))
        )
    return NodeAffinity(required=required, preferred=preferred)


def _pod_affinity_term(v: object, path: str) -> PodAffinityTerm:
    t = item_map(v, path)
    selector = _label_selector(t, "labelSelector", path)
    match_keys = str_tuple(t, "matchLabelKeys", path)
    mismatch_keys = str_tuple(t, "mismatchLabelKeys", path)
    if (match_keys or mismatch_keys) and selector is None:
        which = "matchLabelKeys" if match_keys else "mismatchLabelKeys"
        raise FieldError(f"{path}.{which}", "must not be set when labelSelector is not set")
    both = set(match_keys) & set(mismatch_keys)
    if both:
        raise FieldError(f"{path}.mismatchLabelKeys", f'key "{min(both)}" is also in matchLabelKeys')
    return PodAffinityTerm(
        topology_key=required_str(t, "topologyKey", path),
        label_selector=selector,
        namespaces=str_tuple(t, "namespaces", path),
        namespace_selector=_label_selector(t, "namespaceSelector", path),
        match_label_keys=match_keys,
        mismatch_label_keys=mismatch_keys,
    )


def _pod_affinity(v: Mapping[str, Any], path: str) -> PodAffinity:
    required = [
        _pod_affinity_term(t, f"{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        for i, t in enumerate(get_list(v, "requiredDuringSchedulingIgnoredDuringExecution", path))
    ]
    preferred = []
    for i, p in enumerate(get_list(v, "preferredDuringSchedulingIgnoredDuringExecution", path)):
        ppath = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        pm = item_map(p, ppath)
        weight = _weight(pm, ppath)
        if pm.get("podAffinityTerm") is None:
            raise FieldError(f"{ppath}.podAffinityTerm", "required field is missing")
        preferred.append(
            WeightedPodAffinityTerm(
                weight, _pod_affinity_term(pm["podAffinityTerm"], f"{ppath}.podAffinityTerm")
            )
        )
    return PodAffinity(required=required, preferred=preferred)


def _affinity(spec: Mapping[str, Any]) -> Affinity | None:
    a = get_map(spec, "affinity", "spec")
    if not a:
        return None
    node = a.get("nodeAffinity")
    pod = a.get("podAffinity")
    anti = a.get("podAntiAffinity")
    affinity = Affinity(
        node_affinity=None
        if node is None
        else _node_affinity(item_map(node, "spec.affinity.nodeAffinity"), "spec.affinity.nodeAffinity"),
        pod_affinity=None
        if pod is None
        else _pod_affinity(item_map(pod, "spec.affinity.podAffinity"), "spec.affinity.podAffinity"),
        pod_anti_affinity=None
        if anti is None
        else _pod_affinity(item_map(anti, "spec.affinity.podAntiAffinity"), "spec.affinity.podAntiAffinity"),
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
    t = item_map(v, path)
    key = get_str(t, "key", path)
    # "" is a valid operator meaning Equal; store the explicit form.
    operator = get_str(t, "operator", path) or "Equal"
    one_of(operator, ("Equal", "Exists"), f"{path}.operator", "operator")
    value = get_str(t, "value", path)
    if operator == "Exists" and value:
        raise FieldError(f"{path}.value", "must be empty when operator is Exists")
    if not key and operator != "Exists":
        raise FieldError(f"{path}.operator", "must be Exists when key is empty")
    effect = get_str(t, "effect", path)
    if effect:
        one_of(effect, _TAINT_EFFECTS, f"{path}.effect", "effect")
    seconds = t.get("tolerationSeconds")
    if seconds is not None:
        seconds = get_int(t, "tolerationSeconds", path, 0)
    return Toleration(key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds)


def _spread_constraint(v: object, path: str) -> TopologySpreadConstraint:
    c = item_map(v, path)
    if c.get("maxSkew") is None:
        raise FieldError(f"{path}.maxSkew", "required field is missing")
    max_skew = get_int(c, "maxSkew", path, 0)
    if max_skew < 1:
        raise FieldError(f"{path}.maxSkew", f"must be greater than zero, got {max_skew}")
    topology_key = required_str(c, "topologyKey", path)
    when = one_of(
        required_str(c, "whenUnsatisfiable", path),
        _WHEN_UNSATISFIABLE,
        f"{path}.whenUnsatisfiable",
        "whenUnsatisfiable",
    )
    min_domains: int | None = None
    if c.get("minDomains") is not None:
        min_domains = get_int(c, "minDomains", path, 0)
        if min_domains < 1:
            raise FieldError(f"{path}.minDomains", f"must be greater than zero, got {min_domains}")
        if when != "DoNotSchedule":
            raise FieldError(f"{path}.minDomains", "can only be set when whenUnsatisfiable is DoNotSchedule")
    selector = _label_selector(c, "labelSelector", path)
    match_keys = str_tuple(c, "matchLabelKeys", path)
    if match_keys and selector is None:
        raise FieldError(f"{path}.matchLabelKeys", "must not be set when labelSelector is not set")
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        when_unsatisfiable=when,
        label_selector=selector,
        min_domains=min_domains,
        node_affinity_policy=one_of(
            get_str(c, "nodeAffinityPolicy", path, "Honor") or "Honor",
            _INCLUSION_POLICIES,
            f"{path}.nodeAffinityPolicy",
            "policy",
        ),
        node_taints_policy=one_of(
            get_str(c, "nodeTaintsPolicy", path, "Ignore") or "Ignore",
            _INCLUSION_POLICIES,
            f"{path}.nodeTaintsPolicy",
            "policy",
        ),
        match_label_keys=match_keys,
    )


def _port(v: object, path: str, host_network: bool) -> ContainerPort:
    p = item_map(v, path)
    if p.get("containerPort") is None:
        raise FieldError(f"{path}.containerPort", "required field is missing")
    container_port = get_int(p, "containerPort", path, 0)
    if not 1 <= container_port <= 65535:
        raise FieldError(f"{path}.containerPort", f"must be between 1 and 65535, got {container_port}")
    host_port = get_int(p, "hostPort", path, 0)
    if not 0 <= host_port <= 65535:
        raise FieldError(f"{path}.hostPort", f"must be between 1 and 65535 (or 0 for none), got {host_port}")
    if host_network and host_port == 0:
        # API server defaulting: with hostNetwork the container port *is* a host port.
        host_port = container_port
    protocol = get_str(p, "protocol", path) or "TCP"
    one_of(protocol, _PROTOCOLS, f"{path}.protocol", "protocol")
    return ContainerPort(
        container_port=container_port, host_port=host_port, protocol=protocol, host_ip=get_str(p, "hostIP", path)
    )


def _container(v: object, path: str, host_network: bool) -> Container:
    c = item_map(v, path)
    name = required_str(c, "name", path)
    resources = get_map(c, "resources", path)
    rpath = f"{path}.resources"
    requests = _resource_list(resources, "requests", rpath)
    limits = _resource_list(resources, "limits", rpath)
    for resource, limit in limits.items():
        request = requests.get(resource)
        if request is None:
            # API server defaulting: a limit without a request is also the request.
            requests[resource] = limit
        elif request > limit:
            raise FieldError(
                join(f"{rpath}.requests", resource),
                f"must be less than or equal to {resource} limit of {format_quantity(resource, limit)}",
            )
    return Container(
        name=name,
        image=get_str(c, "image", path),
        requests=requests,
        limits=limits,
        ports=[_port(p, f"{path}.ports[{i}]", host_network) for i, p in enumerate(get_list(c, "ports", path))],
        restart_policy=get_str(c, "restartPolicy", path),
    )


# --------------------------------------------------------------------------------------------
# Pods and nodes.


def _build_pod(obj: dict[str, Any]) -> Pod:
    meta = get_map(obj, "metadata", "")
    name, labels, annotations = _metadata(meta)
    namespace = get_str(meta, "namespace", "metadata") or "default"
    problem = _dns_label_problem(namespace)
    if problem is not None:
        raise FieldError("metadata.namespace", f"Invalid value: {_quoted(namespace)}: {problem}")
    created = timestamp(meta, "creationTimestamp", "metadata")
    spec = get_map(obj, "spec", "")
    status = get_map(obj, "status", "")

    host_network = get_bool(spec, "hostNetwork", "spec")
    raw_containers = get_list(spec, "containers", "spec")
    if not raw_containers:
        raise FieldError("spec.containers", "a pod must have at least one container")
    containers = [_container(c, f"spec.containers[{i}]", host_network) for i, c in enumerate(raw_containers)]
    init_containers = [
        _container(c, f"spec.initContainers[{i}]", host_network)
        for i, c in enumerate(get_list(spec, "initContainers", "spec"))
    ]
    seen: set[str] = set()
    for field_name, group in (("containers", containers), ("initContainers", init_containers)):
        for i, c in enumerate(group):
            if c.name in seen:
                raise FieldError(f"spec.{field_name}[{i}].name", f'duplicate container name "{c.name}"')
            seen.add(c.name)

    node_selector = str_map(spec, "nodeSelector", "spec")
    _check_labels(node_selector, "spec.nodeSelector")
    priority = get_int(spec, "priority", "spec", 0)
    if not _INT32_MIN <= priority <= _INT32_MAX:
        raise FieldError("spec.priority", f"must fit in a 32-bit integer, got {priority}")
    preemption_policy = get_str(spec, "preemptionPolicy", "spec") or "PreemptLowerPriority"
    one_of(preemption_policy, _PREEMPTION_POLICIES, "spec.preemptionPolicy", "preemptionPolicy")

    constraints = [
        _spread_constraint(c, f"spec.topologySpreadConstraints[{i}]")
        for i, c in enumerate(get_list(spec, "topologySpreadConstraints", "spec"))
    ]
    pairs: set[tuple[str, str]] = set()
    for i, tsc in enumerate(constraints):
        pair = (tsc.topology_key, tsc.when_unsatisfiable)
        if pair in pairs:
            raise FieldError(
                f"spec.topologySpreadConstraints[{i}]",
                f'duplicate constraint for topologyKey "{tsc.topology_key}" '
                f"and whenUnsatisfiable {tsc.when_unsatisfiable}",
            )
        pairs.add(pair)

    raw_volumes = spec.get("volumes")
    volumes = _pod_volumes(raw_volumes, name) if raw_volumes else ()

    gates = []
    for i, g in enumerate(get_list(spec, "schedulingGates", "spec")):
        gates.append(
            required_str(item_map(g, f"spec.schedulingGates[{i}]"), "name", f"spec.schedulingGates[{i}]")
        )

    pod = Pod(
        name=name,
        namespace=namespace,
        uid=get_str(meta, "uid", "metadata") or str(uuid.uuid4()),
        labels=labels,
        annotations=annotations,
        scheduler_name=get_str(spec, "schedulerName", "spec") or "default-scheduler",
        node_name=get_str(spec, "nodeName", "spec"),
        priority=priority,
        priority_class_name=get_str(spec, "priorityClassName", "spec"),
        preemption_policy=preemption_policy,
        node_selector=node_selector,
        affinity=_affinity(spec),
        tolerations=[
            _toleration(t, f"spec.tolerations[{i}]") for i, t in enumerate(get_list(spec, "tolerations", "spec"))
        ],
        topology_spread_constraints=constraints,
        scheduling_gates=tuple(gates),
        volumes=volumes,
        containers=containers,
        init_containers=init_containers,
        overhead=_resource_list(spec, "overhead", "spec"),
        creation_timestamp=time.time() if created is None else created,
        nominated_node_name=get_str(status, "nominatedNodeName", "status"),
        deletion_timestamp=timestamp(meta, "deletionTimestamp", "metadata"),
        raw=obj,
    )
    pod.requests = compute_requests(pod)
    for resource, amount in pod.requests.items():
        if amount > MAX_CANONICAL:
            # Each quantity fits an int64; their sum must too (the snapshot's columns are int64).
            raise FieldError(
                "spec.containers", f"the pod's {resource} requests add up to more than the largest quantity"
            )
    return pod


def _build_node(obj: dict[str, Any]) -> Node:
    meta = get_map(obj, "metadata", "")
    name, labels, annotations = _metadata(meta)
    spec = get_map(obj, "spec", "")
    status = get_map(obj, "status", "")
    taints = []
    for i, t in enumerate(get_list(spec, "taints", "spec")):
        path = f"spec.taints[{i}]"
        tm = item_map(t, path)
        key = required_str(tm, "key", path)
        effect = one_of(required_str(tm, "effect", path), _TAINT_EFFECTS, f"{path}.effect", "effect")
        taints.append(Taint(key=key, effect=effect, value=get_str(tm, "value", path)))
    capacity = _resource_list(status, "capacity", "status")
    # The kubelet always reports both; hand-written nodes often give only capacity.
    allocatable = (
        _resource_list(status, "allocatable", "status")
        if status.get("allocatable") is not None
        else dict(capacity)
    )
    images = []
    for i, img in enumerate(get_list(status, "images", "status")):
        path = f"status.images[{i}]"
        im = item_map(img, path)
        size = get_int(im, "sizeBytes", path, 0)
        if size < 0:
            raise FieldError(f"{path}.sizeBytes", f"must not be negative, got {size}")
        images.append(ContainerImage(names=str_tuple(im, "names", path), size_bytes=size))
    return Node(
        name=name,
        uid=get_str(meta, "uid", "metadata") or str(uuid.uuid4()),
        labels=labels,
        annotations=annotations,
        taints=taints,
        unschedulable=get_bool(spec, "unschedulable", "spec"),
        capacity=capacity,
        allocatable=allocatable,
        images=images,
        raw=obj,
    )


_CLUSTER_SCOPED = frozenset({"Node", "PersistentVolume", "StorageClass", "CSINode"})


def _describe(kind: str, obj: Mapping[str, Any]) -> str:
    """``Pod default/web-1`` / ``Node n1`` / ``Pod``: as much identity as the object gives."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        return kind
    if kind in _CLUSTER_SCOPED:
        return f"{kind} {name}"
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return f"{kind} {ns if isinstance(ns, str) and ns else 'default'}/{name}"


def _error(where: str, kind: str, obj: Mapping[str, Any], path: str, reason: str) -> ManifestError:
    ident = _describe(kind, obj)
    location = f"{where} ({ident})" if where else ident
    message = f"{location}: {path}: {reason}" if path else f"{location}: {reason}"
    return ManifestError(message, location=location, path=path, reason=reason)


def _strict(
    obj: Mapping[str, Any],
    schema: Schema,
    validate: str,
    warn: Callable[[str], None] | None,
    duplicates: Iterable[str] = (),
) -> str | None:
    """Strict decoding of ``obj``: the one-line error in ``strict`` mode (None when there is nothing to
    say), warnings in ``warn`` mode, nothing at all in ``ignore`` mode."""
    if validate == "ignore":
        return None
    unknown = decode.unknown_fields(obj, schema)
    if not unknown and not duplicates:
        return None
    return decode.report(decode.strict_problems(duplicates, unknown), validate, warn)


def _from_dict(
    kind: str,
    build: Callable[[dict[str, Any]], _T],
    schema: Schema,
    obj: dict[str, Any],
    where: str,
    validate: str,
    warn: Callable[[str], None] | None,
    duplicates: Iterable[str] = (),
) -> _T:
    if not isinstance(obj, dict):
        raise ManifestError(f"{where or kind}: expected a mapping, got {type_name(obj)}", location=where)
    decode.check_validate(validate)
    try:
        # Decoding comes first, as in the API server: an unknown field is named before the checks of
        # the fields it was meant to be (a misspelt "containres" is not "at least one container").
        problems = _strict(obj, schema, validate, warn, duplicates)
        if problems is not None:
            raise FieldError("", problems)
        return build(obj)
    except FieldError as e:
        raise _error(where, kind, obj, e.path, e.reason) from None


def pod_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> Pod:
    """Build a :class:`Pod` from a ``v1`` Pod manifest; ``where`` prefixes error messages.
    ``validate`` and ``warn`` are :func:`parse_objects`'."""
    return _from_dict("Pod", _build_pod, _POD, obj, where, validate, warn)


def node_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> Node:
    """Build a :class:`Node` from a ``v1`` Node manifest; ``where`` prefixes error messages.
    ``validate`` and ``warn`` are :func:`parse_objects`'."""
    return _from_dict("Node", _build_node, _NODE, obj, where, validate, warn)


# --------------------------------------------------------------------------------------------
# Reservations.

_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration(m: Mapping[str, Any], key: str, parent: str) -> float | None:
    """A Go-style duration ("1h30m", "90s", "0") in seconds."""
    v = m.get(key)
    if v is None:
        return None
    path = join(parent, key)
    if isinstance(v, int | float) and not isinstance(v, bool):
        raise FieldError(path, f'invalid duration {v!r}: give a unit, e.g. "{v}s"')
    if not isinstance(v, str):
        wrong_type(path, 'a duration string such as "1h" or "30m"', v)
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
        raise FieldError(path, f'invalid duration "{v}" (e.g. "1h", "30m", "1h30m", "90s", "0" for never)')
    return total


def _reservation_owner(v: object, path: str) -> ReservationOwner:
    m = item_map(v, path)
    obj = m.get("object")
    owner = ReservationOwner(label_selector=_label_selector(m, "labelSelector", path))
    if obj is not None:
        opath = f"{path}.object"
        ref = item_map(obj, opath)
        kind = get_str(ref, "kind", opath, "Pod")
        if kind != "Pod":
            raise FieldError(f"{opath}.kind", f'unsupported owner kind "{kind}" (Pod)')
        owner.name = required_str(ref, "name", opath)
        owner.namespace = get_str(ref, "namespace", opath) or "default"
        owner.uid = get_str(ref, "uid", opath)
    if obj is None and owner.label_selector is None:
        raise FieldError(path, "an owner needs an object (a pod) or a labelSelector")
    return owner


def _build_reservation(obj: dict[str, Any]) -> Reservation:
    api_version = obj.get("apiVersion")
    if api_version not in RESERVATION_API_VERSIONS:
        allowed = " or ".join(f'"{a}"' for a in RESERVATION_API_VERSIONS)
        shown = json.dumps(api_version)
        raise FieldError("apiVersion", f"unsupported apiVersion {shown} for Reservation (expected {allowed})")
    meta = get_map(obj, "metadata", "")
    name, _, _ = _metadata(meta)
    spec = get_map(obj, "spec", "")
    if "template" not in spec:
        raise FieldError("spec.template", "required field is missing (the reserve pod: resources, nodeSelector, ...)")
    template = get_map(spec, "template", "spec")
    tmeta = get_map(template, "metadata", "spec.template")
    pod_doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": dict(str_map(tmeta, "labels", "spec.template.metadata")),
            "annotations": dict(str_map(tmeta, "annotations", "spec.template.metadata")),
        },
        "spec": dict(get_map(template, "spec", "spec.template")),
    }
    try:
        pod = _build_pod(pod_doc)
    except FieldError as e:
        raise FieldError(join("spec.template", e.path), e.reason) from None
    if pod.node_name:
        raise FieldError(
            "spec.template.spec.nodeName", "a reservation is placed by the scheduler; nodeName is not allowed"
        )
    owners = [_reservation_owner(v, f"spec.owners[{i}]") for i, v in enumerate(get_list(spec, "owners", "spec"))]
    if not owners:
        raise FieldError("spec.owners", "required: at least one owner (an object or a labelSelector)")
    ttl = _duration(spec, "ttl", "spec")
    expires = timestamp(spec, "expires", "spec")
    allocate_once = spec.get("allocateOnce", True)
    if not isinstance(allocate_once, bool):
        wrong_type("spec.allocateOnce", "a boolean", allocate_once)
    created = timestamp(meta, "creationTimestamp", "metadata")
    uid = get_str(meta, "uid", "metadata") or str(uuid.uuid4())
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


def reservation_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> Reservation:
    """Build a :class:`Reservation` from its manifest; ``where`` prefixes error messages.
    ``validate`` and ``warn`` are :func:`parse_objects`'."""
    return _from_dict("Reservation", _build_reservation, _RESERVATION, obj, where, validate, warn)


# --------------------------------------------------------------------------------------------
# PodDisruptionBudgets (policy/v1), checked as the API server's validation checks them.

PDB_API_VERSION = "policy/v1"
_PERCENT_RE = re.compile(r"[0-9]+%")
_UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")


def _int_or_percent(m: Mapping[str, Any], key: str, parent: str) -> int | str | None:
    """An IntOrString that counts pods: a non-negative int32, or a percent string up to "100%"."""
    v = m.get(key)
    if v is None:
        return None
    path = join(parent, key)
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 0:
            raise FieldError(path, f"Invalid value: {v}: must be greater than or equal to 0")
        if v > _INT32_MAX:
            raise FieldError(path, f"must fit in a 32-bit integer, got {v}")
        return v
    if not isinstance(v, str):
        wrong_type(path, 'an integer or a percent string such as "50%"', v)
    if not _PERCENT_RE.fullmatch(v):
        raise FieldError(
            path,
            f"Invalid value: {_quoted(v)}: a valid percent string must be a numeric string followed by an ending "
            "'%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
        )
    if int(v[:-1]) > 100:
        raise FieldError(path, f"Invalid value: {_quoted(v)}: must not be greater than 100%")
    return v


def _build_pdb(obj: dict[str, Any]) -> PodDisruptionBudget:
    api_version = obj.get("apiVersion")
    if api_version != PDB_API_VERSION:
        shown = f'"{api_version}"' if isinstance(api_version, str) else type_name(api_version)
        raise FieldError(
            "apiVersion", f'unsupported apiVersion {shown} for PodDisruptionBudget (expected "{PDB_API_VERSION}")'
        )
    meta = get_map(obj, "metadata", "")
    name, labels, _ = _metadata(meta)
    namespace = get_str(meta, "namespace", "metadata") or "default"
    problem = _dns_label_problem(namespace)
    if problem is not None:
        raise FieldError("metadata.namespace", f"Invalid value: {_quoted(namespace)}: {problem}")
    spec = get_map(obj, "spec", "")
    min_available = _int_or_percent(spec, "minAvailable", "spec")
    max_unavailable = _int_or_percent(spec, "maxUnavailable", "spec")
    if min_available is not None and max_unavailable is not None:
        raise FieldError("spec", "minAvailable and maxUnavailable cannot be both set")
    policy = get_str(spec, "unhealthyPodEvictionPolicy", "spec")
    if policy and policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in _UNHEALTHY_POD_EVICTION_POLICIES)
        raise FieldError(
            "spec.unhealthyPodEvictionPolicy", f"Unsupported value: {_quoted(policy)}: supported values: {supported}"
        )
    status = get_map(obj, "status", "")
    disrupted = get_map(status, "disruptedPods", "status")
    disrupted_pods: dict[str, float] = {}
    for pod_name in disrupted:
        when = timestamp(disrupted, pod_name, "status.disruptedPods")
        disrupted_pods[str(pod_name)] = 0.0 if when is None else when
    allowed = get_int(status, "disruptionsAllowed", "status", 0)
    return PodDisruptionBudget(
        name=name,
        namespace=namespace,
        uid=get_str(meta, "uid", "metadata") or str(uuid.uuid4()),
        labels=labels,
        selector=_label_selector(spec, "selector", "spec"),
        min_available=min_available,
        max_unavailable=max_unavailable,
        disruptions_allowed=allowed,
        disrupted_pods=disrupted_pods,
        raw=obj,
    )


def pdb_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> PodDisruptionBudget:
    """Build a :class:`PodDisruptionBudget` from a ``policy/v1`` manifest; ``where`` prefixes error
    messages. ``validate`` and ``warn`` are :func:`parse_objects`'."""
    return _from_dict("PodDisruptionBudget", _build_pdb, _PDB, obj, where, validate, warn)


# --------------------------------------------------------------------------------------------
# Volumes: a pod's volumes, and the storage objects the volume plugins read (PersistentVolumeClaim,
# PersistentVolume, StorageClass, CSINode), with the API server's defaults and the checks the plugins
# rely on.

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
    problem = _dns_label_problem(name)
    if problem is not None:
        raise FieldError(f"{path}.name", f"Invalid value: {_quoted(name)}: {problem}")
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


def _pod_volumes(raw: object, pod_name: str) -> tuple[Volume, ...]:
    """``spec.volumes``: names unique DNS labels, one source each; only what a volume plugin reads is kept."""
    out: list[Volume] = []
    seen: set[str] = set()
    claims: dict[str, int] = {}
    for i, v in enumerate(as_list(raw, "spec.volumes")):
        path = f"spec.volumes[{i}]"
        name, volume = _pod_volume(v, path, pod_name)
        if name in seen:
            raise FieldError(f"{path}.name", f"Duplicate value: {_quoted(name)}")
        seen.add(name)
        if volume is not None:
            out.append(volume)
            if volume.source == VOLUME_PVC:
                claims[volume.claim_name] = i
    for volume in out:
        if volume.source == VOLUME_EPHEMERAL and volume.claim(pod_name) in claims:
            claim = volume.claim(pod_name)
            raise FieldError(
                f"spec.volumes[{claims[claim]}].persistentVolumeClaim.claimName",
                f"Invalid value: {_quoted(claim)}: must not reference a PVC that gets created for an ephemeral volume",
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
    amounts = _resource_list(m, key, parent)
    return amounts.get("storage")


def _claim_spec(spec: Mapping[str, Any], path: str, claim_name: str) -> tuple[tuple[str, ...], int]:
    """A PersistentVolumeClaimSpec's access modes and storage request, checked as the API server does."""
    modes = _access_modes(spec, path)
    requests = _storage(get_map(spec, "resources", path), "requests", f"{path}.resources")
    if requests is None:
        raise FieldError(f"{path}.resources.requests.storage", f"required for claim {_quoted(claim_name)}")
    if requests <= 0:
        raise FieldError(f"{path}.resources.requests.storage", "must be greater than zero")
    one_of(get_str(spec, "volumeMode", path) or "Filesystem", _VOLUME_MODES, f"{path}.volumeMode", "volumeMode")
    _label_selector(spec, "selector", path)
    return modes, requests


def _object_meta(obj: Mapping[str, Any], namespaced: bool) -> tuple[Mapping[str, Any], str, str, dict[str, str],
                                                                    dict[str, str]]:
    meta = get_map(obj, "metadata", "")
    name, labels, annotations = _metadata(meta)
    namespace = ""
    if namespaced:
        namespace = get_str(meta, "namespace", "metadata") or "default"
        problem = _dns_label_problem(namespace)
        if problem is not None:
            raise FieldError("metadata.namespace", f"Invalid value: {_quoted(namespace)}: {problem}")
    return meta, name, namespace, labels, annotations


def _controller_uid(meta: Mapping[str, Any]) -> str:
    """The uid of the owner reference marked ``controller: true`` ("" when there is none)."""
    for i, ref in enumerate(get_list(meta, "ownerReferences", "metadata")):
        rm = item_map(ref, f"metadata.ownerReferences[{i}]")
        if get_bool(rm, "controller", f"metadata.ownerReferences[{i}]"):
            return get_str(rm, "uid", f"metadata.ownerReferences[{i}]")
    return ""


def _build_pvc(obj: dict[str, Any]) -> PersistentVolumeClaim:
    meta, name, namespace, labels, annotations = _object_meta(obj, namespaced=True)
    spec = get_map(obj, "spec", "")
    status = get_map(obj, "status", "")
    modes, storage = _claim_spec(spec, "spec", name)
    class_name = spec.get("storageClassName")
    if class_name is not None and not isinstance(class_name, str):
        wrong_type("spec.storageClassName", "a string", class_name)
    return PersistentVolumeClaim(
        name=name,
        namespace=namespace,
        uid=get_str(meta, "uid", "metadata") or str(uuid.uuid4()),
        resource_version=get_str(meta, "resourceVersion", "metadata"),
        labels=labels,
        annotations=annotations,
        access_modes=modes,
        selector=_label_selector(spec, "selector", "spec"),
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


def _build_pv(obj: dict[str, Any]) -> PersistentVolume:
    meta, name, _, labels, annotations = _object_meta(obj, namespaced=False)
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
    claim_ref = None
    if spec.get("claimRef") is not None:
        ref = get_map(spec, "claimRef", "spec")
        claim_ref = ClaimRef(namespace=get_str(ref, "namespace", "spec.claimRef") or "default",
                             name=required_str(ref, "name", "spec.claimRef"),
                             uid=get_str(ref, "uid", "spec.claimRef"))
    affinity = None
    if spec.get("nodeAffinity") is not None:
        apath = "spec.nodeAffinity"
        na = get_map(spec, "nodeAffinity", "spec")
        if na.get("required") is not None:
            terms = get_list(get_map(na, "required", apath), "nodeSelectorTerms", f"{apath}.required")
            if not terms:
                raise FieldError(f"{apath}.required.nodeSelectorTerms", "must have at least one node selector term")
            affinity = [_node_selector_term(t, f"{apath}.required.nodeSelectorTerms[{i}]")
                        for i, t in enumerate(terms)]
    if source == "local" and affinity is None:
        raise FieldError("spec.nodeAffinity", "Local volumes require node affinity")
    # The PV controller makes a new volume Available (Bound once claimed); with no controller here,
    # a manifest without status starts where the controller would put it.
    phase = get_str(status, "phase", "status") or ("Bound" if claim_ref is not None and claim_ref.uid else "Available")
    return PersistentVolume(
        name=name,
        uid=get_str(meta, "uid", "metadata") or str(uuid.uuid4()),
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


def _build_storage_class(obj: dict[str, Any]) -> StorageClass:
    meta, name, _, labels, annotations = _object_meta(obj, namespaced=False)
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
        uid=get_str(meta, "uid", "metadata") or str(uuid.uuid4()),
        resource_version=get_str(meta, "resourceVersion", "metadata"),
        raw=obj,
    )


def _build_csinode(obj: dict[str, Any]) -> CSINode:
    meta, name, _, _, annotations = _object_meta(obj, namespaced=False)
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
        uid=get_str(meta, "uid", "metadata") or str(uuid.uuid4()),
        resource_version=get_str(meta, "resourceVersion", "metadata"),
        raw=obj,
    )


def pvc_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> PersistentVolumeClaim:
    """Build a :class:`PersistentVolumeClaim` from a ``v1`` manifest; as :func:`pod_from_dict`."""
    return _from_dict("PersistentVolumeClaim", _build_pvc, _PVC, obj, where, validate, warn)


def pv_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> PersistentVolume:
    """Build a :class:`PersistentVolume` from a ``v1`` manifest; as :func:`pod_from_dict`."""
    return _from_dict("PersistentVolume", _build_pv, _PV, obj, where, validate, warn)


def storage_class_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> StorageClass:
    """Build a :class:`StorageClass` from a ``storage.k8s.io/v1`` manifest; as :func:`pod_from_dict`."""
    return _from_dict("StorageClass", _build_storage_class, _STORAGE_CLASS, obj, where, validate, warn)


def csinode_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> CSINode:
    """Build a :class:`CSINode` from a ``storage.k8s.io/v1`` manifest; as :func:`pod_from_dict`."""
    return _from_dict("CSINode", _build_csinode, _CSINODE, obj, where, validate, warn)


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


def _documents(text: str, source: str) -> list[decode.Document]:
    try:
        return decode.load_documents(text)
    except TextError as e:
        location = f"{source}: document {e.document}" if e.document else source
        message = f"{location}: {e.where}: {e.reason}" if e.where else f"{location}: {e.reason}"
        raise ManifestError(message, location=location, reason=e.reason) from None


_ITEM_PATH_RE = re.compile(r"items\[(\d+)\]\.(.+)")


def _objects(
    text: str, source: str, validate: str, warn: Callable[[str], None] | None
) -> list[tuple[str, dict[str, Any], list[str]]]:
    """The objects of ``text``: (location label, object, paths of its duplicated keys) each; a
    ``kind: List`` document's own fields are decoded here, by ``validate``."""
    out: list[tuple[str, dict[str, Any], list[str]]] = []
    for document in _documents(text, source):
        doc = document.value
        if doc is None:
            continue
        label = f"{source}: document {document.index}"
        if not isinstance(doc, dict):
            raise ManifestError(
                f"{label}: expected a mapping (a Kubernetes object), got {type_name(doc)}",
                location=label,
                reason="expected a mapping",
            )
        duplicates = [path for path, _ in document.duplicates]
        kind = doc.get("kind")
        if not (isinstance(kind, str) and kind.endswith("List")):
            out.append((label, doc, duplicates))
            continue
        # A list's duplicates are its items' (relative to each item) or its own.
        by_item: dict[int, list[str]] = {}
        own: list[str] = []
        for path in duplicates:
            m = _ITEM_PATH_RE.fullmatch(path)
            if m is None:
                own.append(path)
            else:
                by_item.setdefault(int(m.group(1)), []).append(m.group(2))
        try:
            problems = _strict(doc, _LIST, validate, warn, own)
        except FieldError as e:
            raise _error(label, kind, doc, e.path, e.reason) from None
        if problems is not None:
            raise _error(label, kind, doc, "", problems)
        items = doc.get("items")
        if items is None:
            continue
        if not isinstance(items, list):
            reason = f"expected a list, got {type_name(items)}"
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
                    f"{item_label}: expected a mapping (a Kubernetes object), got {type_name(item)}",
                    location=item_label,
                    reason="expected a mapping",
                )
            if item_kind and "kind" not in item:
                item = {
                    "kind": item_kind,
                    **({"apiVersion": api_version} if api_version is not None else {}),
                    **item,
                }
            out.append((item_label, item, by_item.get(i, [])))
    return out


def load_documents(text: str, source: str = "<input>") -> list[tuple[str, dict[str, Any]]]:
    """Split ``text`` into object dicts, each with a location label for error messages.

    Labels look like ``pods.yaml: document 3`` or ``pods.yaml: document 2, items[4]`` (documents
    count from 1, including empty ones, so the number matches the file). Items of a ``PodList``,
    ``NodeList``, ... without their own ``kind``/``apiVersion`` inherit them from the list, as the
    API server's list responses omit them. Fields are not decoded here (see :func:`parse_objects`).
    """
    return [(label, obj) for label, obj, _ in _objects(text, source, "ignore", None)]


def parse_objects(
    text: str,
    source: str = "<input>",
    *,
    validate: str = "strict",
    warn: Callable[[str], None] | None = None,
) -> list[ManifestObject]:
    """Parse every object of :data:`SUPPORTED_KINDS` in ``text`` (YAML or JSON), in document order.

    ``validate`` is ``kubectl apply --validate``'s (:data:`VALIDATE_MODES`): with ``strict``, a field
    the object's type does not have (at any depth) or a key given twice is an error naming them all,
    ``in.yaml: document 1 (Pod default/p): unknown field "spec.nodeSelectr"``; with ``warn``, each is
    passed to ``warn`` as one line, ``Warning: unknown field "spec.nodeSelectr"``, and otherwise
    ignored; with ``ignore``, they are ignored. A text without objects (empty, only ``---`` or
    comments, an empty List) is an error: ``in.yaml: no objects passed to apply``, kubectl's words.
    """
    decode.check_validate(validate)
    with decode.paused_gc():
        objects = _parse(text, source, validate, warn)
    if not objects:
        reason = "no objects passed to apply"
        raise ManifestError(f"{source}: {reason}", location=source, reason=reason)
    return objects


def _parse(
    text: str, source: str, validate: str, warn: Callable[[str], None] | None
) -> list[ManifestObject]:
    objects: list[ManifestObject] = []
    for label, obj, duplicates in _objects(text, source, validate, warn):
        kind = obj.get("kind")
        if isinstance(kind, str) and kind in _STORAGE_KINDS:
            objects.append(_storage_object(kind, obj, label, validate, warn, duplicates))
        elif kind == "Reservation":
            objects.append(
                _from_dict("Reservation", _build_reservation, _RESERVATION, obj, label, validate, warn, duplicates)
            )
        elif kind == "PodDisruptionBudget":
            objects.append(_from_dict(kind, _build_pdb, _PDB, obj, label, validate, warn, duplicates))
        elif kind == "Pod" or kind == "Node":
            api_version = obj.get("apiVersion")
            if api_version is not None and api_version != "v1":
                shown = f'"{api_version}"' if isinstance(api_version, str) else type_name(api_version)
                raise _error(
                    label,
                    kind,
                    obj,
                    "apiVersion",
                    f'unsupported apiVersion {shown} for {kind} (expected "v1")',
                )
            if kind == "Pod":
                objects.append(_from_dict("Pod", _build_pod, _POD, obj, label, validate, warn, duplicates))
            else:
                objects.append(_from_dict("Node", _build_node, _NODE, obj, label, validate, warn, duplicates))
        elif kind is None:
            raise ManifestError(
                f"{label}: kind: required field is missing (supported: {', '.join(SUPPORTED_KINDS)})",
                location=label,
                path="kind",
            )
        elif isinstance(kind, str):
            supported = ", ".join(SUPPORTED_KINDS)
            raise _error(label, kind, obj, "", f'unsupported kind "{kind}" (supported: {supported})')
        else:
            raise ManifestError(
                f"{label}: kind: expected a string, got {type_name(kind)}", location=label, path="kind"
            )
    return objects


def _storage_object(kind: str, obj: dict[str, Any], label: str, validate: str, warn: Callable[[str], None] | None,
                    duplicates: list[str]) -> ManifestObject:
    want = _STORAGE_KINDS[kind]
    api_version = obj.get("apiVersion")
    if api_version is not None and api_version != want:
        shown = f'"{api_version}"' if isinstance(api_version, str) else type_name(api_version)
        raise _error(label, kind, obj, "apiVersion", f'unsupported apiVersion {shown} for {kind} (expected "{want}")')
    if kind == "PersistentVolumeClaim":
        return _from_dict(kind, _build_pvc, _PVC, obj, label, validate, warn, duplicates)
    if kind == "PersistentVolume":
        return _from_dict(kind, _build_pv, _PV, obj, label, validate, warn, duplicates)
    if kind == "StorageClass":
        return _from_dict(kind, _build_storage_class, _STORAGE_CLASS, obj, label, validate, warn, duplicates)
    return _from_dict(kind, _build_csinode, _CSINODE, obj, label, validate, warn, duplicates)


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
