"""DeviceTaintRules on the real API server: ``kubectl apply`` a rule tainting one node's GPUs NoSchedule
and ``outrigger serve`` places GPU pods around them (a pod whose claim tolerates the taint may use them);
deleting the rule lets a pod waiting for a GPU schedule. An API server that does not serve the resource
in ``resource.k8s.io/v1`` (1.36 and 1.35; here a version off on every release) is said in one warning and
not watched."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
import yaml
from kube_framework import get_json, wait_for
from test_kube_dra_scheduling import Gpus, gpu_pod, gpus  # noqa: F401 (gpus is a fixture)

from framework.kube.client import ApiClient, KubeConfig
from framework.kube.dra import TaintRuleInformer, dra_converter
from tools import fakedriver
from tools.localcluster import LocalCluster, k8s_release

pytestmark = pytest.mark.kube

FULL = ("0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling.")


def taint_rule(name: str, pool: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": name},
            "spec": {"deviceSelector": {"driver": fakedriver.DRIVER, "pool": pool},
                     "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}}}


def devices_of(rig: Gpus, claim: str) -> list[tuple[str, str]]:
    status = rig.claim(claim).get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    return [(r["pool"], r["device"]) for r in results]


def test_a_rule_keeps_pods_off_the_devices_it_taints_until_it_is_deleted(gpus: Gpus) -> None:  # noqa: F811
    if k8s_release() in ("1.35", "1.36"):
        pytest.skip("DeviceTaintRules are served in resource.k8s.io/v1 from 1.37 "
                    "(test_an_api_server_that_does_not_serve_rules_is_said_once covers the others)")
    ns, rule = gpus.ns, f"{gpus.ns[:40].rstrip('-')}-maintenance"
    tolerant = fakedriver.claim("tolerant", ns, 3, gpus.device_class)
    tolerant["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] = [
        {"key": "example.com/maintenance", "operator": "Equal", "value": "true", "effect": "NoSchedule"}]
    # b's four GPUs under maintenance; a has two.
    gpus.cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(taint_rule(rule, gpus.b)))
    try:
        gpus.apply(fakedriver.claim("two", ns, 2, gpus.device_class), gpu_pod("two", ns, claim="two"))
        gpus.start()
        # Two GPUs fit on either node; b's are tainted: a's.
        assert (gpus.bound("two"), devices_of(gpus, "two")) == (gpus.a, [(gpus.a, "gpu-0"), (gpus.a, "gpu-1")])
        gpus.apply(tolerant, gpu_pod("tolerant", ns, claim="tolerant"))
        assert (gpus.bound("tolerant"), devices_of(gpus, "tolerant")) == (
            gpus.b, [(gpus.b, "gpu-0"), (gpus.b, "gpu-1"), (gpus.b, "gpu-2")])
        # a is full; b's last GPU is tainted: kube-scheduler's message, and no allocation.
        gpus.apply(fakedriver.claim("waiting", ns, 1, gpus.device_class), gpu_pod("waiting", ns, claim="waiting"))
        events = wait_for(lambda: [e for e in gpus.events("FailedScheduling") if e["regarding"]["name"] == "waiting"],
                          60, "FailedScheduling")
        assert [e["note"] for e in events] == [FULL]
        assert (gpus.pod("waiting")["spec"].get("nodeName"), devices_of(gpus, "waiting")) == (None, [])
    finally:
        gpus.cluster.kubectl("delete", f"devicetaintrule/{rule}", "--ignore-not-found")
    # The rule gone, b's last GPU is free to use: the waiting pod is tried again and gets it.
    assert (gpus.bound("waiting"), devices_of(gpus, "waiting")) == (gpus.b, [(gpus.b, "gpu-3")])
    assert get_json(gpus.cluster, "resourceclaim", "waiting", "-n", ns)["status"]["reservedFor"][0]["name"] == (
        "waiting")


def test_an_api_server_that_does_not_serve_rules_is_said_once(
        kube_cluster: LocalCluster, caplog: pytest.LogCaptureFixture) -> None:
    # v1alpha3 is off on every release: as 1.36 and 1.35 leave devicetaintrules out of v1.
    path = "/apis/resource.k8s.io/v1alpha3/devicetaintrules"

    async def main() -> tuple[bool | None, bool, int, int]:
        client = ApiClient(KubeConfig.from_file(kube_cluster.admin_kubeconfig))
        informer = TaintRuleInformer(client, path, "devicetaintrules", dra_converter("DeviceTaintRule"),
                                     handler=None)  # type: ignore[arg-type]
        try:
            await asyncio.wait_for(informer.run(), 30)
            return informer.served, informer.synced.is_set(), informer.lists, informer.watches
        finally:
            await client.close()

    with caplog.at_level(logging.WARNING, logger="outrigger.kube"):
        served, synced, lists, watches = asyncio.run(main())
    assert (served, synced, lists, watches) == (False, True, 0, 0)
    assert [r.getMessage() for r in caplog.records] == [
        "the API server does not serve devicetaintrules in resource.k8s.io/v1 (Kubernetes 1.37 does; 1.36 and "
        "1.35 only in versions off by default, which Outrigger does not read): DynamicResources sees the "
        "taints ResourceSlices give their devices, no DeviceTaintRule's"]
