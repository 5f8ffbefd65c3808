"""The DRA store (framework/dra/store.py): strict application of the four kinds, the listeners a
source's changes reach the scheduler through, the allocations Reserve keeps pending and PreBind's
writes assume, and the embedded writer's conflicts."""

from __future__ import annotations

import asyncio
from fractions import Fraction
from typing import Any

import pytest
from dra_fixtures import DRIVER, allocated, claim, device, device_class, node_slice

from framework.cache import Cache
from framework.dra.models import ResourceClaim
from framework.dra.store import FINALIZER, DraConflict, DraDecodeError, DraStore

BAD = [  # (kind, object, the error)
    ("ResourceClaim", claim("x", {"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": "2"}}),
     "ResourceClaim ns/x: spec.devices.requests[0].exactly.count: expected an integer, got string"),
    ("ResourceClaim", {**claim("x"), "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {},
                                                                         "firstAvailable": []}]}}},
     "ResourceClaim ns/x: spec.devices.requests[0].exactly.deviceClassName: required field is missing"),
    ("DeviceClass", {**device_class(), "spec": {"selector": []}}, 'DeviceClass gpu: unknown field "spec.selector"'),
    ("ResourceSlice", {**node_slice("n0"), "spec": {**node_slice("n0")["spec"], "allNodes": True}},
     "ResourceSlice n0-gpus: spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is "
     "required, got 2"),
    ("PersistentVolume", {"metadata": {"name": "pv"}},
     "PersistentVolume: kind: expected one of ResourceClaim, ResourceClaimTemplate, DeviceClass, ResourceSlice, "
     "DeviceTaintRule"),
]


@pytest.mark.parametrize(("kind", "obj", "error"), BAD)
def test_a_bad_object_is_named_and_changes_nothing(kind: str, obj: dict[str, Any], error: str) -> None:
    store = DraStore()
    heard: list[Any] = []
    store.add_listener(lambda *a: heard.append(a))
    with pytest.raises(DraDecodeError) as exc:
        store.apply(kind, obj)
    assert str(exc.value) == error
    assert (len(store), heard, store.generation) == (0, [], 0)


def test_listeners_hear_additions_updates_and_deletions_by_kind() -> None:
    store = DraStore()
    heard: list[tuple[str, str | None, str | None]] = []
    store.add_listener(lambda kind, old, new: heard.append(
        (kind, None if old is None else old.name, None if new is None else new.name)))
    store.apply("DeviceClass", device_class())
    store.apply("ResourceSlice", node_slice("n0", device("gpu-0")))
    store.apply("ResourceClaim", claim("c"))
    store.apply("ResourceClaim", claim("c", rv="11"))
    assert store.remove("ResourceClaim", "ns", "c") is not None
    assert store.remove("ResourceClaim", "ns", "c") is None
    assert store.remove("DeviceClass", "", "gpu") is not None
    assert heard == [("DeviceClass", None, "gpu"), ("ResourceSlice", None, "n0-gpus"), ("ResourceClaim", None, "c"),
                     ("ResourceClaim", "c", "c"), ("ResourceClaim", "c", None), ("DeviceClass", "gpu", None)]


def test_the_cache_and_its_snapshots_share_one_store() -> None:
    cache = Cache()
    cache.dra.apply("DeviceClass", device_class())
    assert cache.snapshot().dra is cache.dra and list(cache.dra.classes) == ["gpu"]


def test_an_assumed_claim_reads_until_the_source_catches_up() -> None:
    store = DraStore()
    store.apply("ResourceClaim", claim("c", rv="10"))
    written = store.decode("ResourceClaim", claim("c", rv="12", status=allocated("gpu-0")))
    store.assume(written)  # type: ignore[arg-type]
    assert store.claim("ns", "c") is written
    store.apply("ResourceClaim", claim("c", rv="11"))  # older than the write: the write still reads
    assert store.claim("ns", "c") is written
    store.apply("ResourceClaim", claim("c", rv="12", status=allocated("gpu-0")))
    current = store.claim("ns", "c")
    assert current is not written and current is not None and current.allocation is not None
    store.assume(written)  # not newer than the source's: nothing to assume
    assert store.claim("ns", "c") is current


