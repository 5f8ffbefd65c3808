"""PodTopologySpread: spread matching pods evenly across topology domains (zones, hosts, ...).

As kube-scheduler v1.37's ``podtopologyspread`` plugin (MinDomains, NodeInclusionPolicy and
MatchLabelKeys all enabled, as they are by default):

- PreFilter collects the pod's ``DoNotSchedule`` constraints and counts, per constraint, the matching
  pods in every topology domain. Only nodes carrying *all* the constraints' topology keys count, and
  per constraint only nodes that pass its inclusion policies (``nodeAffinityPolicy: Honor``: the
  pod's nodeSelector and required node affinity; ``nodeTaintsPolicy: Honor``: the node's
  NoSchedule/NoExecute taints are tolerated). Only pods in the incoming pod's namespace count, and
  terminating pods (``deletionTimestamp`` set) do not.
- Filter rejects a node that lacks a constraint's topology key (UnschedulableAndUnresolvable) or
  where ``matching pods in the node's domain + self match - global minimum > maxSkew``
  (Unschedulable); the global minimum is 0 while fewer domains than ``minDomains`` exist.
- PreFilterExtensions add/remove a pod from the counts (preemption's what-ifs).
- PreScore/Score/NormalizeScore implement the ``ScheduleAnyway`` scoring with kube-scheduler's
  topology normalizing weight ``log(domains + 2)``.
- Queueing: AssignedPod add/relabel/delete (bound or nominated pods of the namespace), TargetPod
  toleration/label updates, Node changes, each with upstream's hint.

The work is array-shaped: topology domains are the per-node codes of ``snap.table.label_codes(key)``,
pod labels are indexed column-wise once per snapshot, per-domain counts ``np.bincount`` over rows.

Default constraints (the pod has no ``topologySpreadConstraints``): kube-scheduler applies the
``System`` defaults or the ``List`` ``defaultConstraints`` with a label selector built from the
Services, ReplicationControllers, ReplicaSets and StatefulSets that select/own the pod, and applies
none when that selector is empty. Outrigger models none of those objects, so the derived selector is
always empty and default constraints never apply; :meth:`PodTopologySpread.default_selector` is the
one place to change that.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from framework.plugins.labels import LabelSelectorMatcher, compile_label_selector, merge_label_set
from framework.plugins.noderesources import PluginArgsError
from framework.plugins.nodeselectors import required_node_affinity
from framework.plugins.podcolumns import PodColumns, pod_columns
from framework.plugins.taints import do_not_schedule_taint, find_matching_untolerated_taint, taint_set_index
from pluginhost.model import LabelSelector, Pod, TopologySpreadConstraint
from pluginhost.plugin import (
    ASSIGNED_POD,
    MAX_NODE_SCORE,
    TARGET_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueingHint,
    ScoreExtensions,
    ScorePlugin,
)
from pluginhost.snapshot import NodeTable
from pluginhost.status import SUCCESS, Code, Status

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "PodTopologySpread",
]

NAME = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

# kube-scheduler's systemDefaultConstraints (used with defaultingType: System).
SYSTEM_DEFAULT_CONSTRAINTS: tuple[TopologySpreadConstraint, ...] = (
    TopologySpreadConstraint(max_skew=3, topology_key=LABEL_HOSTNAME, when_unsatisfiable=SCHEDULE_ANYWAY),
    TopologySpreadConstraint(max_skew=5, topology_key=LABEL_ZONE, when_unsatisfiable=SCHEDULE_ANYWAY),
)

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME
_MAX_INT32 = 2**31 - 1
_MAX_INT64 = 2**63 - 1
# metav1validation.ValidateLabelName: an optional DNS-subdomain prefix and a qualified name.
_QUALIFIED_NAME_RE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)")
_DNS_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]


# ---- node-side masks (inclusion policies) ----------------------------------------------------


def _required_affinity_mask(pod: Pod, table: NodeTable) -> BoolArray | None:
    """Nodes matching the pod's nodeSelector and required node affinity; None when all do."""
    required = required_node_affinity(pod)
    if required.empty:
        return None
    return required.mask(table, np.arange(len(table.nodes), dtype=np.int64))


