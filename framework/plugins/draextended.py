"""DynamicResources' part for extended resources backed by devices (DRAExtendedResource, GA in 1.37).

The pod's claim for them (:mod:`framework.dra.extended`) goes through the plugin's points beside its
own claims, as kube-scheduler's ``extendeddynamicresources.go`` has it:

- **PreFilter** (:func:`pre_filter`): a pod requesting an extended resource some DeviceClass maps gets
  an :class:`Extended` state: the claim an earlier cycle made for it, or one in memory, named
  ``<extended-resources>``, with no requests yet.
- **Filter** (:func:`filter_nodes`): per node, the resources it does not advertise are asked of its
  devices, with a request per container (nodes needing the same resources share one claim); a resource
  neither advertised nor mapped is ``cannot fit resource``; a claim left by an earlier cycle is
  ``cannot schedule extended resource claim`` on every node (PostFilter deletes it: ``deletion of
  ResourceClaim completed``). A node advertising every resource leaves the pod to NodeResourcesFit.
- **Reserve** marks the node's allocation pending under the claim's temporary uid; **Unreserve** drops
  it, and deletes the claim PreBind created, if it did.
- A pod with claims of its own takes the extended claim along on every node, with no requests on a node
  advertising every resource; PreBind creates it there too, then fails as kube-scheduler 1.37.2 does
  (``nil or empty request mappings, ...``: no mapping to write in the pod's status; :func:`record`).
- **PreBind** (:func:`bind`) creates the claim (``<pod>-extended-resources-`` plus five characters,
  annotated ``resource.kubernetes.io/extended-resource-claim: "true"``, controlled by the pod), writes its
  allocation and reservation as for any claim, and patches the pod's ``status.extendedResourceClaimStatus``
  (the claim's name and which request serves each container's resource).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pluginhost.model import Node, Pod
from pluginhost.status import SUCCESS, Code, Status

from ..dra import extended as ext
from ..dra.models import AllocationResult, ResourceClaim
from ..dra.store import FINALIZER, DraStore

if TYPE_CHECKING:
    from ..dra.allocator import Allocation, Allocator

__all__ = ["MSG_DELETED", "ClaimCreator", "Extended", "bind", "filter_nodes", "pre_filter", "unreserve"]

log = logging.getLogger("outrigger.dynamicresources")

MSG_STALE = "cannot schedule extended resource claim"
MSG_NO_FIT = "cannot fit resource"
MSG_DELETED = "deletion of ResourceClaim completed"
_UNRESOLVABLE = Code.UnschedulableAndUnresolvable
#: How long PreBind waits for the source to deliver the claim it created (kube-scheduler's
#: AssumeExtendedResourceTimeoutDefaultSeconds; past it PreBind goes on, a line logged), and how often it
#: looks: kube-scheduler every second; here a read of the store's dict, so the wait ends as soon as the
#: claim is there, never later than kube-scheduler's.
DELIVERY_TIMEOUT = 120.0
DELIVERY_POLL = 0.02


@runtime_checkable
class ClaimCreator(Protocol):
    """A claim writer that can also make and delete claims and write a pod's status (both sources')."""

    async def create_claim(self, manifest: dict[str, Any]) -> ResourceClaim: ...

    async def delete_claim(self, claim: ResourceClaim) -> None: ...

    async def patch_pod_status(self, pod: Pod, patch: dict[str, Any]) -> None: ...


@dataclass(slots=True)
class Extended:
    """The pod's extended resource claim through one cycle."""

    #: The pod's requests of extended resources (those a class maps and the others).
    requests: dict[str, int]
    #: The claim: in memory (``<extended-resources>``), or the one an earlier cycle made.
    claim: ResourceClaim
    #: Per set of resources a node must take from devices: the claim asking for them, and the mappings.
    variants: dict[tuple[str, ...], tuple[ResourceClaim, tuple[ext.RequestMapping, ...]]] = field(
        default_factory=dict)
    #: Per node Filter passed with devices to allocate: its variant's resources.
    on_node: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: Reserve's choice: the node's claim with its allocation (pending under the claim's uid).
    reserved: ResourceClaim | None = None
    mappings: tuple[ext.RequestMapping, ...] = ()
    #: The claim PreBind created (Unreserve deletes it).
    created: ResourceClaim | None = None

    @property
    def stale(self) -> bool:
        return self.claim.name != ext.SPECIAL_NAME


def pre_filter(store: DraStore, pod: Pod) -> Extended | None:
    """The pod's extended resource state, None when it requests no resource a DeviceClass maps."""
    requests = ext.backed_requests(pod, store.classes)
    if not requests:
        return None
    found = ext.find_claim(store.all_claims(), pod)
    return Extended(requests, found if found is not None else ext.in_memory_claim(pod))


def _variant(x: Extended, store: DraStore, pod: Pod, need: tuple[str, ...]) -> ResourceClaim:
    made = x.variants.get(need)
    if made is None:
        requests, mappings = ext.requests_and_mappings(pod, need, store.classes)
        made = x.variants[need] = (replace(x.claim, requests=requests), mappings)
    return made[0]


def filter_nodes(plugin: Any, s: Any, store: DraStore, pod: Pod, nodes: list[Node]) -> list[Status]:
    """Filter for a pod with an :class:`Extended` state (``s.extended``): each node's status; the
    allocations of those passing with devices to allocate end with the extended claim's."""
    x: Extended = s.extended
    allocator: Allocator = s.allocator
    statuses: list[Status | None] = [None] * len(nodes)
    groups: dict[tuple[str, ...], list[int]] = {}
    for k, node in enumerate(nodes):
        need = () if x.stale else ext.node_resources(x.requests, node, store.classes)
        if x.stale:
            statuses[k] = Status(_UNRESOLVABLE, (MSG_STALE,), plugin.name)
        elif isinstance(need, str):
            statuses[k] = Status(_UNRESOLVABLE, (MSG_NO_FIT,), plugin.name)
        else:
            groups.setdefault(need, []).append(k)
    for need, indices in groups.items():
        group = [nodes[k] for k in indices]
        if not need and not s.claims:
            answers: list[Allocation | None] = [None] * len(group)
            for k in indices:
                statuses[k] = SUCCESS  # NodeResourcesFit judges the resources the node advertises
            continue
        # With claims of its own, the pod's extended claim goes along even on a node advertising every
        # resource it asks for: with no requests, as kube-scheduler allocates it (PreBind then fails, see bind).
        claims = [*s.allocating, _variant(x, store, pod, need)]
        answers = list(allocator.allocate_each(group, claims, plugin.filter_timeout))
        for k, node, answer in zip(indices, group, answers, strict=True):
            statuses[k] = status = plugin._filter_node(s, node, answer, len(claims))
            if status.ok:
                x.on_node[node.name] = need
    return [st if st is not None else SUCCESS for st in statuses]


def reserve(store: DraStore, x: Extended, node_name: str, allocation: AllocationResult) -> None:
    """Reserve: the node's claim with its allocation, pending in the store (other pods see the devices)."""
    claim, x.mappings = x.variants[x.on_node[node_name]]
    x.reserved = replace(claim, allocation=allocation, finalizers=(*claim.finalizers, FINALIZER))
    store.signal_pending(x.reserved)


async def unreserve(store: DraStore, x: Extended) -> None:
    """Unreserve: the pending allocation dropped, the claim PreBind created deleted."""
    if x.reserved is not None:
        store.drop_pending(x.reserved.uid)
    created, x.created = x.created, None
    if created is None:
        return
    writer = store.writer
    try:
        if isinstance(writer, ClaimCreator):
            await writer.delete_claim(created)
    except Exception as exc:  # the next cycle finds it (stale) and PostFilter deletes it
        log.warning("unreserve: delete claim %s: %s", created.key, exc)
    store.restore(created.key)


async def delete_stale(store: DraStore, x: Extended) -> Status:
    """PostFilter: delete the claim an earlier cycle made (the pod is scheduled anew without it)."""
    writer = store.writer
    if not isinstance(writer, ClaimCreator):
        return Status(Code.Error, ("this cluster source cannot delete ResourceClaims",), "DynamicResources")
    try:
        await writer.delete_claim(x.claim)
    except Exception as exc:
        return Status(Code.Error, (str(exc),), "DynamicResources")
    return Status(Code.Unschedulable, (MSG_DELETED,), "DynamicResources")


async def create(store: DraStore, pod: Pod, x: Extended) -> ResourceClaim:
    """PreBind's first step: the claim created through the source (raises with the message to report)."""
    assert x.reserved is not None
    writer = store.writer
    if not isinstance(writer, ClaimCreator):
        raise RuntimeError("this cluster source cannot create ResourceClaims")
    try:
        x.created = await writer.create_claim(ext.claim_manifest(x.reserved, pod))
    except Exception as exc:
        raise RuntimeError(f"create claim for extended resources {pod.namespace}/: {exc}") from None
    return x.created


async def record(store: DraStore, pod: Pod, x: Extended, claim: ResourceClaim) -> None:
    """PreBind's last step: the pod's ``status.extendedResourceClaimStatus``. A claim without requests (the
    pod's own claims took it to a node advertising its extended resources) has no mappings to write, and
    kube-scheduler 1.37.2 fails PreBind there with this error (Unreserve deletes the claim; the pod is
    retried after backoff, again and again while that node is chosen)."""
    if not x.mappings:
        raise RuntimeError(f"nil or empty request mappings, no update of pod {pod.namespace}/{pod.name} "
                           "ExtendedResourceClaimStatus")
    writer = store.writer
    assert isinstance(writer, ClaimCreator)
    try:
        await writer.patch_pod_status(pod, ext.pod_status_patch(claim.name, x.mappings))
    except Exception as exc:
        raise RuntimeError(f"update pod {pod.namespace}/{pod.name} ExtendedResourceClaimStatus: {exc}") from None


async def wait_delivered(store: DraStore, claim: ResourceClaim) -> None:
    """Wait (up to two minutes, as kube-scheduler) until the source delivers the created claim: until then
    its devices count as taken through the pending allocation, which PreBind drops after this."""
    deadline = time.monotonic() + DELIVERY_TIMEOUT
    while time.monotonic() < deadline:
        current = store.claims.get(claim.key)
        if current is not None and current.uid == claim.uid:
            return
        await asyncio.sleep(DELIVERY_POLL)
    log.info("claim %s: not delivered by the source after %.0f s", claim.key, DELIVERY_TIMEOUT)


def bind(x: Extended | None) -> bool:
    """Whether PreBind has an extended claim to create (Reserve allocated one)."""
    return x is not None and x.reserved is not None and x.created is None
