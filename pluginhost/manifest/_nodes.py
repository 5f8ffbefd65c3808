"""A v1 Node to the model: its taints, whether it takes new pods, its capacity and allocatable, its images
and its declared features."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pluginhost.decode import (
    FieldError,
    get_bool,
    get_int,
    get_list,
    get_map,
    get_str,
    item_map,
    one_of,
    required_str,
    str_tuple,
)
from pluginhost.model import ContainerImage, Node, Taint

from ._fields import resource_list
from ._meta import invalid, object_meta, quoted, uid
from ._placement import TAINT_EFFECTS

__all__ = ["build_node"]

# The API server's rule for a declared feature's name (ValidateNode): an UpperCamelCase segment, then
# '/'-separated segments, at most 253 characters.
_FEATURE_NAME = re.compile(r"[A-Z][a-zA-Z0-9]*(/[a-zA-Z][a-zA-Z0-9]*)*")
_FEATURE_NAME_MAX = 253


def _declared_features(status: Mapping[str, Any]) -> tuple[str, ...]:
    """``status.declaredFeatures``, refused as the API server refuses it: a malformed name, a
    duplicate, or a list out of alphabetical order (the scheduler merges it with its own sorted list)."""
    names = str_tuple(status, "declaredFeatures", "status")
    for i, name in enumerate(names):
        path = f"status.declaredFeatures[{i}]"
        if len(name) > _FEATURE_NAME_MAX:
            raise invalid(path, name, f"invalid feature name {quoted(name)}: must be no more than 253 characters")
        if not _FEATURE_NAME.fullmatch(name):
            raise invalid(
                path,
                name,
                f"invalid feature name {quoted(name)}: must start with an UpperCamelCase segment, with subsequent "
                "segments separated by '/' (e.g., MyFeature or MyFeature/mySubFeature), and contain only "
                "alphanumeric characters and slashes",
            )
        if i and names[i - 1] == name:
            raise FieldError(path, f'Duplicate value: "{name}"')
        if i and names[i - 1] > name:
            raise invalid(path, name, "list must be sorted alphabetically")
    return names


def build_node(obj: dict[str, Any]) -> Node:
    """The :class:`Node` of a decoded v1 Node manifest."""
    meta, name, _, labels, annotations = object_meta(obj, namespaced=False)
    spec = get_map(obj, "spec", "")
    status = get_map(obj, "status", "")
    taints = []
    for i, t in enumerate(get_list(spec, "taints", "spec")):
        path = f"spec.taints[{i}]"
        tm = item_map(t, path)
        key = required_str(tm, "key", path)
        effect = one_of(required_str(tm, "effect", path), TAINT_EFFECTS, f"{path}.effect", "effect")
        taints.append(Taint(key=key, effect=effect, value=get_str(tm, "value", path)))
    capacity = resource_list(status, "capacity", "status")
    # The kubelet always reports both; hand-written nodes often give only capacity.
    allocatable = (
        resource_list(status, "allocatable", "status")
        if status.get("allocatable") is not None
        else dict(capacity)
    )
    images = []
    for i, img in enumerate(get_list(status, "images", "status")):
        path = f"status.images[{i}]"
        im = item_map(img, path)
        size = get_int(im, "sizeBytes", path, 0)
        if size < 0:
            raise FieldError(f"{path}.sizeBytes", f"must not be negative, got {size}")
        images.append(ContainerImage(names=str_tuple(im, "names", path), size_bytes=size))
    return Node(
        name=name,
        uid=uid(meta),
        labels=labels,
        annotations=annotations,
        taints=taints,
        unschedulable=get_bool(spec, "unschedulable", "spec"),
        capacity=capacity,
        allocatable=allocatable,
        images=images,
        declared_features=_declared_features(status),
        raw=obj,
    )
