"""What one cycle's phases found: :class:`Diagnosis` (why a pod did not fit), :class:`FilterOutcome`,
:class:`ScoreOutcome`, and how many feasible nodes Filter looks for (kube-scheduler's adaptive rule)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pluginhost.plugin import MAX_NODE_SCORE, MIN_NODE_SCORE, FilterResult, NodeToStatus, Plugin
from pluginhost.status import Code, Status

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "NIL_ERROR",
    "Diagnosis",
    "FilterOutcome",
    "IntArray",
    "ObservedCall",
    "PluginObserver",
    "PluginScores",
    "Raised",
    "Rejection",
    "ScoreOutcome",
    "check_filter_result",
    "error_text",
    "failed_status",
    "invalid_score_status",
    "num_feasible_nodes_to_find",
    "out_of_range",
    "plugin_failure",
    "quoted",
    "raised_status",
    "record_rejections",
    "status_of",
]

_VALID_CODES = frozenset(int(c) for c in Code)
_MAX_CODE = max(_VALID_CODES)
#: The unsigned dtype of each signed one, for :func:`out_of_range`.
_UNSIGNED = {np.dtype(s): np.dtype(u) for s, u in ((np.int8, np.uint8), (np.int16, np.uint16), (np.int32, np.uint32),
                                                   (np.int64, np.uint64))}
_MAXIMUM = np.maximum.reduce


def out_of_range(values: Any, high: int) -> bool:
    """Whether any of the integers ``values`` is below 0 or above ``high``, in one pass: read as unsigned,
    a negative value is larger than any ``high``. (``min()`` and ``max()`` cost two, and on the hundred
    or so nodes a cycle hands a plugin their cost is mostly the calls: every Filter and Score answer is
    checked so.)"""
    if values.size == 0:
        return False
    unsigned = _UNSIGNED.get(values.dtype)
    if unsigned is not None:
        return bool(_MAXIMUM(values.view(unsigned), axis=None) > high)
    return bool(values.min() < 0 or values.max() > high)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5

IntArray = npt.NDArray[np.int64]


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes to look for before Filter stops (kube-scheduler's adaptive rule:
    with no percentage configured, ``50 - nodes/125`` percent, at least 5%, at least 100 nodes)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if pct >= 100:
        return num_all_nodes
    return max(num_all_nodes * pct // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(slots=True)
class Diagnosis:
    """Why a pod did not fit: per-node statuses and the plugins that rejected it."""

    node_to_status: NodeToStatus = field(default_factory=NodeToStatus)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    absent_nodes: int = 0  # nodes a PreFilter result left out (they take node_to_status.absent)

    def add_plugin_status(self, status: Status) -> None:
        if not status.plugin:
            return
        if status.code is Code.Pending:
            self.pending_plugins.add(status.plugin)
        elif status.is_rejected:
            self.unschedulable_plugins.add(status.plugin)


@dataclass(slots=True)
class FilterOutcome:
    """The result of the Filter phase for one pod."""

    feasible: IntArray  # snapshot rows, in the order they were found
    processed: int  # nodes examined (feasible + rejected), for the rotating start index
    error: Status | None = None


@dataclass(slots=True)
class PluginScores:
    raw: IntArray
    normalized: IntArray
    weighted: IntArray


@dataclass(slots=True)
class ScoreOutcome:
    totals: IntArray
    by_plugin: dict[str, PluginScores] = field(default_factory=dict)
    error: Status | None = None


def quoted(name: str) -> str:
    """``name`` in double quotes, as Go's ``%q`` writes the plugin names in kube-scheduler's messages."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


# kube-scheduler's wording of a plugin's failure where it is not "running <point> plugin "<name>": ..."
# (pkg/scheduler/framework/runtime/framework.go); "filter" is the runtime's name for a Filter answer.
_FAILURE_WORDING = {
    "Filter": "running {plugin} filter plugin: {why}",
    "filter": "running {plugin} filter plugin: {why}",
    "PreFilterExtensionAddPod": "running AddPod on PreFilter plugin {plugin}: {why}",
    "PreFilterExtensionRemovePod": "running RemovePod on PreFilter plugin {plugin}: {why}",
    "Score": "running Score plugins: plugin {plugin} failed with: {why}",
    "NormalizeScore": "running Normalize on Score plugins: plugin {plugin} failed with: {why}",
    "PreBindPreFlight": "running PreBindPreFlight {plugin}: {why}",
}


def plugin_failure(point: str, name: str, why: str) -> str:
    """The message of plugin ``name``'s failure at ``point`` in kube-scheduler's words:
    ``running PreBind plugin "X": why``, ``running "X" filter plugin: why``, ..."""
    wording = _FAILURE_WORDING.get(point, f"running {point} plugin {{plugin}}: {{why}}")
    return wording.format(plugin=quoted(name), why=why)


