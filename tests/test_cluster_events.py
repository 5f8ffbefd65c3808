"""Cluster events as kube-scheduler 1.37 names them: the pod resources (AssignedPod, UnscheduledPod,
TargetPod, and Pod covering the three), the action bits and their wire names, and the queue moving a
rejected pod only on an event its rejecting plugin registered."""

from __future__ import annotations

import asyncio

import pytest

from framework.queue import BACKOFF, UNSCHEDULABLE, SchedulingQueue
from pluginhost.definition import action_from_text, action_text
from pluginhost.model import Pod
from pluginhost.plugin import ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint
from pluginhost.status import Code, Status

A = ActionType


@pytest.mark.parametrize(
    ("registered", "happened", "want"),
    [
        pytest.param(("Pod", A.Delete), ("AssignedPod", A.Delete), True, id="pod-covers-assigned"),
        pytest.param(("Pod", A.Add), ("UnscheduledPod", A.Add), True, id="pod-covers-unscheduled"),
        pytest.param(("Pod", A.UpdatePodLabel), ("TargetPod", A.UpdatePodLabel), True, id="pod-covers-target"),
        pytest.param(("Pod", A.Delete), ("Pod", A.Delete), True, id="pod-matches-itself"),
        pytest.param(("AssignedPod", A.Delete), ("AssignedPod", A.Delete), True, id="exact"),
        pytest.param(("AssignedPod", A.Delete), ("TargetPod", A.Delete), False, id="assigned-not-target"),
        pytest.param(("TargetPod", A.UpdatePodLabel), ("AssignedPod", A.UpdatePodLabel), False,
                     id="target-not-assigned"),
        pytest.param(("TargetPod", A.UpdatePodLabel), ("UnscheduledPod", A.UpdatePodLabel), False,
                     id="target-not-unscheduled"),
        pytest.param(("AssignedPod", A.Delete), ("Pod", A.Delete), False, id="specific-does-not-cover-pod"),
        pytest.param(("AssignedPod", A.Delete), ("Node", A.Delete), False, id="another-resource"),
        pytest.param(("*", A.All), ("TargetPod", A.UpdatePodScaleUp), True, id="wildcard"),
        pytest.param(("Pod", A.Delete), ("AssignedPod", A.Add), False, id="action-differs"),
        pytest.param(("Pod", A.Update), ("AssignedPod", A.UpdatePodScaleUp), True, id="update-covers-scale-up"),
        pytest.param(("Node", A.Update), ("Node", A.UpdateNodePreemptionPolicy), True,
                     id="update-covers-preemption-policy"),
        pytest.param(("Node", A.Update), ("Node", A.UpdateNodeDeclaredFeature), True,
                     id="update-covers-declared-feature"),
    ],
)
def test_registration_matches(registered: tuple[str, ActionType], happened: tuple[str, ActionType], want: bool) -> None:
    assert ClusterEvent(*registered).matches(ClusterEvent(*happened)) is want


def test_action_bits_keep_their_wire_values() -> None:
    """Remote hosts and the kube adapter exchange names, but the bits must not move under code that
    stored them: the 1.37 actions are appended."""
    assert [(a.name, a.value) for a in ActionType if a.value & (a.value - 1) == 0] == [
        ("Add", 1), ("Delete", 2), ("UpdateNodeAllocatable", 4), ("UpdateNodeLabel", 8), ("UpdateNodeTaint", 16),
        ("UpdateNodeCondition", 32), ("UpdateNodeAnnotation", 64), ("UpdatePodLabel", 128),
        ("UpdatePodScaleDown", 256), ("UpdatePodToleration", 512), ("UpdatePodSchedulingGatesEliminated", 1024),
        ("UpdatePodGeneratedResourceClaim", 2048), ("UpdatePodScaleUp", 4096), ("UpdateNodeDeclaredFeature", 8192),
        ("UpdateNodePreemptionPolicy", 16384),
    ]
    assert A.Update == A.All & ~(A.Add | A.Delete)


@pytest.mark.parametrize(
    ("action", "text"),
    [
        (A.UpdatePodScaleUp, "UpdatePodScaleUp"),
        (A.UpdateNodePreemptionPolicy | A.UpdateNodeDeclaredFeature,
         "UpdateNodeDeclaredFeature|UpdateNodePreemptionPolicy"),
        (A.Delete | A.UpdatePodScaleDown, "Delete|UpdatePodScaleDown"),
        (A.Update, "Update"),
        (A.All, "All"),
    ],
)
def test_action_names_round_trip(action: ActionType, text: str) -> None:
    assert action_text(action) == text
    assert action_from_text(text) == action


REJECTED = Status(Code.Unschedulable, ("rejected",))


def _events_of(plugin: str) -> list[ClusterEventWithHint]:
    own_labels = ClusterEventWithHint(ClusterEvent("TargetPod", A.UpdatePodLabel), lambda p, o, n: QueueingHint.Queue)
    return {
        "Fit": [ClusterEventWithHint(ClusterEvent("AssignedPod", A.Delete))],
        "Legacy": [ClusterEventWithHint(ClusterEvent("Pod", A.Delete))],
        "Self": [own_labels],
    }[plugin]


@pytest.mark.parametrize(
    ("rejector", "event", "want"),
    [
        pytest.param("Fit", ClusterEvent("AssignedPod", A.Delete), BACKOFF, id="assigned-registration-moves"),
        pytest.param("Legacy", ClusterEvent("AssignedPod", A.Delete), BACKOFF, id="pod-registration-moves"),
        pytest.param("Self", ClusterEvent("AssignedPod", A.UpdatePodLabel), UNSCHEDULABLE,
                     id="target-registration-ignores-assigned-pods"),
        pytest.param("Fit", ClusterEvent("UnscheduledPod", A.Delete), UNSCHEDULABLE,
                     id="assigned-registration-ignores-pending-pods"),
    ],
)
def test_queue_moves_on_registered_pod_resources(rejector: str, event: ClusterEvent, want: str) -> None:
    async def run() -> str | None:
        q = SchedulingQueue(lambda a, b: a.timestamp < b.timestamp, plugin_events=_events_of, initial_backoff=60)
        await q.add(Pod(name="p", uid="p"))
        info = await q.pop()
        assert info is not None
        assert q.requeue(info, REJECTED, {rejector}) == UNSCHEDULABLE
        q.on_event(event, Pod(name="other", uid="other", node_name="n1"), None)
        return q.where("p")

    assert asyncio.run(run()) == want
