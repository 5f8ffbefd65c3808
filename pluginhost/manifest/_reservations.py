"""A koordinator Reservation (``scheduling.koordinator.sh/v1alpha1``) to the model: the reserve pod its
template describes, its owners and how long it lasts."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

from pluginhost.decode import (
    FieldError,
    get_list,
    get_map,
    get_str,
    item_map,
    join,
    required_str,
    str_map,
    timestamp,
    wrong_type,
)
from pluginhost.model import (
    DEFAULT_RESERVATION_TTL,
    RESERVATION_ANNOTATION,
    RESERVATION_API_VERSIONS,
    RESERVATION_NAMESPACE,
    Pod,
    Reservation,
    ReservationOwner,
)

from ._fields import label_selector
from ._meta import metadata, uid
from ._pods import build_pod

__all__ = ["build_reservation"]

_DURATION_PART_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration(m: Mapping[str, Any], key: str, parent: str) -> float | None:
    """A Go-style duration ("1h30m", "90s", "0") in seconds."""
    v = m.get(key)
    if v is None:
        return None
    path = join(parent, key)
    if isinstance(v, int | float) and not isinstance(v, bool):
        raise FieldError(path, f'invalid duration {v!r}: give a unit, e.g. "{v}s"')
    if not isinstance(v, str):
        wrong_type(path, 'a duration string such as "1h" or "30m"', v)
    text = v.strip()
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION_PART_RE.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise FieldError(path, f'invalid duration "{v}" (e.g. "1h", "30m", "1h30m", "90s", "0" for never)')
    return total


def _reservation_owner(v: object, path: str) -> ReservationOwner:
    m = item_map(v, path)
    obj = m.get("object")
    owner = ReservationOwner(label_selector=label_selector(m, "labelSelector", path))
    if obj is not None:
        opath = f"{path}.object"
        ref = item_map(obj, opath)
        kind = get_str(ref, "kind", opath, "Pod")
        if kind != "Pod":
            raise FieldError(f"{opath}.kind", f'unsupported owner kind "{kind}" (Pod)')
        owner.name = required_str(ref, "name", opath)
        owner.namespace = get_str(ref, "namespace", opath) or "default"
        owner.uid = get_str(ref, "uid", opath)
    if obj is None and owner.label_selector is None:
        raise FieldError(path, "an owner needs an object (a pod) or a labelSelector")
    return owner


def _template_pod(spec: Mapping[str, Any], name: str) -> Pod:
    """The reserve pod ``spec.template`` describes, named after the reservation."""
    if "template" not in spec:
        raise FieldError("spec.template", "required field is missing (the reserve pod: resources, nodeSelector, ...)")
    template = get_map(spec, "template", "spec")
    tmeta = get_map(template, "metadata", "spec.template")
    pod_doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": dict(str_map(tmeta, "labels", "spec.template.metadata")),
            "annotations": dict(str_map(tmeta, "annotations", "spec.template.metadata")),
        },
        "spec": dict(get_map(template, "spec", "spec.template")),
    }
    try:
        pod = build_pod(pod_doc)
    except FieldError as e:
        raise FieldError(join("spec.template", e.path), e.reason) from None
    if pod.node_name:
        raise FieldError(
            "spec.template.spec.nodeName", "a reservation is placed by the scheduler; nodeName is not allowed"
        )
    return pod


def build_reservation(obj: dict[str, Any]) -> Reservation:
    """The :class:`Reservation` of a decoded Reservation manifest."""
    api_version = obj.get("apiVersion")
    if api_version not in RESERVATION_API_VERSIONS:
        allowed = " or ".join(f'"{a}"' for a in RESERVATION_API_VERSIONS)
        shown = json.dumps(api_version)
        raise FieldError("apiVersion", f"unsupported apiVersion {shown} for Reservation (expected {allowed})")
    meta = get_map(obj, "metadata", "")
    name, _, _ = metadata(meta)
    spec = get_map(obj, "spec", "")
    pod = _template_pod(spec, name)
    owners = [_reservation_owner(v, f"spec.owners[{i}]") for i, v in enumerate(get_list(spec, "owners", "spec"))]
    if not owners:
        raise FieldError("spec.owners", "required: at least one owner (an object or a labelSelector)")
    ttl = _duration(spec, "ttl", "spec")
    expires = timestamp(spec, "expires", "spec")
    allocate_once = spec.get("allocateOnce", True)
    if not isinstance(allocate_once, bool):
        wrong_type("spec.allocateOnce", "a boolean", allocate_once)
    created = timestamp(meta, "creationTimestamp", "metadata")
    pod.uid = uid(meta)
    pod.namespace = RESERVATION_NAMESPACE
    pod.annotations = {**pod.annotations, RESERVATION_ANNOTATION: name}
    return Reservation(
        name=name,
        template=pod,
        uid=pod.uid,
        owners=owners,
        ttl_seconds=DEFAULT_RESERVATION_TTL if ttl is None else ttl,
        expires=expires,
        allocate_once=allocate_once,
        creation_timestamp=created if created is not None else time.time(),
        raw=obj,
    )
