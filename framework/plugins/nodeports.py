"""NodePorts: a pod's host ports must be free on the node.

PreFilter collects the pod's host ports (containers, and sidecar init containers with
``restartPolicy: Always``) and skips the plugin when there are none. Filter rejects a node where one
of them conflicts with a port used by the node's pods, with kube-scheduler's ``HostPortInfo`` rules
(empty host IP = 0.0.0.0, empty protocol = TCP, 0.0.0.0 conflicts with every IP on the same protocol
and port): ``node(s) didn't have free ports for the requested pod ports`` (Unschedulable).

The plugin keeps an index of the host ports used per node row, brought up to date with each snapshot
by recomputing only the rows whose pods changed (the table shares an unchanged row's pods tuple
between snapshots); Filter then looks up the rows using the pod's ports instead of visiting nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.model import ContainerPort, Pod
from pluginhost.plugin import (
    ASSIGNED_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    FilterResult,
    Handle,
    NodeBatch,
    PreFilterPlugin,
    PreFilterResult,
    QueueingHint,
)
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Code, Status

from .hostports import DEFAULT_BIND_ALL_HOST_IP, HostPortInfo, host_ports
from .podcolumns import changed_rows

__all__ = ["ERR_REASON", "NodePorts"]

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
_PRE_FILTER_KEY = "PreFilterNodePorts"
_CONFLICTS_KEY = "NodePorts/conflicts"

# A port in use: (host IP, protocol, port), sanitized.
_Used = tuple[str, str, int]


@dataclass(frozen=True, slots=True)
class _Wanted:
    """The pod's host ports, sanitized: wildcard ones checked against any IP, the others against
    their IP and 0.0.0.0."""

    ports: tuple[ContainerPort, ...]
    any_ip: frozenset[tuple[str, int]]  # (protocol, port) wanted on 0.0.0.0
    specific: frozenset[_Used]  # (ip, protocol, port) wanted on a specific IP

    def clone(self) -> _Wanted:
        return self


def _wanted(pod: Pod) -> _Wanted:
    ports = tuple(host_ports(pod))
    any_ip: set[tuple[str, int]] = set()
    specific: set[_Used] = set()
    for p in ports:
        ip = p.host_ip or DEFAULT_BIND_ALL_HOST_IP
        proto = p.protocol or "TCP"
        if ip == DEFAULT_BIND_ALL_HOST_IP:
            any_ip.add((proto, p.host_port))
        else:
            specific.add((ip, proto, p.host_port))
    return _Wanted(ports, frozenset(any_ip), frozenset(specific))


_NO_PORTS: frozenset[_Used] = frozenset()


def _used_ports(pods: tuple[Pod, ...]) -> frozenset[_Used]:
    used: set[_Used] = set()
    for pod in pods:
        for p in host_ports(pod):
            used.add((p.host_ip or DEFAULT_BIND_ALL_HOST_IP, p.protocol or "TCP", p.host_port))
    return frozenset(used) if used else _NO_PORTS


class _PortIndex:
    """Which node rows use which host ports, kept in step with the snapshots it is shown.

    Syncing with a snapshot recomputes only the rows whose pods changed since the last one
    (:func:`changed_rows`: one comparison of the two snapshots' row versions), so it costs no Python
    work per node. The inverted maps
    answer "which rows use this port" without visiting the other rows.
    """

    __slots__ = ("_snapshot", "_used", "by_ip_port", "by_port")

    def __init__(self) -> None:
        self._snapshot: Snapshot | None = None
        self._used: list[frozenset[_Used]] = []
        self.by_port: dict[tuple[str, int], set[int]] = {}  # (protocol, port) on any IP -> rows
        self.by_ip_port: dict[_Used, set[int]] = {}  # (ip, protocol, port) -> rows

    def sync(self, snap: Snapshot) -> None:
        if snap is self._snapshot:
            return
        pods = snap.pods
        n = len(pods)
        if n > len(self._used):
            self._used.extend([_NO_PORTS] * (n - len(self._used)))
        previous = self._snapshot
        for row in changed_rows(snap, previous):
            self._update(row, pods[row])
        for row in range(n, len(previous) if previous is not None else 0):  # rows the table no longer has
            self._update(row, ())
        self._snapshot = snap

    def _update(self, row: int, pods: tuple[Pod, ...]) -> None:
        old = self._used[row]
        new = _used_ports(pods) if pods else _NO_PORTS
        if new == old:
            return
        for ip, proto, port in old - new:
            self._discard(self.by_ip_port, (ip, proto, port), row)
            if not any((p, q) == (proto, port) for _, p, q in new):
                self._discard(self.by_port, (proto, port), row)
        for ip, proto, port in new:
            self.by_ip_port.setdefault((ip, proto, port), set()).add(row)
            self.by_port.setdefault((proto, port), set()).add(row)
        self._used[row] = new

    @staticmethod
    def _discard(index: dict[Any, set[int]], key: Any, row: int) -> None:
        rows = index.get(key)
        if rows is not None:
            rows.discard(row)
            if not rows:
                del index[key]

    def conflicting_rows(self, wanted: _Wanted) -> set[int]:
        """Rows where one of ``wanted`` conflicts (HostPortInfo.CheckConflict)."""
        out: set[int] = set()
        for pp in wanted.any_ip:
            out |= self.by_port.get(pp, set())
        for ip, proto, port in wanted.specific:
            out |= self.by_ip_port.get((ip, proto, port), set())
            out |= self.by_ip_port.get((DEFAULT_BIND_ALL_HOST_IP, proto, port), set())
        return out


@dataclass(frozen=True, slots=True, eq=False)
class _Conflicts:
    """The rows of one snapshot where the cycle's pod does not fit (sorted)."""

    snapshot: Snapshot
    rows: npt.NDArray[np.int64]

    def clone(self) -> _Conflicts:
        return self


class NodePorts(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = "NodePorts"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        self._handle = handle
        self._index = _PortIndex()

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        wanted = _wanted(pod)
        if not wanted.ports:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, wanted)
        return None, SUCCESS

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        wanted: _Wanted | None = state.get(_PRE_FILTER_KEY)
        if wanted is None:
            return FilterResult.from_mask(
                np.ones(len(batch), dtype=np.bool_),
                Code.Error,
                f'reading "{_PRE_FILTER_KEY}" from cycleState: not found',
            )
        snap = batch.snapshot
        conflicts: _Conflicts | None = state.get(_CONFLICTS_KEY)
        if conflicts is None or conflicts.snapshot is not snap:
            self._index.sync(snap)
            rows = self._index.conflicting_rows(wanted)
            arr = np.fromiter(sorted(rows), dtype=np.int64, count=len(rows))
            conflicts = _Conflicts(snap, arr[arr < len(snap)])
            state.write(_CONFLICTS_KEY, conflicts)
        if conflicts.rows.shape[0] == 0:
            return FilterResult.passing(len(batch))
        reject = np.isin(batch.rows, conflicts.rows)
        if not reject.any():
            return FilterResult.passing(len(batch))
        return FilterResult.from_mask(reject, Code.Unschedulable, ERR_REASON)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # Host ports are immutable, so pod updates are not registered.
            ClusterEventWithHint(ClusterEvent(ASSIGNED_POD, ActionType.Delete), self._after_pod_deleted),
            ClusterEventWithHint(ClusterEvent("Node", ActionType.Add)),
        ]

    @staticmethod
    def _after_pod_deleted(pod: Pod, old: Any, new: Any) -> QueueingHint:
        """Queue only when the deleted pod was placed (or nominated) and used a host port ``pod`` wants."""
        if not isinstance(old, Pod):
            return QueueingHint.Queue
        if not old.node_name and not old.nominated_node_name:
            return QueueingHint.QueueSkip
        ports = host_ports(old)
        if not ports:
            return QueueingHint.QueueSkip
        in_use = HostPortInfo(ports)
        return QueueingHint.QueueSkip if in_use.fits(host_ports(pod)) else QueueingHint.Queue
