"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection`` does it, so
that several framework replicas run and one schedules.

::

    lock = LeaseLock(client, "outrigger", "outrigger", identity=new_identity())
    elector = LeaderElector(lock, config.leader_election, on_started_leading=start, on_stopped_leading=lost)
    await elector.run()        # returns when the lease is lost; cancelled: releases it if held

The protocol (client-go's ``tryAcquireOrRenew``), each step one request:

- **Acquire**: get the Lease (create it when there is none); if another identity holds it and it has
  not expired, wait ``retryPeriod`` to ``2.2 x retryPeriod`` (client-go's jitter) and try again;
  otherwise update it with this identity (``leaseTransitions`` + 1, ``acquireTime`` and ``renewTime``
  now). The update carries the ``resourceVersion`` the get returned, so of two standbys racing for an
  expired Lease the API server lets one through (409 Conflict for the other).
- **Expiry is judged by the local clock**: a Lease has expired when ``leaseDurationSeconds`` have passed
  since this process last *saw it change* (any change of its spec), never by comparing ``renewTime``
  with the local time, so clock skew between machines does not matter (only the rate of clocks does).
- **Renew** every ``retryPeriod``: update optimistically with the last resourceVersion; on a conflict,
  get it and try the slow path. A leader that has not renewed within ``renewDeadline`` of its last
  renewal stops leading: ``on_stopped_leading`` runs (kube-scheduler exits there) and ``run`` returns.
- **The fence**: :meth:`LeaderElector.bind_window` is how long a request sent now may take before
  another replica could hold the lease: zero once ``renewDeadline`` has passed since the last renewal
  was sent (or when not leading). Another replica can take the lease only ``leaseDurationSeconds``
  after it saw that renewal, which it cannot see before it was sent: between the two lie
  ``leaseDuration - renewDeadline`` (5 s by default), when the old leader has stopped binding and the
  new one has not started.
- **Release** (client-go's ``ReleaseOnCancel``, which kube-scheduler sets): a leader that stops on
  request hands the lease back (empty ``holderIdentity``, ``leaseDurationSeconds`` 1), so a standby
  takes over within ``retryPeriod`` rather than ``leaseDuration``.

Times in the Lease are MicroTime (``2006-01-02T15:04:05.000000Z``). The identity is kube-scheduler's:
``<hostname>_<uuid>``.

What it shows: :class:`LeaderMetrics` exposes client-go's ``leader_election_master_status{name}``
(1 leading, 0 standby) and ``leader_election_slowpath_total{name}``; :meth:`LeaderElector.check` is
kube's ``leaderElection`` health check (the leader fails it once its lease is more than 20 s past
expiry without a renewal: it should have stopped, something hangs).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import orjson
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..config import JITTER_FACTOR, LeaderElectionConfig, format_duration
from .client import ApiClient, ApiError, ApiUnreachable, KubeError
from .events import micro_time

__all__ = ["LeaderElector", "LeaderMetrics", "LeaseLock", "LeaseRecord", "new_identity"]

log = logging.getLogger("outrigger.kube.leader")

#: kube-scheduler's watchdog: the leader's health check fails this long after its lease expired.
MAX_TOLERABLE_EXPIRED_LEASE = 20.0


def new_identity() -> str:
    """kube-scheduler's identity of a candidate: ``<hostname>_<uuid>`` (two processes on one host differ)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A Lease's spec as leader election reads and writes it (client-go's LeaderElectionRecord)."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    leader_transitions: int = 0

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> LeaseRecord:
        return cls(
            holder_identity=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=str(spec.get("acquireTime") or ""),
            renew_time=str(spec.get("renewTime") or ""),
            leader_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.leader_transitions,
        }


class LeaseLock:
    """One Lease (``namespace/name``) read and written through ``client`` (client-go's LeaseLock): an
    update sends the whole object as last read, so it fails (409) if anyone wrote it since."""

    def __init__(self, client: ApiClient, namespace: str, name: str, identity: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"
        self._lease: dict[str, Any] | None = None

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def get(self, timeout: float) -> tuple[LeaseRecord, bytes]:
        """The record and its canonical bytes (to notice any change). ApiError 404 when there is none."""
        lease = await self.client.request("GET", self.path, verb="get", resource="leases", timeout=timeout)
        self._lease = lease
        spec = lease.get("spec") or {}
        return LeaseRecord.from_spec(spec), orjson.dumps(spec, option=orjson.OPT_SORT_KEYS)

    async def create(self, record: LeaseRecord, timeout: float) -> None:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": record.spec()}
        self._lease = await self.client.request(
            "POST", f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases", verb="create",
            resource="leases", body=body, timeout=timeout)

    async def update(self, record: LeaseRecord, timeout: float) -> None:
        if self._lease is None:
            raise KubeError(f"lease {self.describe()} not read yet: get or create it first")
        body = {**self._lease, "spec": {**(self._lease.get("spec") or {}), **record.spec()}}
        self._lease = await self.client.request("PUT", self.path, verb="update", resource="leases", body=body,
                                                timeout=timeout)


class LeaderElector:
    """client-go's LeaderElector for one Lease (see the module docstring). ``clock`` is monotonic (when
    this process saw things), ``wall`` gives the times written into the Lease."""

    def __init__(
        self,
        lock: LeaseLock,
        config: LeaderElectionConfig,
        *,
        on_started_leading: Callable[[], None] = lambda: None,
        on_stopped_leading: Callable[[], None] = lambda: None,
        on_new_leader: Callable[[str], None] | None = None,
        name: str | None = None,
        release_on_cancel: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.lock = lock
        self.config = config
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        #: The ``name`` label of the metrics (client-go's LeaderElectionConfig.Name): the Lease's name.
        self.name = name or lock.name
        #: client-go's ReleaseOnCancel (kube-scheduler sets it): a cancelled leader hands the lease back.
        self.release_on_cancel = release_on_cancel
        self._clock = clock
        self._wall = wall
        self.observed = LeaseRecord()
        self._observed_raw = b""
        self._observed_at = 0.0
        self._reported_leader = ""
        # When the last successful acquire or renewal was sent (monotonic), for the fence.
        self._renewed_at = float("-inf")
        self.leading = False
        self.slowpath = 0
        self._failing = ""

    # ---- what others read --------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        return self.lock.identity

    def is_leader(self) -> bool:
        """Whether the last record this replica saw names it."""
        return self.observed.holder_identity == self.identity

    @property
    def leader(self) -> str:
        """The identity of the last leader seen ("" before any, or after a release)."""
        return self.observed.holder_identity

    @property
    def last_renewal(self) -> float:
        """When the last successful acquire or renewal was sent (the clock's time; -inf before any)."""
        return self._renewed_at

    def bind_window(self) -> float:
        """Seconds a request sent now may take before another replica could hold the lease; 0 when
        this replica may not act (not leading, or ``renewDeadline`` passed since its last renewal)."""
        if not self.leading:
            return 0.0
        now = self._clock()
        if now >= self._renewed_at + self.config.renew_deadline:
            return 0.0
        return max(0.0, self._renewed_at + int(self.config.lease_duration) - now)

    def check(self, max_tolerable_expired: float = MAX_TOLERABLE_EXPIRED_LEASE) -> str | None:
        """kube's ``leaderElection`` health check: None, or why this leader is unhealthy."""
        if not self.is_leader():
            return None  # a hot standby is healthy
        if self._clock() - self._observed_at > self.config.lease_duration + max_tolerable_expired:
            return f"failed election to renew leadership on lease {self.name}"
        return None

    # ---- the loops ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Acquire the lease, call ``on_started_leading``, renew it until that fails, call
        ``on_stopped_leading`` and return. Cancelled while leading, it releases the lease first."""
        try:
            await self._acquire()
            self.leading = True
            self.on_started_leading()
            await self._renew()
        except asyncio.CancelledError:
            if self.leading and self.release_on_cancel:
                with contextlib.suppress(Exception):
                    await self.release()
            self.leading = False
            raise
        self.leading = False
        self.on_stopped_leading()

    async def _acquire(self) -> None:
        desc = self.lock.describe()
        log.info("attempting to acquire leader lease %s...", desc)
        while True:
            ok = await self._try_acquire_or_renew(self.config.renew_deadline)
            self._report_transition()
            if ok:
                log.info("successfully acquired lease %s", desc)
                return
            period = self.config.retry_period * (1.0 + random.random() * JITTER_FACTOR)
            if self.observed.holder_identity and not self.is_leader():
                # Try again right when the lease would expire, not up to 2.2 x retryPeriod after: the
                # standby takes over within leaseDuration of the last renewal it saw.
                expires_in = self._observed_at + self.observed.lease_duration_seconds - self._clock()
                if 0 < expires_in < period:
                    period = expires_in + 0.01
            await asyncio.sleep(period)

    async def _renew(self) -> None:
        desc = self.lock.describe()
        while True:
            await asyncio.sleep(self.config.retry_period)
            deadline = self._renewed_at + self.config.renew_deadline
            while True:
                left = deadline - self._clock()
                if left <= 0:
                    break
                if await self._try_acquire_or_renew(left):
                    break
                self._report_transition()
                if not self.is_leader():
                    break  # someone else holds it: no point retrying until the deadline
                await asyncio.sleep(min(self.config.retry_period, max(deadline - self._clock(), 0.0)))
            self._report_transition()
            if self.is_leader() and self._clock() < self._renewed_at + self.config.renew_deadline:
                continue
            log.error("failed to renew lease %s: not renewed within renewDeadline (%s)", desc,
                      format_duration(self.config.renew_deadline))
            return

    async def _try_acquire_or_renew(self, timeout: float) -> bool:
        sent = self._clock()
        now = micro_time(self._wall())
        record = LeaseRecord(holder_identity=self.identity, lease_duration_seconds=int(self.config.lease_duration),
                             acquire_time=now, renew_time=now)
        timeout = max(timeout, 0.1)
        # 1. The leader's fast path: update optimistically from the record it wrote last.
        if self.is_leader() and self._lease_valid(sent):
            record = replace(record, acquire_time=self.observed.acquire_time,
                             leader_transitions=self.observed.leader_transitions)
            try:
                await self.lock.update(record, timeout)
            except (ApiError, ApiUnreachable) as exc:
                log.warning("failed to update lock %s optimistically: %s; falling back to slow path",
                            self.lock.describe(), exc)
            else:
                self._set_observed(record, sent)
                self._renewed_at = sent
                return True
        # 2. Get it, or create it.
        try:
            old, raw = await self.lock.get(timeout)
        except ApiError as exc:
            if exc.code != 404:
                self._fail(f"error retrieving resource lock {self.lock.describe()}: {exc}")
                return False
            try:
                await self.lock.create(record, timeout)
            except ApiError as exc2:
                if exc2.code == 409:  # another candidate created it first: read it next time
                    log.debug("lease %s was created by another candidate", self.lock.describe())
                    return False
                self._fail(f"error initially creating leader election record {self.lock.describe()}: {exc2}")
                return False
            except ApiUnreachable as exc2:
                self._fail(f"error initially creating leader election record {self.lock.describe()}: {exc2}")
                return False
            self._set_observed(record, sent)
            self._renewed_at = sent
            self._ok()
            return True
        except ApiUnreachable as exc:
            self._fail(f"error retrieving resource lock {self.lock.describe()}: {exc}")
            return False
        # 3. Seen before? Expiry counts from when this replica saw it change.
        if raw != self._observed_raw:
            self._set_observed(old, self._clock())
            self._observed_raw = raw
        if old.holder_identity and self._lease_valid(self._clock()) and not self.is_leader():
            log.debug("lock is held by %s and has not yet expired", old.holder_identity)
            self._ok()
            return False
        # 4. Take it (or keep it, on the slow path).
        if self.is_leader():
            record = replace(record, acquire_time=old.acquire_time, leader_transitions=old.leader_transitions)
            self.slowpath += 1
        else:
            record = replace(record, leader_transitions=old.leader_transitions + 1)
        try:
            await self.lock.update(record, timeout)
        except (ApiError, ApiUnreachable) as exc:
            self._fail(f"failed to update lock {self.lock.describe()}: {exc}")
            return False
        self._set_observed(record, sent)
        self._observed_raw = b""
        self._renewed_at = sent
        self._ok()
        return True

    async def release(self) -> bool:
        """Hand the lease back (client-go's release): ``holderIdentity`` empty, ``leaseDurationSeconds`` 1."""
        if not self.is_leader():
            return True
        self.leading = False
        try:
            # Read it first (client-go does): a renewal cut short by the cancellation may have been applied.
            old, _ = await self.lock.get(self.config.renew_deadline)
            if old.holder_identity != self.identity:
                return True
            now = micro_time(self._wall())
            record = LeaseRecord(lease_duration_seconds=1, acquire_time=now, renew_time=now,
                                 leader_transitions=old.leader_transitions)
            await self.lock.update(record, self.config.renew_deadline)
        except (ApiError, ApiUnreachable) as exc:
            log.error("failed to release lock %s: %s", self.lock.describe(), exc)
            return False
        self._set_observed(record, self._clock())
        log.info("released lease %s", self.lock.describe())
        return True

    # ---- bookkeeping -------------------------------------------------------------------------------

    def _lease_valid(self, now: float) -> bool:
        return self._observed_at + self.observed.lease_duration_seconds > now

    def _set_observed(self, record: LeaseRecord, at: float) -> None:
        self.observed = record
        self._observed_at = at

    def _report_transition(self) -> None:
        holder = self.observed.holder_identity
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if holder:
            log.info("new leader elected: %s%s", holder, " (this replica)" if holder == self.identity else "")
        if self.on_new_leader is not None:
            self.on_new_leader(holder)

    def _fail(self, message: str) -> None:
        # One line per streak of the same failure (the API server down would otherwise log every 2 s).
        if message != self._failing:
            log.warning("%s; retrying every %s", message, format_duration(self.config.retry_period))
            self._failing = message

    def _ok(self) -> None:
        if self._failing:
            log.warning("lease %s: read and written again", self.lock.describe())
            self._failing = ""


class LeaderMetrics(Collector):
    """client-go's leader election metrics of one elector, read at scrape time."""

    def __init__(self, elector: LeaderElector) -> None:
        self.elector = elector

    def collect(self) -> Iterable[GaugeMetricFamily | CounterMetricFamily]:
        status = GaugeMetricFamily(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
            "master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            labels=["name"])
        status.add_metric([self.elector.name], 1.0 if self.elector.leading else 0.0)
        yield status
        slow = CounterMetricFamily(
            "leader_election_slowpath",
            "Total number of slow path exercised in renewing leader leases. 'name' is the string used to "
            "identify the lease. Please make sure to group by name.",
            labels=["name"])
        slow.add_metric([self.elector.name], float(self.elector.slowpath))
        yield slow
