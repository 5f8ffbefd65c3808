"""What the allocator keeps between cycles (the store's ``derived``: slices by node, each node's pools,
selector results per device): allocators sharing it answer exactly as fresh ones do, and a slice change
starts it afresh."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from framework.dra.allocator import Allocation, Allocator
from framework.dra.store import DraStore
from pluginhost.model import Node
from tests.test_dra_allocator import CLASSES, DRV, claim, dclass, dev, exact, rslice
from tools.bench.dra import run

N1, N2, N3 = Node(name="n1", labels={"zone": "a"}), Node(name="n2", labels={"zone": "b"}), Node(name="n3")
SLICES = [
    rslice("s1", [dev("g0"), dev("g1", "t4", "16Gi")], pool="p1", node="n1"),
    rslice("s2", [dev("g0", "t4", "16Gi"), dev("g1")], pool="p2", node="n2"),
]
ZONED = rslice("z", [dev("shared-0")], pool="pz", node=None,
               nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [
                   {"key": "zone", "operator": "In", "values": ["a"]}]}]})
BROKEN = f'device.attributes["{DRV}"].missing == 1'


def _devices(answer: Allocation) -> list[str] | str:
    if answer.results is None:
        return answer.error or "none"
    return [f"{r.pool}/{r.device}" for result in answer.results for r in result.results]


@pytest.mark.parametrize(("slices", "node", "claims", "want"), [
    (SLICES, N1, [claim(exact("r"))], ["p1/g0"]),
    (SLICES, N2, [claim(exact("r"))], ["p2/g0"]),
    (SLICES, N2, [claim(exact("r", "small"))], ["p2/g0"]),
    (SLICES, N1, [claim(exact("r", "small"), name="c1"), claim(exact("r", "small"), name="c2")], "none"),
    (SLICES, N3, [claim(exact("r"))], "none"),
    (SLICES, N1, [claim(exact("r", selectors=[BROKEN]))],
     f"claim ns/c1: selector #0 on device {DRV}/p1/g0: CEL runtime error: no such key: missing. consider "
     "using CEL optional chaining (.? followed by orValue()) or guarding the check with has() for optional "
     "fields"),
    ([*SLICES, ZONED], N1, [claim(exact("r", count=3))], ["p1/g0", "p1/g1", "pz/shared-0"]),
    ([*SLICES, ZONED], N2, [claim(exact("r", count=3))], "none"),
    ([*SLICES, ZONED], Node(name="n1", labels={"zone": "b"}), [claim(exact("r", count=3))], "none"),
])
def test_a_shared_cache_answers_as_a_fresh_allocator(slices: list[Any], node: Node, claims: list[Any],
                                                     want: list[str] | str) -> None:
    derived: dict[object, object] = {}
    # Every node first, so that the answer asked for comes from what the others left in the cache.
    for other in (N1, N2, N3, Node(name="n1", labels={"zone": "b"})):
        Allocator(slices, CLASSES, (), None, derived).allocate(other, claims)
    shared = Allocator(slices, CLASSES, (), None, derived).allocate(node, claims)
    fresh = Allocator(slices, CLASSES).allocate(node, claims)
    assert (_devices(shared), shared == fresh) == (want, True)


def test_the_store_starts_the_cache_afresh_when_a_slice_changes_only() -> None:
    store = DraStore()
    store.put(SLICES[0])
    before = store.derived
    store.put(dclass("other", "true"))
    store.put(claim(exact("r")))
    kept = store.derived is before
    store.put(rslice("s1", [dev("g0", "t4", "16Gi"), dev("g1", "t4", "16Gi")], pool="p1", node="n1"))
    updated = store.derived is not before
    after_update = store.derived
    store.remove("ResourceSlice", "", "s1")
    assert (kept, updated, store.derived is not after_update, store.derived) == (True, True, True, {})


def test_a_changed_slice_is_read_afresh_by_the_next_allocator() -> None:
    store = DraStore()
    store.put(SLICES[0])
    claims = [claim(exact("r", "small"))]

    def answer() -> list[str] | str:
        return _devices(Allocator(list(store.slices.values()), CLASSES, (), None, store.derived).allocate(N1, claims))

    first = answer()
    store.put(rslice("s1", [dev("g0", "t4", "16Gi"), dev("g1")], pool="p1", node="n1"))
    second = answer()
    store.put(rslice("s1", [dev("g0"), dev("g1")], pool="p1", node="n1"))
    assert (first, second, answer()) == (["p1/g1"], ["p1/g0"], "none")


def test_the_dra_bench_binds_every_pod_and_refuses_more_claims_than_devices() -> None:
    out = asyncio.run(asyncio.wait_for(run(nodes=3, devices=2, init=3, pods=3), 60))
    proc = subprocess.run([sys.executable, "-m", "tools.bench.dra", "--nodes", "2", "--devices", "1", "--init", "3"],
                          capture_output=True, text=True, timeout=60, cwd=Path(__file__).parent.parent)
    assert (out["bound"], proc.returncode, proc.stderr.splitlines()[-1]) == (
        3, 2, "python -m tools.bench.dra: error: --init 3: more claims than the 2 devices")
