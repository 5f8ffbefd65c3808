"""Tests for pluginhost.manifest: v1 Pod/Node manifests to the model, requests, and error messages."""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from pluginhost.manifest import (
    ManifestError,
    compute_requests,
    finish_pod,
    load_documents,
    node_from_dict,
    node_to_dict,
    parse_objects,
    pod_from_dict,
    pod_to_dict,
)
from pluginhost.model import (
    Affinity,
    Container,
    ContainerImage,
    ContainerPort,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)

GI = 2**30
MI = 2**20


def pod_manifest(
    *,
    meta: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    container: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A valid Pod manifest named default/web-1 with one container, with the given overrides."""
    c: dict[str, Any] = {"name": "app", "image": "nginx"}
    c.update(container or {})
    m: dict[str, Any] = {"name": "web-1"}
    m.update(meta or {})
    s: dict[str, Any] = {"containers": [c]}
    s.update(spec or {})
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": m, "spec": s}
    if status is not None:
        obj["status"] = status
    return obj


def node_manifest(
    *,
    meta: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    m: dict[str, Any] = {"name": "n1"}
    m.update(meta or {})
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": m}
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


def parse_one(obj: dict[str, Any]) -> Pod | Node:
    [parsed] = parse_objects(yaml.safe_dump(obj), "pods.yaml")
    return parsed


def parse_pod(obj: dict[str, Any]) -> Pod:
    pod = parse_one(obj)
    assert isinstance(pod, Pod)
    return pod


def parse_node(obj: dict[str, Any]) -> Node:
    node = parse_one(obj)
    assert isinstance(node, Node)
    return node


# ---------------------------------------------------------------------------------------------
# Documents


def test_multi_document_yaml_skips_empty_documents_and_keeps_file_numbering() -> None:
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: a}
spec: {containers: [{name: c}]}
---
---
# only a comment
---
apiVersion: v1
kind: Node
metadata: {name: n1}
"""
    docs = load_documents(text, "f.yaml")
    assert [label for label, _ in docs] == ["f.yaml: document 1", "f.yaml: document 4"]
    objs = parse_objects(text, "f.yaml")
    assert [(type(o).__name__, o.name) for o in objs] == [("Pod", "a"), ("Node", "n1")]


def test_leading_separator_and_trailing_separator() -> None:
    text = "---\nkind: Node\nmetadata: {name: n1}\n---\n"
    assert load_documents(text) == [("<input>: document 1", {"kind": "Node", "metadata": {"name": "n1"}})]


@pytest.mark.parametrize(
    "text",
    ["", "---\n", "---\n---\n", "# nothing\n", "\n\n  \n", "apiVersion: v1\nkind: List\nitems: []\n",
     "kind: PodList\n"],
    ids=["empty", "separator", "separators", "comment", "blank", "empty-list", "list-without-items"],
)
def test_input_without_objects_is_an_error_as_in_kubectl_apply(text: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_objects(text, "in.yaml")
    assert (str(err.value), err.value.location, err.value.reason) == (
        "in.yaml: no objects passed to apply", "in.yaml", "no objects passed to apply")
    assert load_documents(text, "in.yaml") == []  # splitting alone finds nothing, without complaint


def test_json_object() -> None:
    obj = pod_manifest()
    text = json.dumps(obj, indent="\t")  # tab indentation is fine JSON but not YAML
    [(label, doc)] = load_documents(text, "pod.json")
    assert label == "pod.json: document 1"
    assert doc == obj
    [pod] = parse_objects(text, "pod.json")
    assert isinstance(pod, Pod) and pod.key == "default/web-1"


def test_json_list() -> None:
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod_manifest(), node_manifest()]})
    assert [type(o).__name__ for o in parse_objects(text)] == ["Pod", "Node"]


def test_kind_list_is_expanded_with_item_labels() -> None:
    text = yaml.safe_dump_all(
        [
            node_manifest(meta={"name": "n0"}),
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [pod_manifest(meta={"name": "a"}), node_manifest()],
            },
        ]
    )
    docs = load_documents(text, "all.yaml")
    assert [label for label, _ in docs] == [
        "all.yaml: document 1",
        "all.yaml: document 2, items[0]",
        "all.yaml: document 2, items[1]",
    ]
    assert [o.name for o in parse_objects(text, "all.yaml")] == ["n0", "a", "n1"]


def test_typed_list_items_inherit_kind_and_api_version() -> None:
    # API list responses (GET /api/v1/pods) leave kind and apiVersion off the items.
    item = pod_manifest()
    del item["kind"], item["apiVersion"]
    text = json.dumps({"apiVersion": "v1", "kind": "PodList", "items": [item]})
    [(_, doc)] = load_documents(text)
    assert doc["kind"] == "Pod" and doc["apiVersion"] == "v1"
    [pod] = parse_objects(text)
    assert isinstance(pod, Pod)


@pytest.mark.parametrize("items", ["items: []", "items: null", ""])
def test_empty_lists(items: str) -> None:
    assert load_documents(f"apiVersion: v1\nkind: NodeList\n{items}\n") == []


# ---------------------------------------------------------------------------------------------
# Pod fields


def _uuid4(s: str) -> bool:
    return uuid.UUID(s).version == 4


NODE_AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["a", "b"]},
                        {"key": "gpu", "operator": "DoesNotExist"},
                        {"key": "cores", "operator": "Gt", "values": ["4"]},
                    ]
                },
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]},
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 7, "preference": {"matchExpressions": [{"key": "k", "operator": "Exists"}]}}
        ],
    }
}

POD_AFFINITY: dict[str, Any] = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "topologyKey": "zone",
                "labelSelector": {
                    "matchLabels": {"app": "db"},
                    "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}],
                },
                "namespaces": ["a", "b"],
                "namespaceSelector": {},
                "matchLabelKeys": ["pod-template-hash"],
                "mismatchLabelKeys": ["tenant"],
            }
        ]
    },
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "web"}},
                },
            }
        ]
    },
}


