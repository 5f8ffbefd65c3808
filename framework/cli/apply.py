"""``outrigger apply`` and ``outrigger delete``: what the framework holds, changed from manifests or
by name (``apply --wait`` waits for the pods to be bound)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, Any

from pluginhost.manifest import load_documents, parse_objects
from pluginhost.model import PersistentVolumeClaim, Pod, PodDisruptionBudget, Reservation
from pluginhost.snapshot import StorageObject, storage_kind

from .flags import add_filename, add_namespace, add_output, add_server, client, read_input
from .output import emit
from .progress import ProgressBar
from .registry import UserError, command

if TYPE_CHECKING:
    from clients.client import SchedulerClient

__all__ = ["APPLY_CHUNK", "cmd_apply", "cmd_delete"]

# Objects per Apply request when a large apply is sent in parts (so a progress bar can move).
APPLY_CHUNK = 500


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
    manifests = [(path, read_input(path)) for path in args.filename]
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

    with client(args) as c:
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
            for obj in parse_objects(read_input(path), path):
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
    with client(args) as c:
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
