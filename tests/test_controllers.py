"""Plugin controllers: background work that starts when the framework is active and stops on shutdown,
in-process (with the scheduler's run) and in a plugin host process on 127.0.0.1 (with Configure and
Plugin.Stop); and the Coscheduling example's controller, which rejects pod groups that waited too long."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from koord_plugins import Heartbeat
from test_remote_harness import HostProcess, endpoint, remote_rig, until

from framework.config import load_config
from framework.plugins import in_tree_registry
from framework.scheduler import Scheduler
from pluginhost.examples import Coscheduling
from pluginhost.examples.coscheduling import GROUP_LABEL, MIN_AVAILABLE
from pluginhost.manifest import parse_objects
from pluginhost.model import Node, Pod

MODES = ["inprocess", "remote"]


def config(plugin: str, args: dict[str, Any]) -> str:
    return (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "podInitialBackoffSeconds: 1\npodMaxBackoffSeconds: 1\nprofiles:\n- schedulerName: default-scheduler\n"
        f"  plugins:\n    multiPoint:\n      enabled:\n      - name: {plugin}\n"
        f"  pluginConfig:\n  - name: {plugin}\n    args: {json.dumps(args)}\n"
    )


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.parametrize("mode", MODES)
def test_a_controller_runs_while_the_framework_is_active(mode: str, tmp_path: Path) -> None:
    beat = tmp_path / "heartbeat"
    text = config("Heartbeat", {"file": str(beat), "interval": 0.02})

    async def inprocess() -> None:
        reg = in_tree_registry()
        reg.register_class(Heartbeat)
        s = Scheduler(load_config(text, reg.points()), reg, seed=0)
        assert lines(beat) == []  # built, not yet running
        task = asyncio.create_task(s.run())
        await until(lambda: lines(beat)[:1] == ["start"] and "tick" in lines(beat), 20, "the controller ticks")
        await s.stop()
        await asyncio.wait_for(task, 5)
        after = lines(beat)
        assert after[0] == "start" and after[-1] == "stop" and set(after[1:-1]) == {"tick"}
        await asyncio.sleep(0.1)  # several intervals: a stopped controller writes nothing more
        assert lines(beat) == after

    async def remote(proc: HostProcess) -> None:
        assert lines(beat) == []  # the host runs, but nothing configured its plugin yet
        rig = await remote_rig([endpoint("heartbeat", proc.address)], lambda r: load_config(text, r.points()))
        try:
            # Configure started it.
            await until(lambda: lines(beat)[:1] == ["start"] and "tick" in lines(beat), 20, "the controller ticks")
        finally:
            await rig.close()  # the framework shuts down: Plugin.Stop
        await until(lambda: lines(beat)[-1:] == ["stop"], 20, "the controller stopped")
        after = lines(beat)
        assert after[0] == "start" and set(after[1:-1]) == {"tick"}
        await asyncio.sleep(0.1)
        assert lines(beat) == after
        assert proc.proc is not None and proc.proc.poll() is None  # the host itself keeps serving
        # A new framework configures it again: a new controller starts; stopping the host stops it.
        rig = await remote_rig([endpoint("heartbeat", proc.address)], lambda r: load_config(text, r.points()))
        try:
            await until(lambda: lines(beat).count("start") == 2, 20, "the controller restarted")
        finally:
            await rig.services.stop(0.2)  # this framework goes away without saying so
        proc.stop()
        assert lines(beat)[-1] == "stop" and lines(beat).count("stop") == 2
        await rig.remote.close()

    if mode == "inprocess":
        asyncio.run(inprocess())
    else:
        with HostProcess("koord_plugins:Heartbeat") as proc:
            asyncio.run(remote(proc))


def objects(*docs: dict[str, Any]) -> list[Pod | Node]:
    out = parse_objects(json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}), "test.json")
    return [o for o in out if isinstance(o, Pod | Node)]


@pytest.mark.parametrize("mode", MODES)
def test_coscheduling_controller_rejects_a_group_that_waited_too_long(mode: str) -> None:
    # Members would wait a minute at Permit; the group may wait 0.3s in all.
    args = {"permitWaitingTimeSeconds": 60, "groupTimeoutSeconds": 0.3, "controllerIntervalSeconds": 0.02}
    text = config("Coscheduling", args)
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n0"},
            "status": {"allocatable": {"cpu": "8", "memory": "8Gi", "pods": "110"}}}
    members = [
        {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": f"train-{i}", "labels": {GROUP_LABEL: "train"}, "annotations": {MIN_AVAILABLE: "3"}},
         "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
        for i in range(2)
    ]
    want = "pod group 'train' timed out: its members waited more than 0.3s"

    async def drive(s: Scheduler) -> None:
        await s.apply(objects(node, *members))
        task = asyncio.create_task(s.run())
        try:
            def rejected() -> set[str]:
                return {ev.name for ev in s.recent_events()
                        if ev.type == "Unschedulable" and ev.status is not None and ev.status.reasons == (want,)}
            await until(lambda: rejected() == {"train-0", "train-1"}, 30, "both members rejected by the controller")
            assert {ev.status.plugin for ev in s.recent_events()
                    if ev.type == "Unschedulable" and ev.status is not None} == {"Coscheduling"}
        finally:
            await s.stop()
            await asyncio.wait_for(task, 5)

    async def inprocess() -> None:
        reg = in_tree_registry()
        reg.register_class(Coscheduling)
        await drive(Scheduler(load_config(text, reg.points()), reg, seed=0))

    async def remote(address: str) -> None:
        rig = await remote_rig([endpoint("gang", address)], lambda r: load_config(text, r.points()))
        try:
            await drive(rig.scheduler)
        finally:
            await rig.close()

    if mode == "inprocess":
        asyncio.run(inprocess())
    else:
        with HostProcess("pluginhost.examples.coscheduling:Coscheduling") as proc:
            asyncio.run(remote(proc.address))
