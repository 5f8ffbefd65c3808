"""NodeName and NodeUnschedulable as kube-scheduler v1.37 has them: both implement PreFilter (NodeName's
narrows the nodes to ``spec.nodeName``; NodeUnschedulable's does nothing), NodeName comes before
NodeUnschedulable in the default profile, and NodeUnschedulable's queueing hints.

The end-to-end cases run the default profile over a small cluster with ``explain`` (one cycle, every
node evaluated): a node outside NodeName's PreFilter result is never filtered and takes the cycle's
``node(s) didn't satisfy plugin(s) [NodeName]`` status.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from framework.plugins.basic import NodeName, NodeUnschedulable
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import Scheduler, explain_pod
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import TARGET_POD, ActionType, CycleState, PreFilterResult, QueueingHint, points_of
from pluginhost.status import SUCCESS

NOT_NARROWED = "node(s) didn't satisfy plugin(s) [NodeName]"
CORDONED = "node(s) were unschedulable"


def make_pod(name: str = "p", **spec: Any) -> Pod:
    return pod_from_dict({"metadata": {"name": name, "uid": name}, "spec": {"containers": [{"name": "c"}], **spec}})


def make_node(name: str, unschedulable: bool = False) -> Node:
    return node_from_dict({
        "metadata": {"name": name},
        "spec": {"unschedulable": unschedulable},
        "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}},
    })


def explain(pod: Pod, nodes: list[Node]) -> dict[str, Any]:
    async def go() -> dict[str, Any]:
        registry = build_registry()
        scheduler = Scheduler(default_scheduler_config(registry), registry, seed=1)
        for n in nodes:
            scheduler.cache.add_node(n)
        return await explain_pod(scheduler.profiles["default-scheduler"], scheduler.cache.snapshot(), pod)

    return asyncio.run(go())


def test_extension_points() -> None:
    assert points_of(NodeName) == frozenset({"preFilter", "filter"})
    assert points_of(NodeUnschedulable) == frozenset({"preFilter", "filter"})


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(make_pod(), None, id="no-node-name"),
        pytest.param(make_pod(nodeName="b"), PreFilterResult(frozenset({"b"})), id="node-name"),
    ],
)
def test_node_name_pre_filter(pod: Pod, want: PreFilterResult | None) -> None:
    assert asyncio.run(NodeName().pre_filter(CycleState(), pod)) == (want, SUCCESS)


def test_node_unschedulable_pre_filter_does_nothing() -> None:
    assert asyncio.run(NodeUnschedulable().pre_filter(CycleState(), make_pod())) == (None, SUCCESS)


# (pod spec, nodes (name, cordoned), selected node, each node's (code, plugin, reasons), cycle message)
UNRESOLVABLE = "UnschedulableAndUnresolvable"
EXPLAIN_CASES = [
    pytest.param(
        {"nodeName": "b"},
        [("a", False), ("b", False), ("c", True)],
        "b",
        {
            "a": (UNRESOLVABLE, None, [NOT_NARROWED]),
            "b": ("Success", None, []),
            "c": (UNRESOLVABLE, None, [NOT_NARROWED]),
        },
        [],
        id="only-the-named-node-is-filtered",
    ),
    pytest.param(
        {"nodeName": "c"},
        [("a", False), ("b", False), ("c", True)],
        None,
        {
            "a": (UNRESOLVABLE, None, [NOT_NARROWED]),
            "b": (UNRESOLVABLE, None, [NOT_NARROWED]),
            "c": (UNRESOLVABLE, "NodeUnschedulable", [CORDONED]),
        },
        ["0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't satisfy plugin(s) [NodeName]."],
        id="named-node-rejected-by-a-later-plugin",
    ),
    pytest.param(
        {"nodeName": "gone"},
        [("a", False), ("b", False)],
        None,
        {"a": (UNRESOLVABLE, None, [NOT_NARROWED]), "b": (UNRESOLVABLE, None, [NOT_NARROWED])},
        [f"0/2 nodes are available: 2 {NOT_NARROWED}."],
        id="named-node-missing",
    ),
    pytest.param(
        {},
        [("a", True), ("b", False)],
        "b",
        {"a": (UNRESOLVABLE, "NodeUnschedulable", [CORDONED]), "b": ("Success", None, [])},
        [],
        id="no-node-name",
    ),
]


@pytest.mark.parametrize(("spec", "nodes", "selected", "filters", "reasons"), EXPLAIN_CASES)
def test_default_profile_narrows_to_the_named_node(
    spec: dict[str, Any],
    nodes: list[tuple[str, bool]],
    selected: str | None,
    filters: dict[str, tuple[str, str | None, list[str]]],
    reasons: list[str],
) -> None:
    out = explain(make_pod(**spec), [make_node(n, cordoned) for n, cordoned in nodes])
    assert out["selected"] == selected
    assert out["status"]["reasons"] == reasons
    got = {n: (v["filter"]["code"], v["filter"]["plugin"], v["filter"]["reasons"]) for n, v in out["nodes"].items()}
    assert got == filters


def test_node_unschedulable_events_to_register() -> None:
    events = [(e.event.resource, e.event.action) for e in NodeUnschedulable().events_to_register()]
    assert events == [
        ("Node", ActionType.Add | ActionType.UpdateNodeTaint),
        (TARGET_POD, ActionType.UpdatePodToleration),
    ]


@pytest.mark.parametrize(
    ("old", "new", "want"),
    [
        pytest.param(None, make_node("n"), QueueingHint.Queue, id="added-schedulable"),
        pytest.param(None, make_node("n", True), QueueingHint.QueueSkip, id="added-cordoned"),
        pytest.param(make_node("n", True), make_node("n"), QueueingHint.Queue, id="uncordoned"),
        pytest.param(make_node("n"), make_node("n", True), QueueingHint.QueueSkip, id="cordoned"),
        pytest.param(make_node("n"), make_node("n"), QueueingHint.QueueSkip, id="was-schedulable-already"),
    ],
)
def test_node_unschedulable_node_hint(old: Node | None, new: Node, want: QueueingHint) -> None:
    reg = NodeUnschedulable().events_to_register()[0]
    assert reg.hint is not None
    assert reg.hint(make_pod(), old, new) is want


@pytest.mark.parametrize(
    ("tolerations", "want"),
    [
        pytest.param([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}],
                     QueueingHint.Queue, id="tolerates-the-unschedulable-taint"),
        pytest.param([{"operator": "Exists"}], QueueingHint.Queue, id="tolerates-everything"),
        pytest.param([{"key": "other", "operator": "Exists"}], QueueingHint.QueueSkip, id="unrelated-toleration"),
    ],
)
def test_node_unschedulable_target_pod_toleration_hint(tolerations: list[dict[str, str]], want: QueueingHint) -> None:
    # A TargetPod event is the pod itself (1.37 dropped the uid check).
    reg = NodeUnschedulable().events_to_register()[1]
    assert reg.hint is not None
    old = make_pod()
    assert reg.hint(old, old, make_pod(tolerations=tolerations)) is want
