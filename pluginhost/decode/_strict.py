"""Strict decoding: which fields of an object its type does not know, and what to do about them.

A :class:`Schema` holds an object type's field names and which fields hold nested objects
(:func:`schemas` builds them from a compact table, e.g. :data:`pluginhost.kubefields.TYPES`).
:func:`unknown_fields` walks an object and its nested objects as deep as the schema describes them
and returns the path of every field the schema does not know; :func:`strict_problems` words them as
the API server does: ``unknown field "spec.nodeSelectr"``, ``duplicate field "metadata.name"``.
:data:`VALIDATE_MODES` are ``kubectl apply --validate``'s: ``strict`` (they are errors), ``warn``
(``Warning: unknown field "spec.x"`` lines) and ``ignore``; :func:`report` applies one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pluginhost.decode._fields import join, wrong_type

__all__ = [
    "LIST",
    "MAP",
    "OBJECT",
    "VALIDATE_MODES",
    "Schema",
    "check_validate",
    "report",
    "schemas",
    "strict_problems",
    "unknown_fields",
]

#: ``kubectl apply --validate``'s modes: unknown and duplicate fields are errors, warnings, or ignored.
VALIDATE_MODES = ("strict", "warn", "ignore")


def check_validate(validate: str) -> None:
    """Refuse a validation mode that is not one of :data:`VALIDATE_MODES` (a caller's mistake)."""
    if validate not in VALIDATE_MODES:
        raise ValueError(f"validate must be one of {', '.join(VALIDATE_MODES)}, got {validate!r}")


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
