"""Full credit and the binary pass rule, the same for every scorer.

A response *passes* (is correct, verl's ``acc``, the evaluation's ``correct``, the laptop mass balance's
correct set) when its score reaches full credit, 1. Continuous scorers (Reasoning Gym verifiers, the share
of code tests passed) give partial credit below 1, which never passes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

FULL_CREDIT = 1.0


def passed(score: float | np.ndarray | pd.Series) -> bool | np.ndarray | pd.Series:
    """Whether ``score`` (a fraction; element-wise for arrays and Series) earns full credit: score >= 1."""
    return score >= FULL_CREDIT


def clip(score: float) -> float:
    """``score`` limited to [0, 1] (verifiers' float sums can land a hair outside, e.g. 1.0000000000000002)."""
    return min(FULL_CREDIT, max(0.0, float(score)))
