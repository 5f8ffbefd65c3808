"""StateWitness: a Python plugin (served by its own plugin host in the Node.js plugin tests) that reads
the CycleState entry the Node.js TierZone plugin writes, and reports it.

It declares ``TierZone/want`` in ``state_keys``, so the framework sends the entry with its Permit
request. A pod annotated ``example.com/witness: reject`` is rejected at Permit with the entry's
content type and bytes as the reason, which makes them visible through the Scheduler API; other pods
are allowed.
"""

from __future__ import annotations

from typing import Any

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, Handle, PermitPlugin
from pluginhost.state import StateValue
from pluginhost.status import SUCCESS, Status

KEY = "TierZone/want"
ANNOTATION = "example.com/witness"


class StateWitness(PermitPlugin):
    name = "StateWitness"
    state_keys = (KEY,)

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = args or {}

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        if pod.annotations.get(ANNOTATION) != "reject":
            return SUCCESS, 0.0
        value = state.get(KEY)
        seen = f"{value.content_type} {value.data.decode()}" if isinstance(value, StateValue) else "nothing"
        return Status.unschedulable(f"{KEY} on {node_name}: {seen}"), 0.0
