"""kube-scheduler's own PodGroupPodsCount (k8s.io/kubernetes at the pinned release, unmodified), served
out of process by the Go adapter (``outrigger-kube-plugins --prefix Upstream``), takes part in a PodGroup
cycle (GenericWorkload and TopologyAwareWorkloadScheduling on) on the embedded store: the adapter
declares PlacementScore and NormalizePlacementScore for it, and the group's outcome and every
placement's scores in explain podgroup are those of Outrigger's in-process PodGroupPodsCount.

The binary is built as tests/test_go_plugins.py builds it; the tests skip when ``go`` is missing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from test_go_plugins import PREFIX, GoHost, kube_plugins  # noqa: F401 (kube_plugins is a fixture)
from test_podgroup_cycle import rack_node
from test_remote_harness import endpoint, remote_rig
from test_remote_placement import gang_cycle
from test_runtime import PROFILE

from framework import features
from framework.config import SchedulerConfig, load_config
from framework.plugins import Registry
from framework.remote.placement import RemotePlacementScore
from pluginhost import pb

E = pb.plugin.ExtensionPoint
UPSTREAM = f"{PREFIX}PodGroupPodsCount"
UPSTREAM_GENERATOR = f"{PREFIX}TopologyPlacementGenerator"


@pytest.fixture(autouse=True)
def topology_aware() -> Iterator[None]:
    previous = features.install(features.parse("GenericWorkload=true,TopologyAwareWorkloadScheduling=true"))
    try:
        yield
    finally:
        features.install(previous)


def config_with(pods_count: str, generator: str = "TopologyPlacementGenerator") -> Any:
    def config_for(registry: Registry) -> SchedulerConfig:
        plugins = ["PrioritySort", "NodeResourcesFit", "GangScheduling", "DefaultBinder",
                   generator, pods_count]
        text = "\n".join([
            "apiVersion: kubescheduler.config.k8s.io/v1",
            "kind: KubeSchedulerConfiguration",
            "profiles:",
            f"- schedulerName: {PROFILE}",
            "  plugins:",
            "    multiPoint:",
            "      enabled:",
            *(f"      - {{name: {name}}}" for name in plugins),
            "      disabled:",
            '      - {name: "*"}',
        ]) + "\n"
        return load_config(text, registry.points(), "test.yaml")

    return config_for


# rack-a holds all three 1-cpu pods of the gang (minCount 2), rack-b two of them: PodGroupPodsCount
# scores rack-a 3 and rack-b 2, normalized 100 and 66, and the group lands in rack-a.
NODES = [rack_node("a1", "rack-a", "2"), rack_node("a2", "rack-a", "1"),
         rack_node("b1", "rack-b", "1"), rack_node("b2", "rack-b", "1")]


async def group_cycle(scheduler: Any) -> tuple[dict[str, Any], list[str]]:
    """explain podgroup/g before the cycle, then where the gang's pods land."""
    explained, landed = await gang_cycle(scheduler, NODES, 3)
    return explained, landed


def in_process() -> tuple[dict[str, Any], list[str]]:
    from framework.plugins import in_tree_registry
    from framework.scheduler import Scheduler

    registry = in_tree_registry()
    return asyncio.run(group_cycle(Scheduler(config_with("PodGroupPodsCount")(registry), registry, seed=0)))


def through_adapter(address: str) -> tuple[dict[str, Any], list[str], list[str], list[str]]:
    async def main() -> tuple[dict[str, Any], list[str], list[str], list[str]]:
        rig = await remote_rig([endpoint("upstream", address)], config_with(UPSTREAM))
        try:
            fwk = rig.scheduler.profiles[PROFILE]
            assert isinstance(fwk.plugins[UPSTREAM], RemotePlacementScore)
            at = [p.name for p in fwk.pod_group_plugins["placementScore"]]
            generate = [p.name for p in fwk.pod_group_plugins["placementGenerate"]]
            explained, landed = await group_cycle(rig.scheduler)
            return explained, landed, at, generate
        finally:
            await rig.close()

    return asyncio.run(main())


