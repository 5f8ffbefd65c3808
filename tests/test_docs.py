"""The documentation works: every command it shows is run here or checked against what it names.

Each fenced ``sh`` block of README.md and docs/*.md is split into commands, run in order, per
document, in a temporary stand-in for the repository (its entries linked in, ``docs/examples``
copied; ``cd docs/examples`` enters the copy; ``/tmp/...`` paths go to the temporary directory):

- ``outrigger ...`` (``> FILE`` allowed), ``python FILE.py`` and ``curl ...`` (pipelines allowed) are
  **run**: the console script, this interpreter, the shell (curl with ``--fail-with-body``: an HTTP error
  fails the command). ``outrigger serve`` and ``outrigger plugin serve`` start in the background and are
  waited for; every ``127.0.0.1:PORT`` of a document (in its commands and in the example files) moves to
  a free port, so runs never collide. A client command talking to a server gets three tries a second
  apart; a command that still fails fails the test.
- ``until curl ...; do sleep N; done`` (a curl pipeline waited on, e.g. for a configuration generation
  to be applied) is run by the shell until it succeeds, for at most :data:`WAIT_SECONDS`.
- ``cat > FILE <<'TAG'`` heredocs write the file; ``export NAME=value`` sets a variable for the
  commands after it; ``. .venv/bin/activate`` is the environment the test already runs in.
- Anything else must match one of :data:`CHECKS`: a pattern and a function that checks what the
  command names (the Dockerfile and image tag of a ``docker build``, the manifests of a ``kubectl``
  command, a Makefile target, a module's flags) and the test that exercises it. A command that is
  neither run nor checked fails the test, naming the file and line.

A ``json`` or ``text`` block right after a command block shows what the block's last command prints:
it is compared with what the command printed here (a table's AGE column and the latency columns of
``outrigger shadow-report``, which depend on the clock, are left out of the comparison). A plain block
after ``outrigger trace`` shows a span tree: every span it
names must be printed, in that place in the tree, with the attributes it shows (durations, ids and
values vary). The configuration reference names every field the
loaders accept and every ``outrigger`` flag, and relative links between the documents resolve.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from framework import config as kconfig
from framework.cli import parser as outrigger_parser
from framework.config import ConfigError
from framework.config import decoding as kdecoding
from framework.remote import config as remoteconfig

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
OUTRIGGER = str(Path(sys.executable).parent / "outrigger")
STARTUP_SECONDS = 30.0
COMMAND_SECONDS = 120.0
WAIT_SECONDS = 60.0  # the longest an `until curl ...; do sleep N; done` loop of a document runs here


# ---- reading the documents --------------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence
    lang: str
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


def blocks(path: Path) -> list[Block]:
    text = path.read_text()
    return [Block(path, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2)) for m in _FENCE.finditer(text)]


@dataclass
class Command:
    where: str
    text: str  # as written (continuations joined, comments dropped)
    words: list[str]
    env: dict[str, str] = field(default_factory=dict)
    background: bool = False
    heredoc: tuple[str, str] | None = None  # (file, content) of `cat > file <<'TAG'`

    @property
    def argv(self) -> list[str]:
        return self.words


_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_HEREDOC = re.compile(r"^cat\s*>\s*(\S+)\s*<<-?\s*'?(\w+)'?\s*$")


def commands(block: Block) -> list[Command]:
    """The commands of an ``sh`` block, in order."""
    lines = block.text.splitlines()
    out: list[Command] = []
    i = 0
    while i < len(lines):
        line_no = block.line + 1 + i
        line = lines[i]
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        words = shlex.split(line, comments=True)
        if not words:
            continue
        where = f"{block.path.relative_to(ROOT)}:{line_no}"
        m = _HEREDOC.match(" ".join(words)) if words[0] == "cat" else None
        if m is None and words[0] == "cat" and "<<" in line:
            m = _HEREDOC.match(line.split("#", 1)[0].strip())
        if m is not None:
            body = []
            while i < len(lines) and lines[i].strip() != m.group(2):
                body.append(lines[i])
                i += 1
            assert i < len(lines), f"{where}: heredoc {m.group(2)} is not closed"
            i += 1
            out.append(Command(where, line.strip(), words, heredoc=(m.group(1), "\n".join(body) + "\n")))
            continue
        background = words[-1] == "&"
        if background:
            words = words[:-1]
        elif words[-1].endswith("&") and not words[-1].endswith("&&"):
            words[-1] = words[-1][:-1]
            background = True
        env = {}
        while words and _ASSIGN.match(words[0]):
            name, value = _ASSIGN.match(words[0]).groups()  # type: ignore[union-attr]
            env[name] = value
            words = words[1:]
        text = " ".join(shlex.quote(w) for w in words) + (" &" if background else "")
        out.append(Command(where, text, words, env, background))
    return out


# ---- commands checked against what they name ---------------------------------------------------------


def _compose_images() -> dict[str, str]:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    return {s["image"]: s["build"].get("dockerfile", "Dockerfile") for s in services.values() if "build" in s}


def check_docker_build(argv: list[str]) -> None:
    assert argv[-1] == ".", "images are built from the repository root"
    dockerfile = argv[argv.index("-f") + 1] if "-f" in argv else "Dockerfile"
    tag = argv[argv.index("-t") + 1]
    assert (ROOT / dockerfile).is_file(), f"no {dockerfile}"
    assert _compose_images().get(tag) == dockerfile, f"docker-compose.yml builds no image {tag} from {dockerfile}"


def check_compose_up(argv: list[str]) -> None:
    assert (ROOT / "docker-compose.yml").is_file()


def _k8s_docs() -> list[dict[str, Any]]:
    out = []
    for path in sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml")):
        out.extend(d for d in yaml.safe_load_all(path.read_text()) if d and "kind" in d and "metadata" in d)
    return out


def _k8s_object(namespace: str, ref: str) -> dict[str, Any]:
    kind, _, name = ref.partition("/")
    kinds = {"service": "Service", "deployment": "Deployment", "configmap": "ConfigMap"}
    found = [d for d in _k8s_docs() if d["kind"] == kinds[kind] and d["metadata"]["name"] == name
             and d["metadata"].get("namespace") == namespace]
    assert len(found) == 1, f"deploy/kubernetes has no {kinds[kind]} {namespace}/{name}"
    return found[0]


def check_kubectl(argv: list[str]) -> None:
    args = argv[1:]
    namespace = ""
    if args[0] == "-n":
        namespace, args = args[1], args[2:]
    verb = args[0]
    if verb == "apply":
        assert args[1] == "-k" and (ROOT / args[2] / "kustomization.yaml").is_file(), args
    elif verb == "port-forward":
        svc = _k8s_object(namespace, args[1])
        _, remote = args[2].split(":")
        assert int(remote) in [p["port"] for p in svc["spec"]["ports"]], f"{args[1]} has no port {remote}"
    elif verb == "scale":
        _k8s_object(namespace, args[1])
        assert re.fullmatch(r"--replicas=\d+", args[2]), args
    else:
        raise AssertionError(f"kubectl {verb} is not checked here")


#: Makefile targets the docs may show, and what exercises each.
MAKE_TARGETS = {
    "demo": "tests/test_cli.py::test_demo_runs_end_to_end_and_exits_zero",
    "demo-cluster": "tests/test_kube_demo.py::test_demo_cluster_schedules_through_the_api_server_and_stops_everything",
    "test": "the test suite itself",
    "bench": "tests/test_bench.py::test_quick_bench_end_to_end",
    "compare": "tests/test_kube_compare.py (the same comparisons, small)",
    "fuzz": "tests/test_bad_input.py::test_make_fuzz_runs_the_fuzz_tests_with_a_long_random_budget",
    "faults": "tests/test_fault_harness.py::test_short_fault_run_keeps_every_invariant",
    "faults-cluster": "tests/test_kube_fault_harness.py (the same harness, short)",
    "install": "tests/test_dependencies.py::test_every_installed_package_is_the_locked_version",
    "lock": "tests/test_dependencies.py::test_lock_pins_every_declared_dependency_within_its_range_with_hashes",
    "test-latest": "CI's newest-versions job (.ci/run), checked by tests/test_dependencies.py",
    "go-proto": "tests/test_go_plugins.py::test_generated_go_code_is_current",
    "go-build": "tests/test_go_plugins.py (builds clients/go/cmd/* the same way); Session.go_host here",
    "go-test": "the test suite itself (make test runs it)",
}


def check_npm_ci(argv: list[str]) -> None:
    """``cd DIR && npm ci && cd BACK``: DIR has a package.json and the lock file ``npm ci`` installs from."""
    directory = argv[1]
    assert (ROOT / directory / "package.json").is_file(), f"no {directory}/package.json"
    assert (ROOT / directory / "package-lock.json").is_file(), f"no {directory}/package-lock.json"
    assert (ROOT / directory / argv[-1]).resolve() == ROOT, "the command does not come back to the root"


def check_wait_loop(argv: list[str]) -> None:
    """``until outrigger ... >/dev/null 2>&1; do sleep N; done``: the command waited on is a valid one
    (the servers it waits for are waited for here before the next command runs)."""
    inner = argv[1 : argv.index(">/dev/null")]
    assert inner[0] == "outrigger", inner
    try:
        outrigger_parser().parse_args(inner[1:])
    except SystemExit:
        raise AssertionError(f"`{' '.join(inner)}` is not a valid outrigger command line") from None


def check_make(argv: list[str]) -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in argv[1:]:
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"the Makefile has no target {target}"
        assert target in MAKE_TARGETS, f"make {target} is not exercised by a test (MAKE_TARGETS)"


def check_python_module(argv: list[str]) -> None:
    """``.venv/bin/python -m MODULE ARGS``: the module exists and accepts every flag shown."""
    assert argv[0] in (".venv/bin/python", "python"), argv
    module, args = argv[2], argv[3:]
    proc = subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True,
                          timeout=COMMAND_SECONDS, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    for word in args:
        if word.startswith("--"):
            assert re.search(rf"(^|\s){re.escape(word)}\b", proc.stdout), f"{module} has no flag {word}"
    if module == "tools.bench" and "--scenarios" in args:
        from tools.bench.scenarios import SCENARIOS

        names = args[args.index("--scenarios") + 1].split(",")
        assert set(names) <= set(SCENARIOS), names
    if module == "tools.compare" and "--workloads" in args:
        from tools.workloads import WORKLOADS

        names = args[args.index("--workloads") + 1].split(",")
        assert set(names) <= {*WORKLOADS, "none"}, names


#: Commands the test does not run, each with the check above that applies and the test(s) that run
#: what it does.
CHECKS: list[tuple[str, Callable[[list[str]], None], str]] = [
    (r"make( [\w.-]+)+", check_make, " ".join(MAKE_TARGETS.values())),
    (r"\.venv/bin/python -m tools\.bench( .*)?", check_python_module,
     "tests/test_bench.py::test_quick_bench_end_to_end, tests/test_bench.py::test_scenario_subset_and_unknown"),
    (r"\.venv/bin/python -m tools\.bench\.dra( .*)?", check_python_module,
     "tests/test_dra_allocator_cache.py::test_the_dra_bench_binds_every_pod_and_refuses_more_claims_than_devices"),
    (r"\.venv/bin/python -m tools\.compare( .*)?", check_python_module,
     "tests/test_kube_compare.py::test_every_pod_of_a_deterministic_workload_lands_where_kube_scheduler_puts_it, "
     "tests/test_kube_compare.py::test_bad_arguments_get_one_line_and_run_nothing"),
    (r"docker build .*", check_docker_build,
     "tests/test_deploy.py::test_python_images_install_the_package_and_run_as_a_non_root_user"),
    (r"docker compose up( --build)?", check_compose_up,
     "tests/test_deploy.py::test_docker_compose_config_accepts_the_compose_file, "
     "tests/test_deploy.py::test_compose_topology_on_loopback_schedules_through_the_same_configuration"),
    (r"kubectl .*", check_kubectl, "tests/test_kubernetes.py"),
    (r"cd ([\w/.-]+) && npm ci && cd [./]+", check_npm_ci, "the Node.js plugin tests (tests/ run it where node is)"),
    (r"until outrigger .* >/dev/null 2>&1; do sleep [\d.]+; done", check_wait_loop, "this test waits for servers"),
]


def _check_for(cmd: Command) -> tuple[Callable[[list[str]], None], str] | None:
    for pattern, check, tests in CHECKS:
        if re.fullmatch(pattern, " ".join(cmd.words)):
            return check, tests
    return None


def test_every_check_names_tests_that_exist() -> None:
    for _, _, tests in CHECKS:
        for ref in re.findall(r"tests/\S+?\.py(?:::\w+)?", tests):
            path, _, name = ref.partition("::")
            text = (ROOT / path).read_text()
            assert not name or re.search(rf"^def {name}\(", text, re.M), f"{ref} does not exist"


# ---- running the documented commands --------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Session:
    """One document's commands, run in order.

    They start in a stand-in for the repository root (``root``: the repository's entries linked in,
    ``docs/examples`` a copy), so paths like ``tests/data/...`` work while files the commands write
    land in the temporary directory; ``/tmp/...`` paths go there too.
    """

    def __init__(self, root: Path, ports: dict[str, str]) -> None:
        self.root = root
        self.cwd = root
        self.ports = ports  # "127.0.0.1:50051" -> "127.0.0.1:<free>"
        self.procs: list[tuple[Command, subprocess.Popen[str]]] = []
        self.outputs: dict[str, str] = {}  # command text -> stdout of its last run
        self.exported: dict[str, str] = {}  # `export NAME=value`
        self.tmp = root / "tmp"
        self.tmp.mkdir(exist_ok=True)

    def moved(self, text: str) -> str:
        for old, new in self.ports.items():
            text = text.replace(old, new)
        return text

    def word(self, word: str) -> str:
        word = self.moved(word)
        return str(self.tmp / word[len("/tmp/") :]) if word.startswith("/tmp/") else word

    def env(self, cmd: Command) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "OUTRIGGER_SERVER"}
        env["PATH"] = os.pathsep.join([str(Path(OUTRIGGER).parent), env.get("PATH", "")])
        env.update({k: self.word(v) for k, v in {**self.exported, **cmd.env}.items()})
        return env

    def run(self, cmd: Command) -> None:
        words = cmd.words
        if cmd.heredoc is not None:
            path, content = cmd.heredoc
            target = (self.cwd / self.word(path)).resolve()
            assert target.is_relative_to(self.root.resolve()), f"{cmd.where}: writes outside the test's directory"
            target.write_text(self.moved(content))
        elif words in ([".", ".venv/bin/activate"], ["source", ".venv/bin/activate"]):
            pass
        elif words[0] == "export" and len(words) == 2 and _ASSIGN.match(words[1]):
            name, value = words[1].split("=", 1)
            self.exported[name] = value
        elif words[0] == "cd" and len(words) == 2:
            assert words[1:] == ["docs/examples"], f"{cmd.where}: only `cd docs/examples` is understood here"
            self.cwd = self.root / "docs" / "examples"
        elif words[0] == "outrigger":
            self.outrigger(cmd)
        elif words[0] in ("python", "python3") and len(words) == 2 and words[1].endswith(".py"):
            self.script(cmd)
        elif words[0] == "curl":
            self.curl(cmd)
        elif re.fullmatch(r"until curl .*; do sleep [\d.]+; done", " ".join(words)):
            self.wait_loop(cmd)
        elif words[0] == "node" and len(words) > 1 and words[1].endswith(".js"):
            self.node(cmd)
        elif words[0].startswith("clients/go/.bin/"):
            self.go_host(cmd)
        else:
            found = _check_for(cmd)
            if found is None:
                pytest.fail(f"{cmd.where}: `{cmd.text}` is neither run by tests/test_docs.py nor in its CHECKS "
                            "(add a check naming the test that exercises it)")
            check, _ = found
            try:
                check(cmd.words)
            except AssertionError as exc:
                pytest.fail(f"{cmd.where}: `{cmd.text}`: {exc}")

    def outrigger(self, cmd: Command) -> None:
        words, target = cmd.words, None
        if ">" in words:  # `outrigger ... > FILE`: what it prints is written to FILE too
            at = words.index(">")
            assert at == len(words) - 2, f"{cmd.where}: `> FILE` ends the command"
            words, target = words[:at], (self.cwd / self.word(words[-1])).resolve()
            assert target.is_relative_to(self.root.resolve()), f"{cmd.where}: writes outside the test's directory"
        argv = [OUTRIGGER, *(self.word(w) for w in words[1:])]
        try:
            args = outrigger_parser().parse_args(argv[1:])
        except SystemExit as exc:
            if exc.code != 0:  # 0: --version or --help, which print and exit
                pytest.fail(f"{cmd.where}: `{cmd.text}` is not a valid outrigger command line")
            args = None
        server_like = args is not None and (
            args.command == "serve" or (args.command == "plugin" and args.plugin_command == "serve"))
        if server_like:
            assert "--listen" in cmd.words, f"{cmd.where}: give --listen so that the test can move the port"
            if args.command == "serve":
                argv = self.secure_port(argv)
            self.start(cmd, argv, args.listen)
            return
        assert not cmd.background, f"{cmd.where}: only servers run in the background"
        # A client may ask before the server has acted on what it was just given (a pod applied a moment
        # ago is being scheduled): a few bounded retries, as a person would retry.
        self.outputs[cmd.text] = self.until_ok(cmd, argv, attempts=3 if "--server" in cmd.words else 1)
        if target is not None:
            target.write_text(self.outputs[cmd.text])

    def secure_port(self, argv: list[str]) -> list[str]:
        """``--secure-port N`` of ``outrigger serve`` moves with the document's ``127.0.0.1:N`` (to the same
        free port), or to a free port of its own; without the flag the port stays off (tests/conftest.py)."""
        at = argv.index("--secure-port") + 1 if "--secure-port" in argv else 0
        if not at or argv[at] == "0":
            return argv
        moved = self.ports.setdefault(f"127.0.0.1:{argv[at]}", f"127.0.0.1:{free_port()}")
        return [*argv[:at], moved.rpartition(":")[2], *argv[at + 1:]]

    def script(self, cmd: Command) -> None:
        """``python FILE.py``: one of docs/examples' scripts, run with this interpreter."""
        assert (self.cwd / cmd.words[1]).is_file(), f"{cmd.where}: no {cmd.words[1]} here"
        self.outputs[cmd.text] = self.until_ok(cmd, [sys.executable, cmd.words[1]])

    def curl(self, cmd: Command) -> None:
        """``curl ...`` (a pipeline allowed): run by the shell, which must exit 0; an HTTP error status
        fails curl (``--fail-with-body``), so a documented path that answers 404 fails the test."""
        if shutil.which("curl") is None:
            pytest.skip(f"{cmd.where}: curl is not installed (Debian: apt-get install curl)")
        words = [w for word in cmd.words for w in ([word, "--fail-with-body"] if word == "curl" else [word])]
        line = " ".join(w if w == "|" else shlex.quote(self.word(w)) for w in words)
        self.outputs[cmd.text] = self.until_ok(cmd, ["bash", "-o", "pipefail", "-c", line], attempts=3)

    def wait_loop(self, cmd: Command) -> None:
        """``until curl ... | grep -q ...; do sleep N; done``: the condition, run by the shell until it
        succeeds, within :data:`WAIT_SECONDS` (curl with ``--fail-with-body``, as above)."""
        if shutil.which("curl") is None:
            pytest.skip(f"{cmd.where}: curl is not installed (Debian: apt-get install curl)")
        words = cmd.words[1:cmd.words.index("do")]
        words[-1] = words[-1].removesuffix(";")
        words = [w for word in words for w in ([word, "--fail-with-body"] if word == "curl" else [word])]
        line = " ".join(w if w == "|" else shlex.quote(self.word(w)) for w in words)
        deadline = time.monotonic() + WAIT_SECONDS
        while subprocess.run(["bash", "-o", "pipefail", "-c", line], capture_output=True, cwd=self.cwd,
                             env=self.env(cmd), timeout=COMMAND_SECONDS).returncode != 0:
            if time.monotonic() > deadline:
                pytest.fail(f"{cmd.where}: `{cmd.text}` still waiting after {WAIT_SECONDS:g}s")
            time.sleep(0.2)

    def node(self, cmd: Command) -> None:
        """``node FILE.js --listen ADDR &``: a plugin host in JavaScript, started like ``plugin serve``."""
        if shutil.which("node") is None:
            pytest.skip(f"{cmd.where}: node is not installed")
        script = self.cwd / cmd.words[1]
        if not (script.parent / "node_modules" / ".package-lock.json").is_file():
            from test_node_plugin import _npm_ci  # installs clients/node's locked dependencies (bounded)

            npm = shutil.which("npm")
            why = "npm is not installed" if npm is None else _npm_ci(npm)
            if why:
                pytest.skip(f"{cmd.where}: {why}")
        assert cmd.background and "--listen" in cmd.words, f"{cmd.where}: node servers run in the background"
        argv = ["node", *(self.word(w) for w in cmd.words[1:])]
        self.start(cmd, argv, argv[argv.index("--listen") + 1])

    def go_host(self, cmd: Command) -> None:
        """``clients/go/.bin/CMD --listen ADDR &``: a Go plugin host, built as ``make go-build`` builds it."""
        if shutil.which("go") is None:
            pytest.skip(f"{cmd.where}: go is not installed")
        from tools.bench.gohost import go_binary

        assert cmd.background and "--listen" in cmd.words, f"{cmd.where}: Go plugin hosts run in the background"
        argv = [go_binary(Path(cmd.words[0]).name), *(self.word(w) for w in cmd.words[1:])]
        self.start(cmd, argv, argv[argv.index("--listen") + 1])

    def until_ok(self, cmd: Command, argv: list[str], attempts: int = 1) -> str:
        for attempt in range(attempts):
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_SECONDS, cwd=self.cwd,
                                  env=self.env(cmd))
            if proc.returncode == 0:
                return proc.stdout
            if attempt + 1 < attempts:
                time.sleep(1.0)
        pytest.fail(f"{cmd.where}: `{cmd.text}` exited {proc.returncode}:\n{proc.stderr}")

    def start(self, cmd: Command, argv: list[str], listen: str) -> None:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                cwd=self.cwd, env=self.env(cmd))
        self.procs.append((cmd, proc))
        deadline = time.monotonic() + STARTUP_SECONDS
        while not _serving(listen, tls="--tls-cert" in cmd.words):
            if proc.poll() is not None:
                err = proc.stderr.read() if proc.stderr else ""
                pytest.fail(f"{cmd.where}: `{cmd.text}` exited {proc.returncode}:\n{err}")
            if time.monotonic() > deadline:
                pytest.fail(f"{cmd.where}: `{cmd.text}` did not serve on {listen} within {STARTUP_SECONDS:g}s")
            time.sleep(0.1)

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(15)
            if proc.stderr is not None:
                proc.stderr.close()


