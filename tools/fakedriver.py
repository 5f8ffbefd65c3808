"""A fake DRA driver's objects: the ResourceSlices a GPU driver would publish for its nodes, a DeviceClass
that selects its devices with CEL, and claims and templates asking for them. No device exists: a
scheduler only reads slices and writes allocations, so these are all a live-cluster test or demo needs.

::

    docs = [device_class(), *(gpu_slice(node, gpus) for node, gpus in {"n1": 2, "n2": 4}.items()),
            claim("train", "default", gpus=3)]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

Each node gets one slice, ``<node>-gpus``, in a pool named after the node (generation 1, one slice),
with devices ``gpu-0`` ... ``gpu-<n-1>``: attributes ``model`` (string), ``index`` (int) and
``pcieRoot`` (string, two GPUs per root) in the driver's domain, and ``memory`` capacity.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CLASS", "DRIVER", "claim", "claim_template", "device_class", "gpu_slice"]

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
API = "resource.k8s.io/v1"


def gpu_slice(node: str, gpus: int, *, model: str = "a100", memory: str = "40Gi") -> dict[str, Any]:
    """The slice the driver publishes for ``node``: ``gpus`` devices on that node."""
    devices = [{
        "name": f"gpu-{i}",
        "attributes": {"model": {"string": model}, "index": {"int": i}, "pcieRoot": {"string": f"pci-{i // 2}"}},
        "capacity": {"memory": {"value": memory}},
    } for i in range(gpus)]
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                   "resourceSliceCount": 1},
                     "devices": devices}}


def device_class(name: str = CLASS, model: str = "a100") -> dict[str, Any]:
    """A DeviceClass of the driver's GPUs of one model (a CEL selector on driver and attribute)."""
    expression = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].model == "{model}"'
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def _devices(gpus: int, device_class_name: str) -> dict[str, Any]:
    return {"requests": [{"name": "gpu", "exactly": {"deviceClassName": device_class_name, "count": gpus}}]}


def claim(name: str, namespace: str, gpus: int = 1, device_class_name: str = CLASS) -> dict[str, Any]:
    """A ResourceClaim for ``gpus`` GPUs of the class (one request, ``gpu``)."""
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": _devices(gpus, device_class_name)}}


def claim_template(name: str, namespace: str, gpus: int = 1, device_class_name: str = CLASS) -> dict[str, Any]:
    """A ResourceClaimTemplate whose claims ask for ``gpus`` GPUs of the class."""
    return {"apiVersion": API, "kind": "ResourceClaimTemplate", "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": _devices(gpus, device_class_name)}}}
