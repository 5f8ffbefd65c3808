"""The framework's HTTP port (``outrigger serve --http 127.0.0.1:10251``): metrics, debug switches,
plugins' debug endpoints and the framework's node view. Read-only except the debug switch.

===========================================  ====================================================
``GET /metrics``                             Prometheus text format (:mod:`framework.metrics`)
``GET /debug/flags/scores``                  ``{"top": N}``: the debug scores switch (0: off)
``PUT|POST /debug/flags/scores?top=N``       switch debug scores to the top N nodes (body ``N`` works too)
``GET /debug/scores/<namespace>/<name>``     a pod's last debug score table
``GET /apis/v1/__services__``                the plugins' debug endpoints and the framework's own
``GET /apis/v1/plugins/<plugin>/<path>``     a plugin's debug endpoint (``?profile=`` picks the profile)
``GET /apis/v1/nodes/<name>``                a node as the scheduler sees it in its snapshot
===========================================  ====================================================

Errors are JSON ``{"error": "..."}`` with 404 (unknown path, plugin, endpoint or node), 400 (a bad
value), 405 (a write to a read-only path) or 502 (a remote plugin's endpoint failed). A small asyncio
HTTP/1.1 server (one request per connection) on the scheduler's loop: nothing here is on the hot path.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import urllib.parse
from collections.abc import Mapping
from typing import Any

import grpc

from pluginhost import pb

from .debugscores import DebugScores
from .metrics import CONTENT_TYPE, SchedulerMetrics

__all__ = ["HttpServer", "node_view"]

log = logging.getLogger("outrigger.http")

MAX_BODY = 64 * 1024
REQUEST_TIMEOUT = 10.0
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 413: "Payload Too Large",
            500: "Internal Server Error", 502: "Bad Gateway"}


class _HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def node_view(scheduler: Any, name: str) -> dict[str, Any] | None:
    """A node from the scheduler's current snapshot: allocatable, requested, pods, labels, taints."""
    snap = scheduler.cache.snapshot()
    row = snap.row(name)
    if row is None:
        return None
    node = snap.nodes[row]
    return {
        "name": node.name,
        "generation": int(snap.generation),
        "unschedulable": bool(node.unschedulable),
        "labels": dict(node.labels),
        "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints],
        "allocatable": {r: int(snap.allocatable[row, c]) for r, c in snap.columns.items()},
        "requested": {r: int(snap.requested[row, c]) for r, c in snap.columns.items()},
        "pods": sorted(p.key for p in snap.pods[row]),
    }


