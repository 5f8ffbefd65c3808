"""Pod volumes and storage objects reach remote plugins: the snapshot publisher sends PersistentVolumeClaims,
PersistentVolumes, StorageClasses and CSINodes only to followers that ask (FollowRequest.volumes), in
generation order with nodes and pods; a Python plugin host process on 127.0.0.1 sees a pod's volumes and
the objects behind them, after every change (a claim bound later, a volume added, relabelled, deleted);
and Outrigger's own VolumeZone, hosted, agrees with the in-process one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from test_remote_harness import HostProcess, endpoint, remote_rig, until

from framework.config import load_config
from framework.plugins import in_tree_registry
from framework.remote.publisher import SnapshotPublisher
from framework.scheduler import Scheduler
from pluginhost.convert import pod_from_proto, pod_to_proto
from pluginhost.convert_storage import storage_from_proto, storage_to_proto
from pluginhost.definition import PluginDefinitionError, manifest_of
from pluginhost.manifest import parse_objects, pod_from_dict, pv_from_dict, pvc_from_dict
from pluginhost.mirror import SnapshotMirror
from pluginhost.model import CSINode, CSINodeDriver, Node, StorageClass
from pluginhost.plugin import FilterPlugin
from pluginhost.snapshot import ClusterTable

ZONE = "topology.kubernetes.io/zone"
VOLUME_PLUGINS = ["VolumeBinding", "VolumeZone", "VolumeRestrictions", "NodeVolumeLimits"]


def objects(*docs: dict[str, Any]) -> list[Any]:
    return parse_objects(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}), "test.json")


def node(name: str, zone: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE: zone}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def pod(name: str, volumes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    container = {"name": "c", "resources": {"requests": {"cpu": "100m"}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
            "spec": {"containers": [container], "volumes": list(volumes)}}


def claim_volume(claim: str = "data") -> dict[str, Any]:
    return {"name": "data", "persistentVolumeClaim": {"claimName": claim}}


def pvc(volume_name: str = "", bound: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                            "resources": {"requests": {"storage": "1Gi"}}}
    if volume_name:
        spec["volumeName"] = volume_name
    # bound: as the PV controller leaves a claim it bound (what VolumeBinding takes as fully bound).
    meta: dict[str, Any] = {"name": "data", "namespace": "default"}
    if bound:
        meta["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": spec,
            **({"status": {"phase": "Bound"}} if bound else {})}


def pv(name: str, zone: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": {ZONE: zone}},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                     "claimRef": {"namespace": "default", "name": "data"},
                     "csi": {"driver": "fast.csi.example.com", "volumeHandle": f"h-{name}"}}}


def storage_class() -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "fast"},
            "provisioner": "fast.csi.example.com"}


def config(enabled: Sequence[str], disabled: Sequence[str]) -> str:
    lines = ["apiVersion: kubescheduler.config.k8s.io/v1", "kind: KubeSchedulerConfiguration",
             "profiles:", "- schedulerName: default-scheduler", "  plugins:", "    multiPoint:"]
    if enabled:
        lines += ["      enabled:", *(f"      - name: {n}" for n in enabled)]
    if disabled:
        lines += ["      disabled:", *(f"      - name: {n}" for n in disabled)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------
# The wire form


def test_pod_volumes_and_storage_objects_survive_the_wire() -> None:
    p = pod_from_dict(pod("web", [
        claim_volume(),
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
        {"name": "inline", "csi": {"driver": "inline.csi.example.com", "readOnly": True}},
        {"name": "gce", "gcePersistentDisk": {"pdName": "disk-1", "readOnly": True}},
        {"name": "ceph", "rbd": {"image": "img", "pool": "p1", "monitors": ["m1", "m2"]}},
        {"name": "cm", "configMap": {"name": "settings"}},
    ]))
    back = pod_from_proto(pod_to_proto(p))
    assert back.volumes == p.volumes
    assert [(v.name, v.source) for v in back.volumes] == [
        ("data", "persistentVolumeClaim"), ("scratch", "ephemeral"), ("inline", "csi"), ("gce", "gcePersistentDisk"),
        ("ceph", "rbd")]
    assert back.claim_names() == [("data", False), ("web-scratch", True)]
    objs = [pvc_from_dict(pvc("pv-1")), pv_from_dict(pv("pv-1", "b")),
            StorageClass("fast", provisioner="x", allowed_topologies=[], parameters={"type": "ssd"}),
            CSINode("n1", drivers=(CSINodeDriver("d", "id-1", ("zone",), 5), CSINodeDriver("e")))]
    for obj in objs:
        obj.resource_version = "7"
        again = storage_from_proto(storage_to_proto(obj))
        assert again == obj


MANIFESTS = [  # (class attributes, the error's words or None and the manifest's flags)
    pytest.param({"needs_volumes": True}, (True, True, False), id="implies-the-mirror"),
    pytest.param({"needs_volumes": True, "needs_snapshot": False}, "needs the mirror", id="without-mirror"),
    pytest.param({"needs_volumes": True, "nodes_only": True}, "excludes lookahead and nodes_only", id="nodes-only"),
    pytest.param({}, (False, True, False), id="default"),
]


@pytest.mark.parametrize(("attrs", "want"), MANIFESTS)
def test_needs_volumes_declaration(attrs: dict[str, Any], want: Any) -> None:
    async def filter(self: Any, state: Any, p: Any, batch: Any) -> Any:
        raise NotImplementedError

    cls = type("Declared", (FilterPlugin,), {"name": "Declared", "filter": filter, **attrs})
    if isinstance(want, str):
        with pytest.raises(PluginDefinitionError, match=want):
            manifest_of(cls)
        return
    m = manifest_of(cls)
    assert (m.needs_volumes, m.needs_snapshot, m.nodes_only) == want


# ---------------------------------------------------------------------------------------------------
# The publisher: storage objects only for followers that ask, ordered by generation


async def _collect(stream: AsyncIterator[Any], n: int) -> list[Any]:
    return [await asyncio.wait_for(anext(stream), 5) for _ in range(n)]


def _storage(delta: Any) -> tuple[list[str], list[str]]:
    ups = [f"{o.WhichOneof('object')}:{getattr(o, o.WhichOneof('object')).metadata.name}"
           for o in delta.storage_upserts]
    return ups, [f"{r.kind}:{r.namespace}/{r.name}" for r in delta.storage_removed]


def test_publisher_sends_storage_objects_only_to_followers_that_ask() -> None:
    async def main() -> None:
        table = ClusterTable()
        table.upsert_node(Node(name="n1", labels={ZONE: "a"}))
        table.volumes.upsert(StorageClass("fast", provisioner="x"))  # before anyone follows
        gen0 = table.generation
        pub = SnapshotPublisher(table, flush_delay=0.001)
        with_volumes = pub.follow(0, "v", volumes=True)
        without = pub.follow(0, "n")
        first_v, first_n = (await _collect(with_volumes, 1))[0], (await _collect(without, 1))[0]
        assert (first_v.full_resync, first_v.generation, _storage(first_v)) == (
            True, gen0, (["storage_class:fast"], []))
        assert (first_n.full_resync, first_n.generation, _storage(first_n)) == (True, gen0, ([], []))
        # A claim bound later, a volume added, then the class deleted: each advances the generation.
        table.volumes.upsert(pvc_from_dict(pvc()))
        table.volumes.upsert(pv_from_dict(pv("pv-1", "a")))
        table.volumes.remove("StorageClass", "fast")
        assert table.generation == gen0 + 3
        pub.publish_all()
        got_v, got_n = (await _collect(with_volumes, 1))[0], (await _collect(without, 1))[0]
        assert (got_v.generation, _storage(got_v)) == (
            gen0 + 3, (["persistent_volume_claim:data", "persistent_volume:pv-1"], ["StorageClass:/fast"]))
        assert (got_n.generation, _storage(got_n)) == (gen0 + 3, ([], []))
        table.volumes.upsert(CSINode("n1", drivers=(CSINodeDriver("fast.csi.example.com", allocatable=2),)))
        pub.publish_all()
        later = (await _collect(with_volumes, 1))[0]
        assert (later.generation, _storage(later)) == (gen0 + 4, (["csi_node:n1"], []))
        assert (await _collect(without, 1))[0].generation == gen0 + 4
        # A follower that reconnects gets the history with the storage changes, a pod-only follower
        # the same deltas without them.
        again = pub.follow(gen0 + 3, "v2", volumes=True)
        (caught,) = await _collect(again, 1)
        assert (caught.full_resync, caught.generation, _storage(caught)) == (False, gen0 + 4, _storage(later))
        plain = pub.follow(gen0 + 3, "n2")
        (caught,) = await _collect(plain, 1)
        assert (caught.full_resync, caught.generation, _storage(caught)) == (False, gen0 + 4, ([], []))
        await plain.aclose()
        mirror = SnapshotMirror()
        for delta in (first_v, got_v, later):
            mirror.apply(delta)
        store = mirror.latest().volumes
        assert (store.claim("default", "data").volume_name, store.volume("pv-1").labels, store.storage_class("fast"),
                store.csinode("n1").limits()) == ("", {ZONE: "a"}, None, {"fast.csi.example.com": 2})
        await with_volumes.aclose()
        await again.aclose()
        # Nobody reads storage now: its changes no longer move the generation.
        table.volumes.upsert(pv_from_dict(pv("pv-2", "a")))
        assert table.generation == gen0 + 4
        await without.aclose()
        pub.close()

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------------
# A plugin host process sees the pod's volumes and the storage objects, after every change


def _message(s: Scheduler, name: str) -> tuple[str, str]:
    r = s.get_pod("default", name)
    assert r is not None
    if r.phase == "Bound":
        return "Bound", r.pod.node_name
    return r.phase, r.last_status.message() if r.last_status is not None else ""


def _settled(s: Scheduler, name: str) -> bool:
    r = s.get_pod("default", name)
    if r is None or s.pending_count()["in-flight"] or s.leaks()["binding_cycles"]:
        return False
    return r.phase == "Bound" or (r.phase == "Unschedulable" and r.last_status is not None)


Step = Callable[[Scheduler], Any]


async def _steps(s: Scheduler, steps: Sequence[tuple[str, list[Any] | Step]]) -> list[tuple[str, str]]:
    """For each step: apply its objects (or call it), then schedule a new pod claiming ``data`` and
    report what became of it."""
    task = asyncio.create_task(s.run())
    out = []
    try:
        for i, (_, change) in enumerate(steps):
            if callable(change):
                change(s)
            elif change:
                await s.apply(change)
            name = f"p{i}"
            await s.apply(objects(pod(name, [claim_volume(), {"name": "inline", "csi": {"driver": "d.example.com"}}])))
            await until(lambda name=name: _settled(s, name), 10, f"{name} settled")  # type: ignore[misc]
            out.append(_message(s, name))
    finally:
        await s.drain(timeout=5)
        await s.stop()
        await asyncio.wait_for(task, 5)
    return out


SEEN = "volumes ['data:persistentVolumeClaim', 'inline:csi']"
PREEMPTION = " preemption: 0/3 nodes are available: 3 "
UNHELPFUL = PREEMPTION + "Preemption is not helpful for scheduling."
NO_VICTIMS = PREEMPTION + "No preemption victims found for incoming pod."
WITNESS_STEPS: list[tuple[str, Any, tuple[str, str]]] = [
    ("no claim yet", [], ("Unschedulable", f"0/3 nodes are available: 3 {SEEN}: claim data not found.{UNHELPFUL}")),
    ("claim not bound", objects(pvc()),
     ("Unschedulable", f"0/3 nodes are available: 3 {SEEN}: claim data not bound.{NO_VICTIMS}")),
    ("bound, volume missing", objects(pvc("pv-1")),
     ("Unschedulable", f"0/3 nodes are available: 3 {SEEN}: volume pv-1 not found.{UNHELPFUL}")),
    ("volume in zone b", objects(pv("pv-1", "b")), ("Bound", "nb")),
    ("volume moved to zone c", objects(pv("pv-1", "c")), ("Bound", "nc")),
    ("volume in zone z, with its class", objects(pv("pv-1", "z"), storage_class()),
     ("Unschedulable", f"0/3 nodes are available: 3 volume pv-1 in z class fast.csi.example.com.{UNHELPFUL}")),
    ("volume deleted", lambda s: s.delete_storage("PersistentVolume", "", "pv-1"),
     ("Unschedulable", f"0/3 nodes are available: 3 {SEEN}: volume pv-1 not found.{UNHELPFUL}")),
]


BASE_NODES = [node("na", "a"), node("nb", "b"), node("nc", "c")]


async def remote_steps(address: str, enabled: Sequence[str], disabled: Sequence[str],
                       steps: Sequence[tuple[str, Any]]) -> list[tuple[str, str]]:
    """:func:`_steps` with the plugin host at ``address`` serving ``enabled`` (``disabled`` off)."""
    text = config(enabled, disabled)
    rig = await remote_rig([endpoint("volumes", address)], lambda reg: load_config(text, reg.points()))
    try:
        await rig.scheduler.apply(objects(*BASE_NODES))
        return await _steps(rig.scheduler, steps)
    finally:
        await rig.close()


def test_remote_python_plugin_sees_pod_volumes_and_storage_objects_after_each_change() -> None:
    steps = [(what, change) for what, change, _ in WITNESS_STEPS]
    with HostProcess("volume_plugin_witness:VolumeWitness") as host:
        got = asyncio.run(remote_steps(host.address, ["VolumeWitness"], VOLUME_PLUGINS, steps))
    assert got == [want for _, _, want in WITNESS_STEPS]


# ---------------------------------------------------------------------------------------------------
# Outrigger's VolumeZone, hosted, agrees with the in-process one


ZONE_STEPS: list[tuple[str, Any]] = [
    ("bound to a volume in zone b", objects(storage_class(), pvc("pv-1", bound=True), pv("pv-1", "b"))),
    ("the volume moved to zone z", objects(pv("pv-1", "z"))),
    ("the volume moved to zone c", objects(pv("pv-1", "c"))),
]
ZONE_WANT = [
    ("Bound", "nb"),
    ("Unschedulable", f"0/3 nodes are available: 3 node(s) had no available volume zone.{UNHELPFUL}"),
    ("Bound", "nc"),
]


def in_process_steps(steps: Sequence[tuple[str, Any]]) -> list[tuple[str, str]]:
    """:func:`_steps` with the default profile's in-process plugins."""
    async def main() -> list[tuple[str, str]]:
        reg = in_tree_registry()
        s = Scheduler(load_config(config([], []), reg.points()), reg, seed=0)
        await s.apply(objects(*BASE_NODES))
        return await _steps(s, steps)

    return asyncio.run(main())


@pytest.mark.parametrize("mode", ["inprocess", "remote"])
def test_hosted_volume_zone_agrees_with_in_process(mode: str) -> None:
    if mode == "inprocess":
        got = in_process_steps(ZONE_STEPS)
    else:
        with HostProcess("volume_plugin_witness:RemoteVolumeZone") as host:
            got = asyncio.run(remote_steps(host.address, ["RemoteVolumeZone"], ["VolumeZone"], ZONE_STEPS))
    assert got == ZONE_WANT
