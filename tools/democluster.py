"""``make demo-cluster`` (``python -m tools.democluster``): Outrigger scheduling a real Kubernetes API
server on this machine, in one command, then everything stopped again.

1. a :class:`~tools.localcluster.LocalCluster`: etcd and kube-apiserver (the pinned release) on
   loopback, in a temporary folder, with kube-controller-manager's resourceclaim controller (it makes the
   claims of pods' ResourceClaimTemplates); the binaries are ``make k8s``'s, built first when missing;
2. the example plugins (``pluginhost/examples``: Coscheduling, NodeLabels, Provisioner) as sidecar
   processes, as ``make demo`` runs them;
3. ``outrigger serve --kubeconfig`` with the token of ``deploy/kubernetes/rbac.yaml``'s ServiceAccount
   (the ``outrigger-scheduler`` ClusterRole, its own Lease for leader election) and two profiles:
   kube-scheduler's default one and ``gang-scheduler``, which adds the example plugins;
4. nodes and pods applied with ``kubectl apply``: the cluster ``make demo`` generates (three zones, a
   tainted GPU pool, cordoned nodes) and its workload (web, batch and GPU pods, pods too big for any
   node, and for ``gang-scheduler`` gangs, pods placed by node labels and pods whose PreBind provisions
   a volume);
   and GPUs through dynamic resource allocation: a fake driver (:mod:`framework.cli.demodevices`) publishes a
   ResourceSlice of 4 GPUs for each node of the GPU pool, with a DeviceClass selecting them by CEL, and
   ``--gpu-pods`` pods each claim one from a ResourceClaimTemplate; one more pod claims 8 GPUs, which no
   node has;
5. once every pod is bound or has ``PodScheduled=False``: the first rows of ``kubectl get pods -o
   wide``, the events ``kubectl describe pod`` shows for a gang member and for a pod that fits nowhere,
   the claims with the device each got, and a summary (bound, unschedulable by reason, GPU pods bound with
   a device on their node, pods/s from the first pod created to the last bound, as a watch saw them).

Every process is stopped at the end, on an error and on Ctrl-C; each wait is bounded (``--timeout``).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from framework.cli import demodevices
from framework.cli.demo import DEFAULT_CONSOLE
from framework.cli.demodevices import GPU_TEMPLATE, GPUS_PER_NODE, devices_on_their_nodes
from framework.cli.demorun import (
    REMOTE_PROFILE,
    Sidecars,
    demo_config_text,
    free_address,
    generate_cluster,
    generate_jobs,
    generate_workload,
)
from framework.kube.client import ApiClient, KubeConfig

from .localcluster import BIN_ENV, BINARIES, BUILD_SCRIPT, LocalCluster, find_bin_dir
from .workloads import BoundWatch

__all__ = ["DemoResult", "main", "run"]

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy" / "kubernetes"
NAMESPACE = "demo"
ROWS_PER_KIND = 2
STARTUP_SECONDS = 90.0
STOP_SECONDS = 20.0


def scheduler_config(provision_root: Path) -> str:
    """The two profiles, as ``make demo`` has them; leader election on the Lease rbac.yaml grants."""
    return demo_config_text(str(provision_root), head=(
        "clientConnection: {qps: 500, burst: 1000}",
        "leaderElection: {leaderElect: true, resourceNamespace: outrigger, resourceName: outrigger}",
    ))


def remote_plugins(addresses: dict[str, str]) -> str:
    """The RemotePlugins document naming the sidecars."""
    doc = {"apiVersion": "outrigger.io/v1alpha1", "kind": "RemotePlugins",
           "plugins": [{"name": name.lower(), "address": address, "deadlines": {"default": "5s"}}
                       for name, address in addresses.items()]}
    return yaml.safe_dump(doc, sort_keys=False)


def bin_dir() -> Path:
    """The folder of the built binaries (``make k8s``), building what is missing first."""
    folder = find_bin_dir()
    if os.environ.get(BIN_ENV) or all(os.access(folder / b, os.X_OK) for b in (*BINARIES, "kube-controller-manager")):
        return folder
    print("building etcd, kube-apiserver, kubectl and kube-controller-manager (make k8s; minutes the first time) ...",
          flush=True)
    out = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT} exited {out.returncode}")
    return Path(out.stdout.strip().splitlines()[-1])


class Framework:
    """``outrigger serve --kubeconfig`` in its own process; its output kept by a reader task."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.argv = argv
        self.log = log
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []
        self.synced = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None

    async def start(self, timeout: float) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))},
        )
        self._reader = asyncio.get_running_loop().create_task(self._read())
        proc = self.proc
        waits = [asyncio.ensure_future(self.synced.wait()), asyncio.ensure_future(proc.wait())]
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        for waiting in waits:
            waiting.cancel()
        if self.synced.is_set():
            return
        if proc.returncode is not None:
            await asyncio.wait_for(self._reader, 5)
            last = next((line for line in reversed(self.lines) if line.strip()), "no output")
            raise RuntimeError(f"outrigger serve exited {proc.returncode} before it was in sync: {last}")
        raise RuntimeError(f"outrigger serve was not in sync after {timeout:.0f}s; its log: {self.log}")

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with self.log.open("w", encoding="utf-8") as log:
            async for raw in self.proc.stdout:
                line = raw.decode(errors="replace").rstrip("\n")
                self.lines.append(line)
                log.write(line + "\n")
                log.flush()
                if line.startswith("in sync with the cluster"):
                    self.synced.set()

    async def stop(self) -> None:
        proc = self.proc
        if proc is not None and proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), STOP_SECONDS)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._reader is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._reader, 5)


