"""DefaultPreemption's PodGroupPostFilter: preemption for a whole PodGroup (kube-scheduler 1.37's
``PodGroupEvaluator``, GenericWorkload on), and what it shares with a single pod's preemption
(PodDisruptionBudgets as victim selection reads them, pods terminating by preemption).

When a group's cycle ends Unschedulable, the domain is the whole cluster:

1. A group whose preemption policy is ``Never`` does not preempt. The policy is the PodGroup's
   ``spec.preemptionPolicy`` with the PodGroupPreemptionPolicy gate on (``PreemptLowerPriority`` when
   unset), else ``Never`` if any pending pod of the group says ``Never``.
2. A group whose pods are nominated to nodes where a pod of lower priority is still terminating because
   a preemption deleted it waits for that room ("ongoing preemption on nominated nodes", Success: the
   pods keep their nominations).
3. Victims are the units of every pod in the snapshot: a pod of a PodGroup whose ``disruptionMode`` is
   ``All`` stands for all the scheduled pods of its group (one victim, evicted whole), any other pod
   for itself. A victim's priority is its PodGroup's (``spec.priority``, 0 when unset) for a pod of a
   group, the pod's own otherwise; those below the group's priority may be preempted.
4. Every such victim is taken out of the snapshot and the group's algorithm is run again (placements
   too). If the group still cannot be placed, that status is the answer. Otherwise victims are given
   back one by one ("reprieve"), those whose eviction would violate a PodDisruptionBudget first, most
   important first within each set (priority, then a group before a pod, then more pods, then the
   earliest start): a victim stays if every pod of the group still passes Filter on the node it was
   proposed, the pods before it placed (and Reserved) there.
5. The victims left are evicted as a single pod's are (in memory at Permit or PreBind, else the
   DisruptionTarget condition and a delete), told as ``Preempted by podgroup <uid> on node cluster``;
   each pod of the group is nominated to its proposed node and the group waits, then is retried.

The messages carry upstream's ``pod group preemption:`` prefix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pluginhost.model import CPU, MEMORY, PODS, Pod, PodDisruptionBudget
from pluginhost.placement import (
    PodGroupInfo,
    PodGroupPostFilterResult,
    PodGroupSchedulingFunc,
    ProposedAssignment,
)
from pluginhost.plugin import CycleState
from pluginhost.snapshot import Snapshot
from pluginhost.status import Code, Status
from pluginhost.view import VIEW_STATE_KEY, NodeView, apply_view
from pluginhost.workload import PodGroup

from .. import features
from .labels import LabelSelectorMatcher, compile_label_selector

if TYPE_CHECKING:
    from ..runtime import Framework
    from ..waiting import PodInPreBind, WaitingPodHandle

__all__ = [
    "Budget",
    "GroupPreemptionHandle",
    "Victim",
    "cluster_victims",
    "evict_group_victims",
    "filter_victims_with_pdb_violation",
    "group_preemption_policy",
    "preempt_in_memory",
    "preempt_pod_group",
    "terminating_by_preemption",
]

PREFIX = "pod group preemption: "
MSG_ONGOING = "ongoing preemption on nominated nodes"
MSG_NO_VICTIMS = "No preemption victims found for incoming preemptor"
MSG_NEVER = "not eligible due to preemptionPolicy=Never."
#: The candidate's name in a group preemption: the domain is the whole cluster.
DOMAIN = "cluster"


class GroupPreemptionHandle(Protocol):
    """What group preemption needs from the framework handle."""

    def snapshot(self) -> Snapshot: ...

    def framework_for(self, pod: Pod) -> Framework | None: ...

    def waiting_pod(self, uid: str) -> WaitingPodHandle | None: ...

    def pod_in_pre_bind(self, uid: str) -> PodInPreBind | None: ...

    async def delete_pod(self, pod: Pod, reason: str) -> Status: ...

    def preempted(self, victim: Pod, preemptor: Pod | PodGroup, node_name: str, in_memory: bool = False) -> None: ...

    def pod_disruption_budgets(self) -> list[PodDisruptionBudget]: ...

    def pod_group_manager(self) -> _Groups: ...


class _Groups(Protocol):
    def get(self, namespace: str, name: str) -> PodGroup | None: ...


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget as victim selection reads it (its selector compiled once per attempt)."""

    namespace: str
    matcher: LabelSelectorMatcher
    allowed: int
    disrupted: frozenset[str]

    @classmethod
    def of(cls, pdb: PodDisruptionBudget) -> Budget:
        return cls(pdb.namespace, compile_label_selector(pdb.selector), pdb.disruptions_allowed,
                   frozenset(pdb.disrupted_pods))

    def covers(self, pod: Pod) -> bool:
        # An empty selector (or none) matches nothing here, unlike in the disruption controller.
        m = self.matcher
        return pod.namespace == self.namespace and not m.everything and m.matches(pod.labels)


