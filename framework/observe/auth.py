"""Who is calling the secure port, and may they: authentication and authorization, as kube-scheduler's.

A request goes through :class:`Gate`:

1. **Authentication.** A client certificate verified against ``--client-ca-file`` names the user (its
   Common Name) and groups (its Organizations); otherwise an ``Authorization: Bearer <token>`` header is
   checked by the token authenticator: a static :class:`TokenFile` (``--token-auth-file``, embedded mode;
   read again when it changes) or the cluster's TokenReview (:mod:`framework.observe.delegated`). A token
   it does not accept is 401.
   A request with neither is the anonymous user ``system:anonymous`` (group ``system:unauthenticated``).
2. **Authorization**, the first answer wins: a user in an always-allowed group (``system:masters``) may
   do anything; a path of ``--authorization-always-allow-paths`` (``/healthz``, ``/readyz``, ``/livez``)
   is open to anyone, anonymous included; an anonymous caller gets no further: 401 (kube-scheduler asks
   the authorizer about ``system:anonymous`` and answers 403; Outrigger answers what is true: no
   credentials). Then the authorizer: the cluster's SubjectAccessReview, or in embedded mode
   :class:`StaticAuthorizer` (kube's bootstrap ``system:monitoring`` role). No permission is 403, an
   authorizer that could not answer is 500.

Every path is a non-resource URL and the verb is the HTTP method in lowercase (``get``, ``put``,
``post``), as kube's request-info resolver makes them for non-API paths: a ClusterRole grants
``nonResourceURLs: [/metrics]`` with ``verbs: [get]``.

Without any authentication configured (no token file, no cluster) the gate is **open**: every request is
allowed, and the secure port may then only bind a loopback address (:mod:`framework.observe.serving`).

Errors: :class:`TokenFileError` (a token file that cannot be used); :class:`ReviewError` (an authenticator
or authorizer that could not answer: the cluster is unreachable or refused the review).
"""

from __future__ import annotations

import asyncio
import csv
import enum
import hashlib
import io
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pluginhost.errors import OutriggerError

from . import certs

__all__ = [
    "ALWAYS_ALLOW_GROUPS",
    "ALWAYS_ALLOW_PATHS",
    "ANONYMOUS",
    "Decision",
    "Gate",
    "PathMatcher",
    "ReviewError",
    "StaticAuthorizer",
    "TTLCache",
    "TokenFile",
    "TokenFileError",
    "User",
    "Verdict",
    "bearer_token",
    "certificate_user",
    "status_body",
]

log = logging.getLogger("outrigger.auth")

ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
ALWAYS_ALLOW_GROUPS = ("system:masters",)
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
#: kube's bootstrap ClusterRole ``system:monitoring`` (bound to the group of that name): ``get`` on these.
MONITORING_GROUP = "system:monitoring"
MONITORING_URLS = ("/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz", "/readyz/*", "/metrics",
                   "/metrics/slis")
CACHE_ENTRIES = 4096


class TokenFileError(OutriggerError, ValueError):
    """A ``--token-auth-file`` that cannot be used (the message names the file and the line)."""


class ReviewError(OutriggerError):
    """The authenticator or authorizer could not answer (the cluster is unreachable, or refused)."""


