"""Devices reach remote plugins: the snapshot publisher sends ResourceSlices, DeviceClasses and
ResourceClaims only to followers that ask (FollowRequest.devices), in generation order, claims as the
scheduler sees them (an allocation Reserve made is sent at once, marked assumed, and taken back when
given up); a Python plugin host process on 127.0.0.1 sees them after every change (a slice updated or
deleted, a claim allocated to a bound pod); and the example GpuTopology scorer picks the node with
the most free GPUs under one NUMA node, in a real cycle and in explain's score table.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from fractions import Fraction
from typing import Any

import pytest
from dra_fixtures import DRIVER, allocated, claim, device, device_class, node_slice, request
from test_remote_harness import HostProcess, endpoint, remote_rig, until

from framework.config import load_config
from framework.dra.store import DraStore
from framework.remote.devices import device_to_proto
from framework.remote.publisher import SnapshotPublisher
from framework.scheduler import Scheduler, explain_pod
from pluginhost.convert_devices import device_from_proto, format_quantity, parse_quantity
from pluginhost.definition import PluginDefinitionError, manifest_of
from pluginhost.manifest import parse_objects
from pluginhost.mirror import SnapshotMirror
from pluginhost.model import Node, NodeSelectorRequirement, NodeSelectorTerm
from pluginhost.plugin import FilterPlugin
from pluginhost.snapshot import (
    AllocatedDevice,
    ClaimConsumer,
    ClusterTable,
    Device,
    DeviceAllocation,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceSubRequest,
    DeviceTaint,
    DeviceToleration,
    ResourceClaim,
    ResourceSlice,
    Version,
)

NUMA = f"{DRIVER}/numaNode"


def objects(*docs: dict[str, Any]) -> list[Any]:
    return parse_objects(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}), "test.json")


def store_of(*docs: dict[str, Any]) -> DraStore:
    store = DraStore()
    for d in docs:
        store.apply(d["kind"], d)
    return store


# ---------------------------------------------------------------------------------------------------
# The wire form


RICH_SLICE = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "shared"},
    "spec": {"driver": DRIVER, "pool": {"name": "rack-1", "generation": 3, "resourceSliceCount": 2},
             "perDeviceNodeSelection": True,
             "devices": [
                 {"name": "gpu0", "nodeName": "n1",
                  "attributes": {"numaNode": {"int": 1}, "model": {"string": "a100"}, "nvlink": {"bool": True},
                                 "driverVersion": {"version": "1.2.3"}},
                  "capacity": {"memory": {"value": "40Gi"}, "cores": {"value": "1500m"}},
                  "consumesCounters": [{"counterSet": "mem", "counters": {"memory": {"value": "40Gi"}}}],
                  "taints": [{"key": "maintenance", "value": "soon", "effect": "NoSchedule"}]},
                 {"name": "gpu1", "allNodes": True, "allowMultipleAllocations": True},
                 {"name": "gpu2", "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "rack", "operator": "In", "values": ["r1"]}]}]}},
             ]},
}
COUNTERS_SLICE = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "counters"},
    "spec": {"driver": DRIVER, "pool": {"name": "rack-1", "generation": 3, "resourceSliceCount": 2},
             "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                 {"key": "rack", "operator": "In", "values": ["r1"]}]}]},
             "sharedCounters": [{"name": "mem", "counters": {"memory": {"value": "80Gi"}}}]},
}
RICH_CLAIM = claim(
    "c", request("gpu", count=2, selectors=[{"cel": {"expression": "device.attributes['gpu.example.com'].nvlink"}}],
                 tolerations=[{"key": "maintenance", "operator": "Exists"}]),
    {"name": "any", "firstAvailable": [{"name": "big", "deviceClassName": "gpu-big"},
                                       {"name": "small", "deviceClassName": "gpu", "allocationMode": "All"}]},
    uid="uid-c", rv="12", owner="pod-uid",
    status=allocated("gpu0", "gpu2", node="n1", reserved=(("p", "pod-uid"),)),
)
RICH_CLAIM["spec"]["devices"]["constraints"] = [{"requests": ["gpu"], "matchAttribute": NUMA}]
RICH_CLAIM["spec"]["devices"]["config"] = [{"requests": ["gpu"], "opaque": {"driver": DRIVER,
                                                                            "parameters": {"mode": "mig"}}}]
RICH_CLASS = device_class("gpu")
RICH_CLASS["spec"]["config"] = [{"opaque": {"driver": DRIVER, "parameters": {"b": 1, "a": [2]}}}]
RACK_R1 = (NodeSelectorTerm(match_expressions=[NodeSelectorRequirement("rack", "In", ("r1",))]),)
ON_N1 = (NodeSelectorTerm(match_fields=[NodeSelectorRequirement("metadata.name", "In", ("n1",))]),)
GI = 1 << 30
WIRE_CASES = [
    pytest.param(RICH_SLICE, ResourceSlice(
        name="shared", driver=DRIVER, pool="rack-1", pool_generation=3, pool_slice_count=2,
        per_device_node_selection=True,
        devices=(
            Device("gpu0", attributes={"numaNode": 1, "model": "a100", "nvlink": True,
                                       "driverVersion": Version("1.2.3")},
                   capacity={"memory": Fraction(40 * GI), "cores": Fraction(3, 2)},
                   consumes_counters={"mem": {"memory": Fraction(40 * GI)}}, node_name="n1",
                   taints=(DeviceTaint("maintenance", "soon", "NoSchedule"),)),
            Device("gpu1", all_nodes=True, allow_multiple_allocations=True),
            Device("gpu2", node_selector=RACK_R1),
        )), id="slice"),
    pytest.param(COUNTERS_SLICE, ResourceSlice(
        name="counters", driver=DRIVER, pool="rack-1", pool_generation=3, pool_slice_count=2,
        node_selector=RACK_R1, shared_counters={"mem": {"memory": Fraction(80 * GI)}}), id="counters-slice"),
    pytest.param(RICH_CLASS, DeviceClass(
        "gpu", selectors=(f'device.driver == "{DRIVER}"',), config=((DRIVER, '{"a":[2],"b":1}'),)), id="class"),
    pytest.param(RICH_CLAIM, ResourceClaim(
        name="c", namespace="ns", uid="uid-c", resource_version="12",
        requests=(
            DeviceRequest("gpu", exactly=DeviceSubRequest(
                "gpu", "gpu", selectors=("device.attributes['gpu.example.com'].nvlink",), count=2,
                tolerations=(DeviceToleration("maintenance", "Exists"),))),
            DeviceRequest("any", first_available=(
                DeviceSubRequest("big", "gpu-big"), DeviceSubRequest("small", "gpu", allocation_mode="All", count=0))),
        ),
        constraints=(DeviceConstraint(("gpu",), match_attribute=NUMA),),
        config=((("gpu",), DRIVER, '{"mode":"mig"}'),),
        allocation=DeviceAllocation(
            (AllocatedDevice("gpu", DRIVER, "n1", "gpu0"), AllocatedDevice("gpu", DRIVER, "n1", "gpu2")), ON_N1),
        reserved_for=(ClaimConsumer("pods", "p", "pod-uid"),), owner=ClaimConsumer("Pod", "p", "pod-uid"),
    ), id="claim"),
]


@pytest.mark.parametrize(("doc", "want"), WIRE_CASES)
def test_device_objects_survive_the_wire(doc: dict[str, Any], want: Any) -> None:
    obj = DraStore.decode(doc["kind"], doc)
    msg = device_to_proto(obj)
    got = device_from_proto(type(msg).FromString(msg.SerializeToString()))
    assert got == want


@pytest.mark.parametrize(("q", "text"), [(Fraction(5), "5"), (Fraction(3, 2), "1500m"), (Fraction(1, 3), "334m"),
                                         (Fraction(80 * GI), "85899345920")])
def test_quantities_on_the_wire(q: Fraction, text: str) -> None:
    assert format_quantity(q) == text
    assert parse_quantity(text) == (q if (q * 1000).denominator == 1 else Fraction(334, 1000))


MANIFESTS = [  # (class attributes, the error's words or None and the manifest's flags)
    pytest.param({"needs_devices": True}, (True, True, False), id="implies-the-mirror"),
    pytest.param({"needs_devices": True, "needs_snapshot": False}, "needs_devices reads device objects",
                 id="without-mirror"),
    pytest.param({"needs_devices": True, "nodes_only": True}, "excludes lookahead and nodes_only", id="nodes-only"),
    pytest.param({}, (False, True, False), id="default"),
]


@pytest.mark.parametrize(("attrs", "want"), MANIFESTS)
def test_needs_devices_declaration(attrs: dict[str, Any], want: Any) -> None:
    async def filter(self: Any, state: Any, p: Any, batch: Any) -> Any:
        raise NotImplementedError

    cls = type("Declared", (FilterPlugin,), {"name": "Declared", "filter": filter, **attrs})
    if isinstance(want, str):
        with pytest.raises(PluginDefinitionError, match=want):
            manifest_of(cls)
        return
    m = manifest_of(cls)
    assert (m.needs_devices, m.needs_snapshot, m.nodes_only) == want


# ---------------------------------------------------------------------------------------------------
# The publisher: device objects only for followers that ask, claims as the scheduler sees them


async def _collect(stream: AsyncIterator[Any], n: int) -> list[Any]:
    return [await asyncio.wait_for(anext(stream), 5) for _ in range(n)]


def _devices(delta: Any) -> tuple[list[str], list[str]]:
    ups = []
    for o in delta.device_upserts:
        kind = o.WhichOneof("object")
        msg = getattr(o, kind)
        text = f"{kind}:{msg.metadata.name}"
        if kind == "resource_claim" and msg.HasField("allocation"):
            text += "=" + ",".join(r.device for r in msg.allocation.results)
            text += " (assumed)" if msg.allocation_assumed else ""
        ups.append(text)
    return ups, [f"{r.kind}:{r.namespace}/{r.name}" for r in delta.device_removed]


def test_publisher_sends_device_objects_only_to_followers_that_ask() -> None:
    async def main() -> None:
        table = ClusterTable()
        table.dra = dra = store_of(device_class("gpu"), node_slice("n1", device("gpu0"), device("gpu1")))
        table.upsert_node(Node(name="n1"))
        gen0 = table.generation
        pub = SnapshotPublisher(table, flush_delay=0.001)
        with_devices, without = pub.follow(0, "d", devices=True), pub.follow(0, "n")
        first_d, first_n = (await _collect(with_devices, 1))[0], (await _collect(without, 1))[0]
        assert (first_d.full_resync, first_d.generation, _devices(first_d)) == (
            True, gen0, (["device_class:gpu", "resource_slice:n1-gpus"], []))
        assert (first_n.full_resync, first_n.generation, _devices(first_n)) == (True, gen0, ([], []))
        deltas = []
        # A claim; Reserve allocates it (pending: sent as allocated, assumed), then gives it up.
        dra.apply("ResourceClaim", claim("c"))
        pub.publish_all()
        deltas.append((await _collect(with_devices, 1))[0])
        chosen = DraStore.decode("ResourceClaim", claim("c", status=allocated("gpu1", node="n1")))
        dra.signal_pending(chosen)  # type: ignore[arg-type]
        pub.publish_all()
        deltas.append((await _collect(with_devices, 1))[0])
        dra.drop_pending("uid-c")
        dra.remove("ResourceSlice", "", "n1-gpus")
        pub.publish_all()
        deltas.append((await _collect(with_devices, 1))[0])
        assert [(d.generation, _devices(d)) for d in deltas] == [
            (gen0 + 1, (["resource_claim:c"], [])),
            (gen0 + 2, (["resource_claim:c=gpu1 (assumed)"], [])),
            (gen0 + 4, (["resource_claim:c"], ["ResourceSlice:/n1-gpus"])),
        ]
        plain = await _collect(without, 3)
        assert [(d.generation, _devices(d)) for d in plain] == [(gen0 + 1, ([], [])), (gen0 + 2, ([], [])),
                                                                 (gen0 + 4, ([], []))]
        # A follower that reconnects gets the history with the device changes.
        again = pub.follow(gen0 + 1, "d2", devices=True)
        caught = await _collect(again, 2)
        assert [(d.full_resync, d.generation, _devices(d)) for d in caught] == [
            (False, gen0 + 2, _devices(deltas[1])), (False, gen0 + 4, _devices(deltas[2]))]
        await again.aclose()
        mirror = SnapshotMirror()
        for delta in (first_d, *deltas[:2]):
            mirror.apply(delta)
        store = mirror.latest().devices
        assert (sorted(store.slices), sorted(store.classes), store.claim("ns", "c").allocation_assumed,  # type: ignore[union-attr]
                [d.device.name for d in store.in_use_on_node(Node(name="n1"))]) == (
            ["n1-gpus"], ["gpu"], True, ["gpu1"])
        mirror.apply(deltas[2])
        assert (sorted(store.slices), store.claim("ns", "c").allocation) == ([], None)  # type: ignore[union-attr]
        await with_devices.aclose()
        # Nobody reads devices now: their changes no longer move the generation.
        dra.apply("DeviceClass", device_class("other"))
        assert table.generation == gen0 + 4
        await without.aclose()
        pub.close()

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------------
# A plugin host process sees the device objects after every change


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def pod(name: str, *claims: str, probe: bool = False) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": "100m"}}}
    spec: dict[str, Any] = {"containers": [container]}
    if claims:
        spec["resourceClaims"] = [{"name": f"e{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    meta = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {"probe": "yes"} if probe else {}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def gpus(*numa: int, offset: int = 0) -> list[dict[str, Any]]:
    return [device(f"gpu{i + offset}", numaNode={"int": n}) for i, n in enumerate(numa)]


def gpu(name: str, numa: int) -> dict[str, Any]:
    return {"name": name, "attributes": {"model": {"string": "a100"}, "numaNode": {"int": numa}}}


def config(enabled: Sequence[str], weights: dict[str, int] | None = None) -> str:
    lines = ["apiVersion: kubescheduler.config.k8s.io/v1", "kind: KubeSchedulerConfiguration",
             "profiles:", "- schedulerName: default-scheduler", "  plugins:", "    multiPoint:", "      enabled:"]
    for n in enabled:
        lines.append(f"      - name: {n}")
        if weights and n in weights:
            lines.append(f"        weight: {weights[n]}")
    return "\n".join(lines) + "\n"


def _outcome(s: Scheduler, name: str) -> tuple[str, str]:
    r = s.get_pod("ns", name)
    assert r is not None
    if r.phase == "Bound":
        return "Bound", r.pod.node_name
    return r.phase, r.last_status.message() if r.last_status is not None else ""


def _settled(s: Scheduler, name: str) -> bool:
    r = s.get_pod("ns", name)
    if r is None or s.pending_count()["in-flight"] or s.leaks()["binding_cycles"]:
        return False
    return r.phase == "Bound" or (r.phase == "Unschedulable" and r.last_status is not None)


async def _schedule(s: Scheduler, name: str, *claims: str, probe: bool = False) -> tuple[str, str]:
    await s.apply(objects(pod(name, *claims, probe=probe)))
    await until(lambda: _settled(s, name), 10, f"{name} settled")
    return _outcome(s, name)


GPU_CLASS = f'gpu:device.driver == "{DRIVER}"'
NOT_HELPFUL = " preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."


def seen(slices: str, claims: str = "", used: str = "") -> tuple[str, str]:
    return ("Unschedulable", f"0/2 nodes are available: 2 slices [{slices}] classes [{GPU_CLASS}] "
                             f"claims [{claims}] in use [{used}].{NOT_HELPFUL}")


N0_TWO = "n0-gpus@n0/n0#1:gpu0{model=a100,numaNode=0},gpu1{model=a100,numaNode=1}"
N0_THREE = N0_TWO + ",gpu2{model=a100,numaNode=1}"
WITNESS_WANT = [
    ("a class and a slice", seen(N0_TWO)),
    ("the slice gains a device", seen(N0_THREE)),
    ("a claim", seen(N0_THREE, "ns/c[gpu:gpu]")),
    ("the pod using it", ("Bound", "n0")),
    ("the claim allocated and reserved", seen(
        N0_THREE, f"ns/c[gpu:gpu] allocated gpu={DRIVER}/n0/gpu0 for pods/user", "n0=gpu0")),
    ("the slice deleted", seen("", f"ns/c[gpu:gpu] allocated gpu={DRIVER}/n0/gpu0 for pods/user")),
]


async def witness_steps(address: str) -> list[tuple[str, str]]:
    rig = await remote_rig([endpoint("devices", address)],
                           lambda reg: load_config(config(["DeviceWitness"]), reg.points()))
    s = rig.scheduler
    task = asyncio.create_task(s.run())
    try:
        await s.apply(objects(node("n0"), node("n1"), device_class("gpu"), node_slice("n0", gpu("gpu0", 0),
                                                                                      gpu("gpu1", 1))))
        out = [await _schedule(s, "probe0", probe=True)]
        await s.apply(objects(node_slice("n0", gpu("gpu0", 0), gpu("gpu1", 1), gpu("gpu2", 1))))
        out.append(await _schedule(s, "probe1", probe=True))
        await s.apply(objects(claim("c")))
        out.append(await _schedule(s, "probe2", probe=True))
        out.append(await _schedule(s, "user", "c"))
        out.append(await _schedule(s, "probe3", probe=True))
        s.cache.dra.remove("ResourceSlice", "", "n0-gpus")
        out.append(await _schedule(s, "probe4", probe=True))
        return out
    finally:
        await s.drain(timeout=5)
        await s.stop()
        await asyncio.wait_for(task, 5)
        await rig.close()


def test_remote_python_plugin_sees_device_objects_after_each_change() -> None:
    with HostProcess("device_plugin_witness:DeviceWitness") as host:
        got = asyncio.run(witness_steps(host.address))
    assert got == [want for _, want in WITNESS_WANT]


# ---------------------------------------------------------------------------------------------------
# The example GpuTopology scorer, in its own host process
#
# n0: two GPUs on NUMA node 0, two on 1 (largest free group 2); n1: four on NUMA node 0, one of them
# held by another claim (3 free together); n2: one GPU on each of NUMA nodes 0, 1, 2 (1). The pod's
# claim wants two GPUs: raw scores 2, 3, 1, normalized so the best is 100: 66, 100, 33.

TOPOLOGY_CLUSTER = [
    node("n0"), node("n1"), node("n2"), device_class("gpu"),
    node_slice("n0", gpu("gpu0", 0), gpu("gpu1", 0), gpu("gpu2", 1), gpu("gpu3", 1)),
    node_slice("n1", gpu("gpu0", 0), gpu("gpu1", 0), gpu("gpu2", 0), gpu("gpu3", 0)),
    node_slice("n2", gpu("gpu0", 0), gpu("gpu1", 1), gpu("gpu2", 2)),
    claim("held", status=allocated("gpu0", node="n1")),
    claim("want", request(count=2)),
]
TOPOLOGY_SCORES = {  # (weight 5)
    "n0": {"raw": 2, "normalized": 66, "weighted": 330},
    "n1": {"raw": 3, "normalized": 100, "weighted": 500},
    "n2": {"raw": 1, "normalized": 33, "weighted": 165},
}


async def topology_run(address: str) -> tuple[dict[str, Any], tuple[str, str], list[str]]:
    text = config(["GpuTopology"], {"GpuTopology": 5})
    rig = await remote_rig([endpoint("gpus", address)], lambda reg: load_config(text, reg.points()))
    s = rig.scheduler
    task = asyncio.create_task(s.run())
    try:
        await s.apply(objects(*TOPOLOGY_CLUSTER))
        (trainer,) = objects(pod("trainer", "want"))
        explained = await explain_pod(s.profiles["default-scheduler"], s.cache.snapshot(), trainer)
        outcome = await _schedule(s, "trainer", "want")
        want = s.cache.dra.claim("ns", "want")
        assert want is not None and want.allocation is not None
        return explained, outcome, [f"{r.pool}/{r.device}" for r in want.allocation.results]
    finally:
        await s.drain(timeout=5)
        await s.stop()
        await asyncio.wait_for(task, 5)
        await rig.close()


def test_gpu_topology_example_prefers_most_free_gpus_under_one_numa_node() -> None:
    with HostProcess("pluginhost.examples.gputopology:GpuTopology") as host:
        explained, outcome, devices = asyncio.run(topology_run(host.address))
    assert explained["selected"] == "n1"
    # The other plugins score the three nodes alike (471): GpuTopology decides.
    assert {n: e["total"] for n, e in explained["nodes"].items()} == {"n0": 801, "n1": 971, "n2": 636}
    assert {n: e["scores"]["GpuTopology"] for n, e in explained["nodes"].items()} == TOPOLOGY_SCORES
    assert outcome == ("Bound", "n1")
    assert devices == ["n1/gpu1", "n1/gpu2"]