def terminating_by_preemption(pod: Pod) -> bool:
    """Whether ``pod`` is being deleted because a preemption chose it: it has a deletion timestamp and
    its ``DisruptionTarget`` condition is True with reason ``PreemptionByScheduler``."""
    if pod.deletion_timestamp is None:
        return False
    status = pod.raw.get("status") if pod.raw else None
    for cond in (status.get("conditions") if isinstance(status, dict) else None) or ():
        if isinstance(cond, dict) and cond.get("type") == "DisruptionTarget":
            return cond.get("status") == "True" and cond.get("reason") == "PreemptionByScheduler"
    return False


def preempt_in_memory(handle: GroupPreemptionHandle, victim: Pod, plugin: str) -> bool:
    """Stop a victim that is not bound yet without deleting it: a wait at Permit ends with an Error
    (``WaitingPod.Preempt``), a running PreBind is cancelled. False if neither applied (the pod is
    bound, or its wait or PreBind ended just now): the victim must be deleted."""
    waiting = handle.waiting_pod(victim.uid)
    if waiting is not None:
        return waiting.preempt(plugin, "preempted")
    binding = handle.pod_in_pre_bind(victim.uid)
    return binding is not None and binding.cancel_pod(f"preempted by {plugin}")


@dataclass(frozen=True, slots=True)
class Victim:
    """What is evicted as one unit (kube-scheduler's ``Victim``): the pods, their priority, and the
    rank of their kind (2 for a PodGroup, or a pod of one; 1 for a pod of no group). ``group`` is the
    ``namespace/name`` of a ``disruptionMode: All`` group the victim stands for ("" for one pod)."""

    pods: tuple[Pod, ...]
    priority: int
    rank: int = 1
    group: str = ""

    @property
    def earliest_start(self) -> float:
        return min(p.creation_timestamp for p in self.pods)

    def importance(self) -> tuple[int, int, int, float]:
        """Sorts victims most important first (kube-scheduler's ``MoreImportantVictim``)."""
        return -self.priority, -self.rank, -len(self.pods), self.earliest_start


def _pod_priority(pod: Pod, groups: _Groups) -> int:
    """kube-scheduler's ``GetPodPriority``: a pod of an existing PodGroup takes the group's priority."""
    if pod.scheduling_group:
        pg = groups.get(pod.namespace, pod.scheduling_group)
        if pg is not None:
            return pg.queue_priority
    return pod.priority


def cluster_victims(snapshot: Snapshot, groups: _Groups) -> list[Victim]:
    """Every victim unit of the cluster, in node order then pod order (``getCrossNodesVictims``): the
    pods of a ``disruptionMode: All`` group are one victim, wherever they run."""
    by_group: dict[tuple[str, str], list[Pod]] = {}
    rows = [int(r) for r in snapshot.table.order]
    for row in rows:
        for pod in snapshot.pods[row]:
            if pod.scheduling_group:
                by_group.setdefault((pod.namespace, pod.scheduling_group), []).append(pod)
    seen: set[str] = set()
    out: list[Victim] = []
    for row in rows:
        for pod in snapshot.pods[row]:
            pg = groups.get(pod.namespace, pod.scheduling_group) if pod.scheduling_group else None
            if pg is None or pg.disruption_mode != "All":
                out.append(Victim((pod,), _pod_priority(pod, groups), 2 if pod.scheduling_group else 1))
                continue
            if pg.key not in seen:
                seen.add(pg.key)
                out.append(Victim(tuple(by_group[(pg.namespace, pg.name)]), pg.queue_priority, 2, pg.key))
    return out


