"""``python -m framework.cli``: the ``outrigger`` command line."""

import sys

from .app import main

sys.exit(main())
