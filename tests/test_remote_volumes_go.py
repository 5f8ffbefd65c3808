"""Pod volumes and storage objects reach Go plugin hosts (clients/go), as real processes on 127.0.0.1:

- VolumeWitness written with the Go SDK (``outrigger-volumewitness``, NeedsVolumes) sees a pod's volumes
  and the claims, volumes and classes of its mirror after every change, with the same verdicts as the
  Python one (tests/test_remote_volumes.py's steps).
- kube-scheduler's own VolumeZone, served by the kube adapter (``outrigger-kube-plugins --prefix
  Upstream``), whose Handle's PVC/PV/StorageClass listers the adapter fills from the mirror, agrees
  with Outrigger's in-process VolumeZone, message for message.

The binaries are built as tests/test_go_plugins.py builds them; the tests skip when ``go`` is missing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_go_plugins import GoHost, _build, _go, kube_plugins  # noqa: F401 (kube_plugins is a fixture)
from test_remote_volumes import (
    VOLUME_PLUGINS,
    WITNESS_STEPS,
    ZONE_STEPS,
    ZONE_WANT,
    in_process_steps,
    remote_steps,
)


@pytest.fixture(scope="module")
def volumewitness() -> Path:
    return _build(_go(), "outrigger-volumewitness")


def test_go_plugin_sees_pod_volumes_and_storage_objects_after_each_change(volumewitness: Path) -> None:
    steps = [(what, change) for what, change, _ in WITNESS_STEPS]
    with GoHost(volumewitness) as host:
        got = asyncio.run(remote_steps(host.address, ["VolumeWitness"], VOLUME_PLUGINS, steps))
    assert got == [want for _, _, want in WITNESS_STEPS]


def test_upstream_volume_zone_through_the_go_adapter_agrees_with_in_process(kube_plugins: Path) -> None:  # noqa: F811
    assert in_process_steps(ZONE_STEPS) == ZONE_WANT
    with GoHost(kube_plugins, "--prefix", "Upstream") as host:
        got = asyncio.run(remote_steps(host.address, ["UpstreamVolumeZone"], ["VolumeZone"], ZONE_STEPS))
    assert got == ZONE_WANT
