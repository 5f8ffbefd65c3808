"""The pods placed in a snapshot as plugins read them: column-wise (:class:`PodColumns`, one per
snapshot, shared by the plugins of a cycle) and the rows whose pods changed between two snapshots
(:func:`changed_rows`), for the plugins that keep per-row indexes between cycles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pluginhost.model import Pod
from pluginhost.snapshot import Snapshot

from .helpers import BoolArray, Int32Array, IntArray
from .labels import LabelSelectorMatcher

__all__ = ["PodColumns", "changed_rows", "pod_columns"]


class PodColumns:
    """Every pod placed in a snapshot, column-wise: its node row, namespace code, whether it is
    terminating, and per-key label codes (built on first use), so a label selector is evaluated over
    all pods with array work. One per snapshot, shared by the plugins of a cycle (:func:`pod_columns`).

    Built from ``previous`` (the columns of an earlier snapshot of the same cluster) when given: the
    pods of unchanged rows keep their codes and only the rows whose pods changed
    (:func:`changed_rows`) are read again, for the namespace, the terminating flag and every label key
    plugins asked ``previous`` for. Codes are then those of ``previous`` plus new ones (values no pod
    holds any more keep theirs); a full build every time as many pods were read again as the snapshot
    holds keeps those few."""

    def __init__(self, snap: Snapshot, previous: PodColumns | None = None) -> None:
        placed = snap.pods
        self.snapshot = snap
        counts = np.fromiter(map(len, placed), dtype=np.int64, count=len(placed))
        self.rows: IntArray = np.repeat(np.arange(len(placed), dtype=np.int64), counts)
        self._starts: IntArray = np.cumsum(counts) - counts  # each row's first position
        self._n = int(self.rows.shape[0])
        self._pods: list[Pod] | None = None
        self._labels: dict[str, tuple[Int32Array, dict[str, int]]] = {}
        self._asked: set[str] = set()  # the label keys plugins asked for: carried to the next columns
        carry = None if previous is None else _Carry.between(self, previous)
        if carry is None or previous is None:
            self._reread = 0
            self._ns_vocab: dict[str, int] = {}
            self.ns_codes: Int32Array = np.fromiter(
                (self._ns_vocab.setdefault(p.namespace, len(self._ns_vocab)) for p in self.pods),
                dtype=np.int32, count=self._n,
            )
            self.alive: BoolArray = np.fromiter(
                (p.deletion_timestamp is None for p in self.pods), dtype=np.bool_, count=self._n
            )
        else:
            self._reread = carry.reread
            self.ns_codes, self._ns_vocab = carry.codes(previous.ns_codes, previous._ns_vocab,
                                                        [p.namespace for p in carry.pods])
            self.alive = carry.flags(previous.alive, [p.deletion_timestamp is None for p in carry.pods])
            for key in previous._asked:
                codes, vocab = previous._labels[key]
                self._labels[key] = carry.codes(codes, vocab, [p.labels.get(key) for p in carry.pods])
        self.ns_names: list[str] = list(self._ns_vocab)

    def __len__(self) -> int:
        return self._n

    @property
    def pods(self) -> list[Pod]:
        """The pods in column order (node row, then the row's order)."""
        if self._pods is None:
            self._pods = [p for on_node in self.snapshot.pods for p in on_node]
        return self._pods

    def label_codes(self, key: str) -> tuple[Int32Array, dict[str, int]]:
        """Per-pod codes of label ``key`` (-1 where absent) and the value → code vocabulary."""
        self._asked.add(key)
        hit = self._labels.get(key)
        if hit is not None:
            return hit
        vocab: dict[str, int] = {}
        codes = np.full(self._n, -1, dtype=np.int32)
        for i, p in enumerate(self.pods):
            value = p.labels.get(key)
            if value is not None:
                codes[i] = vocab.setdefault(value, len(vocab))
        self._labels[key] = (codes, vocab)
        return codes, vocab

    def selector_mask(self, selector: LabelSelectorMatcher) -> BoolArray:
        return selector.mask(self.label_codes, self._n)

    def in_namespace(self, namespace: str) -> BoolArray:
        code = self._ns_vocab.get(namespace)
        if code is None:
            return np.zeros(self._n, dtype=np.bool_)
        same: BoolArray = self.ns_codes == code
        return same

    def node_counts(self, selector: LabelSelectorMatcher, namespace: str) -> IntArray:
        """Per node row: live pods in ``namespace`` that ``selector`` matches."""
        mask = self.selector_mask(selector) & self.in_namespace(namespace) & self.alive
        return np.bincount(self.rows[mask], minlength=len(self.snapshot)).astype(np.int64)


@dataclass(frozen=True, slots=True)
class _Carry:
    """How the columns of a snapshot follow from an earlier snapshot's: the positions whose pod is
    unchanged (``kept``, taken from ``src`` in the earlier columns) and the positions read again
    (``redo``, holding ``pods``)."""

    kept: BoolArray
    src: IntArray
    redo: IntArray
    pods: list[Pod]
    reread: int  # pods read again (or dropped) since the last full build

    @staticmethod
    def between(new: PodColumns, old: PodColumns) -> _Carry | None:
        """None when a full build is due (or cheaper)."""
        placed = new.snapshot.pods
        changed = changed_rows(new.snapshot, old.snapshot)
        pods = [p for r in changed for p in placed[r]]
        fresh = np.zeros(len(placed), dtype=np.bool_)
        fresh[changed] = True
        kept = ~fresh[new.rows]
        m = min(len(placed), len(old.snapshot.pods))
        old_starts = np.zeros(len(placed), dtype=np.int64)
        old_starts[:m] = old._starts[:m]
        # An unchanged row holds the same pods as before, at the same offsets from its first position.
        within = np.arange(new._n, dtype=np.int64) - new._starts[new.rows]
        src = (old_starts[new.rows] + within)[kept]
        reread = old._reread + len(pods) + (old._n - int(src.shape[0]))
        if reread > max(new._n, 64):
            return None
        return _Carry(kept, src, np.flatnonzero(~kept), pods, reread)

    def codes(self, old: Int32Array, vocab: dict[str, int], values: list[str | None]
              ) -> tuple[Int32Array, dict[str, int]]:
        """A code column (-1: none) and its vocabulary: ``old``'s codes where kept, ``values`` coded
        where read again (``vocab`` is copied before it gains a value: ``old``'s stays as it was)."""
        if any(v is not None and v not in vocab for v in values):
            vocab = dict(vocab)
        out = np.empty(self.kept.shape[0], dtype=np.int32)
        out[self.kept] = old[self.src]
        out[self.redo] = np.fromiter(
            (-1 if v is None else vocab.setdefault(v, len(vocab)) for v in values), dtype=np.int32, count=len(values)
        )
        return out, vocab

    def flags(self, old: BoolArray, values: list[bool]) -> BoolArray:
        out = np.empty(self.kept.shape[0], dtype=np.bool_)
        out[self.kept] = old[self.src]
        out[self.redo] = np.fromiter(values, dtype=np.bool_, count=len(values))
        return out


def pod_columns(snap: Snapshot) -> PodColumns:
    """The :class:`PodColumns` of ``snap``, built once per snapshot, from the columns last built for
    a snapshot with the same node table (the same nodes of the same cluster) when there are some."""
    last: list[PodColumns | None] = snap.table.memo("podcolumns/last", lambda _: [None])

    def build(s: Snapshot) -> PodColumns:
        columns = last[0] = PodColumns(s, last[0])
        return columns

    columns: PodColumns = snap.memo("podcolumns/pod-columns", build)
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
