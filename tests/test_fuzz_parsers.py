"""Fuzzing the parsers of client input: Pod/Node manifests, quantities, the KubeSchedulerConfiguration
and the RemotePlugins document. Whatever the input, the only exception is the parser's documented error
type, with a message naming the source and the field; anything accepted is a well-formed model.

Inputs are structurally plausible but wrong (a valid object with one field replaced by a random
value, or removed, or fields no Kubernetes type has inserted at any depth) or plain random text shaped
like YAML/JSON. Budgets: ``tests/fuzzing.py``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from fuzzing import fuzz_settings
from hypothesis import example, given
from hypothesis import strategies as st

from framework.config import ConfigError, load_config
from framework.plugins import PluginArgsError, in_tree_registry
from framework.remote import parse_remote_plugins
from framework.scheduler import Scheduler
from pluginhost.manifest import (
    VALIDATE_MODES,
    ManifestError,
    node_from_dict,
    parse_objects,
    pod_from_dict,
    reservation_from_dict,
)
from pluginhost.model import Node, Pod, Reservation
from pluginhost.quantity import MAX_CANONICAL, QuantityError, canonical, format_quantity, parse_quantity

# ---------------------------------------------------------------------------------------------------
# Valid objects to break

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "shop", "uid": "pod-uid-1", "labels": {"app": "web"},
                 "annotations": {"a": "b"}, "creationTimestamp": "2024-01-02T03:04:05Z"},
    "spec": {
        "schedulerName": "default-scheduler",
        "priority": 10,
        "preemptionPolicy": "Never",
        "nodeSelector": {"disk": "ssd"},
        "hostNetwork": False,
        "containers": [
            {"name": "app", "image": "nginx:1", "resources": {"requests": {"cpu": "250m", "memory": "64Mi"},
                                                             "limits": {"cpu": "1", "memory": "128Mi"}},
             "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]},
            {"name": "side", "resources": {"requests": {"nvidia.com/gpu": 1, "cpu": 0.5}}},
        ],
        "initContainers": [{"name": "init", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
        "overhead": {"cpu": "10m"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 30}],
        "schedulingGates": [{"name": "wait"}],
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 2,
             "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]},
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]},
                                          {"key": "cores", "operator": "Gt", "values": ["4"]}],
                     "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]},
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}},
                ],
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchExpressions": [
                        {"key": "app", "operator": "In", "values": ["web"]}]}, "namespaces": ["shop"]},
                ],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 50, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {}}},
                ],
            },
        },
    },
    "status": {"nominatedNodeName": "n1"},
}

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "uid": "node-uid-1", "labels": {"zone": "a"}, "annotations": {}},
    "spec": {"unschedulable": False, "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
    "status": {
        "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "allocatable": {"cpu": "3800m", "memory": "7Gi", "pods": 110, "nvidia.com/gpu": "2"},
        "images": [{"names": ["nginx:1"], "sizeBytes": 1000}],
    },
}

RESERVATION: dict[str, Any] = {
    "apiVersion": "scheduling.koordinator.sh/v1alpha1",
    "kind": "Reservation",
    "metadata": {"name": "web-reserve", "uid": "res-uid-1"},
    "spec": {
        "template": {"metadata": {"labels": {"reserved-for": "web"}},
                     "spec": {"nodeSelector": {"pool": "a"}, "containers": [
                         {"name": "c", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}}]}},
        "owners": [{"labelSelector": {"matchLabels": {"app": "web"}}}],
        "ttl": "1h",
        "allocateOnce": True,
    },
}

CONFIG: dict[str, Any] = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "percentageOfNodesToScore": 50,
    "podInitialBackoffSeconds": 1,
    "podMaxBackoffSeconds": 10,
    "parallelism": 16,
    "profiles": [
        {"schedulerName": "default-scheduler",
         "plugins": {"score": {"enabled": [{"name": "NodeResourcesFit", "weight": 3}],
                               "disabled": [{"name": "ImageLocality"}]}},
         "pluginConfig": [
             {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                 "type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}]}}},
             {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5}},
             {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 10,
                                                    "minCandidateNodesAbsolute": 100}},
             {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [
                 {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}},
             {"name": "NodeAffinity", "args": {"addedAffinity": {
                 "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                     {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}}},
         ]},
        {"schedulerName": "batch", "percentageOfNodesToScore": 0,
         "plugins": {"multiPoint": {"enabled": [{"name": "NodeResourcesBalancedAllocation", "weight": 2}]}}},
    ],
}

REMOTE: dict[str, Any] = {
    "apiVersion": "outrigger.io/v1alpha1",
    "kind": "RemotePlugins",
    "plugins": [
        {"name": "gang", "address": "127.0.0.1:50061", "deadlines": {"default": "5s", "filter": "250ms"},
         "failurePolicy": "Fail", "batchSize": 512, "connectTimeout": "10s"},
        {"name": "labels", "addresses": ["127.0.0.1:50062", "127.0.0.1:50063"], "deadlines": {"permit": 1}},
    ],
}

# A pod and a node as `kubectl get -o yaml` prints them: every part Outrigger does not model too
# (volumes, probes, security contexts, env, status, managedFields, ...), so that an unknown field can be
# put at every depth of the real types.
FULL_POD: dict[str, Any] = copy.deepcopy(POD)
FULL_POD["metadata"].update({
    "generateName": "web-", "resourceVersion": "42", "generation": 1, "finalizers": ["x/y"],
    "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "rs-1",
                         "controller": True, "blockOwnerDeletion": True}],
    "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "v1",
                       "time": "2024-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                       "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}],
})
FULL_POD["spec"].update({
    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
    "serviceAccountName": "default", "enableServiceLinks": True,
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"},
                        "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]},
    "imagePullSecrets": [{"name": "regcred"}],
    "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "2"}]},
    "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["db"]}],
    "readinessGates": [{"conditionType": "x/ready"}],
    "os": {"name": "linux"},
    "volumes": [
        {"name": "cfg", "configMap": {"name": "web", "items": [{"key": "a", "path": "a"}], "defaultMode": 420}},
        {"name": "token", "projected": {"sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"apiVersion": "v1",
                                                                   "fieldPath": "metadata.namespace"}}]}}]}},
        {"name": "data", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
    ],
})
FULL_POD["spec"]["containers"][0].update({
    "command": ["nginx"], "args": ["-g", "daemon off;"], "imagePullPolicy": "IfNotPresent",
    "env": [{"name": "A", "value": "1"},
            {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k", "optional": True}}}],
    "envFrom": [{"configMapRef": {"name": "web"}}],
    "volumeMounts": [{"name": "cfg", "mountPath": "/etc/web", "readOnly": True}],
    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 80,
                                  "httpHeaders": [{"name": "X-Probe", "value": "1"}]},
                      "periodSeconds": 10},
    "readinessProbe": {"exec": {"command": ["true"]}},
    "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    "terminationMessagePath": "/dev/termination-log",
})
FULL_POD["status"].update({
    "phase": "Running", "qosClass": "Burstable", "podIP": "10.1.2.3", "podIPs": [{"ip": "10.1.2.3"}],
    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-01-02T03:04:05Z"}],
    "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0, "image": "nginx:1",
                           "imageID": "sha256:1", "state": {"running": {"startedAt": "2024-01-02T03:04:05Z"}},
                           "lastState": {"terminated": {"exitCode": 0, "reason": "Completed"}}}],
})
FULL_NODE: dict[str, Any] = copy.deepcopy(NODE)
FULL_NODE["spec"].update({"podCIDR": "10.1.0.0/24", "podCIDRs": ["10.1.0.0/24"], "providerID": "kind://n1"})
FULL_NODE["status"].update({
    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    "addresses": [{"type": "InternalIP", "address": "172.18.0.2"}],
    "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
    "nodeInfo": {"machineID": "m", "kernelVersion": "6.1", "osImage": "Debian", "kubeletVersion": "v1.35.4",
                 "operatingSystem": "linux", "architecture": "amd64", "swap": {"capacity": 0}},
    "runtimeHandlers": [{"name": "runc", "features": {"recursiveReadOnlyMounts": True}}],
    "features": {"supplementalGroupsPolicy": True},
    "volumesAttached": [{"name": "v", "devicePath": "/dev/x"}],
})

# Fields whose values are maps with keys of the user's choosing (or free-form JSON), not objects of a
# type: no key is unknown there.
FREE_FORM = frozenset({"labels", "annotations", "nodeSelector", "requests", "limits", "overhead", "capacity",
                       "allocatable", "matchLabels", "fieldsV1", "args", "deadlines"})


def object_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of the objects (mappings of a type's fields) in ``value``, in document order."""
    out: list[tuple[Any, ...]] = []
    if isinstance(value, dict):
        out.append(prefix)
        for k, v in value.items():
            if k not in FREE_FORM:
                out.extend(object_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(object_paths(v, (*prefix, i)))
    return out


def field_path(path: tuple[Any, ...]) -> str:
    """``("spec", "containers", 0, "x")`` as the API server writes it: ``spec.containers[0].x``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def document_order(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path in ``value``, each before the paths below it, keys in their order."""
    out = [prefix] if prefix else []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        out.extend(document_order(v, (*prefix, k)))
    return out


# Field names no Kubernetes type has ('-' is in none of them), and misspellings people make.
UNKNOWN_NAMES = st.one_of(
    st.from_regex(r"[a-z][a-zA-Z0-9]{0,7}-[a-z0-9]{1,5}", fullmatch=True),
    st.sampled_from(["labls", "nodeSelectr", "tolerashuns", "resourcs", "containres", "imagePolicy", "Name",
                     "enabeld", "wieght", "schedulername", "pluginconfig", "x_y"]),
)


def with_unknown_fields(base: dict[str, Any]) -> st.SearchStrategy[tuple[dict[str, Any], list[str]]]:
    """(``base`` with 1-3 unknown fields put into objects at any depth, their paths in document order)."""
    def insert(places: list[tuple[tuple[Any, ...], str]]) -> tuple[dict[str, Any], list[str]]:
        doc = copy.deepcopy(base)
        inserted: set[tuple[Any, ...]] = set()
        for path, name in places:
            parent: Any = doc
            for key in path:
                parent = parent[key]
            if name in parent:
                continue  # a name this object has (say "Name" in a sampled misspelling list): not unknown here
            parent[name] = {"any": ["value"]}
            inserted.add((*path, name))
        order = [p for p in document_order(doc) if p in inserted]
        return doc, [field_path(p) for p in order]

    places = st.tuples(st.sampled_from(object_paths(base)), UNKNOWN_NAMES)
    return st.lists(places, min_size=1, max_size=3).map(insert).filter(lambda case: bool(case[1]))


# ---------------------------------------------------------------------------------------------------
# Strategies

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", "-1", "1e400", "NaN", "Inf", "-0", "0.0001m", "100m", "1Ei", "9" * 30, "In", "Exists",
                     "Gt", "NoSchedule", "TCP", "Honor", "DoNotSchedule", "2024-13-45T00:00:00Z", "a b",
                     "UPPER", "-leading", "x" * 300, "metadata.name", "*", "Always"]),
)
JSON_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from(["name", "key", "values", "cpu"])),
                        inner, max_size=3),
    ),
    max_leaves=8,
)
_DELETE = object()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _mutated(base: dict[str, Any], path: tuple[Any, ...], new: Any) -> dict[str, Any]:
    doc = copy.deepcopy(base)
    parent: Any = doc
    for key in path[:-1]:
        parent = parent[key]
    if new is _DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = new
    return doc


