"""Tests for framework.plugins.podtopologyspread (kube-scheduler v1.33 PodTopologySpread).

Expected statuses and scores are worked out by hand from kube-scheduler's rules: Filter's
``matchNum + selfMatch - minMatch > maxSkew``, Score's ``count * log(domains + 2) + (maxSkew - 1)``
summed over the soft constraints and rounded half away from zero, and NormalizeScore's
``100 * (max + min - score) / max`` (ignored nodes 0).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from framework.plugins.noderesources import PluginArgsError
from framework.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PodTopologySpread,
)
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import LabelSelector, Node, Pod
from pluginhost.plugin import ActionType, ClusterEvent, CycleState, NodeBatch, QueueingHint
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import Code, Status

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
FOO = {"matchLabels": {"foo": "bar"}}

OK = "ok"
SKEW = "skew"  # Unschedulable: constraints not matched
LABEL = "label"  # UnschedulableAndUnresolvable: missing required label

_counter = 0


# ---- builders --------------------------------------------------------------------------------


def mk_node(name: str, zone: str | None = None, *, host: bool = True, labels: dict[str, str] | None = None,
            taints: list[dict[str, str]] | None = None) -> Node:
    all_labels = dict(labels or {})
    if host:
        all_labels[HOST] = name
    if zone is not None:
        all_labels[ZONE] = zone
    spec: dict[str, Any] = {"taints": taints} if taints else {}
    return node_from_dict({
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    })


def mk_pod(name: str | None = None, labels: dict[str, str] | None = None, *, namespace: str = "default",
           constraints: Sequence[dict[str, Any]] = (), node_selector: dict[str, str] | None = None,
           affinity: dict[str, Any] | None = None, tolerations: list[dict[str, Any]] | None = None,
           deleting: bool = False, node_name: str = "") -> Pod:
    global _counter
    _counter += 1
    meta: dict[str, Any] = {"name": name or f"p{_counter}", "namespace": namespace, "labels": labels or {},
                            "uid": f"uid-{_counter}"}
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "img"}]}
    if constraints:
        spec["topologySpreadConstraints"] = list(constraints)
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if node_name:
        spec["nodeName"] = node_name
    return pod_from_dict({"metadata": meta, "spec": spec})


def spread(max_skew: int, key: str, when: str = "DoNotSchedule", selector: dict[str, Any] | None = None,
           **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector is not None:
        c["labelSelector"] = selector
    c.update(extra)
    return c


def foo_pods(n: int, labels: dict[str, str] | None = None, **kw: Any) -> list[Pod]:
    return [mk_pod(labels=labels if labels is not None else {"foo": "bar"}, **kw) for _ in range(n)]


def cluster(nodes: Sequence[Node], placed: dict[str, list[Pod]] | None = None) -> tuple[ClusterTable, Snapshot]:
    table = ClusterTable()
    for n in nodes:
        table.upsert_node(n)
    for node_name, pods in (placed or {}).items():
        for p in pods:
            assert table.place_pod(p, node_name)
    return table, table.snapshot()


def rows_of(snap: Snapshot, names: Sequence[str] | None) -> np.ndarray:
    names = list(snap.names) if names is None else names
    return np.asarray([snap.row(n) for n in names], dtype=np.int64)


def short(st: Status) -> str:
    if st.code is Code.Success:
        return OK
    if st.code is Code.Unschedulable and st.reasons == (ERR_REASON_CONSTRAINTS_NOT_MATCH,):
        return SKEW
    if st.code is Code.UnschedulableAndUnresolvable and st.reasons == (ERR_REASON_NODE_LABEL_NOT_MATCH,):
        return LABEL
    return str(st)


def run_filter(pl: PodTopologySpread, pod: Pod, snap: Snapshot, names: Sequence[str] | None = None,
               state: CycleState | None = None) -> dict[str, str]:
    if state is None:
        state = CycleState("c", snap)
        _, st = asyncio.run(pl.pre_filter(state, pod))
        assert st.ok, st
    rows = rows_of(snap, names)
    res = asyncio.run(pl.filter(state, pod, NodeBatch(snap, rows)))
    assert len(res) == len(rows)
    return {snap.names[int(r)]: short(res.status_at(i)) for i, r in enumerate(rows.tolist())}


def run_score(pl: PodTopologySpread, pod: Pod, snap: Snapshot,
              names: Sequence[str] | None = None) -> tuple[dict[str, int], dict[str, int]]:
    state = CycleState("c", snap)
    batch = NodeBatch(snap, rows_of(snap, names))
    st = asyncio.run(pl.pre_score(state, pod, batch))
    assert st.ok, st
    raw = asyncio.run(pl.score(state, pod, batch))
    assert raw.dtype == np.int64
    scores = raw.copy()
    st = asyncio.run(pl.normalize_score(state, pod, batch, scores))
    assert st.ok, st
    names = batch.names
    return dict(zip(names, raw.tolist(), strict=True)), dict(zip(names, scores.tolist(), strict=True))


# Four nodes in two zones, used by most Filter cases.
def four_nodes() -> list[Node]:
    return [mk_node("n1", "z1"), mk_node("n2", "z1"), mk_node("n3", "z2"), mk_node("n4", "z2")]


PROD = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}]}}}
NO_SCHEDULE = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]


# ---- Filter ----------------------------------------------------------------------------------


FILTER_CASES: list[Any] = [
    pytest.param(
        four_nodes(), {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK},
        id="zone-maxskew1-goes-to-empty-zone",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(3, ZONE, selector=FOO)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="zone-maxskew3-allows-2-1-0",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(2, ZONE, selector=FOO)]),
        {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK},
        id="zone-maxskew2-exactly-exceeded",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(2), "n2": foo_pods(1), "n4": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, HOST, selector=FOO)]),
        {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": SKEW},
        id="hostname-maxskew1",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(1), "n2": foo_pods(1), "n3": foo_pods(1), "n4": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, HOST, selector=FOO)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="hostname-balanced",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"other": "x"}, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK},
        id="no-self-match-still-skewed-2-0",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(1)},
        mk_pod(labels={"other": "x"}, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="no-self-match-1-0-fits",
    ),
    pytest.param(
        [*four_nodes(), mk_node("n5", None), mk_node("n6", "z3", host=False)],
        {"n5": foo_pods(3)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK, "n5": LABEL, "n6": OK},
        id="missing-zone-label-unresolvable",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(3, namespace="other"), "n2": foo_pods(1, namespace="other")},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="other-namespace-pods-ignored",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(3, deleting=True)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="terminating-pods-ignored",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(2, labels={"foo": "baz"})},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="non-matching-pods-ignored",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(1), "n3": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO, minDomains=3)]),
        {"n1": SKEW, "n2": SKEW, "n3": SKEW, "n4": SKEW},
        id="min-domains-above-domain-count-min-is-0",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(1), "n3": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO, minDomains=2)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="min-domains-equal-domain-count-uses-real-min",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(1), "n3": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(2, ZONE, selector=FOO, minDomains=3)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="min-domains-with-larger-maxskew",
    ),
    pytest.param(
        four_nodes(), {},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, HOST, selector=FOO, minDomains=5)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="min-domains-empty-cluster-counts",
    ),
    # nodeAffinityPolicy: n3 (zone z3) lacks env=prod. Honor drops zone z3 as a domain: min is 1.
    pytest.param(
        [mk_node("n1", "z1", labels={"env": "prod"}), mk_node("n2", "z2", labels={"env": "prod"}),
         mk_node("n3", "z3")],
        {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, affinity=PROD, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": OK, "n2": OK, "n3": OK},
        id="affinity-policy-honor-excludes-domain",
    ),
    pytest.param(
        [mk_node("n1", "z1", labels={"env": "prod"}), mk_node("n2", "z2", labels={"env": "prod"}),
         mk_node("n3", "z3")],
        {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, affinity=PROD,
               constraints=[spread(1, ZONE, selector=FOO, nodeAffinityPolicy="Ignore")]),
        {"n1": SKEW, "n2": SKEW, "n3": OK},
        id="affinity-policy-ignore-keeps-domain",
    ),
    pytest.param(
        [mk_node("n1", "z1", labels={"env": "prod"}), mk_node("n2", "z2", labels={"env": "prod"}),
         mk_node("n3", "z3")],
        {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, node_selector={"env": "prod"}, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": OK, "n2": OK, "n3": OK},
        id="affinity-policy-honor-node-selector",
    ),
    # Pods on a node the pod's affinity excludes don't count: zone z2 = 0 (n3) under Honor, 3 under Ignore.
    pytest.param(
        [mk_node("n1", "z1", labels={"env": "prod"}), mk_node("n3", "z2", labels={"env": "prod"}),
         mk_node("n4", "z2")],
        {"n1": foo_pods(1), "n4": foo_pods(3)},
        mk_pod(labels={"foo": "bar"}, affinity=PROD, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": SKEW, "n3": OK, "n4": OK},
        id="affinity-policy-honor-excludes-pods",
    ),
    pytest.param(
        [mk_node("n1", "z1", labels={"env": "prod"}), mk_node("n3", "z2", labels={"env": "prod"}),
         mk_node("n4", "z2")],
        {"n1": foo_pods(1), "n4": foo_pods(3)},
        mk_pod(labels={"foo": "bar"}, affinity=PROD,
               constraints=[spread(1, ZONE, selector=FOO, nodeAffinityPolicy="Ignore")]),
        {"n1": OK, "n3": SKEW, "n4": SKEW},
        id="affinity-policy-ignore-counts-pods",
    ),
    # nodeTaintsPolicy: n3 is tainted NoSchedule. Default Ignore keeps zone z3 (min 0).
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z2"), mk_node("n3", "z3", taints=NO_SCHEDULE)],
        {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)]),
        {"n1": SKEW, "n2": SKEW, "n3": OK},
        id="taints-policy-ignore-default",
    ),
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z2"), mk_node("n3", "z3", taints=NO_SCHEDULE)],
        {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO, nodeTaintsPolicy="Honor")]),
        {"n1": OK, "n2": OK, "n3": OK},
        id="taints-policy-honor-excludes-untolerated",
    ),
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z2"), mk_node("n3", "z3", taints=NO_SCHEDULE)],
        {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, tolerations=[{"key": "dedicated", "operator": "Exists"}],
               constraints=[spread(1, ZONE, selector=FOO, nodeTaintsPolicy="Honor")]),
        {"n1": SKEW, "n2": SKEW, "n3": OK},
        id="taints-policy-honor-tolerated",
    ),
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z2"),
         mk_node("n3", "z3", taints=[{"key": "soft", "effect": "PreferNoSchedule"}])],
        {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO, nodeTaintsPolicy="Honor")]),
        {"n1": SKEW, "n2": SKEW, "n3": OK},
        id="taints-policy-honor-ignores-prefer-no-schedule",
    ),
    # matchLabelKeys: app=web pods, v1 in z1 (2), v2 in z2 (1).
    pytest.param(
        four_nodes(),
        {"n1": foo_pods(2, labels={"app": "web", "version": "v1"}),
         "n3": foo_pods(1, labels={"app": "web", "version": "v2"})},
        mk_pod(labels={"app": "web", "version": "v2"},
               constraints=[spread(1, ZONE, selector={"matchLabels": {"app": "web"}})]),
        {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK},
        id="without-match-label-keys",
    ),
    pytest.param(
        four_nodes(),
        {"n1": foo_pods(2, labels={"app": "web", "version": "v1"}),
         "n3": foo_pods(1, labels={"app": "web", "version": "v2"})},
        mk_pod(labels={"app": "web", "version": "v2"},
               constraints=[spread(1, ZONE, selector={"matchLabels": {"app": "web"}}, matchLabelKeys=["version"])]),
        {"n1": OK, "n2": OK, "n3": SKEW, "n4": SKEW},
        id="match-label-keys-merged",
    ),
    pytest.param(
        four_nodes(),
        {"n1": foo_pods(2, labels={"app": "web", "version": "v1"}),
         "n3": foo_pods(1, labels={"app": "web", "version": "v2"})},
        mk_pod(labels={"app": "web"},
               constraints=[spread(1, ZONE, selector={"matchLabels": {"app": "web"}}, matchLabelKeys=["version"])]),
        {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK},
        id="match-label-keys-absent-on-pod-ignored",
    ),
    pytest.param(
        four_nodes(),
        {"n1": foo_pods(1, labels={"tier": "a"}), "n2": foo_pods(1, labels={"tier": "b"}),
         "n3": foo_pods(2, labels={"tier": "c"}), "n4": foo_pods(1, labels={})},
        mk_pod(labels={"tier": "a"}, constraints=[spread(1, ZONE, selector={"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]}]})]),
        {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK},
        id="selector-in",
    ),
    pytest.param(
        four_nodes(),
        {"n1": foo_pods(1, labels={"tier": "a"}), "n2": foo_pods(1, labels={"tier": "b"}),
         "n3": foo_pods(2, labels={"tier": "c"}), "n4": foo_pods(1, labels={})},
        mk_pod(labels={"tier": "z"}, constraints=[spread(1, ZONE, selector={"matchExpressions": [
            {"key": "tier", "operator": "NotIn", "values": ["a", "b"]}]})]),
        {"n1": OK, "n2": OK, "n3": SKEW, "n4": SKEW},
        id="selector-notin-includes-unlabelled",
    ),
    pytest.param(
        four_nodes(),
        {"n1": foo_pods(1, labels={"tier": "a"}), "n2": foo_pods(1, labels={"tier": "b"}),
         "n3": foo_pods(2, labels={"other": "c"})},
        mk_pod(labels={"tier": "q"}, constraints=[spread(1, ZONE, selector={"matchExpressions": [
            {"key": "tier", "operator": "Exists"}]})]),
        {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK},
        id="selector-exists",
    ),
    pytest.param(
        four_nodes(),
        {"n1": foo_pods(1, labels={"tier": "a"}), "n2": foo_pods(1, labels={"tier": "b"}),
         "n3": foo_pods(2, labels={"other": "c"})},
        mk_pod(labels={}, constraints=[spread(1, ZONE, selector={"matchExpressions": [
            {"key": "tier", "operator": "DoesNotExist"}]})]),
        {"n1": OK, "n2": OK, "n3": SKEW, "n4": SKEW},
        id="selector-does-not-exist",
    ),
    # An empty (non-nil) selector matches every pod, yet kube-scheduler's countPodsMatchSelector counts
    # none for it: only the pod itself (selfMatch) counts, so every zone is at skew 1 and all nodes pass.
    pytest.param(
        four_nodes(), {"n1": foo_pods(3)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector={})]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="empty-selector-counts-no-existing-pods",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(3)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="nil-selector-matches-nothing",
    ),
    # Two constraints: zone (1) then hostname (1). n5 has a zone but no hostname label; its pods count for
    # neither constraint, and it fails on the hostname constraint's missing label.
    pytest.param(
        [*four_nodes(), mk_node("n5", "z2", host=False)],
        {"n1": foo_pods(1), "n5": foo_pods(4)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO), spread(1, HOST, selector=FOO)]),
        {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK, "n5": LABEL},
        id="two-constraints-zone-then-host",
    ),
    pytest.param(
        [*four_nodes(), mk_node("n5", "z2", host=False)],
        {"n1": foo_pods(1), "n3": foo_pods(1), "n4": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(2, ZONE, selector=FOO), spread(1, HOST, selector=FOO)]),
        {"n1": SKEW, "n2": OK, "n3": SKEW, "n4": SKEW, "n5": LABEL},
        id="two-constraints-host-fails",
    ),
    # The first failing constraint decides: zone fails on n3/n4 before the missing hostname label on n4.
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n3", "z2"), mk_node("n4", "z2", host=False)],
        {"n3": foo_pods(2)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO), spread(1, HOST, selector=FOO)]),
        {"n1": OK, "n3": SKEW, "n4": SKEW},
        id="first-failing-constraint-decides",
    ),
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n3", "z2"), mk_node("n4", "z2", host=False)],
        {"n3": foo_pods(2)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, HOST, selector=FOO), spread(1, ZONE, selector=FOO)]),
        {"n1": OK, "n3": SKEW, "n4": LABEL},
        id="missing-label-first",
    ),
    pytest.param(
        four_nodes(), {"n1": foo_pods(1), "n2": foo_pods(1)},
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", selector=FOO),
                                                   spread(5, HOST, selector=FOO)]),
        {"n1": OK, "n2": OK, "n3": OK, "n4": OK},
        id="soft-constraints-ignored-by-filter",
    ),
]


@pytest.mark.parametrize(("nodes", "placed", "pod", "want"), FILTER_CASES)
def test_filter(nodes: list[Node], placed: dict[str, list[Pod]], pod: Pod, want: dict[str, str]) -> None:
    _, snap = cluster(nodes, placed)
    assert run_filter(PodTopologySpread(), pod, snap) == want


def test_filter_batches_and_order() -> None:
    _, snap = cluster(four_nodes(), {"n1": foo_pods(1), "n2": foo_pods(1)})
    pl = PodTopologySpread()
    pod = mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)])
    state = CycleState("c", snap)
    _, st = asyncio.run(pl.pre_filter(state, pod))
    assert st.ok
    assert run_filter(pl, pod, snap, ["n4", "n1"], state) == {"n4": OK, "n1": SKEW}
    assert run_filter(pl, pod, snap, ["n3"], state) == {"n3": OK}
    assert run_filter(pl, pod, snap, ["n2", "n3"], state) == {"n2": SKEW, "n3": OK}


def test_filter_reason_codes() -> None:
    _, snap = cluster([mk_node("a", "z1"), mk_node("b", None)], {"a": foo_pods(2)})
    pl = PodTopologySpread()
    pod = mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)])
    state = CycleState("c", snap)
    asyncio.run(pl.pre_filter(state, pod))
    res = asyncio.run(pl.filter(state, pod, NodeBatch(snap, rows_of(snap, ["a", "b"]))))
    # one domain: min is its own count, 2 + 1 - 2 = 1 <= 1
    assert res.status_at(0) == Status()
    assert res.status_at(1, "PodTopologySpread") == Status(
        Code.UnschedulableAndUnresolvable,
        ("node(s) didn't match pod topology spread constraints (missing required label)",),
        "PodTopologySpread",
    )


def test_filter_without_pre_filter_is_error() -> None:
    _, snap = cluster(four_nodes())
    pod = mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)])
    res = asyncio.run(PodTopologySpread().filter(CycleState("c", snap), pod, NodeBatch(snap, rows_of(snap, None))))
    assert (res.codes == Code.Error).all()


@pytest.mark.parametrize(
    ("args", "pod"),
    [
        pytest.param(None, mk_pod(labels={"foo": "bar"}), id="no-constraints-system-defaulting"),
        pytest.param({"defaultingType": "List"}, mk_pod(labels={"foo": "bar"}), id="no-constraints-list-empty"),
        pytest.param(
            {"defaultingType": "List", "defaultConstraints": [spread(1, ZONE)]},
            mk_pod(labels={"foo": "bar"}),
            id="list-defaults-but-no-workload-selector",
        ),
        pytest.param(None, mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO)]),
                     id="only-soft-constraints"),
    ],
)
def test_pre_filter_skip(args: dict[str, Any] | None, pod: Pod) -> None:
    _, snap = cluster(four_nodes(), {"n1": foo_pods(3)})
    state = CycleState("c", snap)
    result, st = asyncio.run(PodTopologySpread(args).pre_filter(state, pod))
    assert result is None
    assert st.code is Code.Skip
    assert "PreFilterPodTopologySpread" not in state


# ---- PreFilterExtensions ---------------------------------------------------------------------


def test_add_remove_pod_updates_counts() -> None:
    victim = mk_pod(labels={"foo": "bar"})
    _, snap = cluster(four_nodes(), {"n1": [victim], "n2": foo_pods(1)})
    pl = PodTopologySpread()
    pod = mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)])
    state = CycleState("c", snap)
    asyncio.run(pl.pre_filter(state, pod))
    assert run_filter(pl, pod, snap, state=state) == {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK}

    ext = pl.pre_filter_extensions()
    assert ext is pl
    trial = state.clone()
    n1 = snap.row("n1")
    assert n1 is not None
    assert asyncio.run(pl.remove_pod(trial, pod, victim, n1)).ok
    # z1 = 1, z2 = 0: 1 + 1 - 0 = 2 still too many
    assert run_filter(pl, pod, snap, state=trial) == {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK}
    n3 = snap.row("n3")
    assert n3 is not None
    assert asyncio.run(pl.add_pod(trial, pod, mk_pod(labels={"foo": "bar"}), n3)).ok
    # z1 = 1, z2 = 1: every node fits
    assert run_filter(pl, pod, snap, state=trial) == {"n1": OK, "n2": OK, "n3": OK, "n4": OK}
    # other namespace or non-matching labels change nothing
    assert asyncio.run(pl.add_pod(trial, pod, mk_pod(labels={"foo": "bar"}, namespace="x"), n3)).ok
    assert asyncio.run(pl.add_pod(trial, pod, mk_pod(labels={"foo": "no"}), n3)).ok
    assert run_filter(pl, pod, snap, state=trial) == {"n1": OK, "n2": OK, "n3": OK, "n4": OK}
    # the original state is untouched by the clone's changes
    assert run_filter(pl, pod, snap, state=state) == {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK}


def test_add_pod_respects_inclusion_policy() -> None:
    nodes = [mk_node("n1", "z1", labels={"env": "prod"}), mk_node("n2", "z2", labels={"env": "prod"}),
             mk_node("n3", "z2")]
    _, snap = cluster(nodes, {"n1": foo_pods(1)})
    pl = PodTopologySpread()
    pod = mk_pod(labels={"foo": "bar"}, affinity=PROD, constraints=[spread(1, ZONE, selector=FOO)])
    state = CycleState("c", snap)
    asyncio.run(pl.pre_filter(state, pod))
    assert run_filter(pl, pod, snap, state=state) == {"n1": SKEW, "n2": OK, "n3": OK}
    n3 = snap.row("n3")
    assert n3 is not None
    asyncio.run(pl.add_pod(state, pod, mk_pod(labels={"foo": "bar"}), n3))  # n3 is excluded: no effect
    assert run_filter(pl, pod, snap, state=state) == {"n1": SKEW, "n2": OK, "n3": OK}
    n2 = snap.row("n2")
    assert n2 is not None
    asyncio.run(pl.add_pod(state, pod, mk_pod(labels={"foo": "bar"}), n2))
    assert run_filter(pl, pod, snap, state=state) == {"n1": OK, "n2": OK, "n3": OK}


def test_add_pod_without_state_is_error() -> None:
    _, snap = cluster(four_nodes())
    pod = mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)])
    st = asyncio.run(PodTopologySpread().add_pod(CycleState("c", snap), pod, mk_pod(), 0))
    assert st.code is Code.Error


def test_counts_follow_new_snapshots() -> None:
    table, snap = cluster(four_nodes(), {"n1": foo_pods(1)})
    pl = PodTopologySpread()
    pod = mk_pod(labels={"foo": "bar"}, constraints=[spread(2, ZONE, selector=FOO)])
    assert run_filter(pl, pod, snap) == {"n1": OK, "n2": OK, "n3": OK, "n4": OK}
    table.place_pod(mk_pod(labels={"foo": "bar"}), "n2")
    assert run_filter(pl, pod, table.snapshot()) == {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK}


# ---- Score -----------------------------------------------------------------------------------

SCORE_CASES: list[Any] = [
    # zone weight log(2 + 2); z1 holds 3 matching pods
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z1"), mk_node("n3", "z2")],
        {"n1": foo_pods(2), "n2": foo_pods(1)}, None,
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO)]),
        {"n1": 4, "n2": 4, "n3": 0}, {"n1": 0, "n2": 0, "n3": 100},
        id="zone",
    ),
    # hostname weight log(3 + 2): 2 -> 3.22 -> 3, 1 -> 1.61 -> 2
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z1"), mk_node("n3", "z2")],
        {"n1": foo_pods(2), "n2": foo_pods(1)}, None,
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, HOST, "ScheduleAnyway", FOO)]),
        {"n1": 3, "n2": 2, "n3": 0}, {"n1": 0, "n2": 33, "n3": 100},
        id="hostname",
    ),
    # maxSkew 3 adds 2 to every node: 5, 4, 2 -> 100 * (7 - s) / 5
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z1"), mk_node("n3", "z2")],
        {"n1": foo_pods(2), "n2": foo_pods(1)}, None,
        mk_pod(labels={"foo": "bar"}, constraints=[spread(3, HOST, "ScheduleAnyway", FOO)]),
        {"n1": 5, "n2": 4, "n3": 2}, {"n1": 40, "n2": 60, "n3": 100},
        id="hostname-maxskew3",
    ),
    # zone 3*log4 + host 2*log5 = 7.38 -> 7; 3*log4 + log5 = 5.77 -> 6
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z1"), mk_node("n3", "z2")],
        {"n1": foo_pods(2), "n2": foo_pods(1)}, None,
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO),
                                                   spread(1, HOST, "ScheduleAnyway", FOO)]),
        {"n1": 7, "n2": 6, "n3": 0}, {"n1": 0, "n2": 14, "n3": 100},
        id="zone-and-hostname",
    ),
    # n4 has no zone: ignored (0), and not counted in the hostname domain size (log(2 + 2))
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z2"), mk_node("n4", None)],
        {"n1": foo_pods(1), "n4": foo_pods(5)}, None,
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO),
                                                   spread(1, HOST, "ScheduleAnyway", FOO)]),
        {"n1": 3, "n2": 0, "n4": 0}, {"n1": 0, "n2": 100, "n4": 0},
        id="ignored-node-missing-key",
    ),
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z2"), mk_node("n4", None)],
        {"n4": foo_pods(5)}, None,
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO)]),
        {"n1": 0, "n2": 0, "n4": 0}, {"n1": 100, "n2": 100, "n4": 0},
        id="all-zero-scores-max",
    ),
    pytest.param(
        [mk_node("n1", None), mk_node("n2", None)],
        {"n1": foo_pods(2)}, None,
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO)]),
        {"n1": 0, "n2": 0}, {"n1": 0, "n2": 0},
        id="all-nodes-ignored",
    ),
    # Only n1 and n3 passed Filter; n2's pods still count for zone z1 (2 * log4 = 2.77 -> 3).
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z1"), mk_node("n3", "z2")],
        {"n2": foo_pods(2), "n3": foo_pods(1)}, ["n1", "n3"],
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO)]),
        {"n1": 3, "n3": 1}, {"n1": 33, "n3": 100},
        id="unfiltered-nodes-count",
    ),
    # Domain size comes from the filtered nodes only: one zone -> log(3); z1 = 3 pods -> 3.30 -> 3.
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z1"), mk_node("n3", "z2")],
        {"n1": foo_pods(1), "n2": foo_pods(2), "n3": foo_pods(4)}, ["n1", "n2"],
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO)]),
        {"n1": 3, "n2": 3}, {"n1": 100, "n2": 100},
        id="domain-size-from-filtered-nodes",
    ),
    # nodeAffinityPolicy Honor: n2 lacks env=prod, so its pods don't count for z1.
    pytest.param(
        [mk_node("n1", "z1", labels={"env": "prod"}), mk_node("n2", "z1"), mk_node("n3", "z2", labels={"env": "prod"})],
        {"n2": foo_pods(2), "n3": foo_pods(1)}, ["n1", "n3"],
        mk_pod(labels={"foo": "bar"}, affinity=PROD, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO)]),
        {"n1": 0, "n3": 1}, {"n1": 100, "n3": 0},
        id="affinity-policy-honor",
    ),
    pytest.param(
        [mk_node("n1", "z1", labels={"env": "prod"}), mk_node("n2", "z1"), mk_node("n3", "z2", labels={"env": "prod"})],
        {"n2": foo_pods(2), "n3": foo_pods(1)}, ["n1", "n3"],
        mk_pod(labels={"foo": "bar"}, affinity=PROD,
               constraints=[spread(1, ZONE, "ScheduleAnyway", FOO, nodeAffinityPolicy="Ignore")]),
        {"n1": 3, "n3": 1}, {"n1": 33, "n3": 100},
        id="affinity-policy-ignore",
    ),
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z1", taints=NO_SCHEDULE), mk_node("n3", "z2")],
        {"n2": foo_pods(2), "n3": foo_pods(1)}, ["n1", "n3"],
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO, nodeTaintsPolicy="Honor")]),
        {"n1": 0, "n3": 1}, {"n1": 100, "n3": 0},
        id="taints-policy-honor",
    ),
    # The hostname count is the node's own pods, whatever the inclusion policies say.
    pytest.param(
        [mk_node("n1", "z1", taints=NO_SCHEDULE), mk_node("n2", "z1")],
        {"n1": foo_pods(2), "n2": foo_pods(1)}, None,
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, HOST, "ScheduleAnyway", FOO, nodeTaintsPolicy="Honor")]),
        {"n1": 3, "n2": 1}, {"n1": 33, "n2": 100},
        id="hostname-counts-own-pods",
    ),
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z2")],
        {"n1": [*foo_pods(3, namespace="other"), *foo_pods(3, deleting=True), *foo_pods(1)]}, None,
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO)]),
        {"n1": 1, "n2": 0}, {"n1": 0, "n2": 100},
        id="namespace-and-terminating",
    ),
    # matchLabelKeys narrows to version=v2: z1 has none, z2 has 2 -> 2*log4 = 2.77 -> 3.
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z2")],
        {"n1": foo_pods(3, labels={"app": "web", "version": "v1"}),
         "n2": foo_pods(2, labels={"app": "web", "version": "v2"})}, None,
        mk_pod(labels={"app": "web", "version": "v2"}, constraints=[
            spread(1, ZONE, "ScheduleAnyway", {"matchLabels": {"app": "web"}}, matchLabelKeys=["version"])]),
        {"n1": 0, "n2": 3}, {"n1": 100, "n2": 0},
        id="match-label-keys",
    ),
    # hard constraints make nodes without their keys ignored for scoring too
    pytest.param(
        [mk_node("n1", "z1"), mk_node("n2", "z2", labels={"rack": "r1"}), mk_node("n3", "z2", labels={"rack": "r2"})],
        {"n2": foo_pods(1)}, None,
        mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO),
                                                   spread(1, "rack", "DoNotSchedule", FOO)]),
        {"n1": 0, "n2": 1, "n3": 1}, {"n1": 100, "n2": 0, "n3": 0},
        id="hard-constraint-keys-not-required",
    ),
]


@pytest.mark.parametrize(("nodes", "placed", "filtered", "pod", "want_raw", "want_norm"), SCORE_CASES)
def test_score(nodes: list[Node], placed: dict[str, list[Pod]], filtered: list[str] | None, pod: Pod,
               want_raw: dict[str, int], want_norm: dict[str, int]) -> None:
    _, snap = cluster(nodes, placed)
    raw, norm = run_score(PodTopologySpread(), pod, snap, filtered)
    assert raw == want_raw
    assert norm == want_norm


@pytest.mark.parametrize(
    ("args", "pod", "nodes"),
    [
        pytest.param(None, mk_pod(labels={"foo": "bar"}), ["n1", "n2"], id="no-constraints"),
        pytest.param(None, mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)]), ["n1"],
                     id="only-hard-constraints"),
        pytest.param({"defaultingType": "List", "defaultConstraints": [spread(1, ZONE, "ScheduleAnyway")]},
                     mk_pod(labels={"foo": "bar"}), ["n1"], id="list-defaults-without-workload"),
    ],
)
def test_pre_score_skip(args: dict[str, Any] | None, pod: Pod, nodes: list[str]) -> None:
    _, snap = cluster(four_nodes(), {"n1": foo_pods(2)})
    state = CycleState("c", snap)
    st = asyncio.run(PodTopologySpread(args).pre_score(state, pod, NodeBatch(snap, rows_of(snap, nodes))))
    assert st.code is Code.Skip


def test_pre_score_skip_empty_cluster() -> None:
    _, snap = cluster([])
    pod = mk_pod(labels={"foo": "bar"}, constraints=[spread(1, ZONE, "ScheduleAnyway", FOO)])
    st = asyncio.run(PodTopologySpread().pre_score(CycleState("c", snap), pod,
                                                   NodeBatch(snap, np.empty(0, dtype=np.int64))))
    assert st.code is Code.Skip


def test_normalize_without_pre_score_is_error() -> None:
    _, snap = cluster(four_nodes())
    pod = mk_pod(labels={"foo": "bar"})
    scores = np.zeros(4, dtype=np.int64)
    st = asyncio.run(PodTopologySpread().normalize_score(CycleState("c", snap), pod,
                                                         NodeBatch(snap, rows_of(snap, None)), scores))
    assert st.code is Code.Error


# ---- default constraints (with a workload selector supplied) ---------------------------------


class _WebSelected(PodTopologySpread):
    """As if a Service selecting app=web existed: kube-scheduler's DefaultSelector would return it."""

    def default_selector(self, pod: Pod) -> LabelSelector | None:
        return LabelSelector(match_labels={"app": "web"}) if pod.labels.get("app") == "web" else None


