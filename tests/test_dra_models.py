"""Decoding resource.k8s.io/v1 manifests (framework/dra/models.py): typed values from good manifests, and
bad ones refused with an error naming the field, as the API server's strict decoding does."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from framework.dra.models import (
    device_class_from_dict,
    resource_claim_from_dict,
    resource_claim_template_from_dict,
    resource_slice_from_dict,
)
from pluginhost.decode import FieldError

SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "s1"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "p", "generation": 3, "resourceSliceCount": 2},
        "nodeName": "n1",
        "devices": [
            {
                "name": "g0",
                "attributes": {
                    "model": {"string": "a100"},
                    "index": {"int": 0},
                    "ok": {"bool": True},
                    "driver": {"version": "1.2.3"},
                },
                "capacity": {"memory": {"value": "40Gi"}},
                "taints": [{"key": "k", "value": "v", "effect": "NoExecute"}],
            }
        ],
    },
}

CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c", "namespace": "ns", "uid": "u1"},
    "spec": {
        "devices": {
            "requests": [
                {
                    "name": "a",
                    "exactly": {
                        "deviceClassName": "gpu",
                        "count": 2,
                        "adminAccess": False,
                        "tolerations": [{"key": "k", "operator": "Exists"}],
                    },
                },
                {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "gpu", "allocationMode": "All"}]},
            ],
            "constraints": [{"requests": ["a", "b"], "matchAttribute": "gpu.example.com/numa"}],
        }
    },
    "status": {
        "allocation": {"devices": {"results": [{"request": "a", "driver": "d", "pool": "p", "device": "g0"}]}},
        "reservedFor": [{"resource": "pods", "name": "pod1", "uid": "p1"}],
    },
}


def test_slice_decodes_to_typed_values() -> None:
    s = resource_slice_from_dict(SLICE)
    assert (s.name, s.driver, s.pool, s.generation, s.slice_count, s.node_name) == (
        "s1",
        "gpu.example.com",
        "p",
        3,
        2,
        "n1",
    )
    [d] = s.devices
    assert d.attributes == {"model": "a100", "index": 0, "ok": True, "driver": ("version", "1.2.3")}
    assert d.capacity == {"memory": Fraction(40 * 2**30)}
    assert [(t.key, t.value, t.effect) for t in d.taints] == [("k", "v", "NoExecute")]


def test_claim_decodes_spec_and_status() -> None:
    c = resource_claim_from_dict(CLAIM)
    assert c.key == "ns/c"
    a, b = c.requests
    assert a.exactly is not None and (a.exactly.count, a.exactly.admin_access, a.exactly.mode) == (
        2,
        False,
        "ExactCount",
    )
    assert [(t.key, t.operator) for t in a.exactly.tolerations] == [("k", "Exists")]
    assert [(s.name, s.mode, s.device_class) for s in b.first_available] == [("x", "All", "gpu")]
    assert c.constraints[0].match_attribute == "gpu.example.com/numa"
    assert c.allocation is not None and [(r.request, r.device) for r in c.allocation.results] == [("a", "g0")]
    assert c.reserved_for == (("pods", "pod1", "p1"),)


def test_template_and_class_decode() -> None:
    t = resource_claim_template_from_dict(
        {"kind": "ResourceClaimTemplate", "metadata": {"name": "t", "namespace": "ns"}, "spec": {"spec": CLAIM["spec"]}}
    )
    assert (t.name, t.namespace, len(t.spec.requests)) == ("t", "ns", 2)
    cls = device_class_from_dict(
        {
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "selectors": [{"cel": {"expression": "true"}}],
                "config": [{"opaque": {"driver": "d", "parameters": {"a": 1}}}],
            },
        }
    )
    assert (cls.selectors, cls.config) == (("true",), (("d", {"a": 1}),))


def _with(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    import copy

    out = copy.deepcopy(doc)
    target: Any = out
    keys = path.split(".")
    for k in keys[:-1]:
        target = target[int(k)] if k.isdigit() else target[k]
    target[keys[-1]] = value
    return out


BAD = [
    (
        "unknown field",
        resource_slice_from_dict,
        _with(SLICE, "spec.devices.0.atributes", {}),
        'unknown field "spec.devices[0].atributes"',
    ),
    (
        "wrong type",
        resource_slice_from_dict,
        _with(SLICE, "spec.pool.generation", "3"),
        "spec.pool.generation: expected an integer, got string",
    ),
    (
        "two attribute values",
        resource_slice_from_dict,
        _with(SLICE, "spec.devices.0.attributes.model", {"string": "a", "int": 1}),
        "spec.devices[0].attributes.model: must have exactly one value, got 2",
    ),
    (
        "bad capacity",
        resource_slice_from_dict,
        _with(SLICE, "spec.devices.0.capacity.memory", {"value": "lots"}),
        'spec.devices[0].capacity.memory.value: invalid quantity "lots"',
    ),
    (
        "two node selections",
        resource_slice_from_dict,
        _with(SLICE, "spec.allNodes", True),
        "spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required, got 2",
    ),
    ("wrong kind", resource_slice_from_dict, _with(SLICE, "kind", "Pod"), 'kind: expected "ResourceSlice", got "Pod"'),
    (
        "bad mode",
        resource_claim_from_dict,
        _with(CLAIM, "spec.devices.requests.0.exactly.allocationMode", "Some"),
        'spec.devices.requests[0].exactly.allocationMode: unsupported allocationMode "Some"',
    ),
    (
        "exactly and firstAvailable",
        resource_claim_from_dict,
        _with(CLAIM, "spec.devices.requests.1.exactly", {"deviceClassName": "gpu"}),
        "spec.devices.requests[1]: exactly one of exactly, firstAvailable is required",
    ),
    (
        "zero count",
        resource_claim_from_dict,
        _with(CLAIM, "spec.devices.requests.0.exactly.count", 0),
        "spec.devices.requests[0].exactly.count: must be greater than zero, got 0",
    ),
    (
        "unknown status field",
        resource_claim_from_dict,
        _with(CLAIM, "status.reserved", []),
        'unknown field "status.reserved"',
    ),
    (
        "devices and shared counters",
        resource_slice_from_dict,
        _with(SLICE, "spec.sharedCounters", [{"name": "cs", "counters": {"m": {"value": "1"}}}]),
        "spec: only one of devices, sharedCounters may be set",
    ),
    (
        "policy with values and range",
        resource_slice_from_dict,
        _with(
            SLICE,
            "spec.devices.0.capacity.memory",
            {"value": "40Gi", "requestPolicy": {"validValues": ["1Gi"], "validRange": {"min": "1Gi"}}},
        ),
        "spec.devices[0].capacity.memory.requestPolicy: only one of validValues, validRange may be set",
    ),
    (
        "list attribute",
        resource_slice_from_dict,
        _with(SLICE, "spec.devices.0.attributes.model", {"strings": ["a"]}),
        "spec.devices[0].attributes.model.strings: list-valued attributes need the DRAListTypeAttributes feature"
        " (off in 1.37)",
    ),
]


@pytest.mark.parametrize(("decode", "doc", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_manifest_names_the_field(decode: Any, doc: dict[str, Any], message: str) -> None:
    with pytest.raises(FieldError) as err:
        decode(doc)
    assert str(err.value).startswith(message)


def test_capacity_policy_and_shared_device_decode() -> None:
    doc = _with(
        SLICE,
        "spec.devices.0.capacity.memory",
        {
            "value": "40Gi",
            "requestPolicy": {"default": "1Gi", "validRange": {"min": "1Gi", "max": "8Gi", "step": "500m"}},
        },
    )
    doc = _with(doc, "spec.devices.0.allowMultipleAllocations", True)
    [d] = resource_slice_from_dict(doc).devices
    policy = d.capacity_policies["memory"]
    assert (policy.default, policy.min, policy.max, policy.step) == tuple(
        Fraction(v) for v in (2**30, 2**30, 8 * 2**30, 0.5)
    )
    assert d.allow_multiple_allocations is True
