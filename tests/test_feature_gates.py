"""``--feature-gates``: kube-scheduler v1.37.2's gates, defaults, locks and dependencies
(framework/features.py), its messages for what it refuses, the read-only gates the framework asks, what
``outrigger serve`` shows of them (stderr, ``/configz``), and the table checked against the real
kube-scheduler v1.37.2 binary (its ``--help`` and its answer to the same flags)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from framework import features
from framework.features import KNOWN, SCHEDULING, FeatureGateError, FeatureGates, parse
from tools.localcluster import BUILD_SCRIPT, RELEASE_ENV, free_ports

ROOT = Path(__file__).resolve().parent.parent


# ---- parsing, as component-base's featureGate.Set --------------------------------------------------------


@pytest.mark.parametrize(("value", "message"), [
    ("DynamicResourceAllocation=false",
     "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"),
    ("NodeDeclaredFeatures=0", "cannot set feature gate NodeDeclaredFeatures to false, feature is locked to true"),
    ("Foo=true", "unrecognized feature gate: Foo"),
    ("nodedeclaredfeatures=true", "unrecognized feature gate: nodedeclaredfeatures"),
    ("GangScheduling=true", "unrecognized feature gate: GangScheduling"),  # removed in 1.37
    ("SchedulerQueueingHints=true", "unrecognized feature gate: SchedulerQueueingHints"),  # removed in 1.37
    ("NodeDeclaredFeatures", "missing bool value for NodeDeclaredFeatures"),
    ("A=true, B", "missing bool value for B"),
    ("Foo=true,Bar", "missing bool value for Bar"),  # every pair is read before any name is looked up
    ("GenericWorkload=yes", 'invalid value of GenericWorkload=yes, err: strconv.ParseBool: parsing "yes": '
                            "invalid syntax"),
    ("GenericWorkload=", 'invalid value of GenericWorkload=, err: strconv.ParseBool: parsing "": invalid syntax'),
    ('X="1"', 'invalid value of X="1", err: strconv.ParseBool: parsing "\\"1\\"": invalid syntax'),
    ("TopologyAwareWorkloadScheduling=true",
     "TopologyAwareWorkloadScheduling is enabled, but depends on features that are disabled: [GenericWorkload]"),
    ("CompositePodGroup=true", "CompositePodGroup is enabled, but depends on features that are disabled: "
                               "[GenericWorkload TopologyAwareWorkloadScheduling]"),
    ("PodLevelResources=false",  # three gates on by default need it
     "[InPlacePodLevelResourcesVerticalScaling is enabled, but depends on features that are disabled: "
     "[PodLevelResources], PodLevelResourcesFixDefaulting is enabled, but depends on features that are disabled: "
     "[PodLevelResources], PodLevelResourcesFixKubeletQOSClass is enabled, but depends on features that are "
     "disabled: [PodLevelResources]]"),
    ("DRAConsumableCapacity=false,DRAFractionalCapacityRange=true",
     "DRAFractionalCapacityRange is enabled, but depends on features that are disabled: [DRAConsumableCapacity]"),
    ("DynamicResourceAllocation=false,ImageVolume=false",
     "[cannot set feature gate DynamicResourceAllocation to false, feature is locked to true, "
     "cannot set feature gate ImageVolume to false, feature is locked to true]"),
    ("CompositePodGroup=true,WorkloadWithJob=true",
     "[CompositePodGroup is enabled, but depends on features that are disabled: [GenericWorkload "
     "TopologyAwareWorkloadScheduling], WorkloadWithJob is enabled, but depends on features that are disabled: "
     "[GenericWorkload]]"),
])
def test_a_value_kube_scheduler_refuses_is_refused_with_its_message(value: str, message: str) -> None:
    with pytest.raises(FeatureGateError) as err:
        parse(value)
    assert str(err.value) == message
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize(("values", "want"), [
    (None, {"GenericWorkload": False, "OpportunisticBatching": True, "NodeDeclaredFeatures": True,
            "DRAPartitionableDevices": True, "TopologyAwareWorkloadScheduling": False}),
    ("", {"GenericWorkload": False, "OpportunisticBatching": True}),
    ("GenericWorkload=true", {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": False}),
    (" GenericWorkload = T , TopologyAwareWorkloadScheduling=1,,",
     {"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True}),
    ("OpportunisticBatching=FALSE,DynamicResourceAllocation=true,NodeDeclaredFeatures=True",
     {"OpportunisticBatching": False, "DynamicResourceAllocation": True, "NodeDeclaredFeatures": True}),
    (["GenericWorkload=true", "GenericWorkload=false"], {"GenericWorkload": False}),  # the flag given twice
    ("OpportunisticBatching=false,OpportunisticBatching=true", {"OpportunisticBatching": True}),
    ("AllBeta=false", {"OpportunisticBatching": False, "DRAPartitionableDevices": False,
                       "DRASchedulerFilterTimeout": False, "DynamicResourceAllocation": True}),
    ("AllBeta=false,OpportunisticBatching=true", {"OpportunisticBatching": True, "SchedulerPopFromBackoffQ": False}),
    ("PodLevelResources=false,InPlacePodLevelResourcesVerticalScaling=false,PodLevelResourcesFixDefaulting=false,"
     "PodLevelResourcesFixKubeletQOSClass=false", {"PodLevelResources": False}),  # with the gates that need it
    ("AllAlpha=true,GenericWorkload=true", {"TopologyAwareWorkloadScheduling": True, "GenericWorkload": True,
                                            "InterPodAffinityHostnameFastPath": True}),
])
def test_accepted_values_give_the_releases_defaults_with_what_was_set(values: str | list[str] | None,
                                                                      want: dict[str, bool]) -> None:
    gates = parse(values)
    assert {name: gates.enabled(name) for name in want} == want


def test_all_alpha_alone_is_refused_as_kube_scheduler_refuses_it() -> None:
    # It turns on the pod-group gates, which need GenericWorkload, a beta gate it leaves off.
    with pytest.raises(FeatureGateError) as err:
        parse("AllAlpha=true")
    assert str(err.value) == (
        "[CompositePodGroup is enabled, but depends on features that are disabled: [GenericWorkload], "
        "PodGroupPreemptionPolicy is enabled, but depends on features that are disabled: [GenericWorkload], "
        "TopologyAwareWorkloadScheduling is enabled, but depends on features that are disabled: "
        "[GenericWorkload], WorkloadWithJob is enabled, but depends on features that are disabled: "
        "[GenericWorkload]]")


def test_the_table_is_1_37s_for_the_gates_that_change_scheduling() -> None:
    assert (features.RELEASE, features.VERSION, len(KNOWN)) == ("1.37", "v1.37.2", 253)
    spec = {name: (KNOWN[name].default, KNOWN[name].locked, KNOWN[name].stability) for name in (
        "DynamicResourceAllocation", "DRAExtendedResource", "DRADeviceTaints", "DRAPartitionableDevices",
        "DRAWorkloadResourceClaims", "NodeDeclaredFeatures", "GenericWorkload", "TopologyAwareWorkloadScheduling",
        "OpportunisticBatching", "SchedulerAsyncAPICalls", "StorageCapacityScoring", "ImageVolume")}
    assert spec == {
        "DynamicResourceAllocation": (True, True, "GA"), "DRAExtendedResource": (True, True, "GA"),
        "DRADeviceTaints": (True, False, "GA"), "DRAPartitionableDevices": (True, False, "BETA"),
        "DRAWorkloadResourceClaims": (False, False, "BETA"), "NodeDeclaredFeatures": (True, True, "GA"),
        "GenericWorkload": (False, False, "BETA"), "TopologyAwareWorkloadScheduling": (False, False, "ALPHA"),
        "OpportunisticBatching": (True, False, "BETA"), "SchedulerAsyncAPICalls": (False, False, "BETA"),
        "StorageCapacityScoring": (True, False, "BETA"), "ImageVolume": (True, True, "GA")}
    assert KNOWN["DRAWorkloadResourceClaims"].dependencies == ("DynamicResourceAllocation", "GenericWorkload")
    assert set(KNOWN) >= SCHEDULING and len(SCHEDULING) == 44


# ---- the gates the framework asks -------------------------------------------------------------------------


def test_the_gates_are_read_only_and_an_unknown_name_is_a_programming_error() -> None:
    gates = parse("GenericWorkload=true")
    with pytest.raises(TypeError):
        gates.explicit["GenericWorkload"] = False  # type: ignore[index]
    with pytest.raises(AttributeError):
        gates.other = 1  # type: ignore[attr-defined]
    with pytest.raises(FeatureGateError) as err:
        gates.enabled("GangScheduling")
    assert str(err.value) == "feature 'GangScheduling' is not registered in FeatureGate"
    assert gates == parse("GenericWorkload=1") != parse(None) and hash(gates) == hash(parse("GenericWorkload=t"))
    assert dict(gates.explicit) == {"GenericWorkload": True}
    with pytest.raises(FeatureGateError, match=r"^unrecognized feature gate: Foo$"):
        FeatureGates({"Foo": True})
    with pytest.raises(FeatureGateError, match=r"^cannot set feature gate ImageVolume to false, feature is locked"):
        FeatureGates({"ImageVolume": False})


@pytest.fixture
def installed() -> Iterator[None]:
    previous = features.current()
    try:
        yield
    finally:
        features.install(previous)


def test_install_makes_the_gates_the_ones_enabled_answers_from(installed: None) -> None:
    assert features.current() == FeatureGates() and features.enabled("OpportunisticBatching") is True
    mine = parse("OpportunisticBatching=false")
    assert features.install(mine) == FeatureGates()
    assert features.current() is mine and features.enabled("OpportunisticBatching") is False


def test_the_shown_gates_are_the_scheduling_ones_and_those_set() -> None:
    gates = parse("ContextualLogging=false,OpportunisticBatching=false")
    shown = gates.scheduling()
    assert sorted(shown) == sorted(SCHEDULING | {"ContextualLogging"})
    assert (shown["ContextualLogging"], shown["OpportunisticBatching"], shown["NodeDeclaredFeatures"]) == (
        False, False, True)
    assert str(gates).startswith("CompositePodGroup=false,ContextualLogging=false,DRAAdminAccess=true,")
    assert features.notes(gates) == [
        "feature gate ContextualLogging does not change scheduling: Outrigger accepts it and does nothing with it"]
    assert features.notes(parse("DRAPrioritizedList=true,KMSv1=false")) == [
        "Warning: setting GA feature gate DRAPrioritizedList=true. It will be removed in a future release.",
        "Warning: setting deprecated feature gate KMSv1=false. It will be removed in a future release.",
        "feature gate KMSv1 does not change scheduling: Outrigger accepts it and does nothing with it"]


# ---- outrigger serve --------------------------------------------------------------------------------------


def _outrigger(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "framework.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize(("flags", "message"), [
    (["--feature-gates", "DynamicResourceAllocation=false"],
     "cannot set feature gate DynamicResourceAllocation to false, feature is locked to true"),
    (["--feature-gates", "GenericWorkload=true", "--feature-gates", "Nope=true"], "unrecognized feature gate: Nope"),
])
def test_serve_refuses_bad_gates_before_it_starts_anything(flags: list[str], message: str) -> None:
    port = free_ports(1)[0]
    out = _outrigger("serve", "--listen", f"127.0.0.1:{port}", *flags)
    assert (out.returncode, out.stdout, out.stderr) == (1, "", f"error: --feature-gates: {message}\n")


def test_serve_shows_the_effective_gates_at_startup_and_in_configz() -> None:
    grpc_port, http_port = free_ports(2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "framework.cli", "serve", "--listen", f"127.0.0.1:{grpc_port}",
         "--http", f"127.0.0.1:{http_port}", "--feature-gates", "GenericWorkload=true",
         "--feature-gates", "TopologyAwareWorkloadScheduling=true,OpportunisticBatching=false"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        ready = proc.stdout.readline()  # the ready line, once it serves (bounded by the timeout below)
        assert ready.startswith(f"outrigger: serving the Scheduler API on 127.0.0.1:{grpc_port}"), ready
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/configz", timeout=10) as response:
            doc = json.load(response)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert list(doc) == ["componentconfig", "featureGates"]
    want = parse("GenericWorkload=true,TopologyAwareWorkloadScheduling=true,OpportunisticBatching=false")
    assert doc["featureGates"] == want.scheduling()
    assert (doc["featureGates"]["GenericWorkload"], doc["featureGates"]["OpportunisticBatching"]) == (True, False)
    assert err.splitlines()[0] == f"outrigger: feature gates (v1.37.2): {want}"


# ---- against the real kube-scheduler v1.37.2 ------------------------------------------------------------


@pytest.fixture(scope="module")
def kube_scheduler() -> Path:
    """kube-scheduler of the release the table is generated from (tests/k8s/build.sh builds that release
    when its kube-scheduler is missing)."""
    env = {**os.environ, RELEASE_ENV: features.RELEASE}
    env.pop("OUTRIGGER_K8S_BIN", None)
    folder = subprocess.run(["bash", str(BUILD_SCRIPT), "--print-dir"], capture_output=True, text=True, env=env,
                            timeout=30).stdout.strip()
    binary = Path(folder) / "kube-scheduler"
    if not binary.is_file():
        out = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, env=env,
                             timeout=3 * 3600)
        assert out.returncode == 0, out.stderr[-3000:]
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=30).stdout
    assert version.strip() == f"Kubernetes {features.VERSION}"
    return binary


_FAILED = re.compile(r'"command failed" err="((?:[^"\\]|\\.)*)"')


def _kube_answer(binary: Path, value: str) -> str | None:
    """kube-scheduler's error for ``--feature-gates=value``, or None when it took the gates (it then fails
    later, at the kubeconfig that does not exist, having started nothing)."""
    out = subprocess.run([str(binary), f"--feature-gates={value}", "--kubeconfig=/nonexistent/kubeconfig",
                          "--secure-port=0"], capture_output=True, text=True, timeout=60)
    found = _FAILED.search(out.stderr)
    assert out.returncode != 0 and found, out.stderr[-2000:]
    message: str = json.loads(f'"{found[1]}"')
    return None if "/nonexistent/kubeconfig" in message else message


def _our_answer(value: str) -> str | None:
    try:
        parse(value)
    except FeatureGateError as exc:
        return str(exc)
    return None


def _unordered(message: str | None) -> str | list[str] | None:
    """An aggregate of several errors as their sorted list (kube-scheduler's order varies run to run)."""
    if message is None or not message.startswith("["):
        return message
    return sorted(re.split(r", (?=cannot set feature gate |\w+ is enabled, but depends)", message[1:-1]))


def test_every_alpha_and_beta_gate_kube_scheduler_lists_is_in_the_table(kube_scheduler: Path) -> None:
    text = subprocess.run([str(kube_scheduler), "--help"], capture_output=True, text=True, timeout=60).stdout
    # A gate whose default moves with --min-compatibility-version is listed twice; the table has the default
    # at kube-scheduler's default compatibility version, the first.
    listed = {m[1]: (m[2], m[3] == "true") for m in re.finditer(
        r"\b(\w+)=true\|false \((ALPHA|BETA) - default=(true|false)\)(?! if --min-compatibility-version)", text)}
    ours = {name: (spec.stability, spec.default) for name, spec in KNOWN.items()
            if spec.stability in ("ALPHA", "BETA")}
    assert len(listed) > 150 and listed == ours


def test_kube_scheduler_and_outrigger_answer_the_same_to_each_scheduling_gate_flipped(kube_scheduler: Path) -> None:
    # Each gate that changes scheduling set to the value it does not have by default, and some more.
    values = [f"{name}={str(not KNOWN[name].default).lower()}" for name in sorted(SCHEDULING)]
    values += ["Foo=true", "GenericWorkload", "GenericWorkload=yes", "AllBeta=false", "DRAConsumableCapacity=false",
               "GenericWorkload=true,TopologyAwareWorkloadScheduling=true,CompositePodGroup=true"]
    with ThreadPoolExecutor(max_workers=4) as pool:
        theirs = list(pool.map(lambda v: _kube_answer(kube_scheduler, v), values))
    assert {v: _unordered(_our_answer(v)) for v in values} == {
        v: _unordered(t) for v, t in zip(values, theirs, strict=True)}
