"""Scoring an extended resource backed by devices (DRAExtendedResource) as kube-scheduler 1.37.2 scores it: a
resource named in NodeResourcesFit's ``scoringStrategy.resources`` (or BalancedAllocation's ``resources``) that
a DeviceClass maps counts, on a node that does not advertise it, the node's devices of the class as its
allocatable and those allocated as what it holds (``resource_allocation.go``'s
``calculateDRAResourceTotals``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from framework.cli import main
from framework.dra.counts import DeviceCounts
from framework.dra.models import AllocationResult, DeviceResult
from framework.dra.store import DraStore
from pluginhost.model import Node
from tests.test_dra_extended import GPU_CLASS, device_class, devices, gpu_pod, node

ALLOCATED = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: held, namespace: default}
spec:
  devices:
    requests: [{name: r, exactly: {deviceClassName: gpu.example.com}}]
status:
  allocation:
    devices:
      results: [{request: r, driver: gpu.example.com, pool: node-a, device: gpu-0}]
---"""


def config(plugin: str, args: str) -> str:
    return f"""apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: {plugin}
    args: {args}
"""


FIT = "{{scoringStrategy: {{type: {strategy}, resources: [{{name: example.com/gpu, weight: 1}}]}}}}"
BALANCED = "{resources: [{name: cpu, weight: 1}, {name: example.com/gpu, weight: 1}]}"


@pytest.mark.parametrize(("plugin", "args", "want"), [
    # node-a: 4 devices, 1 allocated; node-b: 8 devices, none; node-c: a device plugin's 2, none requested.
    # LeastAllocated (free after the pod over allocatable): (4-2)*100/4, (8-1)*100/8, (2-1)*100/2.
    pytest.param("NodeResourcesFit", FIT.format(strategy="LeastAllocated"),
                 {"node-a": 50, "node-b": 87, "node-c": 50}, id="fit-least-allocated"),
    # MostAllocated: 2*100/4, 1*100/8, 1*100/2.
    pytest.param("NodeResourcesFit", FIT.format(strategy="MostAllocated"),
                 {"node-a": 50, "node-b": 12, "node-c": 50}, id="fit-most-allocated"),
    # cpu 100m of 8; the balance with the pod and without it: node-a |0.0125-0.5|/2 -> 75, |0-0.25|/2 -> 87:
    # 50+(50+75-87)/2 = 69; node-b |0.0125-0.125|/2 -> 94, 100: 72; node-c 75, 100: 62.
    pytest.param("NodeResourcesBalancedAllocation", BALANCED,
                 {"node-a": 69, "node-b": 72, "node-c": 62}, id="balanced-allocation"),
])
def test_nodes_without_the_resource_are_scored_by_their_devices(
        plugin: str, args: str, want: dict[str, int], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = (node("node-a") + devices("node-a", 4) + node("node-b") + devices("node-b", 8)
               + node("node-c", gpus=2) + device_class() + ALLOCATED)
    (tmp_path / "cluster.yaml").write_text(cluster.rstrip("-\n"))
    (tmp_path / "pod.yaml").write_text(gpu_pod("train", 1))
    (tmp_path / "config.yaml").write_text(config(plugin, args))
    args_ = ["explain", "--cluster", str(tmp_path / "cluster.yaml"), "--config", str(tmp_path / "config.yaml"),
             "-f", str(tmp_path / "pod.yaml"), "-o", "json"]
    assert main(args_) == 0
    result = json.loads(capsys.readouterr().out)
    assert {n: e["scores"][plugin]["raw"] for n, e in result["nodes"].items()} == want


def _slice(name: str, devices_: list[dict[str, object]], **spec: object) -> dict[str, object]:
    body: dict[str, object] = {"driver": "gpu.example.com", "pool": {"name": name, "generation": 1,
                                                                     "resourceSliceCount": 1},
                               "devices": devices_, **spec}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}


def _gpu(name: str, model: str | None = "h100", **extra: object) -> dict[str, object]:
    attributes = {"model": {"string": model}} if model is not None else {}
    return {"name": name, "attributes": attributes, **extra}


ZONE_A = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}
H100 = 'device.attributes["gpu.example.com"].model == "h100"'