def mutations(base: dict[str, Any]) -> st.SearchStrategy[tuple[tuple[Any, ...], dict[str, Any]]]:
    """(path, ``base`` with the value at path replaced by a random value or removed)."""
    return st.tuples(st.sampled_from(_paths(base)), st.one_of(JSON_VALUES, st.just(_DELETE))).map(
        lambda pv: (pv[0], _mutated(base, pv[0], pv[1]))
    )


_FRAGMENTS = st.sampled_from([
    "\n", "  ", "- ", ": ", "{", "}", "[", "]", ",", "---\n", "kind: Pod\n", "kind: Node\n", "kind: List\n",
    "apiVersion: v1\n", "metadata:\n", "  name: x\n", "spec:\n", "items:\n", "containers: [{name: c}]",
    "&a ", "*a", "!!binary ", "!!python/object:os.system ", "? ", '"', "'", "#", "\t", "2024-13-45", "1e999",
    "0x1F", "-.inf", ".nan", "~", "null", "true", "<<: ", "|\n", ">\n", "%YAML 1.1\n", "\\u0000", "é", "\x85",
])
YAMLISH = st.one_of(st.text(max_size=200), st.lists(_FRAGMENTS, max_size=40).map("".join))

def _top(path: tuple[Any, ...]) -> str:
    return str(path[0])


