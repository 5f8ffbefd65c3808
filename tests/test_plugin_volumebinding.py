"""VolumeBinding, point by point: kube-scheduler v1.35's volume_binding.go and binder.go, as their tests and
comments describe them (which claims are bound, delayed or immediate; which volume a claim takes on a node;
what Reserve assumes, PreBind writes and Unreserve rolls back), transcribed into tables of pods and objects.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import numpy as np
import pytest
from test_plugin_volumes import NS, ephemeral, node, pod, pv, pvc, storage_class, wffc

from framework.plugins import PluginArgsError
from framework.plugins.volumebinding import (
    MSG_BIND_CONFLICT,
    MSG_NODE_CONFLICT,
    MSG_PV_NOT_EXIST,
    MSG_UNBOUND_IMMEDIATE,
    VolumeBinding,
)
from pluginhost.model import ClaimRef, Pod
from pluginhost.plugin import ActionType, CycleState, NodeBatch, QueueingHint, points_of
from pluginhost.snapshot import ClusterTable, MemoryVolumeWriter, Snapshot, StorageObject
from pluginhost.status import Code, Status

NODES = [node("n1", "za"), node("n2", "za"), node("n3", "zb")]


def cluster(*objects: StorageObject) -> Snapshot:
    table = ClusterTable()
    for n in NODES:
        table.upsert_node(n)
    for obj in objects:
        table.volumes.upsert(obj)
    return table.snapshot()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def filtered(plugin: VolumeBinding, state: CycleState, target: Pod, snap: Snapshot) -> dict[str, str]:
    """Filter on every node: node -> "" when it passes, else its code and reasons."""
    res = run(plugin.filter(state, target, NodeBatch(snap, np.arange(len(snap), dtype=np.int64))))
    out = {}
    for i, name in enumerate(snap.names):
        st = res.status_at(i)
        out[name] = "" if st.ok else f"{st.code.name}: {' | '.join(st.reasons)}"
    return out


def test_it_implements_upstreams_extension_points() -> None:
    assert points_of(VolumeBinding) == frozenset({"preFilter", "filter", "preScore", "score", "reserve", "preBind"})


# ---- PreFilter: the pod's claims ---------------------------------------------------------------------

PRE_FILTER = [  # (pod, objects, the status)
    pytest.param(pod("p"), [], Status(Code.Skip), id="no-volumes"),
    pytest.param(pod("p", volumes=({"name": "cfg", "configMap": {"name": "x"}},)), [], Status(Code.Skip),
                 id="no-claim-volumes"),
    pytest.param(pod("p", ("data",)), [], Status(Code.UnschedulableAndUnresolvable,
                                                 ('persistentvolumeclaim "data" not found',), "VolumeBinding"),
                 id="claim-missing"),
    pytest.param(pod("p", volumes=(ephemeral("scratch"),)), [wffc()], Status(
        Code.UnschedulableAndUnresolvable,
        ('waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"',), "VolumeBinding"),
        id="ephemeral-claim-not-created"),
    pytest.param(pod("p", volumes=(ephemeral("scratch"),)), [wffc(), pvc("p-scratch", cls="local", owner="other")],
                 Status(Code.UnschedulableAndUnresolvable,
                        (f"PVC {NS}/p-scratch was not created for pod {NS}/p (pod is not owner)",), "VolumeBinding"),
                 id="ephemeral-claim-of-another-pod"),
    pytest.param(pod("p", volumes=(ephemeral("scratch"),)), [wffc(), pvc("p-scratch", cls="local", owner="uid-p")],
                 Status(), id="ephemeral-claim-of-this-pod"),
    pytest.param(pod("p", ("data",)), [pvc("data", cls="", volume="gone", phase="Lost")],
                 Status(Code.UnschedulableAndUnresolvable,
                        ('persistentvolumeclaim "data" bound to non-existent persistentvolume "gone"',),
                        "VolumeBinding"),
                 id="claim-lost"),
    pytest.param(pod("p", ("data",)), [pvc("data", cls="", deleting=True)],
                 Status(Code.UnschedulableAndUnresolvable, ('persistentvolumeclaim "data" is being deleted',),
                        "VolumeBinding"), id="claim-being-deleted"),
    pytest.param(pod("p", ("data",)), [storage_class("fast", "example.com/x"), pvc("data", cls="fast")],
                 Status(Code.UnschedulableAndUnresolvable, (MSG_UNBOUND_IMMEDIATE,), "VolumeBinding"),
                 id="immediate-class-unbound"),
    pytest.param(pod("p", ("data",)), [pvc("data", cls="")],
                 Status(Code.UnschedulableAndUnresolvable, (MSG_UNBOUND_IMMEDIATE,), "VolumeBinding"),
                 id="no-class-unbound"),
    pytest.param(pod("p", ("data",)), [pvc("data", cls="nowhere")],
                 Status(Code.UnschedulableAndUnresolvable, (MSG_UNBOUND_IMMEDIATE,), "VolumeBinding"),
                 id="missing-class-binds-immediately"),
    pytest.param(pod("p", ("data",)), [wffc(), pvc("data", cls="local", annotations={}, volume=None)], Status(),
                 id="wait-for-first-consumer"),
    pytest.param(pod("p", ("data",)),
                 [wffc(), dataclasses.replace(pvc("data", cls="local"), volume_name="pv-1")],
                 Status(Code.UnschedulableAndUnresolvable, (MSG_UNBOUND_IMMEDIATE,), "VolumeBinding"),
                 id="pre-bound-to-a-volume-is-immediate"),
    pytest.param(pod("p", ("data",)), [pvc("data", cls="", volume="pv-1")], Status(), id="bound"),
]


@pytest.mark.parametrize(("target", "objects", "want"), PRE_FILTER)
def test_pre_filter_sorts_the_pods_claims(target: Pod, objects: list[StorageObject], want: Status) -> None:
    snap = cluster(*objects)
    result, status = run(VolumeBinding().pre_filter(CycleState("c", snap), target))
    assert (result, status) == (None, want)


# ---- Filter: node by node ----------------------------------------------------------------------------

LOCAL = wffc()
FILTER = [  # (pod, objects, node -> "" or the rejection)
    pytest.param(pod("p", ("data",)), [pvc("data", cls="", volume="pv-1"), pv("pv-1", host="n1", claim="data")],
                 {"n1": "", "n2": f"UnschedulableAndUnresolvable: {MSG_NODE_CONFLICT}",
                  "n3": f"UnschedulableAndUnresolvable: {MSG_NODE_CONFLICT}"}, id="bound-volume-on-one-node"),
    pytest.param(pod("p", ("data",)), [pvc("data", cls="", volume="pv-1"), pv("pv-1", claim="data")],
                 {"n1": "", "n2": "", "n3": ""}, id="bound-volume-without-affinity"),
    pytest.param(pod("p", ("data",)), [pvc("data", cls="", volume="gone")],
                 dict.fromkeys(("n1", "n2", "n3"), f"UnschedulableAndUnresolvable: {MSG_PV_NOT_EXIST}"),
                 id="bound-volume-missing"),
    pytest.param(pod("p", ("data",)), [LOCAL, pvc("data", "5Gi", "local"), pv("pv-2", "10Gi", "local", host="n2")],
                 {"n1": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}", "n2": "",
                  "n3": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}"}, id="unbound-takes-a-local-volume"),
    pytest.param(pod("p", ("data",)), [LOCAL, pvc("data", "5Gi", "local"), pv("pv-2", "1Gi", "local", host="n2")],
                 dict.fromkeys(("n1", "n2", "n3"), f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}"),
                 id="volume-too-small"),
    pytest.param(pod("p", ("data",)),
                 [LOCAL, pvc("data", cls="local", modes=("ReadWriteMany",)), pv("pv-2", "1Gi", "local", host="n2")],
                 dict.fromkeys(("n1", "n2", "n3"), f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}"),
                 id="access-modes-not-offered"),
    pytest.param(pod("p", ("data",)),
                 [LOCAL, pvc("data", cls="local", volume_mode="Block"), pv("pv-2", "1Gi", "local", host="n2")],
                 dict.fromkeys(("n1", "n2", "n3"), f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}"),
                 id="volume-mode-differs"),
    pytest.param(pod("p", ("data",)),
                 [LOCAL, pvc("data", cls="local", selector={"tier": "gold"}), pv("pv-2", "1Gi", "local", host="n2")],
                 dict.fromkeys(("n1", "n2", "n3"), f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}"),
                 id="selector-unmatched"),
    pytest.param(pod("p", ("data",)),
                 [LOCAL, pvc("data", cls="local", selector={"tier": "gold"}),
                  pv("pv-2", "1Gi", "local", host="n2", labels={"tier": "gold"})],
                 {"n1": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}", "n2": "",
                  "n3": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}"}, id="selector-matched"),
    pytest.param(pod("p", ("data",)), [LOCAL, pvc("data", cls="local"), pv("pv-2", "1Gi", "local", host="n2",
                                                                           phase="Released")],
                 dict.fromkeys(("n1", "n2", "n3"), f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}"),
                 id="volume-not-available"),
    pytest.param(pod("p", ("data",)), [LOCAL, pvc("data", cls="local"), pv("pv-2", "1Gi", "local", host="n2",
                                                                           claim="other")],
                 dict.fromkeys(("n1", "n2", "n3"), f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}"),
                 id="volume-claimed-by-another"),
    pytest.param(pod("p", ("data", "logs")),
                 [LOCAL, pvc("data", cls="local"), pvc("logs", cls="local"), pv("pv-2", "1Gi", "local", host="n2"),
                  pv("pv-3", "1Gi", "local", host="n3"), pv("pv-4", "1Gi", "local", host="n3")],
                 {"n1": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}",
                  "n2": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}", "n3": ""},
                 id="two-claims-need-two-volumes-on-the-node"),
    pytest.param(pod("p", ("data",)),
                 [wffc("fast", "example.com/fast", zones=("zb",)), pvc("data", cls="fast")],
                 {"n1": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}",
                  "n2": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}", "n3": ""},
                 id="provisioned-where-the-class-allows"),
    pytest.param(pod("p", ("data",)),
                 [wffc("fast", "example.com/fast"), pvc("data", cls="fast",
                                                        annotations={"volume.kubernetes.io/selected-node": "n1"})],
                 {"n1": "", "n2": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}",
                  "n3": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}"}, id="provisioning-on-its-selected-node"),
    pytest.param(pod("p", ("bound", "data")),
                 [LOCAL, pvc("bound", cls="", volume="pv-1"), pv("pv-1", host="n1", claim="bound"),
                  pvc("data", cls="local"), pv("pv-2", "1Gi", "local", host="n2")],
                 {"n1": f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}",
                  "n2": f"UnschedulableAndUnresolvable: {MSG_NODE_CONFLICT}",
                  "n3": f"UnschedulableAndUnresolvable: {MSG_NODE_CONFLICT} | {MSG_BIND_CONFLICT}"},
                 id="every-reason-that-applies"),
]


@pytest.mark.parametrize(("target", "objects", "want"), FILTER)
def test_filter_finds_the_nodes_where_the_claims_can_be_bound(target: Pod, objects: list[StorageObject],
                                                               want: dict[str, str]) -> None:
    snap = cluster(*objects)
    plugin = VolumeBinding()
    state = CycleState("c", snap)
    _, status = run(plugin.pre_filter(state, target))
    assert status == Status()
    assert filtered(plugin, state, target, snap) == want


def test_filter_reports_a_class_gone_since_pre_filter_as_an_error() -> None:
    snap = cluster(wffc("fast", "example.com/fast"), pvc("data", cls="fast"))
    plugin, target = VolumeBinding(), pod("p", ("data",))
    state = CycleState("c", snap)
    run(plugin.pre_filter(state, target))
    snap.volumes.remove("StorageClass", "fast")
    assert set(filtered(plugin, state, target, snap).values()) == {'Error: failed to find storage class "fast"'}


CHOICE = [  # (volumes of the class, the volume the claim of 1Gi takes on n2)
    pytest.param([pv("big", "10Gi", "local", host="n2"), pv("small", "2Gi", "local", host="n2")], "small",
                 id="the-smallest-that-fits"),
    pytest.param([pv("a", "2Gi", "local", host="n2"), pv("b", "2Gi", "local", host="n2")], "a",
                 id="the-first-of-equals"),
    pytest.param([pv("small", "2Gi", "local", host="n2"), pv("pre", "10Gi", "local", host="n2", claim="data")], "pre",
                 id="pre-bound-to-the-claim-wins"),
    pytest.param([pv("far", "1Gi", "local", host="n1"), pv("near", "5Gi", "local", host="n2")], "near",
                 id="only-volumes-the-node-reaches"),
]


@pytest.mark.parametrize(("volumes", "want"), CHOICE)
def test_reserve_assumes_the_volume_filter_chose_for_the_node(volumes: list[StorageObject], want: str) -> None:
    snap = cluster(LOCAL, pvc("data", "1Gi", "local"), *volumes)
    plugin, target = VolumeBinding(), pod("p", ("data",))
    state = CycleState("c", snap)
    run(plugin.pre_filter(state, target))
    filtered(plugin, state, target, snap)
    assert run(plugin.reserve(state, target, "n2")) == Status()
    store = snap.volumes
    assert store.assumed() == [f"PersistentVolume/{want}"]
    assumed = store.volume(want)
    assert assumed is not None
    assert (assumed.claim_ref, assumed.annotations.get("pv.kubernetes.io/bound-by-controller")) == (
        ClaimRef(NS, "data", "uid-data"), None if want == "pre" else "yes")
    assert store.volumes[want].claim_ref == (None if want != "pre" else ClaimRef(NS, "data", ""))


def test_a_volume_assumed_for_one_pod_is_not_offered_to_the_next_and_unreserve_gives_it_back() -> None:
    snap = cluster(LOCAL, pvc("a", cls="local"), pvc("b", cls="local"), pv("only", "1Gi", "local", host="n2"))
    plugin = VolumeBinding()
    first, second = pod("first", ("a",)), pod("second", ("b",))
    s1 = CycleState("c1", snap)
    run(plugin.pre_filter(s1, first))
    assert filtered(plugin, s1, first, snap)["n2"] == ""
    assert run(plugin.reserve(s1, first, "n2")) == Status()
    s2 = CycleState("c2", snap)
    run(plugin.pre_filter(s2, second))
    assert filtered(plugin, s2, second, snap)["n2"] == f"UnschedulableAndUnresolvable: {MSG_BIND_CONFLICT}"
    run(plugin.unreserve(s1, first, "n2"))
    assert snap.volumes.assumed() == []
    s3 = CycleState("c3", snap)
    run(plugin.pre_filter(s3, second))
    assert filtered(plugin, s3, second, snap)["n2"] == ""


# ---- PreBind: the bindings written -------------------------------------------------------------------


def reserved(snap: Snapshot, target: Pod, node_name: str, plugin: VolumeBinding | None = None
             ) -> tuple[VolumeBinding, CycleState]:
    plugin = plugin or VolumeBinding()
    state = CycleState("c", snap)
    run(plugin.pre_filter(state, target))
    filtered(plugin, state, target, snap)
    assert run(plugin.reserve(state, target, node_name)) == Status()
    return plugin, state


def test_pre_bind_binds_the_volume_and_the_claim_to_each_other() -> None:
    snap = cluster(LOCAL, pvc("data", "1Gi", "local"), pv("pv-2", "5Gi", "local", host="n2"))
    target = pod("p", ("data",))
    plugin, state = reserved(snap, target, "n2")
    assert run(plugin.pre_bind_pre_flight(state, target, "n2")) == Status()
    assert run(plugin.pre_bind(state, target, "n2")) == Status()
    store = snap.volumes
    volume, claim = store.volumes["pv-2"], store.claims[f"{NS}/data"]
    assert (volume.claim_ref, volume.phase, volume.annotations) == (
        ClaimRef(NS, "data", "uid-data"), "Bound", {"pv.kubernetes.io/bound-by-controller": "yes"})
    assert (claim.volume_name, claim.phase, claim.annotations) == (
        "pv-2", "Bound", {"pv.kubernetes.io/bind-completed": "yes", "pv.kubernetes.io/bound-by-controller": "yes"})
    assert store.assumed() == []


def test_pre_bind_pre_flight_skips_a_pod_whose_claims_are_all_bound() -> None:
    snap = cluster(pvc("data", cls="", volume="pv-1"), pv("pv-1", claim="data"))
    target = pod("p", ("data",))
    plugin, state = reserved(snap, target, "n1")
    assert run(plugin.pre_bind_pre_flight(state, target, "n1")) == Status(Code.Skip)
    assert run(plugin.pre_bind(state, target, "n1")) == Status()


def test_pre_bind_fails_when_the_volume_changed_since_reserve_and_rolls_the_assumption_back() -> None:
    snap = cluster(LOCAL, pvc("data", "1Gi", "local"), pv("pv-2", "5Gi", "local", host="n2"))
    target = pod("p", ("data",))
    plugin, state = reserved(snap, target, "n2")
    snap.volumes.upsert(pv("pv-2", "5Gi", "local", host="n2", labels={"changed": "yes"}, version="2"))
    status = run(plugin.pre_bind(state, target, "n2"))
    assert status == Status(Code.Error, (
        'Operation cannot be fulfilled on persistentvolumes "pv-2": the object has been modified; please apply your '
        "changes to the latest version and try again",), "VolumeBinding")
    assert snap.volumes.assumed() == []
    assert snap.volumes.claims[f"{NS}/data"].volume_name == ""


def test_pre_bind_gives_up_after_bind_timeout_seconds_when_nothing_provisions_the_claim() -> None:
    snap = cluster(wffc("fast", "example.com/fast"), pvc("data", cls="fast"))
    snap.volumes.writer = MemoryVolumeWriter(snap.volumes, provision=False)
    target = pod("p", ("data",))
    plugin, state = reserved(snap, target, "n3", VolumeBinding({"bindTimeoutSeconds": 0}))
    assert run(plugin.pre_bind(state, target, "n3")) == Status(
        Code.Error, ("binding volumes: context deadline exceeded",), "VolumeBinding")
    # As kube-scheduler leaves it: the claim keeps the node it was given.
    assert snap.volumes.claims[f"{NS}/data"].annotations == {"volume.kubernetes.io/selected-node": "n3"}


def test_pre_bind_fails_when_the_provisioner_gave_the_node_back() -> None:
    snap = cluster(wffc("fast", "example.com/fast"), pvc("data", cls="fast"))
    store = snap.volumes
    target = pod("p", ("data",))

    class Refusing(MemoryVolumeWriter):
        async def update_claim(self, claim: Any) -> Any:  # the provisioner failed: it drops the annotation
            out = await super().update_claim(claim)
            await super().update_claim(dataclasses.replace(out, annotations={}))
            return out

    store.writer = Refusing(store, provision=False)
    plugin, state = reserved(snap, target, "n3", VolumeBinding({"bindTimeoutSeconds": 5}))
    assert run(plugin.pre_bind(state, target, "n3")) == Status(
        Code.Error, ('binding volumes: provisioning failed for PVC "data"',), "VolumeBinding")


# ---- args and events ---------------------------------------------------------------------------------

ARGS = [
    pytest.param({"bindTimeoutSeconds": -1}, "VolumeBinding: bindTimeoutSeconds: Invalid value: -1: invalid "
                 "BindTimeoutSeconds, should not be a negative value", id="negative-timeout"),
    pytest.param({"shape": [{"utilization": 0, "score": 0}]}, "VolumeBinding: shape: Invalid value: "
                 "[{'utilization': 0, 'score': 0}]: unexpected field `shape`, remove it or turn on the feature gate "
                 "StorageCapacityScoring", id="shape-without-the-gate"),
    pytest.param({"bindTimeout": 5}, "VolumeBinding: unknown args field(s) ['bindTimeout']", id="unknown-field"),
    pytest.param({"bindTimeoutSeconds": "5"}, "VolumeBinding: bindTimeoutSeconds must be an integer, got '5'",
                 id="timeout-not-an-integer"),
]


@pytest.mark.parametrize(("args", "error"), ARGS)
def test_args_are_checked_as_kube_scheduler_checks_them(args: dict[str, Any], error: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        VolumeBinding(args)
    assert str(exc.value) == error


def test_it_scores_nothing_without_the_storage_capacity_scoring_gate() -> None:
    snap = cluster()
    batch = NodeBatch(snap, np.arange(3, dtype=np.int64))
    plugin = VolumeBinding({"bindTimeoutSeconds": 600})
    assert run(plugin.pre_score(CycleState("c", snap), pod("p"), batch)) == Status(Code.Skip)
    assert run(plugin.score(CycleState("c", snap), pod("p"), batch)).tolist() == [0, 0, 0]


HINTS = [  # (resource, old, new, the hint for a pod using claim "data")
    pytest.param("PersistentVolumeClaim", None, pvc("data", cls="local"), QueueingHint.Queue, id="its-claim-added"),
    pytest.param("PersistentVolumeClaim", None, pvc("other", cls="local"), QueueingHint.QueueSkip,
                 id="another-claim"),
    pytest.param("PersistentVolumeClaim", None, dataclasses.replace(pvc("data", cls="local"), namespace="elsewhere"),
                 QueueingHint.QueueSkip, id="same-name-other-namespace"),
    pytest.param("StorageClass", None, LOCAL, QueueingHint.Queue, id="class-added"),
    pytest.param("StorageClass", wffc("fast", "x"), wffc("fast", "x", zones=("za",)), QueueingHint.Queue,
                 id="class-topologies-changed"),
    pytest.param("StorageClass", wffc("fast", "x"), dataclasses.replace(wffc("fast", "x"), parameters={"a": "b"}),
                 QueueingHint.QueueSkip, id="class-parameters-changed"),
]


@pytest.mark.parametrize(("resource", "old", "new", "want"), HINTS)
def test_storage_events_requeue_only_the_pods_they_may_help(resource: str, old: Any, new: Any,
                                                            want: QueueingHint) -> None:
    regs = [r for r in VolumeBinding().events_to_register() if r.event.resource == resource]
    assert len(regs) == 1 and regs[0].hint is not None
    assert regs[0].hint(pod("p", ("data",)), old, new) is want


def test_registered_events() -> None:
    assert [(r.event.resource, r.event.action, r.hint is not None) for r in VolumeBinding().events_to_register()] == [
        ("StorageClass", ActionType.Add | ActionType.Update, True),
        ("PersistentVolumeClaim", ActionType.Add | ActionType.Update, True),
        ("PersistentVolume", ActionType.Add | ActionType.Update, False),
        ("Node", ActionType.Add | ActionType.UpdateNodeLabel, False),
        ("CSINode", ActionType.Add | ActionType.Update, True),
    ]



