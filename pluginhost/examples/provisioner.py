"""Provisioner: a slow PreBind that prepares something for a pod (a volume, say) and can fail.

    metadata:
      annotations:
        example.outrigger.io/provision: "scratch-10Gi"      # what to provision; pods without it are skipped
        example.outrigger.io/provision-fail: "once"         # "once": the first attempt fails; "always"

- **Reserve** takes a claim for the pod on its node; **Unreserve** releases it. When PreBind fails,
  the framework unreserves the pod in every Reserve plugin, here across a process boundary.
- **PreBind** provisions (it takes ``delaySeconds``) and fails as the annotation asks; the framework
  then unreserves the pod and requeues it with backoff.
- **PreBindPreFlight** answers Skip for pods without the annotation.

Claims are files under ``root`` (args; a temporary directory when unset), named after the pod's uid,
so the state is visible from outside the plugin host: after a run, only bound pods hold a claim.
Args: ``root``, ``delaySeconds`` (default 0.05).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, Handle, PreBindPlugin, ReservePlugin, check_args
from pluginhost.status import SUCCESS, Status

__all__ = ["FAIL", "PROVISION", "Provisioner"]

PROVISION = "example.outrigger.io/provision"
FAIL = "example.outrigger.io/provision-fail"


class Provisioner(ReservePlugin, PreBindPlugin):
    """Claims at Reserve, provisions at PreBind (slowly, maybe failing), releases at Unreserve."""

    name = "Provisioner"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        args = check_args(args, self.name, "root", "delaySeconds")
        self.root = Path(args.get("root") or tempfile.mkdtemp(prefix="outrigger-provisioner-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.delay = float(args.get("delaySeconds", 0.05))
        self._failed_once: set[str] = set()

    def claim(self, pod: Pod) -> Path:
        return self.root / f"{pod.uid}.claim"

    def claims(self) -> list[str]:
        """The uids holding a claim."""
        return sorted(p.name.removesuffix(".claim") for p in self.root.glob("*.claim"))

    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if PROVISION not in pod.annotations:
            return SUCCESS
        self.claim(pod).write_text(f"{pod.key} {pod.annotations[PROVISION]} on {node_name}\n")
        return SUCCESS

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        try:
            os.unlink(self.claim(pod))
        except FileNotFoundError:
            pass

    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        return SUCCESS if PROVISION in pod.annotations else Status.skip()

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        if PROVISION not in pod.annotations:
            return Status.skip()
        await asyncio.sleep(self.delay)
        fail = pod.annotations.get(FAIL, "")
        if fail == "always" or (fail == "once" and pod.uid not in self._failed_once):
            self._failed_once.add(pod.uid)
            what = pod.annotations[PROVISION]
            return Status.failure(f"provisioning {what!r} for pod {pod.key} on {node_name} failed")
        return SUCCESS
