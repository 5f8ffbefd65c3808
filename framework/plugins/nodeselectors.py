"""Node selectors after k8s.io/component-helpers' ``scheduling/corev1/nodeaffinity``: ``v1.NodeSelector``
terms, preferred scheduling terms, and a pod's nodeSelector plus required node affinity, compiled once
per pod into objects that answer both for one :class:`Node` and, vectorized, for rows of a
:class:`NodeTable` through its per-key label codes.

Selector parsing follows kube-scheduler: a requirement that ``labels.NewRequirement`` rejects (bad key,
bad value, wrong number of values, non-integer ``Gt``/``Lt`` bound) makes its term a *parse error*.
Required terms with parse errors never match (the lazy-error selector the scheduler uses for pods);
callers that must report errors (plugin args, preferred terms) read :attr:`errors`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pluginhost.model import Node, NodeSelectorTerm, Pod, PreferredSchedulingTerm
from pluginhost.snapshot import NodeTable

from .helpers import BoolArray, IntArray
from .labels import Requirement, compile_requirement, field_error, join_path

__all__ = [
    "NodeSelectorMatcher",
    "NodeSelectorTermMatcher",
    "PreferredTermsScorer",
    "RequiredNodeAffinity",
    "compile_node_selector",
    "compile_node_selector_term",
    "compile_preferred_terms",
    "required_node_affinity",
]


# ---- node selector terms ---------------------------------------------------------------------

_NODE_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _node_field(node_name: str, key: str) -> str:
    """The node's value of field ``key`` as a ``fields.Set`` lookup answers it ("" when unknown)."""
    return node_name if key == "metadata.name" else ""


@dataclass(frozen=True, slots=True)
class NodeSelectorTermMatcher:
    """A compiled ``v1.NodeSelectorTerm``: its matchExpressions ANDed, its matchFields ANDed.

    ``labels``/``fields`` are None when the term has no expressions/fields (that part is not checked);
    a term with ``errors`` matches nothing."""

    labels: tuple[Requirement, ...] | None
    fields: tuple[tuple[str, str, str], ...] | None  # (key, "In"|"NotIn", value)
    errors: tuple[str, ...] = ()

    def matches(self, node: Node) -> bool:
        if self.errors:
            return False
        if self.labels is not None and not all(r.matches(node.labels) for r in self.labels):
            return False
        if self.fields is not None and node.name:
            for key, op, value in self.fields:
                equal = _node_field(node.name, key) == value
                if equal != (op == "In"):
                    return False
        return True

    def mask(self, table: NodeTable, rows: npt.NDArray[np.int64]) -> BoolArray:
        n = int(rows.shape[0])
        if self.errors:
            return np.zeros(n, dtype=np.bool_)
        out = np.ones(n, dtype=np.bool_)
        if self.labels is not None:
            for r in self.labels:
                out &= r.mask(table, rows)
        if self.fields is not None:
            for key, op, value in self.fields:
                if key == "metadata.name":
                    row = table.index.get(value)
                    equal = rows == (-1 if row is None else row)
                else:
                    equal = np.full(n, value == "", dtype=np.bool_)
                out &= equal if op == "In" else ~equal
        return out


def _is_empty_term(term: NodeSelectorTerm) -> bool:
    return not term.match_expressions and not term.match_fields


def compile_node_selector_term(term: NodeSelectorTerm, path: str = "") -> NodeSelectorTermMatcher:
    """Parse a term as ``newNodeSelectorTerm`` does; errors are kept on the result."""
    errors: list[str] = []
    labels: tuple[Requirement, ...] | None = None
    fields: tuple[tuple[str, str, str], ...] | None = None
    if term.match_expressions:
        reqs: list[Requirement] = []
        for i, expr in enumerate(term.match_expressions):
            p = f"{join_path(path, 'matchExpressions')}[{i}]"
            if expr.operator not in _NODE_SELECTOR_OPS:
                supported = '"' + '", "'.join(_NODE_SELECTOR_OPS) + '"'
                errors.append(
                    f'{join_path(p, "operator")}: Unsupported value: "{expr.operator}": supported values: {supported}'
                )
                continue
            req, errs = compile_requirement(expr.key, expr.operator, expr.values, p)
            errors.extend(errs)
            reqs.append(req)
        labels = tuple(reqs)
    if term.match_fields:
        flds: list[tuple[str, str, str]] = []
        for i, expr in enumerate(term.match_fields):
            p = f"{join_path(path, 'matchFields')}[{i}]"
            if expr.operator in ("In", "NotIn"):
                if len(expr.values) != 1:
                    errors.append(field_error(join_path(p, "values"), list(expr.values), "must have one element"))
                else:
                    flds.append((expr.key, expr.operator, expr.values[0]))
            else:
                op_path = join_path(p, "operator")
                errors.append(f'{op_path}: Unsupported value: "{expr.operator}": supported values: "In", "NotIn"')
        fields = tuple(flds)
    return NodeSelectorTermMatcher(labels, fields, tuple(errors))


