"""Resource pools as one node sees them: which slices are relevant to the node (``nodeName``,
``nodeSelector``, ``allNodes`` or per-device node selection), grouped by (driver, pool), and whether each
pool is complete (every slice of its newest generation present), obsolete (a newer generation exists
elsewhere: skipped) or invalid (duplicate device names, unknown counter sets).

Pools come sorted by driver, then pool name, with pools holding devices with binding conditions last;
the slices of a pool sorted by name. This order is the allocator's search order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from framework.plugins.nodeselectors import compile_node_selector
from pluginhost.model import Node, NodeSelectorTerm

from .models import ResourceSlice

__all__ = ["Pool", "gather_pools", "node_matches"]


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    #: The slices with devices that can serve the node, sorted by name.
    slices: list[ResourceSlice] = field(default_factory=list)
    #: The pool's other slices (for counter accounting only).
    other_slices: list[ResourceSlice] = field(default_factory=list)
    #: Shared counter sets: set name -> counter name -> value.
    counter_sets: dict[str, dict[str, Fraction]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


def node_matches(node: Node, node_name: str, all_nodes: bool, selector: Sequence[NodeSelectorTerm] | None) -> bool:
    """Whether a slice's (or device's) node selection covers ``node``."""
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return compile_node_selector(selector).matches(node)
    return False


def _relevant(node: Node, s: ResourceSlice) -> bool:
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return node_matches(node, s.node_name, s.all_nodes, s.node_selector)
    if s.per_device_node_selection:
        return any(node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices)
    return False


def gather_pools(
    node: Node, slices: Sequence[ResourceSlice], candidates: Sequence[ResourceSlice] | None = None
) -> list[Pool]:
    """The pools ``node`` can allocate from (see the module docstring), given all slices; ``candidates``,
    when the caller has them indexed, are the node's own slices then those without a node name, each
    in ``slices`` order (what this function would otherwise pick out of ``slices``)."""
    # The node's own slices first, then those without a node name, as kube-scheduler lists them.
    if candidates is None:
        candidates = [s for s in slices if s.node_name == node.name] + [s for s in slices if not s.node_name]
    newest: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in candidates:
        if not _relevant(node, s):
            continue
        key = (s.driver, s.pool)
        have = newest.get(key)
        if have is None or s.generation > have[0].generation:
            newest[key] = [s]
        elif s.generation == have[0].generation:
            have.append(s)
    ready: list[Pool] = []
    late: list[Pool] = []
    for (driver, name), group in newest.items():
        generation, count = group[0].generation, group[0].slice_count
        everywhere = group
        if len(group) != count:
            same = [s for s in slices if s.driver == driver and s.pool == name]
            if any(s.generation > generation for s in same):
                continue  # obsolete: the driver is publishing a newer generation
            everywhere = [s for s in same if s.generation == generation]
            if len(everywhere) != count:
                ready.append(Pool(driver, name, incomplete=True))
                continue
        pool = _build(driver, name, group, everywhere)
        has_conditions = any(d.binding_conditions for s in pool.slices for d in s.devices)
        (late if has_conditions else ready).append(pool)
    ready.sort(key=lambda p: (p.driver, p.name))
    late.sort(key=lambda p: (p.driver, p.name))
    return ready + late


def _build(driver: str, name: str, group: list[ResourceSlice], everywhere: Iterable[ResourceSlice]) -> Pool:
    group = sorted(group, key=lambda s: s.name)
    names = {s.name for s in group}
    pool = Pool(driver, name)
    counter_slices: list[ResourceSlice] = []
    for s in group:
        (counter_slices if s.shared_counters else pool.slices).append(s)
    for s in everywhere:
        if s.name not in names:
            (counter_slices if s.shared_counters else pool.other_slices).append(s)
    seen: set[str] = set()
    for s in pool.slices:
        for d in s.devices:
            if d.name in seen:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate device name {d.name}")
            seen.add(d.name)
    for s in counter_slices:
        for cs in s.shared_counters:
            if cs.name in pool.counter_sets:
                return Pool(driver, name, invalid=True, invalid_reason=f"duplicate counter set name {cs.name}")
            pool.counter_sets[cs.name] = dict(cs.counters)
    for s in [*pool.slices, *pool.other_slices]:
        for d in s.devices:
            for use in d.consumes_counters:
                have = pool.counter_sets.get(use.name)
                if have is None:
                    return Pool(driver, name, invalid=True, invalid_reason=f"counter set {use.name} not found")
                for counter in use.counters:
                    if counter not in have:
                        reason = f"counter {counter} not found in counter set {use.name}"
                        return Pool(driver, name, invalid=True, invalid_reason=reason)
    return pool
