"""Text to documents: one YAML/JSON front end for manifests and configuration files.

:func:`load_documents` reads a YAML stream or one JSON object, :func:`load_document` exactly one
document (a configuration file). JSON takes the ``json`` module's fast path; anything else is YAML,
read by a hardened safe loader (:mod:`pluginhost.safeyaml`). Whatever the text, the only exception
is :class:`TextError`: collections nested deeper than :data:`~pluginhost.safeyaml.MAX_DEPTH` (in YAML
also through aliases), an anchor used inside its own value, excessive aliasing, values that cannot be
built, characters YAML forbids. No input reaches Python's recursion limit. A key given twice in one
mapping is not an error here: each :class:`Document` lists the paths of its duplicated keys (the last
value is kept) and the caller's validation mode decides.
"""

from __future__ import annotations

import gc
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import yaml
from yaml import events as ev
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

from pluginhost.decode._fields import join
from pluginhost.errors import OutriggerError
from pluginhost.safeyaml import MAX_DEPTH, check_structure, harden, reader_error

try:  # libyaml's parser and composer when PyYAML was built with them (several times faster)
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]

__all__ = [
    "Document",
    "TextError",
    "load_document",
    "load_documents",
    "paused_gc",
]


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
        if kind is ev.DocumentStartEvent:
            document += 1
            stack.clear()
            continue
        if kind is ev.MappingEndEvent or kind is ev.SequenceEndEvent:
            stack.pop()
            done()
            continue
        if kind not in (ev.ScalarEvent, ev.AliasEvent, ev.MappingStartEvent, ev.SequenceStartEvent):
            continue
        if stack and stack[-1][0] and stack[-1][1]:  # this node is a key
            mark = event.start_mark
            key = event.value if kind is ev.ScalarEvent else getattr(event, "anchor", None) or "?"
            if (document, mark.line, mark.column) in wanted:
                where = f"line {mark.line + 1}, column {mark.column + 1}"
                out.setdefault(document, []).append((join(path_here(), str(key)), where))
            stack[-1][2] = key
        if kind is ev.MappingStartEvent:
            stack.append([True, True, None])
        elif kind is ev.SequenceStartEvent:
            stack.append([False, 0])
        else:
            done()
    return out