def _serving(address: str, tls: bool = False) -> bool:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    if tls:  # a TLS server (docs/security.md) accepts connections once it serves
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=1.0).close()
        except OSError:
            return False
        return True

    try:
        with grpc.insecure_channel(address) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1.0)
    except grpc.RpcError:
        return False
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


def _addresses(text: str) -> set[str]:
    return set(re.findall(r"127\.0\.0\.1:\d{4,5}", text))


def stand_in_root(tmp_path: Path) -> Path:
    """A directory that looks like the repository: its entries linked in, ``docs/examples`` copied."""
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    for entry in ROOT.iterdir():
        if entry.name not in ("docs", ".git", ".venv"):
            (root / entry.name).symlink_to(entry)
    for entry in (ROOT / "docs").iterdir():
        if entry.name != "examples":
            (root / "docs" / entry.name).symlink_to(entry)
    shutil.copytree(EXAMPLES, root / "docs" / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    return root


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Callable[[Path], Session]]:
    made: list[Session] = []

    def make(doc: Path) -> Session:
        root = stand_in_root(tmp_path)
        examples = [p for p in (root / "docs" / "examples").rglob("*") if p.is_file()]
        texts = [doc.read_text(), *(p.read_text() for p in examples)]
        ports = {a: f"127.0.0.1:{free_port()}" for a in sorted(set().union(*map(_addresses, texts)))}
        s = Session(root, ports)
        for p in examples:
            p.write_text(s.moved(p.read_text()))
        made.append(s)
        return s

    yield make
    for s in made:
        s.stop()


