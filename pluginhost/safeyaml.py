"""YAML loading that answers hostile text with an exception, never a crash.

PyYAML has four ways to fail badly on text a client controls, and the YAML/JSON front end
(:mod:`pluginhost.decode`, used for manifests and configuration files) is built on this module to
avoid them:

- **Deep nesting**: libyaml's composer recurses in C once per nesting level and overflows the C stack
  (the process dies with SIGSEGV) at some ten thousand levels, which a 60 KB document (``- - - - ...``)
  reaches. Its parser does not recurse, so :func:`check_structure` measures the depth on the parser's
  events first; :data:`MAX_DEPTH` levels are allowed (Kubernetes objects nest about a dozen).
- **Aliases**: an anchor used inside its own value builds a value that contains itself (every later
  walk over it recurses forever), chained aliases nest deeper than the text shows, and a few lines of
  anchors can stand for billions of nodes. :func:`check_structure` refuses all three on the same pass.
- **Values the scalar constructors reject** with a bare ``ValueError`` (``2024-13-45`` is read as a
  timestamp, a 5000-digit integer exceeds Python's conversion limit): :func:`harden` makes them
  ``ConstructorError`` s with a position, like every other YAML error.
- Strings that are not valid Unicode text reach the loader only from Python callers; those are left
  to the callers, which catch ``UnicodeError``.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import (
    AliasEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)

try:  # libyaml's parser when PyYAML was built with it (several times faster)
    from yaml import CSafeLoader as _ScanLoader

    _LIBYAML = True
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _ScanLoader  # type: ignore[assignment]

    _LIBYAML = False

__all__ = ["MAX_DEPTH", "check_structure", "harden", "reader_error"]

#: The deepest nesting of collections (mappings and lists) a document may have.
MAX_DEPTH = 100


def check_structure(text: str, limit: int = MAX_DEPTH) -> tuple[str, str] | None:
    """The first way ``text`` would make loading it blow up, as ``("line 3, column 7", reason)``, or None
    (also when ``text`` is not valid YAML: the real load reports that).

    Reasons: collections nested deeper than ``limit``, directly or through an alias (an alias stands
    for its anchor's whole value); an anchor used inside its own value (the loader would build a
    value that contains itself); excessive aliasing (aliases expanding to far more nodes than the
    text holds). The last two are go-yaml's rules and words, which kubectl and the API server use.
    """
    try:
        return _scan(text, limit, _ScanLoader)
    except yaml.YAMLError as err:
        # The libyaml PyYAML 6.0.4 ships refuses flow collections nested past its own limit (1000) while scanning,
        # tokens ahead of the parser's events; the pure-Python parser has no such limit and does not
        # recurse either, so it finds the first collection past ours.
        if "nesting depth" not in str(err) or not _LIBYAML:
            return None
    try:
        return _scan(text, limit, yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def _allowed_alias_ratio(nodes: int) -> float:
    """go-yaml's bound on the share of nodes that come from aliases: 99 % up to 400,000 nodes, then
    down to 10 % at 4,000,000 (so an alias bomb ends long before it exhausts memory or time)."""
    low, high = 400_000, 4_000_000
    if nodes <= low:
        return 0.99
    if nodes >= high:
        return 0.10
    return 0.99 - 0.89 * (nodes - low) / (high - low)


def _where(event: Any) -> str:
    mark: Any = event.start_mark
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _scan(text: str, limit: int, loader: Any) -> tuple[str, str] | None:
    too_deep = f"collections nested deeper than {limit} levels"
    depth = 0
    nodes = aliased = 0  # nodes of the document, each alias counted as its anchor's value; from aliases
    heights: dict[str, int] = {}  # anchor -> levels of collections in its value (0: a scalar)
    sizes: dict[str, int] = {}  # anchor -> nodes in its value
    # The anchored collections being read, innermost last: [anchor, depth, deepest level below, nodes before].
    anchored: list[list[Any]] = []
    event: Any
    for event in yaml.parse(text, Loader=loader):
        kind = type(event)
        if kind is ScalarEvent:
            nodes += 1
            if event.anchor is not None:
                heights[event.anchor], sizes[event.anchor] = 0, 1
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            nodes += 1
            depth += 1
            if depth > limit:
                return _where(event), too_deep
            if anchored and depth > anchored[-1][2]:
                anchored[-1][2] = depth
            if event.anchor is not None:
                anchored.append([event.anchor, depth, depth, nodes - 1])
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            if anchored and anchored[-1][1] == depth:
                anchor, start, deepest, before = anchored.pop()
                heights[anchor], sizes[anchor] = deepest - start + 1, nodes - before
                if anchored and deepest > anchored[-1][2]:
                    anchored[-1][2] = deepest
            depth -= 1
        elif kind is AliasEvent:
            anchor = event.anchor
            if any(entry[0] == anchor for entry in anchored):
                return _where(event), f"anchor '{anchor}' value contains itself"
            reach = depth + heights.get(anchor, 0)
            if reach > limit:
                return _where(event), too_deep
            if anchored and reach > anchored[-1][2]:
                anchored[-1][2] = reach
            size = sizes.get(anchor, 1)
            nodes += size
            aliased += size
            if aliased > 100 and nodes > 1000 and aliased / nodes > _allowed_alias_ratio(nodes):
                return _where(event), "document contains excessive aliasing"
        elif kind is DocumentStartEvent:
            # Anchors and go-yaml's counts belong to one document.
            heights.clear()
            sizes.clear()
            nodes = aliased = 0
    return None


def reader_error(err: yaml.YAMLError, text: str) -> tuple[str, str] | None:
    """``("line 2, column 1", "unacceptable character #x001f: ...")`` for a character the YAML reader
    refuses (its ``str()`` spans two lines and gives an offset), None for any other error."""
    if not isinstance(err, yaml.reader.ReaderError):
        return None
    pos = max(0, min(int(err.position), len(text)))
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    character = err.character if isinstance(err.character, int) else ord(str(err.character)[:1] or "\0")
    return f"line {line}, column {column}", f"unacceptable character #x{character:04x}: {err.reason}"


def _guarded(construct: Any, what: str, why: str | None) -> Any:
    def construct_checked(loader: Any, node: yaml.Node) -> Any:
        try:
            return construct(loader, node)
        except ValueError as exc:
            value = str(node.value)
            shown = value if len(value) <= 40 else value[:37] + "..."
            problem = f"invalid {what} {shown!r}: {why or exc}"
            raise ConstructorError(None, None, problem, node.start_mark) from None

    return construct_checked


def harden(loader: type[Any]) -> type[Any]:
    """Give ``loader`` (a SafeLoader or CSafeLoader subclass) constructors that raise
    ``ConstructorError`` instead of ``ValueError``; returns it (usable as a class decorator)."""
    # An integer the resolver accepted fails only on Python's limit on digits (sys.get_int_max_str_digits).
    loader.add_constructor(
        "tag:yaml.org,2002:int", _guarded(SafeConstructor.construct_yaml_int, "integer", "too many digits")
    )
    loader.add_constructor(
        "tag:yaml.org,2002:timestamp", _guarded(SafeConstructor.construct_yaml_timestamp, "timestamp", None)
    )
    return loader
