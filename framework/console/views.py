"""The console's JSON views (what ``/ui/api/...`` answers, what the page draws and the tests read):
:func:`overview`, :func:`search`, :func:`pod_view`, :func:`configuration` and :func:`explain_now`.
Each reads the scheduler's state when asked; nothing here runs on the scheduling path."""

from __future__ import annotations

import dataclasses
from typing import Any

from google.protobuf.json_format import MessageToDict

from pluginhost.errors import OutriggerError

from ..observe.configz import configz
from ..scheduler.records import BOUND, UNSCHEDULABLE_PHASE
from .core import Console

__all__ = ["MAX_RESULTS", "MAX_WHAT_IF", "ConsoleLookupError", "configuration", "explain_now", "overview", "pod_view",
           "search", "trace_view", "what_if_now"]

#: Pods a search answers at most (the count says how many matched).
MAX_RESULTS = 200
#: Pods listed per unschedulable reason in the overview.
GROUP_PODS = 20


class ConsoleLookupError(OutriggerError, LookupError):
    """A pod or trace a console request names that the framework does not hold (answered 404)."""


def _status_dict(status: Any) -> dict[str, Any] | None:
    if status is None:
        return None
    return {"code": status.code.name, "plugin": status.plugin or None, "reasons": list(status.reasons),
            "message": status.message()}


def unschedulable_groups(scheduler: Any) -> list[dict[str, Any]]:
    """Pods in phase Unschedulable grouped by their last attempt's message (the PodScheduled
    condition's message), largest group first."""
    groups: dict[str, dict[str, Any]] = {}
    for rec in list(scheduler.pods.values()):
        if rec.phase != UNSCHEDULABLE_PHASE:
            continue
        message = rec.last_status.message() if rec.last_status is not None else ""
        g = groups.setdefault(message, {"reason": message, "count": 0, "pods": []})
        g["count"] += 1
        if len(g["pods"]) < GROUP_PODS:
            g["pods"].append(rec.pod.key)
    out = sorted(groups.values(), key=lambda g: (-g["count"], g["reason"]))
    for g in out:
        g["pods"].sort()
    return out


