"""A kube-scheduler HTTP/JSON extender (the bench's BenchTier logic) and the plugin that calls one.

The server speaks the extender v1 wire format of ``k8s.io/kube-scheduler/extender/v1`` (Go field
names, no JSON tags, so ``Pod``, ``Nodes``, ``NodeNames``, ...):

- ``POST {prefix}/filter``: ``ExtenderArgs`` ``{"Pod": v1.Pod, "Nodes": {"items": [v1.Node, ...]}}`` or,
  when the extender is ``nodeCacheCapable``, ``{"Pod": v1.Pod, "NodeNames": ["n1", ...]}``; answers
  ``ExtenderFilterResult`` ``{"Nodes" | "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes",
  "Error"}`` (the same shape as the request: node objects back for node objects, names for names).
- ``POST {prefix}/prioritize``: the same ``ExtenderArgs``; answers ``HostPriorityList``
  ``[{"Host": name, "Score": 0..10}]`` (``MaxExtenderPriority`` is 10; kube-scheduler multiplies by
  ``MaxNodeScore / MaxExtenderPriority`` and by the extender's weight).
- ``POST /cache/nodes`` (not part of the extender API): a ``v1.NodeList`` for the node cache a
  ``nodeCacheCapable`` extender keeps (a real one fills it from an informer).

The logic is :class:`tools.bench.plugins.BenchTier`'s: nodes without the ``bench.outrigger.dev/tier`` label
fail (unresolvable), gold scores 10, silver 5, bronze 0.

Run it with ``python -m tools.bench.httpextender --listen 127.0.0.1:0``: the first line of output is
``extender listening on HOST:PORT``. :class:`ExtenderPlugin` is a Filter+Score plugin that calls an
extender from the framework's Filter/Score path with a keep-alive ``http.client`` connection (the
blocking calls run on a one-thread executor so the event loop keeps running).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import http.client
import json
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import numpy.typing as npt

from pluginhost.errors import OutriggerError
from pluginhost.model import Node, Pod
from pluginhost.plugin import MAX_NODE_SCORE, CycleState, FilterPlugin, FilterResult, Handle, NodeBatch, ScorePlugin
from pluginhost.status import Code

__all__ = [
    "MAX_EXTENDER_PRIORITY",
    "ExtenderError",
    "ExtenderPlugin",
    "ExtenderServer",
    "main",
    "pod_object",
]

MAX_EXTENDER_PRIORITY = 10  # k8s.io/kube-scheduler/extender/v1.MaxExtenderPriority
TIER_LABEL = "bench.outrigger.dev/tier"
TIER_PRIORITY = {"gold": 10, "silver": 5, "bronze": 0}
DEFAULT_TIMEOUT = 10.0

IntArray = npt.NDArray[np.int64]


# ---- the server ------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: one connection for every call of a client
    server: ExtenderServer

    def setup(self) -> None:
        super().setup()
        # As Go's net/http does: no Nagle delay between the response's header and body writes.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _reply(self, code: int, body: Any) -> None:
        data = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            args = json.loads(raw) if raw else {}
        except ValueError as exc:
            self._reply(400, {"Error": f"invalid JSON: {exc}"})
            return
        path = self.path.rstrip("/")
        prefix = self.server.prefix
        if path == prefix + "/filter":
            self._reply(200, self.server.filter(args))
        elif path == prefix + "/prioritize":
            self._reply(200, self.server.prioritize(args))
        elif path == "/cache/nodes":
            self.server.cache_nodes(args)
            self._reply(200, {"nodes": len(self.server.node_labels)})
        else:
            self._reply(404, {"Error": f"no such path {self.path}"})


class ExtenderServer(ThreadingHTTPServer):
    """The BenchTier extender (see the module docstring)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], prefix: str = "", label: str = TIER_LABEL) -> None:
        super().__init__(address, _Handler)
        self.prefix = prefix.rstrip("/")
        self.label = label
        self.node_labels: dict[str, dict[str, str]] = {}  # the node cache (nodeCacheCapable)
        self.calls = {"filter": 0, "prioritize": 0}

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"{host!s}:{port}"

    def cache_nodes(self, node_list: dict[str, Any]) -> None:
        for node in node_list.get("items") or []:
            meta = node.get("metadata") or {}
            self.node_labels[str(meta.get("name", ""))] = dict(meta.get("labels") or {})

    def _candidates(self, args: dict[str, Any]) -> list[tuple[str, dict[str, str], Any]]:
        """(name, labels, the node object or None) of every candidate of ``args``."""
        names = args.get("NodeNames")
        if names is not None:
            cache = self.node_labels
            return [(n, cache.get(n, {}), None) for n in names]
        items = (args.get("Nodes") or {}).get("items") or []
        out = []
        for node in items:
            meta = node.get("metadata") or {}
            out.append((str(meta.get("name", "")), meta.get("labels") or {}, node))
        return out

    def filter(self, args: dict[str, Any]) -> dict[str, Any]:
        self.calls["filter"] += 1
        key = self.label
        by_names = args.get("NodeNames") is not None
        passed: list[Any] = []
        unresolvable: dict[str, str] = {}
        reason = f"node(s) didn't have label {key}"
        for name, labels, node in self._candidates(args):
            if key in labels:
                passed.append(name if by_names else node)
            else:
                unresolvable[name] = reason
        result: dict[str, Any] = {"FailedNodes": {}, "FailedAndUnresolvableNodes": unresolvable, "Error": ""}
        if by_names:
            result["NodeNames"] = passed
        else:
            result["Nodes"] = {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": passed}
        return result

    def prioritize(self, args: dict[str, Any]) -> list[dict[str, Any]]:
        self.calls["prioritize"] += 1
        key = self.label
        return [
            {"Host": name, "Score": TIER_PRIORITY.get(labels.get(key, ""), 0)}
            for name, labels, _node in self._candidates(args)
        ]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench.httpextender", description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT (port 0: a free one)")
    p.add_argument("--prefix", default="", help="URL prefix of the filter and prioritize verbs")
    args = p.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    server = ExtenderServer((host or "127.0.0.1", int(port)), args.prefix)
    # The first line of output says where the server listens (the benchmark reads the port from it).
    print(f"extender listening on {server.address}", flush=True)

    def stop(_sig: int, _frame: Any) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()
    return 0