def _tolerated_mask(pod: Pod, table: NodeTable) -> BoolArray:
    """Nodes whose NoSchedule/NoExecute taints the pod all tolerates."""
    index = taint_set_index(table)
    tolerations = pod.tolerations
    ok = np.fromiter(
        (find_matching_untolerated_taint(t, tolerations, do_not_schedule_taint) is None for t in index.sets),
        dtype=np.bool_,
        count=len(index.sets),
    )
    return ok[index.ids]


# ---- constraints -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Constraint:
    """kube-scheduler's internal topologySpreadConstraint: the selector parsed (matchLabelKeys
    merged in) and the optional fields defaulted."""

    max_skew: int
    topology_key: str
    selector: LabelSelectorMatcher
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str


def _filter_constraints(
    constraints: Iterable[TopologySpreadConstraint], pod_labels: Mapping[str, str], action: str
) -> list[_Constraint]:
    out: list[_Constraint] = []
    for c in constraints:
        if c.when_unsatisfiable != action:
            continue
        selector = compile_label_selector(c.label_selector)
        if c.match_label_keys:
            match_labels = {k: pod_labels[k] for k in c.match_label_keys if k in pod_labels}
            if match_labels:
                selector = merge_label_set(match_labels, selector)
        out.append(
            _Constraint(
                max_skew=c.max_skew,
                topology_key=c.topology_key,
                selector=selector,
                min_domains=c.min_domains if c.min_domains is not None else 1,
                node_affinity_policy=c.node_affinity_policy or HONOR,
                node_taints_policy=c.node_taints_policy or IGNORE,
            )
        )
    return out


def _matching_pods(idx: PodColumns, selector: LabelSelectorMatcher, namespace: str) -> IntArray:
    """Per node row, the pods a constraint counts: kube-scheduler's countPodsMatchSelector, which counts
    none for an empty (non-nil) selector although the selector matches every pod — so with ``labelSelector:
    {}`` only the incoming pod itself (selfMatch) and pods added in a what-if (AddPod) count."""
    if selector.everything:
        return np.zeros(len(idx.snapshot), dtype=np.int64)
    return idx.node_counts(selector, namespace)


def _after_label_change(constraints: Sequence[_Constraint], old: Pod, new: Pod) -> QueueingHint:
    """Queue when the pod's new labels flip some constraint's selector (isSchedulableAfterPodLabelChange)."""
    flips = any(c.selector.matches(old.labels) != c.selector.matches(new.labels) for c in constraints)
    return QueueingHint.Queue if new.labels != old.labels and flips else QueueingHint.QueueSkip


def _all_keys_mask(table: NodeTable, constraints: Sequence[_Constraint]) -> BoolArray:
    """``nodeLabelsMatchSpreadConstraints`` for every node: it has all the topology keys."""
    mask = np.ones(len(table.nodes), dtype=np.bool_)
    for c in constraints:
        mask &= table.label_codes(c.topology_key)[0] >= 0
    return mask


def _inclusion_masks(pod: Pod, table: NodeTable, constraints: Sequence[_Constraint]) -> list[BoolArray | None]:
    """Per constraint, the nodes passing its inclusion policies (None: all nodes)."""
    affinity: BoolArray | None = None
    taints: BoolArray | None = None
    if any(c.node_affinity_policy == HONOR for c in constraints):
        affinity = _required_affinity_mask(pod, table)
    if any(c.node_taints_policy == HONOR for c in constraints):
        taints = _tolerated_mask(pod, table)
    out: list[BoolArray | None] = []
    for c in constraints:
        m: BoolArray | None = None
        if c.node_affinity_policy == HONOR and affinity is not None:
            m = affinity
        if c.node_taints_policy == HONOR and taints is not None:
            m = taints if m is None else m & taints
        out.append(m)
    return out


