"""A remote PlacementScore plugin in Node.js (clients/node: the SharedLabelPlacement example, served by
``node clients/node/server.js`` as a real process on 127.0.0.1) in a PodGroup cycle (GenericWorkload and
TopologyAwareWorkloadScheduling on) on the embedded store: the host declares PlacementScore, the group
lands where its scores say, and explain podgroup shows them exactly as the Python example's
(tests/test_remote_placement.py).

Skipped, saying why, when ``node``/``npm`` are missing (as tests/test_node_plugin.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from test_node_plugin import NodeHost, node  # noqa: F401 (node is a fixture)
from test_remote_harness import HostProcess, endpoint, remote_rig
from test_remote_placement import NODES, config_for, gang_cycle
from test_runtime import PROFILE

from framework import features
from framework.remote.placement import RemotePlacementScore
from pluginhost import pb

E = pb.plugin.ExtensionPoint
P = pb.plugin


@pytest.fixture(autouse=True)
def topology_aware() -> Iterator[None]:
    previous = features.install(features.parse("GenericWorkload=true,TopologyAwareWorkloadScheduling=true"))
    try:
        yield
    finally:
        features.install(previous)


def test_the_node_host_declares_placement_score(node: str) -> None:  # noqa: F811
    with NodeHost(node) as host, grpc.insecure_channel(host.address) as channel:
        stub = pb.plugin_grpc.PluginStub(channel)  # type: ignore[no-untyped-call]
        hello = stub.Handshake(P.HandshakeRequest(), timeout=10)
    [manifest] = [m for m in hello.plugins if m.name == "SharedLabelPlacement"]
    assert [E.Name(p) for p in manifest.points] == ["EXTENSION_POINT_PLACEMENT_SCORE"]
    assert (list(manifest.state_keys), manifest.needs_snapshot) == ([], False)


async def group_cycle(host: HostProcess) -> tuple[dict[str, Any], list[str], list[str]]:
    """explain podgroup/g with the host's SharedLabelPlacement, its placementScore plugins, and where
    the gang lands."""
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


def test_a_node_placement_score_decides_the_rack_as_the_python_one(node: str) -> None:  # noqa: F811
    with NodeHost(node) as host:
        explained, at, landed = asyncio.run(group_cycle(host))
    # rack-a's two power domains score 50, rack-b's one 100, times the weight 10.
    assert at == ["NodeResourcesFit", "PodGroupPodsCount", "SharedLabelPlacement"]
    assert landed == ["b1", "b2"]
    scores = {p["placement"]: p["score"]["plugins"]["SharedLabelPlacement"] for p in explained["placements"]}
    assert scores == {"rack-a": 500, "rack-b": 1000}
    assert sorted(p["node"] for p in explained["pods"]) == ["b1", "b2"]
    with HostProcess("pluginhost.examples.sharedlabel:SharedLabelPlacement") as python_host:
        assert asyncio.run(group_cycle(python_host)) == (explained, at, landed)
