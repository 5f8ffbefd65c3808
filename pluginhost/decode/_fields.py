"""Reading documents' values: typed field readers and the messages that name a field by its path.

The readers check a value's type and raise :class:`FieldError` naming the field by its path, e.g.
``spec.containers[0].name: expected a string, got integer``: ``get_*`` read a field of a mapping (the
path is built only when the field is wrong, so a correct object costs no string work), ``as_*`` a
value whose path is known. :func:`join` builds such paths, :func:`one_line` keeps a value quoted in a
message on one line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from typing import Any, NoReturn, TypeVar, cast

from pluginhost.errors import OutriggerError

__all__ = [
    "FieldError",
    "as_bool",
    "as_int",
    "as_list",
    "as_map",
    "as_str",
    "get_bool",
    "get_int",
    "get_list",
    "get_map",
    "get_str",
    "item_map",
    "join",
    "one_line",
    "one_of",
    "required_str",
    "str_map",
    "str_tuple",
    "timestamp",
    "type_name",
    "wrong_type",
]

# ---------------------------------------------------------------------------------------------------
# Messages and paths

# Characters that would break a message over several lines (str.splitlines' set) or hide in a
# terminal, shown escaped instead: values from the input are quoted in messages.
_LINE_BREAKING = {
    c: f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"
    for c in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)
}
_LINE_BREAKING.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (``\\n``, ``\\x1f``)."""
    return text.translate(_LINE_BREAKING)


# Keys that can follow a '.' in a field path unambiguously; others ("nvidia.com/gpu") get brackets.
_PLAIN_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def join(parent: str, key: str) -> str:
    """The path of field ``key`` of the object at ``parent``: ``spec.nodeName``, ``labels[example.com/x]``."""
    if _PLAIN_KEY_RE.fullmatch(key) is None:
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


# Each type's word, in the order they are tried: a boolean is an int and a datetime a date to isinstance.
_TYPE_NAMES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (dict, "mapping"), (list, "list"),
    (datetime, "timestamp"), (date, "date"),
)


def type_name(v: object) -> str:
    """The JSON/YAML word for ``v``'s type, for messages: ``mapping``, ``list``, ``integer``, ..."""
    if v is None:
        return "null"
    return next((word for kind, word in _TYPE_NAMES if isinstance(v, kind)), type(v).__name__)


class FieldError(OutriggerError, ValueError):
    """A field of a document that is wrong: ``path`` (``""`` for the document itself) and ``reason``."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}" if path else reason)
        self.path = path
        self.reason = reason


def wrong_type(path: str, expected: str, v: object) -> NoReturn:
    """Raise ``FieldError(path, "expected <expected>, got <type of v>")``."""
    raise FieldError(path, f"expected {expected}, got {type_name(v)}")


# ---------------------------------------------------------------------------------------------------
# Typed readers. ``get_*`` read field ``key`` of mapping ``m`` at path ``parent``; an absent or null
# field is the default. ``as_*`` check a value whose path is known.

_EMPTY: Mapping[str, Any] = {}
_T = TypeVar("_T")
# What a reader of each type says it expected.
_EXPECTED: dict[type, str] = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}


def _is(v: object, kind: type) -> bool:
    """Whether ``v`` is a ``kind``; a boolean is not an integer here (JSON and YAML tell them apart)."""
    return isinstance(v, kind) and (kind is not int or not isinstance(v, bool))


def _checked(v: object, path: str, kind: type[_T]) -> _T:
    """``v`` if it is a ``kind``; else :class:`FieldError` at ``path``."""
    if _is(v, kind):
        return cast(_T, v)
    wrong_type(path, _EXPECTED[kind], v)


def _field(m: Mapping[str, Any], key: str, parent: str, kind: type[_T], default: _T) -> _T:
    """Field ``key`` of ``m`` if it is a ``kind``, ``default`` when absent or null; the path is joined only
    for the error."""
    v = m.get(key)
    if v is None:
        return default
    if _is(v, kind):
        return cast(_T, v)
    wrong_type(join(parent, key), _EXPECTED[kind], v)


def as_map(v: object, path: str) -> dict[Any, Any]:
    """``v`` if it is a mapping."""
    return _checked(v, path, dict)


item_map = as_map


def as_list(v: object, path: str) -> list[Any]:
    """``v`` if it is a list; null is the empty list."""
    return [] if v is None else _checked(v, path, list)


def as_str(v: object, path: str) -> str:
    """``v`` if it is a string."""
    return _checked(v, path, str)


def as_bool(v: object, path: str) -> bool:
    """``v`` if it is a boolean."""
    return _checked(v, path, bool)


def as_int(v: object, path: str, bits: int = 0) -> int:
    """``v`` if it is an integer (booleans and integral floats are not), of at most ``bits`` bits
    (signed; 0: any) as Go's ``int32``/``int64`` fields decode."""
    n = _checked(v, path, int)
    if bits and not -(2 ** (bits - 1)) <= n < 2 ** (bits - 1):
        raise FieldError(path, f"Invalid value: {n}: must fit in a {bits}-bit integer")
    return n


