"""The store's devices in use (framework/dra/inuse.py) are kept as claims change: after any sequence
of source updates, deletions, pending allocations, assumed writes and restores, allocated_state equals
a recount over every claim read and every pending allocation (kube-scheduler's GatherAllocatedState)."""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

import pytest
from dra_fixtures import DRIVER, allocated, claim

from framework.dra.models import DeviceID, ResourceClaim
from framework.dra.store import DraStore

NAMES = ("a", "b", "c", "d")


def _recount(store: DraStore) -> tuple[set[DeviceID], dict[DeviceID, dict[str, Fraction]]]:
    exclusive: set[DeviceID] = set()
    shared: dict[DeviceID, dict[str, Fraction]] = {}
    # Every claim's uid is uid-<name>; a pending allocation counts even when its claim is gone.
    pending = [c for c in (store.pending(f"uid-{n}") for n in NAMES) if c is not None]
    read = [c for c in store.all_claims() if store.pending(c.uid) is None]
    for c in [*read, *pending]:
        for r in c.allocation.results if c.allocation is not None else ():
            device = (r.driver, r.pool, r.device)
            if r.share_id:
                used = shared.setdefault(device, {})
                for name, q in (r.consumed_capacity or {}).items():
                    used[name] = used.get(name, Fraction(0)) + q
            elif not r.admin_access:
                exclusive.add(device)
    return exclusive, shared


def _status(rng: random.Random) -> dict[str, Any] | None:
    kind = rng.randrange(4)
    device = f"gpu-{rng.randrange(3)}"
    if kind == 0:
        return None
    if kind == 1:
        return allocated(device)
    if kind == 2:
        return allocated(device, adminAccess=True)
    return allocated(device, shareID=str(rng.randrange(100)), consumedCapacity={"mem": f"{rng.randrange(1, 4)}Gi"})


def _step(store: DraStore, rng: random.Random, rv: list[int]) -> None:
    name = rng.choice(NAMES)
    op = rng.randrange(6)
    rv[0] += 1
    current = store.claim("ns", name)
    if op == 0:
        store.apply("ResourceClaim", claim(name, rv=str(rv[0]), status=_status(rng)))
    elif op == 1:
        store.remove("ResourceClaim", "ns", name)
    elif op == 2 and current is not None:
        pending = store.decode("ResourceClaim", claim(name, rv=current.resource_version,
                                                      status=allocated(f"gpu-{rng.randrange(3)}")))
        assert isinstance(pending, ResourceClaim)
        store.signal_pending(pending)
    elif op == 3:
        store.drop_pending(f"uid-{name}", force=rng.random() < 0.5)
    elif op == 4 and current is not None:
        written = store.decode("ResourceClaim", claim(name, rv=str(rv[0]), status=_status(rng)))
        assert isinstance(written, ResourceClaim)
        store.assume(written)
    elif op == 5:
        store.restore(f"ns/{name}")


@pytest.mark.parametrize("seed", range(40))
def test_allocated_state_equals_a_recount_after_every_change(seed: int) -> None:
    rng = random.Random(seed)
    store = DraStore()
    rv = [10]
    for _ in range(60):
        _step(store, rng, rv)
        exclusive, shared = store.allocated_state()
        assert (set(exclusive), shared) == _recount(store)


def test_shares_and_capacity_go_when_their_last_claim_does() -> None:
    store = DraStore()
    store.apply("ResourceClaim", claim("s1", status=allocated("gpu-2", shareID="1", consumedCapacity={"mem": "4Gi"})))
    store.apply("ResourceClaim", claim("s2", status=allocated("gpu-2", shareID="2")))
    store.apply("ResourceClaim", claim("x", status=allocated("gpu-0")))
    gpu0, gpu2 = (DRIVER, "n0", "gpu-0"), (DRIVER, "n0", "gpu-2")
    assert store.allocated_state() == (frozenset({gpu0}), {gpu2: {"mem": Fraction(4 * 2**30)}})
    store.remove("ResourceClaim", "ns", "s1")
    assert store.allocated_state() == (frozenset({gpu0}), {gpu2: {}})
    store.remove("ResourceClaim", "ns", "s2")
    store.apply("ResourceClaim", claim("x", rv="11"))
    assert store.allocated_state() == (frozenset(), {})
