"""The scenarios with a Go plugin host (clients/go, built with ``go build`` on first use):
``remote-go`` (``remote-streams`` with BenchTier written with the Go SDK), ``remote-go-ahead``
(``remote``, lookahead, with that Go host) and ``remote-go-fit`` (kube-scheduler's own NodeResourcesFit
served remotely by the Go adapter in place of the in-process one)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from framework.config import SchedulerConfig, load_config
from framework.plugins import Registry
from framework.profiles import unavailable_plugins

from .remote import RemotePluginScenario, RemoteStreamsScenario
from .runs import RunSpec

__all__ = ["GO_MODULE", "RemoteGoAheadScenario", "RemoteGoScenario", "RemoteUpstreamFitScenario", "go_binary"]

GO_MODULE = Path(__file__).resolve().parents[2] / "clients" / "go"
GO_BUILD_SECONDS = 900


def go_binary(cmd: str) -> str:
    """``clients/go/.bin/<cmd>``, built from ``clients/go/cmd/<cmd>`` (the Go build cache makes a
    rebuild of unchanged code a link only)."""
    out = GO_MODULE / ".bin" / cmd
    try:
        subprocess.run(
            ["go", "build", "-trimpath", "-o", str(out), f"./cmd/{cmd}"], cwd=GO_MODULE, check=True,
            capture_output=True, text=True, timeout=GO_BUILD_SECONDS, env={**os.environ, "CGO_ENABLED": "0"},
        )
    except FileNotFoundError:
        raise RuntimeError(f"building {cmd} needs `go` on PATH (clients/go, docs/plugin-go.md)") from None
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"go build ./cmd/{cmd} failed: {exc.stderr.strip()[-2000:]}") from None
    return str(out)


class RemoteGoScenario(RemoteStreamsScenario):
    """``remote-streams`` with BenchTier written with the Go SDK (``outrigger-benchtier``): the same
    logic, the same exchanges (Filter with scores in one exchange per cycle), a Go host."""

    name = "remote-go"
    description = (
        "remote-streams with BenchTier written with the Go SDK (clients/go/cmd/outrigger-benchtier): one Filter "
        "exchange (scores included) per cycle to a Go plugin host; 5000 measured pods"
    )

    HOST = "Go plugin host"

    def host_argv(self) -> list[str]:
        return [go_binary("outrigger-benchtier"), "--listen", "127.0.0.1:0"]


class RemoteGoAheadScenario(RemoteGoScenario):
    """``remote`` with BenchTier written with the Go SDK: the Go host declares lookahead too, so the
    framework asks for its answers ahead of the pods' cycles, several pods per message."""

    name = "remote-go-ahead"
    description = (
        "remote with BenchTier written with the Go SDK (outrigger-benchtier --lookahead): answers asked for "
        "ahead of the pods' cycles from a Go plugin host"
    )

    def runs(self, quick: bool) -> list[RunSpec]:
        return RemotePluginScenario.runs(self, quick)

    def host_argv(self) -> list[str]:
        return [*super().host_argv(), "--lookahead"]


UPSTREAM_FIT = "UpstreamNodeResourcesFit"


class RemoteUpstreamFitScenario(RemoteGoScenario):
    """``basic`` with kube-scheduler's own NodeResourcesFit (k8s.io/kubernetes at the pinned release,
    unmodified) served out of process by the Go adapter in place of Outrigger's in-process one."""

    name = "remote-go-fit"
    chunk = 50
    description = (
        "basic with kube-scheduler's own NodeResourcesFit served remotely by the Go adapter "
        "(outrigger-kube-plugins) in place of the in-process one; 2000 measured pods"
    )

    def node_labels(self, i: int) -> dict[str, str]:
        return {}

    def runs(self, quick: bool) -> list[RunSpec]:
        if quick:
            return [RunSpec(self.name, nodes=200, init_pods=100, measure_pods=300)]
        return [RunSpec(self.name, nodes=5000, init_pods=1000, measure_pods=2000)]  # four exchanges per pod

    def host_argv(self) -> list[str]:
        return [go_binary("outrigger-kube-plugins"), "--listen", "127.0.0.1:0", "--prefix", "Upstream"]

    def config(self, registry: Registry) -> SchedulerConfig:
        profile = {
            "schedulerName": "default-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": UPSTREAM_FIT, "weight": 1}],
                                       "disabled": [{"name": "NodeResourcesFit"}]}},
        }
        text = json.dumps({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                           "profiles": [profile]})
        return load_config(text, registry.points(), "<bench>", unavailable=unavailable_plugins(registry))
