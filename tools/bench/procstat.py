"""What the benchmark reads from ``/proc`` about the processes it runs: CPU time (:func:`process_cpu`,
:func:`machine_cpu`, :class:`CpuSample`), peak memory (:func:`peak_rss_mib`) and the TCP connections a
process holds to a port (:class:`Connections`). Linux only, as the ``apiserver`` scenario is."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import time
from dataclasses import dataclass

__all__ = ["Connections", "CpuSample", "children", "machine_cpu", "peak_rss_mib", "process_cpu"]

_CLK_TCK = os.sysconf("SC_CLK_TCK")



def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) a process has used, children it waited for excluded; 0 when gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime, stime (fields 14 and 15 of stat)


def children(pid: int) -> list[int]:
    """The processes ``pid`` started that are still running (its threads' children), by pid."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as f:
                found.extend(int(child) for child in f.read().split())
    return found


def machine_cpu() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, all cores (/proc/stat)."""
    with open("/proc/stat", encoding="ascii") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    total = sum(values[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
    return (total - idle) / _CLK_TCK, total / _CLK_TCK


def peak_rss_mib(pid: int) -> float:
    """A process's peak resident set (VmHWM), MiB; 0 when gone."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass(slots=True)
class CpuSample:
    """CPU seconds used so far by each named process, this one, and the whole machine."""

    processes: dict[str, float]
    machine_busy: float
    machine_total: float
    taken: float

    @classmethod
    def take(cls, pids: dict[str, int]) -> CpuSample:
        busy, total = machine_cpu()
        procs = {name: process_cpu(pid) for name, pid in pids.items()}
        procs["watcher"] = time.process_time()
        return cls(procs, busy, total, time.monotonic())

    def shares(self, later: CpuSample, pods: int, extra: dict[str, float] | None = None) -> dict[str, float]:
        """Each process's share of the machine's CPU capacity over the interval and its milliseconds per
        pod; ``other`` is everything else that ran (other users of the machine)."""
        used = {name: later.processes[name] - self.processes.get(name, 0.0) for name in later.processes}
        used.update(extra or {})
        capacity = later.machine_total - self.machine_total
        busy = later.machine_busy - self.machine_busy
        used["other"] = max(0.0, busy - sum(used.values()))
        out: dict[str, float] = {}
        for name, seconds in used.items():
            out[f"cpu_share_{name}"] = round(seconds / capacity, 3) if capacity > 0 else 0.0
            out[f"cpu_ms_per_pod_{name}"] = round(seconds * 1000 / max(pods, 1), 3)
        out["cpu_share_idle"] = round(max(0.0, 1 - busy / capacity), 3) if capacity > 0 else 0.0
        return out


class Connections:
    """The TCP connections a process holds to a local port, sampled: how many at most, how many in all
    (equal when every connection was kept and reused)."""

    def __init__(self, pid: int, port: int, every: float = 1.0) -> None:
        self.pid, self.port, self.every = pid, port, every
        self.seen: set[tuple[str, str]] = set()
        self.most = 0

    def sample(self) -> set[tuple[str, str]]:
        """(local, remote) addresses of the process's established connections to the port, in hex."""
        inodes = set()
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{self.pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{self.pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
        found = set()
        for table in ("tcp", "tcp6"):
            with contextlib.suppress(OSError), open(f"/proc/net/{table}", encoding="ascii") as f:
                for line in itertools.islice(f, 1, None):
                    fields = line.split()
                    # local, remote, state (01: established), ..., inode
                    if fields[3] == "01" and fields[9] in inodes and int(fields[2].rsplit(":", 1)[1], 16) == self.port:
                        found.add((fields[1], fields[2]))
        return found

    async def follow(self) -> None:
        for _ in itertools.count():  # until cancelled
            now = self.sample()
            self.seen |= now
            self.most = max(self.most, len(now))
            await asyncio.sleep(self.every)
