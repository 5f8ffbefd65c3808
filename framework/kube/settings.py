"""What ``outrigger serve --kubeconfig`` reads of a KubeSchedulerConfiguration file on its own, before the
plugins are known (a standby replica does not meet the plugin hosts until it leads): the
``clientConnection`` (kubeconfig, qps, burst), ``leaderElection`` and ``delayCacheUntilActive``, and
from them the API server to talk to.

::

    conn = client_connection(scheduler.config)      # ClientConnection(kubeconfig, qps=50.0, burst=100)
    election = leader_election("scheduler.yaml")    # kube-scheduler's defaults where the file says nothing
    config = kube_config(conn, kubeconfig="", in_cluster=True)

A value kube-scheduler would refuse is a :class:`KubeConfigError` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pluginhost.decode import TextError, load_document

from ..config import ConfigError, LeaderElectionConfig, leader_election_config
from ..config.decoding import RawProfile, decode_config, read_document
from ..config.defaults import merged_plugins
from ..config.model import MULTI_POINT
from .client import KubeConfig, KubeConfigError

if TYPE_CHECKING:
    from ..config import SchedulerConfig

__all__ = [
    "DEFAULT_BURST",
    "DEFAULT_QPS",
    "ClientConnection",
    "client_connection",
    "client_connection_from",
    "config_document",
    "configured_kubeconfig",
    "default_preemption",
    "dynamic_resources",
    "kube_config",
    "leader_election",
]

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100


@dataclass(frozen=True, slots=True)
class ClientConnection:
    """KubeSchedulerConfiguration's ``clientConnection``: kubeconfig, qps (50), burst (100)."""

    kubeconfig: str = ""
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST


def client_connection(config: SchedulerConfig) -> ClientConnection:
    """The configuration's ``clientConnection`` with kube-scheduler's v1 defaults (0 or unset: 50 and
    100; a negative qps turns rate limiting off, as in client-go). A wrong type is a KubeConfigError."""
    return client_connection_from(config.extra.get("clientConnection") or {})


def client_connection_from(raw: dict[str, Any]) -> ClientConnection:
    """:func:`client_connection` from the ``clientConnection`` mapping of a configuration document."""
    kubeconfig = raw.get("kubeconfig") or ""
    qps = raw.get("qps") or DEFAULT_QPS
    burst = raw.get("burst") or DEFAULT_BURST
    if not isinstance(kubeconfig, str):
        raise KubeConfigError(f"clientConnection.kubeconfig: must be a string, got {kubeconfig!r}")
    if not isinstance(qps, int | float) or isinstance(qps, bool):
        raise KubeConfigError(f"clientConnection.qps: must be a number, got {qps!r}")
    if not isinstance(burst, int) or isinstance(burst, bool) or burst < 0:
        raise KubeConfigError(f"clientConnection.burst: must be a non-negative integer, got {burst!r}")
    return ClientConnection(kubeconfig, float(qps), burst)


def config_document(config_file: str | None) -> dict[str, Any]:
    """A KubeSchedulerConfiguration file as a mapping ({} when none is given, or unreadable: the
    configuration's own loading reports a bad file)."""
    if not config_file:
        return {}
    try:
        with open(config_file, encoding="utf-8") as fh:
            doc = load_document(fh.read()).value  # the hardened front end: no input recurses without end
    except (OSError, UnicodeDecodeError, TextError):
        return {}
    return doc if isinstance(doc, dict) else {}


def configured_kubeconfig(config_file: str | None) -> str:
    """``clientConnection.kubeconfig`` of a KubeSchedulerConfiguration file ("" when unset or unreadable:
    the configuration's own loading reports a bad file)."""
    conn = config_document(config_file).get("clientConnection")
    value = conn.get("kubeconfig") if isinstance(conn, dict) else None
    return value if isinstance(value, str) else ""


def _raw_profiles(config_file: str | None) -> list[RawProfile] | None:
    """The profiles of a KubeSchedulerConfiguration file as written (one empty profile when it names
    none), or None without a file or when it does not decode (the configuration's own loading reports it)."""
    if not config_file:
        return None
    try:
        with open(config_file, encoding="utf-8") as fh:
            raw = decode_config(read_document(fh.read(), config_file), config_file, [])
    except (OSError, UnicodeDecodeError, TextError, ConfigError):
        return None
    return raw.profiles or [RawProfile("profiles[0]", None, None, None, [])]


def default_preemption(config_file: str | None) -> bool:
    """Whether some profile of a KubeSchedulerConfiguration file runs DefaultPreemption at PostFilter
    (kube-scheduler's defaults when no file is given: it does), read before the plugins are known: a
    standby lists and watches PodDisruptionBudgets only then. A file that does not decode counts as
    yes (the configuration's own loading reports it)."""
    profiles = _raw_profiles(config_file)
    if profiles is None:
        return True
    for prof in profiles:
        merged = merged_plugins(prof.plugins)
        post = merged["postFilter"]
        if any(entry.name == "DefaultPreemption" for entry in post.enabled):
            return True
        if "*" in post.disabled or "DefaultPreemption" in post.disabled:
            continue
        if any(entry.name == "DefaultPreemption" for entry in merged[MULTI_POINT].enabled):
            return True
    return False


def dynamic_resources(config_file: str | None) -> bool:
    """Whether some profile of a KubeSchedulerConfiguration file runs DynamicResources at any point
    (kube-scheduler's default profile does): a standby lists and watches ResourceSlices, DeviceClasses and
    ResourceClaims only then. A file that does not decode counts as yes, as for :func:`default_preemption`."""
    profiles = _raw_profiles(config_file)
    if profiles is None:
        return True
    return any(entry.name == "DynamicResources" for prof in profiles
               for plugin_set in merged_plugins(prof.plugins).values() for entry in plugin_set.enabled)


def leader_election(config_file: str | None) -> LeaderElectionConfig:
    """The file's ``leaderElection`` with kube-scheduler's defaults (on, ``kube-system/kube-scheduler``),
    read before the plugins are known (a standby does not meet the plugin hosts until it leads). A
    value kube-scheduler would refuse is a KubeConfigError naming the file and the field."""
    raw = config_document(config_file).get("leaderElection")
    cfg, problems = leader_election_config(raw if isinstance(raw, dict) else None)
    if problems:
        path, message = problems[0]
        raise KubeConfigError(f"{config_file}: {path}: {message}")
    return cfg


def kube_config(conn: ClientConnection, kubeconfig: str, in_cluster: bool) -> KubeConfig:
    """Where the API server is: the kubeconfig given, else ``clientConnection.kubeconfig``, else (with
    ``in_cluster``) the pod's service account."""
    path = kubeconfig or conn.kubeconfig
    if path:
        return KubeConfig.from_file(path)
    if in_cluster:
        return KubeConfig.in_cluster()
    raise KubeConfigError("no kubeconfig: give --kubeconfig, clientConnection.kubeconfig or --in-cluster")
