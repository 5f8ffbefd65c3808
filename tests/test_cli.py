"""The ``outrigger`` command line: offline explain, readable errors, the demo."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from framework.cli import main

CLUSTER = """\
apiVersion: v1
kind: Node
metadata: {name: small}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: cordoned}
spec: {unschedulable: true}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: busy}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: existing}
spec: {nodeName: busy, containers: [{name: x, resources: {requests: {cpu: "1", memory: 1Gi}}}]}
"""

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec: {containers: [{name: x, resources: {requests: {cpu: 500m, memory: 512Mi}}}]}
"""

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - {name: PrioritySort}
      - {name: NodeUnschedulable}
      - {name: NodeResourcesFit, weight: 2}
      - {name: DefaultBinder}
      disabled: [{name: "*"}]
- schedulerName: packer
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
"""


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    out = {}
    for name, text in (("cluster.yaml", CLUSTER), ("pod.yaml", POD), ("config.yaml", CONFIG)):
        (tmp_path / name).write_text(text)
        out[name] = str(tmp_path / name)
    return out


def test_explain_offline_prints_the_documented_json(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "--config", files["config.yaml"], "--cluster", files["cluster.yaml"],
                 "--pod", files["pod.yaml"], "-o", "json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["pod"] == "default/web"
    assert result["selected"] == "small"
    assert result["status"] == {"code": "Success", "reasons": []}
    assert result["nodes"]["cordoned"] == {
        "filter": {"code": "UnschedulableAndUnresolvable", "plugin": "NodeUnschedulable",
                   "reasons": ["node(s) were unschedulable"]},
        "scores": {}, "total": None,
    }
    # small: cpu (2000-500)*100//2000 = 75, memory (4096-512)*100//4096 = 87 -> 81, weight 2
    assert result["nodes"]["small"]["scores"] == {"NodeResourcesFit": {"raw": 81, "normalized": 81, "weighted": 162}}
    assert result["nodes"]["small"]["total"] == 162
    # busy: cpu (4000-1500)*100//4000 = 62, memory (8192-1536)*100//8192 = 81 -> 71
    assert result["nodes"]["busy"]["total"] == 142


def test_explain_with_another_profile_uses_its_plugin_args(files: dict[str, str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "--config", files["config.yaml"], "--cluster", files["cluster.yaml"],
                 "--pod", files["pod.yaml"], "--profile", "packer", "-o", "json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    # MostAllocated prefers the busier node: busy cpu 1500*100//4000=37, mem 1536*100//8192=18 -> 27
    assert result["nodes"]["busy"]["scores"]["NodeResourcesFit"]["raw"] == 27
    assert result["selected"] == "busy"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["explain", "--cluster", "{cluster.yaml}", "--pod", "/nonexistent.yaml"], "cannot read /nonexistent.yaml"),
        (["explain", "--pod", "{pod.yaml}"], "explain needs --cluster FILE (offline) or --server ADDR"),
        (["explain", "--cluster", "{cluster.yaml}", "--pod", "{config.yaml}"],
         'unsupported kind "KubeSchedulerConfiguration"'),
        (["explain", "--config", "{pod.yaml}", "--cluster", "{cluster.yaml}", "--pod", "{pod.yaml}"], "apiVersion"),
        (["explain", "--cluster", "{cluster.yaml}", "--pod", "{pod.yaml}", "--profile", "nope"],
         "no profile named 'nope'"),
    ],
    ids=["missing-file", "no-cluster", "not-a-pod", "not-a-config", "unknown-profile"],
)
def test_user_mistakes_print_one_line_and_exit_2(files: dict[str, str], capsys: pytest.CaptureFixture[str],
                                                 args: list[str], message: str) -> None:
    argv = [files[a[1:-1]] if a.startswith("{") else a for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_demo_runs_end_to_end_and_exits_zero() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "framework.cli", "demo", "--nodes", "40", "--pods", "300"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "pods: 300" in out
    assert "left behind: {'cycle_states': 0, 'waiting_pods': 0, 'assumed_pods': 0, 'binding_cycles': 0}" in out
    assert "throughput:" in out and "p99" in out
