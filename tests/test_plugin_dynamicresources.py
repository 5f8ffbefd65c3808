"""DynamicResources: what kube-scheduler v1.37.2's plugin answers at each point for a pod without
ResourceClaims, the PreEnqueue messages for claims that cannot be found, and where the default profile
puts it.

Expectations follow ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`` (v1.37.2):
PreFilter writes its state and answers Skip, PostFilter answers Unschedulable with no reason (or the
cycle-state lister's ``not found`` when PreFilter never ran), Score is 0, Reserve succeeds, PreBind's
pre-flight answers Skip; ``resourceclaim.Name`` and the claim assume-cache word the PreEnqueue messages.
Pods with claims, point by point, are in test_dra_plugin.py; scheduled end to end in test_dra_scheduling.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from framework.dra.store import DraStore
from framework.plugins import PluginArgsError, in_tree_registry
from framework.plugins.dynamicresources import DynamicResources, claim_problem
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import Scheduler
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Pod
from pluginhost.plugin import ActionType, CycleState, NodeBatch, NodeToStatus, points_of
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import Code, Status

OK = Status()


def make_pod(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None, name: str = "p") -> Pod:
    doc: dict[str, Any] = {"metadata": {"name": name, "namespace": "ns"},
                           "spec": {"containers": [{"name": "c"}], **(spec or {})}}
    if status is not None:
        doc["status"] = status
    return pod_from_dict(doc)


def snapshot(n: int) -> Snapshot:
    table = ClusterTable()
    for i in range(n):
        table.upsert_node(node_from_dict({"metadata": {"name": f"n{i}"},
                                          "status": {"allocatable": {"cpu": "4", "pods": "10"}}}))
    return table.snapshot()


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_it_implements_upstreams_extension_points() -> None:
    assert points_of(DynamicResources) == frozenset(
        {"preEnqueue", "preFilter", "filter", "postFilter", "score", "reserve", "preBind"}
    )


# ---- PreEnqueue: a pod's claims ------------------------------------------------------------------

CLAIMS = [
    pytest.param({}, None, "", id="no-claims"),
    pytest.param({"resourceClaims": []}, None, "", id="empty-list"),
    pytest.param({"resourceClaims": [{"name": "gpu", "resourceClaimName": "my-gpu"}]}, None,
                 'could not find ResourceClaim "ns/my-gpu"', id="named-claim-missing"),
    pytest.param({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]}, None,
                 'pod "ns/p": ResourceClaim not created yet', id="template-claim-not-created"),
    pytest.param({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
                 {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]},
                 'could not find ResourceClaim "ns/p-gpu-x1"', id="template-claim-generated-missing"),
    pytest.param({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
                 {"resourceClaimStatuses": [{"name": "gpu"}]}, "", id="template-claim-deliberately-absent"),
    pytest.param({"resourceClaims": [{"name": "gpu"}]}, None,
                 'pod "ns/p", spec.resourceClaim "gpu": none of the supported fields are set', id="neither-field"),
]


@pytest.mark.parametrize(("spec", "status", "problem"), CLAIMS)
def test_pre_enqueue_holds_back_pods_whose_claims_do_not_exist(spec: dict[str, Any], status: Any,
                                                                problem: str) -> None:
    pod = make_pod(spec, status)
    assert claim_problem(DraStore(), pod) == problem
    want = OK if not problem else Status(Code.UnschedulableAndUnresolvable, (problem,), "DynamicResources")
    assert run(DynamicResources().pre_enqueue(pod)) == want


# ---- each point for a pod without claims -------------------------------------------------------


def test_pre_filter_records_no_claims_and_skips() -> None:
    state = CycleState(snapshot=snapshot(3))
    result, status = run(DynamicResources().pre_filter(state, make_pod()))
    assert (result, status.code, "DynamicResources" in state) == (None, Code.Skip, True)


@pytest.mark.parametrize(
    ("pre_filter_ran", "want"),
    [
        pytest.param(True, Status(Code.Unschedulable), id="after-pre-filter"),
        pytest.param(False, Status(Code.Error, ("not found",), "DynamicResources"),
                     id="pre-filter-never-ran"),
    ],
)
def test_post_filter_answers_as_upstream(pre_filter_ran: bool, want: Status) -> None:
    pl, pod = DynamicResources(), make_pod()
    state = CycleState(snapshot=snapshot(2))
    if pre_filter_ran:
        run(pl.pre_filter(state, pod))
    result, status = run(pl.post_filter(state, pod, NodeToStatus()))
    assert (result, status) == (None, want)


@pytest.mark.parametrize("nodes", [1, 4])
def test_score_is_zero_on_every_node_and_stays_zero_normalized(nodes: int) -> None:
    pl, pod = DynamicResources(), make_pod()
    snap = snapshot(nodes)
    state = CycleState(snapshot=snap)
    run(pl.pre_filter(state, pod))
    batch = NodeBatch(snap, np.arange(nodes, dtype=np.int64))
    scores = run(pl.score(state, pod, batch))
    assert run(pl.normalize_score(state, pod, batch, scores)) == OK
    assert scores.tolist() == [0] * nodes


def test_filter_reserve_and_pre_bind_leave_the_pod_alone() -> None:
    pl, pod = DynamicResources(), make_pod()
    snap = snapshot(3)
    state = CycleState(snapshot=snap)
    run(pl.pre_filter(state, pod))
    filtered = run(pl.filter(state, pod, NodeBatch(snap, np.arange(3, dtype=np.int64))))
    assert [filtered.status_at(i).code for i in range(3)] == [Code.Success] * 3
    assert run(pl.reserve(state, pod, "n0")) == OK
    assert run(pl.unreserve(state, pod, "n0")) is None
    assert run(pl.pre_bind_pre_flight(state, pod, "n0")).code is Code.Skip
    assert run(pl.pre_bind(state, pod, "n0")) == OK


def test_events_are_upstreams_with_queueing_hints_on() -> None:
    events = [(e.event.resource, e.event.action) for e in DynamicResources().events_to_register()]
    assert events == [
        ("Node", ActionType.Add | ActionType.UpdateNodeLabel | ActionType.UpdateNodeAllocatable),
        ("ResourceClaim", ActionType.Add | ActionType.Update | ActionType.Delete),
        ("TargetPod", ActionType.UpdatePodGeneratedResourceClaim),
        ("DeviceClass", ActionType.Add | ActionType.Update),
        ("ResourceSlice", ActionType.Add | ActionType.Update),
    ]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        pytest.param(None, "", id="none"),
        pytest.param({"filterTimeout": "10s", "bindingTimeout": "600s"}, "", id="upstream-args"),
        pytest.param({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "DynamicResourcesArgs"}, "",
                     id="typed"),
        pytest.param({"filterTimeout": "10s", "claims": 1}, "DynamicResources: unknown args field(s) ['claims']",
                     id="unknown-field"),
        pytest.param({"filterTimeout": "-1s"},
                     'DynamicResources: filterTimeout: Invalid value: "-1s": must be zero or positive',
                     id="negative-filter-timeout"),
        pytest.param({"bindingTimeout": "500ms"},
                     'DynamicResources: bindingTimeout: Invalid value: "500ms": must be at least 1 second',
                     id="binding-timeout-under-a-second"),
        pytest.param({"filterTimeout": 10},
                     'DynamicResources: filterTimeout: expected a duration such as "10s", got 10', id="not-a-duration"),
    ],
)
def test_args_are_upstreams_and_nothing_else(args: dict[str, Any] | None, error: str) -> None:
    if not error:
        DynamicResources(args)
        return
    with pytest.raises(PluginArgsError) as exc:
        DynamicResources(args)
    assert str(exc.value) == error


# ---- in the default profile ----------------------------------------------------------------------


def test_the_default_profile_runs_it_before_default_preemption_with_weight_2() -> None:
    cfg = default_scheduler_config(in_tree_registry())
    (prof,) = cfg.profiles
    assert cfg.warnings == []
    assert prof.names("postFilter") == ["DynamicResources", "DefaultPreemption"]
    assert "DynamicResources" in prof.names("preFilter") and "DynamicResources" in prof.names("filter")
    assert prof.score_weights["DynamicResources"] == 2
    assert "DynamicResources" in prof.names("preEnqueue") and "DynamicResources" in prof.names("reserve")


CLUSTER = [
    {"metadata": {"name": "small", "labels": {"zone": "z1"}},
     "status": {"allocatable": {"cpu": "1", "memory": "4Gi", "pods": "10"}}},
    {"metadata": {"name": "big", "labels": {"zone": "z2"}},
     "status": {"allocatable": {"cpu": "4", "memory": "4Gi", "pods": "10"}}},
]
BY_NAME = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["small"]},
                     {"key": "metadata.name", "operator": "In", "values": ["big"]}]}]}}}

FITS = [  # (pod name, spec without containers, cpu, what the pod ends with)
    pytest.param("fits", {}, "1", ("Bound", "big", ""), id="scheduled-scores-unchanged"),
    pytest.param("too-big", {}, "8", ("Unschedulable", "", "0/2 nodes are available: 2 Insufficient cpu. "
                                      "preemption: 0/2 nodes are available: 2 Preemption is not "
                                      "helpful for scheduling."), id="post-filter-adds-no-reason-before-preemption"),
    pytest.param("conflict", {"affinity": BY_NAME}, "1",
                 ("Unschedulable", "", "0/2 nodes are available: pod affinity terms conflict. not found"),
                 id="pre-filter-rejected-so-post-filter-fails"),
    pytest.param("claims", {"resourceClaims": [{"name": "gpu", "resourceClaimName": "g"}]}, "1",
                 ("Gated", "", 'could not find ResourceClaim "default/g"'), id="claims-held-back"),
]


@pytest.mark.parametrize(("name", "spec", "cpu", "want"), FITS)
def test_default_profile_schedules_and_words_failures_as_kube_scheduler(name: str, spec: dict[str, Any], cpu: str,
                                                                        want: tuple[str, str, str]) -> None:
    async def main() -> tuple[str, str, str]:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry, seed=1)
        await s.apply([node_from_dict(n) for n in CLUSTER])
        task = asyncio.get_running_loop().create_task(s.run())
        pod = pod_from_dict({"metadata": {"name": name}, "spec": {
            **spec, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}})
        try:
            await s.apply([pod])
            for _ in range(250):  # at most 5 s
                rec = s.get_pod("default", name)
                if rec is not None and rec.phase in ("Bound", "Unschedulable"):
                    break
                if rec is not None and s.queue_of(pod.uid) == "gated":
                    break
                await asyncio.sleep(0.02)
            rec = s.get_pod("default", name)
            assert rec is not None
            if s.queue_of(pod.uid) == "gated":
                info = s.queue.info(pod.uid)
                return "Gated", "", info.last_status.message() if info and info.last_status else ""
            failed = rec.last_status is not None and rec.phase != "Bound"
            return rec.phase, rec.pod.node_name, rec.last_status.message() if failed and rec.last_status else ""
        finally:
            await s.stop()
            task.cancel()

    assert asyncio.run(asyncio.wait_for(main(), 20)) == want
