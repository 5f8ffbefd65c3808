"""``outrigger describe pod|node|podgroup``: kubectl's describe layout, from what the Scheduler API answers.

    text = describe_pod(client.get_pod("web"), client.list_events("Pod", "web"), now=time.time())

Pure functions of their arguments (``now`` included). The sections follow kubectl's describers
(``k8s.io/kubectl/pkg/describe``) as far as the model has the data; what differs is listed in
docs/kubectl.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pluginhost.quantity import canonical, format_quantity

from .printers import NONE, TabWriter, human_duration, node_roles, parse_time
from .types import Event, EventType, NodeSummary, PodGroupSummary, PodState

__all__ = ["EventRow", "describe_node", "describe_object", "describe_pod", "describe_pod_group", "event_rows",
           "qos_class", "smart_label"]

# kubectl shortens long annotation values (describe's maxAnnotationLen).
_MAX_ANNOTATION = 140


class _Writer:
    """kubectl's PrefixWriter over a tab writer: lines at an indent level (two spaces each), and
    ``flush`` to end every column block (kubectl flushes before the events table)."""

    def __init__(self, *, trim: bool = True) -> None:
        self.parts: list[str] = []
        self.pending: list[str] = []
        self.trim = trim

    def line(self, level: int, text: str) -> None:
        self.pending.append("  " * level + text + "\n")

    def flush(self) -> None:
        if self.pending:
            self.parts.append(TabWriter(padding=2, trim=self.trim).format("".join(self.pending)))
            self.pending = []

    def text(self) -> str:
        self.flush()
        return "".join(self.parts)


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _time(ts: float | None) -> str:
    """RFC 1123 with a numeric zone, as kubectl prints times (here always in UTC)."""
    return "<unknown>" if ts is None else datetime.fromtimestamp(ts, UTC).strftime("%a, %d %b %Y %H:%M:%S +0000")


def _multiline(w: _Writer, title: str, entries: Sequence[str]) -> None:
    """``Title:  first`` then one entry per line under it (kubectl's printLabelsMultiline)."""
    if not entries:
        w.line(0, f"{title}:\t{NONE}")
        return
    for i, entry in enumerate(entries):
        w.line(0, f"{title}:\t{entry}" if i == 0 else f"\t{entry}")


def _labels(w: _Writer, title: str, labels: Mapping[str, Any]) -> None:
    _multiline(w, title, [f"{k}={labels[k]}" for k in sorted(labels)])


def _annotations(w: _Writer, annotations: Mapping[str, Any]) -> None:
    keys = sorted(k for k in annotations if k != "kubectl.kubernetes.io/last-applied-configuration")
    if not keys:
        w.line(0, f"Annotations:\t{NONE}")
        return
    for i, key in enumerate(keys):
        lead = "Annotations:\t" if i == 0 else "\t"
        value = str(annotations[key]).rstrip("\n")
        if len(value) + len(key) + 2 > _MAX_ANNOTATION or "\n" in value:
            w.line(0, f"{lead}{key}:")
            for part in value.split("\n"):
                short = part if len(part) <= _MAX_ANNOTATION - 2 else part[:_MAX_ANNOTATION - 5] + "..."
                w.line(0, f"\t  {short}")
        else:
            w.line(0, f"{lead}{key}: {value}")


def _quantity(resource: str, raw: Any) -> str:
    """A quantity as kubectl shows it (canonical: ``0.5`` is ``500m``)."""
    try:
        return format_quantity(resource, canonical(resource, raw))
    except (ValueError, TypeError):
        return str(raw)


def _resources(w: _Writer, level: int, resources: Mapping[str, Any]) -> None:
    for title in ("limits", "requests"):
        amounts = _map(resources.get(title))
        if amounts:
            w.line(level, f"{title.capitalize()}:")
            for name in sorted(amounts):
                w.line(level + 1, f"{name}:\t{_quantity(name, amounts[name])}")


def _ports(ports: list[Any], field: str) -> str:
    return ", ".join(f"{_map(p).get(field, 0)}/{_map(p).get('protocol', 'TCP')}" for p in ports)


def _containers(w: _Writer, title: str, containers: list[Any]) -> None:
    w.line(0, f"{title}:" if containers else f"{title}: {NONE}")
    for raw in containers:
        c = _map(raw)
        w.line(1, f"{c.get('name', '')}:")
        w.line(2, f"Image:\t{c.get('image', '')}")
        ports = _list(c.get("ports"))
        for label, field in (("Port", "containerPort"), ("Host Port", "hostPort")):
            shown = _ports(ports, field)
            w.line(2, f"{label}s:\t{shown}" if "," in shown else f"{label}:\t{shown or NONE}")
        for label in ("command", "args"):
            if _list(c.get(label)):
                w.line(2, f"{label.capitalize()}:")
                for arg in _list(c.get(label)):
                    for part in str(arg).split("\n"):
                        w.line(3, part)
        _resources(w, 2, _map(c.get("resources")))
        env = _list(c.get("env"))
        w.line(2, "Environment:" if env else f"Environment:\t{NONE}")
        for e in env:
            e = _map(e)
            shown = e.get("value", "") if "valueFrom" not in e else "<set from valueFrom>"
            w.line(3, f"{e.get('name', '')}:\t{shown}")
        mounts = sorted((_map(m) for m in _list(c.get("volumeMounts"))), key=lambda m: str(m.get("mountPath", "")))
        w.line(2, "Mounts:" if mounts else f"Mounts:\t{NONE}")
        for m in mounts:
            mode = "ro" if m.get("readOnly") else "rw"
            w.line(3, f"{m.get('mountPath', '')} from {m.get('name', '')} ({mode})")


def qos_class(spec: Mapping[str, Any]) -> str:
    """The pod's QoS class from its containers' cpu and memory requests and limits (requests default
    to limits, as the API server defaults them): BestEffort, Guaranteed or Burstable."""
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for raw in [*_list(spec.get("containers")), *_list(spec.get("initContainers"))]:
        res = _map(_map(raw).get("resources"))
        lim = {r: canonical(r, v) for r, v in _map(res.get("limits")).items() if r in ("cpu", "memory")}
        req = {**lim, **{r: canonical(r, v) for r, v in _map(res.get("requests")).items() if r in ("cpu", "memory")}}
        for into, amounts in ((requests, req), (limits, lim)):
            for r, amount in amounts.items():
                if amount > 0:
                    into[r] = into.get(r, 0) + amount
        if not all(lim.get(r, 0) > 0 for r in ("cpu", "memory")):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    if guaranteed and requests == limits:
        return "Guaranteed"
    return "Burstable"


def _toleration(t: Mapping[str, Any]) -> str:
    text = str(t.get("key", ""))
    if t.get("value"):
        text += f"={t['value']}"
    if t.get("effect"):
        text += f":{t['effect']}"
    if t.get("operator") == "Exists" and not t.get("value"):
        text += " op=Exists" if t.get("key") or t.get("effect") else "op=Exists"
    if t.get("tolerationSeconds") is not None:
        text += f" for {t['tolerationSeconds']}s"
    return text


def _selector_text(sel: Mapping[str, Any]) -> str:
    parts = [(k, f"{k}={v}") for k, v in _map(sel.get("matchLabels")).items()]
    for e in _list(sel.get("matchExpressions")):
        e = _map(e)
        key, op, values = str(e.get("key", "")), e.get("operator"), ",".join(map(str, _list(e.get("values"))))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                "DoesNotExist": f"!{key}"}.get(str(op), key)
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts)) or NONE


