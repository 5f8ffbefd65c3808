"""outrigger: run the framework service, talk to it, explain a placement, run the demo.

Examples:
  outrigger serve --config scheduler.yaml --listen 127.0.0.1:50051
  outrigger serve --config scheduler.yaml --plugins remote-plugins.yaml
  outrigger plugin serve pluginhost.examples.coscheduling:Coscheduling --listen 127.0.0.1:50061
  export OUTRIGGER_SERVER=127.0.0.1:50051        # or --server ADDR on every command
  outrigger apply -f cluster.yaml --wait
  outrigger get pods
  outrigger get nodes -o yaml
  outrigger get waiting
  outrigger explain web
  outrigger explain --config scheduler.yaml --cluster cluster.yaml -f pod.yaml -o json
  outrigger explain --what-if-nodes template.yaml --count 3
  outrigger get reservations
  outrigger watch --timeout 60
  outrigger delete pod web
  outrigger demo
  outrigger serve --tls-cert fw.pem --tls-key fw-key.pem --tls-client-ca ca.pem   # docs/security.md
  outrigger get pods --tls-ca ca.pem --tls-cert me.pem --tls-key me-key.pem

Run `outrigger COMMAND --help` for a command's flags and examples.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import yaml

from pluginhost.manifest import ManifestError, load_documents, parse_objects
from pluginhost.model import Node, Pod, Reservation
from pluginhost.quantity import format_quantity
from pluginhost.security import TLSConfigError

from .config import ConfigError, SchedulerConfig
from .observe.serving import add_serving_flags
from .plugins import PluginArgsError, Registry
from .profiles import build_registry, default_scheduler_config, load_scheduler_config
from .progress import ProgressBar
from .remote import EndpointConfig, RemotePluginsError, load_remote_plugins
from .security import add_client_flags, add_plugin_host_flags, add_server_flags, client_tls, server_tls

if TYPE_CHECKING:
    from clients.client import SchedulerClient

__all__ = ["COMMANDS", "Command", "command", "main", "parser"]

DEFAULT_SERVER = "127.0.0.1:50051"
SERVER_ENV = "OUTRIGGER_SERVER"
OUTPUTS = ("table", "json", "yaml")
# Objects per Apply request when a large apply is sent in parts (so a progress bar can move).
APPLY_CHUNK = 500


class UserError(Exception):
    """A mistake in the command line or its inputs: printed as one line, exit code 1."""


# ---- the command registry -------------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    """One ``outrigger`` subcommand: its flags (``arguments``), what it does (``run``) and the examples
    its ``--help`` shows."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    examples: str = ""


COMMANDS: dict[str, Command] = {}


