"""Mass balance of one RLVR update (paper §2, Appendix C): Theorem 1, Lemma 2, Corollary 3.

Logit-domain model of one prompt: ``p = softmax(z)`` over a vocabulary of V tokens, a boolean mask
of correct tokens, and a boolean mask of the distinct tokens sampled in N draws. A sampled correct
token has reward ``r_c >= 0``, a sampled incorrect one ``r_w <= 0``, an unsampled one 0. All
arithmetic is float64 numpy; probabilities are plain fractions (not percent). Inner products are
``dot`` (numpy's pairwise sum, whose order is fixed), not BLAS, whose order depends on the CPU and the
number of threads.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from brorl_lib.core.validation import check_choice, check_int, check_positive, check_range

LOGIT_FAMILIES = ("zipf", "uniform")
UNIFORM_LOGIT_HALF_WIDTH = 3.0  # our choice: "uniform" logits are i.i.d. Uniform(-3, 3)
DEFAULT_ZIPF_EXPONENT = 1.1  # our choice: close to Zipf's law for natural-language tokens


@dataclass(frozen=True)
class MassBalance:
    """Every quantity of Theorem 1 for one sampled batch (paper §2, Appendix C)."""

    q_pos: float  # total correct mass
    q_neg: float  # total incorrect mass (1 - q_pos, summed directly so it is never negative)
    p_pos: float  # mass of sampled correct tokens (set A)
    p_neg: float  # mass of sampled incorrect tokens (set B)
    a2: float  # sum of p^2 over A
    b2: float  # sum of p^2 over B
    u_pos2: float  # sum of p^2 over unsampled correct tokens
    u_neg2: float  # sum of p^2 over unsampled incorrect tokens
    s_r: float  # batch mood r_c * p_pos + r_w * p_neg

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def softmax(z: np.ndarray) -> np.ndarray:
    """Numerically stable softmax of a 1-D logit vector, float64."""
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max())
    return e / e.sum()


def dot(a: np.ndarray, b: np.ndarray) -> float:
    """sum_i a_i b_i, summed in an order that is the same on every machine and thread count."""
    return float(np.sum(np.multiply(a, b, dtype=np.float64)))


def _check_batch(p: np.ndarray, correct: np.ndarray, sampled: np.ndarray) -> None:
    if p.ndim != 1 or correct.shape != p.shape or sampled.shape != p.shape:
        raise ValueError(
            f"p, correct and sampled must be 1-D of equal length; got shapes "
            f"{p.shape}, {correct.shape}, {sampled.shape}"
        )
    if correct.dtype != bool or sampled.dtype != bool:
        raise ValueError("correct and sampled must be boolean masks")


def check_rewards(r_c: float, r_w: float) -> None:
    """The paper's standing assumption R_c >= 0 >= R_w."""
    check_range("r_correct", r_c, low=0.0)
    check_range("r_wrong", r_w, high=0.0)


def mass_balance(p: np.ndarray, correct: np.ndarray, sampled: np.ndarray, r_c: float, r_w: float) -> MassBalance:
    """Theorem 1's quantities from probabilities, the correct mask and the sampled mask."""
    p = np.asarray(p, dtype=np.float64)
    _check_batch(p, correct, sampled)
    check_rewards(r_c, r_w)
    a, b = correct & sampled, ~correct & sampled
    u_pos, u_neg = correct & ~sampled, ~correct & ~sampled
    p2 = p * p
    q_pos = float(p[correct].sum())
    p_pos, p_neg = float(p[a].sum()), float(p[b].sum())
    return MassBalance(
        q_pos=q_pos,
        q_neg=float(p[~correct].sum()),
        p_pos=p_pos,
        p_neg=p_neg,
        a2=float(p2[a].sum()),
        b2=float(p2[b].sum()),
        u_pos2=float(p2[u_pos].sum()),
        u_neg2=float(p2[u_neg].sum()),
        s_r=r_c * p_pos + r_w * p_neg,
    )


