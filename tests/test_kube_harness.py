"""The live-cluster harness: a real etcd + kube-apiserver (tools.localcluster), driven by the built kubectl.

Nothing is faked: the binaries are the pinned ones tests/k8s/build.sh builds, RBAC is on, service accounts
get their tokens from the TokenRequest API, and TLS is verified against the cluster's CA. The RBAC rows run
with the token of deploy/kubernetes/rbac.yaml's service account, as the framework runs in a cluster.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from tools.localcluster import (
    RELEASES_DIR,
    ClusterError,
    KubectlError,
    LocalCluster,
    find_bin_dir,
    k8s_release,
    pinned_version,
)

pytestmark = pytest.mark.kube

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "kubernetes"
PIN = pinned_version()  # the release's ($OUTRIGGER_K8S_RELEASE, else tests/k8s/build.sh's default)


def get_json(cluster: LocalCluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


# ---- the components -----------------------------------------------------------------------------------


def test_the_pin_is_the_version_both_kubectl_and_the_api_server_report(kube_cluster: LocalCluster) -> None:
    go_mod = (RELEASES_DIR / k8s_release() / "go.mod").read_text()
    assert re.search(r"^require k8s\.io/kubernetes (\S+)$", go_mod, re.M)[1] == PIN  # type: ignore[index]
    assert PIN.startswith(f"v{k8s_release()}.")
    version = json.loads(kube_cluster.kubectl("version", "-o", "json").stdout)
    assert (version["clientVersion"]["gitVersion"], version["serverVersion"]["gitVersion"]) == (PIN, PIN)
    # A Python client verifies the serving certificate against ca_file and authenticates with the token.
    context = ssl.create_default_context(cafile=str(kube_cluster.ca_file))
    request = urllib.request.Request(f"{kube_cluster.server}/version",
                                     headers={"Authorization": f"Bearer {kube_cluster.admin_token}"})
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        assert json.load(response)["gitVersion"] == PIN
    assert re.fullmatch(r"https://127\.0\.0\.1:\d+", kube_cluster.server)


def test_kubectl_failure_names_the_command_and_the_server_answer(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    with pytest.raises(KubectlError) as err:
        kube_cluster.kubectl("get", "pod", "missing", "-n", kube_namespace)
    assert str(err.value) == (f'kubectl get pod missing -n {kube_namespace} exited 1: '
                              f'Error from server (NotFound): pods "missing" not found')
    assert kube_cluster.kubectl("get", "pod", "missing", "-n", kube_namespace, check=False).returncode == 1


NODE = """\
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{topology.kubernetes.io/zone: zone-a, disktype: ssd}}
status:
  capacity: {{cpu: "8", memory: 16Gi, pods: "110"}}
  allocatable: {{cpu: 7500m, memory: 15Gi, pods: "110"}}
"""


def test_a_node_applied_with_kubectl_keeps_its_allocatable_and_gets_no_taint(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    name = f"{kube_namespace}-node"  # a node name may be 253 characters (a namespace at most 63)
    kube_cluster.kubectl("apply", "-f", "-", input=NODE.format(name=name))
    try:
        node = get_json(kube_cluster, "node", name)
        assert node["status"]["allocatable"] == {"cpu": "7500m", "memory": "15Gi", "pods": "110"}
        assert node["status"]["capacity"] == {"cpu": "8", "memory": "16Gi", "pods": "110"}
        assert node["metadata"]["labels"] == {"topology.kubernetes.io/zone": "zone-a", "disktype": "ssd"}
        assert "taints" not in node["spec"]  # no not-ready taint: no kubelet would ever lift it
    finally:
        kube_cluster.kubectl("delete", "node", name)


POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: web, namespace: {namespace}}}
spec:
  schedulerName: outrigger-test
  containers:
  - name: web
    image: registry.example/web:1
    resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}
"""


def test_a_pod_needs_no_default_service_account_and_stays_pending_once_bound(
        kube_cluster: LocalCluster, kube_namespace: str) -> None:
    kube_cluster.kubectl("apply", "-f", "-", input=POD.format(namespace=kube_namespace))
    pod = get_json(kube_cluster, "pod", "web", "-n", kube_namespace)
    assert (pod["status"]["phase"], pod["spec"].get("nodeName")) == ("Pending", None)
    # Admission that needs no controller still shapes the pod: DefaultTolerationSeconds, Priority.
    assert pod["spec"]["tolerations"] == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300},
    ]
    assert pod["spec"]["priority"] == 0
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "web", "namespace": kube_namespace},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}
    kube_cluster.kubectl("create", "-f", "-", input=json.dumps(binding))
    pod = get_json(kube_cluster, "pod", "web", "-n", kube_namespace)
    assert (pod["status"]["phase"], pod["spec"]["nodeName"]) == ("Pending", "node-a")
    # The API refuses a second binding: what makes "bound exactly once" hold.
    with pytest.raises(KubectlError) as err:
        kube_cluster.kubectl("create", "-f", "-", input=json.dumps(binding))
    assert 'pod web is already assigned to node "node-a"' in str(err.value)


