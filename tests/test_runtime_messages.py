"""The messages of a plugin's failure at every extension point, word for word kube-scheduler's.

kube-scheduler v1.37's ``pkg/scheduler/framework/runtime/framework.go`` (as v1.35's) wraps a plugin's
failure with the point and the plugin's name in Go's ``%q`` (``running PreBind plugin "X": ...``, ``running "X"
filter plugin: ...``), the reason being the status's ``AsError()``: its reasons joined (nothing when
it has none), and a nil error (Go writes ``%!w(<nil>)``) for Wait and Skip. That text is the pod's
FailedScheduling message. Each case runs a real Scheduler with one fake plugin answering at one
point (tests/test_runtime.py's fakes) and reads the pod's status after its one attempt."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from test_runtime import (
    Spec,
    fake,
    one_node_one_pod,
    raises,
    reject_nodes,
    scenario,
    status_of,
    two_nodes_one_pod,
)

from framework.outcomes import NIL_ERROR, error_text, failed_status
from pluginhost.model import Node, Pod
from pluginhost.plugin import Plugin
from pluginhost.status import Code, Status

ERROR = Status.failure("boom")
BARE_ERROR = Status(Code.Error)  # no reasons: kube-scheduler's message ends with ": "
WAIT = Status(Code.Wait, ("hold on",))  # AsError is nil, whatever the reasons
SKIP = Status(Code.Skip, ("not mine",))


@dataclass(frozen=True)
class MessageCase:
    id: str
    specs: list[Spec]
    objects: Callable[[], list[Pod | Node]]
    code: Code
    message: str


def case(id: str, point: str, answer: Any, message: str, *, nodes: int = 1) -> MessageCase:
    """Plugin "X" enabled at ``point`` answering ``answer`` there ("normalize": its NormalizeScore)."""
    if point == "normalize":
        spec = fake("X", "score", weight=1, normalize=lambda scores: answer)
    else:
        enabled = "preBind" if point == "preBindPreFlight" else point  # PreBindPreFlight is PreBind's
        spec = fake("X", enabled, weight=1 if point == "score" else 0, **{point: answer})
    return MessageCase(id, [spec], two_nodes_one_pod if nodes == 2 else one_node_one_pod, Code.Error, message)


REJECT_N1 = reject_nodes(Code.Unschedulable, "nope", "n1")

CASES = [
    case("prefilter-error", "preFilter", ERROR, 'running PreFilter plugin "X": boom'),
    case("prefilter-error-without-reasons", "preFilter", BARE_ERROR, 'running PreFilter plugin "X": '),
    case("prefilter-wait", "preFilter", WAIT, f'running PreFilter plugin "X": {NIL_ERROR}'),
    # PreFilter keeps going after Unschedulable only; Pending is not a PreFilter answer.
    case("prefilter-pending", "preFilter", Status(Code.Pending, ("later",)), 'running PreFilter plugin "X": later'),
    case("prefilter-raises", "preFilter", raises("kaboom"), 'running PreFilter plugin "X": kaboom'),
    case("filter-error", "filter", ERROR, 'running "X" filter plugin: boom'),
    case("filter-error-without-reasons", "filter", BARE_ERROR, 'running "X" filter plugin: '),
    case("filter-wait", "filter", WAIT, f'running "X" filter plugin: {NIL_ERROR}'),
    case("filter-skip", "filter", SKIP, f'running "X" filter plugin: {NIL_ERROR}'),
    case("filter-raises", "filter", raises("kaboom"), 'running "X" filter plugin: kaboom'),
    # A PostFilter error is not wrapped: it ends the fit error as it is (nothing when it has no reasons).
    MessageCase("postfilter-error", [fake("F", "filter", filter=REJECT_N1), fake("X", "postFilter", postFilter=ERROR)],
                one_node_one_pod, Code.Unschedulable, "0/1 nodes are available: 1 nope. boom"),
    MessageCase("postfilter-error-without-reasons",
                [fake("F", "filter", filter=REJECT_N1), fake("X", "postFilter", postFilter=BARE_ERROR)],
                one_node_one_pod, Code.Unschedulable, "0/1 nodes are available: 1 nope."),
    case("prescore-error", "preScore", ERROR, 'running PreScore plugin "X": boom', nodes=2),
    case("prescore-error-without-reasons", "preScore", BARE_ERROR, 'running PreScore plugin "X": ', nodes=2),
    case("prescore-wait", "preScore", WAIT, f'running PreScore plugin "X": {NIL_ERROR}', nodes=2),
    case("prescore-rejection", "preScore", Status.unschedulable("no"), 'running PreScore plugin "X": no', nodes=2),
    case("score-raises", "score", raises("kaboom"), 'running Score plugins: plugin "X" failed with: kaboom', nodes=2),
    case("score-out-of-range", "score", 101, 'applying score defaultWeights on Score plugins: plugin "X" returns an '
         "invalid score 101, it should in the range of [0, 100] after normalizing", nodes=2),
    case("normalize-error", "normalize", ERROR, 'running Normalize on Score plugins: plugin "X" failed with: boom',
         nodes=2),
    case("normalize-error-without-reasons", "normalize", BARE_ERROR,
         'running Normalize on Score plugins: plugin "X" failed with: ', nodes=2),
    case("normalize-skip", "normalize", SKIP,
         f'running Normalize on Score plugins: plugin "X" failed with: {NIL_ERROR}', nodes=2),
    case("reserve-error", "reserve", ERROR, 'running Reserve plugin "X": boom'),
    case("reserve-error-without-reasons", "reserve", BARE_ERROR, 'running Reserve plugin "X": '),
    case("reserve-wait", "reserve", WAIT, f'running Reserve plugin "X": {NIL_ERROR}'),
    case("reserve-skip", "reserve", SKIP, f'running Reserve plugin "X": {NIL_ERROR}'),
    case("reserve-raises", "reserve", raises("kaboom"), 'running Reserve plugin "X": kaboom'),
    case("permit-error", "permit", ERROR, 'running Permit plugin "X": boom'),
    case("permit-error-without-reasons", "permit", BARE_ERROR, 'running Permit plugin "X": '),
    case("permit-skip", "permit", SKIP, f'running Permit plugin "X": {NIL_ERROR}'),
    case("permit-raises", "permit", raises("kaboom"), 'running Permit plugin "X": kaboom'),
    case("prebind-preflight-error", "preBindPreFlight", ERROR, 'running PreBindPreFlight "X": boom'),
    case("prebind-preflight-error-without-reasons", "preBindPreFlight", BARE_ERROR, 'running PreBindPreFlight "X": '),
    case("prebind-preflight-rejection", "preBindPreFlight", Status.unschedulable("no"),
         'PreBindPreFlight X returned "Unschedulable", which is unsupported. It is supposed to return Success, Skip, '
         "or Error status"),
    case("prebind-preflight-raises", "preBindPreFlight", raises("kaboom"), 'running PreBindPreFlight "X": kaboom'),
    case("prebind-error", "preBind", ERROR, 'running PreBind plugin "X": boom'),
    case("prebind-error-without-reasons", "preBind", BARE_ERROR, 'running PreBind plugin "X": '),
    case("prebind-wait", "preBind", WAIT, f'running PreBind plugin "X": {NIL_ERROR}'),
    case("prebind-raises", "preBind", raises("kaboom"), 'running PreBind plugin "X": kaboom'),
    case("bind-error", "bind", ERROR, 'running Bind plugin "X": boom'),
    case("bind-error-without-reasons", "bind", BARE_ERROR, 'running Bind plugin "X": '),
    case("bind-wait", "bind", WAIT, f'running Bind plugin "X": {NIL_ERROR}'),
    case("bind-raises", "bind", raises("kaboom"), 'running Bind plugin "X": kaboom'),
]  # fmt: skip


@pytest.mark.parametrize("c", CASES, ids=lambda c: c.id)
def test_a_plugins_failure_reads_as_kube_schedulers(c: MessageCase) -> None:
    s, _ = scenario(c.specs, c.objects, binder=not any("bind" in spec.points for spec in c.specs))
    st = status_of(s, "p1")
    assert (st.code, st.message()) == (c.code, c.message)


class _Named(Plugin):
    name = "X"


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (Status.failure("a"), "a"),
        (Status(Code.Error), ""),
        (Status(Code.Unschedulable, ("a", "b")), "a, b"),
        (Status(Code.Pending, ("later",)), "later"),
        (Status(Code.Wait, ("x",)), NIL_ERROR),
        (Status(Code.Skip), NIL_ERROR),
    ],
)
def test_error_text_is_kube_schedulers_as_error(status: Status, text: str) -> None:
    assert error_text(status) == text
    wrapped = failed_status("Reserve", _Named(), status)
    expected = (Code.Error, (f'running Reserve plugin "X": {text}',), "X")
    assert (wrapped.code, wrapped.reasons, wrapped.plugin) == expected
