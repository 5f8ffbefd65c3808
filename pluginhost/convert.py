"""Conversion between the Python cluster model and the outrigger.v1 protobuf messages.

``pluginhost.model`` dataclasses and ``pluginhost.status.Status`` on one side, ``pb.types`` messages
on the other. The conversions are exact: ``pod_from_proto(pod_to_proto(p)) == p`` for every field
except ``raw`` (the source manifest is not carried over the wire; it comes back empty). Optional
parts keep their presence: ``None`` affinities, selectors, ``NodeAffinity.required``,
``toleration_seconds``, ``min_domains`` and ``deletion_timestamp`` stay ``None``, and an empty
required-terms list stays an empty list.

Resource lists are ``map<string, int64>`` in canonical units (cpu millicores, everything else whole
units), exactly the integers the model holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import cast

from pluginhost import model as m
from pluginhost.pb import types
from pluginhost.status import Code, Status

__all__ = [
    "code_from_proto",
    "code_to_proto",
    "node_from_proto",
    "node_to_proto",
    "pod_from_proto",
    "pod_placement_to_proto",
    "pod_ref_to_proto",
    "pod_to_proto",
    "status_from_proto",
    "status_to_proto",
    "volume_from_proto",
]


# ---------------------------------------------------------------------------------------------------
# Status


def code_to_proto(code: Code) -> types.Code:
    """A framework code as the proto enum value (same numbers)."""
    return cast(types.Code, int(code))


def code_from_proto(value: int) -> Code:
    """A proto ``Code`` value as the framework code. Raises ``ValueError`` for unknown values."""
    return Code(value)


def status_to_proto(status: Status) -> types.Status:
    """``Status`` to ``types.Status``. ``Status.error`` (a local exception) is not carried; its
    message is expected in ``reasons`` already (see ``Status.failure``)."""
    return types.Status(code=code_to_proto(status.code), reasons=status.reasons, plugin=status.plugin)


def status_from_proto(msg: types.Status) -> Status:
    """``types.Status`` to ``Status``. A code this SDK does not know (a newer peer) becomes an
    ``Error`` status saying so, never an exception."""
    try:
        code = Code(msg.code)
    except ValueError:
        return Status(Code.Error, (*msg.reasons, f"unknown status code {msg.code}"), msg.plugin)
    return Status(code, tuple(msg.reasons), msg.plugin)


# ---------------------------------------------------------------------------------------------------
# Selectors and affinity


def _label_selector_to_proto(sel: m.LabelSelector) -> types.LabelSelector:
    return types.LabelSelector(
        match_labels=sel.match_labels,
        match_expressions=[
            types.LabelSelectorRequirement(key=r.key, operator=r.operator, values=r.values)
            for r in sel.match_expressions
        ],
    )


def _label_selector_from_proto(msg: types.LabelSelector) -> m.LabelSelector:
    return m.LabelSelector(
        match_labels=dict(msg.match_labels),
        match_expressions=[
            m.LabelSelectorRequirement(key=r.key, operator=r.operator, values=tuple(r.values))
            for r in msg.match_expressions
        ],
    )


def _node_requirements_to_proto(
    reqs: Iterable[m.NodeSelectorRequirement],
) -> list[types.NodeSelectorRequirement]:
    return [types.NodeSelectorRequirement(key=r.key, operator=r.operator, values=r.values) for r in reqs]


def _node_requirements_from_proto(
    msgs: Iterable[types.NodeSelectorRequirement],
) -> list[m.NodeSelectorRequirement]:
    return [m.NodeSelectorRequirement(key=r.key, operator=r.operator, values=tuple(r.values)) for r in msgs]


def _node_term_to_proto(term: m.NodeSelectorTerm) -> types.NodeSelectorTerm:
    return types.NodeSelectorTerm(
        match_expressions=_node_requirements_to_proto(term.match_expressions),
        match_fields=_node_requirements_to_proto(term.match_fields),
    )


def _node_term_from_proto(msg: types.NodeSelectorTerm) -> m.NodeSelectorTerm:
    return m.NodeSelectorTerm(
        match_expressions=_node_requirements_from_proto(msg.match_expressions),
        match_fields=_node_requirements_from_proto(msg.match_fields),
    )


def _node_affinity_to_proto(na: m.NodeAffinity) -> types.NodeAffinity:
    msg = types.NodeAffinity(
        preferred=[
            types.PreferredSchedulingTerm(weight=p.weight, preference=_node_term_to_proto(p.preference))
            for p in na.preferred
        ]
    )
    if na.required is not None:
        # SetInParent marks presence even when there are no terms ("matches no node").
        msg.required.SetInParent()
        msg.required.terms.extend(_node_term_to_proto(t) for t in na.required)
    return msg


def _node_affinity_from_proto(msg: types.NodeAffinity) -> m.NodeAffinity:
    required = [_node_term_from_proto(t) for t in msg.required.terms] if msg.HasField("required") else None
    return m.NodeAffinity(
        required=required,
        preferred=[
            m.PreferredSchedulingTerm(weight=p.weight, preference=_node_term_from_proto(p.preference))
            for p in msg.preferred
        ],
    )


def _pod_affinity_term_to_proto(term: m.PodAffinityTerm) -> types.PodAffinityTerm:
    msg = types.PodAffinityTerm(
        topology_key=term.topology_key,
        namespaces=term.namespaces,
        match_label_keys=term.match_label_keys,
        mismatch_label_keys=term.mismatch_label_keys,
    )
    if term.label_selector is not None:
        msg.label_selector.CopyFrom(_label_selector_to_proto(term.label_selector))
    if term.namespace_selector is not None:
        msg.namespace_selector.CopyFrom(_label_selector_to_proto(term.namespace_selector))
    return msg


def _pod_affinity_term_from_proto(msg: types.PodAffinityTerm) -> m.PodAffinityTerm:
    return m.PodAffinityTerm(
        topology_key=msg.topology_key,
        label_selector=(
            _label_selector_from_proto(msg.label_selector) if msg.HasField("label_selector") else None
        ),
        namespaces=tuple(msg.namespaces),
        namespace_selector=(
            _label_selector_from_proto(msg.namespace_selector) if msg.HasField("namespace_selector") else None
        ),
        match_label_keys=tuple(msg.match_label_keys),
        mismatch_label_keys=tuple(msg.mismatch_label_keys),
    )


def _pod_affinity_to_proto(pa: m.PodAffinity) -> types.PodAffinity:
    return types.PodAffinity(
        required=[_pod_affinity_term_to_proto(t) for t in pa.required],
        preferred=[
            types.WeightedPodAffinityTerm(weight=w.weight, term=_pod_affinity_term_to_proto(w.term))
            for w in pa.preferred
        ],
    )


def _pod_affinity_from_proto(msg: types.PodAffinity) -> m.PodAffinity:
    return m.PodAffinity(
        required=[_pod_affinity_term_from_proto(t) for t in msg.required],
        preferred=[
            m.WeightedPodAffinityTerm(weight=w.weight, term=_pod_affinity_term_from_proto(w.term))
            for w in msg.preferred
        ],
    )


def _affinity_to_proto(aff: m.Affinity) -> types.Affinity:
    msg = types.Affinity()
    if aff.node_affinity is not None:
        msg.node_affinity.CopyFrom(_node_affinity_to_proto(aff.node_affinity))
    if aff.pod_affinity is not None:
        msg.pod_affinity.CopyFrom(_pod_affinity_to_proto(aff.pod_affinity))
    if aff.pod_anti_affinity is not None:
        msg.pod_anti_affinity.CopyFrom(_pod_affinity_to_proto(aff.pod_anti_affinity))
    return msg


def _affinity_from_proto(msg: types.Affinity) -> m.Affinity:
    return m.Affinity(
        node_affinity=_node_affinity_from_proto(msg.node_affinity) if msg.HasField("node_affinity") else None,
        pod_affinity=_pod_affinity_from_proto(msg.pod_affinity) if msg.HasField("pod_affinity") else None,
        pod_anti_affinity=(
            _pod_affinity_from_proto(msg.pod_anti_affinity) if msg.HasField("pod_anti_affinity") else None
        ),
    )


# ---------------------------------------------------------------------------------------------------
# Tolerations, spreading, containers


def _toleration_to_proto(t: m.Toleration) -> types.Toleration:
    msg = types.Toleration(key=t.key, operator=t.operator, value=t.value, effect=t.effect)
    if t.toleration_seconds is not None:
        msg.toleration_seconds = t.toleration_seconds
    return msg


def _toleration_from_proto(msg: types.Toleration) -> m.Toleration:
    return m.Toleration(
        key=msg.key,
        operator=msg.operator,
        value=msg.value,
        effect=msg.effect,
        toleration_seconds=msg.toleration_seconds if msg.HasField("toleration_seconds") else None,
    )


def _spread_to_proto(c: m.TopologySpreadConstraint) -> types.TopologySpreadConstraint:
    msg = types.TopologySpreadConstraint(
        max_skew=c.max_skew,
        topology_key=c.topology_key,
        when_unsatisfiable=c.when_unsatisfiable,
        node_affinity_policy=c.node_affinity_policy,
        node_taints_policy=c.node_taints_policy,
        match_label_keys=c.match_label_keys,
    )
    if c.label_selector is not None:
        msg.label_selector.CopyFrom(_label_selector_to_proto(c.label_selector))
    if c.min_domains is not None:
        msg.min_domains = c.min_domains
    return msg


def _spread_from_proto(msg: types.TopologySpreadConstraint) -> m.TopologySpreadConstraint:
    return m.TopologySpreadConstraint(
        max_skew=msg.max_skew,
        topology_key=msg.topology_key,
        when_unsatisfiable=msg.when_unsatisfiable,
        label_selector=(
            _label_selector_from_proto(msg.label_selector) if msg.HasField("label_selector") else None
        ),
        min_domains=msg.min_domains if msg.HasField("min_domains") else None,
        node_affinity_policy=msg.node_affinity_policy,
        node_taints_policy=msg.node_taints_policy,
        match_label_keys=tuple(msg.match_label_keys),
    )


def _port_to_proto(p: m.ContainerPort) -> types.ContainerPort:
    return types.ContainerPort(
        container_port=p.container_port, host_port=p.host_port, protocol=p.protocol, host_ip=p.host_ip
    )


def _port_from_proto(msg: types.ContainerPort) -> m.ContainerPort:
    return m.ContainerPort(
        container_port=msg.container_port, host_port=msg.host_port, protocol=msg.protocol, host_ip=msg.host_ip
    )


def _container_to_proto(c: m.Container) -> types.Container:
    return types.Container(
        name=c.name,
        image=c.image,
        requests=c.requests,
        limits=c.limits,
        ports=[_port_to_proto(p) for p in c.ports],
        restart_policy=c.restart_policy,
    )


def _container_from_proto(msg: types.Container) -> m.Container:
    return m.Container(
        name=msg.name,
        image=msg.image,
        requests=dict(msg.requests),
        limits=dict(msg.limits),
        ports=[_port_from_proto(p) for p in msg.ports],
        restart_policy=msg.restart_policy,
    )


# ---------------------------------------------------------------------------------------------------
# Pods


def _meta(
    name: str,
    namespace: str,
    uid: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    creation_timestamp: float = 0.0,
    deletion_timestamp: float | None = None,
) -> types.ObjectMeta:
    meta = types.ObjectMeta(
        name=name,
        namespace=namespace,
        uid=uid,
        labels=labels,
        annotations=annotations,
        creation_timestamp=creation_timestamp,
    )
    if deletion_timestamp is not None:
        meta.deletion_timestamp = deletion_timestamp
    return meta


def pod_to_proto(pod: m.Pod) -> types.Pod:
    """A model ``Pod`` as ``types.Pod`` (``raw`` is not carried).

    Filled in place, empty fields left unset: a submessage handed to a constructor is copied, and an
    empty map given as a keyword costs as much as a full one (this runs for every pod a remote plugin
    sees).
    """
    msg = types.Pod()
    meta = msg.metadata
    meta.name = pod.name
    meta.namespace = pod.namespace
    meta.uid = pod.uid
    if pod.labels:
        meta.labels.update(pod.labels)
    if pod.annotations:
        meta.annotations.update(pod.annotations)
    meta.creation_timestamp = pod.creation_timestamp
    if pod.deletion_timestamp is not None:
        meta.deletion_timestamp = pod.deletion_timestamp
    spec = msg.spec
    spec.scheduler_name = pod.scheduler_name
    spec.node_name = pod.node_name
    spec.priority = pod.priority
    spec.priority_class_name = pod.priority_class_name
    spec.preemption_policy = pod.preemption_policy
    if pod.node_selector:
        spec.node_selector.update(pod.node_selector)
    if pod.tolerations:
        spec.tolerations.extend(_toleration_to_proto(t) for t in pod.tolerations)
    if pod.topology_spread_constraints:
        spec.topology_spread_constraints.extend(_spread_to_proto(c) for c in pod.topology_spread_constraints)
    if pod.scheduling_gates:
        spec.scheduling_gates.extend(pod.scheduling_gates)
    for c in pod.containers:
        _fill_container(spec.containers.add(), c)
    for c in pod.init_containers:
        _fill_container(spec.init_containers.add(), c)
    if pod.overhead:
        spec.overhead.update(pod.overhead)
    if pod.affinity is not None:
        spec.affinity.CopyFrom(_affinity_to_proto(pod.affinity))
    for v in pod.volumes:
        _fill_volume(spec.volumes.add(), v)
    for rc in pod.resource_claims:
        entry = spec.resource_claims.add()
        entry.name = rc.name
        entry.resource_claim_name = rc.claim_name
        entry.resource_claim_template_name = rc.template_name
    if pod.scheduling_group is not None:
        spec.scheduling_group = pod.scheduling_group
    msg.status.SetInParent()
    msg.status.nominated_node_name = pod.nominated_node_name
    if pod.resource_claim_statuses:
        msg.status.resource_claim_statuses.update(pod.resource_claim_statuses)
    if pod.requests:
        msg.requests.update(pod.requests)
    return msg


def _fill_container(msg: types.Container, c: m.Container) -> None:
    msg.name = c.name
    msg.image = c.image
    if c.requests:
        msg.requests.update(c.requests)
    if c.limits:
        msg.limits.update(c.limits)
    for p in c.ports:
        port = msg.ports.add()
        port.container_port = p.container_port
        port.host_port = p.host_port
        port.protocol = p.protocol
        port.host_ip = p.host_ip
    msg.restart_policy = c.restart_policy


def _fill_volume(msg: types.PodVolume, v: m.Volume) -> None:
    msg.name = v.name
    msg.source = v.source
    msg.claim_name = v.claim_name
    msg.read_only = v.read_only
    msg.disk = v.disk
    msg.pool = v.pool
    if v.monitors:
        msg.monitors.extend(v.monitors)
    msg.driver = v.driver


def volume_from_proto(msg: types.PodVolume) -> m.Volume:
    """A ``types.PodVolume`` as a model ``Volume``."""
    return m.Volume(name=msg.name, source=msg.source, claim_name=msg.claim_name, read_only=msg.read_only,
                    disk=msg.disk, pool=msg.pool, monitors=tuple(msg.monitors), driver=msg.driver)


def pod_from_proto(msg: types.Pod) -> m.Pod:
    """A ``types.Pod`` as a model ``Pod`` (``raw`` is empty). Fields are taken as sent, without
    defaulting: the framework always sends complete pods."""
    meta, spec = msg.metadata, msg.spec
    return m.Pod(
        name=meta.name,
        namespace=meta.namespace,
        uid=meta.uid,
        labels=dict(meta.labels),
        annotations=dict(meta.annotations),
        scheduler_name=spec.scheduler_name,
        node_name=spec.node_name,
        priority=spec.priority,
        priority_class_name=spec.priority_class_name,
        preemption_policy=spec.preemption_policy,
        node_selector=dict(spec.node_selector),
        affinity=_affinity_from_proto(spec.affinity) if spec.HasField("affinity") else None,
        tolerations=[_toleration_from_proto(t) for t in spec.tolerations],
        topology_spread_constraints=[_spread_from_proto(c) for c in spec.topology_spread_constraints],
        scheduling_gates=tuple(spec.scheduling_gates),
        volumes=tuple(volume_from_proto(v) for v in spec.volumes),
        resource_claims=tuple(
            m.PodResourceClaim(rc.name, rc.resource_claim_name, rc.resource_claim_template_name)
            for rc in spec.resource_claims
        ),
        resource_claim_statuses=dict(msg.status.resource_claim_statuses),
        scheduling_group=spec.scheduling_group if spec.HasField("scheduling_group") else None,
        containers=[_container_from_proto(c) for c in spec.containers],
        init_containers=[_container_from_proto(c) for c in spec.init_containers],
        overhead=dict(spec.overhead),
        creation_timestamp=meta.creation_timestamp,
        nominated_node_name=msg.status.nominated_node_name,
        deletion_timestamp=meta.deletion_timestamp if meta.HasField("deletion_timestamp") else None,
        requests=dict(msg.requests),
    )


def pod_ref_to_proto(pod: m.Pod) -> types.PodRef:
    """The pod's identity as ``types.PodRef``."""
    return types.PodRef(uid=pod.uid, namespace=pod.namespace, name=pod.name)


