"""PodDisruptionBudgets in the embedded store: the disruption controller's arithmetic.

On a live cluster, kube-controller-manager's disruption controller keeps each PodDisruptionBudget's
status, and preemption reads ``status.disruptionsAllowed`` as it is (:mod:`framework.kube.source`).
The embedded store has no controller, so it works the status out when preemption asks, as the
controller does (``pkg/controller/disruption``):

- the PDB's pods are those of its namespace its selector matches (an absent selector matches none,
  an empty one all);
- ``expected``: with ``minAvailable`` as a number, the pods found; otherwise what the pods'
  controllers want, which the embedded store, having no workload controllers, takes to be the pods
  found as well;
- ``desiredHealthy``: ``minAvailable``, or ``expected - maxUnavailable``, percentages of ``expected``
  rounded up;
- ``currentHealthy``: the pods that are bound and not being deleted (the store has no kubelet: a bound
  pod counts as running and ready);
- ``disruptionsAllowed = currentHealthy - desiredHealthy``, and 0 when that is negative or nothing is
  expected. With neither field set, nothing may be disrupted.

::

    allowed = embedded_status(pdb, scheduler_pods).disruptions_allowed
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable

from pluginhost.model import Pod, PodDisruptionBudget

from .plugins.labels import compile_label_selector

__all__ = ["embedded_status", "scaled"]


def scaled(value: int | str, total: int) -> int:
    """An int-or-percent against ``total``, percentages rounded up (``GetScaledValueFromIntOrPercent``)."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value.rstrip("%")) * total / 100)


def embedded_status(pdb: PodDisruptionBudget, pods: Iterable[Pod]) -> PodDisruptionBudget:
    """``pdb`` with the ``disruptions_allowed`` the disruption controller would give it over ``pods``
    (every pod of the store; those of other namespaces are skipped)."""
    matcher = compile_label_selector(pdb.selector)
    covered = [p for p in pods if p.namespace == pdb.namespace and matcher.matches(p.labels)]
    expected = desired = 0  # with neither field set: nothing expected, nothing may be disrupted
    if pdb.max_unavailable is not None:
        expected = len(covered)
        desired = max(expected - scaled(pdb.max_unavailable, expected), 0)
    elif pdb.min_available is not None:
        expected = len(covered)
        desired = scaled(pdb.min_available, expected)
    healthy = sum(1 for p in covered if p.node_name and p.deletion_timestamp is None)
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return dataclasses.replace(pdb, disruptions_allowed=allowed, disrupted_pods={})
