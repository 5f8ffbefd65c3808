"""Every ``outrigger`` command's output arrives whole whatever the reader's pace, as a real subprocess
(``.venv/bin/outrigger``) writing more than a pipe holds: a slow reader (nothing read until the pipe is
full, then small reads) gets every byte, on an ordinary pipe and on one whose write end is non-blocking
(O_NONBLOCK belongs to the pipe's open file description: a parent process, or anything sharing the
descriptor, may have set it). A reader that goes away ends the command quietly with 141 (as coreutils
and kubectl: 128 + SIGPIPE); a failed write (stdout on /dev/full) is an error naming it, exit 1.

The online commands talk to one framework service on 127.0.0.1 (tests/framework_thread.py), shared by
the module; it holds N nodes and N bound pods with long names, so each command prints well over 64 KiB."""

from __future__ import annotations

import fcntl
import json
import os
import select
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from framework_thread import FrameworkThread

from clients import SchedulerClient
from framework.observe.observability import ObservabilityConfig
from framework.observe.tracing import TracingConfig
from framework.profiles import load_scheduler_config

ROOT = Path(__file__).resolve().parent.parent
OUTRIGGER = str(Path(sys.executable).parent / "outrigger")
N = 400  # nodes, and pods (each one bound to a node)
LONG = "x" * 180  # names this long: every listing is well over a pipe's 64 KiB
CREATED = "2020-01-01T00:00:00Z"
F_GETPIPE_SZ = 1032  # fcntl.F_GETPIPE_SZ (Python 3.10+ on Linux), spelled out for type checkers
WAIT = 120.0  # seconds: the bound of every wait for the command under test
CLOSED = 141
NO_SPACE = "error: cannot write the output to stdout: No space left on device\n"


def node_name(i: int) -> str:
    return f"node-{i:03d}-{LONG}"


def pod_name(i: int) -> str:
    return f"pod-{i:03d}-{LONG}"


def _node(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node_name(i), "creationTimestamp": CREATED, "labels": {"group": _group(i)}},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "10"}}}


