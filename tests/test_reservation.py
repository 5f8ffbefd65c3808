"""Reservations: a Reservation is scheduled like a pod, holds its resources against other pods, is
consumed by an owner pod on its node (the Reservation plugin's transformer and score), and is released
when it expires or is deleted; all through the Scheduler API and the ``outrigger`` CLI."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from framework.cli import main
from framework.config import load_config
from framework.plugins import in_tree_registry
from framework.reservations import AVAILABLE, PENDING
from framework.scheduler import Scheduler
from framework.service import Server, start_server
from pluginhost.manifest import ManifestError, parse_objects
from pluginhost.model import CPU, Pod, Reservation

CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      enabled:
      - name: Reservation
        weight: 10
"""

NODES = """\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: n0, labels: {pool: a}},
   status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: {pool: b}},
   status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}}
"""


def reservation(name: str, pool: str, cpu: str = "3", ttl: str = "1h", allocate_once: bool = True,
                owners: str = "[{labelSelector: {matchLabels: {app: web}}}]") -> str:
    return f"""\
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: Reservation
metadata: {{name: {name}}}
spec:
  template:
    metadata: {{labels: {{reserved-for: web}}}}
    spec:
      nodeSelector: {{pool: {pool}}}
      containers:
      - name: c
        resources: {{requests: {{cpu: "{cpu}", memory: 1Gi}}}}
  owners: {owners}
  ttl: {ttl}
  allocateOnce: {"true" if allocate_once else "false"}
"""


def pod(name: str, cpu: str, labels: dict[str, str] | None = None, pool: str = "") -> str:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if pool:
        spec["nodeSelector"] = {"pool": pool}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
                       "spec": spec})


# ---------------------------------------------------------------------------------------------------
# The manifest


def test_reservation_manifest_is_parsed_with_koordinator_defaults() -> None:
    (res,) = parse_objects(reservation("r1", "a"), "r.yaml")
    assert isinstance(res, Reservation)
    assert (res.name, res.allocate_once, res.ttl_seconds, res.requests[CPU]) == ("r1", True, 3600.0, 3000)
    assert res.template.node_selector == {"pool": "a"}
    assert res.template.labels == {"reserved-for": "web"}
    assert res.template.uid == res.uid and res.template.namespace == ""
    assert [o.label_selector.match_labels for o in res.owners if o.label_selector] == [{"app": "web"}]
    expiring = parse_objects(reservation("r2", "a", ttl="1h30m", allocate_once=False), "r.yaml")[0]
    assert isinstance(expiring, Reservation)
    assert (expiring.ttl_seconds, expiring.allocate_once) == (5400.0, False)
    never = parse_objects(reservation("r3", "a", ttl='"0"'), "r.yaml")[0]
    assert isinstance(never, Reservation) and never.expires_at() is None


BAD = [
    ("no owners", reservation("r", "a", owners="[]"),
     "r.yaml: document 1 (Reservation default/r): spec.owners: required: at least one owner"),
    ("bad ttl", reservation("r", "a", ttl="soon"),
     'r.yaml: document 1 (Reservation default/r): spec.ttl: invalid duration "soon"'),
    ("bad apiVersion", reservation("r", "a").replace("scheduling.koordinator.sh/v1alpha1", "v1"),
     'r.yaml: document 1 (Reservation default/r): apiVersion: unsupported apiVersion "v1" for Reservation'),
    ("nodeName", reservation("r", "a").replace("      nodeSelector", "      nodeName: n0\n      nodeSelector"),
     "r.yaml: document 1 (Reservation default/r): spec.template.spec.nodeName: a reservation is placed by"),
    ("owner without anything", reservation("r", "a", owners="[{}]"),
     "r.yaml: document 1 (Reservation default/r): spec.owners[0]: an owner needs an object (a pod) or a labelSelector"),
]


