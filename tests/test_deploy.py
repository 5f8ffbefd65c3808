"""The deployment files: docker-compose.yml, the Dockerfiles, Prometheus' config, the health probe.

Nothing here needs a container engine. The compose file is checked by a real compose implementation
(Debian's ``docker-compose``, its ``config`` command) where the binary exists, and by reading it here
everywhere: every service's command line parses with ``outrigger``'s own argument parser, the files
it mounts load with the project's loaders, the plugins its profiles name are the ones its plugin
host services serve, and those services started as processes on loopback with the same commands
really schedule a pod through the same configuration.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_node_plugin import NodeHost
from test_node_plugin import node as node  # the fixture: `node`, with clients/node's dependencies installed
from test_remote_harness import HostProcess, Hosts

from framework.cli import main as outrigger_main
from framework.cli import parser as outrigger_parser
from framework.plugins import Registry
from framework.profiles import build_registry, load_scheduler_config
from framework.remote import EndpointConfig, load_remote_plugins, parse_remote_plugins
from pluginhost.host import load_plugins

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
PLUGIN_SERVICES = {  # compose service -> the plugin class it serves
    "coscheduling": "pluginhost.examples.coscheduling:Coscheduling",
    "nodelabels": "pluginhost.examples.nodelabels:NodeLabels",
    "provisioner": "pluginhost.examples.provisioner:Provisioner",
}
NODE_SERVICE = "tierzone"  # the Node.js plugin host (clients/node)
GO_SERVICE = "upstream"  # kube-scheduler's in-tree plugins served by the Go adapter (clients/go)
GO_DOCKERFILE = "clients/go/Dockerfile"
GO_FLAGS = {"--listen", "--framework", "--prefix", "--kubeconfig"}  # kube.Main's
GO_PLUGINS = {  # what outrigger-kube-plugins --prefix Upstream serves that the compose profiles use
    "UpstreamNodeResourcesFit": frozenset({"preFilter", "filter", "preScore", "score"}),
    "UpstreamTaintToleration": frozenset({"filter", "preScore", "score"}),
}
NODE_SERVER = "clients/node/server.js"
NODE_PLUGIN = ROOT / "clients" / "node" / "plugins" / "tierzone.js"
PYTHON_DOCKERFILES = ("Dockerfile", "Dockerfile.pluginhost")


# ---- reading Dockerfiles and the compose file ------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    op: str  # upper case: FROM, COPY, ...
    args: str  # the rest of the (continued) line


def parse_dockerfile(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile: comments dropped, ``\\`` continuations joined."""
    out: list[Instruction] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        op, _, args = line.partition(" ")
        out.append(Instruction(op.upper(), args.strip()))
    assert not pending, "a Dockerfile ends with a line continuation"
    return out


def argv_of(args: str) -> list[str]:
    """An instruction's arguments: the JSON (exec) form, or whitespace-separated words."""
    if args.startswith("["):
        value = json.loads(args)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
        return value
    return args.split()


def last(instructions: list[Instruction], op: str) -> Instruction:
    found = [i for i in instructions if i.op == op]
    assert found, f"no {op} instruction"
    return found[-1]


def dockerfile(name: str) -> list[Instruction]:
    return parse_dockerfile((ROOT / name).read_text())


def dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def ignored(path: str, patterns: list[str]) -> bool:
    parts = Path(path).parts
    for pat in patterns:
        name = pat.removeprefix("**/")
        if pat.startswith("**/") and name in parts:
            return True
        if path == pat or path.startswith(pat.rstrip("/") + "/"):
            return True
    return False


def compose() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(doc, dict)
    return doc


def service_argv(name: str, svc: dict[str, Any]) -> list[str]:
    """What the service's container runs: its image's ENTRYPOINT plus the service's command."""
    build = svc.get("build")
    assert isinstance(build, dict), f"service {name} is not built from a Dockerfile here"
    instructions = dockerfile(build.get("dockerfile", "Dockerfile"))
    entrypoint = svc.get("entrypoint") or argv_of(last(instructions, "ENTRYPOINT").args)
    command = svc.get("command") or argv_of(last(instructions, "CMD").args)
    return [*entrypoint, *command]


def flag(argv: list[str], name: str) -> str:
    assert name in argv, f"{name} missing from {argv}"
    return argv[argv.index(name) + 1]


