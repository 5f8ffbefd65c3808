"""``python -m tools.compare`` (``make compare``): :func:`tools.compare.run.main`."""

from .run import main

raise SystemExit(main())