# ---- the client: an extender as a Filter+Score plugin ----------------------------------------------


class ExtenderError(OutriggerError, RuntimeError):
    """An extender call failed (transport, HTTP status, or the result's ``Error``)."""


def pod_object(pod: Pod) -> dict[str, Any]:
    """The v1.Pod the extender receives: the pod's manifest, with the fields the framework owns."""
    raw = getattr(pod, "raw", None)
    if isinstance(raw, dict) and raw:
        return raw
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod.name, "namespace": pod.namespace}}


class ExtenderPlugin(FilterPlugin, ScorePlugin):
    """Calls a kube-scheduler extender at Filter and Score, like kube-scheduler's ``HTTPExtender``.

    Args (``pluginConfig``): ``urlPrefix`` (``http://127.0.0.1:PORT``), ``filterVerb`` (``filter``),
    ``prioritizeVerb`` (``prioritize``), ``nodeCacheCapable`` (send node names instead of v1 Node
    objects), ``timeout`` (seconds per call). The profile's Score weight plays the extender's
    ``weight``; scores 0..10 are scaled by ``MaxNodeScore / MaxExtenderPriority``, as kube-scheduler
    does. Every call counts its request and response bytes in :attr:`calls` / :attr:`bytes_sent` /
    :attr:`bytes_received`, and the time spent in calls (building the JSON included) in :attr:`seconds`.
    """

    name = "Extender"

    def __init__(self, args: dict[str, Any] | None = None, handle: Handle | None = None) -> None:
        args = args or {}
        prefix = str(args.get("urlPrefix", "http://127.0.0.1:8888"))
        rest = prefix.split("://", 1)[-1]
        hostport, _, path = rest.partition("/")
        host, _, port = hostport.rpartition(":")
        self.host = host or hostport
        self.port = int(port) if host else 80
        self.path = "/" + path.strip("/") if path.strip("/") else ""
        self.filter_verb = str(args.get("filterVerb", "filter"))
        self.prioritize_verb = str(args.get("prioritizeVerb", "prioritize"))
        self.node_cache_capable = bool(args.get("nodeCacheCapable", False))
        self.timeout = float(args.get("timeout", DEFAULT_TIMEOUT))
        self.calls = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.seconds = 0.0  # inside calls: encoding, the round trip, decoding
        self._conn: http.client.HTTPConnection | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="extender")

    # ---- transport -------------------------------------------------------------------------------

    def _post_blocking(self, verb: str, body: bytes) -> Any:
        for attempt in (0, 1):
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            conn = self._conn
            try:
                if conn.sock is None:
                    conn.connect()
                    sock: socket.socket | None = conn.sock  # set by connect()
                    assert sock is not None
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's client does
                conn.request("POST", f"{self.path}/{verb}", body, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._conn = None
                if attempt == 0 and isinstance(exc, http.client.RemoteDisconnected | BrokenPipeError):
                    continue  # the server closed an idle keep-alive connection: one fresh try
                raise ExtenderError(f"extender {self.host}:{self.port} {verb}: {exc}") from None
            self.calls += 1
            self.bytes_sent += len(body)
            self.bytes_received += len(data)
            if resp.status != 200:
                raise ExtenderError(f"extender {verb}: HTTP {resp.status}: {data[:200]!r}")
            return json.loads(data)
        raise ExtenderError("unreachable")  # pragma: no cover

    async def _post(self, verb: str, args: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()

        def call() -> Any:
            body = json.dumps(args, separators=(",", ":")).encode()
            return self._post_blocking(verb, body)

        started = time.perf_counter()
        try:
            return await loop.run_in_executor(self._executor, call)
        finally:
            self.seconds += time.perf_counter() - started

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._executor.shutdown(wait=False)

    # ---- ExtenderArgs ----------------------------------------------------------------------------

    def _args(self, pod: Pod, batch: NodeBatch) -> dict[str, Any]:
        if self.node_cache_capable:
            return {"Pod": pod_object(pod), "NodeNames": batch.names}
        nodes: list[Node] = [n for _r, n in batch.nodes()]
        items = [n.raw or {"metadata": {"name": n.name, "labels": n.labels}} for n in nodes]
        return {"Pod": pod_object(pod), "Nodes": {"apiVersion": "v1", "kind": "NodeList", "items": items}}

    # ---- Filter / Score --------------------------------------------------------------------------

    async def filter(self, state: CycleState, pod: Pod, batch: NodeBatch) -> FilterResult:
        result = await self._post(self.filter_verb, self._args(pod, batch))
        if not isinstance(result, dict):
            raise ExtenderError(f"extender filter: expected an ExtenderFilterResult, got {type(result).__name__}")
        if result.get("Error"):
            raise ExtenderError(f"extender filter: {result['Error']}")
        failed: dict[str, str] = result.get("FailedNodes") or {}
        unresolvable: dict[str, str] = result.get("FailedAndUnresolvableNodes") or {}
        if self.node_cache_capable:
            passed = set(result.get("NodeNames") or ())
        else:
            passed = {
                str((n.get("metadata") or {}).get("name", "")) for n in (result.get("Nodes") or {}).get("items") or ()
            }
        names = batch.names
        codes = np.zeros(len(names), dtype=np.int8)
        index = np.zeros(len(names), dtype=np.int32)
        reasons: dict[tuple[str, ...], int] = {}
        for i, name in enumerate(names):
            if name in passed:
                continue
            if name in unresolvable:
                codes[i], why = Code.UnschedulableAndUnresolvable, unresolvable[name]
            else:
                codes[i], why = Code.Unschedulable, failed.get(name, "node(s) rejected by the extender")
            index[i] = reasons.setdefault((why,), len(reasons))
        return FilterResult(codes, index, list(reasons))

    async def score(self, state: CycleState, pod: Pod, batch: NodeBatch) -> IntArray:
        result = await self._post(self.prioritize_verb, self._args(pod, batch))
        if not isinstance(result, list):
            raise ExtenderError(f"extender prioritize: expected a HostPriorityList, got {type(result).__name__}")
        by_host = {str(h.get("Host", "")): int(h.get("Score", 0)) for h in result}
        scale = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
        return np.fromiter(
            (min(max(by_host.get(n, 0), 0), MAX_EXTENDER_PRIORITY) * scale for n in batch.names),
            dtype=np.int64,
            count=len(batch),
        )


if __name__ == "__main__":
    sys.exit(main())
