"""Sign: what a plugin's answers for a pod depend on (kube-scheduler 1.37's ``SignPlugin``), the input of
opportunistic batching.

A profile batches pods (a pod identical to the one scheduled just before it is offered that pod's
next-best node, so its cycle filters one node and does not score) only when every PreFilter, Filter,
PreScore and Score plugin of it signs. A plugin signs by deriving from :class:`SignPlugin` too and
returning the pod's :data:`SignFragment` s: two pods with equal fragments from every plugin must get the
same answers from it on the same nodes. Returning ``None`` with an Unschedulable status says "this pod
cannot be signed" (it is then scheduled on its own).

For a hosted plugin the framework calls ``sign_pod`` once per pod and resourceVersion (Plugin.SignPod)
and only in profiles where batching can apply; the method gets no CycleState.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pluginhost.model import Pod
from pluginhost.plugin import Plugin, Point
from pluginhost.status import Status

__all__ = ["SIGN_POINT", "SignFragment", "SignPlugin", "fragment_json"]

#: One part of a pod's signature: a key named after the pod field it reads (``"v1.Pod.Spec.Tolerations"``;
#: with a ``()`` suffix naming the processing, ``"v1.Pod.Spec.ContainerRequestsAndOverheads()"``) and a
#: JSON-serializable value. Plugins reading the same thing the same way use the same key.
SignFragment = tuple[str, Any]


class SignPlugin(Plugin):
    """Mixin for a PreFilter, Filter, PreScore or Score plugin that lets its profile batch pods."""

    async def sign_pod(self, pod: Pod) -> tuple[Sequence[SignFragment] | None, Status]:
        """The pod's fragments with Success, or (None, Unschedulable) when the pod cannot be signed."""
        raise NotImplementedError


#: The row of the points table for Sign (a part of the scheduling points, declared by deriving from
#: :class:`SignPlugin`).
SIGN_POINT = Point("sign", SignPlugin, "sign_pod", "EXTENSION_POINT_SIGN", None, "part")


def fragment_json(value: Any) -> bytes:
    """A fragment's value as the contract sends it: canonical JSON (sorted keys, no spaces), so equal
    values are equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_plain).encode()


def _plain(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"a sign fragment's value must be JSON-serializable, not {type(value).__name__}")
