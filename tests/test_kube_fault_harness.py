"""The live-cluster fault harness, short (tests/kube_fault_harness.py; ``make faults-cluster`` runs the
full one): 300 pods through two Outrigger replicas with a 4 s lease and two replicas of the Chaos
plugin, while the leader is killed, the API server restarted, a plugin replica killed and the other
stalled; every invariant is checked through the API."""

from __future__ import annotations

from pathlib import Path

import pytest
from kube_fault_harness import FAULTS, Options, render, run

from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

SHORT = Options(pods=300, nodes=4, node_cpu=70, lease_duration=4, renew_deadline=3, retry_period=1, timeout=300)


def test_two_replicas_ride_out_a_killed_leader_an_api_server_restart_and_plugin_faults_losing_nothing(
        kube_cluster: LocalCluster, tmp_path: Path) -> None:
    report = run(kube_cluster, SHORT, tmp_path)
    print(render(report))
    assert report.problems == []
    assert report.faults_done == [name for name, _ in FAULTS]
    assert (report.lost, report.bound_twice, report.overcommitted_nodes, report.tracebacks) == (0, 0, 0, 0)
    assert report.bound + report.pending_with_reason == SHORT.pods
    assert report.bound >= SHORT.nodes * SHORT.node_cpu - 10  # the Chaos filter may strand a few at the end
    assert report.pending_with_reason >= SHORT.pods - SHORT.nodes * SHORT.node_cpu
    (took,) = report.takeover_seconds
    assert took <= SHORT.lease_duration + 5
    assert report.leader_changes >= 1 and -9 in report.replica_exits  # the killed leader, started again
    assert len(report.resumed_after_apiserver_restart_seconds) == 1
