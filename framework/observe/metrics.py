"""Prometheus metrics of a framework service, with kube-scheduler's names where they exist.

kube-scheduler's own (same names, labels and buckets):

- ``scheduler_schedule_attempts_total{result,profile}``: scheduling cycles by result (``scheduled``,
  ``unschedulable``, ``error``).
- ``scheduler_scheduling_attempt_duration_seconds{result,profile}``: a scheduling cycle's duration.
- ``scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}``: one run of an
  extension point (all its plugins), by the status it returned.
- ``scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}``: one plugin call, for a
  sample of the scheduling contexts (10% by default, as kube-scheduler's ``pluginMetricsSamplePercent``).
- ``scheduler_pending_pods{queue}``: pods in the ``active``, ``backoff``, ``unschedulable`` and ``gated``
  queues.
- Opportunistic batching (:mod:`framework.batching`), read from each profile's batch at scrape time:
  ``scheduler_batch_attempts_total{profile,result}`` (``hint_used``, ``hint_not_used``, ``no_hint``),
  ``scheduler_batch_cache_flushed_total{profile,reason}`` and ``scheduler_batch_rescore_attempts_total{profile}``.
- ``scheduler_podgroup_schedule_attempts_total{result,profile}``: PodGroup cycles (GenericWorkload) by result
  (``scheduled``, ``unschedulable``, ``waiting_on_preemption``, ``error``).

Outrigger's own, for remote plugins (read from the adapters' counters at scrape time, nothing on the
hot path): ``outrigger_remote_plugin_calls_total``, ``outrigger_remote_plugin_errors_total``,
``outrigger_remote_plugin_call_duration_seconds`` (a histogram), ``outrigger_remote_plugin_sent_bytes_total``,
``outrigger_remote_plugin_received_bytes_total``, ``outrigger_remote_plugin_node_batches_total``,
``outrigger_remote_plugin_retried_batches_total`` and ``outrigger_remote_plugin_ignored_failures_total``, labelled
``{plugin,rpc}``; per replica of an endpoint ``outrigger_remote_replica_calls_total`` and
``outrigger_remote_replica_up``, labelled ``{endpoint,replica}`` (the replica's address); plugin host
upgrades: ``outrigger_remote_plugin_unserved_calls_total{endpoint,plugin,rpc}`` (calls no replica declares
any more) and ``outrigger_remote_manifest_changes_total{result}`` (``applied``, ``failed``); shadow plugins:
``outrigger_shadow_observed_cycles_total``, ``outrigger_shadow_cycles_total{result}``,
``outrigger_shadow_disagreements_total{kind}`` and ``outrigger_shadow_latency_seconds{quantile}``, labelled
``{endpoint,plugin}``; canary plugins: ``outrigger_canary_pods_total{plugin,variant,result}``.

Every :class:`SchedulerMetrics` has its own :class:`CollectorRegistry`, so several services (tests) live
in one process without clashing.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

__all__ = [
    "CONTENT_TYPE",
    "REMOTE_LATENCY_BUCKETS",
    "SchedulerMetrics",
    "exponential_buckets",
    "histogram_counts",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PENDING_QUEUES = ("active", "backoff", "unschedulable", "gated")


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """Prometheus' ExponentialBuckets (what kube-scheduler's metrics use)."""
    return [start * factor**i for i in range(count)]


# kube-scheduler's buckets (pkg/scheduler/metrics/metrics.go).
ATTEMPT_BUCKETS = exponential_buckets(0.001, 2, 15)
EXTENSION_POINT_BUCKETS = exponential_buckets(0.0001, 2, 12)
PLUGIN_BUCKETS = exponential_buckets(0.00001, 1.5, 20)
REMOTE_LATENCY_BUCKETS = exponential_buckets(0.0001, 2, 14)  # 0.1 ms .. 0.8 s


def histogram_counts(latencies: Sequence[float], bounds: Sequence[float], start: int = 0,
                     counts: list[int] | None = None) -> list[int]:
    """Per-bucket (not cumulative) counts of ``latencies[start:]`` added to ``counts`` (len(bounds)+1)."""
    out = counts if counts is not None else [0] * (len(bounds) + 1)
    for v in latencies[start:]:
        out[bisect.bisect_left(bounds, v)] += 1
    return out


class _PendingCollector(Collector):
    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def collect(self) -> Iterable[Any]:
        g = GaugeMetricFamily("scheduler_pending_pods", "Number of pending pods, by the queue type.",
                              labels=["queue"])
        counts = self.scheduler.pending_count()
        for q in PENDING_QUEUES:
            g.add_metric([q], float(counts.get(q, 0)))
        yield g


class _BatchCollector(Collector):
    """Each profile's opportunistic batch counters (kube-scheduler's batch metrics)."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def collect(self) -> Iterable[Any]:
        attempts = CounterMetricFamily("scheduler_batch_attempts", "Counts of results when we attempt to use batching.",
                                       labels=["profile", "result"])
        flushed = CounterMetricFamily("scheduler_batch_cache_flushed", "Counts of cache flushes by reason.",
                                      labels=["profile", "reason"])
        rescores = CounterMetricFamily("scheduler_batch_rescore_attempts",
                                       "Counts of rescore attempts during opportunistic batching.", labels=["profile"])
        for profile, batch in sorted(getattr(self.scheduler, "batches", {}).items()):
            for result, n in sorted(batch.attempts.items()):
                attempts.add_metric([profile, result], n)
            for reason, n in sorted(batch.flushed.items()):
                flushed.add_metric([profile, reason], n)
            rescores.add_metric([profile], batch.rescores)
        yield from (attempts, flushed, rescores)


