"""Extended resources backed by devices (DRAExtendedResource, GA in kube-scheduler 1.37), scheduled through
the embedded store with the default profile: a pod asking ``example.com/gpu`` (a DeviceClass's
``extendedResourceName``) or ``deviceclass.resource.kubernetes.io/<class>`` on nodes that do not advertise it
gets devices of the class, in a claim made for it as kube-scheduler makes it; a node advertising the
resource judges it by NodeResourcesFit as usual; kube-scheduler's messages when neither can serve it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from framework.cli import main
from framework.config import load_config
from framework.dra.extended import (
    ANN_EXTENDED_RESOURCE_CLAIM,
    IMPLICIT_PREFIX,
    RequestMapping,
    class_for,
    requests_and_mappings,
)
from framework.dra.models import DeviceClass
from framework.dra.store import MemoryClaimWriter
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import Scheduler
from framework.service import pod_object
from pluginhost.manifest import finish_pod, parse_objects
from pluginhost.model import Container, Pod
from tests.test_dra_scheduling import scheduled

GPU_CLASS = "gpu.example.com"


def node(name: str, gpus: int | None = None) -> str:
    extra = f', example.com/gpu: "{gpus}"' if gpus is not None else ""
    return f"""
apiVersion: v1
kind: Node
metadata: {{name: {name}, labels: {{kubernetes.io/hostname: {name}}}}}
status: {{allocatable: {{cpu: "8", memory: 16Gi, pods: "20"{extra}}}}}
---"""


def devices(node_name: str, count: int) -> str:
    listed = ", ".join(f"{{name: gpu-{i}}}" for i in range(count))
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {node_name}-gpus}}
spec:
  driver: gpu.example.com
  nodeName: {node_name}
  pool: {{name: {node_name}, generation: 1, resourceSliceCount: 1}}
  devices: [{listed}]
---"""


def device_class(extended: str | None = "example.com/gpu") -> str:
    name = f"extendedResourceName: {extended}" if extended else ""
    return f"""
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {{name: {GPU_CLASS}}}
spec:
  selectors: [{{cel: {{expression: 'device.driver == "gpu.example.com"'}}}}]
  {name}
---"""


def gpu_pod(name: str, count: int, resource: str = "example.com/gpu") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers: [{{name: c, resources: {{limits: {{{resource}: "{count}"}}, requests: {{cpu: 100m}}}}}}]
"""


def made_claim(s: Scheduler, pod_name: str) -> tuple[str, list[str], dict[str, object]]:
    """The claim made for the pod: its name, its devices, and the pod's extendedResourceClaimStatus."""
    rec = s.get_pod("default", pod_name)
    assert rec is not None
    (claim,) = [c for c in s.cache.dra.claims.values() if c.owner == ("Pod", pod_name, rec.pod.uid)]
    assert claim.annotations == {ANN_EXTENDED_RESOURCE_CLAIM: "true"}
    assert claim.reserved_for == (("pods", pod_name, rec.pod.uid),)
    assert claim.raw["metadata"]["generateName"] == f"{pod_name}-extended-resources-"
    assert claim.allocation is not None
    # On the pod, as the API server keeps it, and in the v1 Pod `outrigger get pod -o yaml` prints.
    status = rec.pod.raw["status"]["extendedResourceClaimStatus"]
    assert pod_object(rec)["status"]["extendedResourceClaimStatus"] == status
    return claim.name, [f"{r.request}={r.pool}/{r.device}" for r in claim.allocation.results], status


NO_DEVICES = "0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are available: " \
             "1 Preemption is not helpful for scheduling."


@pytest.mark.parametrize(("resource", "extended"), [
    pytest.param("example.com/gpu", "example.com/gpu", id="explicit-extendedResourceName"),
    pytest.param(IMPLICIT_PREFIX + GPU_CLASS, None, id="implicit-class-name"),
])
def test_a_pod_gets_devices_for_an_extended_resource_no_node_advertises(resource: str, extended: str | None) -> None:
    s, result = scheduled(node("cpu-only") + node("gpu-node") + devices("gpu-node", 3) + device_class(extended),
                          gpu_pod("train", 2, resource))
    assert result == {"train": ("Bound", "gpu-node", "")}
    name, got, status = made_claim(s, "train")
    assert got == ["container-0-request-1=gpu-node/gpu-0", "container-0-request-1=gpu-node/gpu-1"]
    assert status == {"requestMappings": [{"containerName": "c", "resourceName": resource,
                                           "requestName": "container-0-request-1"}],
                      "resourceClaimName": name}
    assert name.startswith("train-extended-resources-") and len(name) == len("train-extended-resources-") + 5


