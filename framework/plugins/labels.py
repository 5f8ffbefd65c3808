"""Labels as apimachinery has them: label key and value validation, label requirements
(``labels.Requirement``, parsed as ``labels.NewRequirement`` does) and ``metav1.LabelSelector``
matching with ``LabelSelectorAsSelector`` semantics.

A requirement answers for one label set (:meth:`Requirement.matches`) and, as array work, for the
rows of a :class:`NodeTable` or any column of label codes (:meth:`Requirement.mask_codes`), so a
selector is evaluated over every node or every placed pod at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pluginhost.model import LabelSelector
from pluginhost.snapshot import NodeTable

from .helpers import BoolArray, Int32Array, IntArray

__all__ = [
    "LabelCodes",
    "LabelSelectorMatcher",
    "Requirement",
    "compile_label_selector",
    "compile_requirement",
    "field_error",
    "join_path",
    "label_int_values",
    "label_key_errors",
    "label_selector_matches",
    "label_value_errors",
    "merge_label_set",
    "parse_int64",
]

#: ``label_codes(key)``: each label set's code of ``key`` (-1 absent) and the value -> code vocabulary.
LabelCodes = Callable[[str], tuple[Int32Array, Mapping[str, int]]]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# ---- label keys and values (apimachinery validation) -----------------------------------------

_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME_CHARS = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)


def label_key_errors(key: str) -> list[str]:
    """Why ``key`` is not a valid label key (a qualified name: ``[prefix/]name``); empty if valid."""
    errs: list[str] = []
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        elif len(prefix) > 253:
            errs.append("prefix part must be no more than 253 characters")
        elif _DNS1123_SUBDOMAIN_RE.fullmatch(prefix) is None:
            errs.append(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                "characters, '-' or '.', and must start and end with an alphanumeric character"
            )
    else:
        return [
            f"a qualified name {_NAME_CHARS} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if _QUALIFIED_NAME_RE.fullmatch(name) is None:
        errs.append(f"name part {_NAME_CHARS}")
    return errs


def label_value_errors(value: str) -> list[str]:
    """Why ``value`` is not a valid label value (empty, or at most 63 name characters); empty if valid."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if value and _QUALIFIED_NAME_RE.fullmatch(value) is None:
        errs.append(f"a valid label {_NAME_CHARS}")
    return errs


_INT_RE = re.compile(r"[+-]?[0-9]+")


def parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: the value, or None if it fails."""
    if _INT_RE.fullmatch(text) is None:
        return None
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        return None
    return value


def label_int_values(table: NodeTable, key: str) -> tuple[IntArray, BoolArray]:
    """For label ``key``'s vocabulary (codes of :meth:`NodeTable.label_codes`): the value parsed as an
    int64 and whether it parsed, per code. Memoized per node table."""

    def build(t: NodeTable) -> tuple[IntArray, BoolArray]:
        _, vocab = t.label_codes(key)
        ints = np.zeros(len(vocab), dtype=np.int64)
        valid = np.zeros(len(vocab), dtype=np.bool_)
        for value, code in vocab.items():
            parsed = parse_int64(value)
            if parsed is not None:
                ints[code] = parsed
                valid[code] = True
        return ints, valid

    result: tuple[IntArray, BoolArray] = table.memo(f"labels/int-values:{key}", build)
    return result


# ---- label requirements ----------------------------------------------------------------------


def field_error(path: str, value: object, detail: str) -> str:
    """An apimachinery ``field.Invalid`` error as text: ``<path>: Invalid value: <value>: <detail>``."""
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return f"{path}: Invalid value: {shown}: {detail}" if path else f"Invalid value: {shown}: {detail}"


def join_path(parent: str, child: str) -> str:
    """``parent.child`` (``child`` alone at the root), as ``field.Path.Child`` prints."""
    return f"{parent}.{child}" if parent else child


@dataclass(frozen=True, slots=True)
class Requirement:
    """One parsed label requirement (``labels.Requirement``): operator ``In``, ``NotIn``, ``Exists``,
    ``DoesNotExist``, ``Gt``, ``Lt`` or ``Equals``."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    bound: int = 0  # the parsed integer of Gt/Lt

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        value = labels.get(self.key)
        if op in ("In", "Equals"):
            return value is not None and value in self.values
        if op == "NotIn":
            return value is None or value not in self.values
        if op == "Exists":
            return value is not None
        if op == "DoesNotExist":
            return value is None
        if op in ("Gt", "Lt"):
            if value is None:
                return False
            parsed = parse_int64(value)
            if parsed is None:
                return False
            return parsed > self.bound if op == "Gt" else parsed < self.bound
        return False

    def mask(self, table: NodeTable, rows: npt.NDArray[np.int64]) -> BoolArray:
        """``matches`` for the labels of every node row in ``rows``, as array work."""
        codes_all, vocab = table.label_codes(self.key)
        codes = codes_all[rows]
        if self.operator in ("Gt", "Lt"):
            if not vocab:
                return np.zeros(codes.shape[0], dtype=np.bool_)
            ints, valid = label_int_values(table, self.key)
            ok = valid & (ints > self.bound if self.operator == "Gt" else ints < self.bound)
            return (codes >= 0) & ok[np.maximum(codes, 0)]
        return self.mask_codes(codes, vocab)

    def mask_codes(self, codes: Int32Array, vocab: Mapping[str, int]) -> BoolArray:
        """``matches`` over a column of label codes (-1 where the label is absent) and its
        value → code vocabulary: the same test for node rows or for the pods of a snapshot."""
        op = self.operator
        if op in ("In", "Equals", "NotIn"):
            ids = [vocab[v] for v in self.values if v in vocab]
            if not ids:
                hit = np.zeros(codes.shape[0], dtype=np.bool_)
            elif len(ids) == 1:
                hit = codes == ids[0]
            else:
                hit = np.isin(codes, np.asarray(ids, dtype=np.int32))
            return ~hit if op == "NotIn" else hit
        if op == "Exists":
            return codes >= 0
        if op == "DoesNotExist":
            return codes < 0
        if op in ("Gt", "Lt"):
            ok_by_code = np.zeros(len(vocab) + 1, dtype=np.bool_)  # the last slot: label absent
            for value, code in vocab.items():
                parsed = parse_int64(value)
                if parsed is not None:
                    ok_by_code[code] = parsed > self.bound if op == "Gt" else parsed < self.bound
            return ok_by_code[np.where(codes >= 0, codes, len(vocab))]
        return np.zeros(codes.shape[0], dtype=np.bool_)


