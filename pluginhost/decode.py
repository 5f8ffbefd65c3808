"""Decoding Kubernetes objects and configuration documents: one YAML/JSON front end and one strict,
typed field reader, shared by manifests (:mod:`pluginhost.manifest`), the KubeSchedulerConfiguration
(:mod:`framework.config`) and the RemotePlugins document (:mod:`framework.remote.config`).

**Text to documents.** :func:`load_documents` reads a YAML stream or one JSON object,
:func:`load_document` exactly one document (a configuration file). JSON takes the ``json`` module's
fast path; anything else is YAML, read by a hardened safe loader (:mod:`pluginhost.safeyaml`). Whatever
the text, the only exception is :class:`TextError`: collections nested deeper than :data:`MAX_DEPTH`
(in YAML also through aliases), an anchor used inside its own value, excessive aliasing, values that
cannot be built, characters YAML forbids. No input reaches Python's recursion limit. A key given twice
in one mapping is not an error here: each :class:`Document` lists the paths of its duplicated keys
(the last value is kept) and the caller's validation mode decides.

**Documents to values.** The readers check a value's type and raise :class:`FieldError` naming the
field by its path, e.g. ``spec.containers[0].name: expected a string, got integer``: ``get_*`` read
a field of a mapping (the path is built only when the field is wrong, so a correct object costs no
string work), ``as_*`` a value whose path is known.

**Strict decoding.** A :class:`Schema` holds an object type's field names and which fields hold
nested objects (:func:`schemas` builds them from a compact table, e.g. :data:`pluginhost.kubefields.TYPES`).
:func:`unknown_fields` walks an object and its nested objects as deep as the schema describes them
and returns the path of every field the schema does not know; :func:`strict_problems` words them as
the API server does: ``unknown field "spec.nodeSelectr"``, ``duplicate field "metadata.name"``.
:data:`VALIDATE_MODES` are ``kubectl apply --validate``'s: ``strict`` (they are errors), ``warn``
(``Warning: unknown field "spec.x"`` lines) and ``ignore``.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, NoReturn

import numpy as np
import yaml
from yaml.constructor import ConstructorError
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.nodes import MappingNode

from pluginhost.errors import OutriggerError
from pluginhost.safeyaml import MAX_DEPTH, check_structure, harden, reader_error

try:  # libyaml's parser and composer when PyYAML was built with them (several times faster)
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

__all__ = [
    "LIST",
    "MAP",
    "MAX_DEPTH",
    "OBJECT",
    "VALIDATE_MODES",
    "Document",
    "FieldError",
    "Schema",
    "TextError",
    "as_bool",
    "as_int",
    "as_list",
    "as_map",
    "as_str",
    "check_validate",
    "get_bool",
    "get_int",
    "get_list",
    "get_map",
    "get_str",
    "item_map",
    "join",
    "load_document",
    "load_documents",
    "one_line",
    "one_of",
    "paused_gc",
    "required_str",
    "schemas",
    "str_map",
    "str_tuple",
    "strict_problems",
    "timestamp",
    "type_name",
    "unknown_fields",
    "wrong_type",
]

#: ``kubectl apply --validate``'s modes: unknown and duplicate fields are errors, warnings, or ignored.
VALIDATE_MODES = ("strict", "warn", "ignore")


def check_validate(validate: str) -> None:
    """Refuse a validation mode that is not one of :data:`VALIDATE_MODES` (a caller's mistake)."""
    if validate not in VALIDATE_MODES:
        raise ValueError(f"validate must be one of {', '.join(VALIDATE_MODES)}, got {validate!r}")


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


def type_name(v: object) -> str:
    """The JSON/YAML word for ``v``'s type, for messages: ``mapping``, ``list``, ``integer``, ..."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "mapping"
    if isinstance(v, list):
        return "list"
    if isinstance(v, datetime):
        return "timestamp"
    if isinstance(v, date):
        return "date"
    return type(v).__name__


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


def as_map(v: object, path: str) -> dict[Any, Any]:
    """``v`` if it is a mapping."""
    if isinstance(v, dict):
        return v
    wrong_type(path, "a mapping", v)


item_map = as_map


def as_list(v: object, path: str) -> list[Any]:
    """``v`` if it is a list; null is the empty list."""
    if v is None:
        return []
    if isinstance(v, list):
        return v
    wrong_type(path, "a list", v)


def as_str(v: object, path: str) -> str:
    """``v`` if it is a string."""
    if isinstance(v, str):
        return v
    wrong_type(path, "a string", v)


def as_bool(v: object, path: str) -> bool:
    """``v`` if it is a boolean."""
    if isinstance(v, bool):
        return v
    wrong_type(path, "a boolean", v)


def as_int(v: object, path: str, bits: int = 0) -> int:
    """``v`` if it is an integer (booleans and integral floats are not), of at most ``bits`` bits
    (signed; 0: any) as Go's ``int32``/``int64`` fields decode."""
    if isinstance(v, bool) or not isinstance(v, int):
        wrong_type(path, "an integer", v)
    if bits and not -(2 ** (bits - 1)) <= v < 2 ** (bits - 1):
        raise FieldError(path, f"Invalid value: {v}: must fit in a {bits}-bit integer")
    return v


def get_map(m: Mapping[str, Any], key: str, parent: str) -> Mapping[str, Any]:
    v = m.get(key)
    if v is None:
        return _EMPTY
    if isinstance(v, dict):
        return v
    wrong_type(join(parent, key), "a mapping", v)


def get_list(m: Mapping[str, Any], key: str, parent: str) -> list[Any]:
    v = m.get(key)
    if v is None:
        return []
    if isinstance(v, list):
        return v
    wrong_type(join(parent, key), "a list", v)


def get_str(m: Mapping[str, Any], key: str, parent: str, default: str = "") -> str:
    v = m.get(key)
    if v is None:
        return default
    if isinstance(v, str):
        return v
    wrong_type(join(parent, key), "a string", v)


def required_str(m: Mapping[str, Any], key: str, parent: str) -> str:
    """A string field that must be present and not empty."""
    v = get_str(m, key, parent)
    if not v:
        raise FieldError(join(parent, key), "required field is missing")
    return v


def get_int(m: Mapping[str, Any], key: str, parent: str, default: int) -> int:
    v = m.get(key)
    if v is None:
        return default
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    wrong_type(join(parent, key), "an integer", v)


def get_bool(m: Mapping[str, Any], key: str, parent: str) -> bool:
    v = m.get(key)
    if v is None:
        return False
    if isinstance(v, bool):
        return v
    wrong_type(join(parent, key), "a boolean", v)


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


# ---------------------------------------------------------------------------------------------------
# Schemas and strict decoding

#: How a field holds nested objects: one object, a list of them, or a map of them.
OBJECT, LIST, MAP = 0, 1, 2


class Schema:
    """One object type for strict decoding: the names of its fields (``names`` in the order written,
    ``fields`` as a set) and, for those that hold objects, how and of which type (``children``: name ->
    (OBJECT | LIST | MAP, Schema))."""

    __slots__ = ("children", "fields", "leaves", "name", "names", "nested")

    def __init__(self, name: str, names: Iterable[str] = ()) -> None:
        self.name = name
        self.names: tuple[str, ...] = tuple(names)
        self.fields: frozenset[str] = frozenset(self.names)
        self.children: dict[str, tuple[int, Schema]] = {}
        #: The names of ``children``, and of the other fields: an object with only the latter needs
        #: one set operation.
        self.nested: frozenset[str] = frozenset()
        self.leaves: frozenset[str] = self.fields

    def __repr__(self) -> str:
        return f"Schema({self.name!r}, {len(self.fields)} fields)"


_FIELD_RE = re.compile(r"([A-Za-z_$][\w$-]*)(?::(?:(\w+)|\[(\w+)\]|\{(\w+)\}))?")


def schemas(*tables: Mapping[str, str]) -> dict[str, Schema]:
    """Schemas from tables of ``type name -> "field field:Type field:[Type] field:{Type} ..."`` (a
    plain name for a field whose value is not an object; see :mod:`pluginhost.kubefields`). Later
    tables may refer to the types of earlier ones, and types may refer to each other in any order."""
    specs: dict[str, str] = {}
    for table in tables:
        specs.update(table)
    out = {name: Schema(name) for name in specs}
    for name, spec in specs.items():
        fields: list[str] = []
        for token in spec.split():
            m = _FIELD_RE.fullmatch(token)
            if m is None:
                raise ValueError(f"schema {name}: cannot read field {token!r}")
            field, obj, lst, mp = m.groups()
            fields.append(field)
            child = obj or lst or mp
            if child is None:
                continue
            if child not in out:
                raise ValueError(f"schema {name}: field {field} refers to unknown type {child}")
            out[name].children[field] = (OBJECT if obj else LIST if lst else MAP, out[child])
        out[name].names = tuple(fields)
        out[name].fields = frozenset(fields)
        out[name].nested = frozenset(out[name].children)
        out[name].leaves = out[name].fields - out[name].nested
    return out


# A field's place while walking, built without string work: (parent trail, key or list index).
_Trail = tuple[Any, str | int] | None


def _render(trail: _Trail) -> str:
    parts: list[str | int] = []
    while trail is not None:
        trail, part = trail
        parts.append(part)
    path = ""
    for part in reversed(parts):
        path = f"{path}[{part}]" if isinstance(part, int) else join(path, part)
    return path


def unknown_fields(obj: Mapping[Any, Any], schema: Schema) -> list[str]:
    """The paths of the fields of ``obj`` and of its nested objects, as deep as ``schema`` describes
    them, that the schema does not know, in document order: ``["spec.containers[0].resourcs"]``.

    A field that must hold an object (or a list or map of them) but holds another type raises
    :class:`FieldError`: the type decides before the names do, as in the API server's decoding.
    Other types are the readers' business.
    """
    out: list[str] = []
    _walk(obj, schema, None, out)
    return out


def _walk(obj: Mapping[Any, Any], schema: Schema, trail: _Trail, out: list[str]) -> None:
    # The hot path of strict decoding (every object of every manifest): a set operation or two per
    # object, and a call only for objects that hold nested objects themselves. Unknown fields are
    # reported in document order, as the API server's decoder meets them.
    fields = schema.fields
    known = fields.issuperset(obj)
    if schema.nested.isdisjoint(obj):
        if not known:
            _unknown(obj, schema, trail, out)
        return
    children = schema.children
    for key, value in obj.items():
        child = children.get(key)
        if child is None:
            if not known and key not in fields:
                out.append(_render((trail, str(key))))
            continue
        if value is None:
            continue
        kind, sub = child
        if kind == OBJECT:
            if not isinstance(value, dict):
                wrong_type(_render((trail, key)), "a mapping", value)
            if sub.leaves.issuperset(value):
                continue  # known fields only, none of them nested
            if sub.nested.isdisjoint(value):
                _unknown(value, sub, (trail, key), out)
            else:
                _walk(value, sub, (trail, key), out)
        elif kind == LIST:
            if not isinstance(value, list):
                wrong_type(_render((trail, key)), "a list", value)
            for i, item in enumerate(value):
                if not isinstance(item, dict):
                    if item is not None:
                        wrong_type(_render(((trail, key), i)), "a mapping", item)
                elif sub.leaves.issuperset(item):
                    continue
                elif sub.nested.isdisjoint(item):
                    _unknown(item, sub, ((trail, key), i), out)
                else:
                    _walk(item, sub, ((trail, key), i), out)
        else:
            if not isinstance(value, dict):
                wrong_type(_render((trail, key)), "a mapping", value)
            for name, item in value.items():
                if isinstance(item, dict):
                    _walk(item, sub, ((trail, key), str(name)), out)
                elif item is not None:
                    wrong_type(_render(((trail, key), str(name))), "a mapping", item)


def _unknown(obj: Mapping[Any, Any], schema: Schema, trail: _Trail, out: list[str]) -> None:
    fields = schema.fields
    out.extend(_render((trail, str(key))) for key in obj if key not in fields)


def strict_problems(duplicates: Iterable[str], unknown: Iterable[str]) -> list[str]:
    """The API server's strict decoding errors: ``duplicate field "a.b"``, then ``unknown field "a.c"``."""
    return [*(f'duplicate field "{p}"' for p in duplicates), *(f'unknown field "{p}"' for p in unknown)]


def report(problems: list[str], validate: str, warn: Callable[[str], None] | None) -> str | None:
    """Apply ``validate`` to strict ``problems``: in ``strict`` mode the one-line error to raise (None
    when there are none); in ``warn`` mode each is passed to ``warn`` as ``Warning: <problem>``."""
    if not problems or validate == "ignore":
        return None
    if validate == "strict":
        return ", ".join(problems)
    if warn is not None:
        for problem in problems:
            warn(f"Warning: {problem}")
    return None


# ---------------------------------------------------------------------------------------------------
# Text to documents


class TextError(OutriggerError, ValueError):
    """Text that cannot be read as YAML or JSON. ``where`` is ``"line 3, column 7"`` when known (else
    ``""``), ``document`` the number of the YAML document the problem is in (0: the text as a whole)."""

    def __init__(self, reason: str, *, where: str = "", document: int = 0) -> None:
        super().__init__(f"{where}: {reason}" if where else reason)
        self.reason = reason
        self.where = where
        self.document = document


@dataclass(frozen=True, slots=True)
class Document:
    """One document of a text: its number (from 1, counting empty ones, as in the file), its value
    (None for an empty document) and its duplicated keys as ``(path, where)``, ``where`` being the
    second occurrence's ``"line 4, column 1"`` (``""`` in JSON)."""

    index: int
    value: Any
    duplicates: tuple[tuple[str, str], ...] = ()


_MERGE = "tag:yaml.org,2002:merge"


@harden
class _Loader(_BaseLoader):
    """The safe loader, hardened, recording mappings' duplicated keys instead of keeping the last
    silently (a merge key's ``<<: *defaults`` may still be overridden by explicit keys)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.document = 0
        self.duplicates: list[tuple[int, int, int]] = []  # (document, line, column) of each repeated key

    def _repeated(self, key_node: Any) -> None:
        mark = key_node.start_mark
        self.duplicates.append((self.document, mark.line, mark.column))

    @staticmethod
    def _unhashable(node: Any, key_node: Any) -> ConstructorError:
        return ConstructorError("while constructing a mapping", node.start_mark, "found unhashable key",
                                key_node.start_mark)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, MappingNode):
            raise ConstructorError(None, None, f"expected a mapping node, but found {node.id}", node.start_mark)
        explicit = node.value
        self.flatten_mapping(node)  # merge keys: node.value becomes merged pairs + the explicit ones
        merged = node.value[: len(node.value) - len(explicit)] if node.value is not explicit else []
        mapping: dict[Any, Any] = {}
        if not merged:
            for key_node, value_node in explicit:
                key = self.construct_object(key_node, deep=deep)
                try:
                    repeated = key in mapping
                except TypeError:  # a list or mapping as a key
                    raise self._unhashable(node, key_node) from None
                if repeated:
                    self._repeated(key_node)
                mapping[key] = self.construct_object(value_node, deep=deep)
            return mapping
        for key_node, value_node in merged:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                raise self._unhashable(node, key_node) from None
            mapping[key] = self.construct_object(value_node, deep=deep)
        seen: set[Any] = set()  # only explicit keys can be repeated; they may override merged ones
        for key_node, value_node in explicit:
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
            except TypeError:
                raise self._unhashable(node, key_node) from None
            if repeated:
                self._repeated(key_node)
            seen.add(key)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


@contextmanager
def paused_gc() -> Iterator[None]:
    """Python's cyclic garbage collector paused while documents are built and decoded: decoding
    allocates a great many objects and no cycles (aliases that would make one are refused), and each
    collection would walk all of them again. A 10000-pod JSON manifest parses a third faster."""
    if not gc.isenabled():  # paused already (by an enclosing call, or by the application)
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def load_documents(text: str) -> list[Document]:
    """Every document of ``text``: one JSON object, or a YAML stream (``---`` between documents)."""
    with paused_gc():
        if text.lstrip().startswith("{"):
            document = _load_json(text)
            if document is not None:
                return [document]
        return _load_yaml(text, single=False)


def load_document(text: str) -> Document:
    """The one document of ``text`` (a configuration file); its value is None when ``text`` holds
    none. Two documents are an error."""
    with paused_gc():
        if text.lstrip().startswith("{"):
            document = _load_json(text)
            if document is not None:
                return document
        return _load_yaml(text, single=True)[0]


# JSON: everything but brackets and quotes is dropped (escapes first) to measure nesting, with NumPy.
_JSON_ESCAPE_RE = re.compile(rb"\\.", re.S)
_NOT_STRUCTURE = bytes(c for c in range(256) if c not in b'{}[]"')


def _json_depth(text: str) -> int:
    """How deep the collections of a valid JSON ``text`` nest (0 for a scalar)."""
    raw = text.encode("utf-8", "surrogatepass")
    if raw.count(b"{") + raw.count(b"[") <= MAX_DEPTH:
        return 0  # cannot be too deep: not worth measuring
    if b"\\" in raw:
        raw = _JSON_ESCAPE_RE.sub(b"", raw)
    chars = np.frombuffer(raw.translate(None, _NOT_STRUCTURE), dtype=np.uint8)
    in_string = (np.cumsum(chars == ord('"'), dtype=np.int64) & 1).astype(np.bool_)
    step = np.zeros(len(chars), dtype=np.int64)
    step[(chars == ord("{")) | (chars == ord("["))] = 1
    step[(chars == ord("}")) | (chars == ord("]"))] = -1
    step[in_string] = 0
    return int(np.cumsum(step).max()) if len(step) else 0


def _load_json(text: str) -> Document | None:
    """``text`` as one JSON document; None when it is not JSON (it may still be YAML flow style)."""
    repeated: list[tuple[dict[Any, Any], list[str]]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(items)
        if len(obj) != len(items):
            keys: list[str] = []
            seen: set[str] = set()
            for key, _ in items:
                if key in seen and key not in keys:
                    keys.append(key)
                seen.add(key)
            repeated.append((obj, keys))
        return obj

    too_deep = f"invalid JSON: collections nested deeper than {MAX_DEPTH} levels"
    try:
        value = json.loads(text, object_pairs_hook=pairs)
    except json.JSONDecodeError:
        return None
    except RecursionError:
        raise TextError(too_deep) from None
    except ValueError:  # not a JSONDecodeError: an integer beyond Python's limit on digits
        raise TextError("invalid JSON: a number has too many digits") from None
    if _json_depth(text) > MAX_DEPTH:
        raise TextError(too_deep)
    duplicates: list[tuple[str, str]] = []
    if repeated:
        where = _paths_of({id(obj) for obj, _ in repeated}, value)
        for obj, keys in repeated:
            duplicates.extend((join(where[id(obj)], key), "") for key in keys)
    return Document(1, value, tuple(duplicates))


def _paths_of(wanted: set[int], value: Any) -> dict[int, str]:
    """The paths of the objects whose ids are ``wanted`` inside ``value`` (iteratively: no recursion)."""
    found: dict[int, str] = {}
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack and len(found) < len(wanted):
        item, path = stack.pop()
        if isinstance(item, dict):
            if id(item) in wanted:
                found[id(item)] = path
            stack.extend((v, join(path, str(k))) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(item))
    return found


def _yaml_error(err: yaml.YAMLError, text: str, document: int) -> TextError:
    refused = reader_error(err, text)
    if refused is not None:
        where, problem = refused
        return TextError(f"invalid YAML: {problem}", where=where, document=document)
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or (str(err).splitlines() or [type(err).__name__])[0]
    context = getattr(err, "context", None)
    reason = f"invalid YAML: {context}, {problem}" if context else f"invalid YAML: {problem}"
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return TextError(reason, where=where, document=document)


def _load_yaml(text: str, *, single: bool) -> list[Document]:
    loader: _Loader | None = None
    values: list[Any] = []
    try:
        problem = check_structure(text)
        if problem is not None:
            where, reason = problem
            raise TextError(f"invalid YAML: {reason}", where=where)
        loader = _Loader(text)
        if single:
            loader.document = 1
            values.append(loader.get_single_data())
        else:
            while loader.check_data():  # type: ignore[no-untyped-call]
                loader.document = len(values) + 1
                values.append(loader.get_data())
    except yaml.YAMLError as err:
        raise _yaml_error(err, text, len(values) + 1) from None
    except UnicodeError as err:  # lone surrogates: only Python callers can pass such a str
        raise TextError(f"not valid Unicode text: {getattr(err, 'reason', err)}") from None
    finally:
        if loader is not None:
            loader.dispose()
    duplicates: dict[int, list[tuple[str, str]]] = {}
    if loader.duplicates:
        duplicates = _duplicate_paths(text, loader.duplicates)
    return [Document(i, value, tuple(duplicates.get(i, ()))) for i, value in enumerate(values, 1)]


def _duplicate_paths(text: str, found: list[tuple[int, int, int]]) -> dict[int, list[tuple[str, str]]]:
    """The paths of the repeated keys at ``found`` ((document, line, column) each), by document: the
    parser's events are walked again, keeping the path to the current node (only when there are some)."""
    wanted = set(found)
    out: dict[int, list[tuple[str, str]]] = {}
    document = 0
    # One frame per open collection: a mapping's [True, expecting a key, current key] or a
    # sequence's [False, index].
    stack: list[list[Any]] = []

    def done() -> None:  # a node ended: the enclosing mapping alternates key/value, a sequence counts
        if stack:
            top = stack[-1]
            if top[0]:
                top[1] = not top[1]
            else:
                top[1] += 1

    def path_here() -> str:
        path = ""
        for frame in stack[:-1]:
            path = join(path, str(frame[2])) if frame[0] else f"{path}[{frame[1]}]"
        return path

    event: Any
    for event in yaml.parse(text, Loader=_BaseLoader):
        kind = type(event)
        if kind is DocumentStartEvent:
            document += 1
            stack.clear()
            continue
        if kind is MappingEndEvent or kind is SequenceEndEvent:
            stack.pop()
            done()
            continue
        if kind not in (ScalarEvent, AliasEvent, MappingStartEvent, SequenceStartEvent):
            continue
        if stack and stack[-1][0] and stack[-1][1]:  # this node is a key
            mark = event.start_mark
            key = event.value if kind is ScalarEvent else getattr(event, "anchor", None) or "?"
            if (document, mark.line, mark.column) in wanted:
                where = f"line {mark.line + 1}, column {mark.column + 1}"
                out.setdefault(document, []).append((join(path_here(), str(key)), where))
            stack[-1][2] = key
        if kind is MappingStartEvent:
            stack.append([True, True, None])
        elif kind is SequenceStartEvent:
            stack.append([False, 0])
        else:
            done()
    return out
