"""Outrigger's plugin SDK: the plugin interface, the cluster model, and the plugin host.

Plugins derive from the base classes in :mod:`pluginhost.plugin`, in-process or remote alike. To run
them in their own process (a sidecar)::

    from pluginhost import serve
    serve([MyPlugin], listen="127.0.0.1:50061")

The names below are loaded on first use, so importing a small module of this package (``status``,
``model``) does not pull in gRPC.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pluginhost.context import CallContext, context, in_host
    from pluginhost.definition import defn
    from pluginhost.host import PluginHost, serve
    from pluginhost.state import StateValue

__all__ = ["CallContext", "PluginHost", "StateValue", "context", "defn", "in_host", "serve"]

_LAZY = {
    "CallContext": "pluginhost.context",
    "context": "pluginhost.context",
    "in_host": "pluginhost.context",
    "defn": "pluginhost.definition",
    "PluginHost": "pluginhost.host",
    "serve": "pluginhost.host",
    "StateValue": "pluginhost.state",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pluginhost' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
