"""DRA in the embedded store (the cluster ``outrigger explain`` and ``make demo`` read): applying
ResourceClaims, templates, DeviceClasses, ResourceSlices and DeviceTaintRules from manifests, and the part of
kube-controller-manager's resourceclaim controller scheduling depends on.

- :func:`apply_object` adds or replaces one object, keeping its uid (and, for a claim applied again
  without a status, its status) as the API server would, and gives it a resourceVersion.
- :func:`with_template_claims` makes the claim of each of a pod's ``resourceClaimTemplateName``
  entries that has none yet, as the controller does: named ``<pod>-<entry>-`` plus five characters
  (derived from the pod's namespace, name and entry here, so that runs repeat), owned by the pod (a controller
  ownerReference), annotated ``resource.kubernetes.io/pod-claim-name: <entry>``, with the template's
  labels, annotations and spec; the pod's ``status.resourceClaimStatuses`` names it. An entry whose
  template does not exist waits (the pod reads ``ResourceClaim not created yet``) until it is applied.
- :func:`release_pod` is what the controllers do when a pod is gone: the claims made for it are
  deleted (the garbage collector), the pod leaves other claims' ``reservedFor``, and a claim reserved
  for no one any more is deallocated.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from pluginhost.manifest import ResourceObject
from pluginhost.model import Pod

from .models import ResourceClaim
from .store import DraStore

__all__ = ["ANN_POD_CLAIM_NAME", "apply_object", "claim_name_prefix", "release_pod", "with_template_claims"]

#: ``resourceapi.PodResourceClaimAnnotation``: the pod entry a generated claim was made for.
ANN_POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
# The API server's generateName suffix alphabet (k8s.io/apimachinery's rand.String: no vowels, no
# characters that read alike).
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# The controller's longest base, leaving room for the five characters in a 63-character name.
_MAX_BASE = 57


def apply_object(store: DraStore, obj: ResourceObject, dry_run: bool = False) -> str:
    """Add or replace ``obj`` in ``store``: ``created``, ``configured`` or ``unchanged``. A failed decode
    raises :class:`~framework.dra.store.DraDecodeError` and changes nothing."""
    table: dict[str, Any] = {"ResourceClaim": store.claims, "ResourceClaimTemplate": store.templates,
             "DeviceClass": store.classes, "ResourceSlice": store.raw_slices,
             "DeviceTaintRule": store.taint_rules}[obj.kind]  # type: ignore[assignment]
    old: Any = table.get(obj.key)
    raw = copy.deepcopy(obj.raw)
    meta = raw.setdefault("metadata", {})
    old_raw: dict[str, Any] = getattr(old, "raw", None) or getattr(old, "raw_spec", None) or {}
    old_uid = getattr(old, "uid", "") or (old_raw.get("metadata") or {}).get("uid", "")
    if old is not None and not (obj.raw.get("metadata") or {}).get("uid"):
        meta["uid"] = old_uid or obj.uid
    else:
        meta.setdefault("uid", obj.uid)
    if isinstance(old, ResourceClaim) and "status" not in raw and old.raw.get("status"):
        raw["status"] = copy.deepcopy(old.raw["status"])  # the status is its own subresource
    decoded = store.decode(obj.kind, raw)
    if old is not None and _same(old, decoded):
        return "unchanged"
    if not dry_run:
        meta["resourceVersion"] = str(store.next_version())
        store.put(store.decode(obj.kind, raw))
    return "created" if old is None else "configured"


def _same(old: Any, new: Any) -> bool:
    if isinstance(old, ResourceClaim) and isinstance(new, ResourceClaim):
        strip = [{k: v for k, v in (c.raw.get("metadata") or {}).items() if k != "resourceVersion"}
                 for c in (old, new)]
        return bool(strip[0] == strip[1] and old.raw.get("spec") == new.raw.get("spec")
                    and old.raw.get("status") == new.raw.get("status"))
    return bool(old == new)


def claim_name_prefix(pod_name: str, entry: str) -> str:
    """The controller's generateName for a pod's claim: ``<pod>-<entry>-``, both parts shortened in
    proportion when that is longer than 57 characters (then without the trailing hyphen, as upstream)."""
    base = f"{pod_name}-{entry}-"
    if len(base) > _MAX_BASE:
        base = f"{pod_name[:len(pod_name) * _MAX_BASE // len(base)]}-{entry[:len(entry) * _MAX_BASE // len(base)]}"
    return base


def _suffix(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def _claim_manifest(pod: Pod, entry: str, template_spec: dict[str, Any]) -> dict[str, Any]:
    template_meta = template_spec.get("metadata") or {}
    annotations = {**(template_meta.get("annotations") or {}), ANN_POD_CLAIM_NAME: entry}
    meta: dict[str, Any] = {
        "name": claim_name_prefix(pod.name, entry) + _suffix(f"{pod.namespace}/{pod.name}/{entry}"),
        "generateName": claim_name_prefix(pod.name, entry),
        "namespace": pod.namespace,
        "uid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"outrigger:resourceclaim:{pod.uid}/{entry}")),
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid,
                             "controller": True}],
        "annotations": annotations,
    }
    if template_meta.get("labels"):
        meta["labels"] = dict(template_meta["labels"])
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "spec": copy.deepcopy(template_spec.get("spec") or {})}


def with_template_claims(store: DraStore, pod: Pod, dry_run: bool = False,
                         keep: Mapping[str, str] | None = None) -> Pod:
    """``pod`` with a claim made for each template entry that has none (see the module docstring); the
    same pod when there is nothing to make. ``keep``: the statuses the pod had before it was applied
    again (the status is not the manifest's to clear)."""
    made: dict[str, str] = {k: v for k, v in (keep or {}).items() if k not in pod.resource_claim_statuses}
    for entry in pod.resource_claims:
        if not entry.template_name or entry.name in pod.resource_claim_statuses or entry.name in made:
            continue
        template = store.templates.get(f"{pod.namespace}/{entry.template_name}")
        if template is None:
            continue
        manifest = _claim_manifest(pod, entry.name, template.raw_spec)
        name = manifest["metadata"]["name"]
        if not dry_run and store.claim(pod.namespace, name) is None:
            manifest["metadata"]["resourceVersion"] = str(store.next_version())
            store.apply("ResourceClaim", manifest)
        made[entry.name] = name
    if not made:
        return pod
    statuses = {**pod.resource_claim_statuses, **made}
    raw = copy.deepcopy(pod.raw) if pod.raw else {}
    if raw:
        status = raw.setdefault("status", {})
        status["resourceClaimStatuses"] = [{"name": n, **({"resourceClaimName": c} if c else {})}
                                           for n, c in statuses.items()]
    return dataclasses.replace(pod, resource_claim_statuses=statuses, raw=raw)


def release_pod(store: DraStore, pod: Pod) -> None:
    """The claims of a pod that is gone, as the resourceclaim controller leaves them (module docstring)."""
    for claim in list(store.claims.values()):
        if claim.owner is not None and claim.owner[2] == pod.uid:
            store.remove("ResourceClaim", claim.namespace, claim.name)  # the garbage collector's part
            continue
        if not claim.reserved_for_pod(pod.uid):
            continue
        status = dict(claim.raw.get("status") or {})
        kept = [r for r in status.get("reservedFor") or [] if r.get("uid") != pod.uid]
        if kept:
            status["reservedFor"] = kept
        else:
            for key in ("reservedFor", "allocation", "devices"):
                status.pop(key, None)
        raw = copy.deepcopy(claim.raw)
        raw["status"] = status
        if not status:
            del raw["status"]
        raw.setdefault("metadata", {})["resourceVersion"] = str(store.next_version())
        store.apply("ResourceClaim", raw)
