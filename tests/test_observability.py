"""Observability of a running framework service: Prometheus metrics over HTTP (and scraped by a real
Prometheus server when the binary is installed), debug scores switched at runtime and equal to explain,
plugins' debug endpoints (in-process and in a plugin host process), the node view, the in-process
trace store behind ``outrigger trace``, and the tracing settings."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from kube_framework import stop_process
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families
from test_remote_examples import config, gang, nodes, objects, pod
from test_remote_harness import HostProcess, endpoint, until

from clients.client import ClientError, SchedulerClient
from framework import cli
from framework.config import load_config
from framework.observe.debugscores import DebugScores
from framework.observe.observability import ObservabilityConfig
from framework.observe.tracing import SpanStore, Tracing, TracingConfig, TracingConfigError, make_sampler
from framework.plugins import in_tree_registry
from framework.scheduler import explain_pod
from framework.service import Server, start_server, start_service
from pluginhost import pb
from pluginhost import tracing as host_tracing
from pluginhost.examples import Coscheduling
from pluginhost.host import PluginHost
from pluginhost.model import Pod
from pluginhost.plugin import PermitPlugin
from pluginhost.status import Status

PROMETHEUS = "/usr/bin/prometheus"
PROFILE = "default-scheduler"


async def http(server: Server, method: str, path: str, body: bytes | None = None) -> tuple[int, str]:
    """One HTTP request to the service's HTTP port, from a thread (the server runs on this loop)."""
    assert server.observability is not None and server.observability.http is not None
    url = f"http://{server.observability.http.address}{path}"

    def call() -> tuple[int, str]:
        req = urllib.request.Request(url, data=body, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    return await asyncio.to_thread(call)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    assert key in found, f"{name}{labels} not exposed; have {sorted(k for k in found if k[0] == name)}"
    return found[key]


def in_process(text: str, test: Callable[[Server], Awaitable[None]], obs: ObservabilityConfig,
               classes: tuple[type[Any], ...] = ()) -> None:
    async def main() -> None:
        reg = in_tree_registry()
        for cls in classes:
            reg.register_class(cls)
        server = await start_server(load_config(text, reg.points()), reg, "127.0.0.1:0", seed=1, observability=obs)
        try:
            await test(server)
        finally:
            await server.stop(0.5)

    asyncio.run(main())


def bound(server: Server, *names: str) -> Callable[[], bool]:
    def check() -> bool:
        recs = [server.scheduler.get_pod("default", n) for n in names]
        return all(r is not None and r.phase == "Bound" for r in recs)
    return check


def tried(server: Server, name: str) -> Callable[[], bool]:
    def check() -> bool:
        r = server.scheduler.get_pod("default", name)
        return r is not None and r.attempts >= 1 and r.last_status is not None
    return check


# ---------------------------------------------------------------------------------------------------
# Metrics


def test_metrics_endpoint_counts_attempts_points_plugins_queues_and_remote_calls() -> None:
    text = config(["Coscheduling"], {})

    async def main(address: str) -> None:
        obs = ObservabilityConfig(http="127.0.0.1:0", plugin_sample_percent=100)
        srv = await start_service(lambda reg: load_config(text, reg.points()), [endpoint("gang", address)],
                                  observability=obs)
        try:
            await srv.scheduler.apply(objects(*nodes(3), *(pod(f"p{i}") for i in range(5))))
            await until(bound(srv, *(f"p{i}" for i in range(5))), 30, "five pods bound")
            await srv.scheduler.apply(objects(pod("big", cpu="64")))
            await until(tried(srv, "big"), 30, "the big pod tried")
            status, body = await http(srv, "GET", "/metrics")
            assert status == 200
            m = samples(body)
            assert value(m, "scheduler_schedule_attempts_total", result="scheduled", profile=PROFILE) == 5
            assert value(m, "scheduler_schedule_attempts_total", result="unschedulable", profile=PROFILE) == 1
            assert value(m, "scheduler_scheduling_attempt_duration_seconds_count", result="scheduled",
                         profile=PROFILE) == 5
            assert value(m, "scheduler_framework_extension_point_duration_seconds_count", extension_point="Bind",
                         status="Success", profile=PROFILE) == 5
            assert value(m, "scheduler_framework_extension_point_duration_seconds_count",
                         extension_point="PreFilter", status="Success", profile=PROFILE) == 6
            assert value(m, "scheduler_framework_extension_point_duration_seconds_count", extension_point="Filter",
                         status="Success", profile=PROFILE) >= 6  # preemption's what-ifs run Filter too
            assert value(m, "scheduler_plugin_execution_duration_seconds_count", plugin="DefaultBinder",
                         extension_point="Bind", status="Success") == 5
            assert value(m, "scheduler_plugin_execution_duration_seconds_count", plugin="Coscheduling",
                         extension_point="Permit", status="Success") == 5
            assert value(m, "scheduler_pending_pods", queue="unschedulable") == 1
            assert value(m, "scheduler_pending_pods", queue="active") == 0
            assert value(m, "scheduler_pending_pods", queue="backoff") == 0
            # Remote plugins: the adapter's own counters.
            assert value(m, "outrigger_remote_plugin_calls_total", plugin="Coscheduling", rpc="PreFilter") == 6
            assert value(m, "outrigger_remote_plugin_calls_total", plugin="Coscheduling", rpc="Permit") == 5
            assert value(m, "outrigger_remote_plugin_errors_total", plugin="Coscheduling", rpc="Permit") == 0
            assert value(m, "outrigger_remote_plugin_call_duration_seconds_count", plugin="Coscheduling",
                         rpc="PreFilter") == 6
            assert value(m, "outrigger_remote_plugin_call_duration_seconds_bucket", plugin="Coscheduling",
                         rpc="PreFilter", le="+Inf") == 6
            assert value(m, "outrigger_remote_plugin_sent_bytes_total", plugin="Coscheduling", rpc="PreFilter") > 0
            assert value(m, "outrigger_remote_plugin_received_bytes_total", plugin="Coscheduling",
                         rpc="Permit") > 0
            assert value(m, "outrigger_remote_replica_up", endpoint="gang", replica=address) == 1
            assert value(m, "outrigger_remote_replica_calls_total", endpoint="gang", replica=address) >= 16
            # The HTTP port is read-only but for the debug switch.
            status, body = await http(srv, "POST", "/metrics", b"")
            assert status == 405 and json.loads(body) == {"error": "/metrics is read-only (GET)"}
        finally:
            await srv.stop(0.5)

    with HostProcess("pluginhost.examples.coscheduling:Coscheduling") as host:
        asyncio.run(main(host.address))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(not os.access(PROMETHEUS, os.X_OK),
                    reason=f"{PROMETHEUS} is not installed (Debian: apt-get install prometheus)")
def test_a_real_prometheus_server_scrapes_the_metrics() -> None:
    text = config([], {})

    async def test(server: Server) -> None:
        await server.scheduler.apply(objects(*nodes(2), pod("a"), pod("b")))
        await until(bound(server, "a", "b"), 30, "two pods bound")
        assert server.observability is not None and server.observability.http is not None
        target = server.observability.http.address
        port = _free_port()
        with tempfile.TemporaryDirectory() as tmp:
            cfg = Path(tmp, "prometheus.yml")
            cfg.write_text(
                "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                "scrape_configs:\n"
                f"- job_name: outrigger\n  static_configs: [{{targets: ['{target}']}}]\n"
            )
            proc = subprocess.Popen(
                [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={tmp}/data",
                 f"--web.listen-address=127.0.0.1:{port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            try:
                query = f"http://127.0.0.1:{port}/api/v1/query?query=scheduler_schedule_attempts_total"

                def ask() -> list[Any]:
                    try:
                        with urllib.request.urlopen(query, timeout=5) as resp:
                            return list(json.loads(resp.read())["data"]["result"])
                    except (OSError, ValueError, KeyError):
                        return []

                result: list[Any] = []
                deadline = time.monotonic() + 60
                while not result and time.monotonic() < deadline:
                    result = await asyncio.to_thread(ask)
                    if not result:
                        await asyncio.sleep(0.5)
                assert result, "prometheus did not scrape the framework within 60s"
                got = {(r["metric"]["result"], r["metric"]["profile"], r["metric"]["job"]): r["value"][1]
                       for r in result}
                assert got == {("scheduled", PROFILE, "outrigger"): "2"}
            finally:
                stop_process(proc)

    in_process(text, test, ObservabilityConfig(http="127.0.0.1:0"))


# ---------------------------------------------------------------------------------------------------
# Debug scores


def test_debug_scores_switch_at_runtime_and_equal_explain(caplog: pytest.LogCaptureFixture) -> None:
    text = config([], {})
    cluster = [{**n, "status": {"allocatable": {"cpu": str(2 + i), "memory": f"{4 + 2 * i}Gi", "pods": "110"}}}
               for i, n in enumerate(nodes(4))]

    async def test(server: Server) -> None:
        s = server.scheduler
        await s.apply(objects(*cluster))
        status, body = await http(server, "GET", "/debug/flags/scores")
        assert (status, json.loads(body)) == (200, {"top": 0})
        status, body = await http(server, "PUT", "/debug/flags/scores?top=3")
        assert (status, json.loads(body)) == (200, {"top": 3})
        # What explain says for p1 on this very snapshot...
        p1 = objects(pod("p1", cpu="1"))[0]
        assert isinstance(p1, Pod)
        explained = await explain_pod(s.profiles[PROFILE], s.cache.snapshot(), p1)
        with caplog.at_level(logging.INFO, logger="outrigger.debugscores"):
            await s.apply([p1])
            await until(bound(server, "p1"), 30, "p1 bound")
        # ...is what the debug table of its scheduling says, for the top 3 nodes.
        status, body = await http(server, "GET", "/debug/scores/default/p1")
        assert status == 200
        table = json.loads(body)
        ranked = sorted(explained["nodes"].items(), key=lambda kv: (-kv[1]["total"], kv[0]))[:3]
        assert [(n["node"], n["total"], n["scores"]) for n in table["nodes"]] == [
            (name, e["total"], e["scores"]) for name, e in ranked
        ]
        assert table["scored_nodes"] == 4 and table["attempt"] == 1 and table["top"] == 3
        assert table["selected"] == s.get_pod("default", "p1").pod.node_name == explained["selected"]
        # The same table through the Scheduler API and the CLI.
        with SchedulerClient(server.address) as c:
            typed = await asyncio.to_thread(c.debug_scores, "p1")
        assert typed.to_dict() == table
        assert (typed.pod, typed.attempt, typed.scored_nodes, typed.top, typed.selected) == (
            "default/p1", 1, 4, 3, table["selected"])
        assert [(n.node, n.total, {p: (sc.raw, sc.normalized, sc.weighted) for p, sc in n.scores.items()})
                for n in typed.nodes] == [
            (name, e["total"], {p: (sc["raw"], sc["normalized"], sc["weighted"]) for p, sc in e["scores"].items()})
            for name, e in ranked]
        code = await asyncio.to_thread(cli.main, ["debug-scores", "p1", "--server", server.address, "-o", "json"])
        assert code == 0
        logged = [r.getMessage() for r in caplog.records if r.name == "outrigger.debugscores"]
        assert len(logged) == 1 and logged[0].startswith("scores of pod default/p1 (attempt 1, 4 nodes scored, top 3)")
        assert table["nodes"][0]["node"] in logged[0]
        # Off: the next pod gets no table.
        status, body = await http(server, "POST", "/debug/flags/scores", b"0")
        assert (status, json.loads(body)) == (200, {"top": 0})
        await s.apply(objects(pod("p2", cpu="1")))
        await until(bound(server, "p2"), 30, "p2 bound")
        status, body = await http(server, "GET", "/debug/scores/default/p2")
        assert status == 404
        assert json.loads(body) == {"error": "no debug score table for pod default/p2 (are debug scores on?)"}
        with SchedulerClient(server.address) as c, pytest.raises(ClientError, match="no debug score table"):
            await asyncio.to_thread(c.debug_scores, "p2")
        # A bad value changes nothing.
        for bad in (b"-1", b"many"):
            status, body = await http(server, "PUT", "/debug/flags/scores", bad)
            assert status == 400 and "top must be an integer >= 0" in json.loads(body)["error"]
        assert json.loads((await http(server, "GET", "/debug/flags/scores"))[1]) == {"top": 0}

    in_process(text, test, ObservabilityConfig(http="127.0.0.1:0"))


def test_debug_scores_validate_top() -> None:
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="top must be an integer >= 0"):
            DebugScores(bad)  # type: ignore[arg-type]
    assert DebugScores(4).enabled and not DebugScores(0).enabled


# ---------------------------------------------------------------------------------------------------
# Plugins' debug endpoints and the node view


def _group_pods() -> list[dict[str, Any]]:
    # Two members of a group of three: both wait at Permit for a third that never comes.
    return gang("train", 2, 3, timeout=60)


def _check_endpoints(remote: bool) -> Callable[[Server], Awaitable[None]]:
    async def test(server: Server) -> None:
        s = server.scheduler
        await s.apply(objects(*nodes(2), pod("solo"), *_group_pods()))
        await until(lambda: len(s.waiting_pods) == 2 and bound(server, "solo")(), 30, "two members waiting")
        status, body = await http(server, "GET", "/apis/v1/__services__")
        assert status == 200
        services = json.loads(body)
        assert services["plugins"] == [{"plugin": "Coscheduling", "remote": remote, "profiles": [PROFILE],
                                        "endpoints": ["/apis/v1/plugins/Coscheduling/podgroups"]}]
        assert "/apis/v1/nodes/<name>" in services["framework"]
        status, body = await http(server, "GET", "/apis/v1/plugins/Coscheduling/podgroups")
        assert status == 200
        assert json.loads(body) == {"groups": [{"namespace": "default", "name": "train", "minMember": 3,
                                                "placed": [], "waiting": ["train-0", "train-1"]}]}
        solo_node = s.get_pod("default", "solo").pod.node_name
        status, body = await http(server, "GET", f"/apis/v1/nodes/{solo_node}")
        view = json.loads(body)
        assert status == 200
        on_node = sorted(p for p in ("default/solo", "default/train-0", "default/train-1")
                         if s.cache.snapshot().pods[s.cache.snapshot().row(solo_node)]
                         and p in {q.key for q in s.cache.snapshot().pods[s.cache.snapshot().row(solo_node)]})
        assert view["pods"] == on_node and "default/solo" in on_node
        assert view["labels"] == {"kubernetes.io/hostname": solo_node}
        assert view["taints"] == [] and view["unschedulable"] is False
        assert view["allocatable"]["cpu"] == 4000 and view["allocatable"]["pods"] == 110
        assert view["requested"]["cpu"] == 1000 * len(on_node)
        for path, message in [
            ("/apis/v1/plugins/Nope/podgroups", "no plugin named 'Nope'"),
            ("/apis/v1/plugins/Coscheduling/nope",
             "plugin 'Coscheduling' has no debug endpoint 'nope' (it has: podgroups)"),
            ("/apis/v1/plugins/NodeResourcesFit/x",
             "plugin 'NodeResourcesFit' has no debug endpoint 'x' (it has: none)"),
            ("/apis/v1/nodes/nope", "node 'nope' not found"),
            ("/apis/v1/other", "no such path '/apis/v1/other' (see /apis/v1/__services__)"),
        ]:
            status, body = await http(server, "GET", path)
            assert (status, json.loads(body)) == (404, {"error": message}), path
        for wp in list(s.waiting_pods):
            wp.reject("test", "done")

    return test


def test_plugin_debug_endpoints_in_process() -> None:
    text = config(["Coscheduling"], {})
    in_process(text, _check_endpoints(remote=False), ObservabilityConfig(http="127.0.0.1:0"), (Coscheduling,))


def test_plugin_debug_endpoints_of_a_plugin_host_process() -> None:
    text = config(["Coscheduling"], {})

    async def main(address: str) -> None:
        srv = await start_service(lambda reg: load_config(text, reg.points()), [endpoint("gang", address)],
                                  observability=ObservabilityConfig(http="127.0.0.1:0"))
        try:
            await _check_endpoints(remote=True)(srv)
        finally:
            await srv.stop(0.5)

    with HostProcess("pluginhost.examples.coscheduling:Coscheduling") as host:
        asyncio.run(main(host.address))


# ---------------------------------------------------------------------------------------------------
# The in-process trace store and `outrigger trace`


def test_trace_store_serves_the_span_tree_of_a_pods_last_attempt(capsys: pytest.CaptureFixture[str]) -> None:
    text = config([], {})
    tracing = Tracing(store=SpanStore(10))

    async def test(server: Server) -> None:
        await server.scheduler.apply(objects(*nodes(2), pod("web")))
        await until(bound(server, "web"), 30, "web bound")
        await until(lambda: any(s.name == "SchedulePod" for s in tracing.store.trace_of("default/web")),  # type: ignore[union-attr]
                    30, "the root span ended")
        with SchedulerClient(server.address) as c:
            spans = await asyncio.to_thread(c.get_trace, "web")
            with pytest.raises(ClientError, match="no trace kept for pod default/ghost"):
                await asyncio.to_thread(c.get_trace, "ghost")
        names = [sp.name for sp in spans]
        assert names[0] == "SchedulePod"
        assert {"SchedulingCycle", "PreFilter", "Filter", "Filter/NodeResourcesFit", "Score", "Reserve", "Permit",
                "BindingCycle", "Bind", "Bind/DefaultBinder"} <= set(names)
        assert len({sp.trace_id for sp in spans}) == 1
        root = spans[0]
        attrs = root.attributes
        assert attrs["outrigger.result"] == "bound" and attrs["outrigger.selected_node"] in ("n0", "n1")
        code = await asyncio.to_thread(cli.main, ["trace", "default/web", "--server", server.address])
        assert code == 0
        out = capsys.readouterr().out.splitlines()
        assert out[0] == f"trace {root.trace_id}"
        assert out[1].startswith("SchedulePod ") and "pod=default/web" in out[1] and "result=bound" in out[1]
        assert any(line.startswith("├── SchedulingCycle ") for line in out)
        assert any(line.startswith("└── BindingCycle ") for line in out)
        assert any(line.startswith("│   ├── Filter ") and "nodes_out=2" in line for line in out)

    in_process(text, test, ObservabilityConfig(tracing=tracing))


def test_trace_without_a_store_is_a_clear_error() -> None:
    async def test(server: Server) -> None:
        with SchedulerClient(server.address) as c, pytest.raises(ClientError, match="keeps no traces"):
            await asyncio.to_thread(c.get_trace, "web")

    in_process(config([], {}), test, ObservabilityConfig())


def test_sampled_out_contexts_make_no_spans() -> None:
    tracing = Tracing(sampler=make_sampler("always_off"), store=SpanStore(10))

    async def test(server: Server) -> None:
        await server.scheduler.apply(objects(*nodes(2), pod("web")))
        await until(bound(server, "web"), 30, "web bound")
        assert tracing.store is not None and len(tracing.store) == 0

    in_process(config([], {}), test, ObservabilityConfig(tracing=tracing))


# ---------------------------------------------------------------------------------------------------
# Settings


@pytest.mark.parametrize(
    ("env", "flags", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "jaeger"}, {}, "unknown trace exporter 'jaeger' (one of: otlp, console, none)"),
        ({}, {"exporters": "otlp,zipkin"}, "unknown trace exporter 'zipkin'"),
        ({"OTEL_TRACES_SAMPLER": "sometimes"}, {}, "unknown trace sampler 'sometimes'"),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}, {},
         "trace sampler argument 'half' is not a number"),
        ({}, {"sampler": "parentbased_traceidratio", "sampler_arg": "1.5"}, "trace sampler argument '1.5' is outside"),
        ({}, {"store": -1}, "the number of traces to keep must be >= 0, got -1"),
    ],
)
def test_bad_tracing_settings_are_named(env: dict[str, str], flags: dict[str, Any], message: str) -> None:
    with pytest.raises(TracingConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TracingConfig.from_env(env, **flags)


@pytest.mark.parametrize(
    ("env", "flags", "want"),
    [
        ({}, {}, TracingConfig()),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_SERVICE_NAME": "s",
          "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, {},
         TracingConfig(("otlp",), "http://c:4317", "s", "traceidratio", "0.25")),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, {"exporters": "console,none", "service_name": "flag", "store": 5},
         TracingConfig(("console",), None, "flag", store=5)),
        ({"OTEL_TRACES_EXPORTER": "none"}, {}, TracingConfig()),
    ],
)
def test_tracing_settings_come_from_env_and_flags(env: dict[str, str], flags: dict[str, Any],
                                                  want: TracingConfig) -> None:
    got = TracingConfig.from_env(env, **flags)
    assert got == want
    assert got.enabled == bool(want.exporters or want.store)


