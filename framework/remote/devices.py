"""The DRA objects of the scheduler's cache (``cache.dra``) in their wire form (``types.DeviceObject``),
as the snapshot publisher sends them to hosts that follow with ``FollowRequest.devices``.

Claims are sent as this scheduler sees them (:func:`claim_view`): an allocation a pod's Reserve made
and PreBind has not written yet, or a written claim the source has not delivered back, is the claim's
allocation, with ``allocation_assumed`` set.
"""

from __future__ import annotations

import json
from typing import Any

from framework.dra.models import (
    CounterSet,
    Device,
    DeviceClass,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
)
from framework.dra.store import DraStore
from pluginhost.convert import _node_term_to_proto
from pluginhost.convert_devices import format_quantity
from pluginhost.pb import types

__all__ = ["claim_view", "device_to_proto"]


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _quantities(target: Any, values: dict[str, Any] | None) -> None:
    for k, q in (values or {}).items():
        target[k] = format_quantity(q)


def _selector(target: Any, terms: Any) -> None:
    target.SetInParent()
    target.terms.extend(_node_term_to_proto(t) for t in terms)


def _counter_sets(target: Any, sets: tuple[CounterSet, ...]) -> None:
    for c in sets:
        _quantities(target.add(name=c.name).counters, c.counters)


def _attribute(msg: types.DeviceAttribute, value: Any) -> None:
    if isinstance(value, bool):
        msg.bool = value
    elif isinstance(value, int):
        msg.int = value
    elif isinstance(value, tuple):  # ("version", text)
        msg.version = str(value[1])
    else:
        msg.string = str(value)


def _device(msg: types.Device, d: Device) -> None:
    msg.name = d.name
    for k, v in d.attributes.items():
        _attribute(msg.attributes[k], v)
    _quantities(msg.capacity, d.capacity)
    _counter_sets(msg.consumes_counters, d.consumes_counters)
    msg.node_name = d.node_name
    if d.node_selector is not None:
        _selector(msg.node_selector, d.node_selector)
    msg.all_nodes = d.all_nodes
    for t in d.taints:
        msg.taints.add(key=t.key, value=t.value, effect=t.effect)
    msg.allow_multiple_allocations = d.allow_multiple_allocations
    msg.binds_to_node = d.binds_to_node


def _slice(s: ResourceSlice) -> types.ResourceSlice:
    msg = types.ResourceSlice(driver=s.driver, pool=s.pool, pool_generation=s.generation,
                              pool_slice_count=s.slice_count, node_name=s.node_name, all_nodes=s.all_nodes,
                              per_device_node_selection=s.per_device_node_selection)
    msg.metadata.name = s.name
    if s.node_selector is not None:
        _selector(msg.node_selector, s.node_selector)
    for d in s.devices:
        _device(msg.devices.add(), d)
    _counter_sets(msg.shared_counters, s.shared_counters)
    return msg


def _sub_request(msg: types.DeviceSubRequest, r: ExactRequest) -> None:
    msg.name = r.name
    msg.device_class_name = r.device_class
    msg.selectors.extend(r.selectors)
    msg.allocation_mode = r.mode
    msg.count = r.count
    msg.admin_access = bool(r.admin_access)
    for t in r.tolerations:
        msg.tolerations.add(key=t.key, operator=t.operator, value=t.value, effect=t.effect)
    _quantities(msg.capacity, r.capacity)


def _claim(c: ResourceClaim, assumed: bool) -> types.ResourceClaim:
    msg = types.ResourceClaim(allocation_assumed=assumed and c.allocation is not None)
    meta = msg.metadata
    meta.name, meta.namespace, meta.uid, meta.resource_version = c.name, c.namespace, c.uid, c.resource_version
    meta.annotations.update(c.annotations)
    if c.deleting:
        meta.deletion_timestamp = 0.0
    for r in c.requests:
        req = msg.requests.add(name=r.name)
        if r.exactly is not None:
            _sub_request(req.exactly, r.exactly)
        for sub in r.first_available:
            _sub_request(req.first_available.add(), sub)
    for k in c.constraints:
        msg.constraints.add(requests=k.requests, match_attribute=k.match_attribute,
                            distinct_attribute=k.distinct_attribute)
    for requests, driver, params in c.config:
        msg.config.add(driver=driver, parameters_json=_json(params), requests=requests)
    if c.allocation is not None:
        msg.allocation.SetInParent()
        for res in c.allocation.results:
            out = msg.allocation.results.add(request=res.request, driver=res.driver, pool=res.pool, device=res.device,
                                             admin_access=bool(res.admin_access), share_id=res.share_id)
            _quantities(out.consumed_capacity, res.consumed_capacity)
        if c.allocation.node_selector is not None:
            _selector(msg.allocation.node_selector, c.allocation.node_selector)
    for resource, name, uid in c.reserved_for:
        msg.reserved_for.add(resource=resource, name=name, uid=uid)
    if c.owner is not None:
        msg.owner.resource, msg.owner.name, msg.owner.uid = c.owner
    return msg


def device_to_proto(obj: ResourceSlice | DeviceClass | ResourceClaim, assumed: bool = False) -> types.DeviceObject:
    """``obj`` as a ``types.DeviceObject`` (``assumed``: a claim's allocation is this scheduler's own)."""
    if isinstance(obj, ResourceSlice):
        return types.DeviceObject(resource_slice=_slice(obj))
    if isinstance(obj, DeviceClass):
        msg = types.DeviceClass(selectors=obj.selectors)
        msg.metadata.name = obj.name
        for driver, params in obj.config:
            msg.config.add(driver=driver, parameters_json=_json(params))
        return types.DeviceObject(device_class=msg)
    return types.DeviceObject(resource_claim=_claim(obj, assumed))


def claim_view(store: DraStore, key: str) -> tuple[ResourceClaim | None, bool]:
    """The claim ``namespace/name`` as this scheduler sees it, and whether its allocation is the
    scheduler's own (pending from Reserve, or written and not yet delivered); (None, False) when gone."""
    namespace, _, name = key.partition("/")
    claim = store.claim(namespace, name)
    if claim is None:
        return None, False
    pending = store.pending(claim.uid) if claim.uid else None
    if pending is not None:
        return pending, True
    return claim, store.is_assumed(key)