def token_rewards(correct: np.ndarray, sampled: np.ndarray, r_c: float, r_w: float) -> np.ndarray:
    """R_i: r_c for sampled correct, r_w for sampled incorrect, 0 for unsampled tokens."""
    return np.where(sampled, np.where(correct, r_c, r_w), 0.0)


def logit_update(
    p: np.ndarray, correct: np.ndarray, sampled: np.ndarray, r_c: float, r_w: float, eta: float, n: int
) -> np.ndarray:
    """One gradient step of the linear surrogate: dz_j = (eta/N) p_j (R_j - S_R)."""
    check_positive("eta", eta)
    check_int("n_rollouts", n, low=1)
    s_r = mass_balance(p, correct, sampled, r_c, r_w).s_r
    return (eta / n) * p * (token_rewards(correct, sampled, r_c, r_w) - s_r)


def theorem1_terms(mb: MassBalance, r_c: float, r_w: float, eta: float, n: int) -> dict[str, float]:
    """The three terms of Theorem 1, each including the eta/N prefactor.

    ``sampled_correct``: (R_c - S_R) Q_neg A_2 >= 0; ``sampled_incorrect``: (S_R - R_w) Q_pos B_2 >= 0;
    ``unsampled``: S_R (Q_pos U_neg,2 - Q_neg U_pos,2), either sign.
    """
    scale = eta / n
    return {
        "sampled_correct": scale * (r_c - mb.s_r) * mb.q_neg * mb.a2,
        "sampled_incorrect": scale * (mb.s_r - r_w) * mb.q_pos * mb.b2,
        "unsampled": scale * mb.s_r * (mb.q_pos * mb.u_neg2 - mb.q_neg * mb.u_pos2),
    }


def delta_q_theorem1(mb: MassBalance, r_c: float, r_w: float, eta: float, n: int) -> float:
    """Closed form of Theorem 1: the first-order change of the correct mass."""
    return float(sum(theorem1_terms(mb, r_c, r_w, eta, n).values()))


def delta_q_first_order(p: np.ndarray, correct: np.ndarray, dz: np.ndarray) -> float:
    """sum_j dQ_pos/dz_j * dz_j, with dQ_pos/dz_j = p_j (1[j correct] - Q_pos)."""
    q_pos = p[correct].sum()
    return dot(p * (correct - q_pos), dz)


def rounding_scale(terms: dict[str, float], p: np.ndarray, correct: np.ndarray, dz: np.ndarray) -> float:
    """Size of what is summed on both sides before cancelling: sum |term| + sum_j p_j |dz_j| (1[j correct] + Q_pos).

    Relative errors are taken against it, so rounding stays visible as ~1e-16 even where the
    exact result is 0 (e.g. every token correct).
    """
    q_pos = p[correct].sum()
    return float(sum(abs(t) for t in terms.values()) + dot(np.abs(p * dz), correct + q_pos)) or 1.0


def delta_q_exact(p: np.ndarray, correct: np.ndarray, dz: np.ndarray) -> float:
    """Exact change of the correct mass after z -> z + dz, without cancellation.

    p'_i - p_i = p_i (expm1(dz_i) - E) / (1 + E) with E = sum_j p_j expm1(dz_j).
    """
    em1 = np.expm1(dz)
    e = dot(p, em1)
    return float(np.sum(p[correct] * (em1[correct] - e)) / (1.0 + e))


def proof_identities(
    p: np.ndarray, correct: np.ndarray, sampled: np.ndarray, r_c: float, r_w: float, eta: float, n: int
) -> dict[str, float]:
    """Both sides of the two identities used in the proof (paper Appendix C.1)."""
    mb = mass_balance(p, correct, sampled, r_c, r_w)
    dz = logit_update(p, correct, sampled, r_c, r_w, eta, n)
    scale = eta / n
    u2 = mb.u_pos2 + mb.u_neg2
    return {
        "all_lhs": dot(p, dz),
        "all_rhs": scale * ((r_c - mb.s_r) * mb.a2 + (r_w - mb.s_r) * mb.b2 - mb.s_r * u2),
        "correct_lhs": dot(p[correct], dz[correct]),
        "correct_rhs": scale * ((r_c - mb.s_r) * mb.a2 - mb.s_r * mb.u_pos2),
    }