@pytest.mark.parametrize(("cluster", "want"), [
    pytest.param(node("gpu-node") + devices("gpu-node", 1), {"p": ("Unschedulable", "", NO_DEVICES)},
                 id="too-few-devices"),
    pytest.param(node("plugin-node", gpus=1) + devices("plugin-node", 4),
                 {"p": ("Unschedulable", "", "0/1 nodes are available: 1 Insufficient example.com/gpu. preemption: "
                        "0/1 nodes are available: 1 Preemption is not helpful for scheduling.")},
                 id="advertised-by-a-device-plugin-judged-by-fit"),
    pytest.param(node("plugin-node", gpus=2), {"p": ("Bound", "plugin-node", "")}, id="a-device-plugin-serves-it"),
])
def test_messages_with_and_without_the_resource_in_allocatable(cluster: str, want: dict[str, object]) -> None:
    s, result = scheduled(cluster + device_class(), gpu_pod("p", 2))
    assert result == want
    assert [c.name for c in s.cache.dra.claims.values()] == []


def test_a_resource_no_class_maps_is_insufficient_as_before() -> None:
    _, result = scheduled(node("gpu-node") + devices("gpu-node", 2) + device_class(), gpu_pod("p", 1, "other.com/x"))
    assert result == {"p": ("Unschedulable", "", "0/1 nodes are available: 1 Insufficient other.com/x. preemption: "
                            "0/1 nodes are available: 1 Preemption is not helpful for scheduling.")}


def test_devices_taken_by_one_pod_are_not_given_to_the_next() -> None:
    s, result = scheduled(node("gpu-node") + devices("gpu-node", 3) + device_class(),
                          gpu_pod("a", 2), gpu_pod("b", 2))
    assert result == {"a": ("Bound", "gpu-node", ""), "b": ("Unschedulable", "", NO_DEVICES)}
    assert made_claim(s, "a")[1] == ["container-0-request-1=gpu-node/gpu-0", "container-0-request-1=gpu-node/gpu-1"]


def _pod(containers: list[Container], init: list[Container]) -> Pod:
    return finish_pod(Pod("p", uid="u", containers=containers, init_containers=init))


R = "example.com/gpu"


@pytest.mark.parametrize(("containers", "init", "requests", "mappings"), [
    pytest.param([Container("a", limits={R: 2}), Container("b", limits={"cpu": 100, R: 1})], [],
                 [("container-0-request-0", 2), ("container-1-request-1", 1)],
                 [("a", "container-0-request-0"), ("b", "container-1-request-1")], id="one-request-per-container"),
    pytest.param([Container("a", limits={R: 2}), Container("b", limits={R: 1})],
                 [Container("i1", limits={R: 3}), Container("i2", limits={R: 1})],
                 [("container-2-request-0", 2), ("container-3-request-0", 1)],
                 [("a", "container-2-request-0"), ("b", "container-3-request-0"), ("i1", "container-2-request-0"),
                  ("i1", "container-3-request-0"), ("i2", "container-2-request-0")],
                 id="init-containers-reuse-the-containers-requests"),
    pytest.param([Container("a", limits={R: 1})], [Container("i1", limits={R: 2}), Container("i2", limits={R: 3})],
                 [("container-1-request-0", 2), ("container-2-request-0", 1)],
                 [("a", "container-2-request-0"), ("i1", "container-2-request-0"), ("i1", "container-1-request-0"),
                  ("i2", "container-2-request-0"), ("i2", "container-1-request-0")],
                 id="init-containers-share-the-largest-extra-request"),
    pytest.param([Container("a", limits={R: 1})], [Container("s", limits={R: 2}, restart_policy="Always")],
                 [("container-0-request-0", 2), ("container-1-request-0", 1)],
                 [("s", "container-0-request-0"), ("a", "container-1-request-0")], id="a-sidecar-has-its-own"),
])
def test_requests_and_mappings_follow_kube_scheduler(containers: list[Container], init: list[Container],
                                                      requests: list[tuple[str, int]],
                                                      mappings: list[tuple[str, str]]) -> None:
    classes = {GPU_CLASS: DeviceClass(GPU_CLASS, extended_resource_name=R)}
    got, maps = requests_and_mappings(_pod(containers, init), [R], classes)
    assert [(r.name, r.exactly.count if r.exactly else 0) for r in got] == requests
    assert all(r.exactly is not None and r.exactly.device_class == GPU_CLASS for r in got)
    assert [(m.container, m.request) for m in maps] == mappings
    assert all(isinstance(m, RequestMapping) and m.resource == R for m in maps)


