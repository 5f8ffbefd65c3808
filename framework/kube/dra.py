"""DynamicResources on a live cluster: the ``resource.k8s.io/v1`` informers that fill the scheduler's DRA
store (``cache.dra``), and PreBind's claim status writes through the API server.

::

    informers = dra_informers(source)           # ResourceSlices, DeviceClasses, ResourceClaims, DeviceTaintRules
    source.scheduler.cache.dra.writer = ApiClaimWriter(source)

What comes in (kube-scheduler's ``NewScheduler``: the claim assume cache, the slice tracker and the class
lister, on informers of the same resources):

- every ResourceSlice, DeviceClass and ResourceClaim of the cluster, decoded once as it arrives
  (:meth:`framework.dra.store.DraStore.decode`, strictly) and put into the store, whose listeners make
  each change a cluster event named by its kind (``ResourceSlice``, ``DeviceClass``, ``ResourceClaim``),
  so the queue's hints requeue the pods DynamicResources turned away;
- DeviceTaintRules (:class:`TaintRuleInformer`) with DRADeviceTaintRules on, where the API server serves
  them in ``resource.k8s.io/v1`` (1.37); the store patches each rule's taint into the devices it selects
  (kube-scheduler's slice tracker), so a rule's change is a ``ResourceSlice`` update. An API server that
  does not serve them (1.36, 1.35) is said in one warning, and nothing is watched;
- an object that does not decode is logged once with what is wrong (``ResourceSlice gpus-a:
  spec.devices[0].attributes...``) and left out, as if it were not there; an object that stops
  decoding on an update is taken out of the store (its devices must not be handed out from a
  version the API no longer has).

ResourceClaimTemplates are not watched: kube-scheduler does not read them either; the cluster's
resourceclaim controller (kube-controller-manager) makes a template's claim and names it in the pod's
``status.resourceClaimStatuses``.

A pod that DynamicResources' PreEnqueue gated because a claim it names is not in the store yet (the
pod's watch delivered the controller's ``resourceClaimStatuses`` before the claims' watch delivered the
claim, or the pod was created before its claim) is tried again when that claim arrives
(:class:`ClaimWaiters`): kube-scheduler's queue re-runs PreEnqueue for a gated pod on its gating plugin's
events, where Outrigger's moves only the pods plugins rejected in a cycle.

What goes out (DynamicResources' PreBind and Unreserve, ``bindClaim`` in kube-scheduler):

- a claim to be allocated first gets kube-scheduler's finalizer, ``resource.kubernetes.io/delete-protection``,
  with a ``PUT`` of the claim (so an allocated claim is not deleted under a pod);
- then its ``status`` (``allocation``, ``reservedFor``, ``devices``) with a ``PUT`` of the ``status``
  subresource carrying the resourceVersion read, fenced by the leader lease as bindings are. A claim that
  changed meanwhile or is gone answers 409 or 404: :class:`~framework.dra.store.DraConflict`, which
  fails the binding cycle (the pod is retried with backoff).
- A write whose answer is lost (the connection broke, a 5xx) may have been applied, and a ``409`` may
  be the client's second copy of a first one that landed: neither is taken as written nor sent again
  blindly. The claim is read back; it is written when its status already says what was sent
  (the same devices, the same consumers), and a conflict otherwise, carrying the claim read back
  (``DraConflict.latest``): PreBind's retry starts from it, as kube-scheduler's starts from the claim
  it gets after a conflict, where the informer's copy may still be the one that conflicted (several
  pods sharing a claim add themselves to its ``reservedFor`` one after the other).
- Unreserve takes the pod out of ``reservedFor`` with a strategic-merge ``PATCH`` of the ``status``
  subresource (:func:`unreserve_patch`: the entry deleted by the pod's uid, the claim's uid as a
  precondition, no resourceVersion), as kube-scheduler does: someone else's change of the claim since it
  was read does not refuse it. A claim gone (404) needs nothing more; one replaced by a claim of
  another uid is refused (422) and left alone.
- For a pod's extended resources backed by devices (DRAExtendedResource) PreBind first creates the claim
  (a ``POST`` with ``generateName``, not sent again when its answer is lost: a second copy would be a
  second claim), and after its status, patches the pod's ``status.extendedResourceClaimStatus`` (a
  strategic-merge ``PATCH`` of ``pods/status``); Unreserve deletes such a claim, its finalizer taken off
  first with an update (read again after a conflict, five tries); one already gone is nothing to do.
"""


