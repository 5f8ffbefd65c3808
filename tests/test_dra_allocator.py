"""The DRA allocator (framework/dra): which devices it picks for which requests, in kube-scheduler 1.37's
order, and its failures with kube-scheduler's texts."""

from __future__ import annotations

from typing import Any

import pytest

from framework.dra.allocator import Allocation, Allocator
from framework.dra.models import device_class_from_dict, resource_claim_from_dict, resource_slice_from_dict
from pluginhost.model import Node

DRV = "gpu.example.com"


def dev(name: str, model: str = "a100", mem: str = "80Gi", **attrs: Any) -> dict[str, Any]:
    a = {
        "model": {"string": model},
        **{k: {"int": v} if isinstance(v, int) else {"string": v} for k, v in attrs.items()},
    }
    return {"name": name, "attributes": a, "capacity": {"memory": {"value": mem}}}


def rslice(
    name: str,
    devices: list[dict[str, Any]],
    pool: str = "p1",
    node: str | None = "n1",
    gen: int = 1,
    count: int = 1,
    **spec: Any,
) -> Any:
    s: dict[str, Any] = {
        "driver": DRV,
        "pool": {"name": pool, "generation": gen, "resourceSliceCount": count},
        "devices": devices,
        **spec,
    }
    if node is not None:
        s["nodeName"] = node
    return resource_slice_from_dict(
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": s}
    )


def dclass(name: str = "gpu", *selectors: str) -> Any:
    return device_class_from_dict(
        {
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
        }
    )


def exact(name: str, cls: str = "gpu", **kw: Any) -> dict[str, Any]:
    e: dict[str, Any] = {"deviceClassName": cls}
    if "selectors" in kw:
        e["selectors"] = [{"cel": {"expression": x}} for x in kw.pop("selectors")]
    e.update(kw)
    return {"name": name, "exactly": e}


def claim(*requests: dict[str, Any], name: str = "c1", constraints: list[Any] | None = None) -> Any:
    devices: dict[str, Any] = {"requests": list(requests)}
    if constraints:
        devices["constraints"] = constraints
    return resource_claim_from_dict(
        {"kind": "ResourceClaim", "metadata": {"name": name, "namespace": "ns"}, "spec": {"devices": devices}}
    )


CLASSES = {
    "gpu": dclass("gpu", f'device.driver == "{DRV}"'),
    "small": dclass("small", f'device.attributes["{DRV}"].model == "t4"'),
}
N1 = Node(name="n1", labels={"zone": "a"})
TWO = [rslice("s1", [dev("g0"), dev("g1", "t4", "16Gi"), dev("g2"), dev("g3", "t4", "16Gi")])]

