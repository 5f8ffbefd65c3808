"""A one-line progress bar for long CLI work, drawn by tqdm on stderr only when stderr is a terminal (a pipe
or a log file gets nothing, so output stays clean for scripts)::

    bar = ProgressBar(total=len(chunks), label="applying")
    for i, chunk in enumerate(chunks, 1):
        apply(chunk)
        bar.update(i)
    bar.close()

tqdm is imported on the first bar actually drawn: importing it takes about 50 ms, which every
``outrigger`` command would otherwise pay before doing anything (docs/benchmarks.md).
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

__all__ = ["ProgressBar"]

WIDTH = 30


def _format(note: str) -> str:
    """tqdm's bar format: ``label [#####.....] done/total note`` (the note's braces escaped)."""
    note = note.replace("{", "{{").replace("}", "}}")
    return f"{{desc}} [{{bar:{WIDTH}}}] {{n_fmt}}/{{total_fmt}}" + (f" {note}" if note else "")


class ProgressBar:
    """``label [#########.....] done/total note``, redrawn in place; a no-op unless ``stream`` is a TTY."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None) -> None:
        self.total = max(total, 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self._bar: Any = None

    def update(self, done: int, note: str = "") -> None:
        """Draw ``done`` of the total (clamped to [0, total]) with ``note`` after the counts."""
        if not self.enabled:
            return
        done = min(max(done, 0), self.total)
        if self._bar is None:
            from tqdm import tqdm

            # Every update is drawn (no rate limiting: callers update a few times a second at most).
            self._bar = tqdm(total=self.total, initial=done, desc=self.label, file=self.stream, ascii=".#",
                             bar_format=_format(note), mininterval=0, miniters=1, dynamic_ncols=False, leave=True)
            return
        self._bar.bar_format = _format(note)
        self._bar.n = done
        self._bar.refresh()

    def close(self) -> None:
        """End the bar's line (the next output starts on a fresh line)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
