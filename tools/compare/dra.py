"""Devices: pods that claim devices of a fake driver (:mod:`framework.cli.demodevices`), placed by each
scheduler on a fresh copy of one cluster, and what each decided compared pod by pod.

The cluster (:func:`dra_cluster`): ``dra-a`` and ``dra-b`` with two ``a100`` GPUs each, ``dra-b``'s under a
DeviceTaintRule (NoSchedule), ``dra-c`` with seven ``h100``, ``dra-d`` with none; a DeviceClass per model
(a CEL selector on driver and model). The first two ``a100`` pods cannot use ``dra-b``'s GPUs, the next two
tolerate the taint and get them. The pods
(:data:`DRA_PODS`) claim through ResourceClaimTemplates (kube-controller-manager's resourceclaim
controller runs on both clusters and makes their claims), through a ResourceClaim three pods share, with a
CEL selector of their own, through a prioritized list (``firstAvailable``), through an extended resource
the ``h100`` class maps (``example.com/h100``: DRAExtendedResource, a claim the scheduler makes), and some
cannot get devices (all taken, more than a node has, a class that does not exist). They are created
**one at a time**, each once the one before is bound or unschedulable, so the allocator's choices follow
from the same state on both sides.

Compared: every pod bound or not; the node and the devices of each pod whose node the devices decide
(``fixed``); the devices allocated on each node (every device name: the cluster ends full where pods go,
so the set is determined even where the pods tie between nodes); each unschedulable pod's
``FailedScheduling`` event and ``PodScheduled`` message, verbatim.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from framework.cli import demodevices

from ..localcluster import LocalCluster
from ..workloads import DRA_CONTROLLERS, BoundWatch, create_objects, node_manifest
from .schedulers import KUBE, OUTRIGGER, SCHEDULER_NAME, SCHEDULERS, cluster_api, create_pod, fresh_cluster

__all__ = ["DRA_PODS", "DraPod", "DraReport", "DraSpec", "dra_cluster", "run_dra"]

NS = "default"
A100, H100 = "gpu-a100", "gpu-h100"


@dataclass(frozen=True)
class DraSpec:
    """One pod of the comparison: its claim (from a template or a claim), whether the devices decide its
    node (``fixed``), and whether it can get devices at all."""

    name: str
    template: str = ""
    claim: str = ""
    fixed: bool = False
    fits: bool = True
    #: How many ``example.com/h100`` the pod asks for in its limits (no claim of its own then).
    extended: int = 0


#: In the order they are created.
DRA_PODS: tuple[DraSpec, ...] = (
    # dra-a first (dra-b's GPUs are tainted), then dra-b by pods tolerating the taint.
    *(DraSpec(f"a100-{i}", template="one-a100", fixed=True) for i in range(2)),
    *(DraSpec(f"a100-{i}", template="one-a100-tolerating", fixed=True) for i in range(2, 4)),
    *(DraSpec(f"shared-{i}", claim="shared-h100", fixed=True) for i in range(3)),
    DraSpec("h100-pair", template="two-h100", fixed=True),
    DraSpec("h100-index-3", template="h100-index-3", fixed=True),
    DraSpec("first-available", template="h100-or-a100", fixed=True),
    DraSpec("h100-extended", extended=2, fixed=True),
    DraSpec("a100-full", template="one-a100", fits=False),
    DraSpec("a100-three", template="three-a100", fits=False),
    DraSpec("no-such-class", template="missing-class", fits=False),
    DraSpec("first-available-full", template="h100-or-a100", fits=False),
    DraSpec("h100-extended-full", extended=1, fits=False),
)
#: The extended resource the ``h100`` class maps.
H100_RESOURCE = "example.com/h100"
#: The taint the DeviceTaintRule puts on ``dra-b``'s GPUs.
MAINTENANCE = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def _template(name: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    doc = demodevices.claim_template(name, NS)
    doc["spec"]["spec"]["devices"]["requests"] = requests
    return doc


def dra_cluster() -> list[dict[str, Any]]:
    """The comparison's objects besides nodes: slices, classes, templates, the shared claim."""
    index3 = {"name": "gpu", "exactly": {"deviceClassName": H100, "selectors": [
        {"cel": {"expression": f'device.attributes["{demodevices.DRIVER}"].index == 3'}}]}}
    either = {"name": "gpu", "firstAvailable": [{"name": "h100", "deviceClassName": H100},
                                                {"name": "a100", "deviceClassName": A100}]}
    tolerating = {"name": "gpu", "exactly": {"deviceClassName": A100, "tolerations": [
        {"key": MAINTENANCE["key"], "operator": "Equal", "value": MAINTENANCE["value"], "effect": "NoSchedule"}]}}
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "dra-b-maintenance"},
            "spec": {"deviceSelector": {"driver": demodevices.DRIVER, "pool": "dra-b"}, "taint": MAINTENANCE}}
    h100 = demodevices.device_class(H100, "h100")
    h100["spec"]["extendedResourceName"] = H100_RESOURCE
    return [
        rule, demodevices.device_class(A100, "a100"), h100,
        demodevices.gpu_slice("dra-a", 2), demodevices.gpu_slice("dra-b", 2),
        demodevices.gpu_slice("dra-c", 7, model="h100", memory="80Gi"),
        demodevices.claim_template("one-a100", NS, 1, A100), demodevices.claim_template("two-h100", NS, 2, H100),
        demodevices.claim_template("three-a100", NS, 3, A100),
        demodevices.claim_template("missing-class", NS, 1, "no-such-class"),
        _template("h100-index-3", [index3]), _template("h100-or-a100", [either]),
        _template("one-a100-tolerating", [tolerating]),
        demodevices.claim("shared-h100", NS, 1, H100),
    ]


