"""Feature gates, as kube-scheduler's ``--feature-gates`` (``Name=true,Other=false``), with the defaults,
locks and dependencies of the release Outrigger follows (:data:`RELEASE`, the table in
:mod:`framework.featuregates_data`, generated from that release's code).

:func:`parse` reads the flag's value into a :class:`FeatureGates`, an immutable object; a value
kube-scheduler refuses is refused with its message (:class:`FeatureGateError`). ``outrigger serve``
installs the one it parsed for the whole process (:func:`install`); the framework asks :func:`enabled`
(``features.enabled("NodeDeclaredFeatures")``), which answers from the installed gates, or the release's
defaults when none were installed. Every gate kube-scheduler knows is accepted; :data:`SCHEDULING` names
those that change scheduling, the ones ``/configz`` and the startup log show with their effective value
and the ones Outrigger may act on. Setting another gate is accepted and said to change nothing here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from pluginhost.errors import OutriggerError

from .featuregates_data import DEPENDENCIES, GATES, RELEASE, VERSION

__all__ = ["KNOWN", "RELEASE", "SCHEDULING", "VERSION", "FeatureGateError", "FeatureGates", "FeatureSpec",
           "current", "enabled", "install", "notes", "parse"]

class FeatureGateError(OutriggerError, ValueError):
    """A ``--feature-gates`` value kube-scheduler refuses: malformed, unknown, locked or a dependency off."""


@dataclass(frozen=True, slots=True)
class FeatureSpec:
    """One gate: its default, whether that default is locked, its stability and what it needs on."""

    name: str
    default: bool
    locked: bool
    stability: str  # ALPHA, BETA, GA or DEPRECATED
    dependencies: tuple[str, ...] = ()


#: Every gate kube-scheduler registers at :data:`RELEASE`, by name.
KNOWN: Mapping[str, FeatureSpec] = MappingProxyType({
    name: FeatureSpec(name, default, locked, stability, DEPENDENCIES.get(name, ()))
    for name, default, locked, stability in GATES
})

#: The gates that change what kube-scheduler schedules, queues or writes (docs/upstream-1.37.md §1).
SCHEDULING: frozenset[str] = frozenset({
    # Dynamic resource allocation
    "DynamicResourceAllocation", "DRAAdminAccess", "DRAConsumableCapacity", "DRADerivedAttributes",
    "DRADeviceBindingConditions", "DRADeviceCompatibilityGroups", "DRADeviceTaintRules", "DRADeviceTaints",
    "DRAExtendedResource", "DRAFractionalCapacityRange", "DRAListTypeAttributes", "DRANodeAllocatableResources",
    "DRAOptionalNodeOperations", "DRAPartitionableDevices", "DRAPartitionableDevicesType", "DRAPrioritizedList",
    "DRAResourceClaimDeviceStatus", "DRAResourcePoolStatus", "DRASchedulerFilterTimeout",
    "DRAWorkloadResourceClaims",
    # Workloads and pod groups
    "GenericWorkload", "TopologyAwareWorkloadScheduling", "CompositePodGroup", "PodGroupPreemptionPolicy",
    "WorkloadWithJob",
    # The scheduler's own machinery
    "OpportunisticBatching", "SchedulerAsyncAPICalls", "SchedulerAsyncPreemption", "SchedulerPopFromBackoffQ",
    "SchedulerPreQueueingHints", "NominatedNodeNameForExpectation",
    # What plugins read
    "NodeDeclaredFeatures", "PodLevelResources", "InPlacePodVerticalScaling",
    "InPlacePodLevelResourcesVerticalScaling", "InPlacePodVerticalScalingSchedulerPreemption",
    "InterPodAffinityHostnameFastPath", "TaintTolerationComparisonOperators", "StorageCapacityScoring",
    "VolumeLimitScaling", "ImageVolume", "MatchLabelKeysInPodAffinity", "MatchLabelKeysInPodTopologySpread",
    "NodeInclusionPolicyInPodTopologySpread",
})

_ALL = {"AllAlpha": "ALPHA", "AllBeta": "BETA"}  # kube's special gates: every unset gate of that stability
_TRUE = ("1", "t", "T", "TRUE", "true", "True")  # Go's strconv.ParseBool
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


class FeatureGates:
    """The effective gates: the release's defaults with what ``--feature-gates`` set. Read-only."""

    __slots__ = ("_explicit", "_values")

    def __init__(self, explicit: Mapping[str, bool] | None = None) -> None:
        """``explicit``: gate -> value; an unknown or locked gate raises :class:`FeatureGateError`
        (:func:`parse` makes one from the flag and also checks the dependencies)."""
        explicit = _checked(explicit or {})
        values = {name: spec.default for name, spec in KNOWN.items() if name not in _ALL}
        for special, stability in _ALL.items():
            if special in explicit:  # fills the gates of its stability that were not set by name
                for name, spec in KNOWN.items():
                    if spec.stability == stability and name not in explicit and name not in _ALL:
                        values[name] = explicit[special]
        values.update((k, v) for k, v in explicit.items() if k not in _ALL)
        self._explicit: Mapping[str, bool] = MappingProxyType(explicit)
        self._values: Mapping[str, bool] = MappingProxyType(values)

    def enabled(self, name: str) -> bool:
        """Whether gate ``name`` is on. A name kube-scheduler does not register is a programming error."""
        try:
            return self._values[name]
        except KeyError:
            raise FeatureGateError(f"feature {name!r} is not registered in FeatureGate") from None

    @property
    def explicit(self) -> Mapping[str, bool]:
        """What the flag set, by name (``AllAlpha``/``AllBeta`` included as given)."""
        return self._explicit

    def scheduling(self) -> dict[str, bool]:
        """The effective value of every gate that changes scheduling, and of every gate set, by name."""
        names = sorted(SCHEDULING | {n for n in self._explicit if n not in _ALL})
        return {name: self._values[name] for name in names}

    def __str__(self) -> str:
        """The :meth:`scheduling` gates as the flag writes them: ``A=true,B=false``, sorted."""
        return ",".join(f"{k}={str(v).lower()}" for k, v in self.scheduling().items())

    def __repr__(self) -> str:
        return f"FeatureGates({dict(self._explicit)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FeatureGates) and self._values == other._values

    def __hash__(self) -> int:
        return hash(frozenset(self._values.items()))