# ---- cycle state -----------------------------------------------------------------------------


@dataclass(slots=True)
class _FilterState:
    """What PreFilter computed. ``codes[i]`` is constraint i's domain code per node row (-1: label
    absent; shared, never mutated); ``counts[i]``/``present[i]`` are indexed by domain code, with one
    extra slot at the end that stays 0/False (where label-less nodes look up)."""

    constraints: tuple[_Constraint, ...]
    codes: list[Int32Array]
    all_keys: BoolArray
    included: list[BoolArray | None]
    counts: list[IntArray]
    present: list[BoolArray]
    self_match: list[bool]

    def clone(self) -> _FilterState:
        return replace(
            self,
            counts=[c.copy() for c in self.counts],
            present=[p.copy() for p in self.present],
        )

    def min_match(self, i: int) -> int:
        """The global minimum for constraint ``i``, taking minDomains into account."""
        present = self.present[i]
        domains = int(np.count_nonzero(present))
        if domains < self.constraints[i].min_domains:
            return 0
        if domains == 0:
            return _MAX_INT32  # kube-scheduler's empty critical path
        return int(self.counts[i][present].min())


@dataclass(slots=True)
class _ScoreState:
    """What PreScore computed; read-only afterwards (clone shares it, as kube-scheduler does)."""

    constraints: tuple[_Constraint, ...]
    ignored: BoolArray  # per node row
    has_key: list[BoolArray]  # per constraint, per node row
    domains: list[IntArray]  # per constraint, domain index per node row (label-less nodes: the "" domain)
    domain_counts: list[IntArray | None]  # per constraint (None for hostname constraints)
    node_counts: list[IntArray | None]  # per constraint, per node row (hostname constraints only)
    weights: list[float]

    def clone(self) -> _ScoreState:
        return self


def _arg_path(*parts: str | int) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


def _validate_label_name(name: str) -> str | None:
    prefix, sep, local = name.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not local or len(local) > 63 or not _QUALIFIED_NAME_RE.fullmatch(local):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (at most 63 characters)"
        )
    return None


def _parse_default_constraint(raw: object, i: int) -> TopologySpreadConstraint:
    where = _arg_path("defaultConstraints", i)

    def fail(field_name: str, message: str) -> PluginArgsError:
        return PluginArgsError(f"{NAME}: {_arg_path('defaultConstraints', i, field_name)}: {message}")

    if not isinstance(raw, dict):
        raise PluginArgsError(f"{NAME}: {where}: must be a mapping")
    known = {
        "maxSkew",
        "topologyKey",
        "whenUnsatisfiable",
        "labelSelector",
        "minDomains",
        "nodeAffinityPolicy",
        "nodeTaintsPolicy",
        "matchLabelKeys",
    }
    for key in raw:
        if key not in known:
            raise PluginArgsError(f'{NAME}: {where}: unknown field "{key}"')
    max_skew = raw.get("maxSkew", 0)
    if not isinstance(max_skew, int) or isinstance(max_skew, bool):
        raise fail("maxSkew", f"must be an integer, got {max_skew!r}")
    if max_skew <= 0:
        raise fail("maxSkew", f"Invalid value: {max_skew}: not in valid range")
    key = raw.get("topologyKey", "")
    if not isinstance(key, str):
        raise fail("topologyKey", f"must be a string, got {key!r}")
    if not key:
        raise fail("topologyKey", "Required value: can not be empty")
    problem = _validate_label_name(key)
    if problem is not None:
        raise fail("topologyKey", f'Invalid value: "{key}": {problem}')
    when = raw.get("whenUnsatisfiable", "")
    if when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
        raise fail(
            "whenUnsatisfiable",
            f'Unsupported value: "{when}": supported values: "{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"',
        )
    if raw.get("labelSelector") is not None:
        raise fail("labelSelector", "Forbidden: constraint must not define a selector, as they deduced for each pod")
    min_domains = raw.get("minDomains")
    if min_domains is not None and (
        not isinstance(min_domains, int) or isinstance(min_domains, bool) or min_domains < 1
    ):
        raise fail("minDomains", f"must be an integer greater than zero, got {min_domains!r}")
    policies: dict[str, str] = {}
    for field_name, default in (("nodeAffinityPolicy", HONOR), ("nodeTaintsPolicy", IGNORE)):
        value = raw.get(field_name) or default
        if value not in (HONOR, IGNORE):
            raise fail(field_name, f'Unsupported value: "{value}": supported values: "{HONOR}", "{IGNORE}"')
        policies[field_name] = value
    keys = raw.get("matchLabelKeys") or []
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise fail("matchLabelKeys", "must be a list of strings")
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=when,
        label_selector=None,
        min_domains=min_domains,
        node_affinity_policy=policies["nodeAffinityPolicy"],
        node_taints_policy=policies["nodeTaintsPolicy"],
        match_label_keys=tuple(keys),
    )


