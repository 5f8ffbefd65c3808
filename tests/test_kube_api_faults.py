"""API faults on the real API server, each handled as kube-scheduler handles it.

- the API server killed and started again while hundreds of pods are scheduled: the framework rides it
  out and every pod ends bound once or pending with its reason;
- a watch resumed from a resourceVersion the server no longer has: ``410 Gone``, a relist, and the
  store reconciled with what changed meanwhile (the watch cache of a restarted API server starts at
  the current revision, so a watch from before is "too old");
- a binding answered ``409 Conflict`` because someone bound the pod first: handled, not retried, no
  event; a pod deleted (or deleted and created again) during its binding cycle; a node deleted while
  a pod is assumed on it: the pod goes elsewhere;
- throttling: an API server with tiny in-flight limits answers ``429`` with ``Retry-After`` and the
  client waits and sends again (no binding fails); the client's own QPS and burst pace its requests.

The slow binding cycles come from the Provisioner example plugin (a PreBind of ``delaySeconds``) in a
plugin host of its own; its claim file appears at Reserve and names the node, so the test knows the
pod is assumed, and where.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import re
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_framework import FrameworkProcess, get_json, node_manifest, outrigger_kubeconfig, pod_manifest, wait_for
from test_remote_harness import HostProcess

from framework.kube.client import ApiClient, KubeConfig
from framework.kube.informer import Informer
from pluginhost.examples.provisioner import PROVISION
from tools.localcluster import LocalCluster

pytestmark = pytest.mark.kube

PROFILE = "outrigger-scheduler"


def config_text(qps: float = 1000, burst: int = 1000, plugins: bool = False) -> str:
    lines = ["apiVersion: kubescheduler.config.k8s.io/v1", "kind: KubeSchedulerConfiguration",
             f"clientConnection: {{qps: {qps}, burst: {burst}}}", "leaderElection: {leaderElect: false}",
             "profiles:", f"- schedulerName: {PROFILE}"]
    if plugins:
        lines += ["  plugins: {multiPoint: {enabled: [{name: Provisioner}]}}",
                  "  pluginConfig: [{name: Provisioner, args: {delaySeconds: 3, root: ROOT}}]"]
    return "\n".join(lines) + "\n"


def api(cluster: LocalCluster, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    """One request as the admin; (status, decoded body)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{cluster.server}{path}", data=data, method=method, headers={
        "Authorization": f"Bearer {cluster.admin_token}", "Content-Type": "application/json"})
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def events(cluster: LocalCluster, namespace: str, reason: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(cluster, "events.events.k8s.io", "-n", namespace, "--field-selector",
                                           f"reason={reason}")["items"]
    return items


def pods(cluster: LocalCluster, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get_json(cluster, "pods", "-n", namespace)["items"]
    return items


def node_of(cluster: LocalCluster, namespace: str, name: str) -> str:
    return cluster.kubectl("get", "pod", name, "-n", namespace, "-o", "jsonpath={.spec.nodeName}").stdout


@contextmanager
def apiserver_flags(cluster: LocalCluster, *flags: str) -> Iterator[None]:
    """The API server restarted with ``flags`` added, and restarted without them afterwards."""
    original = list(cluster.apiserver.argv)
    cluster.apiserver.argv += list(flags)
    try:
        cluster.restart_apiserver()
        yield
    finally:
        cluster.apiserver.argv[:] = original
        cluster.restart_apiserver()


def apiserver_counter(cluster: LocalCluster, name: str, **labels: str) -> float:
    """The sum of an API server metric's samples whose labels include ``labels`` (its /metrics, as admin)."""
    request = urllib.request.Request(f"{cluster.server}/metrics",
                                     headers={"Authorization": f"Bearer {cluster.admin_token}"})
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    with urllib.request.urlopen(request, context=context, timeout=30) as resp:
        text = resp.read().decode()
    wanted = [f'{k}="{v}"' for k, v in labels.items()]
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(w in line for w in wanted):
            total += float(line.rsplit(" ", 1)[1])
    return total


# ---- the API server goes away -----------------------------------------------------------------------


def test_api_server_killed_mid_run_every_pod_ends_bound_once_or_pending_with_its_reason(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> None:
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    nodes, node_cpu, count = 20, 40, 1000  # 800 fit, 200 do not
    names = [f"{kube_namespace[:40]}-{i}" for i in range(nodes)]
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([node_manifest(n, str(node_cpu)) for n in names]))
    manifests = [pod_manifest(f"p{i}", kube_namespace, PROFILE) for i in range(count)]
    kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(manifests), timeout=120)
    config = tmp_path / "scheduler.yaml"
    config.write_text(config_text())
    proc = FrameworkProcess(kubeconfig, config).start()
    try:
        def bound() -> int:
            out = kube_cluster.kubectl("get", "pods", "-n", kube_namespace, "--field-selector", "spec.nodeName!=",
                                       "-o", "name").stdout
            return len(out.split())

        at_kill = wait_for(lambda: (lambda n: n if n >= 50 else 0)(bound()), 60, "50 pods bound", interval=0.1)
        kube_cluster.restart_apiserver(graceful=False)  # SIGKILL: a crash, no watch closed cleanly
        assert at_kill < nodes * node_cpu  # mid-run

        items = wait_settled(kube_cluster, kube_namespace, proc)
        assert proc.proc is not None and proc.proc.poll() is None  # rode it out: the same process
    finally:
        proc.stop()
    placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in items if p["spec"].get("nodeName")}
    pending = [p for p in items if not p["spec"].get("nodeName")]
    per_node = collections.Counter(placed.values())
    assert (len(placed), len(pending)) == (nodes * node_cpu, count - nodes * node_cpu), (per_node,
                                                                                         proc.output()[-6000:])
    assert max(per_node.values()) <= node_cpu  # none over-committed
    fit = f"0/{nodes} nodes are available: {nodes} Insufficient cpu."
    assert all(c["message"].startswith(fit) for p in pending for c in p["status"]["conditions"]
               if c["type"] == "PodScheduled")
    def every_event() -> list[dict[str, Any]] | None:
        got = events(kube_cluster, kube_namespace, "Scheduled")
        return got if len(got) >= len(placed) else None

    try:
        scheduled = wait_for(every_event, 30, "the Scheduled events")
    except AssertionError:
        # A restarted kube-apiserver refuses requests (403) until its authorizer has caught up; an event
        # it refuses is dropped, as client-go's event broadcaster drops a refused event, and the refusal
        # is logged. Only then may a bound pod lack its event, and only a few of them.
        scheduled = events(kube_cluster, kube_namespace, "Scheduled")
        refused = re.search(r"create events\S*: 403", proc.output())
        assert refused is not None and len(placed) - len(scheduled) <= len(placed) // 20, (
            len(scheduled), len(placed), proc.output()[-3000:])
    per_pod = collections.Counter(e["regarding"]["name"] for e in scheduled)
    assert set(per_pod) <= set(placed) and set(per_pod.values()) == {1}  # never two, never for a pending pod
    assert all(e["note"].endswith(f" to {placed[e['regarding']['name']]}") for e in scheduled)
    assert "Traceback" not in proc.output()
    # The pods and nodes go with the namespace (kube_namespace deletes both, with time for 1000 pods).


