"""The demos' devices: the objects of a fake DRA driver (the ResourceSlices a GPU driver would publish for
its nodes, a DeviceClass that selects its devices with CEL, claims and templates asking for them) and the
pods that claim them. No device exists: a scheduler only reads slices and writes allocations, so these are
all ``make demo``, ``make demo-cluster`` and the live-cluster tests need.

::

    docs = [device_class(), *(gpu_slice(node, gpus) for node, gpus in {"n1": 2, "n2": 4}.items()),
            claim("train", "default", gpus=3)]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

Each node gets one slice, ``<node>-gpus``, in a pool named after the node (generation 1, one slice),
with devices ``gpu-0`` ... ``gpu-<n-1>``: attributes ``model`` (string), ``index`` (int) and
``pcieRoot`` (string, two GPUs per root) in the driver's domain, and ``memory`` capacity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["CLASS", "DRIVER", "GPUS_PER_NODE", "GPU_TEMPLATE", "claim", "claim_template", "device_class",
           "devices_on_their_nodes", "gpu_pods", "gpu_slice", "pool_objects"]

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
API = "resource.k8s.io/v1"
GPUS_PER_NODE = 4
GPU_TEMPLATE = "one-gpu"
HUGE_CLAIM = "gpu-huge"
#: The demos' GPU pool is tainted so that only pods asking for it land there.
GPU_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


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


def pool_objects(gpu_nodes: Iterable[str], namespace: str) -> list[dict[str, Any]]:
    """The driver's slices for ``gpu_nodes`` (:data:`GPUS_PER_NODE` each), its DeviceClass, the template
    the GPU pods' claims are made from, and a claim for more GPUs than a node has."""
    return [device_class(), *(gpu_slice(n, GPUS_PER_NODE) for n in gpu_nodes),
            claim_template(GPU_TEMPLATE, namespace, 1), claim(HUGE_CLAIM, namespace, 2 * GPUS_PER_NODE)]


def gpu_pods(count: int, namespace: str = "") -> list[dict[str, Any]]:
    """``count`` pods (``gpu-infer-NNN``) that each claim one GPU from the template, and ``gpu-huge-0``,
    which claims more than a node has. They request no CPU or memory, so the GPUs alone decide where they
    fit."""
    pods = []
    for name, source in [*((f"gpu-infer-{i:03d}", {"resourceClaimTemplateName": GPU_TEMPLATE}) for i in range(count)),
                         ("gpu-huge-0", {"resourceClaimName": HUGE_CLAIM})]:
        meta: dict[str, Any] = {"name": name, "labels": {"app": "gpu"}}
        if namespace:
            meta["namespace"] = namespace
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                     "spec": {"tolerations": [GPU_TOLERATION], "resourceClaims": [{"name": "gpu", **source}],
                              "containers": [{"name": "app", "image": "registry.local/infer:1", "resources": {
                                  "claims": [{"name": "gpu"}]}}]}})
    return pods


def devices_on_their_nodes(claims: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
                           bound: Iterable[str] = ()) -> list[tuple[str, str, str, list[str]]]:
    """The bound ``gpu-infer-*`` pods whose claim (named in the pod's ``status.resourceClaimStatuses``) is
    allocated devices of the pod's own node (the driver's pools are named after nodes): (pod, node,
    claim, ``driver/pool/device`` of each result), by pod name. ``claims`` and ``pods`` are API objects;
    ``bound``, when given, narrows the pods to those names."""
    by_name = {c["metadata"]["name"]: c for c in claims}
    only = set(bound)
    out = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        name, node = pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName")
        if not name.startswith("gpu-infer-") or not node or (only and name not in only):
            continue
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or ()
        made = {s["name"]: s.get("resourceClaimName") for s in statuses}
        found = by_name.get(made.get("gpu") or "")
        allocation = ((found or {}).get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        if found is not None and results and all(r["pool"] == node for r in results):
            out.append((name, node, found["metadata"]["name"],
                        [f"{r['driver']}/{r['pool']}/{r['device']}" for r in results]))
    return out
