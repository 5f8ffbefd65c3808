"""``outrigger explain``: why a pod lands where it does (or nowhere), asked of a running framework or
worked out offline from files; and ``explain --what-if-nodes``, which pending pods new nodes would admit."""

from __future__ import annotations

import argparse
from typing import Any

from pluginhost.manifest import ResourceObject, parse_objects
from pluginhost.model import Node, Pod
from pluginhost.snapshot import StorageObject

from ..profiles import build_registry
from .configfiles import remote_endpoints, scheduler_config
from .flags import add_filename, add_namespace, add_output, add_server, client, read_input
from .output import emit, table
from .registry import UserError, command, run_async

__all__ = ["cmd_explain"]


def _explain_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", nargs="?", metavar="POD",
                   help="a pod the framework holds, or podgroup/NAME for a PodGroup's pending pods (asks --server)")
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
  outrigger explain podgroup/train-workers           # why a PodGroup's pending pods are (not) placed
  outrigger explain -f pod.yaml -o json              # a pod not applied yet, against the same cluster
  outrigger explain --config scheduler.yaml --cluster cluster.yaml -f pod.yaml   # offline, no server
  outrigger explain --what-if-nodes template.yaml --count 3    # which pending pods 3 such nodes admit""")
def cmd_explain(args: argparse.Namespace) -> int:
    files = list(args.filename or []) + ([args.pod] if args.pod else [])
    if args.what_if_nodes:
        return _what_if(args, files)
    if args.name and args.name.startswith("podgroup/"):
        return _explain_group(args, files)
    if args.name and files:
        raise UserError("explain takes a pod name or -f FILE, not both")
    if len(files) > 1:
        raise UserError("explain takes one pod manifest (-f FILE)")
    if not args.name and not files:
        raise UserError("explain needs a pod: a name (a pod the framework holds) or -f FILE (a manifest)")
    if args.cluster:
        if args.name:
            raise UserError("offline explain (--cluster) needs the pod's manifest: -f FILE, not a name")
        result = run_async(_explain_offline(args, files[0]))
    else:
        if args.config or args.plugins:
            raise UserError("--config and --plugins are for offline explain: add --cluster FILE")
        with client(args) as c:
            if args.name:
                explanation = c.explain_pod(args.name, args.namespace, profile=args.profile or "")
            else:
                explanation = c.explain(read_input(files[0]), source=files[0], profile=args.profile or "")
        result = explanation.to_dict()
    emit(args.output, result, lambda: _explain_table(result))
    return 0


def _explain_group(args: argparse.Namespace, files: list[str]) -> int:
    name = args.name.removeprefix("podgroup/")
    if files or args.cluster or args.config or args.plugins or args.profile:
        raise UserError("explain podgroup/NAME asks the framework at --server: no -f, --cluster, --config, "
                        "--plugins or --profile")
    if not name:
        raise UserError("explain podgroup/NAME needs the PodGroup's name")
    with client(args) as c:
        result = c.explain_pod_group(name, args.namespace)
    emit(args.output, result, lambda: _group_table(result))
    return 0


def _group_table(result: dict[str, Any]) -> str:
    """The group's status and its pods' nodes, then each placement tried (its status, score and pods)."""
    lines = [f"podgroup {result['podGroup']}: {result['status']['code']} "
             f"({result.get('scheduled', 0)} pod(s) already scheduled)"]
    lines += [f"  {reason}" for reason in result["status"]["reasons"] if reason]

    def pods(entries: list[dict[str, Any]]) -> str:
        return table(("POD", "NODE", "STATUS", "REASONS"), [
            (p["pod"], p["node"] or "<none>", p["status"]["code"], "; ".join(p["status"]["reasons"]))
            for p in entries])

    if result.get("pods"):
        lines.append(pods(result["pods"]))
    for placement in result.get("placements", []):
        score = placement.get("score")
        lines.append(f"placement {placement['placement'] or '<all nodes>'} ({len(placement['nodes'])} node(s)): "
                     f"{placement['status']['code']}" + (f", score {score['total']}" if score else ""))
        lines += [f"  {reason}" for reason in placement["status"]["reasons"] if reason]
        if placement["pods"]:
            lines.append(pods(placement["pods"]))
    return "\n".join(lines)


