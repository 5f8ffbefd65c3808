"""Pods that claim devices, scheduled by ``outrigger serve --kubeconfig`` on the real API server, as a user
drives it with kubectl: a fake GPU driver's ResourceSlices (a node with 2 GPUs, one with 4), a DeviceClass
with a CEL selector, claims made directly and from ResourceClaimTemplates (by kube-controller-manager's
resourceclaim controller, six at once), a pod created before its claim, a claim no node can satisfy, the
framework killed around PreBind, and a PreBind failing after the claim was written.

What is checked through the API: the pod bound (once: one ``Scheduled`` event), its claim's
``status.allocation`` naming the exact devices and the node, ``reservedFor`` the pod, kube-scheduler's
finalizer; ``kubectl describe pod``'s events; for a claim no node can satisfy, kube-scheduler's
FailedScheduling message and no allocation; after a crash, no claim allocated to a pod that is not bound.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for
from test_remote_harness import HostProcess

from framework.dra.store import FINALIZER
from pluginhost.examples.provisioner import FAIL, PROVISION
from tools import fakedriver
from tools.compare.throughput import claim_requests
from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

ROOT = Path(__file__).resolve().parent.parent
PROFILE = "outrigger-scheduler"
CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 500, burst: 500}}
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: {PROFILE}
"""


class Gpus:
    """Two nodes whose GPUs a fake driver publishes (``a``: 2, ``b``: 4), a DeviceClass of them, and the
    framework (started by :meth:`start`, with the Provisioner plugin in its own host when asked)."""

    def __init__(self, cluster: LocalCluster, namespace: str, tmp_path: Path) -> None:
        self.cluster, self.ns, self.tmp = cluster, namespace, tmp_path
        base = namespace[:40].rstrip("-")
        self.a, self.b, self.device_class = f"{base}-a", f"{base}-b", f"{base}.gpu"
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
            node_manifest(self.a), node_manifest(self.b), fakedriver.gpu_slice(self.a, 2),
            fakedriver.gpu_slice(self.b, 4), fakedriver.device_class(self.device_class)]))
        self.host: HostProcess | None = None
        self.framework: FrameworkProcess | None = None

    def start(self, provisioner: str = "") -> FrameworkProcess:
        """The framework; ``provisioner`` "after" or "before": the Provisioner's slow PreBind (6 s, time for
        a test to kill the framework in it on a loaded machine) runs after DynamicResources' (which writes the
        claim) or before it."""
        config, plugins = self.tmp / "scheduler.yaml", None
        lines = [CONFIG.rstrip("\n")]
        if provisioner:
            self.host = HostProcess("pluginhost.examples.provisioner:Provisioner")
            plugins = self.tmp / "remote-plugins.yaml"
            plugins.write_text(yaml.safe_dump({
                "apiVersion": "outrigger.io/v1alpha1", "kind": "RemotePlugins",
                "plugins": [{"name": "provisioner", "address": self.host.start(),
                             "deadlines": {"default": "5s", "preBind": "10s"}}]}))
            lines += ["  plugins:", "    multiPoint: {enabled: [{name: Provisioner}]}"]
            if provisioner == "before":  # enabled at the point itself: first there (kube-scheduler's order)
                lines.append("    preBind: {enabled: [{name: Provisioner}]}")
            lines.append(f"  pluginConfig: [{{name: Provisioner, args: {{delaySeconds: 6, root: {self.tmp / 'p'}}}}}]")
        config.write_text("\n".join(lines) + "\n")
        self.framework = FrameworkProcess(outrigger_kubeconfig(self.cluster), config, plugins).start()
        return self.framework

    def apply(self, *docs: dict[str, Any]) -> None:
        self.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def claim(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = get_json(self.cluster, "resourceclaim", name, "-n", self.ns)
        return found

    def pod(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = get_json(self.cluster, "pod", name, "-n", self.ns)
        return found

    def bound(self, name: str, timeout: float = 60) -> str:
        node: str = wait_for(lambda: self.pod(name)["spec"].get("nodeName"), timeout, f"pod {name} bound")
        return node

    def events(self, reason: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = get_json(self.cluster, "events.events.k8s.io", "-n", self.ns,
                                               "--field-selector", f"reason={reason}")["items"]
        return items

    def close(self) -> None:
        if self.framework is not None:
            self.framework.stop()
        if self.host is not None:
            self.host.kill()
        self.cluster.kubectl("delete", f"resourceslice/{self.a}-gpus", f"resourceslice/{self.b}-gpus",
                             f"deviceclass/{self.device_class}", "--ignore-not-found")


@pytest.fixture
def gpus(kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> Iterator[Gpus]:
    rig = Gpus(kube_cluster, kube_namespace, tmp_path)
    try:
        yield rig
    finally:
        rig.close()


def gpu_pod(name: str, namespace: str, *, claim: str = "", template: str = "",
            annotations: dict[str, str] | None = None) -> dict[str, Any]:
    source = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template}
    pod = pod_manifest(name, namespace, PROFILE, cpu="100m", annotations=annotations,
                       resourceClaims=[{"name": "gpus", **source}])
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    return pod


def results(node: str, *devices: str) -> list[dict[str, str]]:
    return [{"request": "gpu", "driver": fakedriver.DRIVER, "pool": node, "device": d} for d in devices]


def on_node(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


def allocation_of(claim: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, Any] | None, list[str], list[str]]:
    """(device results, nodeSelector, reservedFor's pod names, finalizers) of an API claim."""
    status = claim.get("status") or {}
    alloc = status.get("allocation") or {}
    return ((alloc.get("devices") or {}).get("results") or [], alloc.get("nodeSelector"),
            [r["name"] for r in status.get("reservedFor") or ()], claim["metadata"].get("finalizers") or [])


def describe_events(cluster: LocalCluster, namespace: str, pod: str) -> list[list[str]]:
    """``kubectl describe pod``'s Events rows, each as (type, reason, from, message) with the age left out."""
    out = cluster.kubectl("describe", "pod", pod, "-n", namespace).stdout.splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("Events:"))
    rows = []
    for line in out[start + 3:]:
        if not line.strip():
            break
        kind, reason, _age, source, message = line.split(None, 4)
        rows.append([kind, reason, source, message])
    return rows


def test_a_pod_with_a_claim_is_bound_with_its_devices_allocated_and_reserved_for_it(gpus: Gpus) -> None:
    ns = gpus.ns
    gpus.apply(fakedriver.claim("train", ns, 3, gpus.device_class), gpu_pod("train", ns, claim="train"))
    gpus.start()
    node = gpus.bound("train")
    uid = gpus.pod("train")["metadata"]["uid"]
    claim = gpus.claim("train")
    # Only b has three GPUs: the first three of its slice, pinned to b; reserved for the pod.
    assert node == gpus.b
    assert allocation_of(claim) == (results(gpus.b, "gpu-0", "gpu-1", "gpu-2"), on_node(gpus.b), ["train"],
                                    [FINALIZER])
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "train", "uid": uid}]
    assert describe_events(gpus.cluster, ns, "train") == [
        ["Normal", "Scheduled", PROFILE, f"Successfully assigned {ns}/train to {gpus.b}"]]


