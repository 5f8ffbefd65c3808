"""Per-device checks of the allocator's search (:mod:`.allocator`): claim constraints over the devices
picked so far, device attributes by qualified name, and device taints against a request's tolerations."""

from __future__ import annotations

from .models import Device, DeviceConstraint, ExactRequest

__all__ = ["Constraint", "attribute", "same", "tolerated"]


class Constraint:
    """matchAttribute (all equal) or distinctAttribute (all different) over the devices of some requests."""

    def __init__(self, c: DeviceConstraint) -> None:
        self.requests = frozenset(c.requests)
        self.attribute = c.match_attribute or c.distinct_attribute
        self.distinct = not c.match_attribute
        self.values: list[object] = []

    def applies(self, request: str, sub: str) -> bool:
        """Whether the constraint covers the request (or its subrequest ``sub``)."""
        return not self.requests or request in self.requests or (bool(sub) and f"{request}/{sub}" in self.requests)

    def add(self, request: str, sub: str, device: Device, driver: str) -> bool:
        """Count the device picked for the request; False (nothing counted) when it breaks the constraint."""
        if not self.applies(request, sub):
            return True
        value = attribute(device, driver, self.attribute)
        if value is None:
            return False
        if self.distinct and any(same(value, v) for v in self.values):
            return False
        if not self.distinct and self.values and not same(value, self.values[0]):
            return False
        self.values.append(value)
        return True

    def remove(self, request: str, sub: str) -> None:
        """Undo the last :meth:`add` for the request."""
        if self.applies(request, sub):
            self.values.pop()


def attribute(device: Device, driver: str, name: str) -> object:
    """The device's attribute ``name`` (qualified, or in the driver's domain), None when it has none."""
    if name in device.attributes:
        return device.attributes[name]
    domain, _, ident = name.partition("/")
    if ident and domain == driver:
        return device.attributes.get(ident)
    return None


def same(a: object, b: object) -> bool:
    """Whether two attribute values are equal and of the same type (1 is not True)."""
    return type(a) is type(b) and a == b


def tolerated(device: Device, request: ExactRequest) -> bool:
    """Whether the request tolerates each of the device's NoSchedule and NoExecute taints."""
    return all(
        any(t.tolerates(taint) for t in request.tolerations)
        for taint in device.taints
        if taint.effect in ("NoSchedule", "NoExecute")
    )
