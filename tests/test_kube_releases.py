"""The Kubernetes releases Outrigger supports (1.35, 1.36, 1.37): one pinned module and one build cache per
release, the release the tests run picked by ``OUTRIGGER_K8S_RELEASE``, and what the API server of each
serves by default, as docs/kubernetes.md's compatibility table says (``make compat`` runs the live test
here against each release's API server)."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tools.compat import RELEASE_SPECIFIC, Outcome, default_release, live_test_files, read_report, summary
from tools.compat import main as compat_main
from tools.localcluster import (
    BUILD_SCRIPT,
    RELEASE_ENV,
    RELEASES_DIR,
    ClusterError,
    LocalCluster,
    k8s_release,
    pinned_version,
    releases,
)

ROOT = Path(__file__).resolve().parent.parent

#: What each release's kube-apiserver serves in the API groups the scheduling of devices and workloads
#: reads, as the suite starts it: (group versions, resources of resource.k8s.io/v1, resources of
#: scheduling.k8s.io). Workload and PodGroup (scheduling.k8s.io v1alpha1 in 1.35, v1alpha2 in 1.36, v1beta1
#: and v1alpha3 in 1.37) are all off by default, as resource.k8s.io's beta and alpha versions are; the
#: suite's API server turns on GenericWorkload and the version with PodGroups from 1.36 on
#: (tools.localcluster.WORKLOAD_API_VERSIONS).
SERVED = {
    "1.35": ({"resource.k8s.io/v1", "scheduling.k8s.io/v1"},
             ["deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"], ["priorityclasses"]),
    "1.36": ({"resource.k8s.io/v1", "scheduling.k8s.io/v1", "scheduling.k8s.io/v1alpha2"},
             ["deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"],
             ["podgroups", "priorityclasses", "workloads"]),
    "1.37": ({"resource.k8s.io/v1", "scheduling.k8s.io/v1", "scheduling.k8s.io/v1beta1"},
             ["deviceclasses", "devicetaintrules", "resourceclaims", "resourceclaimtemplates", "resourceslices"],
             ["podgroups", "priorityclasses", "workloads"]),
}


def _build_sh(*args: str, release: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != RELEASE_ENV}
    if release is not None:
        env[RELEASE_ENV] = release
    return subprocess.run(["bash", str(BUILD_SCRIPT), *args], capture_output=True, text=True, env=env, timeout=30)


def test_every_supported_release_is_pinned_and_the_compatibility_table_covers_each() -> None:
    assert releases() == ["1.35", "1.36", "1.37"] == sorted(SERVED)
    assert [pinned_version(r) for r in releases()] == ["v1.35.4", "v1.36.4", "v1.37.2"]
    for release in releases():
        mod = (RELEASES_DIR / release / "go.mod").read_text()
        # The staging modules at the same release: a mismatch builds, and serves another release's API.
        staged = set(re.findall(r"^\tk8s\.io/[\w-]+ => k8s\.io/[\w-]+ (\S+)$", mod, re.M))
        assert staged == {pinned_version(release).replace("v1.", "v0.")}, release
        assert (RELEASES_DIR / release / "go.sum").is_file() and (RELEASES_DIR / release / "tools.go").is_file()


@pytest.mark.parametrize(("release", "folder"), [
    ("1.35", "k8s-v1.35.4-etcd-v3.6.5"),
    ("1.36", "k8s-v1.36.4-etcd-v3.6.5"),
    ("1.37", "k8s-v1.37.2-etcd-v3.6.5"),
])
def test_each_release_builds_into_a_cache_folder_of_its_own(release: str, folder: str) -> None:
    out = _build_sh("--print-dir", release=release)
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).parts[-2:] == (folder, "bin")
    assert _build_sh("--print-release", release=release).stdout == f"{release}\n"


def test_without_a_release_the_default_one_is_built_and_the_tools_agree() -> None:
    default = _build_sh("--print-release").stdout.strip()
    assert default in releases()
    # The one line that moves the default (docs/kubernetes.md says where).
    assert re.findall(r"^default_release=(\S+) ", BUILD_SCRIPT.read_text(), re.M) == [default]
    if not os.environ.get(RELEASE_ENV):
        assert k8s_release() == default


@pytest.mark.parametrize("release", ["1.34", "../etcd", "1.37.2", "latest", " 1.35"])
def test_a_release_that_is_not_pinned_is_refused_naming_those_that_are(release: str) -> None:
    out = _build_sh("--print-dir", release=release)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (f"{BUILD_SCRIPT}: no pinned Kubernetes release '{release}' (OUTRIGGER_K8S_RELEASE); "
                          "pinned: 1.35 1.36 1.37\n")
    with pytest.raises(ClusterError, match=r"^no pinned Kubernetes release .* pinned are 1\.35, 1\.36, 1\.37$"):
        pinned_version(release)


def test_compat_runs_the_files_expecting_the_default_releases_results_only_against_it() -> None:
    specific = ("tests/test_kube_compare.py", "tests/test_kube_compare_groups.py", "tests/test_kube_podgroup_cycle.py",
                "tests/test_kube_podgroup_live.py", "tests/test_kube_podgroup_preemption.py")
    every = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("tests/test_kube_*.py"))
    assert specific == RELEASE_SPECIFIC
    assert {"tests/test_kube_harness.py", "tests/test_kube_releases.py", "tests/test_kube_source.py",
            "tests/test_kube_podgroups.py", *specific} <= set(every)
    assert live_test_files() == [f for f in every if f not in specific]
    assert live_test_files(default=True) == every
    assert default_release() == "1.37"


def test_compat_summary_has_a_row_per_release_and_names_each_failure() -> None:
    ok = Outcome("1.35", "v1.35.4", passed=96, skipped=1, seconds=372.0)
    bad = Outcome("1.36", "v1.36.4", passed=94, failed=1, errors=1, seconds=400.2,
                  failures=["tests.test_kube_source::test_a", "tests.test_kube_writes::test_b"])
    unbuilt = Outcome("1.37", "v1.37.2", problem="build failed (exit 1)")
    assert (ok.ok, bad.ok, unbuilt.ok, Outcome("1.35", "v1.35.4").ok) == (True, False, False, False)
    assert summary([ok, bad, unbuilt]).splitlines() == [
        "",
        "make compat: the live-cluster tests against each Kubernetes release's API server",
        "release  version   passed failed errors skipped minutes  result",
        "1.35     v1.35.4       96      0      0       1     6.2  ok",
        "1.36     v1.36.4       94      1      1       0     6.7  FAILED",
        "1.37     v1.37.2        0      0      0       0     0.0  build failed (exit 1)",
        "  1.36 failed: tests.test_kube_source::test_a",
        "  1.36 failed: tests.test_kube_writes::test_b",
    ]


@pytest.mark.kube
def test_the_api_server_serves_what_the_compatibility_table_says(kube_cluster: LocalCluster) -> None:
    release = k8s_release()
    versions, resources, scheduling = SERVED[release]
    served = set(kube_cluster.kubectl("api-versions").stdout.split())
    assert {v for v in served if v.split("/")[0] in ("resource.k8s.io", "scheduling.k8s.io")} == versions
    names = kube_cluster.kubectl("api-resources", "--api-group=resource.k8s.io", "-o", "name").stdout.split()
    assert sorted(n.removesuffix(".resource.k8s.io") for n in names) == resources
    names = kube_cluster.kubectl("api-resources", "--api-group=scheduling.k8s.io", "-o", "name").stdout.split()
    assert sorted(n.removesuffix(".scheduling.k8s.io") for n in names) == scheduling
    version = kube_cluster.kubectl("version", "-o", "json").stdout
    assert f'"gitVersion": "{pinned_version(release)}"' in version


#: Fields Outrigger reads that an API server keeps only with its own gate on (off by default in 1.35, on
#: from 1.36): DeviceClass spec.extendedResourceName (DRAExtendedResource) and Node
#: status.declaredFeatures (NodeDeclaredFeatures). An API server with the gate off drops them when the
#: object is created.
KEPT = {"1.35": (False, False), "1.36": (True, True), "1.37": (True, True)}


@pytest.mark.kube
def test_fields_behind_the_api_servers_gates_are_kept_or_dropped_by_release(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    prefix = kube_namespace.split("-", 1)[0]
    device_class, node = f"{prefix}-gpu.example.com", f"{prefix}-node"  # the fixture deletes the node
    kube_cluster.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": device_class},
        "spec": {"extendedResourceName": "example.com/gpu"}}))
    try:
        got = json.loads(kube_cluster.kubectl("get", "deviceclass", device_class, "-o", "json").stdout)
    finally:
        kube_cluster.kubectl("delete", "deviceclass", device_class, "--ignore-not-found")
    # Created with its status, as a kubelet registers a node (the status subresource drops nothing).
    kube_cluster.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
        "status": {"declaredFeatures": ["ExampleFeature"]}}))
    status = json.loads(kube_cluster.kubectl("get", "node", node, "-o", "json").stdout)["status"]
    assert ("extendedResourceName" in got["spec"], "declaredFeatures" in status) == KEPT[k8s_release()]


def test_compat_refuses_a_release_that_is_not_pinned(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        compat_main(["--releases", "1.35,1.34"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "python -m tools.compat: error: --releases: no pinned release 1.34; pinned: 1.35, 1.36, 1.37")


def test_compat_reads_the_counts_and_failures_from_pytests_report(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest" tests="5">'
        '<testcase classname="tests.test_kube_a" name="test_ok" time="1.0"/>'
        '<testcase classname="tests.test_kube_a" name="test_ok2" time="1.0"/>'
        '<testcase classname="tests.test_kube_a" name="test_bad"><failure message="x">x</failure></testcase>'
        '<testcase classname="tests.test_kube_b" name="test_setup"><error message="y">y</error></testcase>'
        '<testcase classname="tests.test_kube_b" name="test_skip"><skipped message="z"/></testcase>'
        "</testsuite></testsuites>")
    out = Outcome("1.36", "v1.36.4")
    read_report(report, out)
    assert (out.passed, out.failed, out.errors, out.skipped, out.failures) == (
        2, 1, 1, 1, ["tests.test_kube_a::test_bad", "tests.test_kube_b::test_setup"])
