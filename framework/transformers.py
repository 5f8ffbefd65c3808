"""Transformers: the pod and the node views a cycle's phases run on. PreFilter transformers change
the pod the cycle's plugins see; Filter, Score and PostFilter transformers change the nodes their
point's plugins see, each on the previous one's view, and the view travels in the CycleState so
remote plugins apply it to their mirror."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pluginhost.model import Pod
from pluginhost.plugin import CycleState, NodeBatch
from pluginhost.snapshot import Snapshot
from pluginhost.status import SUCCESS, Status
from pluginhost.view import VIEW_STATE_KEY, NodeView, ViewError, apply_pod_change, apply_view, changes_of

from .outcomes import IntArray, failed_status, raised_status

__all__ = ["end_view", "transform_nodes", "transform_pod"]


async def transform_pod(transformers: Sequence[Any], state: CycleState, pod: Pod) -> tuple[Pod, Status]:
    """The pod as this cycle's PreFilter, Filter, PostFilter and Score plugins see it: each
    PreFilter transformer's change applied in order. ``pod`` itself is never changed."""
    for pl in transformers:
        try:
            change, status = await pl.before_pre_filter(state, pod)
            if status.ok:
                pod = apply_pod_change(pod, change)
        except Exception as exc:
            return pod, raised_status("BeforePreFilter", pl, exc)
        if not status.ok:
            if status.is_rejected:
                return pod, status.with_plugin(pl.name)
            return pod, failed_status("BeforePreFilter", pl, status)
    return pod, SUCCESS


async def transform_nodes(
    point: str, transformers: Sequence[Any], state: CycleState, pod: Pod, snapshot: Snapshot,
    rows: IntArray | None = None,
) -> tuple[Snapshot, Status]:
    """The snapshot as the plugins of ``point`` ("filter", "score" or "postFilter") see it: each
    transformer of the point applies its node changes on the previous one's view. The view (added
    to the one ``state`` already carries, e.g. a what-if's nodes) is put in ``state`` under
    ``VIEW_STATE_KEY`` so remote plugins get it; :func:`end_view` puts the base back."""
    if not transformers:
        return snapshot, SUCCESS
    base_view: NodeView = state.get(VIEW_STATE_KEY) or NodeView()
    view = base_view
    what = {"filter": "BeforeFilter", "score": "BeforeScore", "postFilter": "BeforePostFilter"}[point]
    current = snapshot
    for pl in transformers:
        state.write(VIEW_STATE_KEY, view)
        state.snapshot = current
        try:
            if point == "filter":
                changes, status = await pl.before_filter(state, pod, current)
            elif point == "postFilter":
                changes, status = await pl.before_post_filter(state, pod, current)
            else:
                all_rows = rows if rows is not None else current.table.order
                changes, status = await pl.before_score(state, pod, NodeBatch(current, all_rows))
            if status.ok:
                more = changes_of(changes)
                if more:
                    current = apply_view(current, NodeView(changes=more))
                    view = view.then(more)
        except (Exception, ViewError) as exc:
            end_view(state, snapshot, base_view)
            return snapshot, raised_status(what, pl, exc)
        if not status.ok:
            end_view(state, snapshot, base_view)
            return snapshot, status.with_plugin(pl.name) if status.is_rejected else failed_status(what, pl, status)
    state.write(VIEW_STATE_KEY, view)
    state.snapshot = current
    return current, SUCCESS


def end_view(state: CycleState, snapshot: Snapshot, view: NodeView | None) -> None:
    """Put ``state`` back on ``snapshot`` and ``view`` (what it carried before a phase's view)."""
    state.snapshot = snapshot
    if view:
        state.write(VIEW_STATE_KEY, view)
    else:
        state.delete(VIEW_STATE_KEY)
