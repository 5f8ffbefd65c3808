"""Status: the result of running a plugin at an extension point.

It mirrors kube-scheduler's ``framework.Status`` and the ``outrigger.v1.Code`` enum in ``proto/``
value for value (a test keeps the two in step):

- ``Success``: the plugin ran and allows the pod.
- ``Error``: an internal failure (bad plugin answer, crash, timeout); the pod is requeued with backoff.
- ``Unschedulable``: the pod does not fit now; preemption may help.
- ``UnschedulableAndUnresolvable``: the pod does not fit and preemption cannot change that.
- ``Wait``: a Permit plugin holds the pod until it is allowed, rejected or times out.
- ``Skip``: the plugin has nothing to do for this pod (PreFilter/PreScore skip the plugin's
  Filter/Score; a Bind plugin passes to the next one).
- ``Pending``: the pod waits for something outside the scheduler (e.g. a resource claim).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["SUCCESS", "Code", "Status"]


class Code(enum.IntEnum):
    """The framework's status codes, in kube-scheduler's order."""

    Success = 0
    Error = 1
    Unschedulable = 2
    UnschedulableAndUnresolvable = 3
    Wait = 4
    Skip = 5
    Pending = 6

    @property
    def rejects(self) -> bool:
        """True for the codes that reject a pod (anything but Success and Skip)."""
        return self not in (Code.Success, Code.Skip)


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's answer: a code, user-readable reasons, and the plugin that produced it."""

    code: Code = Code.Success
    reasons: tuple[str, ...] = ()
    plugin: str = ""
    error: BaseException | None = field(default=None, compare=False)

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.Unschedulable, tuple(reasons), plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.UnschedulableAndUnresolvable, tuple(reasons), plugin)

    @classmethod
    def failure(cls, message: str, *, plugin: str = "", error: BaseException | None = None) -> Status:
        """An ``Error`` status; ``message`` says what went wrong in a user's words."""
        return cls(Code.Error, (message,), plugin, error)

    @classmethod
    def skip(cls) -> Status:
        return _SKIP

    @classmethod
    def wait(cls, *reasons: str, plugin: str = "") -> Status:
        return cls(Code.Wait, tuple(reasons), plugin)

    @property
    def ok(self) -> bool:
        return self.code is Code.Success

    @property
    def is_skip(self) -> bool:
        return self.code is Code.Skip

    @property
    def is_rejected(self) -> bool:
        """Unschedulable or UnschedulableAndUnresolvable."""
        return self.code in (Code.Unschedulable, Code.UnschedulableAndUnresolvable)

    def with_plugin(self, plugin: str) -> Status:
        """This status attributed to ``plugin`` (kept if already attributed)."""
        if self.plugin:
            return self
        return Status(self.code, self.reasons, plugin, self.error)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"code": self.code.name, "reasons": list(self.reasons)}
        if self.plugin:
            out["plugin"] = self.plugin
        return out

    def __str__(self) -> str:
        text = self.code.name
        if self.plugin:
            text += f" [{self.plugin}]"
        if self.reasons:
            text += ": " + self.message()
        return text


SUCCESS = Status()
_SKIP = Status(Code.Skip)