def command(name: str, help: str, arguments: Callable[[argparse.ArgumentParser], None],
            examples: str = "") -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """Register a subcommand (in definition order)::

        def _hello_args(p: argparse.ArgumentParser) -> None:
            add_server(p)

        @command("hello", "say hello to the framework", _hello_args, examples="outrigger hello")
        def cmd_hello(args: argparse.Namespace) -> int:
            ...
    """

    def register(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        if name in COMMANDS:
            raise ValueError(f"command {name!r} is registered twice")
        COMMANDS[name] = Command(name, help, arguments, fn, examples)
        return fn

    return register


# ---- shared flags and helpers ---------------------------------------------------------------------


def add_server(p: argparse.ArgumentParser) -> None:
    """``--server ADDR``: the framework to talk to (default $OUTRIGGER_SERVER, else 127.0.0.1:50051)."""
    default = os.environ.get(SERVER_ENV) or DEFAULT_SERVER
    p.add_argument("--server", metavar="ADDR", default=default,
                   help=f"framework service address (default ${SERVER_ENV}, else {DEFAULT_SERVER}; now {default})")
    add_client_flags(p)  # --tls, --tls-ca, --tls-cert, --tls-key, --tls-server-name


def add_output(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", choices=OUTPUTS, default="table", help="output format (default table)")


def add_filename(p: argparse.ArgumentParser, help: str, *, required: bool = False) -> None:
    p.add_argument("-f", "--filename", action="append", metavar="FILE", required=required, default=None,
                   help=help + " (repeatable; - for stdin)")


def add_namespace(p: argparse.ArgumentParser, default: str) -> None:
    p.add_argument("-n", "--namespace", default=default,
                   help=f"namespace (default {default})" if default else "namespace (default: all)")


def _read(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"cannot read {path}: not UTF-8 text") from None


def _config(path: str | None, registry: Registry) -> SchedulerConfig:
    cfg = load_scheduler_config(path, registry) if path else default_scheduler_config(registry)
    for w in cfg.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return cfg


def _endpoints(path: str | None) -> list[EndpointConfig]:
    return load_remote_plugins(path) if path else []


@contextmanager
def _client(args: argparse.Namespace) -> Iterator[SchedulerClient]:
    from clients.client import SchedulerClient

    with SchedulerClient(args.server, tls=client_tls(args)) as c:
        yield c


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Rows as an aligned plain-text table (kubectl style)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def emit(output: str, data: Any, as_table: Callable[[], str]) -> None:
    """Print ``data`` as JSON or YAML, or ``as_table()`` for ``-o table``."""
    if output == "json":
        print(json.dumps(data, indent=2))
    elif output == "yaml":
        print(yaml.safe_dump(data, sort_keys=False, default_flow_style=False), end="")
    else:
        print(as_table())


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---- serve, plugin serve --------------------------------------------------------------------------


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="KubeSchedulerConfiguration file (default: kube-scheduler's defaults)")
    p.add_argument("--listen", default=DEFAULT_SERVER, help=f"address to serve on (default {DEFAULT_SERVER})")
    p.add_argument("--plugins", metavar="FILE", help="RemotePlugins document: remote plugin endpoints")
    p.add_argument("--advertise", metavar="ADDR",
                   help="address plugin hosts use to reach this framework (default: the bound address)")
    p.add_argument("--http", metavar="ADDR",
                   help="also serve the secure port's endpoints over plain HTTP on ADDR, without TLS or "
                        "authentication: for local use (a loopback address)")
    p.add_argument("--debug-scores", type=int, default=0, metavar="N",
                   help="log (and keep) the top N nodes' per-plugin scores of each pod (0: off; switchable "
                        "over HTTP)")
    p.add_argument("--trace-exporter", metavar="NAMES",
                   help="otlp, console or none, comma-separated (default: $OTEL_TRACES_EXPORTER, else none)")
    p.add_argument("--otlp-endpoint", metavar="URL",
                   help="OTLP/gRPC collector (default: $OTEL_EXPORTER_OTLP_ENDPOINT, else localhost:4317)")
    p.add_argument("--service-name", help="service.name of the spans (default: $OTEL_SERVICE_NAME, else "
                                          "outrigger-framework)")
    p.add_argument("--trace-sampler", help="default: $OTEL_TRACES_SAMPLER, else parentbased_always_on")
    p.add_argument("--trace-sampler-arg", help="the ratio of *traceidratio samplers ($OTEL_TRACES_SAMPLER_ARG)")
    p.add_argument("--trace-store", type=int, metavar="N",
                   help="keep the last N traces in process for `outrigger trace` (turns tracing on)")
    p.add_argument("--kubeconfig", metavar="PATH",
                   help="schedule the Kubernetes cluster of this kubeconfig (default: the configuration's "
                        "clientConnection.kubeconfig; without either, the embedded store)")
    p.add_argument("--in-cluster", action="store_true",
                   help="schedule the cluster this pod runs in, with its service account")
    add_server_flags(p, "clients and plugin hosts")
    add_serving_flags(p)


@command("serve", "run the framework service", _serve_args, examples="""\
  outrigger serve                                   # kube-scheduler's default profile on 127.0.0.1:50051
  outrigger serve --config scheduler.yaml --listen 0.0.0.0:50051
  outrigger serve --config scheduler.yaml --plugins remote-plugins.yaml
  outrigger serve --http 127.0.0.1:10251 --trace-store 1000 --debug-scores 5
  outrigger serve --bind-address 0.0.0.0 --token-auth-file tokens.csv   # HTTPS on 10259 (docs/security.md)
  outrigger serve --config scheduler.yaml --kubeconfig ~/.kube/config   # a live cluster (docs/kubernetes.md)
  OTEL_TRACES_EXPORTER=otlp OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 outrigger serve""")
def cmd_serve(args: argparse.Namespace) -> int:
    from .observability import ObservabilityConfig
    from .observe.serving import ServingConfigError, serving_config
    from .service import serve
    from .tracing import TracingConfig, TracingConfigError

    endpoints = _endpoints(args.plugins)
    try:
        tracing = TracingConfig.from_env(
            exporters=args.trace_exporter, endpoint=args.otlp_endpoint, service_name=args.service_name,
            sampler=args.trace_sampler, sampler_arg=args.trace_sampler_arg, store=args.trace_store,
        )
    except TracingConfigError as exc:
        raise UserError(str(exc)) from None
    if args.debug_scores < 0:
        raise UserError(f"--debug-scores must be >= 0, got {args.debug_scores}")
    from .kube import source as kube

    kubeconfig = args.kubeconfig or kube.configured_kubeconfig(args.config)
    try:
        secure = serving_config(args, kubeconfig)  # delegates to the cluster it schedules
    except ServingConfigError as exc:
        raise UserError(str(exc)) from None
    obs = ObservabilityConfig(tracing=tracing if tracing.enabled else None, http=args.http,
                              debug_scores=args.debug_scores, secure=secure)
    try:
        if kubeconfig or args.in_cluster:
            _run(kube.serve_cluster(lambda registry: _config(args.config, registry), args.listen, endpoints,
                                    args.advertise, obs, tls=server_tls(args), kubeconfig=kubeconfig,
                                    in_cluster=args.in_cluster))
        else:
            _run(serve(lambda registry: _config(args.config, registry), args.listen, endpoints, args.advertise, obs,
                       tls=server_tls(args)))
    except (OSError, kube.KubeConfigError, ServingConfigError) as exc:
        raise UserError(str(exc)) from None
    return 0


def _plugin_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="plugin_command", required=True, metavar="COMMAND")
    ps = sub.add_parser("serve", help="serve plugin classes over gRPC",
                        formatter_class=argparse.RawDescriptionHelpFormatter, epilog="""examples:
  outrigger plugin serve pluginhost.examples.coscheduling:Coscheduling --listen 127.0.0.1:50061
  outrigger plugin serve mypackage.plugins:PLUGINS --framework 127.0.0.1:50051""")
    ps.add_argument("target", metavar="MODULE:ATTR", help="a plugin class, or a list of them (or a function)")
    ps.add_argument("--listen", default="127.0.0.1:50061", help="address to serve on (default 127.0.0.1:50061)")
    ps.add_argument("--framework", metavar="ADDR",
                    help="the framework's address (default: the one it announces when it connects)")
    add_server_flags(ps, "the framework")
    add_plugin_host_flags(ps)