def sample_tokens(p: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of the distinct tokens hit by N i.i.d. draws from p."""
    check_int("n_rollouts", n, low=1)
    sampled = np.zeros(p.shape, dtype=bool)
    sampled[rng.choice(p.size, size=n, p=p)] = True
    return sampled


def random_logits(
    vocab_size: int, family: str, rng: np.random.Generator, zipf_exponent: float = DEFAULT_ZIPF_EXPONENT
) -> np.ndarray:
    """Random logits: ``zipf`` (p proportional to rank^-s, ranks shuffled) or ``uniform`` (i.i.d.)."""
    check_int("vocab_size", vocab_size, low=2)
    check_choice("family", family, LOGIT_FAMILIES)
    if family == "zipf":
        ranks = rng.permutation(vocab_size) + 1.0
        return -zipf_exponent * np.log(ranks)
    return rng.uniform(-UNIFORM_LOGIT_HALF_WIDTH, UNIFORM_LOGIT_HALF_WIDTH, size=vocab_size)


def zipf_probabilities(vocab_size: int, exponent: float) -> np.ndarray:
    """p_i proportional to i^-exponent, i = 1..V (sorted, most likely first)."""
    w = np.arange(1, vocab_size + 1, dtype=np.float64) ** -exponent
    return w / w.sum()


@dataclass(frozen=True)
class SampledBatch:
    """One random sampled batch for checking Theorem 1."""

    family: str
    z: np.ndarray
    p: np.ndarray
    correct: np.ndarray
    sampled: np.ndarray
    n: int
    r_c: float
    r_w: float


def random_instance(
    rng: np.random.Generator,
    vocab_sizes: list[int],
    rollout_sizes: list[int],
    families: tuple[str, ...] = LOGIT_FAMILIES,
    zipf_exponent: float = DEFAULT_ZIPF_EXPONENT,
) -> SampledBatch:
    """Draw V, N, the logit family, a correct subset (1..V-1 tokens) and rewards R_c >= 0 >= R_w."""
    v = int(rng.choice(vocab_sizes))
    n = int(rng.choice(rollout_sizes))
    family = str(rng.choice(families))
    z = random_logits(v, family, rng, zipf_exponent)
    p = softmax(z)
    correct = np.zeros(v, dtype=bool)
    correct[rng.choice(v, size=int(rng.integers(1, v)), replace=False)] = True
    # our choice: rewards uniform on [0, 2] and [-2, 0], covering the paper's (+1, -1)
    r_c, r_w = float(rng.uniform(0.0, 2.0)), float(-rng.uniform(0.0, 2.0))
    return SampledBatch(family, z, p, correct, sample_tokens(p, n, rng), n, r_c, r_w)


def check_instance(inst: SampledBatch, eta: float) -> dict[str, float]:
    """Theorem 1 against the first-order change and the exact softmax change for one instance.

    Errors are relative to ``rounding_scale``, so they stay meaningful when the terms cancel.
    ``rel_err_identities`` is the worse of the two proof identities.
    """
    mb = mass_balance(inst.p, inst.correct, inst.sampled, inst.r_c, inst.r_w)
    terms = theorem1_terms(mb, inst.r_c, inst.r_w, eta, inst.n)
    dz = logit_update(inst.p, inst.correct, inst.sampled, inst.r_c, inst.r_w, eta, inst.n)
    scale = rounding_scale(terms, inst.p, inst.correct, dz)
    closed = float(sum(terms.values()))
    first = delta_q_first_order(inst.p, inst.correct, dz)
    exact = delta_q_exact(inst.p, inst.correct, dz)
    ids = proof_identities(inst.p, inst.correct, inst.sampled, inst.r_c, inst.r_w, eta, inst.n)
    id_err = max(abs(ids["all_lhs"] - ids["all_rhs"]), abs(ids["correct_lhs"] - ids["correct_rhs"]))
    return {
        "vocab_size": inst.p.size,
        "n_rollouts": inst.n,
        "family": inst.family,
        "r_c": inst.r_c,
        "r_w": inst.r_w,
        "s_r": mb.s_r,
        "n_sampled": int(inst.sampled.sum()),
        "delta_q_theorem": closed,
        "delta_q_first_order": first,
        "delta_q_exact": exact,
        "rel_err_first_order": abs(closed - first) / scale,
        "rel_err_exact": abs(closed - exact) / scale,
        "rel_err_identities": id_err / scale,
        **{f"term_{k}": v for k, v in terms.items()},
    }


def error_vs_step_size(inst: SampledBatch, etas: np.ndarray) -> dict[str, np.ndarray]:
    """|exact - Theorem 1| for a range of step sizes; first order means it shrinks as eta^2."""
    mb = mass_balance(inst.p, inst.correct, inst.sampled, inst.r_c, inst.r_w)
    closed, err = [], []
    for eta in etas:
        dz = logit_update(inst.p, inst.correct, inst.sampled, inst.r_c, inst.r_w, float(eta), inst.n)
        c = delta_q_theorem1(mb, inst.r_c, inst.r_w, float(eta), inst.n)
        closed.append(c)
        err.append(abs(delta_q_exact(inst.p, inst.correct, dz) - c))
    return {"eta": np.asarray(etas, float), "delta_q_theorem": np.array(closed), "abs_err": np.array(err)}


def fitted_order(x: np.ndarray, y: np.ndarray) -> float:
    """Slope of log y against log x (the order of convergence)."""
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def lemma2_expectation(p: float | np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """Lemma 2: E[U_2(p)] = p^2 (1 - p)^N for one token drawn in N independent draws."""
    p = np.asarray(p, dtype=np.float64)
    return p * p * (1.0 - p) ** np.asarray(n, dtype=np.float64)


def lemma2_monte_carlo(
    p: float, n: int, trials: int, rng: np.random.Generator, confidence: float = 0.95
) -> dict[str, float]:
    """Monte Carlo estimate of E[p^2 1{X = 0}], X ~ Bin(N, p), with an exact (Clopper-Pearson) CI."""
    check_range("p", p, low=0.0, high=1.0)
    check_int("trials", trials, low=1)
    unsampled = int(np.count_nonzero(rng.binomial(n, p, size=trials) == 0))
    ci = stats.binomtest(unsampled, trials).proportion_ci(confidence, method="exact")
    return {
        "p": p,
        "n": n,
        "trials": trials,
        "estimate": p * p * unsampled / trials,
        "ci_low": p * p * ci.low,
        "ci_high": p * p * ci.high,
        "analytic": float(lemma2_expectation(p, n)),
    }


def expected_unsampled_moment(p: np.ndarray, ns: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """Corollary 3: sum_i p_i^2 (1 - p_i)^N for each N in ``ns`` (restricted to ``mask`` if given).

    Exact under multinomial sampling too: a token is missed by N draws with probability (1-p_i)^N.
    """
    p = np.asarray(p, dtype=np.float64)
    if mask is not None:
        p = p[mask]
    log1m = np.log1p(-p)
    return np.array([float(np.sum(p * p * np.exp(n * log1m))) for n in np.atleast_1d(ns)])


def pass_at_k_from_mass(q_pos: float | np.ndarray, k: int | np.ndarray) -> np.ndarray:
    """pass@k = 1 - (1 - Q_pos)^k, strictly increasing in Q_pos (paper §2)."""
    return 1.0 - (1.0 - np.asarray(q_pos, float)) ** np.asarray(k, float)


def terms_from_stats(
    q_pos, a2, b2, u_pos2, u_neg2, s_r, r_c: float, r_w: float, eta: float = 1.0, n: int = 1
) -> dict[str, np.ndarray]:
    """Theorem 1's terms from free summary statistics (scalars or arrays), for sign maps and sliders.

    Here S_R is a free variable; in a real batch it is r_c * p_pos + r_w * p_neg.
    """
    mb = MassBalance(q_pos, 1.0 - q_pos, np.nan, np.nan, a2, b2, u_pos2, u_neg2, s_r)
    return theorem1_terms(mb, r_c, r_w, eta, n)
