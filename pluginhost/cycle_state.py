"""The CycleState a hosted plugin sees during one call: :class:`RemoteCycleState`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pluginhost import pb
from pluginhost.handle_client import CycleStateClient
from pluginhost.plugin import CycleState
from pluginhost.snapshot import Snapshot
from pluginhost.state import StateValue, entry_of, value_of

__all__ = ["RemoteCycleState"]

_MISSING: Any = object()


class RemoteCycleState(CycleState):
    """The CycleState a hosted plugin sees during one call (or one Filter/Score stream).

    It starts with the entries of the plugin's declared ``state_keys`` sent with the request. Writes
    and deletes are recorded and sent back on the reply. Reading a key that was not declared asks the
    framework's CycleState service (a blocking round trip); values must be :class:`StateValue`.
    """

    __slots__ = ("_declared", "_plugin", "_slow", "_writes")

    def __init__(
        self,
        cycle_id: str,
        snapshot: Snapshot | None,
        *,
        plugin: str,
        declared: Iterable[str] = (),
        entries: Iterable[Any] = (),
        slow: CycleStateClient | None = None,
    ) -> None:
        super().__init__(cycle_id, snapshot)
        self._plugin = plugin
        self._declared = frozenset(declared)
        self._slow = slow
        self._writes: dict[str, StateValue | None] = {}
        for e in entries:
            self._data[e.key] = value_of(e)

    def _fetch(self, key: str) -> Any:
        if key in self._data:
            return self._data[key]
        if key in self._declared or key in self._writes or self._slow is None or not self.cycle_id:
            return _MISSING  # a declared key that was not sent does not exist
        found = self._slow.read(self.cycle_id, self._plugin, [key])
        if key in found:
            self._data[key] = found[key]
            return found[key]
        return _MISSING

    def read(self, key: str) -> Any:
        value = self._fetch(key)
        if value is _MISSING:
            raise KeyError(f"cycle state has no key {key!r}")
        return value

    def get(self, key: str, default: Any = None) -> Any:
        value = self._fetch(key)
        return default if value is _MISSING else value

    def write(self, key: str, value: Any) -> None:
        entry_of(key, value, plugin=self._plugin)  # raises StateValueError naming the key and plugin
        self._data[key] = value
        self._writes[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)
        self._writes[key] = None

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._fetch(key) is not _MISSING

    def drain_writes(self) -> list[Any]:
        """The writes since the last drain, as ``StateEntry`` messages (deletes flagged)."""
        out = [
            pb.types.StateEntry(key=k, deleted=True) if v is None else entry_of(k, v, plugin=self._plugin)
            for k, v in self._writes.items()
        ]
        self._writes.clear()
        return out