@pytest.mark.parametrize(("classes", "resource", "want"), [
    pytest.param([("a", "example.com/gpu", "2026-01-01T00:00:00Z"), ("b", "example.com/gpu", "2026-02-01T00:00:00Z")],
                 "example.com/gpu", "b", id="the-newest-class-wins"),
    pytest.param([("b", "example.com/gpu", "2026-01-01T00:00:00Z"), ("a", "example.com/gpu", "2026-01-01T00:00:00Z")],
                 "example.com/gpu", "a", id="then-the-first-by-name"),
    pytest.param([("a", "", "")], IMPLICIT_PREFIX + "a", "a", id="implicit-name"),
    pytest.param([("a", "", "")], "example.com/gpu", None, id="unmapped"),
])
def test_which_class_a_resource_maps_to(classes: list[tuple[str, str, str]], resource: str, want: str | None) -> None:
    table = {n: DeviceClass(n, extended_resource_name=e, creation_timestamp=t) for n, e, t in classes}
    found = class_for(table, resource)
    assert (found.name if found is not None else None) == want


def run(*docs: str, setup: Callable[[Scheduler], None], names: list[str], until: str = "Bound",
        config: str = "") -> Scheduler:
    """Schedule ``docs`` in the embedded store (with the KubeSchedulerConfiguration ``config``, the default
    one when empty), after ``setup``, until every pod of ``names`` is ``until``."""
    async def main_() -> Scheduler:
        registry = build_registry()
        loaded = load_config(config, registry.points(), "test.yaml") if config else default_scheduler_config(registry)
        s = Scheduler(loaded, registry, seed=1)
        setup(s)
        task = asyncio.get_running_loop().create_task(s.run())
        try:
            for doc in docs:
                await s.apply(parse_objects(doc))
            for _ in range(1000):  # at most 20 s
                await asyncio.sleep(0.02)
                if all((r := s.get_pod("default", n)) is not None and r.phase == until for n in names):
                    return s
            raise AssertionError(f"not {until}: {[(n, s.get_pod('default', n)) for n in names]}")
        finally:
            await s.stop()
            task.cancel()

    return asyncio.run(asyncio.wait_for(main_(), 30))


CLUSTER = node("gpu-node") + devices("gpu-node", 2) + device_class()


def test_a_claim_made_in_prebind_is_deleted_when_the_binding_cycle_fails_then_made_anew() -> None:
    created: list[str] = []
    failures = [RuntimeError("the API server refused it")]

    def setup(s: Scheduler) -> None:
        writer = s.cache.dra.writer
        assert isinstance(writer, MemoryClaimWriter)
        create, patch = writer.create_claim, writer.patch_pod_status

        async def counting(manifest: Any) -> Any:
            made = await create(manifest)
            created.append(made.name)
            return made

        async def failing_once(pod: Pod, body: Any) -> None:
            if failures:
                raise failures.pop()
            await patch(pod, body)

        writer.create_claim, writer.patch_pod_status = counting, failing_once  # type: ignore[method-assign,assignment]

    s = run(CLUSTER, gpu_pod("train", 2), setup=setup, names=["train"])
    name, got, _ = made_claim(s, "train")
    # The first claim went with the failed PreBind (Unreserve deleted it); the second is the pod's.
    assert len(created) == 2 and created[1] == name and s.cache.dra.claims.get(f"default/{created[0]}") is None
    assert got == ["container-0-request-1=gpu-node/gpu-0", "container-0-request-1=gpu-node/gpu-1"]
    # Nothing else holds the devices: with the pod gone (its claim with it), none is in use.
    s.delete_pod("default", "train")
    assert s.cache.dra.claims == {} and s.cache.dra.allocated_state() == (frozenset(), {})


