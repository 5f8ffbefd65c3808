"""The event recorder's series: an event repeated within the window joins its series, series are
forgotten a window after they were last seen, oldest first, and forgetting costs what it removes (a
burst of scheduled pods, each with its own Scheduled event, used to rescan every series on each event)."""

from __future__ import annotations

from typing import Any

import pytest

from framework.kube import events as events_module
from framework.kube.events import SERIES_WINDOW, EventRecorder
from pluginhost.model import Pod


class _Writer:
    def __init__(self) -> None:
        self.jobs: list[Any] = []

    def submit(self, job: Any) -> None:
        self.jobs.append(job)


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    def time_ns(self) -> int:
        return int(self.now * 1e9)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(events_module.time, "time", fake.time)
    monkeypatch.setattr(events_module.time, "time_ns", fake.time_ns)
    return fake


def pod(i: int) -> Pod:
    return Pod(name=f"p{i}", namespace="ns", uid=f"u{i}")


def scheduled(recorder: EventRecorder, i: int) -> None:
    recorder.record(pod(i), type_="Normal", reason="Scheduled", action="Binding", note=f"assigned p{i}",
                    controller="s")


def held(recorder: EventRecorder) -> list[str]:
    return [key[0] for key in recorder._series]


def test_series_are_forgotten_oldest_first_once_more_than_keep_are_held(clock: _Clock) -> None:
    writer = _Writer()
    recorder = EventRecorder(None, writer, hostname="h")  # type: ignore[arg-type]
    recorder.keep = 3
    for i in range(3):
        scheduled(recorder, i)
        clock.now += 10
    scheduled(recorder, 0)  # a repeat within the window: joins its series, now the last seen
    assert (len(writer.jobs), held(recorder)) == (3, ["u1", "u2", "u0"])
    clock.now += SERIES_WINDOW - 15  # u1 (seen at 1010) is a window old; u2 (1020) and u0 (1030) are not
    scheduled(recorder, 3)
    assert held(recorder) == ["u2", "u0", "u3"]
    clock.now += 100  # u0's series was last seen a window ago: a new event, at the end; three held, no look
    scheduled(recorder, 0)
    assert held(recorder) == ["u2", "u3", "u0"] and len(writer.jobs) == 5
    scheduled(recorder, 4)  # four held: u2 is a window old and goes, u3 is current and the look stops there
    assert held(recorder) == ["u3", "u0", "u4"]


def test_a_series_whose_count_was_not_sent_waits_for_the_flush(clock: _Clock) -> None:
    writer = _Writer()
    recorder = EventRecorder(None, writer, hostname="h")  # type: ignore[arg-type]
    recorder.keep = 1
    scheduled(recorder, 0)
    scheduled(recorder, 0)  # counted, not sent yet: dirty
    clock.now += SERIES_WINDOW + 1
    scheduled(recorder, 1)
    assert held(recorder) == ["u0", "u1"]
    recorder._flush_series()  # the count is sent (a PATCH job), then it may go
    scheduled(recorder, 2)
    assert held(recorder) == ["u1", "u2"]
    assert len(writer.jobs) == 4  # three creates and the series' patch


def test_a_burst_of_scheduled_pods_does_not_rescan_every_series(clock: _Clock) -> None:
    writer = _Writer()
    recorder = EventRecorder(None, writer, hostname="h")  # type: ignore[arg-type]
    looked = [0]

    class Counting(dict[tuple[str, ...], Any]):
        def items(self) -> Any:
            for item in super().items():
                looked[0] += 1
                yield item

    recorder._series = Counting()
    for i in range(recorder.keep + 50):
        scheduled(recorder, i)
        clock.now += 0.001
    # Each of the fifty events over keep looked at the oldest series only (none is a window old).
    assert (len(recorder._series), looked[0]) == (recorder.keep + 50, 50)
    clock.now += SERIES_WINDOW
    scheduled(recorder, -1)  # now every other one is old: all go, in one look
    assert held(recorder) == ["u-1"] and looked[0] == 50 + recorder.keep + 50 + 1
