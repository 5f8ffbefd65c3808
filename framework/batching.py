"""Opportunistic batching (kube-scheduler 1.37's ``framework/runtime/batch.go``; the OpportunisticBatching
gate, beta and on by default): a pod identical to the one scheduled just before it is offered that pod's
next-best node, so its cycle filters one node instead of the cluster and does not score.

- **Signatures** (:func:`pod_signer`). Two pods with the same signature must get the same feasibility and
  scores on the same nodes. It is built from what each PreFilter, Filter, PreScore and Score plugin of the
  profile says of the pod (kube-scheduler's ``SignPlugin``): its resource requests, tolerations, node
  affinity and selector, host ports, volumes (configMaps and secrets left out), images, node name,
  labels (InterPodAffinity) and required node features, then what each other plugin's ``sign_pod`` says
  (:class:`~pluginhost.sign.SignPlugin`; a remote plugin's host answers Plugin.SignPod). A pod with pod
  (anti-)affinity, topology spread constraints or resource claims has none, nor has a pod one of those
  plugins cannot sign, nor any pod of a profile with a plugin that does not sign (an out-of-tree or
  remote one that does not implement Sign, a transformer) or with PodTopologySpread's default constraints, which
  kube-scheduler's default profile has (``defaultingType: System``): batching only acts in profiles
  that turn those off.
- **The batch** (:class:`OpportunisticBatch`, one per profile) keeps the last scheduled pod's
  signature, the nodes it did not take ranked by total score (their raw scores kept), and when it
  was made. The next pod gets a hint only if its cycle directly follows that one (no other pod was
  popped in between), that cycle succeeded, it has no nominated node, its signature is the same and
  the batch is younger than :data:`MAX_BATCH_AGE`. The last chosen node is filtered for it: if it no
  longer fits (it is full), the best cached node is the hint; if it still fits, it is scored again
  (PreScore over the cached nodes and it, its raw scores, then NormalizeScore across all of them) and
  competes with the cached nodes. The hint is then filtered like a nominated node; if it fits, the pod
  goes there without scoring, otherwise the cycle runs as usual and its results start a new batch.
- **What it counts** (:attr:`OpportunisticBatch.attempts`, :attr:`~OpportunisticBatch.flushed`,
  :attr:`~OpportunisticBatch.rescores`), exposed as kube-scheduler's ``scheduler_batch_attempts_total``
  (``hint_used``, ``hint_not_used``, ``no_hint``), ``scheduler_batch_cache_flushed_total`` (by the reasons
  below) and ``scheduler_batch_rescore_attempts_total``.
"""

from __future__ import annotations

import collections
import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from pluginhost.model import Pod
from pluginhost.plugin import MAX_NODE_SCORE, MIN_NODE_SCORE, CycleState, NodeBatch, ScoreExtensions
from pluginhost.sign import SignPlugin
from pluginhost.snapshot import Snapshot

from .dra.extended import backed_requests
from .outcomes import IntArray, Raised

if TYPE_CHECKING:
    from .runtime import Framework

__all__ = [
    "FLUSH_REASONS",
    "MAX_BATCH_AGE",
    "OpportunisticBatch",
    "Ranked",
    "Signer",
    "pod_signer",
]

log = logging.getLogger("outrigger.batching")

#: A batch older than this is not used (kube-scheduler's maxBatchAge).
MAX_BATCH_AGE = 0.5

HINT_USED, HINT_NOT_USED, NO_HINT = "hint_used", "hint_not_used", "no_hint"
#: Why a batch was not used, as kube-scheduler's metric labels them.
FLUSH_REASONS = (
    "pod_failed", "pod_skipped", "pod_nominated", "node_missing", "empty_list", "expired", "pod_incompatible",
    "pod_not_batchable", "filter_error", "prescore_error", "rescore_error", "normalize_error",
)

Signer = Callable[[Pod], Awaitable["bytes | None"]]
_Fragments = list[tuple[str, Any]] | None  # None: the plugin cannot sign this pod


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def _spec(pod: Pod) -> dict[str, Any]:
    spec = pod.raw.get("spec") if pod.raw else None
    return spec if isinstance(spec, dict) else {}


