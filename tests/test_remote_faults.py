"""Remote plugins when things go wrong, and the edges of the contract: a plugin host killed mid-cycle
and restarted on the same port, unreachable endpoints, bad RemotePlugins documents, plugin classes a
host refuses, rejected configuration, CycleState values that cannot cross the wire, plus CycleState
shared between in-process and remote plugins, a remote QueueSort, replicas and ``explain --plugins``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_remote_fakes import SPEC_ENV
from test_remote_harness import ROOT, HostProcess, Hosts, endpoint, remote_rig, until

import pluginhost
from framework.config import ConfigError, load_config
from framework.remote import (
    EndpointConfig,
    RemotePlugins,
    RemotePluginsError,
    parse_duration,
    parse_remote_plugins,
)
from pluginhost.definition import PluginDefinitionError, manifest_of
from pluginhost.manifest import parse_objects
from pluginhost.model import Node, Pod
from pluginhost.plugin import (
    CycleState,
    FilterPlugin,
    FilterResult,
    NodeBatch,
    Plugin,
    PreFilterPlugin,
    PreFilterResult,
    QueueSortPlugin,
)
from pluginhost.status import SUCCESS, Code, Status

NO_LEAKS = {"cycle_states": 0, "waiting_pods": 0, "assumed_pods": 0, "binding_cycles": 0}


def config(plugins: list[str], args: dict[str, Any], *, queue_sort: str = "PrioritySort") -> str:
    lines = [
        "apiVersion: kubescheduler.config.k8s.io/v1",
        "kind: KubeSchedulerConfiguration",
        "podInitialBackoffSeconds: 1",
        "podMaxBackoffSeconds: 1",
        "profiles:",
        "- schedulerName: default-scheduler",
        "  plugins:",
        "    multiPoint:",
        "      enabled:",
        f"      - {{name: {queue_sort}}}",
        "      - {name: NodeResourcesFit}",
        *(f"      - {{name: {p}}}" for p in plugins),
        "      - {name: DefaultBinder}",
        "      disabled:",
        '      - {name: "*"}',
        "  pluginConfig:",
    ]
    for name, a in args.items():
        lines += [f"  - name: {name}", f"    args: {json.dumps(a)}"]
    return "\n".join(lines) + "\n"


def cluster(n_nodes: int, pods: list[str]) -> list[Pod | Node]:
    docs = [
        f"apiVersion: v1\nkind: Node\nmetadata: {{name: n{i}}}\n"
        "status: {allocatable: {cpu: '4', memory: 8Gi, pods: '110'}}\n"
        for i in range(n_nodes)
    ]
    docs += [
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {p}, uid: uid-{p}}}\n"
        "spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}\n"
        for p in pods
    ]
    return parse_objects("---\n".join(docs), "test.yaml")


def fakes_env(*specs: dict[str, Any]) -> dict[str, str]:
    return {SPEC_ENV: json.dumps(list(specs))}


# ---------------------------------------------------------------------------------------------------
# A plugin host killed mid-cycle


def test_killed_host_fails_the_cycle_naming_the_plugin_and_scheduling_resumes_after_restart(tmp_path: Path) -> None:
    marker = tmp_path / "filter-started"
    env = fakes_env({"name": "Slow", "points": ["filter"]})
    behaviour = {"slow": {"point": "filter", "seconds": 60, "marker": str(marker)}}
    text = config(["Slow"], {"Slow": {"behaviour": behaviour, "calls": str(tmp_path / "calls.jsonl")}})
    first = HostProcess("test_remote_fakes:fake_plugins", env)
    first.start()
    port = first.address.rsplit(":", 1)[1]
    second = HostProcess("test_remote_fakes:fake_plugins", env, listen=f"127.0.0.1:{port}")
    seen: dict[str, Any] = {}

    async def main() -> None:
        # A Filter deadline far beyond the test: the kill, not a deadline, must end the call.
        rig = await remote_rig([endpoint("fakes", first.address, filter=120.0)],
                               lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply(cluster(2, ["p1"]))
            await until(marker.exists, 10, "the remote Filter call to start")
            first.kill()

            def failed() -> bool:
                return any(ev.type == "Error" and ev.name == "p1" for ev in s.recent_events())

            await until(failed, 10, "the cycle to fail")
            error = next(ev for ev in s.recent_events() if ev.type == "Error" and ev.name == "p1")
            seen["status"] = error.status
            seen["queue"] = s.queue_of("uid-p1")
            seen["leaks_after_failure"] = s.leaks()
            second.start()  # the same port: the framework's channel reconnects, then re-handshakes

            def bound() -> bool:
                r = s.get_pod("default", "p1")
                return r is not None and r.phase == "Bound"

            await until(bound, 20, "p1 to be bound once the host is back")
            r = s.get_pod("default", "p1")
            assert r is not None
            seen["attempts"] = r.attempts
            await s.drain(5)
            seen["leaks"] = s.leaks()
            seen["stats"] = rig.remote.stats()["Slow"]["Filter"]
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()

    try:
        asyncio.run(main())
    finally:
        first.kill()
        second.stop()
    status = seen["status"]
    assert status.code is Code.Error and status.plugin == "Slow"
    message = status.message()
    assert message.startswith('running "Slow" filter plugin: UNAVAILABLE')
    assert f"plugin host 'fakes' at 127.0.0.1:{port}" in message
    assert seen["queue"] == "backoff"  # requeued, with backoff
    assert seen["leaks_after_failure"]["cycle_states"] == 0 and seen["leaks_after_failure"]["assumed_pods"] == 0
    assert seen["attempts"] >= 2
    assert seen["leaks"] == NO_LEAKS
    assert seen["stats"].errors >= 1


# ---------------------------------------------------------------------------------------------------
# Configuration and start-up


VALID = """\
apiVersion: outrigger.io/v1alpha1
kind: RemotePlugins
plugins:
- name: gang
  address: 127.0.0.1:50061
  deadlines: {default: 2s, permit: 250ms, filter: 1.5s}
  failurePolicy: Fail