def unsettled(pod: dict[str, Any]) -> bool:
    """Neither bound nor pending with the reason Unschedulable."""
    conds = {c["type"]: c for c in pod["status"].get("conditions") or ()}
    return not pod["spec"].get("nodeName") and conds.get("PodScheduled", {}).get("reason") != "Unschedulable"


def wait_settled(cluster: LocalCluster, namespace: str, proc: FrameworkProcess, stall: float = 120,
                 limit: float = 900) -> list[dict[str, Any]]:
    """The namespace's pods once each is bound or pending with a reason. On a loaded machine the run after a
    restart can take minutes: the wait goes on while pods keep settling, and fails after ``stall`` seconds
    without one settling or ``limit`` seconds in all."""
    start = time.monotonic()
    best, last_progress = -1, start
    for _ in range(int(limit)):  # each round sleeps 2 s: ends by the time limit long before the count
        items = pods(cluster, namespace)
        left = sum(1 for pod in items if unsettled(pod))
        if not left:
            return items
        now = time.monotonic()
        if best < 0 or left < best:
            best, last_progress = left, now
        if now - last_progress > stall or now - start > limit:
            break
        time.sleep(2)
    raise AssertionError(f"{best} pods neither bound nor pending with a reason after {time.monotonic() - start:.0f} s "
                         f"(none settled in the last {stall:.0f} s, or over {limit:.0f} s in all); the framework "
                         f"said:\n{proc.output()[-4000:]}")


