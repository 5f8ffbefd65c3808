"""Workload and PodGroup (``scheduling.k8s.io/v1beta1``, and ``v1alpha2`` as a 1.36 API server serves
them) and pods' ``spec.schedulingGroup``: strict decoding with the API server's words, the scheduler's
PodGroup store (a failed decode changes nothing, condition writes), and the embedded store's apply
and printing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import yaml

from framework.config import default_config
from framework.plugins import in_tree_registry
from framework.podgroups.embedded import describe_pod_group, pod_group_rows
from framework.podgroups.store import PodGroupDecodeError, PodGroupStore
from framework.scheduler import Scheduler
from pluginhost.manifest import ManifestError, parse_objects
from pluginhost.workload import BASIC, GANG, PodGroup, PodGroupCondition, Workload, WorkloadRef

V1BETA1, V1ALPHA2 = "scheduling.k8s.io/v1beta1", "scheduling.k8s.io/v1alpha2"


def pod_group(spec: dict[str, Any], version: str = V1BETA1, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": version, "kind": "PodGroup", "metadata": {"name": "pg", **meta}, "spec": spec}


GANG4 = {"schedulingPolicy": {"gang": {"minCount": 4}}}

VALID = [
    ("basic", pod_group({"schedulingPolicy": {"basic": {}}}), {"policy": BASIC, "min_count": 1}),
    ("gang with topology and priority",
     pod_group({**GANG4, "schedulingConstraints": {"topology": [{"key": "zone"}]}, "priority": 7,
                "priorityClassName": "high", "preemptionPolicy": "Never", "disruptionMode": {"all": {}},
                "workloadRef": {"workloadName": "job", "templateName": "workers"}}),
     {"policy": GANG, "min_count": 4, "topology_keys": ("zone",), "priority": 7, "priority_class_name": "high",
      "preemption_policy": "Never", "disruption_mode": "All", "workload_ref": WorkloadRef("job", "workers")}),
    ("v1alpha2 names its workload podGroupTemplateRef",
     pod_group({**GANG4, "disruptionMode": "PodGroup",
                "podGroupTemplateRef": {"workload": {"workloadName": "job", "podGroupTemplateName": "w"}}}, V1ALPHA2),
     {"api_version": V1ALPHA2, "min_count": 4, "disruption_mode": "All", "workload_ref": WorkloadRef("job", "w")}),
    ("status conditions",
     {**pod_group(GANG4), "status": {"conditions": [
         {"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "Unschedulable", "message": "m",
          "observedGeneration": 2, "lastTransitionTime": "2026-01-02T03:04:05Z"}]}},
     {"conditions": (PodGroupCondition("PodGroupInitiallyScheduled", "False", "Unschedulable", "m", 2,
                                       "2026-01-02T03:04:05Z"),)}),
]


@pytest.mark.parametrize(("manifest", "want"), [c[1:] for c in VALID], ids=[c[0] for c in VALID])
def test_pod_group_decodes(manifest: dict[str, Any], want: dict[str, Any]) -> None:
    [pg] = parse_objects(yaml.safe_dump(manifest))
    assert isinstance(pg, PodGroup)
    assert {k: getattr(pg, k) for k in want} == want


INVALID = [
    ("unknown field", pod_group({**GANG4, "minCount": 3}), 'unknown field "spec.minCount"'),
    ("a 1.37 field in a v1alpha2 object", pod_group({**GANG4, "preemptionPolicy": "Never"}, V1ALPHA2),
     'unknown field "spec.preemptionPolicy"'),
    ("workloadRef in v1alpha2", pod_group({**GANG4, "workloadRef": {}}, V1ALPHA2), 'unknown field "spec.workloadRef"'),
    ("v1beta1's disruption mode names in v1alpha2", pod_group({**GANG4, "disruptionMode": "All"}, V1ALPHA2),
     'spec.disruptionMode: unsupported disruptionMode "All" (supported: Pod, PodGroup)'),
    ("no policy", pod_group({"schedulingPolicy": {}}),
     "spec.schedulingPolicy: Invalid value: must specify one of: `basic`, `gang`"),
    ("both policies", pod_group({"schedulingPolicy": {"basic": {}, "gang": {"minCount": 1}}}),
     "spec.schedulingPolicy: Invalid value: must specify exactly one of: `basic`, `gang`"),
    ("minCount zero", pod_group({"schedulingPolicy": {"gang": {"minCount": 0}}}),
     "spec.schedulingPolicy.gang.minCount: Invalid value: 0: must be greater than zero"),
    ("minCount not a number", pod_group({"schedulingPolicy": {"gang": {"minCount": "4"}}}),
     "spec.schedulingPolicy.gang.minCount: expected an integer, got string"),
    ("two topology keys", pod_group({**GANG4, "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}}),
     "spec.schedulingConstraints.topology: Too many: 2: must have at most 1 item"),
    ("preemption policy", pod_group({**GANG4, "preemptionPolicy": "Sometimes"}),
     'spec.preemptionPolicy: unsupported preemptionPolicy "Sometimes" (supported: Never, PreemptLowerPriority)'),
    ("no spec", {"apiVersion": V1BETA1, "kind": "PodGroup", "metadata": {"name": "pg"}}, "spec: Required value"),
    ("another version", pod_group(GANG4, "scheduling.k8s.io/v1"),
     'apiVersion: unsupported apiVersion "scheduling.k8s.io/v1" for PodGroup '
     '(expected "scheduling.k8s.io/v1beta1" or "scheduling.k8s.io/v1alpha2")'),
]


@pytest.mark.parametrize(("manifest", "message"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_pod_group_strictness(manifest: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as exc:
        parse_objects(yaml.safe_dump(manifest), "pg.yaml")
    assert str(exc.value) == f"pg.yaml: document 1 (PodGroup default/pg): {message}"


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}

POD_CASES = [
    ("no group", {}, None, None),
    ("a group", {"schedulingGroup": {"podGroupName": "train"}}, "train", None),
    ("misspelt", {"schedulingGroup": {"podGroupNam": "train"}}, None,
     'unknown field "spec.schedulingGroup.podGroupNam"'),
    ("workloadRef is gone since 1.36", {"workloadRef": {"name": "w"}}, None, 'unknown field "spec.workloadRef"'),
    ("empty", {"schedulingGroup": {}}, None,
     "spec.schedulingGroup: Invalid value: must specify one of: `podGroupName`"),
    ("not a DNS subdomain", {"schedulingGroup": {"podGroupName": "Train"}}, None,
     'spec.schedulingGroup.podGroupName: Invalid value: "Train": a lowercase RFC 1123 subdomain must consist of '
     "lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
     "(e.g. 'example.com', regex used for validation is "
     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
]


@pytest.mark.parametrize(("spec", "group", "error"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES])
def test_pod_scheduling_group(spec: dict[str, Any], group: str | None, error: str | None) -> None:
    manifest = {**POD, "spec": {**POD["spec"], **spec}}  # type: ignore[dict-item]
    if error is None:
        [pod] = parse_objects(yaml.safe_dump(manifest))
        assert pod.scheduling_group == group  # type: ignore[union-attr]
        return
    with pytest.raises(ManifestError) as exc:
        parse_objects(yaml.safe_dump(manifest), "p.yaml")
    assert str(exc.value) == f"p.yaml: document 1 (Pod default/p): {error}"


def test_a_failed_decode_changes_nothing() -> None:
    store = PodGroupStore()
    heard: list[tuple[str, Any, Any]] = []
    store.add_listener(lambda kind, old, new: heard.append((kind, old, new)))
    store.apply("PodGroup", pod_group(GANG4, uid="u1"))
    with pytest.raises(PodGroupDecodeError) as exc:
        store.apply("PodGroup", pod_group({"schedulingPolicy": {"gang": {"minCount": -1}}}, uid="u1"))
    assert str(exc.value) == \
        "PodGroup default/pg: spec.schedulingPolicy.gang.minCount: Invalid value: -1: must be greater than zero"
    assert store.get("default", "pg").min_count == 4  # type: ignore[union-attr]
    assert [(k, old is None, new.min_count) for k, old, new in heard] == [("PodGroup", True, 4)]


def test_condition_writes_replace_the_type() -> None:
    store = PodGroupStore()
    pg = store.apply("PodGroup", pod_group(GANG4, uid="u1", generation=3))
    assert isinstance(pg, PodGroup)
    for status, reason in (("False", "Unschedulable"), ("True", "Scheduled")):
        cond = PodGroupCondition("PodGroupInitiallyScheduled", status, reason, "msg", 3, "2026-01-02T03:04:05Z")
        asyncio.run(store.writer.write_condition(store.get("default", "pg"), cond))  # type: ignore[arg-type]
    got = store.get("default", "pg")
    assert got is not None
    assert got.conditions == (PodGroupCondition("PodGroupInitiallyScheduled", "True", "Scheduled", "msg", 3,
                                                "2026-01-02T03:04:05Z"),)


WORKLOAD = """
apiVersion: scheduling.k8s.io/v1beta1
kind: Workload
metadata: {name: job}
spec:
  podGroupTemplates:
  - name: workers
    schedulingPolicy: {gang: {minCount: 2}}
    schedulingConstraints: {topology: [{key: zone}]}
