"""The ``apiserver-traced`` scenario's trace collector: an OTLP/gRPC receiver in a process of its own.

``outrigger serve`` exports its traces here as it would to a production collector (the SDK's OTLP/gRPC
exporter, over a real connection on 127.0.0.1); the collector decodes every request and counts what it
got, so the framework pays the encoding and the export as in production and the receiver's own CPU is
accounted apart from it. ::

    python -m tools.bench.otlpcollector --namespace namespace-2

prints ``listening on 127.0.0.1:PORT``, then answers each ``count`` line on its standard input with one
JSON line (:class:`Counts`) and exits at the end of its input. :class:`Collector` runs it from the
benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import threading
from collections.abc import Sequence
from concurrent import futures
from dataclasses import asdict, dataclass
from typing import Any

import orjson

__all__ = ["Collector", "Counts", "count_request"]

#: Largest export request accepted (bytes); the framework's batches of 512 spans are far smaller.
MAX_MESSAGE = 32 * 1024 * 1024
SERVICE = "opentelemetry.proto.collector.trace.v1.TraceService"
STARTUP_SECONDS = 30.0
REPLY_SECONDS = 10.0


@dataclass(slots=True)
class Counts:
    """What the collector has received so far."""

    requests: int = 0
    bytes: int = 0  # the requests' protobuf bytes
    spans: int = 0
    roots: int = 0  # scheduling contexts: SchedulePod spans, any namespace
    contexts: int = 0  # SchedulePod spans of pods in the namespace counted
    bound: int = 0  # of those, the contexts whose outrigger.result is "bound"


def count_request(data: bytes, namespace: str, counts: Counts) -> None:
    """Add one ``ExportTraceServiceRequest`` (its wire bytes) to ``counts``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest.FromString(data)
    counts.requests += 1
    counts.bytes += len(data)
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            counts.spans += len(ss.spans)
            for span in ss.spans:
                if span.name != "SchedulePod":
                    continue
                counts.roots += 1
                attrs = {kv.key: kv.value.string_value for kv in span.attributes}
                if attrs.get("k8s.namespace.name") == namespace:
                    counts.contexts += 1
                    counts.bound += attrs.get("outrigger.result") == "bound"


def _serve(namespace: str, listen: str) -> int:
    import grpc

    counts, lock = Counts(), threading.Lock()

    def export(data: bytes, context: Any) -> bytes:
        with lock:
            count_request(data, namespace, counts)
        return b""  # an empty ExportTraceServiceResponse: everything accepted

    handler = grpc.method_handlers_generic_handler(SERVICE, {"Export": grpc.unary_unary_rpc_method_handler(export)})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[handler],
                         options=[("grpc.max_receive_message_length", MAX_MESSAGE)])
    port = server.add_insecure_port(listen)
    server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    for line in sys.stdin:  # until the benchmark closes our input
        if line.strip() == "count":
            with lock:
                reply = orjson.dumps(asdict(counts))
            sys.stdout.write(reply.decode() + "\n")
            sys.stdout.flush()
    server.stop(1.0).wait(5)
    return 0


class Collector:
    """The collector's process, started by the benchmark (killed with it: ``die_with_parent``)."""

    def __init__(self, namespace: str, die_with_parent: Sequence[str] = ()) -> None:
        self.argv = [*die_with_parent, sys.executable, "-m", "tools.bench.otlpcollector", "--namespace", namespace]
        self.proc: asyncio.subprocess.Process | None = None
        self.endpoint = ""

    async def start(self) -> Collector:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert self.proc.stdout is not None
        first = await asyncio.wait_for(self.proc.stdout.readline(), STARTUP_SECONDS)
        address = first.decode().strip().removeprefix("listening on ")
        if not first.startswith(b"listening on ") or not address:
            await self.stop()
            raise RuntimeError(f"the OTLP collector did not start: {first!r}")
        self.endpoint = f"http://{address}"
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def counts(self) -> Counts:
        """What it has received so far."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"count\n")
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), REPLY_SECONDS)
        if not line:
            raise RuntimeError(f"the OTLP collector exited ({self.proc.returncode})")
        return Counts(**orjson.loads(line))

    async def wait_contexts(self, count: int, timeout: float) -> Counts:
        """Its counts once ``count`` contexts of the namespace have arrived, or when ``timeout`` seconds
        have passed (polled every 0.1 s): the last batch leaves the framework after its batch delay."""
        deadline = asyncio.get_running_loop().time() + timeout
        got = await self.counts()
        for _ in range(int(timeout / 0.1) + 1):
            if got.contexts >= count or asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(0.1)
            got = await self.counts()
        return got

    async def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.returncode is not None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 10.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench.otlpcollector", description=__doc__.split("\n\n")[0])
    p.add_argument("--namespace", required=True, help="the namespace whose scheduling contexts are counted")
    p.add_argument("--listen", default="127.0.0.1:0")
    args = p.parse_args(argv)
    return _serve(args.namespace, args.listen)


if __name__ == "__main__":
    sys.exit(main())