POD_FIELD_CASES: list[tuple[str, dict[str, Any], Callable[[Pod], Any], Any]] = [
    ("name", pod_manifest(), lambda p: p.name, "web-1"),
    ("namespace defaults", pod_manifest(), lambda p: p.namespace, "default"),
    ("namespace", pod_manifest(meta={"namespace": "team-a"}), lambda p: p.key, "team-a/web-1"),
    ("dotted name", pod_manifest(meta={"name": "web.v2-1"}), lambda p: p.name, "web.v2-1"),
    ("uid", pod_manifest(meta={"uid": "abc-123"}), lambda p: p.uid, "abc-123"),
    ("uid generated", pod_manifest(), lambda p: _uuid4(p.uid), True),
    (
        "labels and annotations",
        pod_manifest(
            meta={"labels": {"app": "web", "app.kubernetes.io/name": "x"}, "annotations": {"a": ""}}
        ),
        lambda p: (p.labels, p.annotations),
        ({"app": "web", "app.kubernetes.io/name": "x"}, {"a": ""}),
    ),
    (
        "creationTimestamp",
        pod_manifest(meta={"creationTimestamp": "2024-01-02T03:04:05Z"}),
        lambda p: p.creation_timestamp,
        1704164645.0,
    ),
    (
        "creationTimestamp with offset and fraction",
        pod_manifest(meta={"creationTimestamp": "2024-01-02T05:04:05.25+02:00"}),
        lambda p: p.creation_timestamp,
        1704164645.25,
    ),
    (
        "deletionTimestamp",
        pod_manifest(meta={"deletionTimestamp": "1970-01-01T00:01:40Z"}),
        lambda p: p.deletion_timestamp,
        100.0,
    ),
    ("deletionTimestamp absent", pod_manifest(), lambda p: p.deletion_timestamp, None),
    ("schedulerName default", pod_manifest(), lambda p: p.scheduler_name, "default-scheduler"),
    ("schedulerName", pod_manifest(spec={"schedulerName": "mine"}), lambda p: p.scheduler_name, "mine"),
    ("nodeName", pod_manifest(spec={"nodeName": "n1"}), lambda p: p.node_name, "n1"),
    ("priority default", pod_manifest(), lambda p: p.priority, 0),
    ("priority", pod_manifest(spec={"priority": -5}), lambda p: p.priority, -5),
    (
        "priorityClassName",
        pod_manifest(spec={"priorityClassName": "high"}),
        lambda p: p.priority_class_name,
        "high",
    ),
    ("preemptionPolicy default", pod_manifest(), lambda p: p.preemption_policy, "PreemptLowerPriority"),
    (
        "preemptionPolicy",
        pod_manifest(spec={"preemptionPolicy": "Never"}),
        lambda p: p.preemption_policy,
        "Never",
    ),
    (
        "nodeSelector",
        pod_manifest(spec={"nodeSelector": {"disk": "ssd"}}),
        lambda p: p.node_selector,
        {"disk": "ssd"},
    ),
    ("no affinity", pod_manifest(), lambda p: p.affinity, None),
    ("empty affinity is none", pod_manifest(spec={"affinity": {}}), lambda p: p.affinity, None),
    (
        "node affinity",
        pod_manifest(spec={"affinity": NODE_AFFINITY}),
        lambda p: p.affinity,
        Affinity(
            node_affinity=NodeAffinity(
                required=[
                    NodeSelectorTerm(
                        match_expressions=[
                            NodeSelectorRequirement("zone", "In", ("a", "b")),
                            NodeSelectorRequirement("gpu", "DoesNotExist"),
                            NodeSelectorRequirement("cores", "Gt", ("4",)),
                        ]
                    ),
                    NodeSelectorTerm(
                        match_fields=[NodeSelectorRequirement("metadata.name", "NotIn", ("n9",))]
                    ),
                ],
                preferred=[
                    PreferredSchedulingTerm(7, NodeSelectorTerm([NodeSelectorRequirement("k", "Exists")]))
                ],
            )
        ),
    ),
    (
        "preferred-only node affinity has no required terms",
        pod_manifest(
            spec={
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}]
                    }
                }
            }
        ),
        lambda p: p.affinity and p.affinity.node_affinity,
        NodeAffinity(required=None, preferred=[PreferredSchedulingTerm(1, NodeSelectorTerm())]),
    ),
    (
        "pod affinity and anti-affinity",
        pod_manifest(spec={"affinity": POD_AFFINITY}),
        lambda p: p.affinity,
        Affinity(
            pod_affinity=PodAffinity(
                required=[
                    PodAffinityTerm(
                        topology_key="zone",
                        label_selector=LabelSelector(
                            {"app": "db"}, [LabelSelectorRequirement("tier", "NotIn", ("x",))]
                        ),
                        namespaces=("a", "b"),
                        namespace_selector=LabelSelector(),
                        match_label_keys=("pod-template-hash",),
                        mismatch_label_keys=("tenant",),
                    )
                ]
            ),
            pod_anti_affinity=PodAffinity(
                preferred=[
                    WeightedPodAffinityTerm(
                        100,
                        PodAffinityTerm(
                            "kubernetes.io/hostname", label_selector=LabelSelector({"app": "web"})
                        ),
                    )
                ]
            ),
        ),
    ),
    (
        "tolerations",
        pod_manifest(
            spec={
                "tolerations": [
                    {"key": "dedicated", "value": "web", "effect": "NoSchedule"},
                    {"operator": "Exists"},
                    {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30},
                    {"key": "e", "operator": "", "value": "v"},
                ]
            }
        ),
        lambda p: p.tolerations,
        [
            Toleration(key="dedicated", operator="Equal", value="web", effect="NoSchedule"),
            Toleration(operator="Exists"),
            Toleration(key="k", operator="Exists", effect="NoExecute", toleration_seconds=30),
            Toleration(key="e", operator="Equal", value="v"),
        ],
    ),
    (
        "topologySpreadConstraints",
        pod_manifest(
            spec={
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {
                        "maxSkew": 2,
                        "topologyKey": "kubernetes.io/hostname",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "labelSelector": {"matchLabels": {"app": "web"}},
                        "nodeAffinityPolicy": "Ignore",
                        "nodeTaintsPolicy": "Honor",
                        "matchLabelKeys": ["pod-template-hash"],
                    },
                    {
                        "maxSkew": 1,
                        "topologyKey": "rack",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "minDomains": 3,
                    },
                ]
            }
        ),
        lambda p: p.topology_spread_constraints,
        [
            TopologySpreadConstraint(1, "zone", "DoNotSchedule"),
            TopologySpreadConstraint(
                2,
                "kubernetes.io/hostname",
                "ScheduleAnyway",
                label_selector=LabelSelector({"app": "web"}),
                node_affinity_policy="Ignore",
                node_taints_policy="Honor",
                match_label_keys=("pod-template-hash",),
            ),
            TopologySpreadConstraint(1, "rack", "DoNotSchedule", min_domains=3),
        ],
    ),
    (
        "schedulingGates",
        pod_manifest(spec={"schedulingGates": [{"name": "a"}, {"name": "b"}]}),
        lambda p: p.scheduling_gates,
        ("a", "b"),
    ),
    (
        "container",
        pod_manifest(
            container={
                "name": "web",
                "image": "nginx:1.25",
                "resources": {
                    "requests": {"cpu": "250m", "memory": "64Mi"},
                    "limits": {"cpu": 1, "memory": "128Mi"},
                },
                "ports": [
                    {"containerPort": 80},
                    {"containerPort": 53, "hostPort": 5353, "protocol": "UDP", "hostIP": "10.0.0.1"},
                ],
            }
        ),
        lambda p: p.containers,
        [
            Container(
                name="web",
                image="nginx:1.25",
                requests={"cpu": 250, "memory": 64 * MI},
                limits={"cpu": 1000, "memory": 128 * MI},
                ports=[ContainerPort(80), ContainerPort(53, 5353, "UDP", "10.0.0.1")],
            )
        ],
    ),
    (
        "hostNetwork makes container ports host ports",
        pod_manifest(spec={"hostNetwork": True}, container={"ports": [{"containerPort": 8080}]}),
        lambda p: p.host_ports(),
        [ContainerPort(8080, 8080)],
    ),
    (
        "init containers",
        pod_manifest(
            spec={
                "initContainers": [
                    {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "10m"}}},
                    {"name": "setup", "image": "busybox"},
                ]
            }
        ),
        lambda p: p.init_containers,
        [
            Container(name="sidecar", requests={"cpu": 10}, restart_policy="Always"),
            Container(name="setup", image="busybox"),
        ],
    ),
    (
        "overhead",
        pod_manifest(spec={"overhead": {"cpu": "250m", "memory": "120Mi"}}),
        lambda p: p.overhead,
        {"cpu": 250, "memory": 120 * MI},
    ),
    (
        "nominatedNodeName",
        pod_manifest(status={"nominatedNodeName": "n2"}),
        lambda p: p.nominated_node_name,
        "n2",
    ),
    (
        "requests",
        pod_manifest(container={"resources": {"requests": {"cpu": 0.5}}}),
        lambda p: p.requests,
        {"cpu": 500},
    ),
]


@pytest.mark.parametrize(
    ("manifest", "get", "want"),
    [pytest.param(m, g, w, id=name) for name, m, g, w in POD_FIELD_CASES],
)
def test_pod_fields(manifest: dict[str, Any], get: Callable[[Pod], Any], want: Any) -> None:
    assert get(parse_pod(manifest)) == want


def test_pod_raw_is_the_original_dict() -> None:
    obj = pod_manifest()
    pod = pod_from_dict(obj)
    assert pod.raw is obj
    assert pod_to_dict(pod) is obj


