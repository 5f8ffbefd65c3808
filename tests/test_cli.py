"""The ``outrigger`` command line: offline explain, the commands against a real framework service on
127.0.0.1 (exact -o table/json/yaml output), readable errors with exit code 1, --help examples, the
progress bar, the demo."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from framework_thread import FrameworkThread

from clients import Event, EventType, ObjectRef, SchedulerClient, Status
from clients.describe import event_rows, qos_class
from clients.printers import TabWriter, human_duration
from framework import cli
from framework.cli import apply as cli_apply
from framework.cli import get as cli_get
from framework.cli import main
from framework.cli.progress import ProgressBar
from framework.cli.registry import quiet_connection_errors

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
        (["explain", "--cluster", "{cluster.yaml}", "-f", "/nonexistent.yaml"],
         "error: cannot read /nonexistent.yaml: No such file or directory"),
        (["explain", "--cluster", "{cluster.yaml}"],
         "error: explain needs a pod: a name (a pod the framework holds) or -f FILE (a manifest)"),
        (["explain", "web", "--cluster", "{cluster.yaml}"],
         "error: offline explain (--cluster) needs the pod's manifest: -f FILE, not a name"),
        (["explain", "-f", "{pod.yaml}", "--config", "{config.yaml}"],
         "error: --config and --plugins are for offline explain: add --cluster FILE"),
        (["explain", "--cluster", "{cluster.yaml}", "--pod", "{config.yaml}"],
         'unsupported kind "KubeSchedulerConfiguration"'),
        (["explain", "--config", "{pod.yaml}", "--cluster", "{cluster.yaml}", "--pod", "{pod.yaml}"], "apiVersion"),
        (["explain", "--cluster", "{cluster.yaml}", "-f", "{pod.yaml}", "--profile", "nope"],
         "error: no profile named 'nope' (profiles: default-scheduler)"),
    ],
    ids=["missing-file", "no-pod", "name-offline", "config-online", "not-a-pod", "not-a-config", "unknown-profile"],
)
def test_offline_mistakes_print_one_line_and_exit_1(files: dict[str, str], capsys: pytest.CaptureFixture[str],
                                                    args: list[str], message: str) -> None:
    argv = [files[a[1:-1]] if a.startswith("{") else a for a in args]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err.splitlines()[-1]
    assert "Traceback" not in err


def test_demo_runs_end_to_end_and_exits_zero() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "framework.cli", "demo", "--nodes", "40", "--pods", "300"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "pods: 300 + 4 claiming GPUs + " in out
    # 3 pods claim one GPU each and fit (4 GPU nodes of 4 GPUs), the fourth claims 8 and fits nowhere.
    assert "GPU pods (dynamic resource allocation): 3 of the 3 that fit bound, each with its claim's device" in out
    first = r"^  gpu-infer-000 on (node-00[0-3]9): claim gpu-infer-000-gpu-\w{5} -> gpu.example.com/(\S+)/gpu-\d$"
    placed = re.search(first, out, re.M)
    assert placed is not None and placed[1] == placed[2]
    assert "left behind: {'cycle_states': 0, 'waiting_pods': 0, 'assumed_pods': 0, 'binding_cycles': 0}" in out
    assert "throughput:" in out and "p99" in out


# ---- against a running framework service ----------------------------------------------------------

CREATED = "2024-01-01T00:00:00Z"
FIVE_MINUTES_LATER = 1704067500.0  # 2024-01-01T00:05:00Z: what the served objects' AGE is computed against
SERVED = """\
apiVersion: v1
kind: Node
metadata: {name: n0, uid: uid-n0, labels: {zone: a}, creationTimestamp: "2024-01-01T00:00:00Z"}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n1, uid: uid-n1, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  unschedulable: true
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, uid: uid-web, labels: {app: web}, creationTimestamp: "2024-01-01T00:00:00Z"}
spec: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 256Mi}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: shop, uid: uid-big, labels: {app: batch}, creationTimestamp: "2024-01-01T00:00:00Z"}
spec: {containers: [{name: c, resources: {requests: {cpu: "3"}, limits: {cpu: "3"}}}]}
"""
BIG_REASON = ("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. "
              "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A framework service holding SERVED (web bound to n0, shop/big unschedulable), and a scratch dir."""
    tmp = tmp_path_factory.mktemp("served")
    (tmp / "cluster.yaml").write_text(SERVED)
    (tmp / "dry.yaml").write_text("---\n".join(SERVED.split("---\n")[:3]).replace("web", "api"))
    with FrameworkThread() as fw, SchedulerClient(fw.address) as c:
        c.apply_files([tmp / "cluster.yaml"])
        for _ in range(500):
            if {p.ref.name: p.phase for p in c.list_pods()} == {"web": "Bound", "big": "Unschedulable"}:
                break
            time.sleep(0.02)
        yield fw.address, tmp


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


WEB = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web", "namespace": "default", "uid": "uid-web", "creationTimestamp": CREATED,
                    "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}],
                "nodeName": "n0"},
       "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}}
BIG = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "big", "namespace": "shop", "uid": "uid-big", "creationTimestamp": CREATED,
                    "labels": {"app": "batch"}},
       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "3"}, "limits": {"cpu": "3"}}}]},
       "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                      "reason": "Unschedulable", "message": BIG_REASON}]}}
