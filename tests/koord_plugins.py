"""Plugins for the transformer, what-if and controller tests, served in-process or by a plugin host
process (``outrigger plugin serve koord_plugins:PLUGINS``). No tests here.

- ``ShrinkCpu`` (PreFilter transformer only): a pod annotated ``example.com/shrink-cpu: "<millicores>"``
  is seen by the cycle with that CPU request, and with the label ``shrunk=true``.
- ``StageA`` / ``StageB`` (Filter and Score transformers only): append "a" / "b" to every node's
  ``example.com/stage`` label in the phase's view, so their order shows in the label.
- ``StageGate`` (Filter): a pod annotated ``example.com/want-stage: X`` fits only nodes whose label
  ``example.com/stage`` is X in the Filter view.
- ``StageScore`` (Score): 100 for nodes whose stage label in the Score view is the wanted one, else 0.
- ``ZoneOnly`` (Filter): a pod with the label ``example.com/zone`` fits only nodes with the same
  ``topology.kubernetes.io/zone`` label (what-if tests: a remote Filter that reads node labels).
- ``MarkNodes`` (PostFilter transformer only) and ``PostFilterProbe`` (PostFilter): the probe rejects
  with a reason naming the ``example.com/post`` label it sees on each node ("seen" in the view).
- ``Heartbeat`` (a controller with a PreFilter): while running, writes a line per tick to the file
  named by the environment variable ``HEARTBEAT_FILE`` ("start", "tick", "stop").
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from pluginhost.model import CPU, Pod
from pluginhost.plugin import (
    Controller,
    CycleState,
    FilterPlugin,
    FilterResult,
    FilterTransformer,
    NodeBatch,
    NodeToStatus,
    PostFilterPlugin,
    PostFilterResult,
    PostFilterTransformer,
    PreFilterPlugin,
    PreFilterResult,
    PreFilterTransformer,
    ScorePlugin,
    ScoreTransformer,
)
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.view import NodeChange, PodChange

SHRINK = "example.com/shrink-cpu"
STAGE = "example.com/stage"
WANT = "example.com/want-stage"
ZONE_LABEL = "example.com/zone"
ZONE = "topology.kubernetes.io/zone"


class ShrinkCpu(PreFilterTransformer):
    name = "ShrinkCpu"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def before_pre_filter(self, state: CycleState, pod: Pod) -> tuple[PodChange | None, Status]:
        want = pod.annotations.get(SHRINK)
        if want is None:
            return None, SUCCESS
        return PodChange(requests={CPU: int(want)}, labels={"shrunk": "true"}), SUCCESS


class _Stage(FilterTransformer, ScoreTransformer):
    letter = ""

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    def _changes(self, snapshot: Snapshot, rows: Sequence[int]) -> list[NodeChange]:
        nodes = snapshot.table.nodes
        return [NodeChange(nodes[r].name, labels={STAGE: nodes[r].labels.get(STAGE, "") + self.letter}) for r in rows]

    async def before_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[list[NodeChange] | None, Status]:
        if WANT not in pod.annotations:
            return None, SUCCESS
        return self._changes(snapshot, range(len(snapshot))), SUCCESS

    async def before_score(
        self, state: CycleState, pod: Pod, nodes: NodeBatch
    ) -> tuple[list[NodeChange] | None, Status]:
        if WANT not in pod.annotations:
            return None, SUCCESS
        return self._changes(nodes.snapshot, nodes.rows.tolist()), SUCCESS


class StageA(_Stage):
    name = "StageA"
    letter = "a"


class StageB(_Stage):
    name = "StageB"
    letter = "b"


def _stage_matches(pod: Pod, batch: NodeBatch) -> Any:
    codes, vocab = batch.snapshot.table.label_codes(STAGE)
    code = vocab.get(pod.annotations[WANT], -2)
    return codes[batch.rows] == code


class StageGate(FilterPlugin):
    name = "StageGate"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        if WANT not in pod.annotations:
            return FilterResult.passing(len(batch))
        return FilterResult.from_mask(~_stage_matches(pod, batch), Code.Unschedulable, "node(s) had the wrong stage")


class StageScore(ScorePlugin):
    name = "StageScore"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> Any:
        if WANT not in pod.annotations:
            return np.zeros(len(batch), dtype=np.int64)
        return np.where(_stage_matches(pod, batch), 100, 0).astype(np.int64)


class ZoneOnly(FilterPlugin):
    name = "ZoneOnly"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        want = pod.labels.get(ZONE_LABEL)
        if want is None:
            return FilterResult.passing(len(batch))
        codes, vocab = batch.snapshot.table.label_codes(ZONE)
        ok = codes[batch.rows] == vocab.get(want, -2)
        return FilterResult.from_mask(~ok, Code.UnschedulableAndUnresolvable, f"node(s) not in zone {want}")


POST = "example.com/post"


class MarkNodes(PostFilterTransformer):
    name = "MarkNodes"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def before_post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[list[NodeChange] | None, Status]:
        return [NodeChange(n, labels={POST: "seen"}) for n in snapshot.names], SUCCESS


class PostFilterProbe(PostFilterPlugin):
    name = "PostFilterProbe"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        snap = state.snapshot
        assert snap is not None
        seen = ", ".join(f"{n.labels.get(POST, 'nothing')} on {n.name}" for n in snap.nodes)
        return None, Status(Code.Unschedulable, (f"post-filter saw {seen}",))


class Heartbeat(PreFilterPlugin, Controller):
    name = "Heartbeat"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        self.path = (args or {}).get("file") or os.environ.get("HEARTBEAT_FILE", "")
        self.interval = float((args or {}).get("interval", 0.05))
        self._task: asyncio.Task[None] | None = None

    def _write(self, line: str) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    async def start(self) -> None:
        self._write("start")
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def _loop(self) -> None:
        for _ in range(100_000):  # bounded: stop() ends it long before
            await asyncio.sleep(self.interval)
            self._write("tick")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._write("stop")

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        return None, SUCCESS


PLUGINS = [ShrinkCpu, StageA, StageB, StageGate, StageScore, ZoneOnly, MarkNodes, PostFilterProbe]
ALL = {cls.name: cls for cls in (*PLUGINS, Heartbeat)}