def test_pod_creation_timestamp_defaults_to_now() -> None:
    before = time.time()
    pod = pod_from_dict(pod_manifest())
    assert before <= pod.creation_timestamp <= time.time()


def test_unquoted_yaml_timestamps() -> None:
    # PyYAML turns these into datetime objects before we see them.
    text = """\
kind: Pod
metadata:
  name: p
  creationTimestamp: 2024-01-02T03:04:05Z
  deletionTimestamp: 2024-01-02 03:04:05
spec: {containers: [{name: c}]}
"""
    [pod] = parse_objects(text)
    assert isinstance(pod, Pod)
    assert pod.creation_timestamp == 1704164645.0
    assert pod.deletion_timestamp == 1704164645.0


def test_yaml_numbers_as_quantities() -> None:
    text = """\
kind: Pod
metadata: {name: p}
spec:
  containers:
  - name: c
    resources:
      requests: {cpu: 0.1, memory: 1e3, example.com/foo: 3}
"""
    [pod] = parse_objects(text)
    assert isinstance(pod, Pod)
    assert pod.requests == {"cpu": 100, "memory": 1000, "example.com/foo": 3}


# ---------------------------------------------------------------------------------------------
# Node fields

NODE_FIELD_CASES: list[tuple[str, dict[str, Any], Callable[[Node], Any], Any]] = [
    ("name", node_manifest(), lambda n: n.name, "n1"),
    ("uid", node_manifest(meta={"uid": "u-1"}), lambda n: n.uid, "u-1"),
    ("uid generated", node_manifest(), lambda n: _uuid4(n.uid), True),
    ("namespace is ignored", node_manifest(meta={"namespace": "x"}), lambda n: n.name, "n1"),
    (
        "labels and annotations",
        node_manifest(meta={"labels": {"zone": "a"}, "annotations": {"note": "x"}}),
        lambda n: (n.labels, n.annotations),
        ({"zone": "a"}, {"note": "x"}),
    ),
    ("schedulable by default", node_manifest(), lambda n: n.unschedulable, False),
    ("unschedulable", node_manifest(spec={"unschedulable": True}), lambda n: n.unschedulable, True),
    (
        "taints",
        node_manifest(
            spec={
                "taints": [
                    {"key": "a", "value": "b", "effect": "NoSchedule"},
                    {"key": "c", "effect": "NoExecute"},
                ]
            }
        ),
        lambda n: n.taints,
        [Taint("a", "NoSchedule", "b"), Taint("c", "NoExecute")],
    ),
    (
        "allocatable and capacity",
        node_manifest(
            status={
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "allocatable": {"cpu": "3800m", "memory": "7.5Gi", "pods": 110},
            }
        ),
        lambda n: (n.allocatable, n.capacity),
        ({"cpu": 3800, "memory": 7.5 * GI, "pods": 110}, {"cpu": 4000, "memory": 8 * GI, "pods": 110}),
    ),
    (
        "allocatable defaults to capacity",
        node_manifest(status={"capacity": {"cpu": 2, "nvidia.com/gpu": 4}}),
        lambda n: n.allocatable,
        {"cpu": 2000, "nvidia.com/gpu": 4},
    ),
    ("no resources at all", node_manifest(), lambda n: (n.allocatable, n.capacity), ({}, {})),
    (
        "images",
        node_manifest(
            status={
                "images": [{"names": ["nginx:1.25", "nginx@sha256:ab"], "sizeBytes": 1000}, {"names": []}]
            }
        ),
        lambda n: n.images,
        [ContainerImage(("nginx:1.25", "nginx@sha256:ab"), 1000), ContainerImage(())],
    ),
]


@pytest.mark.parametrize(
    ("manifest", "get", "want"),
    [pytest.param(m, g, w, id=name) for name, m, g, w in NODE_FIELD_CASES],
)
def test_node_fields(manifest: dict[str, Any], get: Callable[[Node], Any], want: Any) -> None:
    assert get(parse_node(manifest)) == want


def test_node_raw_is_the_original_dict() -> None:
    obj = node_manifest()
    node = node_from_dict(obj)
    assert node.raw is obj
    assert node_to_dict(node) is obj


# ---------------------------------------------------------------------------------------------
# Requests


def c(
    name: str,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    sidecar: bool = False,
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "resources": {"requests": requests or {}, "limits": limits or {}}}
    if sidecar:
        out["restartPolicy"] = "Always"
    return out


@pytest.mark.parametrize(
    ("containers", "init_containers", "overhead", "want"),
    [
        pytest.param([c("a")], [], None, {}, id="no requests"),
        pytest.param([c("a", {"cpu": 0})], [], None, {"cpu": 0}, id="zero kept when present"),
        pytest.param(
            [
                c("a", {"cpu": "100m", "memory": "1Gi"}),
                c("b", {"cpu": "200m", "memory": "512Mi", "example.com/x": 2}),
            ],
            [],
            None,
            {"cpu": 300, "memory": GI + 512 * MI, "example.com/x": 2},
            id="plain sum",
        ),
        pytest.param(
            [c("a", {"cpu": "100m"})], [c("i", {"cpu": "500m"})], None, {"cpu": 500}, id="init larger"
        ),
        pytest.param(
            [c("a", {"cpu": "100m"})], [c("i", {"cpu": "50m"})], None, {"cpu": 100}, id="init smaller"
        ),
        pytest.param(
            [c("a", {"cpu": "100m"})],
            [c("i1", {"cpu": "300m", "memory": "1Gi"}), c("i2", {"cpu": "700m"})],
            None,
            {"cpu": 700, "memory": GI},
            id="init max per resource",
        ),
        pytest.param(
            [c("a", {"cpu": "100m"})],
            [c("s", {"cpu": "200m"}, sidecar=True)],
            None,
            {"cpu": 300},
            id="sidecar adds",
        ),
        pytest.param(
            [c("a", {"cpu": "100m"})],
            [c("s", {"cpu": "200m"}, sidecar=True), c("i", {"cpu": "1"})],
            None,
            {"cpu": 1200},
            id="init after sidecar runs beside it",
        ),
        pytest.param(
            [c("a", {"cpu": "100m"})],
            [c("i", {"cpu": "1"}), c("s", {"cpu": "200m"}, sidecar=True)],
            None,
            {"cpu": 1000},
            id="init before sidecar runs alone",
        ),
        pytest.param(
            [c("a", {"cpu": "100m"})],
            [
                c("s1", {"cpu": "100m"}, sidecar=True),
                c("s2", {"cpu": "200m"}, sidecar=True),
                c("i", {"cpu": "500m"}),
            ],
            None,
            {"cpu": 800},
            id="two sidecars then init",
        ),
        pytest.param(
            [c("a", {"cpu": "1"})],
            [
                c("s1", {"cpu": "100m"}, sidecar=True),
                c("i", {"cpu": "500m"}),
                c("s2", {"cpu": "200m"}, sidecar=True),
            ],
            None,
            {"cpu": 1300},
            id="sidecars beside main containers win",
        ),
        pytest.param(
            [c("a", {"cpu": "100m"})],
            [],
            {"cpu": "250m", "memory": "120Mi"},
            {"cpu": 350, "memory": 120 * MI},
            id="overhead",
        ),
        pytest.param(
            [c("a", {"cpu": "100m"})],
            [c("i", {"cpu": "1"})],
            {"cpu": "250m"},
            {"cpu": 1250},
            id="overhead after init max",
        ),
        pytest.param(
            [c("a", None, {"cpu": "1", "memory": "1Gi"}), c("b", {"memory": "512Mi"}, {"memory": "1Gi"})],
            [],
            None,
            {"cpu": 1000, "memory": GI + 512 * MI},
            id="limit defaults request",
        ),
        pytest.param(
            [c("a", {"cpu": "100m"})],
            [c("i", None, {"cpu": "2"})],
            None,
            {"cpu": 2000},
            id="init limit defaults request",
        ),
    ],
)
def test_requests(
    containers: list[dict[str, Any]],
    init_containers: list[dict[str, Any]],
    overhead: dict[str, Any] | None,
    want: dict[str, int],
) -> None:
    spec: dict[str, Any] = {"containers": containers, "initContainers": init_containers}
    if overhead is not None:
        spec["overhead"] = overhead
    pod = parse_pod(pod_manifest(spec=spec))
    assert pod.requests == want
    assert compute_requests(pod) == want


