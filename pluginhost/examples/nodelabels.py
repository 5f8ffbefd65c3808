"""NodeLabels: filter and score nodes on labels that pods ask for in annotations.

    metadata:
      annotations:
        example.outrigger.io/require-node-labels: "disktype=ssd,rack"   # key=value, or key (present)
        example.outrigger.io/prefer-node-labels: "topology.kubernetes.io/zone=zone-a"

- **PreFilter** parses the annotations once per cycle and hands them to Filter and Score in CycleState
  (a :class:`~pluginhost.state.StateValue` under ``NodeLabels/want``, a declared state key, so it
  travels with the Filter request at no extra round trip). A pod without the annotations gets Skip:
  its Filter is not called at all.
- **Filter** rejects nodes missing a required label; **Score** gives each node ``100 * matched
  preferences / preferences``. Both are vectorized over the batch with the snapshot's label index, the
  way in-tree plugins do it, and ``filter_and_score`` lets a plugin host answer both in one exchange.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import Pod
from pluginhost.plugin import (
    MAX_NODE_SCORE,
    CycleState,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PreFilterPlugin,
    PreFilterResult,
    ScorePlugin,
    check_args,
)
from pluginhost.state import StateValue
from pluginhost.status import SUCCESS, Code, Status

__all__ = ["PREFER", "REQUIRE", "STATE_KEY", "NodeLabels", "parse_labels"]

REQUIRE = "example.outrigger.io/require-node-labels"
PREFER = "example.outrigger.io/prefer-node-labels"
STATE_KEY = "NodeLabels/want"


def parse_labels(text: str) -> list[tuple[str, str | None]]:
    """``"a=b,c"`` as ``[("a", "b"), ("c", None)]`` (None: the label must merely exist)."""
    out: list[tuple[str, str | None]] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        out.append((key.strip(), value.strip() if eq else None))
    return out


def _matches(batch: NodeBatch, key: str, value: str | None) -> npt.NDArray[np.bool_]:
    codes, vocab = batch.snapshot.table.label_codes(key)
    mine = codes[batch.rows]
    out: npt.NDArray[np.bool_] = mine >= 0 if value is None else mine == vocab.get(value, -2)
    return out  # (-2 never occurs: a value no node has matches nothing)


class NodeLabels(PreFilterPlugin, FilterPlugin, ScorePlugin):
    """Node-label requirements and preferences from pod annotations (see the module docstring)."""

    name = "NodeLabels"
    state_keys = (STATE_KEY,)
    filter_and_score = True

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = check_args(args, self.name)  # it takes none

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        require = parse_labels(pod.annotations.get(REQUIRE, ""))
        prefer = parse_labels(pod.annotations.get(PREFER, ""))
        if not require and not prefer:
            return None, Status.skip()
        state.write(STATE_KEY, StateValue.json({"require": require, "prefer": prefer}))
        return None, SUCCESS

    def _want(self, state: CycleState) -> dict[str, list[list[Any]]]:
        value = state.get(STATE_KEY)
        return value.as_json() if isinstance(value, StateValue) else {"require": [], "prefer": []}

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        ok = np.ones(len(batch), dtype=np.bool_)
        missing = []
        for key, value in self._want(state)["require"]:
            ok &= _matches(batch, key, value)
            missing.append(f"{key}={value}" if value is not None else key)
        if ok.all():
            return FilterResult.passing(len(batch))
        return FilterResult.from_mask(
            ~ok, Code.UnschedulableAndUnresolvable, f"node(s) didn't have the required label(s) {','.join(missing)}"
        )

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> npt.NDArray[np.int64]:
        prefer = self._want(state)["prefer"]
        if not prefer:
            return np.zeros(len(batch), dtype=np.int64)
        hits = np.zeros(len(batch), dtype=np.int64)
        for key, value in prefer:
            hits += _matches(batch, key, value)
        return hits * MAX_NODE_SCORE // len(prefer)
