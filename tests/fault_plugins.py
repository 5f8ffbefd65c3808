"""Plugins for the fault harness (``tests/fault_harness.py``); no tests here. A plugin host imports
this module, so it does not import pytest.

:class:`Chaos` is an ordinary remote plugin (Filter, Score, Reserve, Permit, PreBind) that misbehaves
on purpose, as its ``pluginConfig`` args say: with probability ``stall`` a call sleeps
``stallSeconds`` (past the framework's deadline), with probability ``garbage`` it answers nonsense (a
Filter answer for fewer nodes than asked, scores outside [0, 100], a Reserve that raises). Its
decisions are otherwise pure functions of the pod and node names, so a run is checkable.

:class:`Ledger` is an in-process plugin at Reserve and PostBind that keeps the books the harness
checks: every pod that reached Reserve must end up unreserved or bound, never both, never neither.
"""

from __future__ import annotations

import asyncio
import os
import random
import zlib
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import Pod
from pluginhost.plugin import (
    CycleState,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PermitPlugin,
    PostBindPlugin,
    PreBindPlugin,
    ReservePlugin,
    ScorePlugin,
)
from pluginhost.status import SUCCESS, Code, Status


def rejects(pod: str, node: str) -> bool:
    """Chaos's Filter: a pod is kept off one node in seven, chosen by the names' checksum."""
    return zlib.crc32(f"{pod}/{node}".encode()) % 7 == 0


def score_of(pod: str, node: str) -> int:
    return zlib.crc32(f"{node}#{pod}".encode()) % 101


class Chaos(FilterPlugin, ScorePlugin, ReservePlugin, PermitPlugin, PreBindPlugin):
    name = "Chaos"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        a = args or {}
        self.stall = float(a.get("stall", 0.0))
        self.stall_seconds = float(a.get("stallSeconds", 1.0))
        self.garbage = float(a.get("garbage", 0.0))
        self.rng = random.Random(int(a.get("seed", 0)) ^ os.getpid())

    async def _maybe_stall(self) -> None:
        if self.stall and self.rng.random() < self.stall:
            await asyncio.sleep(self.stall_seconds)

    def _garbage(self) -> bool:
        return bool(self.garbage) and self.rng.random() < self.garbage

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        await self._maybe_stall()
        bad = np.fromiter((rejects(pod.name, n) for n in batch.names), dtype=np.bool_, count=len(batch))
        if self._garbage() and len(batch) > 1:
            bad = bad[:-1]  # an answer for fewer nodes than were asked about
        return FilterResult.from_mask(bad, Code.Unschedulable, "chaos says no")

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        await self._maybe_stall()
        out = np.fromiter((score_of(pod.name, n) for n in batch.names), dtype=np.int64, count=len(batch))
        if self._garbage():
            out += 1000  # out of [0, 100]
        return out

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        await self._maybe_stall()
        if self._garbage():
            raise RuntimeError("chaos broke Reserve")
        return SUCCESS

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        return None

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        await self._maybe_stall()
        return SUCCESS, 0.0

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        await self._maybe_stall()
        return SUCCESS


class Ledger(ReservePlugin, PostBindPlugin):
    """Books of Reserve, Unreserve and PostBind per pod uid (in-process; the harness reads them)."""

    name = "Ledger"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.reserved: dict[str, str] = {}  # uid -> node, between Reserve and Unreserve/PostBind
        self.bound: dict[str, int] = {}  # uid -> PostBind count
        self.unreserved = 0
        self.errors: list[str] = []

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if pod.uid in self.reserved:
            self.errors.append(f"{pod.key} reserved twice without Unreserve")
        self.reserved[pod.uid] = node_name
        return SUCCESS

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        if self.reserved.pop(pod.uid, None) is None:
            self.errors.append(f"{pod.key} unreserved without Reserve")
        self.unreserved += 1

    async def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        if self.reserved.pop(pod.uid, None) != node_name:
            self.errors.append(f"{pod.key} bound to {node_name} without being reserved there")
        self.bound[pod.uid] = self.bound.get(pod.uid, 0) + 1
