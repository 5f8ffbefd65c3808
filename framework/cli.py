"""``outrigger``: run the framework service, talk to it, explain a placement, run the demo.

Examples:
  outrigger serve --config scheduler.yaml --listen 127.0.0.1:50051
  outrigger serve --config scheduler.yaml --plugins remote-plugins.yaml
  outrigger plugin serve pluginhost.examples.coscheduling:Coscheduling --listen 127.0.0.1:50061
  outrigger apply -f cluster.yaml --server 127.0.0.1:50051
  outrigger get pods --server 127.0.0.1:50051
  outrigger explain --config scheduler.yaml --cluster cluster.yaml --pod pod.yaml -o json
  outrigger demo
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from pluginhost.manifest import ManifestError, parse_objects
from pluginhost.model import Node, Pod
from pluginhost.quantity import format_quantity

from .config import ConfigError, SchedulerConfig
from .plugins import PluginArgsError, Registry
from .profiles import build_registry, default_scheduler_config, load_scheduler_config
from .remote import EndpointConfig, RemotePluginsError, load_remote_plugins

__all__ = ["main"]

DEFAULT_SERVER = "127.0.0.1:50051"


class UserError(Exception):
    """A mistake in the command line or its inputs: printed as one line, exit code 2."""


def _read(path: str) -> str:
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None


def _config(path: str | None, registry: Registry) -> SchedulerConfig:
    cfg = load_scheduler_config(path, registry) if path else default_scheduler_config(registry)
    for w in cfg.warnings:
        print(f"warning: {w}", file=sys.stderr)
    return cfg


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Rows as an aligned plain-text table (kubectl style)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


# ---- commands ------------------------------------------------------------------------------------


def _endpoints(path: str | None) -> list[EndpointConfig]:
    return load_remote_plugins(path) if path else []


def cmd_serve(args: argparse.Namespace) -> int:
    from .service import serve

    endpoints = _endpoints(args.plugins)
    _run(serve(lambda registry: _config(args.config, registry), args.listen, endpoints, args.advertise))
    return 0


def cmd_plugin_serve(args: argparse.Namespace) -> int:
    from pluginhost.host import PluginDefinitionError, load_plugins, serve

    try:
        plugins = load_plugins(args.target)
        serve(plugins, args.listen, args.framework)
    except PluginDefinitionError as exc:
        raise UserError(str(exc)) from None
    except OSError as exc:
        raise UserError(f"cannot serve on {args.listen}: {exc}") from None
    return 0


def cmd_apply(args: argparse.Namespace) -> int:
    from clients.client import SchedulerClient

    with SchedulerClient(args.server) as c:
        for path in args.filename:
            for obj in c.apply_text(_read(path), source=path, dry_run=args.dry_run):
                ref = obj.ref
                name = f"{ref.namespace}/{ref.name}" if ref.namespace else ref.name
                suffix = " (dry run)" if args.dry_run else ""
                print(f"{ref.kind.lower()}/{name} {obj.action}{suffix}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    from clients.client import SchedulerClient

    kind = {"pod": "Pod", "pods": "Pod", "node": "Node", "nodes": "Node"}[args.kind]
    with SchedulerClient(args.server) as c:
        deleted = c.delete(kind, args.name, args.namespace if kind == "Pod" else "")
    if not deleted:
        raise UserError(f"{args.kind} {args.name!r} not found")
    print(f"{kind.lower()}/{args.name} deleted")
    return 0


def cmd_get(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from clients.client import SchedulerClient

    with SchedulerClient(args.server) as c:
        if args.kind in ("pods", "pod"):
            items = c.list_pods(namespace=args.namespace or "")
            if args.output == "json":
                print(json.dumps([MessageToDict(p) for p in items], indent=2))
                return 0
            rows = [
                (p.ref.namespace, p.ref.name, p.phase, p.node_name or "<none>", p.attempts,
                 p.last_status.reasons[0] if p.last_status.reasons and p.phase != "Bound" else "")
                for p in items
            ]
            print(table(("NAMESPACE", "NAME", "PHASE", "NODE", "ATTEMPTS", "REASON"), rows))
        else:
            nodes = c.list_nodes()
            if args.output == "json":
                print(json.dumps([MessageToDict(n) for n in nodes], indent=2))
                return 0
            rows = [
                (n.name, "SchedulingDisabled" if n.unschedulable else "Ready", n.pods,
                 f"{format_quantity('cpu', n.requested.get('cpu', 0))}/"
                 f"{format_quantity('cpu', n.allocatable.get('cpu', 0))}",
                 f"{format_quantity('memory', n.requested.get('memory', 0))}/"
                 f"{format_quantity('memory', n.allocatable.get('memory', 0))}",
                 ",".join(n.taints))
                for n in nodes
            ]
            print(table(("NAME", "STATUS", "PODS", "CPU", "MEMORY", "TAINTS"), rows))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    if args.server:
        from clients.client import SchedulerClient

        with SchedulerClient(args.server) as c:
            result = c.explain(_read(args.pod), source=args.pod, profile=args.profile or "")
    else:
        if not args.cluster:
            raise UserError("explain needs --cluster FILE (offline) or --server ADDR")
        result = _run(_explain_offline(args))
    if args.output == "json":
        print(json.dumps(result, indent=2))
    else:
        print(_explain_table(result))
    return 0


async def _explain_offline(args: argparse.Namespace) -> dict[str, Any]:
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
        # Pending pods in the cluster file are not scheduled: only nodes and bound pods shape the snapshot.
        await scheduler.apply([o for o in cluster if isinstance(o, Node) or o.node_name])
        pods = [o for o in parse_objects(_read(args.pod), args.pod) if isinstance(o, Pod)]
        if len(pods) != 1:
            raise UserError(f"{args.pod}: explain needs exactly one Pod, found {len(pods)}")
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


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    return run_demo(nodes=args.nodes, pods=args.pods, seed=args.seed, plugins=args.plugins,
                    remote=not args.in_tree_only)


# ---- entry point ---------------------------------------------------------------------------------


def _run(coro: Any) -> Any:
    try:
        import uvloop

        return uvloop.run(coro)
    except ImportError:  # pragma: no cover - uvloop is a dependency, but keep the CLI usable without it
        return asyncio.run(coro)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="outrigger", description=__doc__.split("\n\n")[0],
        epilog="\n".join(__doc__.split("\n")[2:]), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("-v", "--verbose", action="store_true", help="log at debug level")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser("serve", help="run the framework service")
    s.add_argument("--config", help="KubeSchedulerConfiguration file (default: kube-scheduler's defaults)")
    s.add_argument("--listen", default=DEFAULT_SERVER, help=f"address to serve on (default {DEFAULT_SERVER})")
    s.add_argument("--plugins", metavar="FILE", help="RemotePlugins document: remote plugin endpoints")
    s.add_argument("--advertise", metavar="ADDR",
                   help="address plugin hosts use to reach this framework (default: the bound address)")
    s.set_defaults(fn=cmd_serve)

    pl = sub.add_parser("plugin", help="host plugins for a framework (a sidecar)")
    plsub = pl.add_subparsers(dest="plugin_command", required=True, metavar="COMMAND")
    ps = plsub.add_parser("serve", help="serve plugin classes over gRPC")
    ps.add_argument("target", metavar="MODULE:ATTR", help="a plugin class, or a list of them (or a function)")
    ps.add_argument("--listen", default="127.0.0.1:50061", help="address to serve on (default 127.0.0.1:50061)")
    ps.add_argument("--framework", metavar="ADDR",
                    help="the framework's address (default: the one it announces when it connects)")
    ps.set_defaults(fn=cmd_plugin_serve)

    a = sub.add_parser("apply", help="create or update pods and nodes from manifests")
    a.add_argument("-f", "--filename", action="append", required=True, help="manifest file (YAML/JSON, - for stdin)")
    a.add_argument("--server", default=DEFAULT_SERVER)
    a.add_argument("--dry-run", action="store_true", help="validate only, change nothing")
    a.set_defaults(fn=cmd_apply)

    g = sub.add_parser("get", help="list pods or nodes")
    g.add_argument("kind", choices=["pods", "pod", "nodes", "node"])
    g.add_argument("-n", "--namespace", default="")
    g.add_argument("-o", "--output", choices=["table", "json"], default="table")
    g.add_argument("--server", default=DEFAULT_SERVER)
    g.set_defaults(fn=cmd_get)

    d = sub.add_parser("delete", help="delete a pod or node")
    d.add_argument("kind", choices=["pod", "pods", "node", "nodes"])
    d.add_argument("name")
    d.add_argument("-n", "--namespace", default="default")
    d.add_argument("--server", default=DEFAULT_SERVER)
    d.set_defaults(fn=cmd_delete)

    e = sub.add_parser("explain", help="why a pod lands where it does (or nowhere)")
    e.add_argument("--config", help="KubeSchedulerConfiguration file (offline mode)")
    e.add_argument("--cluster", help="nodes and bound pods (offline mode)")
    e.add_argument("--pod", required=True, help="the pod manifest")
    e.add_argument("--profile", help="profile (default: the pod's schedulerName)")
    e.add_argument("--server", help="ask a running framework service instead of running offline")
    e.add_argument("--plugins", metavar="FILE", help="RemotePlugins document (offline mode)")
    e.add_argument("-o", "--output", choices=["table", "json"], default="table")
    e.set_defaults(fn=cmd_explain)

    m = sub.add_parser("demo", help="schedule a generated cluster and workload end to end")
    m.add_argument("--nodes", type=int, default=300)
    m.add_argument("--pods", type=int, default=3000)
    m.add_argument("--seed", type=int, default=7)
    m.add_argument("--plugins", metavar="FILE",
                   help="use these remote plugin endpoints instead of launching the example plugin hosts")
    m.add_argument("--in-tree-only", action="store_true", help="no remote plugins: in-tree plugins only")
    m.set_defaults(fn=cmd_demo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command in ("serve", "demo"):
        from .scheduler import tune_gc

        tune_gc()
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        code: int = args.fn(args)
        return code
    except (UserError, ConfigError, ManifestError, PluginArgsError, RemotePluginsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from clients.client import ClientError

        if isinstance(exc, ClientError):
            print(f"error: {exc}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