def host_path(svc: dict[str, Any], container_path: str) -> Path:
    """The file of the repository a service sees at ``container_path`` through its bind mounts."""
    for volume in svc.get("volumes", []):
        src, dst = volume.split(":")[:2]
        if container_path == dst or container_path.startswith(dst.rstrip("/") + "/"):
            return ROOT / src / container_path[len(dst) :].lstrip("/")
    raise AssertionError(f"{container_path} is not mounted from the repository")


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


# ---- the Dockerfiles ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", PYTHON_DOCKERFILES)
def test_python_images_install_the_package_and_run_as_a_non_root_user(name: str) -> None:
    ins = dockerfile(name)
    assert ins[0] == Instruction("FROM", "python:3.11-slim")
    runs = [i.args for i in ins if i.op == "RUN"]
    assert any(re.search(r"\bpip install \.(\s|$)", r) for r in runs), runs
    user = last(ins, "USER").args
    assert user not in ("0", "root"), user
    # USER comes after every RUN (the image's processes and its healthcheck never run as root).
    assert max(n for n, i in enumerate(ins) if i.op == "RUN") < max(n for n, i in enumerate(ins) if i.op == "USER")


@pytest.mark.parametrize("name", [*PYTHON_DOCKERFILES, "Dockerfile.node"])
def test_every_file_an_image_copies_exists_and_is_not_docker_ignored(name: str) -> None:
    patterns = dockerignore()
    copies = [i for i in dockerfile(name) if i.op == "COPY"]
    assert copies
    for ins in copies:
        words = [w for w in argv_of(ins.args) if not w.startswith("--")]
        for src in words[:-1]:
            assert (ROOT / src).exists(), f"{name}: COPY {src}: no such file in the repository"
            assert not ignored(src, patterns), f"{name}: COPY {src} is excluded by .dockerignore"
    if name == "Dockerfile.node":
        return
    # What pip installs is the whole distribution: every product package pyproject.toml includes is
    # copied; the tools (benchmark, comparison, live-cluster demo) run from a checkout and are not.
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    copied = {src for i in copies for src in [w for w in argv_of(i.args) if not w.startswith("--")][:-1]}
    for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        assert (pattern.rstrip("*") in copied) is (pattern != "tools*"), f"{name}: COPY of {pattern}"
    assert project["project"]["readme"] in copied


@pytest.mark.parametrize(
    ("name", "port"),
    [("Dockerfile", 50051), ("Dockerfile.pluginhost", 50061)],
)
def test_default_command_is_the_console_script_listening_on_the_exposed_port(name: str, port: int) -> None:
    ins = dockerfile(name)
    argv = [*argv_of(last(ins, "ENTRYPOINT").args), *argv_of(last(ins, "CMD").args)]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert argv[0] in scripts, f"{name}: the entrypoint {argv[0]!r} is not a console script"
    args = outrigger_parser().parse_args(argv[1:])  # SystemExit (a failing test) on unknown flags
    assert args.listen == f"0.0.0.0:{port}"
    assert last(ins, "EXPOSE").args.split()[0] == str(port)
    if argv[1:3] == ["plugin", "serve"]:
        assert load_plugins(args.target)  # the default plugin class exists


@pytest.mark.parametrize(("name", "port"), [("Dockerfile", 50051), ("Dockerfile.pluginhost", 50061)])
def test_image_healthcheck_runs_the_probe_it_copies_against_its_own_port(name: str, port: int) -> None:
    ins = dockerfile(name)
    options, _, command = last(ins, "HEALTHCHECK").args.partition("CMD ")
    argv = argv_of(command.strip())
    copied = {argv_of(i.args)[-1]: argv_of(i.args)[0] for i in ins if i.op == "COPY"}
    probe = next(dst for dst in copied if Path(dst).name == argv[0])
    assert copied[probe] == "deploy/healthcheck.py"
    assert argv[1:] == [f"127.0.0.1:{port}"]
    assert "--timeout=" in options


def node_flags() -> set[str]:
    """The flags server.js accepts, from its usage line."""
    m = re.search(r"const USAGE = '([^']*)'", (ROOT / NODE_SERVER).read_text())
    assert m is not None, f"{NODE_SERVER} has no usage line"
    return set(re.findall(r"--[\w-]+", m.group(1)))


