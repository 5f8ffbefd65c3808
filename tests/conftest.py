"""Fixtures shared across test files: the live cluster's (tests/kube_cluster.py)."""

from __future__ import annotations

import pytest
from kube_cluster import kube_cluster, kube_namespace

__all__ = ["kube_cluster", "kube_namespace"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the live cluster is marked ``kube`` even if it does not say so (``-m "not kube"``)."""
    for item in items:
        if "kube_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kube)
