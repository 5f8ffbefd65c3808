"""An extended resource backed by devices (DRAExtendedResource, GA in Kubernetes 1.37) on the real API server,
scheduled by ``outrigger serve --kubeconfig``: a DeviceClass names ``extendedResourceName``, no node advertises
the resource, and a pod asks for it in ``resources.limits``. What kube-scheduler 1.37 writes, checked through
the API: the pod bound to the node with the devices (once: one ``Scheduled`` event), the ResourceClaim made for
it (``<pod>-extended-resources-`` plus five characters, annotated ``resource.kubernetes.io/extended-resource-claim``,
controlled by the pod, one request per container named ``container-<index>-request-<index>``), its allocation
of the exact devices, reserved for the pod, kube-scheduler's finalizer, and the pod's
``status.extendedResourceClaimStatus``; a pod asking for more devices than any node has gets kube-scheduler's
FailedScheduling message and no claim is made; a PreBind failing after the claim was made has Unreserve delete
it (its finalizer taken off first), and the retry makes another.

An API server of 1.35 (DRAExtendedResource alpha, off) drops ``extendedResourceName`` from the class: no class
maps the resource there, and the pod is ``Insufficient`` on every node, as kube-scheduler 1.35 says."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kube_framework import get_json, node_manifest, wait_for
from test_kube_dra_scheduling import PROFILE, Gpus, allocation_of, describe_events, on_node
from test_kube_dra_scheduling import gpus as gpus  # the fixture

from framework.dra.extended import ANN_EXTENDED_RESOURCE_CLAIM
from framework.dra.store import FINALIZER
from pluginhost.examples.provisioner import FAIL, PROVISION
from tools import fakedriver
from tools.compare.throughput import claim_requests
from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube


@pytest.fixture
def mapped(gpus: Gpus) -> Iterator[tuple[str, bool]]:
    """A DeviceClass of the fake driver's GPUs mapping ``<namespace>.example.com/gpu``: the resource's name, and
    whether the API server kept the mapping (from 1.36)."""
    resource = f"{gpus.ns}.example.com/gpu"
    name = f"{gpus.device_class}-ext"
    device_class = fakedriver.device_class(name)
    device_class["spec"]["extendedResourceName"] = resource
    gpus.apply(device_class)
    try:
        yield resource, get_json(gpus.cluster, "deviceclass", name)["spec"].get("extendedResourceName") == resource
    finally:
        gpus.cluster.kubectl("delete", f"deviceclass/{name}", "--ignore-not-found")


def gpu_pod(name: str, namespace: str, resource: str, count: int,
            annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
            "spec": {"schedulerName": PROFILE, "containers": [
                {"name": "c", "image": "registry.k8s.io/pause:3.10",
                 "resources": {"requests": {"cpu": "100m"}, "limits": {resource: str(count)}}}]}}


def unschedulable(gpus: Gpus, pod: str, message: str) -> None:
    """The pod's one FailedScheduling event says ``message``, and no claim was made."""
    events = wait_for(lambda: gpus.events("FailedScheduling"), 60, "FailedScheduling")
    assert [(e["regarding"]["name"], e["note"]) for e in events] == [(pod, message)]
    assert claims_of(gpus.cluster, gpus.ns) == []
    assert "extendedResourceClaimStatus" not in gpus.pod(pod)["status"]


def insufficient(resource: str) -> str:
    return (f"0/2 nodes are available: 2 Insufficient {resource}. preemption: 0/2 nodes are available: "
            "2 Preemption is not helpful for scheduling.")


def claims_of(cluster: LocalCluster, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(cluster, "resourceclaims", "-n", namespace)["items"]
    return items


def test_a_pod_asking_for_an_extended_resource_gets_devices_in_a_claim_made_for_it(
        gpus: Gpus, mapped: tuple[str, bool]) -> None:
    ns, (resource, served) = gpus.ns, mapped
    gpus.apply(gpu_pod("train", ns, resource, 3))
    gpus.start()
    if not served:  # 1.35
        unschedulable(gpus, "train", insufficient(resource))
        return
    node = gpus.bound("train")
    pod = gpus.pod("train")
    uid = pod["metadata"]["uid"]
    # The container's requests by name: cpu, then the resource (the request's second index).
    request = f"container-0-request-{sorted(['cpu', resource]).index(resource)}"
    status = wait_for(lambda: gpus.pod("train")["status"].get("extendedResourceClaimStatus"), 30,
                      "the pod's extendedResourceClaimStatus")
    name = status["resourceClaimName"]
    assert status == {"requestMappings": [{"containerName": "c", "resourceName": resource, "requestName": request}],
                      "resourceClaimName": name}
    (claim,) = claims_of(gpus.cluster, ns)
    meta = claim["metadata"]
    assert (meta["name"], meta["generateName"], meta["annotations"], meta["ownerReferences"]) == (
        name, "train-extended-resources-", {ANN_EXTENDED_RESOURCE_CLAIM: "true"},
        [{"apiVersion": "v1", "kind": "Pod", "name": "train", "uid": uid, "controller": True}])
    assert len(name) == len("train-extended-resources-") + 5
    assert claim["spec"]["devices"]["requests"] == [{"name": request, "exactly": {
        "deviceClassName": f"{gpus.device_class}-ext", "allocationMode": "ExactCount", "count": 3}}]
    # Only b has three GPUs: the first three of its slice, pinned to b; reserved for the pod.
    assert node == gpus.b
    devices = [{"request": request, "driver": fakedriver.DRIVER, "pool": gpus.b, "device": d}
               for d in ("gpu-0", "gpu-1", "gpu-2")]
    assert allocation_of(claim) == (devices, on_node(gpus.b), ["train"], [FINALIZER])
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "train", "uid": uid}]
    assert describe_events(gpus.cluster, ns, "train") == [
        ["Normal", "Scheduled", PROFILE, f"Successfully assigned {ns}/train to {gpus.b}"]]