@dataclass(frozen=True, slots=True)
class NodeSelectorMatcher:
    """A compiled ``v1.NodeSelector``: the terms ORed. Empty terms were dropped (they match nothing),
    so a selector without terms matches no node."""

    terms: tuple[NodeSelectorTermMatcher, ...]

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(e for t in self.terms for e in t.errors)

    def matches(self, node: Node) -> bool:
        return any(t.matches(node) for t in self.terms)

    def mask(self, table: NodeTable, rows: npt.NDArray[np.int64]) -> BoolArray:
        out = np.zeros(int(rows.shape[0]), dtype=np.bool_)
        for t in self.terms:
            if t.errors:
                continue
            out |= t.mask(table, rows)
        return out


def compile_node_selector(terms: Sequence[NodeSelectorTerm], path: str = "") -> NodeSelectorMatcher:
    """``NewLazyErrorNodeSelector``: terms with parse errors are kept (and never match)."""
    base = join_path(path, "nodeSelectorTerms")
    return NodeSelectorMatcher(
        tuple(compile_node_selector_term(t, f"{base}[{i}]") for i, t in enumerate(terms) if not _is_empty_term(t))
    )


@dataclass(frozen=True, slots=True)
class PreferredTermsScorer:
    """Compiled preferred scheduling terms: a node scores the sum of the weights of the terms it matches.

    As ``NewPreferredSchedulingTerms``: terms with weight 0 or no requirements are dropped; terms with
    parse errors are dropped too and their errors kept in :attr:`errors` (the caller decides)."""

    terms: tuple[tuple[int, NodeSelectorTermMatcher], ...]
    errors: tuple[str, ...] = ()

    def score(self, node: Node) -> int:
        return sum(w for w, t in self.terms if t.matches(node))

    def scores(self, table: NodeTable, rows: npt.NDArray[np.int64]) -> IntArray:
        out = np.zeros(int(rows.shape[0]), dtype=np.int64)
        for weight, term in self.terms:
            out += term.mask(table, rows).astype(np.int64) * weight
        return out


def compile_preferred_terms(terms: Sequence[PreferredSchedulingTerm], path: str = "") -> PreferredTermsScorer:
    parsed: list[tuple[int, NodeSelectorTermMatcher]] = []
    errors: list[str] = []
    for i, term in enumerate(terms):
        if term.weight == 0 or _is_empty_term(term.preference):
            continue
        matcher = compile_node_selector_term(term.preference, f"{path}[{i}]")
        if matcher.errors:
            errors.extend(matcher.errors)
        else:
            parsed.append((term.weight, matcher))
    return PreferredTermsScorer(tuple(parsed), tuple(errors))


@dataclass(frozen=True, slots=True)
class RequiredNodeAffinity:
    """A pod's ``spec.nodeSelector`` and required node affinity together (``GetRequiredNodeAffinity``):
    a node must match both. ``node_selector`` is None without a nodeSelector, ``affinity`` None
    without ``requiredDuringSchedulingIgnoredDuringExecution``."""

    node_selector: tuple[Requirement, ...] | None
    affinity: NodeSelectorMatcher | None

    @property
    def empty(self) -> bool:
        """True when it matches every node."""
        return self.node_selector is None and self.affinity is None

    def matches(self, node: Node) -> bool:
        if self.node_selector is not None and not all(r.matches(node.labels) for r in self.node_selector):
            return False
        return self.affinity is None or self.affinity.matches(node)

    def mask(self, table: NodeTable, rows: npt.NDArray[np.int64]) -> BoolArray:
        out = np.ones(int(rows.shape[0]), dtype=np.bool_)
        if self.node_selector is not None:
            for r in self.node_selector:
                out &= r.mask(table, rows)
        if self.affinity is not None:
            out &= self.affinity.mask(table, rows)
        return out


def required_node_affinity(pod: Pod) -> RequiredNodeAffinity:
    selector: tuple[Requirement, ...] | None = None
    if pod.node_selector:
        # labels.SelectorFromSet: exact matches, not validated.
        selector = tuple(Requirement(k, "Equals", (v,)) for k, v in sorted(pod.node_selector.items()))
    affinity: NodeSelectorMatcher | None = None
    na = pod.affinity.node_affinity if pod.affinity is not None else None
    if na is not None and na.required is not None:
        affinity = compile_node_selector(na.required)
    return RequiredNodeAffinity(selector, affinity)
