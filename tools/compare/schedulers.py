"""The two schedulers a comparison runs, each as a user runs it, on a fresh cluster of its own: the real
kube-scheduler (``--config``) and ``outrigger serve --kubeconfig``, with the same KubeSchedulerConfiguration
(the default profile, scheduler_perf's client QPS and burst, no leader election).

::

    with fresh_cluster(workdir, bin_dir) as cluster, KubeScheduler(cluster, workdir) as kube:
        ...   # kube.log holds its output; OutriggerScheduler(..., scores=n) keeps --debug-scores tables
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ..localcluster import LocalCluster, _spawner, free_ports
from ..workloads import Api

__all__ = [
    "BURST",
    "KUBE",
    "OUTRIGGER",
    "QPS",
    "SCHEDULERS",
    "SCHEDULER_NAME",
    "KubeScheduler",
    "OutriggerScheduler",
    "Scheduler",
    "cluster_api",
    "create_pod",
    "fresh_cluster",
    "scheduler_config",
]


KUBE = "kube-scheduler"
OUTRIGGER = "outrigger"
SCHEDULER_NAME = "default-scheduler"
#: scheduler_perf's client settings for the scheduler under test (util.go: QPS 5000, Burst 5000), for both.
QPS, BURST = 5000, 5000
STARTUP_SECONDS = 90.0
STOP_SECONDS = 15.0


def scheduler_config(kubeconfig: Path, extra: str = "") -> str:
    """The KubeSchedulerConfiguration both schedulers run with: the default profile, the same client
    connection, no leader election."""
    return (f"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
            f"clientConnection: {{kubeconfig: {kubeconfig}, qps: {QPS}, burst: {BURST}}}\n"
            f"leaderElection: {{leaderElect: false}}\n{extra}")


class Scheduler:
    """One scheduler process on a cluster; its output goes to ``log``."""

    name = ""

    def __init__(self, cluster: LocalCluster, workdir: Path, *, scores: int = 0, gates: str = "",
                 profiles: str = "") -> None:
        self.cluster = cluster
        self.workdir = workdir
        self.scores = scores  # nodes per pod to record scores for (0: off)
        self.gates = gates  # --feature-gates, the same for both (e.g. GenericWorkload=true)
        self.profiles = profiles  # the configuration's `profiles:` lines (none: the default profile)
        self.log = workdir / f"{self.name}.log"
        self.config = workdir / f"{self.name}.yaml"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self) -> None:
        self.config.write_text(scheduler_config(self.cluster.admin_kubeconfig, self.profiles))
        self._log_file = self.log.open("ab")
        self.proc = _spawner.popen(self.argv(), self._log_file)
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise

    def wait_ready(self) -> None:
        pass

    def _wait_for_line(self, text: str) -> None:
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if text in self.log.read_text(errors="replace"):
                return
            if self.proc is not None and self.proc.poll() is not None:
                break
            time.sleep(0.1)
        tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        raise RuntimeError(f"{self.name} did not start (no {text!r} in {self.log}):\n{tail}")

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_SECONDS)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> Scheduler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class KubeScheduler(Scheduler):
    """The real kube-scheduler (``--config``, a free secure port on loopback)."""

    name = KUBE

    def argv(self) -> list[str]:
        (port,) = free_ports(1)
        argv = [str(self.cluster.bin_dir / "kube-scheduler"), "--config", str(self.config),
                "--bind-address", "127.0.0.1", "--secure-port", str(port)]
        if self.scores:
            # schedule_one.go logs each plugin's weighted score per node, and each total, at level 10.
            argv += ["-v", "2", "--vmodule", "schedule_one=10"]
        if self.gates:
            argv += ["--feature-gates", self.gates]
        return argv

    def wait_ready(self) -> None:
        self._wait_for_line("Starting Kubernetes Scheduler")


class OutriggerScheduler(Scheduler):
    """``outrigger serve --kubeconfig`` (no secure port; ``--http`` on loopback when scores are kept)."""

    name = OUTRIGGER

    def __init__(self, cluster: LocalCluster, workdir: Path, *, scores: int = 0, gates: str = "",
                 profiles: str = "") -> None:
        super().__init__(cluster, workdir, scores=scores, gates=gates, profiles=profiles)
        self.http = f"127.0.0.1:{free_ports(1)[0]}" if scores else ""

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "framework.cli", "serve", "--kubeconfig", str(self.cluster.admin_kubeconfig),
                "--config", str(self.config), "--listen", "127.0.0.1:0", "--secure-port", "0"]
        if self.scores:
            argv += ["--http", self.http, "--debug-scores", str(self.scores)]
        if self.gates:
            argv += ["--feature-gates", self.gates]
        return argv

    def wait_ready(self) -> None:
        self._wait_for_line("in sync with the cluster")


SCHEDULERS: dict[str, type[Scheduler]] = {KUBE: KubeScheduler, OUTRIGGER: OutriggerScheduler}


@contextlib.contextmanager
def fresh_cluster(workdir: Path, bin_dir: Path) -> Iterator[LocalCluster]:
    """A new etcd and API server in ``workdir`` (removed afterwards: 5000 nodes of etcd data add up)."""
    cluster = LocalCluster.start(workdir, bin_dir=bin_dir)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(workdir / "etcd-data", ignore_errors=True)


def cluster_api(cluster: LocalCluster) -> Api:
    return Api.from_kubeconfig(str(cluster.admin_kubeconfig))



async def create_pod(api: Api, pod: dict[str, Any]) -> None:
    await api.request("POST", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods", verb="create",
                      resource="pods", body=pod)
