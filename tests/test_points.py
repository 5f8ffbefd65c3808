"""The points table (pluginhost.plugin.POINTS) is the one list of extension points: it matches the
contract's ExtensionPoint enum, and the configuration, the runtime, the Python and Node.js plugin hosts
and the remote adapter agree with it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from framework.config import EXTENSION_POINTS
from framework.remote.classes import _ENUM_POINT, _TRANSFORMER_ENUMS
from pluginhost import pb
from pluginhost.definition import manifest_of
from pluginhost.placement import POD_GROUP_POINT_ROWS
from pluginhost.plugin import (
    CONFIGURED_POINTS,
    POINT_CLASSES,
    POINTS,
    TRANSFORMER_CLASSES,
    FilterPlugin,
    FilterTransformer,
    Point,
    PreFilterExtensions,
    PreFilterPlugin,
    ScoreExtensions,
    ScorePlugin,
    point_named,
)
from pluginhost.sign import SIGN_POINT
from pluginhost.status import Status

ROOT = Path(__file__).resolve().parent.parent
NODE_HOST = ROOT / "clients" / "node" / "lib" / "host.js"
E = pb.plugin.ExtensionPoint


def _camel(method: str) -> str:
    head, *rest = method.split("_")
    return head + "".join(part.title() for part in rest)


def test_every_enum_value_of_the_contract_is_one_row() -> None:
    enums = [p.enum for p in (*POINTS, *POD_GROUP_POINT_ROWS, SIGN_POINT)]
    assert sorted(enums) == sorted(n for n in E.DESCRIPTOR.values_by_name if n != "EXTENSION_POINT_UNSPECIFIED")
    assert len(set(enums)) == len(enums) and len({p.name for p in POINTS}) == len(POINTS)


def test_configured_points_are_in_profile_order_and_the_configuration_reads_them() -> None:
    assert [p.order for p in CONFIGURED_POINTS] == list(range(12))
    assert tuple(p.name for p in CONFIGURED_POINTS) == EXTENSION_POINTS
    assert list(POINT_CLASSES) == list(EXTENSION_POINTS)


@pytest.mark.parametrize("row", [p for p in POINTS if p.kind in ("part", "transformer")], ids=lambda p: p.name)
def test_parts_and_transformers_belong_to_a_configured_point(row: Point) -> None:
    if row.of:
        assert point_named(row.of).order is not None
    assert callable(getattr(row.base, row.method))


def test_transformers_come_from_the_table() -> None:
    want = {p.of: (p.base, point_named(p.of).method) for p in POINTS if p.kind == "transformer"}
    assert dict(TRANSFORMER_CLASSES) == want == {
        "preFilter": (want["preFilter"][0], "pre_filter"),
        "filter": (FilterTransformer, "filter"),
        "score": (want["score"][0], "score"),
        "postFilter": (want["postFilter"][0], "post_filter"),
    }


def test_the_remote_adapter_maps_every_enum_to_its_point() -> None:
    named = {int(E.Value(p.enum)): p for p in POINTS}
    assert {named[e].name if named[e].kind != "transformer" else named[e].of for e in _ENUM_POINT} == set(
        EXTENSION_POINTS
    )
    assert {named[e].name for e in _TRANSFORMER_ENUMS} == {p.name for p in POINTS if p.kind == "transformer"}
    for e, (of, plain, base) in _TRANSFORMER_ENUMS.items():
        assert (of, plain, base) == (named[e].of, int(E.Value(point_named(of).enum)), named[e].base)


def _node_host_points() -> list[tuple[str, str]]:
    text = NODE_HOST.read_text()
    block = re.search(r"const POINT_METHODS = \[(.*?)\n\];", text, re.S)
    assert block is not None, "clients/node/lib/host.js has no POINT_METHODS table"
    return re.findall(r"\['(\w+)', '(EXTENSION_POINT_\w+)'\]", block.group(1))


def test_the_node_host_serves_the_table_s_points_under_their_methods() -> None:
    node = _node_host_points()
    # The Node.js host serves every point and part but controllers, and no transformer, and every
    # PodGroup point (PodGroupPostFilter's stream too), and Sign.
    served = [p for p in (*POINTS, *POD_GROUP_POINT_ROWS, SIGN_POINT)
              if p.kind != "transformer" and p.name != "controller"]
    assert sorted(e for _, e in node) == sorted(p.enum for p in served)
    by_enum = dict((e, m) for m, e in node)
    for row in (*CONFIGURED_POINTS, *POD_GROUP_POINT_ROWS, SIGN_POINT):
        assert by_enum[row.enum] == _camel(row.method), row.name


class _Both(PreFilterPlugin, FilterPlugin, ScorePlugin, ScoreExtensions):
    name = "Both"

    async def pre_filter(self, state: Any, pod: Any) -> Any:
        return None, Status()

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    async def normalize_score(self, state: Any, pod: Any, batch: Any, scores: Any) -> Status:
        return Status()


def test_a_python_host_declares_the_table_s_enums() -> None:
    manifest = manifest_of(_Both)
    names = [E.Name(p) for p in manifest.points]
    assert names == [
        "EXTENSION_POINT_FILTER",
        "EXTENSION_POINT_PRE_FILTER",
        "EXTENSION_POINT_SCORE",
        "EXTENSION_POINT_PRE_FILTER_EXTENSIONS",
        "EXTENSION_POINT_NORMALIZE_SCORE",
    ]
