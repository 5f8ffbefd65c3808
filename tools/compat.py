"""``python -m tools.compat`` (``make compat``): the live-cluster tests against each pinned Kubernetes
release's API server, one release after the other, and a summary per release.

For each release (``tests/k8s/kubernetes/<release>``; all of them, or ``--releases 1.35,1.37``) it builds
what is missing (``tests/k8s/build.sh``, half an hour for a release not built yet on a busy machine),
then runs :data:`TESTS` with ``OUTRIGGER_K8S_RELEASE`` set, so that every fixture and tool starts that
release's etcd, kube-apiserver and kube-controller-manager, and reads pytest's JUnit report. The tests are
``tests/test_kube_*.py``; those of :data:`RELEASE_SPECIFIC` run only against the default release (the one
Outrigger follows, tests/k8s/build.sh's ``default_release``), as what they expect is that release's: the
kube-scheduler comparisons' placements (pods, and PodGroups), and the PodGroup cycles and gang preemption
with their ``scheduling.k8s.io/v1beta1`` objects and kube-scheduler 1.37's results (1.36 serves PodGroups
in ``v1alpha2``, which ``tests/test_kube_podgroups.py`` covers on every release; 1.35 serves none). Exits
1 when a release failed to build or had a failing test.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .localcluster import BIN_ENV, BUILD_SCRIPT, RELEASE_ENV, pinned_version, releases

__all__ = ["RELEASE_SPECIFIC", "TESTS", "Outcome", "default_release", "live_test_files", "main", "read_report",
           "run_release", "summary"]

ROOT = Path(__file__).resolve().parents[1]
#: The live-cluster test files, by pattern, and those run against the default release only: they expect
#: its kube-scheduler's results and its API (PodGroups in ``scheduling.k8s.io/v1beta1``).
TESTS = "tests/test_kube_*.py"
RELEASE_SPECIFIC = ("tests/test_kube_compare.py", "tests/test_kube_compare_groups.py",
                    "tests/test_kube_podgroup_cycle.py", "tests/test_kube_podgroup_live.py",
                    "tests/test_kube_podgroup_preemption.py")
BUILD_TIMEOUT = 3 * 3600.0  # seconds: a cold build of one release on 2 busy cores
TEST_TIMEOUT = 2 * 3600.0  # seconds: the live tests of one release on a loaded machine


@dataclass
class Outcome:
    """What one release gave: its version, the test counts, the failed tests' ids, or why it did not run."""

    release: str
    version: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    problem: str = ""  # the build failed, or pytest left no report

    @property
    def ok(self) -> bool:
        return not self.problem and not self.failed and not self.errors and self.passed > 0


def default_release() -> str:
    """The release tests/k8s/build.sh builds when none is named (whatever ``$OUTRIGGER_K8S_RELEASE`` says)."""
    out = subprocess.run(["bash", str(BUILD_SCRIPT), "--print-release"], env=_env(""), capture_output=True,
                         text=True, timeout=30, check=True)
    return out.stdout.strip()


def live_test_files(default: bool = False) -> list[str]:
    """The test files ``make compat`` runs against a release, relative to the checkout; ``default``: the
    release is the default one, which runs :data:`RELEASE_SPECIFIC` too."""
    left_out = set() if default else set(RELEASE_SPECIFIC)
    return sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(TESTS) if str(p.relative_to(ROOT)) not in left_out)


def _env(release: str) -> dict[str, str]:
    """This environment for ``release`` ("": none named, the default)."""
    # A fixed folder of binaries would defeat the release.
    env = {k: v for k, v in os.environ.items() if k not in (BIN_ENV, RELEASE_ENV)}
    if release:
        env[RELEASE_ENV] = release
    return env


def read_report(path: Path, out: Outcome) -> None:
    """Counts and failed test ids from pytest's JUnit XML at ``path`` into ``out``."""
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None:
            out.failed += 1
            out.failures.append(name)
        elif case.find("error") is not None:
            out.errors += 1
            out.failures.append(name)
        elif case.find("skipped") is not None:
            out.skipped += 1
        else:
            out.passed += 1


def run_release(release: str, files: Sequence[str], pytest_args: Sequence[str] = ()) -> Outcome:
    """Builds ``release`` if needed and runs ``files`` against it; the output goes to this terminal."""
    out = Outcome(release, pinned_version(release))
    print(f"== compat {release} ({out.version}): building what is missing", flush=True)
    start = time.monotonic()
    try:
        built = subprocess.run(["bash", str(BUILD_SCRIPT)], env=_env(release), timeout=BUILD_TIMEOUT,
                               stdout=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        out.problem = f"build did not finish in {BUILD_TIMEOUT / 60:.0f} min"
        return out
    if built.returncode != 0:
        out.problem = f"build failed (exit {built.returncode})"
        return out
    print(f"== compat {release} ({out.version}): {len(files)} test files", flush=True)
    with tempfile.TemporaryDirectory(prefix="outrigger-compat-") as tmp:
        report = Path(tmp) / "report.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
               *pytest_args, *files]
        try:
            subprocess.run(cmd, cwd=ROOT, env=_env(release), timeout=TEST_TIMEOUT)
        except subprocess.TimeoutExpired:
            out.problem = f"tests did not finish in {TEST_TIMEOUT / 60:.0f} min"
        if report.is_file():
            read_report(report, out)
        elif not out.problem:
            out.problem = "pytest wrote no report"
    out.seconds = time.monotonic() - start
    return out


def summary(outcomes: Sequence[Outcome]) -> str:
    """The per-release table ``make compat`` ends with, then each failed test by release."""
    lines = ["", "make compat: the live-cluster tests against each Kubernetes release's API server",
             f"{'release':<8} {'version':<9} {'passed':>6} {'failed':>6} {'errors':>6} {'skipped':>7} "
             f"{'minutes':>7}  result"]
    for o in outcomes:
        result = o.problem or ("ok" if o.ok else "FAILED")
        lines.append(f"{o.release:<8} {o.version:<9} {o.passed:>6} {o.failed:>6} {o.errors:>6} {o.skipped:>7} "
                     f"{o.seconds / 60:>7.1f}  {result}")
    for o in outcomes:
        lines += [f"  {o.release} failed: {name}" for name in o.failures]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    known = releases()
    p = argparse.ArgumentParser(prog="python -m tools.compat", description=__doc__.split("\n\n")[0])
    p.add_argument("--releases", default=",".join(known),
                   help=f"comma-separated releases to run (default: all pinned, {','.join(known)})")
    p.add_argument("pytest_args", nargs="*", help="more pytest arguments, after --")
    args = p.parse_args(argv)
    chosen = [r.strip() for r in args.releases.split(",") if r.strip()]
    unknown = [r for r in chosen if r not in known]
    if unknown or not chosen:
        p.error(f"--releases: no pinned release {', '.join(unknown) or '(none given)'}; pinned: {', '.join(known)}")
    default = default_release()
    outcomes = [run_release(r, live_test_files(r == default), args.pytest_args) for r in chosen]
    print(summary(outcomes), flush=True)
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
