"""DynamicResources: kube-scheduler's dynamic resource allocation plugin, as it behaves for the pods
Outrigger schedules: pods without ResourceClaims.

kube-scheduler's default profile enables DynamicResources (its feature gate is locked on since v1.35)
right before DefaultPreemption, with score weight 2. Outrigger allocates no devices and keeps no
ResourceClaims, ResourceSlices or DeviceClasses, so this plugin models only what the upstream plugin
(``pkg/scheduler/framework/plugins/dynamicresources``, v1.35) does for a pod whose
``spec.resourceClaims`` is empty, which is visible to users in two places:

- **PostFilter** runs before preemption and answers ``Unschedulable`` with ``no new claims to
  deallocate``, so every fit error that reaches preemption reads ``... no new claims to deallocate,
  preemption: ...``;
- when an earlier PreFilter plugin rejected the pod outright (UnschedulableAndUnresolvable), this
  plugin's PreFilter never ran, its cycle state is missing and PostFilter fails with the lister's
  error, ``not found``. That error ends PostFilter before preemption, so the fit error ends in
  ``... not found`` (``0/6 nodes are available: pod affinity terms conflict. not found``).

The other points: PreEnqueue lets the pod through; PreFilter records that the pod has no claims and
answers Skip (so Filter is not called); Score gives every node 0 (it has no PreScore, so it runs and
its zeros are normalized and weighted like any other score); Reserve succeeds, Unreserve does
nothing, and PreBind's pre-flight answers Skip.

A pod that does reference ResourceClaims (possible in the embedded store; the live-cluster source
reports such pods as ones Outrigger cannot schedule before they reach a queue) is kept out of the
active queue by PreEnqueue with the message kube-scheduler gives while a claim does not exist, since
no ResourceClaim ever exists here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pluginhost.model import Pod
from pluginhost.plugin import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    NodeToStatus,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreFilterResult,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
)
from pluginhost.status import SUCCESS, Code, Status

from .helpers import IntArray, default_normalize_score
from .noderesources import PluginArgsError

__all__ = ["MSG_NO_CLAIMS", "MSG_NO_STATE", "DynamicResources", "claim_problem"]

#: PostFilter's answer for a pod without claims.
MSG_NO_CLAIMS = "no new claims to deallocate"
#: PostFilter's answer when PreFilter did not run (the cycle-state lister's error, as upstream words it).
MSG_NO_STATE = "not found"

_STATE_KEY = "DynamicResources"

#: DynamicResourcesArgs (kubescheduler.config.k8s.io/v1): accepted so a configuration written for
#: kube-scheduler loads; they tune claim allocation, which does not happen here.
_ARGS = ("filterTimeout", "bindingTimeout")


@dataclass(frozen=True, slots=True)
class _State:
    """What PreFilter learnt: the pod has no claims (the only kind of pod that gets this far)."""

    claims: int = 0

    def clone(self) -> _State:
        return self


def claim_problem(pod: Pod) -> str:
    """Why a pod's ResourceClaims cannot be found, in kube-scheduler's words ("" for a pod without any).

    A claim named directly is looked up by name (``could not find ResourceClaim "ns/name"``); a claim
    made from a template is named in the pod's status once the claim controller created it, and until
    then the pod waits (``pod "ns/name": ResourceClaim not created yet``).
    """
    spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
    claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
    if not claims:
        return ""
    status = pod.raw.get("status") if isinstance(pod.raw, dict) else None
    generated = {
        s.get("name"): s.get("resourceClaimName")
        for s in ((status or {}).get("resourceClaimStatuses") or ())
        if isinstance(s, dict)
    }
    for claim in claims:
        if not isinstance(claim, dict):
            continue
        if claim.get("resourceClaimName"):
            return f'could not find ResourceClaim "{pod.namespace}/{claim["resourceClaimName"]}"'
        if claim.get("resourceClaimTemplateName"):
            name = claim.get("name")
            if name not in generated:
                return f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'
            if generated[name]:  # generated: it would be looked up, and no claim exists here
                return f'could not find ResourceClaim "{pod.namespace}/{generated[name]}"'
            continue  # deliberately not generated: upstream ignores this entry
        return (f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{claim.get("name")}": '
                "none of the supported fields are set")
    return ""


class DynamicResources(
    PreEnqueuePlugin,
    PreFilterPlugin,
    FilterPlugin,
    PostFilterPlugin,
    ScorePlugin,
    ScoreExtensions,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
):
    """kube-scheduler's DynamicResources for pods without ResourceClaims (see the module docstring)."""

    name = "DynamicResources"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        unknown = set(args or {}) - {"apiVersion", "kind", *_ARGS}
        if unknown:
            raise PluginArgsError(f"{self.name}: unknown args field(s) {sorted(unknown)}")

    # ---- PreEnqueue ----------------------------------------------------------------------------

    async def pre_enqueue(self, pod: Pod) -> Status:
        problem = claim_problem(pod)
        if problem:
            return Status(Code.UnschedulableAndUnresolvable, (problem,), self.name)
        return SUCCESS

    # ---- PreFilter / Filter --------------------------------------------------------------------

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        state.write(_STATE_KEY, _State())
        return None, Status(Code.Skip)

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        # Only reached when PreFilter did not answer Skip, which it always does: nothing to check.
        return FilterResult.passing(len(batch))

    # ---- PostFilter ----------------------------------------------------------------------------

    async def post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        if _STATE_KEY not in state:
            return None, Status(Code.Error, (MSG_NO_STATE,), self.name)
        return None, Status(Code.Unschedulable, (MSG_NO_CLAIMS,), self.name)

    # ---- Score ---------------------------------------------------------------------------------

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        if _STATE_KEY not in state:
            raise RuntimeError(MSG_NO_STATE)
        return np.zeros(len(batch), dtype=np.int64)

    async def normalize_score(self, state: CycleState, pod: Pod, batch: NodeBatch, scores: IntArray) -> Status:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return SUCCESS

    # ---- Reserve / PreBind ---------------------------------------------------------------------

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        return None

    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return Status(Code.Skip)

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS

    # ---- EnqueueExtensions ---------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # The resources are the kinds of framework.dra.store.DRA_KINDS: the store's listener (the
        # scheduler's) reports their changes under these names.
        return [
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel | ActionType.UpdateNodeAllocatable)
            ),
            ClusterEventWithHint(ClusterEvent("ResourceClaim", ActionType.Add | ActionType.Update | ActionType.Delete)),
            ClusterEventWithHint(ClusterEvent("UnscheduledPod", ActionType.UpdatePodGeneratedResourceClaim)),
            ClusterEventWithHint(ClusterEvent("DeviceClass", ActionType.Add | ActionType.Update)),
            ClusterEventWithHint(ClusterEvent("ResourceSlice", ActionType.Add | ActionType.Update)),
        ]