class HttpServer:
    """The HTTP endpoints of one framework service (see the module docstring)."""

    def __init__(self, scheduler: Any, *, metrics: SchedulerMetrics | None = None,
                 scores: DebugScores | None = None) -> None:
        self.scheduler = scheduler
        self.metrics = metrics
        self.scores = scores
        self._server: asyncio.Server | None = None
        self.port = 0
        self.host = "127.0.0.1"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self, listen: str) -> HttpServer:
        host, sep, port = listen.rpartition(":")
        if not sep or not port.isdigit():
            raise OSError(f"cannot listen on {listen!r}: expected HOST:PORT")
        host = host.strip("[]") or "0.0.0.0"
        try:
            self._server = await asyncio.start_server(self._handle, host, int(port))
        except OSError as exc:
            raise OSError(f"cannot serve HTTP on {listen!r}: {exc.strerror or exc}") from None
        self.host = host
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    # ---- HTTP plumbing -------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, ctype, body = await asyncio.wait_for(self._request(reader), REQUEST_TIMEOUT)
        except _HttpError as exc:
            status, ctype, body = exc.status, "application/json", _json({"error": str(exc)})
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            writer.close()
            return
        except Exception as exc:  # a bug here must not take the service down
            log.exception("HTTP request failed")
            status, ctype, body = 500, "application/json", _json({"error": f"internal error: {exc}"})
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")
        try:
            writer.write(head.encode() + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _request(self, reader: asyncio.StreamReader) -> tuple[int, str, bytes]:
        line = (await reader.readline()).decode("latin-1").strip()
        parts = line.split()
        if len(parts) != 3:
            raise _HttpError(400, f"bad request line {line!r}")
        method, target, _ = parts
        length = 0
        while True:
            h = (await reader.readline()).decode("latin-1")
            if h in ("\r\n", "\n", ""):
                break
            name, _, value = h.partition(":")
            if name.strip().lower() == "content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise _HttpError(400, f"bad Content-Length {value.strip()!r}") from None
        if length > MAX_BODY:
            raise _HttpError(413, f"request body of {length} bytes is over {MAX_BODY}")
        body = await reader.readexactly(length) if length > 0 else b""
        url = urllib.parse.urlsplit(target)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        return await self.route(method.upper(), urllib.parse.unquote(url.path), query, body)

    # ---- routes --------------------------------------------------------------------------------

    async def route(self, method: str, path: str, query: Mapping[str, str], body: bytes) -> tuple[int, str, bytes]:
        if path == "/debug/flags/scores":
            return self._scores_flag(method, query, body)
        if method != "GET":
            raise _HttpError(405, f"{path} is read-only (GET)")
        if path == "/metrics":
            if self.metrics is None:
                raise _HttpError(404, "metrics are off")
            return 200, CONTENT_TYPE, self.metrics.exposition()
        if path.startswith("/debug/scores/"):
            return 200, "application/json", _json(self._pod_scores(path[len("/debug/scores/"):]))
        if path == "/apis/v1/__services__":
            return 200, "application/json", _json(self.services())
        if path.startswith("/apis/v1/nodes/"):
            name = path[len("/apis/v1/nodes/"):]
            view = node_view(self.scheduler, name)
            if view is None:
                raise _HttpError(404, f"node {name!r} not found")
            return 200, "application/json", _json(view)
        if path.startswith("/apis/v1/plugins/"):
            plugin, _, sub = path[len("/apis/v1/plugins/"):].partition("/")
            text = await self.plugin_endpoint(plugin, sub, query.get("profile", ""))
            return 200, "application/json", text.encode()
        raise _HttpError(404, f"no such path {path!r} (see /apis/v1/__services__)")

    def _scores_flag(self, method: str, query: Mapping[str, str], body: bytes) -> tuple[int, str, bytes]:
        if self.scores is None:
            raise _HttpError(404, "debug scores are not available on this server")
        if method in ("PUT", "POST"):
            raw = query.get("top", body.decode("utf-8", "replace").strip())
            try:
                top = int(raw)
            except ValueError:
                raise _HttpError(400, f"debug scores: top must be an integer >= 0, got {raw!r}") from None
            try:
                self.scores.set_top(top)
            except ValueError as exc:
                raise _HttpError(400, str(exc)) from None
            log.warning("debug scores %s", f"on: top {top} nodes" if top else "off")
        elif method != "GET":
            raise _HttpError(405, f"use GET, PUT or POST on /debug/flags/scores, not {method}")
        return 200, "application/json", _json({"top": self.scores.top})

    def _pod_scores(self, ref: str) -> dict[str, Any]:
        ns, _, name = ref.partition("/")
        if not name:
            ns, name = "default", ns
        table = self.scores.get(f"{ns}/{name}") if self.scores is not None else None
        if table is None:
            raise _HttpError(404, f"no debug score table for pod {ns}/{name} (are debug scores on?)")
        return table

    # ---- plugins' debug endpoints --------------------------------------------------------------

    def _plugins(self) -> list[tuple[str, Any]]:
        """(profile, plugin) for every plugin instance, profiles in configuration order."""
        return [(profile, pl) for profile, fwk in self.scheduler.profiles.items() for pl in fwk.plugins.values()]

    @staticmethod
    def _paths(pl: Any) -> list[str]:
        manifest = getattr(pl, "manifest", None)
        if manifest is not None and hasattr(manifest, "debug_paths"):
            return list(manifest.debug_paths)
        return list(pl.debug_endpoints())

    def services(self) -> dict[str, Any]:
        seen: dict[str, dict[str, Any]] = {}
        for profile, pl in self._plugins():
            paths = self._paths(pl)
            if not paths:
                continue
            entry = seen.setdefault(pl.name, {
                "plugin": pl.name, "remote": hasattr(pl, "endpoint"), "profiles": [],
                "endpoints": [f"/apis/v1/plugins/{pl.name}/{p}" for p in paths],
            })
            entry["profiles"].append(profile)
        return {
            "plugins": [seen[k] for k in sorted(seen)],
            "framework": ["/apis/v1/nodes/<name>", "/metrics", "/debug/flags/scores",
                          "/debug/scores/<namespace>/<name>"],
        }

    async def plugin_endpoint(self, plugin: str, path: str, profile: str = "") -> str:
        found = [(p, pl) for p, pl in self._plugins() if pl.name == plugin and (not profile or p == profile)]
        if not found:
            where = f" in profile {profile!r}" if profile else ""
            raise _HttpError(404, f"no plugin named {plugin!r}{where}")
        prof, pl = found[0]
        paths = self._paths(pl)
        if path not in paths:
            have = ", ".join(paths) or "none"
            raise _HttpError(404, f"plugin {plugin!r} has no debug endpoint {path!r} (it has: {have})")
        if hasattr(pl, "endpoint") and getattr(pl, "manifest", None) is not None:
            replica = pl.endpoint.pick()
            request = pb.plugin.DebugRequest(plugin=plugin, profile=prof, path=path)
            try:
                reply = await replica.stub.Debug(request, timeout=pl.endpoint.config.deadline("default"))
            except grpc.RpcError as exc:
                code = exc.code()
                status = 404 if code == grpc.StatusCode.NOT_FOUND else 502
                raise _HttpError(status, f"{code.name}: {exc.details()} ({pl.endpoint.where(replica)})") from None
            return str(reply.json)
        try:
            value = pl.debug_endpoints()[path]()
            if inspect.isawaitable(value):
                value = await value
            return json.dumps(value)
        except Exception as exc:
            raise _HttpError(500, f"debug endpoint {path!r} of plugin {plugin!r} failed: {exc}") from None


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, sort_keys=False).encode()
