"""``outrigger get`` and ``outrigger describe``: what the framework holds, shown as kubectl shows it
(its short names, columns, ``-o wide|name|json|yaml``, ``-l`` selectors and ``get -w``): pods, nodes,
PodGroups (``scheduling.k8s.io``, as a 1.37 API server prints them), Reservations and pods waiting in
Permit."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import grpc
import yaml

from clients.printers import (
    NODE_COLUMNS,
    NODE_WIDE_COLUMNS,
    POD_COLUMNS,
    POD_GROUP_COLUMNS,
    POD_WIDE_COLUMNS,
    node_row,
    object_name,
    pod_group_row,
    pod_row,
    rows_text,
    table_writer,
)
from pluginhost.quantity import format_quantity

from .flags import add_namespace, add_server, client
from .output import emit, table, utc
from .registry import UserError, command

if TYPE_CHECKING:
    from clients.client import SchedulerClient

__all__ = ["GET_OUTPUTS", "RESOURCE_TYPES", "clock", "cmd_describe", "cmd_get", "reservations_table", "waiting_table"]

#: What ``get`` and ``describe`` accept as TYPE (kubectl's names and short names) -> the kind.
RESOURCE_TYPES = {"pods": "Pod", "pod": "Pod", "po": "Pod", "nodes": "Node", "node": "Node", "no": "Node",
                  "podgroups": "PodGroup", "podgroup": "PodGroup", "podgroups.scheduling.k8s.io": "PodGroup",
                  "podgroup.scheduling.k8s.io": "PodGroup",
                  "reservations": "Reservation", "reservation": "Reservation", "waiting": "Waiting"}
#: The kinds that live in a namespace.
NAMESPACED = ("Pod", "PodGroup")
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
    if args.all_namespaces and any(kind in NAMESPACED and name for kind, name in targets):
        raise UserError("a resource cannot be retrieved by name across all namespaces (drop -A, or give -n NS)")
    return targets


def _parse_targets(words: Sequence[str], verb: str) -> list[tuple[str, str]]:

    def kind(word: str) -> str:
        found = RESOURCE_TYPES.get(word.lower())
        if found is None or (verb == "describe" and found not in ("Pod", "Node", "PodGroup")):
            allowed = "pods (po), nodes (no), podgroups" + ("" if verb == "describe" else ", reservations, waiting")
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
    _resource_args(p, "pods (po), nodes (no), podgroups, reservations, or waiting (pods held in Permit)")
    p.add_argument("--phase", default="", help="pods: only this phase (Pending, Unschedulable, Waiting, Bound...)")
    p.add_argument("--profile", default="", help="waiting: only pods of this profile")
    p.add_argument("-o", "--output", choices=GET_OUTPUTS, default="table",
                   help="table (default), wide (more columns), name (TYPE/NAME), json or yaml (v1 objects)")
    p.add_argument("-w", "--watch", action="store_true",
                   help="pods, nodes: after the list, print each change until interrupted (or --request-timeout)")
    p.add_argument("--output-watch-events", action="store_true",
                   help="with --watch: an EVENT column (ADDED, MODIFIED, DELETED)")
    add_server(p)


@command("get", "show pods, nodes, PodGroups, reservations or pods waiting in Permit (as kubectl get)", _get_args,
         examples="""\
  outrigger get pods                                 # namespace default; -A for all namespaces
  outrigger get po -A -o wide                        # IP, NODE, NOMINATED NODE columns
  outrigger get pods -l 'app=web,tier!=cache' -o name
  outrigger get pod web -o yaml                      # a v1 Pod that `outrigger apply -f` takes back
  outrigger get pods/web nodes/n1
  outrigger get pods -w --request-timeout 60s        # each change, for a minute
  outrigger get nodes -l 'zone in (a,b)'
  outrigger get podgroups -A                         # POLICY, WORKLOAD, STATUS as a 1.37 API server prints them
  outrigger get pods -n shop --phase Unschedulable
  outrigger get reservations -o json
  outrigger get waiting --profile gang-scheduler""")
def cmd_get(args: argparse.Namespace) -> int:
    targets = _targets(args, "get")
    timeout = _request_timeout(args.request_timeout)
    kinds = list(dict.fromkeys(k for k, _ in targets))
    if args.selector and not set(kinds) <= {"Pod", "Node", "PodGroup"}:
        raise UserError("-l/--selector selects pods, nodes and podgroups only")
    if args.watch:
        if len(kinds) != 1 or kinds[0] not in ("Pod", "Node"):
            raise UserError("get --watch watches one type: pods or nodes")
        if args.phase:
            raise UserError("get --watch does not take --phase")
    elif args.output_watch_events:
        raise UserError("--output-watch-events goes with --watch")
    namespace = "" if args.all_namespaces else args.namespace
    with client(args, timeout) as c:
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
    if kind == "PodGroup":
        return _pod_groups(c, names, namespace, args.selector, missing)
    if kind == "Reservation":
        reservations = c.list_reservations()
        for name in names:
            if not any(r.name == name for r in reservations):
                missing.append(f"reservation {name!r} not found")
        return [r for r in reservations if not names or r.name in names]
    if names:
        raise UserError("get waiting lists every waiting pod; it takes no NAME (see --profile)")
    return c.list_waiting_pods(profile=args.profile)


def _pod_groups(c: SchedulerClient, names: list[str], namespace: str, selector: str,
                missing: list[str]) -> list[Any]:
    from clients.selector import SelectorError, parse_selector

    if not names:
        try:
            chosen = parse_selector(selector)
        except SelectorError as exc:
            raise UserError(str(exc)) from None
        return [g for g in c.list_pod_groups(namespace=namespace)
                if chosen.matches((g.manifest.get("metadata") or {}).get("labels") or {})]
    groups = []
    for name in names:
        found = c.list_pod_groups(namespace=namespace or "default", name=name)
        if not found:
            missing.append(f'podgroups.scheduling.k8s.io "{name}" not found')
        groups += found
    return groups


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
        where = f" in {listed} namespace" if found[0][0] in NAMESPACED and listed != "*" else ""
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
    elif kind == "PodGroup":
        head = ("NAMESPACE", *POD_GROUP_COLUMNS) if all_namespaces else POD_GROUP_COLUMNS
        rows = [pod_group_row(g.manifest, now, namespace=all_namespaces) for g in objs]
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
             ",".join(r.owners) or "-", utc(r.expires_at) if r.expires_at else "never", r.reason)
            for r in reservations]
    return table(("NAME", "PHASE", "NODE", "RESERVED", "ALLOCATED", "OWNERS", "EXPIRES", "REASON"), rows)


def waiting_table(waiting: Sequence[Any]) -> str:
    rows = [(w.ref.namespace, w.ref.name, w.node_name, ",".join(w.pending_plugins), w.profile, utc(w.deadline))
            for w in waiting]
    return table(("NAMESPACE", "NAME", "NODE", "WAITING FOR", "PROFILE", "DEADLINE"), rows)


def _describe_args(p: argparse.ArgumentParser) -> None:
    _resource_args(p, "pods (po), nodes (no) or podgroups")
    add_server(p)


@command("describe", "a pod, node or PodGroup in detail, with its scheduling events (as kubectl describe)",
         _describe_args,
         examples="""\
  outrigger describe pod web                         # conditions and events: why it is (not) scheduled
  outrigger describe pods/web -n shop
  outrigger describe node n1                         # its pods and their share of its resources
  outrigger describe pods -l app=web
  outrigger describe podgroup train-workers          # its spec and conditions, and the pods that name it""")