def test_a_pod_with_a_template_claim_gets_the_claim_the_controller_made(
        kube_controller_manager: LocalCluster, gpus: Gpus) -> None:
    ns = gpus.ns
    gpus.apply(fakedriver.claim_template("three-gpus", ns, 3, gpus.device_class),
               gpu_pod("infer", ns, template="three-gpus"))
    gpus.start()
    node = gpus.bound("infer")
    made = gpus.pod("infer")["status"]["resourceClaimStatuses"]
    assert [m["name"] for m in made] == ["gpus"] and made[0]["resourceClaimName"].startswith("infer-gpus-")
    claim = gpus.claim(made[0]["resourceClaimName"])
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpus"}
    assert node == gpus.b
    assert allocation_of(claim) == (results(gpus.b, "gpu-0", "gpu-1", "gpu-2"), on_node(gpus.b), ["infer"],
                                    [FINALIZER])


def test_a_claim_no_node_can_satisfy_gets_kube_schedulers_failed_scheduling_and_stays_unallocated(
        gpus: Gpus) -> None:
    ns = gpus.ns
    gpus.apply(fakedriver.claim("huge", ns, 5, gpus.device_class), gpu_pod("huge", ns, claim="huge"))
    gpus.start()
    # kube-scheduler v1.37.2: Filter "cannot allocate all claims" on each node (UnschedulableAndUnresolvable),
    # DynamicResources' PostFilter has nothing to deallocate (Unschedulable, no message), preemption cannot help.
    message = ("0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes are available: "
               "2 Preemption is not helpful for scheduling.")
    events = wait_for(lambda: gpus.events("FailedScheduling"), 60, "FailedScheduling")
    assert [(e["regarding"]["name"], e["note"]) for e in events] == [("huge", message)]
    condition = next(c for c in gpus.pod("huge")["status"]["conditions"] if c["type"] == "PodScheduled")
    assert (condition["status"], condition["reason"], condition["message"]) == ("False", "Unschedulable", message)
    assert allocation_of(gpus.claim("huge")) == ([], None, [], [])


