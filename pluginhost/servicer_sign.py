"""Plugin.SignPod (opportunistic batching): a mixin of :class:`pluginhost.servicer.Servicer`.

The plugin's :meth:`~pluginhost.sign.SignPlugin.sign_pod` answers with fragments whose values go back as
canonical JSON (:func:`~pluginhost.sign.fragment_json`). A plugin that returns no fragments with a
non-success status, or a value JSON cannot carry, says the pod cannot be signed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from pluginhost import pb
from pluginhost.convert import pod_from_proto, status_to_proto
from pluginhost.sign import SignFragment, SignPlugin, fragment_json
from pluginhost.status import Status

__all__ = ["SignServicer"]


class SignServicer:
    """SignPod (mixed into the Servicer)."""

    async def SignPod(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            hosted, inst = self._instance(request.plugin, request.profile)  # type: ignore[attr-defined]
        except Exception as exc:
            await context.abort(getattr(exc, "code", grpc.StatusCode.INTERNAL), str(exc))
        if not isinstance(inst, SignPlugin):
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"plugin {hosted.name!r} does not sign pods")
        pod = pod_from_proto(request.pod)
        call = self._context(hosted, "SignPod", request.profile, pod=pod)  # type: ignore[attr-defined]

        async def run() -> tuple[list[Any], Status]:
            fragments, status = await inst.sign_pod(pod)
            if not status.ok:
                return [], status
            if fragments is None:
                return [], Status.unschedulable("the plugin returned no fragments")
            return _fragments(fragments), status

        (fragments, status), failed = await self._invoke(call, run, ([], Status()))  # type: ignore[attr-defined]
        return pb.plugin.SignReply(status=status_to_proto(failed or status), fragments=fragments if not failed else [])


def _fragments(fragments: Sequence[SignFragment]) -> list[Any]:
    out = []
    for i, fragment in enumerate(fragments):
        if not (isinstance(fragment, tuple) and len(fragment) == 2 and isinstance(fragment[0], str) and fragment[0]):
            raise TypeError(f"sign fragment {i} must be a (non-empty key, value) pair, not {fragment!r:.60}")
        out.append(pb.plugin.SignFragment(key=fragment[0], value_json=fragment_json(fragment[1])))
    return out
