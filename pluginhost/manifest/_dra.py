"""Dynamic Resource Allocation's objects (``resource.k8s.io/v1``): ResourceClaim,
ResourceClaimTemplate, DeviceClass, ResourceSlice and DeviceTaintRule, read from manifests as :class:`ResourceObject`.

The SDK does not model them: their fields are the framework's DRA store's to decode
(``framework.dra``). What happens here is the envelope (kind, apiVersion, metadata, checked as for
every kind) and, when a decoder has been registered (:func:`set_resource_decoder`, which the
framework does when its DRA package is imported), a strict decoding of the whole object, so that a
wrong field is reported with the document it is in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pluginhost.decode import get_map

from ._meta import object_meta, uid

__all__ = ["RESOURCE_API_VERSION", "RESOURCE_KINDS", "ResourceObject", "build_resource_object", "set_resource_decoder"]

RESOURCE_API_VERSION = "resource.k8s.io/v1"
#: The kinds read as :class:`ResourceObject`; the first two are namespaced.
RESOURCE_KINDS = ("ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice", "DeviceTaintRule")
_NAMESPACED = frozenset({"ResourceClaim", "ResourceClaimTemplate"})

# The framework's strict decoder: (kind, manifest) -> None, raising FieldError for a wrong field.
_decoder: list[Callable[[str, dict[str, Any]], None]] = []


@dataclass(slots=True)
class ResourceObject:
    """One ``resource.k8s.io/v1`` object as its manifest (``raw``), with its identity."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        """``namespace/name`` for the namespaced kinds, the name otherwise."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def set_resource_decoder(decoder: Callable[[str, dict[str, Any]], None]) -> None:
    """Check every ResourceObject read from now on with ``decoder(kind, manifest)`` (it raises
    :class:`~pluginhost.decode.FieldError` naming the wrong field)."""
    _decoder[:] = [decoder]


def build_resource_object(kind: str) -> Callable[[dict[str, Any]], ResourceObject]:
    """The builder of one of :data:`RESOURCE_KINDS`."""

    def build(obj: dict[str, Any]) -> ResourceObject:
        namespaced = kind in _NAMESPACED
        meta, name, namespace, _, _ = object_meta(obj, namespaced=namespaced)
        get_map(obj, "spec", "")
        for decode in _decoder:
            decode(kind, obj)
        return ResourceObject(kind, name, namespace if namespaced else "", uid(meta), obj)

    return build