def _example_files(examples: Path) -> set[str]:
    return {str(p.relative_to(examples)) for p in examples.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_documented_command_runs_or_is_checked(doc: Path, session: Callable[[Path], Session]) -> None:
    s = session(doc)
    examples = s.root / "docs" / "examples"
    shipped = _example_files(examples)
    doc_blocks = blocks(doc)
    for i, block in enumerate(doc_blocks):
        if block.lang not in ("sh", "bash", "shell", "console"):
            continue
        assert block.lang == "sh", f"{block.where}: use ```sh for commands (this test reads those)"
        cmds = commands(block)
        for cmd in cmds:
            s.run(cmd)
        following = doc_blocks[i + 1] if i + 1 < len(doc_blocks) else None
        if following is None or not _adjacent(doc, block, following):
            continue
        last = cmds[-1]
        traced = last.words[:2] == ["outrigger", "trace"] and following.lang == ""
        if following.lang in ("json", "text") or traced:
            printed = s.outputs.get(last.text)
            assert printed is not None, f"{following.where}: shows output of `{last.text}`, which printed nothing"
            why = f"{following.where}: not what `{last.text}` prints"
            if traced:
                missing = _trace_not_printed(following.text, printed)
                assert not missing, f"{why}: {missing}\nprinted:\n{printed}"
            elif following.lang == "json":
                assert json.loads(printed) == json.loads(following.text), why
            else:
                assert _without_age(printed.strip()) == _without_age(following.text.strip()), f"{why}:\n{printed}"
    # What a reader runs leaves docs/examples as it is (files of their own go under /tmp).
    written = _example_files(examples) - shipped
    assert written == set(), f"{doc.relative_to(ROOT)}: its commands write into docs/examples: {sorted(written)}"


#: Headers of columns whose cells depend on the clock: kubectl's tables and describe's ages, and the
#: latencies of ``outrigger shadow-report``.
CLOCK_COLUMNS = ("AGE", "Age", "P50(ms)", "P99(ms)")


def _without_age(text: str) -> list[list[str]]:
    """A text's lines as cells (split at runs of 2+ spaces), with the cells under a header of
    :data:`CLOCK_COLUMNS` replaced by the header."""
    rows = [re.split(r"\s{2,}", line.strip()) for line in text.splitlines()]
    columns: dict[int, str] = {}
    for row in rows:
        headers = {i: cell for i, cell in enumerate(row) if cell in CLOCK_COLUMNS}
        if headers:
            columns = headers
            continue
        for i, header in columns.items():
            if len(row) > i:
                row[i] = header
    return rows


_SPAN = re.compile(r"^([│ ]*(?:[├└]── )?)(\S+)(.*)$")


def _spans(tree: str) -> list[tuple[int, str, set[str]]]:
    """The span lines of ``outrigger trace``'s tree: (depth, span name, attribute keys shown)."""
    out = []
    for line in tree.splitlines():
        m = _SPAN.match(line)
        if m is None or line.startswith("trace ") or line.startswith("("):
            continue
        depth = len(m.group(1)) // 4
        out.append((depth, m.group(2), set(re.findall(r"\b([\w.]+)=", m.group(3)))))
    return out


def _trace_not_printed(documented: str, printed: str) -> list[str]:
    """The documented span lines that the printed tree lacks, in order (a documented tree may leave
    lines out, not add or move them)."""
    actual = _spans(printed)
    missing = []
    at = 0
    for depth, name, keys in _spans(documented):
        found = next((j for j in range(at, len(actual)) if actual[j][:2] == (depth, name) and keys <= actual[j][2]),
                     None)
        if found is None:
            missing.append(f"{'    ' * depth}{name} {' '.join(sorted(keys))}".rstrip())
        else:
            at = found + 1
    return missing


def _adjacent(doc: Path, first: Block, second: Block) -> bool:
    """``second`` follows ``first`` with at most a short paragraph between them."""
    lines = doc.read_text().splitlines()
    end = first.line + first.text.count("\n") + 1
    return second.line - end <= 4 and not any(ln.startswith("#") for ln in lines[end : second.line - 1])


# ---- the command parser itself -------------------------------------------------------------------------


def test_commands_are_split_with_heredocs_backgrounds_env_and_continuations() -> None:
    text = (
        ". .venv/bin/activate\n"
        "PYTHONPATH=. outrigger plugin serve m:C --listen 127.0.0.1:50061 &   # a comment\n"
        "cat > x.yaml <<'YAML'\n"
        "a: 1   # kept\n"
        "YAML\n"
        "outrigger get pods \\\n"
        "    --server 127.0.0.1:50051\n"
    )
    got = commands(Block(ROOT / "README.md", 1, "sh", text))
    assert [(c.words, c.env, c.background, c.heredoc) for c in got] == [
        ([".", ".venv/bin/activate"], {}, False, None),
        (["outrigger", "plugin", "serve", "m:C", "--listen", "127.0.0.1:50061"], {"PYTHONPATH": "."}, True, None),
        (["cat", ">", "x.yaml", "<<YAML"], {}, False, ("x.yaml", "a: 1   # kept\n")),
        (["outrigger", "get", "pods", "--server", "127.0.0.1:50051"], {}, False, None),
    ]
    assert [c.where for c in got] == ["README.md:2", "README.md:3", "README.md:4", "README.md:7"]


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("outrigger serve --no-such-flag --listen 127.0.0.1:1", "is not a valid outrigger command line"),
        ("frobnicate --all", "is neither run by tests/test_docs.py nor in its CHECKS"),
        ("docker build -t outrigger/nothing:1 .", "docker-compose.yml builds no image outrigger/nothing:1"),
        ("kubectl -n outrigger scale deployment/nothing --replicas=2", "has no Deployment outrigger/nothing"),
        ("make nothing", "the Makefile has no target nothing"),
    ],
)
def test_a_command_that_no_longer_works_fails(tmp_path: Path, command: str, message: str) -> None:
    s = Session(stand_in_root(tmp_path), {})
    (cmd,) = commands(Block(ROOT / "README.md", 1, "sh", command + "\n"))
    with pytest.raises(pytest.fail.Exception, match=re.escape(message)):
        s.run(cmd)
    s.stop()


