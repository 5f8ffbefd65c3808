"""PreferZone, two versions of one Score plugin for the live walk-through (docs/plugins-live.md):
both are named ``PreferZone``, so one can shadow or canary the other.

- ``PreferZone`` (v1) scores 100 on nodes of the zone in its args (``zone``, default ``zone-b``),
  0 elsewhere.
- ``PreferZoneV2`` (v2) does the same, except that a pod labelled ``example.com/zone`` gets the zone
  it names: the new feature a team wants to try on real traffic first.
"""

from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import Pod
from pluginhost.plugin import MAX_NODE_SCORE, CycleState, Handle, NodeBatch, ScorePlugin

ZONE = "topology.kubernetes.io/zone"
POD_ZONE = "example.com/zone"


class PreferZone(ScorePlugin):
    """v1: nodes of the zone in args score 100 (args: ``zone``, default ``zone-b``)."""

    name = "PreferZone"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.zone = (args or {}).get("zone", "zone-b")

    def wanted(self, pod: Pod) -> str:
        return str(self.zone)

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        codes, vocab = batch.snapshot.table.label_codes(ZONE)  # per node: the label's value code, -1 if absent
        hit = codes[batch.rows] == vocab.get(self.wanted(pod), -2)
        return np.where(hit, MAX_NODE_SCORE, 0).astype(np.int64)


class PreferZoneV2(PreferZone):
    """v2: as v1, but a pod's ``example.com/zone`` label names its zone."""

    def wanted(self, pod: Pod) -> str:
        return pod.labels.get(POD_ZONE) or str(self.zone)
