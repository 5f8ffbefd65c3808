"""Plugins for the security tests, served by real plugin host processes (``tests/test_security.py``).

- :class:`Hold` keeps every pod at Permit (Wait, 60 s) after writing a value to its cycle's CycleState,
  and remembers the pod's cycle id in this process.
- :class:`CycleSnoop` tries, in PreFilter, to use the CycleState of its own cycle and of the cycle of
  the held pod its pod names (annotation ``snoop.example/target``), through the framework's CycleState
  service, and reports each outcome as a reason of an Unschedulable status, so the test reads them
  from the pod's last status.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from pluginhost.context import context
from pluginhost.handle_client import HandleClient
from pluginhost.model import Pod
from pluginhost.plugin import CycleState, Handle, PermitPlugin, PreFilterPlugin, PreFilterResult
from pluginhost.state import StateValue
from pluginhost.status import Status

TARGET = "snoop.example/target"
HELD_CYCLES: dict[str, str] = {}  # held pod name -> its cycle id


class Hold(PermitPlugin):
    name = "Hold"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        pass

    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        state.write("Hold/secret", StateValue.json("only for Hold"))
        HELD_CYCLES[pod.name] = state.cycle_id
        return Status.wait(), 60.0


async def _outcome(what: str, call: Awaitable[Any]) -> str:
    try:
        result = await call
    except Exception as exc:  # the message names the gRPC code the framework answered
        return f"{what}: {exc}"
    return f"{what}: ok {sorted(result) if isinstance(result, dict) else result}"


class CycleSnoop(PreFilterPlugin):
    name = "CycleSnoop"
    needs_snapshot = False

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        pass

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        ctx = context()
        assert isinstance(ctx.handle, HandleClient)
        slow = ctx.handle.cycle_state()
        held = HELD_CYCLES.get(pod.annotations.get(TARGET, ""), "unknown")
        mine = StateValue.json("mine")
        return None, Status.unschedulable(
            await _outcome("write own", slow.write_async(ctx.cycle_id, self.name, {"CycleSnoop/own": mine})),
            await _outcome("read own", slow.read_async(ctx.cycle_id, self.name, [])),
            await _outcome("read held", slow.read_async(held, self.name, [])),
            await _outcome("write held", slow.write_async(held, self.name, {"Hold/secret": mine})),
            await _outcome("read held as Hold", slow.read_async(held, "Hold", [])),
        )


PLUGINS = [Hold, CycleSnoop]
