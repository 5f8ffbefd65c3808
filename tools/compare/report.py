"""The report of a comparison: what it found (:class:`CompareResults`), summed up per workload against the
targets (docs/benchmarks.md), as JSON and as Markdown.

::

    doc = to_json(results, commit="abc1234")
    Path("compare-results.md").write_text(to_markdown(doc))
"""

from __future__ import annotations

import dataclasses
import os
import platform
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .dra import DraReport
from .groups import GroupReport
from .placements import PlacementReport, PluginAgreement
from .reasons import ReasonsReport
from .schedulers import KUBE, OUTRIGGER, SCHEDULERS
from .throughput import ThroughputRun

__all__ = [
    "CompareResults",
    "dra_json",
    "machine_info",
    "placement_summary",
    "throughput_summary",
    "to_json",
    "to_markdown",
]


TARGET_BASIC_RATIO = 1.0
TARGET_BASIC_PODS_PER_SECOND = 680.0
TARGET_OTHER_RATIO = 0.8
#: The DRA workloads: at least kube-scheduler's pace, and scheduler_perf's CI threshold for
#: SchedulingWithResourceClaimTemplate/5000pods_500nodes (56 pods/s; met at that size only).
TARGET_DRA_RATIO = 1.0
TARGET_PODS_PER_SECOND = {"SchedulingBasic": TARGET_BASIC_PODS_PER_SECOND, "SchedulingWithResourceClaimTemplate": 56.0}
_DRA = ("SchedulingWithResourceClaimTemplate", "SchedulingWithResourceClaim")
TARGET_TIE_AGREEMENT = 0.99


@dataclass
class CompareResults:
    throughput: list[ThroughputRun] = field(default_factory=list)
    placements: list[PlacementReport] = field(default_factory=list)
    reasons: ReasonsReport | None = None
    sizes: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    dra: DraReport | None = None
    groups: list[GroupReport] = field(default_factory=list)



def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def throughput_summary(runs: Sequence[ThroughputRun]) -> list[dict[str, Any]]:
    """Per workload: both schedulers' medians, the median of the per-round ratios, and the target."""
    out = []
    for name in dict.fromkeys(r.workload for r in runs):
        mine = [r for r in runs if r.workload == name and not r.error]
        by: dict[str, list[ThroughputRun]] = {s: [r for r in mine if r.scheduler == s] for s in SCHEDULERS}
        rounds = sorted({r.round for r in mine})
        ratios = []
        for rnd in rounds:
            k = [r for r in by[KUBE] if r.round == rnd]
            o = [r for r in by[OUTRIGGER] if r.round == rnd]
            if k and o and k[0].pods_per_second > 0:
                ratios.append(o[0].pods_per_second / k[0].pods_per_second)
        ratio = _median(ratios)
        basic = name == "SchedulingBasic"
        target = TARGET_BASIC_RATIO if basic else TARGET_DRA_RATIO if name in _DRA else TARGET_OTHER_RATIO
        row: dict[str, Any] = {
            "workload": name, "rounds": len(rounds), "ratio": round(ratio, 3), "ratios": [round(x, 3) for x in ratios],
            "target_ratio": target, "ratio_met": bool(ratios) and ratio >= target,
            "errors": [f"{r.scheduler} round {r.round}: {r.error}" for r in runs if r.workload == name and r.error],
        }
        for s, rs in by.items():
            row[s] = {
                "pods_per_second": round(_median([r.pods_per_second for r in rs]), 1),
                "runs": [round(r.pods_per_second, 1) for r in rs],
                "create_seconds": round(_median([r.create_seconds for r in rs]), 2),
                "cpu_ms_per_pod": round(_median([r.scheduler_cpu_ms_per_pod for r in rs]), 3),
                "apiserver_cpu_ms_per_pod": round(_median([r.apiserver_cpu_ms_per_pod for r in rs]), 3),
                "etcd_cpu_ms_per_pod": round(_median([r.etcd_cpu_ms_per_pod for r in rs]), 3),
                "harness_cpu_ms_per_pod": round(_median([r.harness_cpu_ms_per_pod for r in rs]), 3),
                "other_cpu_share": round(_median([r.other_cpu_share for r in rs]), 3),
            }
        if name in TARGET_PODS_PER_SECOND:
            row["target_pods_per_second"] = TARGET_PODS_PER_SECOND[name]
            row["pods_per_second_met"] = row[OUTRIGGER]["pods_per_second"] >= TARGET_PODS_PER_SECOND[name]
        out.append(row)
    return out