def test_the_admin_kubeconfig_verifies_tls_with_the_cluster_ca(kube_cluster: LocalCluster) -> None:
    config = yaml.safe_load(kube_cluster.admin_kubeconfig.read_text())
    (cluster,) = config["clusters"]
    assert cluster["cluster"]["server"] == kube_cluster.server
    assert "insecure-skip-tls-verify" not in cluster["cluster"]
    assert kube_cluster.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout == (
        "outrigger-admin")


# ---- deploy/kubernetes/rbac.yaml on the real authorizer -----------------------------------------------


@pytest.fixture(scope="module")
def applied(kube_cluster: LocalCluster) -> list[str]:
    """What ``kubectl apply -k deploy/kubernetes`` created (no controller runs, so no pod starts)."""
    return kube_cluster.kubectl("apply", "-k", str(DEPLOY), "-o", "name").stdout.split()


@pytest.fixture(scope="module")
def outrigger_kubeconfig(kube_cluster: LocalCluster, applied: list[str]) -> Path:
    """The framework's service account, with exactly the RBAC of deploy/kubernetes/rbac.yaml."""
    return kube_cluster.service_account_kubeconfig("outrigger", "outrigger")


def test_the_whole_kustomization_applies_to_the_real_api_server(kube_cluster: LocalCluster,
                                                                 applied: list[str]) -> None:
    assert sorted(applied) == sorted([
        "namespace/outrigger", "serviceaccount/outrigger", "configmap/outrigger-config",
        "role.rbac.authorization.k8s.io/outrigger-leader-election",
        "clusterrole.rbac.authorization.k8s.io/outrigger-scheduler",
        "rolebinding.rbac.authorization.k8s.io/outrigger-leader-election",
        "clusterrolebinding.rbac.authorization.k8s.io/outrigger-scheduler",
        "clusterrole.rbac.authorization.k8s.io/outrigger-metrics-reader",
        "clusterrolebinding.rbac.authorization.k8s.io/outrigger-auth-delegator",
        "clusterrolebinding.rbac.authorization.k8s.io/outrigger-metrics-reader",
        *[f"{kind}/outrigger-{name}" for kind in ("service", "deployment.apps")
          for name in ("framework", "coscheduling", "nodelabels", "provisioner", "tierzone")],
    ])
    deploy = get_json(kube_cluster, "deployment", "outrigger-framework", "-n", "outrigger")
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == "outrigger"


CAN_I = [  # kubectl auth can-i ..., the answer
    ("create pods --subresource=binding -n default", "yes"),
    ("list nodes", "yes"),
    ("watch pods --all-namespaces", "yes"),
    ("create events.events.k8s.io -n default", "yes"),
    ("patch events -n default", "yes"),
    ("patch pods --subresource=status -n default", "yes"),
    ("delete pods -n default", "yes"),
    ("watch namespaces", "yes"),
    ("list poddisruptionbudgets.policy --all-namespaces", "yes"),
    ("list replicasets.apps --all-namespaces", "yes"),
    ("update persistentvolumeclaims -n default", "yes"),
    ("update persistentvolumes", "yes"),
    ("watch csinodes.storage.k8s.io", "yes"),
    ("list csistoragecapacities.storage.k8s.io --all-namespaces", "yes"),
    ("watch resourceslices.resource.k8s.io", "yes"),
    ("list deviceclasses.resource.k8s.io", "yes"),
    ("update resourceclaims.resource.k8s.io -n default", "yes"),
    ("update resourceclaims.resource.k8s.io --subresource=status -n default", "yes"),
    ("update resourceclaims.resource.k8s.io --subresource=binding -n default", "yes"),
    ("create resourceclaims.resource.k8s.io -n default", "yes"),
    ("delete resourceclaims.resource.k8s.io -n default", "yes"),
    ("deletecollection resourceclaims.resource.k8s.io -n default", "no"),
    ("watch podgroups.scheduling.k8s.io --all-namespaces", "yes"),
    ("patch podgroups.scheduling.k8s.io --subresource=status -n default", "yes"),
    ("update podgroups.scheduling.k8s.io -n default", "no"),
    ("list workloads.scheduling.k8s.io --all-namespaces", "no"),
    ("create leases.coordination.k8s.io -n outrigger", "yes"),
    ("update leases.coordination.k8s.io/outrigger -n outrigger", "yes"),
    ("update leases.coordination.k8s.io/other -n outrigger", "no"),
    ("update leases.coordination.k8s.io/kube-scheduler -n kube-system", "no"),
    ("create leases.coordination.k8s.io -n kube-system", "no"),
    ("create secrets -n default", "no"),
    ("get secrets -n outrigger", "no"),
    ("delete nodes", "no"),
    ("create pods -n default", "no"),
    ("update pods -n default", "no"),
    ("update nodes --subresource=status", "no"),
    # The secure port's delegated authentication and authorization (serving.yaml: system:auth-delegator).
    ("create tokenreviews.authentication.k8s.io", "yes"),
    ("create subjectaccessreviews.authorization.k8s.io", "yes"),
]


