"""A PodDisruptionBudget (``policy/v1``) to the model, checked as the API server's validation checks it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pluginhost.decode import FieldError, get_int, get_map, get_str, join, timestamp, wrong_type
from pluginhost.model import PodDisruptionBudget

from ._fields import INT32_MAX, label_selector, shown
from ._meta import object_meta, quoted, uid

__all__ = ["PDB_API_VERSION", "build_pdb"]

PDB_API_VERSION = "policy/v1"
_PERCENT_RE = re.compile(r"[0-9]+%")
_UNHEALTHY_POD_EVICTION_POLICIES = ("AlwaysAllow", "IfHealthyBudget")


def _int_or_percent(m: Mapping[str, Any], key: str, parent: str) -> int | str | None:
    """An IntOrString that counts pods: a non-negative int32, or a percent string up to "100%"."""
    v = m.get(key)
    if v is None:
        return None
    path = join(parent, key)
    if isinstance(v, int) and not isinstance(v, bool):
        if v < 0:
            raise FieldError(path, f"Invalid value: {v}: must be greater than or equal to 0")
        if v > INT32_MAX:
            raise FieldError(path, f"must fit in a 32-bit integer, got {v}")
        return v
    if not isinstance(v, str):
        wrong_type(path, 'an integer or a percent string such as "50%"', v)
    if not _PERCENT_RE.fullmatch(v):
        raise FieldError(
            path,
            f"Invalid value: {quoted(v)}: a valid percent string must be a numeric string followed by an ending "
            "'%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
        )
    if int(v[:-1]) > 100:
        raise FieldError(path, f"Invalid value: {quoted(v)}: must not be greater than 100%")
    return v


def build_pdb(obj: dict[str, Any]) -> PodDisruptionBudget:
    """The :class:`PodDisruptionBudget` of a decoded ``policy/v1`` manifest."""
    api_version = obj.get("apiVersion")
    if api_version != PDB_API_VERSION:
        raise FieldError(
            "apiVersion",
            f'unsupported apiVersion {shown(api_version)} for PodDisruptionBudget (expected "{PDB_API_VERSION}")',
        )
    meta, name, namespace, labels, _ = object_meta(obj, namespaced=True)
    spec = get_map(obj, "spec", "")
    min_available = _int_or_percent(spec, "minAvailable", "spec")
    max_unavailable = _int_or_percent(spec, "maxUnavailable", "spec")
    if min_available is not None and max_unavailable is not None:
        raise FieldError("spec", "minAvailable and maxUnavailable cannot be both set")
    policy = get_str(spec, "unhealthyPodEvictionPolicy", "spec")
    if policy and policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in _UNHEALTHY_POD_EVICTION_POLICIES)
        raise FieldError(
            "spec.unhealthyPodEvictionPolicy", f"Unsupported value: {quoted(policy)}: supported values: {supported}"
        )
    status = get_map(obj, "status", "")
    disrupted = get_map(status, "disruptedPods", "status")
    disrupted_pods: dict[str, float] = {}
    for pod_name in disrupted:
        when = timestamp(disrupted, pod_name, "status.disruptedPods")
        disrupted_pods[str(pod_name)] = 0.0 if when is None else when
    allowed = get_int(status, "disruptionsAllowed", "status", 0)
    return PodDisruptionBudget(
        name=name,
        namespace=namespace,
        uid=uid(meta),
        labels=labels,
        selector=label_selector(spec, "selector", "spec"),
        min_available=min_available,
        max_unavailable=max_unavailable,
        disruptions_allowed=allowed,
        disrupted_pods=disrupted_pods,
        raw=obj,
    )
