"""An asyncio client for the Kubernetes API: what the live-cluster source needs and nothing more.

::

    config = KubeConfig.from_file("~/.kube/config")     # or KubeConfig.in_cluster() inside a pod
    client = ApiClient(config, qps=50, burst=100)       # KubeSchedulerConfiguration.clientConnection
    items, rv = await client.list("/api/v1/nodes", resource="nodes")
    async with aclosing(client.watch("/api/v1/pods", rv, resource="pods")) as events:
        async for kind, obj in events: ...
    await client.close()

The HTTP clients and the JSON decoder (orjson) were chosen by measurement: decoding watch events and
the per-request cost of bindings and events are what the scheduler pays in Python (docs/benchmarks.md,
"Kubernetes API client"). Watches are read with aiohttp; every other request goes over the keep-alive
pool of :mod:`framework.kube.http1` (answers parsed by httptools), which costs half of aiohttp's CPU
per write. Every request waits for a token of a bucket filled at ``qps`` up to ``burst`` (client-go's
default rate limiter; ``qps <= 0`` turns it off).

Which requests are sent again, decided in one place (:func:`resendable`): a request is sent twice only
when a second copy cannot apply it twice. A ``429`` with ``Retry-After`` was refused before the server
did anything (API Priority and Fairness, ``--max-requests-inflight``): every request is sent again, as
client-go does. A ``5xx`` with ``Retry-After`` (a ``504`` server timeout, say), or a connection lost
after the request was written, leaves the outcome unknown: the first copy may have been applied, so
the request is sent again only if a second copy is harmless and recognisable:

====================================  ===========================================================
request                               what a second copy of one that landed gets
====================================  ===========================================================
GET, HEAD                             the same answer (a read)
PUT with ``metadata.resourceVersion``  ``409 Conflict`` (the version moved): nothing written twice
PATCH the caller calls idempotent     the same object (the patch sets values; it adds nothing)
POST of a create with a fixed name    ``409 AlreadyExists`` (an Event, named per occurrence) or
                                      ``409 already assigned`` (a binding): the caller takes it as
                                      done (:mod:`framework.kube.events`, ``KubeSource.bind``)
DELETE with ``preconditions.uid``      ``404 NotFound``: the caller takes it as done
anything else (a ``generateName``      not sent again: the caller gets the ``5xx`` or the
create, a PUT without a version, a    connection error and decides
PATCH not called idempotent)
====================================  ===========================================================

The connection pool follows the same rule when a kept-alive connection breaks under a request
(:meth:`framework.kube.http1.Pool.send` is told whether it may send again).

Exceptions, each naming the verb and the resource it was about (``list pods``, ``create pods/binding``):

    KubeError
    ├── KubeConfigError   a kubeconfig or in-cluster configuration that cannot be used
    ├── ApiError          the API server answered with a failure status (``code``, ``reason``)
    │   └── Gone          410: a watch's resourceVersion is too old (relist)
    └── ApiUnreachable    no answer: connection refused, TLS failure, timeout, connection lost
"""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import tempfile
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import aiohttp
import orjson

from pluginhost.decode import TextError, load_document
from pluginhost.errors import OutriggerError

from .http1 import Pool

__all__ = [
    "ApiClient",
    "ApiError",
    "ApiUnreachable",
    "Gone",
    "KubeConfig",
    "KubeConfigError",
    "KubeError",
    "TokenBucket",
    "resendable",
    "retry_after",
]

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# A rotated service-account token is read again after this long (client-go reloads it each minute).
TOKEN_RELOAD_SECONDS = 60.0
REQUEST_TIMEOUT = 30.0
LIST_PAGE = 500
# client-go's rest client: a throttled request is sent again at most 10 times; a Retry-After beyond
# this many seconds is cut to it.
MAX_RETRIES = 10
MAX_RETRY_AFTER = 30


class KubeError(OutriggerError):
    """Anything that went wrong talking to the Kubernetes API."""


class KubeConfigError(KubeError):
    """A kubeconfig (or the in-cluster service-account files) that cannot be used."""