def manifest_points(address: str, plugin: str) -> list[str]:
    with grpc.insecure_channel(address) as channel:
        stub = pb.plugin_grpc.PluginStub(channel)  # type: ignore[no-untyped-call]
        hello = stub.Handshake(pb.plugin.HandshakeRequest(), timeout=10)
    [manifest] = [m for m in hello.plugins if m.name == plugin]
    return [E.Name(p) for p in manifest.points]


def scores_of(explained: dict[str, Any], plugin: str) -> dict[str, int]:
    return {p["placement"]: p["score"]["plugins"][plugin] for p in explained["placements"]}


def test_the_adapter_declares_upstream_placement_points(kube_plugins: Path) -> None:  # noqa: F811
    with GoHost(kube_plugins, "--prefix", PREFIX) as host:
        got = {name: manifest_points(host.address, f"{PREFIX}{name}")
               for name in ("PodGroupPodsCount", "TopologyPlacementGenerator")}
    assert got == {
        "PodGroupPodsCount": ["EXTENSION_POINT_PLACEMENT_SCORE", "EXTENSION_POINT_NORMALIZE_PLACEMENT_SCORE"],
        "TopologyPlacementGenerator": ["EXTENSION_POINT_PLACEMENT_GENERATE"],
    }


def test_upstream_pod_group_pods_count_scores_placements_as_in_process(kube_plugins: Path) -> None:  # noqa: F811
    want_explained, want_landed = in_process()
    assert scores_of(want_explained, "PodGroupPodsCount") == {"rack-a": 100, "rack-b": 66}
    assert want_landed == ["a1", "a1", "a2"]

    with GoHost(kube_plugins, "--prefix", PREFIX) as host:
        explained, landed, at, generate = through_adapter(host.address)
    assert at == ["NodeResourcesFit", UPSTREAM]
    assert generate == ["TopologyPlacementGenerator"]
    assert landed == want_landed
    assert scores_of(explained, UPSTREAM) == {"rack-a": 100, "rack-b": 66}
    renamed = [{**p, "score": {**p["score"], "plugins": {
        ("PodGroupPodsCount" if k == UPSTREAM else k): v for k, v in p["score"]["plugins"].items()}}}
        for p in explained["placements"]]
    assert renamed == want_explained["placements"]
    assert explained["pods"] == want_explained["pods"]


def by_name(placements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(placements, key=lambda p: str(p["placement"]))


def generated_by_adapter(address: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """The group cycle with kube-scheduler's TopologyPlacementGenerator behind the adapter."""
    async def main() -> tuple[dict[str, Any], list[str], list[str]]:
        rig = await remote_rig([endpoint("upstream", address)],
                               config_with("PodGroupPodsCount", UPSTREAM_GENERATOR))
        try:
            fwk = rig.scheduler.profiles[PROFILE]
            generate = [p.name for p in fwk.pod_group_plugins["placementGenerate"]]
            explained, landed = await group_cycle(rig.scheduler)
            return explained, landed, generate
        finally:
            await rig.close()

    return asyncio.run(main())


def test_upstream_topology_placement_generator_splits_by_rack_as_in_process(
        kube_plugins: Path) -> None:  # noqa: F811
    """On the embedded store (no --kubeconfig, so no PodGroup for the adapter to watch) the group's
    topology key reaches the adapter in the group context: the upstream generator splits the gang by
    rack exactly as the in-process one does, and the gang lands in the same rack."""
    want_explained, want_landed = in_process()
    assert [(p["placement"], p["nodes"]) for p in want_explained["placements"]] == [
        ("rack-a", ["a1", "a2"]), ("rack-b", ["b1", "b2"])]

    with GoHost(kube_plugins, "--prefix", PREFIX) as host:
        explained, landed, generate = generated_by_adapter(host.address)
    assert generate == [UPSTREAM_GENERATOR]
    assert landed == want_landed == ["a1", "a1", "a2"]
    # Upstream's generator walks a Go map of domains, so its placements come in either order; each is
    # scored and explained as in process.
    assert by_name(explained["placements"]) == by_name(want_explained["placements"])
    assert explained["pods"] == want_explained["pods"]
