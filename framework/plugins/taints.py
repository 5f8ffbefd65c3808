"""Taints and tolerations, as kube-scheduler's ``v1helper`` has them (``FindMatchingUntoleratedTaint``,
``TolerationsTolerateTaint``), and a per-node-table index of the distinct taint lists, so a pod's
tolerations are evaluated once per distinct list instead of once per node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pluginhost.model import Taint, Toleration
from pluginhost.snapshot import NodeTable

__all__ = [
    "TaintSetIndex",
    "do_not_schedule_taint",
    "find_matching_untolerated_taint",
    "taint_set_index",
    "tolerations_tolerate_taint",
]


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

    index: TaintSetIndex = table.memo("taints/taint-sets", build)
    return index
