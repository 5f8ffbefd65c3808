"""outrigger: run the framework service, talk to it, explain a placement, run the demo.

Examples:
  outrigger serve --config scheduler.yaml --listen 127.0.0.1:50051
  outrigger serve --config scheduler.yaml --plugins remote-plugins.yaml
  outrigger plugin serve pluginhost.examples.coscheduling:Coscheduling --listen 127.0.0.1:50061
  export OUTRIGGER_SERVER=127.0.0.1:50051        # or --server ADDR on every command
  outrigger apply -f cluster.yaml --wait
  outrigger get pods -A -o wide                  # kubectl's habits: -n/-A, -l, -o wide|name|yaml|json, -w
  outrigger get nodes -o yaml
  outrigger describe pod web                     # conditions and scheduling events
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
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import grpc
import yaml

from clients.printers import (
    NODE_COLUMNS,
    NODE_WIDE_COLUMNS,
    POD_COLUMNS,
    POD_WIDE_COLUMNS,
    node_row,
    object_name,
    pod_row,
    rows_text,
    table_writer,
)
from pluginhost.errors import OutriggerError
from pluginhost.manifest import ManifestError, load_documents, parse_objects
from pluginhost.model import Node, PersistentVolumeClaim, Pod, PodDisruptionBudget, Reservation
from pluginhost.quantity import format_quantity
from pluginhost.security import TLSConfigError
from pluginhost.snapshot import StorageObject, storage_kind

from .config import UNMODELLED_PLUGINS, ConfigError, SchedulerConfig
from .observe.serving import add_serving_flags
from .plugins import PluginArgsError, Registry
from .profiles import build_registry, default_scheduler_config, load_scheduler_config
from .progress import ProgressBar
from .remote import EndpointConfig, RemotePluginsError, load_remote_plugins
from .security import add_client_flags, add_plugin_host_flags, add_server_flags, client_tls, server_tls

if TYPE_CHECKING:
    from clients.client import SchedulerClient

__all__ = ["COMMANDS", "Command", "clock", "command", "config_warnings", "main", "parser", "version"]

DEFAULT_SERVER = "127.0.0.1:50051"
SERVER_ENV = "OUTRIGGER_SERVER"
OUTPUTS = ("table", "json", "yaml")
# Objects per Apply request when a large apply is sent in parts (so a progress bar can move).
APPLY_CHUNK = 500


class UserError(OutriggerError):
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


# kube-scheduler's in-tree plugins Outrigger does not model: the configuration warns about each one the
# defaults bring in; they are reported together, in one line (those a user's file names keep theirs).
_UNMODELLED = {f'plugin "{name}" is not modelled by Outrigger and is ignored': name for name in UNMODELLED_PLUGINS}


def config_warnings(warnings: Sequence[str]) -> list[str]:
    """The warning lines ``serve`` and ``explain`` print for a configuration's warnings."""
    unmodelled = [_UNMODELLED[w] for w in warnings if w in _UNMODELLED]
    lines = [f"warning: {w}" for w in warnings if w not in _UNMODELLED]
    if unmodelled:
        lines.append(f"warning: not modelled: {', '.join(unmodelled)} (ignored: their Filter passes every node)")
    return lines


def _config(path: str | None, registry: Registry) -> SchedulerConfig:
    cfg = load_scheduler_config(path, registry) if path else default_scheduler_config(registry)
    for line in config_warnings(cfg.warnings):
        print(line, file=sys.stderr)
    return cfg


def _endpoints(path: str | None) -> list[EndpointConfig]:
    return load_remote_plugins(path) if path else []


@contextmanager
def _client(args: argparse.Namespace, timeout: float | None = None) -> Iterator[SchedulerClient]:
    """A client of ``--server``; ``timeout``: each call's deadline (default the client's, 30 s)."""
    from clients.client import SchedulerClient

    with SchedulerClient(args.server, tls=client_tls(args), timeout=timeout or 30.0) as c:
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
                                    in_cluster=args.in_cluster, config_file=args.config))
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
    from pluginhost.definition import PluginDefinitionError
    from pluginhost.host import load_plugins, serve

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


