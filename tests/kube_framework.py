"""``outrigger serve --kubeconfig`` in a subprocess, as an operator runs it, for the live-cluster tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.localcluster import LocalCluster, free_ports

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "kubernetes"
STARTUP_SECONDS = 60.0


class FrameworkProcess:
    """The framework on a live cluster: started, stopped gracefully or killed; its output is kept."""

    def __init__(self, kubeconfig: Path, config: Path, plugins: Path | None = None) -> None:
        self.argv = [sys.executable, "-m", "framework.cli", "serve", "--kubeconfig", str(kubeconfig),
                     "--config", str(config), "--listen", "127.0.0.1:0"]
        if plugins is not None:
            self.argv += ["--plugins", str(plugins)]
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self._synced = threading.Event()

    def start(self, wait_synced: bool = True) -> FrameworkProcess:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.lines = []
        self._synced.clear()
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, cwd=ROOT)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        if wait_synced and not self._synced.wait(STARTUP_SECONDS):
            self.kill()
            raise RuntimeError("the framework did not get in sync with the cluster:\n" + "\n".join(self.lines))
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("in sync with the cluster"):
                self._synced.set()

    def output(self) -> str:
        return "\n".join(self.lines)

    def kill(self) -> None:
        """SIGKILL: the framework dies mid-whatever."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()


def outrigger_kubeconfig(cluster: LocalCluster) -> Path:
    """A kubeconfig with the token of deploy/kubernetes/rbac.yaml's service account (the outrigger-scheduler
    ClusterRole, exactly)."""
    cluster.kubectl("apply", "-f", str(DEPLOY / "namespace.yaml"), "-f", str(DEPLOY / "rbac.yaml"))
    return cluster.service_account_kubeconfig("outrigger", "outrigger")


def get_json(cluster: LocalCluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def wait_for(check: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    """Poll ``check`` until it returns something truthy (bounded in time); that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def node_manifest(name: str, cpu: str = "4", pods: str = "110", labels: dict[str, str] | None = None) -> dict[str, Any]:
    capacity = {"cpu": cpu, "memory": "64Gi", "pods": pods}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
            "status": {"capacity": capacity, "allocatable": capacity}}


def pod_manifest(name: str, namespace: str, scheduler: str, cpu: str = "1",
                 annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
            "spec": {"schedulerName": scheduler, "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}],
                **spec}}


def start_kube_scheduler(cluster: LocalCluster, tmp: Path, config: str, gates: str) -> subprocess.Popen[bytes]:
    """The real kube-scheduler of ``cluster``'s release with ``config`` (a KubeSchedulerConfiguration whose
    ``clientConnection: {`` gains the admin kubeconfig) and ``--feature-gates gates``, on a free secure
    port; returns once it says it started (its log: ``tmp/kube-scheduler.log``)."""
    path = tmp / "kube-scheduler.yaml"
    path.write_text(config.replace("clientConnection: {", f"clientConnection: {{kubeconfig: "
                                                          f"{cluster.admin_kubeconfig}, "))
    (port,) = free_ports(1)
    log_path = tmp / "kube-scheduler.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen([str(cluster.bin_dir / "kube-scheduler"), "--config", str(path),
                                 "--bind-address", "127.0.0.1", "--secure-port", str(port),
                                 "--feature-gates", gates], stdout=log, stderr=log)
    wait_for(lambda: "Starting Kubernetes Scheduler" in log_path.read_text(errors="replace"), 90,
             "kube-scheduler to start")
    return proc


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within 15 s."""
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(15)
