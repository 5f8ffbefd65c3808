"""Validating a decoded, defaulted KubeSchedulerConfiguration, as kube-scheduler's
``pkg/scheduler/apis/config/validation/validation.go`` does: every problem of the file at once, each a
``(path, message)`` pair; and the warnings for what loads but is likely a mistake (negative weights).

``known`` maps each plugin name the caller can instantiate to its extension points; ``unmodelled``
names the in-tree plugins it lacks, which are dropped with a warning rather than refused
(:data:`~framework.config.defaults.UNMODELLED_PLUGINS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from .decoding import PluginSet, RawConfig, RawProfile, child
from .defaults import INVALID_IN_V1
from .leaderelection import leader_election_config
from .model import API_VERSION, MULTI_POINT, PLUGIN_SETS, located

__all__ = ["negative_weight_warnings", "validate"]


def validate(
    raw: RawConfig, merged: list[dict[str, PluginSet]], known: Mapping[str, frozenset[str]], unmodelled: Set[str]
) -> list[tuple[str, str]]:
    """Every problem kube-scheduler's validation finds in ``raw``, whose profiles' merged plugin sets
    are ``merged`` (one per profile, in order)."""
    problems: list[tuple[str, str]] = []
    problems.extend(leader_election_config(raw.extra.get("leaderElection"))[1])
    parallelism = raw.extra.get("parallelism")
    if parallelism is not None and parallelism <= 0:
        problems.append(
            ("parallelism", f"Invalid value: {parallelism}: should be an integer value greater than zero")
        )

    first_with_name: dict[str, int] = {}
    for i, prof in enumerate(raw.profiles):
        problems.extend(_validate_profile(prof, known, unmodelled))
        name = prof.scheduler_name or ""
        if name and name in first_with_name:
            problems.append((child(prof.path, "schedulerName"), f'Duplicate value: "{name}"'))
        first_with_name.setdefault(name, i)
    problems.extend(_validate_common_queue_sort(raw, merged))

    if raw.percentage is not None and not 0 <= raw.percentage <= 100:
        problems.append(
            ("percentageOfNodesToScore", f"Invalid value: {raw.percentage}: not in valid range [0-100]")
        )
    initial = 1 if raw.initial_backoff is None else raw.initial_backoff
    maximum = 10 if raw.max_backoff is None else raw.max_backoff
    if initial <= 0:
        problems.append(("podInitialBackoffSeconds", f"Invalid value: {initial}: must be greater than 0"))
    if maximum < initial:
        problems.append(
            (
                "podMaxBackoffSeconds",
                f"Invalid value: {maximum}: must be greater than or equal to PodInitialBackoffSeconds",
            )
        )
    return problems


def _validate_profile(
    prof: RawProfile, known: Mapping[str, frozenset[str]], unmodelled: Set[str]
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if not prof.scheduler_name:
        problems.append((child(prof.path, "schedulerName"), "Required value"))
    if prof.percentage is not None and not 0 <= prof.percentage <= 100:
        problems.append(
            (
                child(prof.path, "percentageOfNodesToScore"),
                f"Invalid value: {prof.percentage}: not in valid range [0-100]",
            )
        )
    invalid_msg = (
        f'was invalid in version "{API_VERSION}" (KubeSchedulerConfiguration is version "{API_VERSION}")'
    )
    if prof.plugins is not None:
        # kube-scheduler checks only the per-point sets here (podGroupPostFilter too since v1.37), but
        # a removed plugin in multiPoint, placementGenerate or placementScore fails later anyway ("does
        # not exist"), so the same message is given for it.
        for point in PLUGIN_SETS:
            for entry in prof.plugins[point].enabled:
                if entry.name in INVALID_IN_V1 and entry.name not in known:
                    problems.append((entry.path or "", f'Invalid value: "{entry.name}": {invalid_msg}'))
    seen: set[str] = set()
    for pc in prof.plugin_config:
        if pc.name in seen:
            problems.append((pc.path, f'Duplicate value: "{pc.name}"'))
        seen.add(pc.name)
        if pc.name in INVALID_IN_V1 and pc.name not in known:
            problems.append((pc.path, f'Invalid value: "{pc.name}": {invalid_msg}'))
        elif pc.name not in known and pc.name not in unmodelled:
            problems.append(
                (child(pc.path, "name"), f'Invalid value: "{pc.name}": plugin does not exist')
            )
    return problems


def _validate_common_queue_sort(raw: RawConfig, merged: list[dict[str, PluginSet]]) -> list[tuple[str, str]]:
    """validateCommonQueueSort: the queueSort set (and its args) must match profile 0's."""
    problems: list[tuple[str, str]] = []

    def canon(ps: PluginSet) -> tuple[tuple[tuple[str, int], ...], tuple[str, ...]]:
        return tuple((e.name, e.weight) for e in ps.enabled), tuple(ps.disabled)

    first = merged[0]["queueSort"]
    if len(first.enabled) > 1:
        problems.append(
            (
                f"{raw.profiles[0].path}.plugins.queueSort.enabled",
                f"Invalid value: {len(first.enabled)}: only one queue sort plugin can be enabled",
            )
        )
    name = first.enabled[0].name if first.enabled else ""
    args = next((pc.args for pc in raw.profiles[0].plugin_config if name and pc.name == name), None)
    for prof, plugins in zip(raw.profiles[1:], merged[1:], strict=True):
        if canon(plugins["queueSort"]) != canon(first):
            problems.append((f"{prof.path}.plugins.queueSort", "must be the same for all profiles"))
        for pc in prof.plugin_config:
            if pc.name == name and pc.args != args:
                problems.append((f"{pc.path}.args", "queueSort must be the same for all profiles"))
    return problems


def negative_weight_warnings(prof: RawProfile, unmodelled: Set[str], source: str) -> list[str]:
    """A warning line for each negative score weight ``prof`` gives a plugin (``source``: the file)."""
    # kube-scheduler v1.37 puts no range on score weights (validation.go has none; getValidScoreWeights
    # only refuses a total that could overflow), so a weight of 101 or -5 loads as it does there.
    # A negative weight is almost always a mistake, so it is named.
    if prof.plugins is None:
        return []
    return [
        located(
            source,
            f"{entry.path}.weight",
            f'negative weight {entry.weight} inverts the preference of plugin "{entry.name}"',
        )
        for entry in (
            *prof.plugins[MULTI_POINT].enabled,
            *prof.plugins["score"].enabled,
            *prof.plugins["placementScore"].enabled,
        )
        if entry.weight < 0 and entry.name not in unmodelled
    ]
