"""How an ``outrigger`` subcommand is made: registered with :func:`command` (its flags, its run function
and the examples its ``--help`` shows), raising :class:`UserError` for a mistake in what it was given,
and running its asynchronous work with :func:`run_async`."""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from pluginhost.errors import OutriggerError

__all__ = ["COMMANDS", "Command", "UserError", "command", "quiet_connection_errors", "run_async"]

log = logging.getLogger("outrigger")


class UserError(OutriggerError):
    """A mistake in the command line or its inputs: printed as one line, exit code 1."""


@dataclass(frozen=True)
class Command:
    """One ``outrigger`` subcommand: its flags (``arguments``), what it does (``run``) and the examples
    its ``--help`` shows."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    examples: str = ""


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None],
            examples: str = "") -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register a subcommand (in definition order)::

        def _hello_args(p: argparse.ArgumentParser) -> None:
            add_server(p)

        @command("hello", "say hello to the framework", _hello_args, examples="outrigger hello")
        def cmd_hello(args: argparse.Namespace) -> int:
            ...
    """

    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        if name in COMMANDS:
            raise ValueError(f"command {name!r} is registered twice")
        COMMANDS[name] = Command(name, help, arguments, fn, examples)
        return fn

    return register



# What uvloop's SSL protocol raises when it writes to a TCP handle that closed under it (the peer gone
# between the read and the reply): a RuntimeError, not an OSError, but the same broken connection.
_CLOSED_HANDLE = ("unable to perform operation on", "Cannot call write() after write_eof()")


def _broken_connection(exc: BaseException | None) -> bool:
    if isinstance(exc, OSError):
        return True
    return isinstance(exc, RuntimeError) and str(exc).startswith(_CLOSED_HANDLE)


def quiet_connection_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The event loop's exception handler: a connection that broke under a transport (the API server
    or a plugin host killed mid-write: ``ssl.SSLError``, ``ConnectionResetError``, ``BrokenPipeError``,
    all ``OSError``, or uvloop's ``RuntimeError`` for a write to a handle already closed) is logged in one
    line, since whoever used it sees the failure and retries; anything else goes to the default handler,
    traceback and all."""
    exc = context.get("exception")
    if _broken_connection(exc) and ("transport" in context or "protocol" in context):
        log.warning("%s: %s: %s", context.get("message") or "a connection failed", type(exc).__name__, exc)
        return
    loop.default_exception_handler(context)


async def _with_handler(coro: Coroutine[Any, Any, Any]) -> Any:
    asyncio.get_running_loop().set_exception_handler(quiet_connection_errors)
    return await coro


def run_async(coro: Any) -> Any:
    """Run a command's coroutine to its end, on uvloop."""
    try:
        import uvloop

        return uvloop.run(_with_handler(coro))
    except ImportError:  # pragma: no cover - uvloop is a dependency, but keep the CLI usable without it
        return asyncio.run(_with_handler(coro))
