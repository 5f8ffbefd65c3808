"""DeviceTaintRules (``resource.k8s.io/v1``, the DRADeviceTaintRules gate, GA and on in 1.37): a rule adds
one taint to every device its selector picks, as if the device's ResourceSlice listed it.

- :func:`device_taint_rule_from_dict` decodes a rule strictly (:mod:`.models`' errors): an unknown field,
  a missing ``spec.taint.key`` or ``effect``, an effect other than ``NoSchedule``, ``NoExecute`` or
  ``None``.
- :func:`patch_slice` is the slice as the allocator sees it: each device's own taints followed by the
  taint of every rule selecting it (kube-scheduler's ResourceSlice tracker, ``applyPatches``). A rule
  selects a device when each of its selector's ``driver``, ``pool`` and ``device`` that is set equals the
  slice's driver, pool name and the device's name; an empty selector selects every device, a rule
  without one selects none. Rules apply in name order (the tracker's order is its informer's, which
  does not matter: a request must tolerate every taint).

The scheduler never writes a rule's ``status`` (the eviction controller's); it is decoded and ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from pluginhost.decode import (
    FieldError,
    as_map,
    get_map,
    get_str,
    one_of,
    required_str,
    schemas,
    strict_problems,
    unknown_fields,
)

from .models import API_VERSION, DeviceTaint, ResourceSlice

__all__ = ["DeviceTaintRule", "device_taint_rule_from_dict", "patch_slice", "selects_slice"]

_TYPES = {
    "Meta": (
        "name generateName namespace selfLink uid resourceVersion generation creationTimestamp "
        "deletionTimestamp deletionGracePeriodSeconds labels annotations ownerReferences finalizers managedFields"
    ),
    "DeviceTaintRule": "kind apiVersion metadata:Meta spec:DeviceTaintRuleSpec status:DeviceTaintRuleStatus",
    "DeviceTaintRuleSpec": "deviceSelector:DeviceTaintSelector taint:DeviceTaint",
    "DeviceTaintSelector": "driver pool device",
    "DeviceTaint": "key value effect timeAdded",
    "DeviceTaintRuleStatus": "conditions:[Condition]",
    "Condition": "type status observedGeneration lastTransitionTime reason message",
}
_SCHEMAS = schemas(_TYPES)
_TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    """One rule: its name, its selector (None: selects nothing; each field None: any) and its taint."""

    name: str
    taint: DeviceTaint
    #: ``spec.deviceSelector`` is set (when not, the rule selects no device).
    has_selector: bool = True
    driver: str | None = None
    pool: str | None = None
    device: str | None = None

    def selects(self, driver: str, pool: str, device: str) -> bool:
        """Whether the rule taints the device ``device`` of ``driver``'s pool ``pool``."""
        return (
            self.has_selector
            and (self.driver is None or self.driver == driver)
            and (self.pool is None or self.pool == pool)
            and (self.device is None or self.device == device)
        )


def _optional(m: object, key: str, path: str) -> str | None:
    sel = as_map(m, path)
    if sel.get(key) is None:
        return None
    value = get_str(sel, key, path)
    if not value:
        raise FieldError(f"{path}.{key}", "must not be empty when set")
    return value


def device_taint_rule_from_dict(obj: object) -> DeviceTaintRule:
    """Decode a DeviceTaintRule manifest (the errors of :mod:`.models`' decoders)."""
    doc = as_map(obj, "")
    api = doc.get("apiVersion")
    if api is not None and api != API_VERSION:
        raise FieldError("apiVersion", f'expected "{API_VERSION}", got "{api}"')
    kind = doc.get("kind")
    if kind is not None and kind != "DeviceTaintRule":
        raise FieldError("kind", f'expected "DeviceTaintRule", got "{kind}"')
    problems = strict_problems((), unknown_fields(doc, _SCHEMAS["DeviceTaintRule"]))
    if problems:
        raise FieldError("", ", ".join(problems))
    spec = get_map(doc, "spec", "")
    if spec.get("taint") is None:
        raise FieldError("spec.taint", "required field is missing")
    t = get_map(spec, "taint", "spec")
    effect = one_of(required_str(t, "effect", "spec.taint"), _TAINT_EFFECTS, "spec.taint.effect", "effect")
    taint = DeviceTaint(required_str(t, "key", "spec.taint"), get_str(t, "value", "spec.taint"), effect)
    name = required_str(get_map(doc, "metadata", ""), "name", "metadata")
    if spec.get("deviceSelector") is None:
        return DeviceTaintRule(name, taint, has_selector=False)
    sel = get_map(spec, "deviceSelector", "spec")
    path = "spec.deviceSelector"
    return DeviceTaintRule(
        name, taint, True, _optional(sel, "driver", path), _optional(sel, "pool", path), _optional(sel, "device", path)
    )


def selects_slice(rule: DeviceTaintRule, s: ResourceSlice) -> bool:
    """Whether ``rule`` selects some device of ``s``."""
    return any(rule.selects(s.driver, s.pool, d.name) for d in s.devices)


def patch_slice(s: ResourceSlice, rules: Iterable[DeviceTaintRule]) -> ResourceSlice:
    """``s`` with the taints of the rules selecting each device added after the device's own (``s``
    itself when no rule selects any of its devices)."""
    selecting = [r for r in rules if r.has_selector and r.driver in (None, s.driver) and r.pool in (None, s.pool)]
    if not selecting:
        return s
    devices, changed = [], False
    for d in s.devices:
        added = tuple(r.taint for r in selecting if r.device is None or r.device == d.name)
        if added:
            d = dataclasses.replace(d, taints=(*d.taints, *added))
            changed = True
        devices.append(d)
    return dataclasses.replace(s, devices=tuple(devices)) if changed else s
