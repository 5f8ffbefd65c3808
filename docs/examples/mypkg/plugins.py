from typing import Any

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterPlugin, FilterResult, Handle, NodeBatch
from pluginhost.status import Code


class OnlyLabelled(FilterPlugin):
    """Keeps pods off nodes that lack a label (args: ``label``, default ``example.com/ok``)."""

    name = "OnlyLabelled"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.key = (args or {}).get("label", "example.com/ok")

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        codes, _ = batch.snapshot.table.label_codes(self.key)  # per node: the label's value code, -1 if absent
        return FilterResult.from_mask(codes[batch.rows] < 0, Code.UnschedulableAndUnresolvable,
                                      f"node(s) didn't have label {self.key}")