CASES: list[tuple[str, list[Any], list[Any], list[tuple[str, str, str]], list[Any]]] = [
    # name, slices, claims, allocated devices (driver, pool, device), expected [(request, pool, device)] per claim
    (
        "simple count picks the first devices in slice order",
        TWO,
        [claim(exact("r", count=2))],
        [],
        [[("r", "p1", "g0"), ("r", "p1", "g1")]],
    ),
    (
        "class selector narrows the devices",
        TWO,
        [claim(exact("r", "small", count=2))],
        [],
        [[("r", "p1", "g1"), ("r", "p1", "g3")]],
    ),
    (
        "request selector with quantity()",
        TWO,
        [claim(exact("r", selectors=[f'device.capacity["{DRV}"].memory.compareTo(quantity("40Gi")) >= 0'], count=2))],
        [],
        [[("r", "p1", "g0"), ("r", "p1", "g2")]],
    ),
    (
        "All mode takes every matching device",
        TWO,
        [claim(exact("r", "small", allocationMode="All"))],
        [],
        [[("r", "p1", "g1"), ("r", "p1", "g3")]],
    ),
    (
        "devices in use are skipped",
        TWO,
        [claim(exact("r", count=2))],
        [(DRV, "p1", "g0"), (DRV, "p1", "g2")],
        [[("r", "p1", "g1"), ("r", "p1", "g3")]],
    ),
    (
        "admin access may take a device in use",
        TWO,
        [claim(exact("r", adminAccess=True))],
        [(DRV, "p1", "g0")],
        [[("r", "p1", "g0")]],
    ),
    (
        "firstAvailable falls back to the second subrequest",
        TWO,
        [
            claim(
                {
                    "name": "r",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu", "count": 5},
                        {"name": "one", "deviceClassName": "small"},
                    ],
                }
            )
        ],
        [],
        [[("r/one", "p1", "g1")]],
    ),
    (
        "matchAttribute backtracks to a device with the same value",
        [rslice("s1", [dev("g0", numa=0), dev("g1", numa=1), dev("g2", numa=1)])],
        [claim(exact("a"), exact("b"), constraints=[{"requests": ["a", "b"], "matchAttribute": f"{DRV}/numa"}])],
        [],
        [[("a", "p1", "g1"), ("b", "p1", "g2")]],
    ),
    (
        "two claims get distinct devices",
        TWO,
        [claim(exact("r")), claim(exact("r"), name="c2")],
        [],
        [[("r", "p1", "g0")], [("r", "p1", "g1")]],
    ),
    (
        "pools in driver/pool order, node-local and selector slices together",
        [
            rslice("z", [dev("d0")], pool="zz"),
            rslice(
                "a",
                [dev("d0")],
                pool="aa",
                node=None,
                nodeSelector={
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
                },
            ),
        ],
        [claim(exact("r", count=2))],
        [],
        [[("r", "aa", "d0"), ("r", "zz", "d0")]],
    ),
    (
        "an incomplete pool is skipped",
        [rslice("x1", [dev("d0")], pool="inc", count=2), rslice("y", [dev("d0")], pool="ok")],
        [claim(exact("r"))],
        [],
        [[("r", "ok", "d0")]],
    ),
    (
        "a slice of another node is not seen",
        [rslice("s", [dev("d0")], node="n2"), rslice("t", [dev("d1")], pool="p2")],
        [claim(exact("r"))],
        [],
        [[("r", "p2", "d1")]],
    ),
]


def mem_at_least(q: str) -> str:
    return f'device.capacity["{DRV}"].memory.compareTo(quantity("{q}")) >= 0'


def sub(name: str, cls: str = "gpu", **kw: Any) -> dict[str, Any]:
    return {"name": name, **exact(name, cls, **kw)["exactly"]}


def with_(d: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**d, **extra}


COUNTERS = [{"name": "mem", "counters": {"gb": {"value": "8"}}}]


def part(name: str, gb: str) -> dict[str, Any]:
    return with_(dev(name), consumesCounters=[{"counterSet": "mem", "counters": {"gb": {"value": gb}}}])


PARTITIONS = [
    rslice("counters", [], count=2, sharedCounters=COUNTERS),
    rslice("devs", [part("half-a", "4"), part("whole", "8"), part("half-b", "4")], count=2),
]
NO_SCHEDULE = {"key": "broken", "value": "yes", "effect": "NoSchedule"}
ZONE_A = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}

