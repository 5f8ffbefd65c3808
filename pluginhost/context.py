"""The per-call context of a plugin running in a plugin host.

Plugin methods keep the signatures of the in-process interface (``filter(state, pod, batch)``), so a
plugin class runs in-process or in a host unchanged. What only a host knows about the call (the
extension point, the profile, the cycle id, the plugin's args, the Handle client) is available from
:func:`context` while the call runs, the way ``temporalio.activity.info()`` works::

    from pluginhost import context

    async def permit(self, state, pod, node_name):
        ctx = context()
        log.info("permit %s in cycle %s (profile %s)", pod.key, ctx.cycle_id, ctx.profile)

:func:`in_host` tells whether the code runs in a host at all (False in-process).
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pluginhost.errors import OutriggerError
from pluginhost.model import Pod
from pluginhost.plugin import CycleState, Handle

__all__ = ["CallContext", "NotInHostError", "context", "in_host"]


class NotInHostError(OutriggerError, RuntimeError):
    """:func:`context` was called outside a plugin host call."""


@dataclass(frozen=True, slots=True)
class CallContext:
    """One call from the framework into a hosted plugin."""

    plugin: str  # the plugin's name
    point: str  # the RPC, e.g. "Filter", "Permit"
    profile: str  # the pod's profile (schedulerName)
    args: dict[str, Any] = field(default_factory=dict)  # the plugin's pluginConfig args for the profile
    handle: Handle | None = None  # the Handle client (waiting pods, snapshot mirror)
    pod: Pod | None = None  # the pod the call is about (None for calls outside a cycle)
    cycle_id: str = ""  # the scheduling context's id (the CycleState key in the framework)
    attempt: int = 0  # the pod's scheduling attempt, from 1
    snapshot_generation: int = 0  # the framework's snapshot generation the cycle runs against
    state: CycleState | None = None  # the CycleState proxy of this call
    trace_context: Mapping[str, str] = field(default_factory=dict)  # W3C trace context from the framework


_current: contextvars.ContextVar[CallContext] = contextvars.ContextVar("outrigger_call_context")


def context() -> CallContext:
    """The context of the current call; :class:`NotInHostError` outside a plugin host call."""
    try:
        return _current.get()
    except LookupError:
        raise NotInHostError("pluginhost.context() is only available while a plugin host runs a call") from None


def in_host() -> bool:
    """True while a plugin host runs a call (False for in-process plugins)."""
    return _current.get(None) is not None


def _enter(ctx: CallContext) -> contextvars.Token[CallContext]:
    return _current.set(ctx)


def _leave(token: contextvars.Token[CallContext]) -> None:
    _current.reset(token)