# ---- the python examples ----------------------------------------------------------------------------


def test_readme_plugin_code_is_the_example_that_runs() -> None:
    shown = [b.text for b in blocks(ROOT / "README.md") if b.lang == "python"]
    assert (EXAMPLES / "mypkg" / "plugins.py").read_text() in shown


# ---- the configuration reference --------------------------------------------------------------------

CONFIGURATION = ROOT / "docs" / "configuration.md"


def _section(title: str) -> str:
    """The text under the heading ``title`` of docs/configuration.md, up to the next heading of the
    same or a higher level."""
    lines = CONFIGURATION.read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(#+) (.*)$", line)
        if m and m.group(2).strip() == title:
            level = len(m.group(1))
            body = []
            for nxt in lines[i + 1 :]:
                h = re.match(r"^(#+) ", nxt)
                if h and len(h.group(1)) <= level:
                    break
                body.append(nxt)
            return "\n".join(body)
    raise AssertionError(f"docs/configuration.md has no section {title!r}")


def _documented(text: str) -> set[str]:
    """Names written in backticks: `field`, and each part of `a.b[].c`."""
    out: set[str] = set()
    for code in re.findall(r"`([^`\n]+)`", text):
        out.add(code)
        out.update(re.findall(r"[A-Za-z]\w*|\*", code))
    return out


def test_configuration_reference_names_every_kube_scheduler_field() -> None:
    text = _documented(_section("KubeSchedulerConfiguration"))
    fields = (
        set(kdecoding._TOP_LEVEL_FIELDS) | set(kdecoding._PROFILE_FIELDS) | set(kconfig.EXTENSION_POINTS)
        | {kconfig.MULTI_POINT, "enabled", "disabled", "name", "weight", "args", "*"}
        | set(kdecoding._LEADER_ELECTION_FIELDS) | set(kdecoding._CLIENT_CONNECTION_FIELDS)
    )
    assert fields - text == set()
    assert {p.name for p in kconfig.DEFAULT_MULTIPOINT} - text == set()


def test_configuration_reference_names_every_remote_plugins_field() -> None:
    text = _documented(_section("RemotePlugins"))
    fields = {"apiVersion", "kind", "plugins", "name", "address", "addresses", "deadlines", "failurePolicy",
              "batchSize", "connectTimeout", "default", "normalizeScore", "configure", remoteconfig.KIND}
    assert fields - text == set()
    # The keys of an entry, as the parser lists them when it meets an unknown one.
    with pytest.raises(ConfigError) as err:
        remoteconfig.parse_remote_plugins(
            "apiVersion: outrigger.io/v1alpha1\nkind: RemotePlugins\nplugins:\n- {name: x, address: 'a:1', bogus: 1}\n")
    m = re.search(r"unknown field \(allowed: ([^)]*)\)", str(err.value))
    assert m is not None, str(err.value)
    assert set(m.group(1).split(", ")) - text == set()


def _cli_commands() -> dict[str, set[str]]:
    """``outrigger`` command path ("serve", "plugin serve", ...) -> its long options, from the parser."""
    import argparse

    out: dict[str, set[str]] = {}

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        opts = {s for a in p._actions if a.help != argparse.SUPPRESS  # hidden: older spellings
                for s in a.option_strings if s.startswith("--") and s != "--help"}
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if path:
            out[path] = opts
        for sub in subs:
            for name, child in sub.choices.items():
                walk(child, f"{path} {name}".strip())

    walk(outrigger_parser(), "")
    return {k: v for k, v in out.items() if not any(other.startswith(k + " ") for other in out)}


def test_configuration_reference_documents_every_outrigger_command_and_flag() -> None:
    text = _section("The outrigger command")
    for path, flags in _cli_commands().items():
        m = re.search(rf"^#+ `outrigger {re.escape(path)}`\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
        assert m is not None, f"docs/configuration.md does not document `outrigger {path}`"
        documented = set(re.findall(r"`(--[\w-]+)", m.group(1)))
        assert flags - documented == set(), f"`outrigger {path}`: flags not documented"
        assert documented - flags == set(), f"`outrigger {path}`: documented flags that do not exist"


# ---- links -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        assert (doc.parent / target).exists(), f"{doc.relative_to(ROOT)} links to {target}, which does not exist"


# ---- how printed output is compared ------------------------------------------------------------------

TREE = """\
trace 0123
SchedulePod 1.000 ms pod=default/web result=bound
├── SchedulingCycle 0.900 ms result=scheduled
│   ├── PreFilter 0.100 ms status.code=Success
│   │   └── PreFilter/NodeResourcesFit 0.050 ms status.code=Success
│   └── Filter 0.200 ms filter.nodes_in=3 status.code=Success
└── BindingCycle 0.100 ms result=bound
    └── Bind 0.050 ms status.code=Success
"""


@pytest.mark.parametrize(
    ("documented", "missing"),
    [
        (TREE, []),
        # Lines left out (and other durations and values) are fine...
        ("SchedulePod 9 ms pod=default/x\n└── BindingCycle 1 ms\n    └── Bind 2 ms\n", []),
        # ...a span not printed, one in another place, or an attribute not printed are not.
        ("SchedulePod 1 ms\n├── SchedulingCycle 1 ms\n│   ├── PreScore 1 ms\n", ["        PreScore"]),
        ("SchedulePod 1 ms\n└── Bind 1 ms\n", ["    Bind"]),
        ("SchedulePod 1 ms\n├── SchedulingCycle 1 ms\n│   ├── Filter 1 ms filter.to_find=3\n",
         ["        Filter filter.to_find"]),
        # In the printed order only.
        ("SchedulePod 1 ms\n└── BindingCycle 1 ms\n├── SchedulingCycle 1 ms\n", ["    SchedulingCycle"]),
    ],
    ids=["same", "shortened", "not-emitted", "moved", "attribute", "reordered"],
)
def test_a_documented_trace_names_only_spans_that_are_printed(documented: str, missing: list[str]) -> None:
    assert _trace_not_printed(documented, TREE) == missing


@pytest.mark.parametrize(
    ("documented", "printed", "same"),
    [
        ("NAME   AGE\nweb    3s\n", "NAME   AGE\nweb    12m\n", True),
        ("NAME   AGE   IP\nweb    3s    <none>\n", "NAME   AGE   IP\nweb    1h2m   <none>\n", True),
        ("NAME   AGE\nweb    3s\n", "NAME   AGE\napi    3s\n", False),
        ("Events:\n  Type    Reason     Age   From\n  Normal  Scheduled  3s    x\n",
         "Events:\n  Type    Reason     Age           From\n  Normal  Scheduled  2m (x2 over 5m)   x\n", True),
        ("cpu:  500m\n", "cpu:  400m\n", False),  # quantities are not ages
        ("PLUGIN  SCORE  P50(ms)  P99(ms)\nF       2      1.9      3.4\n",
         "PLUGIN  SCORE  P50(ms)  P99(ms)\nF       2      0.8      12.1\n", True),
        ("PLUGIN  SCORE  P50(ms)  P99(ms)\nF       2      1.9      3.4\n",
         "PLUGIN  SCORE  P50(ms)  P99(ms)\nF       1      1.9      3.4\n", False),
    ],
    ids=["age", "age-mid-table", "other-name", "describe-events", "no-age-column", "latencies", "other-count"],
)
def test_printed_tables_are_compared_without_their_ages(documented: str, printed: str, same: bool) -> None:
    assert (_without_age(documented) == _without_age(printed)) is same