def _plugin_metrics(metrics: Any) -> dict[tuple[str, str], dict[str, float]]:
    """(plugin, point) -> sampled calls, errors and mean seconds from the plugin execution histogram."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    if metrics is None:
        return out
    for family in metrics.plugin.collect():
        for s in family.samples:
            if s.name.endswith("_count") or s.name.endswith("_sum"):
                key = (s.labels["plugin"], s.labels["extension_point"])
                row = out.setdefault(key, {"calls": 0.0, "errors": 0.0, "seconds": 0.0})
                if s.name.endswith("_count"):
                    row["calls"] += s.value
                    if s.labels["status"] == "Error":
                        row["errors"] += s.value
                else:
                    row["seconds"] += s.value
    return out


def plugins_table(console: Console) -> list[dict[str, Any]]:
    """Each profile's plugins per extension point: calls, errors and mean latency. In-process plugins:
    the sampled plugin metric (``sampled: true``); remote plugins: every call, as their adapter counts."""
    sampled = _plugin_metrics(console.metrics)
    remote: dict[str, dict[str, Any]] = console.remote.stats() if console.remote is not None else {}
    rows = []
    for profile, fwk in console.scheduler.profiles.items():
        for name in fwk.plugins:
            points = set(remote.get(name, {})) | {p for (pl, p) in sampled if pl == name}
            for point in sorted(points):
                st = remote.get(name, {}).get(point)
                if st is not None:
                    calls, errors, seconds, is_remote = st.calls, st.errors, st.seconds, True
                else:
                    m = sampled[(name, point)]
                    calls, errors, seconds, is_remote = int(m["calls"]), int(m["errors"]), m["seconds"], False
                rows.append({"profile": profile, "plugin": name, "point": point, "calls": int(calls),
                             "errors": int(errors), "meanMs": round(seconds / calls * 1000, 3) if calls else None,
                             "remote": is_remote, "sampled": not is_remote})
    return rows


def endpoints_table(console: Console) -> list[dict[str, Any]]:
    """Each remote endpoint's replicas: health, calls routed, in-flight calls and latency where the
    replica keeps them."""
    if console.remote is None:
        return []
    out = []
    for ep in console.remote.endpoints:
        replicas = []
        for r in ep.replicas:
            healthy = bool(getattr(r, "serving", True)) and not getattr(r, "suspect", False)
            replicas.append({
                "address": r.address, "healthy": healthy, "picked": int(getattr(r, "picked", 0)),
                "inFlight": getattr(r, "in_flight", None), "latencyMs": getattr(r, "latency_ms", None),
            })
        out.append({"endpoint": ep.name, "replicas": replicas,
                    "plugins": sorted(getattr(ep, "manifests", None) or {})})
    return out


def overview(console: Console) -> dict[str, Any]:
    """The overview page: the latest sample and the kept history, unschedulable groups, plugins and
    remote endpoints."""
    return {
        "now": console.sample() if not console.history else console.history[-1],
        "history": list(console.history),
        "unschedulable": unschedulable_groups(console.scheduler),
        "plugins": plugins_table(console),
        "endpoints": endpoints_table(console),
        "watching": console.watching(),
    }


def _pod_row(scheduler: Any, rec: Any) -> dict[str, Any]:
    pod = rec.pod
    return {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "phase": rec.phase,
            "node": pod.node_name or None, "nominatedNode": pod.nominated_node_name or None,
            "attempts": rec.attempts, "profile": rec.profile or pod.scheduler_name,
            "queue": scheduler.queue_of(pod.uid), "status": _status_dict(rec.last_status),
            "variant": getattr(rec, "variant", "") or None}


def search(console: Console, query: str) -> dict[str, Any]:
    """Pods whose namespace/name, node, nominated node, phase or last reason contain every word of
    ``query`` (case-insensitive; ``ns:``, ``node:`` and ``reason:`` narrow a word to that field)."""
    words = query.lower().split()
    matched = []
    for rec in list(console.scheduler.pods.values()):
        pod = rec.pod
        reason = rec.last_status.message().lower() if rec.last_status is not None and rec.phase != BOUND else ""
        fields = {"ns": pod.namespace.lower(), "name": pod.name.lower(),
                  "node": f"{pod.node_name} {pod.nominated_node_name}".lower(), "reason": reason,
                  "phase": rec.phase.lower()}
        if all(_matches(word, fields) for word in words):
            matched.append(rec)
    matched.sort(key=lambda r: (r.pod.namespace, r.pod.name))
    return {"query": query, "count": len(matched),
            "pods": [_pod_row(console.scheduler, r) for r in matched[:MAX_RESULTS]]}


def _matches(word: str, fields: dict[str, str]) -> bool:
    field, sep, value = word.partition(":")
    if sep and field in fields:
        return value in fields[field]
    return any(word in v for v in (f"{fields['ns']}/{fields['name']}", *fields.values()))


def _events(scheduler: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    return [{"sequence": ev.sequence, "type": ev.type, "node": ev.node_name or None, "timestamp": ev.timestamp,
             "attempts": ev.attempts, "status": _status_dict(ev.status)}
            for ev in scheduler.recent_events() if ev.kind == "Pod" and ev.namespace == namespace and ev.name == name]


def pod_view(console: Console, namespace: str, name: str) -> dict[str, Any]:
    """A pod: its state, its kept attempts (Filter groups, best scores, chosen node, trace id) and its
    recent events. ConsoleLookupError when the framework does not hold it."""
    rec = console.scheduler.get_pod(namespace, name)
    if rec is None:
        raise ConsoleLookupError(f"pod {namespace}/{name} not found")
    key = rec.pod.key
    return {**_pod_row(console.scheduler, rec),
            "attempts": [a.to_dict() for a in console.attempts.of(key)],
            "attemptCount": rec.attempts,
            "events": _events(console.scheduler, namespace, name)}


def trace_view(console: Console, trace_id: str) -> dict[str, Any]:
    """A trace's kept spans (the framework's and the plugin hosts'), by start time."""
    spans = console.spans.trace(trace_id.lower())
    if not spans:
        raise ConsoleLookupError(f"trace {trace_id} is not kept (traces are kept while the console is open; "
                        f"the last {console.spans.max_traces})")
    return {"traceId": trace_id.lower(), "spans": spans}


