"""Hooks a plugin may declare beyond its extension points, for work that is no extension point.

The runtime and the observers know a plugin only by what it declares: the base classes of its points
(:mod:`pluginhost.plugin`) and these. The remote adapter declares them; an in-process plugin may too.

- :class:`BeforeCycle`: told of each scheduling cycle of its profile before PreFilter, with the pods
  queued behind the cycle's pod (a remote plugin with lookahead asks its host for their answers).
- :class:`FilterAhead`: a Filter plugin that can be sent a window of nodes ahead of its turn and work
  on it while the plugins before it run.
- :class:`CostlyFilter`: a Filter plugin whose cost a node is high enough that the runtime sends it
  nodes a few at a time and stops once enough are feasible (:mod:`framework.filterwindow`).
- :class:`OutOfProcess`: a plugin served by another process: traces show its calls as client spans
  naming where it is served, and its debug endpoints are its host's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterPlugin, FilterResult, NodeBatch, Plugin
from pluginhost.snapshot import Snapshot

__all__ = ["BeforeCycle", "CostlyFilter", "FilterAhead", "OutOfProcess", "Upcoming"]

Upcoming = Callable[[int], Sequence[Pod]]
"""``upcoming(n)``: the next ``n`` pods queued for the profile (at most ``n``; computed when asked)."""


class BeforeCycle(Plugin):
    """Told before each scheduling cycle of the plugin's profile (:meth:`before_cycle`)."""

    def before_cycle(self, snapshot: Snapshot, pod: Pod, upcoming: Upcoming, at_filter: bool,
                     at_score: bool) -> None:
        """The cycle of ``pod`` on ``snapshot`` starts; ``at_filter``/``at_score``: whether the
        profile runs the plugin at Filter and at Score. Must not block; a failure is logged and the
        cycle goes on (the hook cannot change a cycle's outcome)."""


class FilterAhead(FilterPlugin):
    """A Filter plugin that can start on a window before its turn (:meth:`prefetch_filter`)."""

    async def prefetch_filter(
        self, state: CycleState, pod: Pod, batch: NodeBatch
    ) -> Awaitable[FilterResult] | FilterResult:
        """Start Filter on ``batch`` now and return its result, or what collects it at the plugin's
        turn (the runtime may drop it unread when earlier plugins reject every node)."""
        raise NotImplementedError


class CostlyFilter(FilterPlugin):
    """A Filter plugin that may cost much a node (:meth:`filter_is_costly`)."""

    def filter_is_costly(self, state: CycleState) -> bool:
        """Whether this cycle's Filter (``state`` as PreFilter left it) costs enough a node that the
        runtime should try no more nodes than it needs; the cycle's results are the same either way."""
        return False


class OutOfProcess:
    """A plugin served by another process."""

    @property
    def served_by(self) -> str:
        """Where the plugin is served (the remote endpoint's name)."""
        raise NotImplementedError

    def debug_paths(self) -> list[str]:
        """The debug endpoints the plugin's host serves for it."""
        return []

    async def debug(self, path: str, profile: str) -> str:
        """The JSON its host answers for debug endpoint ``path`` of ``profile``'s plugin; a failure
        raises :class:`~framework.remote.errors.RemotePluginError` carrying the gRPC code."""
        raise NotImplementedError
