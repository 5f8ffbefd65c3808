"""How ``outrigger`` commands print what they were asked for: ``-o json`` and ``-o yaml`` as documents,
``-o table`` as an aligned plain-text table (kubectl style); and the standard streams they print to
(:func:`standard_streams`), which write everything whatever the reader's pace and report a failed write."""

from __future__ import annotations

import errno
import io
import json
import os
import select
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TextIO

import yaml

from pluginhost.errors import OutriggerError

__all__ = ["OutputClosed", "OutputError", "emit", "standard_streams", "table", "utc"]


class OutputError(OutriggerError, OSError):
    """Writing the command's output failed (``errno``, ``strerror``; ``stream``: "stdout")."""

    def __init__(self, code: int, stream: str) -> None:
        super().__init__(code, os.strerror(code))
        self.stream = stream


class OutputClosed(OutputError):
    """The reader of the output went away (a closed pipe, as ``outrigger get pods | head -n 1``)."""


class _FdWriter(io.RawIOBase):
    """A file descriptor as a raw stream whose ``write`` writes every byte or raises :class:`OutputError`.

    Why not the file object Python opens: the descriptor's O_NONBLOCK flag belongs to the open file
    description, which every process holding it shares (a parent that hands us a non-blocking pipe, a
    library or child process that sets the flag on its copy). On a non-blocking descriptor a full pipe
    makes CPython's buffered writer return a short count that ``print`` ignores: the rest of the output
    was dropped, exit status 0. Here a full pipe (EAGAIN) is waited out with poll(), as a blocking write
    waits, and the flag is left as it was found (others sharing it may rely on it)."""

    def __init__(self, fd: int, stream: str, *, report: bool = True) -> None:
        super().__init__()
        self._fd = fd
        self._stream = stream
        self._report = report  # False: failures are dropped (stderr: there is nowhere left to report them)
        self.failed = False  # after a failure, the rest is dropped (exiting must not fail again flushing it)

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        done = 0
        # Each pass writes at least one byte or waits until the reader made room: as long as the
        # slowest reader (a pager) takes, as a blocking write would wait; a reader gone ends it (EPIPE).
        while done < len(view) and not self.failed:
            try:
                done += os.write(self._fd, view[done:])
            except BlockingIOError:
                _wait_writable(self._fd)
            except OSError as exc:
                self.failed = True
                if self._report:
                    code = exc.errno or errno.EIO
                    raise (OutputClosed if code == errno.EPIPE else OutputError)(code, self._stream) from None
        return len(view)


def _wait_writable(fd: int) -> None:
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    poll.poll()  # POLLOUT, or POLLERR/POLLHUP: the next write reports the latter


def _wrap(old: TextIO, raw: _FdWriter) -> io.TextIOWrapper:
    """A text stream like ``old`` (its encoding, error handler and buffering) over ``raw``."""
    return io.TextIOWrapper(io.BufferedWriter(raw), encoding=old.encoding, errors=old.errors,
                            line_buffering=bool(getattr(old, "line_buffering", False)),
                            write_through=bool(getattr(old, "write_through", False)))


@contextmanager
def standard_streams() -> Iterator[None]:
    """Within the block, ``sys.stdout`` and ``sys.stderr`` (when they are the process's own fd 1 and 2,
    not a test's capture) write every byte whatever the reader's pace or the descriptor's O_NONBLOCK
    flag; a failed write to stdout raises :class:`OutputError` (:class:`OutputClosed` for a closed
    pipe), from ``print`` or from the caller's final ``sys.stdout.flush()``. Afterwards the original
    streams are back (a failed stream drops what it still held)."""
    swapped: list[tuple[str, TextIO, io.TextIOWrapper, _FdWriter]] = []
    for name, fd in (("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        if old is None or old is not getattr(sys, f"__{name}__") or _fileno(old) != fd:
            continue
        try:
            old.flush()
        except OSError:
            pass
        raw = _FdWriter(fd, name, report=name == "stdout")
        new = _wrap(old, raw)
        setattr(sys, name, new)
        swapped.append((name, old, new, raw))
    try:
        yield
    finally:
        for name, old, new, _ in reversed(swapped):
            setattr(sys, name, old)
            try:
                new.flush()  # the caller flushed stdout to see its errors; this is what came after
            except OSError:
                pass
            # Not closed: a logging handler made inside the block still writes through it (a thread
            # logging while the interpreter exits); a stream that failed drops what it is given.


def _fileno(stream: TextIO) -> int:
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError):
        return -1


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Rows as an aligned plain-text table (kubectl style)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def emit(output: str, data: Any, as_table: Callable[[], str]) -> None:
    """Print ``data`` as JSON or YAML, or ``as_table()`` for ``-o table``."""
    if output == "json":
        print(json.dumps(data, indent=2))
    elif output == "yaml":
        print(yaml.safe_dump(data, sort_keys=False, default_flow_style=False), end="")
    else:
        print(as_table())


def utc(ts: float) -> str:
    """A Unix time as an RFC 3339 UTC timestamp, to the second."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
