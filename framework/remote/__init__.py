"""The remote wing: plugins served by plugin hosts, called by the runtime exactly like in-process ones.

- :mod:`.config`: the RemotePlugins document (endpoints, deadlines, failure policies).
- :mod:`.security`: how the framework dials a host (TLS, bearer token, the credential it issues).
- :mod:`.errors`: :class:`RemotePluginsError` (an endpoint cannot be used), :class:`RemotePluginError`
  (one call failed).
- :mod:`.endpoint`: an endpoint's replicas: channels, handshake, health, failover order, idle streams.
- :mod:`.streams`: Filter and Score over streams of node batches, one exchange per (cycle, method).
- :mod:`.adapter`, :mod:`.classes`, :mod:`.convert`: :class:`RemotePlugin`, the adapter the runtime
  calls, its classes per set of declared points (and hooks), the cycle's objects in wire form.
- :mod:`.lookahead`: Filter/Score answers asked for before the pods' cycles.
- :mod:`.publisher`: the snapshot mirror the hosts follow; :mod:`.services`: the Handle and CycleState
  services the hosts call back.
- :mod:`.shadow`: shadow plugins, called beside the live cycles and compared with what they decided.
- :mod:`.hosts`: :class:`RemotePlugins`, every endpoint of a framework (connect, register, attach).
- :mod:`.stats`: what the adapters measured.

Modules import one another in that order (config and security first, hosts last), never back.
"""

from .adapter import RemotePlugin
from .config import (
    API_VERSION,
    DEFAULT_DEADLINE,
    KIND,
    EndpointConfig,
    load_remote_plugins,
    parse_duration,
    parse_remote_plugins,
)
from .errors import RemotePluginError, RemotePluginsError
from .hosts import RemotePlugins
from .stats import PointStats

__all__ = [
    "API_VERSION",
    "DEFAULT_DEADLINE",
    "KIND",
    "EndpointConfig",
    "PointStats",
    "RemotePlugin",
    "RemotePluginError",
    "RemotePlugins",
    "RemotePluginsError",
    "load_remote_plugins",
    "parse_duration",
    "parse_remote_plugins",
]