- name: labels
  addresses: [127.0.0.1:50062, 127.0.0.1:50072]
  batchSize: 512
  connectTimeout: 3s
"""


def test_remote_plugins_document_parses() -> None:
    gang, labels = parse_remote_plugins(VALID, "plugins.yaml")
    assert (gang.name, gang.addresses, gang.failure_policy) == ("gang", ("127.0.0.1:50061",), "Fail")
    assert (gang.deadline("permit"), gang.deadline("filter"), gang.deadline("score")) == (0.25, 1.5, 2.0)
    assert labels.addresses == ("127.0.0.1:50062", "127.0.0.1:50072")
    assert (labels.batch_size, labels.connect_timeout, labels.deadline("bind")) == (512, 3.0, 5.0)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(VALID.replace("RemotePlugins", "Plugins"), "kind: must be 'RemotePlugins'", id="kind"),
        pytest.param(VALID.replace("v1alpha1", "v1"), "apiVersion: must be 'outrigger.io/v1alpha1'", id="version"),
        pytest.param(VALID.replace("failurePolicy: Fail", "failurePolicy: Never"),
                     "plugins[0].failurePolicy: unsupported value 'Never' (use Fail or Ignore)", id="never"),
        pytest.param(VALID.replace("permit: 250ms", "permit: soon"),
                     "plugins[0].deadlines.permit: invalid duration 'soon'", id="duration"),
        pytest.param(VALID.replace("permit: 250ms", "permits: 250ms"),
                     "plugins[0].deadlines.permits: unknown extension point", id="unknown-point"),
        pytest.param(VALID.replace("  address: 127.0.0.1:50061\n", ""),
                     "plugins[0]: exactly one of address or addresses is required", id="no-address"),
        pytest.param(VALID.replace("- name: labels", "- name: gang"), "plugins[1].name: duplicate endpoint name 'gang'",
                     id="duplicate"),
        pytest.param(VALID.replace("batchSize: 512", "batchSize: -1"), "plugins[1].batchSize: must be a non-negative",
                     id="batch"),
    ],
)  # fmt: skip
def test_remote_plugins_document_errors_name_the_field(text: str, problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_remote_plugins(text, "plugins.yaml")
    assert f"plugins.yaml: {problem}" in str(err.value)


def test_durations() -> None:
    assert [parse_duration(v) for v in ("250ms", "2s", "1.5m", 3, "1h")] == [0.25, 2.0, 90.0, 3.0, 3600.0]
    for bad in ("0s", "-1s", "2", "fast", True):
        with pytest.raises(ConfigError):
            parse_duration(bad)


def test_unreachable_endpoint_fails_startup_naming_it() -> None:
    async def main() -> str:
        config_ = EndpointConfig("gang", ("127.0.0.1:1",), connect_timeout=0.3)
        try:
            await RemotePlugins.connect([config_], "127.0.0.1:2")
        except RemotePluginsError as exc:
            return str(exc)
        raise AssertionError("connect did not fail")

    message = asyncio.run(asyncio.wait_for(main(), 10))
    assert message.startswith("plugin host 'gang' at 127.0.0.1:1 is unreachable after 0.3s: UNAVAILABLE")


def test_cli_serve_with_an_unreachable_endpoint_exits_with_the_error(tmp_path: Path) -> None:
    doc = tmp_path / "plugins.yaml"
    doc.write_text("apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
                   "- {name: gang, address: '127.0.0.1:1', connectTimeout: 200ms}\n")
    out = subprocess.run(
        [sys.executable, "-m", "framework.cli", "serve", "--listen", "127.0.0.1:0", "--plugins", str(doc)],
        capture_output=True, text=True, timeout=30, cwd=ROOT,
    )
    assert out.returncode == 1, out.stderr  # a user mistake: one line, exit code 1
    assert "error: plugin host 'gang' at 127.0.0.1:1 is unreachable after 0.2s" in out.stderr


class _NoName(FilterPlugin):
    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        return FilterResult.passing(len(batch))


class _KeyOnlyLess(QueueSortPlugin):
    name = "Less"


class _HalfFilterAndScore(FilterPlugin):
    name = "Half"
    filter_and_score = True


@pytest.mark.parametrize(
    ("cls", "problem"),
    [
        pytest.param(_NoName, "has no name", id="no-name"),
        pytest.param(type("Nothing", (Plugin,), {"name": "Nothing"}), "implements no extension",
                     id="no-point"),
        pytest.param(_KeyOnlyLess, "must implement sort_key()", id="queue-sort-less-only"),
        pytest.param(_HalfFilterAndScore, "filter_and_score needs both Filter and Score", id="filter-and-score"),
        pytest.param(int, "is not a plugin class", id="not-a-plugin"),
    ],
)  # fmt: skip
def test_host_refuses_invalid_plugin_classes(cls: type, problem: str) -> None:
    with pytest.raises(PluginDefinitionError, match=problem):
        manifest_of(cls)


@pytest.mark.parametrize(
    ("cls", "problem"),
    [
        pytest.param(_NoName, "has no name", id="no-name"),
        pytest.param(_KeyOnlyLess, "must implement sort_key()", id="queue-sort-less-only"),
        pytest.param(_HalfFilterAndScore, "filter_and_score needs both Filter and Score", id="filter-and-score"),
    ],
)  # fmt: skip
def test_defn_refuses_the_class_at_its_declaration(cls: type, problem: str) -> None:
    with pytest.raises(PluginDefinitionError, match=problem):
        pluginhost.defn(type(cls.__name__, (cls,), {}))


def test_defn_names_the_class_and_the_host_serves_the_manifest_it_built() -> None:
    @pluginhost.defn(name="Declared")
    class Declared(FilterPlugin):
        async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
            return FilterResult.passing(len(batch))

    @pluginhost.defn
    class Bare(FilterPlugin):
        name = "Bare"

        async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
            return FilterResult.passing(len(batch))

    class Derived(Declared):
        name = "Derived"

    built = Declared.__outrigger_manifest__  # type: ignore[attr-defined]
    assert (Declared.name, built.name, Bare.__outrigger_manifest__.name) == ("Declared", "Declared", "Bare")  # type: ignore[attr-defined]
    host = pluginhost.PluginHost([Declared, Bare, Derived], listen="127.0.0.1:0")
    assert host.plugins["Declared"].manifest is built  # built once, at the class statement
    assert host.plugins["Derived"].manifest.name == "Derived"  # a subclass gets its own, not its base's
    assert host.plugins["Derived"].manifest == manifest_of(Derived)


def test_rejected_configuration_fails_startup_with_the_plugins_reason() -> None:
    text = config(["Coscheduling"], {"Coscheduling": {"permitWaitingTimeSeconds": -1}})

    async def main(address: str) -> str:
        try:
            await remote_rig([endpoint("gang", address)], lambda reg: load_config(text, reg.points()))
        except RemotePluginsError as exc:
            return str(exc)
        raise AssertionError("startup did not fail")

    with HostProcess("pluginhost.examples.coscheduling:Coscheduling") as host:
        message = asyncio.run(main(host.address))
    assert message == (
        f"remote plugin 'Coscheduling' rejected its configuration for profile 'default-scheduler' "
        f"(plugin host 'gang' at {host.address}): permitWaitingTimeSeconds must be positive, got -1.0"
    )


# ---------------------------------------------------------------------------------------------------
# CycleState across the boundary


class _Writer(PreFilterPlugin):
    """In-process: writes a StateValue and a plain Python object."""

    name = "Writer"

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        self.python_object = bool((args or {}).get("pythonObject"))

    async def pre_filter(self, state: CycleState, pod: Pod) -> tuple[PreFilterResult | None, Status]:
        from pluginhost.state import StateValue

        state.write("shared/declared", StateValue.json({"from": "in-process", "pod": pod.name}))
        state.write("shared/undeclared", StateValue.json({"slow": "path"}))
        if self.python_object:
            state.write("shared/declared", {"not": "bytes"})
        return None, SUCCESS


class _Reader(FilterPlugin):
    """In-process: reads what the remote plugin wrote."""

    name = "Reader"
    got: list[Any] = []

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None) -> None:
        pass

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        value = state.get("remote/wrote")
        _Reader.got.append(value.as_json() if value is not None else None)
        return FilterResult.passing(len(batch))


def _shared_state_run(tmp_path: Path, python_object: bool) -> tuple[Any, list[Any], list[Any]]:
    calls = tmp_path / "calls.jsonl"
    remote_spec = {"name": "Remote", "points": ["preFilter", "filter"], "state_keys": ["shared/declared"]}
    behaviour = {
        "reads": {"filter": ["shared/declared", "shared/undeclared", "shared/missing"]},
        "writes": {"preFilter": {"remote/wrote": {"from": "remote"}}},
    }
    args = {"Writer": {"pythonObject": python_object}, "Remote": {"behaviour": behaviour, "calls": str(calls)}}
    text = config(["Writer", "Remote", "Reader"], args)
    _Reader.got = []

    async def main(address: str) -> Any:
        def extra(reg: Any) -> None:
            reg.register_class(_Writer)
            reg.register_class(_Reader)

        rig = await remote_rig([endpoint("remote", address)], lambda reg: load_config(text, reg.points()),
                               extra=extra)
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply(cluster(1, ["p1"]))
            await until(lambda: all(r.last_status is not None or r.phase == "Bound" for r in s.pods.values()), 10)
            await s.drain(5)
            return s
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()

    with HostProcess("test_remote_fakes:fake_plugins", fakes_env(remote_spec)) as host:
        s = asyncio.run(main(host.address))
    lines = [json.loads(x) for x in calls.read_text().splitlines()] if calls.exists() else []
    return s, [x for x in lines if x[0] == "read"], list(_Reader.got)


def test_cycle_state_is_shared_by_inprocess_and_remote_plugins(tmp_path: Path) -> None:
    s, reads, got = _shared_state_run(tmp_path, python_object=False)
    r = s.get_pod("default", "p1")
    assert r is not None and r.phase == "Bound"
    # The remote Filter saw the in-process writes: the declared key with the request, the undeclared
    # one through the CycleState service; a missing declared key is simply absent.
    assert reads == [["read", "Remote", "filter", {
        "shared/declared": {"from": "in-process", "pod": "p1"}, "shared/undeclared": {"slow": "path"},
        "shared/missing": None,
    }]]  # fmt: skip
    # ...and the in-process Filter saw the remote PreFilter's write (it rode back on the reply).
    assert got == [{"from": "remote"}]
    assert s.cycle_states == {}


def test_declared_key_holding_a_python_object_is_an_error_naming_key_and_plugin(tmp_path: Path) -> None:
    s, reads, _ = _shared_state_run(tmp_path, python_object=True)
    r = s.get_pod("default", "p1")
    assert r is not None and r.last_status is not None
    assert r.last_status.code is Code.Error and r.last_status.plugin == "Remote"
    assert r.last_status.message() == (
        "running PreFilter plugin \"Remote\": cycle state key 'shared/declared' for plugin 'Remote' holds a dict, "
        "not a StateValue: only StateValue(content_type, bytes) values can be shared with plugins in other processes"
    )
    assert reads == []


# ---------------------------------------------------------------------------------------------------
# QueueSort, replicas, explain


def test_remote_queue_sort_orders_the_queue() -> None:
    text = config([], {}, queue_sort="ReverseNameSort")

    async def main(address: str) -> list[str]:
        rig = await remote_rig([endpoint("sort", address)], lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        try:
            await s.apply(cluster(1, ["a", "c", "b", "e", "d"]))  # queued before the loop pops any
            task = asyncio.create_task(s.run())
            await until(lambda: all(r.phase == "Bound" for r in s.pods.values()), 10)
            await s.stop()
            await asyncio.wait_for(task, 5)
            assert rig.remote.stats()["ReverseNameSort"]["QueueSortKey"].calls == 5
            return [ev.name for ev in s.recent_events() if ev.type == "Bound"]
        finally:
            await rig.close()

    with HostProcess("test_remote_fakes:ReverseNameSort") as host:
        order = asyncio.run(main(host.address))
    assert order == ["e", "d", "c", "b", "a"]


def test_replicas_share_the_calls_and_each_is_configured(tmp_path: Path) -> None:
    env = fakes_env({"name": "F", "points": ["filter"]})
    text = config(["F"], {"F": {"calls": str(tmp_path / "calls.jsonl")}})
    pods = [f"p{i}" for i in range(12)]

    async def main(addresses: list[str]) -> list[int]:
        rig = await remote_rig([endpoint("fakes", addresses)], lambda reg: load_config(text, reg.points()))
        s = rig.scheduler
        task = asyncio.create_task(s.run())
        try:
            await s.apply(cluster(3, pods))
            await until(lambda: all(r.phase == "Bound" for r in s.pods.values()), 10)
            return [r.picked for r in rig.remote.endpoints[0].replicas]
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)
            await rig.close()

    hosts = [HostProcess("test_remote_fakes:fake_plugins", env) for _ in range(2)]
    with Hosts(*hosts) as addresses:
        picked = asyncio.run(main(addresses))
    assert sum(picked) >= 12 and min(picked) >= 1, picked  # cycles spread over both replicas


def test_explain_offline_with_a_remote_plugin(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: ssd, labels: {disk: ssd}}\n"
        "status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}\n---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {name: hdd, labels: {disk: hdd}}\n"
        "status: {allocatable: {cpu: '2', memory: 4Gi, pods: '10'}}\n"
    )
    (tmp_path / "pod.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web, annotations: "
        "{example.outrigger.io/require-node-labels: disk=ssd}}\n"
        "spec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}\n"
    )
    (tmp_path / "scheduler.yaml").write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
        "- schedulerName: default-scheduler\n  plugins:\n    multiPoint:\n      enabled: [{name: NodeLabels}]\n"
    )
    with HostProcess("pluginhost.examples.nodelabels:NodeLabels") as host:
        (tmp_path / "plugins.yaml").write_text(
            "apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n"
            f"- {{name: labels, address: '{host.address}'}}\n"
        )
        out = subprocess.run(
            [sys.executable, "-m", "framework.cli", "explain", "--config", "scheduler.yaml", "--plugins",
             "plugins.yaml", "--cluster", "cluster.yaml", "--pod", "pod.yaml", "-o", "json"],
            capture_output=True, text=True, timeout=60, cwd=tmp_path,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["selected"] == "ssd"
    assert result["nodes"]["hdd"]["filter"] == {
        "code": "UnschedulableAndUnresolvable", "plugin": "NodeLabels",
        "reasons": ["node(s) didn't have the required label(s) disk=ssd"],
    }  # fmt: skip

