"""Each node's free devices kept in the store's in-use tally (framework/dra/inuse.py) for the
allocator's fast path: a change to a device's use or to a slice drops the lists of the nodes whose
pools it touches and keeps the others' (the same objects), and the answers after every change are
the general search's over the store as it is then."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from dra_fixtures import DRIVER, allocated, claim, device, device_class, node_slice, taint_rule

from framework.dra.allocator import Allocation, Allocator
from framework.dra.inuse import InUse
from framework.dra.models import ResourceClaim
from framework.dra.store import DraStore
from pluginhost.model import Node

NODES = [Node(name=n) for n in ("n1", "n2", "n3")]
DEVICES = (device("g0"), device("g1"), device("g2"))


def _decoded(doc: dict[str, Any]) -> ResourceClaim:
    c = DraStore.decode("ResourceClaim", doc)
    assert isinstance(c, ResourceClaim)
    return c


def _store() -> DraStore:
    store = DraStore()
    store.apply("DeviceClass", device_class())
    for n in NODES:
        store.apply("ResourceSlice", node_slice(n.name, *DEVICES))
    store.apply("ResourceClaim", claim("held", status=allocated("g0", node="n2")))
    store.apply("ResourceClaim", claim("c"))
    return store


def _devices(answer: Allocation) -> Any:
    results = answer.deferred() if answer.deferred is not None else answer.results
    if results is None:
        return answer.error or "none"
    return [[(r.pool, r.device) for r in result.results] for result in results]


def _answers(store: DraStore, kept: bool) -> dict[str, Any]:
    """Each node's answer for claim c: through the kept lists, or by the general search alone."""
    exclusive, shared = store.allocated_state()
    pod_claim = store.claim("ns", "c")
    assert pod_claim is not None
    allocator = Allocator(list(store.slices.values()), store.classes, exclusive, shared, store.derived,
                          fast=kept, tally=store.in_use if kept else None)
    answers = allocator.allocate_each(NODES, [pod_claim], defer=kept)
    return {n.name: _devices(a) for n, a in zip(NODES, answers, strict=True)}


def _pending(store: DraStore, name: str, status: dict[str, Any]) -> None:
    store.signal_pending(_decoded(claim(name, status=status)))


# name, the change, the nodes whose lists it drops
CHANGES: list[tuple[str, Callable[[DraStore], object], set[str]]] = [
    ("a device of n1 taken", lambda s: _pending(s, "x", allocated("g0", node="n1")), {"n1"}),
    ("a device of n2 freed", lambda s: s.remove("ResourceClaim", "ns", "held"), {"n2"}),
    ("a claim written again holding the same device",
     lambda s: s.apply("ResourceClaim", claim("held", rv="11", status=allocated("g0", node="n2"))), set()),
    ("a device of n1 taken with admin access",
     lambda s: _pending(s, "x", allocated("g0", node="n1", adminAccess=True)), set()),
    ("a share of a device of n3 consumed", lambda s: _pending(
        s, "x", allocated("g1", node="n3", shareID="1", consumedCapacity={"memory": "1Gi"})), {"n3"}),
    ("a slice of n3 changed", lambda s: s.apply("ResourceSlice", node_slice("n3", device("g1"), device("g2"))),
     {"n3"}),
    ("a slice of n3 deleted", lambda s: s.remove("ResourceSlice", "", "n3-gpus"), {"n3"}),
    ("a slice of a new pool for n1", lambda s: s.apply("ResourceSlice", {
        **node_slice("n1", device("e0"), name="n1-extra"),
        "spec": {"driver": DRIVER, "nodeName": "n1", "pool": {"name": "extra", "generation": 1,
                                                             "resourceSliceCount": 1}, "devices": [device("e0")]}}),
     {"n1"}),
    ("a slice of n2's pool on another node", lambda s: s.apply("ResourceSlice", {
        **node_slice("n9", device("g7"), name="n9-of-n2"),
        "spec": {"driver": DRIVER, "nodeName": "n9", "pool": {"name": "n2", "generation": 1,
                                                             "resourceSliceCount": 1}, "devices": [device("g7")]}}),
     {"n2"}),
    ("a slice for all nodes", lambda s: s.apply("ResourceSlice", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "everywhere"},
        "spec": {"driver": DRIVER, "allNodes": True, "pool": {"name": "shared", "generation": 1,
                                                             "resourceSliceCount": 1}, "devices": [device("s0")]}}),
     {"n1", "n2", "n3"}),
    ("a device class added", lambda s: s.apply("DeviceClass", device_class("other")), set()),
    ("a DeviceTaintRule tainting a device of n1", lambda s: s.apply("DeviceTaintRule", taint_rule(
        "broken", driver=DRIVER, pool="n1", device="g0")), {"n1"}),
    ("a DeviceTaintRule of effect None on n3's pool (the taints change)", lambda s: s.apply(
        "DeviceTaintRule", taint_rule("watch", "None", pool="n3")), {"n3"}),
    ("a DeviceTaintRule selecting no device", lambda s: s.apply("DeviceTaintRule", taint_rule(
        "none", pool="n1", device="g9")), set()),
    ("a DeviceTaintRule of another driver", lambda s: s.apply("DeviceTaintRule", taint_rule(
        "other", driver="nic.example.com")), set()),
]