def node_points() -> frozenset[str]:
    """The extension points TierZone implements: its methods named after them (the host's manifest
    is built the same way from the class)."""
    from framework.config import EXTENSION_POINTS

    methods = re.findall(r"^  (?:async )?(\w+)\(", NODE_PLUGIN.read_text(), re.M)
    return frozenset(m for m in methods if m in EXTENSION_POINTS)


def test_node_image_installs_the_locked_dependencies_and_runs_the_server_unprivileged() -> None:
    ins = dockerfile("Dockerfile.node")
    assert ins[0] == Instruction("FROM", "node:20-slim")
    assert any("npm ci" in i.args for i in ins if i.op == "RUN")
    assert last(ins, "USER").args == "node"
    argv = [*argv_of(last(ins, "ENTRYPOINT").args), *argv_of(last(ins, "CMD").args)]
    assert argv[:2] == ["node", NODE_SERVER] and (ROOT / NODE_SERVER).is_file()
    assert {a for a in argv[2:] if a.startswith("--")} <= node_flags()
    assert flag(argv, "--listen") == "0.0.0.0:50071" and last(ins, "EXPOSE").args == "50071"
    # The server loads proto/ from next to clients/ (lib/host.js: ../../../proto): the image keeps that layout.
    copies = {argv_of(i.args)[-1].rstrip("/"): argv_of(i.args)[0] for i in ins if i.op == "COPY"}
    assert copies["./proto"] == "proto" and copies["./clients/node"] == "clients/node"
    assert node_points() == {"preFilter", "filter", "score"}


# ---- the compose file, read here -----------------------------------------------------------------


def test_compose_services_are_the_framework_its_plugins_and_the_backends() -> None:
    services = compose()["services"]
    assert set(services) == {"framework", *PLUGIN_SERVICES, NODE_SERVICE, GO_SERVICE, "jaeger", "prometheus"}
    replicas = {name: services[name].get("deploy", {}).get("replicas")
                for name in (*PLUGIN_SERVICES, NODE_SERVICE, GO_SERVICE)}
    assert replicas == {"coscheduling": 2, "nodelabels": 3, "provisioner": 1, "tierzone": 2, "upstream": 1}
    assert services["framework"].get("deploy", {}).get("replicas", 1) == 1  # one active framework


def test_every_outrigger_service_command_parses_with_the_cli() -> None:
    services = compose()["services"]
    for name in ("framework", *PLUGIN_SERVICES):
        argv = service_argv(name, services[name])
        assert argv[0] == "outrigger", argv
        try:
            args = outrigger_parser().parse_args(argv[1:])
        except SystemExit:
            pytest.fail(f"service {name}: `{' '.join(argv)}` is not a valid outrigger command line")
        assert args.listen.startswith("0.0.0.0:"), (name, args.listen)
        if name in PLUGIN_SERVICES:
            assert argv[1:4] == ["plugin", "serve", PLUGIN_SERVICES[name]]
            assert args.framework == flag(service_argv("framework", services["framework"]), "--advertise")
            # The compose healthcheck probes the port the host listens on.
            assert services[name]["healthcheck"]["test"] == ["CMD", "outrigger-healthcheck",
                                                           f"127.0.0.1:{port_of(args.listen)}"]
    argv = service_argv(NODE_SERVICE, services[NODE_SERVICE])
    assert argv[:2] == ["node", NODE_SERVER]
    assert {a for a in argv[2:] if a.startswith("--")} <= node_flags(), argv
    assert flag(argv, "--listen").startswith("0.0.0.0:")
    assert flag(argv, "--framework") == flag(service_argv("framework", services["framework"]), "--advertise")
    argv = service_argv(GO_SERVICE, services[GO_SERVICE])
    assert argv[0] == "/outrigger-kube-plugins" and {a for a in argv[1:] if a.startswith("--")} <= GO_FLAGS, argv
    assert flag(argv, "--listen").startswith("0.0.0.0:") and flag(argv, "--prefix") == "Upstream"
    assert flag(argv, "--framework") == flag(service_argv("framework", services["framework"]), "--advertise")