def _go_quote(text: str) -> str:
    """``text`` as Go's ``%q`` prints it (the quoting of strconv.ParseBool's error)."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
        elif not ch.isprintable():
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x80 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _pairs(value: str) -> dict[str, bool]:
    """One flag value's ``key=bool`` pairs, as component-base's ``Set`` splits and parses them."""
    pairs: dict[str, bool] = {}
    for item in value.split(","):
        if not item:
            continue
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep:
            raise FeatureGateError(f"missing bool value for {key}")
        raw = raw.strip()
        if raw not in _TRUE and raw not in _FALSE:
            raise FeatureGateError(
                f"invalid value of {key}={raw}, err: strconv.ParseBool: parsing {_go_quote(raw)}: invalid syntax")
        pairs[key] = raw in _TRUE
    return pairs


def _checked(requested: Mapping[str, bool]) -> dict[str, bool]:
    """``requested`` where every gate is known and not locked to the other value."""
    errors: list[str] = []
    for key, value in requested.items():
        spec = KNOWN.get(key)
        if spec is None:  # kube-scheduler stops at the first unknown gate
            raise FeatureGateError(f"unrecognized feature gate: {key}")
        if spec.locked and spec.default != value:
            errors.append(f"cannot set feature gate {key} to {str(value).lower()}, "
                          f"feature is locked to {str(spec.default).lower()}")
    if errors:
        raise FeatureGateError(_aggregate(errors))
    return dict(requested)


def _aggregate(errors: list[str]) -> str:
    """apimachinery's aggregate error text: the one message, or ``[a, b]``."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def parse(values: str | Iterable[str] | None) -> FeatureGates:
    """The gates one or more ``--feature-gates`` values set (later values win, as the flag repeated does).

    Raises :class:`FeatureGateError` with kube-scheduler's message for a pair without ``=``, a value that
    is not a bool, an unknown gate, a locked gate set to the other value, or a gate on whose dependencies
    are off (each in turn, as kube-scheduler checks them; several locked gates or dependencies together
    are listed in the order given, where kube-scheduler's order varies run to run).
    """
    if values is None:
        return FeatureGates()
    requested: dict[str, bool] = {}
    for value in [values] if isinstance(values, str) else values:
        requested.update(_pairs(value))
    gates = FeatureGates(requested)
    missing = []
    for name, spec in KNOWN.items():
        if spec.dependencies and name not in _ALL and gates.enabled(name):
            off = [d for d in spec.dependencies if not gates.enabled(d)]
            if off:
                missing.append(f"{name} is enabled, but depends on features that are disabled: [{' '.join(off)}]")
    if missing:
        raise FeatureGateError(_aggregate(missing))
    return gates


def notes(gates: FeatureGates) -> list[str]:
    """What ``outrigger serve`` logs about the gates set: GA and deprecated ones (as kube-scheduler warns),
    and those that change nothing Outrigger does."""
    out = []
    for name, value in gates.explicit.items():
        spec = KNOWN[name]
        if spec.stability in ("GA", "DEPRECATED"):
            word = "GA" if spec.stability == "GA" else "deprecated"
            out.append(f"Warning: setting {word} feature gate {name}={str(value).lower()}. "
                       "It will be removed in a future release.")
        if name not in SCHEDULING and name not in _ALL:
            out.append(f"feature gate {name} does not change scheduling: Outrigger accepts it and does nothing with it")
    return out


_installed = FeatureGates()


def install(gates: FeatureGates) -> FeatureGates:
    """Makes ``gates`` the ones :func:`enabled` answers from, for the whole process; returns the previous."""
    global _installed
    previous, _installed = _installed, gates
    return previous


def current() -> FeatureGates:
    """The installed gates (the release's defaults until :func:`install`)."""
    return _installed


def enabled(name: str) -> bool:
    """Whether gate ``name`` is on in the installed gates."""
    return _installed.enabled(name)
