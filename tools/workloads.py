"""scheduler_perf's workloads: the one set of node and pod templates every tool builds on (the
benchmark's in-process runs and its ``apiserver`` scenario, the comparison with kube-scheduler, their
tests), creating them through a real API server, and timing the scheduler that places them, observed
from outside through a watch (:class:`BoundWatch`, the one watch of bound pods).

::

    client = Api.from_kubeconfig(cluster.admin_kubeconfig)
    workload = WORKLOADS["SchedulingBasic"].sized(nodes=500, init_pods=100, measure_pods=1000)
    await create_cluster(client, workload)              # namespaces and nodes
    ...                                                 # start a scheduler on the cluster
    await create_and_wait(client, workload.init, "default-scheduler", timeout=120)   # not measured
    timing = await create_and_wait(client, workload.measure, "default-scheduler", timeout=300)
    timing.pods_per_second

The shapes are kubernetes ``test/integration/scheduler_perf`` v1.35's (``performance-config.yaml`` of
``misc``, ``affinity`` and ``topology_spreading``, and ``templates/``): nodes are ``node-default.yaml``
(4 CPU, 32 GiB, 110 pods, capacity = allocatable, the ``kubernetes.io/hostname`` label, and the workload's
``labelNodePrepareStrategy`` label given round-robin); pods are ``pod-default.yaml`` (the pause image, one
container port, 100m CPU and 500Mi requests = limits) or the workload's template built on it. The
in-process benchmark applies the same templates without the API server's additions
(:func:`scheduler_perf_node` with ``api=False``: capacity only, no labels).

**Throughput** is what the benchmark issue defines: measured pods divided by the time from just before
the first of them is created to the moment the watch shows the last of them bound. Pods are created as
fast as the API server takes them (``concurrency`` requests in flight), and "bound" is seen on a watch
of the namespace filtered on ``spec.nodeName!=``, so the harness decodes one event per bound pod and
never reads the scheduler's own counters. The same code times kube-scheduler and Outrigger
(:mod:`tools.compare`). The ``apiserver`` benchmark scenario (:mod:`tools.bench.apiserver`)
measures SchedulingBasic for Outrigger alone the same way, with these nodes and pods and this watch, and
its pod creator in a process of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncGenerator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
import orjson

from framework.cli import demodevices
from framework.kube.client import ApiError, ApiUnreachable, KubeConfig

__all__ = [
    "DRA_CONTROLLERS",
    "DRA_WORKLOADS",
    "NODE_CAPACITY",
    "OBJECT_PATHS",
    "PAUSE_IMAGE",
    "WORKLOADS",
    "Api",
    "BoundWatch",
    "PodSet",
    "Timing",
    "WatchClient",
    "Workload",
    "create_and_wait",
    "create_cluster",
    "create_objects",
    "create_pods",
    "node_manifest",
    "node_name",
    "object_path",
    "pause_container",
    "pod_manifest",
    "pod_name",
    "scheduler_perf_node",
    "scheduler_perf_pod",
]

PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
#: ``node-default.yaml``'s capacity.
NODE_CAPACITY = {"pods": "110", "cpu": "4", "memory": "32Gi"}
_POD_RESOURCES = {"cpu": "100m", "memory": "500Mi"}
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
NODE_PREFIX = "scheduler-perf-"
#: Requests in flight while creating objects: enough to keep the API server busy on two cores.
CONCURRENCY = 24
#: Seconds the API server keeps a watch of :class:`BoundWatch` open before the watch is started again.
WATCH_SECONDS = 1800
#: Times in a row a broken watch is resumed before :class:`BoundWatch` gives up on it.
WATCH_RESUMES = 10


# ---- the harness's own client -----------------------------------------------------------------------


class Api:
    """The harness's requests to the API server: create, list, watch (aiohttp, orjson).

    Deliberately not :class:`framework.kube.client.ApiClient`, the client of the scheduler under test:
    the instrument that times a scheduler does not share its HTTP path, its tuning or its faults.
    Failures raise the same :class:`ApiError` and :class:`ApiUnreachable`.
    """

    def __init__(self, config: KubeConfig, max_connections: int = 32) -> None:
        self.config = config
        self._ssl = config.ssl_context()
        self._max = max_connections
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_kubeconfig(cls, path: str, max_connections: int = 32) -> Api:
        return cls(KubeConfig.from_file(path), max_connections)

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit=self._max),
                headers={"Authorization": f"Bearer {self.config.current_token()}", "Accept": "application/json",
                         "User-Agent": "outrigger-compare"})
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(self, method: str, path: str, *, verb: str, resource: str, body: Any = None,
                      params: dict[str, str] | None = None, timeout: float = 60) -> Any:
        data = None if body is None else orjson.dumps(body)
        headers = {"Content-Type": "application/json"} if data is not None else None
        try:
            async with self._client().request(method, self.config.server + path, data=data, params=params,
                                              headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)) as resp:
                payload = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ApiUnreachable(verb, resource, self.config.server, exc) from exc
        if status >= 400:
            raise ApiError.from_status(verb, resource, status, payload)
        return orjson.loads(payload) if payload else None

    async def watch(self, path: str, rv: str, *, resource: str,
                    timeout_seconds: int = 1800) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
        """Watch events (type, object) after ``rv`` until the server ends the watch."""
        params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": str(timeout_seconds)}
        try:
            async with self._client().get(self.config.server + path, params=params,
                                          timeout=aiohttp.ClientTimeout(total=None, sock_connect=30)) as resp:
                if resp.status >= 400:
                    raise ApiError.from_status("watch", resource, resp.status, await resp.read())
                async for line in resp.content:
                    if line.strip():
                        event = orjson.loads(line)
                        if event.get("type") == "ERROR":
                            obj = event.get("object") or {}
                            raise ApiError.from_status("watch", resource, int(obj.get("code") or 500),
                                                       orjson.dumps(obj))
                        yield event.get("type"), event.get("object") or {}
        except (aiohttp.ClientError, OSError) as exc:
            raise ApiUnreachable("watch", resource, self.config.server, exc) from exc


# ---- templates ------------------------------------------------------------------------------------


def node_name(i: int) -> str:
    """Node ``i``'s name: ``scheduler-perf-NNNNN``."""
    return f"{NODE_PREFIX}{i:05d}"