def _parse_args(args: Mapping[str, Any]) -> tuple[str, tuple[TopologySpreadConstraint, ...]]:
    """``PodTopologySpreadArgs`` (v1 defaults, then ValidatePodTopologySpreadArgs)."""
    for key in args:
        if key not in ("defaultingType", "defaultConstraints", "apiVersion", "kind"):
            raise PluginArgsError(f'{NAME}: unknown field "{key}" (known: defaultConstraints, defaultingType)')
    raw_list = args.get("defaultConstraints") or []
    if not isinstance(raw_list, list):
        raise PluginArgsError(f"{NAME}: defaultConstraints must be a list")
    defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        raise PluginArgsError(
            f'{NAME}: defaultingType: Unsupported value: "{defaulting}": supported values: '
            f'"{SYSTEM_DEFAULTING}", "{LIST_DEFAULTING}"'
        )
    if defaulting == SYSTEM_DEFAULTING and raw_list:
        raise PluginArgsError(
            f'{NAME}: defaultingType: Invalid value: "{SYSTEM_DEFAULTING}": when .defaultConstraints are not empty'
        )
    parsed = [_parse_default_constraint(c, i) for i, c in enumerate(raw_list)]
    seen: set[tuple[str, str]] = set()
    for i, c in enumerate(parsed):
        pair = (c.topology_key, c.when_unsatisfiable)
        if pair in seen:
            raise PluginArgsError(
                f'{NAME}: {_arg_path("defaultConstraints", i)}: Duplicate value: "{{{pair[0]}, {pair[1]}}}"'
            )
        seen.add(pair)
    if defaulting == SYSTEM_DEFAULTING:
        return defaulting, SYSTEM_DEFAULT_CONSTRAINTS
    return defaulting, tuple(parsed)


# ---- the plugin ------------------------------------------------------------------------------


