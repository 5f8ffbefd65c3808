"""Instrumentation of a scheduler: spans, metrics and debug scores around its cycles, extension points
and plugin calls, without a line of it in the runtime.

:func:`instrument` wraps, on the instances of one :class:`~framework.scheduler.Scheduler` (never on the
classes): ``schedule_one`` and ``_binding_cycle`` (the scheduling context: its root span, the result and
duration metrics) and each profile's ``Framework.run_*`` (a span and a duration per extension point).
Plugin calls are not wrapped: the runtime tells each profile's ``Framework.observer`` (an
:class:`_Observer` installed here) when a call starts and how it ended, and the observer records it on
the extension point's span; when the point ends the calls' records are closed and queued as its child
spans, written from the records on the export thread without span objects (the plugin metric is
observed for a sample of contexts). A scheduler that is not instrumented pays one
``is None`` test per plugin call. Wrappers are installed only for what is on: tracing or metrics wrap
the points and install the observer; debug scores wrap ``run_score`` and ``run_reserve`` alone.

Inside a scheduling context the wrappers find it in a contextvar (set by the ``schedule_one`` wrapper and
copied into the binding cycle's task by asyncio), so explain and other callers outside a cycle run
through untouched.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from pluginhost.status import Code, Status

from ..hooks import OutOfProcess
from .debugscores import DebugScores
from .metrics import SchedulerMetrics
from .pointspan import PointSpan
from .tracing import PluginCall, Span, Tracing, _current, _time_ns

__all__ = ["Instrumentation", "instrument"]

log = logging.getLogger("outrigger.instrument")

_cycle: contextvars.ContextVar[_Context | None] = contextvars.ContextVar("outrigger_cycle", default=None)
#: Installers of further spans, each called with the :class:`Instrumentation` when tracing is on:
#: :mod:`framework.observe.groupcycle` adds the PodGroup cycle's when imported (the PodGroup cycle's
#: runners import it, so it is there whenever a scheduler can run group cycles).
TRACERS: list[Callable[[Instrumentation], None]] = []
_rng = random.Random()


class _Context:
    """One scheduling context as the wrappers see it."""

    __slots__ = ("attempt", "binding", "console", "cycle_id", "cycle_span", "feasible", "generation", "group",
                 "plugin_metrics", "pod_key", "profile", "root", "scores", "selected")

    def __init__(self, profile: str, pod_key: str, attempt: int) -> None:
        self.profile = profile
        self.pod_key = pod_key
        self.attempt = attempt
        self.root: Span | None = None
        self.cycle_span: Span | None = None
        self.plugin_metrics = False
        self.binding = False
        self.cycle_id = ""
        self.generation = -1
        self.feasible = -1
        self.selected = ""
        self.scores: dict[str, Any] | None = None
        self.console: Any = None  # the console's record of this attempt, while someone looks at it
        self.group: Any = None  # a PodGroup cycle's (framework.observe.groupcycle)


_INTERNAL = SpanKind.INTERNAL  # an enum member read from its class costs a Python-level __getattr__
_ERROR = Code.Error
_CODE_NAMES = {c: c.name for c in Code}  # Enum.name is a property lookup; this is one dict lookup


def _code(status: Status | None) -> str:
    return "Success" if status is None else _CODE_NAMES[status.code]


def _status_attrs(span: Span | PointSpan, status: Status | None) -> None:
    a = span.attrs
    if status is None:
        a["outrigger.status.code"] = "Success"
        return
    code = status.code
    a["outrigger.status.code"] = _CODE_NAMES[code]
    if status.reasons:
        a["outrigger.status.reasons"] = list(status.reasons)
    if status.plugin:
        a["outrigger.status.plugin"] = status.plugin
    if code is Code.Error:
        span.error(status.message() or "Error")


# How to read the Status out of each run_* method's result (None: Success).
def _first(out: Any) -> Status | None:
    return out  # type: ignore[no-any-return]


def _second(out: Any) -> Status | None:
    return out[1]  # type: ignore[no-any-return]


def _error_field(out: Any) -> Status | None:
    return out.error  # type: ignore[no-any-return]


def _none(out: Any) -> Status | None:
    return None


_POINTS: list[tuple[str, str, Callable[[Any], Status | None]]] = [
    ("run_sign", "Sign", _none),
    ("run_pre_filter", "PreFilter", _second),
    ("run_filter", "Filter", _error_field),
    ("run_post_filter", "PostFilter", _second),
    ("run_pre_score", "PreScore", _first),
    ("run_score", "Score", _error_field),
    ("run_reserve", "Reserve", _first),
    ("run_unreserve", "Unreserve", _none),
    ("run_permit", "Permit", _first),
    ("wait_on_permit", "WaitOnPermit", _first),
    ("run_pre_bind", "PreBind", _first),
    ("run_bind", "Bind", _first),
    ("run_post_bind", "PostBind", _none),
]


@dataclass
class Instrumentation:
    """What :func:`instrument` installed on a scheduler."""

    scheduler: Any
    tracing: Tracing | None = None
    metrics: SchedulerMetrics | None = None
    scores: DebugScores | None = None
    console: Any = None


def instrument(
    scheduler: Any,
    *,
    tracing: Tracing | None = None,
    metrics: SchedulerMetrics | None = None,
    scores: DebugScores | None = None,
    console: Any = None,
) -> Instrumentation:
    """Install spans (``tracing``), metrics, debug scores and the web console's attempt records
    (``console``, a :class:`framework.console.Console`: it needs ``metrics``) on ``scheduler`` (see the
    module docstring). Call once, after the scheduler (and its remote plugins) are built, before it runs."""
    inst = Instrumentation(scheduler, tracing, metrics, scores, console)
    if tracing is None and metrics is None and scores is None:
        return inst
    _wrap_scheduler(inst)
    if tracing is not None:
        for install in TRACERS:
            install(inst)
    for fwk in scheduler.profiles.values():
        _wrap_framework(inst, fwk)
    # Profiles built later (a plugin host's manifest changed) are instrumented the same way.
    listeners = getattr(scheduler, "profile_listeners", None)
    if listeners is not None:
        listeners.append(functools.partial(_wrap_framework, inst))
    return inst


def _wrap_framework(inst: Instrumentation, fwk: Any) -> None:
    if inst.tracing is not None or inst.metrics is not None:
        for attr, point, status_of in _POINTS:
            _wrap_point(inst, fwk, attr, point, status_of)
        fwk.observer = _Observer(inst.metrics)
    elif inst.scores is not None:
        _wrap_point(inst, fwk, "run_score", "Score", _error_field)
        _wrap_point(inst, fwk, "run_reserve", "Reserve", _first)


# ---- the scheduling context ---------------------------------------------------------------------


def _wrap_scheduler(inst: Instrumentation) -> None:
    s = inst.scheduler
    tracing, metrics, console = inst.tracing, inst.metrics, inst.console
    schedule_one = s.schedule_one
    binding_cycle = s._binding_cycle

    @functools.wraps(schedule_one)
    async def traced_schedule_one(info: Any) -> None:
        pod = info.pod
        rec = s.pods.get(pod.uid)
        if rec is None or pod.scheduler_name not in s.profiles or rec.pod.node_name:
            await schedule_one(info)  # not an attempt: dropped from the queue
            return
        ctx = _Context(pod.scheduler_name, pod.key, info.attempts)
        if console is not None:
            ctx.console = console.begin(pod.key, pod.scheduler_name, info.attempts)
        if metrics is not None and metrics.plugin_sample > 0:
            ctx.plugin_metrics = _rng.random() < metrics.plugin_sample
        if tracing is not None:
            ctx.root = tracing.start_trace("SchedulePod", {
                "k8s.pod.name": pod.name,
                "k8s.namespace.name": pod.namespace,
                "k8s.pod.uid": pod.uid,
                "outrigger.pod": pod.key,
                "outrigger.profile": pod.scheduler_name,
                "outrigger.attempt": info.attempts,
            }, pod=pod.key)
            if ctx.root is not None:
                ctx.cycle_span = ctx.root.child("SchedulingCycle")
        ctoken = _cycle.set(ctx)
        stoken = _current.set(ctx.cycle_span)
        started = time.perf_counter()
        try:
            await schedule_one(info)
        finally:
            elapsed = time.perf_counter() - started
            _current.reset(stoken)
            _cycle.reset(ctoken)
            _end_scheduling_cycle(inst, ctx, pod.uid, elapsed)

    def traced_binding_cycle(*args: Any, **kwargs: Any) -> Any:
        # Called synchronously inside schedule_one (create_task(self._binding_cycle(...))), in its context.
        coro = binding_cycle(*args, **kwargs)
        ctx = _cycle.get()
        if ctx is None:
            return coro
        if ctx.group is not None:  # one of a placed group's pods: (fwk, state, info, assumed, host)
            return ctx.group.binding(inst, ctx, coro, args[3], args[4])
        ctx.binding = True
        pod = args[3] if len(args) > 3 else kwargs["assumed"]
        return _binding(inst, ctx, coro, pod.uid)

    s.schedule_one = traced_schedule_one
    s._binding_cycle = traced_binding_cycle


def _outcome(inst: Instrumentation, uid: str) -> tuple[str, Status | None]:
    rec = inst.scheduler.pods.get(uid)
    if rec is None:
        return "deleted", None
    status = rec.last_status
    if status is None or status.ok:
        return "unschedulable", status
    return ("error" if status.code is Code.Error else "unschedulable"), status


def _end_scheduling_cycle(inst: Instrumentation, ctx: _Context, uid: str, elapsed: float) -> None:
    if ctx.binding:
        result, status = "scheduled", None
    else:
        result, status = _outcome(inst, uid)
    if inst.metrics is not None:
        inst.metrics.attempts.labels(result, ctx.profile).inc()
        inst.metrics.attempt_duration.labels(result, ctx.profile).observe(elapsed)
    if ctx.scores is not None and ctx.selected:
        ctx.scores["selected"] = ctx.selected
    if ctx.console is not None:
        inst.console.finish(ctx.console, result, status, elapsed, ctx.selected,
                            ctx.root.trace_id if ctx.root is not None else 0)
    root, span = ctx.root, ctx.cycle_span
    if root is None or span is None:
        return
    if not ctx.generation >= 0 and inst.scheduler.current_snapshot is not None:
        ctx.generation = int(inst.scheduler.current_snapshot.generation)
    for sp in (root, span):
        a = sp.attrs
        a["outrigger.cycle_id"] = ctx.cycle_id
        a["outrigger.snapshot.generation"] = ctx.generation
        a["outrigger.result"] = result
        if ctx.feasible >= 0:
            a["outrigger.feasible_nodes"] = ctx.feasible
        if ctx.selected:
            a["outrigger.selected_node"] = ctx.selected
    _status_attrs(span, status)
    span.end()
    if not ctx.binding:
        _status_attrs(root, status)
        root.end()


async def _binding(inst: Instrumentation, ctx: _Context, coro: Any, uid: str) -> None:
    span = ctx.root.child("BindingCycle") if ctx.root is not None else None
    token = _current.set(span)  # this task's own copy of the context
    try:
        await coro
    finally:
        _current.reset(token)
        if span is not None and ctx.root is not None:
            # The cache keeps a pod whose binding succeeded on its node and forgets one whose binding
            # failed; the pod's own record learns its node only from the API server's watch, later.
            bound = bool(ctx.selected) and inst.scheduler.cache.node_of(uid) == ctx.selected
            result, status = ("bound", None) if bound else _outcome(inst, uid)
            span.attrs["outrigger.result"] = result
            _status_attrs(span, status)
            span.end()
            ctx.root.attrs["outrigger.result"] = result
            _status_attrs(ctx.root, status)
            ctx.root.end()


# ---- extension points ---------------------------------------------------------------------------


def _wrap_point(inst: Instrumentation, fwk: Any, attr: str, point: str,
                status_of: Callable[[Any], Status | None]) -> None:
    orig = getattr(fwk, attr)
    metrics, scores, console = inst.metrics, inst.scores, inst.console
    profile = fwk.profile
    is_filter, is_score, is_reserve = attr == "run_filter", attr == "run_score", attr == "run_reserve"
    is_wait = attr == "wait_on_permit"

    @functools.wraps(orig)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = _cycle.get()
        if ctx is None:
            return await orig(*args, **kwargs)
        if args and ctx.generation < 0 and not is_wait:
            state = args[0]
            ctx.cycle_id = state.cycle_id
            ctx.generation = int(state.snapshot.generation) if state.snapshot is not None else 0
        if is_reserve:
            ctx.selected = args[2]
        record_scores = is_score and not kwargs.get("record", False) and (
            (scores is not None and scores.enabled) or ctx.console is not None)
        if record_scores:
            kwargs["record"] = True
        parent = _current.get()
        span = _point_span(parent, fwk, point, is_wait, args) if parent is not None and not parent.leaf else None
        token = _current.set(span) if span is not None else None
        started = time.perf_counter()
        try:
            out = await orig(*args, **kwargs)
        except BaseException as exc:
            if span is not None:
                _end_calls(span)
                span.error(f"{type(exc).__name__}: {exc}")
                span.end()
            raise
        finally:
            if token is not None:
                _current.reset(token)
        elapsed = time.perf_counter() - started
        status = status_of(out)
        if metrics is not None:
            metrics.observe_point(point, _code(status), profile, elapsed)
        if is_filter:
            feasible = int(out.feasible.shape[0])
            # One-node runs (the nominated node, preemption's what-ifs) do not replace the cycle's count.
            if ctx.feasible < 0 or int(args[3].shape[0]) > 1:
                ctx.feasible = feasible
                if ctx.console is not None:
                    console.filtered(ctx.console, int(out.processed), feasible, args[5].node_to_status.statuses)
            if span is not None:
                a = span.attrs
                a["outrigger.filter.nodes_in"] = int(args[3].shape[0])
                a["outrigger.filter.to_find"] = int(args[4])
                a["outrigger.filter.nodes_examined"] = int(out.processed)
                a["outrigger.filter.nodes_out"] = feasible
        elif is_score and span is not None:
            span.attrs["outrigger.score.nodes"] = len(args[2])
        if record_scores and out.error is None:
            if scores is not None and scores.enabled:
                ctx.scores = scores.observe(args[1], args[2], out, ctx.profile, ctx.attempt)
            if ctx.console is not None:
                console.scored(ctx.console, args[2], out)
        if span is not None:
            _end_calls(span)
            _status_attrs(span, status)
            span.end()
        return out

    setattr(fwk, attr, wrapper)


def _point_span(parent: Span | PointSpan, fwk: Any, point: str, is_wait: bool,
                args: tuple[Any, ...]) -> PointSpan | None:
    """The extension point's span under ``parent`` (None inside a leaf call, or when nothing waits): a
    record written on the export side (:mod:`.pointspan`), not a ``ReadableSpan``."""
    # Inside a plugin call (a point a plugin runs), the call is the parent: its span id is known.
    call = parent.active
    if call is not None and call.leaf:
        return None
    if not is_wait:
        return PointSpan(parent if call is None else call, parent.tracing, point, {"outrigger.extension_point": point})
    wp = fwk.waiting_pods.get(args[0].uid)
    if wp is None:  # nothing waits: no WaitOnPermit span
        return None
    return PointSpan(parent if call is None else call, parent.tracing, point,
                     {"outrigger.extension_point": point,
                      "outrigger.permit.waiting_plugins": list(wp.pending_plugins())})


def _child_context(span: Span | PointSpan, span_id: int) -> SpanContext:
    return SpanContext(span.trace_id, span_id, False, TraceFlags(TraceFlags.SAMPLED))


# ---- plugin calls -------------------------------------------------------------------------------


class _Info:
    """What every span of one plugin at one point shares, computed once."""

    __slots__ = ("attrs", "filter", "kind", "leaf", "name", "point", "span_name")

    def __init__(self, key: str, pl: Any) -> None:
        point = "Filter" if key == "FilterPrefetch" else key
        remote = isinstance(pl, OutOfProcess)
        self.name = pl.name
        self.point = point
        self.span_name = f"{point}/{pl.name}"
        self.kind = SpanKind.CLIENT if remote else SpanKind.INTERNAL
        self.attrs: dict[str, Any] = {"outrigger.plugin": pl.name, "outrigger.extension_point": point}
        if key == "FilterPrefetch":
            self.attrs["outrigger.filter.prefetch"] = True
        if remote:
            self.attrs["outrigger.remote.endpoint"] = pl.served_by
        self.filter = key == "Filter"
        self.leaf = key == "PostFilter"  # preemption's what-ifs below it get no spans


class _Observer:
    """The runtime's plugin-call observer (``Framework.observer``): it records each call on the current
    extension point's span (its child spans' records when the point ends, :func:`_end_calls`) and times the calls
    of contexts in the plugin metric's sample. Nothing wraps the plugins: the runtime calls it."""

    def __init__(self, metrics: SchedulerMetrics | None) -> None:
        self.metrics = metrics
        self.infos: dict[str, dict[str, _Info]] = {}

    def start(self, point: str, plugin: Any, nodes: int = -1) -> PluginCall | None:
        owner = _current.get()
        if owner is not None and (owner.leaf or (owner.active is not None and owner.active.leaf)):
            owner = None
        timed = False
        if self.metrics is not None and point != "FilterPrefetch":
            ctx = _cycle.get()
            timed = ctx is not None and ctx.plugin_metrics
        if owner is None and not timed:
            return None
        by_name = self.infos.get(point)
        if by_name is None:
            by_name = self.infos[point] = {}
        info = by_name.get(plugin.name)
        if info is None:
            info = by_name[plugin.name] = _Info(point, plugin)
        call = PluginCall(self, info, owner, nodes, info.leaf)
        if owner is not None:
            owner.active = call
            calls = owner.calls
            if calls is None:
                owner.calls = [call]
            else:
                calls.append(call)
        if timed:
            call.started = time.perf_counter()
        return call

    def observe(self, call: PluginCall) -> None:
        """The sampled call's duration in the plugin execution histogram (the call has just ended)."""
        assert self.metrics is not None
        code = "Error" if call.error is not None else _call_code(call)
        self.metrics.observe_plugin(call.info.name, call.info.point, code, time.perf_counter() - call.started)