# ---- events ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EventRow:
    """A line of the Events table: identical events counted into one (``count``, first and last)."""

    type: str
    reason: str
    source: str
    message: str
    count: int
    first: float
    last: float

    def age(self, now: float) -> str:
        first = human_duration(now - self.first)
        return f"{human_duration(now - self.last)} (x{self.count} over {first})" if self.count > 1 else first


def _kube_event(ev: Event) -> tuple[str, str, str] | None:
    """(type, reason, message) of the Kubernetes event kube-scheduler records for ``ev``; None for
    events it records none for (applied, deleted, nominated)."""
    obj = ev.object
    if ev.type is EventType.BOUND:
        return "Normal", "Scheduled", f"Successfully assigned {obj.namespace}/{obj.name} to {ev.node_name}"
    if ev.type in (EventType.UNSCHEDULABLE, EventType.ERROR):
        return "Warning", "FailedScheduling", ", ".join(ev.status.reasons)
    if ev.type is EventType.PREEMPTED:
        reason = ", ".join(ev.status.reasons)
        return "Normal", "Preempted", reason[:1].upper() + reason[1:]
    return None


def event_rows(events: Iterable[Event], source: str) -> list[EventRow]:
    """The Events table's rows: kube-scheduler's events (``source``: its name, the pod's profile),
    identical ones counted as the event recorder counts them, ordered by when they last happened."""
    rows: dict[tuple[str, str, str], EventRow] = {}
    for ev in events:
        kube = _kube_event(ev)
        if kube is None:
            continue
        old = rows.get(kube)
        rows[kube] = EventRow(*kube[:2], source, kube[2], 1, ev.timestamp, ev.timestamp) if old is None else \
            EventRow(old.type, old.reason, source, old.message, old.count + 1, old.first, ev.timestamp)
    return sorted(rows.values(), key=lambda r: r.last)


