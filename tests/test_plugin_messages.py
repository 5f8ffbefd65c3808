"""The in-tree plugins' messages, word for word kube-scheduler v1.35's, as users read them in fit errors.

Every expected message in FIT_ERRORS is what kube-scheduler v1.35.4 (built by tests/k8s/build.sh, default
profile) wrote in the FailedScheduling event of the same pod on the same cluster, verbatim, except that
DynamicResources' PostFilter no longer says ``no new claims to deallocate, `` before ``preemption: ...`` (v1.37.2
gives no reason there, docs/upstream-1.37.md §5.1), and the NodeDeclaredFeatures case, which v1.35 did not run
(its message is read from v1.37.2's source); when a PreFilter plugin
before it rejected the pod, it still ends the message with ``not found`` (framework/plugins/dynamicresources.py). The
messages encode more than words: the order of the histogram (sorted as strings), the count of nodes per reason,
and, through the preemption suffix, each reason's code (only Unschedulable nodes are dry-run, and report
``No preemption victims found for incoming pod``; UnschedulableAndUnresolvable ones are "not helpful").

The cluster: taint-a (dedicated=a:NoSchedule), taint-b (gpu=true:NoExecute), cordon (unschedulable),
small (zone z1, 1 cpu), big (zone z2, 8 cpu, holds ``filler``: 7 cpu, hostPort 8080, app=filler, and
required anti-affinity to app=intruder per zone), tiny (1 cpu, room for 1 pod, holds one). Every pod
placed there has priority 0.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
import yaml

from framework.plugins.basic import NodeName, SchedulingGates
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import Scheduler
from framework.waiting import go_duration
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Pod
from pluginhost.plugin import CycleState, NodeBatch
from pluginhost.snapshot import ClusterTable
from pluginhost.status import Code, Status

CAPACITY = {"cpu": "4", "memory": "16Gi", "pods": "20"}

CLUSTER = f"""
kind: Node
metadata: {{name: taint-a}}
spec: {{taints: [{{key: dedicated, value: a, effect: NoSchedule}}]}}
status: {{allocatable: {CAPACITY}}}
---
kind: Node
metadata: {{name: taint-b}}
spec: {{taints: [{{key: gpu, value: "true", effect: NoExecute}}]}}
status: {{allocatable: {CAPACITY}}}
---
kind: Node
metadata: {{name: cordon}}
spec: {{unschedulable: true}}
status: {{allocatable: {CAPACITY}}}
---
kind: Node
metadata: {{name: small, labels: {{zone: z1}}}}
status: {{allocatable: {{cpu: "1", memory: 16Gi, pods: "20"}}}}
---
kind: Node
metadata: {{name: big, labels: {{zone: z2}}}}
status: {{allocatable: {{cpu: "8", memory: 16Gi, pods: "20"}}}}
---
kind: Node
metadata: {{name: tiny}}
status: {{allocatable: {{cpu: "1", memory: 16Gi, pods: "1"}}}}
---
kind: Pod
metadata: {{name: filler, labels: {{app: filler}}}}
spec:
  nodeName: big
  containers:
  - {{name: c, ports: [{{containerPort: 8080, hostPort: 8080}}], resources: {{requests: {{cpu: "7"}}}}}}
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {{labelSelector: {{matchLabels: {{app: intruder}}}}, topologyKey: zone}}
---
kind: Pod
metadata: {{name: tiny-filler}}
spec: {{nodeName: tiny, containers: [{{name: c}}]}}
"""

ON_SMALL = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["small"]}]}]}}}
ON_BIG = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["big"]}]}]}}}
ON_NO_NODE = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["small"]},
                     {"key": "metadata.name", "operator": "In", "values": ["big"]}]}]}}}


def cpu(amount: str) -> dict[str, Any]:
    return {"resources": {"requests": {"cpu": amount}}}


NOT_HELPFUL_6 = ("preemption: 0/6 nodes are available: 6 Preemption is not helpful "
                 "for scheduling.")
ONE_DRY_RUN = ("preemption: 0/6 nodes are available: 1 No preemption victims found "
               "for incoming pod, 5 Preemption is not helpful for scheduling.")

# (pod name, pod labels, pod spec without containers, the container's extra fields, the fit error)
FIT_ERRORS: list[Any] = [
    pytest.param(
        "cpu6", {}, {}, cpu("6"),
        "0/6 nodes are available: 1 Too many pods, 1 node(s) were unschedulable, 2 node(s) had untolerated "
        f"taint(s), 3 Insufficient cpu. {ONE_DRY_RUN}",
        id="taints-cordon-resources-and-a-node-preemption-tried",
    ),
    pytest.param(
        "cpu6-never", {}, {"priority": 100, "preemptionPolicy": "Never"}, cpu("6"),
        "0/6 nodes are available: 1 Too many pods, 1 node(s) were unschedulable, 2 node(s) had untolerated "
        "taint(s), 3 Insufficient cpu. preemption: not eligible due to "
        "preemptionPolicy=Never.",
        id="preemption-policy-never",
    ),
    pytest.param(
        "selector", {}, {"nodeSelector": {"zone": "z3"}}, {},
        "0/6 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint(s), "
        f"3 node(s) didn't match Pod's node affinity/selector. {NOT_HELPFUL_6}",
        id="node-selector",
    ),
    pytest.param(
        "name-small", {}, {"affinity": ON_SMALL}, cpu("6"),
        "0/6 nodes are available: 1 Insufficient cpu, 5 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        f"{NOT_HELPFUL_6}",
        id="nodes-a-pre-filter-result-left-out",
    ),
    pytest.param(
        "conflict", {}, {"affinity": ON_NO_NODE}, {},
        "0/6 nodes are available: pod affinity terms conflict. not found",
        id="pre-filter-rejects",
    ),
    pytest.param(
        "ports-big", {}, {"affinity": ON_BIG}, {"ports": [{"containerPort": 8080, "hostPort": 8080}], **cpu("100m")},
        "0/6 nodes are available: 1 node(s) didn't have free ports for the requested pod ports, "
        f"5 node(s) didn't satisfy plugin(s) [NodeAffinity]. {ONE_DRY_RUN}",
        id="host-port-in-use",
    ),
    pytest.param(
        "spread", {"app": "spread"},
        {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule",
                                        "labelSelector": {"matchLabels": {"app": "spread"}}}]},
        {},
        "0/6 nodes are available: 1 Too many pods, 1 node(s) were unschedulable, 2 node(s) didn't match pod "
        f"topology spread constraints (missing required label), 2 node(s) had untolerated taint(s). {ONE_DRY_RUN}",
        id="topology-key-missing",
    ),
    pytest.param(
        "affinity", {},
        {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "nothing"}}, "topologyKey": "zone"}]}}},
        {},
        "0/6 nodes are available: 1 Too many pods, 1 node(s) were unschedulable, 2 node(s) didn't match pod "
        f"affinity rules, 2 node(s) had untolerated taint(s). {ONE_DRY_RUN}",
        id="pod-affinity",
    ),
    pytest.param(
        "anti", {},
        {"nodeSelector": {"zone": "z2"},
         "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
             {"labelSelector": {"matchLabels": {"app": "filler"}}, "topologyKey": "zone"}]}}},
        {},
        "0/6 nodes are available: 1 node(s) didn't match pod anti-affinity rules, 1 node(s) were unschedulable, "
        f"2 node(s) didn't match Pod's node affinity/selector, 2 node(s) had untolerated taint(s). {ONE_DRY_RUN}",
        id="pod-anti-affinity",
    ),
    pytest.param(
        "intruder", {"app": "intruder"}, {"nodeSelector": {"zone": "z2"}}, {},
        "0/6 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules, 1 node(s) were "
        "unschedulable, 2 node(s) didn't match Pod's node affinity/selector, 2 node(s) had untolerated taint(s). "
        f"{ONE_DRY_RUN}",
        id="existing-pods-anti-affinity",
    ),
    pytest.param(
        "extended", {}, {}, {"resources": {"requests": {"example.com/foo": "1"}, "limits": {"example.com/foo": "1"}}},
        "0/6 nodes are available: 1 Too many pods, 1 node(s) were unschedulable, 2 node(s) had untolerated "
        f"taint(s), 3 Insufficient example.com/foo. {NOT_HELPFUL_6}",
        id="extended-resource-no-node-has",
    ),
    pytest.param(
        "tolerate-all", {}, {"tolerations": [{"operator": "Exists"}]}, cpu("20"),
        f"0/6 nodes are available: 1 Too many pods, 6 Insufficient cpu. {NOT_HELPFUL_6}",
        id="two-reasons-on-one-node",
    ),
    # NodeDeclaredFeatures joined the default profile in v1.37 (last at Filter): its reason, from v1.37.2's
    # source, for the nodes every other plugin let through.
    pytest.param(
        "features", {}, {"hostNetwork": True, "hostUsers": False}, {},
        "0/6 nodes are available: 1 Too many pods, 1 node(s) were unschedulable, 2 node(s) didn't match Pod's "
        f"required features, 2 node(s) had untolerated taint(s). {ONE_DRY_RUN}",
        id="node-declared-features",
    ),
]


def pod_manifest(name: str, labels: dict[str, str], spec: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {**spec, "containers": [{"name": "c", **container}]}}


@pytest.fixture(scope="module")
def fit_errors() -> dict[str, str]:
    """Every FIT_ERRORS pod submitted at once to the default profile: its last status's message."""

    async def main() -> dict[str, str]:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry, seed=3)
        docs = list(yaml.safe_load_all(CLUSTER))
        await s.apply([node_from_dict(d) if d["kind"] == "Node" else pod_from_dict(d) for d in docs])
        task = asyncio.get_running_loop().create_task(s.run())
        pods = [pod_from_dict(pod_manifest(*case.values[:4])) for case in FIT_ERRORS]
        await s.apply(pods)
        try:
            for _ in range(500):  # at most 10 s
                recs = [s.get_pod("default", p.name) for p in pods]
                if all(r is not None and r.phase == "Unschedulable" for r in recs):
                    break
                await asyncio.sleep(0.02)
            out = {}
            for p in pods:
                rec = s.get_pod("default", p.name)
                assert rec is not None and rec.phase == "Unschedulable", f"{p.name}: {rec and rec.phase}"
                assert rec.last_status is not None
                out[p.name] = rec.last_status.message()
            return out
        finally:
            await s.stop()
            task.cancel()

    return asyncio.run(asyncio.wait_for(main(), 30))


