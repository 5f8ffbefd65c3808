"""VolumeBinding, point by point: kube-scheduler v1.37's volume_binding.go and binder.go, as their tests and
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

from framework import features
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
    # StorageCapacityScoring is on in v1.37: the shape is validated as validateFunctionShape does.
    pytest.param({"shape": [{"utilization": 50, "score": 1}, {"utilization": 50, "score": 2}]},
                 "VolumeBinding: shape[1].utilization: Invalid value: 50: values must be sorted in increasing order",
                 id="shape-unsorted"),
    pytest.param({"shape": [{"utilization": 101, "score": 1}]},
                 "VolumeBinding: shape[0].utilization: Invalid value: 101: not in valid range [0, 100]",
                 id="shape-utilization-out-of-range"),
    pytest.param({"shape": [{"utilization": 0, "score": 11}]},
                 "VolumeBinding: shape[0].score: Invalid value: 11: not in valid range [0, 10]",
                 id="shape-score-out-of-range"),
    pytest.param({"shape": [{"utilization": 0, "scor": 1}]}, "VolumeBinding: shape[0]: unknown field 'scor'",
                 id="shape-unknown-field"),
    pytest.param({"shape": {"utilization": 0}}, "VolumeBinding: shape must be a list of {utilization, score}",
                 id="shape-not-a-list"),
    pytest.param({"bindTimeout": 5}, "VolumeBinding: unknown args field(s) ['bindTimeout']", id="unknown-field"),
    pytest.param({"bindTimeoutSeconds": "5"}, "VolumeBinding: bindTimeoutSeconds must be an integer, got '5'",
                 id="timeout-not-an-integer"),
]


@pytest.mark.parametrize(("args", "error"), ARGS)
def test_args_are_checked_as_kube_scheduler_checks_them(args: dict[str, Any], error: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        VolumeBinding(args)
    assert str(exc.value) == error


# ---- PreScore/Score: StorageCapacityScoring, beta and on in v1.37 --------------------------------------

LOCAL2 = wffc("local2")
SCORES = [  # (args, pod, objects, the score on n1, n2, n3)
    # 5Gi of 10Gi on n1: utilization 50 -> 100 - 50; 5Gi of 8Gi on n2: 62 (62.5 truncated) -> 38; n3 has no
    # volume (rejected by Filter: no entry, 0)
    pytest.param({}, pod("p", ("data",)),
                 [LOCAL, pvc("data", "5Gi", "local"), pv("pv-a", "10Gi", "local", host="n1"),
                  pv("pv-b", "8Gi", "local", host="n2")], [50, 38, 0], id="default-shape-prefers-emptier-volumes"),
    # one class, two claims on n1: (5 + 3) of (10 + 6) -> 50
    pytest.param({}, pod("p", ("data", "logs")),
                 [LOCAL, pvc("data", "5Gi", "local"), pvc("logs", "3Gi", "local"),
                  pv("pv-a", "10Gi", "local", host="n1"), pv("pv-c", "6Gi", "local", host="n1")], [50, 0, 0],
                 id="claims-of-a-class-summed"),
    # two classes on n1: 1 of 4 -> 75 and 1 of 2 -> 50; the mean 62.5 rounds half away from zero
    pytest.param({}, pod("p", ("data", "logs")),
                 [LOCAL, LOCAL2, pvc("data", "1Gi", "local"), pvc("logs", "1Gi", "local2"),
                  pv("pv-a", "4Gi", "local", host="n1"), pv("pv-d", "2Gi", "local2", host="n1")], [63, 0, 0],
                 id="mean-over-classes-rounded"),
    # a custom shape; 50 lies between 30 (score 2) and 100 (0): 20 + (0 - 20) * 20 / 70 = 20 - 5 (Go's
    # division truncates toward zero; flooring would give 14)
    pytest.param({"shape": [{"utilization": 0, "score": 10}, {"utilization": 30, "score": 2},
                            {"utilization": 100, "score": 0}]},
                 pod("p", ("data",)),
                 [LOCAL, pvc("data", "5Gi", "local"), pv("pv-a", "10Gi", "local", host="n1")], [15, 0, 0],
                 id="custom-shape-go-division"),
    # a volume already bound: nothing to bind, every node 0
    pytest.param({}, pod("p", ("data",)), [pvc("data", cls="", volume="pv-1"), pv("pv-1", claim="data")], [0, 0, 0],
                 id="bound-claim"),
    # a claim to provision: its node capacity (CSIStorageCapacity) is not modelled, so it counts for nothing
    pytest.param({}, pod("p", ("data",)), [wffc("csi", "example.com/csi"), pvc("data", "5Gi", "csi")], [0, 0, 0],
                 id="dynamic-provisioning"),
]


@pytest.mark.parametrize(("args", "target", "objects", "want"), SCORES)
def test_score_by_the_capacity_of_the_volumes_bound(
    args: dict[str, Any], target: Pod, objects: list[StorageObject], want: list[int]
) -> None:
    snap = cluster(*objects)
    plugin = VolumeBinding(args)
    state = CycleState("c", snap)
    batch = NodeBatch(snap, np.arange(3, dtype=np.int64))
    assert run(plugin.pre_filter(state, target))[1].ok
    run(plugin.filter(state, target, batch))
    assert run(plugin.pre_score(state, target, batch)) == Status()
    assert run(plugin.score(state, target, batch)).tolist() == want


def test_a_pod_without_claims_is_scored_zero_everywhere() -> None:
    # kube-scheduler v1.37 runs PreScore for every pod (its PreFilter Skip left an empty state).
    snap = cluster()
    plugin = VolumeBinding({"bindTimeoutSeconds": 600})
    state = CycleState("c", snap)
    batch = NodeBatch(snap, np.arange(3, dtype=np.int64))
    assert run(plugin.pre_filter(state, pod("p"))) == (None, Status(Code.Skip))
    assert run(plugin.pre_score(state, pod("p"), batch)) == Status()
    assert run(plugin.score(state, pod("p"), batch)).tolist() == [0, 0, 0]


def test_pre_score_without_pre_filter_is_an_error() -> None:
    snap = cluster()
    batch = NodeBatch(snap, np.arange(3, dtype=np.int64))
    assert run(VolumeBinding().pre_score(CycleState("c", snap), pod("p"), batch)) == Status(
        Code.Error, ("not found",), "VolumeBinding"
    )


def test_without_the_storage_capacity_scoring_gate_it_scores_nothing_and_refuses_a_shape() -> None:
    previous = features.install(features.parse("StorageCapacityScoring=false"))
    try:
        with pytest.raises(PluginArgsError) as exc:
            VolumeBinding({"shape": [{"utilization": 0, "score": 0}]})
        plugin = VolumeBinding({"bindTimeoutSeconds": 600})
    finally:
        features.install(previous)
    assert str(exc.value) == (
        "VolumeBinding: shape: Invalid value: [{'utilization': 0, 'score': 0}]: unexpected field `shape`, remove it "
        "or turn on the feature gate StorageCapacityScoring"
    )
    snap = cluster(LOCAL, pvc("data", "5Gi", "local"), pv("pv-a", "10Gi", "local", host="n1"))
    state = CycleState("c", snap)
    batch = NodeBatch(snap, np.arange(3, dtype=np.int64))
    target = pod("p", ("data",))
    run(plugin.pre_filter(state, target))
    run(plugin.filter(state, target, batch))
    assert run(plugin.pre_score(state, target, batch)) == Status(Code.Skip)
    assert run(plugin.score(state, target, batch)).tolist() == [0, 0, 0]


def test_default_shape() -> None:
    assert VolumeBinding().shape == ((0, 100), (100, 0))
    assert VolumeBinding({"shape": []}).shape == ((0, 100), (100, 0))


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



