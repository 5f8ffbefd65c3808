"""kubectl's output habits: its column alignment, its ages, and the rows of ``get pods`` and
``get nodes``, computed from what the Scheduler API answers.

    rows = [POD_COLUMNS, *(pod_row(p, now=time.time()) for p in pods)]
    print(table_writer().format(rows_text(rows)), end="")

Everything here is a pure function of its arguments (``now`` included), so output can be tested
exactly. What differs from kubectl, and why, is listed in docs/kubectl.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from .types import NodeSummary, PodState

__all__ = [
    "NODE_COLUMNS",
    "NODE_WIDE_COLUMNS",
    "POD_COLUMNS",
    "POD_GROUP_COLUMNS",
    "POD_WIDE_COLUMNS",
    "TabWriter",
    "age",
    "human_duration",
    "node_row",
    "node_status",
    "object_name",
    "parse_time",
    "pod_group_row",
    "pod_row",
    "pod_status",
    "rows_text",
    "table_writer",
]

POD_COLUMNS = ("NAME", "READY", "STATUS", "RESTARTS", "AGE")
POD_WIDE_COLUMNS = (*POD_COLUMNS, "IP", "NODE", "NOMINATED NODE", "READINESS GATES")
NODE_COLUMNS = ("NAME", "STATUS", "ROLES", "AGE", "VERSION")
NODE_WIDE_COLUMNS = (*NODE_COLUMNS, "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME")
#: ``kubectl get podgroups``: the API server's table of PodGroups (1.37).
POD_GROUP_COLUMNS = ("NAME", "POLICY", "WORKLOAD", "STATUS", "AGE")
NONE = "<none>"


class TabWriter:
    """Go's ``text/tabwriter``, which kubectl aligns its output with: cells are separated by tabs, and
    a column is as wide as the widest cell (plus ``padding``, at least ``minwidth``) among the
    consecutive lines that have a cell in it; a line's last cell is not aligned. ``remember`` keeps
    column widths from one :meth:`format` to the next, as kubectl's printer does while watching.

    ``kubectl get``: ``TabWriter(minwidth=6, padding=3)``; ``kubectl describe``: ``TabWriter(padding=2)``.
    ``trim`` drops the blanks a line ends with (Go's writer keeps them, as in a message ending in a space).
    """

    def __init__(self, minwidth: int = 0, padding: int = 2, *, remember: bool = False, trim: bool = True) -> None:
        self.minwidth = minwidth
        self.padding = padding
        self.remember = remember
        self.trim = trim
        self._seen: dict[int, int] = {}

    def format(self, text: str) -> str:
        """``text`` (lines of tab-separated cells) aligned; trailing blanks are dropped from each line."""
        ends = text.endswith("\n")
        rows = [line.split("\t") for line in (text[:-1] if ends else text).split("\n")]
        out: list[str] = []
        self._format(rows, [], 0, len(rows), out)
        return "\n".join(out) + ("\n" if ends else "")

    def _format(self, rows: list[list[str]], widths: list[int], line0: int, line1: int, out: list[str]) -> None:
        column = len(widths)
        this = line0
        while this < line1:
            if column >= len(rows[this]) - 1:
                this += 1
                continue
            self._write(rows, widths, line0, this, out, self.trim)
            line0 = this
            width = self.minwidth
            while this < line1 and column < len(rows[this]) - 1:  # the column's block
                width = max(width, len(rows[this][column]) + self.padding)
                this += 1
            if self.remember:
                width = self._seen[column] = max(width, self._seen.get(column, 0))
            widths.append(width)
            self._format(rows, widths, line0, this, out)
            widths.pop()
            line0 = this
        self._write(rows, widths, line0, line1, out, self.trim)

    @staticmethod
    def _write(rows: list[list[str]], widths: list[int], line0: int, line1: int, out: list[str], trim: bool) -> None:
        for row in rows[line0:line1]:
            line = "".join(c.ljust(widths[j]) if j < len(widths) else c for j, c in enumerate(row))
            out.append(line.rstrip() if trim else line)


def rows_text(rows: Sequence[Sequence[str]]) -> str:
    """Rows as tab-separated lines, for :class:`TabWriter`."""
    return "".join("\t".join(r) + "\n" for r in rows)


def table_writer(*, remember: bool = False) -> TabWriter:
    """The writer ``get`` prints tables with (kubectl's printer settings)."""
    return TabWriter(minwidth=6, padding=3, remember=remember)


# ---- time ------------------------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """kubectl's ages (apimachinery's ``HumanDuration``): "45s", "5m30s", "3h", "2d4h", "1y30d"."""
    s = int(seconds)  # Go truncates toward zero, as here
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 60 * 2:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = hours // 24 % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def parse_time(value: object) -> float | None:
    """An RFC 3339 timestamp (``2024-05-01T12:00:00Z``) as Unix seconds; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def age(obj: Mapping[str, Any], now: float) -> str:
    """The AGE of a v1 object (``<unknown>`` without a creationTimestamp, as kubectl shows it)."""
    created = parse_time(_meta(obj).get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration(now - created)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _field(obj: Mapping[str, Any], *path: str) -> Any:
    value: Any = obj
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


# ---- pods ------------------------------------------------------------------------------------------


def pod_status(pod: PodState) -> str:
    """The STATUS column: the pod's scheduling phase (Pending, Unschedulable, Waiting, Binding, Bound),
    or kubectl's SchedulingGated for a pod held by scheduling gates."""
    return "SchedulingGated" if pod.queue == "gated" else pod.phase


def pod_row(pod: PodState, now: float, *, wide: bool = False, namespace: bool = False) -> list[str]:
    """A row of ``get pods`` (:data:`POD_COLUMNS`, :data:`POD_WIDE_COLUMNS` when ``wide``; NAMESPACE
    first when ``namespace``). READY counts containers: none runs, as no kubelet runs them."""
    obj = pod.manifest
    containers = _field(obj, "spec", "containers")
    ready = f"0/{len(containers)}" if isinstance(containers, list) else "0/0"
    row = [pod.ref.name, ready, pod_status(pod), "0", age(obj, now)]
    if wide:
        gates = _field(obj, "spec", "readinessGates")
        row += [NONE, pod.node_name or NONE, pod.nominated_node_name or NONE,
                f"0/{len(gates)}" if isinstance(gates, list) and gates else NONE]
    return [pod.ref.namespace, *row] if namespace else row


# ---- nodes -----------------------------------------------------------------------------------------


def node_status(node: NodeSummary) -> str:
    """kubectl's node STATUS: Ready (or NotReady) from the Ready condition, Ready when the node reports
    no conditions (the scheduler places pods on it all the same), then SchedulingDisabled if cordoned."""
    conditions = _field(node.manifest, "status", "conditions")
    status = "Ready"
    for c in conditions if isinstance(conditions, list) else []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            status = "Ready" if c.get("status") == "True" else "NotReady"
    return status + ",SchedulingDisabled" if node.unschedulable else status


def node_roles(labels: Mapping[str, str]) -> str:
    """kubectl's ROLES: ``node-role.kubernetes.io/<role>`` labels and ``kubernetes.io/role``, or <none>."""
    roles = {k.removeprefix("node-role.kubernetes.io/") for k in labels
             if k.startswith("node-role.kubernetes.io/") and k != "node-role.kubernetes.io/"}
    if labels.get("kubernetes.io/role"):
        roles.add(labels["kubernetes.io/role"])
    return ",".join(sorted(roles)) or NONE


def _address(obj: Mapping[str, Any], kind: str) -> str:
    addresses = _field(obj, "status", "addresses")
    for a in addresses if isinstance(addresses, list) else []:
        if isinstance(a, dict) and a.get("type") == kind and isinstance(a.get("address"), str):
            return str(a["address"])
    return NONE


def node_row(node: NodeSummary, now: float, *, wide: bool = False) -> list[str]:
    """A row of ``get nodes`` (:data:`NODE_COLUMNS`, :data:`NODE_WIDE_COLUMNS` when ``wide``)."""
    obj = node.manifest
    info = _field(obj, "status", "nodeInfo")
    info = info if isinstance(info, dict) else {}
    row = [node.name, node_status(node), node_roles(node.labels), age(obj, now), str(info.get("kubeletVersion", ""))]
    if wide:
        row += [_address(obj, "InternalIP"), _address(obj, "ExternalIP"),
                *(str(info.get(k) or "<unknown>") for k in ("osImage", "kernelVersion", "containerRuntimeVersion"))]
    return row


def object_name(kind: str, name: str) -> str:
    """``-o name``: ``pod/web``, ``node/n1``, ``reservation/r1``, ``podgroup.scheduling.k8s.io/train``."""
    return f"{kind.lower()}{'.scheduling.k8s.io' if kind == 'PodGroup' else ''}/{name}"


# ---- pod groups ------------------------------------------------------------------------------------


def pod_group_row(obj: Mapping[str, Any], now: float, *, namespace: bool = False) -> list[str]:
    """A PodGroup's row of ``kubectl get podgroups`` (:data:`POD_GROUP_COLUMNS`) from its API JSON:
    the policy (``Gang`` or ``Basic``), the Workload it was made from, and the status the API server's
    printer derives from its conditions: ``Pending`` without ``PodGroupInitiallyScheduled``, then
    ``Scheduled`` or ``Unschedulable``; a ``DisruptionTarget`` condition's reason over either. A 1.36 API
    server's group (``v1alpha2``) has that condition as ``PodGroupScheduled``, as its printer reads it."""
    policy = "Gang" if _field(obj, "spec", "schedulingPolicy", "gang") is not None else "Basic"
    conditions = _field(obj, "status", "conditions")
    by_type = {c.get("type"): c for c in conditions if isinstance(c, dict)} if isinstance(conditions, list) else {}
    scheduled = "PodGroupScheduled" if obj.get("apiVersion") == "scheduling.k8s.io/v1alpha2" else \
        "PodGroupInitiallyScheduled"
    status = "Pending"
    if scheduled in by_type:
        status = "Scheduled" if by_type[scheduled].get("status") == "True" else "Unschedulable"
    if "DisruptionTarget" in by_type:
        status = str(by_type["DisruptionTarget"].get("reason") or "")
    # v1beta1's spec.workloadRef, or v1alpha2's spec.podGroupTemplateRef.workload (a 1.36 API server).
    workload = _field(obj, "spec", "workloadRef", "workloadName") or _field(
        obj, "spec", "podGroupTemplateRef", "workload", "workloadName")
    row = [str(_meta(obj).get("name") or ""), policy, str(workload or NONE), status, age(obj, now)]
    return [str(_meta(obj).get("namespace") or ""), *row] if namespace else row
