"""NodeAffinity: nodeSelector and required node affinity (Filter), node-name narrowing (PreFilter),
preferred terms (Score), the plugin's ``addedAffinity`` args, and queueing hints.

Expectations follow kube-scheduler's nodeaffinity plugin (v1.33) and the component-helpers node
selector it uses: terms are ORed, requirements ANDed, an empty term matches nothing, a requirement
``labels.NewRequirement`` rejects makes its term match nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.plugins.labels import compile_label_selector, label_key_errors, label_selector_matches, parse_int64
from framework.plugins.nodeaffinity import NodeAffinity
from framework.plugins.noderesources import PluginArgsError
from framework.plugins.nodeselectors import compile_node_selector
from pluginhost import model
from pluginhost.manifest import pod_from_dict
from pluginhost.model import (
    Affinity,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
)
from pluginhost.plugin import ActionType, CycleState, NodeBatch, PreFilterResult, QueueingHint, points_of
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import Code

UNRESOLVABLE = Code.UnschedulableAndUnresolvable
ERR_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

Outcome = tuple[Code, tuple[str, ...]]
OK: Outcome = (Code.Success, ())
POD_MISS: Outcome = (UNRESOLVABLE, (ERR_POD,))
ENFORCED_MISS: Outcome = (UNRESOLVABLE, (ERR_ENFORCED,))


def make_node(name: str, labels: dict[str, str] | None = None) -> Node:
    # Built directly, not decoded: a few cases give labels the API server refuses ("-3", "bad key") to
    # test the plugin's own parsing, as kube-scheduler's unit tests do.
    return Node(name=name, uid=f"uid-{name}", labels=dict(labels or {}))


def make_pod(
    node_selector: dict[str, str] | None = None,
    required: list[dict[str, Any]] | None = None,
    preferred: list[dict[str, Any]] | None = None,
) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    node_affinity: dict[str, Any] = {}
    if required is not None:
        node_affinity[REQUIRED] = {"nodeSelectorTerms": required}
    if preferred is not None:
        node_affinity[PREFERRED] = preferred
    if node_affinity:
        spec["affinity"] = {"nodeAffinity": node_affinity}
    return pod_from_dict({"metadata": {"name": "p"}, "spec": spec})


def pod_with_terms(terms: list[NodeSelectorTerm] | None, node_selector: dict[str, str] | None = None) -> Pod:
    """A pod built from the model directly, for terms a manifest would refuse."""
    pod = make_pod(node_selector)
    pod.affinity = Affinity(node_affinity=model.NodeAffinity(required=terms))
    return pod


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


def snapshot(*nodes: Node) -> Snapshot:
    table = ClusterTable()
    for n in nodes:
        table.upsert_node(n)
    return table.snapshot()


def whole(snap: Snapshot) -> NodeBatch:
    return NodeBatch(snap, np.arange(len(snap), dtype=np.int64))


def run_filter(pl: NodeAffinity, pod: Pod, snap: Snapshot, *, pre_filter: bool = True) -> list[Outcome]:
    state = CycleState(snapshot=snap)
    if pre_filter:
        _, status = asyncio.run(pl.pre_filter(state, pod))
        assert status.code in (Code.Success, Code.Skip)
    res = asyncio.run(pl.filter(state, pod, whole(snap)))
    return [(res.status_at(i).code, res.status_at(i).reasons) for i in range(len(res))]


def filter_one(pod: Pod, labels: dict[str, str], name: str = "node-1") -> Outcome:
    return run_filter(NodeAffinity(), pod, snapshot(make_node(name, labels)))[0]


# ---- Filter: the pod's nodeSelector and required affinity ------------------------------------

FILTER_CASES = [
    pytest.param(make_pod(), {}, OK, id="no-constraints"),
    pytest.param(make_pod({"foo": "bar"}), {"foo": "bar", "x": "y"}, OK, id="node-selector-match"),
    pytest.param(make_pod({"foo": "bar"}), {"foo": "baz"}, POD_MISS, id="node-selector-other-value"),
    pytest.param(make_pod({"foo": "bar"}), {}, POD_MISS, id="node-selector-missing-label"),
    pytest.param(make_pod({"foo": "bar", "a": "b"}), {"foo": "bar"}, POD_MISS, id="node-selector-all-keys-needed"),
    pytest.param(make_pod(required=[{"matchExpressions": [expr("zone", "In", "a", "b")]}]), {"zone": "b"}, OK, id="in"),
    pytest.param(
        make_pod(required=[{"matchExpressions": [expr("zone", "In", "a", "b")]}]), {"zone": "c"}, POD_MISS, id="in-miss"
    ),
    pytest.param(
        make_pod(required=[{"matchExpressions": [expr("zone", "In", "a")]}]), {}, POD_MISS, id="in-label-absent"
    ),
    pytest.param(
        make_pod(required=[{"matchExpressions": [expr("zone", "NotIn", "a")]}]), {}, OK, id="notin-label-absent"
    ),
    pytest.param(
        make_pod(required=[{"matchExpressions": [expr("zone", "NotIn", "a", "b")]}]),
        {"zone": "a"},
        POD_MISS,
        id="notin-miss",
    ),
    pytest.param(make_pod(required=[{"matchExpressions": [expr("gpu", "Exists")]}]), {"gpu": ""}, OK, id="exists"),
    pytest.param(
        make_pod(required=[{"matchExpressions": [expr("gpu", "DoesNotExist")]}]),
        {"gpu": "1"},
        POD_MISS,
        id="does-not-exist-miss",
    ),
    pytest.param(make_pod(required=[{"matchExpressions": [expr("cores", "Gt", "4")]}]), {"cores": "8"}, OK, id="gt"),
    pytest.param(
        make_pod(required=[{"matchExpressions": [expr("cores", "Gt", "8")]}]), {"cores": "8"}, POD_MISS, id="gt-equal"
    ),
    pytest.param(make_pod(required=[{"matchExpressions": [expr("cores", "Lt", "10")]}]), {"cores": "-3"}, OK, id="lt"),
    pytest.param(
        make_pod(required=[{"matchExpressions": [expr("cores", "Gt", "1")]}]),
        {"cores": "many"},
        POD_MISS,
        id="gt-label-not-integer",
    ),
    pytest.param(
        make_pod(required=[{"matchExpressions": [expr("cores", "Lt", "1")]}]), {}, POD_MISS, id="lt-label-absent"
    ),
    pytest.param(
        # "-1" is not a valid label value, so labels.NewRequirement rejects the requirement.
        make_pod(required=[{"matchExpressions": [expr("cores", "Gt", "-1")]}]),
        {"cores": "5"},
        POD_MISS,
        id="gt-negative-bound-is-a-parse-error",
    ),
    pytest.param(
        make_pod(required=[{"matchExpressions": [expr("zone", "In", "a"), expr("disk", "In", "ssd")]}]),
        {"zone": "a", "disk": "hdd"},
        POD_MISS,
        id="requirements-anded",
    ),
    pytest.param(
        make_pod(
            required=[
                {"matchExpressions": [expr("zone", "In", "a")]},
                {"matchExpressions": [expr("disk", "In", "ssd")]},
            ]
        ),
        {"zone": "b", "disk": "ssd"},
        OK,
        id="terms-ored",
    ),
    pytest.param(
        make_pod({"foo": "bar"}, required=[{"matchExpressions": [expr("zone", "Exists")]}]),
        {"zone": "a"},
        POD_MISS,
        id="selector-and-affinity-both-needed",
    ),
    pytest.param(
        make_pod(required=[{"matchFields": [expr("metadata.name", "In", "node-1")]}]), {}, OK, id="match-fields-in"
    ),
    pytest.param(
        make_pod(required=[{"matchFields": [expr("metadata.name", "In", "node-2")]}]),
        {},
        POD_MISS,
        id="match-fields-in-other-node",
    ),
    pytest.param(
        make_pod(required=[{"matchFields": [expr("metadata.name", "NotIn", "node-1")]}]),
        {},
        POD_MISS,
        id="match-fields-notin",
    ),
    pytest.param(
        make_pod(
            required=[
                {
                    "matchExpressions": [expr("zone", "In", "a")],
                    "matchFields": [expr("metadata.name", "In", "node-1")],
                }
            ]
        ),
        {"zone": "b"},
        POD_MISS,
        id="fields-and-expressions-anded",
    ),
    pytest.param(
        pod_with_terms([NodeSelectorTerm()]),
        {"zone": "a"},
        POD_MISS,
        id="empty-term-matches-nothing",
    ),
    pytest.param(
        pod_with_terms([NodeSelectorTerm(), NodeSelectorTerm([NodeSelectorRequirement("zone", "Exists")])]),
        {"zone": "a"},
        OK,
        id="empty-term-ored-with-matching-term",
    ),
    pytest.param(pod_with_terms([]), {"zone": "a"}, POD_MISS, id="required-without-terms-matches-nothing"),
    pytest.param(
        pod_with_terms([NodeSelectorTerm([NodeSelectorRequirement("bad key", "Exists")])]),
        {"bad key": "x"},
        POD_MISS,
        id="invalid-key-term-never-matches",
    ),
    pytest.param(
        pod_with_terms(
            [
                NodeSelectorTerm(match_fields=[NodeSelectorRequirement("metadata.name", "In", ("node-1", "x"))]),
                NodeSelectorTerm([NodeSelectorRequirement("zone", "In", ("a",))]),
            ]
        ),
        {"zone": "a"},
        OK,
        id="parse-error-term-skipped-other-term-matches",
    ),
]


@pytest.mark.parametrize(("pod", "labels", "want"), FILTER_CASES)
def test_filter(pod: Pod, labels: dict[str, str], want: Outcome) -> None:
    assert filter_one(pod, labels) == want


def test_filter_without_pre_filter_state_computes_it() -> None:
    snap = snapshot(make_node("a", {"zone": "a"}), make_node("b", {"zone": "b"}))
    pod = make_pod(required=[{"matchExpressions": [expr("zone", "In", "b")]}])
    assert run_filter(NodeAffinity(), pod, snap, pre_filter=False) == [POD_MISS, OK]


def test_filter_batch_over_many_nodes() -> None:
    nodes = [make_node(f"n{i}", {"zone": f"z{i % 3}", "rank": str(i)}) for i in range(9)]
    snap = snapshot(*nodes)
    pod = make_pod(
        {"zone": "z1"},
        required=[
            {"matchExpressions": [expr("rank", "Gt", "3")]},
            {"matchFields": [expr("metadata.name", "In", "n1")]},
        ],
    )
    got = run_filter(NodeAffinity(), pod, snap)
    assert [o == OK for o in got] == [i % 3 == 1 and (i > 3 or i == 1) for i in range(9)]


# ---- PreFilter -------------------------------------------------------------------------------

PRE_FILTER_CASES = [
    pytest.param(make_pod(), Code.Skip, None, (), id="nothing-to-filter-skips"),
    pytest.param(make_pod(preferred=[]), Code.Skip, None, (), id="preferred-only-skips"),
    pytest.param(make_pod({"a": "b"}), Code.Success, None, (), id="node-selector"),
    pytest.param(
        make_pod(required=[{"matchExpressions": [expr("zone", "Exists")]}]), Code.Success, None, (), id="no-names"
    ),
    pytest.param(
        make_pod(
            required=[
                {"matchFields": [expr("metadata.name", "In", "n1")]},
                {"matchFields": [expr("metadata.name", "In", "n2")], "matchExpressions": [expr("zone", "Exists")]},
            ]
        ),
        Code.Success,
        frozenset({"n1", "n2"}),
        (),
        id="union-of-named-nodes",
    ),
    pytest.param(
        make_pod(
            required=[
                {"matchFields": [expr("metadata.name", "In", "n1")]},
                {"matchExpressions": [expr("zone", "Exists")]},
            ]
        ),
        Code.Success,
        None,
        (),
        id="a-term-without-names-allows-all",
    ),
    pytest.param(
        make_pod(required=[{"matchFields": [expr("metadata.name", "NotIn", "n1")]}]),
        Code.Success,
        None,
        (),
        id="notin-does-not-narrow",
    ),
    pytest.param(
        make_pod(
            required=[
                {"matchFields": [expr("metadata.name", "In", "n1"), expr("metadata.name", "In", "n1")]},
            ]
        ),
        Code.Success,
        frozenset({"n1"}),
        (),
        id="intersection-within-term",
    ),
    pytest.param(
        make_pod(
            required=[
                {"matchFields": [expr("metadata.name", "In", "n1"), expr("metadata.name", "In", "n2")]},
            ]
        ),
        UNRESOLVABLE,
        None,
        ("pod affinity terms conflict",),
        id="conflicting-names",
    ),
]


@pytest.mark.parametrize(("pod", "code", "names", "reasons"), PRE_FILTER_CASES)
def test_pre_filter(pod: Pod, code: Code, names: frozenset[str] | None, reasons: tuple[str, ...]) -> None:
    state = CycleState()
    result, status = asyncio.run(NodeAffinity().pre_filter(state, pod))
    assert status.code is code
    assert status.reasons == reasons
    assert result == (None if names is None else PreFilterResult(names))
    assert ("PreFilterNodeAffinity" in state) == (code is not Code.Skip)


def test_pre_filter_does_not_skip_with_added_affinity() -> None:
    pl = NodeAffinity(
        {"addedAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [expr("a", "Exists")]}]}}}
    )
    result, status = asyncio.run(pl.pre_filter(CycleState(), make_pod()))
    assert (result, status.code) == (None, Code.Success)


# ---- addedAffinity ---------------------------------------------------------------------------


def test_added_required_affinity_is_checked_first() -> None:
    pl = NodeAffinity(
        {"addedAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [expr("pool", "In", "batch")]}]}}}
    )
    snap = snapshot(
        make_node("both", {"pool": "batch", "zone": "a"}),
        make_node("added-only", {"pool": "batch", "zone": "b"}),
        make_node("pod-only", {"pool": "web", "zone": "a"}),
        make_node("neither", {"zone": "b"}),
    )
    pod = make_pod({"zone": "a"})
    assert run_filter(pl, pod, snap) == [OK, POD_MISS, ENFORCED_MISS, ENFORCED_MISS]
    assert run_filter(pl, make_pod(), snap) == [OK, OK, ENFORCED_MISS, ENFORCED_MISS]


def test_added_required_affinity_without_terms_rejects_every_node() -> None:
    pl = NodeAffinity({"addedAffinity": {REQUIRED: {"nodeSelectorTerms": []}}})
    assert run_filter(pl, make_pod(), snapshot(make_node("n1"))) == [ENFORCED_MISS]


def test_added_preferred_affinity_adds_to_the_score() -> None:
    pl = NodeAffinity(
        {
            "kind": "NodeAffinityArgs",
            "addedAffinity": {PREFERRED: [{"weight": 5, "preference": {"matchExpressions": [expr("pool", "Exists")]}}]},
        }
    )
    snap = snapshot(make_node("a", {"pool": "x", "zone": "a"}), make_node("b", {"zone": "a"}), make_node("c"))
    pod = make_pod(preferred=[{"weight": 10, "preference": {"matchExpressions": [expr("zone", "In", "a")]}}])
    assert run_score(pl, pod, snap) == ([15, 10, 0], [100, 66, 0])
    # The added terms alone keep PreScore from skipping.
    assert run_score(pl, make_pod(), snap) == ([5, 0, 0], [100, 0, 0])


def test_added_preferred_terms_with_zero_weight_still_prevent_skip() -> None:
    pl = NodeAffinity({"addedAffinity": {PREFERRED: [{"weight": 0, "preference": {"matchExpressions": []}}]}})
    snap = snapshot(make_node("a"))
    assert run_score(pl, make_pod(), snap) == ([0], [0])


BAD_ARGS = [
    pytest.param({"addedAffinity": []}, "addedAffinity: must be a mapping", id="not-a-mapping"),
    pytest.param({"addedAfinity": {}}, 'args: unknown field "addedAfinity"', id="unknown-field"),
    pytest.param(
        {"addedAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [expr("a", "Has")]}]}}},
        'matchExpressions[0].operator: Unsupported value: "Has"',
        id="bad-operator",
    ),
    pytest.param(
        {"addedAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [expr("a", "Gt", "ten")]}]}}},
        "the value must be an integer",
        id="gt-not-integer",
    ),
    pytest.param(
        {"addedAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [expr("a", "In")]}]}}},
        "values set can't be empty",
        id="in-without-values",
    ),
    pytest.param(
        {
            "addedAffinity": {
                REQUIRED: {"nodeSelectorTerms": [{"matchFields": [expr("metadata.name", "In", "a", "b")]}]}
            }
        },
        "must have one element",
        id="match-fields-two-values",
    ),
    pytest.param(
        {"addedAffinity": {PREFERRED: [{"weight": "5", "preference": {}}]}},
        "weight: must be a 32-bit integer",
        id="weight-not-integer",
    ),
    pytest.param(
        {"addedAffinity": {PREFERRED: [{"weight": 1, "preference": {"matchExpressions": [expr("a/b/c", "Exists")]}}]}},
        "a qualified name must consist of",
        id="invalid-key",
    ),
    pytest.param(
        {"addedAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [{"key": 1, "operator": "In"}]}]}}},
        "key: must be a string",
        id="key-not-string",
    ),
]


@pytest.mark.parametrize(("args", "message"), BAD_ARGS)
def test_bad_args(args: dict[str, Any], message: str) -> None:
    with pytest.raises(PluginArgsError) as err:
        NodeAffinity(args)
    assert message in str(err.value)
    assert str(err.value).startswith("NodeAffinity: ")


# ---- PreScore / Score / NormalizeScore -------------------------------------------------------


def run_score(pl: NodeAffinity, pod: Pod, snap: Snapshot) -> tuple[list[int], list[int]] | None:
    state = CycleState(snapshot=snap)
    batch = whole(snap)
    status = asyncio.run(pl.pre_score(state, pod, batch))
    if status.is_skip:
        return None
    assert status.ok, status
    raw = asyncio.run(pl.score(state, pod, batch))
    scores = raw.copy()
    assert asyncio.run(pl.normalize_score(state, pod, batch, scores)).ok
    return raw.tolist(), scores.tolist()


SCORE_NODES = [
    {"foo": "bar"},
    {"foo": "bar", "gpu": "1"},
    {"foo": "bar", "gpu": "1", "zone": "a"},
    {},
]

SCORE_CASES = [
    pytest.param(make_pod(), None, id="no-preferred-terms-skips"),
    pytest.param(make_pod({"foo": "bar"}), None, id="required-only-skips"),
    pytest.param(
        make_pod(
            preferred=[
                {"weight": 2, "preference": {"matchExpressions": [expr("foo", "In", "bar")]}},
                {"weight": 4, "preference": {"matchExpressions": [expr("gpu", "Exists")]}},
                {"weight": 8, "preference": {"matchExpressions": [expr("zone", "In", "a")]}},
            ]
        ),
        ([2, 6, 14, 0], [14, 42, 100, 0]),
        id="sum-of-matching-weights",
    ),
    pytest.param(
        make_pod(preferred=[{"weight": 3, "preference": {"matchExpressions": [expr("zone", "In", "b")]}}]),
        ([0, 0, 0, 0], [0, 0, 0, 0]),
        id="nothing-matches",
    ),
    pytest.param(
        make_pod(
            preferred=[
                {"weight": 7, "preference": {"matchExpressions": [expr("foo", "In", "bar"), expr("gpu", "Exists")]}},
                {"weight": 1, "preference": {"matchFields": [expr("metadata.name", "In", "n3")]}},
            ]
        ),
        ([0, 7, 7, 1], [0, 100, 100, 14]),
        id="anded-requirements-and-match-fields",
    ),
]


@pytest.mark.parametrize(("pod", "want"), SCORE_CASES)
def test_score(pod: Pod, want: tuple[list[int], list[int]] | None) -> None:
    snap = snapshot(*(make_node(f"n{i}", labels) for i, labels in enumerate(SCORE_NODES)))
    assert run_score(NodeAffinity(), pod, snap) == want


def test_pre_score_reports_unparsable_preferred_terms() -> None:
    pod = make_pod(preferred=[{"weight": 1, "preference": {"matchExpressions": [expr("bad key", "Exists")]}}])
    status = asyncio.run(NodeAffinity().pre_score(CycleState(), pod, whole(snapshot(make_node("n")))))
    assert status.code is Code.Error
    assert status.reasons[0].startswith('[0].matchExpressions[0].key: Invalid value: "bad key"')


def test_score_without_pre_score_falls_back() -> None:
    snap = snapshot(make_node("a", {"x": "1"}), make_node("b"))
    pod = make_pod(preferred=[{"weight": 9, "preference": {"matchExpressions": [expr("x", "Exists")]}}])
    raw = asyncio.run(NodeAffinity().score(CycleState(snapshot=snap), pod, whole(snap)))
    assert raw.tolist() == [9, 0]


# ---- registration and queueing hints ---------------------------------------------------------


def test_extension_points() -> None:
    assert points_of(NodeAffinity) == frozenset({"preFilter", "filter", "preScore", "score"})


def test_events_to_register() -> None:
    regs = NodeAffinity().events_to_register()
    assert [(r.event.resource, r.event.action) for r in regs] == [("Node", ActionType.Add | ActionType.UpdateNodeLabel)]


HINT_POD = make_pod({"zone": "a"})

HINT_CASES = [
    pytest.param({}, None, {"zone": "a"}, QueueingHint.Queue, id="matching-node-added"),
    pytest.param({}, None, {"zone": "b"}, QueueingHint.QueueSkip, id="non-matching-node-added"),
    pytest.param({}, {"zone": "b"}, {"zone": "a"}, QueueingHint.Queue, id="node-now-matches"),
    pytest.param({}, {"zone": "a"}, {"zone": "a", "x": "y"}, QueueingHint.QueueSkip, id="node-already-matched"),
    pytest.param({}, {"zone": "a"}, {"zone": "b"}, QueueingHint.QueueSkip, id="node-stopped-matching"),
    pytest.param(
        {"addedAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [expr("pool", "Exists")]}]}}},
        None,
        {"zone": "a"},
        QueueingHint.QueueSkip,
        id="added-affinity-not-matched",
    ),
]


@pytest.mark.parametrize(("args", "old", "new", "want"), HINT_CASES)
def test_node_change_hint(
    args: dict[str, Any], old: dict[str, str] | None, new: dict[str, str], want: QueueingHint
) -> None:
    hint = NodeAffinity(args).events_to_register()[0].hint
    assert hint is not None
    old_node = None if old is None else make_node("n", old)
    assert hint(HINT_POD, old_node, make_node("n", new)) is want


# ---- helpers: selector semantics -------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        pytest.param("zone", True, id="plain"),
        pytest.param("topology.kubernetes.io/zone", True, id="prefixed"),
        pytest.param("a_b.c-d", True, id="punctuation-inside"),
        pytest.param("", False, id="empty"),
        pytest.param("-zone", False, id="leading-dash"),
        pytest.param("a/b/c", False, id="two-slashes"),
        pytest.param("/zone", False, id="empty-prefix"),
        pytest.param("Example.com/zone", False, id="uppercase-prefix"),
        pytest.param("x" * 64, False, id="name-too-long"),
    ],
)
def test_label_key_validation(key: str, valid: bool) -> None:
    assert (not label_key_errors(key)) is valid


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("42", 42),
        ("+7", 7),
        ("-7", -7),
        ("007", 7),
        (" 1", None),
        ("1_000", None),
        ("0x10", None),
        ("", None),
        (str(2**63 - 1), 2**63 - 1),
        (str(2**63), None),
    ],
)
def test_parse_int64(text: str, want: int | None) -> None:
    assert parse_int64(text) == want


LABEL_SELECTOR_CASES = [
    pytest.param(None, {"a": "b"}, False, id="nil-selector-matches-nothing"),
    pytest.param(LabelSelector(), {"a": "b"}, True, id="empty-selector-matches-everything"),
    pytest.param(LabelSelector({"a": "b"}), {"a": "b", "c": "d"}, True, id="match-labels"),
    pytest.param(LabelSelector({"a": "b"}), {"a": "c"}, False, id="match-labels-miss"),
    pytest.param(
        LabelSelector(match_expressions=[LabelSelectorRequirement("a", "NotIn", ("x",))]), {}, True, id="notin-absent"
    ),
    pytest.param(
        LabelSelector(match_expressions=[LabelSelectorRequirement("a", "Gt", ("1",))]),
        {"a": "5"},
        False,
        id="gt-not-a-label-selector-operator",
    ),
    pytest.param(
        LabelSelector({"a": "b"}, [LabelSelectorRequirement("c", "DoesNotExist")]),
        {"a": "b", "c": "d"},
        False,
        id="labels-and-expressions-anded",
    ),
]


@pytest.mark.parametrize(("selector", "labels", "want"), LABEL_SELECTOR_CASES)
def test_label_selector_matches(selector: LabelSelector | None, labels: dict[str, str], want: bool) -> None:
    assert label_selector_matches(selector, labels) is want


def test_invalid_label_selector_reports_an_error() -> None:
    sel = compile_label_selector(LabelSelector(match_expressions=[LabelSelectorRequirement("a", "Gt", ("1",))]))
    assert sel.error == '"Gt" is not a valid label selector operator'


_KEYS = st.sampled_from(["zone", "rank", "gpu"])
_VALUES = st.sampled_from(["a", "b", "1", "5", "10", "-2", "x y"])
_REQUIREMENT = st.builds(
    lambda key, op, values: NodeSelectorRequirement(
        key, op, () if op in ("Exists", "DoesNotExist") else tuple(values[:1] if op in ("Gt", "Lt") else values)
    ),
    _KEYS,
    st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
    st.lists(_VALUES, min_size=1, max_size=3),
)
_FIELD = st.builds(
    lambda op, name: NodeSelectorRequirement("metadata.name", op, (name,)),
    st.sampled_from(["In", "NotIn"]),
    st.sampled_from(["n0", "n1", "n9"]),
)
_TERM = st.builds(NodeSelectorTerm, st.lists(_REQUIREMENT, max_size=3), st.lists(_FIELD, max_size=1))
_LABELS = st.dictionaries(_KEYS, _VALUES, max_size=3)


@settings(max_examples=200, deadline=None)
@given(terms=st.lists(_TERM, max_size=3), node_labels=st.lists(_LABELS, min_size=1, max_size=6))
def test_vectorized_selector_agrees_with_per_node_matching(
    terms: list[NodeSelectorTerm], node_labels: list[dict[str, str]]
) -> None:
    nodes = [Node(name=f"n{i}", labels=labels) for i, labels in enumerate(node_labels)]
    snap = snapshot(*nodes)
    selector = compile_node_selector(terms)
    rows = np.arange(len(nodes), dtype=np.int64)[::-1].copy()
    mask = selector.mask(snap.table, rows)
    assert mask.tolist() == [selector.matches(nodes[int(r)]) for r in rows]