@dataclass
class DemoResult:
    total: int
    bound: int
    #: How many pods are unschedulable, by the message of their PodScheduled condition.
    unschedulable: dict[str, int]
    seconds: float
    #: Every pod bound or unschedulable before the timeout.
    settled: bool
    #: Each gang: (members bound, members).
    gangs: dict[str, tuple[int, int]]
    #: The GPU pods that fit: (bound with their claim's device on their node, how many).
    gpus: tuple[int, int] = (0, 0)

    @property
    def gangs_ok(self) -> bool:
        """Gangs that fit are bound whole; ``gang-short`` (a member short) has none bound."""
        return all(bound == (0 if name == "gang-short" else members) for name, (bound, members) in self.gangs.items())

    @property
    def gpus_ok(self) -> bool:
        """Every GPU pod that fits is bound, with its claim's device on its node."""
        return self.gpus[0] == self.gpus[1]


def sample_rows(lines: Sequence[str], per_kind: int = ROWS_PER_KIND) -> list[str]:
    """The header and the first ``per_kind`` rows of each kind of pod (its name up to the last dash)."""
    kept, seen = list(lines[:1]), collections.Counter[str]()
    for line in lines[1:]:
        kind = line.split(" ", 1)[0].rsplit("-", 1)[0]
        seen[kind] += 1
        if seen[kind] <= per_kind:
            kept.append(line)
    return kept


