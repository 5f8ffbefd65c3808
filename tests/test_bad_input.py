"""Bad input, case by case, with the exact error each gets (docs/bad-input.md): hostile YAML/JSON,
NaN/infinite/negative/oversized quantities, duplicate uids, references to nodes that do not exist,
CycleState writes that would replace framework-private values, remote plugins' out-of-range scores,
and messages over the size limit. Every refused request changes nothing, and the service keeps
running."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from test_remote_contract import cluster, config
from test_remote_harness import endpoint, remote_rig, until

from framework.config import ConfigError, load_config
from framework.kube.client import KubeConfig, KubeConfigError
from framework.plugins import in_tree_registry
from framework.remote import parse_remote_plugins
from framework.remote.services import join_cycle
from framework.service import Server, start_server
from pluginhost import pb
from pluginhost.manifest import VALIDATE_MODES, ManifestError, parse_objects
from pluginhost.model import Pod
from pluginhost.plugin import CycleState
from pluginhost.security import bearer_metadata, with_metadata
from pluginhost.state import StateValue
from pluginhost.status import Code
from pluginhost.wire import MAX_MESSAGE_BYTES

E = pb.plugin

# ---------------------------------------------------------------------------------------------------
# Manifests


def _pod(requests: str) -> str:
    return ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
            f"spec: {{containers: [{{name: c, resources: {{requests: {requests}}}}}]}}\n")


def _node(allocatable: str) -> str:
    return f"apiVersion: v1\nkind: Node\nmetadata: {{name: n}}\nstatus: {{allocatable: {allocatable}}}\n"


def _pod_meta(extra: str) -> str:
    return f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p, {extra}}}\nspec: {{containers: [{{name: c}}]}}\n"


P = "in.yaml: document 1 (Pod default/p): "
N = "in.yaml: document 1 (Node n): "
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
             "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # NaN, infinity and negative quantities, in pod requests and node allocatable
        pytest.param(_pod("{cpu: .nan}"), P + 'spec.containers[0].resources.requests.cpu: invalid quantity "nan": '
                     "not a finite number", id="request-nan-number"),
        pytest.param(_pod("{cpu: NaN}"), P + 'spec.containers[0].resources.requests.cpu: invalid quantity "NaN": '
                     "not a finite number", id="request-nan-string"),
        pytest.param(_pod("{memory: .inf}"), P + 'spec.containers[0].resources.requests.memory: invalid quantity '
                     '"inf": not a finite number', id="request-inf"),
        pytest.param(_pod("{cpu: '-100m'}"), P + 'spec.containers[0].resources.requests.cpu: negative quantity '
                     '"-100m"', id="request-negative"),
        pytest.param(_pod("{cpu: -0.5}"), P + 'spec.containers[0].resources.requests.cpu: negative quantity "-0.5"',
                     id="request-negative-number"),
        pytest.param(_node("{cpu: .nan}"), N + 'status.allocatable.cpu: invalid quantity "nan": not a finite number',
                     id="allocatable-nan"),
        pytest.param(_node("{memory: -.inf}"), N + 'status.allocatable.memory: invalid quantity "-inf": not a '
                     "finite number", id="allocatable-negative-inf"),
        pytest.param(_node("{pods: '-1'}"), N + 'status.allocatable.pods: negative quantity "-1"',
                     id="allocatable-negative"),
        pytest.param(_node("{memory: 1.0e+400}"), N + 'status.allocatable.memory: invalid quantity "inf": not a '
                     "finite number", id="allocatable-overflowing-float"),
        pytest.param(_node("{memory: 1e400}"), N + 'status.allocatable.memory: quantity "1e400" is too large for '
                     "memory", id="allocatable-huge-exponent"),
        pytest.param(_node("{memory: 9Ei}"), N + 'status.allocatable.memory: quantity "9Ei" is too large for memory',
                     id="allocatable-beyond-int64"),
        # Each request fits an int64, their sum does not
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: ["
                     "{name: a, resources: {requests: {memory: 5Ei}}}, "
                     "{name: b, resources: {requests: {memory: 5Ei}}}]}",
                     P + "spec.containers: the pod's memory requests add up to more than the largest quantity",
                     id="requests-sum-beyond-int64"),
        # Values quoted from the input are escaped: the message stays one line
        pytest.param(_pod('{cpu: "1\\n2"}'), P + 'spec.containers[0].resources.requests.cpu: invalid quantity '
                     '"1\\n2"', id="newline-in-value"),
        pytest.param('apiVersion: v1\nkind: Node\nmetadata: {name: "a\\u2028b"}\n',
                     'in.yaml: document 1 (Node a\\u2028b): metadata.name: Invalid value: "a\\u2028b": ' + SUBDOMAIN,
                     id="line-separator-in-name"),
        # YAML and JSON that the parsers cannot build
        pytest.param("- " * 50_000 + "x", "in.yaml: line 1, column 201: invalid YAML: collections nested deeper "
                     "than 100 levels", id="yaml-nesting"),
        pytest.param("[" * 50_000 + "]" * 50_000, "in.yaml: line 1, column 101: invalid YAML: collections nested "
                     "deeper than 100 levels", id="yaml-flow-nesting"),
        pytest.param('{"a":' * 50_000 + "1" + "}" * 50_000, "in.yaml: invalid JSON: collections nested deeper "
                     "than 100 levels", id="json-nesting"),
        pytest.param("kind: Pod\nmetadata: {creationTimestamp: 2024-02-30T00:00:00Z}",
                     "in.yaml: document 1: line 2, column 31: invalid YAML: invalid timestamp '2024-02-30T00:00:00Z': "
                     "day is out of range for month", id="yaml-impossible-date"),
        pytest.param("kind: Node\nspec: {x: " + "7" * 5000 + "}",
                     "in.yaml: document 1: line 2, column 11: invalid YAML: invalid integer "
                     "'7777777777777777777777777777777777777...': too many digits", id="yaml-huge-integer"),
        pytest.param('{"kind": "Node", "x": ' + "7" * 5000 + "}", "in.yaml: invalid JSON: a number has too many digits",
                     id="json-huge-integer"),
        pytest.param("kind: Node\n\x1f", "in.yaml: document 1: line 2, column 1: invalid YAML: unacceptable "
                     "character #x001f: control characters are not allowed", id="control-character"),
        pytest.param('{"kind": "Pod", "x": ' + "[" * 150 + "]" * 150 + "}", "in.yaml: invalid JSON: collections "
                     "nested deeper than 100 levels", id="json-nesting-within-recursion-limit"),
        # Aliases: a value that contains itself, nesting through aliases, an alias bomb (go-yaml's words)
        pytest.param("kind: Pod\nmetadata: &m {name: p, labels: *m}\n", "in.yaml: line 2, column 32: invalid YAML: "
                     "anchor 'm' value contains itself", id="recursive-anchor"),
        pytest.param("a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 120)),
                     "in.yaml: line 100, column 12: invalid YAML: collections nested deeper than 100 levels",
                     id="nesting-through-aliases"),
        pytest.param("a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
            f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(8)),
                     "in.yaml: line 4, column 8: invalid YAML: document contains excessive aliasing", id="alias-bomb"),
        # Strict decoding: unknown fields at any depth, in the API server's words, and keys given twice
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labls: {app: web}}\nspec:\n"
                     "  nodeSelectr: {disk: ssd}\n  tolerashuns: [{operator: Exists}]\n"
                     "  containers: [{name: c, resourcs: {requests: {cpu: '1'}}}]\n",
                     P + 'unknown field "metadata.labls", unknown field "spec.nodeSelectr", unknown field '
                     '"spec.tolerashuns", unknown field "spec.containers[0].resourcs"', id="unknown-pod-fields"),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containres: [{name: c}]}\n",
                     P + 'unknown field "spec.containres"', id="misspelt-containers"),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, livenessProbe: "
                     "{httpGet: {port: 80, pth: /}}}]\n  volumes: [{name: v, confgMap: {name: x}}]\n",
                     P + 'unknown field "spec.containers[0].livenessProbe.httpGet.pth", unknown field '
                     '"spec.volumes[0].confgMap"', id="unknown-fields-in-unmodelled-parts"),
        pytest.param("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {unschedulabel: true}\n"
                     "status: {capacty: {cpu: '4'}}\n",
                     N + 'unknown field "spec.unschedulabel", unknown field "status.capacty"',
                     id="unknown-node-fields"),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n"
                     "spec: {containers: [{name: c, image: x, image: y}]}\n",
                     P + 'duplicate field "spec", duplicate field "spec.containers[0].image"', id="duplicate-yaml"),
        pytest.param('{"kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", '
                     '"name": "q"}, "spec": {"containers": [{"name": "c"}], "nodeSelectr": {}}}]}',
                     'in.yaml: document 1, items[0] (Pod default/q): duplicate field "metadata.name", unknown field '
                     '"spec.nodeSelectr"', id="duplicate-json"),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}], "
                     "securityContext: 1000}\n", P + "spec.securityContext: expected a mapping, got integer",
                     id="unmodelled-object-of-the-wrong-type"),
        # No objects at all: kubectl's error
        pytest.param("", "in.yaml: no objects passed to apply", id="empty"),
        pytest.param("---\n---\n", "in.yaml: no objects passed to apply", id="only-separators"),
        pytest.param("# a comment\n\n", "in.yaml: no objects passed to apply", id="only-comments"),
        pytest.param('{"apiVersion": "v1", "kind": "PodList", "items": []}', "in.yaml: no objects passed to apply",
                     id="empty-list"),
        # The API server's limits and name rules
        pytest.param(_pod_meta("annotations: {a: " + "x" * 262_144 + "}"),
                     P + "metadata.annotations: Too long: may not be more than 262144 bytes",
                     id="annotations-too-long"),
        pytest.param(_pod_meta("annotations: {a: " + "\u20ac" * 87_382 + "}"),  # 3 bytes each: 262147 bytes
                     P + "metadata.annotations: Too long: may not be more than 262144 bytes",
                     id="annotations-too-long-in-bytes"),
        pytest.param(_pod_meta("labels: {tier: " + "x" * 64 + "}"),
                     P + f'metadata.labels: Invalid value: "{"x" * 64}": must be no more than 63 characters',
                     id="label-value-too-long"),
        pytest.param(_pod_meta("labels: {tier: -web}"),
                     P + "metadata.labels: Invalid value: \"-web\": a valid label must be an empty string or consist "
                     "of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
                     "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                     "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')", id="label-value-invalid"),
        pytest.param(_pod_meta("labels: {'example.com/a b': x}"),
                     P + "metadata.labels: Invalid value: \"example.com/a b\": name part must consist of "
                     "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
                     "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                     "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')", id="label-key-invalid"),
        pytest.param(_pod_meta("annotations: {'Example_.com/x': y}"),
                     P + "metadata.annotations: Invalid value: \"Example_.com/x\": prefix part " + SUBDOMAIN,
                     id="annotation-key-invalid"),
        pytest.param("apiVersion: v1\nkind: Node\nmetadata: {name: " + "n" * 254 + "}\n",
                     f"in.yaml: document 1 (Node {'n' * 254}): metadata.name: Invalid value: \"{'n' * 254}\": "
                     "must be no more than 253 characters", id="name-too-long"),
        pytest.param("apiVersion: v1\nkind: Node\nmetadata: {name: Node_1}\n",
                     'in.yaml: document 1 (Node Node_1): metadata.name: Invalid value: "Node_1": ' + SUBDOMAIN,
                     id="name-invalid"),
        pytest.param("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: " + "a" * 64 + "}\n"
                     "spec: {containers: [{name: c}]}\n",
                     f"in.yaml: document 1 (Pod {'a' * 64}/p): metadata.namespace: Invalid value: \"{'a' * 64}\": "
                     "must be no more than 63 characters", id="namespace-too-long"),
    ],
)  # fmt: skip
def test_bad_manifest_is_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_objects(text, "in.yaml")
    assert str(err.value) == message


_TYPOS = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labls: {app: web}}\n"
          "spec: {containers: [{name: c, resources: {requests: {cpu: 250m}}, image: a, image: b}]}\n")


@pytest.mark.parametrize(
    ("validate", "warnings"),
    [
        ("warn", ['Warning: duplicate field "spec.containers[0].image"', 'Warning: unknown field "metadata.labls"']),
        ("ignore", []),
    ],
)
def test_warn_and_ignore_keep_the_object_and_drop_unknown_fields(validate: str, warnings: list[str]) -> None:
    said: list[str] = []
    [pod] = parse_objects(_TYPOS, "in.yaml", validate=validate, warn=said.append)
    assert said == warnings
    assert isinstance(pod, Pod)
    # The last of the duplicated values is kept, the unknown field is not read: no labels.
    assert (pod.name, pod.labels, pod.containers[0].image, pod.requests) == ("p", {}, "b", {"cpu": 250})


def test_validate_must_be_one_of_the_modes() -> None:
    assert VALIDATE_MODES == ("strict", "warn", "ignore")
    with pytest.raises(ValueError, match=r"^validate must be one of strict, warn, ignore, got 'Strict'$"):
        parse_objects(_TYPOS, "in.yaml", validate="Strict")


# ---------------------------------------------------------------------------------------------------
# KubeSchedulerConfiguration and RemotePlugins

_KSC = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("- " * 50_000 + "x", "c.yaml: line 1, column 201: invalid YAML: collections nested deeper than "
                     "100 levels", id="nesting"),
        pytest.param("apiVersion: 2024-13-01\n", "c.yaml: line 1, column 13: invalid YAML: invalid timestamp "
                     "'2024-13-01': month must be in 1..12", id="impossible-date"),
        pytest.param("parallelism: " + "9" * 5000, "c.yaml: line 1, column 14: invalid YAML: invalid integer "
                     "'9999999999999999999999999999999999999...': too many digits", id="huge-integer"),
        pytest.param("kind: x\n\x1f", "c.yaml: line 2, column 1: invalid YAML: unacceptable character #x001f: "
                     "control characters are not allowed", id="control-character"),
        pytest.param("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                     "profiles: [{schedulerName: \"a\\nb\", plugins: {score: {enabled: [{name: \"X\\nY\"}]}}}]\n",
                     'c.yaml: profiles[0].plugins.score.enabled[0]: score plugin "X\\nY" does not exist',
                     id="newline-in-value"),
        pytest.param('{"profiles": [' * 5000 + "]" * 5000 + "}", "c.yaml: invalid JSON: collections nested deeper than "
                     "100 levels", id="json-nesting"),
        pytest.param("profiles: " + "[" * 5000 + "]" * 5000, "c.yaml: line 1, column 110: invalid YAML: collections "
                     "nested deeper than 100 levels", id="flow-nesting-past-libyaml-limit"),
        pytest.param(_KSC + "profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args: &a {x: *a}\n",
                     "c.yaml: line 6, column 18: invalid YAML: anchor 'a' value contains itself",
                     id="recursive-anchor"),
        # Strict decoding, as kube-scheduler's: every unknown field by its path, keys given twice
        pytest.param(_KSC + "percentageOfNodesToScor: 50\nprofiles:\n- schedulerName: a\n  plugin: {}\n"
                     "  plugins: {score: {enabled: [{name: ImageLocality, wieght: 2}]}}\nleaderElection: {leaderElet: "
                     "false}\n",
                     'c.yaml: unknown field "percentageOfNodesToScor"\nc.yaml: unknown field "profiles[0].plugin"\n'
                     'c.yaml: unknown field "profiles[0].plugins.score.enabled[0].wieght"\n'
                     'c.yaml: unknown field "leaderElection.leaderElet"', id="unknown-fields"),
        pytest.param(_KSC + "profiles:\n- schedulerName: a\n  schedulerName: b\n",
                     'c.yaml: line 5, column 3: duplicate field "profiles[0].schedulerName"', id="duplicate-field"),
    ],
)  # fmt: skip
def test_bad_config_is_one_clear_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(text, in_tree_registry().points(), "c.yaml")
    assert str(err.value) == message


_REMOTE = "apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n- name: a\n  address: 127.0.0.1:1\n"
_ENDPOINT_FIELDS = ("name, address, addresses, deadlines, failurePolicy, batchSize, connectTimeout, resolveInterval, "
                    "tls, tokenFile, shadow, canary")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("  deadlines: {filter: .nan}\n", "r.yaml: plugins[0].deadlines.filter: duration must be positive, got nan"),
        ("  deadlines: {filter: .inf}\n", "r.yaml: plugins[0].deadlines.filter: duration must be at most 24h, got inf"),
        ("  deadlines: {filter: -1}\n", "r.yaml: plugins[0].deadlines.filter: duration must be positive, got -1"),
        ("  deadlines: {filter: 25h}\n", "r.yaml: plugins[0].deadlines.filter: duration must be at most 24h, "
         "got '25h'"),
        ("  connectTimeout: " + "9" * 400 + "s\n", "r.yaml: plugins[0].connectTimeout: duration must be at most 24h, "
         "got '999999999999999999999999999999999999..."),
        ("  deadlines: {filter: 1e400s}\n", "r.yaml: plugins[0].deadlines.filter: invalid duration '1e400s' "
         "(use e.g. 250ms, 2s, 1m)"),
        ("  batchSize: 2024-13-01\n", "r.yaml: line 6, column 14: invalid YAML: invalid timestamp '2024-13-01': "
         "month must be in 1..12"),
        ("  adress: 127.0.0.1:2\n", f"r.yaml: plugins[0].adress: unknown field (allowed: {_ENDPOINT_FIELDS})"),
        ("  address: 127.0.0.1:2\n", 'r.yaml: line 6, column 3: duplicate field "plugins[0].address"'),
        ("  tls: &t {caFile: *t}\n", "r.yaml: line 6, column 20: invalid YAML: anchor 't' value contains itself"),
        ("  deadlines: " + "{a: " * 200 + "1" + "}" * 200 + "\n", "r.yaml: line 6, column 402: invalid YAML: "
         "collections nested deeper than 100 levels"),
    ],
    ids=["nan", "inf", "negative", "too-long", "absurd", "not-a-duration", "impossible-date", "unknown-field",
         "duplicate-field", "recursive-anchor", "nesting"],
)  # fmt: skip
def test_bad_remote_plugins_document_is_one_clear_line(extra: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_remote_plugins(_REMOTE + extra, "r.yaml")
    assert str(err.value) == message


# ---------------------------------------------------------------------------------------------------
# The Scheduler API: duplicate uids, unknown nodes, unknown event types, oversized messages


def _manifest(*objs: dict[str, Any]) -> Any:
    return pb.scheduler.Manifest(source="t.json", content=json.dumps({"kind": "List", "items": list(objs)}))


def _node_obj(name: str, uid: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"uid": uid} if uid else {})}
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta,
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}


def _pod_obj(name: str, uid: str = "", node: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"uid": uid} if uid else {})}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def run(test: Callable[[Server, Any], Awaitable[None]]) -> None:
    async def main() -> None:
        registry = in_tree_registry()
        from framework.profiles import default_scheduler_config

        server = await start_server(default_scheduler_config(registry), registry, "127.0.0.1:0", seed=1)
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                await test(server, channel)
        finally:
            await server.stop(0.5)

    asyncio.run(asyncio.wait_for(main(), 60))


def _state(server: Server) -> tuple[int, int, int, dict[str, str], dict[str, str]]:
    s = server.scheduler
    return (s.cache.generation, len(s.pods), len(s.nodes), {r.pod.key: r.pod.node_name for r in s.pods.values()},
            {name: node.uid for name, node in s.nodes.items()})


# Applied first, in every case below: n1 (uid node-1) and a pod bound to it (uid pod-1).
_SEEDED = [_node_obj("n1", "node-1"), _pod_obj("bound", "pod-1", "n1")]


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        pytest.param([_node_obj("n2", "u"), _pod_obj("p", "u")], "Pod default/p has the same uid 'u' as Node n2",
                     id="same-uid-twice-in-one-apply"),
        pytest.param([_pod_obj("p", "pod-1")], "Pod default/p: uid 'pod-1' is already used by pod default/bound",
                     id="pod-reuses-a-pod-uid"),
        pytest.param([_pod_obj("p", "node-1")], "Pod default/p: uid 'node-1' is already used by node n1",
                     id="pod-reuses-a-node-uid"),
        pytest.param([_node_obj("n2", "node-1")], "Node n2: uid 'node-1' is already used by node n1",
                     id="node-reuses-a-node-uid"),
        pytest.param([_node_obj("n2", "pod-1")], "Node n2: uid 'pod-1' is already used by pod default/bound",
                     id="node-reuses-a-pod-uid"),
        pytest.param([_node_obj("n1", "other")], "Node n1: uid 'other' does not match the existing node's uid "
                     "'node-1'", id="node-changes-its-uid"),
        pytest.param([_node_obj("n2"), _pod_obj("p", node="ghost")], "Pod default/p: spec.nodeName 'ghost' names "
                     "no node (apply the node first, or in the same request)", id="pod-bound-to-missing-node"),
        pytest.param([_pod_obj("bound", "pod-1", "n2")], "Pod default/bound: spec.nodeName 'n2' names no node "
                     "(apply the node first, or in the same request)", id="bound-pod-moved-to-missing-node"),
    ],
)  # fmt: skip
def test_apply_refuses_duplicate_uids_and_unknown_nodes_and_changes_nothing(
    objects: list[dict[str, Any]], message: str
) -> None:
    async def body(server: Server, channel: Any) -> None:
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        await stub.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(*_SEEDED)]), timeout=10)
        before = _state(server)
        for dry_run in (True, False):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(*objects)], dry_run=dry_run),
                                 timeout=10)
            assert (err.value.code(), err.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
            assert _state(server) == before
        # Still serving: a valid apply succeeds.
        reply = await stub.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(_node_obj("n3"))]), timeout=10)
        assert [(a.ref.name, a.action) for a in reply.applied] == [("n3", "created")]

    run(body)


def test_pod_may_name_a_node_applied_in_the_same_request_or_keep_its_deleted_node() -> None:
    async def body(server: Server, channel: Any) -> None:
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        reply = await stub.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(
            _pod_obj("p", "pod-p", "n1"), _node_obj("n1"))]), timeout=10)
        assert sorted((a.ref.kind, a.ref.name, a.action) for a in reply.applied) == [
            ("Node", "n1", "created"), ("Pod", "p", "created")]
        await stub.Delete(pb.scheduler.DeleteRequest(objects=[pb.scheduler.ObjectRef(kind="Node", name="n1")]),
                          timeout=10)
        # Re-applying the pod unchanged (a label added) is not a new reference to the missing node.
        changed = _pod_obj("p", "pod-p", "n1")
        changed["metadata"]["labels"] = {"a": "b"}
        reply = await stub.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(changed)]), timeout=10)
        assert [(a.ref.name, a.action) for a in reply.applied] == [("p", "configured")]
        assert server.scheduler.get_pod("default", "p").pod.labels == {"a": "b"}

    run(body)


def test_reapplying_a_bound_pod_keeps_its_binding_and_reports_unchanged() -> None:
    """Like kubectl apply: a manifest without nodeName leaves the binding alone, the same manifest
    again is "unchanged", and naming another node is refused."""

    async def body(server: Server, channel: Any) -> None:
        stub = pb.scheduler_grpc.SchedulerStub(channel)

        async def apply(*objs: dict[str, Any]) -> list[tuple[str, str]]:
            reply = await stub.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(*objs)]), timeout=10)
            return [(a.ref.name, a.action) for a in reply.applied]

        await apply(*_SEEDED, _node_obj("n2"))
        labelled = _pod_obj("bound", "pod-1")
        labelled["metadata"]["labels"] = {"tier": "web"}
        assert await apply(labelled) == [("bound", "configured")]
        assert await apply(labelled) == [("bound", "unchanged")]
        assert await apply(_node_obj("n2")) == [("n2", "unchanged")]
        rec = server.scheduler.get_pod("default", "bound")
        assert rec is not None
        assert (rec.pod.node_name, rec.pod.labels, rec.phase) == ("n1", {"tier": "web"}, "Bound")
        before = _state(server)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await apply(_pod_obj("bound", "pod-1", "n2"))
        message = "Pod default/bound: spec.nodeName is immutable once bound (bound to 'n1')"
        assert (err.value.code(), err.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
        assert _state(server) == before

    run(body)


def test_watch_refuses_unknown_event_types() -> None:
    async def body(server: Server, channel: Any) -> None:
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        call = stub.Watch(pb.scheduler.WatchRequest(types=[pb.scheduler.EVENT_TYPE_BOUND, 99], replay=True),
                          timeout=10)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await call.read()
        assert (err.value.code(), err.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT,
                                                           "unknown event type(s) [99] in types")

    run(body)


_HOSTILE_MANIFESTS = [
    ("[" * 50_000 + "]" * 50_000,
     "m.yaml: line 1, column 101: invalid YAML: collections nested deeper than 100 levels"),
    ('{"kind": "Pod", "x": ' + "[" * 150 + "]" * 150 + "}",
     "m.yaml: invalid JSON: collections nested deeper than 100 levels"),
    ("kind: Pod\nmetadata: &m {name: p, labels: *m}\n",
     "m.yaml: line 2, column 32: invalid YAML: anchor 'm' value contains itself"),
    ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeSelectr: {a: b}, containers: [{name: c}]}\n",
     'm.yaml: document 1 (Pod default/p): unknown field "spec.nodeSelectr"'),
    ("---\n# nothing\n", "m.yaml: no objects passed to apply"),
]


def test_apply_refuses_hostile_text_unknown_fields_and_no_objects_and_keeps_serving() -> None:
    async def body(server: Server, channel: Any) -> None:
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        await stub.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(*_SEEDED)]), timeout=10)
        before = _state(server)
        for content, message in _HOSTILE_MANIFESTS:
            for dry_run in (True, False):
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await stub.Apply(pb.scheduler.ApplyRequest(manifests=[
                        pb.scheduler.Manifest(source="m.yaml", content=content)], dry_run=dry_run), timeout=10)
                assert (err.value.code(), err.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, message)
                assert _state(server) == before
        reply = await stub.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(_node_obj("n3"))]), timeout=10)
        assert [(a.ref.name, a.action) for a in reply.applied] == [("n3", "created")]

    run(body)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("deep.yaml", _KSC + "profiles: " + "[" * 5000 + "]" * 5000 + "\n",
         "error: deep.yaml: line 3, column 110: invalid YAML: collections nested deeper than 100 levels"),
        ("deep.json", '{"profiles": ' + "[" * 5000 + "]" * 5000 + "}",
         "error: deep.json: invalid JSON: collections nested deeper than 100 levels"),
        ("alias.yaml", _KSC + "profiles: &p [{pluginConfig: *p}]\n",
         "error: alias.yaml: line 3, column 30: invalid YAML: anchor 'p' value contains itself"),
    ],
    ids=["yaml", "json", "alias"],
)
def test_serve_with_a_hostile_config_exits_with_one_line(tmp_path: Path, name: str, text: str, message: str) -> None:
    (tmp_path / name).write_text(text)
    proc = subprocess.run([sys.executable, "-m", "framework.cli", "serve", "--config", name, "--listen", "127.0.0.1:0"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})
    assert (proc.returncode, proc.stderr, proc.stdout) == (1, message + "\n", "")


def test_a_hostile_kubeconfig_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("clusters: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(KubeConfigError) as err:
        KubeConfig.from_file(path)
    assert str(err.value) == (f"kubeconfig {path}: line 1, column 110: invalid YAML: collections nested deeper than "
                              "100 levels")


def test_oversized_apply_is_resource_exhausted_and_the_service_keeps_running() -> None:
    async def body(server: Server, channel: Any) -> None:
        # A client that sends without a limit, to see the server's (the default send limit is none).
        async with grpc.aio.insecure_channel(server.address, options=[("grpc.max_send_message_length", -1)]) as big:
            stub = pb.scheduler_grpc.SchedulerStub(big)
            content = "# " + "x" * MAX_MESSAGE_BYTES + "\n"  # a comment: valid YAML, only too big
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Apply(pb.scheduler.ApplyRequest(manifests=[pb.scheduler.Manifest(
                    source="big.yaml", content=content)]), timeout=60)
            del content
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert (err.value.details() or "").startswith("SERVER: Received message larger than max (")
        assert (err.value.details() or "").endswith(f" vs. {MAX_MESSAGE_BYTES})")
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        reply = await stub.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(_node_obj("n1"))]), timeout=10)
        assert [(a.ref.name, a.action) for a in reply.applied] == [("n1", "created")]
        assert len(server.scheduler.nodes) == 1

    run(body)


# ---------------------------------------------------------------------------------------------------
# Handle and CycleState: unknown nodes, unknown cycles, framework-private state


def test_handle_calls_with_unknown_nodes() -> None:
    async def body(server: Server, channel: Any) -> None:
        stub = pb.scheduler_grpc.SchedulerStub(channel)
        await stub.Apply(pb.scheduler.ApplyRequest(manifests=[_manifest(
            _node_obj("n1"), {**_pod_obj("p", "pod-p"), "spec": {**_pod_obj("p")["spec"],
                                                                "schedulerName": "nobody"}})]), timeout=10)
        before = _state(server)
        assert server.services is not None  # the Handle service answers registered plugin hosts: be one
        server.services.grant("bad-input", SimpleNamespace(name="test", manifests={"P": None}))
        handle = with_metadata(pb.handle_grpc.HandleStub(channel), bearer_metadata("bad-input"))
        for request, details in [
            (pb.handle.GetNodeInfoRequest(name="ghost"), "node 'ghost' is not in the snapshot"),
            (pb.handle.GetNodeInfoRequest(id=4242), "node id 4242 is not in the snapshot"),
        ]:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await handle.GetNodeInfo(request, timeout=10)
            assert (err.value.code(), err.value.details()) == (grpc.StatusCode.NOT_FOUND, details)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await handle.GetNodeInfo(pb.handle.GetNodeInfoRequest(name="n1", generation=10**9), timeout=10)
        assert (err.value.code(), err.value.details()) == (
            grpc.StatusCode.FAILED_PRECONDITION,
            f"snapshot generation {10**9} is not held (latest is {before[0]})")
        reply = await handle.BindPod(pb.handle.BindPodRequest(pod=pb.types.PodRef(uid="pod-p"), node_name="ghost"),
                                     timeout=10)
        assert (reply.status.code, list(reply.status.reasons)) == (pb.types.CODE_ERROR, ["node 'ghost' not found"])
        assert _state(server) == before

    run(body)


def test_cycle_state_writes_are_checked_whole_and_never_replace_private_values() -> None:
    async def body(server: Server, channel: Any) -> None:
        state = CycleState("cycle-1")
        private = object()
        state.write("InTree/private", private)
        state.write("Shared/k", StateValue("application/json", b"1"))
        server.scheduler.cycle_states["cycle-1"] = state
        # The CycleState service answers registered plugin hosts, for plugins part of the cycle: be one.
        join_cycle(state, "P")
        assert server.services is not None
        server.services.grant("bad-input", SimpleNamespace(name="test", manifests={"P": None}))
        try:
            cs = with_metadata(pb.cyclestate_grpc.CycleStateStub(channel), bearer_metadata("bad-input"))
            entry = pb.types.StateEntry
            cases = [
                (cs.Write(pb.cyclestate.WriteStateRequest(cycle_id="cycle-1", plugin="P", entries=[
                    entry(key="Shared/k", value=b"2"), entry(key="", value=b"x")]), timeout=10),
                 grpc.StatusCode.INVALID_ARGUMENT, "cycle state keys must not be empty"),
                (cs.Write(pb.cyclestate.WriteStateRequest(cycle_id="cycle-1", plugin="P", entries=[
                    entry(key="Shared/k", value=b"2"), entry(key="InTree/private", value=b"x")]), timeout=10),
                 grpc.StatusCode.FAILED_PRECONDITION,
                 "cycle state key 'InTree/private' holds a object, not a StateValue (changed by plugin 'P')"),
                (cs.Delete(pb.cyclestate.DeleteStateRequest(cycle_id="cycle-1", plugin="P",
                                                             keys=["Shared/k", "InTree/private"]), timeout=10),
                 grpc.StatusCode.FAILED_PRECONDITION,
                 "cycle state key 'InTree/private' holds a object, not a StateValue (changed by plugin 'P')"),
                (cs.Write(pb.cyclestate.WriteStateRequest(cycle_id="cycle-2", plugin="P", entries=[
                    entry(key="Shared/k", value=b"2")]), timeout=10),
                 grpc.StatusCode.NOT_FOUND, "no scheduling context with cycle id 'cycle-2' (finished?)"),
            ]
            for call, code, details in cases:
                with pytest.raises(grpc.aio.AioRpcError) as err:
                    await call
                assert (err.value.code(), err.value.details()) == (code, details)
                # Nothing in the refused request was applied, not even its valid first entry.
                assert state.get("InTree/private") is private
                assert state.get("Shared/k") == StateValue("application/json", b"1")
            await cs.Write(pb.cyclestate.WriteStateRequest(cycle_id="cycle-1", plugin="P", entries=[
                entry(key="Shared/k", content_type="text/plain", value=b"2")]), timeout=10)
            assert state.get("Shared/k") == StateValue("text/plain", b"2")
        finally:
            del server.scheduler.cycle_states["cycle-1"]

    run(body)


# ---------------------------------------------------------------------------------------------------
# Scores from a remote plugin: out of [0, 100] or the wrong length


class _ScoringHost(pb.plugin_grpc.PluginServicer):  # type: ignore[misc]
    """A plugin host (the raw contract) whose Score/NormalizeScore/Filter-with-scores answers are wrong."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def Handshake(self, request: Any, context: Any) -> Any:
        points = [E.EXTENSION_POINT_FILTER, E.EXTENSION_POINT_SCORE]
        if self.mode.startswith("normalize"):
            points.append(E.EXTENSION_POINT_NORMALIZE_SCORE)
        manifest = pb.plugin.PluginManifest(name="Bad", points=points, needs_snapshot=False,
                                            filter_and_score=self.mode.startswith("with-filter"))
        return pb.plugin.HandshakeResponse(plugins=[manifest], host_version="bad")

    async def Configure(self, request: Any, context: Any) -> Any:
        return pb.plugin.ConfigureReply()

    async def Filter(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for req in requests:
            if req.WhichOneof("msg") != "batch":
                continue
            n = len(req.batch.node_ids)
            scores = {"with-filter-short": [5] * (n - 1), "with-filter-range": [101] * n}.get(self.mode, [])
            yield pb.plugin.FilterReply(batch_seq=req.batch.batch_seq, codes=[0] * n, scores=scores)

    async def Score(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for req in requests:
            if req.WhichOneof("msg") != "batch":
                continue
            n = len(req.batch.node_ids)
            value = {"score-negative": -1, "score-huge": 2**63 - 1}.get(self.mode, 50)
            yield pb.plugin.ScoreReply(batch_seq=req.batch.batch_seq, scores=[value] * n)

    async def NormalizeScore(self, request: Any, context: Any) -> Any:
        n = len(request.node_ids)
        scores = [7] * (n + 1) if self.mode == "normalize-long" else [-5] * n
        return pb.plugin.NormalizeScoreReply(status=pb.types.Status(), scores=scores)


_INVALID_SCORE = ('applying score defaultWeights on Score plugins: plugin "Bad" returns an invalid score {}, it should '
                  "in the range of [0, 100] after normalizing")


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("score-negative", _INVALID_SCORE.format(-1)),
        ("score-huge", _INVALID_SCORE.format(2**63 - 1)),
        ("normalize-long",
         'running Normalize on Score plugins: plugin "Bad" failed with: returned 4 normalized scores for 3 nodes'),
        ("normalize-range", _INVALID_SCORE.format(-5)),
        ("with-filter-short", 'running "Bad" filter plugin: sent 2 scores for the 3 nodes of Filter batch 0'),
        ("with-filter-range", _INVALID_SCORE.format(101)),
    ],
)  # fmt: skip
def test_remote_scores_out_of_range_or_wrong_length_fail_the_cycle_naming_the_plugin(mode: str,
                                                                                   message: str) -> None:
    async def main() -> Any:
        server = grpc.aio.server()
        pb.plugin_grpc.add_PluginServicer_to_server(_ScoringHost(mode), server)  # type: ignore[no-untyped-call]
        address = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
        await server.start()
        text = config(["Bad"])
        rig = await remote_rig([endpoint("bad", address)], lambda r: load_config(text, r.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply(cluster(["n0", "n1", "n2"], ["p1"]))

            def failed() -> bool:
                r = s.get_pod("default", "p1")
                return r is not None and r.last_status is not None

            await until(failed, 20, "the cycle to fail")
            r = s.get_pod("default", "p1")
            assert r is not None and r.phase != "Bound"
            assert s.leaks() == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0}
            return r.last_status
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()
            await server.stop(0)

    status = asyncio.run(main())
    assert (status.code, status.plugin) == (Code.Error, "Bad")
    assert status.message() == message


# ---------------------------------------------------------------------------------------------------
# make fuzz: the fuzz tests of make test, with a long, randomized budget


def test_make_fuzz_runs_the_fuzz_tests_with_a_long_random_budget() -> None:
    makefile = (Path(__file__).resolve().parent.parent / "Makefile").read_text()
    recipe = makefile[makefile.index("\nfuzz:"):].split("\n")[2]
    assert recipe == ("\tOUTRIGGER_FUZZ=long $(BIN)/python -m pytest -q -p no:cacheprovider "
                      "tests/test_fuzz_parsers.py tests/test_fuzz_services.py")
    probe = "from fuzzing import fuzz_settings; s = fuzz_settings(7); print(s.max_examples, s.derandomize)"
    tests = str(Path(__file__).resolve().parent)
    for env, printed in [({}, "7 True"), ({"OUTRIGGER_FUZZ": "long"}, "350 False"),
                         ({"OUTRIGGER_FUZZ_SCALE": "3"}, "21 False")]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("OUTRIGGER_FUZZ")}
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                              cwd=tests, env={**clean, **env})
        assert (proc.returncode, proc.stdout.strip()) == (0, printed), proc.stderr
