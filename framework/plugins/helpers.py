"""Shared pieces of the in-tree plugins, after kube-scheduler's ``plugins/helper`` package:
:func:`default_normalize_score` (``helper.DefaultNormalizeScore``) and the array types the plugins
answer with.

The other families of shared code have modules of their own:

- :mod:`.labels`: label keys and values, label requirements and ``metav1.LabelSelector`` matching;
- :mod:`.nodeselectors`: node selectors and a pod's required / preferred node affinity;
- :mod:`.podcolumns`: the pods placed in a snapshot, column-wise, and the rows that changed between
  two snapshots;
- :mod:`.taints`: taints and tolerations;
- :mod:`.hostports`: host ports and their conflict rules.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = [
    "BoolArray",
    "Int32Array",
    "IntArray",
    "default_normalize_score",
]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]
Int32Array = npt.NDArray[np.int32]


def default_normalize_score(max_priority: int, reverse: bool, scores: IntArray) -> None:
    """kube-scheduler's ``DefaultNormalizeScore``, in place: scale ``[0, max(scores)]`` to
    ``[0, max_priority]`` (integer division, truncating), then, if ``reverse``, subtract from
    ``max_priority``. When every score is 0 (or there are none), the scores stay 0, or all become
    ``max_priority`` with ``reverse``."""
    if scores.shape[0] == 0:
        return
    top = max(int(scores.max()), 0)
    if top == 0:
        if reverse:
            scores[:] = max_priority
        return
    product = scores.astype(np.int64) * max_priority
    # Go's integer division truncates toward zero; scores are expected non-negative anyway.
    scaled = np.sign(product) * (np.abs(product) // top)
    if reverse:
        scaled = max_priority - scaled
    scores[:] = scaled
