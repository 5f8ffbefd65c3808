"""The runners of the PodGroup cycle's points (kube-scheduler 1.37's ``RunPlacementFeasiblePlugins``,
``RunPlacementGeneratePlugins``, ``RunPlacementScorePlugins`` and ``RunPodGroupPostFilterPlugins``), for
one profile's :class:`~framework.runtime.Framework`: each loops over the point's plugins, honours their
codes as upstream does, and wraps a plugin's failure with its name. Policy stays in the plugins."""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pluginhost.placement import (
    Placement,
    PlacementFeasiblePlugin,
    PlacementGeneratePlugin,
    PlacementProgress,
    PlacementScore,
    PlacementScorePlugin,
    PodGroupAssignments,
    PodGroupInfo,
    PodGroupPostFilterPlugin,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
)
from pluginhost.plugin import CycleState, Plugin
from pluginhost.status import Code, Status

from . import features
from .observe.groupcycle import end_point, start_point
from .outcomes import raised_status
from .runtime import Framework

__all__ = [
    "MAX_SCORE",
    "MIN_SCORE",
    "PlacementPluginScores",
    "run_placement_feasible",
    "run_placement_generate",
    "run_placement_score",
    "run_pod_group_post_filter",
]

MIN_SCORE = 0
MAX_SCORE = 100


T = TypeVar("T")


async def _call(fwk: Framework, point: str, pl: Plugin, call: Awaitable[T], **attrs: Any) -> T:
    """Await ``call`` (``pl`` at ``point``) under the profile's observer, when there is one: a traced
    group cycle makes it a span (CLIENT for a remote plugin, whose host's spans join it). ``attrs``
    go on that span. The result (a Status, or a tuple ending with one) or the exception is as is."""
    obs = fwk.observer
    observed = obs.start(point, pl) if obs is not None else None
    if observed is None:
        return await call
    set_attribute = getattr(observed, "set_attribute", None)  # a span's call (a metric's has none)
    if set_attribute is not None:
        for key, value in attrs.items():
            set_attribute(key, value)
    try:
        out = await call
    except BaseException as exc:
        observed.failed(exc)
        raise
    observed.done(out[-1] if isinstance(out, tuple) else out)
    return out


def _raised(pl: Plugin, exc: Exception) -> Status:
    """A plugin's exception as its Error status, which the point's runner words as upstream words a
    plugin's error (kube-scheduler's plugins return errors; a remote plugin past its failurePolicy raises)."""
    return Status(Code.Error, (str(exc),), pl.name, exc)


def _plugins(fwk: Framework, point: str, cls: type) -> list:  # type: ignore[type-arg]
    lists = getattr(fwk, "pod_group_plugins", {})
    return [p for p in lists.get(point, ()) if isinstance(p, cls)]


def placement_feasible_plugins(fwk: Framework) -> list[PlacementFeasiblePlugin]:
    """The profile's PlacementFeasible plugins: every plugin of the profile that implements it (upstream
    wires GangScheduling in whenever GenericWorkload is on; no configuration names the point)."""
    return fwk.placement_feasible_plugins


async def run_placement_feasible(
    fwk: Framework, state: CycleState, group: PodGroupInfo, progress: PlacementProgress
) -> Status:
    """Success when every plugin is satisfied; a Wait is kept while the others run; the first
    Unschedulable is returned at once; an error or any other code is an Error naming the plugin."""
    status = Status()
    for pl in fwk.placement_feasible_plugins:
        st = await pl.placement_feasible(state, group, progress)
        if st.ok:
            continue
        if st.code is Code.Wait:
            status = st.with_plugin(pl.name)
            continue
        if st.code is Code.Unschedulable:
            return st.with_plugin(pl.name)
        if st.code is Code.Error:
            return Status.failure(f"running PlacementFeasible plugin: {st.message()}", plugin=pl.name, error=st.error)
        return Status.failure(f"unexpected status from PlacementFeasible plugin: {st.code.name}", plugin=pl.name)
    return status


async def run_placement_generate(
    fwk: Framework, state: CycleState, group: PodGroupInfo, nodes: tuple[str, ...]
) -> tuple[list[Placement], Status]:
    """The candidate placements: the first PlacementGenerate plugin's (only one runs), or the one
    placement of all ``nodes`` when the profile has none."""
    parent = Placement("", nodes)
    plugins = _plugins(fwk, "placementGenerate", PlacementGeneratePlugin)
    if not plugins:
        return [parent], Status()
    started = start_point("PlacementGenerate")
    try:
        placements, status = await _generate(fwk, plugins[0], state, group, parent)
    except BaseException as exc:
        end_point(started, None, error=exc)
        raise
    end_point(started, status, {"outrigger.placement.count": len(placements)})
    return placements, status


async def _generate(fwk: Framework, pl: PlacementGeneratePlugin, state: CycleState, group: PodGroupInfo,
                    parent: Placement) -> tuple[list[Placement], Status]:
    try:
        placements, status = await _call(fwk, "PlacementGenerate", pl, pl.generate_placements(state, group, parent))
    except Exception as exc:  # a plugin that raised (a remote one past its failurePolicy): an Error naming it
        return [], raised_status("PlacementGenerate", pl, exc)
    if not status.ok:
        return [], status.with_plugin(pl.name)
    if not placements:
        return [], Status(Code.Unschedulable, ("no feasible placements found",), pl.name)
    return list(placements), Status()


