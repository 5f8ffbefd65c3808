#!/usr/bin/env python3
"""Ask a gRPC health service whether it is SERVING: the images' HEALTHCHECK and compose's probe.

    outrigger-healthcheck ADDRESS [SERVICE]

Exit status 0 when ADDRESS (``host:port``) reports SERVICE (default ``""``, the whole server) as
SERVING; 1 otherwise, with one line on stderr saying what was wrong; 2 for a wrong command line.
Both the framework service and ``outrigger plugin serve`` run the standard ``grpc.health.v1`` service.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = "usage: outrigger-healthcheck ADDRESS [SERVICE]"
TIMEOUT_SECONDS = 3.0


def main(argv: Sequence[str]) -> int:
    if len(argv) not in (1, 2) or ":" not in argv[0]:
        print(USAGE, file=sys.stderr)
        return 2
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    address = argv[0]
    service = argv[1] if len(argv) == 2 else ""
    request = health_pb2.HealthCheckRequest(service=service)
    try:
        with grpc.insecure_channel(address) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(request, timeout=TIMEOUT_SECONDS)
    except grpc.RpcError as exc:
        code = exc.code()
        details = exc.details() or ""
        if code == grpc.StatusCode.NOT_FOUND and not details:
            details = f"the server has no service {service!r}"
        print(f"{address}: {code.name}: {details}", file=sys.stderr)
        return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    if reply.status != health_pb2.HealthCheckResponse.SERVING:
        print(f"{address}: {service or 'server'} is {status}", file=sys.stderr)
        return 1
    print(f"{address}: {service or 'server'} is {status}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
