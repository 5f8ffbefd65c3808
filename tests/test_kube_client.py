"""The pieces of the live-cluster source that need no API server: kubeconfig loading, the rate limiter,
clientConnection, what a pod needs that Outrigger cannot model, event notes and the PodScheduled patch."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from framework.config import SchedulerConfig
from framework.kube.client import ApiError, Gone, KubeConfig, KubeConfigError, TokenBucket
from framework.kube.convert import convert_pod, reconvert_pod, spec_changed, unsupported
from framework.kube.events import _changed_condition, truncate_note
from framework.kube.settings import ClientConnection, client_connection

CA = b"-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n"


def kubeconfig(tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any] | None = None,
               current: str = "c") -> Path:
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": current,
           "clusters": [{"name": "k", "cluster": cluster or {"server": "https://127.0.0.1:6443"}}],
           "users": [{"name": "u", "user": user}],
           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_kubeconfig_token_ca_data_and_relative_token_file(tmp_path: Path) -> None:
    (tmp_path / "tok").write_text("from-file\n")
    ca = base64.b64encode(CA).decode()
    cfg = KubeConfig.from_file(kubeconfig(tmp_path, {"tokenFile": "tok"},
                                          {"server": "https://10.1.2.3:6443/", "certificate-authority-data": ca}))
    assert (cfg.server, cfg.current_token(), cfg.ca_data, cfg.token_file) == (
        "https://10.1.2.3:6443", "from-file", CA, str(tmp_path / "tok"))
    cfg = KubeConfig.from_file(kubeconfig(tmp_path, {"token": "abc"}))
    assert (cfg.token, cfg.ca_file, cfg.insecure) == ("abc", "", False)


KUBECONFIG_ERRORS = [  # (user, cluster, current context, the message after "kubeconfig PATH: ")
    ({"exec": {"command": "aws"}}, None, "c",
     "user 'u': exec credential plugins are not supported; use a token, a token file or a client certificate"),
    ({"token": "t"}, None, "other", "context 'other' not found in contexts"),
    ({"token": "t"}, {"server": "127.0.0.1:6443"}, "c",
     "cluster 'k': server must be an https:// URL, got '127.0.0.1:6443'"),
    ({"token": "t"}, {"server": "https://x", "certificate-authority-data": "%%%"}, "c",
     "certificate-authority-data is not base64"),
    ({"tokenFile": "missing"}, None, "c", None),  # checked below: names the file
]


@pytest.mark.parametrize(("user", "cluster", "current", "message"), KUBECONFIG_ERRORS)
def test_kubeconfig_problems_are_one_line(tmp_path: Path, user: dict[str, Any], cluster: dict[str, Any] | None,
                                          current: str, message: str | None) -> None:
    path = kubeconfig(tmp_path, user, cluster, current)
    with pytest.raises(KubeConfigError) as err:
        KubeConfig.from_file(path)
    if message is None:
        assert str(err.value) == (f"kubeconfig {path}: cannot read token file {tmp_path / 'missing'}: "
                                  "No such file or directory")
    else:
        assert str(err.value) == f"kubeconfig {path}: {message}"
    assert "\n" not in str(err.value)


def test_in_cluster_without_the_environment_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeConfigError) as err:
        KubeConfig.in_cluster()
    assert str(err.value) == ("in-cluster configuration: KUBERNETES_SERVICE_HOST is unset (not running in a "
                              "Kubernetes pod?); give a kubeconfig instead")


def test_in_cluster_reads_the_mounted_token_and_ca(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(CA)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    cfg = KubeConfig.in_cluster(tmp_path)
    assert (cfg.server, cfg.current_token(), cfg.ca_file) == ("https://10.0.0.1:443", "sa-token",
                                                               str(tmp_path / "ca.crt"))


def test_token_bucket_spends_the_burst_then_waits_one_qps_step_each() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=10, burst=3, clock=lambda: now[0])
    assert [bucket.reserve() for _ in range(5)] == [0.0, 0.0, 0.0, pytest.approx(0.1), pytest.approx(0.2)]
    now[0] = 1.0  # a second later: ten tokens earned, minus the two borrowed, capped at the burst
    assert [bucket.reserve() for _ in range(4)] == [0.0, 0.0, 0.0, pytest.approx(0.1)]
    assert [TokenBucket(qps=-1, burst=0).reserve() for _ in range(3)] == [0.0, 0.0, 0.0]


CLIENT_CONNECTION = [  # (clientConnection, want: ClientConnection or the error)
    (None, ClientConnection("", 50.0, 100)),
    ({"qps": 0, "burst": 0}, ClientConnection("", 50.0, 100)),
    ({"kubeconfig": "/etc/k", "qps": 500, "burst": 1000}, ClientConnection("/etc/k", 500.0, 1000)),
    ({"qps": -1}, ClientConnection("", -1.0, 100)),
    ({"qps": "fast"}, "clientConnection.qps: must be a number, got 'fast'"),
    ({"burst": -5}, "clientConnection.burst: must be a non-negative integer, got -5"),
]


@pytest.mark.parametrize(("raw", "want"), CLIENT_CONNECTION)
def test_client_connection_has_kube_schedulers_defaults(raw: dict[str, Any] | None,
                                                        want: ClientConnection | str) -> None:
    config = SchedulerConfig(profiles=[], extra={} if raw is None else {"clientConnection": raw})
    if isinstance(want, str):
        with pytest.raises(KubeConfigError) as err:
            client_connection(config)
        assert str(err.value) == want
    else:
        assert client_connection(config) == want


def api_pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                         "managedFields": [{"manager": "kubectl"}]},
            "spec": {"schedulerName": "gang", "containers": [{"name": "c", "image": "i"}], **spec},
            "status": {"phase": "Pending", "qosClass": "BestEffort"}}


UNSUPPORTED = [  # (spec, the reason)
    ({"volumes": [{"name": "cfg", "configMap": {"name": "x"}}, {"name": "tmp", "emptyDir": {}}]}, ""),
    # Claims, CSI and in-tree disks are the volume plugins' to schedule.
    ({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]}, ""),
    ({"volumes": [{"name": "a", "secret": {}}, {"name": "b", "csi": {"driver": "x"}}]}, ""),
    ({"volumes": [{"name": "pd", "gcePersistentDisk": {"pdName": "d"}}]}, ""),
    # ResourceClaims are DynamicResources' (an entry naming neither claim nor template is its to report).
    ({"resourceClaims": [{"name": "gpu", "resourceClaimName": "g"}]}, ""),
    ({"resourceClaims": [{"name": "gpu"}]}, ""),
]


def test_a_pod_with_claims_converts_and_a_new_claim_status_converts_again() -> None:
    item = convert_pod(api_pod(resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}]))
    assert item.problem == "" and item.pod is not None
    assert [(c.name, c.template_name) for c in item.pod.resource_claims] == [("gpu", "t")]
    assert item.pod.resource_claim_statuses == {}
    changed = api_pod(resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "t"}])
    changed["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-abc12"}]
    again = reconvert_pod(item, changed)
    assert again.pod is not None and again.pod.resource_claim_statuses == {"gpu": "p-gpu-abc12"}
    # The claim controller's status update is a change the queue hears (PreEnqueue runs again).
    assert spec_changed(item.raw, changed) is True
    assert spec_changed(changed, {**changed, "status": {**changed["status"], "phase": "Running"}}) is False


@pytest.mark.parametrize(("spec", "reason"), UNSUPPORTED)
def test_what_outrigger_cannot_model_is_named(spec: dict[str, Any], reason: str) -> None:
    assert unsupported(api_pod(**spec)) == reason


def test_convert_pod_drops_managed_fields_and_keeps_identity() -> None:
    item = convert_pod(api_pod(nodeName="n1"))
    assert (item.key, item.uid, item.scheduler_name, item.node_name, item.problem) == ("ns/p", "u1", "gang", "n1", "")
    assert item.pod is not None and item.pod.node_name == "n1"
    assert "managedFields" not in item.raw["metadata"]


def test_truncated_note_is_1024_bytes_ending_with_an_ellipsis() -> None:
    assert truncate_note("short") == "short"
    cut = truncate_note("x" * 2000)
    assert (len(cut), cut[-4:]) == (1024, " ...")


CONDITIONS = [  # (the pod's status, the wanted (reason, message), the patch's condition or None)
    ({}, ("Unschedulable", "0/1 nodes"), {"status": "False", "reason": "Unschedulable", "message": "0/1 nodes"}),
    ({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes",
                      "lastTransitionTime": "2026-01-01T00:00:00Z"}]}, ("Unschedulable", "0/1 nodes"), None),
    ({"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "old",
                      "lastTransitionTime": "2026-01-01T00:00:00Z"}]}, ("SchedulerError", "boom"),
     {"status": "False", "reason": "SchedulerError", "message": "boom", "lastTransitionTime": "2026-01-01T00:00:00Z"}),
]


@pytest.mark.parametrize(("status", "wanted", "want"), CONDITIONS)
def test_pod_scheduled_patch_only_when_something_changes(status: dict[str, Any], wanted: tuple[str, str],
                                                         want: dict[str, str] | None) -> None:
    got = _changed_condition(status, wanted, 3)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert {k: got[k] for k in want} == want
    assert (got["type"], got["observedGeneration"], got["lastProbeTime"]) == ("PodScheduled", 3, None)


def test_api_errors_take_the_servers_status() -> None:
    body = b'{"kind":"Status","code":409,"reason":"Conflict","message":"pod p is already assigned to node \\"n\\""}'
    err = ApiError.from_status("create", "pods/binding", 409, body)
    assert str(err) == 'create pods/binding: 409 Conflict: pod p is already assigned to node "n"'
    gone = ApiError.from_status("watch", "pods", 410, b'{"code":410,"reason":"Expired","message":"too old"}')
    assert isinstance(gone, Gone) and str(gone) == "watch pods: 410 Expired: too old"
    assert str(ApiError.from_status("list", "nodes", 503, b"<html>")) == "list nodes: 503 ServiceUnavailable: <html>"