# --validate as kubectl apply takes it (true and false are its older spellings).
_VALIDATE = {"strict": "strict", "true": "strict", "warn": "warn", "ignore": "ignore", "false": "ignore"}


def _apply_args(p: argparse.ArgumentParser) -> None:
    add_filename(p, "manifest file (YAML or JSON; Pods, Nodes and Reservations)", required=True)
    add_server(p)
    p.add_argument("--dry-run", action="store_true", help="validate only, change nothing")
    p.add_argument("--validate", choices=sorted(_VALIDATE), default="strict", metavar="MODE",
                   help="unknown or duplicate fields: strict (default) refuses the manifest, warn applies it "
                        "and warns, ignore applies it silently (true/false: strict/ignore)")
    p.add_argument("--wait", action="store_true", help="wait until every applied pod is bound")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="how long --wait waits (default 120)")
    add_output(p)


@command("apply", "create or update pods, nodes and reservations from manifests", _apply_args, examples="""\
  outrigger apply -f cluster.yaml
  outrigger apply -f nodes.yaml -f pods.yaml --wait --timeout 60
  outrigger apply -f pods.yaml --dry-run -o json
  outrigger apply -f legacy.yaml --validate=warn     # apply, and name the fields that would be refused
  outrigger get pod web -o yaml > web.yaml && outrigger apply -f web.yaml    # pod/default/web unchanged
  kubectl get pods -o yaml | outrigger apply -f -""")
def cmd_apply(args: argparse.Namespace) -> int:
    manifests = [(path, _read(path)) for path in args.filename]
    # Parsed here too: a bad file is reported before anything is sent, and a large apply can be split.
    per_file = [(path, text, load_documents(text, path)) for path, text in manifests]
    objects = [(path, obj) for path, _, docs in per_file for _, obj in docs]
    if not objects:  # as kubectl: an error only when no file holds an object
        raise UserError("no objects passed to apply")
    manifests = [(path, text) for path, text, docs in per_file if docs]
    validate = _VALIDATE[args.validate]

    def warn(message: str) -> None:
        # The server's lines read as kubectl's: `Warning: unknown field "spec.nodeSelectr"`.
        print(message if message.startswith("Warning:") else f"warning: {message}", file=sys.stderr)

    with _client(args) as c:
        if args.dry_run or len(objects) <= APPLY_CHUNK:
            applied = c.apply_manifests(manifests, dry_run=args.dry_run, validate=validate, warn=warn)
        else:
            # All or nothing, as one request would be: validate everything first, then apply in parts.
            c.apply_manifests(manifests, dry_run=True, validate=validate, warn=warn)
            applied = []
            bar = ProgressBar(len(objects), "applying")
            for i in range(0, len(objects), APPLY_CHUNK):
                part = objects[i:i + APPLY_CHUNK]
                applied += c.apply([o for _, o in part], source=", ".join(dict.fromkeys(s for s, _ in part)),
                                   validate=validate)
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
          "reservations": "Reservation", "pdb": "PodDisruptionBudget", "pdbs": "PodDisruptionBudget",
          "poddisruptionbudget": "PodDisruptionBudget", "poddisruptionbudgets": "PodDisruptionBudget",
          "pvc": "PersistentVolumeClaim", "pvcs": "PersistentVolumeClaim",
          "persistentvolumeclaim": "PersistentVolumeClaim", "persistentvolumeclaims": "PersistentVolumeClaim",
          "pv": "PersistentVolume", "pvs": "PersistentVolume", "persistentvolume": "PersistentVolume",
          "persistentvolumes": "PersistentVolume", "storageclass": "StorageClass", "storageclasses": "StorageClass",
          "sc": "StorageClass", "csinode": "CSINode", "csinodes": "CSINode"}
_NAMESPACED = ("Pod", "PodDisruptionBudget", "PersistentVolumeClaim")


def _delete_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("kind", nargs="?", choices=sorted(_KINDS),
                   help="pod, node, reservation, pdb, pvc, pv, storageclass or csinode")
    p.add_argument("names", nargs="*", metavar="NAME")
    add_filename(p, "delete the objects in this manifest")
    add_namespace(p, "default")
    add_server(p)