@command("plugin", "host plugins for a framework (a sidecar)", _plugin_args, examples="""\
  outrigger plugin serve pluginhost.examples.coscheduling:Coscheduling --listen 127.0.0.1:50061""")
def cmd_plugin(args: argparse.Namespace) -> int:
    from pluginhost.host import PluginDefinitionError, load_plugins, serve

    from .security import plugin_host_security

    try:
        plugins = load_plugins(args.target)
        serve(plugins, args.listen, args.framework, **plugin_host_security(args))
    except PluginDefinitionError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"cannot serve on {args.listen}: {exc}") from None
    return 0


# ---- apply, delete --------------------------------------------------------------------------------


def _apply_args(p: argparse.ArgumentParser) -> None:
    add_filename(p, "manifest file (YAML or JSON; Pods, Nodes and Reservations)", required=True)
    add_server(p)
    p.add_argument("--dry-run", action="store_true", help="validate only, change nothing")
    p.add_argument("--wait", action="store_true", help="wait until every applied pod is bound")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="how long --wait waits (default 120)")
    add_output(p)


@command("apply", "create or update pods, nodes and reservations from manifests", _apply_args, examples="""\
  outrigger apply -f cluster.yaml
  outrigger apply -f nodes.yaml -f pods.yaml --wait --timeout 60
  outrigger apply -f pods.yaml --dry-run -o json
  kubectl get pods -o yaml | outrigger apply -f -""")
