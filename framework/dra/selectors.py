"""CEL device selectors: compiled once per expression (an LRU cache), evaluated per device with the
``device`` variable kube-scheduler gives them (``driver``, ``allowMultipleAllocations``,
``attributes[domain][id]``, ``capacity[domain][id]``), and the Kubernetes functions selectors use.

The evaluator is ``common-expression-language`` (CEL in Rust; the measurements behind the choice are in
docs/dra.md). What it lacks is added here:

- **Quantities and versions.** A quantity is the map ``{"@quantity": "<numerator>/<denominator>"}`` and a
  version ``{"@semver": "1.2.3"}``, so equal values compare equal with ``==``. ``quantity(s)``,
  ``isQuantity(s)``, ``semver(s)``, ``isSemver(s)`` build and check them; ``compareTo``, ``isGreaterThan``,
  ``isLessThan``, ``add``, ``sub``, ``sign``, ``isInteger``, ``asInteger``, ``asApproximateFloat``,
  ``major``, ``minor`` and ``patch`` work on them.
- **``cel.bind(x, init, body)``** is rewritten to ``[init].map(x, body)[0]``, which means the same.
- **The runtime cost limit** (``CELSelectorExpressionMaxCost`` = 1,000,000): the body of every
  comprehension macro is wrapped in a counting call that charges the body's size per iteration and stops
  the evaluation with kube-scheduler's ``operation cancelled: actual cost limit exceeded`` once the sum
  passes the limit. The count approximates cel-go's; an expression without comprehensions costs far less
  than the limit in both.
- **A missing attribute domain** reads as an empty map, as kube-scheduler's map-with-default does.

Not supported (a compile error): optional syntax (``.?field``, ``[?key]``), and ``.orValue``.
Failures are values, :class:`SelectorFailure`, with kube-scheduler's texts: ``compilation failed: ...``
and, at runtime, cel-go's ``no such key: <k>`` and the cost-limit text.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import cel
from cel import stdlib

from pluginhost.quantity import QuantityError, parse_quantity

__all__ = ["COST_LIMIT", "CompiledSelector", "SelectorFailure", "compile_selector", "quantity_value", "version_value"]

#: ``resourceapi.CELSelectorExpressionMaxCost``.
COST_LIMIT = 1_000_000
COST_EXCEEDED = "operation cancelled: actual cost limit exceeded"
_CACHE_SIZE = 256

_Q, _V = "@quantity", "@semver"
_SEMVER_RE = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)"
    r"(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
_MACROS = frozenset({"map", "filter", "all", "exists", "exists_one"})
_IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRING_RE = re.compile(r"""[rRbB]{0,2}("{3}|'{3}|"|')""")


@dataclass(frozen=True, slots=True)
class SelectorFailure:
    """A selector that does not compile (``compile`` true), or whose evaluation failed; ``message`` is
    kube-scheduler's."""

    message: str
    compile: bool = False


_BOUND_RE = re.compile(r"(?:\.(?:map|filter|all|exists|exists_one)|\bcel\.bind)\(\s*([A-Za-z_]\w*)\s*,")
#: The variable, and the namespaces of library functions (``lists.range``) the evaluator reports as variables.
_NAMESPACES = frozenset({"device", "lists", "math", "sets", "strings", "base64", "optional"})
_CEL_TYPES = {int: "int", str: "string", float: "double", bytes: "bytes", list: "list(dyn)", dict: "map(string, dyn)"}


def quantity_value(q: Fraction) -> dict[str, str]:
    """The CEL value of a quantity."""
    return {_Q: f"{q.numerator}/{q.denominator}"}


def version_value(text: str) -> dict[str, str]:
    """The CEL value of a semantic version (its text is checked when compared)."""
    return {_V: text}


# ---------------------------------------------------------------------------------------------------
# Kubernetes library functions


@lru_cache(maxsize=4096)
def _fraction(text: str) -> Fraction:
    return Fraction(text)


def _as_q(v: object) -> Fraction | None:
    if isinstance(v, dict) and _Q in v:
        return _fraction(v[_Q])
    return None


def _semver_key(v: object) -> tuple[Any, ...]:
    text = v[_V] if isinstance(v, dict) and _V in v else None
    m = _SEMVER_RE.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"invalid semver {text!r}")
    pre = m.group(4)
    # A release sorts after its pre-releases; numeric identifiers sort before alphanumeric ones.
    pre_key = (1,) if pre is None else (0, *((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split(".")))
    return (int(m.group(1)), int(m.group(2)), int(m.group(3)), pre_key)


def _quantity(s: object) -> dict[str, str]:
    if not isinstance(s, str):
        raise TypeError("quantity() takes a string")
    neg = s.startswith("-")
    try:
        q = parse_quantity(s[1:] if neg else s)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return quantity_value(-q if neg else q)


def _is_quantity(s: object) -> bool:
    try:
        _quantity(s)
    except (TypeError, ValueError):
        return False
    return True


def _semver(s: object) -> dict[str, str]:
    v = version_value(str(s))
    _semver_key(v)
    return v


def _is_semver(s: object) -> bool:
    try:
        _semver(s)
    except ValueError:
        return False
    return True


def _compare(a: object, b: object) -> int:
    qa, qb = _as_q(a), _as_q(b)
    if qa is not None and qb is not None:
        return (qa > qb) - (qa < qb)
    ka, kb = _semver_key(a), _semver_key(b)
    return (ka > kb) - (ka < kb)


def _num(q: object) -> Fraction:
    v = _as_q(q)
    if v is None:
        raise TypeError("not a quantity")
    return v


def _arith(sign: int) -> Any:
    def op(a: object, b: object) -> dict[str, str]:
        other = _num(b) if _as_q(b) is not None else Fraction(int(b))  # type: ignore[call-overload]
        return quantity_value(_num(a) + sign * other)

    return op


def _same_value(a: object, b: object) -> bool:
    # CEL equality: a bool equals only a bool (Python's True == 1 does not hold there).
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def _includes(target: object, arg: object) -> bool:
    """Kubernetes' ``<list>.includes(<dyn>)`` (1.37's CEL library): an element equals ``arg``; for a
    receiver that is not a list, the receiver equals ``arg``."""
    if isinstance(target, list | tuple):
        return any(_same_value(item, arg) for item in target)
    return _same_value(target, arg)


_FUNCTIONS: dict[str, Any] = {
    "includes": _includes,
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "add": _arith(1),
    "sub": _arith(-1),
    "sign": lambda a: (_num(a) > 0) - (_num(a) < 0),
    "isInteger": lambda a: _num(a).denominator == 1,
    "asInteger": lambda a: int(_num(a)),
    "asApproximateFloat": lambda a: float(_num(a)),
    "major": lambda v: _semver_key(v)[0],
    "minor": lambda v: _semver_key(v)[1],
    "patch": lambda v: _semver_key(v)[2],
}


# ---------------------------------------------------------------------------------------------------
# Rewriting: cel.bind and cost accounting


def _string_at(expr: str, i: int) -> bool:
    """Whether a string literal (maybe with an r/b prefix) starts at ``i``."""
    if i > 0 and (expr[i - 1].isalnum() or expr[i - 1] == "_"):
        return False
    return _STRING_RE.match(expr, i) is not None


def _skip_string(expr: str, i: int) -> int:
    m = _STRING_RE.match(expr, i)
    assert m is not None
    quote = m.group(1)
    j = m.end()
    while j < len(expr):
        if expr.startswith(quote, j):
            return j + len(quote)
        j += 2 if expr[j] == "\\" else 1
    return len(expr)


def _call_args(expr: str, start: int) -> tuple[list[str], int]:
    """The top-level arguments of the call whose ``(`` is at ``start``, and the index after ``)``
    (no arguments when the call is not closed: the compiler reports that)."""
    args, depth, i, begin = [], 0, start + 1, start + 1
    while i < len(expr):
        c = expr[i]
        if _string_at(expr, i):
            i = _skip_string(expr, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                args.append(expr[begin:i])
                return args, i + 1
            depth -= 1
        elif c == "," and depth == 0:
            args.append(expr[begin:i])
            begin = i + 1
        i += 1
    return [], len(expr)


def _body_cost(body: str) -> int:
    return max(
        1,
        len(_IDENT_RE.findall(body))
        + sum(body.count(op) for op in ("==", "!=", "<", ">", "+", "-", "*", "&&", "||", "[")),
    )


def _rewrite(expr: str) -> str:
    out, i = [], 0
    while i < len(expr):
        c = expr[i]
        if _string_at(expr, i):
            j = _skip_string(expr, i)
            out.append(expr[i:j])
            i = j
            continue
        m = _IDENT_RE.match(expr, i)
        if m is None:
            out.append(c)
            i += 1
            continue
        name, j = m.group(0), m.end()
        dotted = i > 0 and expr[i - 1] == "."
        if j < len(expr) and expr[j] == "(":
            if dotted and name == "bind" and "".join(out).endswith("cel."):
                args, end = _call_args(expr, j)
                if len(args) == 3:
                    del out[-4:]
                    out.append(f"[{_rewrite(args[1])}].map({args[0].strip()}, {_rewrite(args[2])})[0]")
                    i = end
                    continue
            if dotted and name in _MACROS:
                args, end = _call_args(expr, j)
                if len(args) >= 2:
                    wrapped = [f"__cost({_body_cost(a)}, {_rewrite(a)})" for a in args[1:]]
                    out.append(f"{name}({args[0]}, {', '.join(wrapped)})")
                    i = end
                    continue
        out.append(name)
        i = j
    return "".join(out)


# ---------------------------------------------------------------------------------------------------
# Compilation and evaluation


class _Budget(threading.local):
    """The cost spent by the evaluation running on this thread."""

    def __init__(self) -> None:
        self.spent = 0
        self.exceeded = False


_budget = _Budget()


def _charge(cost: int, value: object) -> object:
    _budget.spent += cost
    if _budget.spent > COST_LIMIT:
        _budget.exceeded = True
        raise RuntimeError(COST_EXCEEDED)
    return value


def _library() -> dict[str, Any]:
    ctx = cel.Context()
    stdlib.add_stdlib_to_context(ctx)
    return {**ctx.functions, **_FUNCTIONS, "__cost": _charge}


#: Every extension function by name: the evaluator's own library and Kubernetes' (above).
_LIBRARY = _library()
#: The names calls use: namespaced functions (``lists.range``) show as their last name.
_LIBRARY_NAMES = frozenset(name.rpartition(".")[2] for name in _LIBRARY)
#: Functions the evaluator has built in.
_BUILTINS = frozenset(
    [
        "size",
        "matches",
        "startsWith",
        "endsWith",
        "contains",
        "has",
        "int",
        "uint",
        "double",
        "string",
        "bytes",
        "bool",
        "timestamp",
        "duration",
        "type",
        "dyn",
        "exists",
        "all",
        "map",
        "filter",
        "exists_one",
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getFullYear",
        "getHours",
        "getMilliseconds",
        "getMinutes",
        "getMonth",
        "getSeconds",
        "hasValue",
        "value",
        "orValue",
        "of",
        "none",
    ]
)


class CompiledSelector:
    """One compiled selector expression; :meth:`matches` evaluates it for a device."""

    __slots__ = ("_domains", "_functions", "_program", "expression")

    def __init__(self, expression: str, program: Any) -> None:
        self.expression = expression
        self._program = program
        # Only the functions the expression calls: a context costs per function it carries.
        called = set(program.functions())
        # A namespaced function (lists.range) shows as its namespace (a variable) and its last name.
        called |= {f"{ns}.{name}" for ns in program.variables() for name in list(called)}
        self._functions = {name: _LIBRARY[name] for name in called if name in _LIBRARY}
        # Every string literal may be a domain the expression looks up; a missing one reads as {}.
        self._domains = tuple({s[1:-1] for s in re.findall(r'"[^"\\]*"|\'[^\'\\]*\'', expression)})

    def matches(
        self, driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Fraction], multiple: bool = False
    ) -> bool | SelectorFailure:
        """Evaluate for one device (attribute versions as ``("version", text)``): the result, or the
        failure with cel-go's runtime message."""
        _budget.spent, _budget.exceeded = 0, False
        ctx = cel.Context(
            variables={"device": self._device(driver, attributes, capacity, multiple)}, functions=self._functions
        )
        try:
            result = self._program.execute(ctx)
        except KeyError as exc:
            return SelectorFailure(f"no such key: {exc.args[0]}")
        except Exception as exc:  # the evaluator raises RuntimeError, TypeError, ValueError, ...
            return SelectorFailure(COST_EXCEEDED if _budget.exceeded else _first_line(str(exc)))
        if not isinstance(result, bool):
            # cel-go's type checker refuses this when compiling; here it shows on first evaluation.
            kind = _CEL_TYPES.get(type(result), "null_type" if result is None else type(result).__name__)
            return SelectorFailure(f"must evaluate to bool or the unknown type, not {kind}", compile=True)
        return result

    def _device(
        self, driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Fraction], multiple: bool
    ) -> dict[str, Any]:
        attrs: dict[str, dict[str, Any]] = {d: {} for d in self._domains}
        for name, value in attributes.items():
            domain, _, ident = name.rpartition("/")
            if isinstance(value, tuple):
                value = version_value(value[1])
            attrs.setdefault(domain or driver, {})[ident] = value
        caps: dict[str, dict[str, Any]] = {d: {} for d in self._domains}
        for name, q in capacity.items():
            domain, _, ident = name.rpartition("/")
            caps.setdefault(domain or driver, {})[ident] = quantity_value(q)
        return {"driver": driver, "allowMultipleAllocations": multiple, "attributes": attrs, "capacity": caps}


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _snippet(expression: str, offset: int) -> tuple[str, str]:
    """cel-go's error location: ``<input>:line:column:`` and the line with a caret under the column."""
    line_no = expression.count("\n", 0, offset) + 1
    start = expression.rfind("\n", 0, offset) + 1
    end = expression.find("\n", offset)
    line = expression[start : end if end >= 0 else len(expression)]
    column = offset - start + 1
    return f"<input>:{line_no}:{column}:", f"\n | {line}\n | {'.' * (column - 1)}^"