def test_go_image_builds_the_kube_plugins_host_and_runs_it_unprivileged() -> None:
    ins = dockerfile(GO_DOCKERFILE)
    assert ins[0].args == "golang:1.26 AS build"  # go.mod: go 1.26.0 (Kubernetes 1.37 needs it)
    assert any("go build -trimpath -o /out/outrigger-kube-plugins ./cmd/outrigger-kube-plugins" in i.args
               for i in ins if i.op == "RUN")
    assert last(ins, "USER").args == "nonroot"
    argv = [*argv_of(last(ins, "ENTRYPOINT").args), *argv_of(last(ins, "CMD").args)]
    assert argv == ["/outrigger-kube-plugins", "--listen", "0.0.0.0:50081", "--prefix", "Upstream"]
    assert last(ins, "EXPOSE").args == "50081"
    patterns = dockerignore()
    for i in ins:
        if i.op == "COPY" and not i.args.startswith("--from"):
            *srcs, _ = argv_of(i.args)
            for src in srcs:
                assert (ROOT / src).exists() and not ignored(src, patterns), src
    assert ignored("clients/go/.bin", patterns)  # the binaries built here stay out of the build context


def _framework_files() -> tuple[Path, Path]:
    svc = compose()["services"]["framework"]
    argv = service_argv("framework", svc)
    return host_path(svc, flag(argv, "--config")), host_path(svc, flag(argv, "--plugins"))


def test_remote_plugins_file_names_each_plugin_service_by_dns_name_and_port() -> None:
    services = compose()["services"]
    _, plugins_file = _framework_files()
    endpoints = load_remote_plugins(plugins_file)
    by_target = {}
    for ep in endpoints:
        assert len(ep.addresses) == 1, ep
        m = re.fullmatch(r"dns:///([a-z0-9-]+):(\d+)", ep.addresses[0])
        assert m is not None, f"endpoint {ep.name}: {ep.addresses[0]} is not dns:///service:port"
        service, port = m.group(1), int(m.group(2))
        assert service in (*PLUGIN_SERVICES, NODE_SERVICE, GO_SERVICE), f"endpoint {ep.name} names no plugin service"
        argv = service_argv(service, services[service])
        assert port_of(flag(argv, "--listen")) == port, f"{service} does not listen on {port}"
        by_target[service] = ep.name
    assert set(by_target) == {*PLUGIN_SERVICES, NODE_SERVICE, GO_SERVICE}
    # The framework starts once the plugin hosts are healthy (it handshakes them at startup).
    depends = services["framework"]["depends_on"]
    assert {s: depends[s]["condition"] for s in PLUGIN_SERVICES} == dict.fromkeys(PLUGIN_SERVICES, "service_healthy")


def _registry_with_example_plugins() -> Registry:
    registry = build_registry()
    for target in PLUGIN_SERVICES.values():
        for cls in load_plugins(target):
            registry.register_class(cls)
    registry.register("TierZone", lambda args, handle: None, node_points())  # type: ignore[arg-type,return-value]
    for name, points in GO_PLUGINS.items():
        registry.register(name, lambda args, handle: None, points)  # type: ignore[arg-type,return-value]
    return registry


def test_scheduler_config_loads_with_the_plugins_the_services_serve() -> None:
    config_file, _ = _framework_files()
    cfg = load_scheduler_config(config_file, _registry_with_example_plugins())
    # Every kube-scheduler default is modelled (the volume plugins included): nothing is dropped.
    assert cfg.warnings == []
    gang = cfg.profile("gang-scheduler")
    assert gang is not None and cfg.profile("default-scheduler") is not None
    assert "Coscheduling" in gang.names("permit")
    assert "NodeLabels" in gang.names("filter") and gang.score_weights["NodeLabels"] == 1
    assert "Provisioner" in gang.names("preBind")
    assert gang.plugin_args["Coscheduling"] == {"permitWaitingTimeSeconds": 30}
    tier = cfg.profile("tier-scheduler")
    assert tier is not None and "TierZone" in tier.names("filter") and tier.score_weights["TierZone"] == 1
    upstream = cfg.profile("upstream-scheduler")
    assert upstream is not None
    assert [n for n in upstream.names("filter") if n.endswith(("NodeResourcesFit", "TaintToleration"))] == [
        "UpstreamNodeResourcesFit", "UpstreamTaintToleration"]


