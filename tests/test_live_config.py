"""Live configuration (framework.liveconfig): ``serve`` applies a changed --config / --plugins file
without a restart, or refuses it and keeps scheduling with the generation serving.

- the decision, table-driven: which start-up fields need a restart, the summary of an applied
  generation, and a service's answer to each kind of change (applied with its summary line, refused
  with its exact reason);
- the queue follows: pods a removed plugin rejected, PreEnqueue gates of a removed plugin, a profile
  added and one removed;
- ``outrigger serve`` on the embedded store while pods are being scheduled, the file replaced by
  rename as a ConfigMap volume does: a weight changed (new placements follow it, as the service's own
  explain says), a plugin removed, an invalid change and a needs-a-restart field refused; same pid,
  every pod bound once;
- the same on the suite's kube-apiserver with a real remote plugin host: tests/test_live_config_kube.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from clients import AsyncSchedulerClient, EventType, SchedulerClient
from framework.config import load_config
from framework.liveconfig import LiveConfig, WatchedFiles, queue_sort_problem, restart_problems, summary
from framework.profiles import build_registry, load_scheduler_config, unavailable_plugins
from framework.service import Server, start_service
from pluginhost.plugin import CycleState, PermitPlugin, PostBindPlugin
from pluginhost.status import Code, Status

ROOT = Path(__file__).resolve().parent.parent

HEAD = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
"""
# Two score plugins that disagree: NodeAffinity prefers node "a" (the pods ask for zone=a), and
# TaintToleration prefers "b" (a carries a PreferNoSchedule taint). The weights decide.
WEIGHTED = HEAD + """\
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled: [{{name: "*"}}]
      enabled: [{{name: NodeAffinity, weight: {affinity}}}, {{name: TaintToleration, weight: {taints}}}]
"""


# TaintToleration removed from the profile: not scoring, not filtering.
UNTAINTED = WEIGHTED.replace(", {{name: TaintToleration, weight: {taints}}}", "").format(affinity=5) + """\
    multiPoint:
      disabled: [{name: TaintToleration}]
"""


def weighted(affinity: int, taints: int, extra: str = "") -> str:
    return WEIGHTED.format(affinity=affinity, taints=taints) + extra


def config(text: str) -> Any:
    registry = build_registry()
    return load_config(text, registry.points(), "sched.yaml", unavailable=unavailable_plugins(registry))


# ---- the decision, without a service --------------------------------------------------------------


@pytest.mark.parametrize(("old", "new", "want"), [
    ({}, {}, []),
    ({"profiles": []}, {"profiles": [{"schedulerName": "x"}]}, []),
    ({}, {"leaderElection": {"leaderElect": False}}, ["leaderElection needs a restart"]),
    ({"clientConnection": {"qps": 50}}, {"clientConnection": {"qps": 100}}, ["clientConnection needs a restart"]),
    ({"parallelism": 16}, {}, ["parallelism needs a restart"]),
    ({}, {"enableProfiling": True, "delayCacheUntilActive": True},
     ["enableProfiling needs a restart", "delayCacheUntilActive needs a restart"]),
    ({"leaderElection": {"leaderElect": False}}, {"leaderElection": {"leaderElect": False}}, []),
])
def test_start_up_fields_need_a_restart(old: dict[str, Any], new: dict[str, Any], want: list[str]) -> None:
    assert restart_problems(old, new) == want


