"""Kubernetes resource quantities (``resource.Quantity``), parsed exactly.

A quantity is a decimal number with an optional suffix, e.g. ``100m``, ``1.5``, ``2Gi``, ``1e3``.
The grammar is the one in ``k8s.io/apimachinery/pkg/api/resource``::

    <quantity>  ::= <sign>? <number> <suffix>
    <number>    ::= <digits> | <digits> "." <digits>? | "." <digits>
    <suffix>    ::= <binarySI> | <decimalSI> | <exponent>
    <binarySI>  ::= Ki | Mi | Gi | Ti | Pi | Ei              (powers of 1024)
    <decimalSI> ::= n | u | m | "" | k | M | G | T | P | E  (powers of 1000)
    <exponent>  ::= ("e" | "E") <sign>? <digits>

Values are kept as :class:`fractions.Fraction` so that ``0.1`` is exactly one tenth and rounding to
canonical units (millicores for ``cpu``, whole units for everything else) matches the Go code,
which also rounds *up* (``Quantity.MilliValue`` / ``Quantity.Value``). Floats are never used for
the arithmetic: a YAML float such as ``cpu: 0.1`` is read through its shortest ``repr``.

Negative quantities are rejected: nothing the scheduler accounts for can be negative.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

from pluginhost.errors import OutriggerError

__all__ = [
    "MAX_CANONICAL",
    "QuantityError",
    "canonical",
    "format_quantity",
    "milli_value",
    "parse_quantity",
    "value",
]


class QuantityError(OutriggerError, ValueError):
    """A value that is not a valid (non-negative) Kubernetes quantity."""


# Canonical amounts must fit the int64 that Kubernetes (and numpy arrays downstream) use.
MAX_CANONICAL = 2**63 - 1

_BINARY: dict[str, int] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_DECIMAL: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}

# The exponent alternative comes first so that "1E3" is 1000 while a bare "1E" is one exa.
_QUANTITY_RE = re.compile(
    r"([+-]?)(\d+(?:\.\d*)?|\.\d+)"
    r"(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"
)

# A bound on decimal exponents: far beyond any real resource amount, small enough that a hostile
# "1e999999999" cannot make Fraction build a gigantic integer.
_MAX_EXPONENT = 1000
_MAX_DIGITS = 1000


def _parse_number(digits: str) -> Fraction:
    """``"12.50"`` -> 25/2, built from integers only."""
    whole, dot, frac = digits.partition(".")
    if not dot or not frac:
        return Fraction(int(whole))
    return Fraction(int((whole or "0") + frac), 10 ** len(frac))


def _show(text: str) -> str:
    """The value as quoted in error messages: cut short so a pasted blob cannot flood a log, and
    with control characters escaped so the message stays one line."""
    shown = text if len(text) <= 64 else text[:60] + "..."
    return shown.translate(_ESCAPES)


_ESCAPES = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}" for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)
}
_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


@lru_cache(maxsize=4096)
def _parse_string(text: str) -> Fraction:
    # Cached: manifests repeat the same few strings ("100m", "128Mi") thousands of times, and
    # Fractions are immutable so sharing them is safe.
    m = _QUANTITY_RE.fullmatch(text)
    if m is None:
        if not text:
            raise QuantityError('invalid quantity "": empty string')
        if text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
            raise QuantityError(f'invalid quantity "{_show(text)}": not a finite number')
        raise QuantityError(f'invalid quantity "{_show(text)}"')
    sign, digits, exponent, suffix = m.groups()
    if len(digits) > _MAX_DIGITS:
        # int() refuses strings this long anyway (ValueError); say why in our own terms.
        raise QuantityError(f'invalid quantity "{_show(text)}": too many digits')
    number = _parse_number(digits)
    if exponent is not None:
        # Length check first: int() of a 5000-digit exponent would itself fail.
        exp = int(exponent) if len(exponent) <= 8 else _MAX_EXPONENT + 1
        if abs(exp) > _MAX_EXPONENT:
            raise QuantityError(f'invalid quantity "{_show(text)}": exponent out of range')
        number *= Fraction(10) ** exp
    elif suffix:
        binary = _BINARY.get(suffix)
        number *= binary if binary is not None else _DECIMAL[suffix]
    if sign == "-" and number != 0:
        raise QuantityError(f'negative quantity "{_show(text)}"')
    return number


def parse_quantity(value: str | float) -> Fraction:
    """Parse a quantity string, or a plain number as YAML/JSON produce for ``cpu: 2``/``cpu: 0.5``.

    Raises :class:`QuantityError` for anything else, including negative values, NaN/infinity and
    booleans (YAML reads ``cpu: yes`` as ``True``, which must not count as 1).
    """
    if isinstance(value, str):
        return _parse_string(value)
    if isinstance(value, bool):
        raise QuantityError(
            f"invalid quantity {str(value).lower()}: expected a string or number, got boolean"
        )
    if isinstance(value, int):
        if value < 0:
            raise QuantityError(f'negative quantity "{value}"')
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f'invalid quantity "{value}": not a finite number')
        # repr is the shortest string that round-trips, i.e. what the manifest author wrote
        # ("0.1", "1e+20"); Fraction(0.1) would give the binary approximation instead.
        return _parse_string(repr(value))
    got = "null" if value is None else type(value).__name__
    raise QuantityError(f"invalid quantity: expected a string or number, got {got}")


def milli_value(q: Fraction) -> int:
    """``ceil(q * 1000)``, like ``Quantity.MilliValue()``."""
    return math.ceil(q * 1000)


def value(q: Fraction) -> int:
    """``ceil(q)``, like ``Quantity.Value()``."""
    return math.ceil(q)


def canonical(resource: str, raw: str | float) -> int:
    """The integer amount the model stores: millicores for ``cpu``, rounded-up units otherwise.

    ``canonical("cpu", "100m") == 100``; ``canonical("memory", "1Mi") == 1048576``. Amounts that
    do not fit an int64 are rejected rather than silently overflowing later.
    """
    q = parse_quantity(raw)
    amount = milli_value(q) if resource == "cpu" else value(q)
    if amount > MAX_CANONICAL:
        shown = _show(raw) if isinstance(raw, str) else repr(raw)
        raise QuantityError(f'quantity "{shown}" is too large for {resource}')
    return amount


_BINARY_DESCENDING = sorted(_BINARY.items(), key=lambda kv: kv[1], reverse=True)


def format_quantity(resource: str, amount: int) -> str:
    """Display form of a canonical amount; parsing it back with :func:`canonical` gives ``amount``.

    ``cpu``: ``"250m"``, or ``"2"`` for whole cores. Byte-like resources (memory, storage,
    hugepages, ...): the largest binary suffix that is exact (``"2Gi"``, ``"1536Mi"``), else the plain
    integer. Counted resources (``pods`` and domain-prefixed extended resources such as
    ``nvidia.com/gpu``) are always plain integers: "1Ki pods" would be correct but unhelpful.
    """
    if resource == "cpu":
        whole, rest = divmod(amount, 1000)
        return str(whole) if rest == 0 else f"{amount}m"
    if amount == 0 or resource == "pods" or "/" in resource:
        return str(amount)
    magnitude = abs(amount)
    for suffix, multiplier in _BINARY_DESCENDING:
        if magnitude % multiplier == 0:
            return f"{amount // multiplier}{suffix}"
    return str(amount)
