"""``python -m tools.dracompare``: see the package docstring."""

from __future__ import annotations

import argparse
import copy
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

from framework.dra.allocator import Allocator
from framework.dra.models import device_class_from_dict, resource_claim_from_dict, resource_slice_from_dict
from pluginhost.model import Node

from .cases import random_case

HARNESS = Path(__file__).parent / "harness"
BINARY = Path.home() / ".cache" / "outrigger" / "dracompare" / "harness"


def build() -> Path:
    """The harness binary, built when missing or older than its source."""
    source = HARNESS / "main.go"
    if not BINARY.exists() or BINARY.stat().st_mtime < source.stat().st_mtime:
        BINARY.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "build", "-o", str(BINARY), "."], cwd=HARNESS, check=True, timeout=900)
    return BINARY


def outrigger(case: dict[str, Any]) -> dict[str, Any]:
    """Outrigger's answer, in the harness's shape."""
    meta = case["node"]["metadata"]
    node = Node(name=meta["name"], labels=dict(meta.get("labels", {})))
    classes = {c["metadata"]["name"]: device_class_from_dict(c) for c in case["classes"]}
    slices = [resource_slice_from_dict(s) for s in case["slices"]]
    claims = [resource_claim_from_dict(c) for c in case["claims"]]
    answer = Allocator(slices, classes, [tuple(d) for d in case["allocated"]]).allocate(node, claims)
    if answer.error:
        return {"error": answer.error}
    if answer.results is None:
        return {"results": None}
    return {"results": [[[r.request, r.driver, r.pool, r.device] for r in res.results] for res in answer.results]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.dracompare", description=__doc__)
    parser.add_argument("--cases", type=int, default=1000, help="random cases to compare (default 1000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random cases (default 1)")
    parser.add_argument("--show", type=int, default=5, help="differences to print in full (default 5)")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    cases = [random_case(rng) for _ in range(args.cases)]
    run = subprocess.run(
        [str(build())], input=json.dumps(cases), capture_output=True, text=True, check=True, timeout=900
    )
    kube = json.loads(run.stdout)
    differences = allocated = 0
    for case, want in zip(cases, kube, strict=True):
        got = outrigger(copy.deepcopy(case))
        allocated += bool(want.get("results"))
        if got != want:
            differences += 1
            if differences <= args.show:
                print(json.dumps({"case": case, "kube-scheduler": want, "outrigger": got}))
    print(f"{args.cases} cases ({allocated} allocated): {differences} differ", file=sys.stderr)
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
