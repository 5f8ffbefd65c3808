"""A one-line progress bar for long CLI work, drawn on stderr only when stderr is a terminal (a pipe or a
log file gets nothing, so output stays clean for scripts)::

    bar = ProgressBar(total=len(chunks), label="applying")
    for i, chunk in enumerate(chunks, 1):
        apply(chunk)
        bar.update(i)
    bar.close()
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["ProgressBar"]

WIDTH = 30


class ProgressBar:
    """``label [#########.....] done/total note``, redrawn in place; a no-op unless ``stream`` is a TTY."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self._drawn = 0

    def update(self, done: int, note: str = "") -> None:
        if not self.enabled:
            return
        done = min(max(done, 0), self.total)
        filled = done * WIDTH // self.total
        line = f"{self.label} [{'#' * filled}{'.' * (WIDTH - filled)}] {done}/{self.total}"
        if note:
            line += f" {note}"
        # Pad over a longer previous line instead of relying on terminal escape codes.
        self.stream.write("\r" + line.ljust(self._drawn))
        self.stream.flush()
        self._drawn = len(line)

    def close(self) -> None:
        """End the bar's line (the next output starts on a fresh line)."""
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = 0