_LABEL_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist")


def compile_requirement(
    key: str, operator: str, values: Sequence[str], path: str = ""
) -> tuple[Requirement, list[str]]:
    """``labels.NewRequirement``: the requirement and the errors that make it invalid (empty if valid)."""
    errs: list[str] = []
    values = tuple(values)
    for msg in label_key_errors(key):
        errs.append(field_error(join_path(path, "key"), key, msg))
    values_path = join_path(path, "values")
    bound = 0
    if operator in ("In", "NotIn"):
        if not values:
            errs.append(
                field_error(values_path, list(values), "for 'in', 'notin' operators, values set can't be empty")
            )
    elif operator == "Equals":
        if len(values) != 1:
            errs.append(field_error(values_path, list(values), "exact-match compatibility requires one single value"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errs.append(
                field_error(values_path, list(values), "values set must be empty for exists and does not exist")
            )
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(
                field_error(values_path, list(values), "for 'Gt', 'Lt' operators, exactly one value is required")
            )
        for i, v in enumerate(values):
            parsed = parse_int64(v)
            if parsed is None:
                errs.append(
                    field_error(f"{values_path}[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer")
                )
            elif i == 0:
                bound = parsed
    else:
        errs.append(f'{join_path(path, "operator")}: Unsupported value: "{operator}"')
    for i, v in enumerate(values):
        for msg in label_value_errors(v):
            errs.append(field_error(f"{values_path}[{i}][{key}]", v, msg))
    return Requirement(key, operator, values, bound), errs


# ---- label selectors (metav1.LabelSelector) --------------------------------------------------


@dataclass(frozen=True, slots=True)
class LabelSelectorMatcher:
    """A compiled ``metav1.LabelSelector`` (``LabelSelectorAsSelector``). ``nothing`` for a None
    selector; no requirements matches everything. With ``error`` set (what the Go conversion would
    return), :meth:`matches` is False and callers should report the error."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False
    error: str | None = None

    @property
    def everything(self) -> bool:
        return not self.nothing and self.error is None and not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing or self.error is not None:
            return False
        return all(r.matches(labels) for r in self.requirements)

    def mask(self, label_codes: LabelCodes, n: int) -> BoolArray:
        """:meth:`matches` for ``n`` label sets held column-wise: ``label_codes(key)`` gives each
        set's code of ``key`` (-1 absent) and the vocabulary (see :class:`PodColumns`)."""
        if self.nothing or self.error is not None:
            return np.zeros(n, dtype=np.bool_)
        out = np.ones(n, dtype=np.bool_)
        for r in self.requirements:
            out &= r.mask_codes(*label_codes(r.key))
            if not out.any():
                break
        return out

    def with_requirements(self, extra: Iterable[Requirement]) -> LabelSelectorMatcher:
        """This selector ANDed with ``extra`` (``matchLabelKeys``/``mismatchLabelKeys``); a selector
        that matches nothing stays so."""
        extra = tuple(extra)
        if self.nothing or self.error is not None or not extra:
            return self
        return LabelSelectorMatcher(self.requirements + extra)


def compile_label_selector(selector: LabelSelector | None) -> LabelSelectorMatcher:
    if selector is None:
        return LabelSelectorMatcher(nothing=True)
    if not selector.match_labels and not selector.match_expressions:
        return LabelSelectorMatcher()
    reqs: list[Requirement] = []
    for k, v in selector.match_labels.items():
        req, errs = compile_requirement(k, "Equals", (v,))
        if errs:
            return LabelSelectorMatcher(error="; ".join(errs))
        reqs.append(req)
    for expr in selector.match_expressions:
        if expr.operator not in _LABEL_SELECTOR_OPS:
            return LabelSelectorMatcher(error=f'"{expr.operator}" is not a valid label selector operator')
        req, errs = compile_requirement(expr.key, expr.operator, expr.values)
        if errs:
            return LabelSelectorMatcher(error="; ".join(errs))
        reqs.append(req)
    reqs.sort(key=lambda r: r.key)
    return LabelSelectorMatcher(tuple(reqs))


def merge_label_set(labels: Mapping[str, str], selector: LabelSelectorMatcher) -> LabelSelectorMatcher:
    """``mergeLabelSetWithSelector``: equality requirements for ``labels`` plus the selector's own (a
    selector that matches nothing contributes no requirements, leaving the set alone)."""
    own = () if selector.nothing else selector.requirements
    reqs = tuple(Requirement(k, "Equals", (v,)) for k, v in sorted(labels.items()))
    return LabelSelectorMatcher(reqs + own, error=None if selector.nothing else selector.error)


def label_selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` match ``selector`` (None matches nothing, an empty selector everything; an
    invalid selector matches nothing). Compile once with :func:`compile_label_selector` when matching
    many label sets."""
    return compile_label_selector(selector).matches(labels)
