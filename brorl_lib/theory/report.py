"""The computations behind notebooks/01_theory.ipynb: its parameters and each study as a DataFrame."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from brorl_lib.core.claims import Claim
from brorl_lib.core.params import MAX_LIST_ITEMS, SEED_MAX, NotebookConfig, param
from brorl_lib.core.precision import ERROR_DECIMALS, declare, rounded
from brorl_lib.core.validation import check_int
from brorl_lib.facts import setup as paper_setup
from brorl_lib.facts import theorem as theory

# Relative errors of Theorem 1 and its proof identities: float64 round-off (1e-16 to 1e-13, different on
# another CPU) when the identity holds; artifacts show them to ERROR_DECIMALS places, where round-off reads 0.
REL_ERRORS = ("rel_err_first_order", "rel_err_identities", "rel_err_exact")
# The step-size study's gap relative to the change (round-off about 2e-16 of it) is written to STUDY_DECIMALS
# places: 22 values, so a 1e-12 boundary is crossed by round-off about once in 10^3 machines.
STUDY_DECIMALS = 12
# Our choices for the grids of the figures (not from the paper).
LEMMA2_PROBABILITIES = (0.001, 0.01, 0.1)
LEMMA2_MAX_MISS_EXPONENT = 5.0  # N up to 5/p, where (1-p)^N is still about e^-5
STEP_SIZES = np.logspace(-4, 1, 11)
PASS_AT_K = (1, 2, 4, 8, 16, 64)
SIGN_MAP_ROLLOUTS = (2, 8, 32)
SIGN_MAP_GRID = 161
COROLLARY3_ROLLOUTS = np.unique(np.round(np.logspace(0, 6, 61)).astype(int))
ZIPF_EXPONENT = theory.DEFAULT_ZIPF_EXPONENT


@dataclass(frozen=True)
class TheoryConfig(NotebookConfig):
    """Notebook 01's parameters. Upper bounds are our choice: far above the paper profile, small enough to
    finish on a laptop (a batch costs about V numbers; Lemma 2 keeps mc_trials draws per point in memory)."""

    seed: int = param(0, "RNG seed for every random draw in this notebook", low=0, high=SEED_MAX)
    n_instances: int = param(300, "random batches on which Theorem 1 is checked", low=1, high=100_000)
    vocab_sizes: list[int] = param(
        [10, 100, 1000, 10000, paper_setup.SIM_VOCAB_SIZE],
        "vocabulary sizes V drawn from",
        low=2,
        high=1_000_000,
        distinct=True,
        max_items=MAX_LIST_ITEMS,
    )
    rollout_sizes: list[int] = param(
        [1, 4, 16, 64, 512],
        "rollout counts N drawn from",
        low=1,
        high=1_000_000,
        distinct=True,
        max_items=MAX_LIST_ITEMS,
    )
    eta: float = param(
        1e-3, "step size of the logit update (the paper's simulator uses 1e-3)", low=0.0, low_open=True, high=10.0
    )
    r_correct: float = param(1.0, "reward R_c of a sampled correct token (Figure 2, sign map)", low=0.0, high=1e6)
    r_wrong: float = param(-1.0, "reward R_w of a sampled incorrect token (Figure 2, sign map)", low=-1e6, high=0.0)
    mc_trials: int = param(200000, "Monte Carlo trials per (p, N) point for Lemma 2", low=100, high=20_000_000)
    example_vocab_size: int = param(40, "vocabulary of the Figure 2 batch", low=4, high=200)
    example_n_correct: int = param(
        12, "correct tokens in the Figure 2 batch, below example_vocab_size", low=1, high=199
    )
    example_n_rollouts: int = param(8, "N for the Figure 2 batch", low=1, high=100_000)

    def check_together(self) -> None:
        theory.check_rewards(self.r_correct, self.r_wrong)
        if self.r_correct == self.r_wrong:
            raise ValueError("r_correct and r_wrong are both 0: allowed r_correct >= 0 >= r_wrong, not both 0")
        check_int("example_n_correct", self.example_n_correct, low=1, high=self.example_vocab_size - 1)

    def rng(self, stream: int) -> np.random.Generator:
        """Independent generator per study, so changing one study's size leaves the others alone."""
        return np.random.default_rng([self.seed, stream])


