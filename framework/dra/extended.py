"""Extended resources backed by devices (kube-scheduler 1.37's DRAExtendedResource, GA and on).

A DeviceClass maps an extended resource to itself: explicitly with ``spec.extendedResourceName``
(``example.com/gpu``), and always under the implicit name ``deviceclass.resource.kubernetes.io/<class>``.
A pod asking for such a resource (``resources.limits: {example.com/gpu: 2}``) on a node that does not
advertise it in its allocatable gets devices of that class instead: DynamicResources allocates them for
a claim of its own making, one per pod (:func:`in_memory_claim` while the pod is being scheduled), with
one request per container and resource (:func:`requests_and_mappings`), and PreBind creates that claim
(:func:`claim_manifest`) and names it, with the request of each container, in the pod's
``status.extendedResourceClaimStatus`` (:func:`pod_status_patch`). NodeResourcesFit leaves such a resource
to DynamicResources on the nodes that do not advertise it (:func:`delegated`) and judges it as usual on
the nodes that do (a device plugin's).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pluginhost.model import Container, Node, Pod

from .models import API_VERSION, DeviceClass, DeviceRequest, ExactRequest, ResourceClaim

__all__ = [
    "ANN_EXTENDED_RESOURCE_CLAIM",
    "IMPLICIT_PREFIX",
    "SPECIAL_NAME",
    "RequestMapping",
    "backed_requests",
    "claim_manifest",
    "class_for",
    "delegated",
    "find_claim",
    "in_memory_claim",
    "is_dra_extended_resource_name",
    "node_resources",
    "pod_status_patch",
    "requests_and_mappings",
]

#: ``resourceapi.ExtendedResourceClaimAnnotation``: marks the claim the scheduler made for a pod.
ANN_EXTENDED_RESOURCE_CLAIM = "resource.kubernetes.io/extended-resource-claim"
#: ``resourceapi.ResourceDeviceClassPrefix``: every class's implicit extended resource name.
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
#: The name of the claim while it exists only in memory (not a valid object name, so no claim has it).
SPECIAL_NAME = "<extended-resources>"


@dataclass(frozen=True, slots=True)
class RequestMapping:
    """One ``ContainerExtendedResourceRequest``: which request of the claim serves a container's resource."""

    container: str
    resource: str
    request: str

    def to_dict(self) -> dict[str, str]:
        return {"containerName": self.container, "resourceName": self.resource, "requestName": self.request}


def is_dra_extended_resource_name(name: str) -> bool:
    """An extended resource name (domain-prefixed, outside ``kubernetes.io/``) or a class's implicit one."""
    if name.startswith(IMPLICIT_PREFIX):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def class_for(classes: Mapping[str, DeviceClass], resource: str) -> DeviceClass | None:
    """The DeviceClass ``resource`` maps to: the class named by the implicit name, else the class whose
    ``extendedResourceName`` it is; of several, the newest (by creationTimestamp), then the first by name,
    as kube-scheduler's extended resource cache keeps them."""
    if resource.startswith(IMPLICIT_PREFIX):
        found = classes.get(resource[len(IMPLICIT_PREFIX):])
        if found is not None:
            return found
    mapped = sorted((c for c in classes.values() if c.extended_resource_name == resource), key=lambda c: c.name)
    # max keeps the first of equals: the newest class, of those as new the first by name.
    return max(mapped, key=lambda c: c.creation_timestamp) if mapped else None


def backed_requests(pod: Pod, classes: Mapping[str, DeviceClass]) -> dict[str, int]:
    """The pod's requests of extended resources when one of them maps to a DeviceClass (all its DRA
    extended resource requests then, mapped or not: Filter tells them apart per node); empty otherwise."""
    wanted = {r: v for r, v in pod.requests.items() if v > 0 and is_dra_extended_resource_name(r)}
    if not any(class_for(classes, r) is not None for r in wanted):
        return {}
    return wanted


def delegated(resource: str, node: Node, classes: Mapping[str, DeviceClass]) -> bool:
    """NodeResourcesFit's ``shouldDelegateResourceToDRA``: the node does not advertise ``resource`` and
    a DeviceClass maps it."""
    return node.allocatable.get(resource, 0) <= 0 and class_for(classes, resource) is not None


def node_resources(requests: Mapping[str, int], node: Node,
                   classes: Mapping[str, DeviceClass]) -> tuple[str, ...] | str:
    """The resources of ``requests`` that ``node`` must provide through devices (sorted), or the first
    one it cannot provide at all (neither advertised nor mapped to a class), as the reason's resource."""
    out = []
    for resource in sorted(requests):
        advertised = node.allocatable.get(resource)
        if class_for(classes, resource) is not None and not advertised:
            out.append(resource)
        elif advertised is None:
            return resource
    return tuple(out)


def find_claim(claims: Iterable[ResourceClaim], pod: Pod) -> ResourceClaim | None:
    """The claim an earlier cycle made for the pod: annotated as such and controlled by the pod."""
    for c in claims:
        if c.annotations.get(ANN_EXTENDED_RESOURCE_CLAIM) == "true" and c.owner is not None and (
            c.owner[1] == pod.name and c.owner[2] == pod.uid
        ):
            return c
    return None


