"""Sign for a remote plugin: a mixin a :class:`~framework.remote.adapter.RemotePlugin` class derives from
when its manifest declares ``EXTENSION_POINT_SIGN`` (:func:`framework.remote.classes.adapter_class`), so
its profiles can batch pods (:func:`framework.batching.pod_signer`).

Each answer is kept for the pod object it was asked of (a pod's update is a new object, so the key is
the pod's uid and version): a pod tried again costs no call, and a new pod one unary call. The cache is
bounded (:data:`CACHE_SIZE` pods, the oldest forgotten first).
"""

from __future__ import annotations

import collections
import json
import logging
from typing import cast

from pluginhost import pb
from pluginhost.convert import pod_to_proto, status_from_proto
from pluginhost.model import Pod
from pluginhost.sign import SignFragment, SignPlugin
from pluginhost.status import Code, Status

from .adapter import RemotePlugin
from .errors import RemotePluginError

__all__ = ["CACHE_SIZE", "RemoteSign"]

log = logging.getLogger("outrigger.remote")

#: Pods whose answers a remote signer keeps.
CACHE_SIZE = 4096

_Answer = tuple[tuple[SignFragment, ...] | None, Status]


class RemoteSign(SignPlugin):
    """SignPod on the plugin's host, its answers kept per pod object."""

    #: Calls answered from the cache, and calls made (for tests and the stats page).
    sign_cache_hits = 0
    sign_calls = 0

    async def sign_pod(self, pod: Pod) -> _Answer:
        adapter = cast(RemotePlugin, self)
        cache: collections.OrderedDict[str, tuple[Pod, _Answer]] | None = adapter.__dict__.get("_sign_cache")
        if cache is None:
            cache = adapter.__dict__["_sign_cache"] = collections.OrderedDict()
        kept = cache.get(pod.uid)
        if kept is not None and kept[0] is pod:
            self.sign_cache_hits += 1
            cache.move_to_end(pod.uid)
            return kept[1]
        self.sign_calls += 1
        answer = await _ask(adapter, pod)
        if answer[1].code is not Code.Error:  # an error is not kept: the next cycle asks again
            cache[pod.uid] = (pod, answer)
            cache.move_to_end(pod.uid)
            while len(cache) > CACHE_SIZE:
                cache.popitem(last=False)
        return answer


async def _ask(adapter: RemotePlugin, pod: Pod) -> _Answer:
    request = pb.plugin.PodRequest(plugin=adapter.name, profile=adapter.profile, pod=pod_to_proto(pod))
    try:
        reply = await adapter._call("Sign", "SignPod", request, config_point="sign")
    except RemotePluginError as exc:
        # As kube-scheduler: a signer's error leaves the pod unbatched, never fails its cycle.
        log.warning("SignPod of plugin %r failed; pod %s is scheduled without batching: %s", adapter.name, pod.key, exc)
        return None, Status.failure(f"SignPod failed: {exc}", plugin=adapter.name)
    status = status_from_proto(reply.status)
    if not status.ok:
        return None, status.with_plugin(adapter.name)
    fragments: list[SignFragment] = []
    for f in reply.fragments:
        try:
            fragments.append((str(f.key), json.loads(f.value_json)))
        except ValueError as exc:
            return None, Status.failure(f"SignPod: fragment {f.key!r} is not JSON: {exc}", plugin=adapter.name)
    return tuple(fragments), status

