"""The remote wing's errors, and how a failed gRPC call is worded in them.

- :class:`RemotePluginsError`: an endpoint cannot be used at all (startup fails naming it).
- :class:`RemotePluginError`: one call failed; the runtime turns it into an Error status naming the plugin.
"""

from __future__ import annotations

import grpc

from pluginhost.errors import OutriggerError

__all__ = ["RemotePluginError", "RemotePluginsError", "describe", "why"]


class RemotePluginsError(OutriggerError, RuntimeError):
    """A remote plugin endpoint cannot be used (unreachable, bad manifest, rejected configuration)."""


class RemotePluginError(OutriggerError, RuntimeError):
    """A call to a remote plugin failed (the runtime turns it into an Error status naming the plugin)."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


def why(exc: BaseException) -> str:
    """``exc`` in a few words: a gRPC error's code and details, else its message (or its type)."""
    return describe(exc) if isinstance(exc, grpc.RpcError) else str(exc) or type(exc).__name__


def describe(exc: grpc.RpcError) -> str:
    """A gRPC error as ``CODE: details``."""
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    return f"{getattr(code, 'name', code)}: {details}"