@pytest.mark.parametrize(("question", "answer"), CAN_I, ids=[q for q, _ in CAN_I])
def test_the_outrigger_service_account_can_do_what_scheduling_needs_and_nothing_else(
        kube_cluster: LocalCluster, outrigger_kubeconfig: Path, question: str, answer: str) -> None:
    out = kube_cluster.kubectl("auth", "can-i", *question.split(), kubeconfig=outrigger_kubeconfig, check=False)
    if "podgroups.scheduling.k8s.io" in question and not kube_cluster.workload_api:
        # 1.35 serves no PodGroups: kubectl cannot map the type, says so and answers no (the grant itself is
        # checked on every release by the test below).
        assert (out.stdout.strip(), out.returncode, out.stderr.strip()) == (
            "no", 1, "Warning: the server doesn't have a resource type 'podgroups' in group 'scheduling.k8s.io'")
        return
    assert (out.stdout.strip(), out.returncode) == (answer, 0 if answer == "yes" else 1), out.stderr


def grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """(apiGroup, resource, verb, resourceName or "*") for every combination the rules allow."""
    return {(g, r, v, n) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"] for n in rule.get("resourceNames") or ["*"]}


def test_every_grant_is_one_kube_schedulers_own_roles_hold_except_the_lease_name_and_custom_resources(
        kube_cluster: LocalCluster, outrigger_kubeconfig: Path) -> None:
    theirs = set()
    for role in ("system:kube-scheduler", "system:volume-scheduler"):
        theirs |= grants(get_json(kube_cluster, "clusterrole", role)["rules"])
    ours = grants(get_json(kube_cluster, "clusterrole", "outrigger-scheduler")["rules"])
    ours |= grants(get_json(kube_cluster, "role", "outrigger-leader-election", "-n", "outrigger")["rules"])
    expected = {
        ("coordination.k8s.io", "leases", "get", "outrigger"),
        ("coordination.k8s.io", "leases", "update", "outrigger"),
        # A custom resource a plugin registers events for (Coscheduling's PodGroups), watched as
        # kube-scheduler's dynamic informers do: its own deployments grant it the same way.
        ("scheduling.x-k8s.io", "podgroups", "list", "*"),
        ("scheduling.x-k8s.io", "podgroups", "watch", "*"),
    }
    # A claim's allocation needs resourceclaims/binding from 1.36 (kube-scheduler's role has it there);
    # the same rbac.yaml serves every release, so on 1.35, whose role lacks it, it is one more.
    for verb in ("update", "patch"):  # PreBind's update of the status, Unreserve's patch
        binding = ("resource.k8s.io", "resourceclaims/binding", verb, "*")
        if binding not in theirs:
            expected.add(binding)
    # Creating and deleting claims (DRAExtendedResource) are in kube-scheduler's role from 1.36 (beta, on).
    for verb in ("create", "delete"):
        made = ("resource.k8s.io", "resourceclaims", verb, "*")
        if made not in theirs:
            expected.add(made)
    # DeviceTaintRules are in kube-scheduler's role from 1.37 (DRADeviceTaintRules GA); the same rbac.yaml
    # grants them on 1.36 and 1.35, where resource.k8s.io/v1 does not serve them (Outrigger warns, does not watch).
    for verb in ("get", "list", "watch"):
        rules = ("resource.k8s.io", "devicetaintrules", verb, "*")
        if rules not in theirs:
            expected.add(rules)
    # PodGroups are in kube-scheduler's role only where the API server runs with GenericWorkload (the suite's
    # from 1.36 on); on 1.35 the rules are more (and authorize nothing that is served there).
    pod_groups = {("scheduling.k8s.io", "podgroups", verb, "*") for verb in ("get", "list", "watch")} | {
        ("scheduling.k8s.io", "podgroups/status", "patch", "*")}
    expected |= pod_groups - theirs
    assert {g for g in ours if g not in theirs} == expected
    # And the scheduling essentials are all there.
    assert {("", "pods/binding", "create", "*"), ("", "pods/status", "patch", "*"), ("", "nodes", "watch", "*"),
            ("events.k8s.io", "events", "create", "*"), ("", "pods", "delete", "*")} <= ours


# ---- lifecycle ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("graceful", [True, False], ids=["sigterm", "sigkill"])
def test_restarting_the_api_server_keeps_every_object(kube_cluster: LocalCluster, kube_namespace: str,
                                                      graceful: bool) -> None:
    kube_cluster.kubectl("create", "configmap", "kept", "-n", kube_namespace, "--from-literal=answer=42")
    before = get_json(kube_cluster, "configmap", "kept", "-n", kube_namespace)
    kubeconfig = kube_cluster.service_account_kubeconfig(kube_namespace, "reader",
                                                         cluster_roles=["system:kube-scheduler"])
    server = kube_cluster.server
    kube_cluster.restart_apiserver(graceful=graceful)
    after = get_json(kube_cluster, "configmap", "kept", "-n", kube_namespace)
    assert kube_cluster.server == server
    assert (after["data"], after["metadata"]["uid"], after["metadata"]["resourceVersion"]) == (
        {"answer": "42"}, before["metadata"]["uid"], before["metadata"]["resourceVersion"])
    # A token issued before the restart still authenticates (same signing key, same etcd).
    out = kube_cluster.kubectl("get", "pods", "-n", kube_namespace, "-o", "name", kubeconfig=kubeconfig)
    assert (out.stdout, out.stderr) == ("", "")  # not "Unauthorized"


def cluster_processes(workdir: Path) -> list[str]:
    """The command lines of running processes that name ``workdir`` (etcd and the API server do)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(workdir) in cmdline:
                found.append(cmdline)
    return found


def fake_bin_dir(folder: Path, apiserver: str | None) -> Path:
    """Real etcd and kubectl beside a kube-apiserver that is the given shell script (or none)."""
    folder.mkdir()
    real = find_bin_dir()
    for name in ("etcd", "kubectl"):
        (folder / name).symlink_to(real / name)
    if apiserver is not None:
        (folder / "kube-apiserver").write_text(f"#!/bin/sh\n{apiserver}\n")
        (folder / "kube-apiserver").chmod(0o755)
    return folder


START_FAILURES = [
    ("missing", None, r"kube-apiserver not found in {bin}: build them with `make k8s` \(tests/k8s/build.sh\) "
                      r"or set OUTRIGGER_K8S_BIN"),
    ("exits", "echo 'E0101 run.go:72] command failed: etcd is on fire' >&2; exit 3",
     r"kube-apiserver exited with status 3 before ready \(/readyz\); the last lines of {work}/kube-apiserver.log:"
     r"\n---- kube-apiserver started at \d\d:\d\d:\d\d\nE0101 run.go:72\] command failed: etcd is on fire"),
]


@pytest.mark.parametrize(("case", "script", "message"), START_FAILURES, ids=[c[0] for c in START_FAILURES])
def test_a_start_failure_quotes_the_log_and_leaves_no_process(tmp_path: Path, case: str, script: str | None,
                                                              message: str) -> None:
    bin_dir, work = fake_bin_dir(tmp_path / "bin", script), tmp_path / "work"
    with pytest.raises(ClusterError) as err:
        LocalCluster.start(work, bin_dir=bin_dir, timeout=30)
    assert re.fullmatch(message.format(bin=re.escape(str(bin_dir)), work=re.escape(str(work))), str(err.value))
    assert cluster_processes(work) == []


def test_stop_ends_both_processes_and_is_idempotent(tmp_path: Path) -> None:
    cluster = LocalCluster.start(tmp_path)
    assert len(cluster_processes(tmp_path)) == 2
    cluster.stop()
    cluster.stop()
    assert cluster_processes(tmp_path) == []
    with pytest.raises(ClusterError, match=r"^the cluster was stopped$"):
        cluster.start_apiserver()
    assert os.path.exists(cluster.workdir / "etcd.log") and os.path.exists(cluster.workdir / "kube-apiserver.log")


def test_kubectl_is_the_built_one_not_the_system_one(kube_cluster: LocalCluster) -> None:
    out = kube_cluster.kubectl("version", "--client", "-o", "json")
    assert json.loads(out.stdout)["clientVersion"]["gitVersion"] == PIN
    assert isinstance(out, subprocess.CompletedProcess) and out.args[0] == str(kube_cluster.bin_dir / "kubectl")
