"""Spans of the PodGroup cycle (:mod:`framework.scheduler.podgroup`): one trace per group cycle, as
:func:`_wrap_group_cycle` draws it, installed by :func:`framework.observe.instrument.instrument` when
tracing is on (this module registers itself in its ``TRACERS`` on import).

The wrappers are on the scheduler instance, as a pod cycle's are; the points the group cycle runs
outside Framework's methods (PlacementGenerate, PlacementScore, PodGroupPostFilter) open their spans with
:func:`start_point` and :func:`end_point`, which cost one contextvar read outside a traced cycle, and
their plugin calls go through the profile's observer as any plugin call does (a remote plugin's call
span is the parent of its host's spans)."""

from __future__ import annotations

import contextvars
import functools
from collections.abc import Callable
from typing import Any

from pluginhost.status import Status

from .instrument import (
    _INTERNAL,
    TRACERS,
    Instrumentation,
    _child_context,
    _Context,
    _cycle,
    _end_calls,
    _outcome,
    _point_span,
    _status_attrs,
)
from .pointspan import PointSpan
from .tracing import Span, _current

__all__ = ["end_point", "start_point"]

class _Group:
    """What a traced PodGroup cycle gathers for its spans: the algorithm's final result (or the error
    that failed the group first), and its pods' binding cycles still running."""

    __slots__ = ("bound", "cycle_done", "error", "pending", "result", "started")

    def binding(self, inst: Instrumentation, ctx: _Context, coro: Any, pod: Any, host: str) -> Any:
        """The traced binding cycle of one of the group's pods (called as its task is made, so that the
        group's root span waits for it)."""
        self.pending += 1
        self.started += 1
        return _group_binding(inst, ctx, coro, pod, host)

    def __init__(self) -> None:
        self.result: Any = None  # framework.scheduler.podgroup_algorithm.GroupResult
        self.error = ""
        self.pending = 0
        self.bound = 0
        self.started = 0
        self.cycle_done = False


class _Started:
    """A point span started by :func:`start_point`, and the token that made it current."""

    __slots__ = ("span", "token")

    def __init__(self, span: PointSpan, token: contextvars.Token[Any]) -> None:
        self.span = span
        self.token = token


def start_point(point: str) -> _Started | None:
    """The span of an extension point the PodGroup cycle runs outside Framework's wrapped methods
    (PlacementGenerate, PlacementScore, PodGroupPostFilter), made current; None, for one contextvar
    read, outside a traced cycle. The plugin calls the observer records under it become its children."""
    parent = _current.get()
    if parent is None or parent.leaf:
        return None
    span = _point_span(parent, None, point, False, ())
    if span is None:
        return None
    return _Started(span, _current.set(span))


def end_point(started: _Started | None, status: Status | None, attrs: dict[str, Any] | None = None,
              error: BaseException | None = None) -> None:
    """End what :func:`start_point` started: its plugin calls' spans, ``attrs``, the status (or the
    exception the point raised)."""
    if started is None:
        return
    _current.reset(started.token)
    span = started.span
    _end_calls(span)
    if attrs:
        span.attrs.update(attrs)
    if error is not None:
        span.error(f"{type(error).__name__}: {error}")
    else:
        _status_attrs(span, status)
    span.end()


def _under(parent: Span | PointSpan, name: str, attrs: dict[str, Any]) -> Span:
    """A span under ``parent``, or under its plugin call in progress (PodGroupPostFilter runs the
    group's algorithm again inside its call)."""
    call = parent.active
    context = _child_context(parent, parent.span_id if call is None else call.span_id)
    return Span(parent.tracing, name, parent.trace_id, context, _INTERNAL, attrs)


def _traced_step(s: Any, attr: str, name: str, before: Callable[..., dict[str, Any] | None],
                 after: Callable[[Span, Any], None]) -> None:
    """Wrap the scheduler's coroutine method ``attr`` in a span ``name`` inside traced group cycles:
    ``before(*args)`` gives its attributes (None: no span), ``after(span, result)`` adds the outcome."""
    orig = getattr(s, attr)

    @functools.wraps(orig)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        parent = _current.get()
        ctx = _cycle.get()
        if parent is None or parent.leaf or ctx is None or ctx.group is None:
            return await orig(*args, **kwargs)
        attrs = before(*args, **kwargs)
        if attrs is None:
            return await orig(*args, **kwargs)
        span = _under(parent, name, attrs)
        token = _current.set(span)
        try:
            out = await orig(*args, **kwargs)
        except BaseException as exc:
            span.error(f"{type(exc).__name__}: {exc}")
            raise
        else:
            after(span, out)
        finally:
            _current.reset(token)
            _end_calls(span)
            span.end()
        return out

    setattr(s, attr, wrapper)


