"""GPU pods scheduled through the embedded store with the default profile, as kube-scheduler v1.37.2 and
kube-controller-manager's resourceclaim controller would place them: claims named directly and made
from templates, a claim shared by two pods, a ``firstAvailable`` request, a cluster without devices
left (kube-scheduler's FailedScheduling message), devices freed by a deleted pod, and ``outrigger
explain`` showing the devices a pod would get (JSON and table)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from framework.cli import main
from framework.dra.embedded import ANN_POD_CLAIM_NAME, claim_name_prefix
from framework.profiles import build_registry, default_scheduler_config
from framework.scheduler import Scheduler
from pluginhost.manifest import ManifestError, parse_objects

NODES = """
apiVersion: v1
kind: Node
metadata: {name: cpu-only, labels: {kubernetes.io/hostname: cpu-only}}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}
---
apiVersion: v1
kind: Node
metadata: {name: gpu-node, labels: {kubernetes.io/hostname: gpu-node}}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}
"""
DEVICES = """
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-node-gpus}
spec:
  driver: gpu.example.com
  nodeName: gpu-node
  pool: {name: gpu-node, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {model: {string: a100}}}
  - {name: gpu-1, attributes: {model: {string: a100}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  metadata: {labels: {team: ml}}
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
"""


def claim(name: str, request: str = "{name: gpu, exactly: {deviceClassName: gpu.example.com}}") -> str:
    return f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: {name}}}
spec: {{devices: {{requests: [{request}]}}}}
"""


def pod(name: str, entry: str) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers: [{{name: c, resources: {{requests: {{cpu: 100m}}}}}}]
  resourceClaims: [{entry}]
"""


def template_pod(name: str) -> str:
    return pod(name, "{name: gpu, resourceClaimTemplateName: one-gpu}")


def claim_pod(name: str, claim_name: str) -> str:
    return pod(name, f"{{name: gpu, resourceClaimName: {claim_name}}}")


Check = Callable[[Scheduler], Awaitable[None]]


async def settle(s: Scheduler, names: list[str]) -> dict[str, tuple[str, str, str]]:
    """Each pod's (phase or queue, node, message) once none is being scheduled (at most 10 s)."""
    out: dict[str, tuple[str, str, str]] = {}
    for _ in range(500):
        await asyncio.sleep(0.02)
        out = {}
        for name in names:
            rec = s.get_pod("default", name)
            assert rec is not None
            where = s.queue_of(rec.pod.uid)
            message = rec.last_status.message() if rec.last_status is not None and rec.phase != "Bound" else ""
            if where == "gated":
                info = s.queue.info(rec.pod.uid)
                message = info.last_status.message() if info and info.last_status else ""
            out[name] = (rec.phase if where != "gated" else "Gated", rec.pod.node_name, message)
        if all(v[0] in ("Bound", "Unschedulable", "Gated") for v in out.values()):
            return out
    return out


def scheduled(*docs: str, then: Check | None = None) -> Any:
    async def main_() -> Any:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry, seed=1)
        task = asyncio.get_running_loop().create_task(s.run())
        try:
            for doc in docs:
                await s.apply(parse_objects(doc))
            names = [o.name for d in docs for o in parse_objects(d) if type(o).__name__ == "Pod"]
            result = await settle(s, names)
            if then is not None:
                await then(s)
            return s, result
        finally:
            await s.stop()
            task.cancel()

    return asyncio.run(asyncio.wait_for(main_(), 30))


def devices(s: Scheduler, name: str) -> list[str]:
    c = s.cache.dra.claim("default", name)
    assert c is not None and c.allocation is not None
    return [f"{r.request}={r.device}" for r in c.allocation.results]


def test_a_pod_with_a_claim_gets_a_device_on_the_node_that_has_it() -> None:
    s, result = scheduled(NODES, DEVICES, claim("gpu"), claim_pod("train", "gpu"))
    assert result == {"train": ("Bound", "gpu-node", "")}
    c = s.cache.dra.claim("default", "gpu")
    assert c is not None
    pod_uid = s.get_pod("default", "train").pod.uid  # type: ignore[union-attr]
    assert (devices(s, "gpu"), c.reserved_for) == (["gpu=gpu-0"], (("pods", "train", pod_uid),))
    assert c.allocation is not None and c.allocation.to_dict()["nodeSelector"] == {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node"]}]}]}


def test_a_template_claim_is_made_as_the_claim_controller_makes_it() -> None:
    s, result = scheduled(NODES, DEVICES, template_pod("train"))
    assert result == {"train": ("Bound", "gpu-node", "")}
    rec = s.get_pod("default", "train")
    assert rec is not None
    (made,) = rec.pod.resource_claim_statuses.values()
    assert made.startswith(claim_name_prefix("train", "gpu")) and len(made) == len("train-gpu-") + 5
    assert rec.pod.raw["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": made}]
    c = s.cache.dra.claim("default", made)
    assert c is not None
    meta = c.raw["metadata"]
    assert (meta["generateName"], meta["labels"], c.annotations) == ("train-gpu-", {"team": "ml"},
                                                                      {ANN_POD_CLAIM_NAME: "gpu"})
    assert c.owner == ("Pod", "train", rec.pod.uid)
    assert devices(s, made) == ["gpu=gpu-0"]


@pytest.mark.parametrize(("pod_name", "entry", "want"), [
    ("train", "gpu", "train-gpu-"),
    ("p" * 40, "c" * 30, "p" * 31 + "-" + "c" * 23),  # 72 characters: 40*57//72 and 30*57//72, as upstream
])
def test_generated_claim_names_follow_the_controller(pod_name: str, entry: str, want: str) -> None:
    assert claim_name_prefix(pod_name, entry) == want


def test_a_shared_claim_puts_both_pods_on_its_node() -> None:
    s, result = scheduled(NODES, DEVICES, claim("shared"), claim_pod("a", "shared"), claim_pod("b", "shared"))
    assert result == {"a": ("Bound", "gpu-node", ""), "b": ("Bound", "gpu-node", "")}
    c = s.cache.dra.claim("default", "shared")
    assert c is not None and [r[1] for r in c.reserved_for] == ["a", "b"] and devices(s, "shared") == ["gpu=gpu-0"]


def test_first_available_takes_the_first_subrequest_that_fits() -> None:
    request = ("{name: gpu, firstAvailable: ["
               "{name: h100, deviceClassName: gpu.example.com, selectors: [{cel: {expression: "
               "'device.attributes[\"gpu.example.com\"].model == \"h100\"'}}]}, "
               "{name: any, deviceClassName: gpu.example.com, count: 2}]}")
    s, result = scheduled(NODES, DEVICES, claim("pick", request), claim_pod("train", "pick"))
    assert result == {"train": ("Bound", "gpu-node", "")}
    assert devices(s, "pick") == ["gpu/any=gpu-0", "gpu/any=gpu-1"]


FULL = ("0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes are available: "
        "2 Preemption is not helpful for scheduling.")


def test_a_full_cluster_gives_kube_schedulers_message_and_a_deleted_pod_frees_its_device() -> None:
    async def delete_one(s: Scheduler) -> None:
        s.delete_pod("default", "p0")
        assert [c.name for c in s.cache.dra.claims.values() if c.owner and c.owner[1] == "p0"] == []
        after = await settle(s, ["p2"])
        assert after == {"p2": ("Bound", "gpu-node", "")}

    _, result = scheduled(NODES, DEVICES, template_pod("p0"), template_pod("p1"), template_pod("p2"),
                          then=delete_one)
    assert result == {"p0": ("Bound", "gpu-node", ""), "p1": ("Bound", "gpu-node", ""),
                      "p2": ("Unschedulable", "", FULL)}


def test_a_pod_waits_for_its_template_then_is_scheduled() -> None:
    template = DEVICES.split("---")[-1]

    async def add_template(s: Scheduler) -> None:
        await s.apply(parse_objects(template))
        assert await settle(s, ["train"]) == {"train": ("Bound", "gpu-node", "")}

    _, result = scheduled(NODES, DEVICES.replace(template, "").rstrip().rstrip("-"), template_pod("train"),
                          then=add_template)
    assert result == {"train": ("Gated", "", 'pod "default/train": ResourceClaim not created yet')}


@pytest.mark.parametrize(("doc", "error"), [
    (claim("x", "{name: gpu, exactly: {deviceClasName: gpu.example.com}}"),
     '<input>: document 1 (ResourceClaim default/x): unknown field "spec.devices.requests[0].exactly.deviceClasName"'),
    (DEVICES.split("---")[1].replace("generation: 1", "generation: one"),
     "<input>: document 1 (ResourceSlice gpu-node-gpus): spec.pool.generation: expected an integer, got string"),
    (DEVICES.split("---")[0].replace("resource.k8s.io/v1", "resource.k8s.io/v1beta2"),
     '<input>: document 1 (DeviceClass gpu.example.com): apiVersion: unsupported apiVersion "resource.k8s.io/v1beta2" '
     'for DeviceClass (expected "resource.k8s.io/v1")'),
])
def test_dra_manifests_are_decoded_strictly_where_they_are_read(doc: str, error: str) -> None:
    with pytest.raises(ManifestError) as exc:
        parse_objects(doc)
    assert str(exc.value) == error


def test_explain_shows_the_devices_a_pod_would_get(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cluster.yaml").write_text(NODES + "---" + DEVICES)
    (tmp_path / "pod.yaml").write_text(template_pod("train"))
    args = ["explain", "--cluster", str(tmp_path / "cluster.yaml"), "-f", str(tmp_path / "pod.yaml")]
    assert main([*args, "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    made = claim_name_prefix("train", "gpu")
    assert result["selected"] == "gpu-node"
    (dev,) = result["devices"]
    assert dev["claim"].startswith(f"default/{made}")
    assert {k: v for k, v in dev.items() if k != "claim"} == {
        "request": "gpu", "driver": "gpu.example.com", "pool": "gpu-node", "device": "gpu-0", "allocated": False}
    assert result["nodes"]["cpu-only"]["filter"] == {"code": "UnschedulableAndUnresolvable",
                                                     "plugin": "DynamicResources",
                                                     "reasons": ["cannot allocate all claims"]}
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("devices on gpu-node:")
    assert lines[at + 1].split() == ["CLAIM", "REQUEST", "DRIVER", "POOL", "DEVICE", "ALLOCATED"]
    assert lines[at + 2].split() == [dev["claim"], "gpu", "gpu.example.com", "gpu-node", "gpu-0", "now"]


def test_a_pod_applied_again_keeps_the_claim_made_for_it() -> None:
    async def again(s: Scheduler) -> None:
        rec = s.get_pod("default", "train")
        assert rec is not None
        made = dict(rec.pod.resource_claim_statuses)
        (result,) = await s.apply(parse_objects(template_pod("train")))
        assert result.action == "unchanged"
        rec = s.get_pod("default", "train")
        assert rec is not None and rec.pod.resource_claim_statuses == made
        assert sorted(c.name for c in s.cache.dra.claims.values()) == sorted(made.values())

    _, result = scheduled(NODES, DEVICES, template_pod("train"), then=again)
    assert result == {"train": ("Bound", "gpu-node", "")}