CASES += [
    (
        "a request backtracks so a later request can be served",
        [rslice("s1", [dev("big", mem="2Gi"), dev("small", mem="1Gi")])],
        [claim(exact("a", selectors=[mem_at_least("1Gi")]), exact("b", selectors=[mem_at_least("2Gi")]))],
        [],
        [[("a", "p1", "small"), ("b", "p1", "big")]],
    ),
    (
        "a claim backtracks across claims",
        [rslice("s1", [dev("big", mem="2Gi"), dev("small", mem="1Gi")])],
        [
            claim(exact("a", selectors=[mem_at_least("1Gi")])),
            claim(exact("b", selectors=[mem_at_least("2Gi")]), name="c2"),
        ],
        [],
        [[("a", "p1", "small")], [("b", "p1", "big")]],
    ),
    (
        "two constraints, one for one request: the search retries",
        [rslice("s1", [dev("d1", ver="a", tag="x"), dev("d2", ver="b", tag="y"), dev("d3", ver="c", tag="y")])],
        [
            claim(
                exact("a"),
                exact("b"),
                constraints=[{"requests": ["a"], "matchAttribute": f"{DRV}/ver"}, {"matchAttribute": f"{DRV}/tag"}],
            )
        ],
        [],
        [[("a", "p1", "d2"), ("b", "p1", "d3")]],
    ),
    (
        "firstAvailable backtracks into its second subrequest",
        [rslice("s1", [dev("d1", mem="8Gi")]), rslice("s2", [dev("d2", mem="4Gi")], pool="p2")],
        [
            claim(
                {
                    "name": "a",
                    "firstAvailable": [
                        sub("big", selectors=[mem_at_least("8Gi")]),
                        sub("any", selectors=[mem_at_least("4Gi")]),
                    ],
                },
                exact("b", selectors=[mem_at_least("8Gi")]),
            )
        ],
        [],
        [[("a/any", "p2", "d2"), ("b", "p1", "d1")]],
    ),
    (
        "a constraint naming a subrequest",
        [rslice("s1", [dev("d0", numa=0), dev("d1", numa=1), dev("d2", numa=1), dev("d3", numa=1)])],
        [
            claim(
                {"name": "a", "firstAvailable": [sub("x", count=2)]},
                exact("b"),
                constraints=[{"requests": ["a/x", "b"], "matchAttribute": f"{DRV}/numa"}],
            )
        ],
        [],
        [[("a/x", "p1", "d1"), ("a/x", "p1", "d2"), ("b", "p1", "d3")]],
    ),
    (
        "distinctAttribute picks devices with different values",
        [rslice("s1", [dev("d0", numa=0), dev("d1", numa=0), dev("d2", numa=1)])],
        [claim(exact("a", count=2), constraints=[{"distinctAttribute": f"{DRV}/numa"}])],
        [],
        [[("a", "p1", "d0"), ("a", "p1", "d2")]],
    ),
    (
        "a NoSchedule taint keeps a device out unless tolerated",
        [rslice("s1", [with_(dev("d0"), taints=[NO_SCHEDULE]), dev("d1")])],
        [claim(exact("a")), claim(exact("b", tolerations=[{"key": "broken", "operator": "Exists"}]), name="c2")],
        [],
        [[("a", "p1", "d1")], [("b", "p1", "d0")]],
    ),
    (
        "a taint with effect None does not keep a device out",
        [rslice("s1", [with_(dev("d0"), taints=[{"key": "k", "effect": "None"}])])],
        [claim(exact("a"))],
        [],
        [[("a", "p1", "d0")]],
    ),
    (
        "shared counters limit the partitions of a device",
        PARTITIONS,
        [claim(exact("a", count=2))],
        [],
        [[("a", "p1", "half-a"), ("a", "p1", "half-b")]],
    ),
    (
        "counters used by allocated devices are not available",
        PARTITIONS,
        [claim(exact("a"))],
        [(DRV, "p1", "half-a")],
        [[("a", "p1", "half-b")]],
    ),
    (
        "counters of a slice published for all nodes",
        [
            rslice("counters", [], node=None, count=2, allNodes=True, sharedCounters=COUNTERS),
            rslice("devs", [part("whole", "8"), part("half-a", "4"), part("half-b", "4")], count=2),
        ],
        [claim(exact("a", count=2))],
        [],
        [[("a", "p1", "half-a"), ("a", "p1", "half-b")]],
    ),
    (
        "per-device node selection: only the node's devices",
        [
            rslice(
                "s1",
                [with_(dev("d0"), nodeName="n2"), with_(dev("d1"), nodeName="n1"), with_(dev("d2"), allNodes=True)],
                node=None,
                perDeviceNodeSelection=True,
            )
        ],
        [claim(exact("a", count=2))],
        [],
        [[("a", "p1", "d1"), ("a", "p1", "d2")]],
    ),
    (
        "a pool with a newer generation elsewhere is skipped, even by All",
        [
            rslice("old", [dev("d0")], pool="p1", gen=1, count=2),
            rslice("new", [dev("d9")], pool="p1", gen=2, count=2, node="n2"),
            rslice("other", [dev("d1")], pool="p2"),
        ],
        [claim(exact("a", allocationMode="All"))],
        [],
        [[("a", "p2", "d1")]],
    ),
    (
        "pools with binding conditions come last",
        [
            rslice(
                "a", [with_(dev("d0"), bindingConditions=["ready"], bindingFailureConditions=["failed"])], pool="aa"
            ),
            rslice("z", [dev("d1")], pool="zz"),
        ],
        [claim(exact("r"))],
        [],
        [[("r", "zz", "d1")]],
    ),
    (
        "All in a firstAvailable subrequest",
        TWO,
        [claim({"name": "r", "firstAvailable": [sub("many", "small", allocationMode="All")]})],
        [],
        [[("r/many", "p1", "g1"), ("r/many", "p1", "g3")]],
    ),
]


