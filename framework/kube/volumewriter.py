"""VolumeBinding's PreBind writes through the API server: a PersistentVolume's ``claimRef``, a claim's
``volumeName`` and annotations, and the phases (:class:`pluginhost.snapshot.VolumeWriter`, set on the
scheduler's volume store by :class:`framework.kube.source.KubeSource`).

Each write is a ``PUT`` of the object as the informer last saw it with the binder's changes, so the
resourceVersion read makes a concurrent change a 409 (:class:`VolumeStoreError`, which fails the binding
cycle; it is retried). With leader election each write is fenced by the lease, as bindings are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from pluginhost.model import PersistentVolume, PersistentVolumeClaim
from pluginhost.snapshot import VolumeStoreError

from .client import REQUEST_TIMEOUT, ApiClient, ApiError
from .convert import pv_from_api, pvc_from_api

__all__ = ["ApiVolumeWriter", "Fenced", "with_meta"]

log = logging.getLogger("outrigger.kube")


class Fenced(Protocol):
    """Who writes: a client, and ``fence`` (seconds a write sent now may take; None without leader
    election), read at each write since a standby gets it when it takes over."""

    client: ApiClient
    fence: Callable[[], float] | None


class ApiVolumeWriter:
    """VolumeBinding's PreBind writes through the API server (:class:`pluginhost.snapshot.VolumeWriter`):
    a ``PUT`` of the object as the informer last saw it with the binder's changes, so the
    resourceVersion makes a concurrent change a 409 (VolumeStoreError). Status phases go to the
    ``status`` subresources and are best effort: a role without them (the PV controller's) is logged once."""

    def __init__(self, source: Fenced) -> None:
        self.s = source
        self._status_refused = False

    def _timeout(self, what: str) -> float:
        if self.s.fence is None:
            return REQUEST_TIMEOUT
        window = self.s.fence()
        if window <= 0:
            raise VolumeStoreError(f"{what} not written: this replica no longer holds the leader lease")
        return min(REQUEST_TIMEOUT, window)

    async def _put(self, path: str, resource: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        try:
            answer = await self.s.client.request("PUT", path, verb="update", resource=resource, body=body,
                                                 timeout=self._timeout(what))
        except ApiError as exc:
            if exc.code in (404, 409):
                raise VolumeStoreError(str(exc)) from None
            raise
        return answer if isinstance(answer, dict) else {}

    async def update_volume(self, pv: PersistentVolume) -> PersistentVolume:
        body = with_meta(pv.raw, "PersistentVolume", pv.resource_version, pv.annotations)
        ref = pv.claim_ref
        spec = body.setdefault("spec", {})
        if ref is None:
            spec.pop("claimRef", None)
        else:
            spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": ref.namespace, "name": ref.name,
                                "uid": ref.uid, "apiVersion": "v1"}
        answer = await self._put(f"/api/v1/persistentvolumes/{pv.name}", "persistentvolumes", body,
                                 f"persistentvolume {pv.name}")
        out: PersistentVolume = pv_from_api(answer)
        return out

    async def update_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        body = with_meta(pvc.raw, "PersistentVolumeClaim", pvc.resource_version, pvc.annotations)
        spec = body.setdefault("spec", {})
        if pvc.volume_name:
            spec["volumeName"] = pvc.volume_name
        path = f"/api/v1/namespaces/{pvc.namespace}/persistentvolumeclaims/{pvc.name}"
        answer = await self._put(path, "persistentvolumeclaims", body, f"persistentvolumeclaim {pvc.key}")
        out: PersistentVolumeClaim = pvc_from_api(answer)
        return out

    async def volume_phase(self, pv: PersistentVolume, phase: str) -> PersistentVolume:
        body = with_meta(pv.raw, "PersistentVolume", pv.resource_version, pv.annotations)
        body["status"] = {**(body.get("status") or {}), "phase": phase}
        answer = await self._status(f"/api/v1/persistentvolumes/{pv.name}/status", "persistentvolumes/status", body)
        return pv if answer is None else pv_from_api(answer)  # type: ignore[no-any-return]

    async def claim_bound(self, pvc: PersistentVolumeClaim, pv: PersistentVolume) -> PersistentVolumeClaim:
        body = with_meta(pvc.raw, "PersistentVolumeClaim", pvc.resource_version, pvc.annotations)
        status = dict(body.get("status") or {})
        status["phase"] = "Bound"
        pv_spec = pv.raw.get("spec") if isinstance(pv.raw, dict) else None
        if isinstance(pv_spec, dict):
            status["accessModes"] = pv_spec.get("accessModes") or list(pv.access_modes)
            if pv_spec.get("capacity"):
                status["capacity"] = pv_spec["capacity"]
        body["status"] = status
        path = f"/api/v1/namespaces/{pvc.namespace}/persistentvolumeclaims/{pvc.name}/status"
        answer = await self._status(path, "persistentvolumeclaims/status", body)
        return pvc if answer is None else pvc_from_api(answer)  # type: ignore[no-any-return]

    async def _status(self, path: str, resource: str, body: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return await self._put(path, resource, body, resource)
        except ApiError as exc:
            if exc.code != 403:
                raise
            if not self._status_refused:
                self._status_refused = True
                log.warning("update %s: %s; the phases are left to the cluster's PV controller", resource, exc)
            return None


def with_meta(raw: dict[str, Any], kind: str, resource_version: str, annotations: dict[str, str]
               ) -> dict[str, Any]:
    """A copy of an API object to send back: its kind (the items of a list come without), its
    resourceVersion (the one read) and annotations set."""
    body = {k: (dict(v) if isinstance(v, dict) else v) for k, v in raw.items()}
    body["apiVersion"], body["kind"] = "v1", kind
    meta = body.setdefault("metadata", {})
    meta["resourceVersion"] = resource_version
    if annotations:
        meta["annotations"] = dict(annotations)
    else:
        meta.pop("annotations", None)
    return body