@pytest.mark.parametrize(("slices", "selector", "allocated", "want"), [
    pytest.param([_slice("own", [_gpu("g0"), _gpu("g1")], nodeName="n1"),
                  _slice("other", [_gpu("g2")], nodeName="n2")], "", ["own/g1"], (2, 1), id="own-slice-only"),
    pytest.param([_slice("all", [_gpu("g0")], allNodes=True),
                  _slice("zone", [_gpu("g1"), _gpu("g2")], nodeSelector=ZONE_A),
                  _slice("zone-b", [_gpu("g3")], nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
                      {"key": "zone", "operator": "In", "values": ["b"]}]}]})],
                 "", ["zone/g2", "zone-b/g3"], (3, 1), id="all-nodes-and-selected-slices"),
    pytest.param([_slice("per-device", [_gpu("g0", nodeName="n1"), _gpu("g1", nodeName="n2"),
                                        _gpu("g2", allNodes=True), _gpu("g3", nodeSelector=ZONE_A)],
                         perDeviceNodeSelection=True)], "", [], (3, 0), id="per-device-node-selection"),
    pytest.param([_slice("own", [_gpu("g0"), _gpu("g1", model="a100"), _gpu("g2")], nodeName="n1")],
                 H100, ["own/g1", "own/g2"], (2, 1), id="class-selector"),
    pytest.param([_slice("own", [_gpu("g0"), _gpu("g1", model=None)], nodeName="n1")],
                 H100, [], (0, 0), id="a-selector-failing-on-a-device-leaves-the-node-out"),
    pytest.param([], "", [], (0, 0), id="no-devices"),
])
def test_device_totals_per_node(slices: list[dict[str, object]], selector: str, allocated: list[str],
                                want: tuple[int, int]) -> None:
    store = DraStore()
    spec: dict[str, object] = {"extendedResourceName": "example.com/gpu"}
    if selector:
        spec["selectors"] = [{"cel": {"expression": selector}}]
    store.apply("DeviceClass", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                "metadata": {"name": GPU_CLASS}, "spec": spec})
    for s in slices:
        store.apply("ResourceSlice", s)
    for i, device in enumerate(allocated):
        pool, name = device.split("/")
        store.apply("ResourceClaim", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"c{i}", "namespace": "default", "uid": f"u{i}"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": GPU_CLASS}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": "gpu.example.com", "pool": pool, "device": name}]}}}})
    counts = DeviceCounts.for_resources(store, ["cpu", "example.com/gpu"])
    assert counts is not None
    n1 = Node("n1", labels={"zone": "a"}, allocatable={"cpu": 8000})
    assert counts.totals("example.com/gpu", n1) == want
    assert counts.totals(f"deviceclass.resource.kubernetes.io/{GPU_CLASS}", n1) == want
    assert counts.totals("other.com/x", n1) == (0, 0)


@pytest.mark.parametrize(("resources", "classes", "counted"), [
    pytest.param(["cpu", "memory"], True, False, id="no-extended-resource-among-them"),
    pytest.param(["cpu", "example.com/gpu"], False, False, id="no-class-maps-it"),
    pytest.param(["cpu", "example.com/gpu"], True, True, id="a-class-maps-it"),
    pytest.param([f"deviceclass.resource.kubernetes.io/{GPU_CLASS}"], True, True, id="the-implicit-name"),
])
def test_counts_are_taken_only_when_a_scoring_resource_is_backed_by_devices(
        resources: list[str], classes: bool, counted: bool) -> None:
    store = DraStore()
    if classes:
        store.apply("DeviceClass", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                    "metadata": {"name": GPU_CLASS},
                                    "spec": {"extendedResourceName": "example.com/gpu"}})
    assert (DeviceCounts.for_resources(store, resources) is not None) == counted
    assert DeviceCounts.for_resources(None, resources) is None


def test_a_pending_allocation_counts_as_allocated() -> None:
    store = DraStore()
    store.apply("DeviceClass", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                "metadata": {"name": GPU_CLASS}, "spec": {"extendedResourceName": "example.com/gpu"}})
    store.apply("ResourceSlice", _slice("own", [_gpu("g0"), _gpu("g1")], nodeName="n1"))
    store.apply("ResourceClaim", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default", "uid": "u"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": GPU_CLASS}}]}}})
    claim = store.claim("default", "c")
    assert claim is not None
    store.signal_pending(replace(claim, allocation=AllocationResult(
        results=(DeviceResult("r", "gpu.example.com", "own", "g0"),))))
    counts = DeviceCounts.for_resources(store, ["example.com/gpu"])
    assert counts is not None and counts.totals("example.com/gpu", Node("n1")) == (2, 1)