def _placement_attrs(run: Any, pstate: Any, snapshot: Any, undo: Any, placement: Any = None) -> dict[str, Any] | None:
    if placement is None:  # the one implicit placement of every node: no span of its own
        return None
    return {"outrigger.placement": placement.name, "outrigger.placement.nodes": len(placement.nodes)}


def _placement_done(span: Span, result: Any) -> None:
    span.attrs["outrigger.placement.pods_placed"] = sum(1 for pr in result.pods if pr.status.ok and pr.node)
    _status_attrs(span, result.status)


def _pod_attrs(run: Any, member: Any, *rest: Any) -> dict[str, Any]:
    pod = member.pod
    return {"outrigger.pod": pod.key, "k8s.pod.name": pod.name, "k8s.pod.uid": pod.uid}


def _pod_done(span: Span, result: Any) -> None:
    if result.state is not None:
        span.attrs["outrigger.cycle_id"] = result.state.cycle_id
    if result.node:
        span.attrs["outrigger.selected_node"] = result.node
    _status_attrs(span, result.status)


def _commit_attrs(fwk: Any, info: Any, state: Any, host: str) -> dict[str, Any]:
    pod = info.pod
    return {"outrigger.pod": pod.key, "k8s.pod.name": pod.name, "outrigger.cycle_id": state.cycle_id,
            "outrigger.selected_node": host}


def _nothing(span: Span, result: Any) -> None:
    return None


def _wrap_group_cycle_if_any(inst: Instrumentation) -> None:
    if hasattr(inst.scheduler, "schedule_group"):
        _wrap_group_cycle(inst)


def _wrap_group_cycle(inst: Instrumentation) -> None:
    """One trace per PodGroup cycle (the scheduler's ``schedule_group``)::

        SchedulePodGroup                    group, profile, attempt, its pods, minCount, result, placement
        ├── PodGroupSchedulingCycle         group cycle id, snapshot generation, status
        │   ├── PlacementGenerate           └── PlacementGenerate/<plugin>
        │   ├── Placement                   one per placement tried: name, nodes, pods placed, status
        │   │   └── SchedulePodInGroup      one per pod: its cycle id, node, status
        │   │       └── PreFilter, Filter, PreScore, Score, Reserve (as a pod's)
        │   ├── PlacementScore              └── PlacementScore/<plugin> per placement, NormalizePlacementScore
        │   ├── PodGroupPostFilter
        │   └── PrepareForBinding           one per placed pod: Reserve, Permit
        └── BindingCycle                    one per placed pod (concurrent tasks)

    The root ends when the cycle and every binding cycle it started have ended."""
    s = inst.scheduler
    tracing = inst.tracing
    assert tracing is not None
    schedule_group = s.schedule_group

    @functools.wraps(schedule_group)
    async def traced_schedule_group(group: Any) -> None:
        ns, name = group.namespace, group.group_name
        key = f"{ns}/{name}"
        ctx = _Context(group.pod.scheduler_name, key, group.attempts)
        pg = s.cache.podgroups.get(ns, name)
        attrs: dict[str, Any] = {
            "k8s.namespace.name": ns, "outrigger.podgroup": key, "outrigger.podgroup.name": name,
            "outrigger.profile": ctx.profile, "outrigger.attempt": group.attempts,
            "outrigger.podgroup.pods": [m.pod.key for m in group.members],
        }
        if pg is not None:
            attrs["outrigger.podgroup.min_count"] = pg.min_count
        ctx.root = tracing.start_trace("SchedulePodGroup", attrs, pod=f"podgroup/{key}")
        if ctx.root is None:  # not sampled
            await schedule_group(group)
            return
        if tracing.store is not None:  # `outrigger trace POD` of a member shows its group's last cycle
            for m in group.members:
                tracing.store.begin(ctx.root.trace_id, m.pod.key)
        ctx.group = _Group()
        ctx.cycle_span = ctx.root.child("PodGroupSchedulingCycle")
        ctoken = _cycle.set(ctx)
        stoken = _current.set(ctx.cycle_span)
        try:
            await schedule_group(group)
        finally:
            _current.reset(stoken)
            _cycle.reset(ctoken)
            _end_group_cycle(ctx)

    s.schedule_group = traced_schedule_group
    _wrap_group_outcome(s)
    _traced_step(s, "_default_algorithm", "Placement", _placement_attrs, _placement_done)
    _traced_step(s, "_simulate_pod", "SchedulePodInGroup", _pod_attrs, _pod_done)
    _traced_step(s, "_commit", "PrepareForBinding", _commit_attrs, _nothing)


