"""Builders for the DRA tests: ``resource.k8s.io/v1`` manifests (DeviceClass, ResourceSlice,
ResourceClaim, DeviceTaintRule), pods that use claims, and a cluster table whose snapshots carry a DraStore."""

from __future__ import annotations

import copy
from typing import Any

from framework.dra.store import DraStore
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Pod
from pluginhost.snapshot import ClusterTable, Snapshot

DRIVER = "gpu.example.com"
API = "resource.k8s.io/v1"


def device_class(name: str = "gpu", expression: str = f'device.driver == "{DRIVER}"') -> dict[str, Any]:
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}


def device(name: str, model: str = "a100", **extra: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"model": {"string": model}}, **extra}


def node_slice(node: str, *devices: dict[str, Any], name: str = "") -> dict[str, Any]:
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": name or f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                  "resourceSliceCount": 1},
                     "devices": list(devices)}}


def taint_rule(name: str, effect: str = "NoSchedule", key: str = "example.com/broken", value: str = "",
               **selector: str) -> dict[str, Any]:
    """A DeviceTaintRule tainting the devices ``selector`` (driver, pool, device) picks."""
    taint = {"key": key, "effect": effect, **({"value": value} if value else {})}
    return {"apiVersion": API, "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": selector, "taint": taint}}


def request(name: str = "gpu", cls: str = "gpu", **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": cls, **exactly}}


def claim(name: str = "c", *requests: dict[str, Any], namespace: str = "ns", uid: str = "",
          status: dict[str, Any] | None = None, owner: str = "", deleting: bool = False,
          rv: str = "10") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "resourceVersion": rv}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": owner, "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    doc: dict[str, Any] = {"apiVersion": API, "kind": "ResourceClaim", "metadata": meta,
                           "spec": {"devices": {"requests": list(requests or (request(),))}}}
    if status is not None:
        doc["status"] = status
    return doc


def allocated(*devices: str, node: str = "n0", reserved: tuple[tuple[str, str], ...] = (),
              request_name: str = "gpu", **result: Any) -> dict[str, Any]:
    """A claim status: ``devices`` of ``node``'s pool allocated (pinned to the node), reserved for the
    (name, uid) pods."""
    status: dict[str, Any] = {"allocation": {
        "devices": {"results": [{"request": request_name, "driver": DRIVER, "pool": node, "device": d, **result}
                                for d in devices]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": n, "uid": u} for n, u in reserved]
    return status


def gpu_pod(*claims: tuple[str, str], name: str = "p", uid: str = "pod-uid",
            statuses: dict[str, str] | None = None) -> Pod:
    """A pod in namespace ns whose entries are (entry, claim name) or (entry, "template:<name>")."""
    entries = []
    for entry, ref in claims:
        if ref.startswith("template:"):
            entries.append({"name": entry, "resourceClaimTemplateName": ref.removeprefix("template:")})
        else:
            entries.append({"name": entry, "resourceClaimName": ref})
    doc: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns", "uid": uid},
                           "spec": {"containers": [{"name": "c"}], "resourceClaims": entries}}
    if statuses is not None:
        doc["status"] = {"resourceClaimStatuses": [{"name": k, **({"resourceClaimName": v} if v else {})}
                                                   for k, v in statuses.items()]}
    return pod_from_dict(doc)


def cluster(*objects: dict[str, Any], nodes: int = 2) -> tuple[ClusterTable, DraStore]:
    """Nodes n0.. and a DraStore holding ``objects``, reachable from every snapshot."""
    table = ClusterTable()
    for i in range(nodes):
        table.upsert_node(node_from_dict({"metadata": {"name": f"n{i}", "labels": {"kubernetes.io/hostname": f"n{i}"}},
                                          "status": {"allocatable": {"cpu": "4", "pods": "10"}}}))
    store = DraStore()
    table.dra = store
    for obj in objects:
        store.apply(obj["kind"], copy.deepcopy(obj))
    return table, store


class SnapshotHandle:
    """The part of the framework's handle DynamicResources uses: the current snapshot."""

    def __init__(self, table: ClusterTable) -> None:
        self.table = table

    def snapshot(self) -> Snapshot:
        return self.table.snapshot()
