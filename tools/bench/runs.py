"""A benchmark run: :class:`RunSpec` (what to run, handed to a child process as JSON) and
:class:`RunResult` (what it measured, handed back as JSON).

Every scenario reports a :class:`RunResult`, in-process runs (:mod:`tools.bench.runner`) and the
``apiserver`` scenario's runs through a real API server (:mod:`tools.bench.apiserver`) alike; this module
imports neither.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

__all__ = ["WINDOW_SECONDS", "RunResult", "RunSpec", "failed_result"]

#: The full runs' :attr:`RunSpec.budget`: 16 runs a round, 3 rounds, with the start-up of each run's
#: process and plugin hosts (about 5 s a run) and the set-up of its cluster, fit in 10 minutes on a
#: 2-core host four times slower than the one the pod counts were chosen on (5 s took 11 minutes there).
WINDOW_SECONDS = 3.0


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One measured run; JSON-serializable, so it can be handed to a child process."""

    scenario: str
    nodes: int
    init_pods: int
    measure_pods: int
    chunk: int = 500  # pods per apply while measuring (the demo's request size)
    timeout: float = 300.0  # seconds for the measured part
    # Seconds after which no more measured pods are created (0: all ``measure_pods`` are): the window
    # is sized by time on a slow host and by ``measure_pods`` on a fast one, so `make bench` takes about
    # as long on either. The pods created by then are all waited for and counted.
    budget: float = 0.0

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls(**json.loads(text))


@dataclass(slots=True)
class RunResult:
    scenario: str
    nodes: int
    init_pods: int
    measure_pods: int  # measured pods created: the spec's, or fewer when its budget ran out first
    nodes_scored: int  # kube-scheduler's adaptive numFeasibleNodesToFind for this cluster
    bound: int  # measured pods bound
    unschedulable: int
    errors: int
    all_scheduled: bool
    seconds: float  # the measurement window
    pods_per_second: float
    cycle_pods_per_second: float  # measured pods / time spent inside scheduling cycles
    attempt_p50_ms: float
    attempt_p99_ms: float
    attempt_max_ms: float
    setup_seconds: float  # nodes + initial pods (not measured)
    peak_rss_mib: float
    setup_rss_mib: float  # peak RSS when the measurement started (the cluster, the initial pods)
    leaks: dict[str, int] = field(default_factory=dict)
    error: str = ""
    # Scenario-specific figures (remote: bytes on the wire per pod; extender: HTTP calls and bytes).
    metrics: dict[str, float] = field(default_factory=dict)
    # With repeats, the run with the median pods/s is reported; these are every repeat's pods/s,
    # and peak_rss_mib is the highest of them.
    pods_per_second_samples: list[float] = field(default_factory=list)
    # The framework process's CPU time (all its threads) over the window, per measured pod bound: on a
    # shared machine a steadier figure than pods/s (plugin hosts' processes are not counted).
    cpu_ms_per_pod: float = 0.0


def failed_result(spec: RunSpec, message: str) -> RunResult:
    """The result of a run that did not finish: nothing measured, ``message`` as its error."""
    return RunResult(
        scenario=spec.scenario, nodes=spec.nodes, init_pods=spec.init_pods, measure_pods=spec.measure_pods,
        nodes_scored=0, bound=0, unschedulable=0, errors=0, all_scheduled=False, seconds=0.0,
        pods_per_second=0.0, cycle_pods_per_second=0.0, attempt_p50_ms=0.0, attempt_p99_ms=0.0,
        attempt_max_ms=0.0, setup_seconds=0.0, peak_rss_mib=0.0, setup_rss_mib=0.0, error=message,
    )