def test_finish_pod_for_pods_built_in_code() -> None:
    pod = Pod(
        name="p",
        containers=[Container("a", requests={"cpu": 100}, limits={"cpu": 500, "memory": GI})],
        init_containers=[Container("s", requests={"cpu": 50}, restart_policy="Always")],
    )
    assert finish_pod(pod) is pod
    assert pod.containers[0].requests == {"cpu": 100, "memory": GI}
    assert pod.requests == {"cpu": 150, "memory": GI}


# ---------------------------------------------------------------------------------------------
# Round trips through the model


def test_pod_to_dict_round_trips_when_built_from_the_model() -> None:
    obj = pod_manifest(
        meta={
            "namespace": "ns",
            "uid": "u",
            "labels": {"a": "b"},
            "creationTimestamp": "2024-01-02T03:04:05Z",
        },
        spec={
            "schedulerName": "s",
            "nodeName": "n",
            "priority": 10,
            "priorityClassName": "p",
            "preemptionPolicy": "Never",
            "nodeSelector": {"k": "v"},
            "tolerations": [
                {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5}
            ],
            "topologySpreadConstraints": [
                {
                    "maxSkew": 1,
                    "topologyKey": "z",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"a": "b"}},
                    "minDomains": 2,
                    "nodeTaintsPolicy": "Honor",
                }
            ],
            "schedulingGates": [{"name": "g"}],
            "initContainers": [c("i", {"cpu": "1"}, sidecar=True)],
            "overhead": {"memory": "1Ki"},
            "affinity": NODE_AFFINITY | POD_AFFINITY,
        },
        container={
            "resources": {"requests": {"cpu": "150m", "memory": "1.5Gi"}, "limits": {"memory": "2Gi"}},
            "ports": [{"containerPort": 80, "hostPort": 8080, "hostIP": "1.2.3.4"}],
        },
        status={"nominatedNodeName": "n2"},
    )
    pod = pod_from_dict(copy.deepcopy(obj))
    assert (
        pod.affinity is not None
        and pod.affinity.node_affinity is not None
        and pod.affinity.pod_affinity is not None
    )
    pod.raw = {}
    again = pod_from_dict(pod_to_dict(pod))
    assert again == pod