# What Go's fmt writes for a nil error under %w: kube-scheduler's Status.AsError is nil for Wait and
# Skip, so a plugin answering one where the point does not take it fails with this as its reason.
NIL_ERROR = "%!w(<nil>)"


def error_text(status: Status) -> str:
    """``status`` as kube-scheduler's ``Status.AsError`` renders inside a wrapped message: its reasons
    joined (nothing when it has none), or :data:`NIL_ERROR` for Wait and Skip."""
    if status.code in (Code.Wait, Code.Skip, Code.Success):
        return NIL_ERROR
    return status.message()


def failed_status(point: str, plugin: Plugin, status: Status) -> Status:
    """A plugin's non-Success answer as the Error that fails the cycle, naming the point and plugin."""
    return Status(Code.Error, (plugin_failure(point, plugin.name, error_text(status)),), plugin.name, status.error)


def invalid_score_status(plugin: Plugin, score: int) -> Status:
    """The Error of a Score plugin whose (normalized) ``score`` is outside [0, 100], as kube-scheduler words it."""
    return Status.failure(
        f"applying score defaultWeights on Score plugins: plugin {quoted(plugin.name)} returns an invalid score "
        f"{score}, it should in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing",
        plugin=plugin.name,
    )


def raised_status(point: str, plugin: Plugin, exc: BaseException) -> Status:
    """A plugin's exception as the Error that fails the cycle, naming the point and plugin."""
    return Status(Code.Error, (plugin_failure(point, plugin.name, str(exc)),), plugin.name, exc)


Rejection = tuple[Plugin, IntArray, FilterResult, npt.NDArray[np.bool_]]  # plugin, positions, answer, rejected


def record_rejections(diagnosis: Diagnosis, names: Sequence[str], rows: IntArray, rejected: list[Rejection],
                       cut: int) -> None:
    """Each rejected node of a window (up to position ``cut``) gets the status of the plugin that
    rejected it: one Status per distinct answer of the plugin, shared by its nodes."""
    statuses = diagnosis.node_to_status.statuses
    for rejector, idx, res, failed in rejected:
        js = np.flatnonzero(failed)
        ws = idx[js]
        kept = ws < cut
        js, ws = js[kept], ws[kept]
        keys = res.codes[js].astype(np.int64) << 32
        if res.reason_index is not None:
            keys |= res.reason_index[js].astype(np.int64)
        shared: dict[int, Status] = {}
        for j, w, key in zip(js.tolist(), rows[ws].tolist(), keys.tolist(), strict=True):
            found_st = shared.get(key)
            if found_st is None:
                found_st = shared[key] = res.status_at(j, rejector.name)
                diagnosis.add_plugin_status(found_st)
            statuses[names[w]] = found_st


def check_filter_result(pl: Plugin, res: Any, n: int) -> Status | None:
    """A plugin's Filter answer must have one valid code per node it was sent."""
    if not isinstance(res, FilterResult):
        return Status.failure(plugin_failure("Filter", pl.name, f"returned {type(res).__name__}"), plugin=pl.name)
    if len(res) != n:
        return Status.failure(
            plugin_failure("Filter", pl.name, f"returned {len(res)} answers for {n} nodes"), plugin=pl.name
        )
    if n and out_of_range(res.codes, _MAX_CODE):
        return Status.failure(plugin_failure("Filter", pl.name, "returned an unknown status code"), plugin=pl.name)
    return None


class ObservedCall(Protocol):
    """One plugin call an observer follows: told how it ended."""

    def done(self, result: Any) -> None: ...  # the plugin's Status (FilterResult for Filter; None if it has none)

    def failed(self, exc: BaseException) -> None: ...


class PluginObserver(Protocol):
    """Told about each plugin call of the per-point loops (framework.observe.instrument: spans and metrics).
    ``start`` returns None for a call it does not follow."""

    def start(self, point: str, plugin: Plugin, nodes: int = -1) -> ObservedCall | None: ...


class Raised:
    """A plugin call that raised: the Error status naming the plugin, and the exception."""

    __slots__ = ("exc", "status")

    def __init__(self, status: Status, exc: BaseException) -> None:
        self.status = status
        self.exc = exc


def status_of(result: Any) -> Any:
    """What an observer is told a call returned: its Status (a FilterResult for Filter), else None."""
    if isinstance(result, Status | FilterResult):
        return result
    if isinstance(result, tuple):
        return next((r for r in result if isinstance(r, Status)), None)
    return None
