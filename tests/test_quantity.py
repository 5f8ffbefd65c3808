"""Tests for pluginhost.quantity: exact parsing of Kubernetes quantities and canonical units."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pluginhost.quantity import (
    MAX_CANONICAL,
    QuantityError,
    canonical,
    format_quantity,
    milli_value,
    parse_quantity,
    value,
)

SUFFIXES: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}


@pytest.mark.parametrize(
    ("text", "want"),
    [
        # one of every suffix
        *[(f"3{suffix}", 3 * mult) for suffix, mult in SUFFIXES.items()],
        # decimal forms
        ("100m", Fraction(1, 10)),
        ("1.5", Fraction(3, 2)),
        ("0.1", Fraction(1, 10)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("007", Fraction(7)),
        ("1.25Gi", Fraction(5 * 2**28)),
        ("0.5Ki", Fraction(512)),
        ("2.5m", Fraction(1, 400)),
        ("4000", Fraction(4000)),
        # decimal exponents
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e+3", Fraction(1000)),
        ("1.5E-3", Fraction(3, 2000)),
        ("12e-1", Fraction(6, 5)),
        ("1e0", Fraction(1)),
        # signs: an explicit "+" and negative zero are fine
        ("+5", Fraction(5)),
        ("-0", Fraction(0)),
        ("0", Fraction(0)),
        # a bare "E" is the exa suffix, not an exponent
        ("2E", Fraction(2 * 10**18)),
    ],
)
def test_parse_quantity_strings(text: str, want: Fraction) -> None:
    assert parse_quantity(text) == want


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (2, Fraction(2)),
        (0, Fraction(0)),
        (0.5, Fraction(1, 2)),
        # read through repr, so a YAML "0.1" is exactly one tenth, not the nearest binary float
        (0.1, Fraction(1, 10)),
        (1e20, Fraction(10**20)),
        (1.5e-3, Fraction(3, 2000)),
        (1500.0, Fraction(1500)),
    ],
)
def test_parse_quantity_numbers(raw: float, want: Fraction) -> None:
    assert parse_quantity(raw) == want


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("", 'invalid quantity "": empty string'),
        ("abc", 'invalid quantity "abc"'),
        ("1.2.3", 'invalid quantity "1.2.3"'),
        ("10 Mi", 'invalid quantity "10 Mi"'),
        ("Mi", 'invalid quantity "Mi"'),
        (" 1", 'invalid quantity " 1"'),
        ("1 ", 'invalid quantity "1 "'),
        ("1ki", 'invalid quantity "1ki"'),
        ("1e", 'invalid quantity "1e"'),
        ("1e1.5", 'invalid quantity "1e1.5"'),
        (".", 'invalid quantity "."'),
        ("1Mi2", 'invalid quantity "1Mi2"'),
        ("0x10", 'invalid quantity "0x10"'),
        ("nan", 'invalid quantity "nan": not a finite number'),
        ("NaN", 'invalid quantity "NaN": not a finite number'),
        ("-Inf", 'invalid quantity "-Inf": not a finite number'),
        (float("nan"), 'invalid quantity "nan": not a finite number'),
        (float("inf"), 'invalid quantity "inf": not a finite number'),
        (True, "invalid quantity true: expected a string or number, got boolean"),
        (False, "invalid quantity false: expected a string or number, got boolean"),
        (None, "invalid quantity: expected a string or number, got null"),
        ([1], "invalid quantity: expected a string or number, got list"),
        ("-1", 'negative quantity "-1"'),
        ("-100m", 'negative quantity "-100m"'),
        ("-1e3", 'negative quantity "-1e3"'),
        (-1, 'negative quantity "-1"'),
        (-0.5, 'negative quantity "-0.5"'),
        ("1e1001", 'invalid quantity "1e1001": exponent out of range'),
        ("1e-99999999999", 'invalid quantity "1e-99999999999": exponent out of range'),
        ("1" * 2000, f'invalid quantity "{"1" * 60}...": too many digits'),
    ],
)
def test_parse_quantity_rejects(raw: object, message: str) -> None:
    with pytest.raises(QuantityError) as exc:
        parse_quantity(raw)  # type: ignore[arg-type]
    assert str(exc.value) == message
    assert isinstance(exc.value, ValueError)


@pytest.mark.parametrize(
    ("q", "milli", "whole"),
    [
        (Fraction(0), 0, 0),
        (Fraction(1, 10), 100, 1),
        (Fraction(1, 10000), 1, 1),  # rounds up, like Quantity.MilliValue / Value
        (Fraction(3, 2), 1500, 2),
        (Fraction(2), 2000, 2),
        (Fraction(1, 10**9), 1, 1),
        (Fraction(1001, 1000), 1001, 2),
    ],
)
def test_milli_value_and_value_round_up(q: Fraction, milli: int, whole: int) -> None:
    assert milli_value(q) == milli
    assert value(q) == whole


@pytest.mark.parametrize(
    ("resource", "raw", "want"),
    [
        ("cpu", "100m", 100),
        ("cpu", "0.0001", 1),
        ("cpu", "1", 1000),
        ("cpu", 2, 2000),
        ("cpu", 0.5, 500),
        ("cpu", "1500u", 2),
        ("cpu", "1e-3", 1),
        ("memory", "1Mi", 1048576),
        ("memory", "1.5Gi", 1610612736),
        ("memory", "100m", 1),
        ("memory", "128974848", 128974848),
        ("memory", "129e6", 129000000),
        ("memory", "123Mi", 128974848),
        ("memory", "1G", 10**9),
        ("ephemeral-storage", "10Gi", 10 * 2**30),
        ("nvidia.com/gpu", 1, 1),
        ("pods", "110", 110),
        ("memory", "7Ei", 7 * 2**60),
    ],
)
def test_canonical(resource: str, raw: str | float, want: int) -> None:
    assert canonical(resource, raw) == want


@pytest.mark.parametrize(
    ("resource", "raw", "message"),
    [
        ("memory", "8Ei", 'quantity "8Ei" is too large for memory'),
        ("cpu", "9223372036854776", 'quantity "9223372036854776" is too large for cpu'),
        ("cpu", "abc", 'invalid quantity "abc"'),
        ("memory", "-1Gi", 'negative quantity "-1Gi"'),
    ],
)
def test_canonical_rejects(resource: str, raw: str, message: str) -> None:
    with pytest.raises(QuantityError) as exc:
        canonical(resource, raw)
    assert str(exc.value) == message


def test_canonical_largest_amount_fits_int64() -> None:
    assert canonical("memory", str(MAX_CANONICAL)) == MAX_CANONICAL


@pytest.mark.parametrize(
    ("resource", "amount", "want"),
    [
        ("cpu", 250, "250m"),
        ("cpu", 2000, "2"),
        ("cpu", 0, "0"),
        ("cpu", 1500, "1500m"),
        ("memory", 2 * 2**30, "2Gi"),
        ("memory", 1610612736, "1536Mi"),
        ("memory", 1024, "1Ki"),
        ("memory", 1000, "1000"),
        ("memory", 0, "0"),
        ("memory", 3 * 2**60, "3Ei"),
        ("ephemeral-storage", 5 * 2**40, "5Ti"),
        ("hugepages-2Mi", 4 * 2**20, "4Mi"),
        # counted resources stay plain integers
        ("pods", 1024, "1024"),
        ("nvidia.com/gpu", 2048, "2048"),
    ],
)
def test_format_quantity(resource: str, amount: int, want: str) -> None:
    assert format_quantity(resource, amount) == want


@given(n=st.integers(min_value=-(10**12), max_value=10**12), suffix=st.sampled_from(sorted(SUFFIXES)))
def test_integer_with_suffix_is_integer_times_multiplier(n: int, suffix: str) -> None:
    if n < 0:
        with pytest.raises(QuantityError, match="negative quantity"):
            parse_quantity(f"{n}{suffix}")
    else:
        assert parse_quantity(f"{n}{suffix}") == n * SUFFIXES[suffix]


@given(
    resource=st.sampled_from(["cpu", "memory", "pods", "nvidia.com/gpu"]),
    amount=st.integers(min_value=0, max_value=MAX_CANONICAL),
)
def test_format_quantity_round_trips(resource: str, amount: int) -> None:
    assert canonical(resource, format_quantity(resource, amount)) == amount
