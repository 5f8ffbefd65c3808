"""Pod (anti-)affinity terms as InterPodAffinity reads them: kube-scheduler's ``framework.AffinityTerm``
(a ``PodAffinityTerm`` with its namespaces resolved and ``matchLabelKeys`` / ``mismatchLabelKeys`` merged
into the selector from the owning pod's labels) and a pod's four lists of them.

Two pods whose terms compile to equal :class:`Term` values answer every question the same way, so
the existing pods' terms can be grouped by value and matched once per group.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from pluginhost.model import Pod, PodAffinity, PodAffinityTerm, WeightedPodAffinityTerm

from .labels import LabelSelectorMatcher, Requirement, compile_label_selector

__all__ = [
    "NO_TERMS",
    "NsLabels",
    "PodTerms",
    "Term",
    "compile_pod_terms",
    "compile_term",
    "has_pod_affinity",
    "matches_all",
]

NsLabels = Callable[[str], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Term:
    """A processed PodAffinityTerm (kube-scheduler's ``framework.AffinityTerm``), with its weight."""

    topology_key: str
    selector: LabelSelectorMatcher
    namespaces: frozenset[str]
    ns_selector: LabelSelectorMatcher
    weight: int = 0

    def namespace_matches(self, namespace: str, ns_labels: NsLabels) -> bool:
        if namespace in self.namespaces:
            return True
        return self.ns_selector.matches(ns_labels(namespace))

    def matches(self, pod: Pod, ns_labels: NsLabels) -> bool:
        return self.namespace_matches(pod.namespace, ns_labels) and self.selector.matches(pod.labels)


def compile_term(owner: Pod, t: PodAffinityTerm, weight: int = 0) -> Term:
    """``t`` as a term of ``owner`` (``newAffinityTerm``): its namespaces resolved against the owner's,
    ``matchLabelKeys`` / ``mismatchLabelKeys`` merged into the selector from the owner's labels."""
    extra: list[Requirement] = []
    if t.label_selector is not None:
        for key in t.match_label_keys:
            if key in owner.labels:
                extra.append(Requirement(key, "In", (owner.labels[key],)))
        for key in t.mismatch_label_keys:
            if key in owner.labels:
                extra.append(Requirement(key, "NotIn", (owner.labels[key],)))
    if not t.namespaces and t.namespace_selector is None:
        namespaces = frozenset((owner.namespace,))
    else:
        namespaces = frozenset(t.namespaces)
    return Term(
        topology_key=t.topology_key,
        selector=compile_label_selector(t.label_selector).with_requirements(extra),
        namespaces=namespaces,
        ns_selector=compile_label_selector(t.namespace_selector),
        weight=weight,
    )


@dataclass(frozen=True, slots=True)
class PodTerms:
    """A pod's compiled terms: required and preferred, affinity and anti-affinity."""

    required_affinity: tuple[Term, ...] = ()
    required_anti: tuple[Term, ...] = ()
    preferred_affinity: tuple[Term, ...] = ()
    preferred_anti: tuple[Term, ...] = ()


NO_TERMS = PodTerms()


def compile_pod_terms(pod: Pod) -> PodTerms:
    """The terms of ``pod`` (:data:`NO_TERMS` without pod affinity or anti-affinity)."""
    a = pod.affinity
    if a is None or (a.pod_affinity is None and a.pod_anti_affinity is None):
        return NO_TERMS

    def required(pa: PodAffinity | None) -> tuple[Term, ...]:
        return () if pa is None else tuple(compile_term(pod, t) for t in pa.required)

    def preferred(pa: PodAffinity | None) -> tuple[Term, ...]:
        ws: list[WeightedPodAffinityTerm] = [] if pa is None else pa.preferred
        return tuple(compile_term(pod, w.term, w.weight) for w in ws)

    return PodTerms(
        required(a.pod_affinity),
        required(a.pod_anti_affinity),
        preferred(a.pod_affinity),
        preferred(a.pod_anti_affinity),
    )


def has_pod_affinity(pod: Pod) -> bool:
    """Whether ``pod`` has pod affinity or anti-affinity (kube-scheduler's ``PodsWithAffinity``)."""
    a = pod.affinity
    return a is not None and (a.pod_affinity is not None or a.pod_anti_affinity is not None)


def matches_all(terms: Sequence[Term], pod: Pod, ns_labels: NsLabels) -> bool:
    """kube-scheduler's podMatchesAllAffinityTerms: false for no terms."""
    return bool(terms) and all(t.matches(pod, ns_labels) for t in terms)
