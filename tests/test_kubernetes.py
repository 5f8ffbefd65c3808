"""The Kubernetes manifests in deploy/kubernetes, checked on paper (nothing is deployed).

Every document is well-formed; Deployments select their own pods; Services select an existing
Deployment and name ports its containers expose; probes and mounts point at real ports and volumes;
the framework's command line parses with ``outrigger``'s parser, and the configuration it is given
(the ConfigMap) loads with the project's own loaders; the RemotePlugins endpoints are headless
Services in front of plugin hosts that listen where the framework dials and serve the plugins its
profiles name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_deploy import NODE_SERVER, argv_of, compose, dockerfile, flag, last, node_flags, node_points

from framework.cli import parser as outrigger_parser
from framework.config import LeaderElectionConfig
from framework.profiles import build_registry, load_scheduler_config
from framework.remote import parse_remote_plugins
from pluginhost.host import load_plugins

ROOT = Path(__file__).resolve().parent.parent
K8S = ROOT / "deploy" / "kubernetes"
NAMESPACE = "outrigger"
CLUSTER_DOMAIN = "svc.cluster.local"


def documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append(doc)
    return docs


def of_kind(kind: str) -> list[dict[str, Any]]:
    return [d for d in documents() if d["kind"] == kind]


def by_name(kind: str, name: str) -> dict[str, Any]:
    found = [d for d in of_kind(kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind} {name}: {len(found)} documents"
    return found[0]


def containers(deploy: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = deploy["spec"]["template"]["spec"]["containers"]
    return out


def container_ports(deploy: dict[str, Any]) -> dict[str, int]:
    """Name (or the number as a string) -> containerPort, over every container of the pod."""
    ports: dict[str, int] = {}
    for c in containers(deploy):
        for p in c.get("ports", []):
            ports[str(p["containerPort"])] = p["containerPort"]
            if "name" in p:
                assert p["name"] not in ports, f"{deploy['metadata']['name']}: port name {p['name']} twice"
                ports[p["name"]] = p["containerPort"]
    return ports


def selected(selector: dict[str, str]) -> list[dict[str, Any]]:
    """The Deployments whose pods carry every label of ``selector``."""
    return [d for d in of_kind("Deployment")
            if selector.items() <= d["spec"]["template"]["metadata"]["labels"].items()]


def image_argv(container: dict[str, Any]) -> list[str]:
    """What a container runs: its image's ENTRYPOINT/CMD (the Dockerfile compose builds the image
    from) overridden by the container's command/args, as Kubernetes does."""
    dockerfiles = {s["image"]: s["build"].get("dockerfile", "Dockerfile")
                   for s in compose()["services"].values() if "build" in s}
    assert container["image"] in dockerfiles, f"{container['image']} is not an image this repository builds"
    ins = dockerfile(dockerfiles[container["image"]])
    entrypoint = container.get("command") or argv_of(last(ins, "ENTRYPOINT").args)
    args = container.get("args") or ([] if "command" in container else argv_of(last(ins, "CMD").args))
    return [*entrypoint, *args]


def configmap_file(deploy: dict[str, Any], container: dict[str, Any], path: str) -> str:
    """The text a container sees at ``path`` through a ConfigMap volume."""
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    for mount in container.get("volumeMounts", []):
        prefix = mount["mountPath"].rstrip("/") + "/"
        if path.startswith(prefix):
            source = volumes[mount["name"]]
            assert "configMap" in source, f"{path} is mounted from {source}, not a ConfigMap"
            data: dict[str, str] = by_name("ConfigMap", source["configMap"]["name"])["data"]
            key = path[len(prefix):]
            assert key in data, f"{path}: the ConfigMap has no key {key!r}"
            return data[key]
    raise AssertionError(f"{path} is not mounted")


def framework() -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    deploy = by_name("Deployment", "outrigger-framework")
    (container,) = containers(deploy)
    return deploy, container, image_argv(container)


# ---- every document ---------------------------------------------------------------------------------


