"""Leader election on a coordination.k8s.io/v1 Lease, against the real API server.

- ``leaderElection`` is defaulted and validated as kube-scheduler does (table cases, exact messages);
- electors in this process (a Lease in the test's namespace, short durations): the first creates the
  Lease, a standby waits while the leader renews and takes over by its own clock once it stops, a
  released Lease is taken within a retry period, a leader whose API server is gone stops leading (and
  binding) before anyone could take its Lease;
- ``outrigger serve`` replicas: one leads, metrics and health say which, a standby answers its health
  and metrics only, the standby takes over after the leader is SIGKILLed, and a leader that cannot renew
  exits 1 and comes back as a standby.
"""

from __future__ import annotations

import asyncio
import collections
import re
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for

from framework.config import LeaderElectionConfig, format_duration, leader_election_config, parse_duration
from framework.kube.client import ApiClient, KubeConfig, KubeConfigError
from framework.kube.leader import LeaderElector, LeaderMetrics, LeaseLock
from framework.kube.settings import leader_election
from tools.localcluster import LocalCluster, free_ports

MICRO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
# In this process: short enough for a test, valid for client-go (2 > 1.5 > 1.2 x 0.5).
FAST = LeaderElectionConfig(lease_duration=2.0, renew_deadline=1.5, retry_period=0.5)


# ---- configuration --------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "want", "problems"), [
    pytest.param(None, LeaderElectionConfig(True, 15.0, 10.0, 2.0, "leases", "kube-system", "kube-scheduler"), [],
                 id="kube-scheduler-defaults"),
    pytest.param({"resourceNamespace": "outrigger", "resourceName": "outrigger", "leaseDuration": "1m",
                  "renewDeadline": "30s", "retryPeriod": "500ms"},
                 LeaderElectionConfig(True, 60.0, 30.0, 0.5, "leases", "outrigger", "outrigger"), [], id="own-lease"),
    pytest.param({"leaseDuration": "0s", "resourceLock": ""}, LeaderElectionConfig(), [], id="zero-is-unset"),
    pytest.param({"leaderElect": False, "resourceLock": "endpoints", "leaseDuration": "1s"},
                 LeaderElectionConfig(False, 1.0, 10.0, 2.0, "endpoints"), [], id="off-is-not-validated"),
    pytest.param({"leaseDuration": "10s"}, None,
                 [("leaderElection.leaseDuration", "Invalid value: 10s: LeaseDuration must be greater than "
                                                   "RenewDeadline")], id="lease-not-above-renew"),
    pytest.param({"renewDeadline": "2s"}, None,
                 [("leaderElection.renewDeadline", "Invalid value: 2s: renewDeadline must be greater than "
                                                   "retryPeriod*JitterFactor (2s x 1.2)")], id="renew-vs-retry"),
    pytest.param({"retryPeriod": "-1s"}, None,
                 [("leaderElection.retryPeriod", "Invalid value: -1s: must be greater than zero")], id="negative"),
    pytest.param({"leaseDuration": 15}, None,
                 [("leaderElection.leaseDuration", 'invalid duration 15: write it as Go does, e.g. "15s", "1m30s"')],
                 id="number-not-duration"),
    pytest.param({"leaderElect": "yes", "resourceName": 3}, None,
                 [("leaderElection.leaderElect", "must be true or false, got 'yes'"),
                  ("leaderElection.resourceName", "must be a string, got 3")], id="types"),
    pytest.param({"resourceLock": "configmapsleases"}, None,
                 [("leaderElection.resourceLock", 'Invalid value: "configmapsleases": resourceLock value must be '
                                                  '"leases"')], id="lock"),
])
def test_leader_election_is_defaulted_and_validated_as_kube_scheduler(
        raw: dict[str, Any] | None, want: LeaderElectionConfig | None, problems: list[tuple[str, str]]) -> None:
    got, found = leader_election_config(raw)
    assert found == problems
    if want is not None:
        assert got == want


@pytest.mark.parametrize(("text", "seconds", "printed"), [
    ("15s", 15.0, "15s"), ("1m30s", 90.0, "1m30s"), ("500ms", 0.5, "500ms"), ("1h", 3600.0, "1h0m0s"),
    ("0", 0.0, "0s"), ("1.5s", 1.5, "1.5s"), ("-2s", -2.0, "-2s"), ("2us", 2e-6, "2\u00b5s"),
])
def test_go_durations_parse_and_print_as_go(text: str, seconds: float, printed: str) -> None:
    assert parse_duration(text) == pytest.approx(seconds)
    assert format_duration(parse_duration(text)) == printed


