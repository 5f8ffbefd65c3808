"""InterPodAffinity: required and preferred pod (anti-)affinity, as kube-scheduler's plugin of that name.

Filter (kube-scheduler's ``filtering.go``)
    PreFilter counts, per topology domain ``(topologyKey, value)``:

    1. the existing pods whose *required anti-affinity* terms match the incoming pod (one count per
       matching term, in the domain of the existing pod's node);
    2. the existing pods that match *all* of the incoming pod's required affinity terms (one count per
       term, in the domain of that pod's node for the term's key);
    3. the existing pods matching each of the incoming pod's required anti-affinity terms.

    PreFilter returns Skip when (1) is empty and the pod has no required (anti-)affinity terms.
    Filter then rejects a node, in this order:

    - ``node(s) didn't match pod affinity rules`` (UnschedulableAndUnresolvable): the node lacks a
      term's topology key, or a term's domain has no matching pod. The latter is forgiven when no pod
      in the cluster matches the terms at all and the pod matches its own terms (the first pod of a
      group with affinity to itself);
    - ``node(s) didn't match pod anti-affinity rules`` (Unschedulable): a term's domain holds a pod
      the term matches (a node without the term's key is fine);
    - ``node(s) didn't satisfy existing pods anti-affinity rules`` (Unschedulable): the node is in a
      domain where an existing pod's anti-affinity term matches the incoming pod.

    The counts are kept as one array per topology key indexed by the node table's value codes
    (``snap.table.label_codes(key)``), so Filter is array lookups over the batch's rows. The
    PreFilterExtensions (``add_pod``/``remove_pod``) update them for preemption's what-ifs.

Score (kube-scheduler's ``scoring.go``)
    PreScore sums, per topology domain of each existing pod's node: + the weight of each of the
    incoming pod's preferred affinity terms the existing pod matches, - the weight of each preferred
    anti-affinity term it matches, + ``hardPodAffinityWeight`` for each of the existing pod's
    *required* affinity terms the incoming pod matches, + / - the weights of the existing pod's
    preferred affinity / anti-affinity terms the incoming pod matches. A node's raw score is the sum
    of its domains' totals; NormalizeScore maps ``[min, max]`` to ``[0, 100]`` (truncating
    ``100 * (s - min) / (max - min)`` computed in float64, as kube-scheduler does), all 0 when
    ``max == min``. PreScore returns Skip when nothing contributed to any domain, or when
    ``ignorePreferredTermsOfExistingPods`` is set and the pod has no preferred terms.

Terms
    A term's ``labelSelector`` absent matches no pod; ``{}`` matches every pod. ``namespaces`` empty
    and ``namespaceSelector`` absent means the namespace of the pod owning the term; otherwise the
    term covers the listed namespaces plus those its ``namespaceSelector`` selects (``{}`` selects
    all namespaces). ``matchLabelKeys`` / ``mismatchLabelKeys`` are merged into the selector from the
    owning pod's labels (``key In (value)`` / ``key NotIn (value)``, keys the pod lacks ignored), as
    the API server does when the pod is created.

Namespaces
    On a live cluster a non-empty ``namespaceSelector`` is matched against each Namespace's labels as
    the API server has them (the Handle's ``namespace_labels_of``, fed by the Namespace informer; a
    namespace it does not have has no labels, as kube-scheduler's GetNamespaceLabelsSnapshot).
    The embedded store has no Namespace objects: there the labels are those given in the plugin args
    under ``namespaceLabels: {namespace: {label: value}}``; every namespace is taken to exist, with the
    labels listed for it (none if it is not listed) plus ``kubernetes.io/metadata.name: <namespace>``,
    which the API server sets on every namespace.

Args (``InterPodAffinityArgs``): ``hardPodAffinityWeight`` (int in [0, 100], default 1),
``ignorePreferredTermsOfExistingPods`` (bool, default false), and ``namespaceLabels`` (above).

The pieces: :mod:`.podaffinityterms` compiles terms, :mod:`.podaffinityindex` keeps the existing pods'
terms grouped by identical term between snapshots (each distinct term is matched against the incoming
pod once and counted by how many pods on each node carry it), :mod:`.topologycounts` holds the counts
per topology domain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pluginhost.model import Node, Pod
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
from pluginhost.snapshot import NodeTable, Snapshot
from pluginhost.status import SUCCESS, Code, Status

from .helpers import IntArray
from .noderesources import PluginArgsError
from .podaffinityindex import PodIndex
from .podaffinityterms import PodTerms, Term, compile_pod_terms, matches_all
from .topologycounts import DomainCounts

__all__ = [
    "ERR_AFFINITY_RULES_NOT_MATCH",
    "ERR_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "InterPodAffinity",
]

ERR_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

_NAME = "InterPodAffinity"
_PRE_FILTER_KEY = "PreFilter" + _NAME
_PRE_SCORE_KEY = "PreScore" + _NAME
_ARG_KEYS = frozenset(
    {"apiVersion", "kind", "hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods", "namespaceLabels"}
)

# ---- cycle state -----------------------------------------------------------------------------


@dataclass(slots=True)
class _FilterState:
    terms: PodTerms  # the incoming pod's
    existing_anti: DomainCounts  # existing pods' required anti-affinity terms matching the pod
    affinity: DomainCounts  # existing pods matching all the pod's required affinity terms
    anti: DomainCounts  # existing pods matching the pod's required anti-affinity terms
    matches_own_affinity: bool  # the pod matches all its own required affinity terms

    def clone(self) -> _FilterState:
        return _FilterState(
            self.terms,
            self.existing_anti.clone(),
            self.affinity.clone(),
            self.anti.clone(),
            self.matches_own_affinity,
        )


@dataclass(slots=True)
class _ScoreState:
    scores: DomainCounts
    touched: bool  # some term contributed to some domain (the Go map is not empty)

    def clone(self) -> _ScoreState:
        return self


# ---- args ------------------------------------------------------------------------------------


def _parse_args(args: Mapping[str, Any]) -> tuple[int, bool, dict[str, dict[str, str]]]:
    unknown = sorted(set(args) - _ARG_KEYS)
    if unknown:
        raise PluginArgsError(f"{_NAME}: unknown field(s) in args: {', '.join(unknown)}")
    weight = args.get("hardPodAffinityWeight", 1)
    if weight is None:
        weight = 1
    if not isinstance(weight, int) or isinstance(weight, bool):
        raise PluginArgsError(f"{_NAME}: hardPodAffinityWeight must be an integer, got {weight!r}")
    if not 0 <= weight <= 100:
        raise PluginArgsError(f"{_NAME}: hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0-100]")
    ignore = args.get("ignorePreferredTermsOfExistingPods", False)
    if ignore is None:
        ignore = False
    if not isinstance(ignore, bool):
        raise PluginArgsError(f"{_NAME}: ignorePreferredTermsOfExistingPods must be a boolean, got {ignore!r}")
    raw = args.get("namespaceLabels") or {}
    if not isinstance(raw, Mapping):
        raise PluginArgsError(f"{_NAME}: namespaceLabels must be a mapping of namespace to labels")
    ns_labels: dict[str, dict[str, str]] = {}
    for ns, labels in raw.items():
        if not isinstance(ns, str):
            raise PluginArgsError(f"{_NAME}: namespaceLabels: namespace names must be strings, got {ns!r}")
        if labels is None:
            labels = {}
        if not isinstance(labels, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise PluginArgsError(f"{_NAME}: namespaceLabels.{ns} must be a mapping of label names to string values")
        ns_labels[ns] = dict(labels)
    return weight, ignore, ns_labels


# ---- the plugin ------------------------------------------------------------------------------


class InterPodAffinity(
    PreFilterPlugin,
    PreFilterExtensions,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ScoreExtensions,
    EnqueueExtensions,
):
    name = _NAME

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.hard_pod_affinity_weight, self.ignore_preferred_terms_of_existing_pods, self._namespaces = _parse_args(
            args or {}
        )
        self._ns_cache: dict[str, Mapping[str, str]] = {}
        # A live cluster's Namespace labels, when the handle has them (None: the embedded store).
        self._live_namespaces: Callable[[str], Mapping[str, str] | None] | None = getattr(
            handle, "namespace_labels_of", None)
        self._index: PodIndex | None = None

    # ---- helpers -------------------------------------------------------------------------------

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """The labels of ``namespace`` as this plugin sees them (see the module docstring)."""
        if self._live_namespaces is not None:
            live = self._live_namespaces(namespace)
            if live is not None:
                return live
        hit = self._ns_cache.get(namespace)
        if hit is None:
            hit = self._ns_cache[namespace] = {**self._namespaces.get(namespace, {}), NAMESPACE_NAME_LABEL: namespace}
        return hit

    def _pod_index(self, snap: Snapshot) -> PodIndex:
        """The pods of ``snap``, built once per snapshot from the last one's (only the last is kept)."""
        idx = self._index
        if idx is None or idx.snapshot is not snap:
            self._index = None  # the new index takes the old one's tables: if building it fails, start over
            idx = self._index = PodIndex(snap, idx)
        return idx

    # ---- PreFilter / Filter --------------------------------------------------------------------

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        snap = state.snapshot
        if snap is None:
            return None, Status.failure(f"{_NAME}: the cycle state has no snapshot", plugin=self.name)
        idx = self._pod_index(snap)
        table = snap.table
        ns_labels = self.namespace_labels
        terms = compile_pod_terms(pod)

        # (1) existing pods' required anti-affinity terms that match the incoming pod: each distinct
        # term is matched once and counted once per pod carrying it.
        existing = DomainCounts(table)
        for t, rows, pods in idx.required_anti:
            if t.matches(pod, ns_labels):
                existing.add_rows(t.topology_key, rows, 1, pods)

        # (2), (3): existing pods matching the incoming pod's required terms.
        affinity = DomainCounts(table)
        anti = DomainCounts(table)
        if terms.required_affinity and len(idx.columns):
            mask = np.ones(len(idx.columns), dtype=np.bool_)
            for t in terms.required_affinity:
                mask &= idx.term_mask(t, ns_labels)
                if not mask.any():
                    break
            if mask.any():
                rows = idx.columns.rows[mask]
                for t in terms.required_affinity:
                    affinity.add_rows(t.topology_key, rows, 1)
        if terms.required_anti and len(idx.columns):
            for t in terms.required_anti:
                mask = idx.term_mask(t, ns_labels)
                if mask.any():
                    anti.add_rows(t.topology_key, idx.columns.rows[mask], 1)

        if not existing.nonzero() and not terms.required_affinity and not terms.required_anti:
            return None, Status.skip()
        own = matches_all(terms.required_affinity, pod, ns_labels)
        state.write(_PRE_FILTER_KEY, _FilterState(terms, existing, affinity, anti, own))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def _update(self, state: CycleState, pod: Pod, other: Pod, node_row: int, value: int) -> Status:
        s: _FilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            # PreFilter skipped this pod (kube-scheduler does not call the extensions then).
            return SUCCESS
        ns_labels = self.namespace_labels
        other_terms = compile_pod_terms(other)
        for t in other_terms.required_anti:
            if t.matches(pod, ns_labels):
                s.existing_anti.add_row(t.topology_key, node_row, value)
        if matches_all(s.terms.required_affinity, other, ns_labels):
            for t in s.terms.required_affinity:
                s.affinity.add_row(t.topology_key, node_row, value)
        for t in s.terms.required_anti:
            if t.matches(other, ns_labels):
                s.anti.add_row(t.topology_key, node_row, value)
        return SUCCESS

    def reaches(self, state: CycleState, pod: Pod, other: Pod, other_row: int, row: int, table: NodeTable) -> bool:
        """Whether adding (or removing) ``other`` on node ``other_row`` can change Filter's answer for
        ``pod`` on node ``row``: only through a count :meth:`add_pod` moves, in a topology domain both
        nodes are in, or through the first-of-its-group allowance (any matching pod anywhere ends it)."""
        s: _FilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            return False
        ns_labels = self.namespace_labels
        other_anti = compile_pod_terms(other).required_anti
        # The topology keys first, without matching a selector: when the two nodes share no domain of
        # any key a count could move in, only the first-of-its-group allowance is left to ask about
        # (preemption asks this for a thousand victims on nodes far from the pod).
        near = False
        for t in (*other_anti, *s.terms.required_affinity, *s.terms.required_anti):
            codes = table.label_codes(t.topology_key)[0]
            if codes[other_row] >= 0 and codes[other_row] == codes[row]:
                near = True
                break
        if not near:
            return bool(s.terms.required_affinity) and s.matches_own_affinity and matches_all(
                s.terms.required_affinity, other, ns_labels)
        keys = {t.topology_key for t in other_anti if t.matches(pod, ns_labels)}
        if s.terms.required_affinity and matches_all(s.terms.required_affinity, other, ns_labels):
            if s.matches_own_affinity:
                return True
            keys.update(t.topology_key for t in s.terms.required_affinity)
        keys.update(t.topology_key for t in s.terms.required_anti if t.matches(other, ns_labels))
        for key in keys:
            codes = table.label_codes(key)[0]
            if codes[other_row] >= 0 and codes[other_row] == codes[row]:
                return True
        return False

    async def add_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return self._update(state, pod, other, node_row, 1)

    async def remove_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return self._update(state, pod, other, node_row, -1)

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        s: _FilterState | None = state.get(_PRE_FILTER_KEY)
        n = len(batch)
        if s is None:
            return FilterResult.from_mask(
                np.ones(n, dtype=np.bool_),
                Code.Error,
                f"error reading {_PRE_FILTER_KEY!r} from cycleState: PreFilter did not run",
            )
        table = batch.snapshot.table
        rows = batch.rows

        # The incoming pod's required affinity.
        no_affinity = np.zeros(n, dtype=np.bool_)
        if s.terms.required_affinity:
            missing_key = np.zeros(n, dtype=np.bool_)
            pods_exist = np.ones(n, dtype=np.bool_)
            for t in s.terms.required_affinity:
                present, counts = s.affinity.lookup(table, t.topology_key, rows)
                missing_key |= ~present
                pods_exist &= counts > 0
            # The first pod of a group with affinity to itself: allowed where the keys exist.
            first_of_group = not s.affinity.nonzero() and s.matches_own_affinity
            no_affinity = missing_key if first_of_group else missing_key | ~pods_exist

        # The incoming pod's required anti-affinity.
        anti = np.zeros(n, dtype=np.bool_)
        if s.anti.nonzero():
            for t in s.terms.required_anti:
                present, counts = s.anti.lookup(table, t.topology_key, rows)
                anti |= present & (counts > 0)

        # Existing pods' required anti-affinity.
        existing = np.zeros(n, dtype=np.bool_)
        if s.existing_anti.nonzero():
            for key in s.existing_anti.arrays:
                present, counts = s.existing_anti.lookup(table, key, rows)
                existing |= present & (counts > 0)

        anti &= ~no_affinity
        existing &= ~(no_affinity | anti)
        if not (no_affinity.any() or anti.any() or existing.any()):
            return FilterResult.passing(n)
        codes = np.zeros(n, dtype=np.int8)
        codes[no_affinity] = np.int8(Code.UnschedulableAndUnresolvable)
        codes[anti | existing] = np.int8(Code.Unschedulable)
        index = np.zeros(n, dtype=np.int32)
        index[anti] = 1
        index[existing] = 2
        reasons: list[tuple[str, ...]] = [
            (ERR_AFFINITY_RULES_NOT_MATCH,),
            (ERR_ANTI_AFFINITY_RULES_NOT_MATCH,),
            (ERR_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,),
        ]
        return FilterResult(codes, index, reasons)

    # ---- PreScore / Score / NormalizeScore -----------------------------------------------------

    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        a = pod.affinity
        has_preferred = a is not None and (
            (a.pod_affinity is not None and bool(a.pod_affinity.preferred))
            or (a.pod_anti_affinity is not None and bool(a.pod_anti_affinity.preferred))
        )
        if self.ignore_preferred_terms_of_existing_pods and not has_preferred:
            return Status.skip()
        snap = state.snapshot if state.snapshot is not None else nodes.snapshot
        idx = self._pod_index(snap)
        ns_labels = self.namespace_labels
        terms = compile_pod_terms(pod)
        scores = DomainCounts(snap.table)
        touched = False

        # The incoming pod's preferred terms against every existing pod.
        if has_preferred and len(idx.columns):
            for pref, sign in ((terms.preferred_affinity, 1), (terms.preferred_anti, -1)):
                for t in pref:
                    mask = idx.term_mask(t, ns_labels)
                    if mask.any():
                        touched |= scores.add_rows(t.topology_key, idx.columns.rows[mask], sign * t.weight)

        # Existing pods' terms against the incoming pod: each distinct term matched once, counted once
        # per pod carrying it.
        hard = self.hard_pod_affinity_weight
        kinds = [(idx.preferred_affinity, 1), (idx.preferred_anti, -1)]
        if hard > 0:
            kinds.insert(0, (idx.required_affinity, 0))
        for groups, sign in kinds:
            for t, rows, pods in groups:
                if t.matches(pod, ns_labels):
                    weight = hard if sign == 0 else sign * t.weight
                    touched |= scores.add_rows(t.topology_key, rows, weight, pods)

        if not touched:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, _ScoreState(scores, touched))
        return SUCCESS

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        s: _ScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None:
            raise RuntimeError(f"error reading {_PRE_SCORE_KEY!r} from cycleState: PreScore did not run")
        table = batch.snapshot.table
        total = np.zeros(len(batch), dtype=np.int64)
        for key in s.scores.arrays:
            _, counts = s.scores.lookup(table, key, batch.rows)
            total += counts
        return total

    async def normalize_score(self, state: CycleState, pod: Pod, batch: NodeBatch, scores: IntArray) -> Status:
        s: _ScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None:
            return Status.failure(
                f"error reading {_PRE_SCORE_KEY!r} from cycleState: PreScore did not run", plugin=self.name
            )
        if not s.touched or scores.shape[0] == 0:
            return SUCCESS
        low = int(scores.min())
        spread = int(scores.max()) - low
        if spread <= 0:
            scores[:] = 0
            return SUCCESS
        # float64(MaxNodeScore) * (float64(score-min) / float64(max-min)), truncated like Go's int64().
        scaled = float(MAX_NODE_SCORE) * ((scores - low).astype(np.float64) / float(spread))
        scores[:] = np.trunc(scaled).astype(np.int64)
        return SUCCESS

    # ---- EnqueueExtensions ---------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(ASSIGNED_POD, ActionType.Add | ActionType.UpdatePodLabel | ActionType.Delete),
                self.is_schedulable_after_pod_change,
            ),
            # Another pod's anti-affinity may have hated the pod's old labels.
            ClusterEventWithHint(ClusterEvent(TARGET_POD, ActionType.UpdatePodLabel), _queue),
            ClusterEventWithHint(
                ClusterEvent("Node", ActionType.Add | ActionType.UpdateNodeLabel),
                self.is_schedulable_after_node_change,
            ),
        ]

    def is_schedulable_after_pod_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        """kube-scheduler 1.37's isSchedulableAfterAssignedPodChange. Its terms are built afresh from the
        pods and matched without namespace labels, so a ``namespaceSelector`` counts here only when it
        matches an empty label set (upstream's hint does the same; Filter resolves selectors properly)."""
        if not isinstance(old, Pod | None) or not isinstance(new, Pod | None) or (old is None and new is None):
            return QueueingHint.Queue
        if any(p is not None and not p.node_name and not p.nominated_node_name for p in (old, new)):
            return QueueingHint.QueueSkip  # neither bound nor nominated: it changes nothing here
        terms = compile_pod_terms(pod)
        affinity, anti = terms.required_affinity, terms.required_anti
        if old is not None and new is not None:  # labels updated
            if not matches_all(affinity, old, _NO_NS_LABELS) and matches_all(affinity, new, _NO_NS_LABELS):
                return QueueingHint.Queue
            if _matches_any(anti, old) and not _matches_any(anti, new):
                return QueueingHint.Queue
            return QueueingHint.QueueSkip
        if new is not None:  # added
            return QueueingHint.Queue if matches_all(affinity, new, _NO_NS_LABELS) else QueueingHint.QueueSkip
        assert old is not None  # deleted
        if _matches_any(anti, old) or _matches_any(compile_pod_terms(old).required_anti, pod):
            return QueueingHint.Queue
        return QueueingHint.QueueSkip

    def is_schedulable_after_node_change(self, pod: Pod, old: Any, new: Any) -> QueueingHint:
        if not isinstance(new, Node) or not isinstance(old, Node | None):
            return QueueingHint.Queue
        terms = compile_pod_terms(pod)
        for t in terms.required_affinity:
            key = t.topology_key
            if old is None:
                if key in new.labels:
                    return QueueingHint.Queue  # a node added with the key
                continue
            if key in new.labels and (key not in old.labels or old.labels[key] != new.labels[key]):
                return QueueingHint.Queue  # the key appeared or its value changed
        for t in terms.required_anti:
            if old is None:
                return QueueingHint.Queue  # any new node may be in a domain free of hated pods
            key = t.topology_key
            if key in old.labels and (key not in new.labels or old.labels[key] != new.labels[key]):
                return QueueingHint.Queue  # the key disappeared or its value changed
        return QueueingHint.QueueSkip


def _NO_NS_LABELS(namespace: str) -> Mapping[str, str]:
    """No namespace's labels: upstream's hints match terms with nil namespace labels."""
    return {}


def _matches_any(terms: tuple[Term, ...], pod: Pod) -> bool:
    """podMatchesAnyAffinityTerms: terms matched without namespace labels, as the hints do."""
    return any(t.matches(pod, _NO_NS_LABELS) for t in terms)


def _queue(pod: Pod, old: Any, new: Any) -> QueueingHint:
    return QueueingHint.Queue