def _pod(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name(i), "namespace": "default", "creationTimestamp": CREATED,
                         "labels": {"app": "big", "group": _group(i)}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


def _group(i: int) -> str:
    """A fifth of the objects are ``described`` (describe's output is long per object)."""
    return "described" if i % 5 == 0 else "other"


# kube-scheduler's default profile, scoring every node (debug-scores shows them all).
ALL_NODES = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 100
"""


def _documents(objects: list[dict[str, Any]]) -> str:
    return "---\n".join(yaml.safe_dump(o, sort_keys=False) for o in objects)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A framework service holding N nodes and N pods bound to them (traced, with debug scores), and a
    directory of files: cluster.yaml (what it holds), nodes.yaml, pending.yaml (the pods, unbound),
    template.yaml (a what-if node), scheduler.yaml."""
    tmp = tmp_path_factory.mktemp("cli-output")
    nodes, pods = [_node(i) for i in range(N)], [_pod(i) for i in range(N)]
    (tmp / "cluster.yaml").write_text(_documents(nodes + pods))
    (tmp / "pending.yaml").write_text(_documents(pods))
    (tmp / "all-nodes.yaml").write_text(ALL_NODES)
    (tmp / "template.yaml").write_text(_documents([{**_node(N), "metadata": {"name": "template"}}]))
    (tmp / "pod.yaml").write_text(_documents([_pod(N)]))
    (tmp / "scheduler.yaml").write_text((ROOT / "docs/examples/scheduler.yaml").read_text())
    obs = ObservabilityConfig(tracing=TracingConfig(store=10 * N), debug_scores=N)  # every pod's trace kept
    with FrameworkThread(lambda registry: load_scheduler_config(tmp / "all-nodes.yaml", registry),
                         observability=obs) as fw, SchedulerClient(fw.address) as c:
        c.apply_files([tmp / "cluster.yaml"])
        for _ in range(1500):  # bounded: 30 s
            if sum(p.phase == "Bound" for p in c.list_pods()) == N:
                break
            time.sleep(0.02)
        assert sum(p.phase == "Bound" for p in c.list_pods()) == N
        # For the delete commands (namespace spare: not listed with the others).
        c.apply_text(_documents([{**_pod(N), "metadata": {"name": f"spare-{s}", "namespace": "spare"}}
                                 for s in ("gone", "full")]))
        yield fw.address, tmp


def _start(argv: list[str], stdout: int, stderr: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen([OUTRIGGER, *argv], stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, cwd=ROOT)


def _queued(fd: int) -> int:
    """Bytes waiting in the pipe whose read end is ``fd``."""
    return int(struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0])


def _tries(address: str, run: Callable[[], tuple[int, Any, str]]) -> tuple[int, Any, str]:
    """``run()``, again (three tries) when the command did not get through to the framework at all: a
    connection the loaded test host did not set up in time, not what is tested here."""
    for _ in range(2):
        code, out, err = run()
        if (code, err) != (1, f"error: cannot reach the framework at {address}\n"):
            return code, out, err
    return run()


def _wait_full(proc: subprocess.Popen[bytes], r: int, capacity: int) -> None:
    """Until the pipe is full: its capacity reached, or 0.5 s without a byte more (a writer of small
    pieces leaves each page part empty, so its full pipe holds less than its capacity); or the command
    is done."""
    deadline = time.monotonic() + WAIT
    last, still = -1, 0
    while proc.poll() is None and time.monotonic() < deadline:
        queued = _queued(r)
        if queued >= capacity - 4096 or still >= 10:
            return
        still = still + 1 if queued == last and queued > 0 else 0
        last = queued
        time.sleep(0.05)


def slow_read(argv: list[str], *, nonblocking: bool) -> tuple[int, bytes, str]:
    """Run ``outrigger argv`` into a pipe read slowly: nothing until the pipe is full or the command is
    done, then 4 KiB at a time with a pause every 64 KiB; (exit code, stdout, stderr)."""
    r, w = os.pipe()
    if nonblocking:
        os.set_blocking(w, False)
    capacity = fcntl.fcntl(w, F_GETPIPE_SZ)
    chunks: list[bytes] = []
    with tempfile.TemporaryFile() as err:
        proc = _start(argv, w, err)
        os.close(w)
        try:
            _wait_full(proc, r, capacity)
            for n in range(1, 25_000):  # bounded: 100 MB
                if not select.select([r], [], [], WAIT)[0]:
                    raise AssertionError(f"no output for {WAIT:g}s: {argv}")
                chunk = os.read(r, 4096)
                if not chunk:
                    break
                chunks.append(chunk)
                if n % 16 == 0:
                    time.sleep(0.02)  # the writer fills the pipe again
            code = proc.wait(WAIT)
        finally:
            os.close(r)
            if proc.poll() is None:
                proc.kill()
                proc.wait(WAIT)
        err.seek(0)
        return code, b"".join(chunks), err.read().decode()


PODS = [pod_name(i) for i in range(N)]
NODES = [node_name(i) for i in range(N)]
DESCRIBED = [i for i in range(N) if _group(i) == "described"]
OFFLINE = ["--config", "{dir}/scheduler.yaml", "--cluster", "{dir}/cluster.yaml", "-f", "{dir}/pod.yaml"]
WHAT_IF = ["--config", "{dir}/scheduler.yaml", "--cluster", "{dir}/pending.yaml", "--what-if-nodes",
           "{dir}/template.yaml"]
APPLIED = [("Node", n) for n in NODES] + [("Pod", p) for p in PODS]


def _argv(template: list[str], address: str, tmp: Path, spare: str = "") -> list[str]:
    argv = [a.format(dir=tmp, pod=PODS[0], spare=spare) for a in template]
    online = argv[0] not in ("demo", "--version", "--help") and "--cluster" not in argv and "--help" not in argv
    return argv + (["--server", address] if online else [])


def first_words(text: str) -> list[str]:
    return [line.split()[0] for line in text.splitlines() if line.strip()]


def json_docs(text: str) -> list[Any]:
    """The JSON documents of ``text``, one after another (``get -w -o json``)."""
    decoder, docs, at = json.JSONDecoder(), [], 0
    while at < len(text.rstrip()):
        doc, at = decoder.raw_decode(text, at)
        docs.append(doc)
        at += len(text[at:]) - len(text[at:].lstrip())
    return docs


def names(items: list[dict[str, Any]]) -> list[str]:
    return [i["metadata"]["name"] for i in items]


def explained_nodes(pod: str) -> Callable[[str], list[str]]:
    """The nodes an ``explain`` table of ``pod`` lists (its first line names the pod and where it goes)."""

    def shown(text: str) -> list[str]:
        head = text.splitlines()[0]
        assert head.startswith(f"pod default/{pod}: Success -> node-"), head
        return sorted(w for w in first_words(text) if w.startswith("node-"))

    return shown


def scored(data: dict[str, Any]) -> tuple[int, int]:
    """debug-scores: (nodes it says were scored, nodes it lists)."""
    return data["scored_nodes"], len(data["nodes"])


def scored_table(text: str) -> tuple[int, int]:
    head = text.splitlines()[0]
    assert head.startswith(f"pod default/{PODS[0]} attempt 1: "), head
    return int(head.split(": ")[1].split()[0]), sum(w.startswith("node-") for w in first_words(text))


#: (id, argv with {dir} and {pod}, what the output shows, what it must show)
SLOW: list[tuple[str, list[str], Callable[[str], Any], Any]] = [
    ("get-pods-table", ["get", "pods"], first_words, ["NAME", *PODS]),
    ("get-pods-wide", ["get", "pods", "-o", "wide"], first_words, ["NAME", *PODS]),
    ("get-pods-name", ["get", "pods", "-o", "name"], str, "".join(f"pod/{p}\n" for p in PODS)),
    ("get-pods-json", ["get", "pods", "-o", "json"], lambda t: names(json.loads(t)["items"]), PODS),
    ("get-pods-yaml", ["get", "pods", "-o", "yaml"], lambda t: names(yaml.safe_load(t)["items"]), PODS),
    ("get-nodes-table", ["get", "nodes"], first_words, ["NAME", *NODES]),
    ("get-nodes-wide", ["get", "nodes", "-o", "wide"], first_words, ["NAME", *NODES]),
    ("get-nodes-name", ["get", "nodes", "-o", "name"], str, "".join(f"node/{n}\n" for n in NODES)),
    ("get-nodes-json", ["get", "nodes", "-o", "json"], lambda t: names(json.loads(t)["items"]), NODES),
    ("get-nodes-yaml", ["get", "nodes", "-o", "yaml"], lambda t: names(yaml.safe_load(t)["items"]), NODES),
    # get -w: the list, then changes (none come) until the request timeout.
    ("get-w-table", ["get", "pods", "-w", "--request-timeout", "3s"], first_words, ["NAME", *PODS]),
    ("get-w-wide", ["get", "pods", "-w", "--request-timeout", "3s", "-o", "wide"], first_words, ["NAME", *PODS]),
    ("get-w-name", ["get", "pods", "-w", "--request-timeout", "3s", "-o", "name"], str,
     "".join(f"pod/{p}\n" for p in PODS)),
    ("get-w-json", ["get", "pods", "-w", "--request-timeout", "3s", "-o", "json"],
     lambda t: names(json_docs(t)), PODS),
    ("get-w-yaml", ["get", "pods", "-w", "--request-timeout", "3s", "-o", "yaml"],
     lambda t: names([d for d in yaml.safe_load_all(t) if d is not None]), PODS),
    ("describe-pods", ["describe", "pods", "-l", "group=described"],
     lambda t: [line.split()[1] for line in t.splitlines() if line.startswith("Name:")],
     [PODS[i] for i in DESCRIBED]),
    ("describe-nodes", ["describe", "nodes", "-l", "group=described"],
     lambda t: [line.split()[1] for line in t.splitlines() if line.startswith("Name:")],
     [NODES[i] for i in DESCRIBED]),
    ("explain-table", ["explain", "{pod}"], explained_nodes(PODS[0]), NODES),
    ("explain-json", ["explain", "{pod}", "-o", "json"], lambda t: sorted(json.loads(t)["nodes"]), NODES),
    ("explain-yaml", ["explain", "{pod}", "-o", "yaml"], lambda t: sorted(yaml.safe_load(t)["nodes"]), NODES),
    # Offline (the user's case): the pod, its nodes and the scheduler worked out from files.
    ("explain-offline-table", ["explain", *OFFLINE], explained_nodes(pod_name(N)), NODES),
    ("explain-offline-json", ["explain", *OFFLINE, "-o", "json"], lambda t: sorted(json.loads(t)["nodes"]), NODES),
    ("explain-offline-yaml", ["explain", *OFFLINE, "-o", "yaml"], lambda t: sorted(yaml.safe_load(t)["nodes"]),
     NODES),
    ("what-if-table", ["explain", *WHAT_IF], lambda t: first_words(t)[2:], [f"default/{p}" for p in PODS]),
    ("what-if-json", ["explain", *WHAT_IF, "-o", "json"], lambda t: [p["pod"] for p in json.loads(t)["pods"]],
     [f"default/{p}" for p in PODS]),
    ("what-if-yaml", ["explain", *WHAT_IF, "-o", "yaml"], lambda t: [p["pod"] for p in yaml.safe_load(t)["pods"]],
     [f"default/{p}" for p in PODS]),
    ("watch-table", ["watch", "--type", "bound", "--count", str(N)],
     lambda t: sorted(line.split()[2] for line in t.splitlines()), sorted(f"pod/default/{p}" for p in PODS)),
    ("watch-json", ["watch", "--type", "bound", "--count", str(N), "-o", "json"],
     lambda t: sorted(json.loads(line)["object"]["name"] for line in t.splitlines()), PODS),
    ("watch-yaml", ["watch", "--type", "bound", "--count", str(N), "-o", "yaml"],
     lambda t: sorted(d["object"]["name"] for d in yaml.safe_load_all(t)), PODS),
    ("debug-scores-table", ["debug-scores", "{pod}"], scored_table, (N, N)),
    ("debug-scores-json", ["debug-scores", "{pod}", "-o", "json"], lambda t: scored(json.loads(t)), (N, N)),
    ("debug-scores-yaml", ["debug-scores", "{pod}", "-o", "yaml"], lambda t: scored(yaml.safe_load(t)), (N, N)),
    ("apply-table", ["apply", "-f", "{dir}/cluster.yaml", "--dry-run"], str,
     "".join(f"{k.lower()}/{'default/' if k == 'Pod' else ''}{n} unchanged (dry run)\n" for k, n in APPLIED)),
    ("apply-json", ["apply", "-f", "{dir}/cluster.yaml", "--dry-run", "-o", "json"],
     lambda t: [(a["object"]["kind"], a["object"]["name"], a["action"]) for a in json.loads(t)],
     [(k, n, "unchanged") for k, n in APPLIED]),
    ("apply-yaml", ["apply", "-f", "{dir}/cluster.yaml", "--dry-run", "-o", "yaml"],
     lambda t: [(a["object"]["kind"], a["object"]["name"], a["action"]) for a in yaml.safe_load(t)],
     [(k, n, "unchanged") for k, n in APPLIED]),
]


#: The user's report (offline explain, -o json, read after a delay), and one online command, on an
#: ordinary pipe; every case on a non-blocking one.
BLOCKING = ("explain-offline-json", "get-pods-json")


@pytest.mark.parametrize(
    ("argv", "shown", "want", "nonblocking"),
    [pytest.param(a, s, w, True, id=f"{i}-nonblocking") for i, a, s, w in SLOW]
    + [pytest.param(a, s, w, False, id=i) for i, a, s, w in SLOW if i in BLOCKING])
def test_a_slow_reader_gets_the_whole_output(served: tuple[str, Path], argv: list[str],
                                            shown: Callable[[str], Any], want: Any, nonblocking: bool) -> None:
    code, out, err = _tries(served[0], lambda: slow_read(_argv(argv, *served), nonblocking=nonblocking))
    assert (code, err) == (0, "")
    assert len(out) > 64 * 1024  # more than a pipe holds: the writer had to wait for the reader
    assert out.endswith(b"\n")
    assert shown(out.decode()) == want


def read_first_line(argv: list[str], *, gone: bool) -> tuple[int, str, str]:
    """Run ``outrigger argv`` into a pipe whose reader takes the first line and closes it (``| head -n
    1``), or (``gone``) was closed before the command started; (exit code, first line, stderr)."""
    r, w = os.pipe()
    if gone:
        os.close(r)
    head = b""
    with tempfile.TemporaryFile() as err:
        proc = _start(argv, w, err)
        os.close(w)
        try:
            for _ in range(1000):  # bounded: the line is at most 512 KB
                if gone or b"\n" in head:
                    break
                if not select.select([r], [], [], WAIT)[0]:
                    raise AssertionError(f"no output for {WAIT:g}s: {argv}")
                chunk = os.read(r, 512)
                if not chunk:
                    break
                head += chunk
        finally:
            if not gone:
                os.close(r)
        try:
            code = proc.wait(WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(WAIT)
        err.seek(0)
        return code, head.decode().partition("\n")[0], _own(err.read().decode())


def _own(err: str) -> str:
    """stderr without ``demo``'s progress lines (periodic plain lines when stderr is not a terminal)."""
    return "".join(line for line in err.splitlines(keepends=True) if not line.startswith("scheduling: "))


#: (id, argv, its first line): output more than a pipe holds, its reader gone after the first line.
HEADS: list[tuple[str, list[str], str]] = [
    ("get-pods", ["get", "pods", "-o", "name"], f"pod/{PODS[0]}"),
    ("get-nodes", ["get", "nodes", "-o", "yaml"], "apiVersion: v1"),
    ("get-w", ["get", "pods", "-w", "--request-timeout", "30s", "-o", "name"], f"pod/{PODS[0]}"),
    ("describe", ["describe", "pods", "-l", "group=described"], f"Name:         {PODS[0]}"),
    ("explain", ["explain", "{pod}", "-o", "json"], "{"),
    ("explain-offline", ["explain", *OFFLINE, "-o", "json"], "{"),
    ("what-if", ["explain", *WHAT_IF, "-o", "yaml"], "whatIf:"),
    ("watch", ["watch", "--type", "bound", "-o", "yaml"], "---"),
    ("debug-scores", ["debug-scores", "{pod}", "-o", "json"], "{"),
    ("apply", ["apply", "-f", "{dir}/cluster.yaml", "--dry-run"], f"node/{NODES[0]} unchanged (dry run)"),
]
#: (id, argv): the commands that print less than a pipe holds, their reader gone before they printed.
SMALL: list[tuple[str, list[str]]] = [
    ("version", ["--version"]),
    ("help", ["--help"]),
    ("get-help", ["get", "--help"]),
    ("trace", ["trace", "{pod}"]),
    ("delete", ["delete", "pod", "spare-{spare}", "-n", "spare"]),  # each test deletes its own
    ("demo", ["demo", "--nodes", "10", "--pods", "30", "--in-tree-only"]),
]
#: Every command, its stdout on /dev/full.
EVERY = [(i, a) for i, a, _ in HEADS] + SMALL


@pytest.mark.parametrize(("argv", "first"), [pytest.param(a, f, id=i) for i, a, f in HEADS])
def test_a_reader_gone_after_the_first_line_ends_the_command_quietly(served: tuple[str, Path], argv: list[str],
                                                                     first: str) -> None:
    assert _tries(served[0], lambda: read_first_line(_argv(argv, *served), gone=False)) == (CLOSED, first, "")


@pytest.mark.parametrize("argv", [pytest.param(a, id=i) for i, a in SMALL])
def test_a_reader_gone_before_the_output_ends_the_command_quietly(served: tuple[str, Path],
                                                                  argv: list[str]) -> None:
    assert _tries(served[0], lambda: read_first_line(_argv(argv, *served, spare="gone"), gone=True)) == \
        (CLOSED, "", "")


@pytest.mark.parametrize("argv", [pytest.param(a, id=i) for i, a in EVERY])
def test_a_failed_write_is_an_error_naming_it(served: tuple[str, Path], argv: list[str]) -> None:

    def run() -> tuple[int, str, str]:
        with open("/dev/full", "wb") as full:
            proc = subprocess.run([OUTRIGGER, *_argv(argv, *served, spare="full")], stdin=subprocess.DEVNULL,
                                  stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=WAIT)
        return proc.returncode, "", _own(proc.stderr)

    assert _tries(served[0], run) == (1, "", NO_SPACE)
