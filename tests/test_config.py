"""Tests for framework.config: loading, defaulting, validating and resolving KubeSchedulerConfiguration.

Expected plugin lists are written out literally; they are what kube-scheduler (v1.37) resolves for
the same file, minus the volume/DRA plugins the test registry below does not have.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import framework.config as config
from framework import features
from framework.config import (
    DEFAULT_MULTIPOINT,
    EXTENSION_POINTS,
    UNMODELLED_PLUGINS,
    ConfigError,
    PluginRef,
    ProfileConfig,
    default_config,
    defaults,
    load_config,
    load_config_file,
    resolution,
)

# The default plugins' real extension points in kube-scheduler v1.37, plus two fakes. DefaultPreemption
# also implements PreEnqueue (it gates pods whose asynchronous preemption is still running, v1.32+);
# NodeName, NodeUnschedulable and TaintToleration implement PreFilter since v1.37.
KNOWN: dict[str, frozenset[str]] = {
    "PrioritySort": frozenset({"queueSort"}),
    "SchedulingGates": frozenset({"preEnqueue"}),
    "NodeName": frozenset({"preFilter", "filter"}),
    "NodeUnschedulable": frozenset({"preFilter", "filter"}),
    "TaintToleration": frozenset({"preFilter", "filter", "preScore", "score"}),
    "NodeAffinity": frozenset({"preFilter", "filter", "preScore", "score"}),
    "NodePorts": frozenset({"preFilter", "filter"}),
    "NodeResourcesFit": frozenset({"preFilter", "filter", "preScore", "score"}),
    "PodTopologySpread": frozenset({"preFilter", "filter", "preScore", "score"}),
    "InterPodAffinity": frozenset({"preFilter", "filter", "preScore", "score"}),
    "DefaultPreemption": frozenset({"preEnqueue", "postFilter"}),
    "NodeResourcesBalancedAllocation": frozenset({"preScore", "score"}),
    "ImageLocality": frozenset({"score"}),
    "DefaultBinder": frozenset({"bind"}),
    "NodeDeclaredFeatures": frozenset({"preFilter", "filter"}),
    "Gang": frozenset({"preFilter", "permit", "reserve"}),
    "Custom": frozenset({"filter", "score"}),
}
# With a second queue sort plugin, for the queue-sort rules.
KNOWN_FIFO = {**KNOWN, "FifoSort": frozenset({"queueSort"})}

HEADER = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"

DEFAULT_NAMES: dict[str, list[str]] = {
    "preEnqueue": ["SchedulingGates", "DefaultPreemption"],
    "queueSort": ["PrioritySort"],
    "preFilter": [
        "NodeName",
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeDeclaredFeatures",
    ],
    "filter": [
        "NodeName",
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeDeclaredFeatures",
    ],
    "postFilter": ["DefaultPreemption"],
    "preScore": [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ],
    "score": [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    ],
    "reserve": [],
    "permit": [],
    "preBind": [],
    "bind": ["DefaultBinder"],
    "postBind": [],
}
DEFAULT_WEIGHTS = {
    "TaintToleration": 3,
    "NodeAffinity": 2,
    "NodeResourcesFit": 1,
    "PodTopologySpread": 2,
    "InterPodAffinity": 2,
    "NodeResourcesBalancedAllocation": 1,
    "ImageLocality": 1,
}
DEFAULT_WARNINGS = [
    f'plugin "{name}" is not modelled by Outrigger and is ignored'
    for name in ("VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "DynamicResources")
]


def load(body: str, known: dict[str, frozenset[str]] = KNOWN) -> config.SchedulerConfig:
    return load_config(HEADER + body, known, "scheduler.yaml")


def names(profile: ProfileConfig) -> dict[str, list[str]]:
    return {point: profile.names(point) for point in EXTENSION_POINTS}


def with_changes(**changes: list[str]) -> dict[str, list[str]]:
    out = {point: list(plugins) for point, plugins in DEFAULT_NAMES.items()}
    out.update(changes)
    return out


# --- defaults ------------------------------------------------------------------------------------


def test_default_config_matches_kube_scheduler() -> None:
    cfg = default_config(KNOWN)
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler"]
    prof = cfg.profiles[0]
    assert names(prof) == DEFAULT_NAMES
    assert prof.score_weights == DEFAULT_WEIGHTS
    assert prof.plugins["score"] == [
        PluginRef("TaintToleration", 3),
        PluginRef("NodeAffinity", 2),
        PluginRef("NodeResourcesFit", 1),
        PluginRef("PodTopologySpread", 2),
        PluginRef("InterPodAffinity", 2),
        PluginRef("NodeResourcesBalancedAllocation", 1),
        PluginRef("ImageLocality", 1),
    ]
    # Weights only mean something at score.
    assert prof.plugins["filter"][2] == PluginRef("TaintToleration", 0)
    assert prof.percentage_of_nodes_to_score is None
    assert prof.plugin_args == {name: {} for name in KNOWN if name not in ("Gang", "Custom")}
    assert cfg.percentage_of_nodes_to_score is None
    assert cfg.pod_initial_backoff_seconds == 1.0
    assert cfg.pod_max_backoff_seconds == 10.0
    assert cfg.extra == {}
    assert cfg.warnings == DEFAULT_WARNINGS


def test_no_text_and_minimal_file_equal_defaults() -> None:
    assert load_config(None, KNOWN) == default_config(KNOWN)
    minimal = load("")
    assert minimal.profiles == default_config(KNOWN).profiles
    assert minimal.warnings == DEFAULT_WARNINGS
    # A single profile without a name gets the default name.
    assert (
        load("profiles:\n- percentageOfNodesToScore: 30\n").profiles[0].scheduler_name == "default-scheduler"
    )


def test_default_multipoint_list() -> None:
    assert [ref.name for ref in DEFAULT_MULTIPOINT] == [
        "SchedulingGates",
        "PrioritySort",
        "NodeName",
        "NodeUnschedulable",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
        "DynamicResources",
        "DefaultPreemption",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
        "DefaultBinder",
        "NodeDeclaredFeatures",
    ]
    # DynamicResources' weight (2) is kube-scheduler's; KNOWN does not model it, so it resolves to nothing here.
    weights = {ref.name: ref.weight for ref in DEFAULT_MULTIPOINT if ref.weight}
    assert weights == {**DEFAULT_WEIGHTS, "DynamicResources": 2}
    assert {
        "VolumeBinding",
        "VolumeZone",
        "DynamicResources",
        "EBSLimits",
        "CinderLimits",
    } <= UNMODELLED_PLUGINS
    # A registry that has one of them (NodeDeclaredFeatures here) runs it: known names are never unmodelled.
    assert UNMODELLED_PLUGINS & KNOWN.keys() == {"NodeDeclaredFeatures"}


# --- merging and expansion -----------------------------------------------------------------------

MULTI_PROFILE = """
percentageOfNodesToScore: 50
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 30
profiles:
  - schedulerName: default-scheduler
    plugins:
      multiPoint:
        enabled:
          - name: Custom
            weight: 5
          - name: NodeResourcesFit      # a default, re-enabled: keeps its place, takes the new weight
            weight: 4
      filter:
        disabled:
          - name: NodePorts             # only at filter; NodePorts still runs at preFilter
  - schedulerName: gang-scheduler
    percentageOfNodesToScore: 20
    plugins:
      multiPoint:
        enabled:
          - name: Gang
      score:
        disabled:
          - name: "*"
        enabled:
          - name: NodeResourcesFit
            weight: 2
          - name: ImageLocality
    pluginConfig:
      - name: Gang
        args:
          minMember: 3
          timeoutSeconds: 30
      - name: NodeResourcesFit
        args:
          scoringStrategy:
            type: MostAllocated