def _events(w: _Writer, rows: list[EventRow], now: float) -> None:
    if not rows:
        w.line(0, f"Events:\t{NONE}")
        return
    w.flush()
    w.line(0, "Events:")
    w.line(1, "Type\tReason\tAge\tFrom\tMessage")
    w.line(1, "----\t------\t----\t----\t-------")
    for r in rows:
        w.line(1, f"{r.type}\t{r.reason}\t{r.age(now)}\t{r.source}\t{r.message.strip()}")


# ---- pods ------------------------------------------------------------------------------------------


def describe_pod(pod: PodState, events: Iterable[Event], now: float) -> str:
    """``describe pod``: the pod (its v1 object in ``pod.manifest``) and its scheduling events."""
    obj = pod.manifest
    meta, spec, status = _map(obj.get("metadata")), _map(obj.get("spec")), _map(obj.get("status"))
    w = _Writer()
    w.line(0, f"Name:\t{pod.ref.name}")
    w.line(0, f"Namespace:\t{pod.ref.namespace}")
    w.line(0, f"Priority:\t{pod.priority}")
    if spec.get("priorityClassName"):
        w.line(0, f"Priority Class Name:\t{spec['priorityClassName']}")
    if spec.get("serviceAccountName"):
        w.line(0, f"Service Account:\t{spec['serviceAccountName']}")
    w.line(0, f"Node:\t{pod.node_name or NONE}")
    _labels(w, "Labels", _map(meta.get("labels")))
    _annotations(w, _map(meta.get("annotations")))
    w.line(0, f"Status:\t{status.get('phase', 'Pending')}")
    w.line(0, "IP:\t")
    w.line(0, f"IPs:\t{NONE}")
    if pod.nominated_node_name:
        w.line(0, f"NominatedNodeName:\t{pod.nominated_node_name}")
    if _list(spec.get("initContainers")):
        _containers(w, "Init Containers", _list(spec.get("initContainers")))
    _containers(w, "Containers", _list(spec.get("containers")))
    gates = _list(spec.get("schedulingGates"))
    if gates:
        w.line(0, "Scheduling Gates:")
        for g in gates:
            w.line(1, str(_map(g).get("name", "")))
    conditions = [_map(c) for c in _list(status.get("conditions"))]
    if conditions:
        w.line(0, "Conditions:")
        w.line(1, "Type\tStatus\tReason")
        for c in conditions:
            w.line(1, f"{c.get('type', '')} \t{c.get('status', '')} \t{c.get('reason', '')}")
    volumes = [_map(v) for v in _list(spec.get("volumes"))]
    w.line(0, "Volumes:" if volumes else f"Volumes:\t{NONE}")
    for v in volumes:
        w.line(1, f"{v.get('name', '')}:")
        kinds = [k for k in v if k != "name"]
        w.line(2, f"Type:\t{kinds[0][:1].upper() + kinds[0][1:]}" if kinds else "<unknown>")
    w.line(0, f"QoS Class:\t{qos_class(spec)}")
    _labels(w, "Node-Selectors", _map(spec.get("nodeSelector")))
    tolerations = sorted((_map(t) for t in _list(spec.get("tolerations"))), key=lambda t: str(t.get("key", "")))
    _multiline(w, "Tolerations", [_toleration(t) for t in tolerations])
    spread = sorted((_map(c) for c in _list(spec.get("topologySpreadConstraints"))),
                    key=lambda c: str(c.get("topologyKey", "")))
    for i, c in enumerate(spread):
        text = (f"{c.get('topologyKey', '')}:{c.get('whenUnsatisfiable', '')} when max skew {c.get('maxSkew', '')} "
                "is exceeded")
        if c.get("labelSelector") is not None:
            text += f" for selector {_selector_text(_map(c.get('labelSelector')))}"
        w.line(0, f"Topology Spread Constraints:\t{text}" if i == 0 else f"\t{text}")
    _events(w, event_rows(events, pod.profile or str(spec.get("schedulerName", "default-scheduler"))), now)
    return w.text()