class PodTopologySpread(
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ScoreExtensions,
    EnqueueExtensions,
):
    name = NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        if args is not None and not isinstance(args, dict):
            raise PluginArgsError(f"{NAME}: args must be a mapping")
        self.defaulting_type, self.default_constraints = _parse_args(args or {})
        self.system_defaulted = self.defaulting_type == SYSTEM_DEFAULTING
        self._handle = handle

    # ---- constraints ---------------------------------------------------------------------------

    def default_selector(self, pod: Pod) -> LabelSelector | None:
        """kube-scheduler's ``helper.DefaultSelector``: the labels of the Services selecting ``pod``
        and the selectors of the ReplicationController/ReplicaSet/StatefulSet owning it.

        Outrigger has none of those objects, so this is always None (empty), and default constraints
        therefore never apply, as in kube-scheduler for a pod no workload or Service selects.
        """
        return None

    def _build_default_constraints(self, pod: Pod, action: str) -> list[_Constraint]:
        # The selector first: it is usually empty, and then the constraints need not be built.
        default = self.default_selector(pod)
        if default is None:
            return []
        selector = compile_label_selector(default)
        if not selector.requirements:  # selector.Empty()
            return []
        constraints = _filter_constraints(self.default_constraints, pod.labels, action)
        if not constraints:
            return []
        return [replace(c, selector=selector) for c in constraints]

    def _constraints(self, pod: Pod, action: str) -> list[_Constraint]:
        if pod.topology_spread_constraints:
            return _filter_constraints(pod.topology_spread_constraints, pod.labels, action)
        return self._build_default_constraints(pod, action)

    # ---- PreFilter / Filter --------------------------------------------------------------------

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if not constraints:
            return None, Status.skip()
        snap = state.snapshot
        if snap is None:
            return None, Status.failure(f"{NAME}: the cycle state has no snapshot", plugin=self.name)
        table = snap.table
        idx = pod_columns(snap)
        all_keys = _all_keys_mask(table, constraints)
        included = _inclusion_masks(pod, table, constraints)
        by_selector: dict[LabelSelectorMatcher, IntArray] = {}
        codes: list[Int32Array] = []
        counts: list[IntArray] = []
        present: list[BoolArray] = []
        for c, inc in zip(constraints, included, strict=True):
            dom, vocab = table.label_codes(c.topology_key)
            size = len(vocab) + 1  # + the never-used slot label-less nodes index
            eligible = all_keys if inc is None else all_keys & inc
            per_node = by_selector.get(c.selector)
            if per_node is None:
                per_node = by_selector[c.selector] = _matching_pods(idx, c.selector, pod.namespace)
            rows = np.flatnonzero(eligible)
            dom_rows = dom[rows]
            counts.append(np.bincount(dom_rows, weights=per_node[rows], minlength=size).astype(np.int64))
            seen = np.zeros(size, dtype=np.bool_)
            seen[dom_rows] = True
            present.append(seen)
            codes.append(dom)
        state.write(
            _PRE_FILTER_KEY,
            _FilterState(
                constraints=tuple(constraints),
                codes=codes,
                all_keys=all_keys,
                included=included,
                counts=counts,
                present=present,
                self_match=[c.selector.matches(pod.labels) for c in constraints],
            ),
        )
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    async def add_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return self._update_with_pod(state, pod, other, node_row, 1)

    async def remove_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return self._update_with_pod(state, pod, other, node_row, -1)

    def _update_with_pod(self, state: CycleState, pod: Pod, other: Pod, row: int, delta: int) -> Status:
        s = state.get(_PRE_FILTER_KEY)
        if not isinstance(s, _FilterState):
            return Status.failure(f'reading "{_PRE_FILTER_KEY}" from cycleState: not found', plugin=self.name)
        if other.namespace != pod.namespace or not 0 <= row < len(s.all_keys) or not s.all_keys[row]:
            return SUCCESS
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(other.labels):
                continue
            inc = s.included[i]
            if inc is not None and not inc[row]:
                continue
            code = int(s.codes[i][row])
            s.counts[i][code] += delta
            s.present[i][code] = True
        return SUCCESS

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        s = state.get(_PRE_FILTER_KEY)
        n = len(batch)
        if not isinstance(s, _FilterState):
            return FilterResult.from_mask(
                np.ones(n, dtype=np.bool_),
                Code.Error,
                f'reading "{_PRE_FILTER_KEY}" from cycleState: PreFilter did not run',
            )
        rows = batch.rows
        codes = np.zeros(n, dtype=np.int8)
        reason = np.zeros(n, dtype=np.int32)  # 0: skew, 1: missing label
        decided = np.zeros(n, dtype=np.bool_)
        for i, c in enumerate(s.constraints):
            dom = s.codes[i][rows]
            missing = (dom < 0) & ~decided
            codes[missing] = np.int8(Code.UnschedulableAndUnresolvable)
            reason[missing] = 1
            decided |= missing
            counts = s.counts[i]
            match = counts[np.where(dom >= 0, dom, len(counts) - 1)]
            skew = match + int(s.self_match[i]) - s.min_match(i)
            too_skewed = (skew > c.max_skew) & ~decided
            codes[too_skewed] = np.int8(Code.Unschedulable)
            decided |= too_skewed
            if decided.all():
                break
        if not decided.any():
            return FilterResult.passing(n)
        return FilterResult(codes, reason, [(ERR_REASON_CONSTRAINTS_NOT_MATCH,), (ERR_REASON_NODE_LABEL_NOT_MATCH,)])

    # ---- PreScore / Score / NormalizeScore -----------------------------------------------------

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        snap = nodes.snapshot
        if len(snap) == 0:
            return Status.skip()
        # Only require all topology labels with non-system-default rules, so that nodes without a zone
        # label still get hostname spreading under the system defaults.
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        constraints = self._constraints(pod, SCHEDULE_ANYWAY)
        if not constraints:
            return Status.skip()
        table = snap.table
        n_nodes = len(snap)
        all_keys = _all_keys_mask(table, constraints) if require_all else np.ones(n_nodes, dtype=np.bool_)
        filtered = nodes.rows
        ignored = np.zeros(n_nodes, dtype=np.bool_)
        ignored[filtered[~all_keys[filtered]]] = True
        kept = filtered[all_keys[filtered]]
        included = _inclusion_masks(pod, table, constraints)
        idx = pod_columns(snap)
        by_selector: dict[LabelSelectorMatcher, IntArray] = {}
        has_key: list[BoolArray] = []
        domains: list[IntArray] = []
        domain_counts: list[IntArray | None] = []
        node_counts: list[IntArray | None] = []
        weights: list[float] = []
        for c, inc in zip(constraints, included, strict=True):
            raw, vocab = table.label_codes(c.topology_key)
            has = raw >= 0
            # A node without the label is in the "" domain (only possible when not require_all).
            dom = np.where(has, raw, vocab.get("", len(vocab))).astype(np.int64)
            per_node = by_selector.get(c.selector)
            if per_node is None:
                per_node = by_selector[c.selector] = _matching_pods(idx, c.selector, pod.namespace)
            has_key.append(has)
            domains.append(dom)
            if c.topology_key == LABEL_HOSTNAME:
                size = int(filtered.shape[0]) - int(np.count_nonzero(ignored[filtered]))
                domain_counts.append(None)
                node_counts.append(per_node)
            else:
                size = int(np.unique(dom[kept]).shape[0])
                eligible = all_keys if inc is None else all_keys & inc
                rows = np.flatnonzero(eligible)
                domain_counts.append(
                    np.bincount(dom[rows], weights=per_node[rows], minlength=len(vocab) + 1).astype(np.int64)
                )
                node_counts.append(None)
            weights.append(math.log(size + 2))
        state.write(
            _PRE_SCORE_KEY,
            _ScoreState(tuple(constraints), ignored, has_key, domains, domain_counts, node_counts, weights),
        )
        return SUCCESS

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        s = state.get(_PRE_SCORE_KEY)
        if not isinstance(s, _ScoreState):
            raise RuntimeError(f'error reading "{_PRE_SCORE_KEY}" from cycleState: PreScore did not run')
        rows = batch.rows
        total = np.zeros(len(rows), dtype=np.float64)
        for i, c in enumerate(s.constraints):
            has = s.has_key[i][rows]
            per_node = s.node_counts[i]
            if per_node is not None:
                cnt = per_node[rows]
            else:
                dc = s.domain_counts[i]
                assert dc is not None
                cnt = dc[s.domains[i][rows]]
            # scoreForCount, summed in constraint order as kube-scheduler does (float64 throughout).
            term = cnt.astype(np.float64) * s.weights[i] + float(c.max_skew - 1)
            total = np.where(has, total + term, total)
        # math.Round: half away from zero (scores are never negative).
        whole = np.trunc(total)
        rounded = whole + (total - whole >= 0.5)
        return np.where(s.ignored[rows], 0, rounded).astype(np.int64)

    async def normalize_score(self, state: CycleState, pod: Pod, batch: NodeBatch, scores: IntArray) -> Status:
        s = state.get(_PRE_SCORE_KEY)
        if not isinstance(s, _ScoreState):
            return Status.failure(f'error reading "{_PRE_SCORE_KEY}" from cycleState: not found', plugin=self.name)
        ignored = s.ignored[batch.rows]
        valid = ~ignored
        if valid.any():
            min_score = int(scores[valid].min())
            max_score = max(0, int(scores[valid].max()))
        else:
            min_score, max_score = _MAX_INT64, 0
        if max_score == 0:
            scores[valid] = MAX_NODE_SCORE
        else:
            scores[valid] = MAX_NODE_SCORE * (max_score + min_score - scores[valid]) // max_score
        scores[ignored] = 0
        return SUCCESS

    # ---- EnqueueExtensions ---------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        assigned = ActionType.Add | ActionType.UpdatePodLabel | ActionType.Delete
        node_actions = ActionType.Add | ActionType.Delete | ActionType.UpdateNodeLabel | ActionType.UpdateNodeTaint
        return [
            ClusterEventWithHint(ClusterEvent(ASSIGNED_POD, assigned), self.is_schedulable_after_pod_change),
            ClusterEventWithHint(
                ClusterEvent(TARGET_POD, ActionType.UpdatePodToleration | ActionType.UpdatePodLabel),
                self.is_schedulable_after_target_pod_change,
            ),
            ClusterEventWithHint(ClusterEvent("Node", node_actions), self.is_schedulable_after_node_change),
        ]

    def is_schedulable_after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """An assigned (or nominated) pod in the namespace was added, relabelled or deleted: Queue when it
        matches, or starts/stops matching, a hard constraint's selector."""
        if old is None and new is None:
            return QueueingHint.Queue

        def involved(other: Pod) -> bool:  # bound or nominated (nominated too since 1.37), same namespace
            return bool(other.node_name or other.nominated_node_name) and other.namespace == pod.namespace

        if (new is not None and not involved(new)) or (old is not None and not involved(old)):
            return QueueingHint.QueueSkip
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if old is not None and new is not None:
            return _after_label_change(constraints, old, new)
        changed = new if new is not None else old
        matched = any(c.selector.matches(changed.labels) for c in constraints)
        return QueueingHint.Queue if matched else QueueingHint.QueueSkip

    def is_schedulable_after_target_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """The pod itself changed: Queue when it got tolerations and a hard constraint honors taints, or
        when its new labels flip a hard constraint's selector."""
        if not isinstance(old, Pod) or not isinstance(new, Pod):
            return QueueingHint.Queue
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if new.tolerations != old.tolerations and any(c.node_taints_policy == HONOR for c in constraints):
            return QueueingHint.Queue
        return _after_label_change(constraints, old, new)

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a node carrying all the topology keys appears, disappears, changes one of
        those labels or its taints, or gains/loses one of the keys."""
        if old is None and new is None:
            return QueueingHint.Queue
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)

        def matching(labels: Mapping[str, str]) -> bool:
            return all(c.topology_key in labels for c in constraints)

        old_ok = old is not None and matching(old.labels)
        new_ok = new is not None and matching(new.labels)
        if old is not None and new is not None:
            if old_ok != new_ok:
                return QueueingHint.Queue
            changed = any(old.labels.get(c.topology_key) != new.labels.get(c.topology_key) for c in constraints)
            if new_ok and (changed or old.taints != new.taints):
                return QueueingHint.Queue
            return QueueingHint.QueueSkip
        return QueueingHint.Queue if (new_ok if new is not None else old_ok) else QueueingHint.QueueSkip