def filter_victims_with_pdb_violation(
    victims: Sequence[Victim], budgets: Sequence[Budget]
) -> tuple[list[tuple[Victim, int]], list[Victim]]:
    """kube-scheduler's ``FilterVictimsWithPDBViolation`` over units: a victim violates when any of its
    pods, evicted after those before it, exceeds a budget's ``disruptionsAllowed`` (with how many of
    its pods do); a pod stops at the first budget it exceeds."""
    allowed = [b.allowed for b in budgets]

    def violates(pod: Pod) -> bool:
        if not pod.labels:
            return False
        for i, budget in enumerate(budgets):
            if not budget.covers(pod) or pod.name in budget.disrupted:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    violating: list[tuple[Victim, int]] = []
    clean: list[Victim] = []
    for victim in victims:
        count = sum(1 for pod in victim.pods if violates(pod))
        if count:
            violating.append((victim, count))
        else:
            clean.append(victim)
    return violating, clean


def group_preemption_policy(pg: PodGroup, pods: Sequence[Pod]) -> str:
    """The group's preemption policy (``resolvePreemptionPolicy``)."""
    if features.enabled("PodGroupPreemptionPolicy"):
        return pg.preemption_policy or "PreemptLowerPriority"
    return "Never" if any(p.preemption_policy == "Never" for p in pods) else "PreemptLowerPriority"


def _ongoing(pods: Sequence[Pod], priority: int, snapshot: Snapshot, groups: _Groups) -> bool:
    """isOngoingPreemption: a pod of lower priority terminating by preemption on a node a pod of the
    group is nominated to."""
    for node in {p.nominated_node_name for p in pods if p.nominated_node_name}:
        row = snapshot.row(node)
        if row is None:
            continue
        if any(_pod_priority(p, groups) < priority and terminating_by_preemption(p) for p in snapshot.pods[row]):
            return True
    return False


def _prefixed(status: Status) -> Status:
    msg = status.message()
    if not msg:
        return status
    if status.code is Code.Error:
        return Status.failure(PREFIX + msg, error=status.error)
    return Status(status.code, (PREFIX + msg,))


async def preempt_pod_group(
    plugin: str, handle: GroupPreemptionHandle, state: CycleState, group: PodGroupInfo,
    schedule: PodGroupSchedulingFunc,
) -> tuple[PodGroupPostFilterResult | None, Status]:
    """DefaultPreemption.PodGroupPostFilter (see the module docstring); ``schedule`` is the cycle's
    :data:`~pluginhost.placement.PodGroupSchedulingFunc`."""
    result, status = await _preempt(plugin, handle, state, group, schedule)
    return result, _prefixed(status)