# ---- watches expire -------------------------------------------------------------------------------


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    async def on_add(self, obj: dict[str, Any]) -> None:
        self.seen.append(("add", obj["metadata"]["name"]))

    async def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self.seen.append(("update", new["metadata"]["name"]))

    async def on_delete(self, obj: dict[str, Any]) -> None:
        self.seen.append(("delete", obj["metadata"]["name"]))


def test_a_watch_resumed_past_the_servers_history_gets_410_and_the_relist_reconciles_the_store(
        kube_cluster: LocalCluster, kube_namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    for name in ("kept", "gone"):
        kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(pod_manifest(name, kube_namespace, "nobody")))

    async def main() -> None:
        client = ApiClient(KubeConfig.from_file(kube_cluster.admin_kubeconfig))
        recorder = Recorder()
        informer: Informer[dict[str, Any]] = Informer(client, f"/api/v1/namespaces/{kube_namespace}/pods", "pods",
                                                      lambda o: o, recorder, min_backoff=0.1)
        task = asyncio.get_running_loop().create_task(informer.run())
        await asyncio.wait_for(informer.synced.wait(), 30)
        task.cancel()  # the consumer falls behind: no watch while the cluster changes
        await asyncio.gather(task, return_exceptions=True)
        stale = informer.resource_version
        assert sorted(informer.store) == [f"{kube_namespace}/gone", f"{kube_namespace}/kept"]
        await asyncio.to_thread(kube_cluster.kubectl, "delete", "pod", "gone", "-n", kube_namespace,
                                "--grace-period=0", "--force")
        await asyncio.to_thread(kube_cluster.kubectl, "create", "-f", "-",
                                input=yaml.safe_dump(pod_manifest("new", kube_namespace, "nobody")))
        await asyncio.to_thread(kube_cluster.restart_apiserver)  # its watch cache starts at today's revision
        recorder.seen.clear()
        with caplog.at_level(logging.INFO, logger="outrigger.kube"):
            task = asyncio.get_running_loop().create_task(informer.run())
            try:
                for _ in range(300):
                    if informer.lists == 2 and informer.watches >= 3:
                        break
                    await asyncio.sleep(0.05)
                # before: one list, one watch; now: a watch refused (410), one relist, a watch that works
                assert (informer.lists, informer.watches) == (2, 3)
                assert sorted(informer.store) == [f"{kube_namespace}/kept", f"{kube_namespace}/new"]
                assert sorted(recorder.seen) == [("add", "new"), ("delete", "gone")]
                expired = [r.getMessage() for r in caplog.records if "expired" in r.getMessage()]
                assert expired == [f"pods: resourceVersion {stale} expired; listing pods again"]
                # and the new watch delivers
                await asyncio.to_thread(kube_cluster.kubectl, "create", "-f", "-",
                                        input=yaml.safe_dump(pod_manifest("later", kube_namespace, "nobody")))
                for _ in range(200):
                    if ("add", "later") in recorder.seen:
                        break
                    await asyncio.sleep(0.05)
                assert ("add", "later") in recorder.seen
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await client.close()

    asyncio.run(main())


