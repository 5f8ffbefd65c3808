"""The flags several ``outrigger`` commands share, and what they lead to: ``--server`` (and the TLS
flags) to a client of the framework, ``-f`` to the text of a file or stdin, ``-n`` to a pod's
namespace, ``-o`` to an output format."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .registry import UserError
from .security import add_client_flags, client_tls

if TYPE_CHECKING:
    from clients.client import SchedulerClient

__all__ = [
    "DEFAULT_SERVER",
    "OUTPUTS",
    "SERVER_ENV",
    "add_filename",
    "add_namespace",
    "add_output",
    "add_server",
    "client",
    "pod_ref",
    "read_input",
]

DEFAULT_SERVER = "127.0.0.1:50051"
SERVER_ENV = "OUTRIGGER_SERVER"
OUTPUTS = ("table", "json", "yaml")


def add_server(p: argparse.ArgumentParser) -> None:
    """``--server ADDR``: the framework to talk to (default $OUTRIGGER_SERVER, else 127.0.0.1:50051)."""
    default = os.environ.get(SERVER_ENV) or DEFAULT_SERVER
    p.add_argument("--server", metavar="ADDR", default=default,
                   help=f"framework service address (default ${SERVER_ENV}, else {DEFAULT_SERVER}; now {default})")
    add_client_flags(p)  # --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name


def add_output(p: argparse.ArgumentParser) -> None:
    """``-o table|json|yaml``."""
    p.add_argument("-o", "--output", choices=OUTPUTS, default="table", help="output format (default table)")


def add_filename(p: argparse.ArgumentParser, help: str, *, required: bool = False) -> None:
    """``-f FILE``, repeatable; ``-`` for stdin (:func:`read_input` reads either)."""
    p.add_argument("-f", "--filename", action="append", metavar="FILE", required=required, default=None,
                   help=help + " (repeatable; - for stdin)")


def add_namespace(p: argparse.ArgumentParser, default: str) -> None:
    """``-n NAMESPACE`` (``default`` "": every namespace)."""
    p.add_argument("-n", "--namespace", default=default,
                   help=f"namespace (default {default})" if default else "namespace (default: all)")


def read_input(path: str) -> str:
    """The text of the file ``path`` (``-``: stdin); :class:`UserError` when it cannot be read."""
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"cannot read {path}: not UTF-8 text") from None


def pod_ref(ref: str, namespace: str) -> tuple[str, str]:
    """``NAME`` (in ``namespace``, the ``-n`` flag) or ``NAMESPACE/NAME`` -> (namespace, name)."""
    ns, sep, name = ref.partition("/")
    return (ns, name) if sep else (namespace, ref)


@contextmanager
def client(args: argparse.Namespace, timeout: float | None = None) -> Iterator[SchedulerClient]:
    """A client of ``--server``; ``timeout``: each call's deadline (default the client's, 30 s)."""
    from clients.client import SchedulerClient

    with SchedulerClient(args.server, tls=client_tls(args), timeout=timeout or 30.0) as c:
        yield c
