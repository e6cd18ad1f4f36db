"""The computations behind notebooks/02_simulator.ipynb: parameters, Figure 3, the N sweep,
the match to the published axes, and Theorem 1 against the measured change per step."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from brorl_lib.core.claims import Claim
from brorl_lib.core.params import MAX_LIST_ITEMS, MAX_SEEDS, SEED_MAX, NotebookConfig, declared_as, param
from brorl_lib.facts import setup as paper_setup
from brorl_lib.simulator.engine import SimSettings
from brorl_lib.simulator.runner import simulate

# Figure 3's published axes (paper §4.1), and our reading of how far a curve may go beyond the outermost
# tick before it would have needed another one (docs/simulator-choices.md#reading-figure-3s-axes).
FIG3_MASS_RANGE = (0.595, 0.65)  # ticks 0.60-0.64, spacing 0.01
FIG3_WORST_DROP_FLOOR = -1.5e-4  # ticks -0.00010 to 0.00000
FIG3_PAPER_AXIS_FLOOR = -1e-4  # the lowest tick of Figure 3's worst-drop axis

# Settings varied to see which of the paper's unstated choices fit the published axes.
AXIS_VARIANTS = {
    "our defaults": {},
    "no weight decay": {"weight_decay": 0.0},
    "anchor correct": {"anchor_correct": True},
    "anchor frozen": {"anchor_frozen": True},
    "unseeded start": {"seeded_init": False},
}


PAPER_N = list(paper_setup.SIM_ROLLOUT_SIZES)  # Figure 3's N
LARGEST_PAPER_N = max(PAPER_N)

MAX_RESULT_ROWS = 20_000_000  # our bound on one study's table, (steps + 1) x runs rows: about 1 GB in memory
MAX_ROLLOUTS = 1_000_000  # our bound on N: a step draws sum(N) tokens per batch of runs (~20x the paper's 51,200)


@dataclass(frozen=True)
class SimulatorConfig(NotebookConfig):
    """Notebook 02's parameters. Upper bounds are our choice: at vocab_size 1,000,000 a batch of 16 runs holds
    about 10 x 16 x vocab_size numbers (1.3 GB); every study's table is refused beyond MAX_RESULT_ROWS rows."""

    seeds: list[int] = param(
        [0],
        "random seeds of the Figure 3 runs (paper profile: [0, 1, 2])",
        low=0,
        high=SEED_MAX,
        distinct=True,
        max_items=MAX_SEEDS,
    )
    rollouts: list[int] = param(
        PAPER_N, "rollout sizes N of Figure 3", low=1, high=MAX_ROLLOUTS, distinct=True, max_items=MAX_LIST_ITEMS
    )
    steps: int = declared_as(SimSettings, "steps")  # SimSettings' own declarations, to worst_drop
    vocab_size: int = declared_as(SimSettings, "vocab_size")
    n_correct: int = declared_as(SimSettings, "n_correct")
    lr: float = declared_as(SimSettings, "lr")  # the AdamW step, to adam_eps
    weight_decay: float = declared_as(SimSettings, "weight_decay")
    beta1: float = declared_as(SimSettings, "beta1")
    beta2: float = declared_as(SimSettings, "beta2")
    adam_eps: float = declared_as(SimSettings, "adam_eps")
    seeded_init: bool = declared_as(SimSettings, "seeded_init")  # the paper's unstated choices, to worst_drop
    anchor_correct: bool = declared_as(SimSettings, "anchor_correct")
    anchor_frozen: bool = declared_as(SimSettings, "anchor_frozen")
    correct_tokens: str = declared_as(SimSettings, "correct_tokens")
    worst_drop: str = declared_as(SimSettings, "worst_drop")
    sweep_rollouts: list[int] = param(
        [2, 8, 32, 128, 512, 2048, 8192, LARGEST_PAPER_N],
        "N grid of the sweep",
        low=1,
        high=MAX_ROLLOUTS,
        distinct=True,
        max_items=MAX_LIST_ITEMS,
    )
    sweep_seeds: list[int] = param([0], "seeds of the sweep", low=0, high=SEED_MAX, distinct=True, max_items=MAX_SEEDS)
    sweep_steps: int = param(300, "steps of each sweep run", low=1, high=100_000)
    theory_rollouts: list[int] = param(
        [4, 16, 512, LARGEST_PAPER_N],
        "N of the runs that record Theorem 1 each step",
        low=1,
        high=MAX_ROLLOUTS,
        distinct=True,
        max_items=MAX_LIST_ITEMS,
    )
    theory_steps: int = param(200, "steps of those runs", low=1, high=100_000)
    variant_rollouts: list[int] = param(
        [4, LARGEST_PAPER_N],
        "N of the runs that test the unstated choices",
        low=1,
        high=MAX_ROLLOUTS,
        distinct=True,
        max_items=MAX_LIST_ITEMS,
    )
    dtype: str = declared_as(SimSettings, "dtype")
    device: str = declared_as(SimSettings, "device")

    def check_together(self) -> None:
        self.settings()  # n_correct below vocab_size, and a visible GPU for device='cuda'
        for steps, rollouts, seeds in (
            ("steps", "rollouts", "seeds"),
            ("steps", "variant_rollouts", None),
            ("sweep_steps", "sweep_rollouts", "sweep_seeds"),
            ("theory_steps", "theory_rollouts", None),
        ):
            runs = len(getattr(self, rollouts)) * (len(getattr(self, seeds)) if seeds else 1)
            rows = (getattr(self, steps) + 1) * runs
            if rows > MAX_RESULT_ROWS:
                raise ValueError(
                    f"{steps}={getattr(self, steps)} with {runs} runs ({rollouts}"
                    f"{' x ' + seeds if seeds else ''}) makes a table of {rows:,} rows; allowed at most "
                    f"{MAX_RESULT_ROWS:,} (our bound, about 1 GB): lower {steps} or shorten the lists"
                )

    def settings(self, **overrides) -> SimSettings:
        """SimSettings from these parameters (their names match), with ``overrides``."""
        return self.build(SimSettings, **overrides)

    def provenance(self) -> str:
        """``reproduced`` at the paper's vocabulary, correct set, step size and length; else ``scaled-down``."""
        paper = (
            paper_setup.SIM_VOCAB_SIZE,
            paper_setup.SIM_N_CORRECT,
            paper_setup.SIM_LEARNING_RATE,
            paper_setup.SIM_STEPS,
        )
        return "reproduced" if (self.vocab_size, self.n_correct, self.lr, self.steps) == paper else "scaled-down"