def pod_name(i: int) -> str:
    """Pod ``i``'s name: ``pod-NNNNNN``."""
    return f"pod-{i:06d}"


def pause_container() -> dict[str, Any]:
    """``pod-default.yaml``'s one container."""
    return {
        "name": "pause",
        "image": PAUSE_IMAGE,
        "ports": [{"containerPort": 80}],
        "resources": {"limits": dict(_POD_RESOURCES), "requests": dict(_POD_RESOURCES)},
    }


def node_manifest(name: str, labels: dict[str, str] | None = None, *, api: bool = True) -> dict[str, Any]:
    """scheduler_perf's ``node-default.yaml``. ``api``: as ``createNodes`` makes it through the API server,
    with the hostname label, Ready, and allocatable = capacity (no kubelet here to report them); else
    capacity and ``labels`` only, as the in-process runs apply it."""
    if not api:
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
                "spec": {}, "status": {"capacity": dict(NODE_CAPACITY)}}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {**(labels or {}), HOSTNAME_LABEL: name}},
        "spec": {},
        "status": {"capacity": dict(NODE_CAPACITY), "allocatable": dict(NODE_CAPACITY),
                   "conditions": [{"type": "Ready", "status": "True"}], "phase": "Running"},
    }


def pod_manifest(name: str, namespace: str, scheduler: str = "", *, labels: dict[str, str] | None = None,
                 node: str = "", **spec: Any) -> dict[str, Any]:
    """scheduler_perf's ``pod-default.yaml`` for ``scheduler`` (none named: the default), bound to
    ``node`` when one is given, with ``spec`` fields added (affinity, spread constraints)."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    head: dict[str, Any] = {"schedulerName": scheduler} if scheduler else {}
    if node:
        head["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {**head, "containers": [pause_container()], **spec}}


def scheduler_perf_node(i: int, labels: dict[str, str] | None = None, *, api: bool = False) -> dict[str, Any]:
    """Node ``i`` of a benchmark run (:func:`node_name`, :func:`node_manifest`)."""
    return node_manifest(node_name(i), labels, api=api)


def scheduler_perf_pod(namespace: str, i: int, *, scheduler: str = "", node: str = "") -> dict[str, Any]:
    """Pod ``i`` of ``namespace`` in a benchmark run (:func:`pod_name`, :func:`pod_manifest`)."""
    return pod_manifest(pod_name(i), namespace, scheduler, node=node)


def _term(color: str, key: str, namespaces: list[str]) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": key, "namespaces": namespaces}


def default_pod(name: str, ns: str, scheduler: str, namespaces: list[str]) -> dict[str, Any]:
    return pod_manifest(name, ns, scheduler)


def anti_affinity_pod(name: str, ns: str, scheduler: str, namespaces: list[str]) -> dict[str, Any]:
    """``pod-with-pod-anti-affinity.yaml``: at most one green pod per node."""
    return pod_manifest(name, ns, scheduler, labels={"color": "green"}, affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_term("green", HOSTNAME_LABEL, namespaces)]}})


def affinity_pod(name: str, ns: str, scheduler: str, namespaces: list[str]) -> dict[str, Any]:
    """``pod-with-pod-affinity.yaml``: blue pods together in a zone."""
    return pod_manifest(name, ns, scheduler, labels={"color": "blue"}, affinity={"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [_term("blue", ZONE_LABEL, namespaces)]}})


def spreading_pod(name: str, ns: str, scheduler: str, namespaces: list[str]) -> dict[str, Any]:
    """``pod-with-topology-spreading.yaml``: blue pods spread over zones, skew at most 5."""
    return pod_manifest(name, ns, scheduler, labels={"color": "blue"}, topologySpreadConstraints=[{
        "maxSkew": 5, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"color": "blue"}}}])


PodTemplate = Callable[[str, str, str, list[str]], dict[str, Any]]


# ---- workloads ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodSet:
    """One ``createPods`` step: ``count`` pods named ``<prefix><i>`` in ``namespace`` from ``template``."""

    count: int
    namespace: str
    prefix: str
    template: PodTemplate
    #: The namespaces the workload's affinity terms name (scheduler_perf's ``sched-0``, ``sched-1``).
    namespaces: tuple[str, ...] = ()

    def manifests(self, scheduler: str) -> list[dict[str, Any]]:
        width = len(str(max(self.count - 1, 0)))
        return [self.template(f"{self.prefix}{i:0{width}d}", self.namespace, scheduler, list(self.namespaces))
                for i in range(self.count)]


@dataclass(frozen=True)
class Workload:
    """A scheduler_perf test case: nodes (with a label given round-robin), initial pods, measured pods."""

    name: str
    nodes: int
    init: PodSet
    measure: PodSet
    #: ``labelNodePrepareStrategy``: (label key, values given round-robin), or None.
    node_label: tuple[str, tuple[str, ...]] | None = None
    namespaces: tuple[str, ...] = ("default",)
    #: The other objects the workload creates after its nodes, from the workload (DRA's slices, device
    #: classes, claims and templates); a ResourceClaim with a ``status`` gets it written after it is
    #: created (an allocated claim, scheduler_perf's ``allocResourceClaims``).
    objects: Callable[[Workload], list[dict[str, Any]]] | None = None
    #: The kube-controller-manager controllers the workload needs (DRA's resourceclaim controller makes
    #: the claims of pods' ResourceClaimTemplates).
    controllers: tuple[str, ...] = ()
    #: ResourceClaims created already allocated (``initClaims`` of scheduler_perf's DRA workloads).
    init_claims: int = 0

    def node_names(self) -> list[str]:
        width = max(5, len(str(self.nodes - 1)))
        return [f"{NODE_PREFIX}{i:0{width}d}" for i in range(self.nodes)]

    def node_manifests(self) -> list[dict[str, Any]]:
        out = []
        for i, name in enumerate(self.node_names()):
            labels = {}
            if self.node_label is not None:
                key, values = self.node_label
                labels[key] = values[i % len(values)]
            out.append(node_manifest(name, labels))
        return out

    def sized(self, *, nodes: int | None = None, init_pods: int | None = None,
              measure_pods: int | None = None, init_claims: int | None = None) -> Workload:
        """The same shape at other sizes (scaled to a machine, or small for a test)."""
        return dataclasses.replace(
            self, nodes=self.nodes if nodes is None else nodes,
            init_claims=self.init_claims if init_claims is None else init_claims,
            init=dataclasses.replace(self.init, count=self.init.count if init_pods is None else init_pods),
            measure=dataclasses.replace(self.measure,
                                        count=self.measure.count if measure_pods is None else measure_pods))

    def describe(self) -> str:
        claims = f", {self.init_claims} allocated claims" if self.init_claims else ""
        return f"{self.nodes} nodes{claims}, {self.init.count} initial pods, {self.measure.count} measured pods"


_SCHED = ("sched-0", "sched-1")

#: The scheduler_perf workloads the comparison runs, at their ``performance`` sizes
#: (SchedulingBasic 5000Nodes_10000Pods, the others 5000Nodes_<N>Pods).
WORKLOADS: dict[str, Workload] = {
    "SchedulingBasic": Workload(
        "SchedulingBasic", 5000,
        PodSet(1000, "default", "init-pod-", default_pod), PodSet(10000, "default", "pod-", default_pod)),
    "SchedulingPodAntiAffinity": Workload(
        "SchedulingPodAntiAffinity", 5000,
        PodSet(1000, "sched-0", "init-pod-", anti_affinity_pod, _SCHED),
        PodSet(2000, "sched-1", "anti-affinity-pod-", anti_affinity_pod, _SCHED), namespaces=_SCHED),
    "SchedulingPodAffinity": Workload(
        "SchedulingPodAffinity", 5000,
        PodSet(5000, "sched-0", "init-pod-", affinity_pod, _SCHED),
        PodSet(5000, "sched-1", "affinity-pod-", affinity_pod, _SCHED),
        node_label=(ZONE_LABEL, ("zone1",)), namespaces=_SCHED),
    "TopologySpreading": Workload(
        "TopologySpreading", 5000,
        PodSet(5000, "default", "init-pod-", default_pod), PodSet(5000, "default", "spreading-pod-", spreading_pod),
        node_label=(ZONE_LABEL, ("moon-1", "moon-2", "moon-3"))),
}



# ---- DRA: scheduler_perf's dra/performance-config.yaml, with the demos' fake driver ------------------

#: What a workload whose pods claim devices from templates needs running besides the scheduler.
DRA_CONTROLLERS = ("resourceclaim-controller",)
DRA_TEMPLATE = "test-claim-template"


def _dra_pod(name: str, ns: str, scheduler: str, claim_source: dict[str, str]) -> dict[str, Any]:
    """``pod-with-claim-template.yaml`` / ``pod-with-claim-ref.yaml``: the pause container, no requests,
    one claim ``resource``."""
    meta = {"name": name, "namespace": ns}
    head: dict[str, Any] = {"schedulerName": scheduler} if scheduler else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        **head,
        "containers": [{"name": "pause", "image": PAUSE_IMAGE, "resources": {"claims": [{"name": "resource"}]}}],
        "resourceClaims": [{"name": "resource", **claim_source}]}}


def claim_template_pod(name: str, ns: str, scheduler: str, namespaces: list[str]) -> dict[str, Any]:
    """A pod whose one claim is made from :data:`DRA_TEMPLATE` (one device)."""
    return _dra_pod(name, ns, scheduler, {"resourceClaimTemplateName": DRA_TEMPLATE})


def shared_claim_pod(name: str, ns: str, scheduler: str, namespaces: list[str]) -> dict[str, Any]:
    """Pod ``i`` (its name's last number) shares claim ``test-claim-<i // 5>`` with four others."""
    return _dra_pod(name, ns, scheduler, {"resourceClaimName": f"test-claim-{int(name.rsplit('-', 1)[1]) // 5}"})


def allocated_claim(name: str, ns: str, node: str, device: str) -> dict[str, Any]:
    """A one-device claim allocated ``device`` of ``node``'s pool, as a driver's allocation reads."""
    doc = demodevices.claim(name, ns, 1)
    doc["status"] = {"allocation": {
        "devices": {"results": [{"request": "gpu", "driver": demodevices.DRIVER, "pool": node, "device": device}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
    return doc


def _template_objects(w: Workload) -> list[dict[str, Any]]:
    """10 devices per node, the class, the template, and ``init_claims`` allocated round-robin over the
    nodes (claim ``i``: node ``i % nodes``, device ``gpu-<i // nodes>``)."""
    nodes = w.node_names()
    return [demodevices.device_class(), *(demodevices.gpu_slice(n, 10) for n in nodes),
            demodevices.claim_template(DRA_TEMPLATE, w.measure.namespace, 1),
            *(allocated_claim(f"test-claim-{i}", w.init.namespace, nodes[i % len(nodes)], f"gpu-{i // len(nodes)}")
              for i in range(w.init_claims))]


def _shared_objects(w: Workload) -> list[dict[str, Any]]:
    """2 devices per node, the class, and one unallocated claim per five pods of each pod set."""
    return [demodevices.device_class(), *(demodevices.gpu_slice(n, 2) for n in w.node_names()),
            *(demodevices.claim(f"test-claim-{i}", ps.namespace, 1)
              for ps in (w.init, w.measure) for i in range((ps.count + 4) // 5))]


_DRA_NS = ("init", "test")
#: scheduler_perf's DRA workloads at their ``5000pods_500nodes`` sizes.
DRA_WORKLOADS: dict[str, Workload] = {
    "SchedulingWithResourceClaimTemplate": Workload(
        "SchedulingWithResourceClaimTemplate", 500,
        PodSet(0, "init", "init-dra-", claim_template_pod), PodSet(2500, "test", "test-dra-", claim_template_pod),
        namespaces=_DRA_NS, objects=_template_objects, controllers=DRA_CONTROLLERS, init_claims=2500),
    "SchedulingWithResourceClaim": Workload(
        "SchedulingWithResourceClaim", 500,
        PodSet(2500, "init", "test-dra-", shared_claim_pod), PodSet(2500, "test", "test-dra-", shared_claim_pod),
        namespaces=_DRA_NS, objects=_shared_objects),
}
WORKLOADS.update(DRA_WORKLOADS)


# ---- creating -------------------------------------------------------------------------------------


async def _post_all(client: Api, path_of: Callable[[dict[str, Any]], str], resource: str,
                    objects: Iterable[dict[str, Any]], concurrency: int) -> float:
    """POST every object, ``concurrency`` at a time, in order of start. The time just before the first
    request went out."""
    bodies = [(path_of(o), o) for o in objects]
    it = iter(bodies)
    first = time.monotonic()

    async def worker() -> None:
        for path, body in it:
            for attempt in range(5):
                try:
                    await client.request("POST", path, verb="create", resource=resource, body=body)
                    break
                except ApiError as exc:
                    if exc.code == 409:  # created by an earlier attempt whose answer was lost
                        break
                    if exc.code not in (429, 500, 503, 504) or attempt == 4:
                        raise
                except ApiUnreachable:
                    if attempt == 4:
                        raise
                await asyncio.sleep(0.2 * (attempt + 1))

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))
    return first


async def create_cluster(client: Api, workload: Workload, concurrency: int = CONCURRENCY) -> None:
    """The workload's namespaces (``default`` exists) and nodes."""
    for ns in workload.namespaces:
        if ns == "default":
            continue
        with contextlib.suppress(ApiError):  # already there
            await client.request("POST", "/api/v1/namespaces", verb="create", resource="namespaces",
                                 body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    await _post_all(client, lambda _: "/api/v1/nodes", "nodes", workload.node_manifests(), concurrency)
    if workload.objects is not None:
        await create_objects(client, workload.objects(workload), concurrency)


#: The API paths of the objects a workload creates besides nodes and pods (``{ns}``: its namespace).
OBJECT_PATHS = {
    "Namespace": "/api/v1/namespaces",
    "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
    "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    "ResourceClaim": "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims",
    "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaimtemplates",
    "DeviceTaintRule": "/apis/resource.k8s.io/v1/devicetaintrules",
}


def object_path(obj: dict[str, Any]) -> str:
    """Where ``obj`` is created (its kind in :data:`OBJECT_PATHS`; KeyError naming it otherwise)."""
    kind = obj.get("kind")
    if kind not in OBJECT_PATHS:
        raise KeyError(f"no API path for kind {kind!r} (known: {', '.join(OBJECT_PATHS)})")
    return OBJECT_PATHS[kind].format(ns=(obj.get("metadata") or {}).get("namespace") or "default")


async def create_objects(client: Api, objects: list[dict[str, Any]], concurrency: int = CONCURRENCY) -> None:
    """Create ``objects`` (kinds of :data:`OBJECT_PATHS`); each ResourceClaim with a ``status`` gets it
    written after it is created, as a driver's allocation would be."""
    plain = [{k: v for k, v in o.items() if k != "status"} for o in objects]
    await _post_all(client, object_path, "objects", plain, concurrency)
    statuses = iter([o for o in objects if o.get("kind") == "ResourceClaim" and o.get("status")])

    async def worker() -> None:
        for obj in statuses:
            path = f"{object_path(obj)}/{obj['metadata']['name']}"
            current = await client.request("GET", path, verb="get", resource="resourceclaims")
            current["status"] = obj["status"]
            await client.request("PUT", f"{path}/status", verb="update", resource="resourceclaims", body=current)

    await asyncio.gather(*(worker() for _ in range(max(1, concurrency))))


async def create_pods(client: Api, manifests: list[dict[str, Any]], concurrency: int = CONCURRENCY) -> float:
    """Create the pods; the time just before the first request went out."""
    return await _post_all(client, lambda o: f"/api/v1/namespaces/{o['metadata']['namespace']}/pods", "pods",
                           manifests, concurrency)


# ---- watching ------------------------------------------------------------------------------------


class WatchClient(Protocol):
    """The requests :class:`BoundWatch` makes: the harness's :class:`Api`, or the
    :class:`~framework.kube.client.ApiClient` of the ``apiserver`` benchmark's watcher."""

    async def request(self, method: str, path: str, /, *, verb: str, resource: str,
                      params: dict[str, str] | None = None) -> Any: ...

    def watch(self, path: str, rv: str, /, *, resource: str,
              timeout_seconds: int = ...) -> AsyncGenerator[tuple[str, dict[str, Any]], None]: ...


@dataclass
class BoundWatch:
    """Pods of ``namespace`` seen bound (``spec.nodeName`` set) on a watch, with when and where; with
    ``all_pods``, also those found unschedulable, with their ``PodScheduled`` message.

    ``start()`` watches from the namespace's current resourceVersion (``fieldSelector=spec.nodeName!=``:
    a pod enters the watch when it is bound; every pod with ``all_pods``), so only pods changed from then
    on are seen; ``wait(names, timeout)`` returns once every named pod was seen bound, ``settle(total,
    deadline)`` once ``total`` pods were each seen bound or unschedulable. A watch the server ends is
    started again from where it was, and so is one whose connection broke (up to :data:`WATCH_RESUMES`
    times in a row); any other failure is raised by ``wait`` and ``settle``.
    """

    client: WatchClient
    namespace: str
    all_pods: bool = False
    #: pod name -> (monotonic time first seen bound, node)
    bound: dict[str, tuple[float, str]] = field(default_factory=dict)
    #: pod name -> the message of its ``PodScheduled=False`` condition, while it is not bound (``all_pods``)
    unschedulable: dict[str, str] = field(default_factory=dict)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None
    _error: BaseException | None = None

    @property
    def _path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods"

    async def start(self) -> None:
        # One item is enough: the list's resourceVersion is where the watch starts.
        body = await self.client.request("GET", self._path, verb="list", resource="pods", params={"limit": "1"})
        rv = str((body.get("metadata") or {}).get("resourceVersion") or "")
        self._task = asyncio.get_running_loop().create_task(self._run(rv))

    def _seen(self, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        node = (obj.get("spec") or {}).get("nodeName") or ""
        if node:
            if name not in self.bound:
                self.bound[name] = (now, node)
                self.unschedulable.pop(name, None)
                self._changed.set()
            return
        cond = next((c for c in (obj.get("status") or {}).get("conditions") or ()
                     if c.get("type") == "PodScheduled" and c.get("status") == "False"), None)
        if cond is not None:
            self.unschedulable[name] = str(cond.get("message") or cond.get("reason") or "")
            self._changed.set()

    async def _run(self, rv: str) -> None:
        path = self._path if self.all_pods else f"{self._path}?fieldSelector=spec.nodeName%21%3D"
        broken = 0
        try:
            while True:
                events = self.client.watch(path, rv, resource="pods", timeout_seconds=WATCH_SECONDS)
                try:
                    async with contextlib.aclosing(events):
                        async for kind, obj in events:
                            broken = 0
                            rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                            if kind in ("ADDED", "MODIFIED"):
                                self._seen(obj, time.monotonic())
                except ApiUnreachable:
                    broken += 1
                    if broken > WATCH_RESUMES:
                        raise
                    await asyncio.sleep(0.2)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # reported by wait()
            self._error = exc
            self._changed.set()

    async def wait(self, names: Iterable[str], timeout: float) -> None:
        """Until every pod of ``names`` was seen bound; TimeoutError naming how many are not."""
        wanted = set(names)
        deadline = time.monotonic() + timeout
        while missing := wanted - self.bound.keys():
            if not await self._changes(deadline):
                raise TimeoutError(f"{len(missing)} of {len(wanted)} pods in {self.namespace} not bound "
                                   f"after {timeout:.0f}s (e.g. {sorted(missing)[0]})")

    async def settle(self, total: int, deadline: float) -> bool:
        """Until ``total`` pods were each seen bound or unschedulable (True), or the monotonic
        ``deadline`` (False)."""
        while len(self.bound) + len(self.unschedulable) < total:
            if not await self._changes(deadline):
                return False
        return True

    async def _changes(self, deadline: float) -> bool:
        """Until the next pod seen (True; at most a second) or the deadline (False); the watch's failure
        is raised."""
        if self._error is not None:
            raise RuntimeError(f"watching pods of {self.namespace}: {self._error}") from self._error
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        self._changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), min(left, 1.0))
        return True

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None


@dataclass(frozen=True)
class Timing:
    """One ``createPods`` step timed from outside."""

    pods: int
    #: Seconds from just before the first pod was created to the last one seen bound.
    seconds: float
    #: Seconds creating the pods took (the API server's pace, the floor of ``seconds``).
    create_seconds: float
    #: pod name -> node.
    placements: dict[str, str]

    @property
    def pods_per_second(self) -> float:
        return self.pods / self.seconds if self.seconds > 0 else 0.0


async def create_and_wait(client: Api, pods: PodSet, scheduler: str, timeout: float,
                          concurrency: int = CONCURRENCY) -> Timing:
    """Create ``pods`` for ``scheduler`` and wait until the watch has seen every one bound."""
    manifests = pods.manifests(scheduler)
    names = [m["metadata"]["name"] for m in manifests]
    watch = BoundWatch(client, pods.namespace)
    await watch.start()
    try:
        first = await create_pods(client, manifests, concurrency)
        created = time.monotonic()
        await watch.wait(names, timeout)
    finally:
        await watch.stop()
    last = max((watch.bound[n][0] for n in names), default=first)
    return Timing(len(names), last - first, created - first, {n: watch.bound[n][1] for n in names})
