"""The front end: manifest text to objects of the model, one kind at a time, with errors that say where.

:func:`parse_objects` splits a file into documents (and ``List`` documents into their items), decodes
each object strictly by its kind's :class:`~pluginhost.decode.Schema`, and hands it to that kind's
builder (``_pods``, ``_nodes``, ``_reservations``, ``_pdb``, ``_storage``). A builder raises
:class:`~pluginhost.decode.FieldError` naming a field; this module turns it into a
:class:`ManifestError` naming the document and the object as well.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from pluginhost import decode
from pluginhost.decode import FieldError, Schema, TextError, one_line, type_name
from pluginhost.errors import OutriggerError
from pluginhost.kubefields import TYPES
from pluginhost.model import (
    CSINode,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodDisruptionBudget,
    Reservation,
    StorageClass,
)
from pluginhost.workload import PodGroup, Workload

from ._dra import RESOURCE_API_VERSION, RESOURCE_KINDS, ResourceObject, build_resource_object
from ._fields import shown
from ._nodes import build_node
from ._pdb import build_pdb
from ._podgroups import POD_GROUP_KINDS, SCHEMAS, build_pod_group, build_workload, check_pod_group_version
from ._pods import build_pod
from ._reservations import build_reservation
from ._storage import build_csinode, build_pv, build_pvc, build_storage_class

__all__ = [
    "SUPPORTED_KINDS",
    "ManifestError",
    "ManifestObject",
    "csinode_from_dict",
    "load_documents",
    "node_from_dict",
    "parse_objects",
    "pdb_from_dict",
    "pod_from_dict",
    "pod_group_from_dict",
    "pv_from_dict",
    "pvc_from_dict",
    "reservation_from_dict",
    "storage_class_from_dict",
    "workload_from_dict",
]

#: Every object :func:`parse_objects` returns.
ManifestObject = (
    Pod | Node | Reservation | PodDisruptionBudget | PersistentVolumeClaim | PersistentVolume | StorageClass | CSINode
    | ResourceObject | PodGroup | Workload
)
_T = TypeVar("_T")


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


# The objects parsed here, as strict decoding knows them: core/v1's and storage.k8s.io/v1's kinds,
# policy/v1's PodDisruptionBudget, koordinator's Reservation (scheduling.koordinator.sh/v1alpha1) and
# the List wrapping any of them.
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
        # resource.k8s.io/v1's objects: spec and status are the DRA decoder's to check (pluginhost.manifest._dra).
        "ResourceObject": "apiVersion kind metadata:ObjectMeta spec status",
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
_RESOURCE: Schema = _SCHEMAS["ResourceObject"]

# Each kind: the apiVersion it must have (checked before decoding; None where the builder checks it,
# as Reservation and PodDisruptionBudget accept or word theirs differently), its builder and schema.
_KINDS: dict[str, tuple[str | None, Callable[[dict[str, Any]], ManifestObject], Schema]] = {
    "Pod": ("v1", build_pod, _POD),
    "Node": ("v1", build_node, _NODE),
    "Reservation": (None, build_reservation, _RESERVATION),
    "PodDisruptionBudget": (None, build_pdb, _PDB),
    "PersistentVolumeClaim": ("v1", build_pvc, _PVC),
    "PersistentVolume": ("v1", build_pv, _PV),
    "StorageClass": ("storage.k8s.io/v1", build_storage_class, _STORAGE_CLASS),
    "CSINode": ("storage.k8s.io/v1", build_csinode, _CSINODE),
    **{kind: (RESOURCE_API_VERSION, build_resource_object(kind), _RESOURCE) for kind in RESOURCE_KINDS},
    # scheduling.k8s.io's: v1beta1 or v1alpha2, each version decoded by its own schema (_podgroups).
    "Workload": (None, build_workload, SCHEMAS[("Workload", "scheduling.k8s.io/v1beta1")]),
    "PodGroup": (None, build_pod_group, SCHEMAS[("PodGroup", "scheduling.k8s.io/v1beta1")]),
}
#: The kinds :func:`parse_objects` understands; any other is an error.
SUPPORTED_KINDS = tuple(_KINDS)
_CLUSTER_SCOPED = frozenset({"Node", "PersistentVolume", "StorageClass", "CSINode", "DeviceClass", "ResourceSlice",
                             "DeviceTaintRule"})


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
    return _from_dict("Pod", build_pod, _POD, obj, where, validate, warn)


def node_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> Node:
    """Build a :class:`Node` from a ``v1`` Node manifest; ``where`` prefixes error messages.
    ``validate`` and ``warn`` are :func:`parse_objects`'."""
    return _from_dict("Node", build_node, _NODE, obj, where, validate, warn)


def reservation_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> Reservation:
    """Build a :class:`Reservation` from its manifest; ``where`` prefixes error messages.
    ``validate`` and ``warn`` are :func:`parse_objects`'."""
    return _from_dict("Reservation", build_reservation, _RESERVATION, obj, where, validate, warn)


def pdb_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> PodDisruptionBudget:
    """Build a :class:`PodDisruptionBudget` from a ``policy/v1`` manifest; ``where`` prefixes error
    messages. ``validate`` and ``warn`` are :func:`parse_objects`'."""
    return _from_dict("PodDisruptionBudget", build_pdb, _PDB, obj, where, validate, warn)


def pod_group_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> PodGroup:
    """Build a :class:`~pluginhost.workload.PodGroup` from a ``scheduling.k8s.io/v1beta1`` (or ``v1alpha2``)
    manifest; as :func:`pod_from_dict`."""
    try:
        schema = SCHEMAS[("PodGroup", check_pod_group_version("PodGroup", obj))]
    except FieldError as e:
        raise _error(where, "PodGroup", obj, e.path, e.reason) from None
    return _from_dict("PodGroup", build_pod_group, schema, obj, where, validate, warn)