"""


def test_multi_profile_file() -> None:
    cfg = load(MULTI_PROFILE)
    assert cfg.percentage_of_nodes_to_score == 50
    assert cfg.pod_initial_backoff_seconds == 2.0
    assert cfg.pod_max_backoff_seconds == 30.0
    assert cfg.warnings == DEFAULT_WARNINGS

    first = cfg.profiles[0]
    assert first.scheduler_name == "default-scheduler"
    assert names(first) == with_changes(
        filter=[
            "NodeName",
            "NodeUnschedulable",
            "TaintToleration",
            "NodeAffinity",
            "NodeResourcesFit",
            "PodTopologySpread",
            "InterPodAffinity",
            "NodeDeclaredFeatures",
            "Custom",
        ],
        score=[
            "TaintToleration",
            "NodeAffinity",
            "NodeResourcesFit",
            "PodTopologySpread",
            "InterPodAffinity",
            "NodeResourcesBalancedAllocation",
            "ImageLocality",
            "Custom",
        ],
    )
    assert first.score_weights == {**DEFAULT_WEIGHTS, "NodeResourcesFit": 4, "Custom": 5}
    assert first.plugins["score"][2] == PluginRef("NodeResourcesFit", 4)
    assert first.percentage_of_nodes_to_score is None

    gang = cfg.profile("gang-scheduler")
    assert gang is not None and gang is cfg.profiles[1]
    assert names(gang) == with_changes(
        preFilter=[*DEFAULT_NAMES["preFilter"], "Gang"],
        score=["NodeResourcesFit", "ImageLocality"],
        reserve=["Gang"],
        permit=["Gang"],
    )
    # preScore is untouched by `score: disabled: *`, as in kube-scheduler.
    assert gang.names("preScore") == DEFAULT_NAMES["preScore"]
    assert gang.plugins["score"] == [PluginRef("NodeResourcesFit", 2), PluginRef("ImageLocality", 1)]
    assert gang.score_weights == {"NodeResourcesFit": 2, "ImageLocality": 1}
    assert gang.percentage_of_nodes_to_score == 20
    assert gang.plugin_args["Gang"] == {"minMember": 3, "timeoutSeconds": 30}
    assert gang.plugin_args["NodeResourcesFit"] == {"scoringStrategy": {"type": "MostAllocated"}}
    assert gang.plugin_args["ImageLocality"] == {}
    assert "Gang" not in first.plugin_args
    assert cfg.profile("nope") is None


@pytest.mark.parametrize(
    ("body", "expected_names", "expected_weights"),
    [
        pytest.param(
            # Custom and NodePorts are enabled at filter AND by multiPoint: they are "overrides" and come
            # first, in filter's order; the other multiPoint plugins follow.
            """
profiles:
- plugins:
    multiPoint:
      enabled: [{name: Custom, weight: 5}]
    filter:
      enabled: [{name: Custom}, {name: NodePorts}]
    score:
      enabled: [{name: ImageLocality, weight: 7}]
""",
            with_changes(
                filter=[
                    "Custom",
                    "NodePorts",
                    "NodeName",
                    "NodeUnschedulable",
                    "TaintToleration",
                    "NodeAffinity",
                    "NodeResourcesFit",
                    "PodTopologySpread",
                    "InterPodAffinity",
                    "NodeDeclaredFeatures",
                ],
                score=[
                    "ImageLocality",
                    "TaintToleration",
                    "NodeAffinity",
                    "NodeResourcesFit",
                    "PodTopologySpread",
                    "InterPodAffinity",
                    "NodeResourcesBalancedAllocation",
                    "Custom",
                ],
            ),
            {**DEFAULT_WEIGHTS, "ImageLocality": 7, "Custom": 5},
            id="overrides-first",
        ),
        pytest.param(
            # Custom is only at filter (not multiPoint): it runs after the expanded multiPoint plugins.
            """
profiles:
- plugins:
    filter:
      enabled: [{name: Custom}, {name: NodeName}]
