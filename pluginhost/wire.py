"""What every Outrigger gRPC server and channel accepts on the wire, in one place.

**Message size limits.** :data:`MAX_MESSAGE_BYTES` (64 MiB) bounds every message any Outrigger
server receives or sends (the framework's Scheduler, Handle and CycleState services and every plugin
host's Plugin service) and every channel Outrigger opens. 64 MiB holds a 15000-node cluster's manifest
in one Apply and a full snapshot resync of as many nodes; a bigger cluster is applied in parts. gRPC
itself refuses a larger request with ``RESOURCE_EXHAUSTED`` before any handler runs, so nothing
changes and the server keeps serving. :data:`SERVER_OPTIONS` and :data:`CHANNEL_OPTIONS` carry the
limits; ``docs/bad-input.md`` lists them with every other check.

**Undecodable messages.** A request whose bytes are not the method's message (corrupt wire format,
invalid UTF-8 in a string field) would reach grpc's generic handler and come back as ``UNKNOWN``.
:class:`DecodeGuard`, a server interceptor installed on every Outrigger server, answers it with
``INVALID_ARGUMENT`` naming the method and the message type instead; the handler never runs.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

__all__ = [
    "CHANNEL_OPTIONS",
    "MAX_MESSAGE_BYTES",
    "SERVER_OPTIONS",
    "DecodeGuard",
    "read_checked",
    "server_interceptors",
]

#: The largest message (request or reply) any Outrigger server or channel accepts, in bytes.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

#: gRPC server options of every Outrigger server.
SERVER_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]

#: gRPC channel options of every Outrigger channel (callers may append their own).
CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]


class _Undecodable:
    """Stands in for a request that did not decode; the guarded handler aborts on it."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def _decoder(deserialize: Callable[[bytes], Any], method: str) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as exc:  # DecodeError, or whatever a custom deserializer raises
            return _Undecodable(f"{method}: the request is not a valid message ({exc})")

    return decode


async def read_checked(context: grpc.aio.ServicerContext) -> Any:
    """``context.read()`` for a handler that reads its stream itself (its writes interleave with its
    reads): a message that did not decode aborts the call with INVALID_ARGUMENT, as the guarded request
    iterators do."""
    msg = await context.read()
    if isinstance(msg, _Undecodable):
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, msg.message)
    return msg


async def _checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
    async for request in requests:
        if isinstance(request, _Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
        yield request


async def _respond(result: Any) -> AsyncIterator[Any]:
    """The replies of a streaming handler, whichever form it has (async generator or coroutine)."""
    if inspect.isasyncgen(result):
        async for reply in result:
            yield reply
    elif inspect.isawaitable(result):
        await result


def _guard(handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
    deserialize = handler.request_deserializer
    if deserialize is None:
        return handler
    decode = _decoder(deserialize, method)
    serialize = handler.response_serializer
    if handler.unary_unary is not None:
        unary_unary: Callable[[Any, Any], Awaitable[Any]] = handler.unary_unary

        async def guarded_unary_unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            if isinstance(request, _Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
            return await unary_unary(request, context)

        return grpc.unary_unary_rpc_method_handler(
            guarded_unary_unary, request_deserializer=decode, response_serializer=serialize
        )
    if handler.unary_stream is not None:
        unary_stream: Callable[[Any, Any], Any] = handler.unary_stream

        async def guarded_unary_stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            if isinstance(request, _Undecodable):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.message)
            async for reply in _respond(unary_stream(request, context)):
                yield reply

        return grpc.unary_stream_rpc_method_handler(
            guarded_unary_stream, request_deserializer=decode, response_serializer=serialize
        )
    if handler.stream_unary is not None:
        stream_unary: Callable[[Any, Any], Awaitable[Any]] = handler.stream_unary

        async def guarded_stream_unary(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
            return await stream_unary(_checked(requests, context), context)

        return grpc.stream_unary_rpc_method_handler(
            guarded_stream_unary, request_deserializer=decode, response_serializer=serialize
        )
    stream_stream: Callable[[Any, Any], Any] = handler.stream_stream

    async def guarded_stream_stream(
        requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        async for reply in _respond(stream_stream(_checked(requests, context), context)):
            yield reply

    return grpc.stream_stream_rpc_method_handler(
        guarded_stream_stream, request_deserializer=decode, response_serializer=serialize
    )


class DecodeGuard(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Answers a request that does not decode with ``INVALID_ARGUMENT`` (see the module docstring)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        return _guard(handler, str(handler_call_details.method))


def server_interceptors() -> list[grpc.aio.ServerInterceptor]:
    """The interceptors every Outrigger server installs (``grpc.aio.server(interceptors=...)``)."""
    return [DecodeGuard()]
