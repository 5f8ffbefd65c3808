"""Shared pieces of the in-tree plugins, after kube-scheduler's ``plugins/helper`` and the
``component-helpers`` / ``apimachinery`` selector code they rely on.

- :func:`default_normalize_score`: ``helper.DefaultNormalizeScore``.
- Node selectors (``v1.NodeSelector`` terms, preferred terms, a pod's nodeSelector plus required node
  affinity) compiled once per pod into objects that answer both for one :class:`Node` and, vectorized,
  for rows of a :class:`NodeTable` through its per-key label codes.
- Label selectors (``metav1.LabelSelector``) with ``LabelSelectorAsSelector`` semantics.
- Taints and tolerations (``FindMatchingUntoleratedTaint``, ``TolerationsTolerateTaint``) and a
  per-node-table index of the distinct taint lists, so a pod's tolerations are evaluated once per
  distinct list instead of once per node.
- Host ports (``util.GetHostPorts``) and ``HostPortInfo``'s conflict rules.

Selector parsing follows kube-scheduler: a requirement that ``labels.NewRequirement`` rejects (bad key,
bad value, wrong number of values, non-integer ``Gt``/``Lt`` bound) makes its term a *parse error*.
Required terms with parse errors never match (the lazy-error selector the scheduler uses for pods);
callers that must report errors (plugin args, preferred terms) read :attr:`errors`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pluginhost.model import (
    ContainerPort,
    LabelSelector,
    Node,
    NodeSelectorTerm,
    Pod,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
)
from pluginhost.snapshot import NodeTable, Snapshot

__all__ = [
    "DEFAULT_BIND_ALL_HOST_IP",
    "BoolArray",
    "HostPortInfo",
    "IntArray",
    "LabelSelectorMatcher",
    "NodeSelectorMatcher",
    "NodeSelectorTermMatcher",
    "PodColumns",
    "PreferredTermsScorer",
    "RequiredNodeAffinity",
    "Requirement",
    "TaintSetIndex",
    "changed_rows",
    "compile_label_selector",
    "compile_node_selector",
    "compile_node_selector_term",
    "compile_preferred_terms",
    "compile_requirement",
    "default_normalize_score",
    "do_not_schedule_taint",
    "find_matching_untolerated_taint",
    "host_ports",
    "label_int_values",
    "label_key_errors",
    "label_selector_matches",
    "label_value_errors",
    "merge_label_set",
    "parse_int64",
    "pod_columns",
    "required_node_affinity",
    "taint_set_index",
    "tolerations_tolerate_taint",
]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]
LabelCodes = Callable[[str], tuple[Int32Array, Mapping[str, int]]]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# ---- NormalizeScore --------------------------------------------------------------------------


def default_normalize_score(max_priority: int, reverse: bool, scores: IntArray) -> None:
    """kube-scheduler's ``DefaultNormalizeScore``, in place: scale ``[0, max(scores)]`` to
    ``[0, max_priority]`` (integer division, truncating), then, if ``reverse``, subtract from
    ``max_priority``. When every score is 0 (or there are none), the scores stay 0, or all become
    ``max_priority`` with ``reverse``."""
    if scores.shape[0] == 0:
        return
    top = max(int(scores.max()), 0)
    if top == 0:
        if reverse:
            scores[:] = max_priority
        return
    product = scores.astype(np.int64) * max_priority
    # Go's integer division truncates toward zero; scores are expected non-negative anyway.
    scaled = np.sign(product) * (np.abs(product) // top)
    if reverse:
        scaled = max_priority - scaled
    scores[:] = scaled


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

    result: tuple[IntArray, BoolArray] = table.memo(f"helpers/label-int:{key}", build)
    return result


# ---- label requirements ----------------------------------------------------------------------


def _field_error(path: str, value: object, detail: str) -> str:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return f"{path}: Invalid value: {shown}: {detail}" if path else f"Invalid value: {shown}: {detail}"


def _join_path(parent: str, child: str) -> str:
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
_NODE_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def compile_requirement(
    key: str, operator: str, values: Sequence[str], path: str = ""
) -> tuple[Requirement, list[str]]:
    """``labels.NewRequirement``: the requirement and the errors that make it invalid (empty if valid)."""
    errs: list[str] = []
    values = tuple(values)
    for msg in label_key_errors(key):
        errs.append(_field_error(_join_path(path, "key"), key, msg))
    values_path = _join_path(path, "values")
    bound = 0
    if operator in ("In", "NotIn"):
        if not values:
            errs.append(
                _field_error(values_path, list(values), "for 'in', 'notin' operators, values set can't be empty")
            )
    elif operator == "Equals":
        if len(values) != 1:
            errs.append(_field_error(values_path, list(values), "exact-match compatibility requires one single value"))
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            errs.append(
                _field_error(values_path, list(values), "values set must be empty for exists and does not exist")
            )
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(
                _field_error(values_path, list(values), "for 'Gt', 'Lt' operators, exactly one value is required")
            )
        for i, v in enumerate(values):
            parsed = parse_int64(v)
            if parsed is None:
                errs.append(
                    _field_error(f"{values_path}[{i}]", v, "for 'Gt', 'Lt' operators, the value must be an integer")
                )
            elif i == 0:
                bound = parsed
    else:
        errs.append(f'{_join_path(path, "operator")}: Unsupported value: "{operator}"')
    for i, v in enumerate(values):
        for msg in label_value_errors(v):
            errs.append(_field_error(f"{values_path}[{i}][{key}]", v, msg))
    return Requirement(key, operator, values, bound), errs


# ---- node selector terms ---------------------------------------------------------------------


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
            p = f"{_join_path(path, 'matchExpressions')}[{i}]"
            if expr.operator not in _NODE_SELECTOR_OPS:
                supported = '"' + '", "'.join(_NODE_SELECTOR_OPS) + '"'
                errors.append(
                    f'{_join_path(p, "operator")}: Unsupported value: "{expr.operator}": supported values: {supported}'
                )
                continue
            req, errs = compile_requirement(expr.key, expr.operator, expr.values, p)
            errors.extend(errs)
            reqs.append(req)
        labels = tuple(reqs)
    if term.match_fields:
        flds: list[tuple[str, str, str]] = []
        for i, expr in enumerate(term.match_fields):
            p = f"{_join_path(path, 'matchFields')}[{i}]"
            if expr.operator in ("In", "NotIn"):
                if len(expr.values) != 1:
                    errors.append(_field_error(_join_path(p, "values"), list(expr.values), "must have one element"))
                else:
                    flds.append((expr.key, expr.operator, expr.values[0]))
            else:
                op_path = _join_path(p, "operator")
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
    base = _join_path(path, "nodeSelectorTerms")
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


# ---- the placed pods, column-wise ----------------------------------------------------------


class PodColumns:
    """Every pod placed in a snapshot, column-wise: its node row, namespace code, whether it is
    terminating, and per-key label codes (built on first use), so a label selector is evaluated over
    all pods with array work. One per snapshot, shared by the plugins of a cycle (:func:`pod_columns`)."""

    def __init__(self, snap: Snapshot) -> None:
        placed = snap.pods
        self.snapshot = snap
        self.pods: list[Pod] = [p for on_node in placed for p in on_node]
        n = len(self.pods)
        counts = np.fromiter(map(len, placed), dtype=np.int64, count=len(placed))
        self.rows: IntArray = np.repeat(np.arange(len(placed), dtype=np.int64), counts)
        self._ns_vocab: dict[str, int] = {}
        self.ns_codes: Int32Array = np.fromiter(
            (self._ns_vocab.setdefault(p.namespace, len(self._ns_vocab)) for p in self.pods), dtype=np.int32, count=n
        )
        self.ns_names: list[str] = list(self._ns_vocab)
        self.alive: BoolArray = np.fromiter((p.deletion_timestamp is None for p in self.pods), dtype=np.bool_, count=n)
        self._labels: dict[str, tuple[Int32Array, dict[str, int]]] = {}

    def __len__(self) -> int:
        return len(self.pods)

    def label_codes(self, key: str) -> tuple[Int32Array, dict[str, int]]:
        """Per-pod codes of label ``key`` (-1 where absent) and the value → code vocabulary."""
        hit = self._labels.get(key)
        if hit is not None:
            return hit
        vocab: dict[str, int] = {}
        codes = np.full(len(self.pods), -1, dtype=np.int32)
        for i, p in enumerate(self.pods):
            value = p.labels.get(key)
            if value is not None:
                codes[i] = vocab.setdefault(value, len(vocab))
        self._labels[key] = (codes, vocab)
        return codes, vocab

    def selector_mask(self, selector: LabelSelectorMatcher) -> BoolArray:
        return selector.mask(self.label_codes, len(self.pods))

    def in_namespace(self, namespace: str) -> BoolArray:
        code = self._ns_vocab.get(namespace)
        if code is None:
            return np.zeros(len(self.pods), dtype=np.bool_)
        same: BoolArray = self.ns_codes == code
        return same

    def node_counts(self, selector: LabelSelectorMatcher, namespace: str) -> IntArray:
        """Per node row: live pods in ``namespace`` that ``selector`` matches."""
        mask = self.selector_mask(selector) & self.in_namespace(namespace) & self.alive
        return np.bincount(self.rows[mask], minlength=len(self.snapshot)).astype(np.int64)


def pod_columns(snap: Snapshot) -> PodColumns:
    """The :class:`PodColumns` of ``snap``, built once per snapshot."""
    columns: PodColumns = snap.memo("helpers/pod-columns", PodColumns)
    return columns


def changed_rows(new: Snapshot, old: Snapshot | None) -> list[int]:
    """The rows of ``new`` whose pods (or node) changed since ``old`` — every row when ``old`` is None —
    plus the rows ``old`` did not have, in increasing order: one comparison of the two snapshots'
    row versions. (Rows only ``old`` has are gone.)"""
    if old is None:
        return list(range(len(new)))
    n = min(len(new), len(old))
    out: list[int] = np.flatnonzero(new.row_versions[:n] != old.row_versions[:n]).tolist()
    out.extend(range(n, len(new)))
    return out


# ---- taints and tolerations ------------------------------------------------------------------


def do_not_schedule_taint(taint: Taint) -> bool:
    """``helper.DoNotScheduleTaintsFilterFunc``: the taints Filter cares about."""
    return taint.effect in ("NoSchedule", "NoExecute")


def tolerations_tolerate_taint(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def find_matching_untolerated_taint(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], keep: Callable[[Taint], bool] | None = None
) -> Taint | None:
    """The first taint (among those ``keep`` accepts) that no toleration tolerates, or None."""
    for taint in taints:
        if keep is not None and not keep(taint):
            continue
        if not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None


@dataclass(frozen=True, slots=True, eq=False)
class TaintSetIndex:
    """The distinct taint lists of a node table: ``ids[row]`` indexes ``sets``. Evaluate a pod's
    tolerations once per entry of ``sets``, then gather with ``ids``."""

    ids: npt.NDArray[np.int32]
    sets: tuple[tuple[Taint, ...], ...]
    # effects present in each set, for quick "does any node have X taints" answers
    effects: frozenset[str] = field(default_factory=frozenset)


def taint_set_index(table: NodeTable) -> TaintSetIndex:
    """The :class:`TaintSetIndex` of ``table``, built once per node table."""

    def build(t: NodeTable) -> TaintSetIndex:
        seen: dict[tuple[Taint, ...], int] = {}
        ids = np.empty(len(t.nodes), dtype=np.int32)
        for i, node in enumerate(t.nodes):
            ids[i] = seen.setdefault(tuple(node.taints), len(seen))
        sets = tuple(seen)
        effects = frozenset(taint.effect for s in sets for taint in s)
        return TaintSetIndex(ids, sets, effects)

    index: TaintSetIndex = table.memo("helpers/taint-sets", build)
    return index


# ---- host ports ------------------------------------------------------------------------------

DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"


def host_ports(pod: Pod) -> list[ContainerPort]:
    """``util.GetHostPorts``: ports with a host port, of the sidecars (init containers with
    ``restartPolicy: Always``) and then of the containers."""
    out = [p for c in pod.init_containers if c.restart_policy == "Always" for p in c.ports if p.host_port > 0]
    out.extend(p for c in pod.containers for p in c.ports if p.host_port > 0)
    return out


def _sanitize(ip: str, protocol: str) -> tuple[str, str]:
    return ip or DEFAULT_BIND_ALL_HOST_IP, protocol or "TCP"


class HostPortInfo:
    """``framework.HostPortInfo``: host IP → {(protocol, port)} in use. An empty IP means 0.0.0.0 and
    an empty protocol TCP; 0.0.0.0 conflicts with every IP on the same protocol and port."""

    __slots__ = ("_by_ip",)

    def __init__(self, ports: Iterable[ContainerPort] = ()) -> None:
        self._by_ip: dict[str, set[tuple[str, int]]] = {}
        for p in ports:
            self.add(p.host_ip, p.protocol, p.host_port)

    def add(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        ip, protocol = _sanitize(ip, protocol)
        self._by_ip.setdefault(ip, set()).add((protocol, port))

    def remove(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        ip, protocol = _sanitize(ip, protocol)
        s = self._by_ip.get(ip)
        if s is not None:
            s.discard((protocol, port))
            if not s:
                del self._by_ip[ip]

    def __len__(self) -> int:
        return sum(len(s) for s in self._by_ip.values())

    def check_conflict(self, ip: str, protocol: str, port: int) -> bool:
        if port <= 0:
            return False
        ip, protocol = _sanitize(ip, protocol)
        pp = (protocol, port)
        if ip == DEFAULT_BIND_ALL_HOST_IP:
            return any(pp in s for s in self._by_ip.values())
        for key in (DEFAULT_BIND_ALL_HOST_IP, ip):
            s = self._by_ip.get(key)
            if s is not None and pp in s:
                return True
        return False

    def fits(self, wanted: Iterable[ContainerPort]) -> bool:
        """True when none of ``wanted`` conflicts (``fitsPorts``)."""
        return not any(self.check_conflict(p.host_ip, p.protocol, p.host_port) for p in wanted)
