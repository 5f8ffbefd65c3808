"""The budget of the fuzz tests (``tests/test_fuzz_*.py``); no tests here.

``make test`` runs every fuzz test with a small budget and a fixed seed (``derandomize``), so the set
adds well under a minute and a failure reproduces exactly. A longer, randomized search::

    OUTRIGGER_FUZZ=long .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_fuzz_*.py   # or: make fuzz

``OUTRIGGER_FUZZ=long`` multiplies every budget by 50 (``OUTRIGGER_FUZZ_SCALE=N`` by N instead) and
draws new examples on each run. Hypothesis keeps no example database here (nothing is written to the
working tree); a failure prints the example that caused it.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

__all__ = ["LONG", "fuzz_settings"]

LONG = os.environ.get("OUTRIGGER_FUZZ", "") == "long"
_SCALE = int(os.environ.get("OUTRIGGER_FUZZ_SCALE", "50" if LONG else "1"))


def fuzz_settings(examples: int) -> settings:
    """Hypothesis settings for a fuzz test whose ``make test`` budget is ``examples``."""
    return settings(
        max_examples=examples * _SCALE,
        deadline=None,  # a loaded 2-core machine: time is not what is tested
        derandomize=not LONG and _SCALE == 1,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=True,
    )
