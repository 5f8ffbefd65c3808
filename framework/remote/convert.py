"""A cycle's objects in their wire form, converted once per cycle and kept in its CycleState (a cycle
meets one pod and one node view per phase at many calls of many remote plugins)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pluginhost.plugin import CycleState
from pluginhost.view import VIEW_STATE_KEY, NodeView, view_to_proto

__all__ = ["converted", "view_proto"]


def converted(state: CycleState, key: str, obj: Any, convert: Callable[[Any], Any]) -> Any:
    """``convert(obj)``, kept in the cycle under ``key`` while the cycle holds that same object (a
    cycle meets one pod and one view per phase at many calls: convert each once)."""
    cached = state.get(key)
    if cached is not None and cached[0] is obj:
        return cached[1]
    msg = convert(obj)
    state.write(key, (obj, msg))
    return msg


def view_proto(state: CycleState) -> Any:
    """The wire form of the view the current phase runs on (None: none), converted once per view."""
    view = state.get(VIEW_STATE_KEY)
    if not isinstance(view, NodeView) or not view:
        return None
    return converted(state, VIEW_STATE_KEY + "/proto", view, view_to_proto)