def _call_code(call: PluginCall) -> str:
    result = call.result
    if call.info.filter:
        codes = getattr(result, "codes", None)
        return "Unschedulable" if codes is not None and np.count_nonzero(codes) else "Success"
    return "Success" if result is None else _CODE_NAMES[result.code]


_SUCCESS = (("outrigger.status.code", "Success"),)


def _end_calls(span: Span | PointSpan) -> None:
    """Close the plugin calls recorded on the point's ``span`` (ended or not) and queue them, as the
    records of its child spans: nothing else is built on the scheduling thread (:mod:`.otlp`)."""
    calls = span.calls
    if not calls:
        return
    span.calls = None
    span.active = None
    now = 0
    for call in calls:
        info = call.info
        error = call.error
        end = call.end
        extra: tuple[tuple[str, Any], ...] = ()
        if not end:  # never returned (the cycle was cancelled at the call)
            end = now = now or _time_ns()
            error = "the plugin call did not return"
        elif error is None:
            result = call.result
            if info.filter:
                # Filter answers carry no Status: Unschedulable when any node was rejected.
                codes = getattr(result, "codes", None)
                rejected = int(np.count_nonzero(codes)) if codes is not None else 0
                extra = (("outrigger.filter.nodes_in", call.nodes),
                         ("outrigger.filter.nodes_out", call.nodes - rejected),
                         ("outrigger.status.code", "Unschedulable" if rejected else "Success"))
            elif call.nodes >= 0:  # a Filter window sent ahead
                extra = (("outrigger.filter.nodes_in", call.nodes),)
            elif result is None:
                extra = _SUCCESS
            else:
                extra, error = _result_attrs(result)
        call.close(end, extra, error)
    span.tracing.ended_all(calls)


def _result_attrs(status: Status) -> tuple[tuple[tuple[str, Any], ...], str | None]:
    """A plugin's Status as its span's attributes (reasons as a tuple) and error message."""
    code = status.code
    out: list[tuple[str, Any]] = [("outrigger.status.code", _CODE_NAMES[code])]
    if status.reasons:
        out.append(("outrigger.status.reasons", tuple(status.reasons)))
    if status.plugin:
        out.append(("outrigger.status.plugin", status.plugin))
    return tuple(out), (status.message() or "Error") if code is _ERROR else None
