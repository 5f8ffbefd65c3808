"""Pod volumes and storage objects reach the Node.js plugin host (clients/node) as a real process on
127.0.0.1: VolumeWitness written for it (tests/node_volume_witness.js, ``static needsVolumes = true``)
follows the storage objects through the snapshot stream and sees a pod's volumes and the claims,
volumes and classes behind them after every change, with the same verdicts as the Python one
(tests/test_remote_volumes.py's steps). Skipped, saying why, without ``node``/``npm`` (see
tests/test_node_plugin.py's ``node`` fixture).
"""

from __future__ import annotations

import asyncio
import os
import subprocess

from test_node_plugin import node  # noqa: F401 (a fixture)
from test_remote_harness import TESTS, HostProcess
from test_remote_volumes import VOLUME_PLUGINS, WITNESS_STEPS, remote_steps

WITNESS_JS = TESTS / "node_volume_witness.js"


class NodeWitness(HostProcess):
    def __init__(self, node_bin: str) -> None:
        super().__init__(str(WITNESS_JS))
        self.node = node_bin

    def spawn(self) -> None:
        self.proc = subprocess.Popen([self.node, str(WITNESS_JS), "--listen", self.listen],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def test_node_plugin_sees_pod_volumes_and_storage_objects_after_each_change(node: str) -> None:  # noqa: F811
    steps = [(what, change) for what, change, _ in WITNESS_STEPS]
    with NodeWitness(node) as host:
        got = asyncio.run(remote_steps(host.address, ["VolumeWitness"], VOLUME_PLUGINS, steps))
    assert got == [want for _, _, want in WITNESS_STEPS]
