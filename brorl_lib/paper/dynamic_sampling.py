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

from brorl_lib.core.precision import round_significant
from brorl_lib.core.validation import check_positive, check_range

# The fitted (a, b) lie where the Gauss-Newton matrix is singular (two rates, two parameters, no exact match),
# so least squares stops within ~1e-5 of them, at a point that differs between CPUs. The fit is finished by
# solving grad = 0 (analytic gradient, to ~1e-13) and rounded to FIT_DIGITS significant digits; the curves are
# drawn from the rounded values.
FIT_DIGITS = 8


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
    beta_part = np.where(n == 1, 0.0, beta_part)  # one rollout is all-correct or all-wrong: exactly 0, not round-off
    return (1.0 - degenerate) * beta_part


def _pass_rate_gradient(a: float, b: float, n: np.ndarray, degenerate: float) -> np.ndarray:
    """d expected_pass_rate / d(log a, log b), shape (len(n), 2), from d betaln(x, y)/dx = psi(x) - psi(x + y)."""
    base = special.betaln(a, b)
    e1 = np.exp(special.betaln(a + n, b) - base)  # E[p^N]
    e2 = np.exp(special.betaln(a, b + n) - base)  # E[(1-p)^N]
    psi = special.digamma
    shared = psi(a + b) - psi(a + b + n)
    d_e1 = np.stack([psi(a + n) - psi(a) + shared, shared], axis=1) * e1[:, None]
    d_e2 = np.stack([shared, psi(b + n) - psi(b) + shared], axis=1) * e2[:, None]
    grad = -(1.0 - degenerate) * (d_e1 + d_e2) * np.array([a, b])
    grad[n == 1] = 0.0
    return grad


def _fit_beta_unrounded(pass_rates: dict[int, float], degenerate: float) -> tuple[float, float, float]:
    """fit_beta before rounding: least squares from a few starts, then grad = 0 solved from the best one."""
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

    def gradient(log_ab: np.ndarray) -> np.ndarray:  # of half the sum of squared misses
        return _pass_rate_gradient(*np.exp(log_ab), ns, degenerate).T @ residual(log_ab)

    best = None
    for start in ([0.1, 0.1], [0.5, 0.2], [0.2, 0.5], [1.0, 1.0]):  # a few starts: the surface has several valleys
        fit = optimize.least_squares(residual, x0=np.log(start), xtol=1e-14, ftol=1e-14, gtol=1e-14)
        if best is None or fit.cost < best.cost:
            best = fit
    x = best.x
    polish = optimize.root(gradient, x, method="hybr", options={"xtol": 1e-15}).x  # may stop at round-off level
    flatter = np.abs(gradient(polish)).max() < np.abs(gradient(x)).max()
    if flatter and 0.5 * np.sum(residual(polish) ** 2) <= best.cost * (1 + 1e-6):  # same valley, its stationary point
        x = polish
    a, b = sorted(np.exp(x))  # keep probability is symmetric in p <-> 1-p: Beta(a, b) = Beta(b, a) here
    return float(a), float(b), float(np.abs(residual(x)).max())


def fit_beta(pass_rates: dict[int, float], degenerate: float = 0.0) -> tuple[float, float, float]:
    """Least-squares Beta(a, b) for the given {N: pass rate}; returns (a, b, worst absolute miss), a <= b,
    with a and b rounded to FIT_DIGITS significant digits and the miss of the rounded law.

    Pass rates cannot tell Beta(a, b) from Beta(b, a) (mostly failed vs mostly solved prompts), and
    two rates can be matched by more than one (a, b): read the fit as one law consistent with them.
    """
    a, b, _ = _fit_beta_unrounded(pass_rates, degenerate)
    a, b = float(round_significant(a, FIT_DIGITS)), float(round_significant(b, FIT_DIGITS))
    ns = np.array(list(pass_rates), dtype=float)
    miss = expected_pass_rate(a, b, ns, degenerate) - np.array(list(pass_rates.values()))
    return a, b, float(np.abs(miss).max())


def minimal_degenerate_share(
    pass_rates: dict[int, float], tolerance: float = 1e-4, step: float = 0.001
) -> float | None:
    """Smallest degenerate share (on a grid of ``step``) at which a Beta matches every pass rate
    within ``tolerance``; None if no share below 0.5 does."""
    for w in np.arange(0.0, 0.5, step):
        if _fit_beta_unrounded(pass_rates, float(w))[2] <= tolerance:
            return float(round(w, 6))
    return None


def wasted_per_kept(pass_rate) -> np.ndarray:
    """Generated samples thrown away per kept sample: 1/pass_rate - 1."""
    rate = np.asarray(pass_rate, dtype=float)
    check_range("pass_rate", float(rate.min()), low=1e-12, high=1.0)
    return 1.0 / rate - 1.0