def _offset(expression: str, name: str, call: bool) -> int:
    """Where cel-go places a reference: an identifier's start, a call's ``(``; -1 when not found."""
    pattern = rf"(?<![\w.])\b{re.escape(name)}\b" if not call else rf"\b{re.escape(name)}\s*(\()"
    i = 0
    while i < len(expression):
        if _string_at(expression, i):
            i = _skip_string(expression, i)
            continue
        m = re.compile(pattern).match(expression, i)
        if m is not None:
            return m.start(1) if call else m.start()
        i += 1
    return -1


def _undeclared(expression: str, program: Any) -> SelectorFailure | None:
    bound = set(_BOUND_RE.findall(expression))
    found = []
    for name in program.variables():
        if name not in _NAMESPACES and name not in bound:
            found.append((_offset(expression, name, False), name))
    for name in program.functions():
        if not name.startswith(("_", "@", "!")) and name not in _BUILTINS and name not in _LIBRARY_NAMES:
            found.append((_offset(expression, name, True), name))
    if not found:
        return None
    offset, name = min(found)
    where, snippet = _snippet(expression, max(offset, 0))
    text = f"compilation failed: ERROR: {where} undeclared reference to '{name}' (in container ''){snippet}"
    return SelectorFailure(text, compile=True)


def _syntax_error(expression: str, exc: Exception) -> SelectorFailure:
    text = re.sub(r"^Failed to parse expression '.*?': (?=ERROR)", "", str(exc), flags=re.S)
    first = _first_line(text)
    m = re.match(r"ERROR: <input>:(\d+):(\d+): ", first)
    if m is not None:
        line, column = int(m.group(1)), int(m.group(2))
        lines = expression.split("\n")
        if line <= len(lines):
            offset = sum(len(x) + 1 for x in lines[: line - 1]) + column - 1
            first += _snippet(expression, offset)[1]
    return SelectorFailure(f"compilation failed: {first}", compile=True)


def _compile(expression: str) -> CompiledSelector | SelectorFailure:
    try:
        program = cel.compile(_rewrite(expression))
    except ValueError:
        # Report positions in the text as written, not as rewritten.
        try:
            cel.compile(expression)
        except ValueError as original:
            exc = original
        return _syntax_error(expression, exc)
    return _undeclared(expression, program) or CompiledSelector(expression, program)


_cache: OrderedDict[str, CompiledSelector | SelectorFailure] = OrderedDict()
_cache_lock = threading.Lock()


def compile_selector(expression: str) -> CompiledSelector | SelectorFailure:
    """The compiled selector for ``expression``, or why it does not compile, from the cache (safe to
    call from several threads)."""
    with _cache_lock:
        hit = _cache.get(expression)
        if hit is not None:
            _cache.move_to_end(expression)
            return hit
    hit = _compile(expression)
    with _cache_lock:
        _cache[expression] = hit
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return hit