@pytest.mark.parametrize(("new", "want"), [
    (weighted(5, 1), "no change in meaning"),
    (weighted(5, 1) + "# a comment\n", "no change in meaning"),
    (weighted(1, 5), "profile default-scheduler: weight of NodeAffinity 5 -> 1, weight of TaintToleration 1 -> 5"),
    (WEIGHTED.replace(", {{name: TaintToleration, weight: {taints}}}", "").format(affinity=5),
     "profile default-scheduler: TaintToleration no longer at score"),
    (UNTAINTED, "profile default-scheduler: plugin TaintToleration removed"),
    (WEIGHTED.replace(", {{name: TaintToleration, weight: {taints}}}", "").format(affinity=5)
     + "    multiPoint:\n      enabled: [{name: Reservation}]\n",
     "profile default-scheduler: plugin Reservation added (filter, reserve, postBind), TaintToleration no "
     "longer at score"),
    (weighted(5, 1, "  pluginConfig:\n  - name: NodeAffinity\n    args: {addedAffinity: {}}\n"),
     "profile default-scheduler: args of NodeAffinity changed"),
    (weighted(5, 1, "- schedulerName: batch\n"), "profile batch added"),
    (weighted(5, 1).replace("profiles:", "podMaxBackoffSeconds: 20\nprofiles:"), "podMaxBackoffSeconds 10.0 -> 20.0"),
    (weighted(5, 1, "  percentageOfNodesToScore: 30\n"),
     "profile default-scheduler: percentageOfNodesToScore None -> 30"),
])
def test_summary_names_what_changed(new: str, want: str) -> None:
    assert summary(config(weighted(5, 1)), config(new)) == want


def test_summary_names_endpoints_and_removed_profiles() -> None:
    from framework.remote import EndpointConfig

    two = config(weighted(5, 1, "- schedulerName: batch\n"))
    eps = [EndpointConfig("gang", ("127.0.0.1:1",)), EndpointConfig("labels", ("127.0.0.1:2",))]
    moved = [EndpointConfig("gang", ("127.0.0.1:3",)), EndpointConfig("extra", ("127.0.0.1:4",))]
    assert summary(two, config(weighted(5, 1)), eps, moved) == (
        "profile batch removed; endpoints: extra added, labels removed, gang changed")


def test_another_queue_sort_needs_a_restart() -> None:
    sorted_by = HEAD + "profiles:\n- plugins:\n    queueSort:\n      disabled: [{name: '*'}]\n" \
        "      enabled: [{name: PrioritySort}]\n"
    assert queue_sort_problem(config(weighted(5, 1)), config(sorted_by)) is None
    assert queue_sort_problem(config(weighted(5, 1)), config(weighted(1, 5))) is None


# ---- a service's answer to each change ----------------------------------------------------------


def nodes_and_pods(n: int, prefix: str = "p", **meta: Any) -> list[dict[str, Any]]:
    """Nodes a (zone=a, a PreferNoSchedule taint) and b (zone=b), and ``n`` pods preferring zone a."""
    out: list[dict[str, Any]] = []
    if not meta.get("pods_only"):
        for name in ("a", "b"):
            taints = [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}] if name == "a" else []
            out.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"zone": name}},
                        "spec": {"taints": taints},
                        "status": {"allocatable": {"cpu": "100", "memory": "100Gi", "pods": "1000"}}})
    out += [pod(f"{prefix}{i}") for i in range(n)]
    return out


def pod(name: str, scheduler: str = "default-scheduler", **spec: Any) -> dict[str, Any]:
    prefer = {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"schedulerName": scheduler,
                     "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [prefer]}},
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}],
                     **spec}}