def placement_summary(report: PlacementReport) -> dict[str, Any]:
    det, det_ok = report.count("deterministic")
    tie, tie_ok = report.count("tie")
    single, single_ok = report.count("single")
    return {
        "workload": report.workload, "description": report.description, "deterministic_workload": report.deterministic,
        "pods": len(report.pods), "one_best_node": det, "same_node": det_ok, "tied": tie, "within_best": tie_ok,
        "single_feasible_node": single, "single_same": single_ok, "moved": report.moved,
        "all_agree": det == det_ok and tie == tie_ok and single == single_ok and not report.error,
        # The targets: every pod with one best node on it, and 99% of tied pods within the best.
        "target_met": (not report.error and det == det_ok and single == single_ok
                       and (tie == 0 or tie_ok >= TARGET_TIE_AGREEMENT * tie)),
        "score_disagreements": len(report.score_disagreements), "error": report.error,
    }


def to_json(results: CompareResults, commit: str = "") -> dict[str, Any]:
    plugins: dict[str, PluginAgreement] = {}
    for rep in results.placements:
        for name, a in rep.plugins.items():
            total = plugins.setdefault(name, PluginAgreement(name))
            total.compared += a.compared
            total.equal += a.equal
            total.only_kube += a.only_kube
            total.only_outrigger += a.only_outrigger
    reasons = results.reasons
    return {
        "commit": commit, "machine": machine_info(), "seconds": round(results.seconds, 1), "sizes": results.sizes,
        "throughput": {"summary": throughput_summary(results.throughput),
                       "runs": [dataclasses.asdict(r) for r in results.throughput]},
        "placements": {
            "summary": [placement_summary(r) for r in results.placements],
            "plugins": [dataclasses.asdict(a) for a in sorted(plugins.values(), key=lambda a: a.plugin)],
            "disagreements": {r.workload: [dataclasses.asdict(p) for p in r.pods if not p.agrees]
                              for r in results.placements},
            "score_disagreements": {r.workload: [dataclasses.asdict(d) for d in r.score_disagreements]
                                    for r in results.placements},
        },
        "reasons": None if reasons is None else {
            "identical": sum(p.identical for p in reasons.pods), "pods": len(reasons.pods), "error": reasons.error,
            "by_pod": [{**dataclasses.asdict(p), "identical": p.identical} for p in reasons.pods],
        },
        "dra": None if results.dra is None else dra_json(results.dra),
        "groups": groups_json(results.groups),
    }


def groups_json(reports: Sequence[GroupReport]) -> dict[str, Any]:
    """The PodGroup comparison: per workload, the groups that agree, each scheduler's pods/s, and what
    differs; the pods/s ratio over the timed workloads (bound pods over seconds, summed)."""
    rows = []
    totals = {s: [0, 0.0] for s in SCHEDULERS}
    for r in reports:
        runs = {s: {"bound": run.bound, "pods": run.pods, "seconds": round(run.seconds, 3),
                    "pods_per_second": round(run.pods_per_second, 1)} for s, run in r.runs.items()}
        if r.timed and not r.error:
            for s, run in r.runs.items():
                totals[s][0] += run.bound
                totals[s][1] += run.seconds
        rows.append({"workload": r.workload, "description": r.description, "timed": r.timed, "error": r.error,
                     "groups": len(r.groups), "agree": sum(g.agrees for g in r.groups), "same_load": r.same_load,
                     "same_victims": r.same_victims, "all_agree": r.agrees, "runs": runs,
                     "victims": {s: run.evicted for s, run in r.runs.items()},
                     "raced": [g.group for g in r.groups if g.raced],
                     "differences": [{"group": g.group, "differ": g.differences, KUBE: dataclasses.asdict(g.kube),
                                      OUTRIGGER: dataclasses.asdict(g.outrigger)} for g in r.groups if not g.agrees]})
    rate = {s: (b / t if t > 0 else 0.0) for s, (b, t) in totals.items()}
    ratio = rate[OUTRIGGER] / rate[KUBE] if rate[KUBE] > 0 else 0.0
    return {"workloads": rows, "pods_per_second": {s: round(v, 1) for s, v in rate.items()}, "ratio": round(ratio, 3)}


def dra_json(report: DraReport) -> dict[str, Any]:
    """The devices comparison: how many pods agree, each pod's outcome on both, devices per node."""
    return {"agree": sum(p.agrees for p in report.pods), "pods": len(report.pods), "all_agree": report.agrees,
            "error": report.error, "by_pod": [{**dataclasses.asdict(p), "agrees": p.agrees} for p in report.pods],
            "devices_by_node": {KUBE: report.kube_devices, OUTRIGGER: report.outrigger_devices}}


