"""The ``outrigger`` command line: offline explain, the commands against a real framework service on
127.0.0.1 (exact -o table/json/yaml output), readable errors with exit code 1, --help examples, the
progress bar, the demo."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from framework_thread import FrameworkThread

from clients import SchedulerClient
from framework import cli
from framework.cli import main
from framework.progress import ProgressBar

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
    assert "pods: 300" in out
    assert "left behind: {'cycle_states': 0, 'waiting_pods': 0, 'assumed_pods': 0, 'binding_cycles': 0}" in out
    assert "throughput:" in out and "p99" in out


# ---- against a running framework service ----------------------------------------------------------

SERVED = """\
apiVersion: v1
kind: Node
metadata: {name: n0, uid: uid-n0, labels: {zone: a}}
status: {allocatable: {cpu: "2", memory: 4Gi, pods: "10"}}
---
apiVersion: v1
kind: Node
metadata: {name: n1, uid: uid-n1}
spec:
  unschedulable: true
  taints: [{key: dedicated, value: gpu, effect: NoSchedule}]
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, uid: uid-web}
spec: {containers: [{name: c, resources: {requests: {cpu: 500m, memory: 256Mi}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: big, namespace: shop, uid: uid-big}
spec: {containers: [{name: c, resources: {requests: {cpu: "3"}}}]}
"""
BIG_REASON = ("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable. preemption: "
              "0/2 nodes are available: 2 Preemption is not helpful for scheduling.")


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


WEB = {"namespace": "default", "name": "web", "uid": "uid-web", "phase": "Bound", "node": "n0", "attempts": 1,
       "queue": "", "nominatedNode": "", "profile": "default-scheduler", "priority": 0,
       "lastStatus": {"code": "Success", "reasons": [], "plugin": ""}}
BIG = {"namespace": "shop", "name": "big", "uid": "uid-big", "phase": "Unschedulable", "node": "", "attempts": 1,
       "queue": "unschedulable", "nominatedNode": "", "profile": "default-scheduler", "priority": 0,
       "lastStatus": {"code": "Unschedulable", "reasons": [BIG_REASON], "plugin": ""}}
N0 = {"name": "n0", "unschedulable": False, "pods": 1,
      "allocatable": {"cpu": 2000, "ephemeral-storage": 0, "memory": 4 << 30, "pods": 10},
      "requested": {"cpu": 500, "ephemeral-storage": 0, "memory": 256 << 20, "pods": 1},
      "taints": [], "labels": {"zone": "a"}}
N1 = {"name": "n1", "unschedulable": True, "pods": 0,
      "allocatable": {"cpu": 4000, "ephemeral-storage": 0, "memory": 8 << 30, "pods": 10},
      "requested": {"cpu": 0, "ephemeral-storage": 0, "memory": 0, "pods": 0},
      "taints": ["dedicated=gpu:NoSchedule"], "labels": {}}
# web on an empty n0 (its own requests not counted): cpu (2000-500)*100//2000 = 75, memory
# (4096-256)*100//4096 = 93 -> NodeResourcesFit (75+93)//2 = 84; balanced 100 - |25-6|*... = 90.
WEB_EXPLAINED = {
    "pod": "default/web", "selected": "n0", "status": {"code": "Success", "reasons": []},
    "nodes": {
        "n0": {"filter": {"code": "Success", "plugin": None, "reasons": []},
               "scores": {"TaintToleration": {"raw": 0, "normalized": 100, "weighted": 300},
                          "NodeResourcesFit": {"raw": 84, "normalized": 84, "weighted": 84},
                          "NodeResourcesBalancedAllocation": {"raw": 90, "normalized": 90, "weighted": 90},
                          "ImageLocality": {"raw": 0, "normalized": 0, "weighted": 0}},
               "total": 474},
        "n1": {"filter": {"code": "UnschedulableAndUnresolvable", "plugin": "NodeUnschedulable",
                          "reasons": ["node(s) were unschedulable"]},
               "scores": {}, "total": None},
    },
}


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["get", "pods"], """\
NAMESPACE   NAME   PHASE           NODE     ATTEMPTS   REASON
default     web    Bound           n0       1
shop        big    Unschedulable   <none>   1          """ + BIG_REASON + "\n"),
        (["get", "pods", "-o", "json"], json.dumps([WEB, BIG], indent=2) + "\n"),
        (["get", "pods", "-n", "shop", "-o", "yaml"], yaml.safe_dump([BIG], sort_keys=False)),
        (["get", "pods", "--phase", "Bound"], """\
NAMESPACE   NAME   PHASE   NODE   ATTEMPTS   REASON
default     web    Bound   n0     1
"""),
        (["get", "pod", "web", "-o", "json"], json.dumps(WEB, indent=2) + "\n"),
        (["get", "pod", "big", "-n", "shop", "-o", "yaml"], yaml.safe_dump(BIG, sort_keys=False)),
        (["get", "nodes"], """\
NAME   STATUS               PODS   CPU      MEMORY      TAINTS
n0     Ready                1      500m/2   256Mi/4Gi
n1     SchedulingDisabled   0      0/4      0/8Gi       dedicated=gpu:NoSchedule
"""),
        (["get", "nodes", "-o", "json"], json.dumps([N0, N1], indent=2) + "\n"),
        (["get", "node", "n1", "-o", "yaml"], yaml.safe_dump(N1, sort_keys=False)),
        (["get", "waiting"], "NAMESPACE   NAME   NODE   WAITING FOR   PROFILE   DEADLINE\n"),
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
        (["apply", "-f", "{tmp}/dry.yaml", "--dry-run"], """\
node/n0 configured (dry run)
node/n1 configured (dry run)
pod/default/api created (dry run)
"""),
        (["apply", "-f", "{tmp}/dry.yaml", "--dry-run", "-o", "json"], json.dumps([
            {"object": {"kind": "Node", "namespace": "", "name": n, "uid": f"uid-{n}"}, "action": "configured"}
            for n in ("n0", "n1")] + [{"object": {"kind": "Pod", "namespace": "default", "name": "api",
                                                  "uid": "uid-api"}, "action": "created"}], indent=2) + "\n"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_commands_print_exact_output(served: tuple[str, Path], capsys: pytest.CaptureFixture[str],
                                     argv: list[str], want: str) -> None:
    address, tmp = served
    argv = [a.replace("{tmp}", str(tmp)) for a in argv]
    assert run_cli(capsys, *argv, "--server", address) == (0, want, "")


def test_explain_a_manifest_against_the_server_counts_the_pods_it_holds(
        served: tuple[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    address, tmp = served
    (tmp / "api.yaml").write_text(SERVED.split("---\n")[2].replace("web", "api"))
    code, out, _ = run_cli(capsys, "explain", "-f", str(tmp / "api.yaml"), "-o", "json", "--server", address)
    # Like web, but web's 500m/256Mi is on n0 now: cpu (2000-1000)*100//2000 = 50, memory
    # (4096-512)*100//4096 = 87 -> NodeResourcesFit (50+87)//2 = 68.
    n0 = json.loads(out)["nodes"]["n0"]
    assert (code, n0["scores"]["NodeResourcesFit"]["raw"], n0["total"]) == (0, 68, 449)


def test_server_defaults_to_the_environment(served: tuple[str, Path], capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUTRIGGER_SERVER", served[0])
    code, out, _ = run_cli(capsys, "get", "pods", "--phase", "Bound", "-o", "json")
    assert (code, json.loads(out)) == (0, [WEB])


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
    ],
    ids=["missing-file", "bad-yaml", "bad-quantity", "unreachable", "unreachable-apply", "unreachable-watch",
         "unknown-pod",
         "unknown-node", "explain-unknown-pod", "delete-unknown-pod", "delete-nothing", "waiting-name"],
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


def test_apply_wait_and_delete_with_progress_on_a_terminal(capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "uid": f"uid-p{i}"},
             "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}} for i in range(3)]
    (tmp_path / "nodes.yaml").write_text(SERVED.split("---\n")[0])
    (tmp_path / "pods.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    monkeypatch.setattr(cli, "APPLY_CHUNK", 2)  # 4 objects are sent in two parts: the bar moves twice
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
        assert lines[0].split("\r")[1:] == [
            "applying [" + "#" * 15 + "." * 15 + "] 2/4 objects",
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
              + " " * 9 + "\n"),
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
