"""The plugin interface: one small base class per extension point.

A plugin is a class with a ``name`` that derives from the base class of every point it implements
(``class Gang(PreFilterPlugin, PermitPlugin, ReservePlugin)``). The framework's runtime calls these
methods and never asks whether the object runs in-process or is an adapter for a remote plugin host.

Filter and Score are *batch-shaped*: they receive a :class:`NodeBatch` (rows of a columnar
:class:`~pluginhost.snapshot.Snapshot`) and answer for every node at once, so an in-tree plugin does
array work instead of a Python loop per node. :class:`NodeFilterPlugin` and :class:`NodeScorePlugin`
offer the per-node form for simple plugins.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from pluginhost.model import Node, Pod
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.view import NodeChange, PodChange

__all__ = [
    "ASSIGNED_POD",
    "CONFIGURED_POINTS",
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "POD",
    "POINTS",
    "POINT_CLASSES",
    "TARGET_POD",
    "TRANSFORMER_CLASSES",
    "UNSCHEDULED_POD",
    "WILDCARD",
    "ActionType",
    "BindPlugin",
    "ClusterEvent",
    "ClusterEventWithHint",
    "Controller",
    "CycleState",
    "EnqueueExtensions",
    "FilterPlugin",
    "FilterResult",
    "FilterTransformer",
    "Handle",
    "NodeBatch",
    "NodeFilterPlugin",
    "NodeScorePlugin",
    "NodeToStatus",
    "PermitPlugin",
    "Plugin",
    "Point",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PostFilterTransformer",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreFilterTransformer",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueuedPodInfo",
    "QueueingHint",
    "ReservePlugin",
    "ScoreExtensions",
    "ScorePlugin",
    "ScoreTransformer",
    "WaitingPod",
    "check_args",
    "point_named",
    "points_of",
    "runs_at",
]

MIN_NODE_SCORE = 0
MAX_NODE_SCORE = 100

Int8Array = npt.NDArray[np.int8]
IntArray = npt.NDArray[np.int64]


# ---- cluster events (EnqueueExtensions) ------------------------------------------------------


class ActionType(enum.IntFlag):
    """What happened to an object, as kube-scheduler's ``framework.ActionType``."""

    Add = 1
    Delete = 2
    UpdateNodeAllocatable = 4
    UpdateNodeLabel = 8
    UpdateNodeTaint = 16
    UpdateNodeCondition = 32
    UpdateNodeAnnotation = 64
    UpdatePodLabel = 128
    UpdatePodScaleDown = 256
    UpdatePodToleration = 512
    UpdatePodSchedulingGatesEliminated = 1024
    UpdatePodGeneratedResourceClaim = 2048
    # New in kube-scheduler 1.37; appended so the older bits keep their values.
    UpdatePodScaleUp = 4096
    UpdateNodeDeclaredFeature = 8192
    UpdateNodePreemptionPolicy = 16384
    Update = (
        UpdateNodeAllocatable
        | UpdateNodeLabel
        | UpdateNodeTaint
        | UpdateNodeCondition
        | UpdateNodeAnnotation
        | UpdateNodeDeclaredFeature
        | UpdateNodePreemptionPolicy
        | UpdatePodLabel
        | UpdatePodScaleDown
        | UpdatePodScaleUp
        | UpdatePodToleration
        | UpdatePodSchedulingGatesEliminated
        | UpdatePodGeneratedResourceClaim
    )
    All = Add | Delete | Update


class QueueingHint(enum.Enum):
    Queue = "Queue"
    QueueSkip = "QueueSkip"


