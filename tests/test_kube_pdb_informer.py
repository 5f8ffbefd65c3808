"""The PodDisruptionBudget informer runs only when some profile runs DefaultPreemption, its one reader, as
kube-scheduler's informer factory starts only the informers its plugins asked for: on the real API
server, a profile without it makes no PDB list or watch and gets ready with an account that may not
read PDBs; one with it lists and watches them. A standby decides from its configuration file
(framework.kube.settings.default_preemption) and the scheduler it attaches decides again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_framework import DEPLOY

from framework.config import load_config
from framework.kube.client import ApiClient, ApiError, KubeConfig
from framework.kube.settings import default_preemption
from framework.kube.source import KubeSource
from framework.plugins import in_tree_registry
from framework.scheduler import Scheduler
from tools.localcluster import LocalCluster

PROFILE = "outrigger-scheduler"
HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
WITH = HEAD + f"profiles:\n- schedulerName: {PROFILE}\n"
WITHOUT = WITH + "  plugins: {postFilter: {disabled: [{name: DefaultPreemption}]}}\n"
PDBS = "/apis/policy/v1/poddisruptionbudgets"


FILES = [
    # (name, the file's text (None: no file), whether a profile runs DefaultPreemption)
    ("no file: kube-scheduler's defaults", None, True),
    ("the default profile", HEAD, True),
    ("a profile of its own, default plugins", WITH, True),
    ("disabled at postFilter", WITHOUT, False),
    ("disabled in multiPoint", WITH + "  plugins: {multiPoint: {disabled: [{name: DefaultPreemption}]}}\n", False),
    ("every postFilter plugin disabled", WITH + "  plugins: {postFilter: {disabled: [{name: '*'}]}}\n", False),
    ("disabled in multiPoint, enabled at postFilter", WITH + "  plugins: {multiPoint: {disabled: "
     "[{name: DefaultPreemption}]}, postFilter: {enabled: [{name: DefaultPreemption}]}}\n", True),
    ("one profile of two runs it", WITHOUT + "- schedulerName: other\n", True),
    ("neither of two", WITHOUT + "- schedulerName: other\n  plugins: {postFilter: {disabled: [{name: '*'}]}}\n",
     False),
    ("a file that does not decode: its loading reports it", "profiles: [", True),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in FILES], ids=[c[0] for c in FILES])
def test_a_standby_reads_from_its_file_whether_a_profile_runs_default_preemption(
        tmp_path: Path, text: str | None, expected: bool) -> None:
    path = None
    if text is not None:
        path = tmp_path / "scheduler.yaml"
        path.write_text(text)
    assert default_preemption(None if path is None else str(path)) is expected


def without_pdb_permission(cluster: LocalCluster) -> Path:
    """A service account with deploy/kubernetes/rbac.yaml's ClusterRole less its PodDisruptionBudget rule."""
    docs = [d for d in yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text()) if d]
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    rules = [r for r in role["rules"] if "poddisruptionbudgets" not in r["resources"]]
    assert len(rules) == len(role["rules"]) - 1  # the one rule, and nothing else, is left out
    role = {**role, "metadata": {"name": "outrigger-scheduler-no-pdbs"}, "rules": rules}
    return cluster.service_account_kubeconfig("outrigger-no-pdbs", "outrigger", roles_yaml=yaml.safe_dump(role))


def pdb_requests(client: ApiClient) -> dict[str, int]:
    return {k: v for k, v in client.counts.items() if k.endswith("poddisruptionbudgets")}


async def until(check: Any, timeout: float = 20) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        assert loop.time() < deadline, "not in time"
        await asyncio.sleep(0.05)


CASES = [
    # (name, the profile, the account (restricted: no PDB permission), PDB requests once in sync)
    ("a profile without DefaultPreemption: no PDB list or watch, ready without the permission", WITHOUT, True, {}),
    ("a profile with DefaultPreemption: PDBs listed and watched", WITH, False,
     {"list poddisruptionbudgets": 1, "watch poddisruptionbudgets": 1}),
]


@pytest.mark.parametrize(("config", "restricted", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_the_pdb_informer_runs_only_for_default_preemption(
        kube_cluster: LocalCluster, config: str, restricted: bool, expected: dict[str, int]) -> None:
    kubeconfig = without_pdb_permission(kube_cluster) if restricted else kube_cluster.admin_kubeconfig

    async def main() -> tuple[dict[str, int], list[str], int | None]:
        registry = in_tree_registry()
        scheduler = Scheduler(load_config(config, registry.points()), registry, seed=0)
        source = KubeSource(scheduler, ApiClient(KubeConfig.from_file(kubeconfig)))
        refused = None
        try:
            await source.start()
            await source.wait_synced(30)
            if expected:
                await until(lambda: pdb_requests(source.client) == expected)
            try:  # what the account may do: the restricted one may not list PDBs
                await source.client.list(PDBS, resource="poddisruptionbudgets (direct)")
            except ApiError as exc:
                refused = exc.code
            return pdb_requests(source.client), [i.resource for i in source.informers()], refused
        finally:
            await source.stop()

    requests, informers, refused = asyncio.run(main())
    assert requests == expected
    assert refused == (403 if restricted else None)
    pdbs = ["poddisruptionbudgets"] if expected else []
    assert informers == ["nodes", "namespaces", *pdbs, "persistentvolumeclaims", "persistentvolumes",
                         "storageclasses", "csinodes", "resourceslices", "deviceclasses", "resourceclaims",
                         "devicetaintrules", "pods"]


def test_a_standby_that_read_no_default_preemption_starts_the_pdb_informer_for_a_scheduler_with_it(
        kube_cluster: LocalCluster) -> None:
    async def main() -> tuple[dict[str, int], dict[str, int], bool]:
        registry = in_tree_registry()
        source = KubeSource(None, ApiClient(KubeConfig.from_file(kube_cluster.admin_kubeconfig)), pdbs=False)
        try:
            await source.start()
            await source.wait_synced(30)
            before = pdb_requests(source.client)
            await source.attach(Scheduler(load_config(WITH, registry.points()), registry, seed=0))
            await source.wait_synced(30)  # the PDBs now too
            await until(lambda: "watch poddisruptionbudgets" in source.client.counts)
            return before, pdb_requests(source.client), source.pdbs.synced.is_set()
        finally:
            await source.stop()

    before, after, synced = asyncio.run(main())
    assert (before, after, synced) == ({}, {"list poddisruptionbudgets": 1, "watch poddisruptionbudgets": 1}, True)
