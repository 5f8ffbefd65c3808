"""The framework service: the Scheduler API over gRPC, the Handle and CycleState services for plugin
hosts, the standard health service, and the scheduler loop, in one process.

``serve`` builds the scheduler from a configuration, starts the gRPC server and the scheduling loop,
and on SIGTERM/SIGINT flips health to NOT_SERVING, stops taking pods, lets binding cycles finish, and
stops the server with a grace period. Bad requests get ``INVALID_ARGUMENT`` (or ``NOT_FOUND``) with a
message naming what is wrong, and change nothing.

With remote plugins (:func:`start_service`), the order matters: the server's port is bound first (plugin
hosts are told where to connect back during the handshake), then every endpoint is handshaken (the
registry needs their manifests), the configuration is loaded against that registry, the scheduler is
built and its remote plugins configured, and only then does the server start taking requests.

Every server here may serve TLS (``tls``, a :class:`~pluginhost.security.ServerTLS`; mutual TLS with a
client CA): the Scheduler API and the Handle/CycleState services share the port, so clients and plugin
hosts then both present certificates. See docs/security.md.

The modules: :mod:`~framework.service.server` (starting, serving and stopping), :mod:`~framework.service.servicer`
(the Scheduler API's methods) and :mod:`~framework.service.objects` (the v1 objects and proto messages it
answers with).
"""

from pluginhost.wire import MAX_MESSAGE_BYTES

from .objects import node_object, pod_object
from .server import (
    PluginServices,
    Server,
    advertised_address,
    serve,
    start_plugin_services,
    start_server,
    start_service,
)
from .servicer import SchedulerService

__all__ = [
    "MAX_MESSAGE_BYTES",
    "PluginServices",
    "SchedulerService",
    "Server",
    "advertised_address",
    "node_object",
    "pod_object",
    "serve",
    "start_plugin_services",
    "start_server",
    "start_service",
]
