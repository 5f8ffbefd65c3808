"""The device objects of dynamic resource allocation as a remote plugin reads them: ResourceSlices,
DeviceClasses and ResourceClaims (with their allocations), kept by a host's snapshot mirror.

A host whose plugin declares ``needs_devices`` follows the framework's device objects
(``FollowRequest.devices``); the mirror applies them to its table's :class:`DeviceStore`, which every
snapshot refers to (:attr:`~pluginhost.snapshot.Snapshot.devices`), live like kube-scheduler's listers.
A claim that an earlier pod's Reserve allocated reads as allocated (``allocation_assumed``) before the
API server has it, as DynamicResources counts it. Without ``needs_devices`` the store stays empty.

The models keep what an allocator or a topology-aware scorer reads; quantities are ``Fraction`` in
canonical units, a ``version`` attribute is a :class:`Version`.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pluginhost.model import Node, NodeSelectorTerm

__all__ = [
    "DEVICE_KINDS",
    "AllocatedDevice",
    "ClaimConsumer",
    "Device",
    "DeviceAllocation",
    "DeviceClass",
    "DeviceConstraint",
    "DeviceListener",
    "DeviceObject",
    "DeviceRequest",
    "DeviceStore",
    "DeviceSubRequest",
    "DeviceTaint",
    "DeviceToleration",
    "NodeDevice",
    "ResourceClaim",
    "ResourceSlice",
    "Version",
    "node_selector_matches",
]

#: The kinds the store holds; ResourceClaims are namespaced (key ``namespace/name``), the others
#: cluster-scoped (key: name).
DEVICE_KINDS = ("ResourceSlice", "DeviceClass", "ResourceClaim")


@dataclass(frozen=True, slots=True)
class Version:
    """A semantic-version attribute value, as written (``"1.2.3"``)."""

    text: str


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a slice; ``attributes`` and ``capacity`` keyed by the names the slice gives."""

    name: str
    attributes: dict[str, int | bool | str | Version] = field(default_factory=dict)
    capacity: dict[str, Fraction] = field(default_factory=dict)
    #: ``consumesCounters``: counter set -> counter -> quantity.
    consumes_counters: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    allow_multiple_allocations: bool = False
    binds_to_node: bool = False

    def attribute(self, name: str, driver: str) -> int | bool | str | Version | None:
        """The attribute ``name`` (qualified ``domain/id``, or a bare id), reading a bare name in the
        driver's domain as the same attribute (as CEL and ``matchAttribute`` do); None when absent."""
        if name in self.attributes:
            return self.attributes[name]
        domain, _, ident = name.rpartition("/")
        if domain == driver:
            return self.attributes.get(ident)
        if not domain:
            return self.attributes.get(f"{driver}/{name}")
        return None


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    pool_generation: int = 0
    pool_slice_count: int = 1
    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: tuple[Device, ...] = ()
    #: ``sharedCounters``: counter set -> counter -> quantity.
    shared_counters: dict[str, dict[str, Fraction]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    #: The CEL selectors, as written.
    selectors: tuple[str, ...] = ()
    #: Opaque configurations: (driver, parameters as JSON text).
    config: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class DeviceSubRequest:
    """A request for devices of one class (``exactly``, or one ``firstAvailable`` alternative)."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: dict[str, Fraction] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: DeviceSubRequest | None = None
    first_available: tuple[DeviceSubRequest, ...] = ()

    @property
    def classes(self) -> tuple[str, ...]:
        """The device classes the request may be served from, most preferred first."""
        if self.exactly is not None:
            return (self.exactly.device_class_name,)
        return tuple(s.device_class_name for s in self.first_available)


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One ``status.allocation.devices.results`` entry."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    share_id: str = ""
    consumed_capacity: dict[str, Fraction] = field(default_factory=dict)

    @property
    def id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    results: tuple[AllocatedDevice, ...] = ()
    #: The nodes the devices can be used on; None: every node.
    node_selector: tuple[NodeSelectorTerm, ...] | None = None


@dataclass(frozen=True, slots=True)
class ClaimConsumer:
    resource: str
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    name: str
    namespace: str = "default"
    uid: str = ""
    resource_version: str = ""
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    #: ``spec.devices.config``: (requests, driver, parameters as JSON text).
    config: tuple[tuple[tuple[str, ...], str, str], ...] = ()
    allocation: DeviceAllocation | None = None
    #: The allocation is the scheduler's in-memory one (Reserve made it, the API does not have it yet).
    allocation_assumed: bool = False
    reserved_for: tuple[ClaimConsumer, ...] = ()
    #: The controlling owner, its kind in ``resource`` (``"Pod"``); None when none.
    owner: ClaimConsumer | None = None
    deleting: bool = False
    annotations: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def reserved_for_pod(self, uid: str) -> bool:
        return any(c.resource == "pods" and c.uid == uid for c in self.reserved_for)


DeviceObject = ResourceSlice | DeviceClass | ResourceClaim
#: ``listener(kind, old, new)`` after every change (``old`` None: added; ``new`` None: removed).
DeviceListener = Callable[[str, Any, Any], None]


@dataclass(frozen=True, slots=True)
class NodeDevice:
    """A device that can be used on a node, with the slice that publishes it."""

    slice: ResourceSlice
    device: Device

    @property
    def id(self) -> tuple[str, str, str]:
        return (self.slice.driver, self.slice.pool, self.device.name)

    def attribute(self, name: str) -> int | bool | str | Version | None:
        return self.device.attribute(name, self.slice.driver)


def _requirement_matches(req: Any, value: str | None) -> bool:
    op = req.operator
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if value is None:
        return False
    if op == "In":
        return value in req.values
    if op == "NotIn":
        return value not in req.values
    if op in ("Gt", "Lt") and len(req.values) == 1:
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False


def node_selector_matches(terms: Iterable[NodeSelectorTerm], node: Node) -> bool:
    """Whether ``node`` matches one of ``terms`` (a v1.NodeSelector; no terms: no node)."""
    for term in terms:
        if not term.match_expressions and not term.match_fields:
            continue  # an empty term matches nothing
        if all(_requirement_matches(r, node.labels.get(r.key)) for r in term.match_expressions) and all(
            _requirement_matches(r, node.name if r.key == "metadata.name" else None) for r in term.match_fields
        ):
            return True
    return False


def _on_node(node: Node, node_name: str, all_nodes: bool, selector: tuple[NodeSelectorTerm, ...] | None) -> bool:
    if node_name:
        return node_name == node.name
    if all_nodes:
        return True
    return selector is not None and node_selector_matches(selector, node)


class DeviceStore:
    """The ResourceSlices, DeviceClasses and ResourceClaims a host's mirror follows (see the module
    docstring): ``slices`` and ``classes`` keyed by name, ``claims`` by ``namespace/name``."""

    def __init__(self) -> None:
        self.slices: dict[str, ResourceSlice] = {}
        self.classes: dict[str, DeviceClass] = {}
        self.claims: dict[str, ResourceClaim] = {}
        self._listeners: list[DeviceListener] = []

    def __len__(self) -> int:
        return len(self.slices) + len(self.classes) + len(self.claims)

    def add_listener(self, listener: DeviceListener) -> None:
        """Call ``listener(kind, old, new)`` after every change :meth:`upsert` and :meth:`remove` make."""
        self._listeners.append(listener)

    def remove_listener(self, listener: DeviceListener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    # ---- changing (the mirror applies deltas through these) ------------------------------------

    def _table(self, kind: str) -> dict[str, Any]:
        tables: dict[str, dict[str, Any]] = {"ResourceSlice": self.slices, "DeviceClass": self.classes,
                                             "ResourceClaim": self.claims}
        if kind not in tables:
            raise ValueError(f"device object kind {kind!r}: expected one of {', '.join(DEVICE_KINDS)}")
        return tables[kind]

    def upsert(self, obj: DeviceObject) -> None:
        kind = type(obj).__name__
        key = obj.key if isinstance(obj, ResourceClaim) else obj.name
        table = self._table(kind)
        old = table.get(key)
        table[key] = obj
        for listener in list(self._listeners):
            listener(kind, old, obj)

    def remove(self, kind: str, key: str) -> DeviceObject | None:
        old: DeviceObject | None = self._table(kind).pop(key, None)
        if old is not None:
            for listener in list(self._listeners):
                listener(kind, old, None)
        return old

    # ---- reading -------------------------------------------------------------------------------

    def slice(self, name: str) -> ResourceSlice | None:
        return self.slices.get(name)

    def device_class(self, name: str) -> DeviceClass | None:
        return self.classes.get(name)

    def claim(self, namespace: str, name: str) -> ResourceClaim | None:
        return self.claims.get(f"{namespace}/{name}")

    def pod_claims(self, pod: Any) -> list[tuple[str, ResourceClaim | None]]:
        """``(entry name, claim)`` for each entry of ``pod.resource_claims`` in order: a claim named
        directly, or the one made from a template (``pod.resource_claim_statuses``); None when the
        claim is not (yet) known."""
        out: list[tuple[str, ResourceClaim | None]] = []
        for entry in pod.resource_claims:
            name = entry.claim_name or pod.resource_claim_statuses.get(entry.name, "")
            out.append((entry.name, self.claim(pod.namespace, name) if name else None))
        return out

    def current_slices(self) -> list[ResourceSlice]:
        """The slices of each pool's newest generation (older ones are being replaced and do not count)."""
        newest: dict[tuple[str, str], int] = {}
        for s in self.slices.values():
            key = (s.driver, s.pool)
            newest[key] = max(newest.get(key, s.pool_generation), s.pool_generation)
        return [s for s in self.slices.values() if s.pool_generation == newest[(s.driver, s.pool)]]

    def node_slices(self, node: Node) -> list[ResourceSlice]:
        """The current slices with devices that can be used on ``node`` (by ``nodeName``, ``allNodes``,
        ``nodeSelector`` or per-device node selection), sorted by name."""
        out = []
        for s in self.current_slices():
            if s.per_device_node_selection:
                if any(_on_node(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices):
                    out.append(s)
            elif _on_node(node, s.node_name, s.all_nodes, s.node_selector):
                out.append(s)
        return sorted(out, key=lambda s: s.name)

    def node_devices(self, node: Node) -> list[NodeDevice]:
        """Every device of the current slices that can be used on ``node``, by slice name then device order."""
        out = []
        for s in self.node_slices(node):
            for d in s.devices:
                if not s.per_device_node_selection or _on_node(node, d.node_name, d.all_nodes, d.node_selector):
                    out.append(NodeDevice(s, d))
        return out

    def allocated(self) -> dict[tuple[str, str, str], list[ResourceClaim]]:
        """Device id ``(driver, pool, device)`` -> the claims allocated it (assumed allocations
        included), for every device held by a claim other than with admin access."""
        out: dict[tuple[str, str, str], list[ResourceClaim]] = collections.defaultdict(list)
        for claim in self.claims.values():
            if claim.allocation is None:
                continue
            for r in claim.allocation.results:
                if not r.admin_access:
                    out[r.id].append(claim)
        return dict(out)

    def in_use_on_node(self, node: Node) -> list[NodeDevice]:
        """The devices usable on ``node`` that some claim holds (see :meth:`allocated`)."""
        taken = self.allocated()
        return [d for d in self.node_devices(node) if d.id in taken]

    def free_on_node(self, node: Node) -> list[NodeDevice]:
        """The devices usable on ``node`` that no claim holds (a shared device counts as free while it
        allows multiple allocations)."""
        taken = self.allocated()
        return [d for d in self.node_devices(node) if d.id not in taken or d.device.allow_multiple_allocations]