@dataclass(frozen=True)
class User:
    """An authenticated (or the anonymous) caller."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def anonymous(self) -> bool:
        return self.name == ANONYMOUS.name


ANONYMOUS = User("system:anonymous", groups=(UNAUTHENTICATED,))


def _authenticated(user: User) -> User:
    """``user`` with ``system:authenticated`` among its groups (kube's AuthenticatedGroupAdder)."""
    if AUTHENTICATED in user.groups:
        return user
    return User(user.name, user.uid, (*user.groups, AUTHENTICATED), user.extra)


class Decision(enum.Enum):
    ALLOW = "allow"
    DENY = "deny"
    NO_OPINION = "no opinion"


@dataclass(frozen=True)
class Verdict:
    """What the gate says about one request: ``status`` 200 (go on), 401, 403 or 500, the ``user`` and
    the ``message`` for the caller."""

    status: int
    user: User
    message: str = ""


# ---- a small TTL cache -----------------------------------------------------------------------------

K = TypeVar("K")
V = TypeVar("V")


class TTLCache(Generic[K, V]):
    """Answers kept for a while (each with its own time to live), at most ``size`` of them: the oldest go
    first when full. ``clock`` is ``time.monotonic`` (tests pass their own)."""

    def __init__(self, size: int = CACHE_ENTRIES, clock: Callable[[], float] = time.monotonic) -> None:
        self.size = size
        self._clock = clock
        self._items: dict[K, tuple[float, V]] = {}

    def get(self, key: K) -> V | None:
        found = self._items.get(key)
        if found is None:
            return None
        if found[0] <= self._clock():
            del self._items[key]
            return None
        return found[1]

    def put(self, key: K, value: V, ttl: float) -> None:
        if ttl <= 0:
            return
        self._items.pop(key, None)
        if len(self._items) >= self.size:
            now = self._clock()
            for k in [k for k, (expires, _) in self._items.items() if expires <= now]:
                del self._items[k]
            while len(self._items) >= self.size:
                del self._items[next(iter(self._items))]
        self._items[key] = (self._clock() + ttl, value)

    def __len__(self) -> int:
        return len(self._items)


# ---- authentication --------------------------------------------------------------------------------


class TokenAuthenticator(Protocol):
    async def authenticate(self, token: str) -> User | None:
        """The user a bearer token belongs to, None if it is not valid; ``ReviewError`` if unsure."""


class TokenFile:
    """Static bearer tokens, in kube-apiserver's ``--token-auth-file`` format: one CSV line per token,
    ``token,user,uid,"group1,group2"`` (the groups column is optional); blank lines and lines starting
    with ``#`` are skipped.

    Loaded from a file (``source``), it is read again when the file changes, as the secure port's
    certificate files are (:meth:`watch`, every :data:`framework.observe.certs.RELOAD_SECONDS`): a token
    added starts authenticating, a token removed stops. A changed file that does not load is logged and
    the last good tokens stay in use until it changes again."""

    def __init__(self, users: Mapping[str, User], source: str = "") -> None:
        self._users = {hashlib.sha256(t.encode()).digest(): u for t, u in users.items()}
        self.source = source
        self.seen = self.stamp()
        self.reloads = 0

    def stamp(self) -> tuple[int, int] | None:
        """The file's (modification time, size) as it is now (None: no file, or not there)."""
        return certs.file_stamp(self.source)

    def reload(self) -> bool:
        """Load the file again if it changed since it was last looked at; True when its tokens are now
        the ones accepted."""
        stamp = self.stamp()
        if not self.source or stamp == self.seen:
            return False
        self.seen = stamp
        try:
            fresh = TokenFile.load(self.source)
        except TokenFileError as exc:
            log.error("secure port: the changed token file was not loaded; the previous tokens stay in use: %s", exc)
            return False
        self._users = fresh._users
        self.reloads += 1
        log.warning("secure port: --token-auth-file %s reloaded (%d tokens)", self.source, len(self._users))
        return True

    async def watch(self) -> None:
        """Look at the file every :data:`framework.observe.certs.RELOAD_SECONDS` until cancelled."""
        while True:
            await asyncio.sleep(certs.RELOAD_SECONDS)
            self.reload()

    @classmethod
    def load(cls, path: str) -> TokenFile:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise TokenFileError(f"--token-auth-file: cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise TokenFileError(f"--token-auth-file {path}: not UTF-8 text") from None
        users: dict[str, User] = {}
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                (record,) = list(csv.reader(io.StringIO(line), skipinitialspace=True))
            except (csv.Error, ValueError):
                raise TokenFileError(f"--token-auth-file {path}:{number}: not a CSV line") from None
            if len(record) < 3:
                raise TokenFileError(f"--token-auth-file {path}:{number}: needs at least 3 columns (token, user name, "
                                     f"user uid), found {len(record)}")
            token, name, uid = (v.strip() for v in record[:3])
            if not token or not name:
                raise TokenFileError(f"--token-auth-file {path}:{number}: the token and the user name must not "
                                     "be empty")
            if token in users:
                raise TokenFileError(f"--token-auth-file {path}:{number}: this token is already given to user "
                                     f"{users[token].name!r}")
            groups = tuple(g.strip() for g in record[3].split(",") if g.strip()) if len(record) > 3 else ()
            users[token] = User(name, uid, groups)
        if not users:
            raise TokenFileError(f"--token-auth-file {path}: no tokens in it")
        return cls(users, path)

    def __len__(self) -> int:
        return len(self._users)

    async def authenticate(self, token: str) -> User | None:
        return self._users.get(hashlib.sha256(token.encode()).digest())


def bearer_token(header: str) -> str | None:
    """The token of an ``Authorization`` header: None when it is not ``Bearer <token>`` (then the
    request carries no token at all), ``""`` for an empty one (which is never valid)."""
    parts = header.strip().split(" ", 2)
    if len(parts) < 2 or parts[0].lower() != "bearer":
        return None
    return parts[1]


def certificate_user(peercert: Mapping[str, Any] | None) -> User | None:
    """The user of a verified client certificate (``ssl``'s ``getpeercert()``): the subject's Common Name,
    its Organizations as groups; None without a certificate or a Common Name."""
    if not peercert:
        return None
    name = ""
    groups: list[str] = []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and not name:
                name = str(value)
            elif key == "organizationName":
                groups.append(str(value))
    return User(name, groups=tuple(groups)) if name else None


# ---- authorization ---------------------------------------------------------------------------------


class Authorizer(Protocol):
    async def authorize(self, user: User, verb: str, path: str) -> tuple[Decision, str]:
        """Allow, deny or no opinion, with a reason; ``ReviewError`` when it cannot answer."""


class PathMatcher:
    """kube's path authorizer: ``/healthz`` matches that path only, ``/debug/*`` every path under
    ``/debug/`` (a leading ``/`` is optional)."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = tuple(p if p.startswith("/") else "/" + p for p in paths if p)
        for p in self.paths:
            if "*" in p[:-1]:
                raise ValueError(f"always-allow path {p!r}: '*' may only end a path")
        self._exact = frozenset(p for p in self.paths if not p.endswith("*"))
        self._prefixes = tuple(p[:-1] for p in self.paths if p.endswith("*"))

    def __call__(self, path: str) -> bool:
        return path in self._exact or path.startswith(self._prefixes)


class StaticAuthorizer:
    """Embedded mode's authorizer: what kube's bootstrap RBAC grants without any binding of yours.
    ``system:monitoring`` may ``get`` the health endpoints and ``/metrics``; nobody else may do anything
    (``system:masters`` is allowed before this is asked). A token that reads metrics here reads them from a
    cluster's components too."""

    def __init__(self) -> None:
        self._monitoring = PathMatcher(MONITORING_URLS)

    async def authorize(self, user: User, verb: str, path: str) -> tuple[Decision, str]:
        if MONITORING_GROUP in user.groups and verb == "get" and self._monitoring(path):
            return Decision.ALLOW, ""
        return Decision.NO_OPINION, ""


# ---- the gate --------------------------------------------------------------------------------------


@dataclass
class Gate:
    """Authentication then authorization of one request (see the module docstring). ``tokens`` and
    ``authorizer`` None and no client certificates: the open gate of a loopback-only port."""

    tokens: TokenAuthenticator | None = None
    authorizer: Authorizer | None = None
    client_certificates: bool = False
    always_allow_paths: PathMatcher = field(default_factory=lambda: PathMatcher(ALWAYS_ALLOW_PATHS))
    always_allow_groups: tuple[str, ...] = ALWAYS_ALLOW_GROUPS
    #: The ``--token-auth-file`` among ``tokens``, read again when it changes (its server watches it).
    token_file: TokenFile | None = None

    @property
    def open(self) -> bool:
        return self.tokens is None and not self.client_certificates and self.authorizer is None

    async def authenticate(self, authorization: str, peercert: Mapping[str, Any] | None) -> User | None:
        """The caller (``ANONYMOUS`` without credentials), or None when its credentials are not valid."""
        user = certificate_user(peercert) if self.client_certificates else None
        if user is not None:
            return _authenticated(user)
        token = bearer_token(authorization)
        if token is None or self.tokens is None:
            return ANONYMOUS
        if not token:
            return None
        try:
            found = await self.tokens.authenticate(token)
        except ReviewError as exc:
            log.warning("cannot authenticate a request: %s", exc)
            return None
        return _authenticated(found) if found is not None else None

    async def check(self, method: str, path: str, authorization: str = "",
                    peercert: Mapping[str, Any] | None = None) -> Verdict:
        """Whether a request may go on (status 200) and who made it."""
        if self.open:
            return Verdict(200, ANONYMOUS)
        user = await self.authenticate(authorization, peercert)
        if user is None:
            return Verdict(401, ANONYMOUS, "Unauthorized")
        verb = method.lower()
        if any(g in self.always_allow_groups for g in user.groups) or self.always_allow_paths(path):
            return Verdict(200, user)
        if user.anonymous:
            return Verdict(401, user, "Unauthorized")
        decision, reason = Decision.NO_OPINION, ""
        if self.authorizer is not None:
            try:
                decision, reason = await self.authorizer.authorize(user, verb, path)
            except ReviewError as exc:
                return Verdict(500, user, f"Internal error occurred: {exc}")
        if decision is Decision.ALLOW:
            return Verdict(200, user)
        message = f'forbidden: User "{user.name}" cannot {verb} path "{path}"'
        return Verdict(403, user, f"{message}: {reason}" if reason else message)


def status_body(verdict: Verdict) -> dict[str, Any]:
    """A refused request's answer: a Kubernetes ``Status``, as kube-scheduler's secure port answers."""
    reasons = {401: "Unauthorized", 403: "Forbidden", 500: "InternalError"}
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": verdict.message, "reason": reasons.get(verdict.status, "")}
    if verdict.status == 403:
        body["details"] = {}
    body["code"] = verdict.status
    return body
