"""Fixtures shared across test files: the live cluster's (tests/kube_cluster.py)."""

from __future__ import annotations

import os

import pytest
from kube_cluster import kube_cluster, kube_controller_manager, kube_namespace

__all__ = ["kube_cluster", "kube_controller_manager", "kube_namespace"]

# `outrigger serve` opens its secure port on 10259 unless told otherwise (--secure-port, or this variable):
# the frameworks tests start, and the documents' commands, open none unless they ask for one, on a free
# port, so that test runs never collide on the default port, nor with a framework running on the machine.
os.environ.setdefault("OUTRIGGER_SECURE_PORT", "0")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that uses the live cluster is marked ``kube`` even if it does not say so (``-m "not kube"``)."""
    for item in items:
        if "kube_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.kube)
