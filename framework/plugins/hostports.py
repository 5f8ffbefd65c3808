"""Host ports: a pod's ports with a host port (``util.GetHostPorts``) and the ports in use on a node
with ``framework.HostPortInfo``'s conflict rules.
"""

from __future__ import annotations

from collections.abc import Iterable

from pluginhost.model import ContainerPort, Pod

__all__ = ["DEFAULT_BIND_ALL_HOST_IP", "HostPortInfo", "host_ports"]

DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"


def host_ports(pod: Pod) -> list[ContainerPort]:
    """``util.GetHostPorts``: ports with a host port, of the sidecars (init containers with
    ``restartPolicy: Always``) and then of the containers."""
    out = [p for c in pod.init_containers if c.restart_policy == "Always" for p in c.ports if p.host_port > 0]
    out.extend(p for c in pod.containers for p in c.ports if p.host_port > 0)
    return out


def _sanitize(ip: str, protocol: str) -> tuple[str, str]:
    return ip or DEFAULT_BIND_ALL_HOST_IP, protocol or "TCP"


class HostPortInfo:
    """``framework.HostPortInfo``: host IP → {(protocol, port)} in use. An empty IP means 0.0.0.0 and
    an empty protocol TCP; 0.0.0.0 conflicts with every IP on the same protocol and port."""

    __slots__ = ("_by_ip",)

    def __init__(self, ports: Iterable[ContainerPort] = ()) -> None:
        self._by_ip: dict[str, set[tuple[str, int]]] = {}
        for p in ports:
            self.add(p.host_ip, p.protocol, p.host_port)

    def add(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        ip, protocol = _sanitize(ip, protocol)
        self._by_ip.setdefault(ip, set()).add((protocol, port))

    def remove(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        ip, protocol = _sanitize(ip, protocol)
        s = self._by_ip.get(ip)
        if s is not None:
            s.discard((protocol, port))
            if not s:
                del self._by_ip[ip]

    def __len__(self) -> int:
        return sum(len(s) for s in self._by_ip.values())

    def check_conflict(self, ip: str, protocol: str, port: int) -> bool:
        if port <= 0:
            return False
        ip, protocol = _sanitize(ip, protocol)
        pp = (protocol, port)
        if ip == DEFAULT_BIND_ALL_HOST_IP:
            return any(pp in s for s in self._by_ip.values())
        for key in (DEFAULT_BIND_ALL_HOST_IP, ip):
            s = self._by_ip.get(key)
            if s is not None and pp in s:
                return True
        return False

    def fits(self, wanted: Iterable[ContainerPort]) -> bool:
        """True when none of ``wanted`` conflicts (``fitsPorts``)."""
        return not any(self.check_conflict(p.host_ip, p.protocol, p.host_port) for p in wanted)