def test_node_to_dict_round_trips_when_built_from_the_model() -> None:
    node = parse_node(
        node_manifest(
            meta={"uid": "u", "labels": {"zone": "a"}},
            spec={"unschedulable": True, "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
            status={
                "capacity": {"cpu": "4", "memory": "8Gi"},
                "allocatable": {"cpu": "3500m", "memory": "7Gi"},
                "images": [{"names": ["x"], "sizeBytes": 5}],
            },
        )
    )
    node.raw = {}
    assert node_from_dict(node_to_dict(node)) == node


# ---------------------------------------------------------------------------------------------
# Errors

P = "pods.yaml: document 1 (Pod default/web-1): "
NAME_RULE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
RFC3339_HINT = "(expected RFC3339, e.g. 2024-01-02T03:04:05Z)"
EFFECTS = "(supported: NoExecute, NoSchedule, PreferNoSchedule)"
N = "pods.yaml: document 1 (Node n1): "


def _na(required: Any = None, preferred: Any = None) -> dict[str, Any]:
    na: dict[str, Any] = {}
    if required is not None:
        na["requiredDuringSchedulingIgnoredDuringExecution"] = required
    if preferred is not None:
        na["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return pod_manifest(spec={"affinity": {"nodeAffinity": na}})


def _expr(**req: Any) -> dict[str, Any]:
    return _na(required={"nodeSelectorTerms": [{"matchExpressions": [req]}]})


NA = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"


def _pod_term(**term: Any) -> dict[str, Any]:
    return pod_manifest(
        spec={"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    )


PA = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"


def _tsc(**over: Any) -> dict[str, Any]:
    tsc: dict[str, Any] = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    tsc.update(over)
    return pod_manifest(spec={"topologySpreadConstraints": [{k: v for k, v in tsc.items() if v is not None}]})


BAD_OBJECTS: list[tuple[str, dict[str, Any], str]] = [
    # quantities
    (
        "invalid quantity",
        pod_manifest(container={"resources": {"requests": {"cpu": "abc"}}}),
        P + 'spec.containers[0].resources.requests.cpu: invalid quantity "abc"',
    ),
    (
        "negative quantity",
        pod_manifest(container={"resources": {"limits": {"memory": "-1Gi"}}}),
        P + 'spec.containers[0].resources.limits.memory: negative quantity "-1Gi"',
    ),
    (
        "extended resource path",
        pod_manifest(container={"resources": {"requests": {"nvidia.com/gpu": "one"}}}),
        P + 'spec.containers[0].resources.requests[nvidia.com/gpu]: invalid quantity "one"',
    ),
    (
        "boolean quantity",
        pod_manifest(spec={"overhead": {"cpu": True}}),
        P + "spec.overhead.cpu: invalid quantity true: expected a string or number, got boolean",
    ),
    (
        "request above limit",
        pod_manifest(container={"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1500m"}}}),
        P + "spec.containers[0].resources.requests.cpu: must be less than or equal to cpu limit of 1500m",
    ),
    (
        "node quantity",
        node_manifest(status={"capacity": {"cpu": "x"}}),
        N + 'status.capacity.cpu: invalid quantity "x"',
    ),
    # metadata
    (
        "missing name",
        pod_manifest(meta={"name": None}),
        "pods.yaml: document 1 (Pod): metadata.name: Required value: name or generateName is required",
    ),
    (
        "missing metadata",
        {"apiVersion": "v1", "kind": "Node"},
        "pods.yaml: document 1 (Node): metadata.name: Required value: name or generateName is required",
    ),
    (
        "invalid name",
        pod_manifest(meta={"name": "Web_1"}),
        'pods.yaml: document 1 (Pod default/Web_1): metadata.name: Invalid value: "Web_1": ' + NAME_RULE,
    ),
    (
        "name too long",
        pod_manifest(meta={"name": "a" * 254}),
        f'pods.yaml: document 1 (Pod default/{"a" * 254}): metadata.name: Invalid value: "{"a" * 254}": '
        "must be no more than 253 characters",
    ),
    (
        "invalid namespace",
        pod_manifest(meta={"namespace": "a.b"}),
        (
            'pods.yaml: document 1 (Pod a.b/web-1): metadata.namespace: Invalid value: "a.b": '
            "must not contain dots"
        ),
    ),
    (
        "label value not a string",
        pod_manifest(meta={"labels": {"version": 1.0}}),
        P + "metadata.labels.version: expected a string, got number",
    ),
    (
        "dotted label key",
        pod_manifest(meta={"labels": {"app.kubernetes.io/version": True}}),
        P + "metadata.labels[app.kubernetes.io/version]: expected a string, got boolean",
    ),
    (
        "labels not a mapping",
        pod_manifest(meta={"labels": ["a"]}),
        P + "metadata.labels: expected a mapping, got list",
    ),
    ("bad uid", pod_manifest(meta={"uid": 5}), P + "metadata.uid: expected a string, got integer"),
    (
        "bad timestamp",
        pod_manifest(meta={"creationTimestamp": "yesterday"}),
        P + 'metadata.creationTimestamp: invalid timestamp "yesterday" ' + RFC3339_HINT,
    ),
    (
        "timestamp without zone",
        pod_manifest(meta={"creationTimestamp": "2024-01-02T03:04:05"}),
        P + 'metadata.creationTimestamp: invalid timestamp "2024-01-02T03:04:05" '
        "(expected RFC3339, e.g. 2024-01-02T03:04:05Z)",
    ),
    (
        "timestamp out of range",
        pod_manifest(meta={"creationTimestamp": "2024-13-02T03:04:05Z"}),
        P + 'metadata.creationTimestamp: invalid timestamp "2024-13-02T03:04:05Z" '
        "(expected RFC3339, e.g. 2024-01-02T03:04:05Z)",
    ),
    # spec shapes
    ("spec not a mapping", {**pod_manifest(), "spec": ["x"]}, P + "spec: expected a mapping, got list"),
    (
        "containers not a list",
        pod_manifest(spec={"containers": "app"}),
        P + "spec.containers: expected a list, got string",
    ),
    (
        "no containers",
        pod_manifest(spec={"containers": []}),
        P + "spec.containers: a pod must have at least one container",
    ),
    (
        "no spec",
        {**pod_manifest(), "spec": None},
        P + "spec.containers: a pod must have at least one container",
    ),
    (
        "container not a mapping",
        pod_manifest(spec={"containers": ["app"]}),
        P + "spec.containers[0]: expected a mapping, got string",
    ),
    (
        "container without name",
        pod_manifest(container={"name": ""}),
        P + "spec.containers[0].name: required field is missing",
    ),
    (
        "duplicate container name",
        pod_manifest(spec={"initContainers": [{"name": "app"}]}),
        P + 'spec.initContainers[0].name: duplicate container name "app"',
    ),
    (
        "resources not a mapping",
        pod_manifest(container={"resources": {"requests": ["cpu"]}}),
        P + "spec.containers[0].resources.requests: expected a mapping, got list",
    ),
    (
        "priority not an int",
        pod_manifest(spec={"priority": "high"}),
        P + "spec.priority: expected an integer, got string",
    ),
    (
        "priority out of range",
        pod_manifest(spec={"priority": 2**31}),
        P + "spec.priority: must fit in a 32-bit integer, got 2147483648",
    ),
    (
        "preemptionPolicy",
        pod_manifest(spec={"preemptionPolicy": "Always"}),
        P
        + 'spec.preemptionPolicy: unsupported preemptionPolicy "Always" '
        + "(supported: Never, PreemptLowerPriority)",
    ),
    (
        "nodeSelector value",
        pod_manifest(spec={"nodeSelector": {"disk": None}}),
        P + "spec.nodeSelector.disk: expected a string, got null",
    ),
    (
        "hostNetwork",
        pod_manifest(spec={"hostNetwork": "yes"}),
        P + "spec.hostNetwork: expected a boolean, got string",
    ),
    (
        "schedulingGate without name",
        pod_manifest(spec={"schedulingGates": [{}]}),
        P + "spec.schedulingGates[0].name: required field is missing",
    ),
    # ports
    (
        "port zero",
        pod_manifest(container={"ports": [{"containerPort": 0}]}),
        P + "spec.containers[0].ports[0].containerPort: must be between 1 and 65535, got 0",
    ),
    (
        "port too large",
        pod_manifest(container={"ports": [{"containerPort": 80}, {"containerPort": 81, "hostPort": 70000}]}),
        P + "spec.containers[0].ports[1].hostPort: must be between 1 and 65535 (or 0 for none), got 70000",
    ),
    (
        "port missing",
        pod_manifest(container={"ports": [{"hostPort": 80}]}),
        P + "spec.containers[0].ports[0].containerPort: required field is missing",
    ),
    (
        "port as string",
        pod_manifest(container={"ports": [{"containerPort": "80"}]}),
        P + "spec.containers[0].ports[0].containerPort: expected an integer, got string",
    ),
    (
        "protocol",
        pod_manifest(container={"ports": [{"containerPort": 80, "protocol": "HTTP"}]}),
        P + 'spec.containers[0].ports[0].protocol: unsupported protocol "HTTP" (supported: SCTP, TCP, UDP)',
    ),
    # node affinity
    (
        "node selector operator",
        _expr(key="a", operator="Equals", values=["x"]),
        P + NA + '.matchExpressions[0].operator: unsupported operator "Equals" '
        "(supported: DoesNotExist, Exists, Gt, In, Lt, NotIn)",
    ),
    (
        "In without values",
        _expr(key="a", operator="In"),
        P + NA + ".matchExpressions[0].values: must be non-empty when operator is In",
    ),
    (
        "Exists with values",
        _expr(key="a", operator="Exists", values=["x"]),
        P + NA + ".matchExpressions[0].values: must be empty when operator is Exists",
    ),
    (
        "Gt with two values",
        _expr(key="a", operator="Gt", values=["1", "2"]),
        P + NA + ".matchExpressions[0].values: must be a single integer when operator is Gt",
    ),
    (
        "Lt with a non-integer",
        _expr(key="a", operator="Lt", values=["1.5"]),
        P + NA + ".matchExpressions[0].values: must be a single integer when operator is Lt",
    ),
    (
        "values not strings",
        _expr(key="a", operator="In", values=[1]),
        P + NA + ".matchExpressions[0].values[0]: expected a string, got integer",
    ),
    (
        "requirement without key",
        _expr(operator="Exists"),
        P + NA + ".matchExpressions[0].key: required field is missing",
    ),
    (
        "matchFields key",
        _na(
            required={
                "nodeSelectorTerms": [{"matchFields": [{"key": "spec.x", "operator": "In", "values": ["a"]}]}]
            }
        ),
        P + NA + '.matchFields[0].key: unsupported field "spec.x" (supported: metadata.name)',
    ),
    (
        "matchFields values",
        _na(
            required={
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}
                ]
            }
        ),
        P + NA + ".matchFields[0].values: must have exactly one value when operator is In",
    ),
    (
        "no node selector terms",
        _na(required={"nodeSelectorTerms": []}),
        P + "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: "
        "must have at least one node selector term",
    ),
    (
        "required as a list",
        _na(required=[{"matchExpressions": []}]),
        P
        + "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution: "
        + "expected a mapping, got list",
    ),
    (
        "preferred weight zero",
        _na(preferred=[{"weight": 0, "preference": {}}]),
        P + "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "must be in the range 1-100, got 0",
    ),
    (
        "preferred weight too large",
        _na(preferred=[{"weight": 101, "preference": {}}]),
        P + "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "must be in the range 1-100, got 101",
    ),
    (
        "preferred weight missing",
        _na(preferred=[{"preference": {}}]),
        P + "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "required field is missing",
    ),
    (
        "preference missing",
        _na(preferred=[{"weight": 1}]),
        P + "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference: "
        "required field is missing",
    ),
    (
        "affinity not a mapping",
        pod_manifest(spec={"affinity": "yes"}),
        P + "spec.affinity: expected a mapping, got string",
    ),
    # pod affinity
    (
        "pod term without topologyKey",
        _pod_term(labelSelector={}),
        P + PA + ".topologyKey: required field is missing",
    ),
    (
        "label selector operator",
        _pod_term(
            topologyKey="z",
            labelSelector={"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
        ),
        P + PA + '.labelSelector.matchExpressions[0].operator: unsupported operator "Gt" '
        "(supported: DoesNotExist, Exists, In, NotIn)",
    ),
    (
        "namespaces not a list",
        _pod_term(topologyKey="z", namespaces="a"),
        P + PA + ".namespaces: expected a list, got string",
    ),
    (
        "matchLabelKeys without labelSelector",
        _pod_term(topologyKey="z", matchLabelKeys=["a"]),
        P + PA + ".matchLabelKeys: must not be set when labelSelector is not set",
    ),
    (
        "matchLabelKeys and mismatchLabelKeys overlap",
        _pod_term(topologyKey="z", labelSelector={}, matchLabelKeys=["a"], mismatchLabelKeys=["a"]),
        P + PA + '.mismatchLabelKeys: key "a" is also in matchLabelKeys',
    ),
    (
        "anti-affinity preferred weight",
        pod_manifest(
            spec={
                "affinity": {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 200, "podAffinityTerm": {"topologyKey": "z"}}
                        ]
                    }
                }
            }
        ),
        P + "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "must be in the range 1-100, got 200",
    ),
    (
        "podAffinityTerm missing",
        pod_manifest(
            spec={
                "affinity": {
                    "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1}]}
                }
            }
        ),
        P + "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm: "
        "required field is missing",
    ),
    # tolerations
    (
        "toleration effect",
        pod_manifest(spec={"tolerations": [{"key": "k", "effect": "NoRun"}]}),
        P + 'spec.tolerations[0].effect: unsupported effect "NoRun" ' + EFFECTS,
    ),
    (
        "toleration operator",
        pod_manifest(spec={"tolerations": [{"key": "k", "operator": "In"}]}),
        P + 'spec.tolerations[0].operator: unsupported operator "In" (supported: Equal, Exists)',
    ),
    (
        "Exists with a value",
        pod_manifest(spec={"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}),
        P + "spec.tolerations[0].value: must be empty when operator is Exists",
    ),
    (
        "empty key needs Exists",
        pod_manifest(spec={"tolerations": [{"value": "v"}]}),
        P + "spec.tolerations[0].operator: must be Exists when key is empty",
    ),
    (
        "tolerationSeconds",
        pod_manifest(spec={"tolerations": [{"operator": "Exists", "tolerationSeconds": "30"}]}),
        P + "spec.tolerations[0].tolerationSeconds: expected an integer, got string",
    ),
    (
        "tolerations not a list",
        pod_manifest(spec={"tolerations": {"key": "k"}}),
        P + "spec.tolerations: expected a list, got mapping",
    ),
    # topology spread
    (
        "whenUnsatisfiable",
        _tsc(whenUnsatisfiable="Never"),
        P + 'spec.topologySpreadConstraints[0].whenUnsatisfiable: unsupported whenUnsatisfiable "Never" '
        "(supported: DoNotSchedule, ScheduleAnyway)",
    ),
    (
        "whenUnsatisfiable missing",
        _tsc(whenUnsatisfiable=None),
        P + "spec.topologySpreadConstraints[0].whenUnsatisfiable: required field is missing",
    ),
    (
        "maxSkew zero",
        _tsc(maxSkew=0),
        P + "spec.topologySpreadConstraints[0].maxSkew: must be greater than zero, got 0",
    ),
    (
        "maxSkew missing",
        _tsc(maxSkew=None),
        P + "spec.topologySpreadConstraints[0].maxSkew: required field is missing",
    ),
    (
        "topologyKey missing",
        _tsc(topologyKey=""),
        P + "spec.topologySpreadConstraints[0].topologyKey: required field is missing",
    ),
    (
        "minDomains with ScheduleAnyway",
        _tsc(whenUnsatisfiable="ScheduleAnyway", minDomains=2),
        P
        + "spec.topologySpreadConstraints[0].minDomains: "
        + "can only be set when whenUnsatisfiable is DoNotSchedule",
    ),
    (
        "minDomains zero",
        _tsc(minDomains=0),
        P + "spec.topologySpreadConstraints[0].minDomains: must be greater than zero, got 0",
    ),
    (
        "policy",
        _tsc(nodeTaintsPolicy="Always"),
        P
        + 'spec.topologySpreadConstraints[0].nodeTaintsPolicy: unsupported policy "Always" '
        + "(supported: Honor, Ignore)",
    ),
    (
        "spread matchLabelKeys without labelSelector",
        _tsc(matchLabelKeys=["a"]),
        P + "spec.topologySpreadConstraints[0].matchLabelKeys: must not be set when labelSelector is not set",
    ),
    (
        "duplicate constraint",
        pod_manifest(
            spec={
                "topologySpreadConstraints": [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                    {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
                ]
            }
        ),
        P
        + 'spec.topologySpreadConstraints[1]: duplicate constraint for topologyKey "zone" '
        + "and whenUnsatisfiable DoNotSchedule",
    ),
    # nodes
    (
        "taint effect",
        node_manifest(spec={"taints": [{"key": "k", "effect": "Sometimes"}]}),
        N + 'spec.taints[0].effect: unsupported effect "Sometimes" ' + EFFECTS,
    ),
    (
        "taint effect missing",
        node_manifest(spec={"taints": [{"key": "k"}]}),
        N + "spec.taints[0].effect: required field is missing",
    ),
    (
        "taint key missing",
        node_manifest(spec={"taints": [{"effect": "NoSchedule"}]}),
        N + "spec.taints[0].key: required field is missing",
    ),
    (
        "unschedulable",
        node_manifest(spec={"unschedulable": "true"}),
        N + "spec.unschedulable: expected a boolean, got string",
    ),
    (
        "image size",
        node_manifest(status={"images": [{"names": ["a"], "sizeBytes": -1}]}),
        N + "status.images[0].sizeBytes: must not be negative, got -1",
    ),
    # resource claims (DynamicResources)
    (
        "resource claim named twice",
        pod_manifest(spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "a"},
                                              {"name": "gpu", "resourceClaimName": "b"}]}),
        P + 'spec.resourceClaims[1].name: Duplicate value: "gpu"',
    ),
    (
        "resource claim and template",
        pod_manifest(spec={"resourceClaims": [{"name": "gpu", "resourceClaimName": "a",
                                               "resourceClaimTemplateName": "t"}]}),
        P + "spec.resourceClaims[0]: at most one of `resourceClaimName` or `resourceClaimTemplateName` may be "
        "specified",
    ),
    (
        "resource claim status without name",
        pod_manifest(spec={"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}]},
                     status={"resourceClaimStatuses": [{"resourceClaimName": "x"}]}),
        P + "status.resourceClaimStatuses[0].name: required field is missing",
    ),
    # kinds and versions
    (
        "unsupported kind",
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}},
        (
            "pods.yaml: document 1 (Deployment default/web): "
            'unsupported kind "Deployment" (supported: Pod, Node, Reservation, PodDisruptionBudget, '
            "PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode, ResourceClaim, ResourceClaimTemplate, "
            "DeviceClass, ResourceSlice, DeviceTaintRule, Workload, PodGroup)"
        ),
    ),
    (
        "apiVersion",
        {**pod_manifest(), "apiVersion": "v2"},
        P + 'apiVersion: unsupported apiVersion "v2" for Pod (expected "v1")',
    ),
    (
        "missing kind",
        {"metadata": {"name": "x"}},
        "pods.yaml: document 1: kind: required field is missing "
        "(supported: Pod, Node, Reservation, PodDisruptionBudget, PersistentVolumeClaim, PersistentVolume, "
        "StorageClass, CSINode, ResourceClaim, ResourceClaimTemplate, DeviceClass, ResourceSlice, DeviceTaintRule, "
        "Workload, PodGroup)",
    ),
    ("kind not a string", {"kind": 3}, "pods.yaml: document 1: kind: expected a string, got integer"),
]


