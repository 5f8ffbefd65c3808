"""The model back to ``v1`` manifests, for display and for clients that want a v1 object.

An object parsed from a manifest is shown as that manifest (quantities as written); one built in code
gets a manifest built from the model, omitting defaults, that :func:`~pluginhost.manifest.pod_from_dict`
and :func:`~pluginhost.manifest.node_from_dict` read back to an equal object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pluginhost.model import (
    Affinity,
    Container,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    Toleration,
    TopologySpreadConstraint,
)
from pluginhost.quantity import format_quantity

__all__ = ["node_to_dict", "pod_to_dict"]


def _format_timestamp(ts: float) -> str:
    dt = datetime.fromtimestamp(ts, UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if dt.microsecond else "%Y-%m-%dT%H:%M:%SZ")


def _resources_to_dict(amounts: Mapping[str, int]) -> dict[str, str]:
    return {r: format_quantity(r, q) for r, q in amounts.items()}


def _requirements_to_dict(
    requirements: Iterable[LabelSelectorRequirement | NodeSelectorRequirement],
) -> list[dict[str, Any]]:
    out = []
    for r in requirements:
        requirement: dict[str, Any] = {"key": r.key, "operator": r.operator}
        if r.values:
            requirement["values"] = list(r.values)
        out.append(requirement)
    return out


def _selector_to_dict(sel: LabelSelector) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if sel.match_labels:
        out["matchLabels"] = dict(sel.match_labels)
    if sel.match_expressions:
        out["matchExpressions"] = _requirements_to_dict(sel.match_expressions)
    return out


def _term_to_dict(term: NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if term.match_expressions:
        out["matchExpressions"] = _requirements_to_dict(term.match_expressions)
    if term.match_fields:
        out["matchFields"] = _requirements_to_dict(term.match_fields)
    return out


def _pod_term_to_dict(term: PodAffinityTerm) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": term.topology_key}
    if term.label_selector is not None:
        out["labelSelector"] = _selector_to_dict(term.label_selector)
    if term.namespaces:
        out["namespaces"] = list(term.namespaces)
    if term.namespace_selector is not None:
        out["namespaceSelector"] = _selector_to_dict(term.namespace_selector)
    if term.match_label_keys:
        out["matchLabelKeys"] = list(term.match_label_keys)
    if term.mismatch_label_keys:
        out["mismatchLabelKeys"] = list(term.mismatch_label_keys)
    return out


def _pod_affinity_to_dict(a: PodAffinity) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if a.required:
        out["requiredDuringSchedulingIgnoredDuringExecution"] = [_pod_term_to_dict(t) for t in a.required]
    if a.preferred:
        out["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w.weight, "podAffinityTerm": _pod_term_to_dict(w.term)} for w in a.preferred
        ]
    return out


def _affinity_to_dict(a: Affinity) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if a.node_affinity is not None:
        na: dict[str, Any] = {}
        if a.node_affinity.required is not None:
            na["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [_term_to_dict(t) for t in a.node_affinity.required]
            }
        if a.node_affinity.preferred:
            na["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": p.weight, "preference": _term_to_dict(p.preference)}
                for p in a.node_affinity.preferred
            ]
        out["nodeAffinity"] = na
    if a.pod_affinity is not None:
        out["podAffinity"] = _pod_affinity_to_dict(a.pod_affinity)
    if a.pod_anti_affinity is not None:
        out["podAntiAffinity"] = _pod_affinity_to_dict(a.pod_anti_affinity)
    return out


def _container_to_dict(c: Container) -> dict[str, Any]:
    out: dict[str, Any] = {"name": c.name}
    if c.image:
        out["image"] = c.image
    resources: dict[str, Any] = {}
    if c.requests:
        resources["requests"] = _resources_to_dict(c.requests)
    if c.limits:
        resources["limits"] = _resources_to_dict(c.limits)
    if resources:
        out["resources"] = resources
    if c.ports:
        ports = []
        for p in c.ports:
            port: dict[str, Any] = {"containerPort": p.container_port, "protocol": p.protocol}
            if p.host_port:
                port["hostPort"] = p.host_port
            if p.host_ip:
                port["hostIP"] = p.host_ip
            ports.append(port)
        out["ports"] = ports
    if c.restart_policy:
        out["restartPolicy"] = c.restart_policy
    return out


def _toleration_to_dict(t: Toleration) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": t.operator}
    if t.key:
        out["key"] = t.key
    if t.value:
        out["value"] = t.value
    if t.effect:
        out["effect"] = t.effect
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


def _spread_to_dict(c: TopologySpreadConstraint) -> dict[str, Any]:
    out: dict[str, Any] = {
        "maxSkew": c.max_skew,
        "topologyKey": c.topology_key,
        "whenUnsatisfiable": c.when_unsatisfiable,
    }
    if c.label_selector is not None:
        out["labelSelector"] = _selector_to_dict(c.label_selector)
    if c.min_domains is not None:
        out["minDomains"] = c.min_domains
    if c.node_affinity_policy != "Honor":
        out["nodeAffinityPolicy"] = c.node_affinity_policy
    if c.node_taints_policy != "Ignore":
        out["nodeTaintsPolicy"] = c.node_taints_policy
    if c.match_label_keys:
        out["matchLabelKeys"] = list(c.match_label_keys)
    return out


def pod_to_dict(pod: Pod) -> dict[str, Any]:
    """The pod as a ``v1`` manifest: the one it was parsed from, else one built from the model
    (omitting defaults) that :func:`pod_from_dict` reads back to an equal pod."""
    if pod.raw:
        return pod.raw
    meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace}
    if pod.uid:
        meta["uid"] = pod.uid
    if pod.labels:
        meta["labels"] = dict(pod.labels)
    if pod.annotations:
        meta["annotations"] = dict(pod.annotations)
    meta["creationTimestamp"] = _format_timestamp(pod.creation_timestamp)
    if pod.deletion_timestamp is not None:
        meta["deletionTimestamp"] = _format_timestamp(pod.deletion_timestamp)
    spec: dict[str, Any] = {}
    if pod.scheduler_name != "default-scheduler":
        spec["schedulerName"] = pod.scheduler_name
    if pod.node_name:
        spec["nodeName"] = pod.node_name
    if pod.priority:
        spec["priority"] = pod.priority
    if pod.priority_class_name:
        spec["priorityClassName"] = pod.priority_class_name
    if pod.preemption_policy != "PreemptLowerPriority":
        spec["preemptionPolicy"] = pod.preemption_policy
    if pod.node_selector:
        spec["nodeSelector"] = dict(pod.node_selector)
    if pod.affinity is not None:
        spec["affinity"] = _affinity_to_dict(pod.affinity)
    if pod.tolerations:
        spec["tolerations"] = [_toleration_to_dict(t) for t in pod.tolerations]
    if pod.topology_spread_constraints:
        spec["topologySpreadConstraints"] = [_spread_to_dict(c) for c in pod.topology_spread_constraints]
    if pod.scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in pod.scheduling_gates]
    if pod.scheduling_group is not None:
        spec["schedulingGroup"] = {"podGroupName": pod.scheduling_group}
    if pod.init_containers:
        spec["initContainers"] = [_container_to_dict(c) for c in pod.init_containers]
    spec["containers"] = [_container_to_dict(c) for c in pod.containers]
    if pod.overhead:
        spec["overhead"] = _resources_to_dict(pod.overhead)
    if pod.resource_claims:
        spec["resourceClaims"] = [
            {"name": c.name, **({"resourceClaimName": c.claim_name} if c.claim_name else {}),
             **({"resourceClaimTemplateName": c.template_name} if c.template_name else {})}
            for c in pod.resource_claims
        ]
    out: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    status: dict[str, Any] = {}
    if pod.nominated_node_name:
        status["nominatedNodeName"] = pod.nominated_node_name
    if pod.resource_claim_statuses:
        status["resourceClaimStatuses"] = [
            {"name": n, **({"resourceClaimName": c} if c else {})} for n, c in pod.resource_claim_statuses.items()
        ]
    if status:
        out["status"] = status
    return out


def node_to_dict(node: Node) -> dict[str, Any]:
    """The node as a ``v1`` manifest: the one it was parsed from, else one built from the model."""
    if node.raw:
        return node.raw
    meta: dict[str, Any] = {"name": node.name}
    if node.uid:
        meta["uid"] = node.uid
    if node.labels:
        meta["labels"] = dict(node.labels)
    if node.annotations:
        meta["annotations"] = dict(node.annotations)
    spec: dict[str, Any] = {}
    if node.unschedulable:
        spec["unschedulable"] = True
    if node.taints:
        spec["taints"] = [
            {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect} for t in node.taints
        ]
    status: dict[str, Any] = {
        "capacity": _resources_to_dict(node.capacity),
        "allocatable": _resources_to_dict(node.allocatable),
    }
    if node.images:
        status["images"] = [{"names": list(i.names), "sizeBytes": i.size_bytes} for i in node.images]
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}
