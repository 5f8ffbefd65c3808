"""Fake plugins for the remote-plugin tests, usable in-process and from a plugin host process.

The same classes run both ways: ``tests/test_remote.py`` registers them in-process, or starts
``outrigger plugin serve test_remote_fakes:fake_plugins`` with the plugin specs in the environment and
lets the framework reach them over gRPC. Behaviour is *declarative* (JSON, delivered as the plugins'
``pluginConfig`` args, so remote runs also exercise Configure), and every call is appended to a JSON
lines file named in the args, so both runs produce the same call log.

This module has no tests (pytest collects nothing here) and does not import pytest: a plugin host
imports it.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import Pod
from pluginhost.plugin import (
    POINT_CLASSES,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterResult,
    Handle,
    NodeBatch,
    NodeToStatus,
    PermitPlugin,
    Plugin,
    PostFilterResult,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    QueuedPodInfo,
    QueueSortPlugin,
    ScoreExtensions,
)
from pluginhost.status import SUCCESS, Code, Status

SPEC_ENV = "OUTRIGGER_TEST_FAKES"
REPLICA_ENV = "OUTRIGGER_TEST_REPLICA"
BEHAVIOUR_ENV = "OUTRIGGER_TEST_BEHAVIOUR"
NO_VICTIMS = "fake preemption found no victims"
BIND = "bind"

# ---- the behaviour language ------------------------------------------------------------------------


def st(code: str, *reasons: str) -> dict[str, Any]:
    """A status answer, e.g. ``st("Unschedulable", "gate closed")``."""
    return {"code": code, "reasons": list(reasons)}


def boom(message: str) -> dict[str, Any]:
    """The plugin raises ``RuntimeError(message)``."""
    return {"raise": message}


def per_pod(default: Any = None, **pods: Any) -> dict[str, Any]:
    return {"pods": pods, "default": default}


def per_node(default: Any = None, **nodes: Any) -> dict[str, Any]:
    return {"nodes": nodes, "default": default}


def wait(seconds: float) -> dict[str, Any]:
    return {"wait": seconds}


def only(*nodes: str) -> dict[str, Any]:
    return {"only": list(nodes)}


def nominate(node: str) -> dict[str, Any]:
    return {"nominate": node}


def _resolve(spec: Any, pod: Pod, node: str | None) -> Any:
    while isinstance(spec, dict) and ("pods" in spec or "nodes" in spec):
        if "pods" in spec:
            spec = spec["pods"].get(pod.name, spec.get("default"))
        else:
            spec = spec["nodes"].get(node, spec.get("default"))
    if isinstance(spec, dict) and "raise" in spec:
        raise RuntimeError(spec["raise"])
    return spec


def _status(spec: Any, default: Status = SUCCESS) -> Status:
    if spec is None:
        return default
    return Status(Code[spec["code"]], tuple(spec.get("reasons", ())))


def _status_json(status: Status) -> list[Any]:
    return [status.code.name, list(status.reasons), status.plugin]


# ---- the fake --------------------------------------------------------------------------------------


class DeclarativeFake:
    """Every extension point's method; each answers from ``args["behaviour"][point]``.

    Defaults: Success everywhere, score 0, PostFilter Unschedulable (no victims), Bind binds through
    the handle. Mixed into classes deriving from only the point base classes a test enables.
    """

    name = ""

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        args = args or {}
        # $OUTRIGGER_TEST_BEHAVIOUR overrides the args' behaviour: a host answering otherwise than the
        # profile says (a shadow's new version, configured with the live plugin's args).
        override = os.environ.get(BEHAVIOUR_ENV)
        self.b: dict[str, Any] = json.loads(override) if override else args.get("behaviour", {})
        self.calls_file: str = args.get("calls", "")
        self.handle = handle

    def _log(self, *call: Any) -> None:
        # A host started with $OUTRIGGER_TEST_REPLICA logs to its own file: calls counted per replica.
        tag = os.environ.get(REPLICA_ENV)
        with open(f"{self.calls_file}.{tag}" if tag else self.calls_file, "a", encoding="utf-8") as fh:
            fh.write(json.dumps([*call]) + "\n")

    def _get(self, point: str, pod: Pod, node: str | None = None) -> Any:
        return _resolve(self.b.get(point), pod, node)

    async def _slow(self, point: str) -> None:
        """``behaviour["slow"] = {"point": P, "seconds": S, "marker": FILE}``: the first call at P (the
        marker file does not exist yet, across processes) takes S seconds, after being logged."""
        slow = self.b.get("slow")
        if not slow or slow["point"] != point or os.path.exists(slow["marker"]):
            return
        with open(slow["marker"], "w", encoding="utf-8") as fh:
            fh.write(str(os.getpid()))
        await asyncio.sleep(float(slow["seconds"]))

    def _state_io(self, point: str, state: CycleState) -> None:
        """``behaviour["writes"][point] = {key: json}`` writes StateValues; ``behaviour["reads"][point] =
        [key, ...]`` logs what the plugin reads (through the declared keys or the slow path)."""
        from pluginhost.state import StateValue

        for key, value in self.b.get("writes", {}).get(point, {}).items():
            state.write(key, StateValue.json(value))
        reads = self.b.get("reads", {}).get(point)
        if reads:
            got = {}
            for key in reads:
                v = state.get(key)
                got[key] = v.as_json() if isinstance(v, StateValue) else None
            self._log("read", self.name, point, got)

    async def pre_enqueue(self, pod: Pod) -> Status:
        self._log("preEnqueue", self.name, pod.name)
        return _status(self._get("preEnqueue", pod))

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        self._log("preFilter", self.name, pod.name)
        self._state_io("preFilter", state)
        ans = self._get("preFilter", pod)
        if isinstance(ans, dict) and "only" in ans:
            return PreFilterResult(frozenset(ans["only"])), SUCCESS
        return None, _status(ans)

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        statuses = []
        for node in batch.names:
            self._log("filter", self.name, pod.name, node)
            statuses.append(_status(self._get("filter", pod, node)))
        self._state_io("filter", state)
        await self._slow("filter")
        return FilterResult.from_statuses(statuses)

    async def post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        assert state.snapshot is not None
        seen = {n: _status_json(statuses.get(n)) for n in state.snapshot.table.names}
        self._log("postFilter", self.name, pod.name, seen)
        ans = self._get("postFilter", pod)
        if isinstance(ans, dict) and "nominate" in ans:
            return PostFilterResult(ans["nominate"]), SUCCESS
        return None, _status(ans, Status(Code.Unschedulable, (NO_VICTIMS,)))

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        self._log("preScore", self.name, pod.name, list(nodes.names))
        return _status(self._get("preScore", pod))

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        self._log("score", self.name, pod.name, list(batch.names))
        if "scores" in self.b:  # the whole answer at once (e.g. of the wrong length)
            return np.asarray(_resolve(self.b["scores"], pod, None), dtype=np.int64)
        return np.asarray([self._get("score", pod, n) or 0 for n in batch.names], dtype=np.int64)

    async def normalize_score(
        self, state: CycleState, pod: Pod, batch: NodeBatch, scores: npt.NDArray[np.int64]
    ) -> Status:
        self._log("normalizeScore", self.name, pod.name, [int(x) for x in scores])
        spec = self.b.get("normalize") or {}
        if "set" in spec:
            scores[:] = spec["set"]
        return _status(spec.get("status"))

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self._log("reserve", self.name, pod.name, node_name)
        return _status(self._get("reserve", pod, node_name))

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self._log("unreserve", self.name, pod.name, node_name)

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        self._log("permit", self.name, pod.name, node_name)
        ans = self._get("permit", pod, node_name)
        if isinstance(ans, dict) and "wait" in ans:
            return Status.wait(), float(ans["wait"])
        return _status(ans), 0.0

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self._log("preBind", self.name, pod.name, node_name)
        return _status(self._get("preBind", pod, node_name))

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        self._log("bind", self.name, pod.name, node_name)
        ans = self._get("bind", pod, node_name)
        if ans is None or ans == BIND:
            assert self.handle is not None
            return await self.handle.bind_pod(pod, node_name)
        return _status(ans)

    async def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self._log("postBind", self.name, pod.name, node_name)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Class-level (a host reads it for the manifest): the events a test wants are in the class.
        return [ClusterEventWithHint(ClusterEvent(r, ActionType[a])) for r, a in type(self).events]  # type: ignore[attr-defined]


def fake_class(name: str, points: Sequence[str], *, normalize: bool = False,
               events: Sequence[tuple[str, str]] = (), state_keys: Sequence[str] = ()) -> type[Plugin]:
    """A fake deriving from exactly the base classes of ``points`` (plus NormalizeScore / events)."""
    bases: list[type] = [DeclarativeFake, *(POINT_CLASSES[p] for p in points)]
    if normalize:
        bases.append(ScoreExtensions)
    if events:
        bases.append(EnqueueExtensions)
    attrs = {"name": name, "events": list(events), "state_keys": tuple(state_keys)}
    return type(f"Fake{name}", tuple(bases), attrs)


def fake_plugins() -> list[type[Plugin]]:
    """The classes named in ``$OUTRIGGER_TEST_FAKES`` (what a test's plugin host serves)."""
    specs = json.loads(os.environ[SPEC_ENV])
    return [
        fake_class(s["name"], s["points"], normalize=s.get("normalize", False),
                   events=[tuple(e) for e in s.get("events", ())], state_keys=s.get("state_keys", ()))
        for s in specs
    ]



class ReverseNameSort(QueueSortPlugin):
    """A QueueSort plugin that pops pods in reverse name order (by key: one call per enqueue)."""

    name = "ReverseNameSort"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        pass

    def sort_key(self, info: QueuedPodInfo) -> tuple[int, ...]:
        return tuple(-ord(c) for c in info.pod.name)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.sort_key(a) < self.sort_key(b)


class ContractFake(PreFilterPlugin, PermitPlugin, PreBindPlugin):
    """PreFilterExtensions, PreBindPreFlight and the call context, for the contract tests.

    PreFilter starts a counter in CycleState (a declared key); AddPod/RemovePod move it (their writes
    ride back on the replies) and refuse a pod named "blocker"; PreBindPreFlight skips pods named
    "skip-*"; Permit logs what ``pluginhost.context()`` says.
    """

    name = "Contract"
    state_keys = ("Contract/count",)

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.calls_file = (args or {}).get("calls", "")
        self.args = args or {}

    def _log(self, *call: Any) -> None:
        with open(self.calls_file, "a", encoding="utf-8") as fh:
            fh.write(json.dumps([*call]) + "\n")

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        from pluginhost.state import StateValue

        state.write("Contract/count", StateValue.json(0))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return _ContractExtensions(self)

    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return Status.skip() if pod.name.startswith("skip") else SUCCESS

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        from pluginhost.context import context, in_host

        if not in_host():
            self._log("context", None)
        else:
            ctx = context()
            assert ctx.pod is not None and ctx.state is state
            self._log("context", {"plugin": ctx.plugin, "point": ctx.point, "profile": ctx.profile,
                                  "cycle_id": ctx.cycle_id, "pod": ctx.pod.name, "args": sorted(ctx.args),
                                  "handle": type(ctx.handle).__name__})
        return SUCCESS, 0.0


class _ContractExtensions(PreFilterExtensions):
    def __init__(self, plugin: ContractFake) -> None:
        self.plugin = plugin

    async def _move(self, state: CycleState, pod: Pod, other: Pod, node_row: int, step: int) -> Status:
        from pluginhost.state import StateValue

        assert state.snapshot is not None
        node = state.snapshot.table.names[node_row]
        self.plugin._log("addPod" if step > 0 else "removePod", pod.name, other.name, node)
        if other.name == "blocker":
            return Status.failure(f"{other.name} cannot go to {node}")
        state.write("Contract/count", StateValue.json(state.read("Contract/count").as_json() + step))
        return SUCCESS

    async def add_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return await self._move(state, pod, other, node_row, +1)

    async def remove_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return await self._move(state, pod, other, node_row, -1)
