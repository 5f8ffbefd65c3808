"""Canary plugins: a variant of a profile in which one plugin is served by another endpoint (a
RemotePlugins endpoint with a ``canary`` block, docs/plugins-live.md "Canary").

The registry a configuration is resolved with carries the canary (:class:`CanarySource`, set by
:meth:`framework.remote.RemotePlugins.register`); each profile that runs the plugin is built twice,
the second time with the canary endpoint's plugin in place of the stable one's (:class:`Canary`, on
the stable Framework's ``canary``). A live change of ``--plugins`` builds both anew, so the fraction
changes between two scheduling cycles like any other configuration.

Each scheduling cycle picks its variant once, from the pod: a pod whose labels match the selector
(if any) and whose uid falls in the fraction (:func:`bucket`, stable across restarts and processes)
is scheduled by the variant, Reserve to Bind included.
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pluginhost.model import Pod

__all__ = [
    "BUCKETS", "CANARY", "STABLE", "Canary", "CanarySource", "bucket", "canary_profile", "for_pod", "with_variants",
]

STABLE = "stable"
CANARY = "canary"
#: A uid's bucket is one of this many; a pod is in the fraction when its bucket < fraction * BUCKETS.
BUCKETS = 10000


def bucket(uid: str) -> int:
    """The pod's bucket: CRC-32 of its uid (UTF-8) modulo :data:`BUCKETS` (not Python's salted hash)."""
    return zlib.crc32(uid.encode()) % BUCKETS


@dataclass(frozen=True, slots=True)
class CanarySource:
    """What builds a canary plugin: its configuration (``framework.remote.config.CanaryConfig``), its
    endpoint's name, and the factory and points the registry would hold for it."""

    config: Any
    endpoint: str
    factory: Callable[..., Any]
    points: frozenset[str]


@dataclass(slots=True)
class Canary:
    """A profile's canary variant: the Framework that schedules the chosen pods."""

    source: CanarySource
    variant: Any  # the Framework, with the canary's plugin in place of the stable one's

    @property
    def plugin(self) -> str:
        return str(self.source.config.plugin)

    def chooses(self, pod: Pod) -> bool:
        config = self.source.config
        labels = config.match_labels
        if labels is not None and any(pod.labels.get(k) != v for k, v in labels.items()):
            return False
        return bool(bucket(pod.uid) < config.fraction * BUCKETS)


def canary_profile(profile: Any, config: Any) -> Any:
    """The ProfileConfig the variant is built from: ``profile`` with the canary block's ``args`` (in
    place of the profile's for the plugin) and ``weight`` (for the plugin's Score), where given."""
    if config.args is None and (config.weight is None or config.plugin not in profile.score_weights):
        return profile
    args, weights = dict(profile.plugin_args), dict(profile.score_weights)
    if config.args is not None:
        args[config.plugin] = dict(config.args)
    if config.weight is not None and config.plugin in weights:
        weights[config.plugin] = config.weight
    return dataclasses.replace(profile, plugin_args=args, score_weights=weights)


def for_pod(fwk: Any, pod: Pod, last: str = "") -> tuple[Any, dict[str, Any] | None]:
    """The Framework that schedules ``pod`` now: the profile's canary variant when its canary chooses
    the pod, else the profile itself; and, for a profile with a canary, what explain says about it
    (``variant``: ``stable`` or ``canary``, the ``plugin``, the ``canary`` and ``stable`` endpoints, and
    ``lastCycle``: the variant the pod's last scheduling cycle ran, when ``last`` gives it)."""
    canary = getattr(fwk, "canary", None)
    if canary is None:
        return fwk, None
    chosen = canary.chooses(pod)
    about: dict[str, Any] = {"variant": CANARY if chosen else STABLE, "plugin": canary.plugin,
                             "canary": canary.source.endpoint, "stable": str(canary.source.config.of)}
    if last:
        about["lastCycle"] = last
    return (canary.variant if chosen else fwk), about


def with_variants(profiles: Mapping[str, Any]) -> list[Any]:
    """The Frameworks of ``profiles`` followed, each, by its canary variant (if it has one)."""
    out: list[Any] = []
    for fwk in profiles.values():
        out.append(fwk)
        canary = getattr(fwk, "canary", None)
        if canary is not None:
            out.append(canary.variant)
    return out
