"""The web console under ``/ui/`` (docs/console.md): why each pod went where it went, live, from the
running scheduler. :class:`Console` keeps what the pages show while someone looks; :func:`add_routes`
serves the pages and their JSON APIs on the framework's HTTP listeners."""

from __future__ import annotations

from .core import Console
from .web import add_routes

__all__ = ["Console", "add_routes"]