""",
            with_changes(
                filter=[
                    "NodeName",
                    "NodeUnschedulable",
                    "TaintToleration",
                    "NodeAffinity",
                    "NodePorts",
                    "NodeResourcesFit",
                    "PodTopologySpread",
                    "InterPodAffinity",
                    "NodeDeclaredFeatures",
                    "Custom",
                ],
            ),
            DEFAULT_WEIGHTS,
            id="specific-only-last",
        ),
        pytest.param(
            # The Score point's entry decides the weight even when unset (0 -> 1): multiPoint's 2 is lost.
            """
profiles:
- plugins:
    score:
      enabled: [{name: NodeAffinity}]
""",
            with_changes(
                score=[
                    "NodeAffinity",
                    "TaintToleration",
                    "NodeResourcesFit",
                    "PodTopologySpread",
                    "InterPodAffinity",
                    "NodeResourcesBalancedAllocation",
                    "ImageLocality",
                ],
            ),
            {**DEFAULT_WEIGHTS, "NodeAffinity": 1},
            id="score-point-weight-wins",
        ),
        pytest.param(
            # Disabling everything in multiPoint leaves only what is enabled there.
            """
profiles:
- plugins:
    multiPoint:
      enabled:
      - name: PrioritySort
      - name: DefaultBinder
      - name: NodeResourcesFit
        weight: 3
      - name: Custom
      disabled:
      - name: "*"
""",
            {
                **{point: [] for point in EXTENSION_POINTS},
                "queueSort": ["PrioritySort"],
                "preFilter": ["NodeResourcesFit"],
                "filter": ["NodeResourcesFit", "Custom"],
                "preScore": ["NodeResourcesFit"],
                "score": ["NodeResourcesFit", "Custom"],
                "bind": ["DefaultBinder"],
            },
            {"NodeResourcesFit": 3, "Custom": 1},
            id="multipoint-disable-all",
        ),
        pytest.param(
            # A multiPoint plugin can be disabled at one point; the weight list follows the score list.
            """
profiles:
- plugins:
    multiPoint:
      enabled: [{name: Custom, weight: 9}]
      disabled: [{name: ImageLocality}]
    score:
      disabled: [{name: Custom}, {name: TaintToleration}]
""",
            with_changes(
                filter=[*DEFAULT_NAMES["filter"], "Custom"],
                score=[
                    "NodeAffinity",
                    "NodeResourcesFit",
                    "PodTopologySpread",
                    "InterPodAffinity",
                    "NodeResourcesBalancedAllocation",
                ],
            ),
            {
                "NodeAffinity": 2,
                "NodeResourcesFit": 1,
                "PodTopologySpread": 2,
                "InterPodAffinity": 2,
                "NodeResourcesBalancedAllocation": 1,
            },
            id="disable-at-one-point",
        ),
        pytest.param(
            # `*` at a point skips expansion there; what is enabled at the point is all that runs.
            """
profiles:
- plugins:
    filter:
      disabled: [{name: "*"}]
      enabled: [{name: Custom}, {name: NodeName}]
    preFilter:
      disabled: [{name: "*"}]
