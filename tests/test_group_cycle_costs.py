"""What a PodGroup cycle does once that it used to do per pod or per placement, and the in-process
measure of the group shapes (``tools.bench.groups``): the results stay those of the work it replaced.

- A placement's rows (its node names in the snapshot's row order) are worked out once per node table
  and node set, and its fresh row versions are taken in one step.
- A pod assumed on a node is copied once (``pod_on_node``, a cheaper ``dataclasses.replace``) and that
  copy is the one the next pods of the group see.
- Filter codes and scores are checked for their range in one pass (``out_of_range``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from test_podgroup_cycle import gpod, rack_node

from framework import features
from framework.outcomes import out_of_range
from framework.scheduler.placements import placement_snapshot
from pluginhost.model import pod_on_node
from pluginhost.snapshot import ClusterTable
from pluginhost.view import next_view_version, next_view_versions
from tools.bench.groups import run, shape
from tools.compare.groups import GATES


@pytest.fixture
def group_gates() -> Iterator[None]:
    previous = features.install(features.parse(GATES))
    try:
        yield
    finally:
        features.install(previous)


def test_a_placements_rows_are_worked_out_once_per_node_table_and_node_set() -> None:
    table = ClusterTable()
    for n in (rack_node("a1", "rack-a", "4"), rack_node("a2", "rack-a", "4"), rack_node("b1", "rack-b", "4")):
        table.upsert_node(n)
    names = ("a2", "zz", "a1")  # a name the snapshot lacks is left out
    first = placement_snapshot(table.snapshot(), names)
    table.place_pod(gpod("f0", "1", None), "a2")
    snap = table.snapshot()
    rows: dict[tuple[str, ...], tuple[int, ...]] = snap.table.memo("placements/rows", lambda _: {})
    assert rows == {names: (0, 1)}
    again = placement_snapshot(snap, list(names))  # any sequence of names: the same rows
    assert (first.names, again.names) == (("a1", "a2"), ("a1", "a2"))
    assert (first.requested_of("cpu").tolist(), again.requested_of("cpu").tolist()) == ([0, 0], [0, 1000])
    versions = [*first.row_versions.tolist(), *again.row_versions.tolist()]
    assert len(set(versions)) == 4 and all(v < 0 for v in versions)
    table.upsert_node(rack_node("b2", "rack-b", "4"))  # a new node table: its own rows
    grown = table.snapshot()
    assert placement_snapshot(grown, ("b2", "b1")).names == ("b1", "b2")
    assert grown.table.memo("placements/rows", lambda _: {}) == {("b2", "b1"): (2, 3)}


def test_row_versions_taken_in_one_step_follow_the_ones_taken_one_by_one() -> None:
    start = next_view_version()
    taken = next_view_versions(3)
    after = next_view_version()
    assert (taken.dtype, taken.tolist(), after) == (np.dtype(np.int64), [start - 1, start - 2, start - 3], start - 4)
    assert next_view_versions(0).tolist() == []


def test_a_pod_on_a_node_is_the_pod_replaced_with_that_node_name() -> None:
    pod = gpod("p0", "250m", "g", priority=7)
    on = pod_on_node(pod, "n1")
    assert on == dataclasses.replace(pod, node_name="n1")
    assert (on.node_name, pod.node_name, on.requests, on.priority) == ("n1", "", {"cpu": 250}, 7)
    assert on is not pod and on.labels is pod.labels  # a shallow copy, as replace makes


@pytest.mark.parametrize(("values", "high", "want"), [
    (np.array([0, 50, 100], dtype=np.int64), 100, False),
    (np.array([0, 101], dtype=np.int64), 100, True),
    (np.array([7, -1], dtype=np.int64), 100, True),
    (np.array([np.iinfo(np.int64).min], dtype=np.int64), 100, True),
    (np.array([], dtype=np.int64), 100, False),
    (np.array([0, 3, 8], dtype=np.int8), 8, False),
    (np.array([0, -128], dtype=np.int8), 8, True),
    (np.array([9], dtype=np.int8), 8, True),
    (np.array([0, 9], dtype=np.uint8), 8, True),
    (np.array([0.0, 1.0]), 1, False),  # not integers: compared as they are
    (np.array([-0.5]), 1, True),
])
def test_out_of_range_is_below_zero_or_above_the_highest(values: Any, high: int, want: bool) -> None:
    assert out_of_range(values, high) is want


@pytest.mark.parametrize(("text", "want"), [
    ("basic:10:3:3", "BasicScheduling/10Nodes_3Groups_9Pods"),
    ("gang:10:3:3", "GangScheduling/10Nodes_3Gangs_9Pods"),
    ("tas:200:3:4", "TopologyAwareScheduling/200Nodes_3Gangs_12Pods"),
])
def test_bench_shapes_are_the_comparisons(text: str, want: str) -> None:
    assert shape(text).name == want


@pytest.mark.parametrize("text", ["basic:10:3", "mixed:10:3:3", "basic:10:x:3", "basic:10:3:3:1", ""])
def test_a_bench_shape_that_is_not_kind_nodes_groups_per_group_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=f"shape {text!r}: want kind:nodes:groups:per_group"):
        shape(text)


@pytest.mark.usefixtures("group_gates")
@pytest.mark.parametrize(("text", "pods", "calls"), [("basic:10:3:3", 9, False), ("tas:200:3:4", 12, True)])
def test_the_bench_places_every_group_one_pod_a_node(text: str, pods: int, calls: bool) -> None:
    out = asyncio.run(run(shape(text), calls=calls, top=3))
    assert (out["bound"], out["nodes_by_pods"]) == (pods, {1: pods})
    if text.startswith("tas"):
        # Each gang of 4 in one rack of 100 nodes.
        assert sum(out["pods_by_domain"].values()) == 12 and all(n % 4 == 0 for n in out["pods_by_domain"].values())
    assert ("calls" in out, "profile" in out) == (calls, calls)