def test_a_pod_asking_for_more_devices_than_a_node_has_gets_kube_schedulers_message_and_no_claim(
        gpus: Gpus, mapped: tuple[str, bool]) -> None:
    resource, served = mapped
    gpus.apply(gpu_pod("huge", gpus.ns, resource, 5))
    gpus.start()
    # kube-scheduler v1.37.2: NodeResourcesFit leaves the resource to DynamicResources (no node advertises it),
    # whose Filter cannot allocate the claim on either node.
    message = ("0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes are available: "
               "2 Preemption is not helpful for scheduling.")
    unschedulable(gpus, "huge", message if served else insufficient(resource))


def test_a_prebind_failure_after_the_claim_was_made_deletes_it_and_the_retry_makes_another(
        gpus: Gpus, mapped: tuple[str, bool]) -> None:
    resource, served = mapped
    ns = gpus.ns
    gpus.apply(gpu_pod("once", ns, resource, 3, annotations={PROVISION: "scratch", FAIL: "once"}))
    before = claim_requests(gpus.cluster)
    gpus.start("after")  # the Provisioner's PreBind runs after DynamicResources' and fails once
    if not served:  # 1.35: no class maps the resource, no claim is made
        unschedulable(gpus, "once", insufficient(resource))
        return
    assert gpus.bound("once", timeout=90) == gpus.b
    name = wait_for(lambda: gpus.pod("once")["status"].get("extendedResourceClaimStatus"), 30,
                    "the pod's extendedResourceClaimStatus")["resourceClaimName"]
    (claim,) = claims_of(gpus.cluster, ns)
    assert claim["metadata"]["name"] == name
    assert allocation_of(claim)[2:] == (["once"], [FINALIZER])
    writes = {k: n for k, n in (claim_requests(gpus.cluster) - before).items() if not k.startswith(("GET", "LIST",
                                                                                                     "WATCH"))}
    # Two claims made (POST), each given the finalizer (PUT) and its allocation (PUT status); the first, at
    # Unreserve, its finalizer taken off (PUT) and deleted (DELETE).
    assert writes == {"POST 201": 2, "PUT 200": 3, "PUT status 200": 2, "DELETE 200": 1}


#: kube-scheduler v1.37.2's words (seen with it on this API server), at every retry.
NO_MAPPINGS = ('running PreBind plugin "DynamicResources": nil or empty request mappings, no update of pod '
               "{ns}/both ExtendedResourceClaimStatus")


def test_a_pod_with_its_own_claim_on_a_node_advertising_the_resource_fails_prebind_as_kube_scheduler(
        gpus: Gpus, mapped: tuple[str, bool]) -> None:
    """A pod with a claim of its own and the extended resource, on a node whose device plugin advertises the
    resource: kube-scheduler 1.37.2 makes the pod's extended claim there too, with no requests, allocates it
    (no devices), writes it, then fails PreBind (no request maps a container's resource), deletes it at
    Unreserve, and retries; the pod's own claim stays allocated. On 1.35 no class maps the resource: the
    node's device plugin serves it and the pod is bound."""
    resource, served = mapped
    ns = gpus.ns
    plug = gpus.a.removesuffix("-a") + "-plug"
    node = node_manifest(plug, labels={"kubernetes.io/hostname": plug})
    for key in ("capacity", "allocatable"):
        node["status"][key][resource] = "4"
    pod = gpu_pod("both", ns, resource, 1)
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": plug}
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "mine"}]
    pod["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    try:
        gpus.apply(node, fakedriver.gpu_slice(plug, 2), fakedriver.claim("mine", ns, 1, gpus.device_class), pod)
        before = claim_requests(gpus.cluster)
        gpus.start()
        if not served:  # 1.35
            assert gpus.bound("both") == plug
            return
        events = wait_for(lambda: gpus.events("FailedScheduling"), 60, "FailedScheduling")
        assert {e["note"] for e in events} == {NO_MAPPINGS.format(ns=ns)}
        condition = next(c for c in gpus.pod("both")["status"]["conditions"] if c["type"] == "PodScheduled")
        assert (condition["reason"], condition["message"]) == ("SchedulerError", NO_MAPPINGS.format(ns=ns))
        assert not gpus.pod("both")["spec"].get("nodeName")
        assert "extendedResourceClaimStatus" not in gpus.pod("both")["status"]
        # Per attempt: the claim made (POST), given the finalizer (PUT) and its empty allocation (PUT status),
        # then at Unreserve its finalizer taken off (PUT) and deleted (DELETE): between attempts, none is left.
        wait_for(lambda: not [c for c in claims_of(gpus.cluster, ns) if c["metadata"]["name"] != "mine"], 60,
                 "the claims made for the pod deleted")
        writes = claim_requests(gpus.cluster) - before
        assert writes["POST 201"] >= 1 and writes["PUT status 200"] >= 2 and writes["DELETE 200"] >= 1
        mine = gpus.claim("mine")
        assert [r["pool"] for r in mine["status"]["allocation"]["devices"]["results"]] == [plug]
    finally:
        gpus.cluster.kubectl("delete", f"resourceslice/{plug}-gpus", "--ignore-not-found")
