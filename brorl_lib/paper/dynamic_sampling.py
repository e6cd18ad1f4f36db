"""Dynamic sampling (paper §3.1, Table 2): which share of generated samples survives the filter.

A prompt whose rollouts succeed with probability p keeps its N rollouts unless all succeed or all
fail: with probability 1 - p^N - (1-p)^N. Over prompts, p varies; a Beta(a, b) law for p is the
natural first model: it lives on [0, 1], is conjugate to the Bernoulli outcomes of rollouts, and
with a, b < 1 puts mass near 0 and 1 (prompts that are almost always failed or almost always solved),
which is what a strong model on a mixed training set shows. Then E[p^N] = B(a+N, b)/B(a, b).
"""

from __future__ import annotations

import numpy as np
from scipy import optimize, special

from brorl_lib.core.validation import check_positive, check_range


def _check_n(n) -> np.ndarray:
    n = np.asarray(n, dtype=float)
    if (n < 1).any() or (n != np.round(n)).any():
        raise ValueError(f"n_rollouts={n.tolist()} is not allowed: each must be an integer >= 1")
    return n


def keep_probability(p, n) -> np.ndarray:
    """Probability that a prompt with success rate p keeps its N rollouts: 1 - p^N - (1-p)^N."""
    p = np.asarray(p, dtype=float)
    if ((p < 0) | (p > 1)).any():
        raise ValueError("success rate p must lie in [0, 1]")
    n = _check_n(n)
    return 1.0 - p**n - (1.0 - p) ** n


def expected_pass_rate(a: float, b: float, n, degenerate: float = 0.0) -> np.ndarray:
    """E of the keep probability when p ~ Beta(a, b), except a share ``degenerate`` of prompts with
    p exactly 0 or 1 (all rollouts fail, or all succeed, whatever N), which are never kept."""
    check_positive("a", a)
    check_positive("b", b)
    check_range("degenerate", degenerate, low=0.0, high=0.999)
    n = _check_n(n)
    base = special.betaln(a, b)
    beta_part = 1.0 - np.exp(special.betaln(a + n, b) - base) - np.exp(special.betaln(a, b + n) - base)
    return (1.0 - degenerate) * beta_part


def fit_beta(pass_rates: dict[int, float], degenerate: float = 0.0) -> tuple[float, float, float]:
    """Least-squares Beta(a, b) for the given {N: pass rate}; returns (a, b, worst absolute miss), a <= b.

    Pass rates cannot tell Beta(a, b) from Beta(b, a) (mostly failed vs mostly solved prompts), and
    two rates can be matched by more than one (a, b): read the fit as one law consistent with them.
    """
    if len(pass_rates) < 2:
        raise ValueError("fit_beta needs pass rates at two or more values of N")
    for n, rate in pass_rates.items():
        _check_n(n)
        if not 0.0 < rate < 1.0:
            raise ValueError(f"pass rate {rate!r} at N={n} is not allowed: it must lie in (0, 1)")
    ns = np.array(list(pass_rates), dtype=float)
    target = np.array(list(pass_rates.values()))

    def residual(log_ab: np.ndarray) -> np.ndarray:
        return expected_pass_rate(*np.exp(log_ab), ns, degenerate) - target

    best = None
    for start in ([0.1, 0.1], [0.5, 0.2], [0.2, 0.5], [1.0, 1.0]):  # a few starts: the surface has several valleys
        fit = optimize.least_squares(residual, x0=np.log(start), xtol=1e-14, ftol=1e-14, gtol=1e-14)
        if best is None or fit.cost < best.cost:
            best = fit
    a, b = sorted(np.exp(best.x))  # keep probability is symmetric in p <-> 1-p: Beta(a, b) = Beta(b, a) here
    return float(a), float(b), float(np.abs(best.fun).max())


def minimal_degenerate_share(
    pass_rates: dict[int, float], tolerance: float = 1e-4, step: float = 0.001
) -> float | None:
    """Smallest degenerate share (on a grid of ``step``) at which a Beta matches every pass rate
    within ``tolerance``; None if no share below 0.5 does."""
    for w in np.arange(0.0, 0.5, step):
        if fit_beta(pass_rates, float(w))[2] <= tolerance:
            return float(round(w, 6))
    return None


def wasted_per_kept(pass_rate) -> np.ndarray:
    """Generated samples thrown away per kept sample: 1/pass_rate - 1."""
    rate = np.asarray(pass_rate, dtype=float)
    check_range("pass_rate", float(rate.min()), low=1e-12, high=1.0)
    return 1.0 / rate - 1.0
