"""The benchmark (``python -m tools.bench``): scheduling throughput, latency and memory of the framework.

Each scenario is a list of *runs*; every run executes in a fresh child process (so its peak RSS is its
own) and drives a :class:`~framework.scheduler.Scheduler` in-process, without gRPC, the way
kube-scheduler's ``scheduler_perf`` drives kube-scheduler (:mod:`tools.bench.runner`). Nodes and pods
are scheduler_perf's ``node-default.yaml`` and ``pod-default.yaml`` (:mod:`tools.workloads`, the
templates every tool shares).

Scenarios (:data:`tools.bench.scenarios.SCENARIOS`):

- ``basic``: SchedulingBasic 5000Nodes_10000Pods (5000 nodes, 1000 initial pods, 10000 measured),
  kube-scheduler's default plugin set.
- ``scale``: ``basic`` at 500, 1000, 5000 and 15000 nodes.
- ``inprocess-plugin``: ``basic`` plus :class:`~tools.bench.plugins.BenchTier`, a cheap Filter+Score
  plugin written against the batch API, enabled through an ordinary KubeSchedulerConfiguration; the
  in-process baseline a remote plugin is compared with.
- ``remote``: ``inprocess-plugin`` with BenchTier served by a plugin host process
  (``outrigger plugin serve tools.bench.plugins:RemoteBenchTier``, ``filter_and_score``); reports
  bytes on the wire per pod from the adapter's counters.
- ``extender`` / ``extender-names``: the same logic as a kube-scheduler HTTP/JSON extender in its own
  process (:mod:`tools.bench.httpextender`), called by
  :class:`~tools.bench.httpextender.ExtenderPlugin` with full v1 Node objects / in
  ``nodeCacheCapable`` mode with node names; 1000 measured pods.
- ``remote-traced``: ``remote`` with tracing on (always-on sampler, whole traces batched and written
  as OTLP requests into an in-process sink); reports spans and OTLP bytes per pod.
- ``remote-shadow``: ``remote`` plus BenchTier again as a shadow plugin on a second plugin host
  (:mod:`framework.remote.shadow`): what a shadow costs live scheduling; reports the share of cycles it
  evaluated and dropped.
- ``remote-go``: ``remote-streams`` with BenchTier written with the Go SDK (clients/go, built with
  ``go build`` on first use); ``remote-go-ahead``: ``remote`` (lookahead) with that Go host;
  ``remote-go-fit``: ``basic`` with kube-scheduler's own NodeResourcesFit served remotely by the Go
  adapter in place of the in-process one.
- ``replicas-1`` / ``replicas-2``: ``basic`` plus :class:`~tools.bench.plugins.HeavyScore`, a remote
  Score plugin with a fixed amount of CPU work per node, on one and on two plugin host processes (each
  pod's Score batch is split over the replicas); 1000 measured pods.
- ``apiserver`` (asked for by name): ``basic`` through a real kube-apiserver (:mod:`tools.bench.apiserver`);
  ``apiserver-traced``: the same with tracing always on, exported to an OTLP collector process.

A new scenario is a :class:`~tools.bench.scenario.Scenario` subclass registered in ``SCENARIOS``.

The modules: :mod:`~tools.bench.runs` (a run
and its result), :mod:`~tools.bench.plugins` (BenchTier, HeavyScore), :mod:`~tools.bench.scenario`
(what a scenario is), :mod:`~tools.bench.inprocess`, :mod:`~tools.bench.remote`,
:mod:`~tools.bench.extender` and :mod:`~tools.bench.gohost` (the scenarios),
:mod:`~tools.bench.httpextender` (the HTTP/JSON extender peer and the plugin that calls it),
:mod:`~tools.bench.servers` (the processes scenarios start), :mod:`~tools.bench.scenarios` (the
table), :mod:`~tools.bench.runner` (child processes, rounds), :mod:`~tools.bench.report` (the
machine, the targets, the table) and ``__main__`` (the command line).

``make bench`` runs every scenario and writes ``bench-results.json``; ``--quick`` runs tiny sizes in a
few seconds (what the tests run).
"""