def run_live(tmp_path: Path, start: str, test: Callable[[Server, LiveConfig, Path], Awaitable[None]]) -> None:
    """``test(server, live, config_path)`` against a service started from ``start`` (not polling: the
    test applies the file when it has written it)."""
    path = tmp_path / "sched.yaml"
    path.write_text(start)

    async def main() -> None:
        srv = await start_service(lambda registry: load_scheduler_config(path, registry), (), "127.0.0.1:0")
        live = LiveConfig(srv, WatchedFiles(str(path)), srv.address)
        try:
            await test(srv, live, path)
        finally:
            await live.stop()
            await srv.stop(0.5)
            await live.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def replace(path: Path, text: str) -> None:
    """Write ``text`` to a new file and rename it over ``path`` (what a ConfigMap volume's swap amounts to)."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    os.replace(tmp, path)


CHANGES = [
    ("weights", weighted(1, 5), True,
     "applied configuration generation 2 (from {file}): profile default-scheduler: weight of NodeAffinity 5 -> 1, "
     "weight of TaintToleration 1 -> 5"),
    ("comment only", weighted(5, 1) + "# reviewed\n", False, ""),
    ("unknown plugin", weighted(5, 1).replace("TaintToleration", "TaintTolerations"), False,
     '{file}: profiles[0].plugins.score.enabled[1]: score plugin "TaintTolerations" does not exist'),
    ("leader election", weighted(1, 5, "").replace("profiles:", "leaderElection: {leaderElect: false}\nprofiles:"),
     False, "{file}: leaderElection needs a restart"),
    ("two restart fields", weighted(5, 1).replace("profiles:", "parallelism: 8\nclientConnection: {qps: 5}\nprofiles:"),
     False, "{file}: clientConnection needs a restart; parallelism needs a restart"),
    ("queue sort", weighted(5, 1, "    queueSort:\n      disabled: [{name: '*'}]\n      enabled: [{name: Nope}]\n"),
     False, '{file}: profiles[0].plugins.queueSort.enabled[0]: queueSort plugin "Nope" does not exist'),
    ("bad args", weighted(5, 1, "  pluginConfig:\n  - name: NodeAffinity\n    args: {hardPodAffinityWeight: 2}\n"),
     False, '{file}: profiles[0] (default-scheduler): pluginConfig[0] (NodeAffinity): args: unknown field '
     '"hardPodAffinityWeight"'),
    ("not yaml", "profiles: [", False,
     "{file}: line 2, column 1: invalid YAML: while parsing a flow node, did not find expected node content"),
    ("another kind", "apiVersion: v1\nkind: ConfigMap\n", False,
     '{file}: apiVersion: Unsupported value: "v1": supported values: "kubescheduler.config.k8s.io/v1"'),
]


@pytest.mark.parametrize(("name", "text", "applied", "message"), CHANGES, ids=[c[0] for c in CHANGES])
def test_a_change_is_applied_or_refused_with_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        name: str, text: str, applied: bool, message: str) -> None:
    async def body(srv: Server, live: LiveConfig, path: Path) -> None:
        before = srv.scheduler.config
        started = dict(live.hashes)
        replace(path, text)
        assert await live.apply() is applied
        want = message.format(file=path)
        if applied:
            assert live.generation == 2 and live.applied == 1 and live.last_refused is None
            assert capsys.readouterr().out.splitlines() == [want]
            assert srv.scheduler.config.profiles[0].score_weights == {"NodeAffinity": 1, "TaintToleration": 5}
        else:
            assert live.generation == 1 and srv.scheduler.config is before
            if message:
                assert live.refused == 1 and live.last_refused is not None
                assert live.last_refused["reason"] == want
                assert live.hashes == started  # the generation serving keeps its files' hashes
            else:
                assert live.unchanged == 1 and live.last_refused is None
        assert live.status()["generation"] == live.generation

    run_live(tmp_path, weighted(5, 1), body)


def configmap_volume(root: Path, name: str, text: str, version: int) -> None:
    """What the kubelet does to a ConfigMap volume: the files in a new timestamped directory, then the
    ``..data`` symlink swapped to it by rename; ``name`` itself is a symlink into ``..data``."""
    target = root / f"..2026_11_28_{version}"
    target.mkdir()
    (target / name).write_text(text)
    staged = root / "..data_tmp"
    staged.symlink_to(target.name)
    os.replace(staged, root / "..data")
    if not (root / name).is_symlink():
        (root / name).symlink_to(f"..data/{name}")


def test_the_watcher_sees_a_configmap_volume_swap_and_an_edit_in_place(tmp_path: Path) -> None:
    volume = tmp_path / "volume"
    volume.mkdir()
    configmap_volume(volume, "sched.yaml", weighted(5, 1), 1)

    async def main() -> None:
        path = volume / "sched.yaml"
        srv = await start_service(lambda registry: load_scheduler_config(path, registry), (), "127.0.0.1:0")
        live = LiveConfig(srv, WatchedFiles(str(path), interval=0.05), srv.address)
        live.start()

        async def generation(n: int) -> None:
            for _ in range(200):
                if live.generation == n:
                    return
                await asyncio.sleep(0.02)
            raise AssertionError(f"generation {live.generation}, not {n}: {live.last_refused}")

        try:
            configmap_volume(volume, "sched.yaml", weighted(1, 5), 2)
            await generation(2)
            assert srv.scheduler.config.profiles[0].score_weights == {"NodeAffinity": 1, "TaintToleration": 5}
            with open(volume / "..data" / "sched.yaml", "a") as fh:  # in place, through the links
                fh.write("  percentageOfNodesToScore: 40\n")
            await generation(3)
            assert srv.scheduler.config.profiles[0].percentage_of_nodes_to_score == 40
            (volume / "..data" / "sched.yaml").touch()  # the same bytes: nothing to apply
            await asyncio.sleep(0.3)
            assert (live.generation, live.applied, live.refused, live.unchanged) == (3, 2, 0, 0)
        finally:
            await live.stop()
            await srv.stop(0.5)
            await live.close()

    asyncio.run(asyncio.wait_for(main(), 60))


def remote_plugins(*endpoints: str) -> str:
    return "apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n" + "".join(endpoints)


def test_a_refused_change_leaves_the_serving_endpoints_working(tmp_path: Path) -> None:
    from test_remote_harness import HostProcess

    from pluginhost.examples.nodelabels import REQUIRE

    with_labels = weighted(5, 1, "    multiPoint:\n      enabled: [{name: NodeLabels}]\n")
    cfg, plugins = tmp_path / "sched.yaml", tmp_path / "plugins.yaml"
    cfg.write_text(with_labels)

    async def main(address: str) -> None:
        labels = f"- name: labels\n  address: {address}\n"
        plugins.write_text(remote_plugins(labels))
        from framework.remote import load_remote_plugins

        srv = await start_service(lambda registry: load_scheduler_config(cfg, registry),
                                  load_remote_plugins(plugins), "127.0.0.1:0")
        live = LiveConfig(srv, WatchedFiles(str(cfg), str(plugins)), srv.address)
        try:
            async with AsyncSchedulerClient(srv.address, timeout=5) as client:
                await client.apply(nodes_and_pods(0))

                async def on_b(name: str) -> None:
                    # NodeLabels, on the host, must filter for the pod to leave the preferred node a.
                    p = pod(name)
                    p["metadata"]["annotations"] = {REQUIRE: "zone=b"}
                    await client.apply([p])
                    states = await phases(client, {name: "Bound"})
                    assert states[name].node_name == "b"

                await on_b("first")
                changes = [
                    (remote_plugins(labels, "- name: gone\n  address: 127.0.0.1:1\n  connectTimeout: 1s\n"),
                     with_labels, f"{plugins}: plugin host 'gone' at 127.0.0.1:1 is unreachable after 1s"),
                    (remote_plugins(labels.replace("\n", "\n  failurePolicy: Ignore\n", 1)),
                     with_labels.replace("NodeAffinity", "NodeAffinities"), 'score plugin "NodeAffinities"'),
                ]
                for i, (doc, text, reason) in enumerate(changes):
                    replace(plugins, doc)
                    replace(cfg, text)
                    assert not await live.apply()
                    assert live.last_refused is not None and reason in live.last_refused["reason"], live.last_refused
                    await on_b(f"after{i}")
                replace(plugins, remote_plugins(labels) + "# reviewed\n")
                replace(cfg, with_labels)
                assert not await live.apply() and live.unchanged == 1
                await on_b("unchanged")
                assert (live.generation, live.refused) == (1, 2)
        finally:
            await live.stop()
            await srv.stop(0.5)
            await live.close()

    with HostProcess("pluginhost.examples.nodelabels:NodeLabels") as host:
        asyncio.run(asyncio.wait_for(main(host.address), 90))


# ---- the queue follows --------------------------------------------------------------------------

TWO_PROFILES = HEAD + """\
profiles:
- schedulerName: default-scheduler
- schedulerName: batch
"""
NO_TAINTS_NO_GATES = HEAD + """\
profiles:
- schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled: [{name: TaintToleration}, {name: SchedulingGates}]
"""


async def phases(client: AsyncSchedulerClient, want: dict[str, str], tries: int = 300) -> dict[str, Any]:
    """Poll (bounded) until the named pods are in the phases wanted; the pods' states."""
    states: dict[str, Any] = {}
    for _ in range(tries):
        states = {p.ref.name: p for p in await client.list_pods()}
        if all(n in states and states[n].phase == phase for n, phase in want.items()):
            return states
        await asyncio.sleep(0.02)
    raise AssertionError(f"wanted {want}, got { {n: s.phase for n, s in states.items()} }")


