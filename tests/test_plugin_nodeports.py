"""NodePorts: host port conflicts between a pod and the pods already on a node, with
kube-scheduler's HostPortInfo rules (empty host IP = 0.0.0.0 which overlaps every IP, empty protocol
= TCP), sidecar init containers counted, PreFilter Skip for pods without host ports, queueing hints.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.plugins.hostports import HostPortInfo, host_ports
from framework.plugins.nodeports import NodePorts
from pluginhost.manifest import node_from_dict, pod_from_dict
from pluginhost.model import ContainerPort, Pod
from pluginhost.plugin import ActionType, CycleState, NodeBatch, QueueingHint, points_of
from pluginhost.snapshot import ClusterTable, Snapshot
from pluginhost.status import Code

ERR = "node(s) didn't have free ports for the requested pod ports"
Outcome = tuple[Code, tuple[str, ...]]
OK: Outcome = (Code.Success, ())
CONFLICT: Outcome = (Code.Unschedulable, (ERR,))

_counter = 0


def port(host_port: int, protocol: str = "TCP", host_ip: str = "", container_port: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {"containerPort": container_port or host_port or 80, "protocol": protocol}
    if host_port:
        out["hostPort"] = host_port
    if host_ip:
        out["hostIP"] = host_ip
    return out


def make_pod(
    *ports: dict[str, Any],
    sidecar_ports: list[dict[str, Any]] | None = None,
    init_ports: list[dict[str, Any]] | None = None,
    host_network: bool = False,
    name: str = "",
) -> Pod:
    global _counter
    _counter += 1
    spec: dict[str, Any] = {"containers": [{"name": "c", "ports": list(ports)}]}
    init: list[dict[str, Any]] = []
    if sidecar_ports is not None:
        init.append({"name": "sidecar", "restartPolicy": "Always", "ports": sidecar_ports})
    if init_ports is not None:
        init.append({"name": "init", "ports": init_ports})
    if init:
        spec["initContainers"] = init
    if host_network:
        spec["hostNetwork"] = True
    return pod_from_dict({"metadata": {"name": name or f"p{_counter}"}, "spec": spec})


def cluster(placed: dict[str, list[Pod]]) -> tuple[ClusterTable, Snapshot]:
    table = ClusterTable()
    for node_name, pods in placed.items():
        table.upsert_node(node_from_dict({"metadata": {"name": node_name}, "status": {"capacity": {"pods": "110"}}}))
        for p in pods:
            assert table.place_pod(p, node_name)
    return table, table.snapshot()


def run(pl: NodePorts, pod: Pod, snap: Snapshot, rows: list[int] | None = None) -> list[Outcome]:
    state = CycleState(snapshot=snap)
    _, status = asyncio.run(pl.pre_filter(state, pod))
    assert status.ok, status
    batch = NodeBatch(snap, np.arange(len(snap), dtype=np.int64) if rows is None else np.asarray(rows, np.int64))
    res = asyncio.run(pl.filter(state, pod, batch))
    return [(res.status_at(i).code, res.status_at(i).reasons) for i in range(len(res))]


# ---- PreFilter -------------------------------------------------------------------------------

SKIP_CASES = [
    pytest.param(make_pod(), id="no-ports"),
    pytest.param(make_pod(port(0, container_port=8080)), id="container-port-only"),
    pytest.param(make_pod(init_ports=[port(8080)]), id="regular-init-container-port"),
]


@pytest.mark.parametrize("pod", SKIP_CASES)
def test_pre_filter_skips_pods_without_host_ports(pod: Pod) -> None:
    state = CycleState()
    result, status = asyncio.run(NodePorts().pre_filter(state, pod))
    assert (result, status.code) == (None, Code.Skip)
    assert "PreFilterNodePorts" not in state


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod(port(8080)), id="container"),
        pytest.param(make_pod(sidecar_ports=[port(9090)]), id="sidecar"),
        pytest.param(make_pod(port(0, container_port=8080), host_network=True), id="host-network"),
    ],
)
def test_pre_filter_runs_for_host_ports(pod: Pod) -> None:
    state = CycleState()
    result, status = asyncio.run(NodePorts().pre_filter(state, pod))
    assert (result, status.code) == (None, Code.Success)
    assert "PreFilterNodePorts" in state


# ---- Filter ----------------------------------------------------------------------------------

FILTER_CASES = [
    pytest.param([port(8080)], [port(8080)], CONFLICT, id="same-port"),
    pytest.param([port(8080)], [port(8081)], OK, id="other-port"),
    pytest.param([port(8080, "UDP")], [port(8080, "TCP")], OK, id="other-protocol"),
    pytest.param([port(53, "UDP"), port(53, "TCP")], [port(53, "TCP")], CONFLICT, id="same-protocol-of-several"),
    pytest.param([port(8080, host_ip="127.0.0.2")], [port(8080, host_ip="127.0.0.1")], OK, id="other-ips"),
    pytest.param([port(8080, host_ip="10.0.0.1")], [port(8080, host_ip="10.0.0.1")], CONFLICT, id="same-ip"),
    pytest.param([port(8080)], [port(8080, host_ip="127.0.0.1")], CONFLICT, id="wanted-ip-vs-used-any"),
    pytest.param([port(8080, host_ip="127.0.0.1")], [port(8080)], CONFLICT, id="wanted-any-vs-used-ip"),
    pytest.param([port(8080, host_ip="0.0.0.0")], [port(8080, host_ip="10.1.1.1")], CONFLICT, id="explicit-any"),
    pytest.param([port(8080, "UDP", "127.0.0.1")], [port(8080, "TCP")], OK, id="any-ip-other-protocol"),
    pytest.param([port(7000), port(7001)], [port(7002), port(7001)], CONFLICT, id="one-of-many-conflicts"),
    pytest.param([port(0, container_port=8080)], [port(8080)], OK, id="used-container-port-only"),
]


@pytest.mark.parametrize(("used", "wanted", "want"), FILTER_CASES)
def test_filter(used: list[dict[str, Any]], wanted: list[dict[str, Any]], want: Outcome) -> None:
    _, snap = cluster({"n1": [make_pod(*used)]})
    assert run(NodePorts(), make_pod(*wanted), snap) == [want]


def test_sidecar_ports_count_on_both_sides_but_plain_init_containers_do_not() -> None:
    _, snap = cluster(
        {
            "sidecar": [make_pod(sidecar_ports=[port(9090)])],
            "init": [make_pod(init_ports=[port(9090)])],
            "main": [make_pod(port(9090))],
        }
    )
    assert run(NodePorts(), make_pod(port(9090)), snap) == [CONFLICT, OK, CONFLICT]
    assert run(NodePorts(), make_pod(sidecar_ports=[port(9090)]), snap) == [CONFLICT, OK, CONFLICT]


def test_host_network_pod_uses_its_container_ports() -> None:
    _, snap = cluster({"n1": [make_pod(port(0, container_port=10250), host_network=True)]})
    assert run(NodePorts(), make_pod(port(10250)), snap) == [CONFLICT]


def test_filter_checks_every_pod_on_each_node_of_the_batch() -> None:
    _, snap = cluster(
        {
            "empty": [],
            "busy": [make_pod(), make_pod(port(1000)), make_pod(port(2000, "UDP"))],
            "other": [make_pod(port(3000))],
            "udp": [make_pod(port(2000, "UDP"))],
        }
    )
    pod = make_pod(port(2000, "UDP"))
    assert run(NodePorts(), pod, snap) == [OK, CONFLICT, OK, CONFLICT]
    assert run(NodePorts(), pod, snap, [3, 2]) == [CONFLICT, OK]


def test_filter_sees_pods_placed_and_removed_after_an_earlier_cycle() -> None:
    pl = NodePorts()
    user = make_pod(port(8080))
    table, snap = cluster({"n1": [make_pod(port(22))]})
    pod = make_pod(port(8080))
    assert run(pl, pod, snap) == [OK]
    assert table.place_pod(user, "n1")
    assert run(pl, pod, table.snapshot()) == [CONFLICT]
    assert table.unplace_pod(user.uid) is not None
    assert run(pl, pod, table.snapshot()) == [OK]
    assert run(pl, pod, snap) == [OK]  # an older snapshot still answers for its own pods


def test_filter_without_pre_filter_is_an_error() -> None:
    _, snap = cluster({"n1": []})
    res = asyncio.run(NodePorts().filter(CycleState(), make_pod(port(80)), NodeBatch(snap, np.asarray([0]))))
    status = res.status_at(0)
    assert status.code is Code.Error
    assert status.reasons == ('reading "PreFilterNodePorts" from cycleState: not found',)


# ---- HostPortInfo / host_ports ---------------------------------------------------------------


def test_host_ports_lists_sidecars_first() -> None:
    pod = make_pod(port(1), port(0, container_port=5), sidecar_ports=[port(2)], init_ports=[port(3)])
    assert [p.host_port for p in host_ports(pod)] == [2, 1]


def test_host_port_info() -> None:
    info = HostPortInfo()
    info.add("", "", 80)
    info.add("127.0.0.1", "UDP", 53)
    info.add("127.0.0.1", "UDP", 0)  # ignored
    assert len(info) == 2
    assert info.check_conflict("10.0.0.1", "TCP", 80)  # 0.0.0.0:80 in use
    assert info.check_conflict("", "UDP", 53)  # any IP: 127.0.0.1 is taken
    assert not info.check_conflict("10.0.0.1", "UDP", 53)
    assert not info.check_conflict("", "", 0)
    info.remove("0.0.0.0", "TCP", 80)
    assert len(info) == 1
    assert not info.check_conflict("", "TCP", 80)
    assert info.fits([ContainerPort(80, 80)])
    assert not info.fits([ContainerPort(53, 53, "UDP")])


# ---- registration and queueing hints ---------------------------------------------------------


def test_extension_points() -> None:
    assert points_of(NodePorts) == frozenset({"preFilter", "filter"})


def test_events_to_register() -> None:
    regs = NodePorts().events_to_register()
    assert [(r.event.resource, r.event.action, r.hint is None) for r in regs] == [
        ("AssignedPod", ActionType.Delete, False),
        ("Node", ActionType.Add, True),
    ]


def _placed(pod: Pod, node: str = "n1", nominated: str = "") -> Pod:
    pod.node_name = node
    pod.nominated_node_name = nominated
    return pod


HINT_CASES = [
    pytest.param(_placed(make_pod(port(8080))), QueueingHint.Queue, id="deleted-pod-freed-the-port"),
    pytest.param(_placed(make_pod(port(9090))), QueueingHint.QueueSkip, id="deleted-pod-other-port"),
    pytest.param(_placed(make_pod()), QueueingHint.QueueSkip, id="deleted-pod-without-host-ports"),
    pytest.param(_placed(make_pod(port(8080)), node=""), QueueingHint.QueueSkip, id="deleted-pod-unscheduled"),
    pytest.param(
        _placed(make_pod(port(8080)), node="", nominated="n1"), QueueingHint.Queue, id="deleted-pod-nominated"
    ),
    pytest.param(
        _placed(make_pod(port(8080, host_ip="10.0.0.1"))), QueueingHint.Queue, id="deleted-pod-specific-ip-overlaps"
    ),
]


@pytest.mark.parametrize(("deleted", "want"), HINT_CASES)
def test_pod_deleted_hint(deleted: Pod, want: QueueingHint) -> None:
    hint = NodePorts().events_to_register()[0].hint
    assert hint is not None
    assert hint(make_pod(port(8080)), deleted, None) is want


_PORT_SPECS = st.tuples(st.sampled_from([80, 443]), st.sampled_from(["TCP", "UDP"]), st.sampled_from(["", "10.0.0.1"]))


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.booleans(), st.integers(0, 3), st.lists(_PORT_SPECS, max_size=2)),
        min_size=1,
        max_size=12,
    ),
    wanted=st.lists(_PORT_SPECS, min_size=1, max_size=2),
)
def test_index_agrees_with_host_port_info_as_pods_come_and_go(
    ops: list[tuple[bool, int, list[tuple[int, str, str]]]], wanted: list[tuple[int, str, str]]
) -> None:
    """One plugin instance across snapshots: each answer equals HostPortInfo over the node's pods."""
    pl = NodePorts()
    table, _ = cluster({f"n{i}": [] for i in range(4)})
    placed: list[Pod] = []
    pod = make_pod(*(port(p, proto, ip) for p, proto, ip in wanted))
    for add, node, specs in ops:
        if add or not placed:
            new = make_pod(*(port(p, proto, ip) for p, proto, ip in specs))
            assert table.place_pod(new, f"n{node}")
            placed.append(new)
        else:
            gone = placed.pop(node % len(placed))
            assert table.unplace_pod(gone.uid) is not None
        snap = table.snapshot()
        expected = [
            OK if HostPortInfo(p for q in snap.pods[r] for p in host_ports(q)).fits(host_ports(pod)) else CONFLICT
            for r in range(len(snap))
        ]
        assert run(pl, pod, snap) == expected