""",
            with_changes(filter=["Custom", "NodeName"], preFilter=[]),
            DEFAULT_WEIGHTS,
            id="point-disable-all",
        ),
    ],
)
def test_resolution(
    body: str, expected_names: dict[str, list[str]], expected_weights: dict[str, int]
) -> None:
    prof = load(body).profiles[0]
    assert names(prof) == expected_names
    assert prof.score_weights == expected_weights
    assert [ref.weight for ref in prof.plugins["score"]] == [expected_weights[n] for n in prof.names("score")]


@given(
    st.sets(st.sampled_from(sorted(set(DEFAULT_WEIGHTS) | {"NodeName", "NodePorts", "DefaultPreemption"})))
)
def test_disabling_defaults_in_multipoint_just_removes_them(disabled: set[str]) -> None:
    items = "".join(f"\n      - name: {name}" for name in sorted(disabled)) or " []"
    body = f"profiles:\n- plugins:\n    multiPoint:\n      disabled:{items}\n"
    prof = load(body).profiles[0]
    assert names(prof) == {
        point: [n for n in plugins if n not in disabled] for point, plugins in DEFAULT_NAMES.items()
    }
    assert prof.score_weights == {n: w for n, w in DEFAULT_WEIGHTS.items() if n not in disabled}


@pytest.mark.parametrize(
    ("gates", "added", "warned"),
    [
        pytest.param("", [], [], id="defaults"),
        # applyFeatureGates: DeferredPodScheduling right before NodeResourcesFit, GangScheduling and the
        # placement plugins appended; KNOWN (a test registry) has none of them: each is dropped with a warning.
        pytest.param(
            "InPlacePodVerticalScalingSchedulerPreemption=true",
            [(7, "DeferredPodScheduling", 0)],
            ["DeferredPodScheduling"],
            id="deferred-pod-scheduling",
        ),
        pytest.param("GenericWorkload=true", [(20, "GangScheduling", 0)], ["GangScheduling"], id="generic-workload"),
        pytest.param(
            "GenericWorkload=true,TopologyAwareWorkloadScheduling=true",
            [(20, "GangScheduling", 0), (21, "TopologyPlacementGenerator", 0), (22, "PodGroupPodsCount", 1)],
            ["GangScheduling", "TopologyPlacementGenerator", "PodGroupPodsCount"],
            id="topology-aware-workload-scheduling",
        ),
    ],
)
def test_default_multipoint_follows_the_installed_feature_gates(
    gates: str, added: list[tuple[int, str, int]], warned: list[str]
) -> None:
    previous = features.install(features.parse(gates))
    try:
        want = list(DEFAULT_MULTIPOINT)
        for index, name, weight in added:
            want.insert(index, PluginRef(name, weight))
        assert list(defaults.default_multipoint()) == want
        cfg = default_config(KNOWN)
    finally:
        features.install(previous)
    not_modelled = [f'plugin "{name}" is not modelled by Outrigger and is ignored' for name in warned]
    assert sorted(w.removeprefix("<defaults>: ") for w in cfg.warnings) == sorted([*DEFAULT_WARNINGS, *not_modelled])
    assert names(cfg.profiles[0]) == DEFAULT_NAMES


# --- pod-group plugin sets (v1.37) ---------------------------------------------------------------

DEFAULT_POD_GROUP = {
    "placementGenerate": [],
    "placementScore": [PluginRef("NodeResourcesFit", 1)],
    # DynamicResources implements it too; KNOWN does not model it.
    "podGroupPostFilter": [PluginRef("DefaultPreemption")],
}


@pytest.mark.parametrize(
    ("body", "expected", "warnings"),
    [
        pytest.param(None, DEFAULT_POD_GROUP, DEFAULT_WARNINGS, id="defaults-by-multipoint-expansion"),
        pytest.param(
            "profiles:\n- plugins:\n    placementScore:\n      enabled: [{name: NodeResourcesFit, weight: 3}]\n"
            "    podGroupPostFilter:\n      disabled: [{name: '*'}]\n",
            {**DEFAULT_POD_GROUP, "placementScore": [PluginRef("NodeResourcesFit", 3)], "podGroupPostFilter": []},
            DEFAULT_WARNINGS,
            id="weight-at-the-point-and-disable-all",
        ),
        pytest.param(
            # DefaultPreemption still runs at postFilter and preEnqueue.
            "profiles:\n- plugins:\n    podGroupPostFilter:\n      disabled: [{name: DefaultPreemption}]\n",
            {**DEFAULT_POD_GROUP, "podGroupPostFilter": []},
            DEFAULT_WARNINGS,
            id="disabled-at-the-point",
        ),
        pytest.param(
            # Registered in kube-scheduler (its feature gate is off by default), not modelled here.
            "profiles:\n- plugins:\n    placementGenerate:\n      enabled: [{name: TopologyPlacementGenerator}]\n",
            DEFAULT_POD_GROUP,
            [
                'scheduler.yaml: profiles[0].plugins.placementGenerate.enabled[0]: plugin "TopologyPlacementGenerator" '
                "is not modelled by Outrigger and is ignored",
                *DEFAULT_WARNINGS,
            ],
            id="unmodelled-placement-generator",
        ),
    ],
)
def test_pod_group_plugin_sets_resolve_as_kube_scheduler(
    body: str | None, expected: dict[str, list[PluginRef]], warnings: list[str]
) -> None:
    cfg = default_config(KNOWN) if body is None else load(body)
    prof = cfg.profiles[0]
    assert prof.pod_group_plugins == expected
    assert [w.removeprefix("<defaults>: ") for w in cfg.warnings] == warnings
    # Nothing of them reaches the points that run.
    assert names(prof) == DEFAULT_NAMES


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            "profiles:\n- plugins:\n    placementScore:\n      enabled: [{name: Custom}]\n",
            'scheduler.yaml: profiles[0].plugins.placementScore.enabled[0]: plugin "Custom" does not extend '
            "placementScore plugin",
            id="not-implemented",
        ),
        pytest.param(
            "profiles:\n- plugins:\n    placementGenerate:\n      enabled: [{name: Foo}]\n",
            'scheduler.yaml: profiles[0].plugins.placementGenerate.enabled[0]: placementGenerate plugin "Foo" '
            "does not exist",
            id="unknown",
        ),
        pytest.param(
            "profiles:\n- plugins:\n    podGroupPostFilter:\n      enabled: [{name: DefaultPreemption}, "
            "{name: DefaultPreemption}]\n",
            'scheduler.yaml: profiles[0].plugins.podGroupPostFilter.enabled[1]: plugin "DefaultPreemption" already '
            'registered as "podGroupPostFilter"',
            id="twice",
        ),
        pytest.param(
            "profiles:\n- plugins:\n    podGroupPostFilter:\n      enabled: [{name: EBSLimits}]\n",
            'scheduler.yaml: profiles[0].plugins.podGroupPostFilter.enabled[0]: Invalid value: "EBSLimits": was '
            'invalid in version "kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is version '
            '"kubescheduler.config.k8s.io/v1")',
            id="removed-plugin",
        ),
        pytest.param(
            "profiles:\n- plugins:\n    placementScore:\n      enable: []\n",
            'scheduler.yaml: unknown field "profiles[0].plugins.placementScore.enable"',
            id="unknown-field",
        ),
    ],
)
def test_pod_group_plugin_sets_refused_as_kube_scheduler(body: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(body)
    assert str(info.value) == message


# --- validation ----------------------------------------------------------------------------------


ERRORS: list[Any] = [
    pytest.param(
        "profiles:\n- schedulerName: x\n- schedulerName: y\n- schedulerName: x\n",
        'scheduler.yaml: profiles[2].schedulerName: Duplicate value: "x"',
        id="duplicate-scheduler-name",
    ),
    pytest.param(
        "profiles:\n- schedulerName: x\n- percentageOfNodesToScore: 10\n",
        "scheduler.yaml: profiles[1].schedulerName: Required value",
        id="scheduler-name-required",
    ),
    pytest.param(
        'profiles:\n- schedulerName: ""\n',
        "scheduler.yaml: profiles[0].schedulerName: Required value",
        id="scheduler-name-empty",
    ),
    pytest.param(
        "percentageOfNodesToScore: 101\n",
        "scheduler.yaml: percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]",
        id="percentage-global",
    ),
    pytest.param(
        "profiles:\n- percentageOfNodesToScore: -1\n",
        "scheduler.yaml: profiles[0].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]",
        id="percentage-profile",
    ),
    pytest.param(
        "podInitialBackoffSeconds: 0\n",
        "scheduler.yaml: podInitialBackoffSeconds: Invalid value: 0: must be greater than 0",
        id="initial-backoff",
    ),
    pytest.param(
        "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 1\n",
        "scheduler.yaml: podMaxBackoffSeconds: Invalid value: 1: "
        "must be greater than or equal to PodInitialBackoffSeconds",
        id="max-backoff",
    ),
    pytest.param(
        "parallelism: 0\n",
        "scheduler.yaml: parallelism: Invalid value: 0: should be an integer value greater than zero",
        id="parallelism",
    ),
    pytest.param(
        "leaderElection:\n  resourceLock: endpoints\n",
        'scheduler.yaml: leaderElection.resourceLock: Invalid value: "endpoints": '
        'resourceLock value must be "leases"',
        id="resource-lock",
    ),
    pytest.param(
        "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    score:\n      enabled:\n"
        "      - name: Foo\n",
        'scheduler.yaml: profiles[1].plugins.score.enabled[0]: score plugin "Foo" does not exist',
        id="unknown-plugin",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: Foo\n",
        'scheduler.yaml: profiles[0].plugins.multiPoint.enabled[0]: multiPoint plugin "Foo" does not exist',
        id="unknown-multipoint-plugin",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: Gang\n",
        'scheduler.yaml: profiles[0].plugins.filter.enabled[0]: plugin "Gang" does not extend filter plugin',
        id="does-not-extend",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: Custom\n      - name: Custom\n",
        "scheduler.yaml: profiles[0].plugins.filter.enabled[1]: "
        'plugin "Custom" already registered as "filter"',
        id="duplicate-at-point",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n"
        "      - name: Custom\n      - name: Custom\n",
        "scheduler.yaml: profiles[0].plugins.multiPoint.enabled[1]: "
        'plugin "Custom" already registered as "filter"',
        id="duplicate-in-multipoint",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: DefaultBinder\n",
        "scheduler.yaml: profiles[0].plugins.bind: "
        'at least one bind plugin is needed for profile with scheduler name "default-scheduler"',
        id="no-bind",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    queueSort:\n      disabled:\n      - name: '*'\n",
        "scheduler.yaml: profiles[0].plugins.queueSort: "
        'only one queue sort plugin required for profile with scheduler name "default-scheduler", but got 0',
        id="no-queue-sort",
    ),
    pytest.param(
        "profiles:\n- schedulerName: s\n  plugins:\n    score:\n      enabled:\n"
        "      - name: Custom\n        weight: 4294967296\n",
        "scheduler.yaml: profiles[0].plugins.score.enabled[0].weight: "
        "Invalid value: 4294967296: must fit in a 32-bit integer",
        id="weight-range",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: Custom\n        weight: high\n",
        "scheduler.yaml: profiles[0].plugins.score.enabled[0].weight: expected an integer, got string",
        id="weight-type",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: NodeAffinity\n  - name: Gang\n  - name: NodeAffinity\n",
        'scheduler.yaml: profiles[0].pluginConfig[2]: Duplicate value: "NodeAffinity"',
        id="duplicate-plugin-config",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: Foo\n    args: {a: 1}\n",
        'scheduler.yaml: profiles[0].pluginConfig[0].name: Invalid value: "Foo": plugin does not exist',
        id="plugin-config-unknown",
    ),
    pytest.param(
        "profiles:\n- pluginConfig:\n  - name: Gang\n    args: [1, 2]\n",
        "scheduler.yaml: profiles[0].pluginConfig[0].args: expected a mapping, got list",
        id="plugin-config-args-type",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: EBSLimits\n",
        'scheduler.yaml: profiles[0].plugins.filter.enabled[0]: Invalid value: "EBSLimits": was invalid in '
        'version "kubescheduler.config.k8s.io/v1" (KubeSchedulerConfiguration is version '
        '"kubescheduler.config.k8s.io/v1")',
        id="removed-plugin",
    ),
    pytest.param(
        "foo: 1\n",
        'scheduler.yaml: unknown field "foo"',
        id="unknown-top-level-field",
    ),
    pytest.param(
        "profiles:\n- schedulerName: a\n  plugin: {}\n",
        'scheduler.yaml: unknown field "profiles[0].plugin"',
        id="unknown-profile-field",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    Filter: {}\n",
        'scheduler.yaml: unknown field "profiles[0].plugins.Filter"',
        id="field-names-are-case-sensitive",
    ),
    pytest.param(
        "leaderElection:\n  leaderElection: true\n",
        'scheduler.yaml: unknown field "leaderElection.leaderElection"',
        id="unknown-leader-election-field",
    ),
    pytest.param(
        "profiles:\n- plugins:\n    filter:\n      enabled:\n      - weight: 1\n",
        "scheduler.yaml: profiles[0].plugins.filter.enabled[0].name: Required value",
        id="plugin-name-required",
    ),
    pytest.param(
        "percentageOfNodesToScore: '50'\n",
        "scheduler.yaml: percentageOfNodesToScore: expected an integer, got string",
        id="wrong-type",
    ),
    pytest.param(
        "profiles: {schedulerName: a}\n",
        "scheduler.yaml: profiles: expected a list, got mapping",
        id="profiles-not-a-list",
    ),
    pytest.param(
        "profiles:\n- schedulerName: a\n  pluginconfig: []\n  plugins:\n    preFilter:\n      enable: []\n"
        "extenders:\n- urlPrefix: http://x\n  managedResources: [{name: a/b, ignoredByScheduler: true, "
        "ignored: true}]\nclientConnection: {kubeconfig: k, QPS: 5}\n",
        'scheduler.yaml: unknown field "profiles[0].pluginconfig"\n'
        'scheduler.yaml: unknown field "profiles[0].plugins.preFilter.enable"\n'
        'scheduler.yaml: unknown field "extenders[0].managedResources[0].ignored"\n'
        'scheduler.yaml: unknown field "clientConnection.QPS"',
        id="unknown-fields-everywhere-all-named",
    ),
    pytest.param(
        "profiles:\n- plugins: {score: []}\n",
        "scheduler.yaml: profiles[0].plugins.score: expected a mapping, got list",
        id="plugin-set-not-a-mapping",
    ),
    pytest.param(
        "percentageOfNodesToScore: 101\npodInitialBackoffSeconds: -1\n",
        "scheduler.yaml: percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]\n"
        "scheduler.yaml: podInitialBackoffSeconds: Invalid value: -1: must be greater than 0",
        id="several-problems-reported-together",
    ),
]


@pytest.mark.parametrize(("body", "message"), ERRORS)
def test_validation_errors(body: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(body)
    assert str(info.value) == message
    assert info.value.source == "scheduler.yaml"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
            'scheduler.yaml: apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v1beta3": '
            'supported values: "kubescheduler.config.k8s.io/v1"',
            id="api-version",
        ),
        pytest.param(
            "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeProxyConfiguration\n",
            'scheduler.yaml: kind: Unsupported value: "KubeProxyConfiguration": '
            'supported values: "KubeSchedulerConfiguration"',
            id="kind",
        ),
        pytest.param(
            "kind: KubeSchedulerConfiguration\n",
            'scheduler.yaml: apiVersion: Required value: must be "kubescheduler.config.k8s.io/v1"',
            id="api-version-missing",
        ),
        pytest.param(
            "# nothing here\n",
            'scheduler.yaml: the file is empty: expected apiVersion "kubescheduler.config.k8s.io/v1" '
            'and kind "KubeSchedulerConfiguration"',
            id="empty",
        ),
        pytest.param("- 1\n- 2\n", "scheduler.yaml: expected a mapping, got list", id="not-a-mapping"),
        pytest.param(
            HEADER + "profiles:\n  - schedulerName: a\n   plugins: {}\n",
            "scheduler.yaml: line 5, column 4: invalid YAML: "
            "while parsing a block collection, did not find expected '-' indicator",
            id="yaml-syntax",
        ),
        pytest.param(
            HEADER + "percentageOfNodesToScore: 10\npercentageOfNodesToScore: 20\n",
            'scheduler.yaml: line 4, column 1: duplicate field "percentageOfNodesToScore"',
            id="duplicate-field",
        ),
        pytest.param(
            HEADER + "---\n" + HEADER,
            "scheduler.yaml: line 3, column 1: invalid YAML: expected a single document in the stream, "
            "but found another document",
            id="two-documents",
        ),
    ],
)
def test_document_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(text, KNOWN, "scheduler.yaml")
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            # Two queue sort plugins after multiPoint expansion (kube-scheduler's NewFramework check).
            "profiles:\n- schedulerName: x\n  plugins:\n    multiPoint:\n"
            "      enabled:\n      - name: FifoSort\n",
            "scheduler.yaml: profiles[0].plugins.queueSort: "
            'only one queue sort plugin required for profile with scheduler name "x", but got 2',
            id="two-after-expansion",
        ),
        pytest.param(
            "profiles:\n- plugins:\n    queueSort:\n      enabled:\n"
            "      - name: FifoSort\n      - name: PrioritySort\n",
            "scheduler.yaml: profiles[0].plugins.queueSort.enabled: Invalid value: 2: "
            "only one queue sort plugin can be enabled",
            id="two-enabled",
        ),
        pytest.param(
            "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    queueSort:\n"
            "      enabled:\n      - name: FifoSort\n      disabled:\n      - name: '*'\n",
            "scheduler.yaml: profiles[1].plugins.queueSort: must be the same for all profiles",
            id="different-queue-sort-set",
        ),
        pytest.param(
            "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    multiPoint:\n"
            "      enabled:\n      - name: FifoSort\n      disabled:\n      - name: PrioritySort\n",
            'scheduler.yaml: profiles[1].plugins.queueSort: different queue sort plugins for profile "b": '
            '"FifoSort", first: "PrioritySort"',
            id="different-resolved-queue-sort",
        ),
        pytest.param(
            "profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: PrioritySort\n    args: {x: 1}\n"
            "- schedulerName: b\n",
            'scheduler.yaml: profiles[1].pluginConfig: different queue sort plugin args for profile "b"',
            id="different-queue-sort-args",
        ),
    ],
)
def test_queue_sort_rules(body: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load(body, KNOWN_FIFO)
    assert str(info.value) == message


def test_default_plugin_missing_from_known() -> None:
    known = {name: points for name, points in KNOWN.items() if name != "ImageLocality"}
    with pytest.raises(ConfigError) as info:
        default_config(known)
    assert str(info.value) == (
        '<defaults>: profiles[0].plugins.multiPoint: multiPoint plugin "ImageLocality" does not exist '
        "(it is a kube-scheduler default: disable it in multiPoint if it is unavailable)"
    )
    # Disabling it is the way out.
    cfg = load("profiles:\n- plugins:\n    multiPoint:\n      disabled: [{name: ImageLocality}]\n", known)
    assert "ImageLocality" not in cfg.profiles[0].names("score")


@pytest.mark.parametrize(
    ("bound", "body", "message"),
    [
        # the defaults' weights sum to 12: 1200 > 1000
        (
            1000,
            None,
            "<defaults>: profiles[0].plugins.score: score plugins: total score of Score plugins could overflow",
        ),
        # Score's 1200 fits under 1300; NodeResourcesFit at placementScore with weight 14 does not
        (
            1300,
            "profiles:\n- plugins:\n    placementScore:\n      enabled: [{name: NodeResourcesFit, weight: 14}]\n",
            "scheduler.yaml: profiles[0].plugins.placementScore.enabled[0]: placement score plugins: total score "
            "of Score plugins could overflow",
        ),
    ],
    ids=["score", "placement-score"],
)
def test_score_overflow_check(monkeypatch: pytest.MonkeyPatch, bound: int, body: str | None, message: str) -> None:
    # Int32 weights cannot reach 2**63 in practice, so shrink the bound to exercise getValidScoreWeights' check.
    monkeypatch.setattr(resolution, "MAX_TOTAL_SCORE", bound)
    with pytest.raises(ConfigError) as info:
        default_config(KNOWN) if body is None else load(body)
    assert str(info.value) == message


def test_bad_known_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="normalizeScore"):
        default_config({**KNOWN, "X": frozenset({"normalizeScore"})})


# --- unmodelled plugins, warnings, extra fields -------------------------------------------------


def test_unmodelled_plugins_are_dropped_with_one_warning_each() -> None:
    cfg = load(
        """