def priority_classes(pods: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``make demo``'s pods give ``spec.priority`` as a number, which the API server's Priority admission
    refuses: each non-zero one becomes a PriorityClass ``demo-priority-N`` the pod names instead."""
    values: set[int] = set()
    for pod in pods:
        value = int(pod["spec"].pop("priority", 0) or 0)
        if value:
            values.add(value)
            pod["spec"]["priorityClassName"] = f"demo-priority-{value}"
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"demo-priority-{v}"},
             "value": v, "description": "make demo-cluster"} for v in sorted(values)]


def _kubectl_apply(cluster: LocalCluster, objects: Sequence[dict[str, Any]], what: str, workdir: Path) -> None:
    path = workdir / f"{what}.yaml"
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))
    cluster.kubectl("apply", "-f", str(path), timeout=600)


def _shown_events(cluster: LocalCluster, pod: str) -> list[str]:
    """The Events section of ``kubectl describe pod``."""
    out = cluster.kubectl("describe", "pod", pod, "-n", NAMESPACE, check=False).stdout.splitlines()
    start = next((i for i, line in enumerate(out) if line.startswith("Events:")), len(out))
    return out[start:]


async def run(nodes: int, pods: int, *, seed: int = 7, labelled: int = 60, provisioned: int = 12,
              gpu_pods: int = 8, timeout: float = 300.0, console: str = "") -> DemoResult:
    """The demo (see the module docstring); what it found. Each process it starts is stopped before it
    returns or raises, the last started first. ``console``: serve the web console on this address and
    keep serving it once the pods are placed, until Ctrl-C."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="outrigger-demo-cluster-") as tmp:
        work = Path(tmp)
        async with contextlib.AsyncExitStack() as stack:
            cluster = await asyncio.to_thread(LocalCluster.start, work / "cluster", bin_dir=bin_dir())
            stack.push_async_callback(asyncio.to_thread, cluster.stop)
            await asyncio.to_thread(cluster.start_controller_manager, ("resourceclaim-controller",))
            print(f"local cluster: etcd and kube-apiserver at {cluster.server} ({work / 'cluster'}), "
                  "kube-controller-manager's resourceclaim controller", flush=True)
            await _start_outrigger(stack, cluster, work, console)
            gpu_nodes = await _apply_nodes(cluster, work, nodes, rng)
            fitting = min(gpu_pods, GPUS_PER_NODE * len(gpu_nodes))
            gpu_workload = await _apply_devices(cluster, work, gpu_nodes, gpu_pods)
            workload = await _prepare_workload(cluster, work, generate_workload(pods, rng)
                                               + generate_jobs(rng, labelled, provisioned) + gpu_workload)
            outcome = await _watch(stack, cluster)
            settled, seconds = await _apply_pods(cluster, work, workload, outcome, timeout)
            await _show(cluster, outcome, len(workload))
            devices = await asyncio.to_thread(_show_claims, cluster, outcome)
            result = _result(workload, outcome, seconds, settled)
            result.gpus = (devices, fitting)
            if console:
                await _keep_serving(console)
    _print_summary(result)
    return result


async def _keep_serving(console: str) -> None:
    """Print the web console's address and wait for Ctrl-C (which cancels the demo's task)."""
    print(f"\nweb console: http://{console}/ui/  (serving until Ctrl-C; the summary follows)", flush=True)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        print("stopping", flush=True)


async def _start_outrigger(stack: contextlib.AsyncExitStack, cluster: LocalCluster, work: Path,
                           console: str = "") -> None:
    """deploy/kubernetes' namespace and RBAC, the example plugins as sidecars, and ``outrigger serve
    --kubeconfig`` with the ServiceAccount's token, in sync with the cluster; both stopped with ``stack``.
    ``console``: the serve's --http address (its web console), with the sidecars' spans sent to it."""
    await asyncio.to_thread(cluster.kubectl, "apply", "-f", str(DEPLOY / "namespace.yaml"),
                            "-f", str(DEPLOY / "rbac.yaml"))
    kubeconfig = await asyncio.to_thread(cluster.service_account_kubeconfig, "outrigger", "outrigger")
    otlp = free_address() if console else ""
    sidecars = Sidecars(otlp=otlp)
    stack.push_async_callback(asyncio.to_thread, sidecars.stop)
    await asyncio.to_thread(sidecars.start)
    print("plugin hosts (sidecars): " + ", ".join(f"{n} at {a}" for n, a in sidecars.addresses.items()),
          flush=True)
    config, plugins = work / "scheduler.yaml", work / "remote-plugins.yaml"
    (work / "volumes").mkdir()
    config.write_text(scheduler_config(work / "volumes"))
    plugins.write_text(remote_plugins(sidecars.addresses))
    framework = Framework([sys.executable, "-m", "framework.cli", "serve", "--kubeconfig", str(kubeconfig),
                           "--config", str(config), "--plugins", str(plugins), "--listen", "127.0.0.1:0",
                           "--secure-port", "0",
                           *(["--http", console, "--console-otlp", otlp] if console else [])], work / "outrigger.log")
    stack.push_async_callback(framework.stop)
    await framework.start(STARTUP_SECONDS)
    print("outrigger serve --kubeconfig (ServiceAccount outrigger/outrigger, its log in "
          f"{framework.log.name}):", flush=True)
    for line in framework.lines:
        if line.startswith(("outrigger framework", "in sync")):
            print(f"  {line}", flush=True)
    if console:  # a console request: the attempts of the next minutes are recorded for the page
        await asyncio.to_thread(_touch_console, console)


def _touch_console(console: str, timeout: float = 60.0) -> None:
    """One console request, once the leader serves it: the standby's port (no console) hands over to
    the elected framework's."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://{console}/ui/api/overview", timeout=10) as r:
                r.read()
                return
        except OSError as exc:  # refused while the ports hand over; 404 from the standby
            if time.monotonic() > deadline:
                raise RuntimeError(f"the web console on {console} did not answer within {timeout:g}s: {exc}") from None
            time.sleep(0.5)


async def _apply_nodes(cluster: LocalCluster, work: Path, nodes: int, rng: random.Random) -> list[str]:
    """``make demo``'s cluster, and the namespace of the pods; the names of the GPU pool's nodes."""
    node_objects = generate_cluster(nodes, rng)
    await asyncio.to_thread(_kubectl_apply, cluster, node_objects, "nodes", work)
    print(f"kubectl apply: {nodes} nodes in 3 zones (a tainted GPU pool, a few cordoned)", flush=True)
    await asyncio.to_thread(cluster.kubectl, "create", "namespace", NAMESPACE)
    return [n["metadata"]["name"] for n in node_objects if n["metadata"]["labels"].get("accelerator") == "gpu"]



async def _apply_devices(cluster: LocalCluster, work: Path, gpu_nodes: Sequence[str],
                         count: int) -> list[dict[str, Any]]:
    """The fake driver's slices for the GPU pool, its DeviceClass, the template and the too-big claim; the
    pods that claim them (applied with the rest of the workload)."""
    objects = demodevices.pool_objects(gpu_nodes, NAMESPACE)
    await asyncio.to_thread(_kubectl_apply, cluster, objects, "devices", work)
    print(f"kubectl apply: a fake driver's ResourceSlices ({GPUS_PER_NODE} GPUs on each of the {len(gpu_nodes)} "
          f"GPU nodes), DeviceClass {demodevices.CLASS} (a CEL selector), ResourceClaimTemplate {GPU_TEMPLATE}",
          flush=True)
    return demodevices.gpu_pods(count)


async def _prepare_workload(cluster: LocalCluster, work: Path,
                            workload: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``make demo``'s pods in the demo namespace, with the PriorityClasses they name applied."""
    for pod in workload:
        pod["metadata"]["namespace"] = NAMESPACE
    await asyncio.to_thread(_kubectl_apply, cluster, priority_classes(workload), "priorityclasses", work)
    return workload


async def _watch(stack: contextlib.AsyncExitStack, cluster: LocalCluster) -> BoundWatch:
    """The pods of the demo namespace, bound or unschedulable, followed from now on (until ``stack``
    closes)."""
    admin = ApiClient(KubeConfig.from_file(cluster.admin_kubeconfig), qps=-1, burst=0)
    stack.push_async_callback(admin.close)
    outcome = BoundWatch(admin, NAMESPACE, all_pods=True)
    await outcome.start()
    stack.push_async_callback(outcome.stop)
    return outcome


async def _apply_pods(cluster: LocalCluster, work: Path, workload: list[dict[str, Any]], outcome: BoundWatch,
                      timeout: float) -> tuple[bool, float]:
    """Every pod in one ``kubectl apply``, then until each is bound or unschedulable: whether all were
    before ``timeout``, and the seconds from the apply to the last binding the watch saw."""
    started = time.monotonic()
    await asyncio.to_thread(_kubectl_apply, cluster, workload, "pods", work)
    remote = sum(1 for p in workload if p["spec"].get("schedulerName") == REMOTE_PROFILE)
    print(f"kubectl apply: {len(workload)} pods ({remote} for {REMOTE_PROFILE}: gangs, node labels, "
          "volumes)", flush=True)
    settled = await outcome.settle(len(workload), started + timeout)
    last = max((t for t, _ in outcome.bound.values()), default=started)
    return settled, last - started


async def _show(cluster: LocalCluster, outcome: BoundWatch, total: int) -> None:
    """The first rows of ``kubectl get pods -o wide``, and the events of a gang member and of a pod
    that fits nowhere."""
    wide = await asyncio.to_thread(cluster.kubectl, "get", "pods", "-n", NAMESPACE, "-o", "wide")
    rows = sample_rows(wide.stdout.splitlines())
    print(f"\n$ kubectl get pods -n {NAMESPACE} -o wide   ({len(rows) - 1} of {total} rows: "
          f"the first {ROWS_PER_KIND} of each kind of pod)")
    print("\n".join(rows))
    for name in ("gang-train-0", next((n for n in sorted(outcome.unschedulable) if n.startswith("huge")), ""),
                 "gpu-huge-0"):
        if name:
            print(f"\n$ kubectl describe pod {name} -n {NAMESPACE}   (its events)")
            print("\n".join(await asyncio.to_thread(_shown_events, cluster, name)))


def _show_claims(cluster: LocalCluster, outcome: BoundWatch) -> int:
    """The GPU pods' claims as ``kubectl get resourceclaims`` lists them, each bound pod's device; how many
    bound GPU pods have their claim allocated on their node."""
    listing = cluster.kubectl("get", "resourceclaims", "-n", NAMESPACE).stdout.splitlines()
    print(f"\n$ kubectl get resourceclaims -n {NAMESPACE}   (the first {ROWS_PER_KIND * 2})")
    print("\n".join(listing[:1 + ROWS_PER_KIND * 2]))
    claims = yaml.safe_load(cluster.kubectl("get", "resourceclaims", "-n", NAMESPACE, "-o", "json").stdout)["items"]
    pods = yaml.safe_load(cluster.kubectl("get", "pods", "-n", NAMESPACE, "-l", "app=gpu", "-o", "json").stdout)
    good = devices_on_their_nodes(claims, pods["items"], outcome.bound)
    for name, node, claim, devices in good[:ROWS_PER_KIND]:
        print(f"  {name} on {node}: claim {claim} -> " + ", ".join(devices))
    return len(good)


def _result(workload: Sequence[dict[str, Any]], outcome: BoundWatch, seconds: float, settled: bool) -> DemoResult:
    reasons = collections.Counter(outcome.unschedulable.values())
    gangs = collections.Counter(p["metadata"]["name"].rsplit("-", 1)[0] for p in workload
                                if p["metadata"]["name"].startswith("gang-"))
    placed = collections.Counter(n.rsplit("-", 1)[0] for n in outcome.bound if n.startswith("gang-"))
    return DemoResult(len(workload), len(outcome.bound), dict(reasons), seconds, settled,
                      {g: (placed.get(g, 0), n) for g, n in sorted(gangs.items())})


def _print_summary(result: DemoResult) -> None:
    print(f"\npods: {result.total}   bound: {result.bound}   unschedulable: {sum(result.unschedulable.values())}")
    for reason, count in sorted(result.unschedulable.items(), key=lambda kv: -kv[1]):
        print(f"  {count:5d} x {reason}")
    print("gangs: " + ", ".join(f"{name} {bound}/{members} bound" for name, (bound, members) in result.gangs.items())
          + f" ({'as expected: whole or none' if result.gangs_ok else 'NOT as expected'})")
    print(f"GPU pods: {result.gpus[0]} of the {result.gpus[1]} that fit bound with a device of their node "
          f"({'as expected' if result.gpus_ok else 'NOT as expected'}); gpu-huge-0 claims more than a node has")
    rate = result.bound / result.seconds if result.seconds > 0 else 0.0
    print(f"throughput: {rate:.0f} pods/s bound ({result.seconds:.2f}s from kubectl apply to the last binding "
          "a watch saw; kubectl creates the pods one at a time)")
    print("stopped: outrigger, the plugin hosts, kube-controller-manager, kube-apiserver and etcd")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.democluster", description=__doc__.split("\n\n")[0])
    p.add_argument("--nodes", type=int, default=60, help="nodes to create (default 60)")
    p.add_argument("--pods", type=int, default=300, help="pods of the default profile (default 300)")
    p.add_argument("--labelled", type=int, default=60, help=f"{REMOTE_PROFILE} pods placed by node labels")
    p.add_argument("--provisioned", type=int, default=12, help=f"{REMOTE_PROFILE} pods whose PreBind provisions")
    p.add_argument("--gpu-pods", type=int, default=8, help="pods that each claim a GPU (default 8)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the pods (default 300)")
    p.add_argument("--console", nargs="?", const=DEFAULT_CONSOLE, default="", metavar="ADDR",
                   help=f"serve the web console on ADDR (default {DEFAULT_CONSOLE}) and keep serving it until Ctrl-C")
    args = p.parse_args(argv)
    for name in ("nodes", "pods", "labelled", "provisioned", "gpu_pods"):
        if getattr(args, name) < 0:
            p.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    try:
        import uvloop

        result = uvloop.run(run(args.nodes, args.pods, seed=args.seed, labelled=args.labelled,
                                provisioned=args.provisioned, gpu_pods=args.gpu_pods, timeout=args.timeout,
                                console=args.console))
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"demo-cluster FAILED: {exc}", file=sys.stderr)
        return 1
    if not result.gangs_ok:
        print("demo-cluster FAILED: the gangs did not behave", file=sys.stderr)
        return 1
    if not result.gpus_ok:
        print(f"demo-cluster FAILED: {result.gpus[1] - result.gpus[0]} GPU pods that fit are not bound with a "
              "device of their node", file=sys.stderr)
        return 1
    if not result.settled:
        print(f"demo-cluster FAILED: {result.total - result.bound - sum(result.unschedulable.values())} pods "
              f"neither bound nor reported unschedulable after {args.timeout:.0f}s", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
