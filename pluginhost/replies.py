"""How a hosted plugin's answers are packed into the Plugin service's replies: Filter results, queue
sort keys, and lookahead verdicts as packed columns (see ``PodVerdict`` in plugin.proto)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pluginhost import pb
from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterResult, NodeBatch

__all__ = ["fill_filter_reply", "lookahead_verdict", "sort_key_parts"]


def sort_key_parts(key: Any) -> list[Any]:
    """A plugin's sort key (a value or a tuple of them) as ``SortKeyPart`` messages."""
    parts = []
    for value in key if isinstance(key, tuple | list) else (key,):
        if isinstance(value, bool | int):
            parts.append(pb.plugin.SortKeyPart(int_value=int(value)))
        elif isinstance(value, float):
            parts.append(pb.plugin.SortKeyPart(double_value=value))
        else:
            parts.append(pb.plugin.SortKeyPart(string_value=str(value)))
    return parts


async def lookahead_verdict(inst: Any, state: CycleState, pod: Pod, batch: NodeBatch, verdict: Any, want_filter: bool,
                   want_score: bool) -> None:
    """One pod's lookahead answers over ``batch`` (every node), columnar bytes (see PodVerdict)."""
    n = len(batch)
    passing = None
    if want_filter:
        res = await inst.filter(state, pod, batch)
        if not isinstance(res, FilterResult):
            raise TypeError(f"filter returned {type(res).__name__}, not a FilterResult")
        if len(res) != n:
            raise ValueError(f"filter answered {len(res)} of {n} nodes")
        codes = np.asarray(res.codes, dtype=np.int8)
        verdict.codes = codes.tobytes()
        failed = codes != 0
        if bool(failed.any()):
            if res.reason_index is not None and len(res.reasons) == 1:
                verdict.reason_table.add(reasons=list(res.reasons[0]))
            elif res.reason_index is not None and res.reasons:
                used = np.unique(res.reason_index[failed])
                verdict.reason_table.extend(pb.plugin.ReasonSet(reasons=list(res.reasons[i])) for i in used.tolist())
                if used.shape[0] > 1:  # one reason set needs no index
                    index = np.zeros(n, dtype="<u4")
                    index[failed] = np.searchsorted(used, res.reason_index[failed])
                    verdict.reason_index = index.tobytes()
            passing = ~failed
    if want_score:
        scores = np.zeros(n, dtype="<i8")
        if passing is None:
            scores[:] = np.asarray(await inst.score(state, pod, batch), dtype=np.int64).reshape(-1)
        elif bool(passing.any()):
            scores[passing] = np.asarray(await inst.score(state, pod, batch.take(passing)), np.int64).reshape(-1)
        lo, hi = (int(scores.min()), int(scores.max())) if n else (0, 0)
        for dtype, smallest, largest, width in _SCORE_WIDTHS:
            if smallest <= lo and hi <= largest:
                verdict.scores = scores.astype(dtype).tobytes()
                verdict.score_width = width
                break


# Lookahead scores go in the narrowest little-endian integer that holds them: (dtype, min, max, bytes).
_SCORE_WIDTHS = tuple(
    (d, int(np.iinfo(d).min), int(np.iinfo(d).max), np.dtype(d).itemsize) for d in ("<i1", "<i2", "<i4", "<i8")
)


def fill_filter_reply(reply: Any, res: FilterResult) -> None:
    codes = res.codes
    reply.codes.extend(codes.tolist())
    if res.reason_index is not None and res.reasons and bool((codes != 0).any()):
        reply.reason_table.extend(pb.plugin.ReasonSet(reasons=list(r)) for r in res.reasons)
        reply.reason_index.extend(res.reason_index.tolist())
