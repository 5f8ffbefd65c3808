"""Delegated authentication and authorization: the cluster decides who calls the secure port and what
they may do, as kube-scheduler's delegating authenticator and authorizer do.

- :class:`TokenReviewer`: a bearer token is sent to the API server as a ``TokenReview``
  (``authentication.k8s.io/v1``); the answer (a user, or "not authenticated") is kept
  ``--authentication-token-webhook-cache-ttl`` (10 s), valid or not.
- :class:`AccessReviewer`: a ``SubjectAccessReview`` (``authorization.k8s.io/v1``) for the user, the verb
  and the non-resource path; "allowed" is kept ``--authorization-webhook-cache-authorized-ttl`` (10 s),
  "not allowed" ``--authorization-webhook-cache-unauthorized-ttl`` (10 s).

Failures are not kept: an API server that cannot be reached (or answers 429 or 5xx) is asked again with
kube's webhook backoff (0.5 s, x1.5, at most 5 tries within :data:`REVIEW_TIMEOUT`), then the review is a
:class:`~framework.observe.auth.ReviewError`: 401 for authentication, 500 for authorization, as
kube-scheduler. The identity making the reviews needs ``create`` on ``tokenreviews`` and
``subjectaccessreviews``: the ``system:auth-delegator`` ClusterRole (deploy/kubernetes/serving.yaml).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

from framework.kube.client import ApiClient, ApiError, ApiUnreachable, KubeError

from .auth import Decision, ReviewError, TTLCache, User

__all__ = ["REVIEW_TIMEOUT", "AccessReviewer", "TokenReviewer", "review_client"]

#: Seconds one review may take, retries included (kube's TokenRequestTimeout and ClientTimeout: 10 s).
REVIEW_TIMEOUT = 10.0
# kube's DefaultAuthWebhookRetryBackoff: 500 ms, factor 1.5, 5 steps (jitter left out: one caller here).
BACKOFF_FIRST, BACKOFF_FACTOR, BACKOFF_STEPS = 0.5, 1.5, 5
# The reviews' own client is not rate limited by the scheduler's QPS (kube sets 200 QPS, burst 400).
REVIEW_QPS, REVIEW_BURST = 200.0, 400


def review_client(client_or_config: Any) -> ApiClient:
    """An :class:`ApiClient` for reviews, from a :class:`~framework.kube.client.KubeConfig` (or a client)."""
    if isinstance(client_or_config, ApiClient):
        return client_or_config
    return ApiClient(client_or_config, qps=REVIEW_QPS, burst=REVIEW_BURST, user_agent="outrigger-serving")


async def _create(client: ApiClient, path: str, resource: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a review, retried with backoff while the API server cannot answer."""
    deadline = time.monotonic() + REVIEW_TIMEOUT
    delay = BACKOFF_FIRST
    for attempt in range(1, BACKOFF_STEPS + 1):
        left = deadline - time.monotonic()
        try:
            answer = await client.request("POST", path, verb="create", resource=resource, body=body,
                                          timeout=max(left, 0.1))
        except (ApiUnreachable, ApiError) as exc:
            retriable = isinstance(exc, ApiUnreachable) or exc.code == 429 or exc.code >= 500
            if not retriable or attempt == BACKOFF_STEPS or time.monotonic() + delay >= deadline:
                raise ReviewError(str(exc)) from None
            await asyncio.sleep(delay)
            delay *= BACKOFF_FACTOR
            continue
        except KubeError as exc:
            raise ReviewError(str(exc)) from None
        if not isinstance(answer, dict) or not isinstance(answer.get("status"), dict):
            raise ReviewError(f"create {resource}: the API server answered without a status")
        return answer
    raise AssertionError("unreachable: the last attempt returns or raises")


def _user_fields(user: User) -> dict[str, Any]:
    out: dict[str, Any] = {"user": user.name, "groups": list(user.groups)}
    if user.uid:
        out["uid"] = user.uid
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra}
    return out


class TokenReviewer:
    """Bearer tokens checked by the cluster (``TokenReview``), answers cached ``cache_ttl`` seconds."""

    PATH = "/apis/authentication.k8s.io/v1/tokenreviews"

    def __init__(self, client: ApiClient, cache_ttl: float = 10.0) -> None:
        self.client = client
        self.cache_ttl = cache_ttl
        self.cache: TTLCache[bytes, tuple[User | None]] = TTLCache()
        self.reviews = 0  # reviews sent (what the caching saves is counted against this)

    async def authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).digest()
        cached = self.cache.get(key)
        if cached is not None:
            return cached[0]
        self.reviews += 1
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        status = (await _create(self.client, self.PATH, "tokenreviews", body))["status"]
        user: User | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            extra = tuple(sorted((str(k), tuple(str(x) for x in v)) for k, v in (info.get("extra") or {}).items()))
            user = User(str(info.get("username") or ""), str(info.get("uid") or ""),
                        tuple(str(g) for g in info.get("groups") or ()), extra)
            if not user.name:
                raise ReviewError("create tokenreviews: an authenticated review without a user name")
        self.cache.put(key, (user,), self.cache_ttl)
        return user


class AccessReviewer:
    """Non-resource requests authorized by the cluster (``SubjectAccessReview``), answers cached
    ``allow_ttl`` (allowed) and ``deny_ttl`` (not allowed) seconds."""

    PATH = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

    def __init__(self, client: ApiClient, allow_ttl: float = 10.0, deny_ttl: float = 10.0) -> None:
        self.client = client
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.cache: TTLCache[tuple[Any, ...], tuple[Decision, str]] = TTLCache()
        self.reviews = 0

    async def authorize(self, user: User, verb: str, path: str) -> tuple[Decision, str]:
        key = (user, verb, path)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        self.reviews += 1
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {**_user_fields(user), "nonResourceAttributes": {"path": path, "verb": verb}}}
        status = (await _create(self.client, self.PATH, "subjectaccessreviews", body))["status"]
        reason = str(status.get("reason") or "")
        if status.get("allowed"):
            answer = (Decision.ALLOW, reason)
            self.cache.put(key, answer, self.allow_ttl)
            return answer
        answer = (Decision.DENY if status.get("denied") else Decision.NO_OPINION, reason)
        self.cache.put(key, answer, self.deny_ttl)
        return answer
