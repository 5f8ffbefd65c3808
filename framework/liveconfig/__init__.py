"""Live configuration: ``outrigger serve`` applies a changed ``--config`` or ``--plugins`` file without a
restart (docs/configuration.md, "Changing the configuration live").

- :mod:`.engine`: :class:`LiveConfig`, the watcher and the reload engine (prepare everything, then
  switch between two scheduling cycles), and its metrics;
- :mod:`.changes`: what needs a restart, and the summary of an applied generation.
"""

from .changes import RESTART_FIELDS, queue_sort_problem, restart_problems, summary
from .engine import ConfigChangeRefused, LiveCollector, LiveConfig, WatchedFiles, watch_files

__all__ = [
    "RESTART_FIELDS",
    "ConfigChangeRefused",
    "LiveCollector",
    "LiveConfig",
    "WatchedFiles",
    "queue_sort_problem",
    "restart_problems",
    "summary",
    "watch_files",
]
