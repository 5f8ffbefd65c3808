"""Sign for remote plugins in the other SDKs, as tests/test_remote_sign.py checks the Python one: the
Node.js host's PoolFit (clients/node/plugins/poolfit.js) and the Go SDK's (clients/go/examples), each
served by a real process on 127.0.0.1, let identical pods batch, and a pod they cannot sign is
scheduled without a hint; kube-scheduler's own NodeResourcesFit and TaintToleration, served unmodified
by the Go adapter, sign as the in-process plugins do.

Skipped, saying why, when ``node``/``npm`` or ``go`` are missing (as the SDKs' other tests).
"""

from __future__ import annotations

import asyncio

import grpc
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
