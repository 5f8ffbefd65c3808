"""YAML loading that answers hostile text with an exception, never a crash.

PyYAML has three ways to fail badly on text a client controls, and the loaders of manifests
(:mod:`pluginhost.manifest`) and configuration files (:mod:`framework.config`,
:mod:`framework.remoteconfig`) are built on this module to avoid them:

- **Deep nesting**: libyaml's composer recurses in C once per nesting level and overflows the C stack
  (the process dies with SIGSEGV) at some ten thousand levels, which a 60 KB document (``- - - - ...``)
  reaches. Its parser does not recurse, so :func:`too_deep` measures the depth on the parser's events
  first; :data:`MAX_DEPTH` levels are allowed (Kubernetes objects nest about a dozen).
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

try:  # libyaml's parser when PyYAML was built with it (several times faster)
    from yaml import CSafeLoader as _ScanLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _ScanLoader  # type: ignore[assignment]

__all__ = ["MAX_DEPTH", "harden", "reader_error", "too_deep"]

#: The deepest nesting of collections (mappings and lists) a document may have.
MAX_DEPTH = 100


def too_deep(text: str, limit: int = MAX_DEPTH) -> str | None:
    """Where ``text`` first nests deeper than ``limit`` collections (``"line 3, column 7"``), or None
    (also when ``text`` is not valid YAML: the real load reports that)."""
    try:
        return _first_too_deep(text, limit, _ScanLoader)
    except yaml.YAMLError as err:
        # libyaml since 0.2.6 refuses flow collections nested past its own limit (1000) while scanning,
        # tokens ahead of the parser's events; the pure-Python parser has no such limit and does not
        # recurse either, so it finds the first collection past ours.
        if "nesting depth" not in str(err) or _ScanLoader is yaml.SafeLoader:
            return None
    try:
        return _first_too_deep(text, limit, yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def _first_too_deep(text: str, limit: int, loader: Any) -> str | None:
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limit:
                mark: Any = event.start_mark
                return f"line {mark.line + 1}, column {mark.column + 1}"
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
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
