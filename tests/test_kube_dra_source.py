"""DynamicResources' objects on the real API server: the ResourceSlice, DeviceClass and ResourceClaim
informers (started only for a profile that runs DynamicResources, waited for before pods, each change a
cluster event named by its kind; an object that does not decode logged and left out), and the claim
writer (the finalizer, then the status with the resourceVersion read; a conflict, a deleted claim, a lost
answer that landed or did not, a lease that is no longer held)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dra_fixtures
import numpy as np
import pytest
import yaml
from kube_fault_proxy import FaultProxy
from kube_framework import get_json, outrigger_kubeconfig, pod_manifest

from framework.config import load_config
from framework.dra.models import ResourceClaim
from framework.dra.store import FINALIZER, DraConflict, DraStore
from framework.kube.client import ApiClient, ApiError, KubeConfig
from framework.kube.dra import ApiClaimWriter, dra_converter, unreserve_patch
from framework.kube.settings import dynamic_resources
from framework.kube.source import KubeSource
from framework.plugins import in_tree_registry
from framework.plugins.dynamicresources import DynamicResources
from framework.scheduler import Scheduler
from pluginhost.plugin import CycleState, NodeBatch
from tools import fakedriver
from tools.localcluster import LocalCluster, k8s_release

PROFILE = "outrigger-scheduler"
HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
WITH = HEAD + f"profiles:\n- schedulerName: {PROFILE}\n"
WITHOUT = WITH + "  plugins: {multiPoint: {disabled: [{name: DynamicResources}]}}\n"
DRA_INFORMERS = ["resourceslices", "deviceclasses", "resourceclaims", "devicetaintrules"]
#: What they list and watch: DeviceTaintRules only where the API server serves them in v1 (from 1.37).
WATCHED = DRA_INFORMERS if k8s_release() not in ("1.35", "1.36") else DRA_INFORMERS[:3]


FILES = [
    # (name, the file's text (None: no file), whether a profile runs DynamicResources)
    ("no file: kube-scheduler's defaults", None, True),
    ("a profile of its own, default plugins", WITH, True),
    ("disabled in multiPoint", WITHOUT, False),
    ("disabled at filter only: it still runs at the other points", WITH + "  plugins: {filter: {disabled: "
     "[{name: DynamicResources}]}}\n", True),
    ("one profile of two runs it", WITHOUT + "- schedulerName: other\n", True),
    ("a file that does not decode: its loading reports it", "profiles: [", True),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in FILES], ids=[c[0] for c in FILES])
def test_a_standby_reads_from_its_file_whether_a_profile_runs_dynamic_resources(
        tmp_path: Path, text: str | None, expected: bool) -> None:
    path = None
    if text is not None:
        path = tmp_path / "scheduler.yaml"
        path.write_text(text)
    assert dynamic_resources(None if path is None else str(path)) is expected


def scheduler_for(config: str) -> Scheduler:
    registry = in_tree_registry()
    return Scheduler(load_config(config, registry.points()), registry, seed=0)


async def until(check: Any, timeout: float = 20) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "not in time"
        await asyncio.sleep(0.05)


def dra_requests(client: ApiClient) -> dict[str, int]:
    return {k: v for k, v in client.counts.items() if k.split(" ", 1)[1] in DRA_INFORMERS}


CASES = [
    # (name, the profile, the informers' requests once in sync)
    ("without DynamicResources: no list or watch of its objects", WITHOUT, {}),
    ("with it: slices, classes and claims listed and watched", WITH,
     {f"{verb} {r}": 1 for r in WATCHED for verb in ("list", "watch")}),
]


@pytest.mark.parametrize(("config", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_dra_informers_run_only_for_dynamic_resources_and_before_pods(
        kube_cluster: LocalCluster, config: str, expected: dict[str, int]) -> None:
    kubeconfig = outrigger_kubeconfig(kube_cluster)  # deploy/kubernetes/rbac.yaml's account may read them

    async def main() -> tuple[dict[str, int], list[str]]:
        source = KubeSource(scheduler_for(config), ApiClient(KubeConfig.from_file(kubeconfig)))
        try:
            await source.start()
            await source.wait_synced(30)
            await until(lambda: dra_requests(source.client) == expected)
            return dra_requests(source.client), [i.resource for i in source.informers()]
        finally:
            await source.stop()

    requests, informers = asyncio.run(main())
    assert requests == expected
    assert informers == ["nodes", "namespaces", "poddisruptionbudgets", "persistentvolumeclaims",
                         "persistentvolumes", "storageclasses", "csinodes", *(DRA_INFORMERS if expected else []),
                         "pods"]


def test_slices_classes_and_claims_reach_the_store_and_each_change_is_a_cluster_event(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    ns = kube_namespace
    base = ns[:40].rstrip("-")
    node = f"{base}-n"
    slice_name, class_name = f"{node}-gpus", f"{base}.gpu"
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        fakedriver.gpu_slice(node, 2), fakedriver.device_class(class_name),
        fakedriver.claim("one", ns, 1, class_name)]))
    ours = {slice_name, class_name, f"{ns}/one"}

    async def main() -> tuple[dict[str, Any], list[tuple[str, str, str]], dict[str, Any]]:
        scheduler = scheduler_for(WITH)
        seen: list[tuple[str, str, str]] = []

        def listener(kind: str, old: Any, new: Any) -> None:
            obj = new if new is not None else old
            key = f"{obj.namespace}/{obj.name}" if kind == "ResourceClaim" else obj.name
            if key in ours:
                seen.append((kind, "Add" if old is None else "Delete" if new is None else "Update", key))

        scheduler.cache.dra.add_listener(listener)
        source = KubeSource(scheduler, ApiClient(KubeConfig.from_file(kube_cluster.admin_kubeconfig)))
        dra = scheduler.cache.dra
        try:
            await source.start()
            await source.wait_synced(30)
            first = {"slice": [d.name for d in dra.slices[slice_name].devices],
                     "class": dra.classes[class_name].selectors,
                     "claim": [(r.name, r.exactly.count if r.exactly else 0) for r in dra.claims[f"{ns}/one"].requests]}
            await asyncio.to_thread(kube_cluster.kubectl, "apply", "-f", "-",
                                    input=yaml.safe_dump(fakedriver.gpu_slice(node, 3)))
            await until(lambda: len(dra.slices[slice_name].devices) == 3)
            for what in (f"resourceslice/{slice_name}", f"deviceclass/{class_name}"):
                await asyncio.to_thread(kube_cluster.kubectl, "delete", what)
            await asyncio.to_thread(kube_cluster.kubectl, "delete", "resourceclaim/one", "-n", ns)
            await until(lambda: len(seen) == 7)
            after = {"slices": slice_name in dra.slices, "classes": class_name in dra.classes,
                     "claims": f"{ns}/one" in dra.claims}
            return first, seen, after
        finally:
            await source.stop()

    first, seen, after = asyncio.run(main())
    expression = fakedriver.device_class(class_name)["spec"]["selectors"][0]["cel"]["expression"]
    assert first == {"slice": ["gpu-0", "gpu-1"], "class": (expression,), "claim": [("gpu", 1)]}
    # Listed (the three informers list at once, in any order), then the watch's update and deletions.
    assert sorted(seen[:3]) == [("DeviceClass", "Add", class_name), ("ResourceClaim", "Add", f"{ns}/one"),
                                ("ResourceSlice", "Add", slice_name)]
    assert seen[3:] == [("ResourceSlice", "Update", slice_name), ("ResourceSlice", "Delete", slice_name),
                        ("DeviceClass", "Delete", class_name), ("ResourceClaim", "Delete", f"{ns}/one")]
    assert after == {"slices": False, "classes": False, "claims": False}


STANDBY = [
    # (name, what the standby read from its file, its DRA requests before it attaches a scheduler)
    ("a standby that watched them hands what it holds to the scheduler", True,
     {f"{verb} {r}": 1 for r in WATCHED for verb in ("list", "watch")}),
    ("a standby that read no DynamicResources starts the informers for a scheduler that runs it", False, {}),
]


@pytest.mark.parametrize(("dra", "before"), [c[1:] for c in STANDBY], ids=[c[0] for c in STANDBY])
def test_a_standby_attaching_a_scheduler_with_dynamic_resources_gives_it_the_objects(
        kube_cluster: LocalCluster, kube_namespace: str, dra: bool, before: dict[str, int]) -> None:
    node = f"{kube_namespace[:40].rstrip('-')}-n"
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(fakedriver.gpu_slice(node, 2)))

    async def main() -> tuple[dict[str, int], dict[str, int], list[str]]:
        source = KubeSource(None, ApiClient(KubeConfig.from_file(kube_cluster.admin_kubeconfig)), dra=dra)
        try:
            await source.start()
            await source.wait_synced(30)
            await until(lambda: dra_requests(source.client) == before)
            requests = dra_requests(source.client)
            scheduler = scheduler_for(WITH)
            await source.attach(scheduler)
            await source.wait_synced(30)
            await until(lambda: f"{node}-gpus" in scheduler.cache.dra.slices)
            await until(lambda: len(dra_requests(source.client)) == 2 * len(WATCHED))
            devices = [d.name for d in scheduler.cache.dra.slices[f"{node}-gpus"].devices]
            return requests, dra_requests(source.client), devices
        finally:
            await source.stop()
            await asyncio.to_thread(kube_cluster.kubectl, "delete", f"resourceslice/{node}-gpus")

    requests, after, devices = asyncio.run(main())
    assert requests == before
    assert after == {f"{verb} {r}": 1 for r in WATCHED for verb in ("list", "watch")}
    assert devices == ["gpu-0", "gpu-1"]


# ---- an object that does not decode --------------------------------------------------------------------

GOOD_SLICE = fakedriver.gpu_slice("n1", 1)
BAD = [
    # (name, kind, the object, the warning logged)
    ("an unknown field", "ResourceSlice",
     {**GOOD_SLICE, "spec": {**GOOD_SLICE["spec"], "devices": [{"name": "gpu-0", "atributes": {}}]}},
     'ResourceSlice n1-gpus: unknown field "spec.devices[0].atributes"; DynamicResources leaves it out until it '
     "is fixed"),
    ("a generation that is not a number", "ResourceSlice",
     {**GOOD_SLICE, "spec": {**GOOD_SLICE["spec"], "pool": {"name": "n1", "generation": "one",
                                                             "resourceSliceCount": 1}}},
     "ResourceSlice n1-gpus: spec.pool.generation: expected an integer, got string; DynamicResources leaves it "
     "out until it is fixed"),
    ("a claim's request of another type", "ResourceClaim",
     {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ns"},
      "spec": {"devices": {"requests": "gpu"}}},
     "ResourceClaim ns/c: spec.devices.requests: expected a list, got string; DynamicResources leaves it out until "
     "it is fixed"),
]


@pytest.mark.parametrize(("kind", "obj", "warning"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_an_object_that_does_not_decode_is_logged_with_what_is_wrong_and_left_out(
        caplog: pytest.LogCaptureFixture, kind: str, obj: dict[str, Any], warning: str) -> None:
    scheduler = scheduler_for(WITH)
    source = KubeSource(scheduler, ApiClient(KubeConfig(server="https://127.0.0.1:1")))
    informer = next(i for i in source.dra if i.resource == f"{kind.lower()}s")
    good = DraStore.decode(kind, GOOD_SLICE if kind == "ResourceSlice" else {
        **obj, "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "c"}}]}}})

    async def main() -> None:
        await informer.handler.on_add(good)  # the object as it was, then an update that does not decode
        with caplog.at_level(logging.WARNING, logger="outrigger.kube"):
            bad = informer.convert(json.loads(json.dumps(obj)))
        assert bad is None
        await informer.handler.on_update(good, bad)

    asyncio.run(main())
    assert [r.getMessage() for r in caplog.records] == [warning]
    assert (scheduler.cache.dra.slices, scheduler.cache.dra.claims) == ({}, {})


def test_the_converter_drops_managed_fields() -> None:
    obj = json.loads(json.dumps(GOOD_SLICE))
    obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    out = dra_converter("ResourceSlice")(obj)
    assert out is not None and out.name == "n1-gpus" and "managedFields" not in obj["metadata"]


# ---- the claim writer ------------------------------------------------------------------------------------


def allocation(node: str, *devices: str) -> dict[str, Any]:
    return {"devices": {"results": [{"request": "gpu", "driver": fakedriver.DRIVER, "pool": node, "device": d}
                                    for d in devices]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


def reserved(uid: str) -> list[dict[str, str]]:
    return [{"resource": "pods", "name": "p", "uid": uid}]


def read_claim(cluster: LocalCluster, namespace: str, name: str) -> ResourceClaim:
    claim = DraStore.decode("ResourceClaim", get_json(cluster, "resourceclaim", name, "-n", namespace))
    assert isinstance(claim, ResourceClaim)
    return claim


def summary(claim: ResourceClaim) -> tuple[list[str], list[str], list[str]]:
    devices = [r.device for r in claim.allocation.results] if claim.allocation else []
    return devices, [r[2] for r in claim.reserved_for], list(claim.finalizers)


async def write(client: ApiClient, claim: ResourceClaim, status: dict[str, Any],
                fence: Any = None) -> ResourceClaim | str:
    try:
        return await ApiClaimWriter(SimpleNamespace(client=client, fence=fence)).write_claim_status(claim, status)
    except DraConflict as exc:
        return f"DraConflict: {exc}"


async def read_back(client: ApiClient, claim: ResourceClaim, status: dict[str, Any]) -> ResourceClaim | None:
    """The claim a conflicting write read back (:attr:`DraConflict.latest`)."""
    try:
        await ApiClaimWriter(SimpleNamespace(client=client, fence=None)).write_claim_status(claim, status)
    except DraConflict as exc:
        return exc.latest
    raise AssertionError(f"the write of {claim.key} did not conflict")


def test_an_allocation_is_written_after_the_finalizer_and_taken_back_when_unreserved(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    ns = kube_namespace
    # Reserved for a pod that exists: kube-controller-manager (started by an earlier test of the session)
    # takes a claim reserved for a missing pod out of use at once, racing the writes below.
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([fakedriver.claim("c", ns, 2),
                                                                       pod_manifest("p", ns, "nobody")]))
    uid = get_json(kube_cluster, "pod", "p", "-n", ns)["metadata"]["uid"]
    claim = read_claim(kube_cluster, ns, "c")
    client = ApiClient(KubeConfig.from_file(outrigger_kubeconfig(kube_cluster)))

    async def main() -> tuple[Any, Any, dict[str, int]]:
        try:
            written = await write(client, claim, {"allocation": allocation("n1", "gpu-0", "gpu-1"),
                                                  "reservedFor": reserved(uid)})
            assert isinstance(written, ResourceClaim)
            freed = await write(client, written, {})
            return written, freed, dict(client.counts)
        finally:
            await client.close()

    written, freed, counts = asyncio.run(main())
    assert summary(written) == (["gpu-0", "gpu-1"], [uid], [FINALIZER])
    assert written.allocation is not None and written.allocation.node_selector is not None
    # Taken back: no allocation, no consumer; the finalizer stays, as kube-scheduler leaves it (the claim
    # controller removes it).
    assert summary(freed) == ([], [], [FINALIZER])
    # Read back: the same, unless kube-controller-manager (started by an earlier test of the session) has
    # meanwhile removed the finalizer of the claim nobody uses, as it does.
    devices, consumers, finalizers = summary(read_claim(kube_cluster, ns, "c"))
    assert (devices, consumers) == ([], []) and finalizers in ([FINALIZER], [])
    assert counts == {"update resourceclaims": 1, "update resourceclaims/status": 2}


def test_a_claim_changed_since_it_was_read_or_deleted_is_a_conflict_and_nothing_is_written(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    ns = kube_namespace
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([fakedriver.claim("changed", ns),
                                                                       fakedriver.claim("gone", ns)]))
    changed, gone = read_claim(kube_cluster, ns, "changed"), read_claim(kube_cluster, ns, "gone")
    kube_cluster.kubectl("annotate", "resourceclaim", "changed", "-n", ns, "touched=yes")
    kube_cluster.kubectl("delete", "resourceclaim", "gone", "-n", ns)
    status = {"allocation": allocation("n1", "gpu-0"), "reservedFor": reserved("u-1")}

    async def main() -> list[Any]:
        client = ApiClient(KubeConfig.from_file(kube_cluster.admin_kubeconfig))
        try:
            return [await write(client, changed, status), await write(client, gone, status),
                    *[await read_back(client, c, status) for c in (changed, gone)]]
        finally:
            await client.close()

    *answers, changed_latest, gone_latest = asyncio.run(main())
    # The conflict carries the claim read back (what PreBind's retry starts from); a missing claim, none.
    now = read_claim(kube_cluster, ns, "changed")
    assert changed_latest is not None and gone_latest is None
    assert (changed_latest.resource_version, changed_latest.raw["metadata"]["annotations"]["touched"]) == (
        now.resource_version, "yes")
    assert answers == [
        'DraConflict: update resourceclaims: 409 Conflict: Operation cannot be fulfilled on '
        'resourceclaims.resource.k8s.io "changed": the object has been modified; please apply your changes '
        "to the latest version and try again",
        'DraConflict: update resourceclaims: 404 NotFound: resourceclaims.resource.k8s.io "gone" not found']
    assert summary(read_claim(kube_cluster, ns, "changed")) == ([], [], [])


@pytest.mark.parametrize(("namespace", "name", "claim_uid", "pod_uid"), [
    ("ns", "c", "uid-c", "uid-p"),
    ("team-a", "gpu-claim", "0b6f", "7d1e"),
])
def test_the_unreserve_patch_deletes_the_pods_entry_by_uid_with_the_claims_uid_and_no_version(
        namespace: str, name: str, claim_uid: str, pod_uid: str) -> None:
    claim = ResourceClaim(namespace=namespace, name=name, uid=claim_uid, resource_version="42")
    assert unreserve_patch(claim, pod_uid) == (
        f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims/{name}/status",
        {"metadata": {"uid": claim_uid}, "status": {"reservedFor": [{"$patch": "delete", "uid": pod_uid}]}})


def test_unreserve_patches_the_pod_out_of_a_claim_changed_since_it_was_read(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    ns = kube_namespace
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([
        fakedriver.claim("c", ns), fakedriver.claim("gone", ns), fakedriver.claim("replaced", ns),
        pod_manifest("p1", ns, "nobody"), pod_manifest("p2", ns, "nobody")]))
    uids = [get_json(kube_cluster, "pod", p, "-n", ns)["metadata"]["uid"] for p in ("p1", "p2")]
    claim, gone, old = (read_claim(kube_cluster, ns, n) for n in ("c", "gone", "replaced"))
    config = KubeConfig.from_file(outrigger_kubeconfig(kube_cluster))
    status = {"allocation": allocation("n1", "gpu-0"),
              "reservedFor": [{"resource": "pods", "name": p, "uid": u} for p, u in zip(("p1", "p2"), uids)]}

    async def written() -> Any:
        client = ApiClient(config)
        try:
            return await write(client, claim, status)
        finally:
            await client.close()

    async def unreserve() -> tuple[list[Any], dict[str, int]]:
        client = ApiClient(config)
        writer = ApiClaimWriter(SimpleNamespace(client=client, fence=None))
        answers: list[Any] = []
        try:
            for c in (first, gone, old):
                try:
                    answers.append(await writer.unreserve(c, uids[0]))
                except ApiError as exc:
                    answers.append(str(exc))
            return answers, dict(client.counts)
        finally:
            await client.close()

    first = asyncio.run(written())
    assert isinstance(first, ResourceClaim)
    # Someone else changes the claim after this scheduler wrote it; the others are deleted, or replaced.
    kube_cluster.kubectl("annotate", "resourceclaim", "c", "-n", ns, "touched=yes")
    kube_cluster.kubectl("delete", "resourceclaim", "gone", "replaced", "-n", ns)
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(fakedriver.claim("replaced", ns)))
    (stored, none_gone, refused), counts = asyncio.run(unreserve())
    now = read_claim(kube_cluster, ns, "c")
    # Gone: nothing to do. Replaced: the old uid in the patch is refused (immutable), the new claim untouched.
    assert isinstance(stored, ResourceClaim) and none_gone is None
    assert refused == ('patch resourceclaims/status: 422 Invalid: ResourceClaim.resource.k8s.io "replaced" is '
                       f'invalid: metadata.uid: Invalid value: "{old.uid}": field is immutable')
    assert stored.resource_version == now.resource_version
    assert (summary(now)[:2], now.raw["metadata"]["annotations"]["touched"]) == ((["gpu-0"], [uids[1]]), "yes")
    assert summary(read_claim(kube_cluster, ns, "replaced")) == ([], [], [])
    assert counts == {"patch resourceclaims/status": 3}


def test_unreserve_through_the_plugin_removes_the_pod_from_a_claim_changed_since_prebind_wrote_it(
        kube_cluster: LocalCluster, kube_namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    # DynamicResources on a store no informer updates: PreBind writes the claim on the API server, someone
    # else then annotates it (a version the store never sees), and Unreserve still takes the pod out, with no
    # conflict to log.
    ns = kube_namespace
    manifest = dra_fixtures.claim("c", namespace=ns)
    for key in ("uid", "resourceVersion"):
        del manifest["metadata"][key]
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([manifest, pod_manifest("p", ns, "nobody")]))
    table, store = dra_fixtures.cluster(dra_fixtures.device_class(), dra_fixtures.node_slice(
        "n0", dra_fixtures.device("gpu-0")), get_json(kube_cluster, "resourceclaim", "c", "-n", ns))
    pod_uid = get_json(kube_cluster, "pod", "p", "-n", ns)["metadata"]["uid"]
    pod = dataclasses.replace(dra_fixtures.gpu_pod(("gpu", "c"), uid=pod_uid), namespace=ns)
    plugin = DynamicResources(None, dra_fixtures.SnapshotHandle(table))  # type: ignore[arg-type]
    config = KubeConfig.from_file(outrigger_kubeconfig(kube_cluster))

    async def main() -> tuple[list[str], dict[str, int]]:
        client = ApiClient(config)
        store.writer = ApiClaimWriter(SimpleNamespace(client=client, fence=None))
        try:
            snap = table.snapshot()
            state = CycleState(snapshot=snap)
            codes = [(await plugin.pre_filter(state, pod))[1].code]
            result = await plugin.filter(state, pod, NodeBatch(snap, np.arange(len(snap), dtype=np.int64)))
            codes += [result.status_at(0, plugin.name).code, (await plugin.reserve(state, pod, "n0")).code,
                      (await plugin.pre_bind(state, pod, "n0")).code]
            kube_cluster.kubectl("annotate", "resourceclaim", "c", "-n", ns, "touched=yes")
            await plugin.unreserve(state, pod, "n0")
            return [c.name for c in codes], dict(client.counts)
        finally:
            await client.close()

    with caplog.at_level(logging.WARNING, logger="outrigger"):
        codes, counts = asyncio.run(main())
    assert codes == ["Success"] * 4
    now = read_claim(kube_cluster, ns, "c")
    assert (summary(now), now.raw["metadata"]["annotations"]["touched"]) == ((["gpu-0"], [], [FINALIZER]), "yes")
    claim = store.claim(ns, "c")  # the patch's answer, read until an informer delivers it
    assert claim is not None and (claim.resource_version, claim.reserved_for) == (now.resource_version, ())
    assert [r.getMessage() for r in caplog.records] == []
    assert counts == {"update resourceclaims": 1, "update resourceclaims/status": 1, "patch resourceclaims/status": 1}


LOST = [
    # (name, the status write's fault (landed: applied, answered 503 with Retry-After; otherwise 500, not
    #  applied), what the writer answers, the proxy's log of claim requests, the claim afterwards)
    ("applied, answer lost: the client's second copy gets 409, the claim read back says it landed", True,
     "written", [("PUT", 200, 200), ("PUT", 200, 503), ("PUT", 409, 409), ("GET", 200, 200)],
     (["gpu-0"], ["u-1"], [FINALIZER])),
    ("not applied, 500: not sent again, the claim read back is unchanged: a conflict", False,
     "DraConflict: update resourceclaims/status: 500 InternalError: injected: not forwarded",
     [("PUT", 200, 200), ("PUT", None, 500), ("GET", 200, 200)], ([], [], [FINALIZER])),
]


@pytest.mark.parametrize(("landed", "expected", "log", "after"), [c[1:] for c in LOST], ids=[c[0] for c in LOST])
def test_a_status_write_whose_answer_is_lost_is_read_back_not_resent_blindly(
        kube_cluster: LocalCluster, kube_namespace: str, landed: bool, expected: str,
        log: list[tuple[str, int | None, int]], after: tuple[list[str], list[str], list[str]]) -> None:
    ns = kube_namespace
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(fakedriver.claim("c", ns)))
    # The consumer is a pod that exists and uses the claim (no scheduler takes it): a kube-controller-manager
    # started by an earlier test removes reservedFor entries of pods that do not exist, which would race
    # the read-back below.
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "pause"}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}}))
    uid = get_json(kube_cluster, "pod", "p", "-n", ns)["metadata"]["uid"]
    after = (after[0], [uid if u == "u-1" else u for u in after[1]], after[2])
    claim = read_claim(kube_cluster, ns, "c")
    path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/c"

    async def main() -> tuple[Any, list[tuple[str, str, int | None, int]]]:
        proxy = FaultProxy(kube_cluster.server, kube_cluster.ca_file)
        proxy.fail("PUT", f"{path}/status", landed=landed)
        await proxy.start()
        client = ApiClient(KubeConfig(server=proxy.url, token=kube_cluster.admin_token), qps=0)
        try:
            status = {"allocation": allocation("n1", "gpu-0"), "reservedFor": reserved(uid)}
            answer = await write(client, claim, status)
            return answer, proxy.log
        finally:
            await client.close()
            await proxy.close()

    answer, proxy_log = asyncio.run(main())
    assert (answer if isinstance(answer, str) else "written") == expected
    assert [(m, real, sent) for m, p, real, sent in proxy_log if p.startswith(path)] == log
    assert summary(read_claim(kube_cluster, ns, "c")) == after


def test_a_replica_without_the_lease_writes_nothing(kube_cluster: LocalCluster, kube_namespace: str) -> None:
    ns = kube_namespace
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(fakedriver.claim("c", ns)))
    claim = read_claim(kube_cluster, ns, "c")

    async def main() -> tuple[Any, dict[str, int]]:
        client = ApiClient(KubeConfig.from_file(kube_cluster.admin_kubeconfig))
        try:
            answer = await write(client, claim, {"allocation": allocation("n1", "gpu-0")}, fence=lambda: 0.0)
            return answer, dict(client.counts)
        finally:
            await client.close()

    answer, counts = asyncio.run(main())
    assert answer == (f"DraConflict: resourceclaim {ns}/c not written: this replica no longer holds the leader "
                      "lease")
    assert counts == {}
    assert summary(read_claim(kube_cluster, ns, "c")) == ([], [], [])
