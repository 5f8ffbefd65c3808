"""Filter plugins for tests/test_remote_sign.py, served by a real plugin host; no tests here (a plugin
host imports this module, so it does not import pytest).

:class:`PoolFit` passes the nodes whose ``pool`` label is the pod's ``pool`` label and signs the pod with
that label (its only input), so pods of one pool batch; a pod annotated :data:`UNSIGNABLE` cannot be
signed. :class:`PoolFitUnsigned` filters alike but does not sign, so its profiles never batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterPlugin, FilterResult, Handle, NodeBatch, check_args
from pluginhost.sign import SignFragment, SignPlugin
from pluginhost.status import SUCCESS, Code, Status

__all__ = ["UNSIGNABLE", "PoolFit", "PoolFitUnsigned"]

UNSIGNABLE = "example.outrigger.io/unsignable"


class PoolFitUnsigned(FilterPlugin):
    """Nodes of the pod's pool (see the module docstring)."""

    name = "PoolFitUnsigned"
    needs_snapshot = True

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = check_args(args, self.name)

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        codes, vocab = batch.snapshot.table.label_codes("pool")
        ok = codes[batch.rows] == vocab.get(pod.labels.get("pool", ""), -2)
        if bool(np.all(ok)):
            return FilterResult.passing(len(batch))
        return FilterResult.from_mask(~ok, Code.UnschedulableAndUnresolvable, "node(s) are in another pool")


class PoolFit(PoolFitUnsigned, SignPlugin):
    """PoolFitUnsigned that signs pods with their pool."""

    name = "PoolFit"

    async def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment] | None, Status]:
        if pod.annotations.get(UNSIGNABLE):
            return None, Status.unschedulable("the pod asks not to be batched")
        return [("v1.Pod.Labels[pool]", pod.labels.get("pool", ""))], SUCCESS