# ---- nodes -----------------------------------------------------------------------------------------

_STANDARD = ("cpu", "memory", "ephemeral-storage", "storage", "pods")


def _pod_amounts(spec: Mapping[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """A pod's requests and limits as kubectl adds them up: containers summed, at least the largest
    init container, plus the overhead (requests default to limits)."""
    def of(raw: Any) -> tuple[dict[str, int], dict[str, int]]:
        res = _map(_map(raw).get("resources"))
        lim = {r: canonical(r, v) for r, v in _map(res.get("limits")).items()}
        return {**lim, **{r: canonical(r, v) for r, v in _map(res.get("requests")).items()}}, lim

    totals: tuple[dict[str, int], dict[str, int]] = ({}, {})
    for raw in _list(spec.get("containers")):
        for total, amounts in zip(totals, of(raw), strict=True):
            for r, a in amounts.items():
                total[r] = total.get(r, 0) + a
    for raw in _list(spec.get("initContainers")):
        for total, amounts in zip(totals, of(raw), strict=True):
            for r, a in amounts.items():
                total[r] = max(total.get(r, 0), a)
    overhead = {r: canonical(r, v) for r, v in _map(spec.get("overhead")).items()}
    requests, limits = totals
    for r, a in overhead.items():
        requests[r] = requests.get(r, 0) + a
        if r in limits:
            limits[r] += a
    return requests, limits


def _share(resource: str, amount: int, allocatable: Mapping[str, int]) -> str:
    whole = allocatable.get(resource, 0)
    return f"{format_quantity(resource, amount)} ({int(amount * 100 / whole) if whole else 0}%)"


def describe_node(node: NodeSummary, pods: Sequence[PodState], events: Iterable[Event], now: float) -> str:
    """``describe node``: the node (its v1 object in ``node.manifest``), the pods bound to it with
    their share of its allocatable resources, and its events."""
    obj = node.manifest
    meta, spec, status = _map(obj.get("metadata")), _map(obj.get("spec")), _map(obj.get("status"))
    w = _Writer()
    w.line(0, f"Name:\t{node.name}")
    w.line(0, f"Roles:\t{node_roles(node.labels)}")
    _labels(w, "Labels", _map(meta.get("labels")))
    _annotations(w, _map(meta.get("annotations")))
    w.line(0, f"CreationTimestamp:\t{_time(parse_time(meta.get('creationTimestamp')))}")
    taints = [_map(t) for t in _list(spec.get("taints"))]
    _multiline(w, "Taints", [f"{t.get('key', '')}{'=' + str(t['value']) if t.get('value') else ''}:"
                             f"{t.get('effect', '')}" for t in taints])
    w.line(0, f"Unschedulable:\t{'true' if node.unschedulable else 'false'}")
    conditions = [_map(c) for c in _list(status.get("conditions"))]
    if conditions:
        w.line(0, "Conditions:")
        w.line(1, "Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage")
        w.line(1, "----\t------\t-----------------\t------------------\t------\t-------")
        for c in conditions:
            w.line(1, f"{c.get('type', '')} \t{c.get('status', '')} \t"
                      f"{_time(parse_time(c.get('lastHeartbeatTime')))} \t"
                      f"{_time(parse_time(c.get('lastTransitionTime')))} \t{c.get('reason', '')} \t"
                      f"{c.get('message', '')}")
    w.line(0, "Addresses:")
    for a in _list(status.get("addresses")):
        w.line(1, f"{_map(a).get('type', '')}:\t{_map(a).get('address', '')}")
    for title in ("capacity", "allocatable"):
        amounts = _map(status.get(title))
        if amounts:
            w.line(0, f"{title.capitalize()}:")
            for name in sorted(amounts):
                w.line(1, f"{name}:\t{_quantity(name, amounts[name])}")
    info = _map(status.get("nodeInfo"))
    if info:
        w.line(0, "System Info:")
        for label, key in (("Machine ID", "machineID"), ("System UUID", "systemUUID"), ("Boot ID", "bootID"),
                           ("Kernel Version", "kernelVersion"), ("OS Image", "osImage"),
                           ("Operating System", "operatingSystem"), ("Architecture", "architecture"),
                           ("Container Runtime Version", "containerRuntimeVersion"),
                           ("Kubelet Version", "kubeletVersion"), ("Kube-Proxy Version", "kubeProxyVersion")):
            w.line(1, f"{label}:\t{info.get(key, '')}")
    if spec.get("providerID"):
        w.line(0, f"ProviderID:\t{spec['providerID']}")
    allocatable = node.allocatable
    w.line(0, f"Non-terminated Pods:\t({len(pods)} in total)")
    w.line(1, "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge")
    w.line(1, "---------\t----\t\t------------\t----------\t---------------\t-------------\t---")
    total_requests: dict[str, int] = {}
    total_limits: dict[str, int] = {}
    for pod in pods:
        requests, limits = _pod_amounts(_map(pod.manifest.get("spec")))
        for total, amounts in ((total_requests, requests), (total_limits, limits)):
            for r, a in amounts.items():
                total[r] = total.get(r, 0) + a
        created = parse_time(_map(pod.manifest.get("metadata")).get("creationTimestamp"))
        w.line(1, "\t".join([pod.ref.namespace, pod.ref.name, "",
                             *(_share(r, amounts.get(r, 0), allocatable) for r in ("cpu", "memory")
                               for amounts in (requests, limits)),
                             "<unknown>" if created is None else human_duration(now - created)]))
    w.line(0, "Allocated resources:")
    w.line(1, "(Total limits may be over 100 percent, i.e., overcommitted.)")
    w.line(1, "Resource\tRequests\tLimits")
    w.line(1, "--------\t--------\t------")
    shared = ["cpu", "memory", "ephemeral-storage", *sorted(r for r in allocatable if r.startswith("hugepages-"))]
    for r in shared:
        w.line(1, f"{r}\t{_share(r, total_requests.get(r, 0), allocatable)}\t"
                  f"{_share(r, total_limits.get(r, 0), allocatable)}")
    for r in sorted(r for r in allocatable if r not in _STANDARD and not r.startswith("hugepages-")):
        w.line(1, f"{r}\t{format_quantity(r, total_requests.get(r, 0))}\t{format_quantity(r, total_limits.get(r, 0))}")
    _events(w, event_rows(events, "default-scheduler"), now)
    return w.text()


# ---- any object: kubectl's generic describer ---------------------------------------------------------


def _camel_split(word: str) -> list[str]:
    """github.com/fatih/camelcase's Split: runs of lower, upper, digit and other characters, an upper
    letter before a lower run going with it (``PDFLoader`` -> ``PDF``, ``Loader``)."""
    runs: list[str] = []
    last = 0
    for ch in word:
        cls = 1 if ch.islower() else 2 if ch.isupper() else 3 if ch.isdigit() else 4
        if cls == last:
            runs[-1] += ch
        else:
            runs.append(ch)
        last = cls
    for i in range(len(runs) - 1):
        if runs[i] and runs[i][0].isupper() and runs[i + 1][0].islower():
            runs[i + 1] = runs[i][-1] + runs[i + 1]
            runs[i] = runs[i][:-1]
    return [r for r in runs if r]


def smart_label(field: str) -> str:
    """kubectl's smartLabelFor: a field name as a describe label (``apiVersion`` -> ``API Version``,
    ``minCount`` -> ``Min Count``); a name with characters other than letters and ``-`` as it is."""
    if any(not (ch.isalpha() or ch == "-") for ch in field):
        return field
    parts, merged, i = _camel_split(field), [], 0
    while i < len(parts):
        part = parts[i]
        upper = all(ch.isupper() for ch in part if ch.isalpha())
        if i + 1 < len(parts) and len(part) >= 2 and upper and parts[i + 1][:1].isupper():
            merged.append(part + parts[i + 1])
            i += 2
            continue
        merged.append(part)
        i += 1
    out = []
    for part in merged:
        if part.upper() in ("API", "URL", "UID", "GUID"):
            part = part.upper()
        elif part.lower() == part:
            part = part[:1].upper() + part[1:]
        out.append(part)
    return " ".join(out)


def _go_value(value: Any) -> str:
    """A JSON value as Go's ``%v`` prints it from an unstructured object."""
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, list):
        return "[" + " ".join(_go_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_value(v)}" for k, v in sorted(value.items())) + "]"
    return str(value)


