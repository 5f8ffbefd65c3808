"""NodeDeclaredFeatures (kube-scheduler v1.37, GA and in the default profile): the features a pod needs,
inferred from its spec as ``component-helpers/nodedeclaredfeatures`` v0.37.2 infers them for
scheduling; PreFilter's Skip; Filter's verdicts and message; the queueing hints; and the node's
``status.declaredFeatures`` as the API server accepts it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from framework.plugins.nodedeclaredfeatures import NodeDeclaredFeatures, required_features
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import Scheduler, explain_pod
from pluginhost.manifest import ManifestError, node_from_dict, pod_from_dict
from pluginhost.model import Node, Pod
from pluginhost.plugin import TARGET_POD, ActionType, CycleState, NodeBatch, QueueingHint, points_of
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import SUCCESS, Code

RESTART = "RestartAllContainersOnContainerExits"
USERNS = "UserNamespacesHostNetworkSupport"
BIND = "VolumeBindMountOptions"
MESSAGE = "node(s) didn't match Pod's required features"

RESTART_ALL = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]
BIND_MOUNT = [{"name": "v", "mountPath": "/v", "bindMountOptions": ["noexec"]}]


def make_pod(container: dict[str, Any] | None = None, name: str = "p", **spec: Any) -> Pod:
    body = {"containers": [{"name": "c", **(container or {})}], "volumes": [{"name": "v", "emptyDir": {}}], **spec}
    return pod_from_dict({"metadata": {"name": name, "uid": name}, "spec": body})


def make_node(name: str, features: list[str] | None = None) -> Node:
    status: dict[str, Any] = {"allocatable": {"cpu": "1", "pods": "10"}}
    if features is not None:
        status["declaredFeatures"] = features
    return node_from_dict({"metadata": {"name": name}, "status": status})


def cluster(nodes: list[Node]) -> Snapshot:
    table = ClusterTable()
    for n in nodes:
        table.upsert_node(n)
    return table.snapshot()


INFER_CASES = [
    pytest.param(make_pod(), frozenset(), id="plain-pod"),
    pytest.param(make_pod({"restartPolicyRules": RESTART_ALL}), {RESTART}, id="container-restarts-all"),
    pytest.param(
        make_pod(initContainers=[{"name": "i", "restartPolicyRules": RESTART_ALL}]), {RESTART},
        id="init-container-restarts-all",
    ),
    pytest.param(
        make_pod({"restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}]}),
        frozenset(), id="restart-rule-of-another-action",
    ),
    pytest.param(make_pod(hostNetwork=True, hostUsers=False), {USERNS}, id="host-network-in-user-namespace"),
    pytest.param(make_pod(hostNetwork=True), frozenset(), id="host-network-host-users-unset"),
    pytest.param(make_pod(hostNetwork=True, hostUsers=True), frozenset(), id="host-network-host-users"),
    pytest.param(make_pod(hostUsers=False), frozenset(), id="user-namespace-without-host-network"),
    pytest.param(make_pod({"volumeMounts": BIND_MOUNT}), {BIND}, id="bind-mount-options"),
    pytest.param(
        make_pod(ephemeralContainers=[{"name": "e", "volumeMounts": BIND_MOUNT}]), {BIND},
        id="ephemeral-container-bind-mount-options",
    ),
    pytest.param(
        make_pod({"volumeMounts": [{"name": "v", "mountPath": "/v", "bindMountOptions": []}]}), frozenset(),
        id="empty-bind-mount-options",
    ),
    pytest.param(
        make_pod({"restartPolicyRules": RESTART_ALL, "volumeMounts": BIND_MOUNT}, hostNetwork=True, hostUsers=False),
        {RESTART, USERNS, BIND}, id="all-three",
    ),
]


@pytest.mark.parametrize(("pod", "want"), INFER_CASES)
def test_required_features_inferred_as_kube_scheduler(pod: Pod, want: frozenset[str]) -> None:
    assert required_features(pod) == want


def test_extension_points() -> None:
    assert points_of(NodeDeclaredFeatures) == frozenset({"preFilter", "filter"})


def test_pre_filter_skips_a_pod_that_needs_nothing() -> None:
    state = CycleState()
    result, status = asyncio.run(NodeDeclaredFeatures().pre_filter(state, make_pod()))
    assert (result, status.code) == (None, Code.Skip)
    assert "PreFilterNodeDeclaredFeatures" not in state


def test_pre_filter_answers_each_pod_object_from_its_own_spec() -> None:
    # The features are read from a pod's spec once per pod object: the same pod again (another
    # placement of a PodGroup cycle) gets the same answer; the pod updated (a new object, same uid)
    # is read again.
    plugin = NodeDeclaredFeatures()
    needs = make_pod(hostNetwork=True, hostUsers=False)
    updated = make_pod()

    def pre_filter(pod: Pod) -> tuple[Code, Any]:
        state = CycleState()
        _, status = asyncio.run(plugin.pre_filter(state, pod))
        pre = state.get("PreFilterNodeDeclaredFeatures")
        return status.code, None if pre is None else pre.required

    assert [pre_filter(p) for p in (needs, needs, updated, needs)] == [
        (Code.Success, frozenset({USERNS})), (Code.Success, frozenset({USERNS})), (Code.Skip, None),
        (Code.Success, frozenset({USERNS}))]


# (node features, pod spec) -> the node's Filter status
NODES = [
    make_node("none"),
    make_node("empty", []),
    make_node("userns", [USERNS]),
    make_node("both", [USERNS, BIND]),
    make_node("unknown", ["SomeFutureFeature", USERNS]),
    make_node("others", [RESTART]),
]
REJECTED = (Code.UnschedulableAndUnresolvable, (MESSAGE,))
FITS = (Code.Success, ())

FILTER_CASES = [
    pytest.param(
        make_pod(hostNetwork=True, hostUsers=False),
        [REJECTED, REJECTED, FITS, FITS, FITS, REJECTED],
        id="one-feature-unknown-names-ignored",
    ),
    pytest.param(
        make_pod({"volumeMounts": BIND_MOUNT}, hostNetwork=True, hostUsers=False),
        [REJECTED, REJECTED, REJECTED, FITS, REJECTED, REJECTED],
        id="every-feature-needed",
    ),
]


@pytest.mark.parametrize(("pod", "want"), FILTER_CASES)
def test_filter_keeps_nodes_declaring_every_needed_feature(pod: Pod, want: list[tuple[Code, tuple[str, ...]]]) -> None:
    snap = cluster(NODES)
    plugin = NodeDeclaredFeatures()
    state = CycleState(snapshot=snap)
    assert asyncio.run(plugin.pre_filter(state, pod)) == (None, SUCCESS)
    batch = NodeBatch(snap, np.arange(len(NODES), dtype=np.int64))
    res = asyncio.run(plugin.filter(state, pod, batch))
    assert [(res.status_at(i).code, res.status_at(i).reasons) for i in range(len(NODES))] == want
    # Rows out of order answer in the batch's order.
    rows = np.asarray([3, 0], dtype=np.int64)
    res = asyncio.run(plugin.filter(state, pod, NodeBatch(snap, rows)))
    assert [res.status_at(i).code for i in range(2)] == [want[3][0], want[0][0]]


def test_filter_without_pre_filter_state_is_an_error() -> None:
    snap = cluster(NODES[:2])
    res = asyncio.run(
        NodeDeclaredFeatures().filter(CycleState(snapshot=snap), make_pod(), NodeBatch(snap, np.arange(2)))
    )
    status = res.status_at(0)
    assert (status.code, status.reasons) == (
        Code.Error,
        ('error reading "PreFilterNodeDeclaredFeatures" from cycle-state: not found',),
    )


def test_events_to_register() -> None:
    events = [(e.event.resource, e.event.action) for e in NodeDeclaredFeatures().events_to_register()]
    assert events == [
        ("Node", ActionType.Add | ActionType.UpdateNodeDeclaredFeature),
        (TARGET_POD, ActionType.Update),
    ]


NODE_HINTS = [
    pytest.param(None, make_node("n", [USERNS]), QueueingHint.Queue, id="node-added"),
    pytest.param(make_node("n", [USERNS]), make_node("n", [USERNS, BIND]), QueueingHint.Queue, id="feature-added"),
    pytest.param(make_node("n", [USERNS, BIND]), make_node("n", [USERNS]), QueueingHint.Queue, id="feature-removed"),
    pytest.param(make_node("n", [USERNS]), make_node("n", [USERNS]), QueueingHint.QueueSkip, id="unchanged"),
]


@pytest.mark.parametrize(("old", "new", "want"), NODE_HINTS)
def test_node_hint(old: Node | None, new: Node, want: QueueingHint) -> None:
    reg = NodeDeclaredFeatures().events_to_register()[0]
    assert reg.hint is not None
    assert reg.hint(make_pod(), old, new) is want


POD_HINTS = [
    pytest.param(make_pod(), make_pod(hostNetwork=True, hostUsers=False), QueueingHint.Queue, id="needs-more"),
    pytest.param(make_pod(hostNetwork=True, hostUsers=False), make_pod(), QueueingHint.Queue, id="needs-less"),
    pytest.param(
        make_pod(hostNetwork=True, hostUsers=False),
        make_pod(hostNetwork=True, hostUsers=False, tolerations=[{"operator": "Exists"}]),
        QueueingHint.QueueSkip,
        id="same-needs",
    ),
]


@pytest.mark.parametrize(("old", "new", "want"), POD_HINTS)
def test_target_pod_hint(old: Pod, new: Pod, want: QueueingHint) -> None:
    reg = NodeDeclaredFeatures().events_to_register()[1]
    assert reg.hint is not None
    assert reg.hint(old, old, new) is want


def test_node_declared_features_decode() -> None:
    assert make_node("n", ["Example/subFeature", USERNS, BIND]).declared_features == (
        "Example/subFeature", USERNS, BIND
    )
    assert make_node("n").declared_features == ()


NAME_RULE = (
    "must start with an UpperCamelCase segment, with subsequent segments separated by '/' (e.g., MyFeature or "
    "MyFeature/mySubFeature), and contain only alphanumeric characters and slashes"
)


@pytest.mark.parametrize(
    ("features", "message"),
    [
        pytest.param(
            ["B", "A"], 'status.declaredFeatures[1]: Invalid value: "A": list must be sorted alphabetically',
            id="unsorted",
        ),
        pytest.param(["A", "A"], 'status.declaredFeatures[1]: Duplicate value: "A"', id="duplicate"),
        pytest.param(
            ["lower"], f'status.declaredFeatures[0]: Invalid value: "lower": invalid feature name "lower": {NAME_RULE}',
            id="lower-camel-first-segment",
        ),
        pytest.param(
            ["A/"], f'status.declaredFeatures[0]: Invalid value: "A/": invalid feature name "A/": {NAME_RULE}',
            id="empty-segment",
        ),
        pytest.param(
            ["A" * 254],
            f'status.declaredFeatures[0]: Invalid value: "{"A" * 254}": invalid feature name "{"A" * 254}": '
            "must be no more than 253 characters",
            id="too-long",
        ),
        pytest.param("A", "status.declaredFeatures: expected a list, got string", id="not-a-list"),
        pytest.param([1], "status.declaredFeatures[0]: expected a string, got integer", id="not-a-string"),
    ],
)
def test_node_declared_features_refused_as_the_api_server_refuses_them(features: Any, message: str) -> None:
    with pytest.raises(ManifestError) as info:
        make_node("n", features)
    assert str(info.value) == f"Node n: {message}"


def test_default_profile_runs_it_last_at_filter() -> None:
    """With kube-scheduler v1.37's default profile: nodes without the feature get its status, nodes an
    earlier plugin rejected keep that plugin's, and the fit error counts both."""

    async def go() -> dict[str, Any]:
        registry = build_registry()
        scheduler = Scheduler(default_scheduler_config(registry), registry, seed=1)
        cordoned = node_from_dict({"metadata": {"name": "cordoned"}, "spec": {"unschedulable": True},
                                   "status": {"declaredFeatures": [USERNS]}})
        for node in (make_node("plain"), make_node("userns", [USERNS]), cordoned):
            scheduler.cache.add_node(node)
        pod = make_pod(hostNetwork=True, hostUsers=False)
        return await explain_pod(scheduler.profiles["default-scheduler"], scheduler.cache.snapshot(), pod)

    out = asyncio.run(go())
    got = {n: (v["filter"]["code"], v["filter"]["plugin"], v["filter"]["reasons"]) for n, v in out["nodes"].items()}
    assert got == {
        "plain": ("UnschedulableAndUnresolvable", "NodeDeclaredFeatures", [MESSAGE]),
        "userns": ("Success", None, []),
        "cordoned": ("UnschedulableAndUnresolvable", "NodeUnschedulable", ["node(s) were unschedulable"]),
    }
    assert out["selected"] == "userns"


def test_a_node_declaring_the_feature_later_requeues_the_pod() -> None:
    """The pod waits as unschedulable; the node's update (UpdateNodeDeclaredFeature) brings it back and it
    is bound there."""

    async def go() -> tuple[str, str, str]:
        registry = build_registry()
        scheduler = Scheduler(default_scheduler_config(registry), registry, seed=1)
        await scheduler.apply([make_node("n")])
        task = asyncio.get_running_loop().create_task(scheduler.run())
        try:
            await scheduler.apply([make_pod(hostNetwork=True, hostUsers=False)])
            seen: list[tuple[str, str]] = []
            for update in (None, make_node("n", [USERNS])):
                if update is not None:
                    await scheduler.apply([update])
                for _ in range(500):  # at most 10 s
                    rec = scheduler.get_pod("default", "p")
                    if rec is not None and rec.phase in ("Unschedulable", "Bound"):
                        break
                    await asyncio.sleep(0.02)
                assert rec is not None
                seen.append((rec.phase, rec.pod.node_name))
            return seen[0][0], seen[1][0], seen[1][1]
        finally:
            await scheduler.stop()
            task.cancel()

    assert asyncio.run(asyncio.wait_for(go(), 30)) == ("Unschedulable", "Bound", "n")