@pytest.mark.parametrize(("name", "labels", "spec", "container", "message"), FIT_ERRORS)
def test_fit_error_is_kube_schedulers(
    fit_errors: dict[str, str], name: str, labels: Any, spec: Any, container: Any, message: str
) -> None:
    assert fit_errors[name] == message


def plain_pod(**spec: Any) -> Pod:
    return pod_from_dict({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}})


@pytest.mark.parametrize(
    ("gates", "want"),
    [
        pytest.param([], Status(Code.Success), id="no-gates"),
        pytest.param(["a"], Status(Code.UnschedulableAndUnresolvable, ("waiting for scheduling gates: [a]",),
                                   "SchedulingGates"), id="one-gate"),
        pytest.param(["a", "b"], Status(Code.UnschedulableAndUnresolvable, ("waiting for scheduling gates: [a b]",),
                                        "SchedulingGates"), id="gates-in-order"),
    ],
)
def test_scheduling_gates_message(gates: list[str], want: Status) -> None:
    pod = plain_pod(schedulingGates=[{"name": g} for g in gates])
    assert asyncio.run(SchedulingGates().pre_enqueue(pod)) == want


def test_node_name_message() -> None:
    """A pod naming a node is scheduled only when it is not bound yet (a scheduler's own view of
    ``spec.nodeName``, as in a what-if): every other node is UnschedulableAndUnresolvable."""
    table = ClusterTable()
    for n in ("a", "b"):
        table.upsert_node(node_from_dict({"metadata": {"name": n}}))
    snap = table.snapshot()
    pod = plain_pod(nodeName="b")
    res = asyncio.run(NodeName().filter(CycleState(snapshot=snap), pod, NodeBatch(snap, np.arange(2, dtype=np.int64))))
    assert [(res.status_at(i).code, res.status_at(i).reasons) for i in range(2)] == [
        (Code.UnschedulableAndUnresolvable, ("node(s) didn't match the requested node name",)),
        (Code.Success, ()),
    ]


@pytest.mark.parametrize(
    ("seconds", "want"),
    [(0, "0s"), (1e-9, "1ns"), (1.5e-6, "1.5µs"), (0.05, "50ms"), (0.2505, "250.5ms"), (1, "1s"), (1.5, "1.5s"),
     (60, "1m0s"), (90, "1m30s"), (3600, "1h0m0s"), (3661.25, "1h1m1.25s"), (-2, "-2s")],
)
def test_permit_timeouts_are_written_as_go_durations(seconds: float, want: str) -> None:
    """kube-scheduler's ``rejected due to timeout after waiting %v at plugin %v`` prints a time.Duration."""
    assert go_duration(seconds) == want
