"""CEL device selectors (framework/dra/selectors.py): the ``device`` variable, Kubernetes' quantity and
semver functions, cel.bind, namespaced library functions, the cost limit and failures as values."""

from __future__ import annotations

from fractions import Fraction

import pytest

from framework.dra.selectors import COST_LIMIT, CompiledSelector, SelectorFailure, compile_selector

DRV = "gpu.example.com"
ATTRS = {"model": "a100", "index": 3, "ok": True, "driverVersion": ("version", "1.10.0"), "other.io/zone": "z1"}
CAPACITY = {"memory": Fraction(80 * 2**30), "other.io/slots": Fraction(4)}

TRUE = [
    f'device.driver == "{DRV}"',
    f'device.attributes["{DRV}"].model == "a100" && device.attributes["{DRV}"].index == 3',
    'device.attributes["other.io"].zone == "z1"',
    'device.attributes["absent.io"].size() == 0',
    f'device.capacity["{DRV}"].memory.compareTo(quantity("40Gi")) > 0',
    f'device.capacity["{DRV}"].memory.isGreaterThan(quantity("80G"))',
    'device.capacity["other.io"].slots == quantity("4000m")',
    'quantity("1").add(quantity("500m")).asApproximateFloat() == 1.5',
    'quantity("1.5").isInteger() == false && quantity("-2").sign() == -1',
    f'device.attributes["{DRV}"].driverVersion.isGreaterThan(semver("1.9.0"))',
    f'device.attributes["{DRV}"].driverVersion.minor() == 10',
    'semver("1.0.0-alpha").isLessThan(semver("1.0.0"))',
    'isSemver("1.2.3") && !isSemver("1.2") && isQuantity("1Ki") && !isQuantity("1x")',
    'cel.bind(m, device.attributes["gpu.example.com"], m.model == "a100" && m.index > 2)',
    "lists.range(4).all(i, i < 4) && sets.contains([1, 2], [2]) && math.greatest(1, 5) == 5",
    '"A100".lowerAscii() == "a100" && "a,b".split(",").size() == 2 && "abc".matches("^a")',
    f'has(device.attributes["{DRV}"].ok) && device.allowMultipleAllocations == false',
    # includes() (Kubernetes 1.37's CEL): on a list, any element; on anything else, the value itself.
    f'["a100", "h100"].includes(device.attributes["{DRV}"].model) && !["h200"].includes("a100")',
    '[1, 2, 3].includes(2) && ![1].includes(true) && "model-a".includes("model-a") && !"a".includes("b")',
]


@pytest.mark.parametrize("expression", TRUE)
def test_selector_is_true(expression: str) -> None:
    selector = compile_selector(expression)
    assert isinstance(selector, CompiledSelector)
    assert selector.matches(DRV, ATTRS, CAPACITY) is True


FAILURES = [
    (f'device.attributes["{DRV}"].nope == 1', SelectorFailure("no such key: nope")),
    (
        "x > 1",
        SelectorFailure(
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'x' (in container '')\n | x > 1\n | ^",
            True,
        ),
    ),
    (
        "device.driver == 'a' &&\n  device.nope(1)",
        SelectorFailure(
            "compilation failed: ERROR: <input>:2:14: undeclared reference to 'nope' (in container '')"
            "\n |   device.nope(1)\n | .............^",
            True,
        ),
    ),
    ('"text"', SelectorFailure("must evaluate to bool or the unknown type, not string", True)),
    (
        "lists.range(2000).exists(i, lists.range(2000).exists(j, i * j < 0))",
        SelectorFailure("operation cancelled: actual cost limit exceeded"),
    ),
]


@pytest.mark.parametrize(("expression", "failure"), FAILURES)
def test_selector_failure(expression: str, failure: SelectorFailure) -> None:
    selector = compile_selector(expression)
    got = selector if isinstance(selector, SelectorFailure) else selector.matches(DRV, ATTRS, CAPACITY)
    assert got == failure


def test_compile_failure_and_cache() -> None:
    bad = compile_selector("device.driver ==")
    assert isinstance(bad, SelectorFailure) and bad.compile
    assert bad.message.startswith("compilation failed: ERROR: <input>:1:17: Syntax error:")
    assert compile_selector("device.driver ==") is bad
    good = compile_selector('device.driver == "x"')
    assert compile_selector('device.driver == "x"') is good


def test_cost_limit_lets_a_large_but_bounded_comprehension_through() -> None:
    # 300 * 300 iterations of a small body stay under the limit; 2000 * 2000 above do not.
    selector = compile_selector("lists.range(300).all(i, lists.range(300).all(j, i + j >= 0))")
    assert isinstance(selector, CompiledSelector) and COST_LIMIT == 1_000_000
    assert selector.matches(DRV, ATTRS, CAPACITY) is True