async def _preempt(
    plugin: str, handle: GroupPreemptionHandle, state: CycleState, group: PodGroupInfo,
    schedule: PodGroupSchedulingFunc,
) -> tuple[PodGroupPostFilterResult | None, Status]:
    pg, pods = group.pod_group, group.unscheduled_pods
    priority = pg.queue_priority
    if group_preemption_policy(pg, pods) == "Never":
        return None, Status.unschedulable(MSG_NEVER)
    snapshot = state.snapshot or handle.snapshot()
    groups = handle.pod_group_manager()
    if _ongoing(pods, priority, snapshot, groups):
        current = PodGroupPostFilterResult({p.key: p.nominated_node_name for p in pods})
        return current, Status(Code.Success, (MSG_ONGOING,))
    fwk = handle.framework_for(pods[0]) if pods else None
    if fwk is None:
        return None, Status.failure(f"no profile for pod group {pg.key}")
    potential = [v for v in cluster_victims(snapshot, groups) if v.priority < priority]
    if not potential:
        return None, Status.unresolvable(MSG_NO_VICTIMS)
    removed = NodeView(removed_pods=tuple((p.uid, p.node_name) for v in potential for p in v.pods))
    assignments, status = await schedule(removed)
    if not status.ok:
        return None, status
    potential.sort(key=Victim.importance)
    budgets = [Budget.of(pdb) for pdb in handle.pod_disruption_budgets()]
    violating, clean = filter_victims_with_pdb_violation(potential, budgets)
    valid = [a for a in (assignments.proposed if assignments is not None else ()) if a.node_name]
    # The snapshot without the victims still out, kept up to date as victims are given back (one
    # victim's work each time, not all of them again: a thousand victims add up).
    bare = _Bare(apply_view(snapshot, removed))
    needs = _needs(fwk, valid)
    # The group fitting with every victim out is what each reprieve that changes nothing for it would
    # find: checked once, it answers for the victims out of every proposed pod's reach (below).
    unreached, status = await _reprieve(fwk, snapshot, bare.current(), Victim((), 0), potential, valid)
    if not status.ok:
        return None, status
    reach = _Reach(fwk, valid, snapshot) if unreached else None
    chosen, _, status = await _select(fwk, snapshot, bare, [*violating, *((v, 0) for v in clean)],
                                      potential, valid, needs, reach)
    if not status.ok:
        return None, status
    chosen.sort(key=Victim.importance)
    victims = [p for v in chosen for p in v.pods]
    status = await evict_group_victims(plugin, handle, pg, victims)
    if status.ok:
        status = Status(Code.Success, (f"found a placement for podgroup, preempting {len(victims)} victims",))
    return PodGroupPostFilterResult({a.pod.key: a.node_name for a in valid}), status


async def _pre_filter_extensions(fwk: Framework, pods: Sequence[Pod], valid: Sequence[ProposedAssignment],
                                 snapshot: Snapshot, *, add: bool) -> Status:
    """Tell every proposed pod's PreFilter state that ``pods`` came back (or left again)."""
    for pod in pods:
        row = snapshot.row(pod.node_name)
        if row is None:
            continue
        for a in valid:
            if a.state is None:
                continue
            run = fwk.run_pre_filter_extension_add_pod if add else fwk.run_pre_filter_extension_remove_pod
            status = await run(a.state, a.pod, pod, row)
            if not status.ok:
                return status
    return Status()


async def _select(fwk: Framework, snapshot: Snapshot, bare: _Bare, ordered: Sequence[tuple[Victim, int]],
                  potential: Sequence[Victim], valid: Sequence[ProposedAssignment], needs: _Needs | None,
                  reach: _Reach | None) -> tuple[list[Victim], int, Status]:
    """The reprieve loop: each victim in ``ordered`` (with how many PodDisruptionBudget violations it
    counts) given back if the group still fits; the victims kept out, their violations."""
    out = {id(v): v for v in potential}  # the victims out of the snapshot now, by identity
    chosen: list[Victim] = []
    violations = 0
    for victim, count in ordered:
        if reach is not None and not reach(victim):
            # Out of reach: its PreFilter extensions would move counts in domains no proposed node is
            # in, which no Filter of a proposed pod reads (kube-scheduler runs them; the answer is the same).
            del out[id(victim)]
            bare.give_back(victim.pods)
            continue
        if needs is not None and bare.overflows(victim, needs):
            fits = False
        else:
            fits, status = await _reprieve(fwk, snapshot, bare.current(), victim,
                                           [v for v in out.values() if v is not victim], valid)
            if not status.ok:
                return [], 0, status
        if fits:
            del out[id(victim)]
            bare.give_back(victim.pods)
        else:
            chosen.append(victim)
            violations += count
    return chosen, violations, Status()


#: What the proposed pods of a node need there together (resource -> amount; PODS the pod count),
#: per node name.
_Needs = dict[str, dict[str, int]]


