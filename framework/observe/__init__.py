"""Serving the framework like kube-scheduler: the secure port's TLS, authentication and authorization,
named health checks and ``/configz``. The HTTP endpoints themselves are :mod:`framework.httpserver`.

- :mod:`.health`: :class:`HealthChecks`, the named checks of ``/healthz``, ``/livez`` and ``/readyz``.
- :mod:`.serving`: :class:`SecureServing`, the secure port's settings and ``outrigger serve``'s flags.
- :mod:`.auth`: the gate every request passes (client certificates, bearer tokens, authorization).
- :mod:`.delegated`: TokenReview and SubjectAccessReview against a cluster, cached.
- :mod:`.certs`: the serving certificate (self-signed when none is given) and the client CA.
- :mod:`.configz`: the effective KubeSchedulerConfiguration.
"""

from .health import HealthChecks
from .serving import SecureServing, ServingConfigError

__all__ = ["HealthChecks", "SecureServing", "ServingConfigError"]