profiles:
- plugins:
    filter:
      enabled: [{name: VolumeBinding}, {name: Custom}]
    preBind:
      enabled: [{name: VolumeBinding}]
  pluginConfig:
  - name: VolumeBinding
    args: {bindTimeoutSeconds: 300}
  - name: DynamicResources
"""
    )
    assert cfg.warnings == [
        'scheduler.yaml: profiles[0].plugins.filter.enabled[0]: plugin "VolumeBinding" is not modelled by '
        "Outrigger and is ignored",
        'scheduler.yaml: profiles[0].pluginConfig[1]: plugin "DynamicResources" is not modelled by Outrigger '
        "and is ignored",
        'plugin "VolumeRestrictions" is not modelled by Outrigger and is ignored',
        'plugin "NodeVolumeLimits" is not modelled by Outrigger and is ignored',
        'plugin "VolumeZone" is not modelled by Outrigger and is ignored',
    ]
    prof = cfg.profiles[0]
    assert prof.names("filter") == [*DEFAULT_NAMES["filter"], "Custom"]
    assert prof.names("preBind") == []
    assert "VolumeBinding" not in prof.plugin_args and "DynamicResources" not in prof.plugin_args


def test_a_known_plugin_is_never_unmodelled() -> None:
    known = {
        **KNOWN,
        "VolumeBinding": frozenset({"preFilter", "filter", "reserve", "preBind", "preScore", "score"}),
    }
    cfg = load(
        "profiles:\n- pluginConfig:\n  - name: VolumeBinding\n    args: {bindTimeoutSeconds: 300}\n", known
    )
    prof = cfg.profiles[0]
    assert prof.names("reserve") == ["VolumeBinding"]
    assert prof.names("preBind") == ["VolumeBinding"]
    assert prof.names("filter").index("VolumeBinding") == prof.names("filter").index("NodeResourcesFit") + 1
    assert prof.score_weights["VolumeBinding"] == 1
    assert prof.plugin_args["VolumeBinding"] == {"bindTimeoutSeconds": 300}
    assert not any("VolumeBinding" in w for w in cfg.warnings)


def test_extra_fields_and_warnings() -> None:
    cfg = load(
        """