N0 = {"apiVersion": "v1", "kind": "Node",
      "metadata": {"name": "n0", "uid": "uid-n0", "creationTimestamp": CREATED, "labels": {"zone": "a"}},
      "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"}}}
N1 = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "uid-n1", "creationTimestamp": CREATED},
      "spec": {"unschedulable": True, "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
      "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}


def v1_list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}


# web on an empty n0 (its own requests not counted): cpu (2000-500)*100//2000 = 75, memory
# (4096-256)*100//4096 = 93 -> NodeResourcesFit (75+93)//2 = 84; balanced: 90 with the pod
# ((1 - |0.25 - 0.0625| / 2) * 100), 100 without -> 50 + (50 + 90 - 100) // 2 = 70.
WEB_EXPLAINED = {
    "pod": "default/web", "selected": "n0", "status": {"code": "Success", "reasons": []},
    "nodes": {
        "n0": {"filter": {"code": "Success", "plugin": None, "reasons": []},
               "scores": {"TaintToleration": {"raw": 0, "normalized": 100, "weighted": 300},
                          "NodeResourcesFit": {"raw": 84, "normalized": 84, "weighted": 84},
                          "VolumeBinding": {"raw": 0, "normalized": 0, "weighted": 0},
                          "DynamicResources": {"raw": 0, "normalized": 0, "weighted": 0},
                          "NodeResourcesBalancedAllocation": {"raw": 70, "normalized": 70, "weighted": 70},
                          "ImageLocality": {"raw": 0, "normalized": 0, "weighted": 0}},
               "total": 454},
        "n1": {"filter": {"code": "UnschedulableAndUnresolvable", "plugin": "NodeUnschedulable",
                          "reasons": ["node(s) were unschedulable"]},
               "scores": {}, "total": None},
    },
}


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        # kubectl get's columns and short names; namespace default unless -n or -A; ages against a fixed clock.
        (["get", "pods"], """\
NAME   READY   STATUS   RESTARTS   AGE
web    0/1     Bound    0          5m
"""),
        (["get", "po", "-A"], """\
NAMESPACE   NAME   READY   STATUS          RESTARTS   AGE
default     web    0/1     Bound           0          5m
shop        big    0/1     Unschedulable   0          5m
"""),
        (["get", "pods", "--all-namespaces", "-o", "wide"], """\
NAMESPACE   NAME   READY   STATUS          RESTARTS   AGE   IP       NODE     NOMINATED NODE   READINESS GATES
default     web    0/1     Bound           0          5m    <none>   n0       <none>           <none>
shop        big    0/1     Unschedulable   0          5m    <none>   <none>   <none>           <none>
"""),
        (["get", "pods", "-A", "--phase", "Unschedulable", "-o", "name"], "pod/big\n"),
        (["get", "pods", "-A", "-l", "app in (web, batch),!canary", "-o", "name"], "pod/web\npod/big\n"),
        (["get", "pods", "-A", "--selector", "app!=web", "-o", "name"], "pod/big\n"),
        (["get", "pods", "-A", "-o", "json"], json.dumps(v1_list(WEB, BIG), indent=4) + "\n"),
        (["get", "pods", "-n", "shop", "-o", "yaml"], yaml.safe_dump(v1_list(BIG), sort_keys=False)),
        (["get", "pod", "web", "-o", "json"], json.dumps(WEB, indent=4) + "\n"),
        (["get", "pods/big", "-n", "shop", "-o", "yaml"], yaml.safe_dump(BIG, sort_keys=False)),
        (["get", "po/web", "no/n1", "-o", "name"], "pod/web\nnode/n1\n"),
        (["get", "pods/web", "nodes/n0"], """\
NAME   READY   STATUS   RESTARTS   AGE
web    0/1     Bound    0          5m

NAME   STATUS   ROLES    AGE   VERSION
n0     Ready    <none>   5m
"""),
        (["get", "nodes"], """\
NAME   STATUS                     ROLES    AGE   VERSION
n0     Ready                      <none>   5m
n1     Ready,SchedulingDisabled   <none>   5m
"""),
        (["get", "no", "-o", "wide"], """\
NAME   STATUS                     ROLES    AGE   VERSION   INTERNAL-IP   EXTERNAL-IP   OS-IMAGE    KERNEL-VERSION   \
CONTAINER-RUNTIME
n0     Ready                      <none>   5m              <none>        <none>        <unknown>   <unknown>        \
<unknown>
n1     Ready,SchedulingDisabled   <none>   5m              <none>        <none>        <unknown>   <unknown>        \
<unknown>
"""),
        (["get", "nodes", "-l", "zone=a", "-o", "name"], "node/n0\n"),
        (["get", "nodes", "-o", "json"], json.dumps(v1_list(N0, N1), indent=4) + "\n"),
        (["get", "node", "n1", "-o", "yaml"], yaml.safe_dump(N1, sort_keys=False)),
        (["get", "waiting"], ("", "No resources found.\n")),
        (["get", "pods", "-n", "empty"], ("", "No resources found in empty namespace.\n")),
        (["get", "waiting", "-o", "json"], "[]\n"),
        (["explain", "web", "-o", "json"], json.dumps(WEB_EXPLAINED, indent=2) + "\n"),
        (["explain", "web", "-o", "yaml"], yaml.safe_dump(WEB_EXPLAINED, sort_keys=False)),
        (["explain", "big", "-n", "shop"], """\
pod shop/big: Unschedulable
  0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable.
NODE   FILTER                         PLUGIN              REASONS                      TOTAL   WEIGHTED SCORES
n0     UnschedulableAndUnresolvable   NodeResourcesFit    Insufficient cpu
n1     UnschedulableAndUnresolvable   NodeUnschedulable   node(s) were unschedulable
"""),
        (["watch", "--count", "6"], f"""\
      1  Applied        node/n0
      2  Applied        node/n1
      3  Applied        pod/default/web
      4  Applied        pod/shop/big
      5  Bound          pod/default/web  n0
      6  Unschedulable  pod/shop/big  {BIG_REASON}
"""),
        (["watch", "--type", "bound", "--timeout", "1"], "      5  Bound          pod/default/web  n0\n"),
        # The nodes are as applied: unchanged, as kubectl apply reports them.
        (["apply", "-f", "{tmp}/dry.yaml", "--dry-run"], """\
node/n0 unchanged (dry run)
node/n1 unchanged (dry run)
pod/default/api created (dry run)
"""),
        (["apply", "-f", "{tmp}/dry.yaml", "--dry-run", "-o", "json"], json.dumps([
            {"object": {"kind": "Node", "namespace": "", "name": n, "uid": f"uid-{n}"}, "action": "unchanged"}
            for n in ("n0", "n1")] + [{"object": {"kind": "Pod", "namespace": "default", "name": "api",
                                                  "uid": "uid-api"}, "action": "created"}], indent=2) + "\n"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_commands_print_exact_output(served: tuple[str, Path], capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                     want: str | tuple[str, str]) -> None:
    """``want``: what is printed (or what is printed and what goes to stderr)."""
    address, tmp = served
    monkeypatch.setattr(cli_get, "clock", lambda: FIVE_MINUTES_LATER)
    argv = [a.replace("{tmp}", str(tmp)) for a in argv]
    out, err = want if isinstance(want, tuple) else (want, "")
    assert run_cli(capsys, *argv, "--server", address) == (0, out, err)


def test_explain_a_manifest_against_the_server_counts_the_pods_it_holds(
        served: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    address, tmp = served
    (tmp / "api.yaml").write_text(SERVED.split("---\n")[2].replace("web", "api"))
    code, out, _ = run_cli(capsys, "explain", "-f", str(tmp / "api.yaml"), "-o", "json", "--server", address)
    # Like web, but web's 500m/256Mi is on n0 now: cpu (2000-1000)*100//2000 = 50, memory
    # (4096-512)*100//4096 = 87 -> NodeResourcesFit (50+87)//2 = 68; balanced 81 with api (0.5, 0.125),
    # 90 without (0.25, 0.0625) -> 50 + (50 + 81 - 90) // 2 = 70.
    n0 = json.loads(out)["nodes"]["n0"]
    assert (code, n0["scores"]["NodeResourcesFit"]["raw"], n0["total"]) == (0, 68, 438)


def test_server_defaults_to_the_environment(served: tuple[str, Path], capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUTRIGGER_SERVER", served[0])
    code, out, _ = run_cli(capsys, "get", "pods", "-A", "--phase", "Bound", "-o", "json")
    assert (code, json.loads(out)) == (0, v1_list(WEB))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["apply", "-f", "{tmp}/missing.yaml"], "error: cannot read {tmp}/missing.yaml: No such file or directory"),
        (["apply", "-f", "{tmp}/bad.yaml"], "error: {tmp}/bad.yaml: document 1: line 2, column 1: invalid YAML: "
         "while parsing a flow sequence, did not find expected ',' or ']'"),
        (["apply", "-f", "{tmp}/badquantity.yaml"], "error: {tmp}/badquantity.yaml: document 1 (Pod default/x): "
         'spec.containers[0].resources.requests.cpu: invalid quantity "lots"'),
        (["get", "pods", "--server", "127.0.0.1:{dead}"], "error: cannot reach the framework at 127.0.0.1:{dead}"),
        (["apply", "-f", "{tmp}/cluster.yaml", "--server", "127.0.0.1:{dead}"],
         "error: cannot reach the framework at 127.0.0.1:{dead}"),
        (["watch", "--server", "127.0.0.1:{dead}"], "error: cannot reach the framework at 127.0.0.1:{dead}"),
        (["get", "pod", "ghost"], "error: pod default/ghost not found"),
        (["get", "node", "ghost"], "error: node 'ghost' not found"),
        (["explain", "ghost", "-n", "shop"], "error: pod shop/ghost not found"),
        (["delete", "pod", "ghost"], "error: not found: pod default/ghost"),
        (["delete"], "error: delete needs KIND NAME... (e.g. `delete pod web`) or -f FILE"),
        (["get", "waiting", "web"], "error: get waiting lists every waiting pod; it takes no NAME (see --profile)"),
        (["get", "deployments"],
         "error: unknown resource type 'deployments' (one of: pods (po), nodes (no), podgroups, reservations, "
         "waiting)"),
        (["describe", "reservation", "r1"],
         "error: unknown resource type 'reservation' (one of: pods (po), nodes (no), podgroups)"),
        (["get", "pods/web", "nodes"], "error: 'nodes': give every object as TYPE/NAME (e.g. `outrigger get "
         "pods/web`), or TYPE then names"),
        (["get", "pods", "nodes/n0"], "error: 'nodes/n0': give either TYPE NAME... or TYPE/NAME..., not both "
         "(e.g. `outrigger get pods/web`)"),
        (["get", "pods", "-l", "app in web"],
         "error: invalid label selector 'app in web': expected '(' after 'in', found 'web'"),
        (["get", "reservations", "-l", "app=web"], "error: -l/--selector selects pods, nodes and podgroups only"),
        (["get", "pods/web", "nodes/n0", "-w"], "error: get --watch watches one type: pods or nodes"),
        (["get", "pods", "--output-watch-events"], "error: --output-watch-events goes with --watch"),
        (["get", "pods", "--request-timeout", "soon"],
         "error: invalid --request-timeout 'soon': give a duration like 30s, 2m or 1h (0: no limit)"),
        (["get", "pods", "web", "ghost"], "error: pod default/ghost not found"),
        (["describe", "pod", "ghost", "-n", "shop"], "error: pod shop/ghost not found"),
        (["describe", "no", "ghost"], "error: node 'ghost' not found"),
        (["get", "pod", "web", "-A"],
         "error: a resource cannot be retrieved by name across all namespaces (drop -A, or give -n NS)"),
    ],
    ids=["missing-file", "bad-yaml", "bad-quantity", "unreachable", "unreachable-apply", "unreachable-watch",
         "unknown-pod", "unknown-node", "explain-unknown-pod", "delete-unknown-pod", "delete-nothing",
         "waiting-name", "unknown-type", "describe-unknown-type", "type-slash-name-then-type",
         "type-then-type-slash-name", "bad-selector", "selector-on-reservations", "watch-two-types",
         "watch-events-without-watch", "bad-request-timeout", "one-of-two-missing", "describe-unknown-pod",
         "describe-unknown-node", "name-across-namespaces"],
)
def test_user_mistakes_print_one_line_and_exit_1(served: tuple[str, Path], capsys: pytest.CaptureFixture[str],
                                                 argv: list[str], message: str) -> None:
    address, tmp = served
    (tmp / "bad.yaml").write_text("a: [unclosed")
    (tmp / "badquantity.yaml").write_text("kind: Pod\napiVersion: v1\nmetadata: {name: x}\n"
                                          "spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n")
    dead = str(free_port())
    argv = [a.replace("{tmp}", str(tmp)).replace("{dead}", dead) for a in argv]
    if "--server" not in argv:
        argv += ["--server", address]
    code, _, err = run_cli(capsys, *argv)
    assert (code, err) == (1, message.replace("{tmp}", str(tmp)).replace("{dead}", dead) + "\n")