def theorem1_checks(cfg: TheoryConfig, progress: bool = True) -> pd.DataFrame:
    """Theorem 1 against first-order and exact changes on ``n_instances`` random batches."""
    rng = cfg.rng(1)
    rows = []
    for _ in tqdm(range(cfg.n_instances), desc="Theorem 1 instances", disable=not progress):
        inst = theory.random_instance(rng, cfg.vocab_sizes, cfg.rollout_sizes, zipf_exponent=ZIPF_EXPONENT)
        rows.append(theory.check_instance(inst, cfg.eta))
    return declare(pd.DataFrame(rows), decimals=dict.fromkeys(REL_ERRORS, ERROR_DECIMALS))


def worst_errors(checks: pd.DataFrame) -> pd.DataFrame:
    """Largest relative errors per vocabulary size, and over all instances."""
    cols = list(REL_ERRORS)
    per_v = checks.groupby("vocab_size")[cols].max()
    per_v.insert(0, "instances", checks.groupby("vocab_size").size())
    total = checks[cols].max().to_frame("all").T
    total.insert(0, "instances", len(checks))
    out = pd.concat([per_v, total])
    out.index = out.index.map(str)
    return declare(out.rename_axis("vocab_size").reset_index(), decimals=dict.fromkeys(REL_ERRORS, ERROR_DECIMALS))


def step_size_study(cfg: TheoryConfig) -> pd.DataFrame:
    """|exact - Theorem 1| (``abs_err``) and its ratio to |Theorem 1| (``rel_gap``) against eta, one instance per
    logit family (V = max vocab, N = max N)."""
    rng = cfg.rng(2)
    v, n = max(cfg.vocab_sizes), max(cfg.rollout_sizes)
    frames = []
    for family in theory.LOGIT_FAMILIES:
        inst = theory.random_instance(rng, [v], [n], families=(family,), zipf_exponent=ZIPF_EXPONENT)
        res = theory.error_vs_step_size(inst, STEP_SIZES)
        frames.append(pd.DataFrame({"family": family, "vocab_size": v, "n_rollouts": n, **res}))
    study = pd.concat(frames, ignore_index=True)
    study["rel_gap"] = study["abs_err"] / study["delta_q_theorem"].abs()
    return declare(study, decimals={"rel_gap": STUDY_DECIMALS})


def fitted_orders(study: pd.DataFrame) -> dict[str, float]:
    """Order of the exact-vs-first-order gap per family, fitted where the gap is above rounding."""
    out = {}
    for family, g in study.groupby("family"):
        ok = g["abs_err"] > 1e-12 * g["delta_q_theorem"].abs()
        out[family] = theory.fitted_order(g.loc[ok, "eta"].to_numpy(), g.loc[ok, "abs_err"].to_numpy())
    return out


def lemma2_study(cfg: TheoryConfig) -> pd.DataFrame:
    """Lemma 2 by Monte Carlo with 95% Clopper-Pearson intervals, on a (p, N) grid."""
    rng = cfg.rng(3)
    rows = []
    for p in LEMMA2_PROBABILITIES:
        n_max = LEMMA2_MAX_MISS_EXPONENT / p
        for n in np.unique(np.round(np.geomspace(1, n_max, 8)).astype(int)):
            rows.append(theory.lemma2_monte_carlo(p, int(n), cfg.mc_trials, rng))
    df = pd.DataFrame(rows)
    df["covered"] = (df["ci_low"] <= df["analytic"]) & (df["analytic"] <= df["ci_high"])
    return df


def simulator_start() -> tuple[np.ndarray, np.ndarray]:
    """Probabilities and correct mask of the paper's seeded simulator start (Figure 3)."""
    z, correct = paper_setup.seeded_initial_logits()
    return theory.softmax(z), correct