def in_memory_claim(pod: Pod) -> ResourceClaim:
    """The pod's claim before PreBind creates it: no requests yet, a temporary uid."""
    return ResourceClaim(SPECIAL_NAME, pod.namespace, uid=str(uuid.uuid4()), owner=("Pod", pod.name, pod.uid),
                         annotations={ANN_EXTENDED_RESOURCE_CLAIM: "true"})


def _long_lived(pod: Pod) -> tuple[list[tuple[int, Container]], list[tuple[int, Container]]]:
    """The containers (init containers first) by index: those running with the pod (containers and
    sidecars) and the init containers that run to completion first."""
    everything = [*pod.init_containers, *pod.containers]
    first = {i for i, c in enumerate(pod.init_containers) if c.restart_policy != "Always"}
    return ([(i, c) for i, c in enumerate(everything) if i not in first],
            [(i, c) for i, c in enumerate(everything) if i in first])


def _container_request(index: int, container: Container, resource: str, class_name: str,
                       reusable: list[ExactRequest | None]) -> tuple[ExactRequest | None, list[RequestMapping]]:
    """One container's request of ``resource`` (None when the requests of longer-lived containers it
    may use cover it) and the mappings of its resource to requests."""
    amount = container.requests.get(resource, 0)
    if amount <= 0:
        return None, []
    mappings, have = [], 0
    for r in reusable:
        if r is not None:
            have += r.count
            mappings.append(RequestMapping(container.name, resource, r.name))
            if have >= amount:
                return None, mappings
    # The request is named by the container's index and the resource's place among its requests' names.
    name = f"container-{index}-request-{sorted(container.requests).index(resource)}"
    mappings.append(RequestMapping(container.name, resource, name))
    return ExactRequest(name, class_name, count=amount - have), mappings


def requests_and_mappings(pod: Pod, resources: Iterable[str], classes: Mapping[str, DeviceClass]
                          ) -> tuple[tuple[DeviceRequest, ...], tuple[RequestMapping, ...]]:
    """kube-scheduler's ``createRequestsAndMappings``: per resource (by name) a request for each container
    that runs with the pod, one for the largest of the init containers that run first (those covered by
    the requests of later containers use them), sorted by name; and which request serves each
    container's resource."""
    everything = [*pod.init_containers, *pod.containers]
    long, short = _long_lived(pod)
    requests: list[ExactRequest] = []
    mappings: list[RequestMapping] = []
    for resource in sorted(resources):
        cls = class_for(classes, resource)
        if cls is None:
            continue
        made: list[ExactRequest | None] = [None] * len(everything)
        long_maps: list[RequestMapping] = []
        for i, c in long:
            made[i], found = _container_request(i, c, resource, cls.name, [])
            long_maps.extend(found)
        largest: ExactRequest | None = None
        short_names: set[str] = set()
        short_maps: list[RequestMapping] = []
        for i, c in short:
            r, found = _container_request(i, c, resource, cls.name, made[i:])
            if r is not None:
                short_names.add(r.name)
                if largest is None or largest.count < r.count:
                    largest = r
            short_maps.extend(found)
        if largest is not None and len(short_names) > 1:
            short_maps = [replace(m, request=largest.name) if m.request in short_names else m for m in short_maps]
        if largest is not None:
            requests.append(largest)
        requests.extend(r for r in made if r is not None)
        mappings.extend(long_maps + short_maps)
    requests.sort(key=lambda r: r.name)
    return tuple(DeviceRequest(r.name, exactly=r) for r in requests), tuple(mappings)


def claim_manifest(claim: ResourceClaim, pod: Pod) -> dict[str, Any]:
    """The claim PreBind creates (before its status is written): named by the API server from
    ``<pod>-extended-resources-``, controlled by the pod, annotated, with ``claim``'s requests."""
    requests = [{"name": r.name, "exactly": {"deviceClassName": r.exactly.device_class,
                                              "allocationMode": "ExactCount", "count": r.exactly.count}}
                for r in claim.requests if r.exactly is not None]
    owner = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid, "controller": True}
    meta = {"generateName": f"{pod.name}-extended-resources-", "namespace": pod.namespace,
            "ownerReferences": [owner], "annotations": {ANN_EXTENDED_RESOURCE_CLAIM: "true"}}
    # No requests (the pod's own claims took it to a node advertising the resources): none sent, as upstream.
    return {"apiVersion": API_VERSION, "kind": "ResourceClaim", "metadata": meta,
            "spec": {"devices": {"requests": requests} if requests else {}}}


def pod_status_patch(claim_name: str, mappings: Iterable[RequestMapping]) -> dict[str, Any]:
    """The pod's ``status.extendedResourceClaimStatus`` PreBind writes (a strategic-merge patch body)."""
    return {"status": {"extendedResourceClaimStatus": {
        "requestMappings": [m.to_dict() for m in mappings], "resourceClaimName": claim_name}}}