def workload_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> Workload:
    """Build a :class:`~pluginhost.workload.Workload` from its manifest; as :func:`pod_group_from_dict`."""
    try:
        schema = SCHEMAS[("Workload", check_pod_group_version("Workload", obj))]
    except FieldError as e:
        raise _error(where, "Workload", obj, e.path, e.reason) from None
    return _from_dict("Workload", build_workload, schema, obj, where, validate, warn)


def pvc_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> PersistentVolumeClaim:
    """Build a :class:`PersistentVolumeClaim` from a ``v1`` manifest; as :func:`pod_from_dict`."""
    return _from_dict("PersistentVolumeClaim", build_pvc, _PVC, obj, where, validate, warn)


def pv_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> PersistentVolume:
    """Build a :class:`PersistentVolume` from a ``v1`` manifest; as :func:`pod_from_dict`."""
    return _from_dict("PersistentVolume", build_pv, _PV, obj, where, validate, warn)


def storage_class_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> StorageClass:
    """Build a :class:`StorageClass` from a ``storage.k8s.io/v1`` manifest; as :func:`pod_from_dict`."""
    return _from_dict("StorageClass", build_storage_class, _STORAGE_CLASS, obj, where, validate, warn)


def csinode_from_dict(
    obj: dict[str, Any], where: str = "", *, validate: str = "strict", warn: Callable[[str], None] | None = None
) -> CSINode:
    """Build a :class:`CSINode` from a ``storage.k8s.io/v1`` manifest; as :func:`pod_from_dict`."""
    return _from_dict("CSINode", build_csinode, _CSINODE, obj, where, validate, warn)


# --------------------------------------------------------------------------------------------
# Documents.


def _documents(text: str, source: str) -> list[decode.Document]:
    try:
        return decode.load_documents(text)
    except TextError as e:
        location = f"{source}: document {e.document}" if e.document else source
        message = f"{location}: {e.where}: {e.reason}" if e.where else f"{location}: {e.reason}"
        raise ManifestError(message, location=location, reason=e.reason) from None


def _not_an_object(label: str, value: object) -> ManifestError:
    return ManifestError(
        f"{label}: expected a mapping (a Kubernetes object), got {type_name(value)}",
        location=label,
        reason="expected a mapping",
    )


_ITEM_PATH_RE = re.compile(r"items\[(\d+)\]\.(.+)")


def _list_items(
    label: str, kind: str, doc: dict[str, Any], duplicates: list[str], validate: str,
    warn: Callable[[str], None] | None,
) -> list[tuple[str, dict[str, Any], list[str]]]:
    """The items of a ``kind: List`` (or ``PodList``, ...) document, each with its label and the paths
    of its duplicated keys; the list's own fields are decoded here, by ``validate``."""
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
        return []
    if not isinstance(items, list):
        reason = f"expected a list, got {type_name(items)}"
        raise ManifestError(f"{label} ({kind}): items: {reason}", location=f"{label} ({kind})", path="items",
                            reason=reason)
    item_kind = kind[: -len("List")]
    api_version = doc.get("apiVersion")
    out: list[tuple[str, dict[str, Any], list[str]]] = []
    for i, item in enumerate(items):
        item_label = f"{label}, items[{i}]"
        if not isinstance(item, dict):
            raise _not_an_object(item_label, item)
        if item_kind and "kind" not in item:
            item = {
                "kind": item_kind,
                **({"apiVersion": api_version} if api_version is not None else {}),
                **item,
            }
        out.append((item_label, item, by_item.get(i, [])))
    return out


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
            raise _not_an_object(label, doc)
        duplicates = [path for path, _ in document.duplicates]
        kind = doc.get("kind")
        if isinstance(kind, str) and kind.endswith("List"):
            out.extend(_list_items(label, kind, doc, duplicates, validate, warn))
        else:
            out.append((label, doc, duplicates))
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
        objects = [
            _parse_object(label, obj, duplicates, validate, warn)
            for label, obj, duplicates in _objects(text, source, validate, warn)
        ]
    if not objects:
        reason = "no objects passed to apply"
        raise ManifestError(f"{source}: {reason}", location=source, reason=reason)
    return objects


def _parse_object(
    label: str, obj: dict[str, Any], duplicates: list[str], validate: str, warn: Callable[[str], None] | None
) -> ManifestObject:
    """One object of a manifest, by its kind."""
    kind = obj.get("kind")
    if kind is None:
        raise ManifestError(
            f"{label}: kind: required field is missing (supported: {', '.join(SUPPORTED_KINDS)})",
            location=label,
            path="kind",
        )
    if not isinstance(kind, str):
        raise ManifestError(f"{label}: kind: expected a string, got {type_name(kind)}", location=label, path="kind")
    if kind not in _KINDS:
        supported = ", ".join(SUPPORTED_KINDS)
        raise _error(label, kind, obj, "", f'unsupported kind "{kind}" (supported: {supported})')
    want, build, schema = _KINDS[kind]
    api_version = obj.get("apiVersion")
    if kind in POD_GROUP_KINDS:
        try:
            schema = SCHEMAS[(kind, check_pod_group_version(kind, obj))]
        except FieldError as e:
            raise _error(label, kind, obj, e.path, e.reason) from None
    if want is not None and api_version is not None and api_version != want:
        reason = f'unsupported apiVersion {shown(api_version)} for {kind} (expected "{want}")'
        raise _error(label, kind, obj, "apiVersion", reason)
    return _from_dict(kind, build, schema, obj, label, validate, warn, duplicates)
