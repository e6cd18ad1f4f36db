"""Statistics used across the notebooks: the paper's paired t-test (§4.2.2), recomputed from its reported
statistics and run on data; pass@k; seed-level intervals; a trend test."""

from __future__ import annotations

from math import comb

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


def unbiased_pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 - C(n-c, k) / C(n, k)."""
    check_int("n", n, low=1)
    check_int("c", c, low=0, high=n)
    check_int("k", k, low=1, high=n)
    return 1.0 - comb(n - c, k) / comb(n, k)


def mean_interval(values, confidence: float = 0.95, power: float = 0.8) -> dict[str, float]:
    """Mean of independent values (e.g. one paired difference per seed) with a Student-t interval, the
    two-sided one-sample t-test p-value against 0, the standard deviation and the smallest true mean the test
    would detect with probability ``power`` at this sample size and spread (two-sided, level 1 - confidence)."""
    x = np.asarray(values, dtype=float)
    check_int("number of values", x.size, low=2)
    n, mean, sd = x.size, float(x.mean()), float(x.std(ddof=1))
    se = sd / np.sqrt(n)
    t_crit = float(stats.t.ppf(0.5 + confidence / 2, df=n - 1))
    p = float(2 * stats.t.sf(abs(mean) / se, df=n - 1)) if se > 0 else (1.0 if mean == 0 else 0.0)
    detectable = (t_crit + float(stats.t.ppf(power, df=n - 1))) * se
    return {
        "mean": mean,
        "sd": sd,
        "se": float(se),
        "ci_low": mean - t_crit * se,
        "ci_high": mean + t_crit * se,
        "p_value": p,
        "n": n,
        "detectable": float(detectable),
    }