def cmd_apply(args: argparse.Namespace) -> int:
    manifests = [(path, _read(path)) for path in args.filename]
    # Parsed here too: a bad file is reported before anything is sent, and a large apply can be split.
    objects = [(path, obj) for path, text in manifests for _, obj in load_documents(text, path)]
    with _client(args) as c:
        if args.dry_run or len(objects) <= APPLY_CHUNK:
            applied = c.apply_manifests(manifests, dry_run=args.dry_run)
        else:
            # All or nothing, as one request would be: validate everything first, then apply in parts.
            c.apply_manifests(manifests, dry_run=True)
            applied = []
            bar = ProgressBar(len(objects), "applying")
            for i in range(0, len(objects), APPLY_CHUNK):
                part = objects[i:i + APPLY_CHUNK]
                applied += c.apply([o for _, o in part], source=", ".join(dict.fromkeys(s for s, _ in part)))
                bar.update(i + len(part), "objects")
            bar.close()
        suffix = " (dry run)" if args.dry_run else ""
        emit(args.output, [a.to_dict() for a in applied],
             lambda: "\n".join(f"{a.ref} {a.action}{suffix}" for a in applied))
        if args.wait and not args.dry_run:
            pods = [a.ref for a in applied if a.ref.kind == "Pod"]
            _wait_bound(c, [(r.namespace, r.name) for r in pods], args.timeout, args.output == "table")
    return 0


def _wait_bound(c: SchedulerClient, pods: list[tuple[str, str]], timeout: float, report: bool) -> None:
    """Poll until every pod is bound (bounded by ``timeout``); a progress bar on a terminal."""
    if not pods:
        return
    wanted = set(pods)
    bar = ProgressBar(len(wanted), "binding")
    deadline = time.monotonic() + timeout
    states: dict[tuple[str, str], Any] = {}
    while True:
        states = {(p.ref.namespace, p.ref.name): p for p in c.list_pods() if (p.ref.namespace, p.ref.name) in wanted}
        bound = sorted(k for k, p in states.items() if p.phase == "Bound")
        bar.update(len(bound), "pods bound")
        if len(bound) == len(wanted) or time.monotonic() >= deadline:
            break
        time.sleep(min(0.2, max(deadline - time.monotonic(), 0.0)))
    bar.close()
    waiting = [k for k in pods if k not in states or states[k].phase != "Bound"]
    if waiting:
        shown = [f"{ns}/{name} ({_why(states.get((ns, name)))})" for ns, name in waiting[:5]]
        more = f" and {len(waiting) - 5} more" if len(waiting) > 5 else ""
        raise UserError(f"{len(waiting)} of {len(wanted)} pods not bound after {timeout:g}s: "
                        f"{'; '.join(shown)}{more}")
    if report:
        for ns, name in pods:
            print(f"pod/{ns}/{name} bound to {states[(ns, name)].node_name}")


def _why(state: Any) -> str:
    if state is None:
        return "deleted"
    return f"{state.phase}: {state.reason}" if state.reason else state.phase


_KINDS = {"pod": "Pod", "pods": "Pod", "node": "Node", "nodes": "Node", "reservation": "Reservation",
          "reservations": "Reservation"}


def _delete_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", nargs="?", choices=sorted(_KINDS), help="pod, node or reservation")
    p.add_argument("names", nargs="*", metavar="NAME")
    add_filename(p, "delete the objects in this manifest")
    add_namespace(p, "default")
    add_server(p)


@command("delete", "delete pods, nodes or reservations", _delete_args, examples="""\
  outrigger delete pod web
  outrigger delete reservation web-reserve
  outrigger delete pods web-0 web-1 -n shop
  outrigger delete node n7
  outrigger delete -f pods.yaml""")
def cmd_delete(args: argparse.Namespace) -> int:
    targets: list[tuple[str, str, str]] = []  # kind, namespace, name
    if args.filename:
        if args.kind or args.names:
            raise UserError("delete takes either KIND NAME... or -f FILE, not both")
        for path in args.filename:
            for obj in parse_objects(_read(path), path):
                if isinstance(obj, Pod):
                    targets.append(("Pod", obj.namespace, obj.name))
                else:
                    targets.append(("Reservation" if isinstance(obj, Reservation) else "Node", "", obj.name))
    elif args.kind and args.names:
        kind = _KINDS[args.kind]
        targets = [(kind, args.namespace if kind == "Pod" else "", n) for n in args.names]
    else:
        raise UserError("delete needs KIND NAME... (e.g. `delete pod web`) or -f FILE")
    missing = []
    with _client(args) as c:
        for kind, ns, name in targets:
            if kind == "Reservation":
                found = c.delete_reservation(name)
            else:
                found = c.delete_pod(name, ns) if kind == "Pod" else c.delete_node(name)
            key = f"{ns}/{name}" if ns else name
            if found:
                print(f"{kind.lower()}/{key} deleted")
            else:
                missing.append(f"{kind.lower()} {key}")
    if missing:
        raise UserError(f"not found: {', '.join(missing)}")
    return 0


