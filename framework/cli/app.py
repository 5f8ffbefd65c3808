"""outrigger: run the framework service, talk to it, explain a placement, run the demo.

Examples:
  outrigger serve --config scheduler.yaml --listen 127.0.0.1:50051
  outrigger serve --config scheduler.yaml --plugins remote-plugins.yaml
  outrigger plugin serve pluginhost.examples.coscheduling:Coscheduling --listen 127.0.0.1:50061
  export OUTRIGGER_SERVER=127.0.0.1:50051        # or --server ADDR on every command
  outrigger apply -f cluster.yaml --wait
  outrigger get pods -A -o wide                  # kubectl's habits: -n/-A, -l, -o wide|name|yaml|json, -w
  outrigger get nodes -o yaml
  outrigger describe pod web                     # conditions and scheduling events
  outrigger get waiting
  outrigger explain web
  outrigger explain --config scheduler.yaml --cluster cluster.yaml -f pod.yaml -o json
  outrigger explain --what-if-nodes template.yaml --count 3
  outrigger get reservations
  outrigger watch --timeout 60
  outrigger delete pod web
  outrigger demo
  outrigger serve --tls-cert fw.pem --tls-key fw-key.pem --tls-client-ca ca.pem   # docs/security.md
  outrigger get pods --tls-ca ca.pem --tls-cert me.pem --tls-key me-key.pem

Run `outrigger COMMAND --help` for a command's flags and examples.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from pluginhost.manifest import ManifestError
from pluginhost.security import TLSConfigError

from ..config import ConfigError
from ..plugins import PluginArgsError
from ..remote import RemotePluginsError
from . import apply, demo, explain, get, serve, watch
from .output import OutputClosed, OutputError, standard_streams
from .registry import COMMANDS, Command, UserError

__all__ = ["CLOSED_PIPE_EXIT", "main", "parser", "version"]

#: The command modules (each registers its commands when imported), in the order ``outrigger --help``
#: lists their commands: the server, then kubectl's verbs, then the looking glasses.
_FAMILIES = (serve, apply, get, explain, watch, demo)


def _in_help_order() -> list[Command]:
    rank = {module.__name__: i for i, module in enumerate(_FAMILIES)}
    return sorted(COMMANDS.values(), key=lambda cmd: rank[cmd.run.__module__])  # stable: a module's own order


class _TopHelp(argparse.RawDescriptionHelpFormatter):
    """argparse measures command names one indent short of where it lists them: leave room for the
    longest (``debug-scores``), so every command's help starts on its own line."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog)
        self._action_max_length = max(len(name) for name in COMMANDS) + 6


def version() -> str:
    """The installed distribution's version (``outrigger --version``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("outrigger")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout that was never installed
        return "unknown (not installed)"


def parser() -> argparse.ArgumentParser:
    """The ``outrigger`` command line: every registered command, with its flags."""
    p = argparse.ArgumentParser(
        prog="outrigger", description=__doc__.split("\n\n")[0],
        epilog="\n".join(__doc__.split("\n")[2:]),
        formatter_class=_TopHelp,
    )
    p.add_argument("--version", action="version", version=f"outrigger {version()}",
                   help="print the version and exit")
    p.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in _in_help_order():
        sp = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help,
                            epilog=f"examples:\n{cmd.examples}" if cmd.examples else None,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        cmd.arguments(sp)
        sp.set_defaults(fn=cmd.run)
    return p


#: The exit status when the reader of the output went away (``outrigger get pods | head -n 1``): the
#: status a shell reports for coreutils and kubectl there (128 + SIGPIPE), with nothing on stderr.
CLOSED_PIPE_EXIT = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default ``sys.argv[1:]``); the exit code (a mistake: one line, 1).

    Everything the command prints reaches stdout whatever the reader's pace; a failed write is an error
    (a line on stderr, exit status 1), a reader gone (a closed pipe) ends the command quietly with
    :data:`CLOSED_PIPE_EXIT`."""
    with standard_streams():
        try:
            try:
                return _run(argv)
            finally:
                sys.stdout.flush()  # what was printed before an error is output all the same
        except OutputClosed:
            return CLOSED_PIPE_EXIT
        except OutputError as exc:
            print(f"error: cannot write the output to {exc.stream}: {exc.strerror}", file=sys.stderr)
            return 1


def _run(argv: Sequence[str] | None) -> int:
    from clients import ClientError

    args = parser().parse_args(argv)
    if args.command in ("serve", "demo"):
        from ..scheduler import tune_gc

        tune_gc()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        code: int = args.fn(args)
        return code
    except (UserError, ClientError, ConfigError, ManifestError, PluginArgsError, RemotePluginsError,
            TLSConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130