CRASHES = [
    # (name, where the Provisioner's 6 s PreBind runs, whether the claim is written when the framework dies)
    ("killed after the claim was written, before the binding", "after", True),
    ("killed before the claim was written (a PreBind before DynamicResources')", "before", False),
]


@pytest.mark.parametrize(("provisioner", "written"), [c[1:] for c in CRASHES], ids=[c[0] for c in CRASHES])
def test_killed_around_prebind_then_restarted_the_pod_is_bound_once_and_no_claim_is_left_to_an_unbound_pod(
        gpus: Gpus, provisioner: str, written: bool) -> None:
    ns = gpus.ns
    gpus.apply(fakedriver.claim("job", ns, 3, gpus.device_class),
               gpu_pod("job", ns, claim="job", annotations={PROVISION: "scratch"}))
    first = gpus.start(provisioner)
    uid = gpus.pod("job")["metadata"]["uid"]
    wait_for(lambda: (gpus.tmp / "p" / f"{uid}.claim").exists(), 60, "the pod reserved (the Provisioner's file)",
             interval=0.05)
    if written:
        wait_for(lambda: allocation_of(gpus.claim("job"))[2] == ["job"], 10, "the claim written")
    first.kill()  # within the Provisioner's 6 s: the binding has not been sent
    at_kill = allocation_of(gpus.claim("job"))
    assert gpus.pod("job")["spec"].get("nodeName") is None
    assert at_kill == ((results(gpus.b, "gpu-0", "gpu-1", "gpu-2"), on_node(gpus.b), ["job"], [FINALIZER])
                       if written else ([], None, [], []))
    first.start()  # the same command again: it relists and carries on
    assert gpus.bound("job") == gpus.b
    assert allocation_of(gpus.claim("job")) == (results(gpus.b, "gpu-0", "gpu-1", "gpu-2"), on_node(gpus.b), ["job"],
                                                [FINALIZER])
    scheduled = [e for e in gpus.events("Scheduled") if e["regarding"]["name"] == "job"]
    assert [e["note"] for e in scheduled] == [f"Successfully assigned {ns}/job to {gpus.b}"]


def test_a_prebind_failure_after_the_claim_was_written_unreserves_it_and_the_retry_binds(gpus: Gpus) -> None:
    ns = gpus.ns
    gpus.apply(fakedriver.claim("once", ns, 3, gpus.device_class),
               gpu_pod("once", ns, claim="once", annotations={PROVISION: "scratch", FAIL: "once"}))
    watch = subprocess.Popen(
        [str(gpus.cluster.bin_dir / "kubectl"), "--kubeconfig", str(gpus.cluster.admin_kubeconfig), "get",
         "resourceclaim", "once", "-n", ns, "--watch", "-o",
         'jsonpath={.status.reservedFor[*].name}|{.status.allocation.devices.results[*].device}{"\\n"}'],
        stdout=subprocess.PIPE, text=True)
    try:
        gpus.start("after")
        assert gpus.bound("once", timeout=90) == gpus.b
    finally:
        watch.terminate()
    seen, _ = watch.communicate(timeout=10)
    lines = seen.splitlines()
    states = [line for i, line in enumerate(lines) if i == 0 or line != lines[i - 1]]
    # Allocated and reserved at PreBind; the pod taken out of reservedFor at Unreserve when the Provisioner
    # failed (the allocation stays, as kube-scheduler leaves it); reserved again by the retry, on the same
    # devices, which bound the pod.
    assert states == ["|", "once|gpu-0 gpu-1 gpu-2", "|gpu-0 gpu-1 gpu-2", "once|gpu-0 gpu-1 gpu-2"]
    assert allocation_of(gpus.claim("once")) == (results(gpus.b, "gpu-0", "gpu-1", "gpu-2"), on_node(gpus.b),
                                                 ["once"], [FINALIZER])