def _pod(spec: DraSpec) -> dict[str, Any]:
    if spec.extended:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": spec.name, "namespace": NS}, "spec": {
            "schedulerName": SCHEDULER_NAME, "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10.1",
                                                             "resources": {"limits": {H100_RESOURCE: spec.extended}}}]}}
    source = {"resourceClaimTemplateName": spec.template} if spec.template else {"resourceClaimName": spec.claim}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": spec.name, "namespace": NS}, "spec": {
        "schedulerName": SCHEDULER_NAME, "resourceClaims": [{"name": "gpu", **source}],
        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10.1",
                        "resources": {"claims": [{"name": "gpu"}]}}]}}


@dataclass
class Outcome:
    """What one scheduler decided for one pod."""

    node: str = ""
    #: ``pool/device for request`` of each device its claim was allocated, sorted (a prioritized list's
    #: request names the subrequest chosen: ``gpu/h100``).
    devices: list[str] = field(default_factory=list)
    event: str = ""
    condition: str = ""


@dataclass
class DraPod:
    pod: str
    fixed: bool
    kube: Outcome
    outrigger: Outcome

    @property
    def agrees(self) -> bool:
        k, o = self.kube, self.outrigger
        if bool(k.node) != bool(o.node) or (k.event, k.condition) != (o.event, o.condition):
            return False
        return not self.fixed or (k.node, k.devices) == (o.node, o.devices)


@dataclass
class DraReport:
    pods: list[DraPod] = field(default_factory=list)
    #: node -> its allocated devices, sorted, per scheduler.
    kube_devices: dict[str, list[str]] = field(default_factory=dict)
    outrigger_devices: dict[str, list[str]] = field(default_factory=dict)
    error: str = ""

    @property
    def agrees(self) -> bool:
        return (not self.error and bool(self.pods) and all(p.agrees for p in self.pods)
                and self.kube_devices == self.outrigger_devices)


