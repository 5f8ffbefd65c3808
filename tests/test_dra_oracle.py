"""Outrigger's DRA allocator (framework/dra) against kube-scheduler's own, v0.37.2's
``k8s.io/dynamic-resource-allocation/structured``, built from the Go module proxy by tools/dracompare:
random ResourceSlices, DeviceClasses, ResourceClaims and devices already allocated go through both, and
every case must end with the same devices allocated, or the same error text, or no allocation in both."""

from __future__ import annotations

import pytest

from tools.dracompare.__main__ import main


@pytest.mark.parametrize("seed", [11, 12])
def test_the_allocator_picks_what_kube_schedulers_picks(seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--cases", "400", "--seed", str(seed), "--show", "3"])
    out, err = capsys.readouterr()
    summary = err.strip().splitlines()[-1]
    assert summary.startswith("400 cases (") and summary.endswith("): 0 differ"), out[:4000]
    # The seeds reach allocations, not only failures on both sides.
    allocated = int(summary.split("(")[1].split()[0])
    assert allocated >= 20, summary
    assert code == 0