def test_every_outrigger_service_exports_traces_to_jaeger_under_its_own_name() -> None:
    services = compose()["services"]
    names = []
    for name in ("framework", *PLUGIN_SERVICES, NODE_SERVICE, GO_SERVICE):
        env = services[name]["environment"]
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4317", name
        assert env["OTEL_TRACES_EXPORTER"] == "otlp", name
        names.append(env["OTEL_SERVICE_NAME"])
    assert len(set(names)) == len(names), names
    assert services["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"


def test_prometheus_scrapes_the_framework_service_by_name() -> None:
    svc = compose()["services"]["prometheus"]
    assert svc["command"] == ["--config.file=/etc/prometheus/prometheus.yml"]
    config = host_path(svc, "/etc/prometheus/prometheus.yml")
    assert config == ROOT / "deploy" / "prometheus.yml"
    doc = yaml.safe_load(config.read_text())
    targets = [t for job in doc["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    framework = compose()["services"]["framework"]
    http = flag(service_argv("framework", framework), "--http")
    assert targets == [f"framework:{port_of(http)}"]
    assert http.startswith("0.0.0.0:") and f"{port_of(http)}:{port_of(http)}" in framework["ports"]
    exposed = last(dockerfile("Dockerfile"), "EXPOSE").args.split()
    assert str(port_of(http)) in exposed


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian package prometheus) is not installed")
def test_promtool_accepts_the_prometheus_config() -> None:
    proc = subprocess.run(["promtool", "check", "config", str(ROOT / "deploy" / "prometheus.yml")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---- the compose file, read by docker-compose ------------------------------------------------------

DOCKER_COMPOSE = shutil.which("docker-compose")
needs_compose = pytest.mark.skipif(
    DOCKER_COMPOSE is None,
    reason="docker-compose is not installed (Debian: apt-get install docker-compose); "
    "the compose file is still read and checked by the other tests here",
)


def _compose_config(path: Path) -> subprocess.CompletedProcess[str]:
    assert DOCKER_COMPOSE is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMPOSE_")}
    return subprocess.run([DOCKER_COMPOSE, "-f", str(path), "config"], capture_output=True, text=True,
                          timeout=120, cwd=path.parent, env=env)


@needs_compose
def test_docker_compose_config_accepts_the_compose_file() -> None:
    proc = _compose_config(COMPOSE)
    assert proc.returncode == 0, proc.stderr
    resolved = yaml.safe_load(proc.stdout)
    services = resolved["services"]
    assert set(services) == {"framework", *PLUGIN_SERVICES, NODE_SERVICE, GO_SERVICE, "jaeger", "prometheus"}
    assert {n: services[n]["deploy"]["replicas"] for n in (*PLUGIN_SERVICES, NODE_SERVICE, GO_SERVICE)} == {
        "coscheduling": 2, "nodelabels": 3, "provisioner": 1, "tierzone": 2, "upstream": 1}
    assert services[NODE_SERVICE]["build"]["dockerfile"] == "Dockerfile.node"
    assert services[GO_SERVICE]["build"]["dockerfile"] == GO_DOCKERFILE
    assert services[GO_SERVICE]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4317"
    # The x- anchors were merged the way this file's own reading assumes.
    for name in PLUGIN_SERVICES:
        assert services[name]["build"]["dockerfile"] == "Dockerfile.pluginhost"
        assert services[name]["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4317"
        assert services[name]["command"] == compose()["services"][name]["command"]


@needs_compose
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("replicas: 3", "replicas: many"), '"many" is not a valid integer'),
        (("\n  jaeger:\n", "\n  jaeger:\n    replica: 1\n"),
         "Unsupported config option for services.jaeger: 'replica'"),
    ],
)
def test_docker_compose_config_rejects_a_broken_copy(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    text = COMPOSE.read_text()
    assert edit[0] in text
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(text.replace(edit[0], edit[1], 1))
    proc = _compose_config(broken)
    assert proc.returncode != 0
    assert message in proc.stderr


# ---- the health probe ------------------------------------------------------------------------------


def _probe(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "deploy" / "healthcheck.py"), *args],
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def plugin_host() -> Iterator[str]:
    with HostProcess(PLUGIN_SERVICES["nodelabels"]) as host:
        yield host.address


def test_health_probe_passes_for_a_serving_plugin_host(plugin_host: str) -> None:
    proc = _probe(plugin_host)
    assert (proc.returncode, proc.stdout.strip()) == (0, f"{plugin_host}: server is SERVING")
    proc = _probe(plugin_host, "outrigger.v1.Plugin")
    assert (proc.returncode, proc.stdout.strip()) == (0, f"{plugin_host}: outrigger.v1.Plugin is SERVING")


def test_health_probe_fails_for_an_unknown_service_and_a_closed_port(plugin_host: str) -> None:
    proc = _probe(plugin_host, "no.such.Service")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"{plugin_host}: NOT_FOUND: the server has no service 'no.such.Service'"
    with socket.socket() as s:  # a port nothing listens on once the socket is closed
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    proc = _probe(closed)
    assert proc.returncode == 1
    assert proc.stderr.startswith(f"{closed}: UNAVAILABLE: ")


@pytest.mark.parametrize("args", [(), ("a", "b", "c"), ("no-port",)])
def test_health_probe_usage_errors_exit_2(args: tuple[str, ...]) -> None:
    proc = _probe(*args)
    assert (proc.returncode, proc.stderr.strip()) == (2, "usage: outrigger-healthcheck ADDRESS [SERVICE]")


# ---- the compose topology, as processes on loopback ------------------------------------------------

POD_FOR_GANG_PROFILE = """\
apiVersion: v1
kind: Pod
metadata:
  name: placed
  annotations:
    example.outrigger.io/require-node-labels: disktype=ssd
    example.outrigger.io/prefer-node-labels: topology.kubernetes.io/zone=zone-b
spec:
  schedulerName: gang-scheduler
  containers: [{name: app, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
"""

POD_FOR_UPSTREAM_PROFILE = """\
apiVersion: v1
kind: Pod
metadata:
  name: big
spec:
  schedulerName: upstream-scheduler
  containers: [{name: app, resources: {requests: {cpu: "5", memory: 128Mi}}}]
"""

POD_FOR_TIER_PROFILE = """\
apiVersion: v1
kind: Pod
metadata:
  name: tiered
  labels: {example.com/tier: gold}
  annotations: {example.com/preferred-zones: zone-a}
spec:
  schedulerName: tier-scheduler
  containers: [{name: app, resources: {requests: {cpu: 100m, memory: 128Mi}}}]
"""

CLUSTER = """\
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Node, metadata: {name: hdd-a, labels: {disktype: hdd, topology.kubernetes.io/zone: zone-a,
   example.com/tier: gold}}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}}
- {apiVersion: v1, kind: Node, metadata: {name: ssd-a, labels: {disktype: ssd, topology.kubernetes.io/zone: zone-a,
   example.com/tier: silver}}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}}
- {apiVersion: v1, kind: Node, metadata: {name: ssd-b, labels: {disktype: ssd, topology.kubernetes.io/zone: zone-b,
   example.com/tier: gold}}, status: {allocatable: {cpu: "4", memory: 8Gi, pods: "10"}}}
"""


def _loopback(endpoints: list[EndpointConfig], addresses: dict[str, str]) -> str:
    """The compose RemotePlugins document with each dns:///service:port replaced by a loopback address."""
    doc: dict[str, Any] = {"apiVersion": "outrigger.io/v1alpha1", "kind": "RemotePlugins", "plugins": []}
    for ep in endpoints:
        service = ep.addresses[0].removeprefix("dns:///").rsplit(":", 1)[0]
        doc["plugins"].append({"name": ep.name, "address": addresses[service], "deadlines": {"default": "10s"}})
    text = yaml.safe_dump(doc)
    parse_remote_plugins(text)
    return text


def _explain(config: Path, remote: Path, cluster: Path, pod: Path, capsys: pytest.CaptureFixture[str]) -> Any:
    code = outrigger_main(["explain", "--config", str(config), "--plugins", str(remote), "--cluster", str(cluster),
                           "-f", str(pod), "-o", "json"])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_compose_topology_on_loopback_schedules_through_the_same_configuration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], node: str
) -> None:
    services = compose()["services"]
    config_file, plugins_file = _framework_files()
    hosts = []
    for name in PLUGIN_SERVICES:
        argv = service_argv(name, services[name])
        extra = [a for a in argv[4:] if a not in ("--listen", flag(argv, "--listen"),
                                                  "--framework", flag(argv, "--framework"))]
        assert extra == [], f"{name}: flags this test does not reproduce: {extra}"
        hosts.append(HostProcess(argv[3]))
    node_argv = service_argv(NODE_SERVICE, services[NODE_SERVICE])
    assert node_argv[:2] == ["node", NODE_SERVER] and set(node_argv[2:]) == {
        "--listen", flag(node_argv, "--listen"), "--framework", flag(node_argv, "--framework")}
    hosts.append(NodeHost(node))
    go_argv = service_argv(GO_SERVICE, services[GO_SERVICE])
    assert set(go_argv[1:]) == {"--listen", flag(go_argv, "--listen"), "--framework", flag(go_argv, "--framework"),
                                "--prefix", "Upstream"}
    from test_go_plugins import GoHost

    from tools.bench.gohost import go_binary

    hosts.append(GoHost(Path(go_binary("outrigger-kube-plugins")), "--prefix", "Upstream"))
    with Hosts(*hosts) as addresses:
        remote = tmp_path / "remote-plugins.yaml"
        where = dict(zip([*PLUGIN_SERVICES, NODE_SERVICE, GO_SERVICE], addresses, strict=True))
        remote.write_text(_loopback(load_remote_plugins(plugins_file), where))
        cluster = tmp_path / "cluster.yaml"
        cluster.write_text(CLUSTER)
        (tmp_path / "pod.yaml").write_text(POD_FOR_GANG_PROFILE)
        (tmp_path / "tiered.yaml").write_text(POD_FOR_TIER_PROFILE)
        (tmp_path / "big.yaml").write_text(POD_FOR_UPSTREAM_PROFILE)
        result = _explain(config_file, remote, cluster, tmp_path / "pod.yaml", capsys)
        tiered = _explain(config_file, remote, cluster, tmp_path / "tiered.yaml", capsys)
        big = _explain(config_file, remote, cluster, tmp_path / "big.yaml", capsys)
    # kube-scheduler's NodeResourcesFit (Go, out of process): 5 CPUs fit on no 4-CPU node, and preemption
    # cannot help (more than the node's allocatable).
    too_big = {"code": "UnschedulableAndUnresolvable", "plugin": "UpstreamNodeResourcesFit",
               "reasons": ["Insufficient cpu"]}
    assert {n: e["filter"] for n, e in big["nodes"].items()} == {n: too_big for n in ("hdd-a", "ssd-a", "ssd-b")}
    # TierZone (Node.js): the silver node is filtered out, the preferred zone wins.
    assert tiered["selected"] == "hdd-a"
    assert tiered["nodes"]["ssd-a"]["filter"] == {
        "code": "UnschedulableAndUnresolvable", "plugin": "TierZone",
        "reasons": ["node(s) didn't have label example.com/tier=gold"]}
    assert [tiered["nodes"][n]["scores"]["TierZone"]["raw"] for n in ("hdd-a", "ssd-b")] == [100, 0]
    assert result["selected"] == "ssd-b"
    assert result["nodes"]["hdd-a"]["filter"] == {
        "code": "UnschedulableAndUnresolvable", "plugin": "NodeLabels",
        "reasons": ["node(s) didn't have the required label(s) disktype=ssd"]}
    assert result["nodes"]["ssd-b"]["scores"]["NodeLabels"]["raw"] == 100
    assert result["nodes"]["ssd-a"]["scores"]["NodeLabels"]["raw"] == 0


