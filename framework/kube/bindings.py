"""A pod's binding through ``pods/binding`` when its answer was lost: how it ended, asked of the API server.

::

    status, bound_to = await binding_outcome(client, pod, "node-1", why, deadline, fence)

A binding without an answer (no connection, a broken one, a server failure) may have been applied.
Forgetting the assumed pod then could hand its room to another pod while the pod holds it, so the
binding cycle holds on until the API says: the pod is read (and the binding sent again while it is
unbound) until the answer comes, or the deadline passes, or, with leader election, the lease is lost.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Callable
from typing import Any

from pluginhost.model import Pod
from pluginhost.status import SUCCESS, Status

from .client import REQUEST_TIMEOUT, ApiClient, ApiError, ApiUnreachable

__all__ = ["OUTCOME_SECONDS", "assigned_node", "binding_body", "binding_outcome"]

log = logging.getLogger("outrigger.kube")

# How long a binding cycle waits to learn whether a binding whose answer was lost went through (with leader
# election, only while the lease is held too), and how often it asks.
OUTCOME_SECONDS = 60.0
OUTCOME_RETRY = 0.5
# How long one read of the pod may take.
READ_SECONDS = 5.0


def binding_body(pod: Pod, node_name: str) -> dict[str, Any]:
    """The ``Binding`` of ``pod`` to ``node_name``, with the pod's uid (a replaced pod is not bound)."""
    return {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}


async def binding_outcome(client: ApiClient, pod: Pod, node_name: str, why: str, deadline: float,
                          fence: Callable[[], float] | None) -> tuple[Status, str]:
    """How the binding of ``pod`` to ``node_name`` whose answer was lost (``why``) ended: the status for the
    binding cycle, and the node the pod is bound to ("" when not known). Asked until ``deadline`` (the
    clock's time) and, with ``fence`` (seconds a request sent now may take before another replica could
    lead; 0: the lease is lost), while the lease is held, each request given up before another replica
    could lead: a renewal moves that moment on. Only a read of the pod settles it: a read refused (a
    restarted API server answers 401 and 403 until its authenticators and authorizers have caught up)
    or failed says nothing of the binding, and is sent again."""
    log.warning("pod %s: binding to %s may or may not have been applied (%s); asking the API server",
                pod.key, node_name, why)
    path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}"
    last = why
    while (window := _window(deadline, fence)) > 0:
        try:
            obj = await client.request("GET", path, verb="get", resource="pods", timeout=min(window, READ_SECONDS))
        except (ApiError, ApiUnreachable) as exc:
            if isinstance(exc, ApiError) and exc.code == 404:
                return Status.failure(f"pod {pod.key} not found (deleted while binding)"), ""
            last = str(exc)
            await asyncio.sleep(min(OUTCOME_RETRY, max(deadline - time.monotonic(), 0)))
            continue
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        if meta.get("uid") != pod.uid:
            return Status.failure(f"pod {pod.key} was replaced while binding"), ""
        bound_to = str(spec.get("nodeName") or "")
        if bound_to == node_name:
            log.warning("pod %s: the binding to %s had gone through", pod.key, node_name)
            return SUCCESS, bound_to
        if bound_to:
            return Status.failure(f"pod {pod.key} is already assigned to node {bound_to!r}"), bound_to
        if (window := _window(deadline, fence)) <= 0:
            break
        try:  # not applied: send it again (the API refuses a second one, so this cannot bind twice)
            await client.request("POST", f"{path}/binding", verb="create", resource="pods/binding",
                                 body=binding_body(pod, node_name), timeout=min(window, REQUEST_TIMEOUT))
        except ApiError as exc:
            if exc.code != 409 and exc.code < 500:
                return Status.failure(exc.message), ""  # refused: the pod is unbound (just read), and stays so
            last = str(exc)  # the first one landed meanwhile, or still unknown: read again
            continue
        except ApiUnreachable as exc:
            last = str(exc)
            continue
        return SUCCESS, node_name
    if fence is not None and fence() <= 0:
        return Status.failure(f"binding of pod {pod.key} to {node_name}: no answer ({last}), and this replica "
                              "no longer holds the leader lease"), ""
    return Status.failure(f"binding of pod {pod.key} to {node_name}: no answer from the API server ({last})"), ""


def _window(deadline: float, fence: Callable[[], float] | None) -> float:
    """Seconds a request about the outcome may take now: until ``deadline``, and with leader election until
    another replica could lead (0: stop asking; a replica exits on a lost lease, its assumed pods with it)."""
    left = deadline - time.monotonic()
    return left if fence is None else min(left, fence())


_ASSIGNED = re.compile(r'already assigned to node "([^"]*)"')


def assigned_node(message: str) -> str | None:
    """The node a ``409 Conflict`` refusing a binding names (the API server's ``pod P is already assigned to
    node "N"``); None when the message does not say."""
    found = _ASSIGNED.search(message)
    return found.group(1) if found else None