@pytest.mark.parametrize("text", ["", "15", "s", "1x", "abc", ".s", "1s2"])
def test_a_malformed_duration_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_serve_reads_leader_election_before_the_plugins_and_names_file_and_field(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("leaderElection:\n  leaseDuration: 5s\n")
    with pytest.raises(KubeConfigError) as err:
        leader_election(str(config))
    assert str(err.value) == (f"{config}: leaderElection.leaseDuration: Invalid value: 10s: LeaseDuration must be "
                              "greater than RenewDeadline")
    config.write_text("leaderElection: {resourceNamespace: outrigger, resourceName: outrigger}\n")
    assert leader_election(str(config)) == LeaderElectionConfig(resource_namespace="outrigger",
                                                                resource_name="outrigger")
    assert leader_election(None) == LeaderElectionConfig()


# ---- electors in this process ---------------------------------------------------------------------


def lease(cluster: LocalCluster, namespace: str, name: str = "lease") -> dict[str, Any]:
    spec: dict[str, Any] = get_json(cluster, "lease", name, "-n", namespace)["spec"]
    return spec


class Candidate:
    """An elector of its own (its own client) with timestamps of what happened to it."""

    def __init__(self, cluster: LocalCluster, namespace: str, ident: str, *, release: bool = True,
                 config: LeaderElectionConfig = FAST) -> None:
        self.client = ApiClient(KubeConfig.from_file(cluster.admin_kubeconfig))
        self.started: float | None = None
        self.stopped: float | None = None
        self.window_at_stop = -1.0
        self.elector = LeaderElector(LeaseLock(self.client, namespace, "lease", ident), config,
                                     on_started_leading=self._started, on_stopped_leading=self._stopped,
                                     release_on_cancel=release)
        self.task: asyncio.Task[None] | None = None

    def _started(self) -> None:
        self.started = time.monotonic()

    def _stopped(self) -> None:
        self.stopped = time.monotonic()
        self.window_at_stop = self.elector.bind_window()

    def run(self) -> Candidate:
        self.task = asyncio.get_running_loop().create_task(self.elector.run())
        return self

    async def leading(self, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while self.started is None:
            assert time.monotonic() < deadline, f"{self.elector.identity} did not lead within {timeout}s"
            await asyncio.sleep(0.02)
        return self.started

    async def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        await self.client.close()


def test_first_candidate_creates_the_lease_and_renews_it_keeping_acquire_time(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    async def main() -> None:
        a = Candidate(kube_cluster, kube_namespace, "a").run()
        try:
            await a.leading(10)
            first = await asyncio.to_thread(lease, kube_cluster, kube_namespace)
            assert {k: first[k] for k in ("holderIdentity", "leaseDurationSeconds", "leaseTransitions")} == {
                "holderIdentity": "a", "leaseDurationSeconds": 2, "leaseTransitions": 0}
            assert MICRO_TIME.fullmatch(first["acquireTime"]) and first["renewTime"] == first["acquireTime"]
            await asyncio.sleep(3 * FAST.retry_period)
            later = await asyncio.to_thread(lease, kube_cluster, kube_namespace)
            assert later["acquireTime"] == first["acquireTime"] and later["renewTime"] > first["renewTime"]
            assert MICRO_TIME.fullmatch(later["renewTime"])
            assert a.elector.leading and a.elector.check() is None
            assert 0 < a.elector.bind_window() <= FAST.lease_duration
        finally:
            await a.close()
        released = await asyncio.to_thread(lease, kube_cluster, kube_namespace)
        assert (released["holderIdentity"], released["leaseDurationSeconds"]) == ("", 1)  # ReleaseOnCancel
        assert a.elector.bind_window() == 0

    asyncio.run(main())


def test_standby_takes_over_by_its_own_clock_only_after_the_leader_stops_renewing(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    async def main() -> None:
        a = Candidate(kube_cluster, kube_namespace, "a", release=False).run()  # no release: a crash
        await a.leading(10)
        b = Candidate(kube_cluster, kube_namespace, "b").run()
        c = Candidate(kube_cluster, kube_namespace, "c").run()
        try:
            await asyncio.sleep(3 * FAST.lease_duration)  # a renews: b and c stand by
            assert (b.started, c.started, b.elector.leader, c.elector.leader) == (None, None, "a", "a")
            assert b.elector.bind_window() == 0 and b.elector.check() is None  # a standby is healthy
            assert a.task is not None
            a.task.cancel()
            await asyncio.gather(a.task, return_exceptions=True)
            killed = time.monotonic()
            last_renewal = a.elector.last_renewal
            deadline = time.monotonic() + 10
            while b.started is None and c.started is None:
                assert time.monotonic() < deadline, "no standby took over"
                await asyncio.sleep(0.02)
            winner, loser = (b, c) if b.started is not None else (c, b)
            took = winner.started
            assert took is not None
            # Not before the lease could expire by the standby's clock, and soon after it did.
            assert took - last_renewal >= FAST.lease_duration
            assert took - killed <= FAST.lease_duration + 2.2 * FAST.retry_period + 0.5
            await asyncio.sleep(2 * FAST.retry_period)
            assert loser.started is None and loser.elector.leader == winner.elector.identity
            spec = await asyncio.to_thread(lease, kube_cluster, kube_namespace)
            assert (spec["holderIdentity"], spec["leaseTransitions"]) == (winner.elector.identity, 1)
        finally:
            for cand in (a, b, c):
                await cand.close()

    asyncio.run(main())


def test_a_released_lease_is_taken_within_a_retry_period(kube_cluster: LocalCluster, kube_namespace: str) -> None:
    async def main() -> None:
        a = Candidate(kube_cluster, kube_namespace, "a").run()
        await a.leading(10)
        b = Candidate(kube_cluster, kube_namespace, "b").run()
        try:
            await asyncio.sleep(2 * FAST.retry_period)
            assert a.task is not None
            a.task.cancel()
            await asyncio.gather(a.task, return_exceptions=True)
            released = time.monotonic()
            took = await b.leading(10)
            assert took - released <= 2.2 * FAST.retry_period + 0.3  # well inside leaseDuration
            spec = await asyncio.to_thread(lease, kube_cluster, kube_namespace)
            assert (spec["holderIdentity"], spec["leaseTransitions"], spec["leaseDurationSeconds"]) == ("b", 1, 2)
        finally:
            await a.close()
            await b.close()

    asyncio.run(main())


def test_a_leader_without_its_api_server_stops_before_anyone_could_take_its_lease(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    async def main() -> None:
        a = Candidate(kube_cluster, kube_namespace, "a", release=False).run()
        b: Candidate | None = None
        try:
            await a.leading(10)
            await asyncio.sleep(2 * FAST.retry_period)
            assert a.elector.bind_window() > 0
            await asyncio.to_thread(kube_cluster.stop_apiserver)
            deadline = time.monotonic() + 10
            while a.stopped is None:
                assert time.monotonic() < deadline, "the leader did not stop leading"
                await asyncio.sleep(0.02)
            # It stops once renewDeadline has passed since its last renewal: from then on it may not bind,
            # and no other replica can hold the lease before leaseDuration has passed.
            assert FAST.renew_deadline <= a.stopped - a.elector.last_renewal <= FAST.renew_deadline + 0.3
            assert a.window_at_stop == 0 and not a.elector.leading
            await asyncio.to_thread(kube_cluster.start_apiserver)
            b = Candidate(kube_cluster, kube_namespace, "b").run()
            took = await b.leading(15)
            assert took - a.elector.last_renewal >= FAST.lease_duration
            spec = await asyncio.to_thread(lease, kube_cluster, kube_namespace)
            assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("b", 1)
        finally:
            await asyncio.to_thread(kube_cluster.start_apiserver)
            await a.close()
            if b is not None:
                await b.close()

    asyncio.run(main())


def test_metrics_and_the_health_check_say_who_leads(kube_cluster: LocalCluster, kube_namespace: str) -> None:
    now = [0.0]

    def clock() -> float:
        return time.monotonic() + now[0]

    async def main() -> None:
        a = Candidate(kube_cluster, kube_namespace, "a", release=False)
        a.elector = LeaderElector(a.elector.lock, FAST, on_started_leading=a._started, clock=clock,
                                  release_on_cancel=False)
        a.run()
        await a.leading(10)
        b = Candidate(kube_cluster, kube_namespace, "b").run()
        try:
            await asyncio.sleep(2 * FAST.retry_period)

            def gauges(elector: LeaderElector) -> dict[str, float]:
                return {f"{s.name}{s.labels}": s.value for m in LeaderMetrics(elector).collect() for s in m.samples}

            assert gauges(a.elector) == {"leader_election_master_status{'name': 'lease'}": 1.0,
                                         "leader_election_slowpath_total{'name': 'lease'}": 0.0}
            assert gauges(b.elector) == {"leader_election_master_status{'name': 'lease'}": 0.0,
                                         "leader_election_slowpath_total{'name': 'lease'}": 0.0}
            assert a.elector.check() is None and b.elector.check() is None
            assert a.task is not None
            a.task.cancel()  # hung: it neither renews nor exits, and the lease still names it
            await asyncio.gather(a.task, return_exceptions=True)
            now[0] = FAST.lease_duration + 20.5  # kube-scheduler's watchdog tolerates 20 s past expiry
            assert a.elector.check() == "failed election to renew leadership on lease lease"
            assert b.elector.check() is None
        finally:
            await a.close()
            await b.close()

    asyncio.run(main())


# ---- outrigger serve replicas -----------------------------------------------------------------------

PROFILE = "outrigger-scheduler"
REPLICA_CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  resourceNamespace: outrigger
  resourceName: outrigger
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 1s
profiles:
- schedulerName: {PROFILE}
"""
LEASE_SECONDS = 4


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def master_status(port: int) -> str:
    text = http_get(f"http://127.0.0.1:{port}/metrics")[1]
    return next(line for line in text.splitlines() if line.startswith("leader_election_master_status{"))


def identity_of(proc: FrameworkProcess) -> str:
    line = next(x for x in proc.lines if x.startswith("outrigger framework standing by as "))
    return line.split(" as ", 1)[1].split(":", 1)[0]


def leads(proc: FrameworkProcess) -> bool:
    return any(x.startswith("outrigger framework leading as ") for x in proc.lines)


def bound(cluster: LocalCluster, namespace: str) -> dict[str, str]:
    pods = get_json(cluster, "pods", "-n", namespace)["items"]
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}


def scheduled_events(cluster: LocalCluster, namespace: str) -> collections.Counter[str]:
    events = get_json(cluster, "events.events.k8s.io", "-n", namespace, "--field-selector", "reason=Scheduled")
    return collections.Counter(e["regarding"]["name"] for e in events["items"])


def replica(kubeconfig: Path, config: Path, port: int) -> FrameworkProcess:
    proc = FrameworkProcess(kubeconfig, config)
    proc.argv += ["--http", f"127.0.0.1:{port}"]
    return proc


def test_two_replicas_one_schedules_and_the_standby_takes_over_after_the_leader_is_killed(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> None:
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    node = f"{kube_namespace[:40]}-n"
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(node_manifest(node, "100")))
    config = tmp_path / "scheduler.yaml"
    config.write_text(REPLICA_CONFIG)
    ports = free_ports(2)
    first = replica(kubeconfig, config, ports[0]).start()
    second = replica(kubeconfig, config, ports[1]).start()
    try:
        wait_for(lambda: leads(first) or leads(second), 30, "a leader")
        (leader, lport), (standby, sport) = sorted([(first, ports[0]), (second, ports[1])],
                                                   key=lambda r: not leads(r[0]))
        wait_for(lambda: http_get(f"http://127.0.0.1:{lport}/readyz")[0] == 200, 30, "the leader's /readyz")
        assert master_status(lport) == 'leader_election_master_status{name="outrigger"} 1.0'
        assert master_status(sport) == 'leader_election_master_status{name="outrigger"} 0.0'
        for port in (lport, sport):
            assert http_get(f"http://127.0.0.1:{port}/healthz/leaderElection") == (200, "ok")
            assert http_get(f"http://127.0.0.1:{port}/readyz") == (200, "ok")
        status, body = http_get(f"http://127.0.0.1:{sport}/configz")
        assert (status, body) == (503, '{"error":"/configz: this replica is a standby (the leader is '
                                       f'{identity_of(leader)}); ask the leader"}}')
        spec = lease(kube_cluster, "outrigger", "outrigger")
        assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == (identity_of(leader), LEASE_SECONDS)
        transitions = spec["leaseTransitions"]

        pods = [pod_manifest(f"a{i}", kube_namespace, PROFILE) for i in range(10)]
        kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(pods))
        wait_for(lambda: len(bound(kube_cluster, kube_namespace)) == 10, 60, "the first pods bound")

        leader.kill()
        killed = time.monotonic()
        wait_for(lambda: leads(standby), LEASE_SECONDS + 5, "the standby to take over")
        took = time.monotonic() - killed
        assert took <= LEASE_SECONDS + 5
        pods = [pod_manifest(f"b{i}", kube_namespace, PROFILE) for i in range(10)]
        kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(pods))
        wait_for(lambda: len(bound(kube_cluster, kube_namespace)) == 20, 60, "the later pods bound")
        wait_for(lambda: sum(scheduled_events(kube_cluster, kube_namespace).values()) == 20, 30, "20 events")
        assert set(scheduled_events(kube_cluster, kube_namespace).values()) == {1}  # each pod bound once
        spec = lease(kube_cluster, "outrigger", "outrigger")
        assert (spec["holderIdentity"], spec["leaseTransitions"]) == (identity_of(standby), transitions + 1)
        assert master_status(sport) == 'leader_election_master_status{name="outrigger"} 1.0'
        assert "Traceback" not in standby.output()
    finally:
        first.kill()
        second.stop()
        kube_cluster.kubectl("delete", "node", node)


def test_a_leader_that_cannot_renew_exits_1_and_comes_back_as_a_standby(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> None:
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    config = tmp_path / "scheduler.yaml"
    config.write_text(REPLICA_CONFIG)
    proc = FrameworkProcess(kubeconfig, config).start()
    again = FrameworkProcess(kubeconfig, config)
    try:
        wait_for(lambda: leads(proc), 3 * LEASE_SECONDS, "the replica to lead")
        kube_cluster.stop_apiserver()
        stopped = time.monotonic()
        assert proc.proc is not None
        code = proc.proc.wait(timeout=15)
        assert code == 1 and time.monotonic() - stopped <= 3 + 1 + 1  # renewDeadline, one retry, margin
        assert ("leader election lost: lease outrigger/outrigger not renewed within renewDeadline (3s); exiting"
                in proc.lines)
        kube_cluster.start_apiserver()
        again.start()  # what a supervisor does
        wait_for(lambda: leads(again), 2 * LEASE_SECONDS + 5, "the restarted replica to lead")
        spec = lease(kube_cluster, "outrigger", "outrigger")
        assert spec["holderIdentity"] == identity_of(again) != identity_of(proc)
    finally:
        kube_cluster.start_apiserver()
        proc.kill()
        again.stop()


def test_delay_cache_until_active_keeps_a_standbys_informers_stopped_until_it_leads(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> None:
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    node = f"{kube_namespace[:40]}-n"
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(node_manifest(node)))
    config = tmp_path / "scheduler.yaml"
    config.write_text(REPLICA_CONFIG)
    delayed = tmp_path / "delayed.yaml"
    delayed.write_text(REPLICA_CONFIG.replace("profiles:", "delayCacheUntilActive: true\nprofiles:"))
    leader = FrameworkProcess(kubeconfig, config).start()
    standby = FrameworkProcess(kubeconfig, delayed)
    try:
        wait_for(lambda: leads(leader), 3 * LEASE_SECONDS, "the first replica to lead")
        standby.start(wait_synced=False)
        wait_for(lambda: identity_of(standby) if any("standing by as" in x for x in standby.lines) else "", 30,
                 "the standby")
        time.sleep(2)
        assert not any(x.startswith("in sync with the cluster") for x in standby.lines)  # nothing listed yet
        leader.kill()
        wait_for(lambda: leads(standby), LEASE_SECONDS + 5, "the standby to take over")
        wait_for(lambda: any(x.startswith("in sync with the cluster") for x in standby.lines), 30, "its first list")
        first = [x.split(" as ")[0] for x in standby.lines if x.startswith(("outrigger framework leading as",
                                                                             "in sync with the cluster"))]
        assert first[0] == "outrigger framework leading"  # it listed only once it led
        kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(pod_manifest("late", kube_namespace, PROFILE)))
        assert wait_for(lambda: bound(kube_cluster, kube_namespace).get("late"), 30, "the pod bound") == node
    finally:
        leader.kill()
        standby.stop()
        kube_cluster.kubectl("delete", "node", node)