from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from framework import features
from framework.dra.models import API_VERSION, ResourceClaim
from framework.dra.store import FINALIZER, DraConflict, DraDecodeError, DraObject, DraStore
from framework.queue import GATED
from pluginhost.model import Pod

from .client import REQUEST_TIMEOUT, STRATEGIC_MERGE_PATCH, ApiClient, ApiError, ApiUnreachable
from .informer import Informer

if TYPE_CHECKING:
    from ..scheduler import Scheduler
    from .volumewriter import Fenced

__all__ = ["DRA_RESOURCES", "TAINT_RULES", "ApiClaimWriter", "ClaimWaiters", "TaintRuleInformer", "dra_converter",
           "dra_informers", "unreserve_patch"]

log = logging.getLogger("outrigger.kube")

#: The kinds watched, with their collection and the resource name requests and logs use.
DRA_RESOURCES = (
    ("ResourceSlice", "/apis/resource.k8s.io/v1/resourceslices", "resourceslices"),
    ("DeviceClass", "/apis/resource.k8s.io/v1/deviceclasses", "deviceclasses"),
    ("ResourceClaim", "/apis/resource.k8s.io/v1/resourceclaims", "resourceclaims"),
)
#: DeviceTaintRules: watched with DRADeviceTaintRules on, when the API server serves them in v1 (1.37).
TAINT_RULES = ("DeviceTaintRule", "/apis/resource.k8s.io/v1/devicetaintrules", "devicetaintrules")


# ---- informers ----------------------------------------------------------------------------------


def dra_converter(kind: str) -> Callable[[dict[str, Any]], DraObject | None]:
    """An informer's converter for one DRA kind: the decoded object, or None (logged) for one that does
    not decode."""

    def convert(obj: dict[str, Any]) -> DraObject | None:
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        try:
            return DraStore.decode(kind, obj)
        except DraDecodeError as exc:
            log.warning("%s; DynamicResources leaves it out until it is fixed", exc)
            return None

    return convert


class ClaimWaiters:
    """The pods PreEnqueue gated, by the claims (``namespace/name``) they name: the claims a gated pod may
    be waiting for (see the module docstring)."""

    def __init__(self) -> None:
        self._by_claim: dict[str, set[str]] = {}
        self._by_pod: dict[str, set[str]] = {}

    def note(self, scheduler: Scheduler, pod: Pod) -> None:
        """Record ``pod``'s claims if the scheduler's queue holds it gated; forget it otherwise."""
        self.forget(pod.uid)
        if not pod.resource_claims or scheduler.queue.where(pod.uid) != GATED:
            return
        keys = {f"{pod.namespace}/{name}" for rc in pod.resource_claims
                if (name := rc.claim_name or pod.resource_claim_statuses.get(rc.name, ""))}
        self._by_pod[pod.uid] = keys
        for key in keys:
            self._by_claim.setdefault(key, set()).add(pod.uid)

    def forget(self, uid: str) -> None:
        for key in self._by_pod.pop(uid, ()):
            waiting = self._by_claim.get(key)
            if waiting is not None:
                waiting.discard(uid)
                if not waiting:
                    del self._by_claim[key]

    def __len__(self) -> int:
        return len(self._by_pod)

    async def arrived(self, scheduler: Scheduler, claim: ResourceClaim) -> None:
        """``claim`` is in the store: the pods gated waiting for it go through PreEnqueue again."""
        for uid in sorted(self._by_claim.get(claim.key, ())):
            rec = scheduler.pods.get(uid)
            if rec is None or scheduler.queue.where(uid) != GATED:
                self.forget(uid)
                continue
            await scheduler.observe_pod(rec.pod, spec_changed=True)
            self.note(scheduler, rec.pod)


class Source(Protocol):
    """What the informers need of their source (:class:`framework.kube.source.KubeSource`): its client,
    its waiting pods, and its scheduler once it has one (a standby's informers only fill their stores)."""

    client: ApiClient
    claim_waiters: ClaimWaiters

    @property
    def attached(self) -> bool: ...

    @property
    def scheduler(self) -> Scheduler: ...


def _name(obj: DraObject) -> tuple[str, str]:
    return getattr(obj, "namespace", ""), obj.name