class _PodGroupCollector(Collector):
    """kube-scheduler's ``scheduler_podgroup_schedule_attempts_total{result,profile}``: PodGroup cycles by
    result, read from the scheduler's counts at scrape time (none while GenericWorkload is off)."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def collect(self) -> Iterable[Any]:
        attempts = CounterMetricFamily(
            "scheduler_podgroup_schedule_attempts",
            "Number of attempts to schedule pod group, by the result. 'unschedulable' means a pod group could "
            "not be scheduled, while 'error' means an internal scheduler problem.", labels=["result", "profile"])
        stats = getattr(self.scheduler, "stats", None)
        for (result, profile), n in sorted(getattr(stats, "podgroup_attempts", {}).items()):
            attempts.add_metric([result, profile], n)
        yield attempts


class _CanaryCollector(Collector):
    """``outrigger_canary_pods_total{plugin,variant,result}``: scheduling cycles of profiles with a
    canary plugin (framework.canary), by the variant that ran them and what it decided."""

    def __init__(self, scheduler: Any) -> None:
        self.scheduler = scheduler

    def collect(self) -> Iterable[Any]:
        pods = CounterMetricFamily(
            "outrigger_canary_pods",
            "Scheduling cycles of profiles with a canary plugin, by plugin, variant (stable, canary) and result "
            "(scheduled, unschedulable, error).", labels=["plugin", "variant", "result"])
        stats = getattr(self.scheduler, "stats", None)
        for (plugin, variant, result), n in sorted(getattr(stats, "canary", {}).items()):
            pods.add_metric([plugin, variant, result], n)
        yield pods


class _RemoteCollector(Collector):
    """Remote plugins' counters (``RemotePlugin.stats``, replicas), read at scrape time.

    The adapters keep each call's latency in a bounded list; the histogram is folded from it
    incrementally (each scrape reads only what is new)."""

    def __init__(self, remote: Any) -> None:
        self.remote = remote
        self._folded: dict[tuple[int, str], tuple[int, list[int], float]] = {}

    def collect(self) -> Iterable[Any]:
        if self.remote is None:  # no endpoint (yet): a live configuration may add some
            return
        labels = ["plugin", "rpc"]
        calls = CounterMetricFamily("outrigger_remote_plugin_calls", "Calls to remote plugins, by plugin and RPC.",
                                    labels=labels)
        errors = CounterMetricFamily("outrigger_remote_plugin_errors", "Failed calls to remote plugins.",
                                     labels=labels)
        sent = CounterMetricFamily("outrigger_remote_plugin_sent_bytes", "Bytes of requests sent to remote plugins.",
                                   labels=labels)
        received = CounterMetricFamily("outrigger_remote_plugin_received_bytes",
                                       "Bytes of replies received from remote plugins.", labels=labels)
        batches = CounterMetricFamily("outrigger_remote_plugin_node_batches",
                                      "Node batches sent to remote plugins on Filter/Score streams.", labels=labels)
        retries = CounterMetricFamily("outrigger_remote_plugin_retried_batches",
                                      "Node batches sent again to another replica after theirs failed.",
                                      labels=labels)
        ignored = CounterMetricFamily("outrigger_remote_plugin_ignored_failures",
                                      "Failed calls skipped under failurePolicy Ignore.", labels=labels)
        latency = HistogramMetricFamily("outrigger_remote_plugin_call_duration_seconds",
                                        "Latency of calls to remote plugins, by plugin and RPC.", labels=labels)
        merged: dict[tuple[str, str], list[Any]] = {}
        for adapter in self.remote.adapters():
            for rpc, st in list(adapter.stats.items()):
                key = (adapter.name, rpc)
                start, counts, total = self._folded.get((id(st), rpc), (0, [0] * (len(REMOTE_LATENCY_BUCKETS) + 1),
                                                                        0.0))
                new = st.latencies[start:]
                histogram_counts(new, REMOTE_LATENCY_BUCKETS, 0, counts)
                total += sum(new)
                self._folded[(id(st), rpc)] = (start + len(new), counts, total)
                m = merged.setdefault(key, [0, 0, 0, 0, 0, [0] * len(counts), 0.0, 0, 0])
                m[0] += st.calls
                m[1] += st.errors
                m[2] += st.bytes_sent
                m[3] += st.bytes_received
                m[4] += int(getattr(st, "batches", 0))
                m[5] = [a + b for a, b in zip(m[5], counts)]
                m[6] += total
                m[7] += int(getattr(st, "retries", 0))
                m[8] += int(getattr(st, "ignored", 0))
        for (plugin, rpc), (n, e, bs, br, nb, counts, total, rt, ig) in sorted(merged.items()):
            retries.add_metric([plugin, rpc], rt)
            ignored.add_metric([plugin, rpc], ig)
            calls.add_metric([plugin, rpc], n)
            errors.add_metric([plugin, rpc], e)
            sent.add_metric([plugin, rpc], bs)
            received.add_metric([plugin, rpc], br)
            batches.add_metric([plugin, rpc], nb)
            cumulative, buckets = 0, []
            for bound, c in zip([*REMOTE_LATENCY_BUCKETS, float("inf")], counts):
                cumulative += c
                buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
            latency.add_metric([plugin, rpc], buckets, total)
        yield from (calls, errors, sent, received, batches, retries, ignored, latency)
        picked = CounterMetricFamily("outrigger_remote_replica_calls", "Calls and cycles routed to a replica.",
                                     labels=["endpoint", "replica"])
        up = GaugeMetricFamily("outrigger_remote_replica_up",
                               "1 while a replica is usable, 0 after a failed call until it is handshaken again.",
                               labels=["endpoint", "replica"])
        for ep in self.remote.endpoints:
            for replica in ep.replicas:
                picked.add_metric([ep.name, replica.address], replica.picked)
                up.add_metric([ep.name, replica.address], 0.0 if replica.suspect else 1.0)
        yield picked
        yield up
        yield from _upgrade_metrics(self.remote)


def _upgrade_metrics(remote: Any) -> Iterable[Any]:
    """Plugin host upgrades: calls no replica declares any more, and manifests taken up."""
    unserved = CounterMetricFamily(
        "outrigger_remote_plugin_unserved_calls",
        "Calls of a plugin (at a point) that no replica of its endpoint declares any more: the failure policy applied.",
        labels=["endpoint", "plugin", "rpc"])
    for (endpoint, plugin, rpc), n in sorted(remote.unserved().items()):
        unserved.add_metric([endpoint, plugin, rpc], n)
    changes = CounterMetricFamily(
        "outrigger_remote_manifest_changes",
        "New manifests every replica of an endpoint agreed on: profiles rebuilt (applied) or not (failed).",
        labels=["result"])
    changes.add_metric(["applied"], remote.manifest_changes)
    changes.add_metric(["failed"], remote.manifest_failures)
    yield unserved
    yield changes
    yield from _shadow_metrics(remote.shadows.report() if getattr(remote, "shadows", None) is not None else [])


def _shadow_metrics(reports: list[dict[str, Any]]) -> Iterable[Any]:
    """Shadow plugins (framework.remote.shadow): cycles observed and evaluated, disagreements, latency."""
    labels = ["endpoint", "plugin"]
    observed = CounterMetricFamily("outrigger_shadow_observed_cycles",
                                   "Live scheduling cycles offered to a shadow plugin.", labels=labels)
    cycles = CounterMetricFamily(
        "outrigger_shadow_cycles",
        "Shadow evaluations by result: evaluated, dropped (queue full), error, timeout (over the budget).",
        labels=[*labels, "result"])
    disagreements = CounterMetricFamily(
        "outrigger_shadow_disagreements",
        "Cycles whose chosen node the shadow disagrees with, by kind: rejected (its Filter rejects the node), "
        "placed (it would place a pod that fit nowhere), score (the node is outside its top-score set).",
        labels=[*labels, "kind"])
    latency = GaugeMetricFamily("outrigger_shadow_latency_seconds",
                                "A shadow evaluation's latency (recent evaluations), by quantile.",
                                labels=[*labels, "quantile"])
    for r in reports:
        key = [r["endpoint"], r["plugin"]]
        observed.add_metric(key, r["observed"])
        for result, field in (("evaluated", "evaluated"), ("dropped", "dropped"), ("error", "errors"),
                              ("timeout", "timeouts")):
            cycles.add_metric([*key, result], r[field])
        for kind, field in (("rejected", "rejected"), ("placed", "placed"), ("score", "scoreChanged")):
            disagreements.add_metric([*key, kind], r[field])
        for q, name in (("0.5", "p50"), ("0.99", "p99")):
            latency.add_metric([*key, q], r["latencyMs"][name] / 1000.0)
    yield from (observed, cycles, disagreements, latency)


class SchedulerMetrics:
    """The metrics of one framework service (see the module docstring)."""

    def __init__(self, plugin_sample_percent: int = 10) -> None:
        if not 0 <= plugin_sample_percent <= 100:
            raise ValueError(f"plugin metrics sample percent must be in [0, 100], got {plugin_sample_percent}")
        self.plugin_sample = plugin_sample_percent / 100.0
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.attempts = Counter("scheduler_schedule_attempts", "Number of attempts to schedule pods, by the result.",
                                ["result", "profile"], registry=r)
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], buckets=ATTEMPT_BUCKETS, registry=r)
        self.extension_point = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], buckets=EXTENSION_POINT_BUCKETS, registry=r)
        self.plugin = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], buckets=PLUGIN_BUCKETS, registry=r)
        self._point_children: dict[tuple[str, str, str], Any] = {}
        self._plugin_children: dict[tuple[str, str, str], Any] = {}

    def attach(self, scheduler: Any, remote: Any = None) -> None:
        """Read the queue (and the remote plugins' counters) of ``scheduler`` at scrape time."""
        self.registry.register(_PendingCollector(scheduler))
        self.registry.register(_BatchCollector(scheduler))
        self.registry.register(_PodGroupCollector(scheduler))
        self.registry.register(_CanaryCollector(scheduler))
        self._remote = _RemoteCollector(remote)
        self.registry.register(self._remote)

    def follow_remote(self, remote: Any) -> None:
        """Read the counters of ``remote`` from now on (a new configuration's endpoints)."""
        self._remote.remote = remote
        self._remote._folded.clear()

    def observe_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        key = (point, status, profile)
        child = self._point_children.get(key)
        if child is None:
            child = self._point_children[key] = self.extension_point.labels(point, status, profile)
        child.observe(seconds)

    def observe_plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        key = (plugin, point, status)
        child = self._plugin_children.get(key)
        if child is None:
            child = self._plugin_children[key] = self.plugin.labels(plugin, point, status)
        child.observe(seconds)

    def exposition(self) -> bytes:
        """The text exposition format (what ``GET /metrics`` returns)."""
        return bytes(generate_latest(self.registry))