def pod_placement_to_proto(
    pod: m.Pod, node_id: int, node_name: str, *, assumed: bool = False
) -> types.PodPlacement:
    """The compact ``types.PodPlacement`` of a pod on a node (NodeInfo.pods, snapshot deltas).
    Only the pod's inter-pod (anti-)affinity is carried, and only when it has some."""
    msg = types.PodPlacement(
        ref=pod_ref_to_proto(pod),
        node_id=node_id,
        node_name=node_name or pod.node_name,
        priority=pod.priority,
        labels=pod.labels,
        requests=pod.requests,
        host_ports=[_port_to_proto(p) for p in pod.host_ports()],
        assumed=assumed,
    )
    aff = pod.affinity
    if aff is not None and (aff.pod_affinity is not None or aff.pod_anti_affinity is not None):
        msg.affinity.CopyFrom(_affinity_to_proto(m.Affinity(None, aff.pod_affinity, aff.pod_anti_affinity)))
    return msg


# ---------------------------------------------------------------------------------------------------
# Nodes


def node_to_proto(node: m.Node) -> types.Node:
    """A model ``Node`` as ``types.Node`` (``raw`` is not carried)."""
    return types.Node(
        metadata=_meta(node.name, "", node.uid, node.labels, node.annotations),
        spec=types.NodeSpec(
            taints=[types.Taint(key=t.key, value=t.value, effect=t.effect) for t in node.taints],
            unschedulable=node.unschedulable,
        ),
        status=types.NodeStatus(
            capacity=node.capacity,
            allocatable=node.allocatable,
            images=[types.ContainerImage(names=i.names, size_bytes=i.size_bytes) for i in node.images],
        ),
    )


def node_from_proto(msg: types.Node) -> m.Node:
    """A ``types.Node`` as a model ``Node`` (``raw`` is empty)."""
    meta, spec, status = msg.metadata, msg.spec, msg.status
    return m.Node(
        name=meta.name,
        uid=meta.uid,
        labels=dict(meta.labels),
        annotations=dict(meta.annotations),
        taints=[m.Taint(key=t.key, effect=t.effect, value=t.value) for t in spec.taints],
        unschedulable=spec.unschedulable,
        capacity=dict(status.capacity),
        allocatable=dict(status.allocatable),
        images=[m.ContainerImage(names=tuple(i.names), size_bytes=i.size_bytes) for i in status.images],
    )