class _DraObjects:
    """One kind's informer events into the scheduler's DRA store (whose listeners tell the queue)."""

    def __init__(self, source: Source, kind: str) -> None:
        self.s = source
        self.kind = kind

    async def on_add(self, obj: DraObject | None) -> None:
        if obj is not None and self.s.attached:
            self.s.scheduler.cache.dra.put(obj)
            if isinstance(obj, ResourceClaim):
                await self.s.claim_waiters.arrived(self.s.scheduler, obj)

    async def on_update(self, old: DraObject | None, new: DraObject | None) -> None:
        if not self.s.attached:
            return
        if new is not None:
            self.s.scheduler.cache.dra.put(new)
            if isinstance(new, ResourceClaim):
                await self.s.claim_waiters.arrived(self.s.scheduler, new)
        elif old is not None:  # no longer decodes: out, as if deleted
            self.s.scheduler.cache.dra.remove(self.kind, *_name(old))

    async def on_delete(self, obj: DraObject | None) -> None:
        if obj is not None and self.s.attached:
            self.s.scheduler.cache.dra.remove(self.kind, *_name(obj))


def dra_informers(source: Source) -> list[Informer[DraObject | None]]:
    """The informers of ResourceSlices, DeviceClasses, ResourceClaims and DeviceTaintRules for ``source``
    (not started)."""
    kind, path, resource = TAINT_RULES
    return [*(Informer(source.client, path, resource, dra_converter(kind), _DraObjects(source, kind))
              for kind, path, resource in DRA_RESOURCES),
            TaintRuleInformer(source.client, path, resource, dra_converter(kind), _DraObjects(source, kind))]


class TaintRuleInformer(Informer[DraObject | None]):
    """The DeviceTaintRule informer: it lists and watches only when DRADeviceTaintRules is on and the API
    server's discovery lists ``devicetaintrules`` in ``resource.k8s.io/v1`` (1.37; 1.36 and 1.35 serve
    them only in beta and alpha versions that are off by default). Otherwise it says why in one line and
    holds nothing (synced at once, so pods need not wait for it): devices are tainted by their slices only."""

    #: Whether the API server serves the resource (None until asked, or when the gate is off).
    served: bool | None = None

    async def run(self) -> None:
        if not features.enabled("DRADeviceTaintRules"):
            self.synced.set()
            return
        self.served = await self._discover()
        if not self.served:
            log.warning("the API server does not serve %s in resource.k8s.io/v1 (Kubernetes 1.37 does; 1.36 and "
                        "1.35 only in versions off by default, which Outrigger does not read): DynamicResources "
                        "sees the taints ResourceSlices give their devices, no DeviceTaintRule's", self.resource)
            self.synced.set()
            return
        await super().run()

    async def _discover(self) -> bool:
        delay, failing = self.min_backoff, ""
        for _ in range(1_000_000):  # until answered or cancelled, as the informers retry
            try:
                doc = await self.client.request("GET", self.path.rsplit("/", 1)[0], verb="get",
                                                resource="apiresources")
                resources = doc.get("resources") if isinstance(doc, dict) else None
                return any(isinstance(r, dict) and r.get("name") == self.resource for r in resources or ())
            except ApiError as exc:
                if exc.code == 404:
                    return False  # resource.k8s.io/v1 itself is not served
                error = str(exc)
            except ApiUnreachable as exc:
                error = str(exc)
            if error != failing:
                log.warning("%s; asking again with backoff", error)
                failing = error
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.max_backoff)
        return False


# ---- writes ---------------------------------------------------------------------------------------