def configuration(console: Console) -> dict[str, Any]:
    """Profiles with their plugins per extension point, weights and args (``/configz``'s
    componentconfig), the feature gates, and the remote endpoints with their plugins' manifests."""
    cfg = configz(console.scheduler.config)
    endpoints = []
    for ep in console.remote.endpoints if console.remote is not None else ():
        manifests = getattr(ep, "manifests", None) or {}
        endpoints.append({
            "endpoint": ep.name, "addresses": [r.address for r in ep.replicas],
            "manifests": {name: _manifest(m) for name, m in sorted(manifests.items())},
        })
    return {**cfg, "endpoints": endpoints}


def _manifest(m: Any) -> Any:
    try:
        return MessageToDict(m, preserving_proto_field_name=True)
    except (TypeError, AttributeError):
        return m if isinstance(m, dict | str | int | float | bool | None) else repr(m)


async def explain_now(console: Console, namespace: str, name: str) -> dict[str, Any]:
    """``outrigger explain POD -o json`` on the current state: a placed pod is taken off its node first,
    so the answer shows how it is placed now. ConsoleLookupError when the pod or its profile is unknown."""
    from ..canary import for_pod
    from ..scheduler.explain import explain_pod
    from ..whatif import with_node_pods

    s = console.scheduler
    rec = s.get_pod(namespace, name)
    if rec is None:
        raise ConsoleLookupError(f"pod {namespace}/{name} not found")
    fwk = s.profiles.get(rec.pod.scheduler_name)
    if fwk is None:
        raise ConsoleLookupError(f"pod {namespace}/{name}: no profile named {rec.pod.scheduler_name!r}")
    snap = s.cache.snapshot()
    pod = rec.pod
    node = s.cache.node_of(pod.uid)
    row = snap.row(node) if node else None
    if row is not None:
        others = [p for p in snap.pods[row] if p.uid != pod.uid]
        pod, snap = dataclasses.replace(pod, node_name="", nominated_node_name=""), with_node_pods(snap, row, others)
    fwk, variant = for_pod(fwk, pod, rec.variant)  # a canary pod is explained by the canary variant
    result: dict[str, Any] = await explain_pod(fwk, snap, pod)
    if variant is not None:
        result["variant"] = variant
    return result


#: The most hypothetical nodes a what-if from the console adds.
MAX_WHAT_IF = 100


async def what_if_now(console: Console, namespace: str, name: str, node: str, count: int) -> dict[str, Any]:
    """``outrigger explain --what-if-nodes NODE.yaml --count N -f POD.yaml``'s answer for a held pod:
    would it be scheduled if ``count`` nodes like the cluster's node ``node`` were added? Nothing is
    reserved, bound or cached. ConsoleLookupError when the pod or the node is unknown."""
    s = console.scheduler
    rec = s.get_pod(namespace, name)
    if rec is None:
        raise ConsoleLookupError(f"pod {namespace}/{name} not found")
    template = s.nodes.get(node)
    if template is None:
        raise ConsoleLookupError(f"node {node!r} not found (the what-if template is a node of the cluster)")
    pod = dataclasses.replace(rec.pod, node_name="", nominated_node_name="")
    result: dict[str, Any] = await s.what_if(template, count, [pod])
    return result
