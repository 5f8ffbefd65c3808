"""Tail sampling: which finished scheduling contexts go to the exporters, decided when a context ends.

Every trace of a context that did not end with its pod bound (unschedulable, an error, the pod deleted;
a cycle that preempts is one: its pod is unschedulable until the victims are gone) is kept, so is every
slow one (its root span lasted at least a duration, or longer than a percentile of the recent
contexts), and of the rest a ratio, chosen by trace id as ``TraceIdRatioBased`` chooses. The in-process
trace store and the web console still see every context; only the exporters are spared. A plugin host
samples by the parent's flag, so it still exports its spans of a context dropped here (a collector's
tail sampling, which sees every service's spans, is the place for a decision across processes).
"""

from __future__ import annotations

import collections
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TailSampler", "TailSampling"]

_SLOW = re.compile(r"^(?:p(?P<pct>\d+(?:\.\d+)?)|(?P<num>\d+(?:\.\d+)?)(?P<unit>ms|s))$")
_MASK = (1 << 64) - 1
# Recent contexts' durations the percentile is taken over, and how often the threshold is recomputed.
WINDOW = 1000
RECOMPUTE_EVERY = 100
# Traces whose root has not ended yet, and decisions remembered for spans ending after their root.
MAX_PENDING = 10_000
MAX_DECIDED = 10_000


@dataclass(frozen=True)
class TailSampling:
    """What tail sampling keeps: failed contexts always, slow ones (``slow_seconds`` or longer, or above
    the ``slow_percentile`` of recent ones; 0 turns a rule off) always, ``ratio`` of the others."""

    ratio: float = 0.0
    slow_seconds: float = 0.0
    slow_percentile: float = 0.0

    @classmethod
    def parse(cls, ratio: str | None, slow: str | None) -> TailSampling | None:
        """From ``--trace-keep-ratio`` (a ratio in [0, 1]) and ``--trace-keep-slow`` (``250ms``, ``2s``
        or a percentile such as ``p99``); None when neither is given. A value that cannot be used raises
        ValueError naming it (``TracingConfig.from_env``: a TracingConfigError)."""
        if ratio in (None, "") and slow in (None, ""):
            return None
        keep = 0.0
        if ratio not in (None, ""):
            try:
                keep = float(ratio)  # type: ignore[arg-type]
            except ValueError:
                raise ValueError(f"trace keep ratio {ratio!r} is not a number (a ratio in [0, 1])") from None
            if not 0.0 <= keep <= 1.0:
                raise ValueError(f"trace keep ratio {ratio!r} is outside [0, 1]")
        seconds = percentile = 0.0
        if slow not in (None, ""):
            m = _SLOW.match(str(slow).strip())
            if m is None:
                raise ValueError(f"slow trace threshold {slow!r} is neither a duration (250ms, 2s) "
                                        "nor a percentile (p99)")
            if m.group("pct") is not None:
                percentile = float(m.group("pct"))
                if not 0.0 < percentile < 100.0:
                    raise ValueError(f"slow trace percentile {slow!r} is outside (p0, p100)")
            else:
                seconds = float(m.group("num")) / (1000.0 if m.group("unit") == "ms" else 1.0)
                if seconds <= 0.0:
                    raise ValueError(f"slow trace threshold {slow!r} must be above 0")
        return cls(keep, seconds, percentile)


class TailSampler:
    """Applies a :class:`TailSampling` to the spans handed over (:meth:`select`): a trace's spans wait
    until its root span ends, then all go or none. ``kept`` and ``dropped`` count decided traces."""

    def __init__(self, rule: TailSampling) -> None:
        self.rule = rule
        self.kept = 0
        self.dropped = 0
        self._bound = round(rule.ratio * (1 << 64))
        self._slow_ns = int(rule.slow_seconds * 1e9)
        self._pending: dict[int, list[Any]] = {}
        self._decided: collections.OrderedDict[int, bool] = collections.OrderedDict()
        self._durations: collections.deque[int] = collections.deque(maxlen=WINDOW)
        self._threshold = 0  # the percentile's duration, ns (0: not enough contexts yet)
        self._since = 0

    def select(self, spans: Sequence[Any]) -> list[Any]:
        """The spans of ``spans`` (and of earlier calls) whose trace is decided and kept."""
        out: list[Any] = []
        roots = []
        pending, decided = self._pending, self._decided
        for span in spans:
            ctx = getattr(span, "_context", None)
            if ctx is None:  # a plugin call's record (framework.observe.otlp.SpanRecord): never a root
                trace_id = span.owner.trace_id
            else:
                trace_id = ctx.trace_id
                if span._parent is None:
                    roots.append(span)
            was = decided.get(trace_id)
            if was is not None:  # a span ending after its root
                if was:
                    out.append(span)
                continue
            trace = pending.get(trace_id)
            if trace is None:
                pending[trace_id] = [span]
            else:
                trace.append(span)
        for root in roots:
            trace_id = root._context.trace_id
            trace = pending.pop(trace_id, [])
            keep = self.keep(root)
            decided[trace_id] = keep
            if len(decided) > MAX_DECIDED:
                decided.popitem(last=False)
            if keep:
                self.kept += 1
                out.extend(trace)
            else:
                self.dropped += 1
        while len(pending) > MAX_PENDING:  # roots that never ended (a context abandoned): dropped
            del pending[next(iter(pending))]
            self.dropped += 1
        return out

    def keep(self, root: Any) -> bool:
        """Whether the trace of ``root`` (its root span, ended) is kept."""
        duration = (root.end_time or 0) - (root.start_time or 0)
        rule = self.rule
        if rule.slow_percentile:
            self._durations.append(duration)
            self._since += 1
            if self._since >= RECOMPUTE_EVERY:
                self._since = 0
                ordered = sorted(self._durations)
                self._threshold = ordered[min(len(ordered) - 1, int(len(ordered) * rule.slow_percentile / 100.0))]
        attrs = root.attributes or {}
        if attrs.get("outrigger.result") != "bound":
            return True
        if self._slow_ns and duration >= self._slow_ns:
            return True
        if self._threshold and duration > self._threshold:
            return True
        return bool((root._context.trace_id & _MASK) < self._bound)