def test_every_document_has_api_version_kind_name_and_the_namespace() -> None:
    docs = documents()
    assert sorted((d["kind"], d["metadata"]["name"]) for d in docs) == sorted([
        ("Namespace", NAMESPACE),
        ("ConfigMap", "outrigger-config"),
        ("Deployment", "outrigger-framework"), ("Service", "outrigger-framework"),
        ("Deployment", "outrigger-coscheduling"), ("Service", "outrigger-coscheduling"),
        ("Deployment", "outrigger-nodelabels"), ("Service", "outrigger-nodelabels"),
        ("Deployment", "outrigger-provisioner"), ("Service", "outrigger-provisioner"),
        ("Deployment", "outrigger-tierzone"), ("Service", "outrigger-tierzone"),
        ("ServiceAccount", "outrigger"), ("ClusterRole", "outrigger-scheduler"),
        ("ClusterRoleBinding", "outrigger-scheduler"), ("Role", "outrigger-leader-election"),
        ("RoleBinding", "outrigger-leader-election"),
        ("ClusterRoleBinding", "outrigger-auth-delegator"), ("ClusterRole", "outrigger-metrics-reader"),
        ("ClusterRoleBinding", "outrigger-metrics-reader"),
    ])
    rbac = "rbac.authorization.k8s.io/v1"
    api = {"Namespace": "v1", "ConfigMap": "v1", "Service": "v1", "Deployment": "apps/v1", "ServiceAccount": "v1",
           "ClusterRole": rbac, "ClusterRoleBinding": rbac, "Role": rbac, "RoleBinding": rbac}
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
    for d in docs:
        assert d["apiVersion"] == api[d["kind"]], d["metadata"]["name"]
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", d["metadata"]["name"])
        if d["kind"] not in cluster_scoped:
            assert d["metadata"]["namespace"] == NAMESPACE, d["metadata"]["name"]
        else:
            assert "namespace" not in d["metadata"], d["metadata"]["name"]


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    files = sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(kustomization["resources"]) == files
    assert kustomization["resources"][0] == "namespace.yaml"  # the namespace exists before what lives in it


# ---- Deployments and Services ----------------------------------------------------------------------


def deployments() -> Iterator[dict[str, Any]]:
    yield from of_kind("Deployment")


@pytest.mark.parametrize("deploy", list(deployments()), ids=lambda d: d["metadata"]["name"])
def test_deployment_selects_its_own_pods_and_points_probes_and_mounts_at_what_exists(deploy: dict[str, Any]) -> None:
    spec = deploy["spec"]
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert selected(spec["selector"]["matchLabels"]) == [deploy]  # no other Deployment's pods match
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    ports = container_ports(deploy)
    volumes = {v["name"] for v in pod.get("volumes", [])}
    for c in containers(deploy):
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            if probe in c:
                port = (c[probe].get("grpc") or c[probe]["httpGet"])["port"]
                assert str(port) in ports, f"{c['name']}.{probe}: no such port"
        assert "readinessProbe" in c and "livenessProbe" in c
        for mount in c.get("volumeMounts", []):
            assert mount["name"] in volumes, f"{c['name']}: volume {mount['name']} is not defined"
        assert c["securityContext"]["allowPrivilegeEscalation"] is False


@pytest.mark.parametrize("service", of_kind("Service"), ids=lambda s: s["metadata"]["name"])
def test_service_selects_one_deployment_and_targets_ports_it_exposes(service: dict[str, Any]) -> None:
    targets = selected(service["spec"]["selector"])
    assert len(targets) == 1, f"{service['metadata']['name']} selects {len(targets)} Deployments"
    ports = container_ports(targets[0])
    for p in service["spec"]["ports"]:
        assert str(p.get("targetPort", p["port"])) in ports, f"{service['metadata']['name']}: port {p}"


# ---- the framework and its configuration ------------------------------------------------------------