# ---- deploy/kubernetes: the framework's identity on the cluster (rbac.yaml) -------------------------
# The manifests' wiring is checked here; tests/test_kube_harness.py asks the real authorizer what the
# account may do and compares the grants with kube-scheduler's own roles on the same apiserver.

K8S_DEPLOY = ROOT / "deploy" / "kubernetes"
SERVICE_ACCOUNT = {"kind": "ServiceAccount", "name": "outrigger", "namespace": "outrigger"}
OUTRIGGER_GRANTS = {  # (apiGroup, resource, resourceName or "*") -> verbs, over rbac.yaml's two roles
    ("", "events", "*"): {"create", "patch", "update"},
    ("events.k8s.io", "events", "*"): {"create", "patch", "update"},
    ("", "nodes", "*"): {"get", "list", "watch"},
    ("", "pods", "*"): {"get", "list", "watch", "delete"},
    ("", "pods/binding", "*"): {"create"},
    ("", "pods/status", "*"): {"patch", "update"},
    ("", "namespaces", "*"): {"get", "list", "watch"},
    ("", "services", "*"): {"get", "list", "watch"},
    ("", "replicationcontrollers", "*"): {"get", "list", "watch"},
    ("apps", "replicasets", "*"): {"get", "list", "watch"},
    ("apps", "statefulsets", "*"): {"get", "list", "watch"},
    ("policy", "poddisruptionbudgets", "*"): {"get", "list", "watch"},
    ("", "persistentvolumeclaims", "*"): {"get", "list", "watch", "update", "patch"},
    ("", "persistentvolumes", "*"): {"get", "list", "watch", "update", "patch"},
    ("storage.k8s.io", "storageclasses", "*"): {"get", "list", "watch"},
    ("storage.k8s.io", "csinodes", "*"): {"get", "list", "watch"},
    ("storage.k8s.io", "csidrivers", "*"): {"get", "list", "watch"},
    ("storage.k8s.io", "csistoragecapacities", "*"): {"get", "list", "watch"},
    ("storage.k8s.io", "volumeattachments", "*"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceslices", "*"): {"get", "list", "watch"},
    ("resource.k8s.io", "deviceclasses", "*"): {"get", "list", "watch"},
    ("resource.k8s.io", "devicetaintrules", "*"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceclaims", "*"): {"get", "list", "watch", "update", "create", "delete"},
    ("resource.k8s.io", "resourceclaims/status", "*"): {"update", "patch"},
    ("resource.k8s.io", "resourceclaims/binding", "*"): {"update", "patch"},
    ("scheduling.k8s.io", "podgroups", "*"): {"get", "list", "watch"},
    ("scheduling.k8s.io", "podgroups/status", "*"): {"patch"},
    ("scheduling.x-k8s.io", "podgroups", "*"): {"list", "watch"},
    ("coordination.k8s.io", "leases", "*"): {"create"},
    ("coordination.k8s.io", "leases", "outrigger"): {"get", "update"},
}


def k8s_documents(name: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The documents of deploy/kubernetes/NAME by (kind, name)."""
    docs = [d for d in yaml.safe_load_all((K8S_DEPLOY / name).read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def test_rbac_grants_the_scheduler_exactly_its_table_and_no_wildcard() -> None:
    rbac = k8s_documents("rbac.yaml")
    rules = rbac[("ClusterRole", "outrigger-scheduler")]["rules"] + rbac[("Role", "outrigger-leader-election")]["rules"]
    grants: dict[tuple[str, str, str], set[str]] = {}
    for rule in rules:
        assert "*" not in [*rule["apiGroups"], *rule["resources"], *rule["verbs"]], rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for name in rule.get("resourceNames") or ["*"]:
                    grants.setdefault((group, resource, name), set()).update(rule["verbs"])
    assert grants == OUTRIGGER_GRANTS
    assert rbac[("Role", "outrigger-leader-election")]["metadata"]["namespace"] == "outrigger"


def test_rbac_bindings_give_both_roles_to_the_service_account_the_framework_runs_as() -> None:
    rbac = k8s_documents("rbac.yaml")
    assert rbac[("ServiceAccount", "outrigger")]["metadata"]["namespace"] == SERVICE_ACCOUNT["namespace"]
    for binding, role, name in (("ClusterRoleBinding", "ClusterRole", "outrigger-scheduler"),
                                ("RoleBinding", "Role", "outrigger-leader-election")):
        assert (role, name) in rbac
        doc = rbac[(binding, name)]
        assert doc["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": name}
        assert doc["subjects"] == [SERVICE_ACCOUNT]
    framework = k8s_documents("framework.yaml")[("Deployment", "outrigger-framework")]["spec"]["template"]["spec"]
    assert framework["serviceAccountName"] == SERVICE_ACCOUNT["name"]
    assert framework.get("automountServiceAccountToken", True) is True
    # The plugin hosts never call the API server: no token in their pods.
    hosts = [d for d in k8s_documents("plugins.yaml").values() if d["kind"] == "Deployment"]
    assert [(h["metadata"]["name"], h["spec"]["template"]["spec"].get("serviceAccountName"),
             h["spec"]["template"]["spec"]["automountServiceAccountToken"]) for h in hosts] == [
        ("outrigger-coscheduling", None, False), ("outrigger-nodelabels", None, False),
        ("outrigger-provisioner", None, False), ("outrigger-tierzone", None, False)]