# ---- a binding cycle meets a changed cluster -----------------------------------------------------


class SlowBinding:
    """Outrigger with the Provisioner plugin (PreBind takes 3 s) in its own host, on two nodes."""

    def __init__(self, cluster: LocalCluster, namespace: str, tmp_path: Path) -> None:
        self.cluster, self.namespace = cluster, namespace
        self.root = tmp_path / "claims"
        self.root.mkdir()
        self.nodes = [f"{namespace[:40]}-a", f"{namespace[:40]}-b"]
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all([node_manifest(n) for n in self.nodes]))
        self.host = HostProcess("pluginhost.examples.provisioner:Provisioner")
        address = self.host.start()
        plugins = tmp_path / "remote-plugins.yaml"
        plugins.write_text(yaml.safe_dump({"apiVersion": "outrigger.io/v1alpha1", "kind": "RemotePlugins",
                                           "plugins": [{"name": "provisioner", "address": address,
                                                        "deadlines": {"default": "5s", "preBind": "10s"}}]}))
        config = tmp_path / "scheduler.yaml"
        config.write_text(config_text(plugins=True).replace("ROOT", str(self.root)))
        self.framework = FrameworkProcess(outrigger_kubeconfig(cluster), config, plugins).start()

    def create(self, name: str) -> None:
        pod = pod_manifest(name, self.namespace, PROFILE, annotations={PROVISION: "scratch"})
        self.cluster.kubectl("create", "-f", "-", input=yaml.safe_dump(pod))

    def uid(self, name: str) -> str:
        return self.cluster.kubectl("get", "pod", name, "-n", self.namespace, "-o", "jsonpath={.metadata.uid}").stdout

    def assumed_on(self, uid: str, timeout: float = 30) -> str:
        """Wait for the pod's claim (written at Reserve: it is assumed, its PreBind runs); the node."""
        claim = self.root / f"{uid}.claim"
        text: str = wait_for(lambda: claim.exists() and claim.read_text(), timeout, f"the claim of {uid}",
                             interval=0.05)
        return text.strip().rsplit(" on ", 1)[1]

    def claims(self) -> list[str]:
        return sorted(p.name.removesuffix(".claim") for p in self.root.glob("*.claim"))

    def close(self) -> None:
        self.framework.stop()
        self.host.kill()
        self.cluster.kubectl("delete", "node", *self.nodes, check=False)


@pytest.fixture
def slow(kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> Iterator[SlowBinding]:
    rig = SlowBinding(kube_cluster, kube_namespace, tmp_path)
    try:
        yield rig
    finally:
        rig.close()


def test_a_binding_refused_409_because_the_pod_was_bound_meanwhile_is_handled_not_retried(
        slow: SlowBinding) -> None:
    ns = slow.namespace
    slow.create("web")
    uid = slow.uid("web")
    assumed = slow.assumed_on(uid)
    other = next(n for n in slow.nodes if n != assumed)
    status, _ = api(slow.cluster, "POST", f"/api/v1/namespaces/{ns}/pods/web/binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web", "namespace": ns},
        "target": {"apiVersion": "v1", "kind": "Node", "name": other}})
    assert status == 201  # someone else bound it first
    wait_for(lambda: slow.claims() == [], 15, "Unreserve after the refused binding", interval=0.1)
    slow.create("next")  # the scheduler carries on
    assert wait_for(lambda: node_of(slow.cluster, ns, "next"), 30, "the next pod bound") in slow.nodes
    assert node_of(slow.cluster, ns, "web") == other
    scheduled = wait_for(lambda: events(slow.cluster, ns, "Scheduled"), 15, "the next pod's event")
    assert [e["regarding"]["name"] for e in scheduled] == ["next"]
    assert events(slow.cluster, ns, "FailedScheduling") == []  # the refusal is handled, not reported
    assert "Traceback" not in slow.framework.output()


