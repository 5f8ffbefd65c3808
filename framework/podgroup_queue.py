"""The scheduling queue with pod groups (kube-scheduler 1.37's ``backend/queue`` with GenericWorkload on).

A pod that names a PodGroup (``spec.schedulingGroup.podGroupName``) is not queued on its own: it joins
its group's entity, a :class:`QueuedPodGroupInfo`, which the queue orders, backs off and pops as one
unit (the scheduler then runs one PodGroup scheduling cycle for all its pods). Where a member pod is:

- **in its group's entity** (activeQ, backoffQ, or gated when a PreEnqueue plugin holds any member);
- **incomplete**: its PodGroup object has not been seen yet (kube-scheduler's ``incompletePodGroupPods``);
  it joins the group when the PodGroup arrives (:meth:`GroupSchedulingQueue.podgroup_changed`);
- **pending**: it arrived, or failed, while its group was in flight (``pendingPodGroupPods``);
  :meth:`GroupSchedulingQueue.add_attempted_group` merges those back when the cycle ends;
- **in flight**: popped with its group and not yet bound or failed.

Members are ordered by priority (highest first), attempts (most first), queue timestamp (oldest
first), then name (``PodGroupMemberPodsOrderingFunc``). A group's backoff grows as a pod's does, capped
at ``podMaxBackoff * sqrt(size)`` (``calculateBackoffDuration``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pluginhost.model import Pod
from pluginhost.plugin import QueuedPodInfo
from pluginhost.status import Code, Status

from .queue import ACTIVE, BACKOFF, GATED, IN_FLIGHT, UNSCHEDULABLE, QueueStats, SchedulingQueue

__all__ = [
    "GroupSchedulingQueue",
    "QueuedPodGroupInfo",
    "group_backoff_duration",
    "group_key",
    "member_order",
]

#: Where a member pod waits (see the module docstring).
_IN_GROUP = "group"
_PENDING = "pending"
_INCOMPLETE = "incomplete"
_FLIGHT = "flight"

GroupOf = Callable[[Pod], "tuple[str, str] | None"]
PodGroupLookup = Callable[[str, str], Any]


def group_key(namespace: str, name: str) -> str:
    """A group entity's key in the queue (kube-scheduler's ``EntityKey.String()``: ``podgroup/ns/name``)."""
    return f"podgroup/{namespace}/{name}"


def member_order(info: QueuedPodInfo) -> tuple[int, int, float, str]:
    """The sort key of kube-scheduler's ``PodGroupMemberPodsOrderingFunc``: priority descending,
    attempts descending, timestamp ascending, then pod name."""
    return (-info.pod.priority, -info.attempts, info.timestamp, info.pod.name)


def group_backoff_duration(initial: float, maximum: float, count: int, size: int) -> float:
    """An entity's backoff after ``count`` failed attempts: ``initial * 2**(count-1)``, capped at
    ``maximum``, which a group of more than one pod multiplies by ``sqrt(size)``."""
    if count <= 0:
        return 0.0
    cap = maximum * math.sqrt(size) if size > 1 else maximum
    duration = initial
    for _ in range(1, count):
        duration *= 2
        if duration > cap:
            return cap
    return min(duration, cap)


@dataclass(slots=True, eq=False)
class QueuedPodGroupInfo(QueuedPodInfo):
    """A pod group as the queue holds it: its member pods in order, and its own queueing history.

    ``pod`` is a stand-in the QueueSort plugin compares like any pod: it carries the group's key as its
    uid, the group's priority (``spec.priority``, 0 when unset) and its first member's scheduler name.
    ``attempts`` counts the group's cycles; ``unschedulable_count`` and ``consecutive_errors`` its
    rejected and failed ones, which its backoff follows."""

    namespace: str = ""
    group_name: str = ""
    podgroup: Any = None
    members: list[QueuedPodInfo] = field(default_factory=list)
    unschedulable_count: int = 0
    consecutive_errors: int = 0

    @property
    def key(self) -> str:
        return self.pod.uid

    @property
    def size(self) -> int:
        return len(self.members)

    def add_member(self, info: QueuedPodInfo) -> None:
        self.members = sorted([*(m for m in self.members if m.pod.uid != info.pod.uid), info], key=member_order)
        self._refresh_stand_in()

    def remove_member(self, uid: str) -> None:
        self.members = [m for m in self.members if m.pod.uid != uid]

    def _refresh_stand_in(self) -> None:
        priority = self.podgroup.queue_priority if self.podgroup is not None else 0
        scheduler = self.members[0].pod.scheduler_name if self.members else self.pod.scheduler_name
        if self.pod.priority != priority or self.pod.scheduler_name != scheduler:
            self.pod = Pod(name=self.group_name, namespace=self.namespace, uid=self.key, priority=priority,
                           scheduler_name=scheduler)


def _new_group(namespace: str, name: str, podgroup: Any, profile: str) -> QueuedPodGroupInfo:
    stand_in = Pod(name=name, namespace=namespace, uid=group_key(namespace, name),
                   priority=podgroup.queue_priority if podgroup is not None else 0)
    return QueuedPodGroupInfo(pod=stand_in, profile=profile, namespace=namespace, group_name=name,
                              podgroup=podgroup)


class GroupSchedulingQueue(SchedulingQueue):
    """:class:`~framework.queue.SchedulingQueue` that queues the members of pod groups as their group.

    ``group_of(pod)`` names the (namespace, PodGroup) a pod is scheduled with, None for a pod on its own
    (always None while GenericWorkload is off: the queue is then the plain one); ``podgroup(ns, name)``
    is the PodGroup object, None when it has not been seen."""

    def __init__(self, *args: Any, group_of: GroupOf, podgroup: PodGroupLookup, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._group_of = group_of
        self._lookup = podgroup
        self._groups: dict[str, QueuedPodGroupInfo] = {}  # key -> the group's entity (queued or in flight)
        self._member_infos: dict[str, QueuedPodInfo] = {}  # uid -> member info
        self._member_state: dict[str, tuple[str, str]] = {}  # uid -> (group key, where it waits)
        self._waiting: dict[str, dict[str, QueuedPodInfo]] = {}  # key -> pending/incomplete members

    # ---- members in -----------------------------------------------------------------------------

    async def add(self, pod: Pod, profile: str = "") -> str:
        if self._group_of(pod) is None:
            return await super().add(pod, profile)
        info = QueuedPodInfo(pod=pod, timestamp=self._clock(), profile=profile)
        return await self._add_member(info)

    async def _add_member(self, info: QueuedPodInfo) -> str:
        """kube-scheduler's addPodGroupMember: into the group's entity, or pending while the group is
        in flight, or incomplete while its PodGroup is unknown."""
        ref = self._group_of(info.pod)
        assert ref is not None
        namespace, name = ref
        key = group_key(namespace, name)
        uid = info.pod.uid
        self._member_infos[uid] = info
        podgroup = self._lookup(namespace, name)
        if podgroup is None:
            info.last_status = Status(
                Code.UnschedulableAndUnresolvable,
                (f'waiting for pods\'s pod group "{name}" to appear in scheduling queue',),
            )
            return self._wait(key, uid, info, _INCOMPLETE)
        group = self._groups.get(key)
        if group is not None and self._where.get(key) == IN_FLIGHT:
            return self._wait(key, uid, info, _PENDING)
        if group is None:
            # The group takes its first pod's place in the queue (newQueuedPodGroupInfoFromRootLookup).
            group = self._groups[key] = _new_group(namespace, name, podgroup, info.profile)
            group.timestamp, group.initial_attempt_timestamp = info.timestamp, info.initial_attempt_timestamp
        was = self._detach(key)
        group.podgroup = podgroup
        group.add_member(info)
        self._member_state[uid] = (key, _IN_GROUP)
        return await self._enqueue_group(group, backoff=was == BACKOFF)

    def _wait(self, key: str, uid: str, info: QueuedPodInfo, where: str) -> str:
        self._waiting.setdefault(key, {})[uid] = info
        self._member_state[uid] = (key, where)
        return self._where_of(uid)

    def _detach(self, key: str) -> str | None:
        """Take a queued group out of activeQ/backoffQ/the gated pool (to requeue it): where it was."""
        where = self._where.pop(key, None)
        if where is None:
            return None
        entry = self._entries.pop(key, None)
        if entry is not None:
            entry.valid = False
        self._unschedulable.pop(key, None)
        self._backoff_seq.pop(key, None)
        self._infos.pop(key, None)
        return where

    async def _enqueue_group(self, group: QueuedPodGroupInfo, *, backoff: bool) -> str:
        """PreEnqueue for every member (any member held holds the group), then activeQ, or backoffQ when
        ``backoff`` and the group is still backing off."""
        key = group.key
        held: Status | None = None
        for member in group.members:
            status = SUCCESS_STATUS if self._pre_enqueue is None else await self._pre_enqueue(member.pod)
            member.gated = not status.ok
            if not status.ok:
                member.last_status = status
                member.pending_plugins = {status.plugin} if status.plugin else set()
                held = held or status
        self._infos[key] = group
        group.gated = held is not None
        if held is not None:
            group.last_status = held
            group.pending_plugins = {held.plugin} if held.plugin else set()
            self._unschedulable[key] = group
            self._where[key] = GATED
            return GATED
        group.pending_plugins = set()
        if backoff and self._backoff_remaining(group) > 0:
            self._push_backoff(group)
            return BACKOFF
        self._push_active(group)
        return ACTIVE

    async def _enqueue_new(self, info: QueuedPodInfo, keep_attempts: bool = False) -> str:
        if isinstance(info, QueuedPodGroupInfo):  # a gated group tried again: PreEnqueue for its members
            self._detach(info.key)
            return await self._enqueue_group(info, backoff=keep_attempts)
        return await super()._enqueue_new(info, keep_attempts)

    async def update(self, pod: Pod) -> str | None:
        state = self._member_state.get(pod.uid)
        if state is None:
            return await super().update(pod)
        info = self._member_infos[pod.uid]
        info.pod = pod
        key, where = state
        group = self._groups.get(key)
        if where == _IN_GROUP and group is not None and self._where.get(key) == GATED:
            self._detach(key)
            return await self._enqueue_group(group, backoff=False)
        return self._where_of(pod.uid)

    async def podgroup_changed(self, namespace: str, name: str) -> None:
        """A PodGroup was added or changed: its incomplete pods join it, and a group held by PreEnqueue
        is tried again (a smaller minCount may let it through)."""
        key = group_key(namespace, name)
        podgroup = self._lookup(namespace, name)
        if podgroup is None:
            return
        waiting = self._waiting.get(key, {})
        incomplete = [i for uid, i in waiting.items() if self._member_state[uid][1] == _INCOMPLETE]
        for info in incomplete:
            del waiting[info.pod.uid]
            info.last_status = None
            await self._add_member(info)
        group = self._groups.get(key)
        if group is not None and self._where.get(key) != IN_FLIGHT:
            group.podgroup = podgroup
            group._refresh_stand_in()
            if self._where.get(key) == GATED:
                self._detach(key)
                await self._enqueue_group(group, backoff=False)

    def podgroup_deleted(self, namespace: str, name: str) -> None:
        """A PodGroup was deleted: its queued pods wait as incomplete until it comes back."""
        key = group_key(namespace, name)
        group = self._groups.get(key)
        if group is None or self._where.get(key) == IN_FLIGHT:
            return
        self._detach(key)
        del self._groups[key]
        for member in group.members:
            member.last_status = Status(
                Code.UnschedulableAndUnresolvable,
                (f'waiting for pods\'s pod group "{name}" to appear in scheduling queue',),
            )
            self._wait(key, member.pod.uid, member, _INCOMPLETE)

    # ---- popping and after a cycle --------------------------------------------------------------

    async def pop(self) -> QueuedPodInfo | None:
        info = await super().pop()
        if isinstance(info, QueuedPodGroupInfo):
            now = self._clock()
            for member in info.members:
                member.attempts += 1
                if member.initial_attempt_timestamp is None:
                    member.initial_attempt_timestamp = now
                self._member_state[member.pod.uid] = (info.key, _FLIGHT)
        return info

    def peek(self, k: int) -> list[QueuedPodInfo]:
        # Groups are not looked ahead at: a stand-in pod is no pod a plugin can answer for.
        return [i for i in super().peek(k) if not isinstance(i, QueuedPodGroupInfo)]

    def requeue(self, info: QueuedPodInfo, status: Status, rejectors: Iterable[str] = ()) -> str:
        state = self._member_state.get(info.pod.uid)
        if state is None:
            return super().requeue(info, status, rejectors)
        key, where = state
        if where != _FLIGHT:
            return self._where_of(info.pod.uid)
        info.last_status = status
        info.timestamp = self._clock()
        info.unschedulable_plugins = set(rejectors)
        if self._where.get(key) == IN_FLIGHT:
            return self._wait(key, info.pod.uid, info, _PENDING)
        return self._rejoin(key, info, status)

    def _rejoin(self, key: str, info: QueuedPodInfo, status: Status) -> str:
        """A member whose binding cycle failed after its group's cycle ended (a Permit timeout, a
        failed bind): it joins its group's queued entity, or makes a new one that backs off. PreEnqueue
        is not run again (the pod passed it when it was queued)."""
        uid = info.pod.uid
        group = self._groups.get(key)
        if group is not None:
            group.add_member(info)
            self._member_state[uid] = (key, _IN_GROUP)
            return self._where_of(uid)
        ref = self._group_of(info.pod)
        assert ref is not None
        group = self._groups[key] = _new_group(ref[0], ref[1], self._lookup(*ref), info.profile)
        group.add_member(info)
        group.timestamp = self._clock()
        if status.is_rejected:
            group.unschedulable_count = 1
        else:
            group.consecutive_errors = 1
        self._member_state[uid] = (key, _IN_GROUP)
        self._infos[key] = group
        self._push_backoff(group)
        return BACKOFF

    async def add_attempted_group(self, group: QueuedPodGroupInfo, status: Status) -> str | None:
        """kube-scheduler's AddAttemptedPodGroupIfNeeded: the group's pods that came back from its cycle
        (failed, or added meanwhile) make the group again; None when none did (the group is done).
        Success requeues them at once (keeping the group's place if some of its pods failed); a
        rejection or an error counts toward the group's backoff."""
        key = group.key
        self._leave_flight(key)
        self._where.pop(key, None)
        self._infos.pop(key, None)
        forced = key in self._force_active
        self._force_active.discard(key)
        waiting = self._waiting.get(key, {})
        back = [i for uid, i in waiting.items() if self._member_state[uid][1] == _PENDING]
        for info in back:
            del waiting[info.pod.uid]
        if not back:
            self._groups.pop(key, None)
            return None
        tried = {m.pod.uid for m in group.members}
        had_failures = any(i.pod.uid in tried for i in back)
        podgroup = self._lookup(group.namespace, group.group_name)
        if podgroup is None:
            del self._groups[key]
            for info in back:
                self._wait(key, info.pod.uid, info, _INCOMPLETE)
            return GATED
        group.podgroup = podgroup
        group.members = []
        for info in back:
            group.add_member(info)
            self._member_state[info.pod.uid] = (key, _IN_GROUP)
        preserve = False
        if status.ok:
            preserve = had_failures
            group.unschedulable_count = group.consecutive_errors = 0
        elif status.is_rejected:
            group.unschedulable_count += 1
            group.consecutive_errors = 0
        else:
            group.consecutive_errors += 1
        if not preserve:
            group.timestamp = self._clock()
        return await self._enqueue_group(group, backoff=not (status.ok or forced))

    def done(self, uid: str) -> None:
        state = self._member_state.pop(uid, None)
        if state is None:
            super().done(uid)
            return
        self._member_infos.pop(uid, None)
        self._waiting.get(state[0], {}).pop(uid, None)

    def delete(self, uid: str) -> bool:
        state = self._member_state.pop(uid, None)
        if state is None:
            return super().delete(uid)
        key, where = state
        self._member_infos.pop(uid, None)
        self._waiting.get(key, {}).pop(uid, None)
        group = self._groups.get(key)
        if where == _IN_GROUP and group is not None:
            group.remove_member(uid)
            if not group.members:
                self._detach(key)
                del self._groups[key]
        return True

    def activate(self, uids: Iterable[str]) -> list[QueuedPodInfo]:
        """Activating a member activates its whole group (kube-scheduler's Activate)."""
        keys: list[str] = []
        for uid in uids:
            state = self._member_state.get(uid)
            if state is None:
                keys.append(uid)
            elif state[1] in (_IN_GROUP, _FLIGHT, _PENDING) and state[0] not in keys:
                keys.append(state[0])
        return super().activate(keys)

    # ---- backoff --------------------------------------------------------------------------------

    def group_backoff(self, group: QueuedPodGroupInfo) -> float:
        count = group.consecutive_errors or group.unschedulable_count
        return group_backoff_duration(self.initial_backoff, self.max_backoff, count, group.size)

    def _backoff_expiry(self, info: QueuedPodInfo) -> float:
        if isinstance(info, QueuedPodGroupInfo):
            return info.timestamp + self.group_backoff(info)
        return super()._backoff_expiry(info)

    def _waits_backoff_out(self, info: QueuedPodInfo) -> bool:
        # A group always does: the events its own cycle causes (its members assumed and forgotten) are
        # not told apart from others' here, so one that cannot fit would be tried again at once, in a
        # loop, where the backoff spaces its attempts out.
        return isinstance(info, QueuedPodGroupInfo) or super()._waits_backoff_out(info)

    def _backoff_remaining(self, info: QueuedPodInfo) -> float:
        if isinstance(info, QueuedPodGroupInfo):
            if not (info.consecutive_errors or info.unschedulable_count):
                return 0.0
            return self._backoff_expiry(info) - self._clock()
        return super()._backoff_remaining(info)

    # ---- reading --------------------------------------------------------------------------------

    def _where_of(self, uid: str) -> str:
        key, where = self._member_state[uid]
        if where == _INCOMPLETE:
            return GATED
        if where == _FLIGHT:
            return IN_FLIGHT
        if where == _PENDING:
            return ACTIVE  # back in the queue as soon as its group's cycle ends
        return self._where.get(key, ACTIVE)

    def where(self, uid: str) -> str | None:
        if uid in self._member_state:
            return self._where_of(uid)
        where = super().where(uid)
        return None if uid in self._groups else where

    def info(self, uid: str) -> QueuedPodInfo | None:
        return self._member_infos.get(uid) or super().info(uid)

    def group(self, namespace: str, name: str) -> QueuedPodGroupInfo | None:
        """The queued entity of a pod group (None when none of its pods is queued)."""
        return self._groups.get(group_key(namespace, name))

    def stats(self) -> QueueStats:
        counts = {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0, IN_FLIGHT: 0}
        for uid, where in self._where.items():
            if uid not in self._groups:
                counts[where] += 1
        for uid in self._member_state:
            counts[self._where_of(uid)] += 1
        return QueueStats(counts[ACTIVE], counts[BACKOFF], counts[UNSCHEDULABLE], counts[GATED], counts[IN_FLIGHT])

    def __len__(self) -> int:
        return len(self._where) - sum(1 for k in self._groups if k in self._where) + len(self._member_state)

    def pending(self) -> list[QueuedPodInfo]:
        return [i for i in super().pending() if not isinstance(i, QueuedPodGroupInfo)] + list(
            self._member_infos.values()
        )


SUCCESS_STATUS = Status()