@pytest.mark.parametrize(
    ("manifest", "message"), [pytest.param(m, msg, id=name) for name, m, msg in BAD_OBJECTS]
)
def test_bad_objects(manifest: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as exc:
        parse_objects(yaml.safe_dump(manifest), "pods.yaml")
    assert str(exc.value) == message


BAD_TEXT: list[tuple[str, str, str]] = [
    (
        "error in third document",
        yaml.safe_dump_all(
            [
                pod_manifest(meta={"name": "a"}),
                node_manifest(),
                pod_manifest(container={"resources": {"requests": {"cpu": "abc"}}}),
            ]
        ),
        (
            "pods.yaml: document 3 (Pod default/web-1): "
            'spec.containers[0].resources.requests.cpu: invalid quantity "abc"'
        ),
    ),
    (
        "error in a list item",
        yaml.safe_dump_all(
            [
                node_manifest(),
                {
                    "apiVersion": "v1",
                    "kind": "List",
                    "items": [
                        pod_manifest(meta={"name": "a"}),
                        pod_manifest(meta={"name": "b", "labels": {"x": 1}}),
                    ],
                },
            ]
        ),
        "pods.yaml: document 2, items[1] (Pod default/b): metadata.labels.x: expected a string, got integer",
    ),
    (
        "list items not a list",
        "apiVersion: v1\nkind: List\nitems: {a: 1}\n",
        "pods.yaml: document 1 (List): items: expected a list, got mapping",
    ),
    (
        "list item not a mapping",
        "apiVersion: v1\nkind: List\nitems: [3]\n",
        "pods.yaml: document 1, items[0]: expected a mapping (a Kubernetes object), got integer",
    ),
    (
        "document not a mapping",
        "kind: Node\nmetadata: {name: n1}\n---\n- a\n- b\n",
        "pods.yaml: document 2: expected a mapping (a Kubernetes object), got list",
    ),
    (
        "scalar document",
        "just text\n",
        "pods.yaml: document 1: expected a mapping (a Kubernetes object), got string",
    ),
    (
        "YAML syntax error",
        "kind: Node\nmetadata: {name: n1}\n---\nkind: Pod\nmetadata:\n  name: [a\n  x: y\n",
        (
            "pods.yaml: document 2: line 7, column 4: invalid YAML: while parsing a flow sequence, "
            "did not find expected ',' or ']'"
        ),
    ),
    (
        "YAML indentation error",
        "kind: Pod\nmetadata:\n  name: a\n labels: {}\n",
        (
            "pods.yaml: document 1: line 4, column 2: "
            "invalid YAML: while parsing a block mapping, did not find expected key"
        ),
    ),
    (
        "broken JSON",
        '{"kind": "Pod", "metadata": {"name": "a"}',
        (
            "pods.yaml: document 1: line 2, column 1: invalid YAML: while parsing a flow mapping, "
            "did not find expected ',' or '}'"
        ),
    ),
]


@pytest.mark.parametrize(("text", "message"), [pytest.param(t, msg, id=name) for name, t, msg in BAD_TEXT])
def test_bad_text(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as exc:
        parse_objects(text, "pods.yaml")
    assert str(exc.value) == message


def test_error_without_location_names_the_object() -> None:
    with pytest.raises(ManifestError) as exc:
        pod_from_dict(pod_manifest(spec={"priority": "x"}))
    assert str(exc.value) == "Pod default/web-1: spec.priority: expected an integer, got string"
    assert exc.value.path == "spec.priority"
    assert exc.value.reason == "expected an integer, got string"
    assert exc.value.location == "Pod default/web-1"


def test_manifest_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        node_from_dict({"metadata": {"name": "N"}}, "x")


# ---------------------------------------------------------------------------------------------
# Strict decoding and the API server's limits

# A pod as `kubectl get pod -o yaml` prints it from a v1.35 cluster: every field is a real one.
KUBECTL_POD = """\
apiVersion: v1
kind: Pod
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"shop"}}
  creationTimestamp: "2024-05-01T10:00:00Z"
  generateName: web-
  labels: {app: web, controller-revision-hash: web-7d4b9c, statefulset.kubernetes.io/pod-name: web-0}
  managedFields:
  - apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1: {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:containers": {}}}
    manager: kube-controller-manager
    operation: Update
    time: "2024-05-01T10:00:00Z"
  name: web-0
  namespace: shop
  ownerReferences:
  - {apiVersion: apps/v1, blockOwnerDeletion: true, controller: true, kind: StatefulSet, name: web, uid: 9f1c}
  resourceVersion: "1234"
  uid: 3a5e7f0e-0000-4000-8000-000000000001
spec:
  containers:
  - args: [--port=8080]
    command: [/app]
    env:
    - {name: POD_IP, valueFrom: {fieldRef: {apiVersion: v1, fieldPath: status.podIP}}}
    - {name: MEM, valueFrom: {resourceFieldRef: {containerName: app, divisor: "0", resource: limits.memory}}}
    envFrom: [{configMapRef: {name: web}}, {secretRef: {name: web, optional: true}}]
    image: registry.example.com/web:1.2
    imagePullPolicy: IfNotPresent
    livenessProbe:
      failureThreshold: 3
      httpGet: {path: /healthz, port: 8080, scheme: HTTP}
      periodSeconds: 10
      successThreshold: 1
      timeoutSeconds: 1
    name: app
    ports: [{containerPort: 8080, name: http, protocol: TCP}]
    readinessProbe: {grpc: {port: 8081, service: ""}, periodSeconds: 5}
    resources:
      limits: {memory: 256Mi}
      requests: {cpu: 250m, memory: 128Mi}
    securityContext:
      allowPrivilegeEscalation: false
      capabilities: {drop: [ALL]}
      readOnlyRootFilesystem: true
      runAsNonRoot: true
      seccompProfile: {type: RuntimeDefault}
    startupProbe: {tcpSocket: {port: 8080}}
    terminationMessagePath: /dev/termination-log
    terminationMessagePolicy: File
    volumeMounts:
    - {mountPath: /data, name: data}
    - {mountPath: /var/run/secrets/kubernetes.io/serviceaccount, name: kube-api-access-x, readOnly: true}
  dnsPolicy: ClusterFirst
  enableServiceLinks: true
  hostname: web-0
  nodeName: node-1
  preemptionPolicy: PreemptLowerPriority
  priority: 0
  restartPolicy: Always
  schedulerName: default-scheduler
  securityContext: {fsGroup: 1000}
  serviceAccount: default
  serviceAccountName: default
  subdomain: web
  terminationGracePeriodSeconds: 30
  tolerations:
  - {effect: NoExecute, key: node.kubernetes.io/not-ready, operator: Exists, tolerationSeconds: 300}
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: data-web-0}
  - name: kube-api-access-x
    projected:
      defaultMode: 420
      sources:
      - serviceAccountToken: {expirationSeconds: 3607, path: token}
      - configMap:
          items: [{key: ca.crt, path: ca.crt}]
          name: kube-root-ca.crt
      - downwardAPI:
          items: [{fieldRef: {apiVersion: v1, fieldPath: metadata.namespace}, path: namespace}]
status:
  conditions:
  - {lastProbeTime: null, lastTransitionTime: "2024-05-01T10:00:05Z", status: "True", type: Ready}
  containerStatuses:
  - containerID: containerd://abc
    image: registry.example.com/web:1.2
    imageID: registry.example.com/web@sha256:0
    lastState: {}
    name: app
    ready: true
    restartCount: 0
    started: true
    state: {running: {startedAt: "2024-05-01T10:00:03Z"}}
    volumeMounts: [{mountPath: /data, name: data}]
  hostIP: 172.18.0.2
  hostIPs: [{ip: 172.18.0.2}]
  phase: Running
  podIP: 10.244.1.7
  podIPs: [{ip: 10.244.1.7}]
  qosClass: Burstable
  startTime: "2024-05-01T10:00:00Z"
"""

KUBECTL_NODE = """\
apiVersion: v1
kind: Node
metadata:
  annotations: {node.alpha.kubernetes.io/ttl: "0", volumes.kubernetes.io/controller-managed-attach-detach: "true"}
  labels: {kubernetes.io/arch: amd64, kubernetes.io/hostname: node-1, kubernetes.io/os: linux}
  name: node-1
  resourceVersion: "999"
  uid: 5b1d0000-0000-4000-8000-000000000002
spec:
  podCIDR: 10.244.1.0/24
  podCIDRs: [10.244.1.0/24]
  providerID: kind://docker/kind/node-1
  taints: [{effect: NoSchedule, key: dedicated, value: db}]
status:
  addresses: [{address: 172.18.0.2, type: InternalIP}, {address: node-1, type: Hostname}]
  allocatable: {cpu: "8", ephemeral-storage: 100Gi, hugepages-2Mi: "0", memory: 16Gi, pods: "110"}
  capacity: {cpu: "8", ephemeral-storage: 100Gi, hugepages-2Mi: "0", memory: 16Gi, pods: "110"}
  conditions:
  - {lastHeartbeatTime: "2024-05-01T10:00:00Z", lastTransitionTime: "2024-05-01T09:00:00Z",
     message: kubelet is posting ready status, reason: KubeletReady, status: "True", type: Ready}
  daemonEndpoints: {kubeletEndpoint: {Port: 10250}}
  features: {supplementalGroupsPolicy: true}
  images: [{names: ["registry.k8s.io/pause:3.10"], sizeBytes: 320368}]
  nodeInfo: {architecture: amd64, bootID: b, containerRuntimeVersion: containerd://2.1.0, kernelVersion: 6.1.0,
             kubeProxyVersion: "", kubeletVersion: v1.35.4, machineID: m, operatingSystem: linux,
             osImage: Debian GNU/Linux 12 (bookworm), swap: {}, systemUUID: s}
  runtimeHandlers: [{features: {recursiveReadOnlyMounts: true, userNamespaces: true}, name: runc}]
"""


def test_objects_printed_by_kubectl_decode_strictly() -> None:
    pod, node = parse_objects(KUBECTL_POD + "---\n" + KUBECTL_NODE, "get.yaml")
    assert isinstance(pod, Pod) and isinstance(node, Node)
    assert (pod.namespace, pod.name, pod.node_name, pod.requests) == ("shop", "web-0", "node-1",
                                                                        {"cpu": 250, "memory": 128 * 2**20})
    assert (node.name, node.allocatable["pods"], [t.key for t in node.taints]) == ("node-1", 110, ["dedicated"])


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        pytest.param(pod_manifest(spec={"containres": []}), 'unknown field "spec.containres"', id="before-validation"),
        pytest.param(pod_manifest(container={"resources": {"requets": {"cpu": "1"}}}),
                     'unknown field "spec.containers[0].resources.requets"', id="in-a-container"),
        pytest.param(pod_manifest(spec={"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuring"
                                                                      "Execution": [{"weight": 1, "preference": {
                                                                          "matchExpresions": []}}]}}}),
                     'unknown field "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]'
                     '.preference.matchExpresions"', id="deep-in-affinity"),
        pytest.param(pod_manifest(meta={"ownerReferences": [{"kind": "ReplicaSet", "name": "x", "ui": "1"}]}),
                     'unknown field "metadata.ownerReferences[0].ui"', id="in-metadata"),
        pytest.param(pod_manifest(status={"containerStatuses": [{"name": "c", "state": {"runing": {}}}]}),
                     'unknown field "status.containerStatuses[0].state.runing"', id="in-status"),
        pytest.param(pod_manifest(spec={"nvidia.com/gpu": 1}), 'unknown field "spec[nvidia.com/gpu]"',
                     id="unusual-name"),
    ],
)  # fmt: skip
def test_unknown_fields_are_named_by_their_path(manifest: dict[str, Any], message: str) -> None:
    with pytest.raises(ManifestError) as exc:
        pod_from_dict(manifest, "pods.yaml")
    assert str(exc.value) == f"pods.yaml (Pod default/web-1): {message}"
    assert (exc.value.path, exc.value.reason) == ("", message)


