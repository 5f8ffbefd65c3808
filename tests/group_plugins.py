"""Plugins for the live PodGroup tests (``tests/test_kube_podgroup_live.py``); no tests here. A plugin
host imports this module, so it does not import pytest.

:class:`HoldPreBind` holds the first PreBind of each pod named in its ``hold`` args for up to
``seconds`` (then lets it go), and writes ``<markDir>/<pod name>`` (the node) when it starts holding
one, so that a test knows a group's binding is in flight; a PreBind of a pod whose mark exists (a
restarted framework's) passes at once."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, Handle, PreBindPlugin, check_args
from pluginhost.status import SUCCESS, Status

__all__ = ["HoldPreBind"]


class HoldPreBind(PreBindPlugin):
    """Holds the first PreBind of the pods named in ``hold`` (see the module docstring)."""

    name = "HoldPreBind"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self.args = check_args(args, self.name, "hold", "seconds", "markDir")
        self.hold = {str(n) for n in self.args.get("hold") or ()}
        self.seconds = float(self.args.get("seconds", 120))
        self.mark_dir = Path(str(self.args.get("markDir") or "."))

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        mark = self.mark_dir / pod.name
        # The mark, not this instance, remembers a hold: a framework that connects anew configures new instances.
        if pod.name not in self.hold or mark.exists():
            return SUCCESS
        mark.write_text(node_name)
        await asyncio.sleep(self.seconds)
        return SUCCESS