def test_a_binding_refused_409_because_the_pod_is_already_on_the_chosen_node_is_a_binding(slow: SlowBinding) -> None:
    # What the scheduler sees when an earlier send of its own binding landed (the client sends a binding again
    # after a 5xx with Retry-After): the API server refuses the second as "already assigned" to that node. The
    # pod is bound where it was assumed, so it keeps its room: no Unreserve, a Scheduled event, no failure.
    ns = slow.namespace
    slow.create("web")
    uid = slow.uid("web")
    assumed = slow.assumed_on(uid)
    status, _ = api(slow.cluster, "POST", f"/api/v1/namespaces/{ns}/pods/web/binding", {
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web", "namespace": ns},
        "target": {"apiVersion": "v1", "kind": "Node", "name": assumed}})
    assert status == 201
    scheduled = wait_for(lambda: events(slow.cluster, ns, "Scheduled"), 30, "web's Scheduled event")
    assert [(e["regarding"]["name"], e["note"]) for e in scheduled] == [
        ("web", f"Successfully assigned {ns}/web to {assumed}")]
    assert slow.claims() == [uid]  # Reserve's claim kept: the pod holds the node it is bound to
    assert node_of(slow.cluster, ns, "web") == assumed
    assert events(slow.cluster, ns, "FailedScheduling") == []
    assert "Traceback" not in slow.framework.output()


@pytest.mark.parametrize("recreate", [False, True], ids=["deleted", "deleted-and-created-again"])
def test_a_pod_deleted_during_its_binding_cycle_is_forgotten(slow: SlowBinding, recreate: bool) -> None:
    ns = slow.namespace
    slow.create("web")
    old = slow.uid("web")
    slow.assumed_on(old)
    slow.cluster.kubectl("delete", "pod", "web", "-n", ns, "--grace-period=0", "--force")
    if recreate:
        slow.create("web")  # the same name, a new pod: the old binding (uid precondition) must not bind it
    new = slow.uid("web") if recreate else ""
    if recreate:
        node = wait_for(lambda: node_of(slow.cluster, ns, "web"), 30, "the new pod bound")
        assert slow.claims() == [new]
        scheduled = wait_for(lambda: events(slow.cluster, ns, "Scheduled"), 15, "its Scheduled event")
        assert [(e["regarding"]["uid"], e["note"]) for e in scheduled] == [
            (new, f"Successfully assigned {ns}/web to {node}")]
    else:
        wait_for(lambda: slow.claims() == [], 15, "Unreserve of the deleted pod", interval=0.1)
        slow.create("next")
        wait_for(lambda: node_of(slow.cluster, ns, "next"), 30, "the next pod bound")
        assert [e["regarding"]["name"] for e in events(slow.cluster, ns, "Scheduled")] == ["next"]
    assert old not in slow.claims()
    assert "Traceback" not in slow.framework.output()


def test_a_node_deleted_while_a_pod_is_assumed_on_it_sends_the_pod_elsewhere(slow: SlowBinding) -> None:
    ns = slow.namespace
    slow.create("web")
    uid = slow.uid("web")
    doomed = slow.assumed_on(uid)
    slow.cluster.kubectl("delete", "node", doomed)
    survivor = next(n for n in slow.nodes if n != doomed)
    assert wait_for(lambda: node_of(slow.cluster, ns, "web"), 60, "the pod bound elsewhere") == survivor
    assert slow.assumed_on(uid) == survivor  # reserved again, on the node that is left
    scheduled = wait_for(lambda: events(slow.cluster, ns, "Scheduled"), 15, "the Scheduled event")
    assert [e["note"] for e in scheduled] == [f"Successfully assigned {ns}/web to {survivor}"]
    failed = events(slow.cluster, ns, "FailedScheduling")
    assert [e["regarding"]["name"] for e in failed] == ["web"]
    assert f'node "{doomed}" not found (deleted while binding)' in failed[0]["note"]


