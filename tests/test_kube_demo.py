"""``make demo-cluster`` end to end, small: its own etcd + kube-apiserver + kube-controller-manager, the example
sidecars, ``outrigger serve --kubeconfig``, kubectl applying nodes, a fake driver's GPUs and pods, the
listing, the events, the claims, the summary, and every process stopped afterwards."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kube_cluster import built_bin_dir
from test_kube_harness import cluster_processes

from tools.democluster import priority_classes, sample_rows
from tools.localcluster import BIN_ENV

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.kube


def listening(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((host, int(port))) == 0


def test_demo_cluster_schedules_through_the_api_server_and_stops_everything() -> None:
    env = {**os.environ, BIN_ENV: str(built_bin_dir())}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.democluster", "--nodes", "12", "--pods", "40", "--labelled", "6",
         "--provisioned", "3", "--gpu-pods", "3", "--timeout", "120"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    # Stopped: the API server and the three plugin hosts no longer listen.
    api = re.search(r"etcd and kube-apiserver at https://(\S+) ", out)
    hosts = re.findall(r"(?:Coscheduling|NodeLabels|Provisioner) at (\S+?)[,\n]", out)
    assert api is not None and len(hosts) == 3, out
    assert [a for a in [api[1], *hosts] if listening(a)] == []
    workdir = re.search(r"etcd and kube-apiserver at \S+ \((\S+)\)", out)
    assert workdir is not None and cluster_processes(Path(workdir[1])) == []  # kube-controller-manager too
    # The framework ran as the ServiceAccount of deploy/kubernetes/rbac.yaml and led on its own Lease.
    assert "contending for lease outrigger/outrigger" in out
    assert "in sync with the cluster: 0 nodes, 0 pods" in out
    assert "kubectl apply: 12 nodes in 3 zones" in out
    # The fake driver publishes the one GPU node's four GPUs (node-0009: every tenth node is a GPU node).
    assert ("kubectl apply: a fake driver's ResourceSlices (4 GPUs on each of the 1 GPU nodes), DeviceClass "
            "gpu.example.com (a CEL selector), ResourceClaimTemplate one-gpu") in out
    # 40 default-profile pods + 15 gang members + 6 labelled + 3 provisioned + 3 GPU pods + the one too big.
    assert "kubectl apply: 68 pods (24 for gang-scheduler: gangs, node labels, volumes)" in out
    header = next(line for line in out.splitlines() if line.startswith("NAME "))
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED", "NODE",
                              "READINESS", "GATES"]
    rows = {line.split()[0]: line.split() for line in out.splitlines() if re.match(r"(gang|huge|web)-\S+ ", line)}
    assert rows["gang-train-0"][6].startswith("node-") and rows["gang-short-0"][6] == "<none>"
    assert re.search(r"Normal\s+Scheduled\s+\S+\s+gang-scheduler\s+Successfully assigned demo/gang-train-0 to "
                     r"node-\d{4}", out)
    assert re.search(r"Warning\s+FailedScheduling\s+\S+\s+default-scheduler\s+0/12 nodes are available: ", out)
    assert "gangs: gang-eval 4/4 bound, gang-short 0/3 bound, gang-train 8/8 bound (as expected: whole or none)" in out
    # Each GPU pod's claim (made by the resourceclaim controller) holds one GPU of node-0009.
    assert re.search(r"  gpu-infer-000 on node-0009: claim gpu-infer-000-gpu-\w+ -> gpu.example.com/node-0009/gpu-\d\n",
                     out)
    assert re.search(r"gpu-infer-00\d-gpu-\w+ +allocated,reserved ", out)
    assert re.search(r"Warning\s+FailedScheduling\s+\S+\s+default-scheduler\s+0/12 nodes are available: 12 cannot "
                     r"allocate all claims\. preemption: 0/12 nodes are available: 12 Preemption is not helpful for "
                     r"scheduling\.", out)
    assert ("GPU pods: 3 of the 3 that fit bound with a device of their node (as expected); gpu-huge-0 claims more "
            "than a node has") in out
    summary = re.search(r"pods: 68   bound: (\d+)   unschedulable: (\d+)", out)
    assert summary is not None and int(summary[1]) + int(summary[2]) == 68 and int(summary[2]) >= 4
    assert re.search(r"throughput: \d+ pods/s bound", out)
    assert out.rstrip().endswith("stopped: outrigger, the plugin hosts, kube-controller-manager, kube-apiserver and "
                                 "etcd")


def test_priorities_become_priority_classes_the_pods_name() -> None:
    pods = [{"spec": {"priority": 1000}}, {"spec": {"priority": 0}}, {"spec": {}}, {"spec": {"priority": 100}},
            {"spec": {"priority": 1000}}]
    classes = priority_classes(pods)
    assert [(c["metadata"]["name"], c["value"]) for c in classes] == [("demo-priority-100", 100),
                                                                      ("demo-priority-1000", 1000)]
    assert [p["spec"] for p in pods] == [{"priorityClassName": "demo-priority-1000"}, {}, {},
                                         {"priorityClassName": "demo-priority-100"},
                                         {"priorityClassName": "demo-priority-1000"}]


def test_the_listing_keeps_the_header_and_the_first_rows_of_each_kind() -> None:
    lines = ["NAME  NODE", "batch-1  n1", "batch-2  n2", "batch-3  n3", "gang-a-0  n1", "gang-a-1  n1",
             "gang-a-2  n1", "web-9  <none>"]
    assert sample_rows(lines, 2) == ["NAME  NODE", "batch-1  n1", "batch-2  n2", "gang-a-0  n1", "gang-a-1  n1",
                                     "web-9  <none>"]
