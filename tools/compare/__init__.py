"""``python -m tools.compare`` (``make compare``): Outrigger side by side with the real
kube-scheduler on the same API server — speed, placements and reasons.

Both schedulers are the ones a user runs: kube-scheduler v1.35.4 (``tests/k8s/build.sh`` builds it with
the API server, same pin) and ``outrigger serve --kubeconfig``, each with a KubeSchedulerConfiguration that
names the same ``clientConnection`` (qps and burst 5000, scheduler_perf's) and no leader election,
kube-scheduler's default profile on both sides. They run **one after the other, each on a fresh etcd and
API server** (:class:`tools.localcluster.LocalCluster`) holding an identical copy of the workload, so
neither sees the other's pods, events or load; rounds alternate which one goes first.

Three comparisons:

- **Throughput** of scheduler_perf workloads (:mod:`tools.workloads`): nodes and the initial
  pods first (not timed), then the measured pods; pods/s from just before the first measured pod is
  created to the moment a watch shows the last one bound, the same instrument for both. Per workload,
  several rounds; the report gives the medians and the median of the per-round ratios Outrigger /
  kube-scheduler, with the CPU per measured pod of the scheduler, the API server, etcd and the harness,
  and the share of the machine other processes took meanwhile (:class:`tools.bench.apiserver.CpuSample`,
  the ``apiserver`` benchmark's accounting).
- **Placements**, pod by pod, on identical cluster states. kube-scheduler runs first with
  ``--vmodule=schedule_one=10``, which logs every Score plugin's weighted score on every node and each
  node's total, for every pod (parsed here). Outrigger then gets the same pods one at a time on a fresh
  copy, with ``--debug-scores`` on; after each pod is bound, a pod Outrigger placed elsewhere than
  kube-scheduler did is moved to kube-scheduler's node (deleted and created again, bound) before the
  next one is created, so every decision of both is taken on the same cluster. A pod whose best total
  in kube-scheduler's log is on one node only must land on that node; a pod with tied best nodes must
  land on one of them. Every plugin's score on every node is compared too: the per-plugin agreement
  table lists each disagreement with the pod, the node and both scores. Workloads: a deterministic
  one built to have one best node per pod and to exercise every Score plugin (:data:`MIXED`), and the
  scheduler_perf shapes at 50 nodes (identical nodes: ties everywhere).
- **Reasons**: a set of pods that fit nowhere (:data:`REASONS`), and the ``FailedScheduling`` event
  of each pod from both, compared verbatim (with the ``PodScheduled`` condition's message).
- **Devices** (:mod:`.dra`): pods claiming a fake driver's devices through ResourceClaimTemplates, a
  shared ResourceClaim, a CEL selector and a prioritized list, and pods that cannot get devices, created
  one at a time; every pod bound or not, the node and devices where the devices decide, the devices
  allocated per node, and the messages, verbatim. The DRA throughput workloads (scheduler_perf's
  ``dra/performance-config.yaml``: SchedulingWithResourceClaimTemplate, SchedulingWithResourceClaim) and
  this comparison run kube-controller-manager's resourceclaim controller on both sides' clusters.

The report is a Markdown file and a JSON file (``--out``, default ``compare-results``). ``--quick`` runs
small sizes (what the tests run).

The modules, one concern each: :mod:`.schedulers` (both schedulers and their fresh clusters),
:mod:`.throughput`, :mod:`.kubescores` (kube-scheduler's log read), :mod:`.placement_workloads`,
:mod:`.placements`, :mod:`.reasons`, :mod:`.dra`, :mod:`.report` (summaries, JSON, Markdown) and :mod:`.run` (the plan,
running it, the command line).
"""

from .dra import DRA_PODS, DraReport, run_dra
from .kubescores import parse_kube_scores
from .placement_workloads import MIXED, PlacementWorkload
from .placements import PlacementReport, run_placements
from .reasons import REASONS, ReasonsReport, run_reasons
from .run import main, run_compare
from .schedulers import KUBE, OUTRIGGER
from .throughput import ThroughputRun, run_throughput

__all__ = [
    "DRA_PODS",
    "KUBE",
    "MIXED",
    "OUTRIGGER",
    "REASONS",
    "DraReport",
    "PlacementReport",
    "PlacementWorkload",
    "ReasonsReport",
    "ThroughputRun",
    "main",
    "parse_kube_scores",
    "run_compare",
    "run_dra",
    "run_placements",
    "run_reasons",
    "run_throughput",
]