class ApiError(KubeError):
    """The API server refused a request: ``code`` (HTTP status), ``reason`` (``NotFound``,
    ``Conflict``, ``Forbidden``, ...) and the server's message."""

    def __init__(self, verb: str, resource: str, code: int, reason: str, message: str) -> None:
        self.verb = verb
        self.resource = resource
        self.code = code
        self.reason = reason
        self.message = message
        super().__init__(f"{verb} {resource}: {code} {reason}: {message}")

    @classmethod
    def from_status(cls, verb: str, resource: str, code: int, body: bytes) -> ApiError:
        """From a ``Status`` body (or whatever the server sent instead)."""
        reason, message = "", ""
        try:
            status = orjson.loads(body) if body else {}
        except orjson.JSONDecodeError:
            status = {}
        if isinstance(status, dict):
            code = int(status.get("code") or code)
            reason = str(status.get("reason") or "")
            message = str(status.get("message") or "")
        if not message:
            message = body[:200].decode("utf-8", "replace").strip() or "no message"
        kind = Gone if code == 410 else ApiError
        return kind(verb, resource, code, reason or _REASONS.get(code, "Failure"), message)


class Gone(ApiError):
    """410: the resourceVersion a watch asked for is no longer in the server's history."""


class ApiUnreachable(KubeError):
    """The request got no answer from the API server."""

    def __init__(self, verb: str, resource: str, server: str, cause: BaseException) -> None:
        self.verb = verb
        self.resource = resource
        detail = str(cause) or type(cause).__name__
        super().__init__(f"{verb} {resource}: API server {server} unreachable: {detail}")


_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
            410: "Gone", 422: "Invalid", 429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}


# ---- configuration --------------------------------------------------------------------------------


