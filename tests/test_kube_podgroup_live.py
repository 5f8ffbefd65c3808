"""PodGroup cycles on the real API server (kube-apiserver v1.37.2, GenericWorkload and
TopologyAwareWorkloadScheduling on) with ``outrigger serve --kubeconfig``, as a team running gangs does:

- a remote PlacementScore plugin (the example SharedLabelPlacement, in a real plugin host process) decides
  which rack a gang lands in, with kube-scheduler's own PodGroupPodsCount served unmodified by the Go
  adapter (``outrigger-kube-plugins``) scoring too, and the group cycle's trace, exported over OTLP by the
  framework and both hosts to one collector, holds the hosts' spans under the framework's call spans;
- two gangs that together do not fit, applied at once: one is bound whole, every pod of the other stays
  pending with kube-scheduler's messages and PodGroup condition (the real kube-scheduler v1.37.2 gives the
  same), and once the first is deleted the second is bound whole;
- the framework SIGKILLed while a gang's binding is in flight (a remote PreBind holds one member): the
  members already bound stay where they are, and the restarted framework completes the group.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, wait_for
from otlp_sink import CollectedSpan, OtlpSink
from test_go_plugins import GoHost, kube_plugins  # noqa: F401 (kube_plugins: the fixture that builds it)
from test_kube_podgroup_cycle import KUBE_SCHEDULER, PROFILE, Gangs, member, pod_group
from test_observability_e2e import host_env
from test_remote_harness import HostProcess

from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

GATES = "GenericWorkload=true,TopologyAwareWorkloadScheduling=true"
FRAMEWORK = "outrigger-framework"
HOST = "placement-host"
GO_HOST = "upstream-host"
WAIT = 90.0


def config(extra_plugins: str = "", plugin_config: str = "") -> str:
    return f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 500, burst: 500}}
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {PROFILE}
  plugins:
    multiPoint: {{disabled: [{{name: DefaultPreemption}}, {{name: DynamicResources}}]}}
{extra_plugins}  pluginConfig: [{plugin_config}]
"""


def remote_plugins(path: Path, **addresses: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "outrigger.io/v1alpha1", "kind": "RemotePlugins",
        "plugins": [{"name": name, "address": address, "deadlines": {"default": "10s", "preBind": "300s"}}
                    for name, address in addresses.items()],
    }))
    return path


class Live:
    """The cluster, the test's namespace, and how to read its pods and PodGroups through the API."""

    def __init__(self, cluster: LocalCluster, namespace: str, tmp: Path) -> None:
        self.cluster, self.ns, self.tmp = cluster, namespace, tmp
        self.base = namespace[:40].rstrip("-")

    def apply(self, *docs: dict[str, Any]) -> None:
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def nodes_of(self, *pods: str) -> list[str]:
        items = get_json(self.cluster, "pods", "-n", self.ns)["items"]
        by_name = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in items}
        return [by_name.get(p, "") for p in pods]

    def framework(self, config_text: str, plugins: Path | None = None, *extra: str) -> FrameworkProcess:
        path = self.tmp / "scheduler.yaml"
        path.write_text(config_text)
        fw = FrameworkProcess(outrigger_kubeconfig(self.cluster), path, plugins)
        fw.argv += ["--feature-gates", GATES, *extra]
        return fw