def get_map(m: Mapping[str, Any], key: str, parent: str) -> Mapping[str, Any]:
    return _field(m, key, parent, dict, _EMPTY)


def get_list(m: Mapping[str, Any], key: str, parent: str) -> list[Any]:
    return _field(m, key, parent, list, [])


def get_str(m: Mapping[str, Any], key: str, parent: str, default: str = "") -> str:
    return _field(m, key, parent, str, default)


def required_str(m: Mapping[str, Any], key: str, parent: str) -> str:
    """A string field that must be present and not empty."""
    v = get_str(m, key, parent)
    if not v:
        raise FieldError(join(parent, key), "required field is missing")
    return v


def get_int(m: Mapping[str, Any], key: str, parent: str, default: int) -> int:
    return _field(m, key, parent, int, default)


def get_bool(m: Mapping[str, Any], key: str, parent: str) -> bool:
    return _field(m, key, parent, bool, False)


def str_map(m: Mapping[str, Any], key: str, parent: str) -> dict[str, str]:
    """A mapping of strings to strings (labels, annotations, nodeSelector), copied."""
    v = get_map(m, key, parent)
    for k, val in v.items():
        if not isinstance(k, str):
            raise FieldError(join(parent, key), f"keys must be strings, got {type_name(k)} {k!r}")
        if not isinstance(val, str):
            wrong_type(join(join(parent, key), k), "a string", val)
    return dict(v)


def str_tuple(m: Mapping[str, Any], key: str, parent: str) -> tuple[str, ...]:
    """A list of strings."""
    v = get_list(m, key, parent)
    for i, s in enumerate(v):
        if not isinstance(s, str):
            wrong_type(f"{join(parent, key)}[{i}]", "a string", s)
    return tuple(v)


def one_of(value: str, allowed: Iterable[str], path: str, what: str) -> str:
    """``value`` if it is one of ``allowed``; else ``unsupported <what> "<value>" (supported: ...)``."""
    if value not in allowed:
        choices = ", ".join(sorted(allowed))
        raise FieldError(path, f'unsupported {what} "{value}" (supported: {choices})')
    return value


_RFC3339_RE = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:([Zz])|([+-])(\d{2}):(\d{2}))"
)


def timestamp(m: Mapping[str, Any], key: str, parent: str) -> float | None:
    """An RFC 3339 timestamp field (``metav1.Time``) in seconds since the epoch; None when absent."""
    v = m.get(key)
    if v is None:
        return None
    # PyYAML already turns unquoted timestamps into datetimes; YAML says a zone-less one is UTC.
    if isinstance(v, datetime):
        return (v if v.tzinfo is not None else v.replace(tzinfo=UTC)).timestamp()
    if not isinstance(v, str):
        wrong_type(join(parent, key), "an RFC3339 timestamp string", v)
    match = _RFC3339_RE.fullmatch(v)
    if match is not None:
        y, mo, d, h, mi, s, frac, zulu, sign, oh, om = match.groups()
        try:
            ts = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=UTC).timestamp()
        except ValueError:
            pass  # out-of-range field, e.g. month 13: reported below
        else:
            if not zulu:
                offset = int(oh) * 3600 + int(om) * 60
                ts -= offset if sign == "+" else -offset
            return ts + float(frac) if frac else ts
    raise FieldError(join(parent, key), f'invalid timestamp "{v}" (expected RFC3339, e.g. 2024-01-02T03:04:05Z)')
