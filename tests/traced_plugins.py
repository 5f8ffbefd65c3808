"""A plugin for the tracing tests whose author opens spans of their own (served by a plugin host
process: ``outrigger plugin serve traced_plugins:TracedNodeLabels``)."""

from __future__ import annotations

from opentelemetry import trace

from pluginhost.examples.nodelabels import NodeLabels
from pluginhost.model import Pod
from pluginhost.plugin import CycleState, FilterResult, NodeBatch

__all__ = ["AUTHOR_SPAN", "TracedNodeLabels"]

AUTHOR_SPAN = "labels.match"
tracer = trace.get_tracer("tests.traced_plugins")


class TracedNodeLabels(NodeLabels):
    """NodeLabels whose Filter runs inside the author's own span."""

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        with tracer.start_as_current_span(AUTHOR_SPAN, attributes={"nodes": len(batch)}):
            return await super().filter(state, pod, batch)