def test_the_queue_follows_removed_plugins_and_profiles(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    async def body(srv: Server, live: LiveConfig, path: Path) -> None:
        async with AsyncSchedulerClient(srv.address, timeout=5) as client:
            node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"},
                    "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
                    "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "100"}}}
            gated = pod("gated", schedulingGates=[{"name": "example.com/wait"}])
            huge = pod("huge", "batch")
            huge["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "64"
            later = pod("later", "batch", tolerations=[{"operator": "Exists"}])
            await client.apply([node, pod("tainted"), gated, later])
            states = await phases(client, {"tainted": "Unschedulable", "later": "Pending"})
            assert states["later"].last_status.reasons == ("no profile for schedulerName 'batch'",)
            assert states["gated"].queue == "gated"

            replace(path, NO_TAINTS_NO_GATES + "- schedulerName: batch\n")
            assert await live.apply()
            # TaintToleration, which rejected "tainted", and SchedulingGates, which gated "gated", are
            # gone from the profile; the new profile "batch" takes "later" (its pods were only recorded).
            states = await phases(client, {"tainted": "Bound", "gated": "Bound", "later": "Bound"})
            assert {n: states[n].node_name for n in ("tainted", "gated", "later")} == {
                "tainted": "a", "gated": "a", "later": "a"}

            await client.apply([huge])
            await phases(client, {"huge": "Unschedulable"})
            assert srv.scheduler.pending_count()["unschedulable"] == 1
            replace(path, NO_TAINTS_NO_GATES)
            assert await live.apply()
            # "huge" was waiting in the removed profile's queue: left alone, as for an unknown schedulerName.
            states = await phases(client, {"huge": "Unschedulable"})
            assert states["huge"].last_status.reasons == ("no profile for schedulerName 'batch'",)
            assert srv.scheduler.pending_count()["unschedulable"] == 0
            assert capsys.readouterr().out.splitlines() == [
                f"applied configuration generation 2 (from {path}): profile default-scheduler: plugin "
                "SchedulingGates removed, plugin TaintToleration removed; profile batch added",
                f"applied configuration generation 3 (from {path}): profile batch removed",
            ]
            assert srv.scheduler.leaks() == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0,
                                             "binding_cycles": 0}

    run_live(tmp_path, TWO_PROFILES.replace("- schedulerName: batch\n", ""), body)


class Hold(PermitPlugin, PostBindPlugin):
    """Holds every pod at Permit until the test allows it; each instance records the pods it held and
    the pods whose PostBind it saw (so a test knows which generation's objects bound a pod)."""

    name = "Hold"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        self.held: list[str] = []
        self.bound: list[str] = []

    async def permit(self, state: CycleState, pod: Any, node_name: str) -> tuple[Status, float]:
        self.held.append(pod.name)
        return Status(Code.Wait), 30.0

    async def post_bind(self, state: CycleState, pod: Any, node_name: str) -> None:
        self.bound.append(pod.name)


def test_a_pod_waiting_at_permit_binds_with_the_generation_it_started_under(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import framework.profiles
    from framework.plugins import in_tree_registry

    def registry_with_hold() -> Any:
        registry = in_tree_registry()
        registry.register_class(Hold)
        return registry

    monkeypatch.setattr(framework.profiles, "in_tree_registry", registry_with_hold)
    held = weighted(5, 1, "    permit:\n      enabled: [{name: Hold}]\n    postBind:\n      enabled: [{name: Hold}]\n")

    async def body(srv: Server, live: LiveConfig, path: Path) -> None:
        def hold() -> Hold:
            plugin = srv.scheduler.profiles["default-scheduler"].plugins["Hold"]
            assert isinstance(plugin, Hold)
            return plugin

        async with AsyncSchedulerClient(srv.address, timeout=5) as client:
            first = hold()
            await client.apply(nodes_and_pods(1, prefix="old"))
            await phases(client, {"old0": "Waiting"})
            replace(path, held.replace("weight: 5}, {name: TaintToleration, weight: 1}",
                                       "weight: 1}, {name: TaintToleration, weight: 5}"))
            assert await live.apply()
            second = hold()
            assert second is not first
            await client.apply([pod("new0")])
            await phases(client, {"new0": "Waiting"})
            for name in ("old0", "new0"):
                uid = next(p.ref.uid for p in await client.list_pods() if p.ref.name == name)
                waiting = srv.scheduler.waiting_pods.get(uid)
                assert waiting is not None
                waiting.allow("Hold")
            states = await phases(client, {"old0": "Bound", "new0": "Bound"})
            # old0 was held, and bound, by generation 1's Hold; new0 by generation 2's, on the node the new
            # weights prefer.
            assert (first.held, first.bound, second.held, second.bound) == (["old0"], ["old0"], ["new0"], ["new0"])
            assert (states["old0"].node_name, states["new0"].node_name) == ("a", "b")
            assert srv.scheduler.leaks() == {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0,
                                             "binding_cycles": 0}

    run_live(tmp_path, held, body)


# ---- outrigger serve on the embedded store ------------------------------------------------------

_READY = re.compile(r"serving the Scheduler API on (\S+), HTTP on (\S+)")


class Serve:
    """``outrigger serve`` in a subprocess; stdout and stderr kept line by line."""

    def __init__(self, *args: str, cwd: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "framework.cli", "serve", "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
             "--secure-port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
            cwd=cwd)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        m = self.wait_for(_READY, 30)
        self.address, self.http = m[1], m[2]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pattern: re.Pattern[str] | str, timeout: float) -> re.Match[str]:
        """The first line matching ``pattern`` (a string: a line equal to it, after any log prefix)."""
        regex = pattern if isinstance(pattern, re.Pattern) else re.compile(r"(?:.* )?" + re.escape(pattern) + "$")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if (m := regex.search(line)) is not None:
                    return m
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no line like {regex.pattern!r}:\n" + "\n".join(self.lines))

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"http://{self.http}{path}", timeout=10) as resp:
            body = resp.read().decode()
        return json.loads(body) if path != "/metrics" else body

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Feeder(threading.Thread):
    """Applies pods f0, f1, ... in small batches until stopped (bounded in count and time), so pods
    are being scheduled while the configuration changes."""

    def __init__(self, address: str, limit: int = 400) -> None:
        super().__init__(daemon=True)
        self.address, self.limit, self.count = address, limit, 0
        self.halt = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + 120
        with SchedulerClient(self.address) as client:
            while not self.halt.is_set() and self.count < self.limit and time.monotonic() < deadline:
                client.apply([pod(f"f{self.count + i}") for i in range(4)])
                self.count += 4
                self.halt.wait(0.03)


