"""NodeAffinity: a pod's ``spec.nodeSelector`` and node affinity, plus the scheduler-enforced
``addedAffinity`` of the plugin's args (``NodeAffinityArgs``).

- PreFilter: Skip when there is nothing to filter (no nodeSelector, no required node affinity, no
  added required affinity). When every required term names nodes (``matchFields`` ``metadata.name``
  ``In``), the result narrows the cycle to those nodes; terms that name no common node give
  ``pod affinity terms conflict`` (UnschedulableAndUnresolvable).
- Filter: ``node(s) didn't match scheduler-enforced node affinity`` for nodes outside the added
  affinity, then ``node(s) didn't match Pod's node affinity/selector`` (both UnschedulableAndUnresolvable).
- PreScore/Score/NormalizeScore: the sum of the weights of the matching preferred terms (the pod's and
  the added ones), normalized to [0, 100] by the highest score. PreScore skips when there are none.

Selectors are compiled once per pod and evaluated over the batch with the node table's label codes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pluginhost.model import Node, NodeSelectorRequirement, NodeSelectorTerm, Pod, PreferredSchedulingTerm
from pluginhost.plugin import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    ScoreExtensions,
    ScorePlugin,
)
from pluginhost.status import SUCCESS, Code, Status

from .helpers import IntArray, default_normalize_score
from .noderesources import PluginArgsError
from .nodeselectors import (
    NodeSelectorMatcher,
    PreferredTermsScorer,
    RequiredNodeAffinity,
    compile_node_selector,
    compile_preferred_terms,
    required_node_affinity,
)

__all__ = ["ERR_REASON_CONFLICT", "ERR_REASON_ENFORCED", "ERR_REASON_POD", "NodeAffinity"]

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

_PRE_FILTER_KEY = "PreFilterNodeAffinity"
_PRE_SCORE_KEY = "PreScoreNodeAffinity"
_OBJECT_NAME_FIELD = "metadata.name"


@dataclass(frozen=True, slots=True)
class _PreFilterState:
    required: RequiredNodeAffinity

    def clone(self) -> _PreFilterState:
        return self


@dataclass(frozen=True, slots=True)
class _PreScoreState:
    preferred: PreferredTermsScorer | None

    def clone(self) -> _PreScoreState:
        return self


# ---- args ------------------------------------------------------------------------------------


def _fail(path: str, message: str) -> PluginArgsError:
    return PluginArgsError(f"NodeAffinity: {path}: {message}")


def _mapping(v: object, path: str) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise _fail(path, "must be a mapping")
    return v


def _check_keys(m: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
    for k in m:
        if k not in allowed:
            raise _fail(path, f'unknown field "{k}"')


def _requirements(v: object, path: str) -> list[NodeSelectorRequirement]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise _fail(path, "must be a list")
    out: list[NodeSelectorRequirement] = []
    for i, item in enumerate(v):
        p = f"{path}[{i}]"
        m = _mapping(item, p)
        _check_keys(m, ("key", "operator", "values"), p)
        key, op, values = m.get("key", ""), m.get("operator", ""), m.get("values") or []
        if not isinstance(key, str):
            raise _fail(f"{p}.key", "must be a string")
        if not isinstance(op, str):
            raise _fail(f"{p}.operator", "must be a string")
        if not isinstance(values, list) or not all(isinstance(x, str) for x in values):
            raise _fail(f"{p}.values", "must be a list of strings")
        out.append(NodeSelectorRequirement(key, op, tuple(values)))
    return out


def _term(v: object, path: str) -> NodeSelectorTerm:
    m = _mapping(v, path)
    _check_keys(m, ("matchExpressions", "matchFields"), path)
    return NodeSelectorTerm(
        match_expressions=_requirements(m.get("matchExpressions"), f"{path}.matchExpressions"),
        match_fields=_requirements(m.get("matchFields"), f"{path}.matchFields"),
    )


def _parse_args(args: Mapping[str, Any]) -> tuple[NodeSelectorMatcher | None, PreferredTermsScorer | None]:
    _check_keys(args, ("addedAffinity", "apiVersion", "kind"), "args")
    raw = args.get("addedAffinity")
    if raw is None:
        return None, None
    base = "addedAffinity"
    added = _mapping(raw, base)
    req_name = "requiredDuringSchedulingIgnoredDuringExecution"
    pref_name = "preferredDuringSchedulingIgnoredDuringExecution"
    _check_keys(added, (req_name, pref_name), base)
    required: NodeSelectorMatcher | None = None
    if added.get(req_name) is not None:
        rpath = f"{base}.{req_name}"
        sel = _mapping(added[req_name], rpath)
        _check_keys(sel, ("nodeSelectorTerms",), rpath)
        raw_terms = sel.get("nodeSelectorTerms") or []
        if not isinstance(raw_terms, list):
            raise _fail(f"{rpath}.nodeSelectorTerms", "must be a list")
        terms = [_term(t, f"{rpath}.nodeSelectorTerms[{i}]") for i, t in enumerate(raw_terms)]
        required = compile_node_selector(terms, rpath)
        if required.errors:
            raise PluginArgsError(f"NodeAffinity: {_aggregate(required.errors)}")
    preferred: PreferredTermsScorer | None = None
    raw_pref = added.get(pref_name)
    if raw_pref:
        ppath = f"{base}.{pref_name}"
        if not isinstance(raw_pref, list):
            raise _fail(ppath, "must be a list")
        pterms: list[PreferredSchedulingTerm] = []
        for i, item in enumerate(raw_pref):
            p = f"{ppath}[{i}]"
            m = _mapping(item, p)
            _check_keys(m, ("weight", "preference"), p)
            weight = m.get("weight", 0)
            if isinstance(weight, bool) or not isinstance(weight, int) or not -(2**31) <= weight < 2**31:
                raise _fail(f"{p}.weight", "must be a 32-bit integer")
            pterms.append(PreferredSchedulingTerm(weight, _term(m.get("preference") or {}, f"{p}.preference")))
        preferred = compile_preferred_terms(pterms, ppath)
        if preferred.errors:
            raise PluginArgsError(f"NodeAffinity: {_aggregate(preferred.errors)}")
    return required, preferred


def _aggregate(errors: Sequence[str]) -> str:
    """An aggregate error's text as Go's ``errors.NewAggregate`` prints it."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