def cmd_describe(args: argparse.Namespace) -> int:
    from clients.describe import describe_node, describe_pod, describe_pod_group

    targets = _targets(args, "describe")
    namespace = "" if args.all_namespaces else args.namespace
    texts: list[str] = []
    missing: list[str] = []
    with client(args, _request_timeout(args.request_timeout)) as c:
        for kind in dict.fromkeys(k for k, _ in targets):
            names = [n for k, n in targets if k == kind and n]
            if args.selector and names:
                raise UserError("describe takes names or -l/--selector, not both")
            for obj in _fetch(c, kind, names, namespace, argparse.Namespace(phase="", selector=args.selector),
                              missing):
                if kind == "Pod":
                    events = c.list_events("Pod", obj.ref.name, obj.ref.namespace, uid=obj.ref.uid)
                    texts.append(describe_pod(obj, events, clock()))
                elif kind == "PodGroup":
                    texts.append(describe_pod_group(obj))
                else:
                    pods = c.list_pods(node_name=obj.name, objects=True)
                    texts.append(describe_node(obj, pods, [], clock()))
    print("\n\n".join(texts), end="")
    if missing:
        raise UserError("; ".join(missing))
    if not texts:
        in_namespace = bool(namespace) and any(k in NAMESPACED for k, _ in targets)
        print("No resources found" + (f" in {namespace} namespace." if in_namespace else "."), file=sys.stderr)
    return 0
