"""``python -m framework.kube.compare`` (``make compare``): :func:`framework.kube.compare.run.main`."""

from .run import main

raise SystemExit(main())