---
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: job-workers, labels: {app: job}}
spec:
  workloadRef: {workloadName: job, templateName: workers}
  schedulingPolicy: {gang: {minCount: 2}}
  schedulingConstraints: {topology: [{key: zone}]}
---
apiVersion: v1
kind: Pod
metadata: {name: w0}
spec:
  schedulingGroup: {podGroupName: job-workers}
  containers: [{name: c, image: x}]
"""


def test_apply_and_print_on_the_embedded_store() -> None:
    async def scenario() -> None:
        registry = in_tree_registry()
        sched = Scheduler(default_config(registry.points()), registry)
        results = await sched.apply(parse_objects(WORKLOAD))
        assert [(r.kind, r.name, r.action) for r in results] == [
            ("Workload", "job", "created"), ("PodGroup", "job-workers", "created"), ("Pod", "w0", "created")]
        again = await sched.apply(parse_objects(WORKLOAD))
        assert [r.action for r in again][:2] == ["unchanged", "unchanged"]
        workload = sched.cache.podgroups.workload("default", "job")
        assert isinstance(workload, Workload) and [t.min_count for t in workload.pod_group_templates] == [2]
        pg = sched.cache.podgroups.get("default", "job-workers")
        # As a 1.37 API server keeps a PodGroup: no metadata.generation.
        assert pg is not None and pg.generation == 0 and "generation" not in pg.raw["metadata"]
        assert pod_group_rows([pg], now=pg.creation_timestamp + 75) == [
            ["NAME", "POLICY", "WORKLOAD", "STATUS", "AGE"], ["job-workers", "Gang", "job", "Pending", "75s"]]
        assert pod_group_rows([pg], all_namespaces=True, now=pg.creation_timestamp + 3 * 3600) == [
            ["NAMESPACE", "NAME", "POLICY", "WORKLOAD", "STATUS", "AGE"],
            ["default", "job-workers", "Gang", "job", "Pending", "3h"]]
        text = describe_pod_group(pg, lambda: [p.name for p in sched.cache.podgroups.members("default", pg.name)])
        meta = pg.raw["metadata"]
        assert text == (
            "Name:         job-workers\nNamespace:    default\nLabels:       app=job\nAnnotations:  <none>\n"
            "API Version:  scheduling.k8s.io/v1beta1\nKind:         PodGroup\nMetadata:\n"
            f"  Creation Timestamp:  {meta['creationTimestamp']}\n  Resource Version:    {meta['resourceVersion']}\n"
            f"  UID:                 {pg.uid}\nSpec:\n"
            "  Scheduling Constraints:\n    Topology:\n      Key:  zone\n"
            "  Scheduling Policy:\n    Gang:\n      Min Count:  2\n"
            "  Workload Ref:\n    Template Name:  workers\n    Workload Name:  job\n"
            "Pods:               w0\nEvents:             <none>\n")
        assert sched.delete_pod_group("PodGroup", "default", "job-workers") is pg
        assert sched.cache.podgroups.get("default", "job-workers") is None

    asyncio.run(scenario())