@pytest.mark.parametrize(("name", "text", "message"), BAD, ids=[b[0] for b in BAD])
def test_bad_reservation_manifests_name_the_field(name: str, text: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse_objects(text, "r.yaml")
    assert str(err.value).startswith(message)


# ---------------------------------------------------------------------------------------------------
# A reusable reservation, in-process


def test_reusable_reservation_serves_owners_until_used_up_and_takes_back_a_deleted_owner() -> None:
    async def go() -> None:
        reg = in_tree_registry()
        s = Scheduler(load_config(CONFIG, reg.points()), reg, seed=0)
        await s.apply(parse_objects(NODES, "nodes.yaml"))
        task = asyncio.create_task(s.run())
        try:
            owners = "[{object: {name: web-0}}, {object: {name: web-1}}, {object: {name: web-2}}]"
            await s.apply(parse_objects(reservation("shared", "a", cpu="3", allocate_once=False, owners=owners), "r"))
            await _until(lambda: s.reservations.records["shared"].phase == AVAILABLE, "the reservation is placed")
            rec = s.reservations.records["shared"]
            for name in ("web-0", "web-1"):
                await s.apply(parse_objects(pod(name, "1500m", pool="a"), name))
                await _until(lambda n=name: _phase(s, n) == "Bound", f"{name} bound")
            # 4 CPUs: 3 reserved, both owners took 1.5 from the reservation, nothing else is counted.
            assert (rec.phase, rec.held[CPU], rec.allocated[CPU]) == (AVAILABLE, 0, 3000)
            assert sorted(k for k, _ in rec.owners.values()) == ["default/web-0", "default/web-1"]
            assert s.cache.snapshot().requested_of(CPU).tolist() == [3000, 0]
            # A third owner finds nothing left to take on n0 and does not fit there (1 CPU free).
            await s.apply(parse_objects(pod("web-2", "1500m", pool="a"), "web-2"))
            await _until(lambda: _phase(s, "web-2") == "Unschedulable", "web-2 unschedulable")
            # Deleting an owner gives its share back to the reservation (not to everyone)...
            s.delete_pod("default", "web-0")
            assert (rec.held[CPU], rec.allocated[CPU]) == (1500, 1500)
            # ...so the third owner consumes it.
            await _until(lambda: _phase(s, "web-2") == "Bound", "web-2 bound")
            assert (rec.held[CPU], rec.allocated[CPU]) == (0, 3000)
            assert sorted(k for k, _ in rec.owners.values()) == ["default/web-1", "default/web-2"]
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)

    asyncio.run(go())


def _phase(s: Scheduler, name: str) -> str:
    rec = s.get_pod("default", name)
    return "" if rec is None else rec.phase


async def _until(cond: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout}s")
        await asyncio.sleep(0.01)


# ---------------------------------------------------------------------------------------------------
# End to end: the framework service on 127.0.0.1 and the CLI


class ServerThread:
    """The framework service (in-tree plugins) on its own event loop in a thread."""

    def __init__(self, config: str) -> None:
        self.config = config
        self.loop = asyncio.new_event_loop()
        self.server: Server | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        reg = in_tree_registry()
        cfg = load_config(self.config, reg.points())
        self.server = asyncio.run_coroutine_threadsafe(start_server(cfg, reg, seed=0), self.loop).result(30)
        return self

    def call(self, fn: Callable[[Scheduler], Any]) -> Any:
        """Run ``fn(scheduler)`` on the server's loop."""
        assert self.server is not None
        scheduler = self.server.scheduler

        async def run() -> Any:
            return fn(scheduler)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            asyncio.run_coroutine_threadsafe(self.server.stop(1.0), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture
def server() -> Iterator[ServerThread]:
    with ServerThread(CONFIG) as srv:
        srv.call(lambda s: setattr(s, "reservation_check_seconds", 0.05))
        yield srv


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()[1:]]


def wide(row: list[str]) -> list[str]:
    """Namespace, name, status and node of a ``get pods -A -o wide`` row."""
    return [row[0], row[1], row[3], row[7]]


def usage(addr: list[str]) -> list[list[str]]:
    """Each node's status, pods and requested/allocatable cpu and memory, from the Scheduler API."""
    from clients import SchedulerClient
    from pluginhost.quantity import format_quantity

    def share(n: Any, r: str) -> str:
        return f"{format_quantity(r, n.requested[r])}/{format_quantity(r, n.allocatable[r])}"

    with SchedulerClient(addr[1]) as c:
        return [[n.name, "SchedulingDisabled" if n.unschedulable else "Ready", str(n.pods), share(n, "cpu"),
                 share(n, "memory")] for n in c.list_nodes()]


def wait_cli(capsys: pytest.CaptureFixture[str], args: list[str], cond: Callable[[str], bool], what: str) -> str:
    deadline = time.monotonic() + 30
    while True:
        out = cli(capsys, *args)
        if cond(out):
            return out
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within 30s; last output:\n{out}")
        time.sleep(0.05)