def placements(client: SchedulerClient, names: list[str], timeout: float = 30) -> dict[str, str]:
    """Each named pod's node once every one is bound (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        states = {p.ref.name: p for p in client.list_pods()}
        if all(n in states and states[n].phase == "Bound" for n in names):
            return {n: states[n].node_name for n in names}
        if time.monotonic() > deadline:
            raise AssertionError({n: states[n].phase if n in states else None for n in names})
        time.sleep(0.05)


def probe(client: SchedulerClient, prefix: str) -> tuple[str | None, set[str]]:
    """Where explain, on the service's state now, would put a pod like the feeder's, and where five
    such pods applied now go."""
    explained = client.explain(pod(f"{prefix}-explained")).selected
    names = [f"{prefix}{i}" for i in range(5)]
    client.apply([pod(n) for n in names])
    return explained, set(placements(client, names).values())


def test_serve_applies_changes_by_rename_while_pods_are_scheduled(tmp_path: Path) -> None:
    cfg = tmp_path / "scheduler.yaml"
    cfg.write_text(weighted(5, 1))
    srv = Serve("--config", cfg.name, cwd=tmp_path)
    feeder = Feeder(srv.address)
    try:
        pid = srv.proc.pid
        with SchedulerClient(srv.address) as client:
            client.apply(nodes_and_pods(0))
            assert probe(client, "before") == ("a", {"a"})  # NodeAffinity weighs 5, TaintToleration 1
            feeder.start()
            time.sleep(0.3)

            replace(cfg, weighted(1, 5))
            srv.wait_for(f"applied configuration generation 2 (from {cfg.name}): profile default-scheduler: weight "
                         "of NodeAffinity 5 -> 1, weight of TaintToleration 1 -> 5", 20)
            assert probe(client, "weights") == ("b", {"b"})

            replace(cfg, UNTAINTED)
            srv.wait_for(f"applied configuration generation 3 (from {cfg.name}): profile default-scheduler: plugin "
                         "TaintToleration removed, weight of NodeAffinity 1 -> 5", 20)
            assert probe(client, "removed") == ("a", {"a"})

            invalid = weighted(1, 5).replace("TaintToleration", "TaintTolerations")
            replace(cfg, invalid)
            reason = (f'{cfg.name}: profiles[0].plugins.score.enabled[1]: score plugin "TaintTolerations" does '
                      "not exist")
            srv.wait_for(f"refused configuration change ({cfg.name}): {reason}; generation 3 keeps scheduling", 20)
            assert probe(client, "invalid") == ("a", {"a"})  # nothing changed
            assert srv.get("/configz")["liveConfiguration"]["lastRefused"]["reason"] == reason

            replace(cfg, weighted(1, 5).replace("profiles:", "parallelism: 8\nprofiles:"))
            srv.wait_for(f"refused configuration change ({cfg.name}): {cfg.name}: parallelism needs a restart; "
                         "generation 3 keeps scheduling", 20)
            assert probe(client, "restart") == ("a", {"a"})

            feeder.halt.set()
            feeder.join(30)
            fed = [f"f{i}" for i in range(feeder.count)]
            assert len(fed) >= 40
            placements(client, fed, 60)
            every = [p.ref.name for p in client.list_pods()]
            bound = {n: [e for e in client.list_events("Pod", n) if e.type is EventType.BOUND] for n in every}
            assert {n: len(evs) for n, evs in bound.items()} == dict.fromkeys(every, 1)
            live = srv.get("/configz")["liveConfiguration"]
            assert (live["generation"], live["sources"]) == (3, {cfg.name: live["sources"][cfg.name]})
            metrics = srv.get("/metrics")
            for line in ('outrigger_config_reloads_total{result="applied"} 2.0',
                         'outrigger_config_reloads_total{result="refused"} 2.0', "outrigger_config_generation 3.0"):
                assert line in metrics.splitlines()
        assert srv.proc.poll() is None and srv.proc.pid == pid
        assert sum("serving the Scheduler API" in line for line in srv.lines) == 1
    finally:
        feeder.halt.set()
        srv.stop()


@pytest.mark.parametrize(("value", "want"), [("true", True), ("false", False), ("False", False), ("1", True),
                                             ("0", False), ("maybe", None)])
def test_watch_config_takes_kube_style_booleans(value: str, want: bool | None) -> None:
    import argparse

    from framework.cli.serve import _flag_bool

    if want is None:
        with pytest.raises(argparse.ArgumentTypeError, match="must be true or false, got 'maybe'"):
            _flag_bool(value)
    else:
        assert _flag_bool(value) is want


def test_serve_with_watch_config_false_reads_its_files_once(tmp_path: Path) -> None:
    cfg = tmp_path / "scheduler.yaml"
    cfg.write_text(weighted(5, 1))
    srv = Serve("--config", cfg.name, "--watch-config=false", cwd=tmp_path)
    try:
        assert "liveConfiguration" not in srv.get("/configz")
        assert "outrigger_config_generation" not in srv.get("/metrics")
    finally:
        srv.stop()
