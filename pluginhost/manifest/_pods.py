"""A v1 Pod to the model: its containers and their resources and ports, its scheduling fields, and the
requests the pod adds up to.

The API server's defaulting that scheduling relies on is applied here, since there is no API server: a
container limit without a request becomes the request, ``hostNetwork`` pods expose their container
ports as host ports, and the documented defaults of optional fields are filled in. The pod's aggregate
``requests`` (what ``NodeResourcesFit`` compares with a node's allocatable) is computed once, by
:func:`compute_requests`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pluginhost.decode import (
    FieldError,
    get_bool,
    get_int,
    get_list,
    get_map,
    get_str,
    item_map,
    join,
    one_of,
    required_str,
    str_map,
    timestamp,
)
from pluginhost.model import Container, ContainerPort, Pod, PodResourceClaim, ResourceList
from pluginhost.quantity import MAX_CANONICAL, format_quantity

from ._fields import INT32_MAX, INT32_MIN, resource_list
from ._meta import check_labels, invalid, object_meta, subdomain_problem, uid
from ._placement import affinity, spread_constraints, toleration
from ._storage import pod_volumes

__all__ = ["build_pod", "compute_requests", "finish_pod"]

_PREEMPTION_POLICIES = frozenset({"PreemptLowerPriority", "Never"})
_PROTOCOLS = frozenset({"TCP", "UDP", "SCTP"})


def _port(v: object, path: str, host_network: bool) -> ContainerPort:
    p = item_map(v, path)
    if p.get("containerPort") is None:
        raise FieldError(f"{path}.containerPort", "required field is missing")
    container_port = get_int(p, "containerPort", path, 0)
    if not 1 <= container_port <= 65535:
        raise FieldError(f"{path}.containerPort", f"must be between 1 and 65535, got {container_port}")
    host_port = get_int(p, "hostPort", path, 0)
    if not 0 <= host_port <= 65535:
        raise FieldError(f"{path}.hostPort", f"must be between 1 and 65535 (or 0 for none), got {host_port}")
    if host_network and host_port == 0:
        # API server defaulting: with hostNetwork the container port *is* a host port.
        host_port = container_port
    protocol = get_str(p, "protocol", path) or "TCP"
    one_of(protocol, _PROTOCOLS, f"{path}.protocol", "protocol")
    return ContainerPort(
        container_port=container_port, host_port=host_port, protocol=protocol, host_ip=get_str(p, "hostIP", path)
    )


def _container(v: object, path: str, host_network: bool) -> Container:
    c = item_map(v, path)
    name = required_str(c, "name", path)
    resources = get_map(c, "resources", path)
    rpath = f"{path}.resources"
    requests = resource_list(resources, "requests", rpath)
    limits = resource_list(resources, "limits", rpath)
    for resource, limit in limits.items():
        request = requests.get(resource)
        if request is None:
            # API server defaulting: a limit without a request is also the request.
            requests[resource] = limit
        elif request > limit:
            raise FieldError(
                join(f"{rpath}.requests", resource),
                f"must be less than or equal to {resource} limit of {format_quantity(resource, limit)}",
            )
    return Container(
        name=name,
        image=get_str(c, "image", path),
        requests=requests,
        limits=limits,
        ports=[_port(p, f"{path}.ports[{i}]", host_network) for i, p in enumerate(get_list(c, "ports", path))],
        restart_policy=get_str(c, "restartPolicy", path),
    )


def _containers(spec: Mapping[str, Any]) -> tuple[list[Container], list[Container]]:
    """``spec.containers`` (at least one) and ``spec.initContainers``, all names distinct."""
    host_network = get_bool(spec, "hostNetwork", "spec")
    raw_containers = get_list(spec, "containers", "spec")
    if not raw_containers:
        raise FieldError("spec.containers", "a pod must have at least one container")
    containers = [_container(c, f"spec.containers[{i}]", host_network) for i, c in enumerate(raw_containers)]
    init_containers = [
        _container(c, f"spec.initContainers[{i}]", host_network)
        for i, c in enumerate(get_list(spec, "initContainers", "spec"))
    ]
    seen: set[str] = set()
    for field_name, group in (("containers", containers), ("initContainers", init_containers)):
        for i, c in enumerate(group):
            if c.name in seen:
                raise FieldError(f"spec.{field_name}[{i}].name", f'duplicate container name "{c.name}"')
            seen.add(c.name)
    return containers, init_containers


def _priority(spec: Mapping[str, Any]) -> tuple[int, str]:
    """``spec.priority`` (an int32) and ``spec.preemptionPolicy``, defaulted."""
    priority = get_int(spec, "priority", "spec", 0)
    if not INT32_MIN <= priority <= INT32_MAX:
        raise FieldError("spec.priority", f"must fit in a 32-bit integer, got {priority}")
    preemption_policy = get_str(spec, "preemptionPolicy", "spec") or "PreemptLowerPriority"
    one_of(preemption_policy, _PREEMPTION_POLICIES, "spec.preemptionPolicy", "preemptionPolicy")
    return priority, preemption_policy


def _scheduling_gates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(
        required_str(item_map(g, f"spec.schedulingGates[{i}]"), "name", f"spec.schedulingGates[{i}]")
        for i, g in enumerate(get_list(spec, "schedulingGates", "spec"))
    )


def _scheduling_group(spec: Mapping[str, Any]) -> str | None:
    """``spec.schedulingGroup.podGroupName``: the name of a PodGroup (a DNS subdomain), None without one."""
    if spec.get("schedulingGroup") is None:
        return None
    group = get_map(spec, "schedulingGroup", "spec")
    name = get_str(group, "podGroupName", "spec.schedulingGroup")
    if not name:
        raise FieldError("spec.schedulingGroup", "Invalid value: must specify one of: `podGroupName`")
    problem = subdomain_problem(name)
    if problem is not None:
        raise invalid("spec.schedulingGroup.podGroupName", name, problem)
    return name


def _resource_claims(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[
        tuple[PodResourceClaim, ...], dict[str, str]]:
    """``spec.resourceClaims`` and ``status.resourceClaimStatuses``. An entry naming neither a claim nor a
    template is kept: DynamicResources reports it (as kube-scheduler does for a field it does not know)."""
    claims, seen = [], set()
    for i, c in enumerate(get_list(spec, "resourceClaims", "spec")):
        path = f"spec.resourceClaims[{i}]"
        entry = item_map(c, path)
        name = required_str(entry, "name", path)
        if name in seen:
            raise FieldError(f"{path}.name", f'Duplicate value: "{name}"')
        seen.add(name)
        claim = PodResourceClaim(name, get_str(entry, "resourceClaimName", path),
                                 get_str(entry, "resourceClaimTemplateName", path))
        if claim.claim_name and claim.template_name:
            raise FieldError(path, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified")
        claims.append(claim)
    statuses = {}
    for i, st in enumerate(get_list(status, "resourceClaimStatuses", "status")):
        path = f"status.resourceClaimStatuses[{i}]"
        entry = item_map(st, path)
        statuses[required_str(entry, "name", path)] = get_str(entry, "resourceClaimName", path)
    return tuple(claims), statuses


def build_pod(obj: dict[str, Any]) -> Pod:
    """The :class:`Pod` of a decoded v1 Pod manifest, with its requests computed."""
    meta, name, namespace, labels, annotations = object_meta(obj, namespaced=True)
    created = timestamp(meta, "creationTimestamp", "metadata")
    spec = get_map(obj, "spec", "")
    status = get_map(obj, "status", "")
    containers, init_containers = _containers(spec)
    node_selector = str_map(spec, "nodeSelector", "spec")
    check_labels(node_selector, "spec.nodeSelector")
    priority, preemption_policy = _priority(spec)
    constraints = spread_constraints(spec)
    raw_volumes = spec.get("volumes")
    volumes = pod_volumes(raw_volumes, name) if raw_volumes else ()
    gates = _scheduling_gates(spec)
    resource_claims, claim_statuses = _resource_claims(spec, status)
    pod = Pod(
        name=name,
        namespace=namespace,
        uid=uid(meta),
        labels=labels,
        annotations=annotations,
        scheduler_name=get_str(spec, "schedulerName", "spec") or "default-scheduler",
        node_name=get_str(spec, "nodeName", "spec"),
        priority=priority,
        priority_class_name=get_str(spec, "priorityClassName", "spec"),
        preemption_policy=preemption_policy,
        node_selector=node_selector,
        affinity=affinity(spec),
        tolerations=[
            toleration(t, f"spec.tolerations[{i}]") for i, t in enumerate(get_list(spec, "tolerations", "spec"))
        ],
        topology_spread_constraints=constraints,
        scheduling_gates=gates,
        scheduling_group=_scheduling_group(spec),
        volumes=volumes,
        resource_claims=resource_claims,
        resource_claim_statuses=claim_statuses,
        containers=containers,
        init_containers=init_containers,
        overhead=resource_list(spec, "overhead", "spec"),
        creation_timestamp=time.time() if created is None else created,
        nominated_node_name=get_str(status, "nominatedNodeName", "status"),
        deletion_timestamp=timestamp(meta, "deletionTimestamp", "metadata"),
        raw=obj,
    )
    pod.requests = compute_requests(pod)
    for resource, amount in pod.requests.items():
        if amount > MAX_CANONICAL:
            # Each quantity fits an int64; their sum must too (the snapshot's columns are int64).
            raise FieldError(
                "spec.containers", f"the pod's {resource} requests add up to more than the largest quantity"
            )
    return pod


def _add_into(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for r, q in amounts.items():
        total[r] = total.get(r, 0) + q


def _max_into(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    for r, q in amounts.items():
        if q > total.get(r, -1):
            total[r] = q


def compute_requests(pod: Pod) -> ResourceList:
    """The pod's effective requests, as ``resource.PodRequests`` in k8s.io/component-helpers.

    Regular containers run together, so they add up. Init containers run one after another, each
    alongside the sidecars (``restartPolicy: Always`` init containers) started before it; sidecars
    keep running, so they also add to the regular containers' sum. The pod needs the larger of the
    two phases, plus its overhead.
    """
    total: dict[str, int] = {}
    for c in pod.containers:
        _add_into(total, c.requests)
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in pod.init_containers:
        if c.restart_policy == "Always":
            _add_into(total, c.requests)
            _add_into(sidecars, c.requests)
            _max_into(init_max, sidecars)
        else:
            effective = dict(c.requests)
            _add_into(effective, sidecars)
            _max_into(init_max, effective)
    _max_into(total, init_max)
    _add_into(total, pod.overhead)
    return total


def finish_pod(pod: Pod) -> Pod:
    """Complete a pod built in code rather than from a manifest: default each container's missing
    requests from its limits (as the API server does) and compute ``pod.requests``."""
    for c in (*pod.containers, *pod.init_containers):
        for resource, limit in c.limits.items():
            c.requests.setdefault(resource, limit)
    pod.requests = compute_requests(pod)
    return pod
