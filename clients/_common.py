"""The clients' connection to the framework: channel options, which broken streams a watch resumes,
the channel and stub both clients hold, and :class:`ClientError` with the one mapping of gRPC failures
to messages meant for users. (What the two clients send and read is :mod:`clients._calls`; what their
watches share, :mod:`clients._watch`.)"""

from __future__ import annotations

from typing import Generic, TypeVar

import grpc

from pluginhost import pb
from pluginhost.errors import OutriggerError
from pluginhost.wire import CHANNEL_OPTIONS as WIRE_CHANNEL_OPTIONS

__all__ = ["ClientError"]

CHANNEL_OPTIONS = [
    *WIRE_CHANNEL_OPTIONS,  # the message size limits (pluginhost.wire, docs/bad-input.md)
    # A watch waits for a restarted framework: try again soon rather than after gRPC's default 1-120 s.
    # Not grpc.min_reconnect_backoff_ms: gRPC takes it as each connection attempt's timeout (20 s by
    # default), and at 100 ms a busy framework's handshake missed it and a call failed with "cannot
    # reach the framework" (a refused connection fails at once whatever it is).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
]
# A watch stream that ends with one of these is reopened (the connection broke or the server went away).
RESUMABLE = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN,
                       grpc.StatusCode.INTERNAL, grpc.StatusCode.ABORTED})


ChannelT = TypeVar("ChannelT", grpc.Channel, grpc.aio.Channel)


class Connection(Generic[ChannelT]):
    """What both clients hold: the framework's ``address``, the deadline of each unary call
    (``timeout``, seconds), the channel and the Scheduler stub on it."""

    def __init__(self, address: str, timeout: float, channel: ChannelT) -> None:
        self.address = address
        self.timeout = timeout
        self._channel: ChannelT = channel
        self._stub = pb.scheduler_grpc.SchedulerStub(channel)  # type: ignore[no-untyped-call]


class ClientError(OutriggerError):
    """Any failure of a client call, with a message meant for users. ``code`` is the gRPC status code,
    or ``None`` when nothing was sent (e.g. a manifest file that cannot be read)."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.code = code


def rpc_error(exc: grpc.RpcError, address: str, method: str, timeout: float | None) -> ClientError:
    """The one place gRPC failures become user-readable messages."""
    code: grpc.StatusCode = exc.code()
    details: str = exc.details() or ""
    if code == grpc.StatusCode.UNAVAILABLE:
        message = f"cannot reach the framework at {address}{_tls_hint(details)}"
    elif code == grpc.StatusCode.DEADLINE_EXCEEDED:
        message = f"the framework at {address} did not answer {method} within {timeout:g}s" if timeout else \
            f"the framework at {address} did not answer {method} in time"
    elif code == grpc.StatusCode.UNIMPLEMENTED:
        message = f"the framework at {address} does not offer {method} (is it an older version?)"
    elif code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION,
                  grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.OUT_OF_RANGE) and details:
        message = details
    else:
        message = f"{method} failed at {address}: {details or code.name} ({code.name})"
    return ClientError(message, code)


def unreachable(address: str) -> ClientError:
    """The error of a framework that does not answer at all."""
    return ClientError(f"cannot reach the framework at {address}", grpc.StatusCode.UNAVAILABLE)


def _tls_hint(details: str) -> str:
    """Why a connection failed, when it is a TLS matter (docs/security.md), as a parenthesis."""
    if "CERTIFICATE_VERIFY_FAILED" in details:
        return " (its certificate is not signed by the CA given with --tls-ca)"
    if "Hostname Verification Check failed" in details:
        return " (its certificate does not name that address: see --tls-server-name)"
    if "WRONG_VERSION_NUMBER" in details:
        return " (it does not serve TLS: drop the --tls flags)"
    if "Socket closed" in details:
        return (" (it closed the connection: it may serve TLS (--tls-ca) or require a client certificate "
                "signed by its CA (--tls-cert, --tls-key))")
    return ""
