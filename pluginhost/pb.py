"""The one import point for the generated outrigger.v1 protobuf/gRPC stubs.

Import messages and services from here, never from ``pluginhost._gen`` directly::

    from pluginhost import pb

    pod = pb.types.Pod(metadata=pb.types.ObjectMeta(name="web-0"))
    stub = pb.plugin_grpc.PluginStub(channel)

The stubs are generated from ``proto/outrigger/v1/*.proto`` by ``python -m pluginhost._genproto``
(``make proto``); ``tests/test_proto.py`` fails when they are stale.
"""

from __future__ import annotations

from pluginhost._gen.outrigger.v1 import cyclestate_pb2 as cyclestate
from pluginhost._gen.outrigger.v1 import cyclestate_pb2_grpc as cyclestate_grpc
from pluginhost._gen.outrigger.v1 import handle_pb2 as handle
from pluginhost._gen.outrigger.v1 import handle_pb2_grpc as handle_grpc
from pluginhost._gen.outrigger.v1 import plugin_pb2 as plugin
from pluginhost._gen.outrigger.v1 import plugin_pb2_grpc as plugin_grpc
from pluginhost._gen.outrigger.v1 import scheduler_pb2 as scheduler
from pluginhost._gen.outrigger.v1 import scheduler_pb2_grpc as scheduler_grpc
from pluginhost._gen.outrigger.v1 import types_pb2 as types

__all__ = [
    "PROTO_PACKAGE",
    "cyclestate",
    "cyclestate_grpc",
    "handle",
    "handle_grpc",
    "plugin",
    "plugin_grpc",
    "scheduler",
    "scheduler_grpc",
    "types",
]

# The protobuf package of every message above (full names are e.g. "outrigger.v1.Pod").
PROTO_PACKAGE = "outrigger.v1"
