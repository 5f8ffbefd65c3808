"""A remote PostFilter plugin's nomination over the wire: PostFilterReply.nominating_mode tells "clear
the nomination" (a result with no node, kube-scheduler's ModeOverride with "") from "no result"
(ModeNoop); a host that does not set it (hosts written before it, in any language) keeps the meaning
an empty nominated_node_name always had: no result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_remote import MODES, fake, rec, scenario
from test_remote_fakes import nominate, per_node, st
from test_runtime import nominated_pod

from framework.remote.adapter import post_filter_result
from pluginhost import pb
from pluginhost.plugin import PostFilterResult

UNSPECIFIED = pb.plugin.NOMINATING_MODE_UNSPECIFIED
NOOP = pb.plugin.NOMINATING_MODE_NOOP
OVERRIDE = pb.plugin.NOMINATING_MODE_OVERRIDE


@pytest.mark.parametrize(
    ("mode", "node", "result"),
    [
        # What hosts that predate nominating_mode send: a node is a result, no node is none.
        pytest.param(UNSPECIFIED, "", None, id="unset-without-node-is-no-result"),
        pytest.param(UNSPECIFIED, "n2", PostFilterResult("n2"), id="unset-with-node-nominates"),
        pytest.param(NOOP, "", None, id="noop"),
        pytest.param(NOOP, "n2", None, id="noop-ignores-a-node"),
        pytest.param(OVERRIDE, "", PostFilterResult(""), id="override-without-node-clears"),
        pytest.param(OVERRIDE, "n2", PostFilterResult("n2"), id="override-nominates"),
    ],
)
def test_a_post_filter_reply_carries_the_result_it_says(mode: int, node: str, result: Any) -> None:
    reply = pb.plugin.PostFilterReply(nominated_node_name=node, nominating_mode=mode)  # type: ignore[arg-type]
    assert post_filter_result(reply) == result


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("answer", "nominated"),
    [
        # kube-scheduler's DefaultPreemption answers NewPostFilterResultWithNominatedNode("") when no node
        # can be made room on: handleSchedulingFailure clears the nomination.
        pytest.param(nominate(""), "", id="result-without-node-clears"),
        pytest.param(st("Unschedulable", "not eligible"), "n1", id="no-result-keeps"),
        pytest.param(nominate("n2"), "n2", id="result-nominates"),
    ],
)
def test_a_remote_post_filter_sets_the_nomination_as_an_in_process_one(
    mode: str, tmp_path: Path, answer: Any, nominated: str
) -> None:
    specs = [fake("F", "filter", filter=per_node(default=st("Unschedulable", "nope"))),
             fake("Post", "postFilter", postFilter=answer)]  # fmt: skip
    s, _ = scenario(mode, tmp_path, specs, nominated_pod)
    assert (rec(s, "p1").nominated_node, s.nominated.get("uid-p1", "")) == (nominated, nominated)