STALE = """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: train-extended-resources-old12
  annotations: {resource.kubernetes.io/extended-resource-claim: "true"}
  ownerReferences: [{apiVersion: v1, kind: Pod, name: train, uid: train-uid, controller: true}]
spec:
  devices:
    requests:
    - {name: container-0-request-1, exactly: {deviceClassName: gpu.example.com, count: 2}}
status:
  allocation:
    devices:
      results:
      - {request: container-0-request-1, driver: gpu.example.com, pool: gpu-node, device: gpu-0}
      - {request: container-0-request-1, driver: gpu.example.com, pool: gpu-node, device: gpu-1}
  reservedFor: [{resource: pods, name: train, uid: train-uid}]
"""


def test_a_claim_left_by_an_earlier_attempt_is_deleted_in_postfilter_then_the_pod_gets_a_new_one() -> None:
    seen: list[str] = []

    def setup(s: Scheduler) -> None:
        original = s.cache.dra.writer.delete_claim  # type: ignore[attr-defined]

        async def noting(claim: Any) -> None:
            seen.append(claim.name)
            await original(claim)

        s.cache.dra.writer.delete_claim = noting  # type: ignore[attr-defined]

    the_pod = gpu_pod("train", 2).replace("metadata: {name: train}", "metadata: {name: train, uid: train-uid}")
    s = run(CLUSTER, STALE, the_pod, setup=setup, names=["train"])
    name, got, _ = made_claim(s, "train")
    assert seen == ["train-extended-resources-old12"] and name != "train-extended-resources-old12"
    assert got == ["container-0-request-1=gpu-node/gpu-0", "container-0-request-1=gpu-node/gpu-1"]


def test_a_device_plugin_node_takes_the_pod_by_fit_and_no_claim_is_made() -> None:
    # plugin-node advertises 4 (a device plugin's), gpu-node has 2 devices: 3 fit only on plugin-node.
    s, result = scheduled(node("plugin-node", gpus=4) + node("gpu-node") + devices("gpu-node", 2) + device_class(),
                          gpu_pod("p", 3))
    assert result == {"p": ("Bound", "plugin-node", "")}
    assert list(s.cache.dra.claims) == []