def test_allocated_state_counts_exclusive_shared_and_pending_devices() -> None:
    store = DraStore()
    store.apply("ResourceClaim", claim("a", status=allocated("gpu-0")))
    store.apply("ResourceClaim", claim("admin", status=allocated("gpu-1", adminAccess=True)))
    store.apply("ResourceClaim", claim("s1", status=allocated("gpu-2", shareID="1", consumedCapacity={"mem": "4Gi"})))
    store.apply("ResourceClaim", claim("s2", status=allocated("gpu-2", shareID="2", consumedCapacity={"mem": "2Gi"})))
    store.apply("ResourceClaim", claim("p"))
    pending = store.decode("ResourceClaim", claim("p", status=allocated("gpu-3")))
    store.signal_pending(pending)  # type: ignore[arg-type]
    exclusive, shared = store.allocated_state()
    assert exclusive == {(DRIVER, "n0", "gpu-0"), (DRIVER, "n0", "gpu-3")}
    assert shared == {(DRIVER, "n0", "gpu-2"): {"mem": Fraction(6 * 2**30)}}


def test_a_pending_allocation_lasts_while_a_pod_shares_it() -> None:
    store = DraStore()
    store.apply("ResourceClaim", claim("c"))
    pending = store.decode("ResourceClaim", claim("c", status=allocated("gpu-0")))
    store.signal_pending(pending)  # type: ignore[arg-type]
    store.signal_pending(pending)  # type: ignore[arg-type]
    assert store.drop_pending("uid-c") is False and store.pending("uid-c") is pending
    assert store.drop_pending("uid-c") is True and store.pending("uid-c") is None
    store.signal_pending(pending)  # type: ignore[arg-type]
    store.signal_pending(pending)  # type: ignore[arg-type]
    assert store.drop_pending("uid-c", force=True) is True and store.drop_pending("uid-c") is False


def test_a_claim_allocated_already_is_not_made_pending() -> None:
    store = DraStore()
    store.apply("ResourceClaim", claim("c", status=allocated("gpu-0")))
    store.signal_pending(store.decode("ResourceClaim", claim("c", status=allocated("gpu-1"))))  # type: ignore[arg-type]
    assert store.pending("uid-c") is None


def test_the_embedded_writer_stores_a_new_version_with_the_finalizer() -> None:
    store = DraStore()
    store.apply("ResourceClaim", claim("c"))
    c = store.claim("ns", "c")
    assert c is not None
    written = asyncio.run(store.writer.write_claim_status(c, allocated("gpu-0", reserved=(("p", "u"),))))
    assert store.claim("ns", "c") is written
    assert (written.finalizers, written.reserved_for) == ((FINALIZER,), (("pods", "p", "u"),))
    assert int(written.resource_version) > int(c.resource_version)
    cleared = asyncio.run(store.writer.write_claim_status(written, {}))
    assert (cleared.allocation, cleared.finalizers, "status" in cleared.raw) == (None, (FINALIZER,), False)


@pytest.mark.parametrize(("change", "error"), [
    ("modified", 'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "c": the object has been '
                 "modified; please apply your changes to the latest version and try again"),
    ("deleted", 'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "c": the object has been deleted '
                "or replaced"),
    ("replaced", 'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "c": the object has been deleted '
                 "or replaced"),
])
def test_the_embedded_writer_refuses_a_stale_claim(change: str, error: str) -> None:
    store = DraStore()
    store.apply("ResourceClaim", claim("c"))
    stale = store.claim("ns", "c")
    assert stale is not None
    if change == "modified":
        store.apply("ResourceClaim", claim("c", rv="11"))
    elif change == "deleted":
        store.remove("ResourceClaim", "ns", "c")
    else:
        store.apply("ResourceClaim", claim("c", uid="another", rv="11"))
    before = store.claim("ns", "c")
    with pytest.raises(DraConflict) as exc:
        asyncio.run(store.writer.write_claim_status(stale, allocated("gpu-0")))
    assert str(exc.value) == error and store.claim("ns", "c") is before


UNRESERVE = [
    # (name, what happens to the claim after it was read, the pods reserved after, the stored version; None: gone)
    ("one of two removed", None, ["u2"], "1000000001"),
    ("the last one removed", "only", [], "1000000001"),
    ("changed by someone else since read: no version check", "modified", ["u2"], "1000000001"),
    ("not reserved for the pod: nothing written", "other", ["u2"], "11"),
    ("deleted", "deleted", None, None),
    ("replaced by a claim of another uid", "replaced", None, None),
]