@pytest.mark.parametrize(("change", "dropped"), [pytest.param(c, d, id=n) for n, c, d in CHANGES])
def test_a_change_drops_the_lists_of_the_nodes_it_touches_only(
        change: Callable[[DraStore], object], dropped: set[str]) -> None:
    store = _store()
    assert _answers(store, True) == {"n1": [[("n1", "g0")]], "n2": [[("n2", "g1")]], "n3": [[("n3", "g0")]]}
    before = {n.name: store.in_use.kept(n.name) for n in NODES}
    assert all(len(lists) == 1 for lists in before.values())
    change(store)
    after = {n.name: store.in_use.kept(n.name) for n in NODES}
    assert {n for n in after if not after[n]} == dropped
    assert all(after[n][0] is before[n][0] for n in after if n not in dropped)
    assert _answers(store, True) == _answers(store, False)


def test_answers_follow_every_pod_that_takes_a_device() -> None:
    store = _store()
    for i in range(8):
        want = _answers(store, False)
        assert _answers(store, True) == want
        if i == 7:  # 7 of the 9 devices held (1 before, 7 pods, the first node with one each time)
            assert want == {"n1": "none", "n2": "none", "n3": [[("n3", "g2")]]}
        node = next(n for n in ("n1", "n2", "n3") if want[n] != "none")
        _pending(store, f"p{i}", allocated(want[node][0][0][1], node=node))
    assert _answers(store, True) == {"n1": "none", "n2": "none", "n3": "none"}


def test_an_allocator_older_than_a_change_neither_uses_nor_fills_the_lists() -> None:
    store = _store()
    exclusive, shared = store.allocated_state()
    pod_claim = store.claim("ns", "c")
    assert pod_claim is not None
    old = Allocator(list(store.slices.values()), store.classes, exclusive, shared, store.derived,
                    tally=store.in_use)
    _pending(store, "x", allocated("g0", node="n1"))
    # It answers from what it read (n1's g0 free then), and keeps nothing of it.
    assert [_devices(a) for a in old.allocate_each(NODES, [pod_claim], defer=True)] == [
        [[("n1", "g0")]], [[("n2", "g1")]], [[("n3", "g0")]]]
    assert [store.in_use.kept(n.name) for n in NODES] == [[], [], []]
    assert _answers(store, True) == {"n1": [[("n1", "g1")]], "n2": [[("n2", "g1")]], "n3": [[("n3", "g0")]]}


def test_request_shapes_kept_are_bounded_oldest_first() -> None:
    tally = InUse()
    for i in range(65):
        tally.keep(("shape", i), "n1", [(DRIVER, "n1")], i)
    assert tally.kept("n1") == list(range(1, 65))


def test_every_answer_of_a_whole_run_is_the_general_search_s(monkeypatch: pytest.MonkeyPatch) -> None:
    # tools.bench.dra's shape, scaled down until nodes fill up: every node DynamicResources' Filter is
    # asked about, in every cycle, answers as the general search over the same state would.
    import asyncio

    from tools.bench import dra

    asked = {"fits": 0, "short": 0}
    wrong: list[str] = []
    real = Allocator.allocate_each

    def checked(self: Allocator, nodes: Any, claims: Any, timeout: float = 0.0, defer: bool = False) -> Any:
        answers = real(self, nodes, claims, timeout, defer)
        search = Allocator(self.slices, self.classes, self.allocated, self.shared, fast=False)
        for node, answer in zip(nodes, answers, strict=True):
            want = search.allocate(node, claims)
            if (answer.deferred() if answer.deferred is not None else answer.results) != want.results:
                wrong.append(node.name)
            asked["fits" if want.results is not None else "short"] += 1
        return answers

    monkeypatch.setattr(Allocator, "allocate_each", checked)
    monkeypatch.setattr(dra, "_LIMIT", 60.0)  # wrong answers would leave pods unbound: the run ends
    out = asyncio.run(dra.run(nodes=12, devices=4, init=24, pods=24))
    assert (wrong, out["bound"]) == ([], 24)  # the 48 devices: 24 held from the start, then every one taken
    assert asked["fits"] > 0 and asked["short"] > 0
