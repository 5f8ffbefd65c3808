"""The framework's HTTP endpoints, served by aiohttp on the secure port (HTTPS, authenticated and
authorized: :mod:`framework.observe`) and, for local use, on the plain ``--http`` port.

===========================================  ====================================================
``GET /healthz``, ``/livez``, ``/readyz``    named checks, kube's way (``?verbose``, ``?exclude=``,
                                             ``/readyz/<check>``): :mod:`framework.observe.health`
``GET /configz``                             the effective KubeSchedulerConfiguration
``GET /metrics``                             Prometheus text format (:mod:`framework.observe.metrics`)
``GET /debug/flags/scores``                  ``{"top": N}``: the debug scores switch (0: off)
``PUT|POST /debug/flags/scores?top=N``       switch debug scores to the top N nodes (body ``N`` works too)
``GET /debug/scores/<namespace>/<name>``     a pod's last debug score table
``GET /apis/v1/__services__``                the plugins' debug endpoints and the framework's own
``GET /apis/v1/plugins/<plugin>/<path>``     a plugin's debug endpoint (``?profile=`` picks the profile)
``GET /apis/v1/nodes/<name>``                a node as the scheduler sees it in its snapshot
``GET /ui/...``                              the web console and its JSON APIs (:mod:`framework.console`)
===========================================  ====================================================

Errors are JSON ``{"error": "..."}`` with 404 (unknown path, plugin, endpoint or node), 400 (a bad
value), 405 (a write to a read-only path), 408 (a body not sent within :data:`REQUEST_TIMEOUT`), 413 (a
body over :data:`MAX_BODY`), 502 (a remote plugin's endpoint failed) or 503 (no answer within
:data:`REQUEST_TIMEOUT`); a caller the secure port turns away gets a Kubernetes ``Status`` with 401, 403
or 500. Connections are kept alive (:data:`IDLE_TIMEOUT`); request lines and header fields are limited
to :data:`MAX_LINE` bytes and :data:`MAX_HEADERS` headers (400 beyond). The server runs on the
scheduler's loop: nothing here is on the hot path.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import grpc
from aiohttp import web

from ..hooks import OutOfProcess
from ..remote.errors import RemotePluginError
from .auth import Gate, status_body
from .certs import ServingTLS
from .configz import configz
from .debugscores import DebugScores
from .health import ENDPOINTS, HealthChecks
from .metrics import CONTENT_TYPE, SchedulerMetrics

__all__ = ["IDLE_TIMEOUT", "MAX_BODY", "MAX_HEADERS", "MAX_LINE", "REQUEST_TIMEOUT", "HttpServer", "node_view"]

log = logging.getLogger("outrigger.http")

#: Largest request body (bytes); the only writes are the debug switch's.
MAX_BODY = 64 * 1024
#: Seconds to receive a request's body and answer it.
REQUEST_TIMEOUT = 10.0
#: Seconds a connection may sit idle (or send its request line and headers) before it is closed.
IDLE_TIMEOUT = 90.0
#: Longest request line or header field (bytes), and most header fields.
MAX_LINE = 8190
MAX_HEADERS = 128

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, sort_keys=False).encode()


class HttpServer:
    """The HTTP endpoints of one framework service on one listener: plain HTTP (``tls`` None, no
    ``gate``: every caller allowed) or the secure port (``tls`` and ``gate``)."""

    def __init__(self, scheduler: Any, *, metrics: SchedulerMetrics | None = None,
                 scores: DebugScores | None = None, checks: HealthChecks | None = None,
                 tls: ServingTLS | None = None, gate: Gate | None = None, console: Any = None) -> None:
        self.scheduler = scheduler
        self.console = console
        self.metrics = metrics
        self.scores = scores
        self.checks = checks if checks is not None else HealthChecks()
        self.tls = tls
        self.gate = gate
        self._runner: web.AppRunner | None = None
        self._watches: list[asyncio.Task[None]] = []  # the certificate and token files' reloads
        self.port = 0
        self.host = "127.0.0.1"

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.address}"

    def app(self) -> web.Application:
        """The aiohttp application (one per listener: an application serves one runner)."""
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._errors, self._authorized],
                              handler_args={"max_line_size": MAX_LINE, "max_field_size": MAX_LINE,
                                            "max_headers": MAX_HEADERS})
        if self.console is not None:
            from ..console import add_routes

            add_routes(app.router, self.console)
        app.router.add_route("*", "/{path:.*}", self._handle)
        return app

    async def start(self, listen: str) -> HttpServer:
        host, sep, port = listen.rpartition(":")
        if not sep or not port.isdigit():
            raise OSError(f"cannot listen on {listen!r}: expected HOST:PORT")
        host = host.strip("[]") or "0.0.0.0"
        what = "HTTPS" if self.tls is not None else "HTTP"
        runner = web.AppRunner(self.app(), access_log=None, keepalive_timeout=IDLE_TIMEOUT,
                               shutdown_timeout=1.0, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, int(port), ssl_context=self.tls.context if self.tls else None,
                           reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            why = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            raise OSError(f"cannot serve {what} on {listen!r}: {why}") from None
        self._runner = runner
        self.host = host
        self.port = int(runner.addresses[0][1])
        loop = asyncio.get_running_loop()
        if self.tls is not None and self.tls.files is not None:
            self._watches.append(loop.create_task(self.tls.files.watch()))
        if self.gate is not None and self.gate.token_file is not None:
            self._watches.append(loop.create_task(self.gate.token_file.watch()))
        return self

    async def stop(self) -> None:
        watches, self._watches = self._watches, []
        for watch in watches:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    # ---- middlewares -----------------------------------------------------------------------------

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except _HttpError as exc:
            response = web.Response(status=exc.status, body=_json({"error": str(exc)}), content_type=JSON)
        except web.HTTPException:
            raise
        except Exception as exc:  # a bug here must not take the service down
            log.exception("HTTP request %s %s failed", request.method, request.path)
            response = web.Response(status=500, body=_json({"error": f"internal error: {exc}"}), content_type=JSON)
        response.headers.setdefault("Cache-Control", "no-cache, private")
        return response

    @web.middleware
    async def _authorized(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.gate is None:
            return await handler(request)
        transport = request.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        peercert = ssl_object.getpeercert() if ssl_object is not None else None
        verdict = await self.gate.check(request.method, request.path,
                                        request.headers.get("Authorization", ""), peercert)
        if verdict.status != 200:
            if verdict.status == 500:
                log.warning("cannot authorize %s %s: %s", request.method, request.path, verdict.message)
            return web.Response(status=verdict.status, body=json.dumps(status_body(verdict)).encode(),
                                content_type=JSON)
        return await handler(request)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                body = await request.read() if request.can_read_body else b""
        except web.HTTPRequestEntityTooLarge:
            raise _HttpError(413, f"request body of {request.content_length} bytes is over {MAX_BODY}") from None
        except TimeoutError:
            raise _HttpError(408, f"request body not received within {REQUEST_TIMEOUT:g}s") from None
        multi = {k: request.query.getall(k) for k in set(request.query.keys())}
        query = {k: v[-1] for k, v in multi.items()}
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT):
                status, ctype, payload = await self.route(request.method, request.path, query, body, multi)
        except TimeoutError:
            raise _HttpError(503, f"{request.path}: no answer within {REQUEST_TIMEOUT:g}s") from None
        response = web.Response(status=status, body=payload)
        response.headers["Content-Type"] = ctype
        if ctype == TEXT:
            response.headers["X-Content-Type-Options"] = "nosniff"
        return response

    # ---- routes --------------------------------------------------------------------------------

    async def route(self, method: str, path: str, query: Mapping[str, str], body: bytes,
                    multi: Mapping[str, list[str]] | None = None) -> tuple[int, str, bytes]:
        """One request: (status, content type, body). ``query`` has each parameter's last value,
        ``multi`` all of them."""
        if path == "/debug/flags/scores":
            return self._scores_flag(method, query, body)
        if method == "HEAD":  # a GET whose body aiohttp leaves out
            method = "GET"
        if method != "GET":
            raise _HttpError(405, f"{path} is read-only (GET)")
        endpoint, _, check = path.strip("/").partition("/")
        if endpoint in ENDPOINTS and path.startswith(f"/{endpoint}"):
            return await self._health(endpoint, check, multi if multi is not None else {})
        if path == "/configz":
            return 200, JSON, json.dumps(configz(self.scheduler.config, getattr(self.scheduler, "live", None))).encode()
        if path == "/metrics":
            if self.metrics is None:
                raise _HttpError(404, "metrics are off")
            return 200, CONTENT_TYPE, self.metrics.exposition()
        if path.startswith("/debug/scores/"):
            return 200, JSON, _json(self._pod_scores(path[len("/debug/scores/"):]))
        if path == "/apis/v1/__services__":
            return 200, JSON, _json(self.services())
        if path.startswith("/apis/v1/nodes/"):
            name = path[len("/apis/v1/nodes/"):]
            view = node_view(self.scheduler, name)
            if view is None:
                raise _HttpError(404, f"node {name!r} not found")
            return 200, JSON, _json(view)
        if path.startswith("/apis/v1/plugins/"):
            plugin, _, sub = path[len("/apis/v1/plugins/"):].partition("/")
            text = await self.plugin_endpoint(plugin, sub, query.get("profile", ""))
            return 200, JSON, text.encode()
        raise _HttpError(404, f"no such path {path!r} (see /apis/v1/__services__)")

    async def _health(self, endpoint: str, check: str, query: Mapping[str, list[str]]) -> tuple[int, str, bytes]:
        if not check:
            status, text = await self.checks.render(endpoint, query)
            return status, TEXT, text.encode()
        answer = await self.checks.render_one(endpoint, check)
        if answer is None:
            raise _HttpError(404, f"/{endpoint} has no check {check!r} (it has: "
                                  f"{', '.join(self.checks.names(endpoint))})")
        return answer[0], TEXT, answer[1].encode()

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
        return 200, JSON, _json({"top": self.scores.top})

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
        return pl.debug_paths() if isinstance(pl, OutOfProcess) else list(pl.debug_endpoints())

    def services(self) -> dict[str, Any]:
        seen: dict[str, dict[str, Any]] = {}
        for profile, pl in self._plugins():
            paths = self._paths(pl)
            if not paths:
                continue
            entry = seen.setdefault(pl.name, {
                "plugin": pl.name, "remote": isinstance(pl, OutOfProcess), "profiles": [],
                "endpoints": [f"/apis/v1/plugins/{pl.name}/{p}" for p in paths],
            })
            entry["profiles"].append(profile)
        return {
            "plugins": [seen[k] for k in sorted(seen)],
            "framework": ["/apis/v1/nodes/<name>", "/configz", "/healthz", "/livez", "/readyz", "/metrics",
                          "/debug/flags/scores", "/debug/scores/<namespace>/<name>",
                          *(["/ui/"] if self.console is not None else [])],
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
        if isinstance(pl, OutOfProcess):
            try:
                return await pl.debug(path, prof)
            except RemotePluginError as exc:
                raise _HttpError(404 if exc.code == grpc.StatusCode.NOT_FOUND else 502, str(exc)) from None
        try:
            value = pl.debug_endpoints()[path]()
            if inspect.isawaitable(value):
                value = await value
            return json.dumps(value)
        except Exception as exc:
            raise _HttpError(500, f"debug endpoint {path!r} of plugin {plugin!r} failed: {exc}") from None
