"""Label selectors in kubectl's syntax (``-l``/``--selector``), parsed and matched.

    sel = parse_selector("app=web,tier!=cache,zone in (a,b),!canary,owner")
    sel.matches({"app": "web", "zone": "a", "owner": "x"})   # True

The grammar is the API server's (``k8s.io/apimachinery/pkg/labels``): requirements separated by
commas, each one of ``key``, ``!key``, ``key=value`` (or ``==``), ``key!=value``, ``key in (v1,v2)``,
``key notin (v1,v2)``, ``key>N`` and ``key<N``. As there, ``!=`` and ``notin`` also match objects
without the label, and an empty selector matches everything. A selector that does not parse raises
:class:`SelectorError` with one line naming the problem.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from pluginhost.errors import OutriggerError

__all__ = ["Requirement", "Selector", "SelectorError", "parse_selector"]

_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_OPERATORS = ("==", "!=", "=", "<", ">")  # longest first
_SPECIAL = "=!(),<>"


class SelectorError(OutriggerError, ValueError):
    """A label selector that does not parse (the message names the selector and the problem)."""


@dataclass(frozen=True, slots=True)
class Requirement:
    """One requirement: ``operator`` is ``exists``, ``!``, ``=``, ``!=``, ``in``, ``notin``, ``<`` or ``>``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        op = self.operator
        if op == "exists":
            return value is not None
        if op == "!":
            return value is None
        if op in ("=", "in"):
            return value is not None and value in self.values
        if op in ("!=", "notin"):
            return value is None or value not in self.values
        if value is None:
            return False
        try:
            have = int(value)
        except ValueError:
            return False
        want = int(self.values[0])
        return have < want if op == "<" else have > want


@dataclass(frozen=True, slots=True)
class Selector:
    """Every requirement must hold (an empty selector matches every object)."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def __bool__(self) -> bool:
        return bool(self.requirements)


def _tokens(text: str) -> list[str]:
    """Identifiers, operators, parentheses and commas; whitespace separates and is dropped."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "(),":
            out.append(c)
            i += 1
        elif c in "=!<>":
            op = next((o for o in _OPERATORS if text.startswith(o, i)), c)
            out.append(op)
            i += len(op)
        else:
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in _SPECIAL:
                j += 1
            out.append(text[i:j])
            i = j
    return out


def _is_word(token: str | None) -> bool:
    return token is not None and token not in _OPERATORS and token not in ("(", ")", ",", "!")


def _check_key(key: str) -> str | None:
    """Why ``key`` is not a valid label key (a qualified name), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or _PREFIX.fullmatch(prefix) is None):
        return f"label key {key!r}: the prefix must be a DNS subdomain (lowercase letters, digits, '-' and '.')"
    if not name or len(name) > 63 or _NAME.fullmatch(name) is None:
        return (f"label key {key!r}: the name must be 63 characters or less, of letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit")
    return None


def _check_value(value: str) -> str | None:
    if value and (len(value) > 63 or _NAME.fullmatch(value) is None):
        return (f"label value {value!r} must be 63 characters or less, of letters, digits, '-', '_' or '.', "
                "starting and ending with a letter or digit")
    return None


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.pos = 0

    def fail(self, why: str) -> SelectorError:
        return SelectorError(f"invalid label selector {self.text!r}: {why}")

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str | None:
        token = self.peek()
        self.pos += 1
        return token

    def found(self) -> str:
        token = self.peek()
        return "the end" if token is None else repr(token)

    def key(self) -> str:
        token = self.peek()
        if not _is_word(token) or token in ("in", "notin"):
            raise self.fail(f"expected a label key, found {self.found()}")
        assert token is not None
        self.pos += 1
        why = _check_key(token)
        if why:
            raise self.fail(why)
        return token

    def value(self, after: str) -> str:
        token = self.peek()
        if token in (None, ",", ")"):
            return ""  # `a=` selects the empty value, as the API server reads it
        if not _is_word(token):
            raise self.fail(f"expected a value after {after!r}, found {self.found()}")
        assert token is not None
        self.pos += 1
        why = _check_value(token)
        if why:
            raise self.fail(why)
        return token

    def value_set(self, op: str) -> tuple[str, ...]:
        if self.take() != "(":
            self.pos -= 1
            raise self.fail(f"expected '(' after {op!r}, found {self.found()}")
        values: list[str] = []
        while True:
            values.append(self.value(op))
            token = self.take()
            if token == ")":
                break
            if token != ",":
                self.pos -= 1
                raise self.fail(f"expected ',' or ')' in the values of {op!r}, found {self.found()}")
        if values == [""]:
            raise self.fail(f"{op!r} needs at least one value")
        return tuple(values)

    def requirement(self) -> Requirement:
        if self.peek() == "!":
            self.pos += 1
            return Requirement(self.key(), "!")
        key = self.key()
        token = self.peek()
        if token in (None, ","):
            return Requirement(key, "exists")
        self.pos += 1
        if token in ("=", "=="):
            return Requirement(key, "=", (self.value(token),))
        if token == "!=":
            return Requirement(key, "!=", (self.value(token),))
        if token in ("in", "notin"):
            return Requirement(key, token, self.value_set(token))
        if token in ("<", ">"):
            number = self.value(token)
            if not re.fullmatch(r"-?\d+", number):
                raise self.fail(f"{key}{token}{number}: {token!r} compares with an integer, got {number!r}")
            return Requirement(key, token, (number,))
        self.pos -= 1
        raise self.fail(f"expected an operator (=, ==, !=, in, notin, <, >) or ',' after {key!r}, "
                        f"found {self.found()}")

    def parse(self) -> Selector:
        requirements: list[Requirement] = []
        if not self.tokens:
            return Selector()
        while True:
            requirements.append(self.requirement())
            token = self.take()
            if token is None:
                return Selector(tuple(requirements))
            if token != ",":
                self.pos -= 1
                raise self.fail(f"expected ',' or the end, found {self.found()}")


def parse_selector(text: str) -> Selector:
    """Parse a label selector (kubectl's ``-l``); :class:`SelectorError` when it does not parse."""
    return _Parser(text).parse()
