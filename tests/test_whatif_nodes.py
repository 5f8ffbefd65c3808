"""What-if for autoscalers: ``explain`` with hypothetical nodes (a template and a count) answers which
pending pods would be scheduled on them, running the real Filter plugins (a remote one in a plugin host
process on 127.0.0.1 included), and the answer matches the same cycles run for real once the nodes
exist."""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from koord_plugins import ZONE, ZONE_LABEL, ZoneOnly
from test_remote_harness import HostProcess, endpoint

from framework.cli import main
from framework.config import load_config
from framework.plugins import in_tree_registry
from framework.scheduler import Scheduler
from framework.service import Server, start_server, start_service

MODES = ["inprocess", "remote"]
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
      - name: ZoneOnly
"""


def node(name: str, cpu: str, zone: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {ZONE: zone, "kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def pod(name: str, cpu: str, zone: str = "") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {ZONE_LABEL: zone} if zone else {}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}


def doc(*items: dict[str, Any]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": list(items)})


TEMPLATE = node("pool-b", "4", "z2")
PENDING = [pod("a", "1500m", "z2"), pod("b", "1500m", "z2"), pod("c", "1500m", "z2"),  # two 4-CPU nodes hold them
           pod("d", "100m", "z9"),  # wrong zone: the (remote) ZoneOnly filter rejects it everywhere
           pod("e", "6")]  # larger than any node


class ServerThread:
    """The framework service on its own loop in a thread: in-tree ZoneOnly, or a remote one at ``remote``."""

    def __init__(self, remote: str | None) -> None:
        self.remote = remote
        self.loop = asyncio.new_event_loop()
        self.server: Server | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> ServerThread:
        self._thread.start()
        if self.remote is None:
            reg = in_tree_registry()
            reg.register_class(ZoneOnly)
            start = start_server(load_config(CONFIG, reg.points()), reg, seed=0)
        else:
            start = start_service(lambda r: load_config(CONFIG, r.points()), [endpoint("koord", self.remote)], seed=0)
        self.server = asyncio.run_coroutine_threadsafe(start, self.loop).result(60)
        return self

    def call(self, fn: Callable[[Scheduler], Any]) -> Any:
        assert self.server is not None
        s = self.server.scheduler

        async def run() -> Any:
            return fn(s)

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(30)

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            asyncio.run_coroutine_threadsafe(self.server.stop(1.0), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def host() -> Iterator[str]:
    with HostProcess("koord_plugins:ZoneOnly") as proc:
        yield proc.address


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def settled(s: Scheduler, names: list[str]) -> bool:
    recs = [s.get_pod("default", n) for n in names]
    return all(r is not None and r.phase in ("Bound", "Unschedulable") and (r.phase == "Bound" or r.last_status)
               for r in recs) and not s.leaks()["binding_cycles"]


def wait(server: ServerThread, cond: Callable[[Scheduler], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not server.call(cond):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within 30s")
        time.sleep(0.02)


@pytest.mark.parametrize("mode", MODES)
def test_what_if_nodes_admit_the_pods_a_real_run_schedules_on_them(
    mode: str, request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    remote = request.getfixturevalue("host") if mode == "remote" else None
    names = [p["metadata"]["name"] for p in PENDING]
    with ServerThread(remote) as server:
        assert server.server is not None
        addr = ["--server", server.server.address]
        cluster = tmp_path / "cluster.json"
        cluster.write_text(doc(node("n0", "1", "z1"), *PENDING))
        assert run_cli(capsys, "apply", "-f", str(cluster), *addr)[0] == 0
        wait(server, lambda s: settled(s, names), "every pod tried once")
        assert server.call(lambda s: {s.get_pod("default", n).phase for n in names}) == {"Unschedulable"}
        template = tmp_path / "template.json"
        template.write_text(json.dumps(TEMPLATE))

        code, out, err = run_cli(capsys, "explain", *addr, "--what-if-nodes", str(template), "--count", "2",
                                 "-o", "json")
        assert code == 0, err
        got = json.loads(out)
        assert got["whatIf"] == {"template": "pool-b", "count": 2, "nodes": ["pool-b-1", "pool-b-2"]}
        assert sorted(got["admitted"]) == ["default/a", "default/b", "default/c"]
        by_pod = {p["pod"]: p for p in got["pods"]}
        assert sorted(by_pod) == [f"default/{n}" for n in names]
        assert {k: (p["fits"], p["newNode"]) for k, p in by_pod.items()} == {
            "default/a": (True, True), "default/b": (True, True), "default/c": (True, True),
            "default/d": (False, False), "default/e": (False, False)}
        assert by_pod["default/d"]["reasons"] == ["0/3 nodes are available: 3 node(s) not in zone z9."]
        assert by_pod["default/e"]["reasons"][0].startswith("0/3 nodes are available: 3 Insufficient cpu.")
        what_if_load = sorted(collections.Counter(p["node"] for p in got["pods"] if p["newNode"]).values())
        assert what_if_load == [1, 2]
        # Nothing was added or reserved by the question.
        assert server.call(lambda s: (sorted(s.nodes), len(s.cache.snapshot()), s.leaks())) == (
            ["n0"], 1, {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0})

        # The same nodes for real.
        real = tmp_path / "real.json"
        real.write_text(doc(node("pool-b-1", "4", "z2"), node("pool-b-2", "4", "z2")))
        assert run_cli(capsys, "apply", "-f", str(real), *addr)[0] == 0
        wait(server, lambda s: sum(s.get_pod("default", n).phase == "Bound" for n in names) == 3, "three bound")
        wait(server, lambda s: settled(s, names), "every pod settled")
        bound = server.call(lambda s: {f"default/{n}": s.get_pod("default", n).pod.node_name for n in names
                                       if s.get_pod("default", n).phase == "Bound"})
        assert sorted(bound) == sorted(got["admitted"])
        assert set(bound.values()) <= {"pool-b-1", "pool-b-2"}
        assert sorted(collections.Counter(bound.values()).values()) == what_if_load


def test_what_if_for_one_pod_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ServerThread(None) as server:
        assert server.server is not None
        addr = ["--server", server.server.address]
        cluster = tmp_path / "cluster.json"
        cluster.write_text(doc(node("n0", "1", "z1"), node("clash-1", "1", "z1")))
        assert run_cli(capsys, "apply", "-f", str(cluster), *addr)[0] == 0
        template = tmp_path / "template.json"
        template.write_text(json.dumps(TEMPLATE))
        one = tmp_path / "pod.json"
        one.write_text(json.dumps(pod("solo", "3", "z2")))
        code, out, err = run_cli(capsys, "explain", *addr, "--what-if-nodes", str(template), "--pod", str(one),
                                 "-o", "json")
        assert code == 0, err
        got = json.loads(out)
        assert got["admitted"] == ["default/solo"]
        assert got["pods"] == [{"pod": "default/solo", "fits": True, "node": "pool-b-1", "newNode": True,
                                "reasons": []}]
        # The asyncio client asks the same question and gets the same answer.
        from clients.aio import AsyncSchedulerClient

        async def ask() -> dict[str, Any]:
            async with AsyncSchedulerClient(addr[1]) as c:
                return await c.what_if(json.dumps(TEMPLATE), 1, pod=json.dumps(pod("solo", "3", "z2")))

        assert asyncio.run(ask()) == got
        # Nothing pending: nothing to admit.
        code, out, err = run_cli(capsys, "explain", *addr, "--what-if-nodes", str(template), "--count", "2",
                                 "-o", "json")
        assert (code, json.loads(out)["pods"]) == (0, [])
        clash = tmp_path / "clash.json"
        clash.write_text(json.dumps(node("clash", "4", "z2")))
        code, out, err = run_cli(capsys, "explain", *addr, "--what-if-nodes", str(clash), "--count", "1")
        assert (code, err) == (1, "error: what-if node 'clash-1' has the name of a node in the cluster; "
                                  "rename the template\n")
        code, out, err = run_cli(capsys, "explain", *addr, "--what-if-nodes", str(one), "--count", "1")
        assert (code, err) == (1, f"error: {one}: the what-if template needs exactly one Node, found 0\n")
