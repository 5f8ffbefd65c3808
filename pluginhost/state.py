"""CycleState values that cross process boundaries, and their wire form.

In-process plugins may keep any Python object in :class:`~pluginhost.plugin.CycleState`. A value that a
plugin in another process (or another language) must read is a :class:`StateValue`: a content type and
bytes, exactly the ``outrigger.v1.StateEntry`` on the wire::

    state.write("NodeLabels/prefilter", StateValue.json({"require": {"disk": "ssd"}}))
    wanted = state.read("NodeLabels/prefilter").as_json()

Keys a remote plugin declares (``state_keys``) travel with its requests; its writes ride back on its
replies. A declared key holding anything but a :class:`StateValue` is an error naming the key and the
plugin (:class:`StateValueError`): only bytes can cross the wire, and silently dropping the key would
make the remote plugin behave differently from the in-process one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pluginhost.errors import OutriggerError
from pluginhost.pb import types

__all__ = [
    "JSON",
    "StateValue",
    "StateValueError",
    "apply_entries",
    "entries_for",
    "entry_of",
    "value_of",
]

JSON = "application/json"


class StateValueError(OutriggerError, TypeError):
    """A CycleState value that must cross the wire is not a :class:`StateValue`."""


@dataclass(frozen=True, slots=True)
class StateValue:
    """A CycleState value any process can read: ``data`` tagged with a MIME-like ``content_type``
    (``"application/json"``, ``"application/x-protobuf; type=example.v1.Foo"``; empty: opaque)."""

    content_type: str
    data: bytes

    @classmethod
    def json(cls, value: Any) -> StateValue:
        """``value`` as compact JSON."""
        return cls(JSON, json.dumps(value, separators=(",", ":"), sort_keys=True).encode())

    def as_json(self) -> Any:
        """The value decoded as JSON (whatever its content type says: the caller knows the key)."""
        return json.loads(self.data)

    def clone(self) -> StateValue:
        return self  # immutable


def entry_of(key: str, value: Any, *, plugin: str = "") -> types.StateEntry:
    """``value`` under ``key`` as a ``StateEntry``; :class:`StateValueError` if it is not a StateValue."""
    if not isinstance(value, StateValue):
        owner = f" for plugin {plugin!r}" if plugin else ""
        raise StateValueError(
            f"cycle state key {key!r}{owner} holds a {type(value).__name__}, not a StateValue: only "
            "StateValue(content_type, bytes) values can be shared with plugins in other processes"
        )
    return types.StateEntry(key=key, content_type=value.content_type, value=value.data)


def value_of(entry: types.StateEntry) -> StateValue:
    return StateValue(entry.content_type, bytes(entry.value))


def entries_for(state: Any, keys: Iterable[str], *, plugin: str) -> list[types.StateEntry]:
    """The entries of ``state`` (a CycleState) for ``keys``; absent keys are omitted."""
    out = []
    for key in keys:
        value = state.get(key, _MISSING)
        if value is not _MISSING:
            out.append(entry_of(key, value, plugin=plugin))
    return out


def apply_entries(state: Any, entries: Sequence[types.StateEntry]) -> None:
    """Apply writes (and deletes) from a reply to ``state``, in order."""
    for entry in entries:
        if entry.deleted:
            state.delete(entry.key)
        else:
            state.write(entry.key, value_of(entry))


_MISSING: Any = object()