@dataclass
class KubeConfig:
    """Where the API server is and how to authenticate to it."""

    server: str
    token: str = ""
    #: A file holding the token, read again every minute (service-account tokens rotate).
    token_file: str = ""
    ca_file: str = ""
    ca_data: bytes = b""
    client_cert: bytes = b""
    client_key: bytes = b""
    insecure: bool = False
    tls_server_name: str = ""
    #: Where the configuration came from, for messages.
    source: str = ""
    _token_read: float = field(default=0.0, repr=False)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], context: str = "") -> KubeConfig:
        """The cluster and user of ``context`` (default: the current context) of a kubeconfig file.
        Relative file names in it are taken from the kubeconfig's own folder, as kubectl does."""
        where = str(path)
        file = Path(path).expanduser()
        try:
            doc = load_document(file.read_text(encoding="utf-8")).value
        except OSError as exc:
            raise KubeConfigError(f"kubeconfig {where}: cannot read it: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise KubeConfigError(f"kubeconfig {where}: not valid YAML: {str(exc).splitlines()[0]}") from None
        except TextError as exc:  # invalid YAML, or nesting or aliases that would not end
            raise KubeConfigError(f"kubeconfig {where}: {exc}") from None
        if not isinstance(doc, dict):
            raise KubeConfigError(f"kubeconfig {where}: expected a mapping (kind: Config)")
        name = context or doc.get("current-context") or ""
        if not name:
            raise KubeConfigError(f"kubeconfig {where}: no current-context is set")
        ctx = _named(doc, "contexts", "context", name, where)
        cluster = _named(doc, "clusters", "cluster", str(ctx.get("cluster") or ""), where)
        user = _named(doc, "users", "user", str(ctx.get("user") or ""), where) if ctx.get("user") else {}
        base = file.parent

        def rel(value: Any) -> str:
            return str(base / str(value)) if value else ""

        server = str(cluster.get("server") or "")
        if not server.startswith(("https://", "http://")):
            raise KubeConfigError(f"kubeconfig {where}: cluster {ctx.get('cluster')!r}: server must be an "
                                  f"https:// URL, got {server!r}")
        for unsupported in ("exec", "auth-provider"):
            if user.get(unsupported):
                raise KubeConfigError(
                    f"kubeconfig {where}: user {ctx.get('user')!r}: {unsupported} credential plugins are not "
                    "supported; use a token, a token file or a client certificate"
                )
        cfg = cls(
            server=server.rstrip("/"),
            token=str(user.get("token") or ""),
            token_file=rel(user.get("tokenFile")),
            ca_file=rel(cluster.get("certificate-authority")),
            ca_data=_b64(cluster.get("certificate-authority-data"), "certificate-authority-data", where),
            client_cert=_read_or_b64(user, "client-certificate", base, where),
            client_key=_read_or_b64(user, "client-key", base, where),
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
            tls_server_name=str(cluster.get("tls-server-name") or ""),
            source=f"kubeconfig {where}",
        )
        if cfg.token_file:
            cfg.current_token()  # an unreadable token file fails here, at start-up
        return cfg

    @classmethod
    def in_cluster(cls, folder: Path = SERVICE_ACCOUNT_DIR) -> KubeConfig:
        """The pod's service account: ``KUBERNETES_SERVICE_HOST``/``_PORT`` and the token and CA that
        Kubernetes mounts into every pod."""
        host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise KubeConfigError("in-cluster configuration: KUBERNETES_SERVICE_HOST is unset (not running in a "
                                  "Kubernetes pod?); give a kubeconfig instead")
        if ":" in host:
            host = f"[{host}]"
        cfg = cls(server=f"https://{host}:{port}", token_file=str(folder / "token"), ca_file=str(folder / "ca.crt"),
                  source="in-cluster configuration")
        cfg.current_token()
        if not Path(cfg.ca_file).is_file():
            raise KubeConfigError(f"in-cluster configuration: {cfg.ca_file} is missing")
        return cfg

    def current_token(self) -> str:
        """The bearer token, read again from ``token_file`` once a minute."""
        if self.token_file and (not self.token or time.monotonic() - self._token_read >= TOKEN_RELOAD_SECONDS):
            try:
                self.token = Path(self.token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                if not self.token:
                    raise KubeConfigError(f"{self.source}: cannot read token file {self.token_file}: "
                                          f"{exc.strerror or exc}") from None
            self._token_read = time.monotonic()
        return self.token

    def ssl_context(self) -> ssl.SSLContext | bool:
        """TLS settings for the server (True: the system's trust; False: plain HTTP)."""
        if self.server.startswith("http://"):
            return False
        try:
            ctx = ssl.create_default_context(
                cafile=self.ca_file or None, cadata=self.ca_data.decode("ascii") if self.ca_data else None
            )
        except (OSError, ssl.SSLError, UnicodeDecodeError) as exc:
            raise KubeConfigError(f"{self.source}: cannot load the certificate authority: {exc}") from None
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.client_cert or self.client_key:
            # ssl loads a certificate chain only from files: write them to a private folder for the call.
            with tempfile.TemporaryDirectory(prefix="outrigger-kube-") as tmp:
                cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
                cert.write_bytes(self.client_cert)
                key.write_bytes(self.client_key)
                try:
                    ctx.load_cert_chain(cert, key)
                except (OSError, ssl.SSLError) as exc:
                    raise KubeConfigError(f"{self.source}: cannot load the client certificate: {exc}") from None
        return ctx


def _named(doc: Mapping[str, Any], list_key: str, item_key: str, name: str, where: str) -> dict[str, Any]:
    for entry in doc.get(list_key) or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get(item_key)
            return value if isinstance(value, dict) else {}
    raise KubeConfigError(f"kubeconfig {where}: {item_key} {name!r} not found in {list_key}")


def _b64(value: Any, what: str, where: str) -> bytes:
    if not value:
        return b""
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError:
        raise KubeConfigError(f"kubeconfig {where}: {what} is not base64") from None


def _read_or_b64(user: Mapping[str, Any], key: str, base: Path, where: str) -> bytes:
    data = user.get(f"{key}-data")
    if data:
        return _b64(data, f"{key}-data", where)
    name = user.get(key)
    if not name:
        return b""
    try:
        return (base / str(name)).read_bytes()
    except OSError as exc:
        raise KubeConfigError(f"kubeconfig {where}: cannot read {key} {name}: {exc.strerror or exc}") from None


# ---- rate limiting --------------------------------------------------------------------------------


class TokenBucket:
    """client-go's token bucket: ``qps`` tokens a second, at most ``burst`` saved up. A caller that
    finds none waits its turn (tokens are reserved in arrival order); ``qps <= 0`` never waits."""

    def __init__(self, qps: float, burst: int, clock: Any = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._tokens = float(self.burst)
        self._last = clock()

    def reserve(self) -> float:
        """Take a token; the seconds to wait before using it."""
        if self.qps <= 0:
            return 0.0
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    async def acquire(self) -> None:
        wait = self.reserve()
        if wait > 0:
            await asyncio.sleep(wait)


# ---- the client -----------------------------------------------------------------------------------


def resendable(method: str, body: Any, *, idempotent: bool = False) -> bool:
    """Whether a request whose first copy may have been applied (a ``5xx`` with ``Retry-After``, a
    connection lost under it) may be sent again: whether a second copy cannot apply it twice (the table
    in the module's docstring). ``idempotent`` is the caller's word for a PATCH that only sets values."""
    if method in ("GET", "HEAD"):
        return True
    meta = body.get("metadata") if isinstance(body, dict) else None
    if method == "PUT":
        return isinstance(meta, dict) and bool(meta.get("resourceVersion"))
    if method == "PATCH":
        return idempotent
    if method == "POST":
        # A fixed name makes a second create fail AlreadyExists; generateName would make a second object.
        return isinstance(meta, dict) and bool(meta.get("name")) and not meta.get("generateName")
    if method == "DELETE":
        pre = body.get("preconditions") if isinstance(body, dict) else None
        return isinstance(pre, dict) and bool(pre.get("uid"))
    return False


def retry_after(status: int, header: str | None) -> float | None:
    """Seconds to wait before sending a refused request again (client-go's checkWait): a 429 or a 5xx
    answer with a ``Retry-After`` header of whole seconds; None when the answer is final."""
    if status != 429 and status < 500:
        return None
    if header is None or not header.strip().isdigit():
        return None
    return float(min(int(header.strip()), MAX_RETRY_AFTER))


class ApiClient:
    """Requests to one API server over a pool of keep-alive connections (``max_connections``).

    A request answered 429 Too Many Requests with ``Retry-After`` is sent again after that many seconds,
    up to :data:`MAX_RETRIES` times within its timeout, as client-go does: an API server shedding load
    (``--max-requests-inflight``, API Priority and Fairness) slows the scheduler down instead of failing
    its bindings. A 5xx with ``Retry-After`` is waited on and sent again the same way only when
    :func:`resendable` says a second copy is harmless; otherwise the caller gets the 5xx. ``throttled``
    counts those waits.
    """

    def __init__(self, config: KubeConfig, *, qps: float = 50.0, burst: int = 100, max_connections: int = 32,
                 user_agent: str = "outrigger") -> None:
        self.config = config
        self.limiter = TokenBucket(qps, burst)
        self._max_connections = max_connections
        self._user_agent = user_agent
        self._ssl = config.ssl_context()  # a CA that cannot be loaded fails at construction
        self._session: aiohttp.ClientSession | None = None  # watches
        self._pool: Pool | None = None  # every other request
        #: Requests made, by "verb resource" (what tests and the benchmark count writes with).
        self.counts: dict[str, int] = {}
        #: Requests the server refused with Retry-After and that were sent again.
        self.throttled = 0

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl, limit=self._max_connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(
                connector=connector, json_serialize=lambda o: orjson.dumps(o).decode(),
                headers={"User-Agent": self._user_agent, "Accept": JSON},
            )
        return self._session

    def _requests(self) -> Pool:
        if self._pool is None:
            self._pool = Pool(self.config.server, self._ssl, max_connections=self._max_connections,
                              server_hostname=self.config.tls_server_name, user_agent=self._user_agent)
        return self._pool

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {}
        token = self.config.current_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def request(
        self, method: str, path: str, *, verb: str, resource: str, params: Mapping[str, str] | None = None,
        body: Any = None, content_type: str = JSON, timeout: float = REQUEST_TIMEOUT, idempotent: bool = False,
    ) -> Any:
        """One request; the decoded JSON answer (None when empty). Raises ApiError or ApiUnreachable.
        ``idempotent``: a PATCH that only sets values, which may be sent again (:func:`resendable`)."""
        key = f"{verb} {resource}"
        again = resendable(method, body, idempotent=idempotent)
        data = None if body is None else orjson.dumps(body)
        target = path
        if params:
            target += ("&" if "?" in path else "?") + urlencode(params)
        give_up = time.monotonic() + timeout
        for attempt in range(MAX_RETRIES + 1):
            await self.limiter.acquire()
            self.counts[key] = self.counts.get(key, 0) + 1
            headers = ""
            token = self.config.current_token()
            if token:
                headers = f"Authorization: Bearer {token}\r\n"
            if data is not None:
                headers += f"Content-Type: {content_type}\r\n"
            try:
                answer = await self._requests().send(method, target, headers, data,
                                                     max(give_up - time.monotonic(), 0.001), replayable=again)
            except (OSError, TimeoutError, ssl.SSLError) as exc:
                raise ApiUnreachable(verb, resource, self.config.server, exc) from exc
            payload, status = answer.body, answer.status
            wait = retry_after(status, answer.retry_after)
            if status != 429 and not again:
                wait = None  # a 5xx: the first copy may have been applied, and a second is not harmless
            if wait is not None and attempt < MAX_RETRIES and time.monotonic() + wait < give_up:
                # A 429 (not served) or a 5xx with Retry-After on a request a second copy cannot apply
                # twice: client-go waits as told and sends it again, up to 10 times.
                self.throttled += 1
                await asyncio.sleep(wait)
                continue
            break
        if status >= 400:
            raise ApiError.from_status(verb, resource, status, payload)
        return orjson.loads(payload) if payload else None

    async def list(self, path: str, *, resource: str, page: int = LIST_PAGE) -> tuple[list[dict[str, Any]], str]:
        """Every object of a collection (read in pages) and the list's resourceVersion."""
        items: list[dict[str, Any]] = []
        params = {"limit": str(page)}
        while True:
            body = await self.request("GET", path, verb="list", resource=resource, params=params, timeout=120.0)
            items.extend(body.get("items") or ())
            meta = body.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                return items, str(meta.get("resourceVersion") or "")
            params = {"limit": str(page), "continue": cont}

    async def watch(
        self, path: str, resource_version: str, *, resource: str, timeout_seconds: int = 300,
    ) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """The watch events (type, object) after ``resource_version``, bookmarks included, until the
        server ends the watch (after ``timeout_seconds``). An ERROR event raises its ApiError (Gone
        for 410); a broken connection raises ApiUnreachable. Each line is decoded once."""
        await self.limiter.acquire()
        key = f"watch {resource}"
        self.counts[key] = self.counts.get(key, 0) + 1
        params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout_seconds)}
        if resource_version:
            params["resourceVersion"] = resource_version
        kwargs: dict[str, Any] = {}
        if self.config.tls_server_name:
            kwargs["server_hostname"] = self.config.tls_server_name
        loads = orjson.loads
        try:
            async with self._client().get(
                self.config.server + path, params=params, headers=self._headers(None),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=REQUEST_TIMEOUT,
                                              sock_read=timeout_seconds + REQUEST_TIMEOUT),
                **kwargs,
            ) as resp:
                if resp.status >= 400:
                    raise ApiError.from_status("watch", resource, resp.status, await resp.read())
                rest = b""
                async for chunk in resp.content.iter_any():
                    lines = (rest + chunk).split(b"\n") if rest else chunk.split(b"\n")
                    rest = lines.pop()
                    for line in lines:
                        if not line:
                            continue
                        event = loads(line)
                        kind = event.get("type")
                        obj = event.get("object") or {}
                        if kind == "ERROR":
                            code = int(obj.get("code") or 500)
                            raise ApiError.from_status("watch", resource, code, orjson.dumps(obj))
                        yield kind, obj
        except (aiohttp.ClientError, OSError, TimeoutError, ssl.SSLError) as exc:
            raise ApiUnreachable("watch", resource, self.config.server, exc) from exc
        except orjson.JSONDecodeError as exc:
            raise ApiUnreachable("watch", resource, self.config.server, exc) from exc
