"""The allocator's fast path (framework/dra/fastpath.py) gives exactly the general search's answer: per
request shape, the devices picked (or the failure), with the fast path on and off, and whether the fast
path answered or handed over to the general search."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from framework.dra import fastpath
from framework.dra.allocator import MAX_RESULTS, Allocation, Allocator
from framework.dra.models import DeviceClass
from pluginhost.model import Node
from tests.test_dra_allocator import CLASSES, DRV, NO_SCHEDULE, TWO, claim, dclass, dev, exact, rslice, sub, with_

N1 = Node(name="n1", labels={"zone": "a"})
CLASSES_X = {**CLASSES, "nomatch": dclass("nomatch", "false")}
BROKEN = f'device.attributes["{DRV}"].missing == 1'
EIGHT = [rslice("s1", [dev(f"g{i}", "t4" if i % 2 else "a100") for i in range(8)])]
#: Two pools on the node, named against the search order (driver, then pool; slices by name).
POOLS = [
    rslice("z-slice", [dev("b0"), dev("b1")], pool="pb"),
    rslice("b-slice", [dev("a2")], pool="pa", count=2),
    rslice("a-slice", [dev("a0"), dev("a1")], pool="pa", count=2),
]
INCOMPLETE = [rslice("half", [dev("h0")], pool="p0", count=2), rslice("s1", [dev("g0")])]
INVALID = [rslice("bad", [dev("d0"), dev("d0")], pool="p0"), rslice("s1", [dev("g0"), dev("g1")])]
ALL_NODES = [rslice("s1", [dev("g0")]), rslice("everywhere", [dev("e0")], pool="pe", node=None, allNodes=True)]
PER_DEVICE = [rslice("s1", [with_(dev("g0"), nodeName="n1")], node=None, perDeviceNodeSelection=True)]
TAINTED = [rslice("s1", [with_(dev("g0"), taints=[NO_SCHEDULE]), dev("g1")])]
SOFT_TAINT = [rslice("s1", [with_(dev("g0"), taints=[{"key": "k", "effect": "None"}]), dev("g1")])]
MULTI = [rslice("s1", [with_(dev("g0"), allowMultipleAllocations=True), dev("g1")])]
BINDING = [rslice("s1", [with_(dev("g0"), bindingConditions=["ready"], bindingFailureConditions=["failed"])])]

# name, slices, claims, devices in use, want (per claim: (request, pool, device)...; or the error; or
# "none"), whether the fast path answers (False: it hands over to the general search)
CASES: list[tuple[str, list[Any], list[Any], list[tuple[str, str, str]], Any, bool]] = [
    ("one device", TWO, [claim(exact("r"))], [], [[("r", "p1", "g0")]], True),
    ("count 3 around devices in use", EIGHT, [claim(exact("r", count=3))], [(DRV, "p1", "g1"), (DRV, "p1", "g2")],
     [[("r", "p1", "g0"), ("r", "p1", "g3"), ("r", "p1", "g4")]], True),
    ("class selector", EIGHT, [claim(exact("r", "small", count=2))], [(DRV, "p1", "g1")],
     [[("r", "p1", "g3"), ("r", "p1", "g5")]], True),
    ("request selector", EIGHT, [claim(exact("r", selectors=[f'device.attributes["{DRV}"].model == "a100"']))],
     [(DRV, "p1", "g0")], [[("r", "p1", "g2")]], True),
    ("pools by name, slices by name", POOLS, [claim(exact("r", count=4))], [],
     [[("r", "pa", "a0"), ("r", "pa", "a1"), ("r", "pa", "a2"), ("r", "pb", "b0")]], True),
    ("an incomplete pool is skipped", INCOMPLETE, [claim(exact("r"))], [], [[("r", "p1", "g0")]], True),
    ("an invalid pool is skipped", INVALID, [claim(exact("r"))], [], [[("r", "p1", "g0")]], True),
    ("an invalid pool fails the node", INVALID, [claim(exact("r", count=3))], [],
     "invalid resource pools were encountered", True),
    ("not enough devices", TWO, [claim(exact("r", count=3))], [(DRV, "p1", "g0"), (DRV, "p1", "g1")], "none", True),
    ("no device matches", TWO, [claim(exact("r", "nomatch"))], [], "none", True),
    ("two requests, first picks suit both", EIGHT, [claim(exact("a", count=2), exact("b", "small"))], [],
     [[("a", "p1", "g0"), ("a", "p1", "g1"), ("b", "p1", "g3")]], True),
    ("two requests, the search must go back", TWO, [claim(exact("a", count=2), exact("b", "small", count=2))], [],
     [[("a", "p1", "g0"), ("a", "p1", "g2"), ("b", "p1", "g1"), ("b", "p1", "g3")]], False),
    ("two requests, none fits", TWO, [claim(exact("a", count=3), exact("b", "small", count=2))], [], "none", False),
    ("two claims", EIGHT, [claim(exact("r", count=2)), claim(exact("r", "small"), name="c2")], [(DRV, "p1", "g0")],
     [[("r", "p1", "g1"), ("r", "p1", "g2")], [("r", "p1", "g3")]], True),
    ("two claims, the second short", TWO, [claim(exact("r", count=3)), claim(exact("r", "small", count=2),
                                                                             name="c2")], [], "none", False),
    ("binding conditions carried", BINDING, [claim(exact("r"))], [], [[("r", "p1", "g0")]], True),
    ("a soft taint is no matter", SOFT_TAINT, [claim(exact("r"))], [], [[("r", "p1", "g0")]], True),
    ("a NoSchedule taint", TAINTED, [claim(exact("r"))], [], [[("r", "p1", "g1")]], False),
    ("a device shared by several claims", MULTI, [claim(exact("r"))], [], [[("r", "p1", "g0")]], False),
    ("a slice for all nodes", ALL_NODES, [claim(exact("r", count=2))], [], [[("r", "p1", "g0"), ("r", "pe", "e0")]],
     False),
    ("per-device node selection", PER_DEVICE, [claim(exact("r"))], [], [[("r", "p1", "g0")]], False),
    ("firstAvailable", TWO, [claim({"name": "r", "firstAvailable": [sub("x", "small"), sub("y")]})], [],
     [[("r/x", "p1", "g1")]], False),
    ("a constraint", EIGHT, [claim(exact("r", count=2), constraints=[{"matchAttribute": f"{DRV}/model"}])], [],
     [[("r", "p1", "g0"), ("r", "p1", "g2")]], False),
    ("admin access", TWO, [claim(exact("r", adminAccess=True))], [(DRV, "p1", "g0")], [[("r", "p1", "g0")]], False),
    ("all devices", TWO, [claim(exact("r", "small", allocationMode="All"))], [],
     [[("r", "p1", "g1"), ("r", "p1", "g3")]], False),
    ("a capacity request", TWO, [claim(exact("r", capacity={"requests": {"memory": "20Gi"}}))], [],
     [[("r", "p1", "g0")]], False),
    ("a broken selector", TWO, [claim(exact("r", selectors=[BROKEN]))], [],
     f"claim ns/c1: selector #0 on device {DRV}/p1/g0: CEL runtime error: no such key: missing. consider using CEL"
     " optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields", False),
    ("a missing class", TWO, [claim(exact("r", "absent"))], [],
     'claim ns/c1, request r: could not retrieve device class absent: deviceclass.resource.k8s.io "absent" not found',
     False),
    ("more than a claim may get", TWO, [claim(exact("r", count=MAX_RESULTS + 1))], [],
     f"claim ns/c1, request r: adding {MAX_RESULTS + 1} devices exceeds the claim limit of {MAX_RESULTS}, with 0"
     " already accounted for", False),
]


def _outcome(answer: Allocation) -> Any:
    if answer.error:
        return answer.error
    if answer.results is None:
        return "none"
    return [[(r.request, r.pool, r.device) for r in result.results] for result in answer.results]


def _comparable(answer: Allocation) -> Allocation:
    # A shared device's allocation gets a random share id on every search.
    if answer.results is None:
        return answer
    results = tuple(replace(a, results=tuple(replace(r, share_id="") for r in a.results)) for a in answer.results)
    return replace(answer, results=results)


def _fast_answers(allocator: Allocator, claims: list[Any]) -> bool:
    the_plan = fastpath.plan(allocator, claims, MAX_RESULTS)
    return the_plan is not None and fastpath.allocate(allocator, N1, claims, the_plan) is not None


@pytest.mark.parametrize(("slices", "claims", "in_use", "want", "fast"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_the_fast_path_answers_as_the_general_search(slices: list[Any], claims: list[Any],
                                                      in_use: list[tuple[str, str, str]], want: Any,
                                                      fast: bool) -> None:
    derived: dict[object, object] = {}
    quick = Allocator(slices, CLASSES_X, in_use, None, derived)
    general = Allocator(slices, CLASSES_X, in_use, None, fast=False)
    answer = quick.allocate(N1, claims)
    deferred = quick.allocate(N1, claims, defer=True)
    built = deferred if deferred.deferred is None else Allocation(deferred.deferred())
    same = _comparable(answer) == _comparable(general.allocate(N1, claims))
    assert (_outcome(answer), same, _comparable(built) == _comparable(answer)) == (want, True, True)
    assert _fast_answers(Allocator(slices, CLASSES_X, in_use, None, derived), claims) is fast


def test_the_fast_path_defers_building_the_results() -> None:
    answer = Allocator(TWO, CLASSES).allocate(N1, [claim(exact("r"))], defer=True)
    assert (answer.results, answer.fits, answer.deferred is not None) == (None, True, True)
    assert answer.deferred is not None
    (result,) = answer.deferred()
    assert result.to_dict() == {
        "devices": {"results": [{"request": "r", "driver": DRV, "pool": "p1", "device": "g0"}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
    }


def test_a_class_with_config_goes_by_the_general_search() -> None:
    classes = {"gpu": dclass("gpu")}
    configured = {"gpu": DeviceClass("gpu", (), (("drv", {"a": 1}),))}
    claims = [claim(exact("r"))]
    assert (fastpath.plan(Allocator(TWO, classes), claims, MAX_RESULTS) is not None,
            fastpath.plan(Allocator(TWO, configured), claims, MAX_RESULTS)) == (True, None)
    answer = Allocator(TWO, configured).allocate(N1, claims)
    assert answer.results is not None and answer.results[0].config == (("FromClass", (), "drv", {"a": 1}),)


EACH = [*EIGHT, rslice("s2", [dev("g0"), dev("g1")], pool="p2", node="n2"),
        rslice("s3", [with_(dev("g0"), taints=[NO_SCHEDULE]), dev("g1")], pool="p3", node="n3"),
        rslice("bad", [dev("d0"), dev("d0")], pool="p4", node="n4")]


@pytest.mark.parametrize(("claims", "want"), [
    ([claim(exact("r"))], [[[("r", "p1", "g0")]], [[("r", "p2", "g0")]], [[("r", "p3", "g1")]],
                           "invalid resource pools were encountered", "none"]),
    ([claim(exact("r", count=2))], [[[("r", "p1", "g0"), ("r", "p1", "g1")]], [[("r", "p2", "g0"), ("r", "p2", "g1")]],
                                    "none", "invalid resource pools were encountered", "none"]),
    ([claim(exact("a"), exact("b", "small"))], [[[("a", "p1", "g0"), ("b", "p1", "g1")]], "none", "none",
                                                "invalid resource pools were encountered", "none"]),
], ids=["one device", "two devices", "two requests"])
def test_allocating_on_each_node_answers_as_one_node_at_a_time(claims: list[Any], want: list[Any]) -> None:
    nodes = [N1, *(Node(name=f"n{i}") for i in range(2, 6))]
    each = Allocator(EACH, CLASSES, ()).allocate_each(nodes, claims, defer=True)
    built = [a if a.deferred is None else Allocation(a.deferred()) for a in each]
    one = [Allocator(EACH, CLASSES, (), fast=False).allocate(node, claims) for node in nodes]
    assert ([_outcome(a) for a in built], built == one) == (want, True)