def test_reservation_holds_is_consumed_by_its_owner_and_expires_through_the_cli(
    server: ServerThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert server.server is not None
    addr = ["--server", server.server.address]

    def write(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text)
        return str(path)

    assert cli(capsys, "apply", "-f", write("nodes.yaml", NODES), *addr).split("\n")[:2] == [
        "node/n0 created", "node/n1 created"]
    assert cli(capsys, "apply", "-f", write("r1.yaml", reservation("r1", "a")), *addr) == "reservation/r1 created\n"
    # Scheduled like a pod: placed on n0, holding 3 CPUs there.
    out = wait_cli(capsys, ["get", "reservations", *addr], lambda o: "Available" in o, "r1 available")
    assert table(out) == [["r1", "Available", "n0", "cpu=3,memory=1Gi", "-", "-", _expiry(server, "r1")]]
    assert usage(addr) == [["n0", "Ready", "1", "3/4", "1Gi/8Gi"],
                                                         ["n1", "Ready", "0", "0/4", "0/8Gi"]]
    # Reserve pods are not pods to the user.
    assert cli(capsys, "get", "pods", "-A", *addr) == ""  # (stderr: No resources found.)
    # Another pod that must go to n0 does not fit: the reservation holds 3 of its 4 CPUs.
    cli(capsys, "apply", "-f", write("other.yaml", pod("other", "2", pool="a")), *addr)
    wait_cli(capsys, ["get", "pods", *addr], lambda o: "Unschedulable" in o, "other unschedulable")
    out = cli(capsys, "describe", "pod", "other", *addr)
    assert "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node affinity/selector." in out
    # The owner (app=web, no nodeSelector) prefers its reservation's node and fits there because the
    # reserved CPUs are free to it; it takes the reservation, whose unused CPU goes back to everyone,
    # so the other pod now fits next to it.
    cli(capsys, "apply", "-f", write("web.yaml", pod("web-0", "2", labels={"app": "web"})), *addr)
    out = wait_cli(capsys, ["get", "pods", "-A", "-o", "wide", *addr], lambda o: o.count("Bound") == 2,
                   "web-0 and other bound")
    assert [wide(row) for row in table(out)] == [["default", "other", "Bound", "n0"],
                                                 ["default", "web-0", "Bound", "n0"]]
    out = cli(capsys, "get", "reservations", *addr)
    assert table(out) == [["r1", "Succeeded", "n0", "cpu=3,memory=1Gi", "cpu=3,memory=1Gi", "default/web-0",
                           _expiry(server, "r1")]]
    assert usage(addr)[0] == ["n0", "Ready", "2", "4/4", "2Gi/8Gi"]
    # A second reservation on n1 blocks a 3-CPU pod there until it expires (its TTL is shortened by
    # applying it again: owners, TTL and allocateOnce may change, the template may not).
    cli(capsys, "apply", "-f", write("r2.yaml", reservation("r2", "b")), *addr)
    wait_cli(capsys, ["get", "reservations", *addr], lambda o: o.count("Available") == 1, "r2 available")
    cli(capsys, "apply", "-f", write("big.yaml", pod("big", "3", pool="b")), *addr)
    wait_cli(capsys, ["get", "pods", *addr], lambda o: "Unschedulable" in o, "big unschedulable")
    changed = reservation("r2", "b", cpu="2")
    proc_err = _apply_error(capsys, write("r2-bad.yaml", changed), addr)
    assert proc_err == "error: Reservation r2: spec.template is immutable (delete the reservation and apply it again)\n"
    assert cli(capsys, "apply", "-f", write("r2-ttl.yaml", reservation("r2", "b", ttl="1s")), *addr) == (
        "reservation/r2 configured\n")
    out = wait_cli(capsys, ["get", "reservations", *addr], lambda o: "Expired" in o, "r2 expired")
    assert table(out)[1][:3] == ["r2", "Expired", "n1"]
    assert out.rstrip().endswith("reservation r2 expired")
    # Released: the pending pod got the cluster event and binds where the reservation was.
    out = wait_cli(capsys, ["get", "pods", "-A", "-o", "wide", *addr], lambda o: o.count("Bound") == 3, "big bound")
    assert wide(table(out)[0]) == ["default", "big", "Bound", "n1"]
    # The asyncio client lists the same; deleting a reservation removes it.
    from clients.aio import AsyncSchedulerClient

    async def listed() -> list[tuple[str, str, str]]:
        async with AsyncSchedulerClient(addr[1]) as c:
            return [(r.name, r.phase, r.node_name) for r in await c.list_reservations()]

    assert asyncio.run(listed()) == [("r1", "Succeeded", "n0"), ("r2", "Expired", "n1")]
    assert cli(capsys, "delete", "reservation", "r2", *addr) == "reservation/r2 deleted\n"
    assert [row[0] for row in table(cli(capsys, "get", "reservations", *addr))] == ["r1"]
    kinds = server.call(lambda s: sorted({(e.kind, e.type) for e in s.recent_events() if e.kind == "Reservation"}))
    assert kinds == [("Reservation", "Applied"), ("Reservation", "Bound"), ("Reservation", "Deleted")]


def _expiry(server: ServerThread, name: str) -> str:
    at = server.call(lambda s: s.reservations.records[name].reservation.expires_at())
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _apply_error(capsys: pytest.CaptureFixture[str], path: str, addr: list[str]) -> str:
    capsys.readouterr()
    assert main(["apply", "-f", path, *addr]) == 1
    return capsys.readouterr().err


def test_a_pending_reservation_reports_why(server: ServerThread, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert server.server is not None
    addr = ["--server", server.server.address]
    path = tmp_path / "r.yaml"
    path.write_text(NODES + "---\n" + reservation("huge", "a", cpu="64"))
    cli(capsys, "apply", "-f", str(path), *addr)
    out = wait_cli(capsys, ["get", "reservations", "-o", "json", *addr], lambda o: "Insufficient cpu" in o,
                   "huge unschedulable")
    (got,) = json.loads(out)
    assert (got["name"], got["phase"]) == ("huge", PENDING)
    assert got["lastStatus"]["reasons"] == ["0/2 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match "
                                            "Pod's node affinity/selector. preemption: "
                                            "0/2 nodes are available: 2 Preemption is not helpful for "
                                            "scheduling."]


# ---------------------------------------------------------------------------------------------------
# Preemption and traces


def test_a_preempted_reserve_pod_fails_its_reservation() -> None:
    async def go() -> None:
        reg = in_tree_registry()
        s = Scheduler(load_config(CONFIG, reg.points()), reg, seed=0)
        await s.apply(parse_objects(NODES, "nodes.yaml"))
        task = asyncio.create_task(s.run())
        try:
            await s.apply(parse_objects(reservation("low", "a"), "r"))
            await _until(lambda: s.reservations.records["low"].phase == AVAILABLE, "the reservation is placed")
            vip = json.loads(pod("vip", "3", pool="a"))
            vip["spec"]["priority"] = 1000
            await s.apply(parse_objects(json.dumps(vip), "vip"))
            await _until(lambda: _phase(s, "vip") == "Bound", "vip bound")
            rec = s.reservations.records["low"]
            assert (rec.phase, rec.held) == ("Failed", {})
            assert rec.last_status is not None and rec.last_status.reasons == (
                "reservation low's reserve pod was preempted by default/vip on node n0",)
            # Nothing of it is left in the cache, and an owner no longer sees anything reserved.
            assert [p.name for p in s.cache.snapshot().pods[0]] == ["vip"]
            assert s.reservations.matching(parse_objects(pod("web-9", "1", {"app": "web"}), "w")[0]) == []
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)

    asyncio.run(go())


def test_reservation_use_is_visible_on_the_current_span() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from framework.plugins.reservation import Reservation as ReservationPlugin
    from pluginhost.plugin import CycleState

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")

    async def go() -> None:
        reg = in_tree_registry()
        s = Scheduler(load_config(CONFIG, reg.points()), reg, seed=0)
        await s.apply(parse_objects(NODES, "nodes.yaml"))
        task = asyncio.create_task(s.run())
        try:
            await s.apply(parse_objects(reservation("r1", "a"), "r"))
            await _until(lambda: s.reservations.records["r1"].phase == AVAILABLE, "the reservation is placed")
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
        owner = parse_objects(pod("web-0", "2", {"app": "web"}), "w")[0]
        assert isinstance(owner, Pod)
        plugin = ReservationPlugin({}, s.handle)
        state = CycleState("c1", s.cache.snapshot())
        with tracer.start_as_current_span("cycle"):
            changes, status = await plugin.before_filter(state, owner, s.cache.snapshot())
            assert status.ok and [(c.node, dict(c.requested)) for c in changes or []] == [
                ("n0", {"cpu": -3000, "memory": -(1 << 30), "pods": -1})]
            assert (await plugin.reserve(state, owner, "n0")).ok

    asyncio.run(go())
    spans = {sp.name: dict(sp.attributes or {}) for sp in exporter.get_finished_spans()}
    assert spans["cycle"] == {
        "outrigger.reservation.matched": ("r1",), "outrigger.reservation.name": "r1",
        "outrigger.reservation.node": "n0", "outrigger.reservation.phase": "Available",
        "outrigger.reservation.owner": "default/web-0",
        "outrigger.reservation.allocated": f"cpu=3000,memory={1 << 30}",
    }
