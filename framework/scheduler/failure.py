"""What happens when an attempt fails (kube-scheduler's ``handleSchedulingFailure``): the pod goes back
to the queue with the status that explains why, its nomination is set, cleared or left as it is, and
the failure is told (an event, the cluster source)."""

from __future__ import annotations

import dataclasses

from pluginhost.model import Pod
from pluginhost.plugin import QueuedPodInfo
from pluginhost.status import Code, Status

from ..queue import UNSCHEDULABLE
from .base import SchedulerBase
from .records import EV_ERROR, EV_NOMINATED, EV_UNSCHEDULABLE, PENDING, UNSCHEDULABLE_PHASE, PodRecord

__all__ = ["FailureHandling"]


class FailureHandling(SchedulerBase):
    """Failed attempts (kube-scheduler's handleSchedulingFailure) and the nominations they set."""

    def _fail(self, info: QueuedPodInfo, status: Status, rejectors: set[str], nominating: str | None = "") -> None:
        """Requeue a pod whose attempt failed (kube-scheduler's handleSchedulingFailure). ``nominating``
        is its nomination from now on: a node, "" to clear it (what every failure but PostFilter's
        does), or None to leave it as it is (PostFilter returned no result)."""
        pod = info.pod
        rec = self.pods.get(pod.uid)
        if rec is None or self.source.already_bound(pod):  # deleted or bound meanwhile: nothing to requeue
            self.queue.done(pod.uid)
            return
        if nominating:
            info.pod = self._nominate(rec, nominating)
            self._emit(EV_NOMINATED, "Pod", info.pod, node=nominating)
        elif nominating == "":
            # clearNominatedNode: the pod leaves the nominator, and its nominatedNodeName is cleared if
            # the pod as its cycle saw it had one (kube-scheduler's updatePod diffs against that copy).
            # So a node the binding cycle set on a pod that had none stays on it, and the pod is
            # requeued as the cluster has it (kube-scheduler requeues the informer's copy).
            self.nominated.pop(pod.uid, None)
            info.pod = self._set_nomination(rec, "") if pod.nominated_node_name else rec.pod
        where = self.queue.requeue(info, status, rejectors)
        rec.last_status = status
        rec.phase = UNSCHEDULABLE_PHASE if where == UNSCHEDULABLE else PENDING
        if status.code is Code.Error:
            self.stats.errors += 1
            self._emit(EV_ERROR, "Pod", pod, status=status, attempts=info.attempts)
        else:
            self.stats.unschedulable += 1
            self._emit(EV_UNSCHEDULABLE, "Pod", pod, status=status, attempts=info.attempts)
        self.source.failed(rec.pod, status)

    def _nominate(self, rec: PodRecord, node: str) -> Pod:
        """Record that ``rec``'s pod will go to ``node`` once its victims are gone; pods of lower
        priority nominated to the same node lose their nomination (it was their room)."""
        pod = rec.pod
        for uid, other_node in list(self.nominated.items()):
            other = self.pods.get(uid)
            if other_node == node and other is not None and other.pod.priority < pod.priority:
                self._set_nomination(other, "")
        return self._set_nomination(rec, node)

    def _set_nomination(self, rec: PodRecord, node: str) -> Pod:
        rec.pod = dataclasses.replace(rec.pod, nominated_node_name=node)
        info = self.queue.info(rec.pod.uid)
        if info is not None:
            info.pod = rec.pod
        if node:
            self.nominated[rec.pod.uid] = node
        else:
            self.nominated.pop(rec.pod.uid, None)
        self.source.nominated(rec.pod, node)
        return rec.pod