# ---- the plugin ------------------------------------------------------------------------------


def _match_or_error(req: RequiredNodeAffinity, node: Node) -> bool | None:
    """``RequiredNodeAffinity.Match``: the answer, or None where Go returns a parse error (no
    required term matched and some could not be parsed)."""
    if req.matches(node):
        return True
    if req.node_selector is not None and not all(r.matches(node.labels) for r in req.node_selector):
        return False
    if req.affinity is not None and req.affinity.errors:
        return None
    return False


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, ScoreExtensions, EnqueueExtensions):
    name = "NodeAffinity"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle
        self.added_required, self.added_preferred = _parse_args(args or {})

    # ---- PreFilter / Filter --------------------------------------------------------------------

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        na = pod.affinity.node_affinity if pod.affinity is not None else None
        required = na.required if na is not None else None
        if required is None and self.added_required is None and not pod.node_selector:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, _PreFilterState(required_node_affinity(pod)))
        if not required:
            return None, SUCCESS
        # Affinity to specific nodes: every term must name nodes for the set to narrow anything.
        node_names: set[str] | None = None
        for term in required:
            term_names: set[str] | None = None
            for r in term.match_fields:
                if r.key == _OBJECT_NAME_FIELD and r.operator == "In":
                    term_names = set(r.values) if term_names is None else term_names & set(r.values)
            if term_names is None:
                return None, SUCCESS  # this term may match any node, and the terms are ORed
            node_names = term_names if node_names is None else node_names | term_names
        if node_names is not None and not node_names:
            return None, Status(Code.UnschedulableAndUnresolvable, (ERR_REASON_CONFLICT,))
        if node_names:
            return PreFilterResult(frozenset(node_names)), SUCCESS
        return None, SUCCESS

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        table = batch.snapshot.table
        rows = batch.rows
        n = len(batch)
        enforced_miss = np.zeros(n, dtype=np.bool_)
        if self.added_required is not None:
            enforced_miss = ~self.added_required.mask(table, rows)
        pre: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
        required = pre.required if pre is not None else required_node_affinity(pod)
        pod_miss = np.zeros(n, dtype=np.bool_)
        if not required.empty:
            pod_miss = ~required.mask(table, rows) & ~enforced_miss
        rejected = enforced_miss | pod_miss
        if not rejected.any():
            return FilterResult.passing(n)
        codes = np.where(rejected, np.int8(Code.UnschedulableAndUnresolvable), np.int8(0)).astype(np.int8)
        reason_index = np.where(enforced_miss, 0, 1).astype(np.int32)
        return FilterResult(codes, reason_index, [(ERR_REASON_ENFORCED,), (ERR_REASON_POD,)])

    # ---- PreScore / Score / NormalizeScore -----------------------------------------------------

    @staticmethod
    def _pod_preferred(pod: Pod) -> PreferredTermsScorer | None:
        na = pod.affinity.node_affinity if pod.affinity is not None else None
        if na is None or not na.preferred:
            return None
        return compile_preferred_terms(na.preferred)

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        preferred = self._pod_preferred(pod)
        if preferred is not None and preferred.errors:
            return Status.failure(_aggregate(preferred.errors), plugin=self.name)
        if preferred is None and self.added_preferred is None:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, _PreScoreState(preferred))
        return SUCCESS

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        table = batch.snapshot.table
        out = np.zeros(len(batch), dtype=np.int64)
        if self.added_preferred is not None:
            out += self.added_preferred.scores(table, batch.rows)
        pre: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
        if pre is not None:
            preferred = pre.preferred
        else:  # PreScore did not run: compute here, as kube-scheduler falls back to
            preferred = self._pod_preferred(pod)
            if preferred is not None and preferred.errors:
                raise ValueError(_aggregate(preferred.errors))
        if preferred is not None:
            out += preferred.scores(table, batch.rows)
        return out

    async def normalize_score(self, state: CycleState, pod: Pod, batch: NodeBatch, scores: IntArray) -> Status:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return SUCCESS

    # ---- EnqueueExtensions ---------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel), self._after_node_change
            )
        ]

    def _after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when the added or updated node now matches the pod's required affinity (and the
        added affinity) and, for an update, did not before."""
        if not isinstance(new, Node):
            return QueueingHint.Queue
        if self.added_required is not None and not self.added_required.matches(new):
            return QueueingHint.QueueSkip
        required = required_node_affinity(pod)
        now = _match_or_error(required, new)
        if now is None:
            return QueueingHint.Queue
        if not now:
            return QueueingHint.QueueSkip
        if not isinstance(old, Node):
            return QueueingHint.Queue
        before = _match_or_error(required, old)
        if before is None:
            return QueueingHint.Queue
        return QueueingHint.QueueSkip if before else QueueingHint.Queue
