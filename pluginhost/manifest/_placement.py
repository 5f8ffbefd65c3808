"""Where a pod asks to run: its node and pod (anti-)affinity, tolerations and topology spread constraints.

The fields of a v1 PodSpec that the placement plugins read (NodeAffinity, InterPodAffinity,
TaintToleration, PodTopologySpread), with the API server's validation of each and its defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pluginhost.decode import FieldError, get_int, get_list, get_map, get_str, item_map, one_of, required_str, str_tuple
from pluginhost.model import (
    Affinity,
    NodeAffinity,
    NodeSelectorTerm,
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    Toleration,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)

from ._fields import label_selector, node_selector_term, node_selector_terms, preferred

__all__ = ["TAINT_EFFECTS", "affinity", "spread_constraints", "toleration"]

TAINT_EFFECTS = frozenset({"NoSchedule", "PreferNoSchedule", "NoExecute"})
_WHEN_UNSATISFIABLE = frozenset({"DoNotSchedule", "ScheduleAnyway"})
_INCLUSION_POLICIES = frozenset({"Honor", "Ignore"})


def _node_affinity(v: Mapping[str, Any], path: str) -> NodeAffinity:
    required: list[NodeSelectorTerm] | None = None
    req = v.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        rpath = f"{path}.requiredDuringSchedulingIgnoredDuringExecution"
        required = node_selector_terms(item_map(req, rpath), rpath)
    return NodeAffinity(
        required=required,
        preferred=[
            PreferredSchedulingTerm(weight, term)
            for weight, term in preferred(v, path, "preference", node_selector_term)
        ],
    )


def _pod_affinity_term(v: object, path: str) -> PodAffinityTerm:
    t = item_map(v, path)
    selector = label_selector(t, "labelSelector", path)
    match_keys = str_tuple(t, "matchLabelKeys", path)
    mismatch_keys = str_tuple(t, "mismatchLabelKeys", path)
    if (match_keys or mismatch_keys) and selector is None:
        which = "matchLabelKeys" if match_keys else "mismatchLabelKeys"
        raise FieldError(f"{path}.{which}", "must not be set when labelSelector is not set")
    both = set(match_keys) & set(mismatch_keys)
    if both:
        raise FieldError(f"{path}.mismatchLabelKeys", f'key "{min(both)}" is also in matchLabelKeys')
    return PodAffinityTerm(
        topology_key=required_str(t, "topologyKey", path),
        label_selector=selector,
        namespaces=str_tuple(t, "namespaces", path),
        namespace_selector=label_selector(t, "namespaceSelector", path),
        match_label_keys=match_keys,
        mismatch_label_keys=mismatch_keys,
    )


def _pod_affinity(v: Mapping[str, Any], path: str) -> PodAffinity:
    required = [
        _pod_affinity_term(t, f"{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]")
        for i, t in enumerate(get_list(v, "requiredDuringSchedulingIgnoredDuringExecution", path))
    ]
    return PodAffinity(
        required=required,
        preferred=[
            WeightedPodAffinityTerm(weight, term)
            for weight, term in preferred(v, path, "podAffinityTerm", _pod_affinity_term)
        ],
    )


def affinity(spec: Mapping[str, Any]) -> Affinity | None:
    """``spec.affinity``; None when it holds nothing."""
    a = get_map(spec, "affinity", "spec")
    if not a:
        return None
    node = a.get("nodeAffinity")
    pod = a.get("podAffinity")
    anti = a.get("podAntiAffinity")
    result = Affinity(
        node_affinity=None
        if node is None
        else _node_affinity(item_map(node, "spec.affinity.nodeAffinity"), "spec.affinity.nodeAffinity"),
        pod_affinity=None
        if pod is None
        else _pod_affinity(item_map(pod, "spec.affinity.podAffinity"), "spec.affinity.podAffinity"),
        pod_anti_affinity=None
        if anti is None
        else _pod_affinity(item_map(anti, "spec.affinity.podAntiAffinity"), "spec.affinity.podAntiAffinity"),
    )
    # Callers test "pod.affinity is None" to skip work; an affinity with nothing in it is None.
    if result.node_affinity is None and result.pod_affinity is None and result.pod_anti_affinity is None:
        return None
    return result


def toleration(v: object, path: str) -> Toleration:
    """One of ``spec.tolerations``."""
    t = item_map(v, path)
    key = get_str(t, "key", path)
    # "" is a valid operator meaning Equal; store the explicit form.
    operator = get_str(t, "operator", path) or "Equal"
    one_of(operator, ("Equal", "Exists"), f"{path}.operator", "operator")
    value = get_str(t, "value", path)
    if operator == "Exists" and value:
        raise FieldError(f"{path}.value", "must be empty when operator is Exists")
    if not key and operator != "Exists":
        raise FieldError(f"{path}.operator", "must be Exists when key is empty")
    effect = get_str(t, "effect", path)
    if effect:
        one_of(effect, TAINT_EFFECTS, f"{path}.effect", "effect")
    seconds = t.get("tolerationSeconds")
    if seconds is not None:
        seconds = get_int(t, "tolerationSeconds", path, 0)
    return Toleration(key=key, operator=operator, value=value, effect=effect, toleration_seconds=seconds)


def _spread_constraint(v: object, path: str) -> TopologySpreadConstraint:
    c = item_map(v, path)
    if c.get("maxSkew") is None:
        raise FieldError(f"{path}.maxSkew", "required field is missing")
    max_skew = get_int(c, "maxSkew", path, 0)
    if max_skew < 1:
        raise FieldError(f"{path}.maxSkew", f"must be greater than zero, got {max_skew}")
    topology_key = required_str(c, "topologyKey", path)
    when = one_of(
        required_str(c, "whenUnsatisfiable", path),
        _WHEN_UNSATISFIABLE,
        f"{path}.whenUnsatisfiable",
        "whenUnsatisfiable",
    )
    min_domains: int | None = None
    if c.get("minDomains") is not None:
        min_domains = get_int(c, "minDomains", path, 0)
        if min_domains < 1:
            raise FieldError(f"{path}.minDomains", f"must be greater than zero, got {min_domains}")
        if when != "DoNotSchedule":
            raise FieldError(f"{path}.minDomains", "can only be set when whenUnsatisfiable is DoNotSchedule")
    selector = label_selector(c, "labelSelector", path)
    match_keys = str_tuple(c, "matchLabelKeys", path)
    if match_keys and selector is None:
        raise FieldError(f"{path}.matchLabelKeys", "must not be set when labelSelector is not set")
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=topology_key,
        when_unsatisfiable=when,
        label_selector=selector,
        min_domains=min_domains,
        node_affinity_policy=one_of(
            get_str(c, "nodeAffinityPolicy", path, "Honor") or "Honor",
            _INCLUSION_POLICIES,
            f"{path}.nodeAffinityPolicy",
            "policy",
        ),
        node_taints_policy=one_of(
            get_str(c, "nodeTaintsPolicy", path, "Ignore") or "Ignore",
            _INCLUSION_POLICIES,
            f"{path}.nodeTaintsPolicy",
            "policy",
        ),
        match_label_keys=match_keys,
    )


def spread_constraints(spec: Mapping[str, Any]) -> list[TopologySpreadConstraint]:
    """``spec.topologySpreadConstraints``: at most one for each topology key and ``whenUnsatisfiable``."""
    constraints = [
        _spread_constraint(c, f"spec.topologySpreadConstraints[{i}]")
        for i, c in enumerate(get_list(spec, "topologySpreadConstraints", "spec"))
    ]
    pairs: set[tuple[str, str]] = set()
    for i, tsc in enumerate(constraints):
        pair = (tsc.topology_key, tsc.when_unsatisfiable)
        if pair in pairs:
            raise FieldError(
                f"spec.topologySpreadConstraints[{i}]",
                f'duplicate constraint for topologyKey "{tsc.topology_key}" '
                f"and whenUnsatisfiable {tsc.when_unsatisfiable}",
            )
        pairs.add(pair)
    return constraints