def _what_if(args: argparse.Namespace, files: list[str]) -> int:
    if args.name or len(files) > 1:
        raise UserError("explain --what-if-nodes takes at most one pod manifest (-f FILE), not a name")
    if args.count < 1:
        raise UserError(f"--count must be at least 1, got {args.count}")
    text = read_input(args.what_if_nodes)
    templates = [o for o in parse_objects(text, args.what_if_nodes) if isinstance(o, Node)]
    if len(templates) != 1:
        raise UserError(f"{args.what_if_nodes}: the what-if template needs exactly one Node, found {len(templates)}")
    if args.cluster:
        result = run_async(_explain_offline(args, files[0] if files else "", templates[0]))
    else:
        if args.config or args.plugins:
            raise UserError("--config and --plugins are for offline explain: add --cluster FILE")
        with client(args) as c:
            pod = read_input(files[0]) if files else None
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
    from ..canary import for_pod
    from ..dra.embedded import with_template_claims
    from ..profiles import build_registry_with_remote
    from ..scheduler import Scheduler, explain_pod
    from ..service import start_plugin_services

    endpoints = remote_endpoints(args.plugins)
    # Remote plugins reach back for the snapshot mirror and CycleState: serve those on loopback.
    services = await start_plugin_services() if endpoints else None
    remote = None
    try:
        if services is not None:
            registry, remote = await build_registry_with_remote(endpoints, services.address, services.services)
        else:
            registry = build_registry()
        cfg = scheduler_config(args.config, registry)
        scheduler = Scheduler(cfg, registry, seed=0)
        if remote is not None:
            await remote.attach(scheduler)
        cluster = parse_objects(read_input(args.cluster), args.cluster)
        if template is not None:
            # What-if: pending pods in the cluster file are the question (queued, never scheduled here).
            await scheduler.apply(cluster)
            asked = ([o for o in parse_objects(read_input(pod_file), pod_file) if isinstance(o, Pod)]
                     if pod_file else None)
            return await scheduler.what_if(template, args.count, asked)
        # Pending pods in the cluster file are not scheduled: only nodes, bound pods, the volume plugins'
        # objects (claims, volumes, classes, CSINodes) and DRA's (ResourceClaims, templates, DeviceClasses,
        # ResourceSlices) shape the snapshot.
        await scheduler.apply([o for o in cluster if isinstance(o, Node | StorageObject | ResourceObject)
                               or (isinstance(o, Pod) and o.node_name)])
        pods = [o for o in parse_objects(read_input(pod_file), pod_file) if isinstance(o, Pod)]
        if len(pods) != 1:
            raise UserError(f"{pod_file}: explain needs exactly one Pod, found {len(pods)}")
        # The claims of the pod's template entries, as the claim controller would make them.
        pod = with_template_claims(scheduler.cache.dra, pods[0])
        name = args.profile or pod.scheduler_name
        fwk = scheduler.profiles.get(name)
        if fwk is None:
            raise UserError(f"no profile named {name!r} (profiles: {', '.join(scheduler.profiles)})")
        fwk, variant = for_pod(fwk, pod)  # a profile with a canary: the variant that would schedule the pod
        result = await explain_pod(fwk, scheduler.cache.snapshot(), pod)
        return result if variant is None else {**result, "variant": variant}
    finally:
        if remote is not None:
            await remote.close()
        if services is not None:
            await services.stop()


def _variant_line(v: dict[str, Any]) -> str:
    """Which variant of a profile with a canary plugin explained the pod (and ran its last cycle)."""
    if v["variant"] == "canary":
        line = f"variant: canary ({v['plugin']} from endpoint {v['canary']} in place of {v['stable']})"
    else:
        line = f"variant: stable ({v['plugin']} from endpoint {v['stable']}; its canary is {v['canary']})"
    return line + (f"; its last cycle ran {v['lastCycle']}" if v.get("lastCycle") else "")


def _explain_table(result: dict[str, Any]) -> str:
    lines = [f"pod {result['pod']}: {result['status']['code']}"
             + (f" -> {result['selected']}" if result["selected"] else "")]
    for reason in result["status"]["reasons"]:
        lines.append(f"  {reason}")
    if result.get("variant"):
        lines.append(_variant_line(result["variant"]))
    rows = []
    for name, n in sorted(result["nodes"].items(), key=lambda kv: -(kv[1]["total"] or -1)):
        f = n["filter"] or {}
        scores = " ".join(f"{p}={s['weighted']}" for p, s in n["scores"].items())
        rows.append((name, f.get("code", "-"), f.get("plugin") or "", "; ".join(f.get("reasons", [])),
                     "" if n["total"] is None else n["total"], scores))
    lines.append(table(("NODE", "FILTER", "PLUGIN", "REASONS", "TOTAL", "WEIGHTED SCORES"), rows))
    if result.get("devices"):
        lines.append(f"devices on {result['selected']}:")
        lines.append(table(("CLAIM", "REQUEST", "DRIVER", "POOL", "DEVICE", "ALLOCATED"), [
            (d["claim"], d["request"], d["driver"], d["pool"], d["device"], "before" if d["allocated"] else "now")
            for d in result["devices"]]))
    return "\n".join(lines)