async def _place(cluster: LocalCluster, timeout: float) -> dict[str, Outcome]:
    api = cluster_api(cluster)
    watch = BoundWatch(api, NS, all_pods=True)
    try:
        for x in "abcd":
            await api.request("POST", "/api/v1/nodes", verb="create", resource="nodes",
                              body=node_manifest(f"dra-{x}"))
        await create_objects(api, dra_cluster(), 1)
        await watch.start()
        for i, spec in enumerate(DRA_PODS):
            await create_pod(api, _pod(spec))
            if not await watch.settle(i + 1, time.monotonic() + timeout):
                raise TimeoutError(f"pod {spec.name} neither bound nor unschedulable after {timeout:.0f}s")
        return await _outcomes(api, watch)
    finally:
        await watch.stop()
        await api.close()


async def _outcomes(api: Any, watch: BoundWatch) -> dict[str, Outcome]:
    pods = (await api.request("GET", f"/api/v1/namespaces/{NS}/pods", verb="list", resource="pods"))["items"]
    claims = (await api.request("GET", f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims", verb="list",
                                resource="resourceclaims"))["items"]
    events = (await api.request("GET", f"/apis/events.k8s.io/v1/namespaces/{NS}/events", verb="list",
                                resource="events"))["items"]
    by_claim = {c["metadata"]["name"]: c for c in claims}
    out: dict[str, Outcome] = {}
    for pod in pods:
        name = pod["metadata"]["name"]
        status = pod.get("status") or {}
        made = {s["name"]: s.get("resourceClaimName") for s in status.get("resourceClaimStatuses") or ()}
        # A pod asking for an extended resource has the claim the scheduler made for it.
        made["gpu"] = made.get("gpu") or (status.get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
        source = (pod["spec"].get("resourceClaims") or [{}])[0]
        claim = by_claim.get(source.get("resourceClaimName") or made.get("gpu") or "") or {}
        results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or ())
        node = (pod.get("spec") or {}).get("nodeName") or ""
        devices = sorted(f"{r['pool']}/{r['device']} for {r['request']}" for r in results) if node else []
        out[name] = Outcome(node, devices, condition="" if node else watch.unschedulable.get(name, ""))
    latest: dict[str, tuple[str, str]] = {}
    for ev in events:
        name = str((ev.get("regarding") or {}).get("name") or "")
        stamp = str(ev.get("eventTime") or (ev.get("series") or {}).get("lastObservedTime") or "")
        if ev.get("reason") == "FailedScheduling" and name in out and stamp >= latest.get(name, ("", ""))[0]:
            latest[name] = (stamp, str(ev.get("note") or ""))
    for name, (_, note) in latest.items():
        if not out[name].node:
            out[name].event = note
    return out


def _devices_by_node(outcomes: dict[str, Outcome]) -> dict[str, list[str]]:
    """Every allocated device once (a shared claim's pods name the same), by node."""
    seen = {d.split(" ", 1)[0] for o in outcomes.values() for d in o.devices}
    nodes: dict[str, list[str]] = {}
    for device in sorted(seen):
        nodes.setdefault(device.split("/", 1)[0], []).append(device)
    return nodes


def run_dra(workdir: Path, bin_dir: Path, timeout: float = 60.0) -> DraReport:
    """Each scheduler on a fresh copy of the devices' cluster (with the resourceclaim controller); what
    each decided, pod by pod."""
    report = DraReport()
    got: dict[str, dict[str, Outcome]] = {}
    try:
        for name, cls in SCHEDULERS.items():
            with fresh_cluster(workdir / name, bin_dir) as cluster:
                cluster.start_controller_manager(DRA_CONTROLLERS)
                with cls(cluster, workdir / name):
                    got[name] = asyncio.run(_place(cluster, timeout))
    except Exception as exc:  # reported; the other comparisons go on
        report.error = f"{type(exc).__name__}: {exc}"
    for spec in DRA_PODS:
        report.pods.append(DraPod(spec.name, spec.fixed, got.get(KUBE, {}).get(spec.name, Outcome()),
                                  got.get(OUTRIGGER, {}).get(spec.name, Outcome())))
    report.kube_devices = _devices_by_node(got.get(KUBE, {}))
    report.outrigger_devices = _devices_by_node(got.get(OUTRIGGER, {}))
    return report