# ---- get ------------------------------------------------------------------------------------------


def _get_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", choices=["pods", "pod", "nodes", "node", "waiting", "reservations", "reservation"],
                   help="pods, nodes, reservations, or waiting (pods held in Permit)")
    p.add_argument("name", nargs="?", help="one pod or node")
    add_namespace(p, "")
    p.add_argument("--phase", default="", help="pods: only this phase (Pending, Unschedulable, Waiting, Bound...)")
    p.add_argument("--profile", default="", help="waiting: only pods of this profile")
    add_output(p)
    add_server(p)


@command("get", "show pods, nodes, reservations or pods waiting in Permit", _get_args, examples="""\
  outrigger get pods
  outrigger get reservations -o json
  outrigger get pods -n shop --phase Unschedulable
  outrigger get pod web -o yaml
  outrigger get nodes -o json
  outrigger get waiting --profile gang-scheduler""")
def cmd_get(args: argparse.Namespace) -> int:
    with _client(args) as c:
        if args.kind in ("pods", "pod"):
            if args.name:
                pods = [c.get_pod(args.name, args.namespace or "default")]
            else:
                pods = c.list_pods(namespace=args.namespace, phase=args.phase)
            data: Any = [p.to_dict() for p in pods]
            if args.name:
                data = data[0]
            emit(args.output, data, lambda: pods_table(pods))
        elif args.kind in ("nodes", "node"):
            nodes = c.list_nodes()
            if args.name:
                nodes = [n for n in nodes if n.name == args.name]
                if not nodes:
                    raise UserError(f"node {args.name!r} not found")
            data = [n.to_dict() for n in nodes]
            emit(args.output, data[0] if args.name else data, lambda: nodes_table(nodes))
        elif args.kind in ("reservations", "reservation"):
            found = c.list_reservations()
            if args.name:
                found = [r for r in found if r.name == args.name]
                if not found:
                    raise UserError(f"reservation {args.name!r} not found")
            data = [r.to_dict() for r in found]
            emit(args.output, data[0] if args.name else data, lambda: reservations_table(found))
        else:
            if args.name:
                raise UserError("get waiting lists every waiting pod; it takes no NAME (see --profile)")
            waiting = c.list_waiting_pods(profile=args.profile)
            emit(args.output, [w.to_dict() for w in waiting], lambda: waiting_table(waiting))
    return 0


def pods_table(pods: Sequence[Any]) -> str:
    rows = [(p.ref.namespace, p.ref.name, p.phase, p.node_name or "<none>", p.attempts, p.reason) for p in pods]
    return table(("NAMESPACE", "NAME", "PHASE", "NODE", "ATTEMPTS", "REASON"), rows)


def nodes_table(nodes: Sequence[Any]) -> str:
    def usage(n: Any, resource: str) -> str:
        return (f"{format_quantity(resource, n.requested.get(resource, 0))}/"
                f"{format_quantity(resource, n.allocatable.get(resource, 0))}")

    rows = [(n.name, "SchedulingDisabled" if n.unschedulable else "Ready", n.pods, usage(n, "cpu"),
             usage(n, "memory"), ",".join(n.taints)) for n in nodes]
    return table(("NAME", "STATUS", "PODS", "CPU", "MEMORY", "TAINTS"), rows)


def reservations_table(reservations: Sequence[Any]) -> str:
    def amounts(values: dict[str, int]) -> str:
        return ",".join(f"{r}={format_quantity(r, a)}" for r, a in sorted(values.items())) or "-"

    rows = [(r.name, r.phase, r.node_name or "<none>", amounts(r.reserved), amounts(r.allocated),
             ",".join(r.owners) or "-", _utc(r.expires_at) if r.expires_at else "never", r.reason)
            for r in reservations]
    return table(("NAME", "PHASE", "NODE", "RESERVED", "ALLOCATED", "OWNERS", "EXPIRES", "REASON"), rows)


def waiting_table(waiting: Sequence[Any]) -> str:
    rows = [(w.ref.namespace, w.ref.name, w.node_name, ",".join(w.pending_plugins), w.profile, _utc(w.deadline))
            for w in waiting]
    return table(("NAMESPACE", "NAME", "NODE", "WAITING FOR", "PROFILE", "DEADLINE"), rows)


# ---- explain --------------------------------------------------------------------------------------