@pytest.mark.parametrize(("slices", "claims", "allocated", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_allocates_the_devices_kube_scheduler_picks(
    slices: list[Any], claims: list[Any], allocated: list[Any], want: list[Any]
) -> None:
    answer = Allocator(slices, CLASSES, allocated).allocate(N1, claims)
    assert (answer.error, answer.on_node) == ("", False)
    assert answer.results is not None
    got = [[(r.request, r.pool, r.device) for r in res.results] for res in answer.results]
    assert got == want
    assert all(r.driver == DRV for res in answer.results for r in res.results)


def _only(answer: Allocation) -> Any:
    assert answer.error == "" and answer.results is not None and len(answer.results) == 1
    return answer.results[0]


def test_result_shape_with_node_selector_and_admin_access() -> None:
    res = _only(Allocator(TWO, CLASSES, [(DRV, "p1", "g0")]).allocate(N1, [claim(exact("r", adminAccess=True))]))
    assert res.to_dict() == {
        "devices": {"results": [{"request": "r", "driver": DRV, "pool": "p1", "device": "g0", "adminAccess": True}]},
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
        },
    }


def test_all_nodes_slice_gives_no_node_selector() -> None:
    slices = [rslice("s", [dev("d0")], node=None, allNodes=True)]
    assert _only(Allocator(slices, CLASSES).allocate(N1, [claim(exact("r"))])).node_selector is None


NOT_FITTING = [
    ("too few devices", TWO, [claim(exact("r", count=5))], []),
    ("all in use", TWO, [claim(exact("r"))], [(DRV, "p1", d) for d in ("g0", "g1", "g2", "g3")]),
    ("only pool incomplete", [rslice("x1", [dev("d0")], count=2)], [claim(exact("r"))], []),
    (
        "constraint cannot hold",
        [rslice("s", [dev("g0", numa=0), dev("g1", numa=1)])],
        [claim(exact("a"), exact("b"), constraints=[{"matchAttribute": f"{DRV}/numa"}])],
        [],
    ),
]


@pytest.mark.parametrize(
    ("slices", "claims", "allocated"), [c[1:] for c in NOT_FITTING], ids=[c[0] for c in NOT_FITTING]
)
def test_node_without_devices_gives_no_results_and_no_error(
    slices: list[Any], claims: list[Any], allocated: list[Any]
) -> None:
    assert Allocator(slices, CLASSES, allocated).allocate(N1, claims) == Allocation(None)


ERRORS = [
    (
        "CEL runtime error",
        [claim(exact("r", selectors=[f'device.attributes["{DRV}"].missing == 1']))],
        f"claim ns/c1: selector #0 on device {DRV}/p1/g0: CEL runtime error: no such key: missing. consider using CEL"
        " optional chaining (.? followed by orValue()) or guarding the check with has() for optional fields",
    ),
    (
        "cost limit",
        [claim(exact("r", selectors=["lists.range(1000).all(i, lists.range(1000).all(j, i + j >= 0))"]))],
        f"claim ns/c1: selector #0 on device {DRV}/p1/g0: CEL runtime error:"
        " operation cancelled: actual cost limit exceeded",
    ),
    (
        "undeclared variable",
        [claim(exact("r", selectors=["gpu.memory > 1"]))],
        "claim ns/c1: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:1: undeclared reference"
        " to 'gpu' (in container '')\n | gpu.memory > 1\n | ^",
    ),
    (
        "not a bool",
        [claim(exact("r", selectors=["1 + 1"]))],
        "claim ns/c1: selector #0: CEL compile error: must evaluate to bool or the unknown type, not int",
    ),
    (
        "missing class",
        [claim(exact("r", "nope"))],
        'claim ns/c1, request r: could not retrieve device class nope: deviceclass.resource.k8s.io "nope" not found',
    ),
    (
        "too many devices",
        [claim(exact("r", count=33))],
        "claim ns/c1, request r: adding 33 devices exceeds the claim limit of 32, with 0 already accounted for",
    ),
    (
        "All mode and an unmet constraint",
        [claim(exact("r", allocationMode="All"), constraints=[{"matchAttribute": f"{DRV}/model"}])],
        f"claim ns/c1, request r: cannot add device {DRV}/p1/g1 because a claim constraint would not be satisfied",
    ),
    (
        "empty constraint",
        [claim(exact("r"), constraints=[{"requests": ["r"]}])],
        "claim ns/c1, constraint #0: empty constraint (unsupported constraint type?)",
    ),
]


@pytest.mark.parametrize(("claims", "message"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_carry_kube_scheduler_text(claims: list[Any], message: str) -> None:
    assert Allocator(TWO, CLASSES).allocate(N1, claims) == Allocation(None, message, on_node=False)


def test_cel_syntax_error_is_a_compile_error_with_the_position() -> None:
    answer = Allocator(TWO, CLASSES).allocate(N1, [claim(exact("r", selectors=["device.driver =="]))])
    assert answer == Allocation(
        None,
        "claim ns/c1: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:17: Syntax error:"
        " mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT,"
        " NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | device.driver ==\n | ................^",
    )


def test_class_selector_errors_name_the_class() -> None:
    classes = {"gpu": dclass("gpu", "device.nope(")}
    answer = Allocator(TWO, classes).allocate(N1, [claim(exact("r"))])
    assert answer.error.startswith("class gpu: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:")


def test_all_mode_refuses_an_incomplete_pool() -> None:
    slices = [*TWO, rslice("x1", [dev("d0")], pool="inc", count=2)]
    answer = Allocator(slices, CLASSES).allocate(N1, [claim(exact("r", allocationMode="All"))])
    want = f"claim ns/c1, request r: asks for all devices, but resource pool {DRV}/inc is currently being updated"
    assert answer == Allocation(None, want)


def test_invalid_pool_is_an_error_on_this_node_only() -> None:
    slices = [rslice("s", [dev("d0"), dev("d0")])]
    answer = Allocator(slices, CLASSES).allocate(N1, [claim(exact("r"))])
    assert answer == Allocation(None, "invalid resource pools were encountered", on_node=True)


def shared_dev(name: str, mem: str = "80Gi", policy: dict[str, Any] | None = None) -> dict[str, Any]:
    capacity: dict[str, Any] = {"value": mem}
    if policy:
        capacity["requestPolicy"] = policy
    return with_(dev(name), allowMultipleAllocations=True, capacity={"memory": capacity})


def wants(name: str, mem: str, cname: str = "c1") -> Any:
    return claim(exact("r", capacity={"requests": {"memory": mem}}), name=cname)


CAPACITY_CASES = [
    (
        "claims share a device while its capacity lasts",
        [rslice("s", [shared_dev("d0"), shared_dev("d1")])],
        [wants("a", "40Gi"), wants("b", "40Gi", "c2"), wants("c", "40Gi", "c3")],
        {},
        [("d0", "40Gi"), ("d0", "40Gi"), ("d1", "40Gi")],
    ),
    (
        "capacity consumed by allocated claims counts",
        [rslice("s", [shared_dev("d0"), shared_dev("d1")])],
        [wants("a", "40Gi")],
        {(DRV, "p1", "d0"): {"memory": 60 * 2**30}},
        [("d1", "40Gi")],
    ),
    (
        "a request is rounded up to the policy's next step",
        [
            rslice(
                "s",
                [shared_dev("d0", policy={"default": "10Gi", "validRange": {"min": "10Gi", "step": "10Gi"}})],
            )
        ],
        [wants("a", "15Gi"), claim(exact("r"), name="c2")],
        {},
        [("d0", "20Gi"), ("d0", "10Gi")],
    ),
    (
        "a request above every valid value does not fit",
        [
            rslice(
                "s",
                [
                    shared_dev("d0", policy={"default": "1Gi", "validValues": ["1Gi", "2Gi"]}),
                    shared_dev("d1", policy={"default": "1Gi", "validValues": ["1Gi", "4Gi"]}),
                ],
            )
        ],
        [wants("a", "3Gi")],
        {},
        [("d1", "4Gi")],
    ),
]


@pytest.mark.parametrize(
    ("slices", "claims", "shared", "want"), [c[1:] for c in CAPACITY_CASES], ids=[c[0] for c in CAPACITY_CASES]
)
def test_consumable_capacity(slices: list[Any], claims: list[Any], shared: dict[Any, Any], want: list[Any]) -> None:
    from fractions import Fraction

    shared_q = {k: {n: Fraction(v) for n, v in caps.items()} for k, caps in shared.items()}
    answer = Allocator(slices, CLASSES, shared=shared_q).allocate(N1, claims)
    assert answer.error == "" and answer.results is not None
    got = []
    for res in answer.results:
        [r] = res.results
        assert r.consumed_capacity is not None
        got.append((r.device, f"{r.consumed_capacity['memory'] / 2**30}Gi"))
    assert got == want
    share_ids = [res.results[0].share_id for res in answer.results]
    assert len(set(share_ids)) == len(share_ids) and all(len(i) == 36 for i in share_ids)


def test_exclusive_device_without_the_requested_capacity_is_skipped() -> None:
    slices = [rslice("s", [with_(dev("d0"), capacity={}), dev("d1")])]
    answer = Allocator(slices, CLASSES).allocate(N1, [wants("a", "1Gi")])
    res = _only(answer)
    assert [(r.device, r.consumed_capacity, r.share_id) for r in res.results] == [("d1", None, "")]


def test_result_carries_binding_conditions_and_tolerations() -> None:
    slices = [rslice("s", [with_(dev("d0"), bindingConditions=["ready"], bindingFailureConditions=["failed"])])]
    toleration = {"key": "k", "operator": "Exists", "effect": "NoSchedule"}
    res = _only(Allocator(slices, CLASSES).allocate(N1, [claim(exact("r", tolerations=[toleration]))]))
    assert res.to_dict()["devices"]["results"] == [
        {
            "request": "r",
            "driver": DRV,
            "pool": "p1",
            "device": "d0",
            "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
            "bindingConditions": ["ready"],
            "bindingFailureConditions": ["failed"],
        }
    ]


def test_allocation_config_from_class_and_claim() -> None:
    cls = device_class_from_dict(
        {
            "kind": "DeviceClass",
            "metadata": {"name": "gpu"},
            "spec": {"config": [{"opaque": {"driver": DRV, "parameters": {"mode": "fast"}}}]},
        }
    )
    c = resource_claim_from_dict(
        {
            "kind": "ResourceClaim",
            "metadata": {"name": "c1", "namespace": "ns"},
            "spec": {
                "devices": {
                    "requests": [exact("a"), {"name": "b", "firstAvailable": [sub("x")]}],
                    "config": [
                        {"requests": ["b/x"], "opaque": {"driver": DRV, "parameters": {"b": 1}}},
                        {"opaque": {"driver": DRV, "parameters": {"all": 1}}},
                    ],
                }
            },
        }
    )
    res = _only(Allocator(TWO, {"gpu": cls}).allocate(N1, [c]))
    assert res.to_dict()["devices"]["config"] == [
        {"source": "FromClass", "opaque": {"driver": DRV, "parameters": {"mode": "fast"}}},
        {"source": "FromClaim", "requests": ["b/x"], "opaque": {"driver": DRV, "parameters": {"b": 1}}},
        {"source": "FromClaim", "opaque": {"driver": DRV, "parameters": {"all": 1}}},
    ]


def test_node_selector_merges_the_terms_of_selector_slices() -> None:
    def selector(key: str, value: str) -> dict[str, Any]:
        return {"nodeSelectorTerms": [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}]}

    node = Node(name="n1", labels={"zone": "a", "rack": "r1"})
    slices = [
        rslice("s1", [dev("d0")], pool="p1", node=None, nodeSelector=selector("zone", "a")),
        rslice("s2", [dev("d1")], pool="p2", node=None, nodeSelector=selector("rack", "r1")),
        rslice("s3", [dev("d2")], pool="p3", node=None, nodeSelector=selector("zone", "a")),
    ]
    res = _only(Allocator(slices, CLASSES).allocate(node, [claim(exact("r", count=3))]))
    assert res.to_dict()["nodeSelector"] == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]},
                    {"key": "rack", "operator": "In", "values": ["r1"]},
                ]
            }
        ]
    }


def test_all_takes_a_shared_device_only_while_its_capacity_lasts() -> None:
    slices = [rslice("s", [shared_dev("d0")])]
    first = exact("a", capacity={"requests": {"memory": "60Gi"}})
    every = exact("b", allocationMode="All", capacity={"requests": {"memory": "40Gi"}})
    assert Allocator(slices, CLASSES).allocate(N1, [claim(first, every)]) == Allocation(None)
    every = exact("b", allocationMode="All", capacity={"requests": {"memory": "20Gi"}})
    res = _only(Allocator(slices, CLASSES).allocate(N1, [claim(first, every)]))
    assert [(r.request, r.device, r.consumed_capacity) for r in res.results] == [
        ("a", "d0", {"memory": 60 * 2**30}),
        ("b", "d0", {"memory": 20 * 2**30}),
    ]