def corollary3_curves() -> pd.DataFrame:
    """Expected unsampled second moment against N for three distributions over 128k tokens."""
    v = paper_setup.SIM_VOCAB_SIZE
    ns = COROLLARY3_ROLLOUTS
    p_sim, correct = simulator_start()
    curves = {
        ("Zipf s=1.1", "all tokens"): theory.expected_unsampled_moment(theory.zipf_probabilities(v, ZIPF_EXPONENT), ns),
        ("uniform", "all tokens"): theory.expected_unsampled_moment(np.full(v, 1.0 / v), ns),
        ("simulator start", "correct (U_pos,2)"): theory.expected_unsampled_moment(p_sim, ns, correct),
        ("simulator start", "incorrect (U_neg,2)"): theory.expected_unsampled_moment(p_sim, ns, ~correct),
    }
    return pd.concat(
        [
            pd.DataFrame({"distribution": d, "tokens": t, "n_rollouts": ns, "expected_u2": y})
            for (d, t), y in curves.items()
        ],
        ignore_index=True,
    )


def corollary3_monte_carlo(cfg: TheoryConfig, n_rollouts: int = 512, trials: int = 200) -> dict[str, float]:
    """Average U_pos,2 and U_neg,2 over real multinomial batches from the simulator start vs Corollary 3."""
    rng = cfg.rng(4)
    p, correct = simulator_start()
    pos, neg = [], []
    for _ in range(trials):
        unsampled = ~theory.sample_tokens(p, n_rollouts, rng)
        pos.append(float(np.sum(p[unsampled & correct] ** 2)))
        neg.append(float(np.sum(p[unsampled & ~correct] ** 2)))
    return {
        "n_rollouts": n_rollouts,
        "trials": trials,
        "u_pos2_mc": float(np.mean(pos)),
        "u_pos2_sem": float(np.std(pos, ddof=1) / np.sqrt(trials)),
        "u_pos2_theory": float(theory.expected_unsampled_moment(p, [n_rollouts], correct)[0]),
        "u_neg2_mc": float(np.mean(neg)),
        "u_neg2_sem": float(np.std(neg, ddof=1) / np.sqrt(trials)),
        "u_neg2_theory": float(theory.expected_unsampled_moment(p, [n_rollouts], ~correct)[0]),
    }


def example_batch(cfg: TheoryConfig) -> tuple[theory.SampledBatch, pd.DataFrame]:
    """A concrete sampled batch for Figure 2: Zipf probabilities, random correct subset, N draws."""
    rng = cfg.rng(5)
    v = cfg.example_vocab_size
    p = theory.zipf_probabilities(v, ZIPF_EXPONENT)
    correct = np.zeros(v, dtype=bool)
    correct[rng.choice(v, size=cfg.example_n_correct, replace=False)] = True
    sampled = theory.sample_tokens(p, cfg.example_n_rollouts, rng)
    inst = theory.SampledBatch(
        "zipf", np.log(p), p, correct, sampled, cfg.example_n_rollouts, cfg.r_correct, cfg.r_wrong
    )
    dz = theory.logit_update(p, correct, sampled, cfg.r_correct, cfg.r_wrong, cfg.eta, inst.n)
    token_class = np.select(
        [correct & sampled, ~correct & sampled, correct & ~sampled],
        ["sampled correct", "sampled incorrect", "unsampled correct"],
        "unsampled incorrect",
    )
    tokens = pd.DataFrame(
        {
            "token": np.arange(v),
            "p": p,
            "correct": correct,
            "sampled": sampled,
            "token_class": token_class,
            "delta_z": dz,
            "delta_p_first_order": p * (dz - theory.dot(p, dz)),
        }
    )
    return inst, tokens


def example_terms(inst: theory.SampledBatch, eta: float) -> pd.DataFrame:
    """Theorem 1's three terms and their sum for one batch, with the batch's statistics."""
    mb = theory.mass_balance(inst.p, inst.correct, inst.sampled, inst.r_c, inst.r_w)
    terms = theory.theorem1_terms(mb, inst.r_c, inst.r_w, eta, inst.n)
    rows = [{"term": k, "value": v} for k, v in terms.items()]
    rows.append({"term": "delta_q_pos", "value": sum(terms.values())})
    return pd.DataFrame(rows)