def _needs(fwk: Framework, valid: Sequence[ProposedAssignment]) -> _Needs | None:
    """The CPU, memory and pod count the proposed pods need on each node, when NodeResourcesFit is
    one of the profile's Filter plugins (None otherwise: nothing can be told before Filter runs)."""
    if not any(p.name == "NodeResourcesFit" for p in fwk.filter_plugins):
        return None
    out: _Needs = {}
    for a in valid:
        need = out.setdefault(a.node_name, {})
        need[PODS] = need.get(PODS, 0) + 1
        for resource in (CPU, MEMORY):
            need[resource] = need.get(resource, 0) + a.pod.requests.get(resource, 0)
    return out


class _Bare:
    """The snapshot without the victims still out. Victims given back wait in a list until a Filter
    reads the snapshot, then go in with one view (not one view each: most victims run no Filter)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._back: list[Pod] = []
        self._by_node: dict[str, list[Pod]] = {}

    def give_back(self, pods: Sequence[Pod]) -> None:
        self._back.extend(pods)
        for p in pods:
            self._by_node.setdefault(p.node_name, []).append(p)

    def current(self) -> Snapshot:
        if self._back:
            self._snapshot = apply_view(self._snapshot, NodeView(added_pods=tuple(self._back)))
            self._back, self._by_node = [], {}
        return self._snapshot

    def overflows(self, victim: Victim, needs: _Needs) -> bool:
        """Whether a node of ``victim`` lacks room for the pods proposed on it once the victim is back:
        NodeResourcesFit's Filter would then turn away the last of them that asks for that resource
        (the others placed before it), so the victim cannot stay, and Filter need not run for every pod."""
        seen = self._snapshot
        for name in {p.node_name for p in victim.pods}:
            row = seen.row(name)
            need = needs.get(name)
            if row is None or not need:
                continue
            here = [*self._by_node.get(name, ()), *(p for p in victim.pods if p.node_name == name)]
            for resource, amount in need.items():
                col = seen.columns.get(resource)
                if amount <= 0 or col is None:
                    continue
                used = int(seen.requested[row, col]) + sum(
                    1 if resource == PODS else p.requests.get(resource, 0) for p in here)
                if amount > int(seen.allocatable[row, col]) - used:
                    return True
        return False


#: In-tree Filter plugins whose answer on a node reads nothing of the pods on other nodes.
NODE_LOCAL_FILTERS = frozenset({"NodeResourcesFit", "NodePorts", "NodeName", "NodeAffinity", "NodeUnschedulable",
                                "TaintToleration", "NodeVolumeLimits", "VolumeBinding", "VolumeZone"})


class _Reach:
    """Whether giving a victim back can change a Filter answer for a proposed pod: it runs on a node
    one is proposed on, or a Filter plugin the pod did not skip at PreFilter reads other nodes' pods
    (any but the node-local ones and InterPodAffinity, which says where its counts reach). kube-scheduler
    runs Filter for every proposed pod on every reprieve; a victim out of reach passes as the group does
    with every victim out, so the answer is the same without running it. What depends only on the
    group's proposal (the nodes, the plugins each pod runs) is worked out once, not per victim."""

    def __init__(self, fwk: Framework, valid: Sequence[ProposedAssignment], snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.proposed = frozenset(a.node_name for a in valid)
        #: Some pod's answer may depend on any victim (a plugin that does not say, no state, no node).
        self.everything = False
        #: (InterPodAffinity.reaches, the pod's state, the pod, its node's row) per pod that runs it.
        self.checks: list[tuple[Any, CycleState, Pod, int]] = []
        for a in valid:
            row = snapshot.row(a.node_name)
            if a.state is None or row is None:
                self.everything = True
                return
            for pl in fwk.filter_plugins:
                if pl.name in a.state.skip_filter or (pl.name in NODE_LOCAL_FILTERS and _in_tree(pl)):
                    continue
                reaches = getattr(pl, "reaches", None) if pl.name == "InterPodAffinity" and _in_tree(pl) else None
                if reaches is None:
                    self.everything = True
                    return
                self.checks.append((reaches, a.state, a.pod, row))

    def __call__(self, victim: Victim) -> bool:
        if self.everything:
            return True
        found = [self.snapshot.row(p.node_name) for p in victim.pods]
        rows = [r for r in found if r is not None]
        if len(rows) < len(found) or any(p.node_name in self.proposed for p in victim.pods):
            return True
        table = self.snapshot.table
        return any(reaches(state, pod, p, r, row, table)
                   for reaches, state, pod, row in self.checks for p, r in zip(victim.pods, rows))


def _in_tree(plugin: object) -> bool:
    return type(plugin).__module__.startswith("framework.plugins.")


async def _reprieve(fwk: Framework, snapshot: Snapshot, bare: Snapshot, victim: Victim, others: Sequence[Victim],
                    valid: Sequence[ProposedAssignment]) -> tuple[bool, Status]:
    """Whether the group still fits with ``victim`` given back (``others`` still out, ``bare`` the
    snapshot without them): each proposed pod passes Filter on its node with the pods before it placed
    and Reserved; all undone after."""
    seen = apply_view(bare, NodeView(added_pods=victim.pods))
    status = await _pre_filter_extensions(fwk, victim.pods, valid, snapshot, add=True)
    if not status.ok:
        return False, status
    removed = tuple((p.uid, p.node_name) for v in others for p in v.pods)
    placed: list[tuple[ProposedAssignment, Pod]] = []
    # Each pod placed is added to the last view's snapshot (one pod's work, not all of them again).
    try:
        for a in valid:
            view = NodeView(added_pods=tuple(p for _, p in placed), removed_pods=removed)
            if not await _fits(fwk, a, snapshot, seen, view):
                status = await _pre_filter_extensions(fwk, victim.pods, valid, snapshot, add=False)
                return False, status
            pod = dataclasses.replace(a.pod, node_name=a.node_name)
            seen = apply_view(seen, NodeView(added_pods=(pod,)))
            placed.append((a, pod))
            if a.state is not None:
                await fwk.run_reserve(a.state, pod, a.node_name)  # upstream does not look at its answer
        return True, Status()
    finally:
        for a, pod in reversed(placed):
            if a.state is not None:
                await fwk.run_unreserve(a.state, pod, a.node_name)


async def _fits(fwk: Framework, a: ProposedAssignment, snapshot: Snapshot, seen: Snapshot, view: NodeView) -> bool:
    """Filter for one proposed pod on its node in ``seen``, which is ``snapshot`` as ``view`` shows it
    (remote plugins get the view with the request and apply it themselves); anything but Success is a no."""
    row = snapshot.row(a.node_name)
    if row is None or a.state is None:
        return False
    state = a.state
    base = state.get(VIEW_STATE_KEY)
    state.write(VIEW_STATE_KEY, view)
    try:
        status = await fwk.run_filter_on_node(state, a.pod, seen, row)
    finally:
        if base is None:
            state.delete(VIEW_STATE_KEY)
        else:
            state.write(VIEW_STATE_KEY, base)
    return status.ok


async def evict_group_victims(plugin: str, handle: GroupPreemptionHandle, pg: PodGroup,
                              victims: Sequence[Pod]) -> Status:
    """prepareCandidate for a group: each victim stopped in memory or deleted through the cluster source,
    and told (``Preempted by podgroup <uid> on node cluster``)."""
    for victim in victims:
        in_memory = preempt_in_memory(handle, victim, plugin)
        if not in_memory:
            if victim.deletion_timestamp is not None:
                continue  # its deletion has begun already: nothing to send, nothing to tell
            status = await handle.delete_pod(victim, f"preempted by podgroup {pg.key} on node {DOMAIN}")
            if not status.ok and not status.message().endswith("not found"):
                return Status.failure(f"deleting victim {victim.key}: {status.message()}")
        handle.preempted(victim, pg, DOMAIN, in_memory)
    return Status()

