"""A pod's ResourceClaims as DynamicResources reads them: looking them up (with kube-scheduler's
messages for a claim that is missing, being deleted or not the pod's), what a claim's status says
(reserved, ready to bind, timed out) and the status documents PreBind and PostFilter write.

Messages are those of kube-scheduler v1.37.2 (``resourceclaim.Name``, ``resourceclaim.IsForPod``, the
assume cache's ``could not find``, the plugin's ``foreachPodResourceClaim``).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from pluginhost.model import Pod

from .models import AllocationResult, DeviceResult, ResourceClaim
from .store import DraStore

__all__ = [
    "FIRST_AVAILABLE_MAX",
    "RESERVED_FOR_MAX",
    "binding_problem",
    "can_be_reserved",
    "deallocated_status",
    "has_binding_conditions",
    "pod_claims",
    "pod_reference",
    "reserved_status",
    "timed_out",
]

#: ``resourceapi.ResourceClaimReservedForMaxSize``: pods one claim can be reserved for.
RESERVED_FOR_MAX = 256
#: ``resourceapi.FirstAvailableDeviceRequestMaxSize``: subrequests of one request (Score's base).
FIRST_AVAILABLE_MAX = 8


def pod_claims(store: DraStore, pod: Pod) -> list[ResourceClaim] | str:
    """The pod's claims, in ``spec.resourceClaims`` order (a template entry the claim controller
    deliberately made no claim for is left out), or why they cannot all be found."""
    claims: list[ResourceClaim] = []
    for entry in pod.resource_claims:
        if entry.claim_name:
            name, made_for_pod = entry.claim_name, False
        elif entry.template_name:
            if entry.name not in pod.resource_claim_statuses:
                return f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'
            name, made_for_pod = pod.resource_claim_statuses[entry.name], True
            if not name:
                continue
        else:
            return (f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{entry.name}": '
                    "none of the supported fields are set")
        claim = store.claim(pod.namespace, name)
        if claim is None:
            return f'could not find ResourceClaim "{pod.namespace}/{name}"'
        if claim.deleting:
            return f'resourceclaim "{claim.name}" is being deleted'
        if made_for_pod:
            if claim.namespace != pod.namespace:
                return (f"ResourceClaim {claim.namespace}/{claim.name} is not in the same namespace as Pod "
                        f"{pod.namespace}/{pod.name}")
            if claim.owner is None or claim.owner[2] != pod.uid:
                return (f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod "
                        f"{pod.namespace}/{pod.name} (Pod is not owner)")
        claims.append(claim)
    return claims


def can_be_reserved(claim: ResourceClaim) -> bool:
    """Whether one more pod fits in the claim's ``status.reservedFor``."""
    return len(claim.reserved_for) < RESERVED_FOR_MAX


def pod_reference(pod: Pod) -> dict[str, str]:
    """The ``status.reservedFor`` entry of ``pod``."""
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


def _status(claim: ResourceClaim) -> dict[str, Any]:
    status = claim.raw.get("status") if claim.raw else None
    if isinstance(status, dict):
        return dict(status)
    out: dict[str, Any] = {}
    if claim.allocation is not None:
        out["allocation"] = claim.allocation.to_dict()
    if claim.reserved_for:
        out["reservedFor"] = [{"resource": r, "name": n, "uid": u} for r, n, u in claim.reserved_for]
    return out


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def reserved_status(claim: ResourceClaim, pod: Pod, allocation: AllocationResult | None) -> dict[str, Any]:
    """The status PreBind writes: ``allocation`` (when it allocated the claim) and the pod added to
    ``reservedFor``; an allocation gets its ``allocationTimestamp`` (binding conditions time out from it)."""
    status = _status(claim)
    if allocation is not None:
        status["allocation"] = allocation.to_dict()
    if status.get("allocation") is not None and "allocationTimestamp" not in status["allocation"]:
        status["allocation"] = {**status["allocation"], "allocationTimestamp": _now()}
    status["reservedFor"] = [*(status.get("reservedFor") or []), pod_reference(pod)]
    return status


def deallocated_status(claim: ResourceClaim) -> dict[str, Any]:
    """The claim's status with its allocation, reservations and device statuses removed (PostFilter)."""
    status = _status(claim)
    for key in ("allocation", "reservedFor", "devices"):
        status.pop(key, None)
    return status


def has_binding_conditions(claims: list[ResourceClaim]) -> bool:
    """Whether a device allocated to one of ``claims`` has binding conditions (PreBind waits for them)."""
    return any(r.binding_conditions for c in claims if c.allocation is not None for r in c.allocation.results)


def _device_conditions(claim: ResourceClaim, result: DeviceResult) -> list[dict[str, Any]] | None:
    devices = (claim.raw.get("status") or {}).get("devices") if claim.raw else None
    for d in devices or ():
        if not isinstance(d, dict):
            continue
        same = (d.get("driver"), d.get("pool"), d.get("device")) == (result.driver, result.pool, result.device)
        if same and (d.get("shareID") or "") == result.share_id:
            conditions = d.get("conditions") or []
            return [c for c in conditions if isinstance(c, dict)]
    return None


def binding_problem(claim: ResourceClaim) -> tuple[bool, str]:
    """``(ready, failure)`` for the claim's binding conditions: ready when every device's conditions are
    true and none of its failure conditions is; ``failure`` kube-scheduler's error for a failure
    condition that is true (``device binding failed: claim=...``)."""
    if claim.allocation is None:
        return False, ""
    for result in claim.allocation.results:
        if not result.binding_conditions:
            continue
        conditions = _device_conditions(claim, result)
        if conditions is None:
            return False, ""
        by_type = {c.get("type"): c for c in conditions}
        for name in result.binding_failure_conditions:
            c = by_type.get(name)
            if c is not None and c.get("status") == "True":
                reason, message = c.get("reason") or "", c.get("message") or ""
                return False, f'device binding failed: claim={claim.name}, reason={reason}, message="{message}"'
        if any((by_type.get(name) or {}).get("status") != "True" for name in result.binding_conditions):
            return False, ""
    return True, ""


def timed_out(claim: ResourceClaim, binding_timeout: float, now: float | None = None) -> bool:
    """Whether the claim's devices with binding conditions have waited longer than ``binding_timeout``
    since the allocation."""
    if claim.allocation is None or claim.allocated_at is None:
        return False
    if not any(r.binding_conditions for r in claim.allocation.results):
        return False
    return claim.allocated_at + binding_timeout < (time.time() if now is None else now)
