"""Consumable capacity (DRAConsumableCapacity, with DRAFractionalCapacityRange; both on by default in
1.37): how much of a device's capacity one request consumes, and whether it still fits.

A request names amounts per capacity (``exactly.capacity.requests``); a capacity it does not name
consumes the policy's ``default``, or all of it. A device's ``requestPolicy`` rounds a request up: to the
smallest of its ``validValues`` that is at least the request, or to ``validRange.min`` plus a whole number
of ``step``\\s. What the rounding cannot reach (above ``max``, above every valid value) is a request the
device cannot serve. Amounts are exact fractions; a range with fractional bounds is computed in
thousandths as kube-scheduler does, and a request finer than that is an error (``ValueError``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["CapacityPolicy", "consumed_by", "fits"]


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """A capacity's ``requestPolicy``."""

    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()
    min: Fraction | None = None
    max: Fraction | None = None
    step: Fraction | None = None


def _milli(q: Fraction) -> bool:
    return (q * 1000).denominator == 1


def _use_milli(p: CapacityPolicy) -> bool:
    bounds = [q for q in (p.min, p.max, p.step) if q is not None]
    return all(_milli(q) for q in bounds) and (p.step is None or p.step * 1000 >= 1)


def _round_up(requested: Fraction, p: CapacityPolicy) -> Fraction:
    if p.min is not None:
        if requested < p.min:
            return p.min
        if p.step is None:
            return requested
        if _use_milli(p):
            if not _milli(requested):
                raise ValueError(
                    "capacity request cannot be represented in the device's range arithmetic:"
                    f" request {requested} is not a representable milli value"
                )
            low, step = p.min, p.step
        else:
            requested, low, step = (
                Fraction(math.ceil(requested)),
                Fraction(math.ceil(p.min)),
                Fraction(math.ceil(p.step)),
            )
        return low + step * math.ceil((requested - low) / step)
    for value in p.valid_values:
        if requested <= value:
            return value
    return requested


def _consumed(requested: Fraction | None, value: Fraction, policy: CapacityPolicy | None) -> Fraction:
    if requested is None:
        return policy.default if policy is not None and policy.default is not None else value
    return requested if policy is None else _round_up(requested, policy)


def _violates(amount: Fraction, p: CapacityPolicy | None) -> bool:
    if p is None or (p.default is not None and amount == p.default):
        return False
    if p.min is not None:
        if p.max is not None and amount > p.max:
            return True
        if p.step is not None:
            if _use_milli(p):
                return not _milli(amount) or ((amount - p.min) / p.step).denominator != 1
            return (math.ceil(amount) - math.ceil(p.min)) % math.ceil(p.step) != 0
        return False
    return bool(p.valid_values) and amount not in p.valid_values


def consumed_by(
    requests: Mapping[str, Fraction] | None, values: Mapping[str, Fraction], policies: Mapping[str, CapacityPolicy]
) -> dict[str, Fraction]:
    """What one allocation consumes of each capacity of a device (``ValueError``: see the module)."""
    requests = requests or {}
    out = {}
    for name, value in values.items():
        try:
            out[name] = _consumed(requests.get(name), value, policies.get(name))
        except ValueError as exc:
            raise ValueError(f'capacity "{name}": {exc}') from None
    return out


def fits(
    requests: Mapping[str, Fraction] | None,
    values: Mapping[str, Fraction],
    policies: Mapping[str, CapacityPolicy],
    used: Mapping[str, Fraction],
) -> bool:
    """Whether a request fits a device whose capacities already have ``used`` consumed (by allocated
    claims and by the claims being allocated)."""
    if not requests and not policies and not used:
        return True  # each capacity consumed whole, of nothing used: always fits (the common device)
    if requests and any(name not in values for name in requests):
        return False
    consumed = consumed_by(requests, values, policies)
    for name, value in values.items():
        amount = consumed[name]
        if _violates(amount, policies.get(name)):
            return False
        if used.get(name, Fraction(0)) + amount > value:
            return False
    return True