def figure3_runs(cfg: SimulatorConfig) -> pd.DataFrame:
    """Every (N, seed) run of Figure 3 with the paper's update rule, every step."""
    return simulate(cfg.settings(), cfg.rollouts, cfg.seeds)


def final_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Per N: mean and spread over seeds of the final metrics, and the worst drop over the whole run."""
    last = runs[runs["step"] == runs["step"].max()]
    run_worst = runs.groupby(["N", "seed"])["worst_drop"].min().rename("worst_drop_over_run")
    per_run = last.set_index(["N", "seed"])[["correct_mass", "pct_improved", "worst_drop"]].join(run_worst)
    agg = per_run.groupby("N").agg(["mean", "std", "min", "max"])
    agg.columns = [f"{a}_{b}" for a, b in agg.columns]
    agg.insert(0, "seeds", per_run.groupby("N").size())
    agg.insert(1, "initial_mass", runs[runs["step"] == 0].groupby("N")["correct_mass"].mean())
    return agg.reset_index()


def figure3_caption(runs: pd.DataFrame) -> str:
    """Figure 3's caption: what it shows, and in one line how its worst drop compares with the paper's axis
    (which runs to -1e-4; the paper prints no values)."""
    worst = float(runs["worst_drop"].min())
    lo, hi = runs["correct_mass"].min(), runs["correct_mass"].max()
    drop = (
        f"our deepest worst drop is {worst:.1e}, {FIG3_PAPER_AXIS_FLOOR / worst:.0f}x smaller than the paper's "
        f"axis floor ({FIG3_PAPER_AXIS_FLOOR:.0e}), so that panel's scale is ours, not the paper's"
        if worst < 0
        else f"no worst drop below 0 (the paper's axis runs to {FIG3_PAPER_AXIS_FLOOR:.0e})"
    )
    return (
        "Figure 3: correct mass, % of correct tokens improved and worst drop against steps, per N, every N at the "
        f"paper's one learning rate ({paper_setup.SIM_LEARNING_RATE:g}) for the same steps (so N=512 draws 32x the "
        f"samples of N=16). Beside the paper: our mass spans {lo:.3f}-{hi:.3f} (the paper's axis: 0.60-0.64); {drop}"
    )


def axis_variants(cfg: SimulatorConfig) -> pd.DataFrame:
    """For each variant of the unstated choices: mass span and worst drop against Figure 3's axes."""
    rows = []
    for name, overrides in AXIS_VARIANTS.items():
        runs = simulate(cfg.settings(**overrides), cfg.variant_rollouts, cfg.seeds[:1], progress=False)
        for n, g in runs.groupby("N"):
            lo, hi = g["correct_mass"].min(), g["correct_mass"].max()
            worst = g["worst_drop"].min()
            rows.append(
                {
                    "variant": name,
                    "N": n,
                    "initial_mass": g["correct_mass"].iloc[0],
                    "final_mass": g["correct_mass"].iloc[-1],
                    "min_mass": lo,
                    "max_mass": hi,
                    "worst_drop_over_run": worst,
                    "fits_mass_axis": bool(FIG3_MASS_RANGE[0] <= lo and hi <= FIG3_MASS_RANGE[1]),
                    "fits_worst_drop_axis": bool(worst >= FIG3_WORST_DROP_FLOOR),
                }
            )
    return pd.DataFrame(rows)


