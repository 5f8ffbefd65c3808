"""Per plugin and per point: what the adapters measured of their calls (``/metrics``, the benchmarks)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["PointStats", "merged"]


@dataclass(slots=True)
class PointStats:
    """Calls of one plugin at one point: how many, how long, how many failed, bytes each way."""

    calls: int = 0
    seconds: float = 0.0
    errors: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    latencies: list[float] = field(default_factory=list)
    retries: int = 0  # node batches sent again to another replica after theirs failed
    ignored: int = 0  # failures skipped under failurePolicy Ignore
    batches: int = 0  # node batches sent on Filter/Score streams

    def record(self, seconds: float, *, error: bool = False) -> None:
        self.calls += 1
        self.seconds += seconds
        self.errors += int(error)
        if len(self.latencies) < 100_000:  # bounded: a long-running framework keeps counting, not listing
            self.latencies.append(seconds)


    def add(self, other: PointStats) -> None:
        """Count ``other``'s calls in these."""
        self.calls += other.calls
        self.seconds += other.seconds
        self.errors += other.errors
        self.bytes_sent += other.bytes_sent
        self.bytes_received += other.bytes_received
        self.retries += other.retries
        self.ignored += other.ignored
        self.batches += other.batches
        self.latencies.extend(other.latencies)


def merged(per_point: Iterable[tuple[str, dict[str, PointStats]]]) -> dict[str, dict[str, PointStats]]:
    """Per plugin name, per point: the sum of every adapter's statistics (one adapter per profile)."""
    out: dict[str, dict[str, PointStats]] = {}
    for name, stats in per_point:
        mine = out.setdefault(name, {})
        for point, st in stats.items():
            mine.setdefault(point, PointStats()).add(st)
    return out