def expected_batch_stats(p: np.ndarray, correct: np.ndarray, n: int) -> dict[str, float]:
    """Expected P_pos, P_neg, A_2, B_2, U_pos,2, U_neg,2 over N i.i.d. draws (hit prob. 1-(1-p)^N)."""
    hit = -np.expm1(n * np.log1p(-p))
    p2 = p * p
    return {
        "q_pos": float(p[correct].sum()),
        "p_pos": float(np.sum(p[correct] * hit[correct])),
        "p_neg": float(np.sum(p[~correct] * hit[~correct])),
        "a2": float(np.sum(p2[correct] * hit[correct])),
        "b2": float(np.sum(p2[~correct] * hit[~correct])),
        "u_pos2": float(np.sum(p2[correct] * (1 - hit[correct]))),
        "u_neg2": float(np.sum(p2[~correct] * (1 - hit[~correct]))),
    }


def sign_map(
    cfg: TheoryConfig, inst: theory.SampledBatch, rollouts: tuple[int, ...] = SIGN_MAP_ROLLOUTS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(N/eta) * Delta Q_pos over S_R and U_pos,2 - U_neg,2, per N of ``rollouts``.

    For each N, Q_pos, A_2, B_2 and U_2 = U_pos,2 + U_neg,2 are their expected values under the
    Figure 2 distribution; S_R and the split of U_2 are then swept over their whole ranges. The
    second frame holds the expected (S_R, U_pos,2 - U_neg,2) point for each N.
    """
    s_grid = np.linspace(cfg.r_wrong, cfg.r_correct, SIGN_MAP_GRID)
    frames, points = [], []
    for n in rollouts:
        e = expected_batch_stats(inst.p, inst.correct, n)
        u2 = e["u_pos2"] + e["u_neg2"]
        s, d = np.meshgrid(s_grid, np.linspace(-u2, u2, SIGN_MAP_GRID))
        terms = theory.terms_from_stats(
            e["q_pos"], e["a2"], e["b2"], (u2 + d) / 2, (u2 - d) / 2, s, cfg.r_correct, cfg.r_wrong
        )
        frames.append(
            pd.DataFrame(
                {
                    "n_rollouts": n,
                    "s_r": s.ravel(),
                    "u_diff": d.ravel(),
                    "u2": u2,
                    "scaled_delta_q": sum(terms.values()).ravel(),
                }
            )
        )
        points.append(
            {
                "n_rollouts": n,
                "s_r": cfg.r_correct * e["p_pos"] + cfg.r_wrong * e["p_neg"],
                "u_diff": e["u_pos2"] - e["u_neg2"],
                "u2": u2,
            }
        )
    # near the zero line a value is the difference of much larger terms: round at the scale of the largest
    grid = declare(pd.concat(frames, ignore_index=True), scaled=("u_diff", "scaled_delta_q"))
    return grid, pd.DataFrame(points)


def pass_at_k_curves() -> pd.DataFrame:
    q = np.linspace(0.0, 1.0, 201)
    return pd.concat(
        [pd.DataFrame({"k": k, "q_pos": q, "pass_at_k": theory.pass_at_k_from_mass(q, k)}) for k in PASS_AT_K],
        ignore_index=True,
    )


THEOREM1_CLAIM = "Theorem 1 (§2): the correct-mass change of one update, in closed form"
FIRST_ORDER_TOLERANCE = 1e-10  # relative error below which Theorem 1 equals the first-order change (round-off)


def theorem1_claim(worst: pd.DataFrame) -> Claim:
    """The results-at-a-glance row of Theorem 1, from ``worst_errors`` (its row ``all`` when there is one), read as
    its table holds it (errors to ``ERROR_DECIMALS``: round-off reads 0)."""
    worst = rounded(worst)
    picked = worst[worst["vocab_size"].astype(str) == "all"]
    picked = picked if len(picked) else worst
    first, identities, exact = (float(picked[c].max()) for c in REL_ERRORS)
    said = "holds" if first <= FIRST_ORDER_TOLERANCE else "does not hold"
    verdict = (
        f"{said}: worst relative error {first:.2g} against the first-order change and {identities:.2g} in the "
        f"proof's identities over {int(picked['instances'].sum()):,} random batches; {exact:.2g} against the exact "
        "change of one step"
    )
    caveat = "one update in the paper's setting, checked on random batches; it says nothing about training"
    return Claim(claim=THEOREM1_CLAIM, verdict=verdict, caveat=caveat, figure="theory_theorem1_check")