def test_list_default_constraints_filter() -> None:
    _, snap = cluster(four_nodes(), {"n1": foo_pods(2, labels={"app": "web"})})
    pl = _WebSelected({"defaultingType": "List", "defaultConstraints": [spread(1, ZONE)]})
    assert run_filter(pl, mk_pod(labels={"app": "web"}), snap) == {"n1": SKEW, "n2": SKEW, "n3": OK, "n4": OK}
    # not selected by the "Service": no default constraints at all
    _, st = asyncio.run(pl.pre_filter(CycleState("c", snap), mk_pod(labels={"app": "db"})))
    assert st.code is Code.Skip
    # the pod's own constraints replace the defaults entirely
    own = mk_pod(labels={"app": "web"}, constraints=[spread(5, ZONE, selector={"matchLabels": {"app": "web"}})])
    assert run_filter(pl, own, snap) == {"n1": OK, "n2": OK, "n3": OK, "n4": OK}


def test_system_default_constraints_score() -> None:
    # System defaults: hostname maxSkew 3 then zone maxSkew 5, and nodes need not carry every key:
    # n3 has no zone, is not ignored, and scores only on hostname. Zone domains {z1, ""} -> log 4.
    # n1: (1*log5 + 2) + (1*log4 + 4) = 9.00 -> 9; n2: 2 + (log4 + 4) = 7.39 -> 7; n3: 2*log5 + 2 = 5.22 -> 5
    nodes = [mk_node("n1", "z1"), mk_node("n2", "z1"), mk_node("n3", None)]
    _, snap = cluster(nodes, {"n1": foo_pods(1, labels={"app": "web"}), "n3": foo_pods(2, labels={"app": "web"})})
    raw, norm = run_score(_WebSelected(), mk_pod(labels={"app": "web"}), snap)
    assert raw == {"n1": 9, "n2": 7, "n3": 5}
    assert norm == {"n1": 55, "n2": 77, "n3": 100}


