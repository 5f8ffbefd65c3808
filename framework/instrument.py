"""Instrumentation of a scheduler: spans, metrics and debug scores around its cycles, extension points
and plugin calls, without a line of it in the runtime.

:func:`instrument` wraps, on the instances of one :class:`~framework.scheduler.Scheduler` (never on the
classes): ``schedule_one`` and ``_binding_cycle`` (the scheduling context: its root span, the result and
duration metrics), each profile's ``Framework.run_*`` (a span and a duration per extension point), and
the point methods of each plugin instance (a span per call; the plugin metric for a sample of contexts).
The runtime stays a loop over plugins with no observability in it, and a scheduler that is not
instrumented pays nothing. Wrappers are installed only for what is on: tracing or metrics wrap the
points and plugins; debug scores wrap ``run_score`` and ``run_reserve`` alone.

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
from opentelemetry.trace import SpanKind

from pluginhost.plugin import ScoreExtensions
from pluginhost.status import Code, Status

from .debugscores import DebugScores
from .metrics import SchedulerMetrics
from .tracing import Span, Tracing, _current

__all__ = ["Instrumentation", "instrument"]

log = logging.getLogger("outrigger.instrument")

_cycle: contextvars.ContextVar[_Context | None] = contextvars.ContextVar("outrigger_cycle", default=None)
_rng = random.Random()


class _Context:
    """One scheduling context as the wrappers see it."""

    __slots__ = ("attempt", "binding", "cycle_id", "cycle_span", "feasible", "generation", "plugin_metrics",
                 "pod_key", "profile", "root", "scores", "selected")

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


_CODE_NAMES = {c: c.name for c in Code}  # Enum.name is a property lookup; this is one dict lookup


def _code(status: Status | None) -> str:
    return "Success" if status is None else _CODE_NAMES[status.code]


def _status_attrs(span: Span, status: Status | None) -> None:
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


def _filter_status(out: Any) -> Status | None:
    codes = out.codes
    if codes.shape[0] and bool(np.any(codes != 0)):
        return Status(Code.Unschedulable)
    return None


# Per point list of a Framework: (method of the plugin, point name, status reader, leaf span).
_PLUGIN_METHODS: dict[str, list[tuple[str, str, Callable[[Any], Status | None], bool]]] = {
    "pre_filter_plugins": [("pre_filter", "PreFilter", _second, False)],
    "filter_plugins": [("filter", "Filter", _filter_status, False)],
    "post_filter_plugins": [("post_filter", "PostFilter", _second, True)],
    "pre_score_plugins": [("pre_score", "PreScore", _first, False)],
    "score_plugins": [("score", "Score", _none, False), ("normalize_score", "NormalizeScore", _first, False)],
    "reserve_plugins": [("reserve", "Reserve", _first, False), ("unreserve", "Unreserve", _none, False)],
    "permit_plugins": [("permit", "Permit", lambda out: out[0], False)],
    "pre_bind_plugins": [("pre_bind", "PreBind", _first, False)],
    "bind_plugins": [("bind", "Bind", _first, False)],
    "post_bind_plugins": [("post_bind", "PostBind", _none, False)],
}


@dataclass
class Instrumentation:
    """What :func:`instrument` installed on a scheduler."""

    scheduler: Any
    tracing: Tracing | None = None
    metrics: SchedulerMetrics | None = None
    scores: DebugScores | None = None


def instrument(
    scheduler: Any,
    *,
    tracing: Tracing | None = None,
    metrics: SchedulerMetrics | None = None,
    scores: DebugScores | None = None,
) -> Instrumentation:
    """Install spans (``tracing``), metrics and debug scores on ``scheduler`` (see the module docstring).
    Call once, after the scheduler (and its remote plugins) are built, before it runs."""
    inst = Instrumentation(scheduler, tracing, metrics, scores)
    if tracing is None and metrics is None and scores is None:
        return inst
    _wrap_scheduler(inst)
    for fwk in scheduler.profiles.values():
        if tracing is not None or metrics is not None:
            for attr, point, status_of in _POINTS:
                _wrap_point(inst, fwk, attr, point, status_of)
            _wrap_plugins(inst, fwk)
        elif scores is not None:
            _wrap_point(inst, fwk, "run_score", "Score", _error_field)
            _wrap_point(inst, fwk, "run_reserve", "Reserve", _first)
    return inst


# ---- the scheduling context ---------------------------------------------------------------------


def _wrap_scheduler(inst: Instrumentation) -> None:
    s = inst.scheduler
    tracing, metrics = inst.tracing, inst.metrics
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
            rec = inst.scheduler.pods.get(uid)
            bound = rec is not None and rec.pod.node_name == ctx.selected and bool(ctx.selected)
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
    metrics, scores = inst.metrics, inst.scores
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
        record_scores = is_score and scores is not None and scores.enabled and not kwargs.get("record", False)
        if record_scores:
            kwargs["record"] = True
        parent = _current.get()
        span: Span | None = None
        if parent is not None and not parent.leaf:
            if not is_wait:
                span = Span(parent.tracing, point, parent.trace_id, parent._context, SpanKind.INTERNAL,
                                 {"outrigger.extension_point": point})
            else:
                wp = fwk.waiting_pods.get(args[0].uid)
                if wp is not None:  # otherwise nothing waits: no WaitOnPermit span
                    span = Span(parent.tracing, point, parent.trace_id, parent._context, SpanKind.INTERNAL,
                                     {"outrigger.extension_point": point,
                                      "outrigger.permit.waiting_plugins": list(wp.pending_plugins())})
        token = _current.set(span) if span is not None else None
        started = time.perf_counter()
        try:
            out = await orig(*args, **kwargs)
        except BaseException as exc:
            if span is not None:
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
            if span is not None:
                a = span.attrs
                a["outrigger.filter.nodes_in"] = int(args[3].shape[0])
                a["outrigger.filter.to_find"] = int(args[4])
                a["outrigger.filter.nodes_examined"] = int(out.processed)
                a["outrigger.filter.nodes_out"] = feasible
        elif is_score and span is not None:
            span.attrs["outrigger.score.nodes"] = len(args[2])
        if record_scores and scores is not None and out.error is None:
            ctx.scores = scores.observe(args[1], args[2], out, ctx.profile, ctx.attempt)
        if span is not None:
            _status_attrs(span, status)
            span.end()
        return out

    setattr(fwk, attr, wrapper)


# ---- plugin calls -------------------------------------------------------------------------------


def _wrap_plugins(inst: Instrumentation, fwk: Any) -> None:
    from .remote import RemotePlugin

    done: set[tuple[int, str]] = set()
    for list_attr, methods in _PLUGIN_METHODS.items():
        for pl in getattr(fwk, list_attr):
            for method, point, status_of, leaf in methods:
                if method == "normalize_score" and not isinstance(pl, ScoreExtensions):
                    continue
                if (id(pl), method) in done:
                    continue
                done.add((id(pl), method))
                remote = isinstance(pl, RemotePlugin)
                _wrap_plugin_method(inst, pl, method, point, status_of, leaf, remote)
                if method == "filter" and callable(getattr(pl, "prefetch_filter", None)):
                    _wrap_prefetch(pl, remote)


def _wrap_prefetch(pl: Any, remote: bool) -> None:
    """A remote Filter plugin the runtime sends a window ahead of its turn (``prefetch_filter``): its
    span covers sending the window (the host's span is its child); the answer is collected later, when
    the plugin's turn comes, outside it. Called from the plugin's own ``filter``, it adds no span."""
    orig = pl.prefetch_filter
    span_name = f"Filter/{pl.name}"
    attrs = {"outrigger.plugin": pl.name, "outrigger.extension_point": "Filter", "outrigger.filter.prefetch": True}
    if remote:
        attrs["outrigger.remote.endpoint"] = pl.endpoint.name

    @functools.wraps(orig)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _current.get()
        if parent is None or parent.leaf or parent.name == span_name or _cycle.get() is None:
            return await orig(*args, **kwargs)
        span = parent.child(span_name, {**attrs, "outrigger.filter.nodes_in": len(args[2])},
                            SpanKind.CLIENT if remote else SpanKind.INTERNAL)
        token = _current.set(span)
        try:
            return await orig(*args, **kwargs)
        except BaseException as exc:
            span.error(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            _current.reset(token)
            span.end()

    pl.prefetch_filter = wrapper


def _wrap_plugin_method(inst: Instrumentation, pl: Any, method: str, point: str,
                        status_of: Callable[[Any], Status | None], leaf: bool, remote: bool) -> None:
    # The most frequent wrapper (a pod meets 30 to 50 plugin calls): one contextvar read when nothing
    # is recorded; otherwise one span, built in one go, and the plugin's status read once.
    orig = getattr(pl, method)
    metrics = inst.metrics
    name = pl.name
    span_name = f"{point}/{name}"
    kind = SpanKind.CLIENT if remote else SpanKind.INTERNAL
    base_attrs = {"outrigger.plugin": name, "outrigger.extension_point": point}
    if remote:
        base_attrs["outrigger.remote.endpoint"] = pl.endpoint.name
    is_filter = method == "filter"

    async def timed_only(args: Any, kwargs: Any) -> Any:
        # A context in the plugin metric's sample that is not traced: the duration alone.
        assert metrics is not None
        started = time.perf_counter()
        try:
            out = await orig(*args, **kwargs)
        except BaseException:
            metrics.observe_plugin(name, point, "Error", time.perf_counter() - started)
            raise
        metrics.observe_plugin(name, point, _code(status_of(out)), time.perf_counter() - started)
        return out

    @functools.wraps(orig)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _current.get()
        timed = False
        if metrics is not None:
            ctx = _cycle.get()
            timed = ctx is not None and ctx.plugin_metrics
        if parent is None or parent.leaf:
            if timed:
                return await timed_only(args, kwargs)
            return await orig(*args, **kwargs)
        span = Span(parent.tracing, span_name, parent.trace_id, parent._context, kind, base_attrs.copy())
        if leaf:
            span.leaf = True
        token = _current.set(span)
        started = time.perf_counter() if timed else 0.0
        try:
            out = await orig(*args, **kwargs)
        except BaseException as exc:
            span.error(f"{type(exc).__name__}: {exc}")
            span.end()
            if timed and metrics is not None:
                metrics.observe_plugin(name, point, "Error", time.perf_counter() - started)
            raise
        finally:
            _current.reset(token)
        a = span.attrs
        if is_filter:
            # Filter answers carry no Status: Unschedulable when any node was rejected.
            n = len(args[2])
            rejected = int(np.count_nonzero(out.codes))
            a["outrigger.filter.nodes_in"] = n
            a["outrigger.filter.nodes_out"] = n - rejected
            code = a["outrigger.status.code"] = "Unschedulable" if rejected else "Success"
        else:
            status = status_of(out)
            _status_attrs(span, status)
            code = a["outrigger.status.code"]
        if timed and metrics is not None:
            metrics.observe_plugin(name, point, code, time.perf_counter() - started)
        span.end()
        return out

    setattr(pl, method, wrapper)