def test_framework_runs_two_replicas_on_the_cluster_with_a_command_line_the_cli_accepts() -> None:
    deploy, container, argv = framework()
    # Two replicas, one leading; a rolling update keeps a standby while pods are replaced.
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["strategy"] == {"type": "RollingUpdate",
                                          "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert argv[0] == "outrigger"
    args = outrigger_parser().parse_args(argv[1:])
    assert args.command == "serve" and args.in_cluster is True and args.kubeconfig is None
    assert str(int(args.listen.rsplit(":", 1)[1])) in container_ports(deploy)
    # Plugin hosts reach the replica that handshook them (the leader) at its own pod's address, which
    # Kubernetes puts into the argument from the downward API.
    service = by_name("Service", "outrigger-framework")
    port = int(args.listen.rsplit(":", 1)[1])
    assert args.advertise == f"$(POD_IP):{port}"
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    # The secure port on every interface, its callers authenticated by the cluster; no plain HTTP port.
    assert args.http is None and args.bind_address == "0.0.0.0"
    secure = args.secure_port
    assert [p["port"] for p in service["spec"]["ports"]] == [port, secure]
    assert container_ports(deploy)["https"] == secure
    annotations = deploy["spec"]["template"]["metadata"]["annotations"]
    assert (annotations["prometheus.io/port"], annotations["prometheus.io/scheme"]) == (str(secure), "https")
    for probe, path in (("startupProbe", "/livez"), ("readinessProbe", "/readyz"), ("livenessProbe", "/livez")):
        assert container[probe]["httpGet"] == {"path": path, "port": secure, "scheme": "HTTPS"}, probe


def test_configmap_scheduler_config_loads_with_the_plugins_the_hosts_serve(tmp_path: Path) -> None:
    deploy, container, argv = framework()
    config = tmp_path / "scheduler.yaml"
    config.write_text(configmap_file(deploy, container, flag(argv, "--config")))
    registry = build_registry()
    for d in deployments():
        if d["metadata"]["labels"].get("app.kubernetes.io/component") != "plugin-host":
            continue
        argv = image_argv(containers(d)[0])
        if argv[0] == "node":  # the Node.js host serves TierZone
            assert argv[1] == NODE_SERVER
            registry.register("TierZone", lambda args, handle: None, node_points())  # type: ignore[arg-type,return-value]
        else:
            for cls in load_plugins(argv[3]):
                registry.register_class(cls)
    cfg = load_scheduler_config(config, registry)
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler", "gang-scheduler", "tier-scheduler"]
    gang = cfg.profile("gang-scheduler")
    assert gang is not None
    assert gang.names("permit") == ["Coscheduling"] and gang.names("preBind")[-1] == "Provisioner"
    assert gang.names("filter")[-1] == "NodeLabels"
    # Leader election on the Lease that rbac.yaml's Role lets the framework's account get and update.
    assert cfg.leader_election == LeaderElectionConfig(resource_namespace=NAMESPACE, resource_name="outrigger")
    (named,) = [r for r in by_name("Role", "outrigger-leader-election")["rules"] if r.get("resourceNames")]
    assert named["resourceNames"] == ["outrigger"] and by_name("Role", "outrigger-leader-election")["metadata"][
        "namespace"] == NAMESPACE
    # The same profiles as docker-compose.yml's, but for two differences: compose runs no API server, so
    # no leader election; and its upstream-scheduler profile needs the Go adapter, which only compose
    # runs (the `upstream` service).
    deployed = yaml.safe_load(config.read_text())
    assert deployed.pop("leaderElection") == {"leaderElect": True, "resourceNamespace": NAMESPACE,
                                              "resourceName": "outrigger"}
    compose_config = yaml.safe_load((ROOT / "deploy" / "compose" / "scheduler.yaml").read_text())
    assert "leaderElection" not in compose_config
    compose_config["profiles"] = [p for p in compose_config["profiles"] if p["schedulerName"] != "upstream-scheduler"]
    assert deployed == compose_config


def test_remote_plugins_are_headless_services_of_hosts_listening_where_the_framework_dials() -> None:
    deploy, container, argv = framework()
    endpoints = parse_remote_plugins(configmap_file(deploy, container, flag(argv, "--plugins")), "outrigger-config")
    assert [ep.name for ep in endpoints] == ["coscheduling", "nodelabels", "provisioner", "tierzone"]
    advertise = outrigger_parser().parse_args(argv[1:]).advertise
    hosts = []
    for ep in endpoints:
        (address,) = ep.addresses
        m = re.fullmatch(rf"dns:///([a-z0-9-]+)\.([a-z0-9-]+)\.{re.escape(CLUSTER_DOMAIN)}:(\d+)", address)
        assert m is not None, f"{ep.name}: {address} is not dns:///service.namespace.{CLUSTER_DOMAIN}:port"
        name, namespace, port = m.group(1), m.group(2), int(m.group(3))
        assert namespace == NAMESPACE
        service = by_name("Service", name)
        assert service["spec"]["clusterIP"] == "None", f"{name} is not headless"
        (svc_port,) = service["spec"]["ports"]
        assert svc_port["port"] == port
        (target,) = selected(service["spec"]["selector"])
        (c,) = containers(target)
        host_argv = image_argv(c)
        if host_argv[0] == "node":
            assert host_argv[1] == NODE_SERVER and {a for a in host_argv if a.startswith("--")} <= node_flags()
            listen, fixed = flag(host_argv, "--listen"), "--framework" in host_argv
        else:
            assert host_argv[1:3] == ["plugin", "serve"]
            args = outrigger_parser().parse_args(host_argv[1:])
            listen, fixed = args.listen, bool(args.framework)
        # A headless Service does no port mapping: the host must listen on the port dialled.
        assert listen == f"0.0.0.0:{port}" and container_ports(target)[str(svc_port["targetPort"])] == port
        # No fixed framework address: a host follows the replica that handshakes it (the leader), at the
        # address it sends (--advertise, the leader pod's own).
        assert not fixed and advertise == "$(POD_IP):50051"
        hosts.append((name, target["spec"]["replicas"]))
    assert hosts == [("outrigger-coscheduling", 2), ("outrigger-nodelabels", 3), ("outrigger-provisioner", 1),
                     ("outrigger-tierzone", 2)]