parallelism: 32
enableProfiling: false
delayCacheUntilActive: true
healthzBindAddress: 0.0.0.0:10251
extenders:
- urlPrefix: http://127.0.0.1:8888/
  filterVerb: filter
profiles:
- plugins:
    multiPoint:
      enabled: [{name: Custom, weight: 100}]
"""
    )
    assert cfg.extra == {
        "parallelism": 32,
        "enableProfiling": False,
        "delayCacheUntilActive": True,
        "healthzBindAddress": "0.0.0.0:10251",
        "extenders": [{"urlPrefix": "http://127.0.0.1:8888/", "filterVerb": "filter"}],
    }
    assert cfg.warnings == [
        "scheduler.yaml: extenders: scheduler extenders are not supported by Outrigger and are ignored",
        "scheduler.yaml: healthzBindAddress: this field was removed from KubeSchedulerConfiguration in "
        "v1beta3 (kube-scheduler rejects it in v1); Outrigger ignores it",
        *DEFAULT_WARNINGS,
    ]
    assert cfg.profiles[0].score_weights["Custom"] == 100


def test_score_weights_within_range_and_zero_as_unset_load() -> None:
    prof = load(
        "profiles:\n- plugins:\n    score:\n      enabled:\n      - {name: Custom, weight: 1}\n"
        "      - {name: ImageLocality, weight: 100}\n      - {name: NodeAffinity, weight: 0}\n"
    ).profiles[0]
    assert (prof.score_weights["Custom"], prof.score_weights["ImageLocality"], prof.score_weights["NodeAffinity"]) == (
        1, 100, 1)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            "profiles:\n- pluginConfig:\n  - name: InterPodAffinity\n  - name: DefaultPreemption\n"
            "  - name: NodeResourcesFit\n    args: {scoringStrategyy: {}}\n",
            "scheduler.yaml: profiles[0] (default-scheduler): pluginConfig[2] (NodeResourcesFit): unknown field "
            "'scoringStrategyy' (known fields: ignoredResources, ignoredResourceGroups, scoringStrategy)",
            id="unknown-args-field",
        ),
        pytest.param(
            "profiles:\n- schedulerName: a\n- schedulerName: b\n  pluginConfig:\n  - name: InterPodAffinity\n"
            "    args: {hardPodAffinityWeight: 500}\n",
            "scheduler.yaml: profiles[1] (b): pluginConfig[0] (InterPodAffinity): hardPodAffinityWeight: Invalid "
            "value: 500: not in valid range [0-100]",
            id="second-profile",
        ),
        pytest.param(
            "profiles:\n- pluginConfig:\n  - name: DefaultPreemption\n    args: {minCandidateNodesPercentage: 200}\n",
            "scheduler.yaml: profiles[0] (default-scheduler): pluginConfig[0] (DefaultPreemption): "
            "minCandidateNodesPercentage: Invalid value: 200: not in valid range [0, 100]",
            id="out-of-range",
        ),
    ],
)
def test_plugin_args_errors_name_the_file_profile_and_plugin(body: str, message: str) -> None:
    from framework.plugins import PluginArgsError, in_tree_registry
    from framework.scheduler import Scheduler

    registry = in_tree_registry()
    cfg = load_config(HEADER + body, registry.points(), "scheduler.yaml")
    with pytest.raises(PluginArgsError) as err:
        Scheduler(cfg, registry, seed=1)
    assert str(err.value) == message


def test_plugin_args_location_without_a_plugin_config_entry() -> None:
    prof = load("profiles:\n- schedulerName: a\n  pluginConfig:\n  - name: Gang\n").profiles[0]
    assert prof.args_location("Gang") == "scheduler.yaml: profiles[0] (a): pluginConfig[0] (Gang)"
    assert prof.args_location("NodeName") == "scheduler.yaml: profiles[0] (a): plugin NodeName"
    assert default_config(KNOWN).profiles[0].args_location("NodeName") == (
        "<defaults>: profiles[0] (default-scheduler): plugin NodeName")


def test_plugin_args_by_plugin() -> None:
    prof = load(
        """
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: cpu, weight: 2}, {name: memory, weight: 1}]
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
  - name: Gang
  - name: PodTopologySpread
    args: null