def _explain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", metavar="POD", help="a pod the framework holds (asks --server)")
    add_filename(p, "a pod manifest to explain")
    p.add_argument("--pod", metavar="FILE", help=argparse.SUPPRESS)  # the older spelling of -f
    add_namespace(p, "default")
    p.add_argument("--profile", help="profile (default: the pod's schedulerName)")
    add_server(p)
    p.add_argument("--cluster", metavar="FILE", help="offline: nodes and bound pods, instead of a server")
    p.add_argument("--config", metavar="FILE", help="offline: KubeSchedulerConfiguration file")
    p.add_argument("--plugins", metavar="FILE", help="offline: RemotePlugins document")
    p.add_argument("--what-if-nodes", metavar="FILE",
                   help="a Node manifest: which pending pods would fit if --count nodes like it were added")
    p.add_argument("--count", type=int, default=1, help="how many what-if nodes (default 1)")
    add_output(p)


@command("explain", "why a pod lands where it does (or nowhere)", _explain_args, examples="""\
  outrigger explain web                              # a pod the framework at --server holds
  outrigger explain -f pod.yaml -o json              # a pod not applied yet, against the same cluster
  outrigger explain --config scheduler.yaml --cluster cluster.yaml -f pod.yaml   # offline, no server
  outrigger explain --what-if-nodes template.yaml --count 3    # which pending pods 3 such nodes admit""")
def cmd_explain(args: argparse.Namespace) -> int:
    files = list(args.filename or []) + ([args.pod] if args.pod else [])
    if args.what_if_nodes:
        return _what_if(args, files)
    if args.name and files:
        raise UserError("explain takes a pod name or -f FILE, not both")
    if len(files) > 1:
        raise UserError("explain takes one pod manifest (-f FILE)")
    if not args.name and not files:
        raise UserError("explain needs a pod: a name (a pod the framework holds) or -f FILE (a manifest)")
    if args.cluster:
        if args.name:
            raise UserError("offline explain (--cluster) needs the pod's manifest: -f FILE, not a name")
        result = _run(_explain_offline(args, files[0]))
    else:
        if args.config or args.plugins:
            raise UserError("--config and --plugins are for offline explain: add --cluster FILE")
        with _client(args) as c:
            if args.name:
                explanation = c.explain_pod(args.name, args.namespace, profile=args.profile or "")
            else:
                explanation = c.explain(_read(files[0]), source=files[0], profile=args.profile or "")
        result = explanation.to_dict()
    emit(args.output, result, lambda: _explain_table(result))
    return 0


def _what_if(args: argparse.Namespace, files: list[str]) -> int:
    if args.name or len(files) > 1:
        raise UserError("explain --what-if-nodes takes at most one pod manifest (-f FILE), not a name")
    if args.count < 1:
        raise UserError(f"--count must be at least 1, got {args.count}")
    text = _read(args.what_if_nodes)
    templates = [o for o in parse_objects(text, args.what_if_nodes) if isinstance(o, Node)]
    if len(templates) != 1:
        raise UserError(f"{args.what_if_nodes}: the what-if template needs exactly one Node, found {len(templates)}")
    if args.cluster:
        result = _run(_explain_offline(args, files[0] if files else "", templates[0]))
    else:
        if args.config or args.plugins:
            raise UserError("--config and --plugins are for offline explain: add --cluster FILE")
        with _client(args) as c:
            pod = _read(files[0]) if files else None
            result = c.what_if(text, args.count, pod=pod, source=args.what_if_nodes)
    emit(args.output, result, lambda: _what_if_table(result))
    return 0


def _what_if_table(result: dict[str, Any]) -> str:
    w = result["whatIf"]
    lines = [f"what if {w['count']} node(s) like {w['template']} were added ({', '.join(w['nodes'])}): "
             f"{len(result['admitted'])} pending pod(s) would be scheduled on them"]
    rows = [(p["pod"], "yes" if p["fits"] else "no", p["node"] or "<none>", "yes" if p["newNode"] else "no",
             "; ".join(p["reasons"])) for p in result["pods"]]
    lines.append(table(("POD", "FITS", "NODE", "NEW NODE", "REASON"), rows))
    return "\n".join(lines)


