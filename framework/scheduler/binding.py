"""The binding cycle (kube-scheduler's ``bindingCycle``): PreBindPreFlight, the wait at Permit, PreBind,
Bind and PostBind for a pod its scheduling cycle assumed on a node; on failure the pod's reservations
are undone and it is requeued.

A pod whose binding will take a while (it waits at Permit, or a PreBind plugin has work for it) gets
its node as ``nominatedNodeName`` first, so that others (another scheduler, a cluster autoscaler) see
where it is going: kube-scheduler's NominatedNodeNameForExpectation, on by default since v1.35. The
source is told before the wait at Permit, so before the binding is sent, and the binding cycle does
not wait for the write: a live cluster queues it with the other status patches, and the API server
refuses one that arrives after the binding (``framework.kube.events``), while the binding clears one
that arrived before it (ClearingNominatedNodeNameAfterBinding). Either way a bound pod is left with no
nomination. A failed binding cycle clears it only if the pod had a nomination when it was scheduled
(see :mod:`.failure`)."""

from __future__ import annotations

import dataclasses
import logging

from pluginhost.model import Pod
from pluginhost.plugin import ASSIGNED_POD, ActionType, ClusterEvent, CycleState, QueuedPodInfo
from pluginhost.status import Status

from ..runtime import Framework
from .failure import FailureHandling
from .records import BINDING

__all__ = ["BindingCycle"]

log = logging.getLogger("outrigger.scheduler")


class BindingCycle(FailureHandling):
    """A pod's binding cycle, run as its own task once its scheduling cycle has reserved a node."""

    async def _binding_cycle(
        self, fwk: Framework, state: CycleState, info: QueuedPodInfo, assumed: Pod, host: str
    ) -> None:
        pod = assumed
        in_pre_bind = self.waiting_pods.in_pre_bind
        try:
            # Which PreBind plugins have work for the pod: those answering Skip are not called at PreBind.
            status = await fwk.run_pre_bind_pre_flights(state, pod, host)
            has_pre_bind = status.ok
            if status.is_skip or status.ok:
                if status.ok or fwk.waiting_pods.get(pod.uid) is not None:
                    self._expect(pod, host)
                status = await fwk.wait_on_permit(pod)
            else:
                self._drop_waiting(pod, status)
            # Only a Permit rejection names the plugins that may requeue the pod (kube-scheduler's
            # FitError in bindingCycle); PreBind/Bind failures have no rejector and retry after backoff.
            rejectors = {status.plugin} if status.is_rejected and status.plugin else set()
            rec = self.pods.get(pod.uid)
            if rec is not None and status.ok:
                rec.phase = BINDING
            if status.ok and has_pre_bind:
                # Until PreBind is over, a preemption that picks the pod cancels it here rather than
                # deleting it (kube-scheduler 1.37's pods in PreBind).
                entry = in_pre_bind.add(pod.uid)
                status = await fwk.run_pre_bind(state, pod, host, entry)
                if status.ok and not entry.mark_prebound():
                    status = Status.failure(entry.cancelled.result())
            elif status.ok:
                status = await fwk.run_pre_bind(state, pod, host)
            if status.ok:
                status = await fwk.run_bind(state, pod, host)
            if status.ok:
                self.cache.finish_binding(pod.uid)
                self.queue.done(pod.uid)
                self.source.scheduled(pod, host)
                await fwk.run_post_bind(state, pod, host)
                self._activate_pods(state)  # the end of a successful binding cycle, as in kube-scheduler
                return
            await fwk.run_unreserve(state, pod, host)
            self.cache.forget_pod(pod.uid)
            self._fail(info, status, rejectors)
            # The pod's resources are free again: other pods waiting for room may fit now.
            self._cluster_event(ClusterEvent(ASSIGNED_POD, ActionType.Delete), pod, None, exclude=pod.uid)
        except Exception as exc:
            log.exception("binding cycle of %s failed", pod.key)
            await fwk.run_unreserve(state, pod, host)
            self.cache.forget_pod(pod.uid)
            self._fail(info, Status.failure(f"binding cycle failed: {exc}", error=exc), set())
        finally:
            in_pre_bind.remove(pod.uid)
            self._free_state(state.cycle_id)

    def _expect(self, assumed: Pod, host: str) -> None:
        """Set the pod's ``nominatedNodeName`` to the node it is being bound to (kube-scheduler's
        updatePod with ModeOverride in bindingCycle): on the pod, through the cluster source, and not
        in the nominator, which an assumed pod has left. Nothing is written if the pod, as it was
        scheduled, already names that node."""
        rec = self.pods.get(assumed.uid)
        if rec is None or assumed.nominated_node_name == host:
            return
        rec.pod = dataclasses.replace(rec.pod, nominated_node_name=host)
        self.source.nominated(rec.pod, host)

    def _drop_waiting(self, pod: Pod, status: Status) -> None:
        """A binding cycle that fails before it waits at Permit stops the pod's wait (its timers too)."""
        waiting = self.waiting_pods.get(pod.uid)
        if waiting is not None:
            waiting.reject(status.plugin, status.message())
            self.waiting_pods.remove(pod.uid)