def test_unknown_fields_of_reservations_and_lists() -> None:
    reservation = ("apiVersion: scheduling.koordinator.sh/v1alpha1\nkind: Reservation\nmetadata: {name: r}\n"
                   "spec:\n  template: {spec: {nodeSelectr: {a: b}, containers: [{name: c}]}}\n"
                   "  owners: [{labelSelecter: {}}]\n  ttl: 1h\n")
    with pytest.raises(ManifestError) as exc:
        parse_objects(reservation, "r.yaml")
    assert str(exc.value) == ('r.yaml: document 1 (Reservation default/r): unknown field '
                              '"spec.template.spec.nodeSelectr", unknown field "spec.owners[0].labelSelecter"')
    with pytest.raises(ManifestError) as exc:
        parse_objects("apiVersion: v1\nkind: List\nmetadata: {resourceVersion: '1', continu: x}\nitem: []\n", "l.yaml")
    assert str(exc.value) == ('l.yaml: document 1 (List): unknown field "metadata.continu", unknown field "item"')


@pytest.mark.parametrize(
    ("manifest", "check", "expected"),
    [
        pytest.param(pod_manifest(meta={"annotations": {"a": "x" * (262_144 - 1)}}),
                     lambda p: len(p.annotations["a"]), 262_143, id="annotations-at-the-limit"),
        pytest.param(pod_manifest(meta={"annotations": {"a": "\u20ac" * 87_381}}),  # 262143 bytes + the key
                     lambda p: len(p.annotations["a"]), 87_381, id="annotations-at-the-limit-in-bytes"),
        pytest.param(pod_manifest(meta={"labels": {"example.com/" + "k" * 63: "v" * 63}}),
                     lambda p: p.labels, {"example.com/" + "k" * 63: "v" * 63}, id="label-key-and-value-at-limits"),
        pytest.param(pod_manifest(meta={"labels": {"tier": ""}}), lambda p: p.labels, {"tier": ""},
                     id="empty-label-value"),
        pytest.param(pod_manifest(meta={"name": "a" * 253}), lambda p: len(p.name), 253, id="name-at-the-limit"),
        pytest.param(pod_manifest(meta={"namespace": "n" * 63}), lambda p: len(p.namespace), 63,
                     id="namespace-at-the-limit"),
        pytest.param(pod_manifest(meta={"annotations": {"Example.com/MixedCase": "x"}}), lambda p: p.annotations,
                     {"Example.com/MixedCase": "x"}, id="annotation-keys-are-checked-in-lowercase"),
    ],
)  # fmt: skip
def test_the_api_servers_limits_are_inclusive(manifest: dict[str, Any], check: Callable[[Pod], Any],
                                              expected: Any) -> None:
    assert check(pod_from_dict(manifest)) == expected


def test_duplicate_keys_are_errors_with_their_paths() -> None:
    text = ("apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata: {name: a}\n"
            "  metadata: {name: b, labels: {x: '1', x: '2'}}\nitems: []\n")
    with pytest.raises(ManifestError) as exc:
        parse_objects(text, "l.yaml")
    assert str(exc.value) == 'l.yaml: document 1 (List): duplicate field "items"'
    # What a merge key brings may be overridden: that is no duplicate.
    text = ("apiVersion: v1\nkind: List\nitems:\n"
            "- {apiVersion: v1, kind: Node, metadata: {name: n},\n"
            "   spec: &s {unschedulable: true, podCIDR: 10.0.0.0/24}}\n"
            "- {apiVersion: v1, kind: Node, metadata: {name: m}, spec: {<<: *s, unschedulable: false}}\n")
    n, m = parse_objects(text, "m.yaml")
    assert isinstance(n, Node) and isinstance(m, Node)
    assert (n.unschedulable, m.unschedulable, m.raw["spec"]["podCIDR"]) == (True, False, "10.0.0.0/24")
