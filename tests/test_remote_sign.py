"""Sign for remote plugins (opportunistic batching, kube-scheduler 1.37's SignPlugin): a remote Filter
plugin served by a real plugin host process on 127.0.0.1 that declares Sign lets identical pods batch
(the second and later pods are placed on their hint: ``scheduler_batch_attempts_total`` counts
hint_used), one that does not keeps batching off for its profile, and a pod the plugin cannot sign is
scheduled without a hint. Each pod costs one SignPod call; a pod tried again is answered from the
adapter's cache.

The Node.js host (clients/node/plugins/poolfit.js) and the Go SDK's example host serve the same
plugin; their tests are in test_remote_sign_other.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_sink import OtlpSink
from sign_plugins import UNSIGNABLE, PoolFit, PoolFitUnsigned
from test_batching import node, placed, step
from test_observability_e2e import host_env
from test_remote_harness import HostProcess, endpoint, remote_rig
from test_runtime import PROFILE

from framework.batching import pod_signer
from framework.config import SchedulerConfig, load_config
from framework.observe.instrument import instrument
from framework.observe.metrics import SchedulerMetrics
from framework.observe.tracing import Tracing
from framework.plugins import Registry
from framework.remote.sign import RemoteSign
from pluginhost import pb
from pluginhost.definition import PluginDefinitionError, manifest_of
from pluginhost.manifest import pod_from_dict
from pluginhost.model import Pod
from pluginhost.plugin import ReservePlugin
from pluginhost.sign import SignPlugin

E = pb.plugin.ExtensionPoint


FIT = ("PrioritySort", "NodeResourcesFit", "DefaultBinder")


def config_with(plugin: str, base: tuple[str, ...] = FIT) -> Callable[[Registry], SchedulerConfig]:
    def config_for(registry: Registry) -> SchedulerConfig:
        plugins = [*base, plugin]
        text = "\n".join([
            "apiVersion: kubescheduler.config.k8s.io/v1", "kind: KubeSchedulerConfiguration", "profiles:",
            f"- schedulerName: {PROFILE}", "  plugins:", "    multiPoint:", "      enabled:",
            *(f"      - {{name: {name}}}" for name in plugins), "      disabled:", '      - {name: "*"}',
        ]) + "\n"
        return load_config(text, registry.points(), "test.yaml")

    return config_for


def pool_pod(name: str, pool: str = "a", signable: bool = True) -> Pod:
    return pod_from_dict({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"pool": pool},
                     "annotations": {} if signable else {UNSIGNABLE: "true"}},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                                 "resources": {"requests": {"cpu": "1", "memory": "100Mi"}}}]},
    })  # fmt: skip


# Three nodes of different sizes in pool a (no ties), one in pool b; NodeResourcesFit's LeastAllocated
# spreads the pods, so each batched pod takes the next-best node the first pod's cycle ranked.
NODES = [node("n1", "16", {"pool": "a"}), node("n2", "12", {"pool": "a"}), node("n3", "10", {"pool": "a"}),
         node("n4", "8", {"pool": "b"})]


@dataclass
class Outcome:
    placed: dict[str, str]
    attempts: dict[str, int]
    signable: bool  # the profile can batch at all
    sign_calls: int
    cache_hits: int
    metrics: str


async def schedule(address: str, plugin: str, pods: list[Pod], base: tuple[str, ...] = FIT) -> Outcome:
    """Schedule ``pods`` one cycle after another (the batch's clock stopped, so its age never matters)
    with the remote ``plugin`` and the ``base`` plugins, then sign them all again (the adapter's cache
    answers)."""
    rig = await remote_rig([endpoint("pools", address)], config_with(plugin, base))
    s = rig.scheduler
    try:
        fwk = s.profiles[PROFILE]
        batch = s.batches[PROFILE]
        batch.clock = lambda: 100.0
        await s.apply([*NODES, *pods])
        await step(s, len(pods))
        remote = fwk.plugins[plugin]
        signer = pod_signer(fwk)
        if signer is not None:
            for p in pods:
                await signer(p)
        calls, hits = (remote.sign_calls, remote.sign_cache_hits) if isinstance(remote, RemoteSign) else (0, 0)
        metrics = SchedulerMetrics()
        metrics.attach(s)
        text = metrics.exposition().decode()
        return Outcome(placed(s), dict(batch.attempts), batch.signer is not None, calls, hits, text)
    finally:
        await s.stop()
        await rig.close()


def run_with(target: str, plugin: str, pods: list[Pod]) -> Outcome:
    with HostProcess(target) as host:
        return asyncio.run(asyncio.wait_for(schedule(host.address, plugin, pods), 60))


def attempts_metric(text: str, result: str) -> str:
    [line] = [ln for ln in text.splitlines()
              if ln.startswith(f'scheduler_batch_attempts_total{{profile="{PROFILE}",result="{result}"}}')]
    return line.rsplit(" ", 1)[1]


FOUR = [pool_pod(f"p{i}") for i in range(1, 5)]
SPREAD = {"p1": "n1", "p2": "n2", "p3": "n3", "p4": "n1"}


def test_the_python_host_declares_sign_with_filter() -> None:
    assert [E.Name(p) for p in manifest_of(PoolFit).points] == ["EXTENSION_POINT_FILTER", "EXTENSION_POINT_SIGN"]
    assert [E.Name(p) for p in manifest_of(PoolFitUnsigned).points] == ["EXTENSION_POINT_FILTER"]


def test_a_sign_plugin_without_a_point_it_signs_for_is_refused() -> None:
    class ReservesAndSigns(ReservePlugin, SignPlugin):
        name = "ReservesAndSigns"

    with pytest.raises(PluginDefinitionError, match="SignPlugin signs for PreFilter, Filter, PreScore or Score"):
        manifest_of(ReservesAndSigns)


def test_a_remote_signer_lets_identical_pods_batch() -> None:
    out = run_with("sign_plugins:PoolFit", "PoolFit", FOUR)
    assert out.signable
    assert out.placed == SPREAD
    assert out.attempts == {"no_hint": 1, "hint_used": 3}
    assert (attempts_metric(out.metrics, "hint_used"), attempts_metric(out.metrics, "no_hint")) == ("3.0", "1.0")
    # One SignPod per pod; signing them again is answered from the cache.
    assert (out.sign_calls, out.cache_hits) == (4, 4)


def test_a_remote_plugin_that_does_not_sign_keeps_batching_off() -> None:
    out = run_with("sign_plugins:PoolFitUnsigned", "PoolFitUnsigned", FOUR)
    assert not out.signable
    assert out.placed == SPREAD
    assert out.attempts == {"no_hint": 4}
    assert (out.sign_calls, out.cache_hits) == (0, 0)


def test_a_pod_the_remote_plugin_cannot_sign_is_scheduled_without_batching() -> None:
    pods = [pool_pod("p1"), pool_pod("p2", signable=False), pool_pod("p3"), pool_pod("p4")]
    out = run_with("sign_plugins:PoolFit", "PoolFit", pods)
    assert out.signable
    assert out.placed == SPREAD
    # p2 has no signature (no hint, and its cycle stores no batch); p3 starts a batch again, p4 uses it.
    assert out.attempts == {"no_hint": 3, "hint_used": 1}
    assert (out.sign_calls, out.cache_hits) == (4, 4)


def test_remote_signatures_keep_pools_apart() -> None:
    """Pods of two pools alternate: their signatures differ, so no pod gets the other pool's node."""
    pods = [pool_pod("p1"), pool_pod("p2", "b"), pool_pod("p3"), pool_pod("p4", "b")]
    out = run_with("sign_plugins:PoolFit", "PoolFit", pods)
    assert out.placed == {"p1": "n1", "p2": "n4", "p3": "n2", "p4": "n4"}
    assert out.attempts == {"no_hint": 4}


async def traced_schedule(address: str, tracing: Tracing, pods: list[Pod]) -> dict[str, str]:
    rig = await remote_rig([endpoint("pools", address)], config_with("PoolFit"))
    s = rig.scheduler
    try:
        instrument(s, tracing=tracing)
        s.batches[PROFILE].clock = lambda: 100.0
        await s.apply([*NODES, *pods])
        await step(s, len(pods))
        return placed(s)
    finally:
        await s.stop()
        await rig.close()


def test_a_remote_signpod_is_a_client_span_of_the_sign_point_and_the_parent_of_the_hosts_span() -> None:
    """The framework's Sign point (kube-scheduler's Framework.SignPod) is a span of the pod's cycle, the
    remote plugin's SignPod a CLIENT span under it, and the host's server span of that call its child."""
    exporter = InMemorySpanExporter()
    tracing = Tracing([SimpleSpanProcessor(exporter)])
    with OtlpSink() as sink:
        with HostProcess("sign_plugins:PoolFit", env=host_env(sink, "pools-host")) as host:
            got = asyncio.run(asyncio.wait_for(traced_schedule(host.address, tracing, FOUR[:2]), 60))
        served = sink.wait_for(lambda spans: len([s for s in spans if s.name.endswith("/SignPod")]) >= 2, 30)
    tracing.shutdown()
    assert got == {"p1": "n1", "p2": "n2"}
    spans = list(exporter.get_finished_spans())
    ids = {s.context.span_id: s for s in spans}

    def up(span: ReadableSpan) -> list[ReadableSpan]:
        out = [span]
        while span.parent is not None and span.parent.span_id in ids:
            span = ids[span.parent.span_id]
            out.append(span)
        return out

    calls = [s for s in spans if s.name == "Sign/PoolFit"]
    assert [([a.name for a in up(s)], (up(s)[-1].attributes or {})["outrigger.pod"], s.kind.name,
             dict(s.attributes or {})) for s in calls] == [
        (["Sign/PoolFit", "Sign", "SchedulingCycle", "SchedulePod"], f"default/{pod}", "CLIENT",
         {"outrigger.plugin": "PoolFit", "outrigger.extension_point": "Sign", "outrigger.remote.endpoint": "pools",
          "outrigger.status.code": "Success"}) for pod in ("p1", "p2")]
    hosted = sorted((s for s in served if s.name.endswith("/SignPod")), key=lambda s: s.parent_span_id)
    assert [(s.name, s.kind, s.service, s.trace_id, s.parent_span_id) for s in hosted] == sorted(
        (("outrigger.v1.Plugin/SignPod", "SERVER", "pools-host", f"{c.context.trace_id:032x}",
          f"{c.context.span_id:016x}") for c in calls), key=lambda t: t[4])
