"""Device objects (ResourceSlices, DeviceClasses, ResourceClaims) from their wire form
(``types.DeviceObject``) into the SDK's models (:mod:`pluginhost.snapshot._devices`), as a host's
snapshot mirror applies them, and the wire form of quantities both sides share."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from pluginhost.convert import _node_term_from_proto
from pluginhost.pb import types
from pluginhost.snapshot import (
    DEVICE_KINDS,
    AllocatedDevice,
    ClaimConsumer,
    Device,
    DeviceAllocation,
    DeviceClass,
    DeviceConstraint,
    DeviceObject,
    DeviceRequest,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
    ResourceSlice,
    Version,
)

__all__ = ["device_from_proto", "device_key", "format_quantity", "parse_quantity"]


def format_quantity(q: Fraction) -> str:
    """``q`` in the wire form: an integer, or milli-units with an ``m`` suffix (rounded up, as the
    API server rounds sub-milli quantities)."""
    if q.denominator == 1:
        return str(q.numerator)
    milli = -((-q * 1000).numerator // (q * 1000).denominator)  # ceil
    return f"{milli}m"


def parse_quantity(text: str) -> Fraction:
    """A wire quantity (see :func:`format_quantity`); ValueError when it is not one."""
    if text.endswith("m"):
        return Fraction(int(text[:-1]), 1000)
    return Fraction(int(text))


def _quantities(msg: Any) -> dict[str, Fraction]:
    return {k: parse_quantity(v) for k, v in msg.items()}


def _selector(msg: Any, present: bool) -> Any:
    return tuple(_node_term_from_proto(t) for t in msg.terms) if present else None


def _attribute(msg: types.DeviceAttribute) -> int | bool | str | Version:
    kind = msg.WhichOneof("value")
    if kind == "int":
        return int(msg.int)
    if kind == "bool":
        return bool(msg.bool)
    if kind == "string":
        return str(msg.string)
    if kind == "version":
        return Version(msg.version)
    raise ValueError("a device attribute with no value")


def _device(msg: types.Device) -> Device:
    return Device(
        name=msg.name,
        attributes={k: _attribute(v) for k, v in msg.attributes.items()},
        capacity=_quantities(msg.capacity),
        consumes_counters={c.name: _quantities(c.counters) for c in msg.consumes_counters},
        node_name=msg.node_name,
        node_selector=_selector(msg.node_selector, msg.HasField("node_selector")),
        all_nodes=msg.all_nodes,
        taints=tuple(DeviceTaint(t.key, t.value, t.effect) for t in msg.taints),
        allow_multiple_allocations=msg.allow_multiple_allocations,
        binds_to_node=msg.binds_to_node,
    )


def _slice(msg: types.ResourceSlice) -> ResourceSlice:
    return ResourceSlice(
        name=msg.metadata.name, driver=msg.driver, pool=msg.pool, pool_generation=msg.pool_generation,
        pool_slice_count=msg.pool_slice_count, node_name=msg.node_name,
        node_selector=_selector(msg.node_selector, msg.HasField("node_selector")), all_nodes=msg.all_nodes,
        per_device_node_selection=msg.per_device_node_selection, devices=tuple(_device(d) for d in msg.devices),
        shared_counters={c.name: _quantities(c.counters) for c in msg.shared_counters},
    )


def _sub_request(msg: types.DeviceSubRequest) -> DeviceSubRequest:
    return DeviceSubRequest(
        name=msg.name, device_class_name=msg.device_class_name, selectors=tuple(msg.selectors),
        allocation_mode=msg.allocation_mode, count=msg.count, admin_access=msg.admin_access,
        tolerations=tuple(DeviceToleration(t.key, t.operator, t.value, t.effect) for t in msg.tolerations),
        capacity=_quantities(msg.capacity),
    )


def _claim(msg: types.ResourceClaim) -> ResourceClaim:
    allocation = None
    if msg.HasField("allocation"):
        a = msg.allocation
        allocation = DeviceAllocation(
            results=tuple(
                AllocatedDevice(r.request, r.driver, r.pool, r.device, r.admin_access, r.share_id,
                                _quantities(r.consumed_capacity))
                for r in a.results
            ),
            node_selector=_selector(a.node_selector, a.HasField("node_selector")),
        )
    meta = msg.metadata
    return ResourceClaim(
        name=meta.name, namespace=meta.namespace, uid=meta.uid, resource_version=meta.resource_version,
        requests=tuple(
            DeviceRequest(r.name, _sub_request(r.exactly) if r.HasField("exactly") else None,
                          tuple(_sub_request(s) for s in r.first_available))
            for r in msg.requests
        ),
        constraints=tuple(DeviceConstraint(tuple(c.requests), c.match_attribute, c.distinct_attribute)
                          for c in msg.constraints),
        config=tuple((tuple(c.requests), c.driver, c.parameters_json) for c in msg.config),
        allocation=allocation,
        allocation_assumed=msg.allocation_assumed,
        reserved_for=tuple(ClaimConsumer(c.resource, c.name, c.uid) for c in msg.reserved_for),
        owner=ClaimConsumer(msg.owner.resource, msg.owner.name, msg.owner.uid) if msg.HasField("owner") else None,
        deleting=meta.HasField("deletion_timestamp"),
        annotations=dict(meta.annotations),
    )


def device_from_proto(msg: types.DeviceObject) -> DeviceObject:
    """A ``types.DeviceObject`` as its SDK model; ValueError when it carries no object or a bad value."""
    kind = msg.WhichOneof("object")
    if kind == "resource_slice":
        return _slice(msg.resource_slice)
    if kind == "device_class":
        c = msg.device_class
        return DeviceClass(c.metadata.name, tuple(c.selectors), tuple((o.driver, o.parameters_json) for o in c.config))
    if kind == "resource_claim":
        return _claim(msg.resource_claim)
    raise ValueError("a DeviceObject with no object set")


def device_key(ref: types.DeviceObjectRef) -> tuple[str, str]:
    """(kind, store key) of a ``DeviceObjectRef``; ValueError for a kind the store does not hold."""
    if ref.kind not in DEVICE_KINDS:
        raise ValueError(f"device object kind {ref.kind!r}: expected one of {', '.join(DEVICE_KINDS)}")
    return ref.kind, f"{ref.namespace}/{ref.name}" if ref.kind == "ResourceClaim" else ref.name
