"""``outrigger serve --kubeconfig``: the framework service scheduling a live cluster, alone or as one
replica among several under leader election.

::

    source = connect(scheduler, kubeconfig="~/.kube/config")   # a KubeSource for an existing scheduler
    await serve_cluster(config_for, "127.0.0.1:50051", endpoints, config_file="scheduler.yaml")

With ``leaderElection.leaderElect`` (kube-scheduler's default) the replica stands by first and serves
only once it leads (:func:`_serve_elected`; the standby's ports and the election's moments are in
:mod:`framework.kube.standby`); without it, the service starts and the source takes over at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config import LeaderElectionConfig
from ..liveconfig import WatchedFiles, watch_files
from ..observe.health import HealthChecks
from ..observe.metrics import SchedulerMetrics
from .client import ApiClient
from .leader import LeaderElector, LeaderMetrics, LeaseLock, new_identity
from .settings import (
    client_connection,
    client_connection_from,
    config_document,
    default_preemption,
    dynamic_resources,
    kube_config,
    leader_election,
)
from .source import KubeSource
from .standby import Standby, exit_lost, first

if TYPE_CHECKING:
    from pluginhost.security import ServerTLS

    from ..config import SchedulerConfig
    from ..observe.observability import ObservabilityConfig
    from ..plugins import Registry
    from ..remote import EndpointConfig
    from ..scheduler import Scheduler
    from ..service import Server

__all__ = ["connect", "serve_cluster"]

log = logging.getLogger("outrigger.kube")


def connect(scheduler: Scheduler, *, kubeconfig: str = "", in_cluster: bool = False) -> KubeSource:
    """A source for ``scheduler``: the kubeconfig given, else the configuration's
    ``clientConnection.kubeconfig``, else (``in_cluster``) the pod's service account."""
    conn = client_connection(scheduler.config)
    config = kube_config(conn, kubeconfig, in_cluster)
    return KubeSource(scheduler, ApiClient(config, qps=conn.qps, burst=conn.burst))