class ApiClaimWriter:
    """PreBind's claim status writes through the API server (:class:`framework.dra.store.ClaimWriter`);
    see the module docstring."""

    def __init__(self, source: Fenced) -> None:
        self.s = source

    def _timeout(self, what: str) -> float:
        if self.s.fence is None:
            return REQUEST_TIMEOUT
        window = self.s.fence()
        if window <= 0:
            raise DraConflict(f"{what} not written: this replica no longer holds the leader lease")
        return min(REQUEST_TIMEOUT, window)

    async def write_claim_status(self, claim: ResourceClaim, status: Mapping[str, Any]) -> ResourceClaim:
        what = f"resourceclaim {claim.key}"
        path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        body = _manifest(claim)
        if status.get("allocation") and FINALIZER not in claim.finalizers:
            # In a normal update: the status subresource ignores metadata.
            body["metadata"]["finalizers"] = [*claim.finalizers, FINALIZER]
            before = body.get("status") or {}
            body = await self._put(path, "resourceclaims", body, what,
                                   lambda got: FINALIZER in _finalizers(got) and _same_status(got, before))
        body = {**body, "status": copy.deepcopy(dict(status))}
        answer = await self._put(f"{path}/status", "resourceclaims/status", body, what,
                                 lambda got: _same_status(got, status))
        stored = DraStore.decode("ResourceClaim", answer)
        assert isinstance(stored, ResourceClaim)
        return stored

    async def unreserve(self, claim: ResourceClaim, pod_uid: str) -> ResourceClaim | None:
        """Unreserve's write: :func:`unreserve_patch` of the status subresource; None when the claim is gone
        (404). Other errors are raised: a claim replaced by one of another uid is refused ``422`` (its
        uid is immutable), and is not touched."""
        what = f"resourceclaim {claim.key}"
        path, body = unreserve_patch(claim, pod_uid)
        try:
            # Idempotent: a second copy deletes an entry already gone, which changes nothing.
            answer = await self.s.client.request("PATCH", path, verb="patch", resource="resourceclaims/status",
                                                 body=body, content_type=STRATEGIC_MERGE_PATCH, idempotent=True,
                                                 timeout=self._timeout(what))
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        answer = answer if isinstance(answer, dict) else {}
        meta = answer.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        stored = DraStore.decode("ResourceClaim", answer)
        assert isinstance(stored, ResourceClaim)
        return stored

    async def create_claim(self, manifest: Mapping[str, Any]) -> ResourceClaim:
        """Create the claim of a pod's extended resources (``metadata.generateName``: the API server names
        it). Not sent again when its answer is lost: a second copy would make a second claim."""
        ns = manifest["metadata"]["namespace"]
        answer = await self.s.client.request("POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims",
                                             verb="create", resource="resourceclaims", body=dict(manifest),
                                             timeout=self._timeout(f"resourceclaim {ns}/"))
        stored = _decoded(answer if isinstance(answer, dict) else {})
        if stored is None:
            raise DraConflict(f"resourceclaim created in {ns} does not decode")
        return stored

    async def delete_claim(self, claim: ResourceClaim) -> None:
        """Delete the claim made for a pod that is not bound: its finalizer removed first (an update, read
        again after a conflict, five tries), then the claim; one already gone is nothing to do."""
        what = f"resourceclaim {claim.key}"
        path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}"
        body = _manifest(claim)
        try:
            for attempt in range(5):
                if FINALIZER not in _finalizers(body):
                    break
                body["metadata"]["finalizers"] = [f for f in _finalizers(body) if f != FINALIZER]
                try:
                    await self.s.client.request("PUT", path, verb="update", resource="resourceclaims", body=body,
                                                timeout=self._timeout(what))
                    break
                except ApiError as exc:
                    if exc.code != 409 or attempt == 4:
                        raise
                body = await self.s.client.request("GET", path, verb="get", resource="resourceclaims",
                                                   timeout=self._timeout(what))
            await self.s.client.request("DELETE", path, verb="delete", resource="resourceclaims",
                                        timeout=self._timeout(what))
        except ApiError as exc:
            if exc.code != 404:
                raise

    async def patch_pod_status(self, pod: Pod, patch: Mapping[str, Any]) -> None:
        """A strategic-merge patch of the pod's status (its ``extendedResourceClaimStatus``): values only,
        so the same sent twice is harmless."""
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status"
        await self.s.client.request("PATCH", path, verb="patch", resource="pods/status", body=dict(patch),
                                    content_type=STRATEGIC_MERGE_PATCH, idempotent=True,
                                    timeout=self._timeout(f"pod {pod.namespace}/{pod.name}"))

    async def _put(self, path: str, resource: str, body: dict[str, Any], what: str,
                   landed: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """``PUT`` ``body`` (with the resourceVersion read); the object as stored. A conflict, a missing
        object, or a write of unknown outcome that did not land raise :class:`DraConflict`."""
        try:
            answer = await self.s.client.request("PUT", path, verb="update", resource=resource, body=body,
                                                 timeout=self._timeout(what))
        except ApiError as exc:
            if exc.code == 404:
                raise DraConflict(str(exc)) from None
            if exc.code != 409 and exc.code < 500:
                raise
            # A 409 may answer the client's second copy of a write that landed; a 5xx may follow one that did.
            return await self._outcome(path, resource, body, what, landed, str(exc))
        except ApiUnreachable as exc:
            return await self._outcome(path, resource, body, what, landed, str(exc))
        return answer if isinstance(answer, dict) else {}

    async def _outcome(self, path: str, resource: str, body: dict[str, Any], what: str,
                       landed: Callable[[dict[str, Any]], bool], why: str) -> dict[str, Any]:
        """Whether a write whose answer does not say landed: the claim read back (one GET)."""
        claim_path = path.removesuffix("/status")
        try:
            got = await self.s.client.request("GET", claim_path, verb="get", resource="resourceclaims",
                                              timeout=self._timeout(what))
        except (ApiError, ApiUnreachable) as exc:
            raise DraConflict(f"update {resource} {what.split(' ', 1)[1]}: {why}; "
                              f"reading it back failed: {exc}") from None
        meta = got.get("metadata") if isinstance(got, dict) else None
        sent = body.get("metadata") or {}
        if not isinstance(got, dict) or not isinstance(meta, dict) or meta.get("uid") != sent.get("uid"):
            raise DraConflict(why)
        if landed(got):
            log.info("%s: the write had gone through (%s)", what, why)
            return got
        raise DraConflict(why, _decoded(got))


def unreserve_patch(claim: ResourceClaim, pod_uid: str) -> tuple[str, dict[str, Any]]:
    """The path and strategic-merge patch that take the pod ``pod_uid`` out of ``claim``'s
    ``status.reservedFor`` (kube-scheduler's Unreserve): the entry deleted by its uid (reservedFor merges
    on uid), with the claim's uid as a precondition and no resourceVersion, so a change of the claim by
    anyone else meanwhile does not refuse it."""
    path = f"/apis/resource.k8s.io/v1/namespaces/{claim.namespace}/resourceclaims/{claim.name}/status"
    return path, {"metadata": {"uid": claim.uid}, "status": {"reservedFor": [{"$patch": "delete", "uid": pod_uid}]}}


def _decoded(obj: dict[str, Any]) -> ResourceClaim | None:
    """A claim read back, decoded (None if it does not decode: the retry then reads the store's)."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    try:
        claim = DraStore.decode("ResourceClaim", obj)
    except DraDecodeError:
        return None
    return claim if isinstance(claim, ResourceClaim) else None


def _manifest(claim: ResourceClaim) -> dict[str, Any]:
    """The claim as read, to send back: kind, apiVersion and the resourceVersion read."""
    body: dict[str, Any] = copy.deepcopy(claim.raw) if claim.raw else {
        "metadata": {"name": claim.name, "namespace": claim.namespace, "uid": claim.uid}, "spec": {"devices": {}}}
    body["apiVersion"], body["kind"] = API_VERSION, "ResourceClaim"
    meta: dict[str, Any] = body.setdefault("metadata", {})
    meta.pop("managedFields", None)
    meta["resourceVersion"] = claim.resource_version
    return body


def _finalizers(obj: Mapping[str, Any]) -> list[str]:
    meta = obj.get("metadata")
    found = meta.get("finalizers") if isinstance(meta, Mapping) else None
    return [str(f) for f in found] if isinstance(found, list) else []


def _devices(status: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]] | None:
    alloc = status.get("allocation")
    if not isinstance(alloc, Mapping):
        return None
    results = (alloc.get("devices") or {}).get("results") or []
    return sorted((str(r.get("request")), str(r.get("driver")), str(r.get("pool")), str(r.get("device")),
                   str(r.get("shareID") or "")) for r in results if isinstance(r, Mapping))


def _consumers(status: Mapping[str, Any]) -> list[str]:
    return sorted(str(r.get("uid")) for r in status.get("reservedFor") or () if isinstance(r, Mapping))


def _same_status(got: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether the claim ``got`` (API JSON) has the status that was sent: the same allocated devices (or
    none) and the same consumers (what a write of the scheduler's decides)."""
    have = got.get("status")
    have = have if isinstance(have, Mapping) else {}
    return _devices(have) == _devices(wanted) and _consumers(have) == _consumers(wanted)
