"""The live-cluster fixtures: one real etcd + kube-apiserver per test session, a fresh namespace per test.

``kube_cluster`` starts a :class:`framework.kube.local.LocalCluster` the first time a test asks for it
(the binaries ``make k8s`` builds; a few seconds) and stops it when the session ends. ``kube_namespace``
creates a namespace for one test; afterwards its pods are deleted at once and the namespace is deleted,
which leaves it Terminating with whatever else it held: no namespace controller runs to empty it. Nodes
are cluster-wide: a test that creates nodes deletes them (or names them after its namespace).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest

from framework.kube.local import LocalCluster

__all__ = ["kube_cluster", "kube_namespace"]

_serial = itertools.count(1)


@pytest.fixture(scope="session")
def kube_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("kube-cluster"))
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def kube_namespace(kube_cluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new namespace named after the test (``t<n>-<test name>``, at most 63 characters)."""
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    name = f"t{next(_serial)}-{slug}"[:63].rstrip("-")
    kube_cluster.kubectl("create", "namespace", name)
    yield name
    kube_cluster.kubectl("delete", "pods", "--all", "-n", name, "--grace-period=0", "--force")
    kube_cluster.kubectl("delete", "namespace", name, "--wait=false")
