"""Counts per topology domain: a ``(topologyKey, value) -> int`` map, as InterPodAffinity's
PreFilter and PreScore build it, held as one int64 array per key indexed by the node table's value
codes for that key (``NodeTable.label_codes``), so Filter and Score read it with array lookups.
"""

from __future__ import annotations

import numpy as np

from pluginhost.snapshot import NodeTable

from .helpers import BoolArray, IntArray

__all__ = ["DomainCounts"]


class DomainCounts:
    """A ``(topologyKey, value) -> int`` map held as one int64 array per key, indexed by the node
    table's value codes for that key."""

    __slots__ = ("arrays", "table")

    def __init__(self, table: NodeTable, arrays: dict[str, IntArray] | None = None) -> None:
        self.table = table
        self.arrays: dict[str, IntArray] = arrays if arrays is not None else {}

    def clone(self) -> DomainCounts:
        return DomainCounts(self.table, {k: a.copy() for k, a in self.arrays.items()})

    def _array(self, key: str) -> IntArray:
        arr = self.arrays.get(key)
        if arr is None:
            arr = self.arrays[key] = np.zeros(len(self.table.label_codes(key)[1]), dtype=np.int64)
        return arr

    def add_rows(self, key: str, node_rows: IntArray, value: int, times: IntArray | None = None) -> bool:
        """Add ``value`` once per entry of ``node_rows`` (node rows, repeats allowed) to its node's
        domain, or ``times[i]`` times for entry ``i`` when ``times`` is given; rows whose node lacks
        ``key`` are ignored. True if any row had the key."""
        codes = self.table.label_codes(key)[0][node_rows]
        keep = codes >= 0
        codes = codes[keep]
        if codes.shape[0] == 0:
            return False
        arr = self._array(key)
        if times is None:
            arr += np.bincount(codes, minlength=arr.shape[0]).astype(np.int64) * value
        else:
            np.add.at(arr, codes, times[keep] * value)
        return True

    def add_row(self, key: str, node_row: int, value: int) -> bool:
        code = int(self.table.label_codes(key)[0][node_row])
        if code < 0:
            return False
        self._array(key)[code] += value
        return True

    def nonzero(self) -> bool:
        """True if some domain's count is not 0 (the Go map is not empty)."""
        return any(bool(a.any()) for a in self.arrays.values())

    def lookup(self, table: NodeTable, key: str, rows: IntArray) -> tuple[BoolArray, IntArray]:
        """For node ``rows`` of ``table``: whether each node has ``key``, and its domain's count."""
        codes = table.label_codes(key)[0][rows]
        present = codes >= 0
        arr = self.arrays.get(key)
        if arr is None or arr.shape[0] == 0:
            return present, np.zeros(len(rows), dtype=np.int64)
        if table is not self.table:
            arr = self._remap(table, key, arr)
            if arr.shape[0] == 0:
                return present, np.zeros(len(rows), dtype=np.int64)
        counts = np.where(present, arr[np.maximum(codes, 0)], 0).astype(np.int64)
        return present, counts

    def _remap(self, table: NodeTable, key: str, arr: IntArray) -> IntArray:
        """``arr`` re-indexed by another node table's codes (the nodes changed since PreFilter)."""
        src = self.table.label_codes(key)[1]
        dst = table.label_codes(key)[1]
        out = np.zeros(len(dst), dtype=np.int64)
        for value, code in dst.items():
            s = src.get(value)
            if s is not None:
                out[code] = arr[s]
        return out
