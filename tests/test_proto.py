"""The outrigger.v1 contracts: generated stubs are current, codes match, conversions are exact."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pluginhost import _genproto, convert, pb
from pluginhost import model as m
from pluginhost.status import Code, Status

GEN_DIR = Path(_genproto.__file__).resolve().parent / "_gen"


# ---------------------------------------------------------------------------------------------------
# (1) generated stubs are not stale


def _generated_files(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }


def test_generated_stubs_are_current(tmp_path: Path) -> None:
    out = tmp_path / "_gen"
    _genproto.main(["--out", str(out)])
    fresh = _generated_files(out)
    committed = _generated_files(GEN_DIR)
    assert fresh, "the generator produced nothing"
    missing = sorted(set(fresh) - set(committed))
    extra = sorted(set(committed) - set(fresh))
    differ = sorted(name for name in set(fresh) & set(committed) if fresh[name] != committed[name])
    assert not (missing or extra or differ), (
        "pluginhost/_gen is stale: run `make proto` (python -m pluginhost._genproto). "
        f"missing={missing} extra={extra} differ={differ}"
    )


def test_generator_is_deterministic(tmp_path: Path) -> None:
    _genproto.main(["--out", str(tmp_path / "a")])
    _genproto.main(["--out", str(tmp_path / "b")])
    assert _generated_files(tmp_path / "a") == _generated_files(tmp_path / "b")


def test_generated_imports_point_inside_pluginhost() -> None:
    for name, content in _generated_files(GEN_DIR).items():
        text = content.decode()
        assert "from outrigger.v1 import" not in text, name
        assert "import outrigger.v1" not in text, name
    assert pb.plugin.CycleContext.DESCRIPTOR.full_name == "outrigger.v1.CycleContext"
    assert pb.scheduler.DESCRIPTOR.services_by_name["Scheduler"].methods_by_name["Watch"].server_streaming


# ---------------------------------------------------------------------------------------------------
# (2) proto Code == pluginhost.status.Code


def _camel(enum_name: str, prefix: str) -> str:
    assert enum_name.startswith(prefix), enum_name
    return "".join(word.capitalize() for word in enum_name[len(prefix) :].split("_"))


def test_code_enum_matches_status_code() -> None:
    proto = {_camel(v.name, "CODE_"): v.number for v in pb.types.Code.DESCRIPTOR.values}
    python = {c.name: c.value for c in Code}
    assert proto == python
    assert proto["UnschedulableAndUnresolvable"] == 3


def test_extension_points_cover_the_framework() -> None:
    names = {v.name for v in pb.plugin.ExtensionPoint.DESCRIPTOR.values}
    expected = {
        "PRE_ENQUEUE", "QUEUE_SORT", "PRE_FILTER", "PRE_FILTER_EXTENSIONS", "FILTER", "POST_FILTER",
        "PRE_SCORE", "SCORE", "NORMALIZE_SCORE", "RESERVE", "PERMIT", "PRE_BIND", "PRE_BIND_PRE_FLIGHT",
        "BIND", "POST_BIND", "ENQUEUE_EXTENSIONS", "PRE_FILTER_TRANSFORMER", "FILTER_TRANSFORMER",
        "SCORE_TRANSFORMER", "POST_FILTER_TRANSFORMER", "CONTROLLER", "PLACEMENT_GENERATE", "PLACEMENT_SCORE",
        "NORMALIZE_PLACEMENT_SCORE", "SIGN", "POD_GROUP_POST_FILTER",
    }  # fmt: skip
    assert names == {"EXTENSION_POINT_" + n for n in expected} | {"EXTENSION_POINT_UNSPECIFIED"}


# ---------------------------------------------------------------------------------------------------
# (3) round trips


def _selector(tag: str) -> m.LabelSelector:
    return m.LabelSelector(
        match_labels={"app": tag, "tier": "web"},
        match_expressions=[
            m.LabelSelectorRequirement("env", "In", ("prod", "staging")),
            m.LabelSelectorRequirement("canary", "DoesNotExist"),
        ],
    )


def _term(tag: str) -> m.PodAffinityTerm:
    return m.PodAffinityTerm(
        topology_key="topology.kubernetes.io/zone",
        label_selector=_selector(tag),
        namespaces=("default", tag),
        namespace_selector=m.LabelSelector(match_labels={"team": tag}),
        match_label_keys=("pod-template-hash",),
        mismatch_label_keys=("tenant",),
    )


def _node_term(i: int) -> m.NodeSelectorTerm:
    return m.NodeSelectorTerm(
        match_expressions=[
            m.NodeSelectorRequirement("kubernetes.io/arch", "In", ("amd64", "arm64")),
            m.NodeSelectorRequirement("gpu-count", "Gt", (str(i),)),
        ],
        match_fields=[m.NodeSelectorRequirement("metadata.name", "NotIn", (f"node-{i}",))],
    )


def _container(name: str, host_port: int = 0) -> m.Container:
    return m.Container(
        name=name,
        image=f"registry.example/{name}:1.2",
        requests={"cpu": 250, "memory": 64 * 1024**2, "example.com/gpu": 1},
        limits={"cpu": 1000, "memory": 128 * 1024**2},
        ports=[m.ContainerPort(8080, host_port, "TCP", "10.0.0.1"), m.ContainerPort(53, 0, "UDP")],
        restart_policy="",
    )


def rich_pod() -> m.Pod:
    """Every field set to a non-default value."""
    return m.Pod(
        name="web-0",
        namespace="shop",
        uid="0b7c4a8e-uid",
        labels={"app": "web", "env": "prod"},
        annotations={"note": "ünïcode ✓", "empty": ""},
        scheduler_name="gpu-scheduler",
        node_name="node-7",
        priority=-(2**40),
        priority_class_name="high",
        preemption_policy="Never",
        node_selector={"disk": "ssd"},
        affinity=m.Affinity(
            node_affinity=m.NodeAffinity(
                required=[_node_term(1), _node_term(2)],
                preferred=[m.PreferredSchedulingTerm(7, _node_term(3))],
            ),
            pod_affinity=m.PodAffinity(
                required=[_term("db")], preferred=[m.WeightedPodAffinityTerm(50, _term("cache"))]
            ),
            pod_anti_affinity=m.PodAffinity(
                required=[_term("web")], preferred=[m.WeightedPodAffinityTerm(100, _term("web2"))]
            ),
        ),
        tolerations=[
            m.Toleration("dedicated", "Equal", "gpu", "NoSchedule"),
            m.Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute", 300),
            m.Toleration("zero", "Exists", "", "NoExecute", 0),
        ],
        topology_spread_constraints=[
            m.TopologySpreadConstraint(
                max_skew=2,
                topology_key="kubernetes.io/hostname",
                when_unsatisfiable="ScheduleAnyway",
                label_selector=_selector("web"),
                min_domains=3,
                node_affinity_policy="Ignore",
                node_taints_policy="Honor",
                match_label_keys=("pod-template-hash",),
            )
        ],
        scheduling_gates=("example.com/quota", "example.com/review"),
        resource_claims=(m.PodResourceClaim("gpu", template_name="one-gpu"), m.PodResourceClaim("nic", "shared-nic"),
                         m.PodResourceClaim("odd"), m.PodResourceClaim("skipped", template_name="t")),
        resource_claim_statuses={"gpu": "web-gpu-x7k2q", "skipped": ""},
        scheduling_group="web-group",
        containers=[_container("app", host_port=80), _container("sidecar")],
        init_containers=[m.Container(name="init", image="busybox"), _container("proxy")],
        overhead={"cpu": 10, "memory": 1024},
        creation_timestamp=1_700_000_000.123456,
        nominated_node_name="node-3",
        deletion_timestamp=1_700_000_100.5,
        requests={"cpu": 510, "memory": 2 * 64 * 1024**2 + 1024, "example.com/gpu": 2},
        raw={"apiVersion": "v1", "kind": "Pod"},
    )


def _with(pod: m.Pod, **changes: object) -> m.Pod:
    return dataclasses.replace(pod, **changes)  # type: ignore[arg-type]


POD_CASES = {
    "rich": rich_pod(),
    "minimal": m.Pod(name="p"),
    "empty-namespace": m.Pod(name="p", namespace=""),
    "no-affinity-parts": _with(rich_pod(), affinity=m.Affinity()),
    # required=[] ("matches no node") must not collapse into required=None ("no requirement").
    "required-empty": _with(rich_pod(), affinity=m.Affinity(node_affinity=m.NodeAffinity(required=[]))),
    "required-none": _with(rich_pod(), affinity=m.Affinity(node_affinity=m.NodeAffinity(required=None))),
    "required-empty-term": _with(
        rich_pod(), affinity=m.Affinity(node_affinity=m.NodeAffinity(required=[m.NodeSelectorTerm()]))
    ),
    "empty-selectors": _with(
        rich_pod(),
        affinity=m.Affinity(
            pod_affinity=m.PodAffinity(
                required=[
                    m.PodAffinityTerm("zone", label_selector=m.LabelSelector(), namespace_selector=None),
                    m.PodAffinityTerm("zone", label_selector=None, namespace_selector=m.LabelSelector()),
                ]
            )
        ),
        topology_spread_constraints=[
            m.TopologySpreadConstraint(1, "zone", "DoNotSchedule", label_selector=m.LabelSelector()),
            m.TopologySpreadConstraint(1, "zone", "DoNotSchedule", label_selector=None, min_domains=None),
        ],
    ),
    "zero-deletion-timestamp": _with(rich_pod(), deletion_timestamp=0.0),
}


def rich_node() -> m.Node:
    return m.Node(
        name="node-7",
        uid="node-uid-7",
        labels={"kubernetes.io/hostname": "node-7", "topology.kubernetes.io/zone": "z1"},
        annotations={"a": "b"},
        taints=[m.Taint("dedicated", "NoSchedule", "gpu"), m.Taint("maintenance", "NoExecute")],
        unschedulable=True,
        capacity={"cpu": 64000, "memory": 256 * 1024**3, "pods": 110, "example.com/gpu": 8},
        allocatable={"cpu": 63500, "memory": 250 * 1024**3, "pods": 110, "example.com/gpu": 8},
        images=[
            m.ContainerImage(("nginx:1.27", "nginx@sha256:abc"), 70_000_000),
            m.ContainerImage(("pause:3.9",)),
        ],
        raw={"kind": "Node"},
    )


NODE_CASES = {"rich": rich_node(), "minimal": m.Node(name="n")}


def _assert_same_shape(got: object, want: object, path: str = "") -> None:
    """Equal values *and* equal types all the way down: ``==`` alone accepts ``1 == 1.0``,
    ``True == 1`` and a protobuf ScalarMap/RepeatedScalarContainer equal to a dict/list."""
    assert type(got) is type(want), f"{path}: {type(got).__name__} != {type(want).__name__}"
    if dataclasses.is_dataclass(want):
        for f in dataclasses.fields(want):
            if f.compare:
                _assert_same_shape(getattr(got, f.name), getattr(want, f.name), f"{path}.{f.name}")
    elif isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), path
        for k in want:
            _assert_same_shape(got[k], want[k], f"{path}[{k!r}]")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), path
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _assert_same_shape(g, w, f"{path}[{i}]")
    else:
        assert got == want, path


def _wire(msg: pb.types.Pod | pb.types.Node | pb.types.Status) -> bytes:
    return msg.SerializeToString(deterministic=True)


@pytest.mark.parametrize("name", sorted(POD_CASES))
def test_pod_round_trip(name: str) -> None:
    pod = POD_CASES[name]
    msg = convert.pod_to_proto(pod)
    back = convert.pod_from_proto(msg)
    assert back == pod
    assert back.raw == {}
    # Through the wire too: presence of optional parts survives serialization.
    parsed = pb.types.Pod.FromString(_wire(msg))
    assert convert.pod_from_proto(parsed) == pod
    # Exact types, not just equal values (tuples stay tuples, lists stay lists).
    _assert_same_shape(convert.pod_from_proto(parsed), pod)


def test_rich_pod_sets_every_field() -> None:
    pod, default = rich_pod(), m.Pod(name="")
    unset = [f.name for f in dataclasses.fields(m.Pod) if getattr(pod, f.name) == getattr(default, f.name)]
    # A pod's volumes are not on the wire (yet): the volume plugins are in-process, remote plugins see none.
    assert unset == ["volumes"]
    node, default_node = rich_node(), m.Node(name="")
    unset = [
        f.name for f in dataclasses.fields(m.Node) if getattr(node, f.name) == getattr(default_node, f.name)
    ]
    # A node's declared features are not on the wire (yet): NodeDeclaredFeatures is in-process.
    assert unset == ["declared_features"]


def test_required_presence_on_the_wire() -> None:
    empty = convert.pod_to_proto(POD_CASES["required-empty"])
    none = convert.pod_to_proto(POD_CASES["required-none"])
    assert empty.spec.affinity.node_affinity.HasField("required")
    assert not none.spec.affinity.node_affinity.HasField("required")
    assert not convert.pod_to_proto(m.Pod(name="p")).spec.HasField("affinity")


@pytest.mark.parametrize("name", sorted(NODE_CASES))
def test_node_round_trip(name: str) -> None:
    node = NODE_CASES[name]
    msg = convert.node_to_proto(node)
    back = convert.node_from_proto(pb.types.Node.FromString(_wire(msg)))
    assert back == node
    _assert_same_shape(back, node)
    assert back.raw == {}


STATUS_CASES = [
    Status(),
    Status(Code.Skip),
    Status.unschedulable("node(s) had untolerated taint {dedicated: gpu}", "Insufficient cpu", plugin="Fit"),
    Status.unresolvable("node(s) didn't match Pod's node affinity/selector", plugin="NodeAffinity"),
    Status.wait("waiting for gang", plugin="Coscheduling"),
    Status(Code.Pending, ("claim pending",), "DynamicResources"),
    Status.failure("plugin crashed", plugin="Remote"),
]


@pytest.mark.parametrize("status", STATUS_CASES, ids=lambda s: s.code.name)
def test_status_round_trip(status: Status) -> None:
    msg = convert.status_to_proto(status)
    assert msg.code == int(status.code)
    back = convert.status_from_proto(pb.types.Status.FromString(_wire(msg)))
    assert back == status
    assert back.code is status.code


def test_every_code_round_trips() -> None:
    for code in Code:
        assert convert.status_from_proto(convert.status_to_proto(Status(code))).code is code
        assert convert.code_from_proto(convert.code_to_proto(code)) is code


def test_unknown_code_from_a_newer_peer_is_an_error() -> None:
    msg = pb.types.Status(reasons=["x"], plugin="P")
    msg.code = 42  # type: ignore[assignment]
    status = convert.status_from_proto(msg)
    assert status.code is Code.Error
    assert status.reasons == ("x", "unknown status code 42")
    assert status.plugin == "P"


def test_pod_placement() -> None:
    pod = rich_pod()
    msg = convert.pod_placement_to_proto(pod, 7, "node-7", assumed=True)
    assert msg.ref == pb.types.PodRef(uid=pod.uid, namespace="shop", name="web-0")
    assert (msg.node_id, msg.node_name, msg.priority, msg.assumed) == (7, "node-7", pod.priority, True)
    assert dict(msg.requests) == pod.requests and dict(msg.labels) == pod.labels
    assert [p.host_port for p in msg.host_ports] == [80]
    assert not msg.affinity.HasField("node_affinity")
    assert msg.affinity.HasField("pod_anti_affinity")
    assert not convert.pod_placement_to_proto(m.Pod(name="p"), 1, "n").HasField("affinity")


# ---------------------------------------------------------------------------------------------------
# Property: random labels, resources and tolerations survive the round trip.

_text = st.text(st.characters(codec="utf-8"), max_size=12)
_int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_resources = st.dictionaries(_text, st.integers(min_value=0, max_value=2**63 - 1), max_size=6)
_tolerations = st.lists(
    st.builds(
        m.Toleration,
        key=_text,
        operator=st.sampled_from(["Equal", "Exists", ""]),
        value=_text,
        effect=st.sampled_from(["", "NoSchedule", "PreferNoSchedule", "NoExecute"]),
        toleration_seconds=st.none() | _int64,
    ),
    max_size=5,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    labels=st.dictionaries(_text, _text, max_size=8),
    requests=_resources,
    overhead=_resources,
    container_requests=_resources,
    tolerations=_tolerations,
    priority=_int64,
    created=st.floats(allow_nan=False),
    deleted=st.none() | st.floats(allow_nan=False),
)
def test_pod_round_trip_property(
    labels: dict[str, str],
    requests: dict[str, int],
    overhead: dict[str, int],
    container_requests: dict[str, int],
    tolerations: list[m.Toleration],
    priority: int,
    created: float,
    deleted: float | None,
) -> None:
    pod = m.Pod(
        name="p",
        labels=labels,
        node_selector=labels,
        requests=requests,
        overhead=overhead,
        containers=[m.Container("c", requests=container_requests, limits=requests)],
        tolerations=tolerations,
        priority=priority,
        creation_timestamp=created,
        deletion_timestamp=deleted,
    )
    msg = pb.types.Pod.FromString(_wire(convert.pod_to_proto(pod)))
    assert convert.pod_from_proto(msg) == pod
