"""A pod's change on the watch reuses the pod converted before when only its binding or status moved
(framework/kube/convert.py reconvert_pod), and converts it again whenever anything the scheduler reads moved."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from framework.kube.convert import convert_pod, reconvert_pod

PENDING: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "10", "labels": {"app": "web"},
                 "creationTimestamp": "2026-01-01T00:00:00Z",
                 "managedFields": [{"manager": "kubectl", "operation": "Update"}]},
    "spec": {"schedulerName": "default-scheduler", "priority": 0, "tolerations": [],
             "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]},
    "status": {"phase": "Pending"},
}


def changed(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = copy.deepcopy(PENDING)
    obj["metadata"]["resourceVersion"] = "11"
    edit(obj)
    return obj


def bind(obj: dict[str, Any]) -> None:
    obj["spec"]["nodeName"] = "n1"
    obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]


CASES: list[tuple[str, Callable[[dict[str, Any]], None], bool]] = [
    ("bound: spec.nodeName and the status moved", bind, True),
    ("only the status moved", lambda o: o["status"].update(conditions=[{"type": "PodScheduled", "status": "False"}]),
     True),
    ("a label changed", lambda o: (bind(o), o["metadata"]["labels"].update(app="db")), False),
    ("an annotation appeared", lambda o: o["metadata"].update(annotations={"a": "b"}), False),
    ("being deleted", lambda o: o["metadata"].update(deletionTimestamp="2026-01-01T00:01:00Z"), False),
    ("a spec field changed", lambda o: (bind(o), o["spec"].update(priority=5)), False),
    ("a spec field appeared", lambda o: o["spec"].update(nodeSelector={"zone": "a"}), False),
    ("nominated", lambda o: o["status"].update(nominatedNodeName="n2"), False),
    ("another pod of the same name", lambda o: (bind(o), o["metadata"].update(uid="u2")), False),
]


@pytest.mark.parametrize(("edit", "reused"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_change_reuses_the_converted_pod_only_when_nothing_the_scheduler_reads_moved(
        edit: Callable[[dict[str, Any]], None], reused: bool) -> None:
    old = convert_pod(copy.deepcopy(PENDING))
    new_obj = changed(edit)
    got = reconvert_pod(old, copy.deepcopy(new_obj))
    want = convert_pod(copy.deepcopy(new_obj))
    assert got.pod is not None and want.pod is not None and old.pod is not None
    # Whichever way it was made, the result is what a full conversion gives.
    assert (got.key, got.uid, got.scheduler_name, got.node_name, got.problem) == (
        want.key, want.uid, want.scheduler_name, want.node_name, want.problem)
    assert got.pod == want.pod
    assert orjson.dumps(got.raw) == orjson.dumps(want.raw)  # managedFields dropped either way
    assert (got.pod.containers is old.pod.containers) is reused


def test_a_pod_that_could_not_be_converted_is_converted_again() -> None:
    bad = copy.deepcopy(PENDING)
    bad["spec"]["containers"] = []
    old = convert_pod(bad)
    assert old.pod is None and old.problem
    fixed = reconvert_pod(old, changed(bind))
    assert fixed.pod is not None and fixed.node_name == "n1" and fixed.problem == ""
