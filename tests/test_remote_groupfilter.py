"""PodGroupPostFilter for remote plugins (GenericWorkload on): ``EvictLower`` (tests/groupfilter_plugins.py)
served by a real plugin host process on 127.0.0.1 is called for a gang that does not fit, asks the
framework once over its stream to schedule the group without the lower-priority pods, and its answer is
used: exactly its victims are evicted (told as preempted by the PodGroup), the gang's pods are nominated
where it said, and the gang is bound once the room is free. Bad answers (a victim not in the snapshot, a
victim on another node, a nominated pod not of the group) are errors naming what is wrong, and change
nothing: no pod is deleted or nominated, the PodGroup's condition says SchedulerError.

The Node.js host's EvictLower (clients/node/plugins/evictlower.js, served by ``node clients/node/server.js``)
gives the same outcome: the same victims, nominations and nodes (skipped, saying why, without ``node``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from groupfilter_plugins import EvictLower
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otlp_sink import OtlpSink
from test_go_plugins import GoHost, kube_plugins  # noqa: F401 (kube_plugins: the fixture that builds it)
from test_node_plugin import NodeHost
from test_node_plugin import node as node_bin  # noqa: F401 (a fixture)
from test_observability_e2e import host_env
from test_podgroup_cycle import condition, gang, node_of
from test_podgroup_preemption import deleted, node, nominations, preempted, vpod
from test_remote_harness import HostProcess, endpoint, remote_rig
from test_runtime import PROFILE

from framework import features
from framework.config import SchedulerConfig, load_config
from framework.observe.instrument import instrument
from framework.observe.tracing import Tracing
from framework.plugins import Registry
from framework.remote.groupfilter import RemotePodGroupPostFilter
from framework.scheduler import Scheduler
from framework.scheduler.records import Event
from pluginhost import pb
from pluginhost.definition import manifest_of

E = pb.plugin.ExtensionPoint
SETTLE = 20.0  # a plugin host in another process, on a machine that may be busy


@pytest.fixture(autouse=True)
def generic_workload() -> Iterator[None]:
    previous = features.install(features.parse("GenericWorkload=true"))
    try:
        yield
    finally:
        features.install(previous)


def config_with(mode: str) -> object:
    def config_for(registry: Registry) -> SchedulerConfig:
        plugins = ["PrioritySort", "NodeResourcesFit", "GangScheduling", "DefaultBinder", "EvictLower"]
        text = "\n".join([
            "apiVersion: kubescheduler.config.k8s.io/v1", "kind: KubeSchedulerConfiguration",
            "podInitialBackoffSeconds: 1", "podMaxBackoffSeconds: 10", "profiles:",
            f"- schedulerName: {PROFILE}", "  plugins:", "    multiPoint:", "      enabled:",
            *(f"      - {{name: {name}}}" for name in plugins), "      disabled:", '      - {name: "*"}',
            # (no args for the good answer: the Node.js EvictLower takes none)
            *(["  pluginConfig:", "  - name: EvictLower", f"    args: {{mode: {mode!r}}}"] if mode else []),
        ]) + "\n"
        return load_config(text, registry.points(), "test.yaml")

    return config_for


# Two nodes, each full with a low-priority pod; the gang's two 1-cpu pods fit only without l1, and
# NodeResourcesFit puts both on n1 (the most room). EvictLower evicts every lower pod, l2 too: the
# framework evicts what the plugin says.
NODES = [node("n1", cpu="4"), node("n2", cpu="1")]
LOW = [vpod("l1", "4", 1, "n1"), vpod("l2", "1", 1, "n2")]
GANG = [vpod("p0", "1", 10, group="g"), vpod("p1", "1", 10, group="g")]


@dataclass
class Outcome:
    events: list[Event]
    bound: dict[str, str]
    condition: tuple[str, str, str, int] | None
    remote: bool
    calls: int


def upstream_config(registry: Registry) -> SchedulerConfig:
    """The profile with upstream DefaultPreemption (served by the Go adapter) at podGroupPostFilter only."""
    plugins = ["PrioritySort", "NodeResourcesFit", "GangScheduling", "DefaultBinder"]
    text = "\n".join([
        "apiVersion: kubescheduler.config.k8s.io/v1", "kind: KubeSchedulerConfiguration",
        "podInitialBackoffSeconds: 1", "podMaxBackoffSeconds: 10", "profiles:",
        f"- schedulerName: {PROFILE}", "  plugins:", "    multiPoint:", "      enabled:",
        *(f"      - {{name: {name}}}" for name in plugins), "      disabled:", '      - {name: "*"}',
        "    podGroupPostFilter:", "      enabled:", f"      - {{name: {UPSTREAM}}}",
    ]) + "\n"
    return load_config(text, registry.points(), "test.yaml")


UPSTREAM = "UpstreamDefaultPreemption"


def run_with(mode: str, until_bound: bool, host: HostProcess | None = None, plugin: str = "EvictLower",
             config: Any = None, tracing: Tracing | None = None) -> Outcome:
    """The gang's outcome with ``plugin`` (EvictLower unless told) in ``host`` (by default the Python one, in a
    new process)."""
    async def main(address: str) -> Outcome:
        rig = await remote_rig([endpoint("groups", address)], config or config_with(mode))
        s: Scheduler = rig.scheduler
        if tracing is not None:
            instrument(s, tracing=tracing)
        try:
            fwk = s.profiles[PROFILE]
            remote = isinstance(fwk.plugins[plugin], RemotePodGroupPostFilter)
            s.cache.podgroups.put(gang("g", 2, priority=10))
            await s.apply([*NODES, *LOW, *GANG])
            task = asyncio.create_task(s.run())
            try:
                done = (lambda: all(node_of(s, p.name) for p in GANG)) if until_bound else (
                    lambda: fwk.plugins[plugin].stat("PodGroupPostFilter").calls >= 1)
                deadline = asyncio.get_running_loop().time() + SETTLE
                while not done() and asyncio.get_running_loop().time() < deadline:
                    await asyncio.sleep(0.05)
            finally:
                await s.drain(timeout=SETTLE)
                await s.stop()
                await asyncio.wait_for(task, SETTLE)
            calls = fwk.plugins[plugin].stat("PodGroupPostFilter").calls
            return Outcome(list(s.recent_events()), {p.name: node_of(s, p.name) for p in GANG if node_of(s, p.name)},
                           condition(s, "g"), remote, calls)
        finally:
            await rig.close()

    with host or HostProcess("groupfilter_plugins:EvictLower") as served:
        return asyncio.run(asyncio.wait_for(main(served.address), 60))


def test_the_python_host_declares_pod_group_post_filter() -> None:
    assert [E.Name(p) for p in manifest_of(EvictLower).points] == ["EXTENSION_POINT_POD_GROUP_POST_FILTER"]


def test_a_remote_pod_group_post_filter_evicts_its_victims_and_nominates_the_gang() -> None:
    assert_evicted_and_bound(run_with("", until_bound=True))


def test_a_node_pod_group_post_filter_evicts_the_same_victims_and_nominates_the_gang(node_bin: str) -> None:  # noqa: F811
    assert_evicted_and_bound(run_with("", until_bound=True, host=NodeHost(node_bin)))


def test_upstream_default_preemption_through_the_go_adapter_evicts_what_it_picks_and_the_gang_binds(
        kube_plugins: Path) -> None:  # noqa: F811 (the fixture)
    # Upstream DefaultPreemption asks for the gang without l1 and l2, then puts each back in turn: without
    # l1 alone the gang still fits on n1, so l2 is reprieved and only l1 is evicted (EvictLower evicts both).
    out = run_with("", until_bound=True, host=GoHost(kube_plugins, "--prefix", "Upstream"), plugin=UPSTREAM,
                   config=upstream_config)
    assert out.remote
    assert deleted(out.events) == ["l1"]
    assert preempted(out.events) == {"l1": "preempted by podgroup default/g on node cluster"}
    assert nominations(out.events) == {"p0": "n1", "p1": "n1"}
    assert out.bound == {"p0": "n1", "p1": "n1"}
    assert out.condition is not None and out.condition[:3] == ("True", "Scheduled", "")
    assert out.calls == 1


def test_a_remote_pod_group_post_filter_is_a_client_span_of_the_point_and_the_parent_of_the_hosts_span() -> None:
    """The remote plugin's PodGroupPostFilter is a CLIENT span PodGroupPostFilter/<plugin> under the group
    cycle's PodGroupPostFilter point, and the host's server span of that stream its child."""
    exporter = InMemorySpanExporter()
    tracing = Tracing([SimpleSpanProcessor(exporter)])
    with OtlpSink() as sink:
        out = run_with("", until_bound=False, host=HostProcess("groupfilter_plugins:EvictLower",
                                                                env=host_env(sink, "groups-host")), tracing=tracing)
        spans = list(exporter.get_finished_spans())
        calls = [s for s in spans if s.name == "PodGroupPostFilter/EvictLower"]
        served = sink.wait_for(
            lambda got: len([s for s in got if s.name.endswith("/PodGroupPostFilter")]) >= len(calls), 30)
    tracing.shutdown()
    assert out.calls >= 1 and len(calls) == out.calls
    ids = {s.context.span_id: s for s in spans}

    def up(span: ReadableSpan) -> list[str]:
        out = [span.name]
        while span.parent is not None and span.parent.span_id in ids:
            span = ids[span.parent.span_id]
            out.append(span.name)
        return out

    keys = ("outrigger.plugin", "outrigger.extension_point")
    chain = ["PodGroupPostFilter/EvictLower", "PodGroupPostFilter", "PodGroupSchedulingCycle", "SchedulePodGroup"]
    attrs = {"outrigger.plugin": "EvictLower", "outrigger.extension_point": "PodGroupPostFilter"}
    got = [(up(c), c.kind.name, {k: (c.attributes or {}).get(k) for k in keys}) for c in calls]
    assert got == [(chain, "CLIENT", attrs)] * len(calls)
    hosted = sorted((s for s in served if s.name.endswith("/PodGroupPostFilter")), key=lambda s: s.parent_span_id)
    assert [(s.name, s.kind, s.service, s.trace_id, s.parent_span_id) for s in hosted] == sorted(
        (("outrigger.v1.Plugin/PodGroupPostFilter", "SERVER", "groups-host", f"{c.context.trace_id:032x}",
          f"{c.context.span_id:016x}") for c in calls), key=lambda t: t[4])


def assert_evicted_and_bound(out: Outcome) -> None:
    assert out.remote
    assert deleted(out.events) == ["l1", "l2"]
    assert preempted(out.events) == {"l1": "preempted by podgroup default/g on node cluster",
                                     "l2": "preempted by podgroup default/g on node cluster"}
    assert nominations(out.events) == {"p0": "n1", "p1": "n1"}
    assert out.bound == {"p0": "n1", "p1": "n1"}
    assert out.condition is not None and out.condition[:3] == ("True", "Scheduled", "")


BAD = [
    ("foreign-victim", 'PodGroupPostFilter victim default/nobody (uid \'uid-nobody\') is not a pod in the snapshot'),
    ("wrong-node", "PodGroupPostFilter victim default/l1 is on node 'n1', not 'n2'"),
    ("foreign-nominee", "nominated pod default/stranger is not an unscheduled pod of pod group default/g"),
]


@pytest.mark.parametrize("mode, want", BAD, ids=[m for m, _ in BAD])
def test_a_bad_answer_is_an_error_naming_it_and_changes_nothing(mode: str, want: str) -> None:
    out = run_with(mode, until_bound=False)
    assert out.calls >= 1
    assert deleted(out.events) == [] and preempted(out.events) == {} and nominations(out.events) == {}
    assert out.bound == {}
    assert out.condition is not None and out.condition[:2] == ("False", "SchedulerError")
    assert want in out.condition[2], out.condition[2]