def _wrap_group_outcome(s: Any) -> None:
    """Record on the traced group's context its cycle id and generation (the first run of the
    algorithm), its final result (``_count_group``) or the error that failed it first."""
    algorithm, count_group, fail_early = s._group_algorithm, s._count_group, s._fail_group_early

    @functools.wraps(algorithm)
    async def group_algorithm(run: Any) -> Any:
        ctx = _cycle.get()
        if ctx is not None and ctx.group is not None and ctx.generation < 0:
            ctx.cycle_id = run.gstate.cycle_id
            ctx.generation = int(run.snapshot.generation)
        return await algorithm(run)

    @functools.wraps(count_group)
    def counted(profile: str, result: Any, seconds: float) -> None:
        ctx = _cycle.get()
        if ctx is not None and ctx.group is not None:
            ctx.group.result = result
        count_group(profile, result, seconds)

    @functools.wraps(fail_early)
    async def failed_early(group: Any, pg: Any, err: str) -> None:
        ctx = _cycle.get()
        if ctx is not None and ctx.group is not None:
            ctx.group.error = err
        await fail_early(group, pg, err)

    s._group_algorithm, s._count_group, s._fail_group_early = group_algorithm, counted, failed_early


def _end_group_cycle(ctx: _Context) -> None:
    group, root, span = ctx.group, ctx.root, ctx.cycle_span
    assert group is not None and root is not None and span is not None
    result = group.result
    status: Status | None = None
    if result is not None:
        st = result.status
        status = None if st.ok else st
        if st.ok:
            outcome = "scheduled"
        elif st.is_rejected:
            outcome = "waiting_on_preemption" if result.waiting_on_preemption else "unschedulable"
        else:
            outcome = "error"
    elif group.error:
        outcome, status = "error", Status.failure(group.error)
    else:
        outcome = "skipped"  # every member left (deleted or placed) before the cycle
    for sp in (root, span):
        a = sp.attrs
        a["outrigger.cycle_id"] = ctx.cycle_id
        a["outrigger.snapshot.generation"] = ctx.generation
        a["outrigger.result"] = outcome
        if result is not None and result.placement:
            a["outrigger.podgroup.placement"] = result.placement
        _status_attrs(sp, status)
    if outcome == "scheduled":
        root.attrs["outrigger.podgroup.assignments"] = [
            f"{pr.info.pod.key}={pr.node}" for pr in result.pods if pr.status.ok and pr.node]
    _end_calls(span)
    span.end()
    group.cycle_done = True
    if group.pending == 0:
        _end_group_root(ctx)


def _end_group_root(ctx: _Context) -> None:
    assert ctx.root is not None and ctx.group is not None
    group = ctx.group
    if group.result is not None and group.result.status.ok:
        ctx.root.attrs["outrigger.podgroup.bound"] = group.bound
        if group.started and group.bound == group.started:
            ctx.root.attrs["outrigger.result"] = "bound"  # as a pod's root says once its binding cycle is over
    ctx.root.end()


async def _group_binding(inst: Instrumentation, ctx: _Context, coro: Any, pod: Any, host: str) -> None:
    """One placed pod's binding cycle, a child of the group's root span."""
    group, root = ctx.group, ctx.root
    assert group is not None and root is not None
    span = root.child("BindingCycle", {"outrigger.pod": pod.key, "k8s.pod.name": pod.name,
                                       "outrigger.selected_node": host})
    token = _current.set(span)
    try:
        await coro
    finally:
        _current.reset(token)
        # The cache keeps a pod whose binding succeeded on its node and forgets one whose binding failed
        # (the pod's record may learn its node later, from the API server's watch).
        bound = inst.scheduler.cache.node_of(pod.uid) == host
        result, status = ("bound", None) if bound else _outcome(inst, pod.uid)
        span.attrs["outrigger.result"] = result
        _status_attrs(span, status)
        _end_calls(span)
        span.end()
        group.bound += bound
        group.pending -= 1
        if group.pending == 0 and group.cycle_done:
            _end_group_root(ctx)


TRACERS.append(_wrap_group_cycle_if_any)