def sweep_runs(cfg: SimulatorConfig) -> pd.DataFrame:
    """Runs on the N grid beyond the paper's five values."""
    return simulate(cfg.settings(steps=cfg.sweep_steps), cfg.sweep_rollouts, cfg.sweep_seeds)


def _first_n_from_which(ns: np.ndarray, ok: np.ndarray) -> int | None:
    """Smallest ns[i] such that ok[i:] all hold (None if not even the last one)."""
    for i in range(len(ok)):
        if ok[i:].all():
            return int(ns[i])
    return None


def smallest_n_without_drop(summary: pd.DataFrame, column: str = "worst_drop_over_run_min") -> int | None:
    """Smallest N from which on no correct token lost probability, in any seed (None if none).

    ``worst_drop_over_run_min``: at no step of the run; ``worst_drop_min``: at the last step.
    """
    s = summary.sort_values("N")
    return _first_n_from_which(s["N"].to_numpy(), (s[column] >= 0).to_numpy())


def shape_in_log_n(summary: pd.DataFrame, column: str = "correct_mass_mean") -> dict[str, int | None]:
    """From which N on the final value increases with N, and is concave in log N (None: nowhere).

    The paper (Appendix A) reads its simulator's gains as "monotonic but concave" in N.
    """
    s = summary.sort_values("N")
    ns, y = s["N"].to_numpy(), s[column].to_numpy()
    slopes = np.diff(y) / np.diff(np.log(ns.astype(float)))
    increasing = np.append(slopes > 0, True)  # point i: the curve rises from N_i to N_i+1
    concave = np.append(np.diff(slopes) <= 0, [True, True])  # point i: slope falls from i..i+1 to i+1..i+2
    return {"increasing_from": _first_n_from_which(ns, increasing), "concave_from": _first_n_from_which(ns, concave)}


# Update rules compared with Theorem 1 step by step: label -> settings overrides.
THEORY_RULES = {
    "theorem": {"update_rule": "theorem"},
    "paper": {"update_rule": "paper"},
    "paper, no weight decay": {"update_rule": "paper", "weight_decay": 0.0},
}


def theory_runs(cfg: SimulatorConfig) -> pd.DataFrame:
    """Each rule of THEORY_RULES with Theorem 1's prediction recorded beside the measured dQ_pos each step."""
    frames = []
    for label, overrides in THEORY_RULES.items():
        runs = simulate(
            cfg.settings(steps=cfg.theory_steps, track_theory=True, **overrides), cfg.theory_rollouts, cfg.seeds[:1]
        )
        frames.append(runs[runs["step"] > 0].assign(update_rule=label))
    return pd.concat(frames, ignore_index=True)


def theory_agreement(runs: pd.DataFrame) -> pd.DataFrame:
    """Per rule and N: how often the measured change has Theorem 1's sign, and their correlation."""

    def summarise(g: pd.DataFrame) -> pd.Series:
        meas, pred = g["delta_q_measured"], g["delta_q_theorem"]
        return pd.Series(
            {
                "steps": len(g),
                "sign_agreement_pct": 100.0 * float(np.mean(np.sign(meas) == np.sign(pred))),
                "measured_negative_pct": 100.0 * float(np.mean(meas < 0)),
                "predicted_negative_pct": 100.0 * float(np.mean(pred < 0)),
                "correlation": float(np.corrcoef(meas, pred)[0, 1]),
            }
        )

    cols = ["delta_q_measured", "delta_q_theorem"]
    return runs.groupby(["update_rule", "N"], sort=False)[cols].apply(summarise).reset_index()


def figure3_claim(summary: pd.DataFrame, own_rates: str) -> Claim:
    """The results-at-a-glance row of Figure 3, from ``final_summary``: the final correct mass per N against its
    start, under the paper's condition (one learning rate, equal steps); ``own_rates``: what the variant with each
    N at its own rate found (``rate_bracket.claim_text``), for the caveat."""
    pairs = sorted((int(n), float(m)) for n, m in zip(summary["N"], summary["correct_mass_mean"]))
    start = float(summary["initial_mass"].iloc[0])
    rises = all(later > earlier for (_, earlier), (_, later) in zip(pairs, pairs[1:]))
    said = "rises with N" if rises else "does not rise with N at every step"
    listed = ", ".join(f"N={n:,}: {m:.4f}" for n, m in pairs)
    below = [n for n, m in pairs if m < start]
    under = f"; below the start for N ≤ {max(below):,}" if below else ""
    return Claim(
        claim="Figure 3 (§4.1): more rollouts N raise the correct mass",
        verdict=f"at the paper's one learning rate and equal steps, final correct mass {said} ({listed}; start "
        f"{start:.4f}{under})",
        caveat=f"a simulator, not a language model; {own_rates}",
        figure="fig3_simulator",
    )