def test_get_then_apply_says_unchanged_and_an_edit_says_configured(served: tuple[str, Path],
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``get -o yaml > f; apply -f f``: the objects print as v1 objects that apply takes back as they are."""
    address, tmp = served
    cases = [
        (["get", "pod", "web", "-o", "yaml"], None, "pod/default/web unchanged\n"),
        (["get", "pods", "-A", "-o", "json"], None, "pod/default/web unchanged\npod/shop/big unchanged\n"),
        (["get", "nodes", "-o", "yaml"], None, "node/n0 unchanged\nnode/n1 unchanged\n"),
        (["get", "pod", "web", "-o", "yaml"], ("app: web", "app: api"), "pod/default/web configured (dry run)\n"),
        (["get", "node", "n0", "-o", "yaml"], ("cpu: '2'", "cpu: '3'"), "node/n0 configured (dry run)\n"),
    ]
    for i, (get, edit, want) in enumerate(cases):
        code, out, _ = run_cli(capsys, *get, "--server", address)
        path = tmp / f"roundtrip-{i}.yaml"
        path.write_text(out.replace(*edit) if edit else out)
        apply = ["apply", "-f", str(path), "--server", address, *(["--dry-run"] if edit else [])]
        assert (code, run_cli(capsys, *apply)) == (0, (0, want, "")), get


@pytest.mark.parametrize(
    ("flags", "code", "out", "err"),
    [
        ([], 1, "", 'error: {path}: document 1 (Pod default/legacy): unknown field "metadata.labls", unknown field '
                    '"spec.nodeSelectr"\n'),
        (["--validate=strict"], 1, "", 'error: {path}: document 1 (Pod default/legacy): unknown field '
                                       '"metadata.labls", unknown field "spec.nodeSelectr"\n'),
        (["--validate=warn"], 0, "pod/default/legacy created (dry run)\n",
         'Warning: unknown field "metadata.labls"\nWarning: unknown field "spec.nodeSelectr"\n'),
        (["--validate", "ignore"], 0, "pod/default/legacy created (dry run)\n", ""),
        (["--validate=false"], 0, "pod/default/legacy created (dry run)\n", ""),
    ],
    ids=["default", "strict", "warn", "ignore", "false"],
)
def test_apply_validate_refuses_warns_about_or_ignores_unknown_fields(
        served: tuple[str, Path], capsys: pytest.CaptureFixture[str], flags: list[str], code: int, out: str,
        err: str) -> None:
    address, tmp = served
    path = tmp / "legacy.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: legacy, labls: {a: b}}\n"
                    "spec: {nodeSelectr: {x: y}, containers: [{name: c}]}\n")
    got = run_cli(capsys, "apply", "-f", str(path), "--dry-run", *flags, "--server", address)
    assert got == (code, out, err.replace("{path}", str(path)))


@pytest.mark.parametrize(
    ("files", "code", "out", "err"),
    [
        (["empty.yaml"], 1, "", "error: no objects passed to apply\n"),
        (["empty.yaml", "comments.yaml"], 1, "", "error: no objects passed to apply\n"),
        (["empty.yaml", "node.yaml"], 0, "node/n9 created (dry run)\n", ""),
    ],
    ids=["one-empty-file", "every-file-empty", "an-empty-file-beside-objects"],
)
def test_apply_with_no_objects_is_an_error_only_when_no_file_holds_one(
        served: tuple[str, Path], capsys: pytest.CaptureFixture[str], files: list[str], code: int, out: str,
        err: str) -> None:
    """As kubectl apply: `error: no objects passed to apply` when the files hold nothing at all (before any
    request is sent), while an empty file beside real manifests is passed over."""
    address, tmp = served
    (tmp / "empty.yaml").write_text("---\n")
    (tmp / "comments.yaml").write_text("# nothing here\n")
    (tmp / "node.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n9}\n")
    flags = [arg for name in files for arg in ("-f", str(tmp / name))]
    assert run_cli(capsys, "apply", *flags, "--dry-run", "--server", address) == (code, out, err)


def _last_event_time(address: str, name: str, namespace: str = "default") -> float:
    with SchedulerClient(address) as c:
        return c.list_events("Pod", name, namespace)[-1].timestamp


def test_describe_pod_and_node_print_kubectls_layout_with_the_scheduling_events(
        served: tuple[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    address, _ = served
    cases = [
        (["describe", "pod", "web"], _last_event_time(address, "web") + 42.5, """\
Name:         web
Namespace:    default
Priority:     0
Node:         n0
Labels:       app=web
Annotations:  <none>
Status:       Pending
IP:
IPs:          <none>
Containers:
  c:
    Image:
    Port:       <none>
    Host Port:  <none>
    Requests:
      cpu:        500m
      memory:     256Mi
    Environment:  <none>
    Mounts:       <none>
Conditions:
  Type           Status  Reason
  PodScheduled   True
Volumes:         <none>
QoS Class:       Burstable
Node-Selectors:  <none>
Tolerations:     <none>
Events:
  Type    Reason     Age   From               Message
  ----    ------     ----  ----               -------
  Normal  Scheduled  42s   default-scheduler  Successfully assigned default/web to n0
"""),
        (["describe", "pods/big", "-n", "shop"], _last_event_time(address, "big", "shop") + 42.5, f"""\
Name:         big
Namespace:    shop
Priority:     0
Node:         <none>
Labels:       app=batch
Annotations:  <none>
Status:       Pending
IP:
IPs:          <none>
Containers:
  c:
    Image:
    Port:       <none>
    Host Port:  <none>
    Limits:
      cpu:  3
    Requests:
      cpu:        3
    Environment:  <none>
    Mounts:       <none>
Conditions:
  Type           Status  Reason
  PodScheduled   False   Unschedulable
Volumes:         <none>
QoS Class:       Burstable
Node-Selectors:  <none>
Tolerations:     <none>
Events:
  Type     Reason            Age   From               Message
  ----     ------            ----  ----               -------
  Warning  FailedScheduling  42s   default-scheduler  {BIG_REASON}
"""),
        (["describe", "node", "n0"], FIVE_MINUTES_LATER, """\
Name:               n0
Roles:              <none>
Labels:             zone=a
Annotations:        <none>
CreationTimestamp:  Mon, 01 Jan 2024 00:00:00 +0000
Taints:             <none>
Unschedulable:      false
Addresses:
Allocatable:
  cpu:                2
  memory:             4Gi
  pods:               10
Non-terminated Pods:  (1 in total)
  Namespace           Name    CPU Requests  CPU Limits  Memory Requests  Memory Limits  Age
  ---------           ----    ------------  ----------  ---------------  -------------  ---
  default             web     500m (25%)    0 (0%)      256Mi (6%)       0 (0%)         5m
Allocated resources:
  (Total limits may be over 100 percent, i.e., overcommitted.)
  Resource           Requests    Limits
  --------           --------    ------
  cpu                500m (25%)  0 (0%)
  memory             256Mi (6%)  0 (0%)
  ephemeral-storage  0 (0%)      0 (0%)
Events:              <none>
"""),
        (["describe", "no", "n1"], FIVE_MINUTES_LATER, """\
Name:               n1
Roles:              <none>
Labels:             <none>
Annotations:        <none>
CreationTimestamp:  Mon, 01 Jan 2024 00:00:00 +0000
Taints:             dedicated=gpu:NoSchedule
Unschedulable:      true
Addresses:
Allocatable:
  cpu:                4
  memory:             8Gi
  pods:               10
Non-terminated Pods:  (0 in total)
  Namespace           Name    CPU Requests  CPU Limits  Memory Requests  Memory Limits  Age
  ---------           ----    ------------  ----------  ---------------  -------------  ---
Allocated resources:
  (Total limits may be over 100 percent, i.e., overcommitted.)
  Resource           Requests  Limits
  --------           --------  ------
  cpu                0 (0%)    0 (0%)
  memory             0 (0%)    0 (0%)
  ephemeral-storage  0 (0%)    0 (0%)
Events:              <none>
"""),
    ]
    for argv, now, want in cases:
        monkeypatch.setattr(cli_get, "clock", lambda now=now: now)
        assert run_cli(capsys, *argv, "--server", address) == (0, want, ""), argv


def test_describe_several_objects_separates_them_by_two_blank_lines(
        served: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "describe", "pods", "-A", "-l", "app", "--server", served[0])
    assert (code, [block.split("\n")[:2] for block in out.split("\n\n\n")]) == (
        0, [["Name:         web", "Namespace:    default"], ["Name:         big", "Namespace:    shop"]])


def test_get_watch_prints_the_list_then_each_change_until_the_request_timeout(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``get pods -w``: kubectl's rows for the list, then one per change (widths remembered, as kubectl's
    printer does, so a wider cell shifts its row), until --request-timeout ends the watch."""
    monkeypatch.setattr(cli_get, "clock", lambda: FIVE_MINUTES_LATER)
    gated = {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": "gated", "labels": {"app": "web"}, "creationTimestamp": CREATED},
             "spec": {"schedulingGates": [{"name": "wait"}], "containers": [{"name": "c"}, {"name": "d"}]}}
    cases = [
        (["get", "pods", "-w"], """\
NAME   READY   STATUS   RESTARTS   AGE
web    0/1     Bound    0          5m
gated   0/2     SchedulingGated   0          5m
web     0/1     Bound             0          5m
"""),
        (["get", "pods", "-w", "--output-watch-events", "-l", "app=web"], """\
EVENT   NAME   READY   STATUS   RESTARTS   AGE
ADDED   web    0/1     Bound    0          5m
ADDED   gated   0/2     SchedulingGated   0          5m
DELETED   web     0/1     Bound             0          5m
"""),
        (["get", "pods", "-w", "-o", "name"], "pod/web\npod/gated\npod/web\n"),
    ]
    for argv, want in cases:
        with FrameworkThread() as fw, SchedulerClient(fw.address) as c:
            c.apply_text("---\n".join(SERVED.split("---\n")[:3]))
            for _ in range(500):
                if c.get_pod("web").phase == "Bound":
                    break
                time.sleep(0.02)
            scheduler = fw.server.scheduler if fw.server is not None else None
            assert scheduler is not None

            def change(fw: FrameworkThread = fw, c: SchedulerClient = c, scheduler: Any = scheduler) -> None:
                # Once the watch is open (bounded): a gated pod appears and web is deleted.
                for _ in range(500):
                    if fw.call(_watching(scheduler)):
                        break
                    time.sleep(0.02)
                c.apply([gated])
                c.delete_pod("web")

            changer = threading.Thread(target=change)
            changer.start()
            result = run_cli(capsys, *argv, "--request-timeout", "3s", "--server", fw.address)
            changer.join(30)
        assert result == (0, want, ""), argv


async def _watching(scheduler: Any) -> bool:
    return bool(scheduler._watchers)



def test_apply_wait_and_delete_with_progress_on_a_terminal(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "uid": f"uid-p{i}"},
             "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}} for i in range(3)]
    (tmp_path / "nodes.yaml").write_text(SERVED.split("---\n")[0])
    (tmp_path / "pods.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    monkeypatch.setattr(cli_apply, "APPLY_CHUNK", 2)  # 4 objects are sent in two parts: the bar moves twice
    with FrameworkThread() as fw:
        tty = TTY()
        monkeypatch.setattr(sys, "stderr", tty)
        code = main(["apply", "-f", str(tmp_path / "nodes.yaml"), "-f", str(tmp_path / "pods.json"), "--wait",
                     "--server", fw.address])
        out = capsys.readouterr().out
        assert (code, out) == (0, "node/n0 created\npod/default/p0 created\npod/default/p1 created\n"
                                  "pod/default/p2 created\npod/default/p0 bound to n0\npod/default/p1 bound to n0\n"
                                  "pod/default/p2 bound to n0\n")
        lines = tty.getvalue().split("\n")
        assert lines[0].split("\r")[1:] == [  # tqdm draws the last state once more as it closes the bar
            "applying [" + "#" * 15 + "." * 15 + "] 2/4 objects",
            "applying [" + "#" * 30 + "] 4/4 objects",
            "applying [" + "#" * 30 + "] 4/4 objects",
        ]
        assert lines[1].split("\r")[-1].strip() == "binding [" + "#" * 30 + "] 3/3 pods bound"
        assert lines[2:] == [""]
        assert main(["delete", "pods", "p0", "p1", "--server", fw.address]) == 0
        assert main(["delete", "-f", str(tmp_path / "pods.json"), "--server", fw.address]) == 1
        out = capsys.readouterr().out
        assert out == "pod/default/p0 deleted\npod/default/p1 deleted\npod/default/p2 deleted\n"
        assert tty.getvalue().endswith("error: not found: pod default/p0, pod default/p1\n")


def test_apply_wait_gives_up_naming_the_pods_not_bound(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stuck = {"apiVersion": "v1", "kind": "Pod",
             "spec": {"schedulerName": "nope", "containers": [{"name": "c"}]}}
    (tmp_path / "stuck.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {**stuck, "metadata": {"name": f"stuck{i}", "namespace": "jobs"}} for i in range(7)]}))
    with FrameworkThread() as fw:
        code, out, err = run_cli(capsys, "apply", "-f", str(tmp_path / "stuck.json"), "--wait", "--timeout", "0",
                                 "--server", fw.address)
    why = "(Pending: no profile for schedulerName 'nope')"
    assert (code, out.splitlines(), err) == (
        1, [f"pod/jobs/stuck{i} created" for i in range(7)],
        "error: 7 of 7 pods not bound after 0s: " + "; ".join(f"jobs/stuck{i} {why}" for i in range(5))
        + " and 2 more\n")


class TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    ("stream", "want"),
    [
        (TTY, "\rwork [" + "#" * 10 + "." * 20 + "] 1/3 a longer note\rwork [" + "#" * 30 + "] 3/3 done"
              + " " * 9 + "\rwork [" + "#" * 30 + "] 3/3 done\n"),
        (io.StringIO, ""),
    ],
    ids=["tty", "pipe"],
)
def test_progress_bar_draws_only_on_a_terminal(stream: type[io.StringIO], want: str) -> None:
    out = stream()
    bar = ProgressBar(3, "work", out)
    bar.update(1, "a longer note")
    bar.update(3, "done")
    bar.close()
    assert out.getvalue() == want


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_has_help_with_examples(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    examples = out.split("examples:\n", 1)[1]
    assert examples.startswith(f"  outrigger {name}")
    if name not in ("serve", "plugin", "demo"):
        assert "--server ADDR" in out


def test_top_level_help_lists_every_command_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(f"    {name} " in out for name in cli.COMMANDS)
    assert "Examples:\n  outrigger serve --config scheduler.yaml --listen 127.0.0.1:50051\n" in out


# ---- version, serve's ready line and warnings, kubectl's layouts ------------------------------------


def test_version_is_the_installed_distributions(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert (exit_.value.code, capsys.readouterr().out) == (0, f"outrigger {version('outrigger')}\n")


@pytest.mark.parametrize(
    ("warnings", "want"),
    [
        ([], []),
        (['plugin "VolumeZone" is not modelled by Outrigger and is ignored',
          'plugin "VolumeBinding" is not modelled by Outrigger and is ignored'],
         ["warning: not modelled: VolumeZone, VolumeBinding (ignored: their Filter passes every node)"]),
        # One the user's own file names keeps its line (it says where).
        (['s.yaml: profiles[0].plugins.filter.enabled[0]: plugin "VolumeZone" is not modelled by Outrigger and is '
          'ignored', 'plugin "VolumeBinding" is not modelled by Outrigger and is ignored'],
         ['warning: s.yaml: profiles[0].plugins.filter.enabled[0]: plugin "VolumeZone" is not modelled by Outrigger '
          'and is ignored', "warning: not modelled: VolumeBinding (ignored: their Filter passes every node)"]),
    ],
    ids=["none", "defaults", "named-in-a-file"],
)
def test_unmodelled_plugins_are_one_warning_line(warnings: list[str], want: list[str]) -> None:
    assert cli.config_warnings(warnings) == want


def test_explain_with_the_default_profile_warns_of_nothing(files: dict[str, str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    # Every plugin of kube-scheduler's default profile is modelled (the volume plugins included).
    code = main(["explain", "--cluster", files["cluster.yaml"], "-f", files["pod.yaml"], "-o", "json"])
    assert (code, capsys.readouterr().err) == (0, "")


def test_serve_prints_one_ready_line_with_its_addresses_and_no_warning() -> None:
    proc = subprocess.Popen([sys.executable, "-m", "framework.cli", "serve", "--listen", "127.0.0.1:0", "--http",
                             "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready = proc.stdout.readline()  # bounded by the wait below: serve exits or prints within seconds
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert re.fullmatch(r"outrigger: serving the Scheduler API on 127\.0\.0\.1:\d+, HTTP on 127\.0\.0\.1:\d+\n",
                        ready), (ready, err)
    assert err.splitlines() == []


@pytest.mark.parametrize(
    ("seconds", "want"),
    [(-3, "<invalid>"), (-1.5, "0s"), (0, "0s"), (59.9, "59s"), (119, "119s"), (120, "2m"), (125, "2m5s"),
     (600, "10m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"), (7 * 3600 + 60, "7h1m"), (8 * 3600, "8h"),
     (47 * 3600, "47h"), (50 * 3600, "2d2h"), (8 * 86400, "8d"), (400 * 86400, "400d"), (731 * 86400, "2y1d"),
     (9 * 365 * 86400, "9y")],
)
def test_ages_read_as_kubectl_prints_them(seconds: float, want: str) -> None:
    assert human_duration(seconds) == want


@pytest.mark.parametrize(
    ("writer", "text", "want"),
    [
        # kubectl get: columns at least 6 wide, 3 apart; the last cell is not padded.
        (TabWriter(minwidth=6, padding=3), "A\tBB\tC\nlonger\tx\ty\n", "A        BB    C\nlonger   x     y\n"),
        # describe: a line without a tab ends the column block, so each block aligns on its own.
        (TabWriter(padding=2), "Name:\tweb\nNamespace:\tdefault\nContainers:\n  c:\tx\n",
         "Name:       web\nNamespace:  default\nContainers:\n  c:  x\n"),
        # A shorter line inside a block: its last cell is left as it is.
        (TabWriter(padding=2), "a\tb\tc\nd\te\n", "a  b  c\nd  e\n"),
    ],
    ids=["get", "describe-blocks", "ragged"],
)
def test_columns_align_as_gos_tabwriter_aligns_them(writer: TabWriter, text: str, want: str) -> None:
    assert writer.format(text) == want


def test_a_remembering_writer_keeps_column_widths_between_writes() -> None:
    writer = TabWriter(minwidth=6, padding=3, remember=True)
    assert [writer.format(t) for t in ("NAME\tAGE\nweb\t1s\n", "a-longer-name\t2s\n", "web\t3s\n")] == [
        "NAME   AGE\nweb    1s\n", "a-longer-name   2s\n", "web             3s\n"]


@pytest.mark.parametrize(
    ("containers", "want"),
    [
        ([{"name": "c"}], "BestEffort"),
        ([{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}], "Guaranteed"),
        ([{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1",
                                                                                         "memory": "1Gi"}}}],
         "Guaranteed"),
        ([{"name": "c", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1", "memory": "1Gi"}}}],
         "Burstable"),
        ([{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}, {"name": "d"}], "Burstable"),
        ([{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}], "BestEffort"),
    ],
    ids=["nothing", "limits-only", "equal", "less-cpu", "one-without", "extended-only"],
)
def test_qos_class_is_kubernetes(containers: list[dict[str, Any]], want: str) -> None:
    assert qos_class({"containers": containers}) == want


def _event(seq: int, kind: str, at: float, node: str = "", reasons: tuple[str, ...] = ()) -> Event:
    return Event(seq, EventType[kind], ObjectRef("Pod", "web", "default", "uid-web"), node, Status("", reasons), at)


def test_describe_shows_kube_schedulers_events_counted_as_its_recorder_counts_them() -> None:
    fit = "0/2 nodes are available: 2 Insufficient cpu."
    events = [
        _event(1, "APPLIED", 100.0),
        _event(2, "UNSCHEDULABLE", 101.0, reasons=(fit,)),
        _event(3, "NOMINATED", 102.0, node="n1"),
        _event(4, "UNSCHEDULABLE", 160.0, reasons=(fit,)),
        _event(5, "ERROR", 170.0, reasons=('running PreBind plugin "X": boom',)),
        _event(6, "BOUND", 200.0, node="n1"),
        _event(7, "PREEMPTED", 250.0, node="n1", reasons=("preempted by default/vip on node n1",)),
        _event(8, "DELETED", 251.0),
    ]
    rows = [(r.type, r.reason, r.age(now=300.0), r.source, r.message) for r in event_rows(events, "packer")]
    assert rows == [
        ("Warning", "FailedScheduling", "2m20s (x2 over 3m19s)", "packer", fit),
        ("Warning", "FailedScheduling", "2m10s", "packer", 'running PreBind plugin "X": boom'),
        ("Normal", "Scheduled", "100s", "packer", "Successfully assigned default/web to n1"),
        ("Normal", "Preempted", "50s", "packer", "Preempted by default/vip on node n1"),
    ]


@pytest.mark.parametrize(
    ("context", "quiet"),
    [
        ({"message": "SSL error in data received", "exception": ssl.SSLError(1, "[SSL] bad record mac"),
          "transport": object()}, True),
        ({"message": "Fatal error on transport", "exception": ConnectionResetError(104, "Connection reset by peer"),
          "protocol": object()}, True),
        ({"message": "Fatal error on SSL protocol", "protocol": object(), "transport": object(),
          "exception": RuntimeError("unable to perform operation on <TCPTransport closed=True reading=False "
                                    "0x55d0>; the handler is closed")}, True),
        ({"message": "Fatal error on SSL protocol", "protocol": object(),
          "exception": RuntimeError("Cannot call write() after write_eof()")}, True),
        ({"message": "Task exception was never retrieved", "exception": ConnectionResetError(104, "reset")}, False),
        ({"message": "Fatal error on transport", "exception": ValueError("a bug"), "transport": object()}, False),
        ({"message": "Fatal error on SSL protocol", "exception": RuntimeError("a bug"), "protocol": object()},
         False),
    ],
    ids=["ssl-under-a-transport", "reset-under-a-protocol", "write-to-a-closed-handle", "write-after-eof",
         "no-transport", "not-a-connection-error", "another-runtime-error"],
)
def test_a_connection_broken_under_a_transport_is_one_log_line(
        context: dict[str, Any], quiet: bool, caplog: pytest.LogCaptureFixture) -> None:
    """An API server killed mid-write makes the loop report the broken connection: one line, no traceback;
    anything else keeps the default handler's report."""
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.WARNING):
            quiet_connection_errors(loop, context)
    finally:
        loop.close()
    [record] = caplog.records
    if quiet:
        assert (record.levelname, record.exc_info) == ("WARNING", None)
        exc = context["exception"]
        assert record.getMessage() == f"{context['message']}: {type(exc).__name__}: {exc}"
    else:
        assert record.levelname == "ERROR" and record.exc_info is not None