# ---- throttling ---------------------------------------------------------------------------------


def test_an_api_server_answering_429_slows_the_scheduler_down_and_no_binding_fails(
        kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path) -> None:
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    node = f"{kube_namespace[:40]}-n"
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(node_manifest(node, "100")))
    config = tmp_path / "scheduler.yaml"
    config.write_text(config_text())
    count = 60
    # Without API Priority and Fairness the in-flight limits answer 429 (Retry-After: 1) at once.
    with apiserver_flags(kube_cluster, "--enable-priority-and-fairness=false", "--max-requests-inflight=2",
                         "--max-mutating-requests-inflight=1"):
        before = apiserver_counter(kube_cluster, "apiserver_request_total", code="429")
        proc = FrameworkProcess(kubeconfig, config).start()
        try:
            manifests = [pod_manifest(f"p{i}", kube_namespace, PROFILE, cpu="100m") for i in range(count)]
            kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(manifests), timeout=300)

            def all_bound() -> bool:  # light: every request of the test takes one of the two slots too
                out = kube_cluster.kubectl("get", "pods", "-n", kube_namespace, "--field-selector",
                                           f"spec.nodeName={node}", "-o", "name").stdout
                return len(out.split()) == count

            try:
                wait_for(all_bound, 240, "every pod bound", interval=3)
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the framework said:\n{proc.output()[-4000:]}") from None
            throttled = apiserver_counter(kube_cluster, "apiserver_request_total", code="429") - before
            scheduled = events(kube_cluster, kube_namespace, "Scheduled")
            failed = events(kube_cluster, kube_namespace, "FailedScheduling")
        finally:
            proc.stop()
    assert throttled > 0
    # no binding failed: each 429 was waited out and sent again
    assert failed == [], ([e["note"] for e in failed], proc.output()[-4000:])
    # Events are written in the background and may still be under way: none twice.
    assert set(collections.Counter(e["regarding"]["name"] for e in scheduled).values()) <= {1}
    assert "Traceback" not in proc.output()
    kube_cluster.kubectl("delete", "node", node)


# The paced case's span has a floor the token bucket guarantees however loaded the machine is. The limiter
# off has no ceiling to assert on the wall clock (30 bindings took 2.2 s at a load average near 20): that it
# never waits is TokenBucket's unit test (test_kube_client.py); here qps -1 is taken and every pod bound
# and reported within the deadline.
@pytest.mark.parametrize(("qps", "burst", "at_least"), [
    pytest.param(10, 10, 1.9, id="qps-10-burst-10"),  # 30 bindings, 10 at once: >= 2 s of bindings
    pytest.param(-1, 0, 0.0, id="unlimited"),
])
def test_client_qps_and_burst_pace_the_bindings(kube_cluster: LocalCluster, kube_namespace: str, tmp_path: Path,
                                               qps: float, burst: int, at_least: float) -> None:
    kubeconfig = outrigger_kubeconfig(kube_cluster)
    node = f"{kube_namespace[:40]}-n"
    kube_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(node_manifest(node, "100")))
    config = tmp_path / "scheduler.yaml"
    config.write_text(config_text(qps=qps, burst=burst))
    proc = FrameworkProcess(kubeconfig, config).start()
    count = 30
    try:
        manifests = [pod_manifest(f"p{i}", kube_namespace, PROFILE, cpu="100m") for i in range(count)]
        kube_cluster.kubectl("create", "-f", "-", input=yaml.safe_dump_all(manifests))
        scheduled = wait_for(lambda: (lambda e: e if len(e) == count else None)(
            events(kube_cluster, kube_namespace, "Scheduled")), 60, "every pod scheduled", interval=0.5)
    finally:
        proc.stop()
        kube_cluster.kubectl("delete", "node", node)
    # Each Scheduled event is stamped when its binding has been answered.
    times = sorted(datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")).timestamp() for e in scheduled)
    assert len(times) == count and times[-1] - times[0] >= at_least
