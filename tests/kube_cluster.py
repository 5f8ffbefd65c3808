"""The live-cluster fixtures: one real etcd + kube-apiserver per test session, a fresh namespace per test.

``kube_cluster`` starts a :class:`tools.localcluster.LocalCluster` the first time a test asks for it
(a few seconds; the binaries are ``make k8s``'s, built first if missing, of the Kubernetes release
``OUTRIGGER_K8S_RELEASE`` names, else tests/k8s/build.sh's default) and stops it when the session ends.
``kube_namespace`` creates a namespace for one test; afterwards its pods are deleted at once and the
namespace is deleted, which leaves it Terminating with whatever else it held: no namespace
controller runs to empty it. Nodes are cluster-wide: a test that creates nodes deletes them, or names
them after its namespace (starting with its ``t<n>-``), and the fixture deletes those however it ended.
``kube_controller_manager`` is the same cluster with kube-controller-manager's resourceclaim controller
running (started the first time a test asks, for the rest of the session), which makes the claims of
pods' ResourceClaimTemplates as in a real cluster.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.localcluster import BIN_ENV, BUILD_SCRIPT, ClusterError, LocalCluster, find_bin_dir

__all__ = ["kube_cluster", "kube_controller_manager", "kube_namespace"]

_serial = itertools.count(1)


def built_bin_dir() -> Path:
    """``$OUTRIGGER_K8S_BIN``, or tests/k8s/build.sh's folder of the release ``$OUTRIGGER_K8S_RELEASE`` names
    (which the script reads) after building what is missing there (``make test`` has done it already; a run
    of pytest on a fresh machine builds here, minutes once)."""
    if os.environ.get(BIN_ENV):
        return find_bin_dir()
    out = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=3600)
    if out.returncode != 0:
        tail = "\n".join(out.stderr.splitlines()[-20:])
        raise ClusterError(f"{BUILD_SCRIPT} exited {out.returncode}:\n{tail}")
    return Path(out.stdout.strip())


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("kube-cluster"), bin_dir=built_bin_dir())
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kube_controller_manager(kube_cluster: LocalCluster) -> LocalCluster:
    """The session's cluster with kube-controller-manager running only its resourceclaim controller."""
    kube_cluster.start_controller_manager(("resourceclaim-controller",))
    return kube_cluster


@pytest.fixture
def kube_namespace(kube_cluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new namespace named after the test (``t<n>-<test name>``, at most 63 characters)."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    name = f"t{next(_serial)}-{slug}"[:63].rstrip("-")
    kube_cluster.kubectl("create", "namespace", name)
    yield name
    kube_cluster.start_apiserver()  # a test that stopped it and failed leaves it running again for the next
    # Nodes named after the namespace (``t<n>-...``) go with it, also when the test failed before deleting
    # them: the next test must not find them in the cluster and schedule onto them.
    prefix = name.split("-", 1)[0] + "-"
    ours = [n for n in kube_cluster.kubectl("get", "nodes", "-o", "name").stdout.split()
            if n.removeprefix("node/").startswith(prefix)]
    if ours:
        kube_cluster.kubectl("delete", *ours, "--ignore-not-found", timeout=120)
    # Every pod at once, whatever their number (one request, where kubectl deletes them one by one).
    kube_cluster.kubectl("delete", "--raw", f"/api/v1/namespaces/{name}/pods?gracePeriodSeconds=0", timeout=120)
    kube_cluster.kubectl("delete", "namespace", name, "--wait=false")