@pytest.fixture
def live(kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> Live:
    return Live(kube_cluster, kube_namespace, tmp_path)


def rack_node(name: str, rack: str, power: str) -> dict[str, Any]:
    node = node_manifest(name, cpu="1", labels={"rack": rack, "power": power})
    return node


def topology_gang(name: str, namespace: str, min_count: int) -> dict[str, Any]:
    pg = pod_group(name, namespace, min_count)
    pg["spec"]["schedulingConstraints"] = {"topology": [{"key": "rack"}]}
    return pg


# ---- a remote PlacementScore plugin, and the group cycle's trace ----------------------------------


def test_remote_placement_score_plugins_pick_the_rack_and_their_spans_are_in_the_group_cycles_trace(
        live: Live, kube_plugins: Path) -> None:  # noqa: F811 (the fixture)
    b = live.base
    # Two racks of two 1-cpu nodes: rack-a's nodes on two power domains, rack-b's on one. The gang
    # (2 x 1 cpu) fits in either rack; only SharedLabelPlacement's score tells them apart. Upstream
    # PodGroupPodsCount, served unmodified by the Go adapter, scores both racks alike (2 pods each).
    live.apply(rack_node(f"{b}-a1", "rack-a", "p1"), rack_node(f"{b}-a2", "rack-a", "p2"),
               rack_node(f"{b}-b1", "rack-b", "p3"), rack_node(f"{b}-b2", "rack-b", "p3"))
    text = config("    placementScore: {enabled: [{name: SharedLabelPlacement, weight: 10}, "
                  "{name: UpstreamPodGroupPodsCount}]}\n",
                  "{name: SharedLabelPlacement, args: {label: power}}")
    with OtlpSink() as sink:
        with HostProcess("pluginhost.examples.sharedlabel:SharedLabelPlacement", env=host_env(sink, HOST)) as host, \
                GoHost(kube_plugins, "--prefix", "Upstream", env=host_env(sink, GO_HOST)) as go_host:
            plugins = remote_plugins(live.tmp / "plugins.yaml", shared=host.address, upstream=go_host.address)
            fw = live.framework(text, plugins, "--trace-exporter", "otlp", "--otlp-endpoint", sink.endpoint,
                                "--service-name", FRAMEWORK)
            fw.start()
            try:
                live.apply(topology_gang("g", live.ns, 2), *(member(f"p{i}", live.ns, "g", "1") for i in range(2)))
                landed = wait_for(lambda: all(n := live.nodes_of("p0", "p1")) and n, WAIT, "the gang bound")
            finally:
                fw.stop()  # SIGTERM: the framework flushes its spans
        # The hosts, stopped with SIGTERM, flushed their own.

        def complete(spans: list[CollectedSpan]) -> bool:
            return (any(s.name == "SchedulePodGroup" for s in spans)
                    and len([s for s in spans if s.service == HOST]) >= 2
                    and len([s for s in spans if s.service == GO_HOST]) >= 3)
        spans = sink.wait_for(complete, 60)
    assert sorted(landed) == [f"{b}-b1", f"{b}-b2"], fw.output()
    roots = [s for s in spans if s.name == "SchedulePodGroup"]
    assert [r.attributes["outrigger.podgroup"] for r in roots] == [f"{live.ns}/g"]
    (root,) = roots
    trace = {s.span_id: s for s in spans if s.trace_id == root.trace_id}
    a = root.attributes
    assert (a["outrigger.result"], a["outrigger.podgroup.placement"], a["outrigger.podgroup.bound"],
            a["outrigger.podgroup.min_count"], a["outrigger.profile"]) == ("bound", "rack-b", 2, 2, PROFILE)
    assert sorted(a["outrigger.podgroup.assignments"]) == sorted(
        f"{live.ns}/p{i}={n}" for i, n in enumerate(live.nodes_of("p0", "p1")))
    # The framework's calls of the remote plugin, one per placement where the gang fits, under PlacementScore.
    calls = sorted((s for s in trace.values() if s.name == "PlacementScore/SharedLabelPlacement"),
                   key=lambda s: s.attributes["outrigger.placement"])
    assert [(s.service, s.kind, s.attributes["outrigger.placement"], trace[s.parent_span_id].name)
            for s in calls] == [(FRAMEWORK, "CLIENT", rack, "PlacementScore") for rack in ("rack-a", "rack-b")]
    assert trace[trace[calls[0].parent_span_id].parent_span_id].name == "PodGroupSchedulingCycle"
    # The host's server spans: in the same trace, each a child of the call it served.
    served = sorted((s for s in trace.values() if s.service == HOST), key=lambda s: s.attributes["outrigger.cycle_id"])
    assert [(s.name, s.kind, s.parent_span_id) for s in served] == [
        ("outrigger.v1.Plugin/PlacementScore", "SERVER", c.span_id) for c in calls]
    assert [s.attributes["outrigger.cycle_id"] for s in served] == [
        f"{a['outrigger.cycle_id']}/placement/{rack}" for rack in ("rack-a", "rack-b")]
    # The Go adapter's upstream PodGroupPodsCount: ScorePlacement per placement, then one
    # NormalizePlacementScore, each a SERVER span of the Go host under the framework's call span.
    go_calls = sorted((s for s in trace.values() if s.name.endswith("/UpstreamPodGroupPodsCount")),
                      key=lambda s: (s.name, s.attributes.get("outrigger.placement", "")))
    assert [(s.name, s.kind, s.attributes.get("outrigger.placement"), trace[s.parent_span_id].name)
            for s in go_calls] == [
        ("NormalizePlacementScore/UpstreamPodGroupPodsCount", "CLIENT", None, "PlacementScore"),
        ("PlacementScore/UpstreamPodGroupPodsCount", "CLIENT", "rack-a", "PlacementScore"),
        ("PlacementScore/UpstreamPodGroupPodsCount", "CLIENT", "rack-b", "PlacementScore"),
    ]
    go_served = {s.parent_span_id: s for s in trace.values() if s.service == GO_HOST}
    assert sorted(go_served) == sorted(c.span_id for c in go_calls)
    cycle_id = a["outrigger.cycle_id"]
    assert [(go_served[c.span_id].name, go_served[c.span_id].kind, go_served[c.span_id].attributes["outrigger.plugin"],
             go_served[c.span_id].attributes["outrigger.cycle_id"]) for c in go_calls] == [
        ("outrigger.v1.Plugin/NormalizePlacementScore", "SERVER", "UpstreamPodGroupPodsCount", cycle_id),
        ("outrigger.v1.Plugin/PlacementScore", "SERVER", "UpstreamPodGroupPodsCount", f"{cycle_id}/placement/rack-a"),
        ("outrigger.v1.Plugin/PlacementScore", "SERVER", "UpstreamPodGroupPodsCount", f"{cycle_id}/placement/rack-b"),
    ]
    # Both pods' binding cycles, bound, in the same trace.
    assert sorted((s.attributes["outrigger.pod"], s.attributes["outrigger.result"])
                  for s in trace.values() if s.name == "BindingCycle") == [
        (f"{live.ns}/p0", "bound"), (f"{live.ns}/p1", "bound")]


# ---- two gangs racing for the same capacity -------------------------------------------------------


@pytest.fixture(params=["outrigger", KUBE_SCHEDULER])
def gangs(kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path,
          request: pytest.FixtureRequest) -> Iterator[Gangs]:
    rig = Gangs(kube_cluster, kube_namespace, tmp_path, request.param)
    try:
        yield rig
    finally:
        rig.close()


def test_of_two_racing_gangs_one_is_bound_whole_the_other_waits_whole_and_is_bound_when_room_is_made(
        gangs: Gangs) -> None:
    ns = gangs.ns
    gangs.start()
    # Two nodes of 2 cpus; two gangs of three 1-cpu pods (minCount 3), each fits alone, not both.
    gangs.apply(pod_group("red", ns, 3), pod_group("blue", ns, 3),
                *(member(f"{g}{i}", ns, g, "1") for i in range(3) for g in ("red", "blue")))
    wait_for(lambda: gangs.condition("red") and gangs.condition("blue"), WAIT, "both conditions")
    conditions = {g: gangs.condition(g) for g in ("red", "blue")}
    placed = next(g for g, c in conditions.items() if c is not None and c[0] == "True")
    waiting = "blue" if placed == "red" else "red"
    group = "minCount (3) cannot be satisfied: 1 scheduled, 1 remaining, "
    assert conditions == {placed: ("True", "Scheduled", "", 0), waiting: ("False", "Unschedulable", group, 0)}
    assert all(gangs.node_of(f"{placed}{i}") in gangs.nodes for i in range(3))
    notes = wait_for(lambda: [gangs.failed(f"{waiting}{i}") for i in range(3)] if all(
        gangs.failed(f"{waiting}{i}") for i in range(3)) else None, WAIT, "the waiting gang's FailedScheduling")
    # The first pod took the last cpu and the second fit nowhere; the third was not reached: the gang's
    # own verdict (kube-scheduler writes the same, and repeats them as it retries).
    assert [n[0] for n in notes] == [f"pod group is unschedulable, {group}",
                                     "0/2 nodes are available: 2 Insufficient cpu.", group.removesuffix(", ")]
    assert [gangs.node_of(f"{waiting}{i}") for i in range(3)] == ["", "", ""]
    # Room is made: the placed gang goes, and the waiting one is bound whole.
    gangs.cluster.kubectl("delete", "pods", *(f"{placed}{i}" for i in range(3)), "-n", ns, "--grace-period=0",
                          "--force")
    landed = wait_for(lambda: all(n := [gangs.node_of(f"{waiting}{i}") for i in range(3)]) and n, WAIT,
                      f"the {waiting} gang bound")
    assert all(n in gangs.nodes for n in landed)
    assert gangs.condition(waiting)[:2] == ("True", "Scheduled")


# ---- a crash while a gang is being bound ----------------------------------------------------------


def test_a_framework_killed_while_a_gang_is_being_bound_leaves_no_member_without_its_group(live: Live) -> None:
    b = live.base
    nodes = [f"{b}-a", f"{b}-b"]
    live.apply(*(node_manifest(n, cpu="2") for n in nodes))
    marks = live.tmp / "marks"
    marks.mkdir()
    text = config("    preBind: {enabled: [{name: HoldPreBind}]}\n",
                  f"{{name: HoldPreBind, args: {{hold: [c2], seconds: 120, markDir: '{marks}'}}}}")
    pods = ("c0", "c1", "c2")
    with HostProcess("group_plugins:HoldPreBind") as host:
        plugins = remote_plugins(live.tmp / "plugins.yaml", hold=host.address)
        first = live.framework(text, plugins).start()
        try:
            live.apply(pod_group("c", live.ns, 3), *(member(p, live.ns, "c", "1") for p in pods))
            # The gang passed Permit together; c0 and c1 are bound, c2's PreBind is held: SIGKILL now.
            wait_for(lambda: (marks / "c2").exists(), WAIT, "c2's PreBind to be held")
            before = wait_for(lambda: all(n := live.nodes_of("c0", "c1")) and n, WAIT, "c0 and c1 bound")
            first.kill()
        finally:
            first.stop()
        assert live.nodes_of(*pods)[2] == ""  # the group is half-bound: two of its three members
        # The restarted framework finds two members bound (GangScheduling counts them as scheduled) and
        # places the third with them; the held PreBind now passes.
        second = live.framework(text, plugins).start()
        try:
            landed = wait_for(lambda: all(n := live.nodes_of(*pods)) and n, WAIT, "c2 bound after the restart")
        finally:
            second.stop()
    assert landed[:2] == before  # c0 and c1 were not bound again
    assert all(n in nodes for n in landed)
    assert (marks / "c2").read_text() in nodes
    status = get_json(live.cluster, "podgroups.scheduling.k8s.io", "c", "-n", live.ns).get("status") or {}
    assert [(c["type"], c["status"], c["reason"]) for c in status.get("conditions") or ()] == [
        ("PodGroupInitiallyScheduled", "True", "Scheduled")]