#: The pod resources of kube-scheduler 1.37's ``EventResource``: a pod bound (or assumed) to a node;
#: another pod still pending; the pending pod whose hint is asked, updating itself. A registration
#: for :data:`POD` covers all three.
POD = "Pod"
ASSIGNED_POD = "AssignedPod"
UNSCHEDULED_POD = "UnscheduledPod"
TARGET_POD = "TargetPod"
WILDCARD = "*"
_POD_RESOURCES = frozenset({ASSIGNED_POD, UNSCHEDULED_POD, TARGET_POD})


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change in the cluster. ``resource`` is "Node", "AssignedPod" (a pod bound or assumed to a
    node), "UnscheduledPod" (another pending pod), "TargetPod" (the pending pod itself, updated),
    "Pod" (a registration covering the three), a storage or custom resource, or "*" (wildcard);
    ``action`` the :class:`ActionType` bits."""

    resource: str
    action: ActionType
    label: str = ""

    def matches(self, other: ClusterEvent) -> bool:
        """True if this registered event covers ``other`` (an event that happened): kube-scheduler's
        ``MatchClusterEvents``, where a "Pod" registration matches each of the pod resources."""
        r = self.resource
        if r != WILDCARD and r != other.resource and not (r == POD and other.resource in _POD_RESOURCES):
            return False
        return bool(self.action & other.action)


HintFn = Callable[[Pod, Any, Any], QueueingHint]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: HintFn | None = None


# ---- per-cycle data --------------------------------------------------------------------------


class CycleState:
    """Data shared by the plugins of one scheduling context, keyed by string.

    Values are any Python object for in-process plugins; values meant for plugins in other
    processes or languages are :class:`pluginhost.state.StateValue` (content type and bytes).
    ``clone()`` copies the map (and calls ``clone()`` on values that have it), as preemption's dry
    runs need. ``attempt`` is the pod's scheduling attempt (1 for the first).
    """

    __slots__ = ("_data", "attempt", "cycle_id", "record", "skip_filter", "skip_score", "snapshot")

    def __init__(self, cycle_id: str = "", snapshot: Snapshot | None = None, attempt: int = 0) -> None:
        self.cycle_id = cycle_id
        self.snapshot = snapshot
        self.attempt = attempt
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()
        self._data: dict[str, Any] = {}
        self.record = False

    def read(self, key: str) -> Any:
        """The value under ``key``; KeyError (naming the key) if absent."""
        try:
            return self._data[key]
        except KeyError:
            raise KeyError(f"cycle state has no key {key!r}") from None

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def keys(self) -> list[str]:
        return list(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def clone(self) -> CycleState:
        out = CycleState(self.cycle_id, self.snapshot, self.attempt)
        out.skip_filter = set(self.skip_filter)
        out.skip_score = set(self.skip_score)
        out.record = self.record
        for k, v in self._data.items():
            clone = getattr(v, "clone", None)
            out._data[k] = clone() if callable(clone) else v
        return out


@dataclass(frozen=True, slots=True)
class NodeBatch:
    """A batch of nodes: rows of ``snapshot``. Plugins answer in the same order."""

    snapshot: Snapshot
    rows: IntArray

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @property
    def names(self) -> list[str]:
        names = self.snapshot.table.names
        return [names[r] for r in self.rows.tolist()]

    def nodes(self) -> Iterator[tuple[int, Node]]:
        nodes = self.snapshot.table.nodes
        for r in self.rows.tolist():
            yield r, nodes[r]

    def take(self, mask: npt.NDArray[np.bool_]) -> NodeBatch:
        return NodeBatch(self.snapshot, self.rows[mask])


@dataclass(slots=True)
class FilterResult:
    """Per-node Filter answers for a batch: ``codes[i]`` is a :class:`Code` value, and for a
    rejected node ``reasons[reason_index[i]]`` are its reasons."""

    codes: Int8Array
    reason_index: npt.NDArray[np.int32] | None = None
    reasons: list[tuple[str, ...]] = field(default_factory=list)

    @classmethod
    def passing(cls, n: int) -> FilterResult:
        return cls(np.zeros(n, dtype=np.int8))

    @classmethod
    def from_mask(cls, reject: npt.NDArray[np.bool_], code: Code, *reasons: str) -> FilterResult:
        """Every node where ``reject`` is true gets ``code`` with the same reasons."""
        codes = np.where(reject, np.int8(code), np.int8(0)).astype(np.int8, copy=False)
        return cls(codes, np.zeros(len(codes), dtype=np.int32), [tuple(reasons)])

    @classmethod
    def from_statuses(cls, statuses: Sequence[Status]) -> FilterResult:
        codes = np.fromiter((int(s.code) for s in statuses), dtype=np.int8, count=len(statuses))
        table: dict[tuple[str, ...], int] = {}
        index = np.zeros(len(statuses), dtype=np.int32)
        for i, s in enumerate(statuses):
            if s.code != Code.Success:
                index[i] = table.setdefault(s.reasons, len(table))
        return cls(codes, index, list(table))

    def __len__(self) -> int:
        return int(self.codes.shape[0])

    def take(self, index: npt.NDArray[np.int64]) -> FilterResult:
        """The answers for the nodes at ``index`` (positions in this result), in that order."""
        ri = self.reason_index[index] if self.reason_index is not None else None
        return FilterResult(self.codes[index], ri, self.reasons)

    def status_at(self, i: int, plugin: str = "") -> Status:
        code = Code(int(self.codes[i]))
        if code is Code.Success:
            return SUCCESS
        reasons: tuple[str, ...] = ()
        if self.reason_index is not None and self.reasons:
            reasons = self.reasons[int(self.reason_index[i])]
        return Status(code, reasons, plugin)


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """Narrows the nodes Filter considers; ``None`` means all nodes."""

    node_names: frozenset[str] | None = None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    nominated_node_name: str = ""


@dataclass(slots=True)
class NodeToStatus:
    """Why each node was rejected in a cycle; nodes not evaluated take ``absent``."""

    statuses: dict[str, Status] = field(default_factory=dict)
    absent: Status = field(default_factory=lambda: Status(Code.UnschedulableAndUnresolvable))

    def get(self, node: str) -> Status:
        return self.statuses.get(node, self.absent)


@dataclass(slots=True, eq=False)
class QueuedPodInfo:
    """A pod in the scheduling queue with its scheduling history."""

    pod: Pod
    timestamp: float = 0.0  # when it was last added to a queue (QueueSort uses it)
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gated: bool = False
    last_status: Status | None = None
    profile: str = ""
    sort_key: Any = None


class WaitingPod(Protocol):
    """A pod held at Permit (what ``Handle.waiting_pod`` returns)."""

    @property
    def pod(self) -> Pod: ...

    @property
    def node_name(self) -> str: ...

    def pending_plugins(self) -> list[str]: ...

    def allow(self, plugin: str) -> None: ...

    def reject(self, plugin: str, message: str) -> bool: ...  # False: its wait had already ended


class Handle(Protocol):
    """What the framework offers plugins (kube-scheduler's ``framework.Handle``)."""

    def snapshot(self) -> Snapshot: ...

    def waiting_pods(self) -> Sequence[WaitingPod]: ...

    def waiting_pod(self, uid: str) -> WaitingPod | None: ...

    def reject_waiting_pod(self, uid: str, plugin: str, message: str) -> bool: ...

    async def bind_pod(self, pod: Pod, node_name: str) -> Status: ...

    async def delete_pod(self, pod: Pod, reason: str) -> Status: ...


# ---- plugin base classes ---------------------------------------------------------------------


class Plugin:
    """Every plugin has a name, unique within a profile."""

    name: str = ""

    def debug_endpoints(self) -> Mapping[str, Callable[[], Any]]:
        """Read-only JSON debug endpoints: path -> a function returning a JSON-able value (or an
        awaitable of one). The framework serves them at ``/apis/v1/plugins/<name>/<path>``. A hosted
        plugin's paths are read once, from a bare instance, for its manifest: the keys must not depend
        on constructor state (the functions run on the configured instance)."""
        return {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


class PreEnqueuePlugin(Plugin):
    async def pre_enqueue(self, pod: Pod) -> Status:
        raise NotImplementedError


class QueueSortPlugin(Plugin):
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        raise NotImplementedError

    def sort_key(self, info: QueuedPodInfo) -> Any:
        """A key with the same order as :meth:`less`, or None to have the queue call ``less``.

        A key is computed once per enqueue instead of on each heap comparison, which is also how a
        remote QueueSort plugin answers (one call per enqueue)."""
        return None


class EnqueueExtensions:
    """Mixin: the cluster events that may make a pod this plugin rejected schedulable."""

    def events_to_register(self) -> list[ClusterEventWithHint]:
        raise NotImplementedError


class PreFilterExtensions:
    """Incremental updates of a plugin's PreFilter state (preemption's what-ifs)."""

    async def add_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return SUCCESS

    async def remove_pod(self, state: CycleState, pod: Pod, other: Pod, node_row: int) -> Status:
        return SUCCESS


class PreFilterPlugin(Plugin):
    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        raise NotImplementedError

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        raise NotImplementedError

    async def filter_finished(self, state: CycleState) -> None:
        """Called once the Filter phase of a cycle is over (enough feasible nodes, or an error).

        ``filter`` may be called several times per cycle (one call per window of nodes); a plugin
        that holds per-cycle resources for them (a remote plugin's open stream) releases them here."""


class NodeFilterPlugin(FilterPlugin):
    """Per-node convenience: implement :meth:`filter_node`; the batch is looped for you."""

    async def filter_node(self, state: CycleState, pod: Pod, node: Node, row: int) -> Status:
        raise NotImplementedError

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        return FilterResult.from_statuses([await self.filter_node(state, pod, n, r) for r, n in batch.nodes()])


class PostFilterPlugin(Plugin):
    async def post_filter(
        self, state: CycleState, pod: Pod, statuses: NodeToStatus
    ) -> tuple[PostFilterResult | None, Status]:
        raise NotImplementedError


class PreScorePlugin(Plugin):
    async def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status:
        raise NotImplementedError


class ScorePlugin(Plugin):
    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        raise NotImplementedError


class NodeScorePlugin(ScorePlugin):
    """Per-node convenience: implement :meth:`score_node`."""

    async def score_node(self, state: CycleState, pod: Pod, node: Node, row: int) -> int:
        raise NotImplementedError

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        out = [await self.score_node(state, pod, n, r) for r, n in batch.nodes()]
        return np.asarray(out, dtype=np.int64)


class ScoreExtensions:
    """Mixin for Score plugins that normalize their raw scores into [0, 100]."""

    async def normalize_score(self, state: CycleState, pod: Pod, batch: NodeBatch, scores: IntArray) -> Status:
        """Rewrite ``scores`` in place."""
        raise NotImplementedError


class ReservePlugin(Plugin):
    async def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        raise NotImplementedError

    async def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise NotImplementedError


class PermitPlugin(Plugin):
    async def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status, float]:
        """Success, a rejection, or ``(Wait, timeout_seconds)``."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    async def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Skip when PreBind would do nothing for this pod; Success otherwise."""
        return SUCCESS

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        raise NotImplementedError


class BindPlugin(Plugin):
    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        raise NotImplementedError


class PostBindPlugin(Plugin):
    async def post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        raise NotImplementedError


# ---- transformers (views of one phase) and controllers -------------------------------------------


class PreFilterTransformer(PreFilterPlugin):
    """Changes the pod as the rest of the scheduling cycle sees it (before PreFilter).

    Enabled with the plugin at ``preFilter``; transformers run in the profile's preFilter order, each
    seeing the pod as the previous ones left it. The change lives in the cycle only: the cache,
    Reserve/Permit and the binding cycle see the pod as it was applied. A class that does not override
    ``pre_filter`` only transforms (the runtime does not call it as a PreFilter plugin)."""

    async def before_pre_filter(self, state: CycleState, pod: Pod) -> tuple[PodChange | None, Status]:
        raise NotImplementedError


class FilterTransformer(FilterPlugin):
    """Changes node rows as this cycle's Filter plugins see them (before Filter).

    Returns :class:`~pluginhost.view.NodeChange` deltas (allocatable/requested amounts, labels) applied
    on top of ``snapshot`` (which already shows the earlier transformers' changes) for the Filter phase
    only. Enabled with the plugin at ``filter``; a class that does not override ``filter`` only
    transforms."""

    async def before_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[Sequence[NodeChange] | None, Status]:
        raise NotImplementedError


class ScoreTransformer(ScorePlugin):
    """Changes node rows as this cycle's PreScore, Score and NormalizeScore plugins see them.

    ``nodes`` are the feasible nodes (their snapshot shows the earlier transformers' changes). Enabled
    with the plugin at ``score``; a class that does not override ``score`` only transforms."""

    async def before_score(
        self, state: CycleState, pod: Pod, nodes: NodeBatch
    ) -> tuple[Sequence[NodeChange] | None, Status]:
        raise NotImplementedError


class PostFilterTransformer(PostFilterPlugin):
    """Changes node rows as this cycle's PostFilter plugins (preemption) see them. Enabled with the
    plugin at ``postFilter``; a class that does not override ``post_filter`` only transforms."""

    async def before_post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[Sequence[NodeChange] | None, Status]:
        raise NotImplementedError


class Controller:
    """Mixin: background work tied to the framework's lifecycle (a controller).

    ``start`` is called once the framework is active (in-process: when the scheduler starts running;
    in a plugin host: once the plugin is configured for a profile) and must return quickly, starting
    its own tasks; ``stop`` is called on shutdown (or before a reconfiguration) and must end them.
    Both are called once per plugin instance."""

    async def start(self) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Point:
    """One row of :data:`POINTS`: an extension point (or a part of one) and everything the code around
    it needs to know of it."""

    name: str  # as configured in a profile ("preFilter"); parts and transformers: their own name
    base: type  # the class a plugin derives from to implement it
    method: str  # the method called (a hosted QueueSort plugin: sort_key; a transformer: its before_*)
    enum: str  # its value of the contract's ExtensionPoint enum (proto/outrigger/v1/plugin.proto)
    order: int | None  # its place among a profile's `plugins` (None: not configured on its own)
    kind: str  # "queueing", "scheduling" or "binding" (where it runs); "part" of `of`; "transformer" of `of`
    of: str = ""  # the point a part or a transformer belongs to


#: Every extension point, in the order a KubeSchedulerConfiguration profile lists them, then the parts
#: of points (declared by overriding a method or deriving from a mixin) and the transformers. The
#: runtime, the configuration, the plugin hosts (Python and Node.js: tests/test_points.py) and the
#: remote adapter read the points from here; adding one is a row here, the proto enum and its code.
POINTS: tuple[Point, ...] = (
    Point("preEnqueue", PreEnqueuePlugin, "pre_enqueue", "EXTENSION_POINT_PRE_ENQUEUE", 0, "queueing"),
    Point("queueSort", QueueSortPlugin, "sort_key", "EXTENSION_POINT_QUEUE_SORT", 1, "queueing"),
    Point("preFilter", PreFilterPlugin, "pre_filter", "EXTENSION_POINT_PRE_FILTER", 2, "scheduling"),
    Point("filter", FilterPlugin, "filter", "EXTENSION_POINT_FILTER", 3, "scheduling"),
    Point("postFilter", PostFilterPlugin, "post_filter", "EXTENSION_POINT_POST_FILTER", 4, "scheduling"),
    Point("preScore", PreScorePlugin, "pre_score", "EXTENSION_POINT_PRE_SCORE", 5, "scheduling"),
    Point("score", ScorePlugin, "score", "EXTENSION_POINT_SCORE", 6, "scheduling"),
    Point("reserve", ReservePlugin, "reserve", "EXTENSION_POINT_RESERVE", 7, "scheduling"),
    Point("permit", PermitPlugin, "permit", "EXTENSION_POINT_PERMIT", 8, "scheduling"),
    Point("preBind", PreBindPlugin, "pre_bind", "EXTENSION_POINT_PRE_BIND", 9, "binding"),
    Point("bind", BindPlugin, "bind", "EXTENSION_POINT_BIND", 10, "binding"),
    Point("postBind", PostBindPlugin, "post_bind", "EXTENSION_POINT_POST_BIND", 11, "binding"),
    Point("preFilterExtensions", PreFilterPlugin, "pre_filter_extensions", "EXTENSION_POINT_PRE_FILTER_EXTENSIONS",
          None, "part", "preFilter"),
    Point("normalizeScore", ScoreExtensions, "normalize_score", "EXTENSION_POINT_NORMALIZE_SCORE", None, "part",
          "score"),
    Point("preBindPreFlight", PreBindPlugin, "pre_bind_pre_flight", "EXTENSION_POINT_PRE_BIND_PRE_FLIGHT", None,
          "part", "preBind"),
    Point("enqueueExtensions", EnqueueExtensions, "events_to_register", "EXTENSION_POINT_ENQUEUE_EXTENSIONS", None,
          "part", "preEnqueue"),
    Point("controller", Controller, "start", "EXTENSION_POINT_CONTROLLER", None, "part"),
    Point("preFilterTransformer", PreFilterTransformer, "before_pre_filter", "EXTENSION_POINT_PRE_FILTER_TRANSFORMER",
          None, "transformer", "preFilter"),
    Point("filterTransformer", FilterTransformer, "before_filter", "EXTENSION_POINT_FILTER_TRANSFORMER", None,
          "transformer", "filter"),
    Point("scoreTransformer", ScoreTransformer, "before_score", "EXTENSION_POINT_SCORE_TRANSFORMER", None,
          "transformer", "score"),
    Point("postFilterTransformer", PostFilterTransformer, "before_post_filter",
          "EXTENSION_POINT_POST_FILTER_TRANSFORMER", None, "transformer", "postFilter"),
)

#: The points a profile configures, in their order.
CONFIGURED_POINTS: tuple[Point, ...] = tuple(sorted((p for p in POINTS if p.order is not None),
                                                    key=lambda p: p.order or 0))
_BY_NAME = {p.name: p for p in POINTS}

#: Configured point name -> the base class of its plugins.
POINT_CLASSES: Mapping[str, type] = {p.name: p.base for p in CONFIGURED_POINTS}

#: Configured point name -> (its transformer's base class, the point's method whose override means
#: "also a plugin of the point").
TRANSFORMER_CLASSES: Mapping[str, tuple[type, str]] = {
    p.of: (p.base, _BY_NAME[p.of].method) for p in POINTS if p.kind == "transformer"
}


def point_named(name: str) -> Point:
    """The row of :data:`POINTS` named ``name``."""
    return _BY_NAME[name]


def runs_at(plugin: object, point: str) -> bool:
    """Whether the runtime calls ``plugin`` as a plugin of ``point`` (a transformer that does not
    implement the point's method itself only transforms)."""
    only: frozenset[str] | None = getattr(plugin, "transform_only", None)
    if only is not None:
        return point not in only
    spec = TRANSFORMER_CLASSES.get(point)
    if spec is None or not isinstance(plugin, spec[0]):
        return True
    base = POINT_CLASSES[point]
    return getattr(type(plugin), spec[1]) is not getattr(base, spec[1])


def points_of(plugin: object | type) -> frozenset[str]:
    """The configuration names of the extension points a plugin (or plugin class) implements."""
    cls = plugin if isinstance(plugin, type) else type(plugin)
    return frozenset(point for point, base in POINT_CLASSES.items() if issubclass(cls, base))


def check_args(args: Mapping[str, Any] | None, plugin: str, *known: str) -> dict[str, Any]:
    """``args`` (pluginConfig), refusing keys the plugin does not know: a misspelled key would
    otherwise be ignored silently. Raises ValueError naming the unknown keys and the known ones."""
    got = dict(args or {})
    unknown = sorted(k for k in got if k not in known)
    if unknown:
        expected = ", ".join(known) if known else "none"
        raise ValueError(f"plugin {plugin} does not know args {', '.join(unknown)} (known: {expected})")
    return got
