"""The pods placed in a snapshot as plugins read them: column-wise (:class:`PodColumns`, one per
snapshot, shared by the plugins of a cycle) and the rows whose pods changed between two snapshots
(:func:`changed_rows`), for the plugins that keep per-row indexes between cycles.
"""

from __future__ import annotations

import numpy as np

from pluginhost.model import Pod
from pluginhost.snapshot import Snapshot

from .helpers import BoolArray, Int32Array, IntArray
from .labels import LabelSelectorMatcher

__all__ = ["PodColumns", "changed_rows", "pod_columns"]


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
    columns: PodColumns = snap.memo("podcolumns/pod-columns", PodColumns)
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
