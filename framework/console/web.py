"""The console's HTTP routes under ``/ui/`` (added to each listener of
:class:`~framework.observe.httpserver.HttpServer`, behind its authentication and authorization):

======================================  =============================================================
``GET /ui/``                            the page (``static/index.html``)
``GET /ui/static/<file>``               its scripts, styles and vendored libraries (shipped in the package)
``GET /ui/api/overview``                counters, their history, unschedulable groups, plugins, endpoints
``GET /ui/api/pods?q=WORDS``            search by name, namespace, node, phase, reason
``GET /ui/api/pods/<ns>/<name>``        a pod: attempts (Filter groups, best scores, chosen node), events
``GET /ui/api/explain/<ns>/<name>``     explain the pod now (``outrigger explain -o json``'s answer)
``GET /ui/api/whatif/<ns>/<name>``      ``?node=N&count=C``: would C nodes like N admit it (explain --what-if-nodes)
``GET /ui/api/traces/<trace id>``       a kept trace's spans (the framework's and the plugin hosts')
``GET /ui/api/config``                  profiles, plugins per point with weights and args, endpoints
``GET /ui/api/stream``                  server-sent events: a sample of the counters every second
======================================  =============================================================
"""

from __future__ import annotations

import asyncio
import json
import logging
import mimetypes
from pathlib import Path
from typing import Any

from aiohttp import web

from .core import Console
from .views import (
    MAX_WHAT_IF,
    ConsoleLookupError,
    configuration,
    explain_now,
    overview,
    pod_view,
    search,
    trace_view,
    what_if_now,
)

__all__ = ["HEARTBEAT", "STATIC", "add_routes"]

log = logging.getLogger("outrigger.console")

STATIC = Path(__file__).resolve().parent / "static"
#: Seconds between two comments on an idle stream (proxies close silent connections).
HEARTBEAT = 15.0
#: Seconds explain may take before the console gives up on it.
EXPLAIN_TIMEOUT = 30.0
#: Nothing is loaded from elsewhere; styles set by scripts need 'unsafe-inline' for style attributes only.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(value).encode(), content_type="application/json")


def _headers(response: web.StreamResponse) -> web.StreamResponse:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response


async def _api(console: Console, request: web.Request) -> web.Response:
    """One ``/ui/api/<what>/...`` request but the stream."""
    what = request.match_info["what"]
    parts = [p for p in request.match_info.get("rest", "").split("/") if p]
    try:
        if what == "overview" and not parts:
            return _json(overview(console))
        if what == "pods" and not parts:
            return _json(search(console, request.query.get("q", "")))
        if what == "pods" and len(parts) == 2:
            return _json(pod_view(console, parts[0], parts[1]))
        if what == "explain" and len(parts) == 2:
            async with asyncio.timeout(EXPLAIN_TIMEOUT):
                return _json(await explain_now(console, parts[0], parts[1]))
        if what == "whatif" and len(parts) == 2:
            node, count = request.query.get("node", ""), request.query.get("count", "1")
            if not node or not count.isdigit() or not 1 <= int(count) <= MAX_WHAT_IF:
                return _json({"error": f"what-if needs ?node=NAME (a node of the cluster) and ?count=N "
                                       f"(1 to {MAX_WHAT_IF}), got node={node!r} count={count!r}"}, 400)
            async with asyncio.timeout(EXPLAIN_TIMEOUT):
                return _json(await what_if_now(console, parts[0], parts[1], node, int(count)))
        if what == "traces" and len(parts) == 1:
            return _json(trace_view(console, parts[0]))
        if what == "config" and not parts:
            return _json(configuration(console))
    except ConsoleLookupError as exc:
        return _json({"error": str(exc)}, 404)
    except TimeoutError:
        return _json({"error": f"explain took over {EXPLAIN_TIMEOUT:g}s"}, 503)
    return _json({"error": f"no console API {request.path!r} (see /ui/api/overview, pods, explain, whatif, traces, "
                           "config, stream)"}, 404)


def add_routes(router: web.UrlDispatcher, console: Console) -> None:
    """The routes above on ``router`` (before the listener's catch-all route)."""

    async def index(request: web.Request) -> web.StreamResponse:
        if request.path == "/ui":
            raise web.HTTPFound("/ui/")
        body = (STATIC / "index.html").read_bytes()
        return _headers(web.Response(body=body, content_type="text/html", charset="utf-8"))

    async def static(request: web.Request) -> web.StreamResponse:
        rel = request.match_info["path"]
        path = (STATIC / rel).resolve()
        if not path.is_relative_to(STATIC) or not path.is_file() or path.name == "index.html":
            return _json({"error": f"no such console file {rel!r}"}, 404)
        ctype = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        if path.suffix == ".js":
            ctype = "text/javascript"
        return _headers(web.Response(body=path.read_bytes(), content_type=ctype))

    async def api(request: web.Request) -> web.StreamResponse:
        console.touch()
        return await _api(console, request)

    async def stream(request: web.Request) -> web.StreamResponse:
        try:
            q = console.subscribe()
        except OverflowError as exc:
            return _json({"error": str(exc)}, 503)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                                               "X-Accel-Buffering": "no"})
        try:
            await response.prepare(request)
            while True:
                try:
                    point = await asyncio.wait_for(q.get(), HEARTBEAT)
                except TimeoutError:
                    await response.write(b": idle\n\n")
                    continue
                if point is None:
                    break
                await response.write(b"event: sample\ndata: " + json.dumps(point).encode() + b"\n\n")
        except ConnectionResetError:
            pass  # the page went away
        finally:
            console.unsubscribe(q)
        return response

    router.add_route("GET", "/ui/api/stream", stream)  # before the API's catch-all
    for method in ("GET", "HEAD"):
        router.add_route(method, "/ui", index)
        router.add_route(method, "/ui/", index)
        router.add_route(method, "/ui/static/{path:.+}", static)
        router.add_route(method, "/ui/api/{what:[a-z]+}", api)
        router.add_route(method, "/ui/api/{what:[a-z]+}/{rest:.*}", api)
