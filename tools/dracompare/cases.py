"""Random DRA inputs as ``resource.k8s.io/v1`` manifests: slices of one or two drivers and pools (some
incomplete, some with shared counters, on this node, another, all nodes or a node selector), devices with
attributes, capacity (some shared, with request policies), taints; claims with exact and ``All`` requests,
``firstAvailable`` lists, selectors, capacity requests, tolerations, admin access and constraints."""

from __future__ import annotations

import random
from typing import Any

__all__ = ["NODE", "random_case"]

NODE = {"metadata": {"name": "n1", "labels": {"zone": "a"}}}
_DRIVERS = ["a.example.com", "b.example.com"]
_SELECTORS = [
    'device.attributes["{d}"].numa == 0',
    'device.attributes["{d}"].model == "x"',
    'device.attributes["{d}"].numa >= 1',
    'device.capacity["{d}"].mem.compareTo(quantity("2Gi")) >= 0',
    "true",
]
_POLICIES = [
    {"default": "1Gi", "validValues": ["1Gi", "2Gi"]},
    {"default": "1Gi", "validRange": {"min": "1Gi", "step": "512Mi"}},
    {"default": "500m", "validRange": {"min": "500m", "max": "3", "step": "250m"}},
]


def _device(rng: random.Random, name: str, counters: bool) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": name,
        "attributes": {"numa": {"int": rng.randint(0, 2)}, "model": {"string": rng.choice(["x", "y"])}},
        "capacity": {"mem": {"value": rng.choice(["1Gi", "2Gi", "4Gi"])}},
    }
    if counters:
        d["consumesCounters"] = [{"counterSet": "cs", "counters": {"m": {"value": rng.choice(["1", "2", "4"])}}}]
    if rng.random() < 0.2:
        d["allowMultipleAllocations"] = True
        if rng.random() < 0.5:
            d["capacity"]["mem"]["requestPolicy"] = rng.choice(_POLICIES)
    if rng.random() < 0.1:
        d["taints"] = [{"key": "k", "effect": rng.choice(["NoSchedule", "None"])}]
    return d


def _placement(rng: random.Random) -> dict[str, Any]:
    r = rng.random()
    if r < 0.6:
        return {"nodeName": "n1"}
    if r < 0.75:
        return {"nodeName": "n2"}
    if r < 0.9:
        return {"allNodes": True}
    term = {"matchExpressions": [{"key": "zone", "operator": "In", "values": [rng.choice(["a", "b"])]}]}
    return {"nodeSelector": {"nodeSelectorTerms": [term]}}


def _slices(rng: random.Random) -> list[dict[str, Any]]:
    out = []
    for driver in rng.sample(_DRIVERS, rng.randint(1, 2)):
        for p in range(rng.randint(1, 2)):
            n = rng.randint(1, 2)
            counters = rng.random() < 0.3
            count = (n if rng.random() < 0.85 else n + 1) + counters
            pool = {"name": f"p{p}", "generation": 1, "resourceSliceCount": count}
            spec: dict[str, Any]
            if counters:
                spec = {"driver": driver, "pool": pool, "nodeName": "n1"}
                spec["sharedCounters"] = [{"name": "cs", "counters": {"m": {"value": "4"}}}]
                out.append({"kind": "ResourceSlice", "metadata": {"name": f"{driver}-{p}-counters"}, "spec": spec})
            for si in range(n):
                # Now and then a duplicate device name, which makes the pool invalid.
                names = [f"d{si}{di}" if rng.random() < 0.95 else "d00" for di in range(rng.randint(0, 4))]
                devices = [_device(rng, name, counters) for name in names]
                spec = {"driver": driver, "pool": pool, "devices": devices, **_placement(rng)}
                out.append({"kind": "ResourceSlice", "metadata": {"name": f"{driver}-{p}-{si}"}, "spec": spec})
    return out


def _exact(rng: random.Random) -> dict[str, Any]:
    e: dict[str, Any] = {"deviceClassName": rng.choice(["c0", "c1", "any", "any"])}
    if rng.random() < 0.2:
        e["allocationMode"] = "All"
    elif rng.random() < 0.5:
        e["count"] = rng.randint(1, 3)
    if rng.random() < 0.4:
        e["selectors"] = [{"cel": {"expression": rng.choice(_SELECTORS).format(d=rng.choice(_DRIVERS))}}]
    if rng.random() < 0.2:
        e["capacity"] = {"requests": {"mem": rng.choice(["1Gi", "700Mi", "3Gi", "1500m"])}}
    if rng.random() < 0.1:
        e["tolerations"] = [{"key": "k", "operator": "Exists"}]
    return e


def _claim(rng: random.Random, name: str) -> dict[str, Any]:
    requests: list[dict[str, Any]] = []
    for ri in range(rng.choice([1, 1, 2, 3])):
        if rng.random() < 0.25:
            subs = [{"name": f"s{k}", **_exact(rng)} for k in range(rng.randint(1, 3))]
            requests.append({"name": f"r{ri}", "firstAvailable": subs})
            continue
        e = _exact(rng)
        if rng.random() < 0.1:
            e["adminAccess"] = True
        requests.append({"name": f"r{ri}", "exactly": e})
    devices: dict[str, Any] = {"requests": requests}
    if rng.random() < 0.4:
        kind = "matchAttribute" if rng.random() < 0.6 else "distinctAttribute"
        constraint: dict[str, Any] = {kind: f"{rng.choice(_DRIVERS)}/{rng.choice(['numa', 'model'])}"}
        if rng.random() < 0.5:
            constraint["requests"] = sorted({rng.choice(requests)["name"], requests[-1]["name"]})
        devices["constraints"] = [constraint]
    return {"kind": "ResourceClaim", "metadata": {"name": name, "namespace": "ns"}, "spec": {"devices": devices}}


def random_case(rng: random.Random) -> dict[str, Any]:
    """One case: ``node``, ``slices``, ``classes``, ``claims``, ``allocated`` (driver, pool, device) and
    ``shared`` (empty), as the Go harness reads them."""
    slices = _slices(rng)
    classes = [
        {
            "kind": "DeviceClass",
            "metadata": {"name": f"c{i}"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{d}"'}}]},
        }
        for i, d in enumerate(_DRIVERS)
    ]
    classes.append({"kind": "DeviceClass", "metadata": {"name": "any"}, "spec": {}})
    claims = [_claim(rng, f"c{i}") for i in range(rng.choice([1, 1, 2]))]
    allocated = [
        [s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]]
        for s in slices
        for d in s["spec"].get("devices", [])
        if rng.random() < 0.15
    ]
    return {"node": NODE, "slices": slices, "classes": classes, "claims": claims, "allocated": allocated, "shared": {}}
