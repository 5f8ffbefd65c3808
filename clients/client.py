"""A small typed client for the framework's Scheduler API.

    with SchedulerClient("127.0.0.1:50051") as c:
        c.apply_text(open("pods.yaml").read(), source="pods.yaml")
        for pod in c.list_pods():
            print(pod.ref.name, pod.phase, pod.node_name)

Every call carries a deadline. gRPC failures are raised as :class:`ClientError` with the server's
message (e.g. the manifest field that was wrong).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import grpc

from pluginhost import pb

__all__ = ["ClientError", "SchedulerClient"]


class ClientError(RuntimeError):
    """A call the server refused or could not answer; ``code`` is the gRPC status code."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _call(fn: Any, request: Any, timeout: float) -> Any:
    try:
        return fn(request, timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code()
        detail = exc.details() or code.name
        if code == grpc.StatusCode.UNAVAILABLE:
            detail = f"framework service unavailable: {detail}"
        raise ClientError(code, detail) from None


class SchedulerClient:
    def __init__(self, address: str, *, timeout: float = 30.0) -> None:
        self.address = address
        self.timeout = timeout
        self._channel = grpc.insecure_channel(
            address,
            options=[("grpc.max_receive_message_length", 64 << 20), ("grpc.max_send_message_length", 64 << 20)],
        )
        self._stub = pb.scheduler_grpc.SchedulerStub(self._channel)  # type: ignore[no-untyped-call]

    def __enter__(self) -> SchedulerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._channel.close()

    def wait_ready(self, timeout: float = 10.0) -> None:
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise ClientError(grpc.StatusCode.UNAVAILABLE, f"no framework service at {self.address}") from None

    def apply_text(self, content: str, source: str = "<input>", *, dry_run: bool = False) -> list[Any]:
        req = pb.scheduler.ApplyRequest(manifests=[pb.scheduler.Manifest(source=source, content=content)],
                                        dry_run=dry_run)
        return list(_call(self._stub.Apply, req, self.timeout).applied)

    def delete(self, kind: str, name: str, namespace: str = "") -> list[Any]:
        ref = pb.scheduler.ObjectRef(kind=kind, name=name, namespace=namespace)
        return list(_call(self._stub.Delete, pb.scheduler.DeleteRequest(objects=[ref]), self.timeout).deleted)

    def get_pod(self, name: str, namespace: str = "default") -> Any:
        return _call(self._stub.GetPod, pb.scheduler.GetPodRequest(namespace=namespace, name=name), self.timeout)

    def list_pods(self, namespace: str = "", phase: str = "") -> list[Any]:
        req = pb.scheduler.ListPodsRequest(namespace=namespace, phase=phase)
        return list(_call(self._stub.ListPods, req, self.timeout).pods)

    def list_nodes(self) -> list[Any]:
        return list(_call(self._stub.ListNodes, pb.scheduler.ListNodesRequest(), self.timeout).nodes)

    def explain(self, pod_manifest: str, source: str = "<pod>", profile: str = "") -> dict[str, Any]:
        req = pb.scheduler.ExplainRequest(pod=pb.scheduler.Manifest(source=source, content=pod_manifest),
                                          profile=profile)
        result: dict[str, Any] = json.loads(_call(self._stub.Explain, req, self.timeout).json)
        return result

    def watch(self, since: int = 0, *, replay: bool = True, timeout: float | None = None) -> Iterator[Any]:
        """Events after sequence ``since``; resume by passing the last sequence seen."""
        req = pb.scheduler.WatchRequest(since_sequence=since, replay=replay)
        try:
            yield from self._stub.Watch(req, timeout=timeout)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                raise ClientError(exc.code(), exc.details() or exc.code().name) from None
