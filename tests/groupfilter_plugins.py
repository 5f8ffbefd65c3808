"""PodGroupPostFilter plugins served by a real plugin host in tests/test_remote_groupfilter.py.

``EvictLower`` preempts for a group as simply as it can: the pods of the snapshot below the group's
priority are taken out (one ask to schedule the group again), and if the group then fits, they are the
victims and each pod is nominated where that run placed it. Its ``mode`` argument makes it answer
badly on purpose: ``foreign-victim`` names a victim that is in no snapshot, ``wrong-node`` a victim on
another node than its own, ``foreign-nominee`` nominates a pod that is not the group's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pluginhost.placement import (
    PodGroupInfo,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
)
from pluginhost.plugin import CycleState
from pluginhost.status import Code, Status
from pluginhost.view import NodeView


class EvictLower(PodGroupPostFilterPlugin):
    name = "EvictLower"
    needs_snapshot = True

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        self.mode = str((args or {}).get("mode", ""))

    async def pod_group_post_filter(self, state: CycleState, group: PodGroupInfo,
                                    schedule: PodGroupSchedulingFunc) -> tuple[PodGroupPostFilterResult | None, Status]:
        snapshot = state.snapshot
        assert snapshot is not None
        priority = max(p.priority for p in group.unscheduled_pods)
        lower = [p for pods in snapshot.pods for p in pods if p.priority < priority]
        if not lower:
            return None, Status(Code.UnschedulableAndUnresolvable, ("EvictLower: nothing of lower priority",))
        assignments, status = await schedule(NodeView(removed_pods=tuple((p.uid, p.node_name) for p in lower)))
        if not status.ok or assignments is None:
            return None, Status(Code.Unschedulable, (f"EvictLower: the group does not fit even so: "
                                                     f"{status.message()}",))
        nominated = {a.pod.key: a.node_name for a in assignments.proposed if a.node_name}
        victims = sorted(lower, key=lambda p: p.name)
        if self.mode == "foreign-victim":
            victims.append(dataclasses.replace(victims[0], uid="uid-nobody", name="nobody"))
        elif self.mode == "wrong-node":
            other = next(n for n in snapshot.names if n != victims[0].node_name)
            victims[0] = dataclasses.replace(victims[0], node_name=other)
        elif self.mode == "foreign-nominee":
            nominated["default/stranger"] = victims[0].node_name
        return PodGroupPostFilterResult(nominated, victims), Status(
            Code.Success, (f"EvictLower: preempting {len(victims)} pods",))