async def _explain_offline(args: argparse.Namespace, pod_file: str, template: Node | None = None) -> dict[str, Any]:
    from .profiles import build_registry_with_remote
    from .scheduler import Scheduler, explain_pod
    from .service import start_plugin_services

    endpoints = _endpoints(args.plugins)
    # Remote plugins reach back for the snapshot mirror and CycleState: serve those on loopback.
    services = await start_plugin_services() if endpoints else None
    remote = None
    try:
        if services is not None:
            registry, remote = await build_registry_with_remote(endpoints, services.address, services.services)
        else:
            registry = build_registry()
        cfg = _config(args.config, registry)
        scheduler = Scheduler(cfg, registry, seed=0)
        if remote is not None:
            await remote.attach(scheduler)
        cluster = parse_objects(_read(args.cluster), args.cluster)
        if template is not None:
            # What-if: pending pods in the cluster file are the question (queued, never scheduled here).
            await scheduler.apply(cluster)
            asked = [o for o in parse_objects(_read(pod_file), pod_file) if isinstance(o, Pod)] if pod_file else None
            return await scheduler.what_if(template, args.count, asked)
        # Pending pods in the cluster file are not scheduled: only nodes and bound pods shape the snapshot.
        await scheduler.apply([o for o in cluster if isinstance(o, Node) or (isinstance(o, Pod) and o.node_name)])
        pods = [o for o in parse_objects(_read(pod_file), pod_file) if isinstance(o, Pod)]
        if len(pods) != 1:
            raise UserError(f"{pod_file}: explain needs exactly one Pod, found {len(pods)}")
        pod = pods[0]
        name = args.profile or pod.scheduler_name
        fwk = scheduler.profiles.get(name)
        if fwk is None:
            raise UserError(f"no profile named {name!r} (profiles: {', '.join(scheduler.profiles)})")
        return await explain_pod(fwk, scheduler.cache.snapshot(), pod)
    finally:
        if remote is not None:
            await remote.close()
        if services is not None:
            await services.stop()


def _explain_table(result: dict[str, Any]) -> str:
    lines = [f"pod {result['pod']}: {result['status']['code']}"
             + (f" -> {result['selected']}" if result["selected"] else "")]
    for reason in result["status"]["reasons"]:
        lines.append(f"  {reason}")
    rows = []
    for name, n in sorted(result["nodes"].items(), key=lambda kv: -(kv[1]["total"] or -1)):
        f = n["filter"] or {}
        scores = " ".join(f"{p}={s['weighted']}" for p, s in n["scores"].items())
        rows.append((name, f.get("code", "-"), f.get("plugin") or "", "; ".join(f.get("reasons", [])),
                     "" if n["total"] is None else n["total"], scores))
    lines.append(table(("NODE", "FILTER", "PLUGIN", "REASONS", "TOTAL", "WEIGHTED SCORES"), rows))
    return "\n".join(lines)


# ---- watch ----------------------------------------------------------------------------------------

_EVENT_NAMES = ("bound", "unschedulable", "preempted", "applied", "deleted", "error", "nominated")


def _watch_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", type=int, default=0, metavar="SEQ", help="only events after this sequence number")
    p.add_argument("--type", action="append", choices=_EVENT_NAMES, dest="types", default=None,
                   help="only events of this type (repeatable)")
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help="stop after this long")
    p.add_argument("--count", type=int, default=None, metavar="N", help="stop after N events")
    p.add_argument("--no-replay", action="store_true", help="only live events, not the retained ones")
    p.add_argument("-o", "--output", choices=OUTPUTS, default="table",
                   help="table: one line per event; json: one object per line; yaml: one document each")
    add_server(p)


@command("watch", "stream scheduling events (reconnects and resumes if the stream breaks)", _watch_args,
         examples="""\
  outrigger watch                                    # retained events, then live ones, until Ctrl-C
  outrigger watch --type bound --type unschedulable --timeout 60
  outrigger watch --since 1200 -o json""")
def cmd_watch(args: argparse.Namespace) -> int:
    from clients.types import EventType

    types = [EventType[t.upper()] for t in args.types or []]
    with _client(args) as c:
        c.ping()  # an unreachable address is an error now; later breaks are waited out and resumed
        stream = c.watch(since=args.since, types=types, replay=not args.no_replay, timeout=args.timeout)
        with stream:
            for n, ev in enumerate(stream, 1):
                if args.output == "json":
                    print(json.dumps(ev.to_dict()), flush=True)
                elif args.output == "yaml":
                    print("---\n" + yaml.safe_dump(ev.to_dict(), sort_keys=False), end="", flush=True)
                else:
                    detail = ev.node_name if ev.type != EventType.UNSCHEDULABLE else "; ".join(ev.status.reasons)
                    print(f"{ev.sequence:>7}  {ev.type.label:<13}  {ev.object}  {detail}".rstrip(), flush=True)
                if args.count is not None and n >= args.count:
                    break
    return 0


