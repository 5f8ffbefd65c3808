"""VolumeZone: kube-scheduler v1.35's zone check of bound volumes (``volumezone/volume_zone.go``), in tables:
a volume's zone and region labels against each node's, and what PreFilter says of claims it cannot follow.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from test_plugin_volumes import pod, pv, pvc, storage_class, wffc

from framework.plugins.volumezone import MSG_ZONE_CONFLICT, VolumeZone
from pluginhost.manifest import node_from_dict
from pluginhost.model import Node
from pluginhost.plugin import ActionType, CycleState, NodeBatch, QueueingHint, points_of
from pluginhost.snapshot import ClusterTable, StorageObject
from pluginhost.status import Code, Status

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
REJECTED = f"UnschedulableAndUnresolvable: {MSG_ZONE_CONFLICT}"


def labelled(name: str, **labels: str) -> Node:
    return node_from_dict({"metadata": {"name": name, "labels": labels},
                           "status": {"allocatable": {"cpu": "1", "pods": "10"}}})


NODES = [
    labelled("beta-a", **{BETA_ZONE: "us-west1-a", BETA_REGION: "us-west1"}),
    labelled("beta-b", **{BETA_ZONE: "us-west1-b", BETA_REGION: "us-west1"}),
    labelled("ga-a", **{ZONE: "us-west1-a", REGION: "us-west1"}),
    labelled("ga-c", **{ZONE: "us-east1-c", REGION: "us-east1"}),
    labelled("region-only", **{REGION: "us-west1"}),
    labelled("plain", disk="ssd"),
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def verdicts(*objects: StorageObject) -> tuple[Status, dict[str, str]]:
    table = ClusterTable()
    for n in NODES:
        table.upsert_node(n)
    for obj in objects:
        table.volumes.upsert(obj)
    snap = table.snapshot()
    plugin, state, target = VolumeZone(), CycleState("c", snap), pod("p", ("data",))
    _, status = run(plugin.pre_filter(state, target))
    if not status.ok:
        return status, {}
    res = run(plugin.filter(state, target, NodeBatch(snap, np.arange(len(snap), dtype=np.int64))))
    out = {}
    for i, name in enumerate(snap.names):
        st = res.status_at(i)
        out[name] = "" if st.ok else f"{st.code.name}: {' | '.join(st.reasons)}"
    return status, out


def bound(labels: dict[str, str]) -> list[StorageObject]:
    return [pvc("data", cls="", volume="pv-1"), pv("pv-1", labels=labels, claim="data")]


ZONES = [  # (the volume's labels, the nodes that pass)
    pytest.param({BETA_ZONE: "us-west1-a"}, {"beta-a", "ga-a", "plain"}, id="beta-zone-matched-by-beta-or-ga"),
    pytest.param({ZONE: "us-west1-a"}, {"ga-a", "plain"}, id="ga-zone-needs-the-ga-label"),
    pytest.param({BETA_ZONE: "us-west1-a__us-west1-b"}, {"beta-a", "beta-b", "ga-a", "plain"}, id="multi-zone"),
    pytest.param({BETA_REGION: "us-west1"}, {"beta-a", "beta-b", "ga-a", "region-only", "plain"}, id="region"),
    pytest.param({ZONE: "us-east1-c", REGION: "us-east1"}, {"ga-c", "plain"}, id="zone-and-region"),
    pytest.param({ZONE: "us-west1-z"}, {"plain"}, id="a-zone-no-node-is-in"),
]


@pytest.mark.parametrize(("labels", "passing"), ZONES)
def test_a_bound_volumes_zone_labels_must_be_on_the_node(labels: dict[str, str], passing: set[str]) -> None:
    status, nodes = verdicts(*bound(labels))
    assert status == Status()
    assert nodes == {n.name: "" if n.name in passing else REJECTED for n in NODES}


PRE_FILTER = [  # (objects, PreFilter's status)
    pytest.param(bound({"disk": "ssd"}), Status(Code.Skip), id="volume-without-zone-labels"),
    pytest.param(bound({ZONE: "us-west1-a____us-west1-b"}), Status(Code.Skip), id="an-empty-zone-voids-the-label"),
    pytest.param([], Status(Code.UnschedulableAndUnresolvable, ('persistentvolumeclaim "data" not found',),
                            "VolumeZone"), id="claim-missing"),
    pytest.param([pvc("data", cls="")], Status(Code.UnschedulableAndUnresolvable,
                                               ("PersistentVolumeClaim had no pv name and storageClass name",),
                                               "VolumeZone"), id="unbound-without-a-class"),
    pytest.param([pvc("data", cls="fast")], Status(Code.UnschedulableAndUnresolvable,
                                                   ('storageclass.storage.k8s.io "fast" not found',), "VolumeZone"),
                 id="class-missing"),
    pytest.param([pvc("data", cls="local"), wffc()], Status(Code.Skip), id="unbound-wait-for-first-consumer"),
    pytest.param([pvc("data", cls="fast"), storage_class("fast", "example.com/fast")],
                 Status(Code.UnschedulableAndUnresolvable, ("PersistentVolume had no name",), "VolumeZone"),
                 id="unbound-immediate"),
    pytest.param([pvc("data", cls="", volume="gone")], Status(Code.UnschedulableAndUnresolvable,
                                                              ('persistentvolume "gone" not found',), "VolumeZone"),
                 id="volume-missing"),
]


@pytest.mark.parametrize(("objects", "want"), PRE_FILTER)
def test_pre_filter_follows_claims_to_their_volumes(objects: list[StorageObject], want: Status) -> None:
    assert verdicts(*objects) == (want, {})


def test_it_implements_upstreams_extension_points_and_events() -> None:
    assert points_of(VolumeZone) == frozenset({"preFilter", "filter"})
    assert [(r.event.resource, r.event.action) for r in VolumeZone().events_to_register()] == [
        ("StorageClass", ActionType.Add), ("Node", ActionType.Add | ActionType.UpdateNodeLabel),
        ("PersistentVolumeClaim", ActionType.Add | ActionType.Update),
        ("PersistentVolume", ActionType.Add | ActionType.Update)]


HINTS = [
    pytest.param("StorageClass", None, wffc(), QueueingHint.Queue, id="wait-for-first-consumer-class"),
    pytest.param("StorageClass", None, storage_class("fast", "x"), QueueingHint.QueueSkip, id="immediate-class"),
    pytest.param("PersistentVolume", None, pv("pv-1"), QueueingHint.Queue, id="new-volume"),
    pytest.param("PersistentVolume", pv("pv-1", labels={ZONE: "a"}), pv("pv-1", labels={ZONE: "b"}),
                 QueueingHint.Queue, id="volume-zone-changed"),
    pytest.param("PersistentVolume", pv("pv-1", labels={ZONE: "a"}), pv("pv-1", labels={ZONE: "a", "x": "y"}),
                 QueueingHint.QueueSkip, id="volume-zone-unchanged"),
    pytest.param("PersistentVolumeClaim", None, pvc("data", cls=""), QueueingHint.Queue, id="its-claim"),
    pytest.param("PersistentVolumeClaim", None, pvc("other", cls=""), QueueingHint.QueueSkip, id="another-claim"),
]


@pytest.mark.parametrize(("resource", "old", "new", "want"), HINTS)
def test_events_requeue_only_pods_they_may_help(resource: str, old: Any, new: Any, want: QueueingHint) -> None:
    reg = next(r for r in VolumeZone().events_to_register() if r.event.resource == resource)
    assert reg.hint is not None and reg.hint(pod("p", ("data",)), old, new) is want
