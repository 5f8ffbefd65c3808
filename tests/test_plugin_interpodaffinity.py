"""Tests for framework.plugins.interpodaffinity: kube-scheduler's InterPodAffinity plugin.

Expected statuses, reasons and scores are worked out by hand from kube-scheduler's
pkg/scheduler/framework/plugins/interpodaffinity/{filtering,scoring,plugin}.go.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.plugins.interpodaffinity import (
    ERR_AFFINITY_RULES_NOT_MATCH,
    ERR_ANTI_AFFINITY_RULES_NOT_MATCH,
    ERR_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,
    InterPodAffinity,
)
from framework.plugins.noderesources import PluginArgsError
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import ActionType, CycleState, NodeBatch, QueueingHint
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import Code

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"

# n1, n2 in zone z1; n3 in zone z2; n4 has no zone label. Every node has a hostname label.
NODE_LABELS: dict[str, dict[str, str]] = {
    "n1": {ZONE: "z1", HOST: "n1"},
    "n2": {ZONE: "z1", HOST: "n2"},
    "n3": {ZONE: "z2", HOST: "n3"},
    "n4": {HOST: "n4"},
}
NODES = list(NODE_LABELS)

# ---- builders ------------------------------------------------------------------------------------


def make_node(name: str, labels: dict[str, str]) -> Node:
    return node_from_dict(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
        }
    )


def make_pod(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    ns: str = "default",
    affinity: dict[str, Any] | None = None,
    node_name: str = "",
) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    if affinity:
        spec["affinity"] = affinity
    if node_name:
        spec["nodeName"] = node_name
    return pod_from_dict(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": spec,
        }
    )


def term(
    key: str,
    labels: dict[str, str] | None = None,
    *,
    exprs: list[dict[str, Any]] | None = None,
    no_selector: bool = False,
    namespaces: list[str] | None = None,
    ns_selector: dict[str, Any] | None = None,
    match_label_keys: list[str] | None = None,
    mismatch_label_keys: list[str] | None = None,
) -> dict[str, Any]:
    t: dict[str, Any] = {"topologyKey": key}
    if not no_selector:
        sel: dict[str, Any] = {}
        if labels:
            sel["matchLabels"] = labels
        if exprs:
            sel["matchExpressions"] = exprs
        t["labelSelector"] = sel
    if namespaces is not None:
        t["namespaces"] = namespaces
    if ns_selector is not None:
        t["namespaceSelector"] = ns_selector
    if match_label_keys:
        t["matchLabelKeys"] = match_label_keys
    if mismatch_label_keys:
        t["mismatchLabelKeys"] = mismatch_label_keys
    return t


def rules(
    required: list[dict[str, Any]] | None = None, preferred: list[tuple[int, dict[str, Any]]] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if required:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = required
    if preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "podAffinityTerm": t} for w, t in preferred
        ]
    return out


def affinity(aff: dict[str, Any] | None = None, anti: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if aff is not None:
        out["podAffinity"] = aff
    if anti is not None:
        out["podAntiAffinity"] = anti
    return out


def cluster(placed: list[tuple[str, Pod]]) -> Snapshot:
    table = ClusterTable()
    for name, labels in NODE_LABELS.items():
        table.upsert_node(make_node(name, labels))
    for node_name, p in placed:
        assert table.place_pod(p, node_name)
    return table.snapshot()


def all_rows(snap: Snapshot) -> NodeBatch:
    return NodeBatch(snap, np.asarray([snap.row(n) for n in NODES], dtype=np.int64))


OK = "ok"
AFF = "aff"
ANTI = "anti"
EXIST = "exist"
EXPECT = {
    OK: (Code.Success, ()),
    AFF: (Code.UnschedulableAndUnresolvable, (ERR_AFFINITY_RULES_NOT_MATCH,)),
    ANTI: (Code.Unschedulable, (ERR_ANTI_AFFINITY_RULES_NOT_MATCH,)),
    EXIST: (Code.Unschedulable, (ERR_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,)),
}


def run_filter(pod: Pod, placed: list[tuple[str, Pod]], args: dict[str, Any] | None = None) -> str | list[str]:
    """ "skip" if PreFilter skips, else the Filter outcome per node n1..n4."""
    snap = cluster(placed)
    pl = InterPodAffinity(args)
    state = CycleState("c", snap)
    result, status = asyncio.run(pl.pre_filter(state, pod))
    assert result is None
    if status.is_skip:
        return "skip"
    assert status.ok, status
    return outcome(asyncio.run(pl.filter(state, pod, all_rows(snap))))


def outcome(res: Any) -> list[str]:
    out: list[str] = []
    for i in range(len(res)):
        st = res.status_at(i)
        found = [k for k, (code, reasons) in EXPECT.items() if st.code is code and st.reasons == reasons]
        assert found, st
        out.append(found[0])
    return out


def run_score(
    pod: Pod, placed: list[tuple[str, Pod]], args: dict[str, Any] | None = None
) -> str | tuple[list[int], list[int]]:
    """ "skip" if PreScore skips, else (raw, normalized) scores for n1..n4."""
    snap = cluster(placed)
    pl = InterPodAffinity(args)
    state = CycleState("c", snap)
    batch = all_rows(snap)
    status = asyncio.run(pl.pre_score(state, pod, batch))
    if status.is_skip:
        return "skip"
    assert status.ok, status
    raw = asyncio.run(pl.score(state, pod, batch))
    assert raw.dtype == np.int64
    scores = raw.copy()
    assert asyncio.run(pl.normalize_score(state, pod, batch, scores)).ok
    return raw.tolist(), scores.tolist()


# ---- Filter --------------------------------------------------------------------------------------

DB = {"app": "db"}
WEB = {"app": "web"}

FILTER_CASES = [
    pytest.param(
        make_pod("p", affinity=affinity(aff=rules([term(ZONE, DB)]))),
        [("n1", make_pod("db", DB))],
        None,
        [OK, OK, AFF, AFF],
        id="affinity-satisfied-in-zone-missing-key-rejected",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(aff=rules([term(HOST, DB)]))),
        [("n3", make_pod("db", DB))],
        None,
        [AFF, AFF, OK, AFF],
        id="affinity-hostname",
    ),
    pytest.param(
        make_pod("p", {"app": "x"}, affinity=affinity(aff=rules([term(ZONE, DB)]))),
        [("n1", make_pod("web", WEB))],
        None,
        [AFF, AFF, AFF, AFF],
        id="affinity-no-matching-pod-anywhere",
    ),
    pytest.param(
        make_pod("p", DB, affinity=affinity(aff=rules([term(ZONE, DB)]))),
        [("n1", make_pod("web", WEB))],
        None,
        [OK, OK, OK, AFF],
        id="self-affinity-first-pod-allowed-where-key-exists",
    ),
    pytest.param(
        make_pod("p", DB, affinity=affinity(aff=rules([term(ZONE, DB)]))),
        [("n3", make_pod("db", DB))],
        None,
        [AFF, AFF, OK, AFF],
        id="self-affinity-with-existing-match-no-exception",
    ),
    pytest.param(
        make_pod("p", {"app": "x"}, affinity=affinity(aff=rules([term(ZONE, DB), term(HOST, {"tier": "be"})]))),
        [("n1", make_pod("db", DB)), ("n1", make_pod("be", {"tier": "be"}))],
        None,
        [AFF, AFF, AFF, AFF],
        id="all-terms-must-match-one-pod",
    ),
    pytest.param(
        make_pod("p", {"app": "x"}, affinity=affinity(aff=rules([term(ZONE, DB), term(HOST, {"tier": "be"})]))),
        [("n1", make_pod("db", DB)), ("n3", make_pod("dbbe", {"app": "db", "tier": "be"}))],
        None,
        [AFF, AFF, OK, AFF],
        id="all-terms-matched-by-one-pod-every-domain-checked",
    ),
    pytest.param(
        make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB)]))),
        [("n1", make_pod("db", DB, ns="other"))],
        None,
        [AFF, AFF, AFF, AFF],
        id="affinity-other-namespace-not-counted",
    ),
    pytest.param(
        make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB, namespaces=["other"])]))),
        [("n1", make_pod("db", DB, ns="other"))],
        None,
        [OK, OK, AFF, AFF],
        id="affinity-namespaces-list",
    ),
    pytest.param(
        make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB, ns_selector={})]))),
        [("n1", make_pod("db", DB, ns="other"))],
        None,
        [OK, OK, AFF, AFF],
        id="affinity-empty-namespace-selector-all-namespaces",
    ),
    pytest.param(
        make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB, ns_selector={"matchLabels": {"team": "a"}})]))),
        [("n1", make_pod("db", DB, ns="other")), ("n3", make_pod("db2", DB, ns="third"))],
        {"namespaceLabels": {"other": {"team": "a"}, "third": {"team": "b"}}},
        [OK, OK, AFF, AFF],
        id="affinity-namespace-selector-from-args",
    ),
    pytest.param(
        make_pod(
            "p",
            WEB,
            affinity=affinity(
                aff=rules([term(ZONE, DB, ns_selector={"matchLabels": {"kubernetes.io/metadata.name": "third"}})])
            ),
        ),
        [("n1", make_pod("db", DB, ns="other")), ("n3", make_pod("db2", DB, ns="third"))],
        None,
        [AFF, AFF, OK, AFF],
        id="affinity-namespace-selector-metadata-name",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(anti=rules([term(ZONE, WEB)]))),
        [("n1", make_pod("web", WEB))],
        None,
        [ANTI, ANTI, OK, OK],
        id="anti-affinity-zone-missing-key-allowed",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(anti=rules([term(HOST, WEB)]))),
        [("n1", make_pod("web", WEB)), ("n3", make_pod("db", DB))],
        None,
        [ANTI, OK, OK, OK],
        id="anti-affinity-hostname",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(anti=rules([term(HOST, WEB)]))),
        [("n1", make_pod("web", WEB, ns="other"))],
        None,
        [OK, OK, OK, OK],
        id="anti-affinity-other-namespace-ignored",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(anti=rules([term(HOST, no_selector=True)]))),
        [("n1", make_pod("web", WEB))],
        None,
        [OK, OK, OK, OK],
        id="anti-affinity-absent-selector-matches-nothing",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(anti=rules([term(HOST)]))),
        [("n2", make_pod("any", {"x": "y"})), ("n4", make_pod("bare"))],
        None,
        [OK, ANTI, OK, ANTI],
        id="anti-affinity-empty-selector-matches-all",
    ),
    pytest.param(
        make_pod(
            "p",
            affinity=affinity(
                anti=rules(
                    [
                        term(HOST, exprs=[{"key": "app", "operator": "In", "values": ["web", "api"]}]),
                        term(ZONE, exprs=[{"key": "tier", "operator": "Exists"}]),
                    ]
                )
            ),
        ),
        [("n2", make_pod("api", {"app": "api"})), ("n3", make_pod("t", {"tier": "x"}))],
        None,
        [OK, ANTI, ANTI, OK],
        id="anti-affinity-expressions-in-exists",
    ),
    pytest.param(
        make_pod(
            "p",
            affinity=affinity(
                anti=rules(
                    [
                        term(
                            HOST,
                            exprs=[
                                {"key": "app", "operator": "NotIn", "values": ["web"]},
                                {"key": "canary", "operator": "DoesNotExist"},
                            ],
                        )
                    ]
                )
            ),
        ),
        [
            ("n1", make_pod("web", WEB)),
            ("n2", make_pod("nolabel")),
            ("n3", make_pod("canary", {"app": "db", "canary": "1"})),
            ("n4", make_pod("db", DB)),
        ],
        None,
        [OK, ANTI, OK, ANTI],
        id="anti-affinity-expressions-notin-doesnotexist",
    ),
    pytest.param(
        make_pod(
            "p",
            {"app": "web", "version": "v2"},
            affinity=affinity(anti=rules([term(HOST, WEB, match_label_keys=["version"])])),
        ),
        [
            ("n1", make_pod("w1", {"app": "web", "version": "v1"})),
            ("n3", make_pod("w2", {"app": "web", "version": "v2"})),
        ],
        None,
        [OK, OK, ANTI, OK],
        id="match-label-keys-merged-from-incoming-pod",
    ),
    pytest.param(
        make_pod(
            "p",
            {"app": "web", "version": "v2"},
            affinity=affinity(anti=rules([term(HOST, WEB, mismatch_label_keys=["version"])])),
        ),
        [
            ("n1", make_pod("w1", {"app": "web", "version": "v1"})),
            ("n3", make_pod("w2", {"app": "web", "version": "v2"})),
        ],
        None,
        [ANTI, OK, OK, OK],
        id="mismatch-label-keys-merged-from-incoming-pod",
    ),
    pytest.param(
        make_pod("p", WEB, affinity=affinity(anti=rules([term(HOST, WEB, match_label_keys=["version"])]))),
        [("n1", make_pod("w1", {"app": "web", "version": "v1"}))],
        None,
        [ANTI, OK, OK, OK],
        id="match-label-keys-ignored-when-pod-lacks-label",
    ),
    pytest.param(
        make_pod("p", WEB),
        [("n1", make_pod("guard", {"app": "guard"}, affinity=affinity(anti=rules([term(ZONE, WEB)]))))],
        None,
        [EXIST, EXIST, OK, OK],
        id="existing-pod-anti-affinity",
    ),
    pytest.param(
        make_pod("p", WEB),
        [
            ("n4", make_pod("guard", affinity=affinity(anti=rules([term(ZONE, WEB)])))),
            ("n3", make_pod("guard2", affinity=affinity(anti=rules([term(HOST, WEB)])))),
        ],
        None,
        [OK, OK, EXIST, OK],
        id="existing-pod-anti-affinity-node-without-key-not-counted",
    ),
    pytest.param(
        make_pod("p", WEB, ns="default"),
        [
            (
                "n1",
                make_pod(
                    "guard",
                    ns="other",
                    affinity=affinity(anti=rules([term(HOST, WEB, ns_selector={"matchLabels": {"env": "prod"}})])),
                ),
            )
        ],
        {"namespaceLabels": {"default": {"env": "prod"}}},
        [EXIST, OK, OK, OK],
        id="existing-pod-anti-affinity-namespace-selector-uses-incoming-namespace-labels",
    ),
    pytest.param(
        make_pod("p", {"app": "web", "v": "2"}),
        [
            (
                "n2",
                make_pod("guard", {"v": "2"}, affinity=affinity(anti=rules([term(HOST, WEB, match_label_keys=["v"])]))),
            ),
            (
                "n3",
                make_pod(
                    "guard2", {"v": "1"}, affinity=affinity(anti=rules([term(HOST, WEB, match_label_keys=["v"])]))
                ),
            ),
        ],
        None,
        [OK, EXIST, OK, OK],
        id="existing-pod-match-label-keys-from-its-own-labels",
    ),
    pytest.param(
        make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB)]), anti=rules([term(HOST, {"app": "cache"})]))),
        [
            ("n1", make_pod("db", DB)),
            ("n1", make_pod("cache", {"app": "cache"})),
            ("n3", make_pod("cache2", {"app": "cache"})),
            ("n2", make_pod("guard", affinity=affinity(anti=rules([term(HOST, WEB)])))),
        ],
        None,
        [ANTI, EXIST, AFF, AFF],
        id="reason-order-affinity-then-anti-then-existing",
    ),
    pytest.param(
        make_pod("p", WEB, affinity=affinity(anti=rules([term(HOST, {"app": "cache"})]))),
        [
            ("n1", make_pod("cache", {"app": "cache"})),
            ("n1", make_pod("guard", affinity=affinity(anti=rules([term(HOST, WEB)])))),
        ],
        None,
        [ANTI, OK, OK, OK],
        id="own-anti-affinity-reported-before-existing",
    ),
    pytest.param(
        make_pod("p", WEB),
        [
            ("n1", make_pod("db", DB)),
            ("n2", make_pod("guard", ns="other", affinity=affinity(anti=rules([term(HOST, WEB)])))),
        ],
        None,
        "skip",
        id="skip-no-terms-no-matching-existing-anti-affinity",
    ),
    pytest.param(
        make_pod("p", WEB, affinity=affinity(aff=rules(preferred=[(10, term(ZONE, DB))]))),
        [("n1", make_pod("db", DB))],
        None,
        "skip",
        id="skip-preferred-terms-only",
    ),
    pytest.param(
        make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB)]))),
        [],
        None,
        [AFF, AFF, AFF, AFF],
        id="empty-cluster-affinity",
    ),
]


@pytest.mark.parametrize(("pod", "placed", "args", "expected"), FILTER_CASES)
def test_filter(pod: Pod, placed: list[tuple[str, Pod]], args: dict[str, Any] | None, expected: Any) -> None:
    assert run_filter(pod, placed, args) == expected


def test_filter_batches_answer_in_row_order() -> None:
    snap = cluster([("n1", make_pod("web", WEB))])
    pl = InterPodAffinity()
    pod = make_pod("p", affinity=affinity(anti=rules([term(ZONE, WEB)])))
    state = CycleState("c", snap)
    asyncio.run(pl.pre_filter(state, pod))
    rows = [snap.row("n3"), snap.row("n2"), snap.row("n4"), snap.row("n1")]
    res = asyncio.run(pl.filter(state, pod, NodeBatch(snap, np.asarray(rows, dtype=np.int64))))
    assert outcome(res) == [OK, ANTI, OK, ANTI]
    res = asyncio.run(pl.filter(state, pod, NodeBatch(snap, np.asarray([], dtype=np.int64))))
    assert len(res) == 0


def test_filter_without_prefilter_is_an_error() -> None:
    snap = cluster([])
    res = asyncio.run(InterPodAffinity().filter(CycleState("c", snap), make_pod("p"), all_rows(snap)))
    assert all(res.status_at(i).code is Code.Error for i in range(len(res)))


def test_prefilter_without_snapshot_is_an_error() -> None:
    _, status = asyncio.run(InterPodAffinity().pre_filter(CycleState("c"), make_pod("p")))
    assert status.code is Code.Error


# ---- PreFilterExtensions -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "placed", "change", "other", "node", "before", "after"),
    [
        pytest.param(
            make_pod("p", affinity=affinity(anti=rules([term(ZONE, WEB)]))),
            [("n1", make_pod("web", WEB))],
            "remove",
            "web",
            "n1",
            [ANTI, ANTI, OK, OK],
            [OK, OK, OK, OK],
            id="remove-pod-matching-anti-affinity",
        ),
        pytest.param(
            make_pod("p", affinity=affinity(anti=rules([term(ZONE, WEB)]))),
            [("n1", make_pod("web", WEB))],
            "add",
            "web2",
            "n3",
            [ANTI, ANTI, OK, OK],
            [ANTI, ANTI, ANTI, OK],
            id="add-pod-matching-anti-affinity",
        ),
        pytest.param(
            make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB)]))),
            [("n1", make_pod("db", DB))],
            "add",
            "db2",
            "n3",
            [OK, OK, AFF, AFF],
            [OK, OK, OK, AFF],
            id="add-pod-matching-affinity",
        ),
        pytest.param(
            make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB)]))),
            [("n1", make_pod("db", DB))],
            "remove",
            "db",
            "n1",
            [OK, OK, AFF, AFF],
            [AFF, AFF, AFF, AFF],
            id="remove-only-pod-matching-affinity",
        ),
        pytest.param(
            make_pod("p", DB, affinity=affinity(aff=rules([term(ZONE, DB)]))),
            [("n1", make_pod("db", DB))],
            "remove",
            "db",
            "n1",
            [OK, OK, AFF, AFF],
            [OK, OK, OK, AFF],
            id="remove-makes-self-affinity-exception-apply",
        ),
        pytest.param(
            make_pod("p", WEB, affinity=affinity(anti=rules([term(HOST, {"app": "none"})]))),
            [("n1", make_pod("guard", affinity=affinity(anti=rules([term(HOST, WEB)]))))],
            "remove",
            "guard",
            "n1",
            [EXIST, OK, OK, OK],
            [OK, OK, OK, OK],
            id="remove-existing-pod-with-anti-affinity",
        ),
        pytest.param(
            make_pod("p", WEB, affinity=affinity(anti=rules([term(HOST, {"app": "none"})]))),
            [],
            "add",
            "guard",
            "n2",
            [OK, OK, OK, OK],
            [EXIST, EXIST, OK, OK],
            id="add-existing-pod-with-anti-affinity",
        ),
    ],
)
def test_prefilter_extensions(
    pod: Pod,
    placed: list[tuple[str, Pod]],
    change: str,
    other: str,
    node: str,
    before: list[str],
    after: list[str],
) -> None:
    snap = cluster(placed)
    pl = InterPodAffinity()
    state = CycleState("c", snap)
    _, status = asyncio.run(pl.pre_filter(state, pod))
    assert status.ok
    ext = pl.pre_filter_extensions()
    assert ext is pl
    extra = {
        "web2": make_pod("web2", WEB),
        "db2": make_pod("db2", DB),
        "guard": make_pod("guard", affinity=affinity(anti=rules([term(ZONE, WEB)]))),
    }
    victim = next(p for _, p in placed if p.name == other) if change == "remove" else extra[other]
    row = snap.row(node)
    assert row is not None
    dry = state.clone()
    fn = pl.remove_pod if change == "remove" else pl.add_pod
    assert asyncio.run(fn(dry, pod, victim, row)).ok
    assert outcome(asyncio.run(pl.filter(dry, pod, all_rows(snap)))) == after
    # The original state is untouched by what-ifs on its clone.
    assert outcome(asyncio.run(pl.filter(state, pod, all_rows(snap)))) == before
    # Adding back what was removed (or removing what was added) restores the original answer.
    undo = pl.add_pod if change == "remove" else pl.remove_pod
    assert asyncio.run(undo(dry, pod, victim, row)).ok
    assert outcome(asyncio.run(pl.filter(dry, pod, all_rows(snap)))) == before


def test_prefilter_extensions_after_skip_do_nothing() -> None:
    snap = cluster([])
    pl = InterPodAffinity()
    state = CycleState("c", snap)
    _, status = asyncio.run(pl.pre_filter(state, make_pod("p")))
    assert status.is_skip
    assert asyncio.run(pl.add_pod(state, make_pod("p"), make_pod("q"), 0)).ok
    assert asyncio.run(pl.remove_pod(state, make_pod("p"), make_pod("q"), 0)).ok


# ---- Score ---------------------------------------------------------------------------------------

SCORE_CASES = [
    pytest.param(
        make_pod("p", affinity=affinity(aff=rules(preferred=[(5, term(ZONE, DB))]))),
        [("n1", make_pod("db1", DB)), ("n3", make_pod("db2", DB)), ("n3", make_pod("db3", DB))],
        None,
        ([5, 5, 10, 0], [50, 50, 100, 0]),
        id="preferred-affinity-per-zone",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(anti=rules(preferred=[(3, term(ZONE, WEB))]))),
        [("n1", make_pod("web", WEB))],
        None,
        ([-3, -3, 0, 0], [0, 0, 100, 100]),
        id="preferred-anti-affinity-negative",
    ),
    pytest.param(
        make_pod(
            "p",
            affinity=affinity(
                aff=rules(preferred=[(10, term(HOST, DB))]), anti=rules(preferred=[(4, term(ZONE, WEB))])
            ),
        ),
        [("n1", make_pod("db", DB)), ("n2", make_pod("web", WEB))],
        None,
        ([6, -4, 0, 0], [100, 0, 40, 40]),
        id="preferred-affinity-and-anti-affinity-combined",
    ),
    pytest.param(
        make_pod("p", WEB),
        [("n1", make_pod("e", affinity=affinity(aff=rules([term(ZONE, WEB)]))))],
        None,
        ([1, 1, 0, 0], [100, 100, 0, 0]),
        id="existing-required-affinity-default-hard-weight",
    ),
    pytest.param(
        make_pod("p", WEB),
        [("n1", make_pod("e", affinity=affinity(aff=rules([term(ZONE, WEB)]))))],
        {"hardPodAffinityWeight": 7},
        ([7, 7, 0, 0], [100, 100, 0, 0]),
        id="existing-required-affinity-hard-weight-arg",
    ),
    pytest.param(
        make_pod("p", WEB),
        [("n1", make_pod("e", affinity=affinity(aff=rules([term(ZONE, WEB)]))))],
        {"hardPodAffinityWeight": 0},
        "skip",
        id="hard-weight-zero-ignores-required-affinity",
    ),
    pytest.param(
        make_pod("p", WEB),
        [("n1", make_pod("e", affinity=affinity(anti=rules([term(ZONE, WEB)]))))],
        None,
        "skip",
        id="existing-required-anti-affinity-not-scored",
    ),
    pytest.param(
        make_pod("p", WEB),
        [("n3", make_pod("e", affinity=affinity(aff=rules(preferred=[(20, term(HOST, WEB))]))))],
        None,
        ([0, 0, 20, 0], [0, 0, 100, 0]),
        id="existing-preferred-affinity",
    ),
    pytest.param(
        make_pod("p", WEB),
        [("n3", make_pod("e", affinity=affinity(anti=rules(preferred=[(20, term(HOST, WEB))]))))],
        None,
        ([0, 0, -20, 0], [100, 100, 0, 100]),
        id="existing-preferred-anti-affinity",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(aff=rules(preferred=[(29, term(HOST, DB)), (100, term(HOST, {"app": "x"}))]))),
        [("n2", make_pod("db", DB)), ("n3", make_pod("x", {"app": "x"}))],
        None,
        ([0, 29, 100, 0], [0, 28, 100, 0]),
        id="normalize-truncates-float64-like-go",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(aff=rules(preferred=[(57, term(HOST, DB)), (100, term(HOST, {"app": "x"}))]))),
        [("n1", make_pod("db", DB)), ("n4", make_pod("x", {"app": "x"}))],
        None,
        ([57, 0, 0, 100], [56, 0, 0, 100]),
        id="normalize-truncates-57",
    ),
    pytest.param(
        make_pod(
            "p",
            affinity=affinity(aff=rules(preferred=[(5, term(ZONE, DB))]), anti=rules(preferred=[(5, term(ZONE, DB))])),
        ),
        [("n1", make_pod("db", DB))],
        None,
        ([0, 0, 0, 0], [0, 0, 0, 0]),
        id="contributions-cancel-all-equal-scores-zero",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(aff=rules(preferred=[(5, term(ZONE, DB))]))),
        [("n4", make_pod("db", DB))],
        None,
        "skip",
        id="skip-matching-pod-on-node-without-key",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(aff=rules(preferred=[(5, term(ZONE, DB))]))),
        [("n1", make_pod("web", WEB))],
        None,
        "skip",
        id="skip-nothing-matches",
    ),
    pytest.param(
        make_pod("p"),
        [("n1", make_pod("web", WEB))],
        None,
        "skip",
        id="skip-no-terms-anywhere",
    ),
    pytest.param(
        make_pod("p", affinity=affinity(aff=rules(preferred=[(5, term(ZONE, DB, namespaces=["other"]))]))),
        [("n1", make_pod("db", DB)), ("n3", make_pod("db2", DB, ns="other"))],
        None,
        ([0, 0, 5, 0], [0, 0, 100, 0]),
        id="preferred-affinity-namespaces",
    ),
    pytest.param(
        make_pod(
            "p", affinity=affinity(aff=rules(preferred=[(5, term(ZONE, DB, ns_selector={"matchLabels": {"t": "a"}}))]))
        ),
        [("n1", make_pod("db", DB, ns="x")), ("n3", make_pod("db2", DB, ns="y"))],
        {"namespaceLabels": {"x": {"t": "a"}}},
        ([5, 5, 0, 0], [100, 100, 0, 0]),
        id="preferred-affinity-namespace-selector",
    ),
    pytest.param(
        make_pod("p", WEB, ns="team"),
        [
            (
                "n2",
                make_pod(
                    "e",
                    ns="other",
                    affinity=affinity(
                        aff=rules(
                            preferred=[
                                (
                                    9,
                                    term(
                                        HOST,
                                        WEB,
                                        ns_selector={"matchExpressions": [{"key": "env", "operator": "DoesNotExist"}]},
                                    ),
                                )
                            ]
                        )
                    ),
                ),
            )
        ],
        {"namespaceLabels": {"team": {"owner": "me"}}},
        ([0, 9, 0, 0], [0, 100, 0, 0]),
        id="existing-term-namespace-selector-against-incoming-namespace",
    ),
    pytest.param(
        make_pod("p", WEB),
        [
            ("n1", make_pod("e", affinity=affinity(aff=rules(preferred=[(10, term(ZONE, WEB))])))),
            ("n2", make_pod("f", affinity=affinity(anti=rules(preferred=[(2, term(HOST, WEB))])))),
        ],
        {"ignorePreferredTermsOfExistingPods": True},
        "skip",
        id="ignore-preferred-terms-of-existing-pods-skips",
    ),
    pytest.param(
        make_pod("p", WEB, affinity=affinity(aff=rules(preferred=[(5, term(ZONE, DB))]))),
        [
            ("n1", make_pod("db", DB)),
            ("n3", make_pod("e", affinity=affinity(aff=rules(preferred=[(10, term(HOST, WEB))])))),
        ],
        {"ignorePreferredTermsOfExistingPods": True},
        ([5, 5, 10, 0], [50, 50, 100, 0]),
        id="ignore-flag-still-scores-when-pod-has-preferred-terms",
    ),
    pytest.param(
        make_pod(
            "p",
            {"app": "web", "v": "1"},
            affinity=affinity(aff=rules(preferred=[(10, term(HOST, WEB, match_label_keys=["v"]))])),
        ),
        [("n1", make_pod("w1", {"app": "web", "v": "1"})), ("n2", make_pod("w2", {"app": "web", "v": "2"}))],
        None,
        ([10, 0, 0, 0], [100, 0, 0, 0]),
        id="preferred-match-label-keys",
    ),
]


@pytest.mark.parametrize(("pod", "placed", "args", "expected"), SCORE_CASES)
def test_score(pod: Pod, placed: list[tuple[str, Pod]], args: dict[str, Any] | None, expected: Any) -> None:
    assert run_score(pod, placed, args) == expected


def test_score_subset_batch_in_row_order() -> None:
    pod = make_pod("p", affinity=affinity(aff=rules(preferred=[(5, term(ZONE, DB))])))
    snap = cluster([("n1", make_pod("db1", DB)), ("n3", make_pod("db2", DB)), ("n3", make_pod("db3", DB))])
    pl = InterPodAffinity()
    state = CycleState("c", snap)
    batch = NodeBatch(snap, np.asarray([snap.row("n3"), snap.row("n2")], dtype=np.int64))
    assert asyncio.run(pl.pre_score(state, pod, batch)).ok
    raw = asyncio.run(pl.score(state, pod, batch))
    assert raw.tolist() == [10, 5]
    scores = raw.copy()
    assert asyncio.run(pl.normalize_score(state, pod, batch, scores)).ok
    assert scores.tolist() == [100, 0]


def test_normalize_without_prescore_is_an_error() -> None:
    snap = cluster([])
    scores = np.zeros(4, dtype=np.int64)
    status = asyncio.run(
        InterPodAffinity().normalize_score(CycleState("c", snap), make_pod("p"), all_rows(snap), scores)
    )
    assert status.code is Code.Error


# ---- args ----------------------------------------------------------------------------------------


def test_args_defaults_and_values() -> None:
    pl = InterPodAffinity()
    assert pl.hard_pod_affinity_weight == 1
    assert pl.ignore_preferred_terms_of_existing_pods is False
    pl = InterPodAffinity(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "InterPodAffinityArgs",
            "hardPodAffinityWeight": 100,
            "ignorePreferredTermsOfExistingPods": True,
            "namespaceLabels": {"a": {"team": "x"}},
        }
    )
    assert pl.hard_pod_affinity_weight == 100
    assert pl.ignore_preferred_terms_of_existing_pods is True
    assert dict(pl.namespace_labels("a")) == {"team": "x", "kubernetes.io/metadata.name": "a"}
    assert dict(pl.namespace_labels("b")) == {"kubernetes.io/metadata.name": "b"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param({"hardPodAffinityWeight": -1}, "not in valid range [0-100]", id="weight-negative"),
        pytest.param({"hardPodAffinityWeight": 101}, "not in valid range [0-100]", id="weight-too-big"),
        pytest.param({"hardPodAffinityWeight": "1"}, "must be an integer", id="weight-string"),
        pytest.param({"hardPodAffinityWeight": True}, "must be an integer", id="weight-bool"),
        pytest.param({"ignorePreferredTermsOfExistingPods": "yes"}, "must be a boolean", id="ignore-not-bool"),
        pytest.param({"namespaceLabels": ["a"]}, "namespaceLabels must be a mapping", id="ns-labels-list"),
        pytest.param({"namespaceLabels": {"a": {"k": 1}}}, "namespaceLabels.a must be a mapping", id="ns-label-value"),
        pytest.param({"hardPodAffinityWeigth": 1}, "unknown field(s) in args: hardPodAffinityWeigth", id="typo"),
    ],
)
def test_args_errors(args: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginArgsError) as exc:
        InterPodAffinity(args)
    assert message in str(exc.value)


# ---- EnqueueExtensions ---------------------------------------------------------------------------


def test_events_to_register() -> None:
    regs = InterPodAffinity().events_to_register()
    assert [(r.event.resource, r.event.action) for r in regs] == [
        ("AssignedPod", ActionType.Add | ActionType.UpdatePodLabel | ActionType.Delete),
        ("TargetPod", ActionType.UpdatePodLabel),
        ("Node", ActionType.Add | ActionType.UpdateNodeLabel),
    ]
    assert all(r.hint is not None for r in regs)


def test_target_pod_label_update_always_queues() -> None:
    """Some existing pod's anti-affinity may have hated the pod's old labels (1.37's
    isSchedulableAfterTargetPodUpdateLabel)."""
    reg = next(r for r in InterPodAffinity().events_to_register() if r.event.resource == "TargetPod")
    assert reg.hint is not None
    assert reg.hint(PENDING_NONE, PENDING_NONE, make_pod("p", DB)) is QueueingHint.Queue


PENDING_AFF = make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB)])))
PENDING_ANTI = make_pod("p", WEB, affinity=affinity(anti=rules([term(ZONE, DB)])))
PENDING_NONE = make_pod("p", WEB)
PENDING_ANTI2 = make_pod("p", WEB, affinity=affinity(anti=rules([term(ZONE, DB), term(HOST, WEB)])))
PENDING_AFF_NS_IN = make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB, ns_selector={
    "matchLabels": {"kubernetes.io/metadata.name": "team"}})])))
PENDING_AFF_NS_NOT_IN = make_pod("p", WEB, affinity=affinity(aff=rules([term(ZONE, DB, ns_selector={
    "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["team"]}]})])))


def _nominated(p: Pod) -> Pod:
    p.nominated_node_name = "n1"
    return p

Q, SKIP = QueueingHint.Queue, QueueingHint.QueueSkip


@pytest.mark.parametrize(
    ("pod", "old", "new", "expected"),
    [
        pytest.param(PENDING_AFF, None, make_pod("db", DB, node_name="n1"), Q, id="added-matches-affinity"),
        pytest.param(PENDING_AFF, None, make_pod("db", DB), SKIP, id="added-unscheduled"),
        pytest.param(PENDING_AFF, None, make_pod("x", WEB, node_name="n1"), SKIP, id="added-not-matching"),
        pytest.param(PENDING_ANTI, None, make_pod("db", DB, node_name="n1"), SKIP, id="added-matches-anti-only"),
        pytest.param(
            PENDING_AFF,
            make_pod("x", WEB, node_name="n1"),
            make_pod("x", DB, node_name="n1"),
            Q,
            id="updated-to-match-affinity",
        ),
        pytest.param(
            PENDING_AFF,
            make_pod("x", DB, node_name="n1"),
            make_pod("x", DB, node_name="n1"),
            SKIP,
            id="updated-still-matching-affinity",
        ),
        pytest.param(
            PENDING_ANTI,
            make_pod("x", DB, node_name="n1"),
            make_pod("x", WEB, node_name="n1"),
            Q,
            id="updated-to-not-match-anti",
        ),
        pytest.param(PENDING_ANTI, make_pod("x", DB, node_name="n1"), None, Q, id="deleted-matching-anti"),
        pytest.param(PENDING_ANTI, make_pod("x", WEB, node_name="n1"), None, SKIP, id="deleted-not-matching-anti"),
        pytest.param(
            PENDING_NONE,
            make_pod("g", node_name="n1", affinity=affinity(anti=rules([term(HOST, WEB)]))),
            None,
            Q,
            id="deleted-pod-whose-anti-affinity-matched",
        ),
        pytest.param(PENDING_NONE, make_pod("x", DB, node_name="n1"), None, SKIP, id="deleted-unrelated"),
        pytest.param(PENDING_AFF, None, None, Q, id="unknown-objects"),
        # 1.37: a nominated pod counts as placed; anti-affinity checks match ANY term (1.35: all).
        pytest.param(PENDING_AFF, None, _nominated(make_pod("db", DB)), Q, id="added-nominated-matches-affinity"),
        pytest.param(PENDING_ANTI2, make_pod("x", DB, node_name="n1"), None, Q, id="deleted-matching-one-anti-term"),
        pytest.param(
            PENDING_ANTI2,
            make_pod("x", DB, node_name="n1"),
            make_pod("x", {"app": "other"}, node_name="n1"),
            Q,
            id="updated-to-match-no-anti-term",
        ),
        pytest.param(
            PENDING_ANTI2,
            make_pod("x", DB, node_name="n1"),
            make_pod("x", WEB, node_name="n1"),
            SKIP,
            id="updated-still-matching-one-anti-term",
        ),
        # Upstream's hint matches terms without namespace labels: a namespaceSelector that needs a
        # label selects nothing there, one that an empty label set satisfies selects every namespace.
        pytest.param(PENDING_AFF_NS_IN, None, make_pod("db", DB, ns="team", node_name="n1"), SKIP,
                     id="added-in-selected-namespace-hint-sees-no-labels"),
        pytest.param(PENDING_AFF_NS_NOT_IN, None, make_pod("db", DB, ns="team", node_name="n1"), Q,
                     id="added-in-excluded-namespace-hint-sees-no-labels"),
    ],
)
def test_pod_change_hint(pod: Pod, old: Pod | None, new: Pod | None, expected: QueueingHint) -> None:
    assert InterPodAffinity().is_schedulable_after_pod_change(pod, old, new) is expected


@pytest.mark.parametrize(
    ("pod", "old", "new", "expected"),
    [
        pytest.param(PENDING_AFF, None, make_node("n", {ZONE: "z"}), Q, id="added-with-affinity-key"),
        pytest.param(PENDING_AFF, None, make_node("n", {HOST: "n"}), SKIP, id="added-without-affinity-key"),
        pytest.param(PENDING_AFF, make_node("n", {}), make_node("n", {ZONE: "z"}), Q, id="affinity-key-appeared"),
        pytest.param(
            PENDING_AFF, make_node("n", {ZONE: "a"}), make_node("n", {ZONE: "b"}), Q, id="affinity-key-changed"
        ),
        pytest.param(
            PENDING_AFF,
            make_node("n", {ZONE: "a"}),
            make_node("n", {ZONE: "a", "x": "y"}),
            SKIP,
            id="unrelated-label-changed",
        ),
        pytest.param(PENDING_ANTI, None, make_node("n", {}), Q, id="added-node-anti-affinity"),
        pytest.param(PENDING_ANTI, make_node("n", {ZONE: "a"}), make_node("n", {}), Q, id="anti-affinity-key-removed"),
        pytest.param(PENDING_ANTI, make_node("n", {}), make_node("n", {ZONE: "a"}), SKIP, id="anti-affinity-key-added"),
        pytest.param(PENDING_NONE, None, make_node("n", {ZONE: "z"}), SKIP, id="no-required-terms"),
    ],
)
def test_node_change_hint(pod: Pod, old: Node | None, new: Node, expected: QueueingHint) -> None:
    assert InterPodAffinity().is_schedulable_after_node_change(pod, old, new) is expected


# ---- randomized comparison with a direct, map-based reading of kube-scheduler's algorithm ----------


def _sel_ok(sel: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    if sel is None:
        return False
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        val = labels.get(e["key"])
        op = e["operator"]
        if op == "In" and (val is None or val not in e["values"]):
            return False
        if op == "NotIn" and val is not None and val in e["values"]:
            return False
        if op == "Exists" and val is None:
            return False
        if op == "DoesNotExist" and val is not None:
            return False
    return True


def _ref_term_ok(owner: Pod, t: dict[str, Any], target: Pod, ns_labels: dict[str, dict[str, str]]) -> bool:
    namespaces = set(t.get("namespaces") or [])
    ns_sel = t.get("namespaceSelector")
    if not namespaces and ns_sel is None:
        namespaces = {owner.namespace}
    labels_of_ns = {**ns_labels.get(target.namespace, {}), "kubernetes.io/metadata.name": target.namespace}
    if target.namespace not in namespaces and not (ns_sel is not None and _sel_ok(ns_sel, labels_of_ns)):
        return False
    sel = t.get("labelSelector")
    if sel is None:
        return False
    return _sel_ok(sel, target.labels)


def _ref_filter(pod: Pod, spec: dict[str, Any], placed: list[tuple[str, Pod, dict[str, Any]]]) -> str | list[str]:
    def req(s: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        return list((s.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or [])

    aff_terms, anti_terms = req(spec, "podAffinity"), req(spec, "podAntiAffinity")
    existing: dict[tuple[str, str], int] = {}
    aff_counts: dict[tuple[str, str], int] = {}
    anti_counts: dict[tuple[str, str], int] = {}
    for node, other, ospec in placed:
        nl = NODE_LABELS[node]
        for t in req(ospec, "podAntiAffinity"):
            if _ref_term_ok(other, t, pod, {}) and t["topologyKey"] in nl:
                k = (t["topologyKey"], nl[t["topologyKey"]])
                existing[k] = existing.get(k, 0) + 1
        if aff_terms and all(_ref_term_ok(pod, t, other, {}) for t in aff_terms):
            for t in aff_terms:
                if t["topologyKey"] in nl:
                    k = (t["topologyKey"], nl[t["topologyKey"]])
                    aff_counts[k] = aff_counts.get(k, 0) + 1
        for t in anti_terms:
            if _ref_term_ok(pod, t, other, {}) and t["topologyKey"] in nl:
                k = (t["topologyKey"], nl[t["topologyKey"]])
                anti_counts[k] = anti_counts.get(k, 0) + 1
    if not existing and not aff_terms and not anti_terms:
        return "skip"
    out = []
    for n in NODES:
        nl = NODE_LABELS[n]
        ok = True
        exist = True
        for t in aff_terms:
            if t["topologyKey"] not in nl:
                ok = False
                break
            if aff_counts.get((t["topologyKey"], nl[t["topologyKey"]]), 0) <= 0:
                exist = False
        if ok and not exist:
            ok = not aff_counts and all(_ref_term_ok(pod, t, pod, {}) for t in aff_terms)
        if not ok:
            out.append(AFF)
        elif any(
            t["topologyKey"] in nl and anti_counts.get((t["topologyKey"], nl[t["topologyKey"]]), 0) > 0
            for t in anti_terms
        ):
            out.append(ANTI)
        elif any(existing.get((k, v), 0) > 0 for k, v in nl.items()):
            out.append(EXIST)
        else:
            out.append(OK)
    return out


def _ref_score(
    pod: Pod, spec: dict[str, Any], placed: list[tuple[str, Pod, dict[str, Any]]], hard: int
) -> str | tuple[list[int], list[int]]:
    def pref(s: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        return list((s.get(kind) or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or [])

    def required(s: dict[str, Any], kind: str) -> list[dict[str, Any]]:
        return list((s.get(kind) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or [])

    topo: dict[str, dict[str, int]] = {}

    def add(t: dict[str, Any], node: str, w: int) -> None:
        nl = NODE_LABELS[node]
        if t["topologyKey"] in nl:
            d = topo.setdefault(t["topologyKey"], {})
            d[nl[t["topologyKey"]]] = d.get(nl[t["topologyKey"]], 0) + w

    for node, other, ospec in placed:
        for sign, kind in ((1, "podAffinity"), (-1, "podAntiAffinity")):
            for wt in pref(spec, kind):
                if _ref_term_ok(pod, wt["podAffinityTerm"], other, {}):
                    add(wt["podAffinityTerm"], node, sign * wt["weight"])
        if hard > 0:
            for t in required(ospec, "podAffinity"):
                if _ref_term_ok(other, t, pod, {}):
                    add(t, node, hard)
        for sign, kind in ((1, "podAffinity"), (-1, "podAntiAffinity")):
            for wt in pref(ospec, kind):
                if _ref_term_ok(other, wt["podAffinityTerm"], pod, {}):
                    add(wt["podAffinityTerm"], node, sign * wt["weight"])
    if not topo:
        return "skip"
    raw = [sum(vals.get(NODE_LABELS[n].get(k, "\0"), 0) for k, vals in topo.items()) for n in NODES]
    lo, hi = min(raw), max(raw)
    norm = [int(100.0 * ((s - lo) / (hi - lo))) if hi > lo else 0 for s in raw]
    return raw, norm


_KEYS = [ZONE, HOST]
_APPS = ["a", "b", "c"]


@st.composite
def _term_strategy(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["labels", "in", "notin", "exists", "none", "empty"]))
    key = draw(st.sampled_from(_KEYS))
    if kind == "labels":
        t = term(key, {"app": draw(st.sampled_from(_APPS))})
    elif kind == "in":
        t = term(
            key,
            exprs=[
                {
                    "key": "app",
                    "operator": "In",
                    "values": draw(st.lists(st.sampled_from(_APPS), min_size=1, max_size=2)),
                }
            ],
        )
    elif kind == "notin":
        t = term(key, exprs=[{"key": "app", "operator": "NotIn", "values": [draw(st.sampled_from(_APPS))]}])
    elif kind == "exists":
        t = term(key, exprs=[{"key": "tier", "operator": "Exists"}])
    elif kind == "none":
        t = term(key, no_selector=True)
    else:
        t = term(key)
    ns = draw(st.sampled_from(["own", "list", "all"]))
    if ns == "list":
        t["namespaces"] = ["default", "other"]
    elif ns == "all":
        t["namespaceSelector"] = {}
    return t


@st.composite
def _spec_strategy(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        req = draw(st.lists(_term_strategy(), max_size=2))
        pref = draw(st.lists(st.tuples(st.integers(1, 100), _term_strategy()), max_size=2))
        r = rules(req, pref)
        if r:
            out[kind] = r
    return out


@st.composite
def _pod_strategy(draw: st.DrawFn, name: str, with_terms: bool = False) -> tuple[Pod, dict[str, Any]]:
    labels: dict[str, str] = {}
    app = draw(st.sampled_from([*_APPS, None]))
    if app:
        labels["app"] = app
    if draw(st.booleans()):
        labels["tier"] = "x"
    spec = draw(_spec_strategy()) if with_terms or draw(st.integers(0, 3)) == 0 else {}
    ns = draw(st.sampled_from(["default", "default", "other"]))
    return make_pod(name, labels, ns=ns, affinity=spec or None), spec


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_matches_reference(data: st.DataObject) -> None:
    incoming, spec = data.draw(_pod_strategy("incoming", with_terms=True))
    n = data.draw(st.integers(0, 8))
    placed: list[tuple[str, Pod, dict[str, Any]]] = []
    for i in range(n):
        p, s = data.draw(_pod_strategy(f"e{i}"))
        placed.append((data.draw(st.sampled_from(NODES)), p, s))
    hard = data.draw(st.sampled_from([0, 1, 5]))
    pairs = [(node, p) for node, p, _ in placed]
    assert run_filter(incoming, pairs) == _ref_filter(incoming, spec, placed)
    assert run_score(incoming, pairs, {"hardPodAffinityWeight": hard}) == _ref_score(incoming, spec, placed, hard)


def test_index_reused_across_snapshots_stays_correct() -> None:
    """One plugin instance across changing snapshots (pods placed and removed, a node removed so rows
    move) answers as a fresh instance does."""
    table = ClusterTable()
    for name, labels in NODE_LABELS.items():
        table.upsert_node(make_node(name, labels))
    guard = make_pod("guard", affinity=affinity(anti=rules([term(ZONE, WEB)])))
    incoming = make_pod("p", WEB, affinity=affinity(aff=rules(preferred=[(5, term(HOST, DB))])))
    shared = InterPodAffinity()

    def answers(pl: InterPodAffinity) -> tuple[Any, Any]:
        snap = table.snapshot()
        batch = NodeBatch(snap, np.arange(len(snap), dtype=np.int64))
        state = CycleState("c", snap)
        _, st = asyncio.run(pl.pre_filter(state, incoming))
        f = "skip" if st.is_skip else outcome(asyncio.run(pl.filter(state, incoming, batch)))
        if asyncio.run(pl.pre_score(state, incoming, batch)).is_skip:
            return f, "skip"
        return f, asyncio.run(pl.score(state, incoming, batch)).tolist()

    steps: list[Callable[[], object]] = [
        lambda: table.place_pod(make_pod("db", DB), "n4"),
        lambda: table.place_pod(guard, "n1"),
        lambda: table.place_pod(make_pod("db2", DB), "n2"),
        lambda: table.remove_node("n1"),  # n4 moves into n1's row
        lambda: table.place_pod(make_pod("guard2", affinity=affinity(anti=rules([term(HOST, WEB)]))), "n4"),
        lambda: table.unplace_pod(guard.uid),
    ]
    seen = [answers(shared)]
    for step in steps:
        step()
        got = answers(shared)
        assert got == answers(InterPodAffinity())
        seen.append(got)
    # After n1's removal the rows are n4, n2, n3; guard2 on n4 repels the pod, db/db2 attract it to n4/n2.
    assert seen[-2] == ([EXIST, OK, OK], [5, 5, 0])
