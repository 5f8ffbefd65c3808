"""scheduler_perf's templates: the nodes and pods every benchmark scenario schedules.

``templates/node-default.yaml`` (4 CPU, 32 GiB, 110 pods) and ``templates/pod-default.yaml`` (the pause
image, container port 80, 100m CPU and 500Mi requests = limits), as the in-process runs apply them
(:func:`node_manifest`, :func:`pod_manifest`). The API-server harness (:mod:`tools.workloads`)
builds its Node and Pod objects from the same :data:`NODE_CAPACITY` and :func:`pause_container`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NODE_CAPACITY", "PAUSE_IMAGE", "node_manifest", "node_name", "pause_container", "pod_manifest", "pod_name"]

PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
#: ``node-default.yaml``'s capacity.
NODE_CAPACITY = {"pods": "110", "cpu": "4", "memory": "32Gi"}
_POD_RESOURCES = {"cpu": "100m", "memory": "500Mi"}


def node_name(i: int) -> str:
    """Node ``i``'s name: ``scheduler-perf-NNNNN``."""
    return f"scheduler-perf-{i:05d}"


def pod_name(i: int) -> str:
    """Pod ``i``'s name: ``pod-NNNNNN``."""
    return f"pod-{i:06d}"


def pause_container() -> dict[str, Any]:
    """``pod-default.yaml``'s one container."""
    return {
        "name": "pause",
        "image": PAUSE_IMAGE,
        "ports": [{"containerPort": 80}],
        "resources": {"limits": dict(_POD_RESOURCES), "requests": dict(_POD_RESOURCES)},
    }


def node_manifest(i: int, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """scheduler_perf's ``templates/node-default.yaml``: capacity only (allocatable = capacity)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node_name(i), "labels": dict(labels or {})},
        "spec": {},
        "status": {"capacity": dict(NODE_CAPACITY)},
    }


def pod_manifest(namespace: str, i: int, node: str = "") -> dict[str, Any]:
    """scheduler_perf's ``templates/pod-default.yaml``; bound to ``node`` when one is named."""
    spec: dict[str, Any] = {"containers": [pause_container()]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod_name(i), "namespace": namespace}, "spec": spec}