"""
    ).profiles[0]
    assert prof.plugin_args["NodeResourcesFit"] == {
        "scoringStrategy": {
            "type": "RequestedToCapacityRatio",
            "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}],
            "requestedToCapacityRatio": {
                "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
            },
        }
    }
    # Configured but not enabled, configured without args, and enabled without config: all present.
    assert prof.plugin_args["Gang"] == {}
    assert prof.plugin_args["PodTopologySpread"] == {}
    assert prof.plugin_args["NodeName"] == {}
    assert set(prof.plugin_args) == set(KNOWN) - {"Custom"}


# --- real-world files ----------------------------------------------------------------------------

# Shaped like the examples on the Kubernetes "Scheduler Configuration" page.
DOCS_EXAMPLE = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /etc/srv/kubernetes/kube-scheduler/kubeconfig
  qps: 100
  burst: 200
leaderElection:
  leaderElect: true
  leaseDuration: 15s
  renewDeadline: 10s
  retryPeriod: 2s
  resourceLock: leases
  resourceName: kube-scheduler
  resourceNamespace: kube-system
profiles:
  - schedulerName: default-scheduler
  - schedulerName: no-scoring-scheduler
    plugins:
      preScore:
        disabled:
        - name: '*'
      score:
        disabled:
        - name: '*'
  - schedulerName: multipoint-scheduler
    plugins:
      multiPoint:
        enabled:
        - name: Custom
          weight: 3
        disabled:
        - name: NodeResourcesBalancedAllocation
      filter:
        disabled:
        - name: Custom
    pluginConfig:
      - name: NodeAffinity
        args:
          addedAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
              - matchExpressions:
                - key: scheduler-profile
                  operator: In
                  values:
                  - foo
"""