def _one_line(msg: str) -> bool:
    """One line, without control characters (values from the input are quoted escaped)."""
    return len(msg.splitlines()) == 1 and not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in msg)


def _check_manifest_error(err: ManifestError, mutated: tuple[Any, ...]) -> None:
    msg = str(err)
    assert _one_line(msg), msg
    assert msg.startswith("fuzz.yaml (") or msg.startswith("fuzz.yaml:"), msg
    if err.path:
        # The field named is in the part of the object that was broken (a field and its siblings
        # constrain each other, e.g. a request and its limit, so the exact field may differ).
        assert err.path.split(".")[0].split("[")[0] == _top(mutated), (err.path, mutated)
        assert f": {err.path}: " in msg
    assert err.reason and err.reason in msg


# ---------------------------------------------------------------------------------------------------
# Manifests


def test_the_objects_being_broken_are_valid() -> None:
    assert isinstance(pod_from_dict(copy.deepcopy(POD), "fuzz.yaml"), Pod)
    assert isinstance(node_from_dict(copy.deepcopy(NODE), "fuzz.yaml"), Node)
    assert isinstance(pod_from_dict(copy.deepcopy(FULL_POD), "fuzz.yaml"), Pod)
    assert isinstance(node_from_dict(copy.deepcopy(FULL_NODE), "fuzz.yaml"), Node)
    # Unknown fields go as deep as the objects do: spec.volumes[1].projected.sources[1].downwardAPI.items[0]
    # .fieldRef is ten steps down, status.runtimeHandlers[0].features four.
    assert max(len(p) for p in object_paths(FULL_POD)) == 10
    assert max(len(p) for p in object_paths(FULL_NODE)) == 4
    assert max(len(p) for p in object_paths(CONFIG)) == 6
    assert isinstance(reservation_from_dict(copy.deepcopy(RESERVATION), "fuzz.yaml"), Reservation)
    load_config(yaml.safe_dump(CONFIG), in_tree_registry().points(), "fuzz.yaml")
    assert len(parse_remote_plugins(yaml.safe_dump(REMOTE), "fuzz.yaml")) == 2


