"""DeviceTaintRules (framework/dra/taintrules.py and the store): decoded strictly, each rule's taint added to
the devices its selector picks as kube-scheduler's ResourceSlice tracker adds it, a rule's change told as
``ResourceSlice`` updates of the slices whose taints it changes, and scheduling through the embedded store
with rules: the devices allocated, the FailedScheduling message when every candidate is tainted, a
tolerating claim, and a pod waiting for devices scheduled once the rule is deleted."""

from __future__ import annotations

from typing import Any

import pytest
from dra_fixtures import DRIVER, allocated, claim, device, device_class, node_slice, request, taint_rule
from test_dra_freelists import NODES, _answers
from test_dra_scheduling import NODES as GPU_NODES
from test_dra_scheduling import claim as claim_doc
from test_dra_scheduling import claim_pod, scheduled, settle

from framework.dra.models import DeviceTaint
from framework.dra.store import DraDecodeError, DraStore
from framework.dra.taintrules import DeviceTaintRule
from framework.scheduler import Scheduler
from pluginhost.manifest import parse_objects

NO_SCHEDULE = DeviceTaint("example.com/broken", "", "NoSchedule")

DECODED = [
    ("driver, pool and device", taint_rule("r", driver=DRIVER, pool="n1", device="g0"),
     DeviceTaintRule("r", NO_SCHEDULE, True, DRIVER, "n1", "g0")),
    ("an empty selector: every device", taint_rule("r", "NoExecute", value="v"),
     DeviceTaintRule("r", DeviceTaint("example.com/broken", "v", "NoExecute"))),
    ("no selector: no device", {**taint_rule("r"), "spec": {"taint": {"key": "k", "effect": "None"}}},
     DeviceTaintRule("r", DeviceTaint("k", "", "None"), has_selector=False)),
    ("a status and timeAdded are read and ignored",
     {**taint_rule("r", pool="n1"), "status": {"conditions": [{"type": "EvictionInProgress", "status": "False",
                                                               "reason": "NoEffect", "message": "",
                                                               "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
     DeviceTaintRule("r", NO_SCHEDULE, True, None, "n1")),
]


@pytest.mark.parametrize(("doc", "want"), [c[1:] for c in DECODED], ids=[c[0] for c in DECODED])
def test_a_rule_decodes(doc: dict[str, Any], want: DeviceTaintRule) -> None:
    assert DraStore.decode("DeviceTaintRule", doc) == want


BAD = [
    ("an unknown selector field (1.35 tombstoned deviceClassName)",
     taint_rule("r", deviceClassName="gpu"), 'DeviceTaintRule r: unknown field "spec.deviceSelector.deviceClassName"'),
    ("no taint", {**taint_rule("r"), "spec": {"deviceSelector": {}}},
     "DeviceTaintRule r: spec.taint: required field is missing"),
    ("a taint without a key", {**taint_rule("r"), "spec": {"taint": {"effect": "NoSchedule"}}},
     "DeviceTaintRule r: spec.taint.key: required field is missing"),
    ("an effect that does not exist", taint_rule("r", "PreferNoSchedule"),
     'DeviceTaintRule r: spec.taint.effect: unsupported effect "PreferNoSchedule" '
     "(supported: NoExecute, NoSchedule, None)"),
    ("an empty pool", taint_rule("r", pool=""),
     "DeviceTaintRule r: spec.deviceSelector.pool: must not be empty when set"),
    ("a pool that is not a string", {**taint_rule("r"), "spec": {"deviceSelector": {"pool": 3},
                                                                 "taint": {"key": "k", "effect": "None"}}},
     "DeviceTaintRule r: spec.deviceSelector.pool: expected a string, got integer"),
    ("another version", {**taint_rule("r"), "apiVersion": "resource.k8s.io/v1beta2"},
     'DeviceTaintRule r: apiVersion: expected "resource.k8s.io/v1", got "resource.k8s.io/v1beta2"'),
]


@pytest.mark.parametrize(("doc", "error"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_a_bad_rule_is_named_and_changes_nothing(doc: dict[str, Any], error: str) -> None:
    store = _store()
    before = dict(store.slices)
    with pytest.raises(DraDecodeError) as info:
        store.apply("DeviceTaintRule", doc)
    assert str(info.value) == error
    assert (store.taint_rules, store.slices) == ({}, before)


def _store() -> DraStore:
    store = DraStore()
    store.apply("DeviceClass", device_class())
    for n in ("n1", "n2"):
        store.apply("ResourceSlice", node_slice(n, device("g0"), device("g1")))
    other = node_slice("n1", device("g0"), name="n1-nics")
    other["spec"]["driver"] = "nic.example.com"
    store.apply("ResourceSlice", other)
    return store


def _taints(store: DraStore) -> dict[str, list[str]]:
    """Each tainted device (``slice/device``) with its taints as ``key=value:effect``."""
    return {f"{s.name}/{d.name}": [f"{t.key}={t.value}:{t.effect}" for t in d.taints]
            for s in store.slices.values() for d in s.devices if d.taints}


BROKEN = "example.com/broken=:NoSchedule"
SELECTED = [
    ("one device of one driver's pool", [taint_rule("r", driver=DRIVER, pool="n1", device="g0")],
     {"n1-gpus/g0": [BROKEN]}),
    ("a pool of any driver (the pool names a node for both)", [taint_rule("r", pool="n1")],
     {"n1-gpus/g0": [BROKEN], "n1-gpus/g1": [BROKEN], "n1-nics/g0": [BROKEN]}),
    ("a device name in every pool", [taint_rule("r", device="g1")], {"n1-gpus/g1": [BROKEN], "n2-gpus/g1": [BROKEN]}),
    ("a driver", [taint_rule("r", driver="nic.example.com")], {"n1-nics/g0": [BROKEN]}),
    ("the empty selector: every device", [taint_rule("r", "None")],
     {k: ["example.com/broken=:None"] for k in ("n1-gpus/g0", "n1-gpus/g1", "n2-gpus/g0", "n2-gpus/g1",
                                                 "n1-nics/g0")}),
    ("no selector: nothing", [{**taint_rule("r"), "spec": {"taint": {"key": "k", "effect": "NoSchedule"}}}], {}),
    ("a device that is not there", [taint_rule("r", pool="n2", device="g7")], {}),
    ("two rules on one device: both taints, in rule name order",
     [taint_rule("b", key="b", pool="n2", device="g0"), taint_rule("a", "NoExecute", key="a", value="x", pool="n2")],
     {"n2-gpus/g0": ["a=x:NoExecute", "b=:NoSchedule"], "n2-gpus/g1": ["a=x:NoExecute"]}),
]


@pytest.mark.parametrize(("rules", "want"), [c[1:] for c in SELECTED], ids=[c[0] for c in SELECTED])
def test_a_rule_taints_the_devices_its_selector_picks(rules: list[dict[str, Any]], want: dict[str, Any]) -> None:
    store = _store()
    for rule in rules:
        store.apply("DeviceTaintRule", rule)
    assert _taints(store) == want
    # A slice arriving after the rule is patched as it arrives; the source's version stays as it was.
    store.apply("ResourceSlice", node_slice("n2", device("g0"), device("g1")))
    assert _taints(store) == want
    assert not any(d.taints for s in store.raw_slices.values() for d in s.devices)


def test_a_slice_s_own_taints_come_first() -> None:
    store = _store()
    store.apply("ResourceSlice", node_slice("n2", device("g0", taints=[{"key": "own", "effect": "NoExecute"}])))
    store.apply("DeviceTaintRule", taint_rule("r", pool="n2"))
    assert _taints(store) == {"n2-gpus/g0": ["own=:NoExecute", BROKEN]}


def test_each_rule_change_is_an_update_of_the_slices_whose_taints_change() -> None:
    store = _store()
    seen: list[tuple[str, str, str]] = []
    store.add_listener(lambda kind, old, new: seen.append((
        kind, "Add" if old is None else "Delete" if new is None else "Update", (new or old).name)))
    steps: list[tuple[str, Any, list[tuple[str, str, str]]]] = [
        ("add on n1", taint_rule("r", pool="n1", driver=DRIVER), [("ResourceSlice", "Update", "n1-gpus")]),
        ("the same again", taint_rule("r", pool="n1", driver=DRIVER), []),
        ("moved to n2", taint_rule("r", pool="n2", driver=DRIVER),
         [("ResourceSlice", "Update", "n1-gpus"), ("ResourceSlice", "Update", "n2-gpus")]),
        ("its effect changed", taint_rule("r", "None", pool="n2", driver=DRIVER),
         [("ResourceSlice", "Update", "n2-gpus")]),
        ("a rule selecting nothing", taint_rule("q", pool="n9"), []),
        ("deleted", None, [("ResourceSlice", "Update", "n2-gpus")]),
    ]
    for what, rule, want in steps:
        seen.clear()
        if rule is None:
            assert store.remove("DeviceTaintRule", "", "r") is not None
        else:
            store.apply("DeviceTaintRule", rule)
        assert seen == want, what
    assert _taints(store) == {}


def test_rules_are_not_applied_with_the_gate_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from framework import features
    real = features.enabled
    monkeypatch.setattr(features, "enabled", lambda name: name != "DRADeviceTaintRules" and real(name))
    store = _store()
    store.apply("DeviceTaintRule", taint_rule("r", pool="n1"))
    assert (_taints(store), list(store.taint_rules)) == ({}, ["r"])


def test_the_free_lists_follow_a_rule_added_and_deleted() -> None:
    store = DraStore()
    store.apply("DeviceClass", device_class())
    for n in NODES:
        store.apply("ResourceSlice", node_slice(n.name, device("g0"), device("g1"), device("g2")))
    store.apply("ResourceClaim", claim("held", status=allocated("g0", node="n2")))
    store.apply("ResourceClaim", claim("c", request(count=2)))
    assert _answers(store, True) == {"n1": [[("n1", "g0"), ("n1", "g1")]], "n2": [[("n2", "g1"), ("n2", "g2")]],
                                     "n3": [[("n3", "g0"), ("n3", "g1")]]}
    store.apply("DeviceTaintRule", taint_rule("r", device="g1"))
    assert _answers(store, True) == _answers(store, False) == {
        "n1": [[("n1", "g0"), ("n1", "g2")]], "n2": "none", "n3": [[("n3", "g0"), ("n3", "g2")]]}
    store.remove("DeviceTaintRule", "", "r")
    assert _answers(store, True) == {"n1": [[("n1", "g0"), ("n1", "g1")]], "n2": [[("n2", "g1"), ("n2", "g2")]],
                                     "n3": [[("n3", "g0"), ("n3", "g1")]]}


# ---- scheduling through the embedded store ---------------------------------------------------------------

TWO_GPU_NODES = GPU_NODES + """
---
apiVersion: v1
kind: Node
metadata: {name: gpu-other, labels: {kubernetes.io/hostname: gpu-other}}
status: {allocatable: {cpu: "8", memory: 16Gi, pods: "20"}}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
""" + "".join(f"""
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: {node}-gpus}}
spec:
  driver: gpu.example.com
  nodeName: {node}
  pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}
  devices:
  - {{name: gpu-0, attributes: {{model: {{string: a100}}}}}}
  - {{name: gpu-1, attributes: {{model: {{string: a100}}}}}}
""" for node in ("gpu-node", "gpu-other"))


def rule(name: str, effect: str = "NoSchedule", **selector: str) -> str:
    fields = ", ".join(f"{k}: {v}" for k, v in selector.items())
    return f"""
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {{name: {name}}}
spec:
  deviceSelector: {{{fields}}}
  taint: {{key: example.com/broken, effect: {effect}}}
"""


TOLERATING = "{name: gpu, exactly: {deviceClassName: gpu.example.com, tolerations: [" \
             "{key: example.com/broken, operator: Exists, effect: NoSchedule}]}}"
TWO = "{name: gpu, exactly: {deviceClassName: gpu.example.com, count: 2}}"
#: kube-scheduler's FailedScheduling message for the three nodes (Filter's reason on each, PostFilter's
#: preemption not helping).
FULL3 = ("0/3 nodes are available: 3 cannot allocate all claims. preemption: 0/3 nodes are available: "
         "3 Preemption is not helpful for scheduling.")


def _devices(s: Scheduler, name: str) -> list[str]:
    c = s.cache.dra.claim("default", name)
    assert c is not None and c.allocation is not None
    return [f"{r.pool}/{r.device}" for r in c.allocation.results]


SCHEDULED = [
    # (name, the rules, the claim's request, the pod's (phase, node, message), the devices allocated)
    ("a node's devices tainted NoSchedule: the other node's", [rule("r", pool="gpu-node")], None,
     ("Bound", "gpu-other", ""), ["gpu-other/gpu-0"]),
    ("one device tainted: the next one of the same node", [rule("r", pool="gpu-node", device="gpu-0")], None,
     ("Bound", "gpu-node", ""), ["gpu-node/gpu-1"]),
    ("NoExecute keeps devices out too", [rule("r", "NoExecute", device="gpu-0")], TWO,
     ("Unschedulable", "", FULL3), None),
    ("effect None keeps nothing out", [rule("r", "None")], None, ("Bound", "gpu-node", ""), ["gpu-node/gpu-0"]),
    ("a request tolerating the taint may use the devices", [rule("r")], TOLERATING,
     ("Bound", "gpu-node", ""), ["gpu-node/gpu-0"]),
    ("every candidate tainted: kube-scheduler's message", [rule("a", pool="gpu-node"), rule("b", pool="gpu-other")],
     None, ("Unschedulable", "", FULL3), None),
]


@pytest.mark.parametrize(("rules", "req", "want", "allocated_devices"), [c[1:] for c in SCHEDULED],
                         ids=[c[0] for c in SCHEDULED])
def test_a_gpu_pod_is_scheduled_around_the_devices_rules_taint(
        rules: list[str], req: str | None, want: tuple[str, str, str], allocated_devices: list[str] | None) -> None:
    docs = [TWO_GPU_NODES, *rules, claim_doc("gpu", req) if req else claim_doc("gpu"), claim_pod("train", "gpu")]
    s, result = scheduled(*docs)
    assert result == {"train": want}
    if allocated_devices is not None:
        assert _devices(s, "gpu") == allocated_devices


def test_a_pod_waiting_for_devices_is_scheduled_once_the_rule_is_deleted() -> None:
    seen: dict[str, Any] = {}

    async def delete_rules(s: Scheduler) -> None:
        seen["before"] = s.get_pod("default", "train").phase  # type: ignore[union-attr]
        s.cache.dra.remove("DeviceTaintRule", "", "all")  # what the informer does on a watch's DELETED
        seen["after"] = await settle(s, ["train"])
        seen["devices"] = _devices(s, "gpu")

    _, result = scheduled(TWO_GPU_NODES, rule("all"), claim_doc("gpu"), claim_pod("train", "gpu"), then=delete_rules)
    assert result["train"][0] == seen["before"] == "Unschedulable"
    assert (seen["after"], seen["devices"]) == ({"train": ("Bound", "gpu-node", "")}, ["gpu-node/gpu-0"])


def test_outrigger_apply_takes_a_rule_and_reports_it_configured_then_unchanged() -> None:
    import asyncio

    from framework.profiles import build_registry, default_scheduler_config

    async def main() -> list[list[str]]:
        registry = build_registry()
        s = Scheduler(default_scheduler_config(registry), registry, seed=1)
        out = []
        for doc in (rule("r", pool="gpu-node"), rule("r", pool="gpu-other"), rule("r", pool="gpu-other")):
            out.append([r.action for r in await s.apply(parse_objects(doc))])
        return out

    assert asyncio.run(main()) == [["created"], ["configured"], ["unchanged"]]


def test_a_bad_rule_in_a_manifest_is_named_as_the_cluster_scoped_object_it_is() -> None:
    from pluginhost.manifest import ManifestError

    doc = rule("r", pool="gpu-node").replace("pool: gpu-node", "pool: gpu-node, deviceClassName: gpu")
    with pytest.raises(ManifestError) as info:
        parse_objects(doc)
    assert str(info.value) == ('<input>: document 1 (DeviceTaintRule r): unknown field '
                               '"spec.deviceSelector.deviceClassName"')