def test_docs_example_loads_unchanged() -> None:
    cfg = load_config(DOCS_EXAMPLE, KNOWN, "scheduler.yaml")
    assert [p.scheduler_name for p in cfg.profiles] == [
        "default-scheduler",
        "no-scoring-scheduler",
        "multipoint-scheduler",
    ]
    assert names(cfg.profiles[0]) == DEFAULT_NAMES
    assert names(cfg.profiles[1]) == with_changes(preScore=[], score=[])
    assert cfg.profiles[1].score_weights == {}
    multi = cfg.profiles[2]
    assert names(multi) == with_changes(
        preScore=DEFAULT_NAMES["preScore"][:-1],
        score=[
            "TaintToleration",
            "NodeAffinity",
            "NodeResourcesFit",
            "PodTopologySpread",
            "InterPodAffinity",
            "ImageLocality",
            "Custom",
        ],
    )
    assert multi.score_weights["Custom"] == 3
    assert multi.plugin_args["NodeAffinity"]["addedAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert cfg.extra["leaderElection"]["resourceNamespace"] == "kube-system"
    assert cfg.extra["clientConnection"] == {
        "kubeconfig": "/etc/srv/kubernetes/kube-scheduler/kubeconfig",
        "qps": 100,
        "burst": 200,
    }
    assert cfg.warnings == DEFAULT_WARNINGS


def test_json_loads_like_yaml() -> None:
    doc = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {"schedulerName": "a", "plugins": {"multiPoint": {"enabled": [{"name": "Custom", "weight": 5}]}}},
            {"schedulerName": "b"},
        ],
    }
    from_json = load_config(json.dumps(doc, indent=2), KNOWN)
    from_yaml = load(
        "profiles:\n- schedulerName: a\n  plugins:\n    multiPoint:\n      enabled:\n"
        "      - {name: Custom, weight: 5}\n- schedulerName: b\n"
    )
    assert from_json.profiles == from_yaml.profiles


def test_load_config_file(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.yaml"
    path.write_text(DOCS_EXAMPLE, encoding="utf-8")
    assert load_config_file(path, KNOWN) == load_config(DOCS_EXAMPLE, KNOWN, str(path))

    path.write_text(HEADER + "profiles:\n- schedulerName: x\n- schedulerName: x\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config_file(str(path), KNOWN)
    assert str(info.value) == f'{path}: profiles[1].schedulerName: Duplicate value: "x"'

    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config_file(tmp_path / "missing.yaml", KNOWN)


@pytest.mark.parametrize(
    ("plugins", "weights", "warnings"),
    [
        pytest.param("score: {enabled: [{name: Custom, weight: 101}]}", {"Custom": 101}, [], id="above-100"),
        pytest.param("multiPoint: {enabled: [{name: Custom, weight: 1000}]}", {"Custom": 1000}, [],
                     id="multipoint-1000"),
        pytest.param("score: {enabled: [{name: Custom, weight: 0}]}", {"Custom": 1}, [], id="zero-means-one"),
        pytest.param("score: {enabled: [{name: Custom, weight: -5}]}", {"Custom": -5},
                     ['scheduler.yaml: profiles[0].plugins.score.enabled[0].weight: negative weight -5 inverts the '
                      'preference of plugin "Custom"'], id="negative-warns"),
    ],
)  # fmt: skip
def test_score_weights_load_as_kube_scheduler_loads_them(plugins: str, weights: dict[str, int],
                                                        warnings: list[str]) -> None:
    """kube-scheduler v1.35 puts no range on a score plugin's weight (only a total that could overflow
    is refused, tested above), so a configuration it loads loads here unchanged."""
    cfg = load_config(HEADER + f"profiles:\n- plugins:\n    {plugins}\n", KNOWN, "scheduler.yaml")
    assert {name: cfg.profiles[0].score_weights[name] for name in weights} == weights
    assert [w for w in cfg.warnings if "negative weight" in w] == warnings