@fuzz_settings(300)
@given(mutations(POD))
def test_broken_pod_is_a_manifest_error_naming_the_field(case: tuple[tuple[Any, ...], dict[str, Any]]) -> None:
    path, doc = case
    try:
        pod = pod_from_dict(doc, "fuzz.yaml")
    except ManifestError as err:
        _check_manifest_error(err, path)
    else:
        assert isinstance(pod, Pod) and pod.containers
        assert all(0 <= q <= MAX_CANONICAL for q in pod.requests.values())


@fuzz_settings(200)
@given(mutations(NODE))
def test_broken_node_is_a_manifest_error_naming_the_field(case: tuple[tuple[Any, ...], dict[str, Any]]) -> None:
    path, doc = case
    try:
        node = node_from_dict(doc, "fuzz.yaml")
    except ManifestError as err:
        _check_manifest_error(err, path)
    else:
        assert isinstance(node, Node)
        assert all(0 <= q <= MAX_CANONICAL for q in node.allocatable.values())


def _unknown_message(paths: list[str]) -> str:
    return ", ".join(f'unknown field "{p}"' for p in paths)


@fuzz_settings(200)
@given(st.sampled_from([("Pod", FULL_POD, "Pod shop/web-1"), ("Node", FULL_NODE, "Node n1")]).flatmap(
    lambda kind: st.tuples(st.just(kind), with_unknown_fields(kind[1]))), st.sampled_from(VALIDATE_MODES))