@pytest.mark.parametrize(("change", "left", "rv"), [c[1:] for c in UNRESERVE], ids=[c[0] for c in UNRESERVE])
def test_the_embedded_writer_unreserves_by_the_pods_uid_without_a_version_check(
        change: str | None, left: list[str] | None, rv: str | None) -> None:
    store = DraStore()
    store.apply("ResourceClaim", claim("c", status=allocated("gpu-0", reserved=(("p1", "u1"), ("p2", "u2")))))
    read = store.claim("ns", "c")
    assert read is not None
    if change in ("modified", "other", "only"):
        reserved = {"modified": (("p1", "u1"), ("p2", "u2")), "other": (("p2", "u2"),), "only": (("p1", "u1"),)}
        store.apply("ResourceClaim", claim("c", status=allocated("gpu-0", reserved=reserved[change]), rv="11"))
    elif change == "deleted":
        store.remove("ResourceClaim", "ns", "c")
    elif change == "replaced":
        store.apply("ResourceClaim", claim("c", uid="another", rv="11", status=allocated("gpu-0", reserved=(
            ("p1", "u1"),))))
    before = store.claim("ns", "c")
    stored = asyncio.run(store.writer.unreserve(read, "u1"))
    if left is None:
        assert stored is None and store.claim("ns", "c") is before
        return
    assert stored is not None and store.claim("ns", "c") is stored
    assert ([r[2] for r in stored.reserved_for], stored.resource_version) == (left, rv)
    assert stored.allocation is not None and [r.device for r in stored.allocation.results] == ["gpu-0"]


@pytest.mark.parametrize(("stored", "given", "want"), [
    pytest.param(("uid-c", "12"), ("uid-c", "10"), "12", id="the-store-has-a-newer-version"),
    pytest.param(("uid-c", "10"), ("uid-c", "10"), "10", id="the-same-version"),
    pytest.param(("uid-c", "9"), ("uid-c", "10"), "10", id="the-given-claim-is-newer"),
    pytest.param(("uid-other", "12"), ("uid-c", "10"), "10", id="a-new-claim-of-that-name"),
    pytest.param(None, ("uid-c", "10"), "10", id="not-in-the-store"),
])
def test_latest_is_the_newer_of_a_claim_and_the_stores_version_of_it(
        stored: tuple[str, str] | None, given: tuple[str, str], want: str) -> None:
    store = DraStore()
    if stored is not None:
        store.apply("ResourceClaim", claim("c", uid=stored[0], rv=stored[1]))
    mine = DraStore.decode("ResourceClaim", claim("c", uid=given[0], rv=given[1]))
    assert isinstance(mine, ResourceClaim)
    got = store.latest(mine)
    assert (got.uid, got.resource_version) == (given[0], want)


def test_writes_of_one_claim_go_one_at_a_time_and_other_claims_do_not_wait() -> None:
    store = DraStore()
    order: list[str] = []

    async def write(key: str, name: str) -> None:
        async with store.writing(key):
            order.append(f"{name} starts")
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            order.append(f"{name} ends")

    async def main() -> None:
        await asyncio.gather(write("ns/a", "a1"), write("ns/a", "a2"), write("ns/b", "b1"), write("ns/a", "a3"))

    asyncio.run(main())
    assert order == ["a1 starts", "b1 starts", "a1 ends", "b1 ends", "a2 starts", "a2 ends", "a3 starts", "a3 ends"]
    assert store._writing == {}  # no lock is kept for a claim nobody writes


def test_a_failed_write_lets_the_next_writer_of_the_claim_go() -> None:
    store = DraStore()

    async def fail() -> None:
        async with store.writing("ns/a"):
            await asyncio.sleep(0)
            raise DraConflict("the object has been modified")

    async def main() -> list[Any]:
        async def then() -> str:
            async with store.writing("ns/a"):
                return "written"
        return list(await asyncio.gather(fail(), then(), return_exceptions=True))

    first, second = asyncio.run(main())
    assert (type(first), str(first), second) == (DraConflict, "the object has been modified", "written")
    assert store._writing == {}