# ---- demo -----------------------------------------------------------------------------------------


# ---- trace, debug-scores --------------------------------------------------------------------------


def _pod_ref(ref: str, namespace: str) -> tuple[str, str]:
    ns, sep, name = ref.partition("/")
    return (ns, name) if sep else (namespace, ref)


def _trace_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("pod", help="NAME or NAMESPACE/NAME")
    add_namespace(p, "default")
    p.add_argument("-o", "--output", choices=("tree", "json", "yaml"), default="tree",
                   help="output format (default tree; json and yaml carry every attribute)")
    add_server(p)


@command("trace", "the span tree of a pod's last scheduling attempt (serve --trace-store N)", _trace_args,
         examples="""\
  outrigger trace web-1
  outrigger trace prod/web-1 -o json""")
def cmd_trace(args: argparse.Namespace) -> int:
    from .tracecli import format_tree

    ns, name = _pod_ref(args.pod, args.namespace)
    with _client(args) as c:
        spans = c.get_trace(name, ns)
    emit(args.output, [s.to_dict() for s in spans], lambda: format_tree(spans))
    return 0


def _debug_scores_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("pod", help="NAME or NAMESPACE/NAME")
    add_namespace(p, "default")
    add_output(p)
    add_server(p)


@command("debug-scores", "a pod's top-N per-plugin scores (serve --debug-scores N, or switched on over HTTP)",
         _debug_scores_args, examples="""\
  outrigger debug-scores web-1
  outrigger debug-scores prod/web-1 -o json""")
def cmd_debug_scores(args: argparse.Namespace) -> int:
    from .debugscores import format_table

    ns, name = _pod_ref(args.pod, args.namespace)
    with _client(args) as c:
        data = c.debug_scores(name, ns).to_dict()

    def as_table() -> str:
        head = (f"pod {data['pod']} attempt {data['attempt']}: {data['scored_nodes']} nodes scored"
                + (f", selected {data['selected']}" if data.get("selected") else ""))
        return head + "\n" + format_table(data)

    emit(args.output, data, as_table)
    return 0


def _demo_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--nodes", type=int, default=300)
    p.add_argument("--pods", type=int, default=3000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--plugins", metavar="FILE",
                   help="use these remote plugin endpoints instead of launching the example plugin hosts")
    p.add_argument("--in-tree-only", action="store_true", help="no remote plugins: in-tree plugins only")


@command("demo", "schedule a generated cluster and workload end to end", _demo_args, examples="""\
  outrigger demo
  outrigger demo --nodes 40 --pods 300 --in-tree-only""")
def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(nodes=args.nodes, pods=args.pods, seed=args.seed, plugins=args.plugins,
                    remote=not args.in_tree_only)


# ---- entry point ----------------------------------------------------------------------------------


def _run(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:  # pragma: no cover - uvloop is a dependency, but keep the CLI usable without it
        return asyncio.run(coro)


class _TopHelp(argparse.RawDescriptionHelpFormatter):
    """argparse measures command names one indent short of where it lists them: leave room for the
    longest (``debug-scores``), so every command's help starts on its own line."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog)
        self._action_max_length = max(len(name) for name in COMMANDS) + 6


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="outrigger", description=__doc__.split("\n\n")[0],
        epilog="\n".join(__doc__.split("\n")[2:]),
        formatter_class=_TopHelp,
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for cmd in COMMANDS.values():
        sp = sub.add_parser(cmd.name, help=cmd.help, description=cmd.help,
                            epilog=f"examples:\n{cmd.examples}" if cmd.examples else None,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        cmd.arguments(sp)
        sp.set_defaults(fn=cmd.run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    from clients import ClientError

    args = parser().parse_args(argv)
    if args.command in ("serve", "demo"):
        from .scheduler import tune_gc

        tune_gc()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        code: int = args.fn(args)
        return code
    except (UserError, ClientError, ConfigError, ManifestError, PluginArgsError, RemotePluginsError,
            TLSConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `outrigger watch | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