def test_unknown_fields_at_any_depth_are_named_by_path(
    case: tuple[tuple[str, dict[str, Any], str], tuple[dict[str, Any], list[str]]], validate: str
) -> None:
    (kind, _, ident), (doc, paths) = case
    build = pod_from_dict if kind == "Pod" else node_from_dict
    text = json.dumps(doc) if len(paths) % 2 else yaml.safe_dump(doc, sort_keys=False)
    warnings: list[str] = []
    if validate == "strict":
        with pytest.raises(ManifestError) as err:
            build(doc, "fuzz.yaml", validate=validate)
        assert str(err.value) == f"fuzz.yaml ({ident}): {_unknown_message(paths)}"
        with pytest.raises(ManifestError) as err:
            parse_objects(text, "fuzz.yaml", validate=validate, warn=warnings.append)
        assert str(err.value) == f"fuzz.yaml: document 1 ({ident}): {_unknown_message(paths)}"
        assert warnings == []
    else:
        obj = build(doc, "fuzz.yaml", validate=validate, warn=warnings.append)
        [parsed] = parse_objects(text, "fuzz.yaml", validate=validate, warn=warnings.append)
        assert type(obj) is type(parsed) and obj.name == parsed.name
        expected = [f'Warning: unknown field "{p}"' for p in paths] if validate == "warn" else []
        assert warnings == expected * 2


@fuzz_settings(150)
@given(with_unknown_fields(CONFIG))
def test_unknown_config_fields_at_any_depth_are_named_by_path(case: tuple[dict[str, Any], list[str]]) -> None:
    doc, paths = case
    text = json.dumps(doc) if len(paths) % 2 else yaml.safe_dump(doc, sort_keys=False)
    with pytest.raises(ConfigError) as err:
        load_config(text, _KNOWN, "fuzz.yaml")
    assert str(err.value) == "\n".join(f'fuzz.yaml: unknown field "{p}"' for p in paths)


@fuzz_settings(150)
@given(mutations(RESERVATION))
def test_broken_reservation_is_a_manifest_error(case: tuple[tuple[Any, ...], dict[str, Any]]) -> None:
    _, doc = case
    try:
        reservation = reservation_from_dict(doc, "fuzz.yaml")
    except ManifestError as err:
        msg = str(err)
        assert msg.startswith("fuzz.yaml") and _one_line(msg), msg
    else:
        assert isinstance(reservation, Reservation)


@fuzz_settings(150)
@given(st.one_of(mutations(POD), mutations(NODE), mutations(RESERVATION)), st.sampled_from(["json", "yaml", "list"]))
def test_broken_manifest_text_is_a_manifest_error(case: tuple[tuple[Any, ...], dict[str, Any]], form: str) -> None:
    _, doc = case
    if form == "list":
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [doc]}, allow_nan=True)
    elif form == "json":
        text = json.dumps(doc, allow_nan=True)
    else:
        text = yaml.safe_dump(doc)
    try:
        objects = parse_objects(text, "fuzz.yaml")
    except ManifestError as err:
        assert str(err).startswith("fuzz.yaml: document 1") and _one_line(str(err)), str(err)
    else:
        assert len(objects) == 1 and isinstance(objects[0], Pod | Node | Reservation)