def test_serve_refuses_bad_tracing_flags(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["serve", "--trace-exporter", "jaeger", "--listen", "127.0.0.1:0"])
    assert code == 1
    assert capsys.readouterr().err.strip() == "error: unknown trace exporter 'jaeger' (one of: otlp, console, none)"



# ---------------------------------------------------------------------------------------------------
# The plugin host's span per call


class _Allow(PermitPlugin):
    name = "Allow"
    needs_snapshot = False

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def permit(self, state: Any, pod: Pod, node_name: str) -> tuple[Status, float]:
        return Status(), 0.0


def test_host_span_parent_comes_from_the_context_then_from_metadata() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    in_band = "00-" + "a1" * 16 + "-" + "b1" * 8 + "-01"
    metadata = "00-" + "a2" * 16 + "-" + "b2" * 8 + "-01"
    cases = [  # (trace context in CycleContext, traceparent metadata)
        ({"traceparent": in_band}, metadata),
        ({}, metadata),
        ({}, None),
    ]

    async def main() -> None:
        host = PluginHost([_Allow], listen="127.0.0.1:0")
        async with host, grpc.aio.insecure_channel(host.address) as channel:
            stub = pb.plugin_grpc.PluginStub(channel)
            reply = await stub.Configure(pb.plugin.ConfigureRequest(plugin="Allow", profile="p"))
            assert reply.status.code == pb.types.CODE_SUCCESS
            for i, (carried, md) in enumerate(cases):
                ctx = pb.plugin.CycleContext(cycle_id=f"c{i}", plugin="Allow", profile="p", attempt=1,
                                             trace_context=carried)
                request = pb.plugin.NodeRequest(ctx=ctx, node_name="n1")
                got = await stub.Permit(request, metadata=(("traceparent", md),) if md else None, timeout=10)
                assert got.status.code == pb.types.CODE_SUCCESS


    host_tracing.configure(provider)
    try:
        asyncio.run(main())
    finally:
        host_tracing.configure(None)
    spans = exporter.get_finished_spans()
    assert [(s.name, f"{s.context.trace_id:032x}", f"{s.parent.span_id:016x}" if s.parent else "",
             s.attributes["outrigger.cycle_id"], s.kind.name) for s in spans] == [
        ("outrigger.v1.Plugin/Permit", "a1" * 16, "b1" * 8, "c0", "SERVER"),
        ("outrigger.v1.Plugin/Permit", "a2" * 16, "b2" * 8, "c1", "SERVER"),
    ]


def test_code_in_a_traced_cycle_describes_itself_on_the_framework_span() -> None:
    # What plugins (e.g. Reservation) call: the framework's span when one is current, OpenTelemetry's otherwise.
    from framework.observe import tracing as fw_tracing

    store = SpanStore(1)
    tr = Tracing(store=store)
    root = tr.start_trace("SchedulePod", {}, pod="default/p")
    assert root is not None
    assert not fw_tracing.get_current_span().is_recording()  # no framework span, no OpenTelemetry SDK span
    token = fw_tracing.activate(root)
    try:
        span = fw_tracing.get_current_span()
        assert span.is_recording()
        span.set_attribute("outrigger.reservation.name", "r1")
    finally:
        fw_tracing.deactivate(token)
    root.end()
    tr.shutdown()
    assert [(s.name, dict(s.attributes or {})) for s in store.trace_of("default/p")] == [
        ("SchedulePod", {"outrigger.reservation.name": "r1"})
    ]