@dataclass(slots=True)
class PlacementPluginScores:
    """A placement's weighted score from each PlacementScore plugin, and their total."""

    placement: Placement
    scores: dict[str, int] = field(default_factory=dict)
    total: int = 0


async def run_placement_score(
    fwk: Framework, state: CycleState, group: PodGroupInfo, assignments: list[PodGroupAssignments],
    states: list[CycleState],
) -> tuple[list[PlacementPluginScores], Status]:
    """ScorePlacement of every plugin for every placement, then each plugin's normalization, the range
    check ([0, 100]) and the plugin's weight; the scores in ``assignments``' order."""
    if len(assignments) != len(states):
        return [], Status.failure(
            f"expected one PlacementCycleState per PodGroupAssignments, got {len(states)} placement states "
            f"for {len(assignments)} assignments"
        )
    started = start_point("PlacementScore")
    try:
        out, status = await _score(fwk, state, group, assignments, states)
    except BaseException as exc:
        end_point(started, None, error=exc)
        raise
    end_point(started, status, {"outrigger.placement.count": len(assignments)})
    return out, status


async def _score(
    fwk: Framework, state: CycleState, group: PodGroupInfo, assignments: list[PodGroupAssignments],
    states: list[CycleState],
) -> tuple[list[PlacementPluginScores], Status]:
    plugins: list[PlacementScorePlugin] = _plugins(fwk, "placementScore", PlacementScorePlugin)
    by_plugin: dict[str, list[PlacementScore]] = {}
    for pl in plugins:
        scores: list[PlacementScore] = []
        for assignment, pstate in zip(assignments, states, strict=True):
            try:
                score, st = await _call(fwk, "PlacementScore", pl, pl.score_placement(pstate, group, assignment),
                                        **{"outrigger.placement": assignment.placement.name})
            except Exception as exc:
                score, st = 0, _raised(pl, exc)
            if not st.ok:
                return [], Status.failure(
                    f"running PlacementScore plugins: plugin \"{pl.name}\" failed with: {st.message()}", plugin=pl.name
                )
            scores.append(PlacementScore(assignment.placement, int(score)))
        by_plugin[pl.name] = scores
    for pl in plugins:
        ext = pl.placement_score_extensions()
        if ext is None:
            continue
        try:
            st = await _call(fwk, "NormalizePlacementScore", pl,
                             ext.normalize_placement_score(state, group, by_plugin[pl.name]))
        except Exception as exc:
            st = _raised(pl, exc)
        if not st.ok:
            return [], Status.failure(
                "running NormalizePlacementScore on PlacementScore plugins: "
                f"plugin \"{pl.name}\" failed with: {st.message()}", plugin=pl.name,
            )
    weights = getattr(fwk, "placement_score_weights", {})
    out = [PlacementPluginScores(a.placement) for a in assignments]
    for pl in plugins:
        weight = int(weights.get(pl.name, 1))
        for i, ps in enumerate(by_plugin[pl.name]):
            if not MIN_SCORE <= ps.score <= MAX_SCORE:
                return [], Status.failure(
                    "applying score defaultWeights on PlacementScore plugins: "
                    f"plugin \"{pl.name}\" returns an invalid score {ps.score}, it should in the range of "
                    f"[{MIN_SCORE}, {MAX_SCORE}] after normalizing", plugin=pl.name,
                )
            out[i].scores[pl.name] = ps.score * weight
            out[i].total += ps.score * weight
    return out, Status()


async def run_pod_group_post_filter(
    fwk: Framework, state: CycleState, group: PodGroupInfo, schedule: PodGroupSchedulingFunc
) -> tuple[PodGroupPostFilterResult | None, Status]:
    """The PodGroupPostFilter plugins in order: the first Success is the answer; UnschedulableAndUnresolvable
    stops; Unschedulable reasons add up; anything else is an Error naming the plugin."""
    if not features.enabled("GenericWorkload"):
        return None, Status.unschedulable("generic workload feature is disabled, cannot perform PodGroupPostFilter")
    started = start_point("PodGroupPostFilter")
    try:
        result, status = await _post_filter(fwk, state, group, schedule)
    except BaseException as exc:
        end_point(started, None, error=exc)
        raise
    end_point(started, status)
    return result, status


async def _post_filter(
    fwk: Framework, state: CycleState, group: PodGroupInfo, schedule: PodGroupSchedulingFunc
) -> tuple[PodGroupPostFilterResult | None, Status]:
    reasons: list[str] = []
    rejector = ""
    for pl in _plugins(fwk, "podGroupPostFilter", PodGroupPostFilterPlugin):
        try:
            result, st = await _call(fwk, "PodGroupPostFilter", pl, pl.pod_group_post_filter(state, group, schedule))
        except Exception as exc:
            result, st = None, _raised(pl, exc)
        if st.ok:
            return result, st
        if st.code is Code.UnschedulableAndUnresolvable:
            return result, st.with_plugin(pl.name)
        if st.code is Code.Unschedulable:
            reasons.extend(st.reasons)
            rejector = rejector or pl.name
            continue
        message = f"error in \"{pl.name}\" PodGroupPostFilter plugins: {st.message()}"
        return None, Status.failure(message, plugin=pl.name)
    return None, Status(Code.Unschedulable, tuple(reasons), rejector)