async def serve_cluster(
    config_for: Callable[[Registry], SchedulerConfig],
    listen: str,
    endpoints: Sequence[EndpointConfig] = (),
    advertise: str | None = None,
    observability: ObservabilityConfig | None = None,
    *,
    tls: ServerTLS | None = None,
    kubeconfig: str = "",
    in_cluster: bool = False,
    config_file: str | None = None,
    watch: WatchedFiles | None = None,
) -> None:
    """Run the framework service on a live cluster until SIGTERM or SIGINT (``outrigger serve
    --kubeconfig``): as :func:`framework.service.serve`, with the API server as the cluster's source;
    with ``watch``, a change of its files is applied live once it schedules (:mod:`framework.liveconfig`).

    With ``leaderElection.leaderElect`` (kube-scheduler's default) the replica first stands by: its
    informers list and watch, its health and metrics are served, and it contends for the Lease; only
    once it leads does it meet the plugin hosts and schedule (see :func:`_serve_elected`)."""
    election = leader_election(config_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if election.leader_elect:
        await _serve_elected(config_for, listen, endpoints, advertise, observability, tls=tls, kubeconfig=kubeconfig,
                             in_cluster=in_cluster, config_file=config_file, election=election, stop=stop,
                             watch=watch)
        return
    from ..service import advertised_address, start_service

    srv: Server = await start_service(config_for, endpoints, listen, advertise=advertise,
                                      observability=observability, tls=tls)
    try:
        source = connect(srv.scheduler, kubeconfig=kubeconfig, in_cluster=in_cluster)
    except BaseException:
        await srv.stop()
        raise
    if srv.observability is not None:  # /readyz fails until the informers have listed everything once
        srv.observability.checks.add("informer-sync", _informers_synced(source), readyz=True)
    await source.start()
    live = watch_files(srv, watch, advertise or advertised_address(listen, srv.port)) if watch else None
    _print_serving(srv, source)
    announce = loop.create_task(_announce_sync(source))
    with contextlib.suppress(asyncio.CancelledError):
        await stop.wait()
    log.info("shutting down")
    announce.cancel()
    if live is not None:
        await live.stop()
    await srv.scheduler.stop()  # binding cycles in flight finish, then their events are sent
    await source.stop()
    await srv.stop()
    if live is not None:
        await live.close()


def _informers_synced(source: KubeSource) -> Callable[[], str | None]:
    def check() -> str | None:
        # Asked each time: the PodDisruptionBudgets' informer runs only for DefaultPreemption's profiles,
        # which a standby learns from its file and a leader from its scheduler.
        waiting = [i.resource for i in source.informers() if not i.synced.is_set()]
        return f"waiting for the first list of {', '.join(waiting)}" if waiting else None

    return check


def _print_serving(srv: Server, source: KubeSource) -> None:
    print(f"outrigger framework serving on {srv.address} (profiles: {', '.join(srv.scheduler.profiles)}), "
          f"scheduling the cluster at {source.client.config.server}", flush=True)
    if srv.observability is not None and srv.observability.secure is not None:
        print(f"outrigger framework HTTPS (health, metrics, configz, debug) on {srv.observability.secure.address}",
              flush=True)
    if srv.observability is not None and srv.observability.http is not None:
        print(f"outrigger framework HTTP (metrics, debug) on {srv.observability.http.address}", flush=True)


async def _announce_sync(source: KubeSource) -> None:
    await source.wait_synced()
    print(f"in sync with the cluster: {len(source.nodes.store)} nodes, {len(source.pods.store)} pods", flush=True)


# ---- leader election ------------------------------------------------------------------------------


@dataclass
class _Replica:
    """What a replica under leader election holds from start to exit."""

    source: KubeSource
    #: kube-scheduler's leader election has a client of its own: renewals never wait behind bindings
    #: for the rate limiter.
    lease_client: ApiClient
    lock: LeaseLock
    elector: LeaderElector
    leading: asyncio.Event
    lost: asyncio.Event
    checks: HealthChecks
    #: The standby's /metrics (``leader_election_master_status``), when it serves any port.
    standby_metrics: SchedulerMetrics | None
    observability: ObservabilityConfig | None
    server: str
    #: ``delayCacheUntilActive``: the informers start only once the replica leads.
    delay_cache: bool


def _replica(observability: ObservabilityConfig | None, kubeconfig: str, in_cluster: bool, config_file: str | None,
             election: LeaderElectionConfig) -> _Replica:
    raw = config_document(config_file)
    conn_raw = raw.get("clientConnection")
    conn = client_connection_from(conn_raw if isinstance(conn_raw, dict) else {})
    config = kube_config(conn, kubeconfig, in_cluster)
    client = ApiClient(config, qps=conn.qps, burst=conn.burst)
    lease_client = ApiClient(config, qps=conn.qps, burst=conn.burst, max_connections=2,
                             user_agent="outrigger/leader-election")
    source = KubeSource(None, client, pdbs=default_preemption(config_file), dra=dynamic_resources(config_file))
    leading, lost = asyncio.Event(), asyncio.Event()
    lock = LeaseLock(lease_client, election.resource_namespace, election.resource_name, new_identity())
    elector = LeaderElector(lock, election, on_started_leading=leading.set, on_stopped_leading=lost.set)
    checks = (observability.checks if observability is not None else None) or HealthChecks()
    checks.add("informer-sync", _informers_synced(source), readyz=True)
    checks.add("leaderElection", elector.check, healthz=True, readyz=True)
    standby_metrics = None
    if observability is not None and (observability.secure is not None or observability.http):
        standby_metrics = SchedulerMetrics(observability.plugin_sample_percent)
        standby_metrics.registry.register(LeaderMetrics(elector))
    obs = dataclasses.replace(observability, checks=checks) if observability is not None else None
    return _Replica(source, lease_client, lock, elector, leading, lost, checks, standby_metrics, obs, config.server,
                    raw.get("delayCacheUntilActive") is True)


async def _serve_elected(
    config_for: Callable[[Registry], SchedulerConfig],
    listen: str,
    endpoints: Sequence[EndpointConfig],
    advertise: str | None,
    observability: ObservabilityConfig | None,
    *,
    tls: ServerTLS | None,
    kubeconfig: str,
    in_cluster: bool,
    config_file: str | None,
    election: LeaderElectionConfig,
    stop: asyncio.Event,
    watch: WatchedFiles | None = None,
) -> None:
    """One replica among several: stand by, take over through the Lease, exit when the lease is lost.

    - **Standing by**: informers list and watch into their stores (unless ``delayCacheUntilActive``),
      nothing is written, no plugin host is contacted (a host follows one framework: the one that
      handshook it last), the health and metrics ports answer.
    - **Taking over** (OnStartedLeading): the standby ports close, the framework service starts
      (handshaking every plugin host with this replica's address, so they follow it), the informers'
      stores are handed to the new scheduler and the scheduling loop runs. Bindings and deletions are
      fenced by the lease (:meth:`LeaderElector.bind_window`).
    - **Losing the lease** (OnStoppedLeading): exit 1 at once, as kube-scheduler does; restarted, the
      process is a standby again. Exiting, rather than stopping and standing by again, drops every
      assumed pod, waiting pod and CycleState of the old term in one step, and nothing of it can bind.
    - **SIGTERM**: the scheduler stops and its binding cycles finish, then the lease is released
      (ReleaseOnCancel) so a standby takes over within retryPeriod.
    """
    from ..service import advertised_address, start_service

    replica = _replica(observability, kubeconfig, in_cluster, config_file, election)
    standby = await Standby.start(replica.observability, replica.checks, replica.elector, replica.standby_metrics)
    tasks: list[asyncio.Task[None]] = []
    srv: Server | None = None
    try:
        election_task = await _stand_by(replica, election, stop, tasks)
        if stop.is_set():
            log.info("shutting down (standby)")
            return
        await standby.stop()
        srv = await start_service(config_for, endpoints, listen, advertise=advertise,
                                  observability=replica.observability, tls=tls)
        live = watch_files(srv, watch, advertise or advertised_address(listen, srv.port)) if watch else None
        try:
            await _lead(replica, srv, stop, election_task, tasks)
        finally:
            if live is not None:
                await live.stop()
                await live.close()
        srv = None
    finally:
        for task in reversed(tasks):  # the elector last: cancelled while leading, it releases the lease
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if srv is not None:
            await srv.stop()
        await standby.stop()
        await replica.source.stop()
        await replica.lease_client.close()


async def _stand_by(replica: _Replica, election: LeaderElectionConfig, stop: asyncio.Event,
                    tasks: list[asyncio.Task[None]]) -> asyncio.Task[None]:
    """Start the informers (unless delayed) and the elector; return once stopped or leading, with the
    elector's task (in ``tasks`` too, with every task started here)."""
    loop = asyncio.get_running_loop()
    source, lock = replica.source, replica.lock
    if not replica.delay_cache:
        await source.start()
        tasks.append(loop.create_task(_announce_sync(source)))
    print(f"outrigger framework standing by as {lock.identity}: contending for lease {lock.describe()} at "
          f"{replica.server}", flush=True)
    if (election.resource_namespace, election.resource_name) == ("kube-system", "kube-scheduler"):
        log.warning("leader election on kube-scheduler's own Lease (kube-system/kube-scheduler): beside "
                    "kube-scheduler, set leaderElection.resourceNamespace and resourceName (or leaderElect: "
                    "false), or the two take turns")
    election_task = loop.create_task(replica.elector.run())
    tasks.append(election_task)
    await first(stop, replica.leading, task=election_task)
    return election_task


async def _lead(replica: _Replica, srv: Server, stop: asyncio.Event, election_task: asyncio.Task[None],
                tasks: list[asyncio.Task[None]]) -> None:
    """Lead with the started service until SIGTERM (then stop in order) or a lost lease (exit at once)."""
    source, elector = replica.source, replica.elector
    if replica.lost.is_set():
        exit_lost(elector)
    if srv.observability is not None and srv.observability.metrics is not None:
        srv.observability.metrics.registry.register(LeaderMetrics(elector))
    source.fence = elector.bind_window
    if replica.delay_cache:
        await source.start()
        tasks.append(asyncio.get_running_loop().create_task(_announce_sync(source)))
    await source.attach(srv.scheduler)
    print(f"outrigger framework leading as {replica.lock.identity} (lease {replica.lock.describe()})", flush=True)
    _print_serving(srv, source)
    await first(stop, replica.lost, task=election_task)
    if replica.lost.is_set():
        exit_lost(elector)
    log.info("shutting down")
    await srv.scheduler.stop()  # binding cycles in flight finish (fenced), then their events are sent
    await source.stop()
    await srv.stop()
