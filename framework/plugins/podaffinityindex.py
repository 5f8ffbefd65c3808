"""The pods placed in a snapshot as InterPodAffinity reads them (:class:`PodIndex`): the compiled
terms of the pods with pod (anti-)affinity, kept incrementally from one snapshot to the next and grouped
by identical term (:class:`TermGroups`), and every pod column-wise for matching the incoming pod's terms.

Pods of one workload carry the same terms, so PreFilter and PreScore match the incoming pod once per
distinct term and count each match by how many pods on each node carry that term: the sums a walk over
every pod gives, at the cost of the distinct terms rather than of the pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from pluginhost.snapshot import Snapshot

from .helpers import BoolArray, IntArray
from .podaffinityterms import NsLabels, PodTerms, Term, compile_pod_terms, has_pod_affinity
from .podcolumns import PodColumns, changed_rows, pod_columns

__all__ = ["PodIndex", "TermGroups"]


_RowTerms = tuple[tuple[int, PodTerms], ...]  # (node row, compiled terms) of a node's pods with affinity


class TermGroups:
    """The existing pods' terms of one kind (say, required anti-affinity), grouped by identical term:
    for each distinct term, how many pods on each node row carry it."""

    __slots__ = ("_arrays", "_rows")

    def __init__(self) -> None:
        self._rows: dict[Term, dict[int, int]] = {}  # term -> node row -> pods there carrying it
        self._arrays: dict[Term, tuple[IntArray, IntArray]] = {}  # _rows as arrays, rebuilt when changed

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, terms: Iterable[Term], row: int, sign: int) -> None:
        """Count ``terms`` (one pod's) on node ``row``: ``sign`` 1 when the pod comes, -1 when it goes."""
        for term in terms:
            rows = self._rows.get(term)
            if rows is None:
                rows = self._rows[term] = {}
            n = rows.get(row, 0) + sign
            if n:
                rows[row] = n
            else:
                del rows[row]
                if not rows:
                    del self._rows[term]
            self._arrays.pop(term, None)

    def __iter__(self) -> Iterator[tuple[Term, IntArray, IntArray]]:
        """Each distinct term, the node rows holding it, and how many pods there carry it."""
        for term, rows in self._rows.items():
            arrays = self._arrays.get(term)
            if arrays is None:
                n = len(rows)
                arrays = self._arrays[term] = (
                    np.fromiter(rows.keys(), dtype=np.int64, count=n),
                    np.fromiter(rows.values(), dtype=np.int64, count=n),
                )
            yield term, arrays[0], arrays[1]


class _Groups:
    """One :class:`TermGroups` per kind of term the existing pods' side of the plugin reads."""

    __slots__ = ("preferred_affinity", "preferred_anti", "required_affinity", "required_anti")

    def __init__(self) -> None:
        self.required_affinity = TermGroups()
        self.required_anti = TermGroups()
        self.preferred_affinity = TermGroups()
        self.preferred_anti = TermGroups()

    def add(self, entry: _RowTerms, sign: int) -> None:
        for row, terms in entry:
            self.required_affinity.add(terms.required_affinity, row, sign)
            self.required_anti.add(terms.required_anti, row, sign)
            self.preferred_affinity.add(terms.preferred_affinity, row, sign)
            self.preferred_anti.add(terms.preferred_anti, row, sign)


class PodIndex:
    """The pods placed in a snapshot, as InterPodAffinity reads them.

    - :attr:`required_affinity`, :attr:`required_anti`, :attr:`preferred_affinity`,
      :attr:`preferred_anti`: the terms of the pods with pod (anti-)affinity, grouped by identical term
      (:class:`TermGroups`).
    - ``with_affinity`` / ``with_required_anti``: the same pods one by one with their node rows, in row
      order (kube-scheduler's ``PodsWithAffinity`` and ``PodsWithRequiredAntiAffinity``).
    - :attr:`columns`: every pod column-wise (:class:`PodColumns`), for array matching of the
      incoming pod's terms against all pods; built on first use, only for pods that have such terms.

    The terms are kept incrementally from the previous snapshot's index: only the rows whose pods
    changed (:func:`changed_rows`, one comparison of the two snapshots' row versions) are looked at,
    and only rows holding pods with affinity are kept, so a cycle costs no Python work per node or per
    pod. The new index takes its tables over from the previous one, which must not be read afterwards.
    """

    def __init__(self, snap: Snapshot, previous: PodIndex | None) -> None:
        self.snapshot = snap
        tuples = snap.pods
        rows: Sequence[int]
        if previous is None:
            row_terms: dict[int, _RowTerms] = {}  # only rows with a pod with affinity
            groups = _Groups()
            rows = range(len(tuples))
        else:
            row_terms, groups = previous._take()
            rows = changed_rows(snap, previous.snapshot)
            if len(tuples) < len(previous.snapshot):
                for r in [r for r in row_terms if r >= len(tuples)]:  # the rows of removed nodes
                    groups.add(row_terms.pop(r), -1)
        for r in rows:
            old = row_terms.pop(r, None)
            if old is not None:
                groups.add(old, -1)
            if not tuples[r]:  # most rows of a narrowed placement's fresh rows hold no pod
                continue
            entry = tuple((r, compile_pod_terms(p)) for p in tuples[r] if has_pod_affinity(p))
            if entry:
                row_terms[r] = entry
                groups.add(entry, 1)
        self._row_terms: dict[int, _RowTerms] | None = row_terms
        self._groups: _Groups | None = groups
        self._with_affinity: list[tuple[int, PodTerms]] | None = None
        self._with_required_anti: list[tuple[int, PodTerms]] | None = None

    def _take(self) -> tuple[dict[int, _RowTerms], _Groups]:
        """Hand this index's tables to the index of a newer snapshot."""
        row_terms, groups = self._row_terms, self._groups
        if row_terms is None or groups is None:
            raise RuntimeError("this pod index was superseded by a newer one")
        self._row_terms = self._groups = None
        return row_terms, groups

    def _current(self) -> tuple[dict[int, _RowTerms], _Groups]:
        if self._row_terms is None or self._groups is None:
            raise RuntimeError("this pod index was superseded by a newer one")
        return self._row_terms, self._groups

    @property
    def required_affinity(self) -> TermGroups:
        return self._current()[1].required_affinity

    @property
    def required_anti(self) -> TermGroups:
        return self._current()[1].required_anti

    @property
    def preferred_affinity(self) -> TermGroups:
        return self._current()[1].preferred_affinity

    @property
    def preferred_anti(self) -> TermGroups:
        return self._current()[1].preferred_anti

    @property
    def with_affinity(self) -> list[tuple[int, PodTerms]]:
        if self._with_affinity is None:
            row_terms = self._current()[0]
            self._with_affinity = [x for _, entry in sorted(row_terms.items()) for x in entry]
        return self._with_affinity

    @property
    def with_required_anti(self) -> list[tuple[int, PodTerms]]:
        if self._with_required_anti is None:
            self._with_required_anti = [x for x in self.with_affinity if x[1].required_anti]
        return self._with_required_anti

    @property
    def columns(self) -> PodColumns:
        """Every placed pod column-wise (shared with other plugins of the cycle), built on first use."""
        return pod_columns(self.snapshot)

    def term_mask(self, term: Term, ns_labels: NsLabels) -> BoolArray:
        """Which pods ``term`` matches (namespace and label selector)."""
        columns = self.columns
        mask = columns.selector_mask(term.selector)
        if mask.any():
            names = columns.ns_names
            ok = np.fromiter((term.namespace_matches(ns, ns_labels) for ns in names), dtype=np.bool_, count=len(names))
            mask &= ok[columns.ns_codes]
        return mask
