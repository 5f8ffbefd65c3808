"""The custom resources plugins register events for, watched on a live cluster so that their changes reach
the scheduling queue (kube-scheduler's dynamic informers: ``addAllEventHandlers`` in eventhandlers.go).

A plugin's EventsToRegister may name a custom resource by kube-scheduler's GVK string,
``plural.version.group``: Coscheduling registers ``podgroups.v1alpha1.scheduling.x-k8s.io`` (Add and
Update), so that pods it turned away for want of their PodGroup are tried again once it exists. For each
such resource the source lists and watches ``/apis/<group>/<version>/<plural>`` (every namespace) and tells
the scheduler of every add, change and delete under the GVK string, and the queue moves the pods whose
rejecting plugins registered that event::

    informers = custom_resource_informers(scheduler, client)   # one per resource scheduler's plugins name
    tasks = [asyncio.create_task(i.run()) for i in informers]

The objects are kept as the API server sends them, less their ``managedFields``: the store is there for
the old object an update or delete event carries, nothing reads it otherwise. The framework needs
``list`` and ``watch`` on each resource (deploy/kubernetes/rbac.yaml grants PodGroups'); without them, or
before the resource's CRD is installed, the informer logs a warning naming the resource and retries with
backoff, as every informer does, and the scheduler runs on without those events.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .client import ApiClient
from .informer import Informer

if TYPE_CHECKING:
    from ..scheduler import Scheduler

__all__ = ["custom_resource_informers", "resource_name", "resource_path"]

log = logging.getLogger("outrigger.kube")


def _parts(gvk: str) -> tuple[str, str, str]:
    plural, version, group = [*gvk.split(".", 2), "", ""][:3]
    if not (plural and version and group):
        raise ValueError(f"{gvk!r} is not a custom resource's plural.version.group")
    return plural, version, group


def resource_path(gvk: str) -> str:
    """The collection of kube-scheduler's GVK string ``plural.version.group`` (what schema.ParseResourceArg
    reads): ``podgroups.v1alpha1.scheduling.x-k8s.io`` is ``/apis/scheduling.x-k8s.io/v1alpha1/podgroups``."""
    plural, version, group = _parts(gvk)
    return f"/apis/{group}/{version}/{plural}"


def resource_name(gvk: str) -> str:
    """The resource as RBAC rules and ``kubectl`` name it, ``plural.group`` (``podgroups.scheduling.x-k8s.io``):
    what the informer's warnings name."""
    plural, _, group = _parts(gvk)
    return f"{plural}.{group}"


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return obj


class _Changes:
    """A custom resource's events, to the scheduler under the resource's GVK string."""

    def __init__(self, scheduler: Scheduler, gvk: str) -> None:
        self.scheduler = scheduler
        self.gvk = gvk

    async def on_add(self, obj: dict[str, Any]) -> None:
        self.scheduler.custom_resource_changed(self.gvk, None, obj)

    async def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.scheduler.custom_resource_changed(self.gvk, old, new)

    async def on_delete(self, obj: dict[str, Any]) -> None:
        self.scheduler.custom_resource_changed(self.gvk, obj, None)


def custom_resource_informers(scheduler: Scheduler, client: ApiClient) -> list[Informer[dict[str, Any]]]:
    """An informer for each custom resource ``scheduler``'s plugins registered events for (none to run
    when they registered none)."""
    out: list[Informer[dict[str, Any]]] = []
    for gvk in scheduler.custom_resources():
        try:
            path, name = resource_path(gvk), resource_name(gvk)
        except ValueError as exc:  # not reached: custom_resources() keeps names with two dots
            log.error("not watching %s: %s", gvk, exc)
            continue
        log.info("watching %s (%s) for the plugins that registered its events", name, path)
        out.append(Informer(client, path, name, _slim, _Changes(scheduler, gvk)))
    return out
