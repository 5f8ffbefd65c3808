"""The web console under /ui/ in a real headless Chromium (Debian's ``chromium``, driven by Playwright),
on a real ``outrigger serve --http`` process with a remote plugin served by a real plugin host process
that exports its spans to the console's OTLP receiver. What the pages show is checked against the CLI's
own answers: ``outrigger explain -o json`` (chosen node, every score, Filter verdicts), ``outrigger get``
(unschedulable pods by reason); the waterfall shows the plugin host's own span; the overview's counters
move while pods are scheduled; the secure port answers 401 to /ui/ without credentials.

Screenshots of the overview and of a pod's page are taken every run (into a temporary folder, or into
``$OUTRIGGER_CONSOLE_SCREENSHOTS``: ``docs/images`` refreshes the README's).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_remote_examples import config, pod
from test_remote_harness import HostProcess
from traced_plugins import AUTHOR_SPAN

from pluginhost.examples.nodelabels import PREFER, REQUIRE

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ROOT = Path(__file__).resolve().parent.parent
TOKEN = "console-test-token"  # a system:masters user
MONITORING_TOKEN = "console-monitoring-token"  # may read /metrics, not the console
LABELS_HOST = "labels-host"
#: Seconds any one wait in these tests may take.
WAIT = 60.0

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="chromium is not installed (.ci/run and `make test` install it)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(*args: str, server: str, log: Path | None = None) -> str:
    """``outrigger ARGS --server SERVER``'s output; three tries when the framework cannot be reached (a
    connection not made in time on a loaded machine), as tests/test_docs.py gives client commands."""
    for _ in range(3):
        out = subprocess.run([sys.executable, "-m", "framework.cli", *args, "--server", server],
                             capture_output=True, text=True, timeout=WAIT, cwd=ROOT)
        if "cannot reach the framework" not in out.stderr:
            break
        time.sleep(1)
    served = f"\nserve's log:\n{log.read_text()[-4000:]}" if log is not None and log.exists() else ""
    assert out.returncode == 0, f"outrigger {' '.join(args)}: {out.stderr}{served}"
    return out.stdout


def wait_for(cond: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:g}s")
        time.sleep(0.1)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def node(name: str, cpu: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


#: Four nodes of different sizes (their scores differ), two of them with SSDs.
NODES = [node("n0", "4", {"disktype": "ssd"}), node("n1", "6", {}), node("n2", "8", {"disktype": "ssd"}),
         node("n3", "10", {})]


def workload(prefix: str, n: int) -> list[dict[str, Any]]:
    """``n`` pods that fit (preferring SSD nodes: the remote plugin's score counts)."""
    return [pod(f"{prefix}-{i}", cpu="250m", annotations={PREFER: "disktype=ssd"}) for i in range(n)]


#: Pods that cannot be placed, for two reasons: too big (NodeResourcesFit), a label no node has (the
#: remote plugin's Filter).
UNSCHEDULABLE = [pod(f"big-{i}", cpu="64") for i in range(3)] + [
    pod(f"gpu-{i}", cpu="100m", annotations={REQUIRE: "accelerator=gpu"}) for i in range(2)]


def manifest(docs: list[dict[str, Any]]) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})


