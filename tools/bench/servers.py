"""The processes some scenarios run beside the framework (a plugin host, an extender, a Go host):
:class:`ServerProcess` starts one, learns its address from its first line and stops it again;
:func:`stop_process` is how any benchmark process is stopped (SIGTERM, then SIGKILL);
:func:`call_metrics` turns the calls made to such a process into per-pod figures."""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
import subprocess
import threading
from collections.abc import Sequence
from typing import Any

__all__ = ["STARTUP_SECONDS", "STOP_SECONDS", "ServerProcess", "call_metrics", "stop_process"]

# A plugin host imports the framework and grpc before it listens: a second or two on an idle host, over
# 20 s at a load average of 40 (six test runs on 2 cores), where a shorter bound failed whole runs.
STARTUP_SECONDS = 60.0
STOP_SECONDS = 10.0
_LISTENING = re.compile(r"listening on (\S+)")


def stop_process(proc: subprocess.Popen[Any] | None, grace: float = STOP_SECONDS) -> None:
    """SIGTERM, and SIGKILL when ``proc`` has not exited ``grace`` seconds later; nothing if it is gone."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(grace)


class ServerProcess:
    """A server subprocess on 127.0.0.1 whose first line of output says ``listening on ADDR``.

    Start-up is bounded (:data:`STARTUP_SECONDS`); its output is drained so it never blocks on a full
    pipe; :meth:`stop` sends SIGTERM and SIGKILL after :data:`STOP_SECONDS`. Used as an async context
    manager by the scenarios' :meth:`~tools.bench.scenario.Scenario.environment`, so the process is
    stopped on errors too.
    """

    def __init__(self, argv: Sequence[str], what: str) -> None:
        self.argv = list(argv)
        self.what = what
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""

    def start(self) -> str:
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        box: list[str] = []
        stdout = self.proc.stdout
        reader = threading.Thread(target=lambda: box.append(stdout.readline() if stdout else ""), daemon=True)
        reader.start()
        reader.join(STARTUP_SECONDS)
        m = _LISTENING.search(box[0]) if box else None
        if m is None:
            self.stop()
            err = self.proc.stderr.read()[-2000:] if self.proc.stderr else ""
            raise RuntimeError(f"{self.what} did not start within {STARTUP_SECONDS:g}s: {box[:1]!r} {err}")
        for stream in (self.proc.stdout, self.proc.stderr):
            threading.Thread(target=_drain, args=(stream,), daemon=True).start()
        self.address = m.group(1)
        return self.address

    def stop(self) -> None:
        stop_process(self.proc)

    async def __aenter__(self) -> ServerProcess:
        try:
            await asyncio.get_running_loop().run_in_executor(None, self.start)
        except BaseException:
            self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()


def _drain(stream: Any) -> None:
    if stream is None:
        return
    with contextlib.suppress(ValueError, OSError):
        for _ in stream:
            pass


def call_metrics(mark: Sequence[float], final: Sequence[float], measured_pods: int) -> dict[str, float]:
    """Per measured pod: bytes each way, calls, and the time inside them (the adapter's view)."""
    sent, received, calls, seconds, *rest = (a - b for a, b in zip(final, mark, strict=True))
    n = max(measured_pods, 1)
    out = {
        "bytes_sent_per_pod": round(sent / n, 1),
        "bytes_received_per_pod": round(received / n, 1),
        "bytes_per_pod": round((sent + received) / n, 1),
        "calls_per_pod": round(calls / n, 2),
        "call_ms_per_pod": round(seconds * 1000 / n, 3),
    }
    if rest:
        out["answered_ahead_per_pod"] = round(rest[0] / n, 3)
    return out
