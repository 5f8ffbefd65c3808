"""Explain: one scheduling cycle for a pod with every node evaluated and nothing reserved or bound,
answered as the explain JSON (per-node statuses, per-plugin scores, and the devices DynamicResources
gives the pod's ResourceClaims on the selected node); the what-if path runs it on a view with
hypothetical nodes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, NodeBatch
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Code, Status
from pluginhost.view import VIEW_STATE_KEY

from ..outcomes import Diagnosis, IntArray, ScoreOutcome
from ..plugins.dynamicresources import allocated_devices
from ..runtime import Framework
from .cycle import NO_NODES_MSG, filter_candidates, fit_error_message

__all__ = ["explain_pod"]


async def explain_pod(fwk: Framework, snapshot: Snapshot, pod: Pod, state: CycleState | None = None) -> dict[str, Any]:
    """One scheduling cycle for ``pod`` on ``snapshot`` with every node evaluated and nothing
    reserved or bound; per-node statuses and per-plugin scores, as the explain JSON. ``state`` may
    bring a view (a what-if's nodes) under ``VIEW_STATE_KEY``; transformers run as in a real cycle."""
    if state is None:
        state = CycleState(f"explain:{pod.uid}", snapshot)
    state.record = True
    base, base_view = snapshot, state.get(VIEW_STATE_KEY)
    diagnosis = Diagnosis()
    names = snapshot.table.names
    nodes: dict[str, dict[str, Any]] = {n: {"filter": None, "scores": {}, "total": None} for n in names}
    out: dict[str, Any] = {"pod": pod.key, "selected": None, "status": None, "nodes": nodes}

    def filter_json(st: Status) -> dict[str, Any]:
        return {"code": st.code.name, "plugin": st.plugin or None, "reasons": list(st.reasons)}

    def finish(status: Status) -> dict[str, Any]:
        out["status"] = {"code": status.code.name, "reasons": list(status.reasons)}
        return out

    if not names:
        return finish(Status(Code.Unschedulable, (NO_NODES_MSG,)))
    if fwk.pre_filter_transformers:
        pod, status = await fwk.run_pre_filter_transformers(state, pod)
        if not status.ok:
            return finish(status)
    pre, status = await fwk.run_pre_filter(state, pod, diagnosis)
    if not status.ok:
        for n in names:
            nodes[n]["filter"] = filter_json(status)
        if status.code is Code.Error:
            return finish(status)
        diagnosis.pre_filter_msg = status.message()
        return finish(Status(status.code, (fit_error_message(len(names), diagnosis),)))
    candidates = filter_candidates(snapshot, pre, diagnosis)
    if diagnosis.absent_nodes:
        kept = set(candidates.tolist())
        for row, n in enumerate(names):
            if row not in kept:
                nodes[n]["filter"] = filter_json(diagnosis.node_to_status.absent)
    if fwk.filter_transformers:
        snapshot, status = await fwk.run_node_transformers("filter", state, pod, base)
        if not status.ok:
            return finish(status)
    try:
        outcome = await fwk.run_filter(state, pod, snapshot, candidates, int(candidates.shape[0]), diagnosis)
    finally:
        fwk.end_view(state, base, base_view)
    if outcome.error is not None:
        return finish(outcome.error)
    for n, st in diagnosis.node_to_status.statuses.items():
        nodes[n]["filter"] = filter_json(st)
    feasible = outcome.feasible
    for r in feasible.tolist():
        nodes[names[r]]["filter"] = {"code": "Success", "plugin": None, "reasons": []}
    if feasible.shape[0] == 0:
        return finish(Status(Code.Unschedulable, (fit_error_message(len(names), diagnosis),)))
    snapshot = base
    if fwk.score_transformers:
        snapshot, status = await fwk.run_node_transformers("score", state, pod, base, feasible)
        if not status.ok:
            return finish(status)
    batch = NodeBatch(snapshot, feasible)
    try:
        status = await fwk.run_pre_score(state, pod, batch)
        if not status.ok:
            return finish(status)
        scores = await fwk.run_score(state, pod, batch, record=True)
    finally:
        fwk.end_view(state, base, base_view)
    if scores.error is not None:
        return finish(scores.error)
    _record_scores(nodes, names, feasible, scores)
    out["selected"] = names[fwk.select_host(feasible, scores.totals)]
    devices = allocated_devices(state, out["selected"])
    if devices:
        out["devices"] = devices  # the pod's ResourceClaims' devices on the selected node
    return finish(SUCCESS)


def _record_scores(
    nodes: dict[str, dict[str, Any]], names: Sequence[str], feasible: IntArray, scores: ScoreOutcome
) -> None:
    """Each feasible node's total and per-plugin scores (raw, normalized, weighted) in the explain JSON."""
    for i, r in enumerate(feasible.tolist()):
        entry = nodes[names[r]]
        entry["total"] = int(scores.totals[i])
        entry["scores"] = {
            name: {"raw": int(ps.raw[i]), "normalized": int(ps.normalized[i]), "weighted": int(ps.weighted[i])}
            for name, ps in scores.by_plugin.items()
        }