@fuzz_settings(300)
@given(YAMLISH)
@example("[" * 40000 + "]" * 40000)  # libyaml's composer would overflow the C stack
@example("- " * 40000 + "x")
@example('{"a":' * 5000 + "1" + "}" * 5000)
@example("a: 2024-13-45")
@example("a: " + "1" * 5000)
@example('{"a": ' + "1" * 5000 + "}")
def test_random_text_is_a_manifest_error_or_objects(text: str) -> None:
    try:
        objects = parse_objects(text, "fuzz.yaml")
    except ManifestError as err:
        assert str(err).startswith("fuzz.yaml") and _one_line(str(err)), str(err)
    else:
        assert all(isinstance(o, Pod | Node | Reservation) for o in objects)


# ---------------------------------------------------------------------------------------------------
# Quantities

QUANTITY_TEXT = st.one_of(
    st.text(max_size=20),
    st.text(alphabet="0123456789.eE+-KMGTPEimnuk ", max_size=24),
    st.from_regex(r"[+-]?\d{1,30}(\.\d{0,20})?([eE][+-]?\d{1,5}|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?", fullmatch=True),
)


@fuzz_settings(400)
@given(st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]),
       st.one_of(QUANTITY_TEXT, st.floats(allow_nan=True, allow_infinity=True),
                 st.integers(min_value=-(2**80), max_value=2**80), st.booleans(), st.none(), st.lists(st.none())))
def test_quantity_is_canonical_or_a_quantity_error(resource: str, raw: Any) -> None:
    try:
        amount = canonical(resource, raw)
    except QuantityError as err:
        # One line, quoting at most a bounded excerpt of the value.
        assert _one_line(str(err)) and len(str(err)) < 200, str(err)
    else:
        assert isinstance(amount, int) and 0 <= amount <= MAX_CANONICAL
        # What is displayed parses back to the same amount.
        assert canonical(resource, format_quantity(resource, amount)) == amount
        assert parse_quantity(raw) >= 0


# ---------------------------------------------------------------------------------------------------
# KubeSchedulerConfiguration and RemotePlugins

_KNOWN = in_tree_registry().points()


@fuzz_settings(250)
@given(st.one_of(mutations(CONFIG).map(lambda c: yaml.safe_dump(c[1])), YAMLISH))
@example("[" * 40000 + "]" * 40000)
@example("a: 2024-13-45")
def test_broken_config_is_a_config_error(text: str) -> None:
    try:
        config = load_config(text, _KNOWN, "fuzz.yaml")
    except ConfigError as err:
        assert err.problems and all(msg for _, msg in err.problems)
        # One line per problem, each naming the file.
        assert all(line.startswith("fuzz.yaml: ") and _one_line(line) for line in str(err).split("\n")), str(err)
        assert len(str(err).splitlines()) == len(err.problems)
        return
    assert config.profiles
    # Plugin arguments are checked when the profiles are built: a PluginArgsError naming the plugin.
    try:
        Scheduler(config, in_tree_registry(), seed=1)
    except PluginArgsError as err:
        assert str(err)


@fuzz_settings(200)
@given(st.one_of(mutations(REMOTE).map(lambda c: yaml.safe_dump(c[1])), YAMLISH))
@example("plugins: [{name: a, address: 'h:1', deadlines: {default: .nan}}]")
@example("plugins: [{name: a, address: 'h:1', connectTimeout: .inf}]")
def test_broken_remote_plugins_document_is_a_config_error(text: str) -> None:
    try:
        endpoints = parse_remote_plugins(text, "fuzz.yaml")
    except ConfigError as err:
        assert err.problems and all(msg for _, msg in err.problems)
        assert all(line.startswith("fuzz.yaml: ") and _one_line(line) for line in str(err).split("\n")), str(err)
        assert len(str(err).splitlines()) == len(err.problems)
    else:
        for ep in endpoints:
            assert ep.addresses and all(0 < d <= 86400 for d in ep.deadlines.values())
            assert 0 < ep.connect_timeout <= 86400
