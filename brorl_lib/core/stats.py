"""The paper's paired t-test (§4.2.2): recomputed from its reported statistics, and run on data."""

from __future__ import annotations

import numpy as np
from scipy import stats

from brorl_lib.core.validation import check_choice, check_int


def p_value_from_t(t: float, n: int) -> dict[str, float]:
    """One-tailed p-values for a paired t statistic on ``n`` pairs: Student t (n-1 df) and normal."""
    check_int("n", n, low=2)
    return {"t": t, "n": n, "p_student_t": float(stats.t.sf(t, df=n - 1)), "p_normal": float(stats.norm.sf(t))}


def paired_test(treatment, control, alternative: str = "greater") -> dict[str, float]:
    """Paired t-test of per-instance scores (e.g. pass@1 of two checkpoints on the same instances).

    Returns the mean difference (treatment - control), t, the p-value for ``alternative``, n and
    Cohen's d_z (mean difference over the standard deviation of the differences).
    """
    check_choice("alternative", alternative, ("greater", "less", "two-sided"))
    a, b = np.asarray(treatment, dtype=float), np.asarray(control, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"treatment and control must be 1-D of equal length; got shapes {a.shape} and {b.shape}")
    check_int("number of pairs", a.size, low=2)
    diff = a - b
    res = stats.ttest_rel(a, b, alternative=alternative)
    sd = diff.std(ddof=1)
    return {
        "mean_difference": float(diff.mean()),
        "t": float(res.statistic),
        "p": float(res.pvalue),
        "n": int(a.size),
        "cohen_dz": float(diff.mean() / sd) if sd > 0 else float("nan"),
    }
