"""A remote PlacementScore plugin in a PodGroup cycle (GenericWorkload and
TopologyAwareWorkloadScheduling on): the example SharedLabelPlacement served by a real plugin host
process scores each rack the group fits in, the group lands where its score says, and explain
podgroup shows the score."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from test_podgroup_cycle import gang, gpod, node_of, phase, run
from test_remote_harness import HostProcess, endpoint, remote_rig, until
from test_runtime import NO_LEAKS, PROFILE, describe

from framework import features
from framework.config import SchedulerConfig, load_config
from framework.plugins import Registry
from framework.remote.placement import RemotePlacementScore
from pluginhost import pb
from pluginhost.definition import manifest_of
from pluginhost.examples.sharedlabel import SharedLabelPlacement
from pluginhost.manifest import node_from_dict
from pluginhost.model import Node
from pluginhost.status import Code

SETTLE = 20.0  # plugin hosts in other processes, on a machine that may be busy
E = pb.plugin.ExtensionPoint


@pytest.fixture(autouse=True)
def topology_aware() -> Iterator[None]:
    previous = features.install(features.parse("GenericWorkload=true,TopologyAwareWorkloadScheduling=true"))
    try:
        yield
    finally:
        features.install(previous)


def config_for(registry: Registry) -> SchedulerConfig:
    plugins = ["PrioritySort", "NodeResourcesFit", "GangScheduling", "DefaultBinder", "TopologyPlacementGenerator",
               "PodGroupPodsCount"]
    text = "\n".join([
        "apiVersion: kubescheduler.config.k8s.io/v1",
        "kind: KubeSchedulerConfiguration",
        "profiles:",
        f"- schedulerName: {PROFILE}",
        "  plugins:",
        "    multiPoint:",
        "      enabled:",
        *(f"      - {{name: {name}}}" for name in plugins),
        "      - {name: SharedLabelPlacement, weight: 10}",
        "      disabled:",
        '      - {name: "*"}',
        "  pluginConfig:",
        "  - name: SharedLabelPlacement",
        "    args: {label: power}",
    ]) + "\n"
    return load_config(text, registry.points(), "test.yaml")


def power_node(name: str, rack: str, power: str) -> Node:
    return node_from_dict({"apiVersion": "v1", "kind": "Node",
                           "metadata": {"name": name, "labels": {"rack": rack, "power": power}},
                           "status": {"allocatable": {"cpu": "1", "memory": "8Gi", "pods": "110"}}})


# Two racks of two 1-cpu nodes, alike but for the power label: rack-a's nodes are on two power
# domains, rack-b's share one. The gang (2 x 1 cpu) fits in either rack, and the in-tree placement
# scores cannot tell them apart.
NODES = [power_node("a1", "rack-a", "p1"), power_node("a2", "rack-a", "p2"),
         power_node("b1", "rack-b", "p3"), power_node("b2", "rack-b", "p3")]


async def gang_cycle(s: Any, nodes: list[Node], pods: int, *, explain: bool = True) -> tuple[Any, list[str]]:
    """Gang ``g`` (minCount 2, topology ``rack``) of ``pods`` 1-cpu pods on ``nodes``: explain
    podgroup/g before the cycle (None when not asked), then the scheduler run until settled; every pod
    bound, nothing left behind. The explanation and the nodes the pods landed on, sorted."""
    s.cache.podgroups.put(gang("g", 2, topology=("rack",)))
    await s.apply([*nodes, *(gpod(f"p{i}", "1", "g") for i in range(pods))])
    explained = await s.explain_group("default", "g") if explain else None
    await run(s, [], [], settle=SETTLE)
    assert s.leaks() == NO_LEAKS
    assert [phase(s, f"p{i}") for i in range(pods)] == ["Bound"] * pods, describe(s)
    return explained, sorted(node_of(s, f"p{i}") for i in range(pods))


def test_the_python_host_declares_placement_score() -> None:
    assert [E.Name(p) for p in manifest_of(SharedLabelPlacement).points] == ["EXTENSION_POINT_PLACEMENT_SCORE"]


def test_a_remote_placement_score_decides_the_rack_and_explain_shows_it() -> None:
    async def main() -> tuple[dict[str, Any], list[str], list[str]]:
        with HostProcess("pluginhost.examples.sharedlabel:SharedLabelPlacement") as host:
            rig = await remote_rig([endpoint("shared", host.address)], config_for)
            s = rig.scheduler
            try:
                fwk = s.profiles[PROFILE]
                at = [p.name for p in fwk.pod_group_plugins["placementScore"]]
                assert isinstance(fwk.plugins["SharedLabelPlacement"], RemotePlacementScore)
                explained, landed = await gang_cycle(s, NODES, 2)
                return explained, at, landed
            finally:
                await rig.close()

    explained, at, landed = asyncio.run(main())
    assert at == ["NodeResourcesFit", "PodGroupPodsCount", "SharedLabelPlacement"]
    assert landed == ["b1", "b2"]
    scores = {p["placement"]: p["score"]["plugins"]["SharedLabelPlacement"] for p in explained["placements"]}
    assert scores == {"rack-a": 500, "rack-b": 1000}  # 50 and 100, weight 10
    assert sorted(p["node"] for p in explained["pods"]) == ["b1", "b2"]


def generator_config(generator: str) -> Any:
    def config(registry: Registry) -> SchedulerConfig:
        plugins = ["PrioritySort", "NodeResourcesFit", "GangScheduling", "DefaultBinder", generator,
                   "PodGroupPodsCount"]
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

    return config


@pytest.mark.parametrize("topology, want", [
    (("rack",), [("rack-a", ["a1", "a2"]), ("rack-b", ["b1", "b2"])]),
    (("power",), [("p1", ["a1"]), ("p2", ["a2"]), ("p3", ["b1", "b2"])]),
    ((), [("", ["a1", "a2", "b1", "b2"])]),
])
def test_a_python_placement_generator_reads_the_groups_topology_keys(
        topology: tuple[str, ...], want: list[tuple[str, list[str]]]) -> None:
    """The PodGroup's schedulingConstraints reach a Python plugin host in the group context: the
    plugin splits the parent placement by the group's key, as explain podgroup shows."""
    async def main() -> dict[str, Any]:
        with HostProcess("placement_plugins:SplitByGroupKey") as host:
            rig = await remote_rig([endpoint("split", host.address)], generator_config("SplitByGroupKey"))
            s = rig.scheduler
            try:
                generate = [p.name for p in s.profiles[PROFILE].pod_group_plugins["placementGenerate"]]
                assert generate == ["SplitByGroupKey"]
                s.cache.podgroups.put(gang("g", 2, topology=topology))
                await s.apply([*NODES, *(gpod(f"p{i}", "1", "g") for i in range(2))])
                return await s.explain_group("default", "g")
            finally:
                await rig.close()

    explained = asyncio.run(main())
    assert [(p["placement"], p["nodes"]) for p in explained["placements"]] == want


