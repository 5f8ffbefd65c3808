"""The fault harness's short run (the full one: ``python tests/fault_harness.py``, see its docstring):
two replicas of a remote plugin are killed and restarted, stall and answer garbage while pods are
scheduled; nothing is lost, bound twice or left reserved."""

from __future__ import annotations

import asyncio

from fault_harness import run


def test_short_fault_run_keeps_every_invariant() -> None:
    summary = asyncio.run(run(pods=240, nodes=20, kills=3, stall=0.02, garbage=0.02, seed=7, timeout=300.0))
    print(summary)
    assert (summary.kills, summary.restarts) == (3, 3)
    assert summary.lost == 0
    assert summary.double_bound == 0
    assert summary.ledger_errors == []
    assert summary.leaked == {
        "cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0,
        "remote_calls_in_flight": 0, "pods_in_cache_not_bound": 0, "cpu_millis_reserved_not_bound": 0,
    }
    # With a replica always coming back, every pod ends up bound. On a loaded host the 0.5 s deadlines
    # fail many more calls than the stalls alone, and each failed pod waits out its backoff: the run then
    # takes minutes, so its bound is generous (it ends as soon as every pod is bound).
    assert (summary.bound, summary.still_queued) == (240, 0)
    # The faults did reach the cycles: garbage and stalls failed some, several after Reserve.
    assert summary.failed_cycles > 0 and summary.unreserved > 0