@command("delete", "delete pods, nodes, reservations, PDBs, claims, volumes, classes or CSINodes", _delete_args,
         examples="""\
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
                if isinstance(obj, Pod | PodDisruptionBudget):
                    targets.append(("Pod" if isinstance(obj, Pod) else "PodDisruptionBudget", obj.namespace, obj.name))
                elif isinstance(obj, StorageObject):
                    namespace = obj.namespace if isinstance(obj, PersistentVolumeClaim) else ""
                    targets.append((storage_kind(obj), namespace, obj.name))
                else:
                    targets.append(("Reservation" if isinstance(obj, Reservation) else "Node", "", obj.name))
    elif args.kind and args.names:
        kind = _KINDS[args.kind]
        targets = [(kind, args.namespace if kind in _NAMESPACED else "", n) for n in args.names]
    else:
        raise UserError("delete needs KIND NAME... (e.g. `delete pod web`) or -f FILE")
    missing = []
    with _client(args) as c:
        for kind, ns, name in targets:
            if kind == "Reservation":
                found = c.delete_reservation(name)
            elif kind == "PodDisruptionBudget":
                found = c.delete_pod_disruption_budget(name, ns)
            elif kind in ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode"):
                found = c.delete(kind, name, ns)
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


# ---- get, describe --------------------------------------------------------------------------------

#: What ``get`` and ``describe`` accept as TYPE (kubectl's names and short names) -> the kind.
RESOURCE_TYPES = {"pods": "Pod", "pod": "Pod", "po": "Pod", "nodes": "Node", "node": "Node", "no": "Node",
                  "reservations": "Reservation", "reservation": "Reservation", "waiting": "Waiting"}
GET_OUTPUTS = ("table", "wide", "name", "json", "yaml")
#: The clock ages are computed against (tests set it).
clock: Callable[[], float] = time.time


def _resource_args(p: argparse.ArgumentParser, types: str) -> None:
    p.add_argument("resources", nargs="+", metavar="TYPE[/NAME]",
                   help=f"{types}; then NAME..., or TYPE/NAME (as kubectl)")
    add_namespace(p, "default")
    p.add_argument("-A", "--all-namespaces", action="store_true", help="pods of every namespace")
    p.add_argument("-l", "--selector", default="", metavar="SELECTOR",
                   help="only objects whose labels match, kubectl's syntax: 'a=b,c!=d,e in (x,y),!f,g'")
    p.add_argument("--request-timeout", default="0", metavar="DURATION",
                   help="how long to wait for each answer, e.g. 10s, 2m (0: the client's default, 30s); "
                        "also ends a watch (get -w)")


def _request_timeout(text: str) -> float | None:
    """``--request-timeout``: a Go-style duration (``30s``, ``1m30s``, ``500ms``; a bare number is
    seconds); None for 0."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    elif re.fullmatch(r"(\d+(\.\d+)?(ms|s|m|h))+", text):
        seconds = sum(float(n) * units[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ms|s|m|h)", text))
    else:
        raise UserError(f"invalid --request-timeout {text!r}: give a duration like 30s, 2m or 1h (0: no limit)")
    return seconds or None


def _targets(args: argparse.Namespace, verb: str) -> list[tuple[str, str]]:
    """``TYPE [NAME...]`` or ``TYPE/NAME...`` -> (kind, name) pairs (name "" for every object)."""
    targets = _parse_targets(args.resources, verb)
    if args.all_namespaces and any(kind == "Pod" and name for kind, name in targets):
        raise UserError("a resource cannot be retrieved by name across all namespaces (drop -A, or give -n NS)")
    return targets


def _parse_targets(words: Sequence[str], verb: str) -> list[tuple[str, str]]:

    def kind(word: str) -> str:
        found = RESOURCE_TYPES.get(word.lower())
        if found is None or (verb == "describe" and found not in ("Pod", "Node")):
            allowed = "pods (po), nodes (no)" + ("" if verb == "describe" else ", reservations, waiting")
            raise UserError(f"unknown resource type {word!r} (one of: {allowed})")
        return found

    if "/" in words[0]:
        out = []
        for word in words:
            typ, sep, name = word.partition("/")
            if not sep or not name:
                raise UserError(f"{word!r}: give every object as TYPE/NAME (e.g. `outrigger {verb} pods/web`), "
                                "or TYPE then names")
            out.append((kind(typ), name))
        return out
    first = kind(words[0])
    for name in words[1:]:
        if "/" in name:
            raise UserError(f"{name!r}: give either TYPE NAME... or TYPE/NAME..., not both "
                            f"(e.g. `outrigger {verb} pods/web`)")
    return [(first, name) for name in words[1:]] or [(first, "")]


def _get_args(p: argparse.ArgumentParser) -> None:
    _resource_args(p, "pods (po), nodes (no), reservations, or waiting (pods held in Permit)")
    p.add_argument("--phase", default="", help="pods: only this phase (Pending, Unschedulable, Waiting, Bound...)")
    p.add_argument("--profile", default="", help="waiting: only pods of this profile")
    p.add_argument("-o", "--output", choices=GET_OUTPUTS, default="table",
                   help="table (default), wide (more columns), name (TYPE/NAME), json or yaml (v1 objects)")
    p.add_argument("-w", "--watch", action="store_true",
                   help="pods, nodes: after the list, print each change until interrupted (or --request-timeout)")
    p.add_argument("--output-watch-events", action="store_true",
                   help="with --watch: an EVENT column (ADDED, MODIFIED, DELETED)")
    add_server(p)


@command("get", "show pods, nodes, reservations or pods waiting in Permit (as kubectl get)", _get_args,
         examples="""\
  outrigger get pods                                 # namespace default; -A for all namespaces
  outrigger get po -A -o wide                        # IP, NODE, NOMINATED NODE columns
  outrigger get pods -l 'app=web,tier!=cache' -o name
  outrigger get pod web -o yaml                      # a v1 Pod that `outrigger apply -f` takes back
  outrigger get pods/web nodes/n1
  outrigger get pods -w --request-timeout 60s        # each change, for a minute
  outrigger get nodes -l 'zone in (a,b)'
  outrigger get pods -n shop --phase Unschedulable
  outrigger get reservations -o json
  outrigger get waiting --profile gang-scheduler""")
def cmd_get(args: argparse.Namespace) -> int:
    targets = _targets(args, "get")
    timeout = _request_timeout(args.request_timeout)
    kinds = list(dict.fromkeys(k for k, _ in targets))
    if args.selector and not set(kinds) <= {"Pod", "Node"}:
        raise UserError("-l/--selector selects pods and nodes only")
    if args.watch:
        if len(kinds) != 1 or kinds[0] not in ("Pod", "Node"):
            raise UserError("get --watch watches one type: pods or nodes")
        if args.phase:
            raise UserError("get --watch does not take --phase")
    elif args.output_watch_events:
        raise UserError("--output-watch-events goes with --watch")
    namespace = "" if args.all_namespaces else args.namespace
    with _client(args, timeout) as c:
        if args.watch:
            _watch_objects(c, kinds[0], [n for _, n in targets if n], namespace, args, timeout)
            return 0
        found: list[tuple[str, list[Any]]] = []  # (kind, objects) in the order asked
        missing: list[str] = []
        for kind in kinds:
            names = [n for k, n in targets if k == kind and n]
            found.append((kind, _fetch(c, kind, names, namespace, args, missing)))
        single = len(targets) == 1 and bool(targets[0][1])
        named = any(name for _, name in targets)
        _print_objects(found, args.output, single, "" if named else namespace or "*", args.all_namespaces)
    if missing:
        raise UserError("; ".join(missing))
    return 0


def _fetch(c: SchedulerClient, kind: str, names: list[str], namespace: str, args: argparse.Namespace,
           missing: list[str]) -> list[Any]:
    """The objects of one kind that ``get`` shows (names not found go to ``missing``)."""
    from clients import ClientError

    if kind == "Pod":
        if not names:
            return c.list_pods(namespace=namespace, phase=args.phase, label_selector=args.selector, objects=True)
        pods = []
        for name in names:
            try:
                pods.append(c.get_pod(name, namespace or "default"))
            except ClientError as exc:
                if exc.code != grpc.StatusCode.NOT_FOUND:
                    raise
                missing.append(str(exc))
        return pods
    if kind == "Node":
        if not names:
            return c.list_nodes(label_selector=args.selector, objects=True)
        nodes = []
        for name in names:
            node = c.list_nodes(name=name, objects=True)
            if not node:
                missing.append(f"node {name!r} not found")
            nodes += node
        return nodes
    if kind == "Reservation":
        reservations = c.list_reservations()
        for name in names:
            if not any(r.name == name for r in reservations):
                missing.append(f"reservation {name!r} not found")
        return [r for r in reservations if not names or r.name in names]
    if names:
        raise UserError("get waiting lists every waiting pod; it takes no NAME (see --profile)")
    return c.list_waiting_pods(profile=args.profile)


def _manifest(obj: Any) -> Any:
    """What ``-o json|yaml`` prints for an object: v1 objects for pods and nodes."""
    manifest = getattr(obj, "manifest", None)
    return manifest if manifest else obj.to_dict()


def _print_objects(found: list[tuple[str, list[Any]]], output: str, single: bool, listed: str,
                   all_namespaces: bool) -> None:
    """Print what ``get`` found. ``listed``: what was listed, for kubectl's "No resources found"
    (a namespace, "*" for every namespace, "" when names were asked: missing ones are errors)."""
    everything = [o for _, objs in found for o in objs]
    if output in ("json", "yaml") and all(kind in ("Reservation", "Waiting") for kind, _ in found):
        # Not API objects of core v1: their records, as the client library answers them.
        data = [o.to_dict() for o in everything]
        emit(output, data[0] if single and data else data, lambda: "")
        return
    if output in ("json", "yaml"):
        items = [_manifest(o) for o in everything]
        doc: Any = items[0] if single and items else {"apiVersion": "v1", "kind": "List", "items": items}
        if output == "json":
            print(json.dumps(doc, indent=4))
        else:
            print(yaml.safe_dump(doc, sort_keys=False, default_flow_style=False), end="")
        return
    if output == "name":
        for kind, objs in found:
            for o in objs:
                print(object_name("pod" if kind == "Waiting" else kind, _name(o)))
        return
    tables = [_table(kind, objs, output == "wide", all_namespaces) for kind, objs in found if objs]
    if tables:
        print("\n".join(tables), end="")
    elif listed:
        where = f" in {listed} namespace" if found[0][0] == "Pod" and listed != "*" else ""
        print(f"No resources found{where}.", file=sys.stderr)


def _name(obj: Any) -> str:
    return str(obj.ref.name if hasattr(obj, "ref") else obj.name)


def _table(kind: str, objs: list[Any], wide: bool, all_namespaces: bool) -> str:
    now = clock()
    if kind == "Pod":
        head = ("NAMESPACE", *(POD_WIDE_COLUMNS if wide else POD_COLUMNS)) if all_namespaces else \
            (POD_WIDE_COLUMNS if wide else POD_COLUMNS)
        rows = [pod_row(p, now, wide=wide, namespace=all_namespaces) for p in objs]
    elif kind == "Node":
        head = NODE_WIDE_COLUMNS if wide else NODE_COLUMNS
        rows = [node_row(n, now, wide=wide) for n in objs]
    elif kind == "Reservation":
        return reservations_table(objs) + "\n"
    else:
        return waiting_table(objs) + "\n"
    return table_writer().format(rows_text([head, *rows]))


def _watch_objects(c: SchedulerClient, kind: str, names: list[str], namespace: str, args: argparse.Namespace,
                   timeout: float | None) -> None:
    """``get -w``: the list, then a row (or object) per change, until interrupted or ``timeout``."""
    events = args.output_watch_events
    wide = args.output == "wide"
    writer = table_writer(remember=True)
    shown: dict[str, list[str]] = {}  # key -> the row last printed (without AGE), to print only changes
    header = [False]

    def key(obj: Any) -> str:
        return str(obj.ref.key if kind == "Pod" else obj.name)

    def show(change_type: str, obj: Any) -> None:
        if names and _name(obj) not in names:
            return
        if args.output in ("json", "yaml", "name"):
            manifest = obj.manifest
            if args.output == "name":
                text = object_name(kind, _name(obj)) + "\n"
            elif args.output == "json":
                text = json.dumps({"type": change_type, "object": manifest} if events else manifest, indent=4) + "\n"
            else:
                doc = {"type": change_type, "object": manifest} if events else manifest
                text = "---\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
            print(text, end="", flush=True)
            return
        now = clock()
        row = pod_row(obj, now, wide=wide, namespace=args.all_namespaces) if kind == "Pod" else \
            node_row(obj, now, wide=wide)
        age_column = 5 if kind == "Pod" and args.all_namespaces else (4 if kind == "Pod" else 3)
        seen = row[:age_column] + row[age_column + 1:]
        if change_type == "MODIFIED" and shown.get(key(obj)) == seen:
            return
        shown[key(obj)] = seen
        lines = []
        if not header[0]:
            head = (POD_WIDE_COLUMNS if wide else POD_COLUMNS) if kind == "Pod" else \
                (NODE_WIDE_COLUMNS if wide else NODE_COLUMNS)
            if kind == "Pod" and args.all_namespaces:
                head = ("NAMESPACE", *head)
            lines.append(["EVENT", *head] if events else list(head))
            header[0] = True
        lines.append([change_type, *row] if events else row)
        print(writer.format(rows_text(lines)), end="", flush=True)

    with c.watch_objects(kind, namespace=namespace, label_selector=args.selector, timeout=timeout) as watch:
        listed = [o for o in watch.items if not names or _name(o) in names]
        for obj in listed:
            show("ADDED", obj)
        if not listed and args.output in ("table", "wide"):
            where = f" in {namespace} namespace" if kind == "Pod" and namespace else ""
            print(f"No resources found{where}.", file=sys.stderr, flush=True)
        for change in watch:
            if change.type == "DELETED":
                shown.pop(key(change.object), None)
            show(change.type, change.object)


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


def _describe_args(p: argparse.ArgumentParser) -> None:
    _resource_args(p, "pods (po) or nodes (no)")
    add_server(p)


@command("describe", "a pod or node in detail, with its scheduling events (as kubectl describe)", _describe_args,
         examples="""\
  outrigger describe pod web                         # conditions and events: why it is (not) scheduled
  outrigger describe pods/web -n shop
  outrigger describe node n1                         # its pods and their share of its resources
  outrigger describe pods -l app=web""")
def cmd_describe(args: argparse.Namespace) -> int:
    from clients.describe import describe_node, describe_pod

    targets = _targets(args, "describe")
    namespace = "" if args.all_namespaces else args.namespace
    texts: list[str] = []
    missing: list[str] = []
    with _client(args, _request_timeout(args.request_timeout)) as c:
        for kind in dict.fromkeys(k for k, _ in targets):
            names = [n for k, n in targets if k == kind and n]
            if args.selector and names:
                raise UserError("describe takes names or -l/--selector, not both")
            for obj in _fetch(c, kind, names, namespace, argparse.Namespace(phase="", selector=args.selector),
                              missing):
                if kind == "Pod":
                    events = c.list_events("Pod", obj.ref.name, obj.ref.namespace, uid=obj.ref.uid)
                    texts.append(describe_pod(obj, events, clock()))
                else:
                    pods = c.list_pods(node_name=obj.name, objects=True)
                    texts.append(describe_node(obj, pods, [], clock()))
    print("\n\n".join(texts), end="")
    if missing:
        raise UserError("; ".join(missing))
    if not texts:
        in_namespace = bool(namespace) and any(k == "Pod" for k, _ in targets)
        print("No resources found" + (f" in {namespace} namespace." if in_namespace else "."), file=sys.stderr)
    return 0


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
        # Pending pods in the cluster file are not scheduled: only nodes, bound pods and the volume plugins'
        # objects (claims, volumes, classes, CSINodes) shape the snapshot.
        await scheduler.apply([o for o in cluster if isinstance(o, Node | StorageObject)
                               or (isinstance(o, Pod) and o.node_name)])
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


def version() -> str:
    """The installed distribution's version (``outrigger --version``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("outrigger")
    except PackageNotFoundError:  # pragma: no cover - run from a checkout that was never installed
        return "unknown (not installed)"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="outrigger", description=__doc__.split("\n\n")[0],
        epilog="\n".join(__doc__.split("\n")[2:]),
        formatter_class=_TopHelp,
    )
    p.add_argument("--version", action="version", version=f"outrigger {version()}",
                   help="print the version and exit")
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