def test_system_default_constraints_never_filter() -> None:
    _, snap = cluster(four_nodes(), {"n1": foo_pods(5, labels={"app": "web"})})
    _, st = asyncio.run(_WebSelected().pre_filter(CycleState("c", snap), mk_pod(labels={"app": "web"})))
    assert st.code is Code.Skip


# ---- args ------------------------------------------------------------------------------------


def test_args_defaults() -> None:
    pl = PodTopologySpread()
    assert pl.defaulting_type == "System"
    assert pl.system_defaulted
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in pl.default_constraints] == [
        (HOST, 3, "ScheduleAnyway"),
        (ZONE, 5, "ScheduleAnyway"),
    ]
    listed = PodTopologySpread({"defaultingType": "List", "defaultConstraints": [
        spread(2, ZONE, minDomains=2, nodeTaintsPolicy="Honor", matchLabelKeys=["v"])]})
    assert not listed.system_defaulted
    (c,) = listed.default_constraints
    assert (c.max_skew, c.topology_key, c.min_domains, c.node_affinity_policy, c.node_taints_policy,
            c.match_label_keys) == (2, ZONE, 2, "Honor", "Honor", ("v",))
    assert PodTopologySpread({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "PodTopologySpreadArgs"})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param({"defaultingType": "Magic"},
                     'defaultingType: Unsupported value: "Magic": supported values: "System", "List"',
                     id="bad-defaulting-type"),
        pytest.param({"defaultConstraints": [spread(1, ZONE, "ScheduleAnyway")]},
                     'defaultingType: Invalid value: "System": when .defaultConstraints are not empty',
                     id="system-with-constraints"),
        pytest.param({"defaultingType": "List", "defaultConstraints": [spread(0, ZONE)]},
                     "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range", id="max-skew-zero"),
        pytest.param({"defaultingType": "List", "defaultConstraints": [spread(1, "")]},
                     "defaultConstraints[0].topologyKey: Required value: can not be empty", id="empty-key"),
        pytest.param({"defaultingType": "List", "defaultConstraints": [spread(1, "bad key!")]},
                     'defaultConstraints[0].topologyKey: Invalid value: "bad key!"', id="invalid-key"),
        pytest.param({"defaultingType": "List", "defaultConstraints": [spread(1, ZONE, "Sometimes")]},
                     'defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Sometimes"', id="bad-when"),
        pytest.param({"defaultingType": "List", "defaultConstraints": [spread(1, ZONE, selector=FOO)]},
                     "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector",
                     id="selector-forbidden"),
        pytest.param({"defaultingType": "List", "defaultConstraints": [spread(1, ZONE), spread(2, ZONE)]},
                     'defaultConstraints[1]: Duplicate value: "{topology.kubernetes.io/zone, DoNotSchedule}"',
                     id="duplicate"),
        pytest.param({"defaultingType": "List", "defaultConstraints": [spread(1, ZONE, minDomains=0)]},
                     "defaultConstraints[0].minDomains", id="min-domains-zero"),
        pytest.param({"defaultingType": "List", "defaultConstraints": [spread(1, ZONE, nodeTaintsPolicy="Maybe")]},
                     'defaultConstraints[0].nodeTaintsPolicy: Unsupported value: "Maybe"', id="bad-policy"),
        pytest.param({"defaultingType": "List", "defaultConstraints": [{**spread(1, ZONE), "maxskew": 1}]},
                     'defaultConstraints[0]: unknown field "maxskew"', id="unknown-constraint-field"),
        pytest.param({"defaultConstraint": []}, 'unknown field "defaultConstraint"', id="unknown-field"),
        pytest.param({"defaultingType": "List", "defaultConstraints": {"a": 1}}, "defaultConstraints must be a list",
                     id="not-a-list"),
    ],
)
def test_args_errors(args: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        PodTopologySpread(args)
    assert str(err.value).startswith("PodTopologySpread: ")
    assert message in str(err.value)


# ---- EnqueueExtensions -----------------------------------------------------------------------


def test_events_to_register() -> None:
    regs = PodTopologySpread().events_to_register()
    assert [(r.event.resource, r.event.action) for r in regs] == [
        ("AssignedPod", ActionType.Add | ActionType.UpdatePodLabel | ActionType.Delete),
        ("TargetPod", ActionType.UpdatePodToleration | ActionType.UpdatePodLabel),
        ("Node", ActionType.Add | ActionType.Delete | ActionType.UpdateNodeLabel | ActionType.UpdateNodeTaint),
    ]
    assert all(r.hint is not None for r in regs)
    assert regs[2].event.matches(ClusterEvent("Node", ActionType.UpdateNodeLabel))
    # Another pending pod's changes are not registered (1.35 registered Pod, which covered them).
    assert not any(r.event.matches(ClusterEvent("UnscheduledPod", ActionType.UpdatePodLabel)) for r in regs)


TARGET = mk_pod("target", {"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO)])
TARGET_HONOR = mk_pod("target2", {"foo": "bar"}, constraints=[spread(1, ZONE, selector=FOO, nodeTaintsPolicy="Honor")])
Q, SKIP = QueueingHint.Queue, QueueingHint.QueueSkip


def _with(p: Pod, **changes: Any) -> Pod:
    from dataclasses import replace
    return replace(p, **changes)


_BOUND_FOO = mk_pod(labels={"foo": "bar"}, node_name="n1")
_BOUND_OTHER = mk_pod(labels={"x": "y"}, node_name="n1")


@pytest.mark.parametrize(
    ("target", "old", "new", "want"),
    [
        pytest.param(TARGET, None, _BOUND_FOO, Q, id="matching-pod-added"),
        pytest.param(TARGET, None, _BOUND_OTHER, SKIP, id="unrelated-pod-added"),
        pytest.param(TARGET, None, mk_pod(labels={"foo": "bar"}, node_name="n1", namespace="x"), SKIP,
                     id="other-namespace"),
        pytest.param(TARGET, None, mk_pod(labels={"foo": "bar"}), SKIP, id="unassigned-pod"),
        pytest.param(TARGET, None, _with(mk_pod(labels={"foo": "bar"}), nominated_node_name="n1"), Q,
                     id="nominated-pod-counts-since-1.37"),
        pytest.param(TARGET, _with(mk_pod(labels={"foo": "bar"}), nominated_node_name="n1"), None, Q,
                     id="nominated-pod-deleted"),
        pytest.param(TARGET, _BOUND_FOO, None, Q, id="matching-pod-deleted"),
        pytest.param(TARGET, _BOUND_OTHER, None, SKIP, id="unrelated-pod-deleted"),
        pytest.param(TARGET, _BOUND_FOO, _with(_BOUND_FOO, labels={"foo": "baz"}), Q, id="label-stops-matching"),
        pytest.param(TARGET, _BOUND_FOO, _with(_BOUND_FOO, labels={"foo": "bar", "a": "b"}), SKIP,
                     id="label-change-irrelevant"),
        pytest.param(TARGET, _BOUND_FOO, _BOUND_FOO, SKIP, id="no-label-change"),
        pytest.param(TARGET, TARGET, _with(TARGET, labels={"foo": "baz"}), SKIP, id="the-pod-itself-is-not-assigned"),
        pytest.param(TARGET, None, None, Q, id="unknown-objects"),
    ],
)
def test_pod_change_hint(target: Pod, old: Pod | None, new: Pod | None, want: QueueingHint) -> None:
    assert PodTopologySpread().is_schedulable_after_pod_change(target, old, new) is want


_EXISTS = pod_from_dict({"metadata": {"name": "t"}, "spec": {"containers": [{"name": "c"}], "tolerations": [
    {"operator": "Exists"}]}}).tolerations[0]


@pytest.mark.parametrize(
    ("target", "new", "want"),
    [
        pytest.param(TARGET_HONOR, _with(TARGET_HONOR, tolerations=[]), SKIP, id="same-tolerations"),
        pytest.param(TARGET_HONOR, _with(TARGET_HONOR, tolerations=[_EXISTS]), Q, id="new-toleration-with-honor"),
        pytest.param(TARGET, _with(TARGET, tolerations=[_EXISTS]), SKIP, id="new-toleration-without-honor"),
        pytest.param(TARGET, _with(TARGET, labels={"foo": "baz"}), Q, id="own-label-stops-matching"),
        pytest.param(TARGET, _with(TARGET, labels={"foo": "bar", "a": "b"}), SKIP, id="own-label-change-irrelevant"),
        pytest.param(TARGET, TARGET, SKIP, id="no-change"),
    ],
)
def test_target_pod_change_hint(target: Pod, new: Pod, want: QueueingHint) -> None:
    """1.37's isSchedulableAfterTargetPodChange: the pod's own toleration or label update."""
    assert PodTopologySpread().is_schedulable_after_target_pod_change(target, target, new) is want


_ZN = mk_node("a", "z1")


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, _ZN, Q, id="node-with-key-added"),
        pytest.param(None, mk_node("b", None), SKIP, id="node-without-key-added"),
        pytest.param(_ZN, None, Q, id="node-with-key-deleted"),
        pytest.param(mk_node("b", None), None, SKIP, id="node-without-key-deleted"),
        pytest.param(mk_node("a", None), _ZN, Q, id="key-gained"),
        pytest.param(_ZN, mk_node("a", None), Q, id="key-lost"),
        pytest.param(_ZN, mk_node("a", "z2"), Q, id="key-value-changed"),
        pytest.param(_ZN, mk_node("a", "z1", labels={"x": "y"}), SKIP, id="other-label-changed"),
        pytest.param(_ZN, mk_node("a", "z1", taints=NO_SCHEDULE), Q, id="taints-changed"),
        pytest.param(mk_node("a", None), mk_node("a", None, taints=NO_SCHEDULE), SKIP, id="taints-changed-no-key"),
    ],
)
def test_node_change_hint(old: Node | None, new: Node | None, want: QueueingHint) -> None:
    assert PodTopologySpread().is_schedulable_after_node_change(TARGET, old, new) is want