def test_unreserve_takes_the_pod_out_of_a_claim_someone_else_changed_with_one_patch_and_no_conflict(
        gpus: Gpus) -> None:
    # The claim is written at PreBind; while the Provisioner's PreBind (6 s) runs, someone else labels the
    # claim; then the Provisioner fails and Unreserve takes the pod out of reservedFor, by its uid, with no
    # resourceVersion (kube-scheduler's strategic-merge patch): one PATCH, no 409, the label kept.
    ns = gpus.ns
    gpus.apply(fakedriver.claim("relabelled", ns, 3, gpus.device_class),
               gpu_pod("relabelled", ns, claim="relabelled", annotations={PROVISION: "scratch", FAIL: "once"}))
    before = claim_requests(gpus.cluster)
    gpus.start("after")
    wait_for(lambda: allocation_of(gpus.claim("relabelled"))[2] == ["relabelled"], 60, "the claim written")
    gpus.cluster.kubectl("label", "resourceclaim", "relabelled", "-n", ns, "team=vision")
    assert gpus.bound("relabelled", timeout=90) == gpus.b
    claim = gpus.claim("relabelled")
    assert claim["metadata"]["labels"] == {"team": "vision"}
    assert allocation_of(claim) == (results(gpus.b, "gpu-0", "gpu-1", "gpu-2"), on_node(gpus.b), ["relabelled"],
                                    [FINALIZER])
    writes = {k: n for k, n in (claim_requests(gpus.cluster) - before).items()
              if k.startswith(("PUT", "PATCH")) or "409" in k}
    # The finalizer; the claim written at PreBind; kubectl's label; Unreserve's patch; the retry's PreBind.
    assert writes == {"PUT 200": 1, "PUT status 200": 2, "PATCH 200": 1, "PATCH status 200": 1}


def test_template_pods_created_at_once_each_get_a_device_of_their_own(
        kube_controller_manager: LocalCluster, gpus: Gpus) -> None:
    # The controller updates each pod's resourceClaimStatuses right after it creates the claim; the pod's watch
    # may deliver that before the claims' watch delivers the claim, which gates the pod until the claim comes.
    ns = gpus.ns
    names = [f"infer-{i}" for i in range(6)]
    gpus.apply(fakedriver.claim_template("one-gpu", ns, 1, gpus.device_class),
               *(gpu_pod(n, ns, template="one-gpu") for n in names))
    gpus.start()
    placed: dict[str, list[str]] = {}
    for name in names:
        node = gpus.bound(name)
        claim = gpus.claim(gpus.pod(name)["status"]["resourceClaimStatuses"][0]["resourceClaimName"])
        devices, selector, users, _ = allocation_of(claim)
        assert (selector, users) == (on_node(node), [name])
        placed.setdefault(node, []).extend(r["device"] for r in devices)
    # Six GPUs for six pods: every device of both nodes, each once.
    assert {n: sorted(d) for n, d in placed.items()} == {gpus.a: ["gpu-0", "gpu-1"],
                                                          gpus.b: ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]}


def framework_status(address: str, namespace: str, pod: str) -> str:
    """The STATUS column of ``outrigger get pod`` (the framework's own view of the pod)."""
    out = subprocess.run([sys.executable, "-m", "framework.cli", "get", "pod", pod, "-n", namespace, "--server",
                          address], capture_output=True, text=True, timeout=60, cwd=ROOT)
    rows = out.stdout.splitlines()
    return rows[1].split()[2] if out.returncode == 0 and len(rows) == 2 else ""


def test_a_pod_created_before_its_claim_is_bound_once_the_claim_exists(gpus: Gpus) -> None:
    ns = gpus.ns
    framework = gpus.start()
    address = next(line for line in framework.lines if line.startswith("outrigger framework serving on ")).split()[4]
    gpus.apply(gpu_pod("early", ns, claim="later"))
    # Gated by DynamicResources' PreEnqueue (its claim does not exist), as kube-scheduler gates it.
    wait_for(lambda: framework_status(address, ns, "early") == "SchedulingGated", 30, "the pod gated")
    gpus.apply(fakedriver.claim("later", ns, 1, gpus.device_class))
    node = gpus.bound("early")
    assert allocation_of(gpus.claim("later"))[1:3] == (on_node(node), ["early"])


def test_pods_sharing_a_claim_each_reserve_it_with_one_write_and_no_conflict(gpus: Gpus) -> None:
    # Six pods share one GPU's claim, all queued before the framework starts: the first allocates it, the
    # others reserve it as soon as it is written, their binding cycles overlapping. Each is one write of
    # the claim's status from the version the one before stored: the API server refuses none (409).
    ns = gpus.ns
    names = [f"share-{i}" for i in range(6)]
    gpus.apply(fakedriver.claim("shared", ns, 1, gpus.device_class), *(gpu_pod(n, ns, claim="shared") for n in names))
    before = claim_requests(gpus.cluster)
    gpus.start()
    nodes = {gpus.bound(n) for n in names}
    devices, selector, users, finalizers = allocation_of(gpus.claim("shared"))
    # Both nodes have a free GPU and tie; the claim decides the node of every pod.
    assert len(nodes) == 1 and (selector, sorted(users), finalizers) == (on_node(nodes.pop()), names, [FINALIZER])
    assert len(devices) == 1
    writes = {k: n for k, n in (claim_requests(gpus.cluster) - before).items() if k.startswith("PUT") or "409" in k}
    assert writes == {"PUT 200": 1, "PUT status 200": 6}  # the finalizer, then six status writes
