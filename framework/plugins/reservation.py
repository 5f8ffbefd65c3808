"""Reservation: lets a pod consume a Reservation its owners select (Koordinator's reservation plugin).

- Filter and Score transformer: on the node of each Available reservation the pod may consume, the
  reserve pod's held resources (and its pod slot) look free, for this pod's cycle only. Other pods
  never get this view, so to them the reserved resources stay used.
- Score: 100 on nodes with such a reservation, 0 elsewhere (owners prefer their reservation).
- Reserve / Unreserve: the pod takes what it needs from the reservation (the reserve pod shrinks in
  the cache) and gives it back if the cycle fails later. PostBind: an allocate-once reservation is
  Succeeded.

The reservations themselves are the scheduler's (:mod:`framework.reservations`), reached through the
handle; without them (a handle that has none) the plugin does nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import PODS, Pod
from pluginhost.plugin import (
    CycleState,
    FilterTransformer,
    Handle,
    NodeBatch,
    PostBindPlugin,
    ReservePlugin,
    ScoreTransformer,
)
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Status
from pluginhost.view import NodeChange

from ..observe import tracing

__all__ = ["Reservation"]

_MATCHED = "Reservation/matched"  # CycleState: node name -> reservation name, for this pod
_ALLOCATED = "Reservation/allocated"  # CycleState: the reservation the pod took from at Reserve


class Reservation(FilterTransformer, ScoreTransformer, ReservePlugin, PostBindPlugin):
    name = "Reservation"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.handle = handle

    def _manager(self) -> Any:
        get = getattr(self.handle, "reservations", None)
        return get() if callable(get) else None

    def _matched(self, state: CycleState, pod: Pod) -> dict[str, str]:
        """Node name -> the reservation ``pod`` would consume there (the first by name)."""
        found = state.get(_MATCHED)
        if found is not None and found[0] is pod:
            return found[1]  # type: ignore[no-any-return]
        manager = self._manager()
        out: dict[str, str] = {}
        if manager is not None:
            for rec in manager.matching(pod):
                out.setdefault(rec.node_name, rec.name)
        state.write(_MATCHED, (pod, out))
        return out

    def _changes(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> list[NodeChange] | None:
        matched = self._matched(state, pod)
        if not matched:
            return None
        span = tracing.get_current_span()
        if span.is_recording():
            span.set_attribute("outrigger.reservation.matched", sorted(matched.values()))
        manager = self._manager()
        out = []
        for node, name in matched.items():
            rec = manager.get(name)
            if rec is None or snapshot.row(node) is None:
                continue
            freed = {r: -a for r, a in rec.held.items() if r != PODS and a > 0}
            if manager.cache.node_of(rec.uid) == node:
                freed[PODS] = -1  # the reserve pod's slot
            out.append(NodeChange(node, requested=freed))
        return out

    async def before_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[Sequence[NodeChange] | None, Status]:
        return self._changes(state, pod, snapshot), SUCCESS

    async def before_score(
        self, state: CycleState, pod: Pod, nodes: NodeBatch
    ) -> tuple[Sequence[NodeChange] | None, Status]:
        return self._changes(state, pod, nodes.snapshot), SUCCESS

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        matched = self._matched(state, pod)
        if not matched:
            return np.zeros(len(batch), dtype=np.int64)
        return np.asarray([100 if n in matched else 0 for n in batch.names], dtype=np.int64)

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        name = self._matched(state, pod).get(node_name)
        if name is not None:
            self._manager().allocate(name, pod)
            state.write(_ALLOCATED, name)
        return SUCCESS

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        name = state.get(_ALLOCATED)
        if name is not None:
            self._manager().release(name, pod)
            state.delete(_ALLOCATED)

    async def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        name = state.get(_ALLOCATED)
        if name is not None:
            self._manager().confirm(name, pod)
