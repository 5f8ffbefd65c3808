"""The pods placed in a snapshot as InterPodAffinity reads them (:class:`PodIndex`): the compiled
terms of the pods with pod (anti-)affinity, kept incrementally from one snapshot to the next, and every
pod column-wise for matching the incoming pod's terms.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pluginhost.snapshot import Snapshot

from .helpers import BoolArray
from .podaffinityterms import NsLabels, PodTerms, Term, compile_pod_terms, has_pod_affinity
from .podcolumns import PodColumns, changed_rows, pod_columns

__all__ = ["PodIndex"]


_RowTerms = tuple[tuple[int, PodTerms], ...]  # (node row, compiled terms) of a node's pods with affinity


class PodIndex:
    """The pods placed in a snapshot, as InterPodAffinity reads them.

    - ``with_affinity`` / ``with_required_anti``: the compiled terms of the pods with pod
      (anti-)affinity and their node rows, in row order (kube-scheduler's ``PodsWithAffinity`` and
      ``PodsWithRequiredAntiAffinity``). Built incrementally from the previous snapshot's index:
      only the rows whose pods changed (:func:`changed_rows`, one comparison of the two snapshots'
      row versions) are looked at, and only rows holding pods with affinity are kept, so a
      cycle costs no Python work per node.
    - :attr:`columns`: every pod column-wise (:class:`PodColumns`), for array matching of the
      incoming pod's terms against all pods; built on first use, only for pods that have such terms.
    """

    _row_terms: dict[int, _RowTerms]  # only rows with a pod with affinity; never mutated once built

    def __init__(self, snap: Snapshot, previous: PodIndex | None) -> None:
        self.snapshot = snap
        tuples = snap.pods
        row_terms: dict[int, _RowTerms]
        if previous is None:
            row_terms = {}
            rows: Sequence[int] = range(len(tuples))
        else:
            row_terms = previous._row_terms
            rows = changed_rows(snap, previous.snapshot)
            gone = len(tuples) < len(previous.snapshot) and any(r >= len(tuples) for r in row_terms)
            if rows or gone:
                row_terms = {r: t for r, t in row_terms.items() if r < len(tuples)}
        for r in rows:
            entry = tuple((r, compile_pod_terms(p)) for p in tuples[r] if has_pod_affinity(p))
            if entry:
                row_terms[r] = entry
            else:
                row_terms.pop(r, None)
        self._row_terms = row_terms
        self._with_affinity: list[tuple[int, PodTerms]] | None = None
        self._with_required_anti: list[tuple[int, PodTerms]] | None = None

    @property
    def with_affinity(self) -> list[tuple[int, PodTerms]]:
        if self._with_affinity is None:
            self._with_affinity = [x for _, entry in sorted(self._row_terms.items()) for x in entry]
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