def machine_info() -> dict[str, Any]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def _cpu(row: dict[str, Any]) -> str:
    ms = " / ".join(f"{row.get(k, 0.0):.2f}" for k in ("cpu_ms_per_pod", "apiserver_cpu_ms_per_pod",
                                                        "etcd_cpu_ms_per_pod", "harness_cpu_ms_per_pod"))
    return f"{ms} (others: {100 * row.get('other_cpu_share', 0.0):.0f}%)"


def to_markdown(doc: dict[str, Any], *, details: int = 30) -> str:
    lines = [f"Commit `{doc['commit'] or 'unknown'}`, {doc['machine']['cpus']} CPUs, "
             f"{doc['seconds']:.0f} s in all.", "", "Throughput (pods/s, medians over rounds; CPU ms per measured pod: "
             "scheduler / API server / etcd / the harness creating and watching, and the share of the machine's "
             "CPU taken by other processes meanwhile):", "",
             f"| workload | size | rounds | {KUBE} | {OUTRIGGER} | ratio (per round) | target | CPU {KUBE} | "
             f"CPU {OUTRIGGER} |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in doc["throughput"]["summary"]:
        k, o = row[KUBE], row[OUTRIGGER]
        target = f"≥ {row['target_ratio']}x" + (f", ≥ {row['target_pods_per_second']:.0f} pods/s"
                                               if "target_pods_per_second" in row else "")
        met = "met" if row["ratio_met"] and row.get("pods_per_second_met", True) else "not met"
        lines.append(f"| {row['workload']} | {doc['sizes'].get(row['workload'], '')} | {row['rounds']} | "
                     f"{k['pods_per_second']:.0f} | {o['pods_per_second']:.0f} | {row['ratio']:.2f} "
                     f"({', '.join(f'{x:.2f}' for x in row['ratios'])}) | {target}: {met} | "
                     f"{_cpu(k)} | {_cpu(o)} |")
        lines.extend(f"| | failed: {e} | | | | | | | |" for e in row["errors"])
    lines += ["", "Placements (Outrigger on kube-scheduler's cluster state, pod by pod):", "",
              "| workload | pods | one best node: same node | tied best: within kube-scheduler's best | "
              "one feasible node: same | moved | score disagreements |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for s in doc["placements"]["summary"]:
        lines.append(f"| {s['workload']} ({s['description']}) | {s['pods']} | {s['same_node']}/{s['one_best_node']} "
                     f"| {s['within_best']}/{s['tied']} | {s['single_same']}/{s['single_feasible_node']} "
                     f"| {s['moved']} | {s['score_disagreements']} |"
                     + (f" failed: {s['error']}" if s["error"] else ""))
    lines += ["", "Per-plugin agreement (every Score plugin's weighted score on every node of every scored pod):", "",
              "| plugin | scores compared | equal | only kube-scheduler ran it | only Outrigger ran it |",
              "| --- | --- | --- | --- | --- |"]
    for a in doc["placements"]["plugins"]:
        lines.append(f"| {a['plugin']} | {a['compared']} | {a['equal']} | {a['only_kube']} | {a['only_outrigger']} |")
    wrong = [(w, p) for w, ps in doc["placements"]["disagreements"].items() for p in ps]
    lines += ["", f"Placement disagreements: {len(wrong)}."]
    if wrong:
        lines += ["", "| workload | pod | kube-scheduler's node (best set) | Outrigger's node | totals: kube on its "
                  "node / Outrigger on that node / Outrigger on its node |", "| --- | --- | --- | --- | --- |"]
        lines += [f"| {w} | {p['pod']} | {p['kube_node']} ({', '.join(p['kube_best'])}) | {p['outrigger_node']} | "
                  f"{p['kube_total']} / {p['outrigger_total_on_kube_node']} / {p['outrigger_total']} |"
                  for w, p in wrong[:details]]
    scores = [(w, d) for w, ds in doc["placements"]["score_disagreements"].items() for d in ds]
    lines += ["", f"Score disagreements: {len(scores)}" + (f" (the first {details}; all in the JSON)."
                                                           if len(scores) > details else ".")]
    if scores:
        lines += ["", "| workload | pod | node | plugin | kube-scheduler | Outrigger |",
                  "| --- | --- | --- | --- | --- | --- |"]
        lines += [f"| {w} | {d['pod']} | {d['node']} | {d['plugin']} | {d['kube']} | {d['outrigger']} |"
                  for w, d in scores[:details]]
    reasons = doc["reasons"]
    if reasons is not None:
        lines += ["", f"FailedScheduling messages: {reasons['identical']}/{reasons['pods']} identical"
                  + (f" (failed: {reasons['error']})" if reasons["error"] else "") + ".", ""]
        lines += ["| pod | identical | message (kube-scheduler's; Outrigger's when it differs) |",
                  "| --- | --- | --- |"]
        for p in reasons["by_pod"]:
            msg = p["kube"] if p["identical"] else f"{p['kube']}<br>Outrigger: {p['outrigger']}"
            lines.append(f"| {p['pod']} | {'yes' if p['identical'] else 'no'} | {msg} |")
    if doc.get("dra") is not None:
        lines += _dra_markdown(doc["dra"])
    if doc.get("groups") and doc["groups"]["workloads"]:
        lines += _groups_markdown(doc["groups"])
    return "\n".join(lines) + "\n"


def _outcome(o: dict[str, Any]) -> str:
    return f"{o['node']}: {', '.join(o['devices'])}" if o["node"] else f"unschedulable: {o['event']}"


def _dra_markdown(dra: dict[str, Any]) -> list[str]:
    same = dra["devices_by_node"][KUBE] == dra["devices_by_node"][OUTRIGGER]
    lines = ["", f"Devices (DRA, pods created one at a time): {dra['agree']}/{dra['pods']} pods agree; devices "
             f"allocated per node {'equal' if same else 'differ'}" + (f" (failed: {dra['error']})" if dra["error"]
                                                                     else "") + ".", "",
             "| pod | devices decide the node | agrees | kube-scheduler | Outrigger (when it differs) |",
             "| --- | --- | --- | --- | --- |"]
    for p in dra["by_pod"]:
        k, o = _outcome(p["kube"]), _outcome(p["outrigger"])
        lines.append(f"| {p['pod']} | {'yes' if p['fixed'] else 'no'} | {'yes' if p['agrees'] else 'no'} | {k} | "
                     f"{'' if o == k else o} |")
    if not same:
        lines += ["", f"Devices per node: kube-scheduler {dra['devices_by_node'][KUBE]}, "
                      f"Outrigger {dra['devices_by_node'][OUTRIGGER]}."]
    return lines


def _groups_markdown(groups: dict[str, Any]) -> list[str]:
    rate = groups["pods_per_second"]
    lines = ["", f"PodGroups (GenericWorkload, TopologyAwareWorkloadScheduling): pods/s over the timed workloads "
             f"{KUBE} {rate[KUBE]:.0f}, {OUTRIGGER} {rate[OUTRIGGER]:.0f}, "
             f"ratio {groups['ratio']:.2f} (target ≥ 1.0x).",
             "", f"| workload | groups agreeing | pods per node alike | bound {KUBE} / {OUTRIGGER} | pods/s {KUBE} / "
             f"{OUTRIGGER} |", "| --- | --- | --- | --- | --- |"]
    for w in groups["workloads"]:
        k, o = w["runs"].get(KUBE, {}), w["runs"].get(OUTRIGGER, {})
        speed = (f"{k.get('pods_per_second', 0):.0f} / {o.get('pods_per_second', 0):.0f}" if w["timed"]
                 else "(not timed)")
        lines.append(f"| {w['workload']} ({w['description']}) | {w['agree']}/{w['groups']} | "
                     f"{'yes' if w['same_load'] else 'no'} | {k.get('bound', 0)} / {o.get('bound', 0)} | {speed} |"
                     + (f" failed: {w['error']}" if w["error"] else ""))
    for w in groups["workloads"]:
        for g in w.get("raced", ()):
            lines.append(f"- {w['workload']} {g}: agrees but for {KUBE}'s condition race (False over its own True "
                         "after the group was placed with pods left behind; tools/compare/groups.py SameGroup.raced)")
        for d in w["differences"]:
            k, o = d[KUBE], d[OUTRIGGER]
            lines.append(f"- {w['workload']} {d['group']}: {', '.join(d['differ'])} differ; {KUBE} "
                         f"{k['conditions']} {sorted(k['bound'])}, {OUTRIGGER} {o['conditions']} {sorted(o['bound'])}")
        victims = w.get("victims") or {}
        if not w.get("same_victims", True) and victims:
            k, o = victims.get(KUBE, []), victims.get(OUTRIGGER, [])
            lines.append(f"- {w['workload']}: victims differ; {KUBE} {len(k)} evicted, {OUTRIGGER} {len(o)}; only "
                         f"{KUBE}'s: {sorted(set(map(tuple, k)) - set(map(tuple, o)))[:5]}, only {OUTRIGGER}'s: "
                         f"{sorted(set(map(tuple, o)) - set(map(tuple, k)))[:5]}")
    return lines
