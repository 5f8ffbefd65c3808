"""Sign for remote plugins in the other SDKs, as tests/test_remote_sign.py checks the Python one: the
Node.js host's PoolFit (clients/node/plugins/poolfit.js) and the Go SDK's (clients/go/examples), each
served by a real process on 127.0.0.1, let identical pods batch, and a pod they cannot sign is
scheduled without a hint; kube-scheduler's own NodeResourcesFit and TaintToleration, served unmodified
by the Go adapter, sign as the in-process plugins do.

Skipped, saying why, when ``node``/``npm`` or ``go`` are missing (as the SDKs' other tests).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from test_go_plugins import PREFIX, GoHost, _build, _go, kube_plugins  # noqa: F401 (kube_plugins is a fixture)
from test_node_plugin import NodeHost, node  # noqa: F401 (node is a fixture)
from test_remote_sign import FOUR, SPREAD, pool_pod, schedule

from pluginhost import pb

E = pb.plugin.ExtensionPoint
P = pb.plugin


def manifest_points(address: str, plugin: str) -> list[str]:
    with grpc.insecure_channel(address) as channel:
        stub = pb.plugin_grpc.PluginStub(channel)  # type: ignore[no-untyped-call]
        hello = stub.Handshake(P.HandshakeRequest(), timeout=10)
    [manifest] = [m for m in hello.plugins if m.name == plugin]
    return [E.Name(p) for p in manifest.points]


def test_the_node_host_signs_and_its_pods_batch(node: str) -> None:  # noqa: F811
    with NodeHost(node) as host:
        assert manifest_points(host.address, "PoolFit") == ["EXTENSION_POINT_FILTER", "EXTENSION_POINT_SIGN"]
        out = asyncio.run(asyncio.wait_for(schedule(host.address, "PoolFit", FOUR), 60))
        mixed = [pool_pod("p1"), pool_pod("p2", signable=False), pool_pod("p3"), pool_pod("p4")]
        unsigned = asyncio.run(asyncio.wait_for(schedule(host.address, "PoolFit", mixed), 60))
    assert (out.signable, out.placed, out.attempts) == (True, SPREAD, {"no_hint": 1, "hint_used": 3})
    assert (out.sign_calls, out.cache_hits) == (4, 4)
    assert (unsigned.placed, unsigned.attempts) == (SPREAD, {"no_hint": 3, "hint_used": 1})


@pytest.fixture(scope="module")
def poolfit_go() -> Path:
    """``outrigger-poolfit``: PoolFit written with the Go SDK (clients/go/cmd/outrigger-poolfit)."""
    return _build(_go(), "outrigger-poolfit")


def test_the_go_sdk_signs_and_its_pods_batch(poolfit_go: Path) -> None:
    with GoHost(poolfit_go) as host:
        assert manifest_points(host.address, "PoolFit") == ["EXTENSION_POINT_FILTER", "EXTENSION_POINT_SIGN"]
        out = asyncio.run(asyncio.wait_for(schedule(host.address, "PoolFit", FOUR), 60))
        mixed = [pool_pod("p1"), pool_pod("p2", signable=False), pool_pod("p3"), pool_pod("p4")]
        unsigned = asyncio.run(asyncio.wait_for(schedule(host.address, "PoolFit", mixed), 60))
    assert (out.signable, out.placed, out.attempts) == (True, SPREAD, {"no_hint": 1, "hint_used": 3})
    assert (out.sign_calls, out.cache_hits) == (4, 4)
    assert (unsigned.placed, unsigned.attempts) == (SPREAD, {"no_hint": 3, "hint_used": 1})


def test_upstream_signers_served_by_the_adapter_batch_as_in_process(kube_plugins: Path) -> None:  # noqa: F811
    """kube-scheduler's NodeResourcesFit and TaintToleration, unmodified, behind the adapter: both
    declare Sign, a profile of them batches identical pods and places them where the in-process
    NodeResourcesFit does."""
    fit, taints = f"{PREFIX}NodeResourcesFit", f"{PREFIX}TaintToleration"
    with GoHost(kube_plugins, "--prefix", PREFIX) as host:
        points = {p: manifest_points(host.address, p) for p in (fit, taints)}
        out = asyncio.run(asyncio.wait_for(
            schedule(host.address, taints, FOUR, base=("PrioritySort", "DefaultBinder", fit)), 60))
    assert points == {
        fit: ["EXTENSION_POINT_PRE_FILTER", "EXTENSION_POINT_FILTER", "EXTENSION_POINT_PRE_SCORE",
              "EXTENSION_POINT_SCORE", "EXTENSION_POINT_ENQUEUE_EXTENSIONS", "EXTENSION_POINT_PLACEMENT_SCORE",
              "EXTENSION_POINT_SIGN"],
        taints: ["EXTENSION_POINT_PRE_FILTER", "EXTENSION_POINT_FILTER", "EXTENSION_POINT_PRE_SCORE",
                 "EXTENSION_POINT_SCORE",
                 "EXTENSION_POINT_NORMALIZE_SCORE", "EXTENSION_POINT_ENQUEUE_EXTENSIONS", "EXTENSION_POINT_SIGN"],
    }
    # Pool labels do not matter here: nothing filters on them, so n4 (pool b) is a candidate too.
    assert (out.signable, out.attempts) == (True, {"no_hint": 1, "hint_used": 3})
    assert out.placed == {"p1": "n1", "p2": "n2", "p3": "n3", "p4": "n1"}
    assert (out.sign_calls, out.cache_hits) == (4, 4)
