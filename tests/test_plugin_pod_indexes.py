"""The per-cycle indexes of the placed pods that plugins carry from one snapshot to the next: the pods
column-wise (framework.plugins.podcolumns) and InterPodAffinity's terms grouped by identical term
(framework.plugins.podaffinityindex). Built incrementally they must read exactly as built from scratch,
through pod and node changes, what-if snapshots and full rebuilds."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from framework.plugins.interpodaffinity import InterPodAffinity
from framework.plugins.labels import compile_label_selector
from framework.plugins.podaffinityindex import PodIndex, TermGroups
from framework.plugins.podcolumns import PodColumns, pod_columns
from framework.whatif import with_node_pods
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import LabelSelector, LabelSelectorRequirement, Pod
from pluginhost.snapshot import ClusterTable, Snapshot

KEYS = ("app", "tier", "color")
VALUES = ("a", "b", "c", "1", "7")


def _node(name: str, zone: str) -> Any:
    return node_from_dict({"metadata": {"name": name, "labels": {"zone": zone, "kubernetes.io/hostname": name}},
                           "status": {"allocatable": {"cpu": "8", "pods": "110"}}})


def _term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {"labelSelector": {"matchLabels": {rng.choice(KEYS): rng.choice(VALUES[:2])}},
                            "topologyKey": rng.choice(["zone", "kubernetes.io/hostname"])}
    if rng.random() < 0.3:
        term["namespaces"] = ["ns0", "ns1"]
    if rng.random() < 0.2:
        term["matchLabelKeys"] = ["tier"]
    return term


def _pod(rng: random.Random, name: str) -> Pod:
    labels = {k: rng.choice(VALUES) for k in KEYS if rng.random() < 0.6}
    meta: dict[str, Any] = {"name": name, "uid": name, "namespace": rng.choice(["ns0", "ns1", "ns2"]), "labels": labels}
    if rng.random() < 0.1:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    kind = rng.random()
    if kind < 0.2:
        spec["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(rng)]}}
    elif kind < 0.4:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term(rng)]}}
    elif kind < 0.6:
        spec["affinity"] = {
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": rng.choice([1, 5]), "podAffinityTerm": _term(rng)}]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 3, "podAffinityTerm": _term(rng)}]},
        }
    return pod_from_dict({"metadata": meta, "spec": spec})


def _churn(steps: int, seed: int) -> Any:
    """A cluster through ``steps`` random changes (pods placed and removed, nodes added, relabelled and
    removed), yielding a snapshot after each, and now and then a what-if snapshot of it."""
    rng = random.Random(seed)
    table = ClusterTable()
    names = [f"n{i}" for i in range(12)]
    for i, name in enumerate(names):
        table.upsert_node(_node(name, f"z{i % 3}"))
    placed: list[str] = []
    for step in range(steps):
        action = rng.random()
        nodes = table.node_names()
        if action < 0.55 or not placed:
            p = _pod(rng, f"p{step}")
            table.place_pod(p, rng.choice(nodes))
            placed.append(p.uid)
        elif action < 0.9:
            table.unplace_pod(placed.pop(rng.randrange(len(placed))))
        elif action < 0.95 and len(nodes) > 4:
            gone = {p.uid for p in table.remove_node(rng.choice(nodes))}
            placed = [u for u in placed if u not in gone]
        else:
            table.upsert_node(_node(rng.choice([*nodes, f"x{step}"]), rng.choice(["z0", "z1", "z9"])))
        snap = table.snapshot()
        yield snap
        if rng.random() < 0.15 and len(snap) and placed:
            row = rng.randrange(len(snap))
            yield with_node_pods(snap, row, [*snap.pods[row][1:], _pod(rng, f"w{step}")])


def _decoded(codes: np.ndarray[Any, Any], vocab: dict[str, int]) -> list[str | None]:
    names = {code: value for value, code in vocab.items()}
    return [None if c < 0 else names[int(c)] for c in codes.tolist()]


SELECTORS = [
    LabelSelector(match_labels={"app": "a"}),
    LabelSelector(match_expressions=[LabelSelectorRequirement("tier", "In", ["a", "7"])]),
    LabelSelector(match_expressions=[LabelSelectorRequirement("color", "DoesNotExist", [])]),
    LabelSelector(match_labels={"app": "b"}, match_expressions=[LabelSelectorRequirement("tier", "NotIn", ["c"])]),
]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_pod_columns_built_from_the_last_ones_read_as_built_from_scratch(seed: int) -> None:
    rng = random.Random(seed * 31)
    for snap in _churn(400, seed):
        columns, fresh = pod_columns(snap), PodColumns(snap)
        assert len(columns) == len(fresh) == sum(map(len, snap.pods))
        assert columns.rows.tolist() == fresh.rows.tolist()
        assert columns.alive.tolist() == fresh.alive.tolist()
        assert [columns.ns_names[c] for c in columns.ns_codes] == [fresh.ns_names[c] for c in fresh.ns_codes]
        # Ask for some keys only: carried keys and keys built from scratch are both exercised.
        for key in rng.sample(KEYS, rng.randrange(len(KEYS) + 1)):
            assert _decoded(*columns.label_codes(key)) == _decoded(*fresh.label_codes(key))
        for selector in rng.sample(SELECTORS, 2):
            matcher = compile_label_selector(selector)
            assert columns.selector_mask(matcher).tolist() == fresh.selector_mask(matcher).tolist()
            for ns in ("ns0", "ns2", "nope"):
                assert columns.node_counts(matcher, ns).tolist() == fresh.node_counts(matcher, ns).tolist()


def _groups(groups: TermGroups) -> dict[Any, dict[int, int]]:
    return {term: dict(zip(rows.tolist(), pods.tolist(), strict=True)) for term, rows, pods in groups}


def _all_groups(index: PodIndex) -> list[dict[Any, dict[int, int]]]:
    return [_groups(g) for g in (index.required_affinity, index.required_anti, index.preferred_affinity,
                                 index.preferred_anti)]


@pytest.mark.parametrize("seed", [4, 5])
def test_inter_pod_affinity_term_groups_are_incremental_and_exact(seed: int) -> None:
    plugin = InterPodAffinity()
    for snap in _churn(300, seed):
        incremental = plugin._pod_index(snap)
        fresh = PodIndex(snap, None)
        assert _all_groups(incremental) == _all_groups(fresh)
        assert incremental.with_affinity == fresh.with_affinity
        # Every pod's terms are counted once, on its own node row.
        total = sum(count for kind in _all_groups(fresh) for rows in kind.values() for count in rows.values())
        assert total == sum(
            len(t.required_affinity) + len(t.required_anti) + len(t.preferred_affinity) + len(t.preferred_anti)
            for _, t in fresh.with_affinity
        )


def test_a_superseded_pod_index_refuses_to_answer() -> None:
    snaps: list[Snapshot] = []
    for snap in _churn(3, 6):
        snaps.append(snap)
    first = PodIndex(snaps[0], None)
    PodIndex(snaps[1], first)
    with pytest.raises(RuntimeError, match="superseded"):
        list(first.required_anti)