def test_a_remote_placement_generator_that_is_gone_fails_the_group_and_scheduling_goes_on() -> None:
    """A remote group point's error (the host killed: UNAVAILABLE, failurePolicy Fail) is the group's
    Error naming the plugin, as a pod cycle's is: every member fails with it, nothing is bound, and the
    scheduling loop goes on to the next pod (the error used to end it)."""
    async def main() -> tuple[Any, list[str], str, Any]:
        with HostProcess("placement_plugins:SplitByGroupKey") as host:
            rig = await remote_rig([endpoint("split", host.address)], generator_config("SplitByGroupKey"))
            s = rig.scheduler
            host.kill()
            try:
                s.cache.podgroups.put(gang("g", 2, topology=("rack",)))
                await s.apply([*NODES, *(gpod(f"p{i}", "1", "g") for i in range(2))])
                task = asyncio.create_task(s.run())
                try:
                    await until(lambda: all(s.get_pod("default", f"p{i}").last_status is not None
                                            for i in range(2)), SETTLE, "the group's first attempt")
                    await s.apply([gpod("solo", "1", None)])
                    await until(lambda: phase(s, "solo") == "Bound", SETTLE, "the next pod bound")
                    alive = not task.done()
                finally:
                    await s.stop()
                    await asyncio.wait_for(task, SETTLE)
                statuses = [s.get_pod("default", f"p{i}").last_status for i in range(2)]
                return alive, [phase(s, f"p{i}") for i in range(2)], node_of(s, "solo"), statuses
            finally:
                await rig.close()

    alive, phases, solo, statuses = asyncio.run(main())
    assert alive
    assert phases == ["Pending", "Pending"]
    assert solo in {"a1", "a2", "b1", "b2"}
    assert [st.code for st in statuses] == [Code.Error, Code.Error]
    assert all(st.message().startswith('running PlacementGenerate plugin "SplitByGroupKey": UNAVAILABLE: ')
               for st in statuses), [st.message() for st in statuses]