class Serve:
    """``outrigger serve`` with --http, a token-protected secure port and the console's OTLP receiver,
    scheduling with the remote NodeLabels of a plugin host process."""

    def __init__(self, tmp: Path) -> None:
        self.grpc, self.http, self.secure, self.otlp = (f"127.0.0.1:{free_port()}" for _ in range(4))
        self.host = HostProcess("traced_plugins:TracedNodeLabels", env={
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{self.otlp}",
            "OTEL_SERVICE_NAME": LABELS_HOST, "OTEL_BSP_SCHEDULE_DELAY": "100"})
        self.tmp = tmp
        self.proc: subprocess.Popen[str] | None = None
        self.log: Any = None

    def start(self) -> Serve:
        address = self.host.start()
        (self.tmp / "plugins.yaml").write_text(yaml.safe_dump(
            {"apiVersion": "outrigger.io/v1alpha1", "kind": "RemotePlugins",
             "plugins": [{"name": "labels", "address": address}]}))
        (self.tmp / "scheduler.yaml").write_text(config(["NodeLabels"], {}))
        (self.tmp / "tokens.csv").write_text(f'{TOKEN},console-admin,1,"system:masters"\n'
                                             f'{MONITORING_TOKEN},prometheus,2,"system:monitoring"\n')
        self.log = (self.tmp / "serve.log").open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "framework.cli", "serve", "--listen", self.grpc, "--http", self.http,
             "--secure-port", self.secure.rpartition(":")[2], "--token-auth-file", str(self.tmp / "tokens.csv"),
             "--console-otlp", self.otlp, "--config", str(self.tmp / "scheduler.yaml"),
             "--plugins", str(self.tmp / "plugins.yaml")],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])})

        def up() -> bool:
            assert self.proc is not None and self.proc.poll() is None, (self.tmp / "serve.log").read_text()
            try:
                with urllib.request.urlopen(f"http://{self.http}/readyz", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for(up, "serve ready")
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.host.stop()
        if self.log is not None:
            self.log.close()

    def apply(self, docs: list[dict[str, Any]]) -> None:
        path = self.tmp / f"apply-{time.monotonic_ns()}.json"
        path.write_text(manifest(docs))
        self.cli("apply", "-f", str(path))

    def cli(self, *args: str) -> str:
        return cli(*args, server=self.grpc, log=self.tmp / "serve.log")

    def pods(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = json.loads(self.cli("get", "pods", "-A", "-o", "json"))["items"]
        return items

    def explain(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(self.cli("explain", name, "-o", "json"))
        return result


def phase_of(item: dict[str, Any]) -> str:
    for c in item.get("status", {}).get("conditions", []):
        if c["type"] == "PodScheduled":
            return "Bound" if c["status"] == "True" else c.get("reason", "")
    return "Pending"


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    srv = Serve(tmp_path_factory.mktemp("console"))
    try:
        yield srv.start()
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def page(serve: Serve) -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
        try:
            pg = browser.new_page(viewport={"width": 1400, "height": 1000})
            pg.set_default_timeout(WAIT * 1000)
            yield pg
        finally:
            browser.close()


def shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("OUTRIGGER_CONSOLE_SCREENSHOTS") or tmp_path)
    if not out.is_absolute():
        out = ROOT / out
    out.mkdir(parents=True, exist_ok=True)
    return out


def counter(page: Any, key: str) -> float:
    text = page.inner_text(f'[data-counter="{key}"]')
    return float(text.split()[0]) if text[:1].isdigit() else 0.0  # a dash before the first sample


def test_overview_counters_move_and_unschedulable_groups_equal_get(serve: Serve, page: Any, tmp_path: Path) -> None:
    page.goto(f"http://{serve.http}/ui/")
    page.wait_for_selector("#live.on")  # the server-sent events are flowing
    serve.apply(NODES)
    seen: list[float] = [counter(page, "scheduled")]
    for batch in range(3):  # the counter moves with each batch, while the page stays open
        serve.apply(workload(f"web{batch}", 6))
        wait_for(lambda b=batch: counter(page, "scheduled") >= 6 * (b + 1), f"batch {batch} counted on the page")
        seen.append(counter(page, "scheduled"))
    assert seen == sorted(seen) and seen[0] < seen[1] < seen[2] < seen[3], seen
    serve.apply(UNSCHEDULABLE)

    def groups_from_get() -> dict[str, int]:
        by_reason: collections.Counter[str] = collections.Counter()
        for item in serve.pods():
            for c in item.get("status", {}).get("conditions", []):
                if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable":
                    by_reason[c["message"]] += 1
        return dict(by_reason)

    expected = wait_for(lambda: (g := groups_from_get()) and sum(g.values()) == 5 and g, "5 pods unschedulable")
    assert len(expected) == 2, expected  # two reasons: too big, and the label no node has

    def groups_on_page() -> dict[str, int]:
        page.goto(f"http://{serve.http}/ui/#/")
        page.reload()
        page.wait_for_selector("#unschedulable, [data-unschedulable-empty]")
        rows = page.query_selector_all("#unschedulable [data-group]")
        return {r.query_selector("[data-reason]").inner_text(): int(r.query_selector("[data-count]").inner_text())
                for r in rows}

    assert groups_on_page() == expected
    page.wait_for_selector("#live.on")
    page.wait_for_selector("#queues-chart canvas")
    page.screenshot(path=str(shots(tmp_path) / "console-overview.png"), full_page=False)


def test_pod_page_scores_and_chosen_node_equal_explain(serve: Serve, page: Any, tmp_path: Path) -> None:
    # The last pod placed: nothing was placed after it, so explain (which takes it off its node) sees
    # the cluster its attempt saw, and its attempt's scores are explain's.
    wait_for(lambda: all(phase_of(i) in ("Bound", "Unschedulable") for i in serve.pods()), "earlier pods settled")
    last = pod("last", cpu="500m", annotations={PREFER: "disktype=ssd"})
    serve.apply([last])
    wait_for(lambda: any(i["metadata"]["name"] == "last" and phase_of(i) == "Bound" for i in serve.pods()),
             "the last pod bound")
    explained = serve.explain("last")
    assert explained["status"]["code"] == "Success"

    page.goto(f"http://{serve.http}/ui/#/pod/default/last")
    page.wait_for_selector("[data-attempt] table.scores")
    assert page.inner_text("[data-node-name]") == explained["selected"]
    assert page.inner_text("[data-attempt] [data-selected]") == explained["selected"]

    def table_of(scope: str) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for cell in page.query_selector_all(f"{scope} [data-kind]"):
            row = out.setdefault(cell.get_attribute("data-node"), {"scores": {}, "total": None})
            kind, plugin = cell.get_attribute("data-kind"), cell.get_attribute("data-plugin")
            value = int(cell.inner_text())
            if kind == "total":
                row["total"] = value
            else:
                row["scores"].setdefault(plugin, {})[kind] = value
        return out

    want = {n: {"scores": e["scores"], "total": e["total"]}
            for n, e in explained["nodes"].items() if e["total"] is not None}
    assert len(want) == 4 and len({e["total"] for e in want.values()}) > 1
    assert "NodeLabels" in next(iter(want.values()))["scores"]  # the remote plugin scores too
    assert table_of("[data-attempt] table.scores") == want
    # "Explain now" asks the running scheduler the same question `outrigger explain` does.
    page.click("[data-explain]")
    page.wait_for_selector("[data-explain-status]")
    assert page.inner_text("[data-explain-selected]") == explained["selected"]
    assert table_of("#explain table.scores") == want

    # The attempt's waterfall: the framework's spans and the plugin host's own, under its plugin call.
    def host_span_shown() -> bool:
        page.click("[data-attempt] [data-load-trace]")
        page.wait_for_selector("[data-waterfall], [data-attempt] p.muted")
        return bool(page.query_selector(
            f'[data-waterfall] [data-service="{LABELS_HOST}"][data-span-name="{AUTHOR_SPAN}"]'))

    wait_for(host_span_shown, "the plugin host's span in the waterfall")
    names = [r.get_attribute("data-span-name") for r in page.query_selector_all("[data-waterfall] [data-span-name]")]
    assert names[0] == "SchedulePod" and "Filter/NodeLabels" in names and "Score/NodeLabels" in names
    page.locator("[data-attempt]").first.screenshot(path=str(shots(tmp_path) / "console-pod.png"))


def test_unschedulable_pod_filter_verdicts_equal_explain(serve: Serve, page: Any) -> None:
    wait_for(lambda: any(i["metadata"]["name"] == "gpu-0" and phase_of(i) == "Unschedulable" for i in serve.pods()),
             "gpu-0 unschedulable")
    explained = serve.explain("gpu-0")
    want: collections.Counter[tuple[str, str]] = collections.Counter(
        (n["filter"]["plugin"], ", ".join(n["filter"]["reasons"])) for n in explained["nodes"].values())
    page.goto(f"http://{serve.http}/ui/#/pod/default/gpu-0")
    page.click("[data-explain]")
    page.wait_for_selector("[data-explain-status]")
    rows = page.query_selector_all("#explain table.filter [data-filter-group]")
    got = {(r.query_selector_all("td")[0].inner_text(), r.query_selector_all("td")[2].inner_text()):
           int(r.query_selector("[data-count]").inner_text()) for r in rows}
    assert got == dict(want) and sum(got.values()) == 4
    assert page.inner_text("[data-explain-status]").startswith("Now: Unschedulable")
    # The attempt kept while the page was open groups the same verdicts.
    attempt = page.query_selector_all("[data-attempt] table.filter [data-filter-group]")
    assert {(r.query_selector_all("td")[0].inner_text(), r.query_selector_all("td")[2].inner_text()):
            int(r.query_selector("[data-count]").inner_text()) for r in attempt} == dict(want)


def test_search_finds_pods_by_name_node_and_reason(serve: Serve) -> None:
    base = f"http://{serve.http}/ui/api/pods?q="
    bound_on = collections.Counter(i["spec"].get("nodeName") for i in serve.pods() if phase_of(i) == "Bound")
    for query, count in [("gpu", 2), ("big-", 3), ("reason:insufficient", 3), ("ns:default last", 1),
                         (f"node:{next(iter(bound_on))}", bound_on[next(iter(bound_on))])]:
        got = get_json(base + urllib.request.quote(query))
        assert got["count"] == count, (query, got)


def test_console_apis_refuse_unknown_names(serve: Serve) -> None:
    for path, message in [("/ui/api/pods/default/nope", "pod default/nope not found"),
                          ("/ui/api/explain/default/nope", "pod default/nope not found"),
                          ("/ui/api/traces/00", "trace 00 is not kept"),
                          ("/ui/api/nothing", "no console API '/ui/api/nothing'"),
                          ("/ui/static/../../__init__.py", "")]:
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"http://{serve.http}{path}", timeout=10)
        assert err.value.code == 404, path
        assert message in json.loads(err.value.read())["error"], path


def test_secure_port_answers_401_without_credentials_and_403_without_the_right(serve: Serve) -> None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    for path in ("/ui/", "/ui/api/overview", "/ui/api/stream"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(f"https://{serve.secure}{path}", timeout=10, context=ctx)
        assert err.value.code == 401, path
    monitoring = urllib.request.Request(f"https://{serve.secure}/ui/",
                                        headers={"Authorization": f"Bearer {MONITORING_TOKEN}"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(monitoring, timeout=10, context=ctx)
    assert err.value.code == 403
    req = urllib.request.Request(f"https://{serve.secure}/ui/", headers={"Authorization": f"Bearer {TOKEN}"})
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        assert r.status == 200 and b"<title>Outrigger console</title>" in r.read()


def test_what_if_nodes_on_a_pending_pods_page_equal_explain_what_if(serve: Serve, page: Any) -> None:
    # Only a node named n3-1 fits it: none does now; one "like n3" (the what-if names it n3-1) would.
    mid = pod("mid", cpu="1", annotations={REQUIRE: "kubernetes.io/hostname=n3-1"})
    serve.apply([mid])
    wait_for(lambda: any(i["metadata"]["name"] == "mid" and phase_of(i) == "Unschedulable" for i in serve.pods()),
             "mid unschedulable")
    (serve.tmp / "n3.json").write_text(json.dumps(NODES[3]))
    (serve.tmp / "mid.json").write_text(json.dumps(mid))
    want = json.loads(serve.cli("explain", "--what-if-nodes", str(serve.tmp / "n3.json"), "--count", "2",
                                "-f", str(serve.tmp / "mid.json"), "-o", "json"))
    assert [(p["pod"], p["fits"], p["node"], p["newNode"]) for p in want["pods"]] == [
        ("default/mid", True, "n3-1", True)]
    page.goto(f"http://{serve.http}/ui/#/pod/default/mid")
    page.fill("[data-what-if-node]", "n3")
    page.fill("[data-what-if-count]", "2")
    page.click("[data-what-if]")
    row = page.wait_for_selector('[data-what-if-pod="default/mid"]')
    assert row.query_selector("[data-fits]").inner_text() == "yes"
    assert row.query_selector("[data-what-if-node-chosen]").inner_text() == want["pods"][0]["node"]
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"http://{serve.http}/ui/api/whatif/default/mid?node=n3&count=0", timeout=10)
    assert err.value.code == 400
    assert json.loads(err.value.read())["error"] == (
        "what-if needs ?node=NAME (a node of the cluster) and ?count=N (1 to 100), got node='n3' count='0'")