def _requirements(reqs: Any) -> list[str]:
    out = []
    for req in reqs or ():
        req = dict(req)
        if isinstance(req.get("values"), list):
            req["values"] = sorted(req["values"])
        out.append(_canonical(req))
    return sorted(out)


def _term(term: Any) -> dict[str, list[str]]:
    term = term or {}
    return {"MatchExpressions": _requirements(term.get("matchExpressions")),
            "MatchFields": _requirements(term.get("matchFields"))}


def _node_affinity(pod: Pod) -> Any:
    """kube-scheduler's NodeAffinitySigner: the required terms and the weighted preferred ones, each
    requirement's values sorted and every list in a canonical order."""
    if not pod.raw:  # a pod built in code: its model is all there is
        return repr(pod.affinity.node_affinity) if pod.affinity is not None else None
    affinity = _spec(pod).get("affinity") or {}
    na = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    if na is None:
        return None
    required = (na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    preferred = na.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return {"Required": sorted(_canonical(_term(t)) for t in required),
            "Preferred": sorted(_canonical({"Weight": p.get("weight", 0), "Preference": _term(p.get("preference"))})
                                for p in preferred)}


def _tolerations(pod: Pod) -> Any:
    raw = _spec(pod).get("tolerations")
    if raw is not None or pod.raw:
        return sorted((raw or []), key=lambda t: (str(t.get("key", "")), str(t.get("value", ""))))
    return sorted(repr(t) for t in pod.tolerations)


def _volumes(pod: Pod) -> Any:
    """kube-scheduler's VolumesSigner: each volume's source but configMaps and secrets, sorted."""
    raw = _spec(pod).get("volumes")
    if raw is None and not pod.raw:
        return sorted(repr(v) for v in pod.volumes)
    return sorted(_canonical({k: v for k, v in vol.items() if k != "name"}) for vol in raw or ()
                  if "configMap" not in vol and "secret" not in vol)


def _host_ports(pod: Pod) -> list[int]:
    return sorted({p.host_port for c in (*pod.containers, *pod.init_containers) for p in c.ports if p.host_port})


def _images(pod: Pod) -> list[str]:
    from .plugins.imagelocality import normalized_image_name

    return sorted({normalized_image_name(c.image) for c in (*pod.containers, *pod.init_containers)})


def _pod_affinity(pod: Pod) -> bool:
    a = pod.affinity
    return a is not None and (a.pod_affinity is not None or a.pod_anti_affinity is not None)


def _sign_inter_pod_affinity(pl: Any, pod: Pod) -> _Fragments:
    if _pod_affinity(pod):
        return None
    return [] if getattr(pl, "ignore_preferred_terms_of_existing_pods", False) else [("v1.Pod.Labels", pod.labels)]


def _sign_features(pl: Any, pod: Pod) -> _Fragments:
    from .plugins.nodedeclaredfeatures import required_features

    return [("v1.Pod.Spec.RequiredFeatures()", sorted(required_features(pod)))]


_RESOURCES = "v1.Pod.Spec.ContainerRequestsAndOverheads()"


def _sign_fit(pl: Any, pod: Pod) -> _Fragments:
    handle = getattr(pl, "handle", None)
    classes = getattr(getattr(handle.snapshot() if handle is not None else None, "dra", None), "classes", None)
    if classes and backed_requests(pod, classes):
        return None  # kube-scheduler: "signature disabled when dra extended resources are used in the cluster"
    return [(_RESOURCES, sorted(pod.requests.items()))]


_VOLUMES = "v1.Pod.Spec.Volumes.NonSyntheticSources()"
_TOLERATIONS = "v1.Pod.Spec.Tolerations"

# What each in-tree plugin says of a pod (kube-scheduler 1.37's SignPod of each plugin).
_SIGNERS: dict[str, Callable[[Any, Pod], _Fragments]] = {
    "NodeResourcesFit": _sign_fit,
    "NodeResourcesBalancedAllocation": lambda pl, pod: [(_RESOURCES, sorted(pod.requests.items()))],
    "NodeVolumeLimits": lambda pl, pod: [(_VOLUMES, _volumes(pod))],
    "VolumeBinding": lambda pl, pod: [(_VOLUMES, _volumes(pod))],
    "VolumeZone": lambda pl, pod: [(_VOLUMES, _volumes(pod))],
    "VolumeRestrictions": lambda pl, pod: [(_VOLUMES, _volumes(pod))],
    "DynamicResources": lambda pl, pod: None if pod.resource_claims else [],
    "NodeDeclaredFeatures": _sign_features,
    "TaintToleration": lambda pl, pod: [(_TOLERATIONS, _tolerations(pod))],
    "NodeUnschedulable": lambda pl, pod: [(_TOLERATIONS, _tolerations(pod))],
    "InterPodAffinity": _sign_inter_pod_affinity,
    "NodePorts": lambda pl, pod: [("v1.Pod.Spec.HostPorts()", _host_ports(pod))],
    "PodTopologySpread": lambda pl, pod: None if pod.topology_spread_constraints else [],
    "NodeAffinity": lambda pl, pod: [("v1.Pod.Spec.Affinity.NodeAffinity", _node_affinity(pod)),
                                     ("v1.Pod.Spec.Affinity.NodeSelector", pod.node_selector)],
    "NodeName": lambda pl, pod: [("v1.Pod.Spec.NodeName", pod.node_name)],
    "ImageLocality": lambda pl, pod: [("v1.Pod.Spec.CanonicalImageNames()", _images(pod))],
}


def pod_signer(fwk: Framework) -> Signer | None:
    """The profile's signature of a pod (None: that pod cannot be batched), or None when no pod of the
    profile can be: one of its PreFilter, Filter, PreScore or Score plugins neither is an in-tree plugin
    that signs nor implements :class:`~pluginhost.sign.SignPlugin` (a remote plugin whose host declared
    Sign does), a transformer runs, or PodTopologySpread has default constraints."""
    if fwk.pre_filter_transformers or fwk.filter_transformers or fwk.score_transformers:
        return None
    plugins = dict.fromkeys((*fwk.pre_filter_plugins, *fwk.filter_plugins, *fwk.pre_score_plugins,
                             *fwk.score_plugins))
    signers: list[tuple[Any, Callable[[Any, Pod], _Fragments]]] = []
    plugin_signers: list[SignPlugin] = []
    for pl in plugins:
        sign = _SIGNERS.get(pl.name)
        if sign is None or not type(pl).__module__.startswith("framework.plugins."):
            if not isinstance(pl, SignPlugin):
                return None
            plugin_signers.append(pl)
            continue
        if pl.name == "PodTopologySpread" and (getattr(pl, "system_defaulted", True)
                                               or getattr(pl, "default_constraints", None)):
            return None  # kube-scheduler: "pods with default topology constraints are not signable"
        signers.append((pl, sign))

    async def signature(pod: Pod) -> bytes | None:
        fragments: dict[str, Any] = {"v1.Pod.Spec.SchedulerName": pod.scheduler_name}
        for pl, sign in signers:
            got = sign(pl, pod)
            if got is None:
                return None
            fragments.update(got)
        # The plugins' own SignPod after the in-tree ones: a pod those cannot sign costs no remote call.
        for spl in plugin_signers:
            # Observed as the other points' calls are: a remote signer's SignPod is a CLIENT span under Sign.
            answer = await fwk._observed("Sign", spl, spl.sign_pod(pod))
            if isinstance(answer, Raised):
                log.error("SignPod of plugin %r failed; pod %s is not batched", spl.name, pod.key, exc_info=answer.exc)
                return None
            signed, status = answer
            if not status.ok or signed is None:
                log.debug("plugin %r cannot sign pod %s: %s", spl.name, pod.key, status.message())
                return None
            fragments.update(signed)
        return _canonical(fragments).encode()

    return signature


@dataclass(slots=True)
class Ranked:
    """Nodes ranked for a batch: their names, their raw scores by Score plugin (pre-normalization, kept to
    normalize again when a node is rescored) and their totals; ``alive`` marks those not yet handed out."""

    names: list[str]
    raw: dict[str, IntArray]
    totals: IntArray
    alive: np.ndarray[Any, np.dtype[np.bool_]]

    @classmethod
    def of(cls, names: list[str], raw: dict[str, IntArray], totals: IntArray) -> Ranked:
        return cls(names, raw, totals, np.ones(len(names), dtype=np.bool_))

    def __len__(self) -> int:
        return int(self.alive.sum())

    def pop(self, fwk: Framework) -> str:
        """The best node left (the highest total; ties broken as the cycle breaks them) and drop it."""
        idx = np.flatnonzero(self.alive)
        pick = fwk.select_host(idx, self.totals[idx])
        self.alive[pick] = False
        return self.names[pick]

    def without(self, i: int) -> Ranked:
        """These nodes but the one at index ``i`` (the one a cycle chose)."""
        keep = np.ones(len(self.names), dtype=np.bool_)
        keep[i] = False
        keep &= self.alive
        return Ranked.of([n for n, k in zip(self.names, keep.tolist()) if k],
                         {p: s[keep] for p, s in self.raw.items()}, self.totals[keep])


@dataclass(slots=True)
class _State:
    signature: bytes
    ranked: Ranked
    created: float


class OpportunisticBatch:
    """One profile's batch (kube-scheduler's ``OpportunisticBatch``): see the module docstring."""

    def __init__(self, fwk: Framework, clock: Callable[[], float] = time.monotonic) -> None:
        self.fwk = fwk
        self.clock = clock
        self.signer = pod_signer(fwk)
        #: Whether a plugin's own SignPod (a remote signer's) takes part in the signature.
        self.plugin_signs = self.signer is not None and any(
            isinstance(pl, SignPlugin)
            and (pl.name not in _SIGNERS or not type(pl).__module__.startswith("framework.plugins."))
            for pl in (*fwk.pre_filter_plugins, *fwk.filter_plugins, *fwk.pre_score_plugins, *fwk.score_plugins))
        self._state: _State | None = None
        self._last_cycle = 0
        self._last_chosen = ""
        self._last_succeeded = False
        self.attempts: collections.Counter[str] = collections.Counter()
        self.flushed: collections.Counter[str] = collections.Counter()
        self.rescores = 0
        #: Pods placed on their hint.
        self.batched_pods = 0

    async def sign(self, pod: Pod, state: CycleState | None = None) -> bytes | None:
        """``pod``'s signature (None: not batched). In a cycle (``state``) of a profile with a plugin's
        own SignPod, through the framework's Sign point (its span, its calls' spans, its duration)."""
        if self.signer is None:
            return None
        if state is not None and self.plugin_signs:
            return await self.fwk.run_sign(state, pod, self.signer)
        return await self.signer(pod)

    def _flush(self, reason: str) -> bool:
        self.flushed[reason] += 1
        log.debug("batch of profile %s not used: %s", self.fwk.profile, reason)
        return False

    async def node_hint(self, state: CycleState, pod: Pod, signature: bytes | None, cycle: int,
                        snapshot: Snapshot) -> str:
        """kube-scheduler's GetNodeHint: the node to try first for ``pod`` in its cycle number ``cycle``,
        or "" (no batch to use)."""
        hint = ""
        try:
            if self._compatible(pod, signature, cycle) and await self._refresh(state, pod, snapshot):
                assert self._state is not None
                ranked = self._state.ranked
                hint = ranked.pop(self.fwk)
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("batch of profile %s hints %s to pod %s (cycle %d); ranked: %s", self.fwk.profile,
                              hint, pod.key, cycle, dict(zip(ranked.names, ranked.totals.tolist())))
            return hint
        finally:
            if not hint:
                self.attempts[NO_HINT] += 1

    def store(self, signature: bytes | None, hinted: str, chosen: str, others: Ranked | None, cycle: int,
              other_count: int = 0) -> None:
        """kube-scheduler's StoreScheduleResults after a successful schedule: ``others`` are the feasible
        nodes not chosen, ranked (None when the pod had no signature or one node fit; then
        ``other_count`` says how many there were)."""
        self._last_cycle, self._last_chosen, self._last_succeeded = cycle, chosen, True
        if hinted and hinted == chosen:
            self.attempts[HINT_USED] += 1
            self.batched_pods += 1
            return
        if hinted:
            self.attempts[HINT_NOT_USED] += 1
        if signature is not None and others is not None and len(others):
            self._state = _State(signature, others, self.clock())
            return
        self._flush("pod_not_batchable" if (len(others) if others is not None else other_count) else "empty_list")
        self._state = None

    def _compatible(self, pod: Pod, signature: bytes | None, cycle: int) -> bool:
        st = self._state
        if st is None or not len(st.ranked):
            return False
        if cycle != self._last_cycle + 1:
            return self._flush("pod_skipped")  # a pod of another profile, or one that failed, came between
        if not self._last_succeeded:
            return self._flush("pod_failed")
        if pod.nominated_node_name:
            return self._flush("pod_nominated")
        if signature is None or signature != st.signature:
            return self._flush("pod_incompatible")
        if self.clock() > st.created + MAX_BATCH_AGE:
            return self._flush("expired")
        return True

    async def _refresh(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> bool:
        """kube-scheduler's refreshHintCandidates: the last chosen node, if it still fits the pod, is
        rescored and competes with the cached nodes; if it is full, the cached nodes stand."""
        row = snapshot.row(self._last_chosen)
        if row is None:
            return self._flush("node_missing")
        status = await self.fwk.run_filter_on_node(state, pod, snapshot, row)
        if status.ok:
            return await self._rescore(state, pod, snapshot, row)
        if not status.is_rejected:
            return self._flush("filter_error")
        return True

    async def _rescore(self, state: CycleState, pod: Pod, snapshot: Snapshot, row: int) -> bool:
        """kube-scheduler's rescoreHintedNode: PreScore (on a clone of the state) over the cached nodes and
        the last chosen one, that node's raw scores, then NormalizeScore and the weights across all."""
        assert self._state is not None
        self.rescores += 1
        cached = self._state.ranked
        idx = np.flatnonzero(cached.alive)
        rows = [snapshot.row(cached.names[i]) for i in idx.tolist()]
        if any(r is None for r in rows):
            return self._flush("node_missing")
        fwk = self.fwk
        batch = NodeBatch(snapshot, np.asarray([*rows, row], dtype=np.int64))
        rescore_state = state.clone()
        if not (await fwk.run_pre_score(rescore_state, pod, batch)).ok:
            return self._flush("prescore_error")
        plugins = [pl for pl in fwk.score_plugins if pl.name not in rescore_state.skip_score]
        raw: dict[str, IntArray] = {}
        one = NodeBatch(snapshot, np.asarray([row], dtype=np.int64))
        for pl in plugins:
            try:
                fresh = np.asarray(await pl.score(rescore_state, pod, one))
            except Exception:
                return self._flush("rescore_error")
            if fresh.shape != (1,) or not np.issubdtype(fresh.dtype, np.integer):
                return self._flush("rescore_error")
            old = cached.raw.get(pl.name)
            old = old[idx] if old is not None else np.zeros(idx.shape[0], dtype=np.int64)
            raw[pl.name] = np.concatenate((old.astype(np.int64), fresh.astype(np.int64)))
        totals = await self._normalize(rescore_state, pod, batch, raw)
        if totals is None:
            return self._flush("normalize_error")
        names = [cached.names[i] for i in idx.tolist()] + [self._last_chosen]
        self._state.ranked = Ranked.of(names, raw, totals)
        return True

    async def _normalize(self, state: CycleState, pod: Pod, batch: NodeBatch,
                         raw: dict[str, IntArray]) -> IntArray | None:
        """NormalizeScore of every plugin over ``raw``, the [0, 100] check and the weights: the totals,
        or None if a step failed (kube-scheduler's NormalizeScores)."""
        totals = np.zeros(len(batch), dtype=np.int64)
        for pl in self.fwk.score_plugins:
            if pl.name not in raw:
                continue
            scores = raw[pl.name].copy()
            if isinstance(pl, ScoreExtensions):
                try:
                    status = await pl.normalize_score(state, pod, batch, scores)
                except Exception:
                    return None
                if not status.ok:
                    return None
            if len(scores) and (int(scores.min()) < MIN_NODE_SCORE or int(scores.max()) > MAX_NODE_SCORE):
                return None
            totals += scores * self.fwk.score_weights[pl.name]
        return totals
