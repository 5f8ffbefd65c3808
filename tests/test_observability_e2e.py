"""End to end: the framework and two plugin host processes on 127.0.0.1 export their spans over
OTLP/gRPC to one collector (tests/otlp_sink.py); a pod's scheduling context is one trace across the
three processes, with the framework's cycle, extension point and plugin spans, the hosts' server
spans under the framework's plugin-call spans, a plugin author's own span under those, and the
attributes that say what happened."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from otlp_sink import CollectedSpan, OtlpSink
from test_observability import http, samples, value
from test_remote_examples import config, gang, nodes, objects, pod
from test_remote_harness import HostProcess, Hosts, endpoint, until
from traced_plugins import AUTHOR_SPAN

from framework.config import load_config
from framework.observe.observability import ObservabilityConfig
from framework.observe.tracing import TracingConfig
from framework.service import start_service
from pluginhost.examples.coscheduling import TIMEOUT
from pluginhost.examples.nodelabels import PREFER, REQUIRE

FRAMEWORK = "outrigger-framework"
GANG_HOST = "gang-host"
LABELS_HOST = "labels-host"


def host_env(sink: OtlpSink, service: str) -> dict[str, str]:
    return {
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_EXPORTER_OTLP_ENDPOINT": sink.endpoint,
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }


def by_id(spans: list[CollectedSpan]) -> dict[str, CollectedSpan]:
    return {s.span_id: s for s in spans}


def chain(span: CollectedSpan, spans: dict[str, CollectedSpan]) -> list[str]:
    """The span's name and its ancestors' names, up to the root ("service:name" for host spans)."""
    out = []
    cur: CollectedSpan | None = span
    while cur is not None:
        out.append(cur.name if cur.service == FRAMEWORK else f"{cur.service}:{cur.name}")
        cur = spans.get(cur.parent_span_id) if cur.parent_span_id else None
    return out


def root_of(spans: list[CollectedSpan], pod_key: str) -> CollectedSpan:
    roots = [s for s in spans if s.name == "SchedulePod" and s.attributes.get("outrigger.pod") == pod_key]
    assert len(roots) == 1, [r.attributes for r in roots]
    return roots[0]


def test_one_trace_covers_the_framework_and_both_plugin_hosts() -> None:
    labelled = {0: {"disktype": "ssd"}, 1: {"disktype": "ssd"}, 2: {"disktype": "hdd"}}
    objs = objects(
        *nodes(3, labels=labelled),
        # A gang of two (the first member waits at Permit) that also needs SSD nodes.
        *[{**p, "metadata": {**p["metadata"], "annotations": {**p["metadata"]["annotations"],
                                                               REQUIRE: "disktype=ssd", TIMEOUT: "20"}}}
          for p in gang("train", 2, 2)],
        pod("big", cpu="64", annotations={PREFER: "disktype=ssd"}),
    )
    text = config(["Coscheduling", "NodeLabels"], {})

    async def scenario(addresses: list[str], sink: OtlpSink) -> Any:
        eps = [endpoint("gang", addresses[0]), endpoint("labels", addresses[1])]
        tracing = TracingConfig(exporters=("otlp",), endpoint=sink.endpoint, service_name=FRAMEWORK, store=50)
        srv = await start_service(lambda reg: load_config(text, reg.points()), eps,
                                  observability=ObservabilityConfig(tracing=tracing, http="127.0.0.1:0"))
        try:
            await srv.scheduler.apply(objs)

            def settled() -> bool:
                recs = {n: srv.scheduler.get_pod("default", n) for n in ("train-0", "train-1", "big")}
                return (all(r is not None and r.phase == "Bound" for n, r in recs.items() if n != "big")
                        and recs["big"] is not None and recs["big"].attempts >= 1
                        and recs["big"].last_status is not None)

            await until(settled, 60, "gang bound and the big pod tried")
            nodes_of = {n: srv.scheduler.get_pod("default", n).pod.node_name for n in ("train-0", "train-1")}
            big_status = srv.scheduler.get_pod("default", "big").last_status
            assert srv.remote is not None
            await srv.remote.drain()
            # The remote plugins' node batches, as scraped, are the adapter's own count.
            status, body = await http(srv, "GET", "/metrics")
            batches = srv.remote.stats()["NodeLabels"]["Filter"].batches
            assert status == 200 and batches >= 2
            assert value(samples(body), "outrigger_remote_plugin_node_batches_total", plugin="NodeLabels",
                         rpc="Filter") == batches
        finally:
            await srv.stop(1.0)  # flushes the framework's spans
        return nodes_of, big_status

    with OtlpSink() as sink:
        hosts = Hosts(HostProcess("pluginhost.examples.coscheduling:Coscheduling", env=host_env(sink, GANG_HOST)),
                      HostProcess("traced_plugins:TracedNodeLabels", env=host_env(sink, LABELS_HOST)))
        with hosts as addresses:
            nodes_of, big_status = asyncio.run(scenario(addresses, sink))
        # The hosts were stopped with SIGTERM: they flush what they buffered before exiting.

        def complete(spans: list[CollectedSpan]) -> bool:
            roots = [s for s in spans if s.name == "SchedulePod"]
            hosts_seen = {s.service for s in spans}
            return len(roots) >= 3 and {FRAMEWORK, GANG_HOST, LABELS_HOST} <= hosts_seen
        spans = sink.wait_for(complete, 60)

    assert nodes_of["train-0"] in ("n0", "n1") and nodes_of["train-1"] in ("n0", "n1")

    # ---- the first gang member: scheduled, held at Permit, bound -------------------------------
    root = root_of(spans, "default/train-0")
    trace = [s for s in spans if s.trace_id == root.trace_id]
    ids = by_id(trace)
    assert {s.service for s in trace} == {FRAMEWORK, GANG_HOST, LABELS_HOST}
    # Every span's parent is in the same trace: one tree, rooted at SchedulePod.
    assert [s.name for s in trace if not s.parent_span_id] == ["SchedulePod"]
    assert all(s.parent_span_id in ids for s in trace if s.parent_span_id)
    a = root.attributes
    assert a["outrigger.profile"] == "default-scheduler"
    assert a["outrigger.attempt"] == 1
    assert a["outrigger.cycle_id"].startswith("uid-train-0:1:")
    assert isinstance(a["outrigger.snapshot.generation"], int) and a["outrigger.snapshot.generation"] >= 1
    assert a["outrigger.selected_node"] == nodes_of["train-0"]
    assert a["outrigger.feasible_nodes"] == 2  # n2 has no SSD
    assert a["outrigger.result"] == "bound"
    assert a["outrigger.status.code"] == "Success"
    assert a["k8s.pod.name"] == "train-0" and a["k8s.namespace.name"] == "default"

    def one(name: str, service: str = FRAMEWORK, under: str | None = None) -> CollectedSpan:
        found = [s for s in trace if s.name == name and s.service == service
                 and (under is None or ids[s.parent_span_id].name == under)]
        assert len(found) == 1, (name, service, [chain(s, ids) for s in found])
        return found[0]

    # The framework's tree.
    assert chain(one("SchedulingCycle"), ids) == ["SchedulingCycle", "SchedulePod"]
    assert chain(one("BindingCycle"), ids) == ["BindingCycle", "SchedulePod"]
    assert chain(one("WaitOnPermit"), ids) == ["WaitOnPermit", "BindingCycle", "SchedulePod"]
    assert one("WaitOnPermit").attributes["outrigger.permit.waiting_plugins"] == ["Coscheduling"]
    assert chain(one("Bind/DefaultBinder"), ids) == ["Bind/DefaultBinder", "Bind", "BindingCycle", "SchedulePod"]
    filt = one("Filter")
    assert chain(filt, ids) == ["Filter", "SchedulingCycle", "SchedulePod"]
    assert filt.attributes["outrigger.filter.nodes_in"] == 3
    assert filt.attributes["outrigger.filter.nodes_examined"] == 3
    assert filt.attributes["outrigger.filter.nodes_out"] == 2
    labels_filter = one("Filter/NodeLabels")
    assert labels_filter.kind == "CLIENT"
    # The runtime sends the remote plugin the whole window ahead of its turn (in-process plugins first).
    assert labels_filter.attributes["outrigger.filter.prefetch"] is True
    assert labels_filter.attributes["outrigger.filter.nodes_in"] == 3
    fit = one("Filter/NodeResourcesFit")
    assert fit.kind == "INTERNAL" and fit.attributes["outrigger.plugin"] == "NodeResourcesFit"
    permit = one("Permit")
    assert permit.attributes["outrigger.status.code"] == "Wait"

    # The hosts' server spans are children of the framework's plugin-call spans.
    gang_prefilter = one("outrigger.v1.Plugin/PreFilter", GANG_HOST)
    assert chain(gang_prefilter, ids) == [f"{GANG_HOST}:outrigger.v1.Plugin/PreFilter", "PreFilter/Coscheduling",
                                          "PreFilter", "SchedulingCycle", "SchedulePod"]
    assert gang_prefilter.kind == "SERVER"
    assert gang_prefilter.attributes["outrigger.plugin"] == "Coscheduling"
    assert gang_prefilter.attributes["outrigger.cycle_id"] == a["outrigger.cycle_id"]
    assert gang_prefilter.attributes["outrigger.pod"] == "default/train-0"
    gang_permit = one("outrigger.v1.Plugin/Permit", GANG_HOST)
    assert chain(gang_permit, ids)[:3] == [f"{GANG_HOST}:outrigger.v1.Plugin/Permit", "Permit/Coscheduling", "Permit"]
    labels_server = one("outrigger.v1.Plugin/Filter", LABELS_HOST)
    assert chain(labels_server, ids)[:3] == [f"{LABELS_HOST}:outrigger.v1.Plugin/Filter", "Filter/NodeLabels",
                                             "Filter"]
    # The plugin author's own span nests under the host's span for the call.
    author = one(AUTHOR_SPAN, LABELS_HOST)
    assert author.parent_span_id == labels_server.span_id
    assert author.attributes["nodes"] == 3

    # ---- the pod that fits nowhere: the final status and reasons are on the trace --------------
    big = root_of(spans, "default/big")
    assert big.attributes["outrigger.result"] == "unschedulable"
    assert big.attributes["outrigger.status.code"] == big_status.code.name == "Unschedulable"
    assert big.attributes["outrigger.status.reasons"] == list(big_status.reasons)
    assert big.attributes["outrigger.status.reasons"][0].startswith("0/3 nodes are available: 3 Insufficient cpu.")
    assert big.attributes["outrigger.feasible_nodes"] == 0
    assert "outrigger.selected_node" not in big.attributes
    big_trace = [s for s in spans if s.trace_id == big.trace_id]
    assert {s.name for s in big_trace} >= {"SchedulePod", "SchedulingCycle", "PreFilter", "Filter", "PostFilter"}
    assert "BindingCycle" not in {s.name for s in big_trace}
    assert json.dumps(big.attributes)  # plain values only