_SKIPPED = (".metadata.managedFields", ".metadata.name", ".metadata.namespace", ".metadata.labels",
            ".metadata.annotations")


def _content(w: _Writer, level: int, content: Mapping[str, Any], prefix: str) -> None:
    """kubectl's printUnstructuredContent: every field by name; maps and lists under their label."""
    for name in sorted(content):
        value, path = content[name], f"{prefix}.{name}"
        if path in _SKIPPED:
            continue
        if isinstance(value, dict):
            w.line(level, f"{smart_label(name)}:")
            _content(w, level + 1, value, path)
        elif isinstance(value, list):
            w.line(level, f"{smart_label(name)}:")
            for child in value:
                if isinstance(child, dict):
                    _content(w, level + 1, child, path)
                else:
                    w.line(level + 1, _go_value(child))
        else:
            w.line(level, f"{smart_label(name)}:\t{_go_value(value)}")


def describe_object(obj: Mapping[str, Any], extra: Sequence[tuple[str, str]] = ()) -> str:
    """kubectl's describe of a type it has no describer of its own for (its genericDescriber): name,
    namespace, labels, annotations, then every field of the object (``managedFields`` left out), then
    ``Events: <none>``. ``extra``: lines (title, value) Outrigger adds before the events."""
    meta = _map(obj.get("metadata"))
    w = _Writer(trim=False)  # a value ending in a blank keeps it, as kubectl's does
    w.line(0, f"Name:\t{meta.get('name') or ''}")
    w.line(0, f"Namespace:\t{meta.get('namespace') or ''}")
    _labels(w, "Labels", _map(meta.get("labels")))
    _annotations(w, _map(meta.get("annotations")))
    _content(w, 0, obj, "")
    for title, value in extra:
        w.line(0, f"{title}:\t{value}")
    w.line(0, f"Events:\t{NONE}")  # the scheduler writes no events on these objects
    return w.text()


def describe_pod_group(group: PodGroupSummary) -> str:
    """``describe podgroup``: kubectl's text for the PodGroup (:func:`describe_object`; kube-scheduler
    writes no events on PodGroups), and Outrigger's ``Pods:`` line, the pods that name the group."""
    return describe_object(group.manifest, [("Pods", ", ".join(group.pods) or NONE)])

