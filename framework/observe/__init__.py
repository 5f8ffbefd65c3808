"""Observing and serving the framework like kube-scheduler: traces, metrics and debug scores of its
scheduling cycles, and the HTTP endpoints that show them (health checks, ``/metrics``, ``/configz``)
behind the secure port's TLS, authentication and authorization.

- :mod:`.observability`: :class:`~.observability.Observability`, all of it started and stopped in one
  place from ``outrigger serve``'s flags (:class:`~.observability.ObservabilityConfig`).
- :mod:`.tracing`: OpenTelemetry spans, one trace per scheduling context, and where they go.
- :mod:`.metrics`: the Prometheus metrics, with kube-scheduler's names.
- :mod:`.debugscores`: each scheduled pod's top nodes with every Score plugin's scores.
- :mod:`.instrument`: spans, metrics and debug scores wrapped around a scheduler's cycles, extension
  points and plugin calls (the runtime's plugin-call observer).
- :mod:`.tracecli`: a pod's trace as the Scheduler API sends it and ``outrigger trace`` prints it.
- :mod:`.httpserver`: the HTTP endpoints, on the secure port and the plain ``--http`` port.
- :mod:`.health`: :class:`HealthChecks`, the named checks of ``/healthz``, ``/livez`` and ``/readyz``.
- :mod:`.serving`: :class:`SecureServing`, the secure port's settings and ``outrigger serve``'s flags.
- :mod:`.auth`: the gate every request passes (client certificates, bearer tokens, authorization).
- :mod:`.delegated`: TokenReview and SubjectAccessReview against a cluster, cached.
- :mod:`.certs`: the serving certificate (self-signed when none is given) and the client CA.
- :mod:`.configz`: the effective KubeSchedulerConfiguration.

The core (:mod:`framework.runtime` and the modules beside it) imports none of this: :mod:`.instrument`
installs itself on a scheduler's instances.
"""

from .health import HealthChecks
from .serving import SecureServing, ServingConfigError

__all__ = ["HealthChecks", "SecureServing", "ServingConfigError"]
