"""TaintToleration: Filter reasons, PreferNoSchedule scoring and normalization, queueing hints.

Expectations follow kube-scheduler's tainttoleration plugin (v1.37): an untolerated
NoSchedule/NoExecute taint rejects a node as UnschedulableAndUnresolvable with
``node(s) had untolerated taint(s)`` (no taint named); Score counts untolerated PreferNoSchedule
taints and NormalizeScore reverses them onto [0, 100].
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from framework.plugins.helpers import default_normalize_score
from framework.plugins.taints import taint_set_index
from framework.plugins.tainttoleration import TaintToleration
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import ActionType, CycleState, NodeBatch, QueueingHint, points_of
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import SUCCESS, Code

UNRESOLVABLE = Code.UnschedulableAndUnresolvable


def make_node(name: str, taints: list[dict[str, str]] | None = None) -> Node:
    return node_from_dict({"metadata": {"name": name}, "spec": {"taints": taints or []}})


def make_pod(tolerations: list[dict[str, Any]] | None = None, name: str = "p") -> Pod:
    return pod_from_dict(
        {"metadata": {"name": name}, "spec": {"containers": [{"name": "c"}], "tolerations": tolerations or []}}
    )


def snapshot(*nodes: Node) -> Snapshot:
    table = ClusterTable()
    for n in nodes:
        table.upsert_node(n)
    return table.snapshot()


def whole(snap: Snapshot) -> NodeBatch:
    return NodeBatch(snap, np.arange(len(snap), dtype=np.int64))


def run_filter(pod: Pod, snap: Snapshot, rows: list[int] | None = None) -> list[tuple[Code, tuple[str, ...]]]:
    pl = TaintToleration()
    state = CycleState(snapshot=snap)
    batch = whole(snap) if rows is None else NodeBatch(snap, np.asarray(rows, dtype=np.int64))
    res = asyncio.run(pl.filter(state, pod, batch))
    out = []
    for i in range(len(res)):
        st = res.status_at(i)
        out.append((st.code, st.reasons))
    return out


def run_score(pod: Pod, snap: Snapshot) -> tuple[list[int], list[int]]:
    pl = TaintToleration()
    state = CycleState(snapshot=snap)
    batch = whole(snap)
    assert asyncio.run(pl.pre_score(state, pod, batch)).ok
    raw = asyncio.run(pl.score(state, pod, batch))
    scores = raw.copy()
    assert asyncio.run(pl.normalize_score(state, pod, batch, scores)).ok
    return raw.tolist(), scores.tolist()


OK: tuple[Code, tuple[str, ...]] = (Code.Success, ())


REJECTED: tuple[Code, tuple[str, ...]] = (UNRESOLVABLE, ("node(s) had untolerated taint(s)",))


# ---- Filter ------------------------------------------------------------------------------------

FILTER_CASES = [
    pytest.param([], [], OK, id="no-taints-no-tolerations"),
    pytest.param(
        [],
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        REJECTED,
        id="untolerated-noschedule",
    ),
    pytest.param(
        [{"key": "dedicated", "operator": "Equal", "value": "user1", "effect": "NoSchedule"}],
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        OK,
        id="equal-toleration-matches",
    ),
    pytest.param(
        [{"key": "dedicated", "operator": "Equal", "value": "user2", "effect": "NoSchedule"}],
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        REJECTED,
        id="equal-toleration-other-value",
    ),
    pytest.param(
        [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        [{"key": "dedicated", "value": "anything", "effect": "NoSchedule"}],
        OK,
        id="exists-toleration-any-value",
    ),
    pytest.param(
        [{"operator": "Exists"}],
        [{"key": "a", "value": "1", "effect": "NoSchedule"}, {"key": "b", "effect": "NoExecute"}],
        OK,
        id="exists-without-key-tolerates-all",
    ),
    pytest.param(
        [{"key": "dedicated", "value": "user1"}],
        [{"key": "dedicated", "value": "user1", "effect": "NoExecute"}],
        OK,
        id="empty-effect-tolerates-every-effect",
    ),
    pytest.param(
        [{"key": "dedicated", "value": "user1", "effect": "NoExecute"}],
        [{"key": "dedicated", "value": "user1", "effect": "NoSchedule"}],
        REJECTED,
        id="other-effect-does-not-tolerate",
    ),
    pytest.param(
        [],
        [{"key": "soft", "value": "x", "effect": "PreferNoSchedule"}],
        OK,
        id="prefer-no-schedule-ignored-by-filter",
    ),
    pytest.param(
        [],
        [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}],
        REJECTED,
        id="untolerated-noexecute-empty-value",
    ),
    pytest.param(
        [{"key": "first", "operator": "Exists"}],
        [
            {"key": "soft", "effect": "PreferNoSchedule"},
            {"key": "first", "value": "1", "effect": "NoSchedule"},
            {"key": "second", "value": "2", "effect": "NoSchedule"},
            {"key": "third", "value": "3", "effect": "NoExecute"},
        ],
        REJECTED,
        id="a-later-untolerated-taint-rejects",
    ),
]


@pytest.mark.parametrize(("tolerations", "taints", "want"), FILTER_CASES)
def test_filter(tolerations: list[dict[str, Any]], taints: list[dict[str, str]], want: Any) -> None:
    snap = snapshot(make_node("n1", taints))
    assert run_filter(make_pod(tolerations), snap) == [want]


def test_filter_batch_mixes_nodes_and_keeps_row_order() -> None:
    snap = snapshot(
        make_node("clean"),
        make_node("gpu", [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        make_node("gpu-too", [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]),
        make_node("infra", [{"key": "infra", "effect": "NoExecute"}]),
        make_node("soft", [{"key": "soft", "effect": "PreferNoSchedule"}]),
    )
    pod = make_pod([{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    assert run_filter(make_pod(), snap) == [
        OK,
        REJECTED,
        REJECTED,
        REJECTED,
        OK,
    ]
    assert run_filter(pod, snap) == [OK, OK, OK, REJECTED, OK]
    # A sub-batch in another order: answers follow the batch.
    assert run_filter(make_pod(), snap, [3, 0, 2]) == [REJECTED, OK, REJECTED]


def test_filter_reuses_answers_across_batches_of_one_cycle() -> None:
    snap = snapshot(make_node("a", [{"key": "k", "effect": "NoSchedule"}]), make_node("b"))
    pl = TaintToleration()
    state = CycleState(snapshot=snap)
    pod = make_pod()
    first = asyncio.run(pl.filter(state, pod, NodeBatch(snap, np.asarray([0], dtype=np.int64))))
    second = asyncio.run(pl.filter(state, pod, NodeBatch(snap, np.asarray([1, 0], dtype=np.int64))))
    assert first.codes.tolist() == [int(UNRESOLVABLE)]
    assert second.codes.tolist() == [0, int(UNRESOLVABLE)]
    assert second.status_at(1).reasons == ("node(s) had untolerated taint(s)",)


def test_taint_set_index_groups_identical_taint_lists() -> None:
    t1 = [{"key": "a", "effect": "NoSchedule"}]
    snap = snapshot(make_node("n1", t1), make_node("n2"), make_node("n3", t1), make_node("n4"))
    index = taint_set_index(snap.table)
    assert len(index.sets) == 2
    assert index.ids.tolist() == [0, 1, 0, 1]
    assert taint_set_index(snap.table) is index  # memoized per node table


# ---- Score / NormalizeScore --------------------------------------------------------------------

PNS = "PreferNoSchedule"

SCORE_CASES = [
    pytest.param(
        [],
        [[], [{"key": "a", "effect": PNS}], [{"key": "a", "effect": PNS}, {"key": "b", "effect": PNS}]],
        [0, 1, 2],
        [100, 50, 0],
        id="counts-untolerated-prefer-no-schedule",
    ),
    pytest.param(
        [{"key": "a", "operator": "Exists", "effect": PNS}],
        [[{"key": "a", "effect": PNS}], [{"key": "a", "effect": PNS}, {"key": "b", "effect": PNS}]],
        [0, 1],
        [100, 0],
        id="tolerated-taints-not-counted",
    ),
    pytest.param(
        [{"key": "a", "operator": "Exists", "effect": "NoSchedule"}],
        [[{"key": "a", "effect": PNS}], []],
        [1, 0],
        [0, 100],
        id="noschedule-toleration-ignored-for-scoring",
    ),
    pytest.param(
        [{"key": "a", "value": "v"}],
        [[{"key": "a", "value": "v", "effect": PNS}], [{"key": "a", "value": "w", "effect": PNS}]],
        [0, 1],
        [100, 0],
        id="empty-effect-toleration-counts",
    ),
    pytest.param(
        [],
        [[{"key": "hard", "effect": "NoSchedule"}], [{"key": "x", "effect": "NoExecute"}], []],
        [0, 0, 0],
        [100, 100, 100],
        id="only-hard-taints-all-max",
    ),
    pytest.param(
        [],
        [
            [],
            [{"key": "a", "effect": PNS}],
            [{"key": "a", "effect": PNS}, {"key": "b", "effect": PNS}, {"key": "c", "effect": PNS}],
        ],
        [0, 1, 3],
        [100, 67, 0],
        id="integer-division-truncates",
    ),
]


@pytest.mark.parametrize(("tolerations", "node_taints", "want_raw", "want"), SCORE_CASES)
def test_score(
    tolerations: list[dict[str, Any]], node_taints: list[list[dict[str, str]]], want_raw: list[int], want: list[int]
) -> None:
    snap = snapshot(*(make_node(f"n{i}", t) for i, t in enumerate(node_taints)))
    raw, normalized = run_score(make_pod(tolerations), snap)
    assert raw == want_raw
    assert normalized == want


def test_score_without_pre_score_is_an_error() -> None:
    snap = snapshot(make_node("n1"))
    with pytest.raises(RuntimeError, match='failed to read "PreScoreTaintToleration" from cycleState'):
        asyncio.run(TaintToleration().score(CycleState(snapshot=snap), make_pod(), whole(snap)))


NORMALIZE_CASES = [
    pytest.param(100, False, [], [], id="empty"),
    pytest.param(100, False, [0, 0], [0, 0], id="all-zero"),
    pytest.param(100, True, [0, 0], [100, 100], id="all-zero-reversed"),
    pytest.param(100, False, [1, 2, 3], [33, 66, 100], id="scaled"),
    pytest.param(100, True, [1, 2, 3], [67, 34, 0], id="scaled-reversed"),
    pytest.param(10, False, [5, 20, 7], [2, 10, 3], id="other-max-priority"),
]


@pytest.mark.parametrize(("max_priority", "reverse", "scores", "want"), NORMALIZE_CASES)
def test_default_normalize_score(max_priority: int, reverse: bool, scores: list[int], want: list[int]) -> None:
    arr = np.asarray(scores, dtype=np.int64)
    default_normalize_score(max_priority, reverse, arr)
    assert arr.tolist() == want


# ---- registration and queueing hints ---------------------------------------------------------


def test_extension_points() -> None:
    # PreFilter since kube-scheduler v1.37: it does nothing (see test_pre_filter_does_nothing).
    assert points_of(TaintToleration) == frozenset({"preFilter", "filter", "preScore", "score"})


def test_pre_filter_does_nothing() -> None:
    pod = make_pod(tolerations=[{"key": "k", "operator": "Exists"}])
    assert asyncio.run(TaintToleration().pre_filter(CycleState(), pod)) == (None, SUCCESS)


def test_events_to_register() -> None:
    events = [(e.event.resource, e.event.action) for e in TaintToleration().events_to_register()]
    assert events == [
        ("Node", ActionType.Add | ActionType.UpdateNodeTaint),
        ("TargetPod", ActionType.UpdatePodToleration),
    ]


HINT_CASES = [
    pytest.param(None, [], QueueingHint.Queue, id="added-node-without-taints"),
    pytest.param(None, [{"key": "k", "effect": "NoSchedule"}], QueueingHint.QueueSkip, id="added-node-untolerated"),
    pytest.param(
        [{"key": "k", "effect": "NoSchedule"}], [], QueueingHint.Queue, id="taint-removed-makes-node-tolerable"
    ),
    pytest.param([], [{"key": "k", "effect": "NoSchedule"}], QueueingHint.QueueSkip, id="taint-added"),
    pytest.param([], [{"key": "s", "effect": "PreferNoSchedule"}], QueueingHint.QueueSkip, id="was-already-tolerable"),
]


@pytest.mark.parametrize(("old_taints", "new_taints", "want"), HINT_CASES)
def test_node_change_hint(old_taints: list[dict[str, str]] | None, new_taints: list[dict[str, str]], want: Any) -> None:
    reg = TaintToleration().events_to_register()[0]
    assert reg.hint is not None
    old = None if old_taints is None else make_node("n", old_taints)
    assert reg.hint(make_pod(), old, make_node("n", new_taints)) is want


def test_target_pod_toleration_hint_always_queues() -> None:
    # A TargetPod event is the pod itself updating its tolerations (1.37 dropped the uid check).
    reg = TaintToleration().events_to_register()[1]
    assert reg.hint is not None
    old = make_pod(name="me")
    new = make_pod(name="me", tolerations=[{"key": "k", "operator": "Exists"}])
    assert reg.hint(old, old, new) is QueueingHint.Queue