def test_explain_shows_the_devices_for_the_extended_resource(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cluster.yaml").write_text(node("cpu-only", gpus=0) + node("gpu-node") + devices("gpu-node", 2)
                                           + device_class().rstrip("-\n"))
    (tmp_path / "pod.yaml").write_text(gpu_pod("train", 1))
    args = ["explain", "--cluster", str(tmp_path / "cluster.yaml"), "-f", str(tmp_path / "pod.yaml"), "-o", "json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["selected"] == "gpu-node"
    assert result["devices"] == [{"claim": "default/<extended-resources>", "request": "container-0-request-1",
                                  "driver": "gpu.example.com", "pool": "gpu-node", "device": "gpu-0",
                                  "allocated": False}]
    # cpu-only lists the resource at 0: its devices are asked (it has none).
    assert result["nodes"]["cpu-only"]["filter"] == {"code": "UnschedulableAndUnresolvable",
                                                     "plugin": "DynamicResources",
                                                     "reasons": ["cannot allocate all claims"]}


NO_FIT = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled: [{name: NodeResourcesFit}]
"""


def test_a_resource_neither_advertised_nor_mapped_is_dynamic_resources_cannot_fit_resource() -> None:
    """Without NodeResourcesFit before it, DynamicResources' own word for a pod that also asks for a resource
    the node does not list and no class maps."""
    both = gpu_pod("p", 1).replace('limits: {example.com/gpu: "1"}', 'limits: {example.com/gpu: "1", other.com/x: "1"}')
    s = run(CLUSTER, both, setup=lambda s: None, names=["p"], until="Unschedulable", config=NO_FIT)
    rec = s.get_pod("default", "p")
    assert rec is not None and rec.last_status is not None
    assert rec.last_status.message() == ("0/1 nodes are available: 1 cannot fit resource. preemption: 0/1 nodes are "
                                         "available: 1 Preemption is not helpful for scheduling.")


OWN_CLAIM = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: other.example.com}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: mine, uid: mine-uid}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: other.example.com}}]
---"""
BOTH = """
apiVersion: v1
kind: Pod
metadata: {name: both, uid: both-uid}
spec:
  resourceClaims: [{name: gpu, resourceClaimName: mine}]
  containers: [{name: c, resources: {claims: [{name: gpu}], limits: {example.com/gpu: "1"}}}]
"""
#: kube-scheduler 1.37.2's word for it, seen on the real API server (its FailedScheduling events and the pod's
#: PodScheduled condition, again at every retry).
NO_MAPPINGS = ('running PreBind plugin "DynamicResources": nil or empty request mappings, no update of pod '
               "default/both ExtendedResourceClaimStatus")


def test_a_pod_with_its_own_claims_on_a_node_advertising_the_resource_fails_prebind_as_kube_scheduler() -> None:
    """kube-scheduler 1.37.2 takes the pod's extended claim along with its own claims on a node advertising the
    extended resource: with no requests, allocated (nothing), created and written in PreBind, which then
    fails as the claim maps no container's resource; Unreserve deletes the claim and takes the pod out of its
    own claim's reservedFor (the claim stays allocated). The first attempt, write by write."""
    created: list[dict[str, Any]] = []
    written: list[tuple[str, dict[str, Any]]] = []
    deleted: list[str] = []

    def setup(s: Scheduler) -> None:
        writer = s.cache.dra.writer
        assert isinstance(writer, MemoryClaimWriter)
        create, write, delete = writer.create_claim, writer.write_claim_status, writer.delete_claim

        async def creating(manifest: Any) -> Any:
            created.append(json.loads(json.dumps(manifest)))
            return await create(manifest)

        async def writing(claim: Any, status: Any) -> Any:
            written.append((claim.name, json.loads(json.dumps(status))))
            return await write(claim, status)

        async def deleting(claim: Any) -> None:
            deleted.append(claim.name)
            await delete(claim)

        writer.create_claim, writer.write_claim_status = creating, writing  # type: ignore[method-assign]
        writer.delete_claim = deleting  # type: ignore[method-assign]

    async def main_() -> tuple[Scheduler, str]:
        s = Scheduler(default_scheduler_config(build_registry()), build_registry(), seed=1)
        setup(s)
        task = asyncio.get_running_loop().create_task(s.run())
        try:
            await s.apply(parse_objects(node("plugin-node", gpus=2) + devices("plugin-node", 2) + device_class()
                                        + OWN_CLAIM + BOTH))
            for _ in range(1000):  # at most 20 s
                await asyncio.sleep(0.02)
                rec = s.get_pod("default", "both")
                if rec is not None and rec.last_status is not None and not rec.last_status.ok:
                    return s, rec.last_status.message()
            raise AssertionError("no failed attempt")
        finally:
            await s.stop()
            task.cancel()

    s, message = asyncio.run(asyncio.wait_for(main_(), 30))
    assert message == NO_MAPPINGS
    rec = s.get_pod("default", "both")
    assert rec is not None and not rec.pod.node_name
    first = created[0]
    assert first["metadata"]["generateName"] == "both-extended-resources-"
    assert first["spec"] == {"devices": {}}
    made = deleted[0]
    assert made.startswith("both-extended-resources-")
    # The pod's own claim is written first (allocation and reservation), then the one made for it: an
    # allocation of no devices, reserved for the pod.
    assert [name for name, _ in written[:2]] == ["mine", made]
    allocation = written[1][1]["allocation"]
    assert isinstance(allocation.pop("allocationTimestamp"), str) and allocation == {"devices": {"results": []}}
    assert written[1][1]["reservedFor"] == [{"resource": "pods", "name": "both", "uid": "both-uid"}]
    mine = s.cache.dra.claims["default/mine"]
    assert mine.allocation is not None and [r.device for r in mine.allocation.results] == ["gpu-0"]


def test_the_extended_resource_claim_status_is_on_the_pod_and_stays_when_its_manifest_is_applied_again() -> None:
    async def main_() -> tuple[Scheduler, list[str]]:
        s = Scheduler(default_scheduler_config(build_registry()), build_registry(), seed=1)
        task = asyncio.get_running_loop().create_task(s.run())
        try:
            await s.apply(parse_objects(CLUSTER + gpu_pod("train", 2)))
            for _ in range(1000):  # at most 20 s
                await asyncio.sleep(0.02)
                if (rec := s.get_pod("default", "train")) is not None and rec.phase == "Bound":
                    break
            again = await s.apply(parse_objects(gpu_pod("train", 2)))
            return s, [r.action for r in again]
        finally:
            await s.stop()
            task.cancel()

    s, actions = asyncio.run(asyncio.wait_for(main_(), 30))
    assert actions == ["unchanged"]
    name, _, status = made_claim(s, "train")
    assert status["resourceClaimName"] == name
    rec = s.get_pod("default", "train")
    assert rec is not None and rec.pod.node_name == "gpu-node"
    served = pod_object(rec)
    assert served["status"] == {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
                                "extendedResourceClaimStatus": status}
