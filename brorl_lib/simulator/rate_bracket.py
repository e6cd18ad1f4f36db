"""Figure 3's comparison with each N at its own learning rate, a *variant* beyond the paper.

Figure 3 gives every N the paper's one rate (1e-3) for 1,000 steps, so N=512 draws 32x the samples of N=16. Here
each N's rate is bracketed on a grid, under two budgets: equal steps (Figure 3's 1,000) and equal generated samples
(N=512's samples over those steps). The runs take about an hour on 2 cores, so they are committed as data
(``data/runs/simulator_lr_bracket``) and notebook 02 reads them back; this module's command re-makes them,
resuming from the runs already finished::

    python -m brorl_lib.simulator.rate_bracket            # runs what is missing, then writes the data folder
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from brorl_lib.core.atomic import atomic_path
from brorl_lib.core.locks import held
from brorl_lib.core.paths import BUILD_DIR, REPO_ROOT
from brorl_lib.core.stats import mean_interval
from brorl_lib.facts import setup as paper_setup
from brorl_lib.simulator.engine import WORST_DROP_DECIMALS, SimSettings
from brorl_lib.simulator.runner import simulate

DATA_DIR = REPO_ROOT / "data" / "runs" / "simulator_lr_bracket"
WORK_DIR = BUILD_DIR / "simulator_lr_bracket"
COMMAND = "python -m brorl_lib.simulator.rate_bracket"

# our choice: half decades from the paper's rate (1e-3) to 316, past 100, where AdamW's decoupled weight decay
# (0.01) takes the whole logit away each step (beyond it, runs diverge); a pick at either end is flagged, not hidden
RATES = tuple(float(f"{10 ** (k / 2):.3g}") for k in range(-6, 6))
ROLLOUTS = tuple(paper_setup.SIM_ROLLOUT_SIZES)  # Figure 3's N
# our choice, for cost: at equal samples N=4 and N=8 would take 128,000 and 64,000 steps a run (about an hour for
# their bracket on 2 cores), so that budget compares ProRL's N=16 with the larger N only
EQUAL_SAMPLES_FROM_N = 16
SEEDS = (0, 1)  # our choice: two of Figure 3's seeds (the equal-samples runs of N=4 take 128,000 steps each)
EQUAL_STEPS, EQUAL_SAMPLES = "equal steps", "equal samples"
CONDITIONS = (EQUAL_STEPS, EQUAL_SAMPLES)
SAMPLE_BUDGET_N = 512  # our choice: equal samples means N=512's samples over Figure 3's steps (BroRL's N, §4.2)
POINTS = 201  # our choice: points kept per run, evenly spaced in steps (the last step always kept)
METRICS = ("correct_mass", "pct_improved", "worst_drop")


def steps_for(condition: str, n: int, steps: int = paper_setup.SIM_STEPS) -> int:
    """Steps of a run of N=n: Figure 3's ``steps``, or as many as spend N=512's samples over them."""
    if condition == EQUAL_STEPS:
        return steps
    if condition == EQUAL_SAMPLES:
        return max(1, SAMPLE_BUDGET_N * steps // n)
    raise ValueError(f"condition={condition!r} is not allowed: expected one of {CONDITIONS}")


def kept_steps(steps: int) -> np.ndarray:
    return np.unique(np.round(np.linspace(0, steps, min(POINTS, steps + 1))).astype(int))


def part_name(condition: str, n: int, lr: float) -> str:
    return f"{condition.replace(' ', '_')}_N{n}_lr{lr:g}.csv"


def run_part(
    condition: str, n: int, lr: float, seeds=SEEDS, base: SimSettings | None = None, progress: bool = False
) -> pd.DataFrame:
    """The runs of (condition, N, learning rate), one per seed, at ``kept_steps``; ``base``: the other settings
    (default: the paper's), whose ``steps`` is Figure 3's length."""
    base = base or SimSettings()
    steps = steps_for(condition, n, base.steps)
    runs = simulate(replace(base, lr=lr, steps=steps), [n], list(seeds), progress=progress)
    runs = runs[runs["step"].isin(kept_steps(steps))]
    runs.insert(0, "condition", condition)
    runs.insert(2, "lr", lr)
    runs.insert(5, "samples", runs["step"] * n)
    return runs.reset_index(drop=True)


def plan() -> list[tuple[str, int, float]]:
    """Every (condition, N, rate); N=512's equal-samples runs are its equal-steps runs, so they appear once."""
    parts = [(c, n, lr) for c in CONDITIONS for n in rollouts(c) for lr in RATES]
    return [(c, n, lr) for c, n, lr in parts if not (c == EQUAL_SAMPLES and n in shared_runs())]


def shared_runs() -> tuple[int, ...]:
    """The N whose equal-samples runs are its equal-steps runs (the same number of steps): run once, kept twice."""
    return tuple(n for n in ROLLOUTS if steps_for(EQUAL_SAMPLES, n) == steps_for(EQUAL_STEPS, n))


def rollouts(condition: str) -> tuple[int, ...]:
    """The N bracketed under ``condition``."""
    return tuple(n for n in ROLLOUTS if condition == EQUAL_STEPS or n >= EQUAL_SAMPLES_FROM_N)


def write_csv(df: pd.DataFrame, path: Path) -> None:
    df = df.copy()
    df["worst_drop"] = df["worst_drop"].round(WORST_DROP_DECIMALS)
    with atomic_path(path) as tmp:
        df.to_csv(tmp, index=False, float_format="%.12g")


def run_missing(work: Path = WORK_DIR, progress: bool = True) -> list[Path]:
    """Each part of ``plan`` not yet in ``work``, costliest first; a finished part is a file and is never re-run."""
    todo = [p for p in plan() if not (work / part_name(*p)).exists()]
    todo.sort(key=lambda p: -steps_for(p[0], p[1]) * (p[1] + 1000))  # rough cost: steps x (N + a row's fixed work)
    for condition, n, lr in tqdm(todo, desc="rate bracket parts", disable=not progress):
        write_csv(run_part(condition, n, lr), work / part_name(condition, n, lr))
    return [work / part_name(*p) for p in plan()]


def merged(parts: list[Path]) -> pd.DataFrame:
    """Every part in one table, the ``shared_runs``' equal-steps runs copied as their equal-samples runs."""
    runs = pd.concat([pd.read_csv(p) for p in parts], ignore_index=True)
    same = runs[(runs["condition"] == EQUAL_STEPS) & runs["N"].isin(shared_runs())].assign(condition=EQUAL_SAMPLES)
    runs = pd.concat([runs, same], ignore_index=True)
    return runs.sort_values(["condition", "N", "lr", "seed", "step"], kind="stable").reset_index(drop=True)


def settings_record() -> dict:
    return {
        "command": COMMAND,
        "settings": asdict(SimSettings()),
        "rates": list(RATES),
        "rollouts": list(ROLLOUTS),
        "seeds": list(SEEDS),
        "conditions": {c: {str(n): steps_for(c, n) for n in rollouts(c)} for c in CONDITIONS},
        "sample_budget": SAMPLE_BUDGET_N * paper_setup.SIM_STEPS,
    }


def write_data(parts: list[Path], out: Path = DATA_DIR) -> None:
    write_csv(merged(parts), out / "runs.csv")
    with atomic_path(out / "settings.json") as tmp:
        tmp.write_text(json.dumps(settings_record(), indent=1) + "\n")


def read_runs(folder: Path = DATA_DIR) -> pd.DataFrame:
    """The committed runs; refused if their settings are not this module's (re-make them with COMMAND)."""
    recorded = json.loads((folder / "settings.json").read_text())
    if recorded != json.loads(json.dumps(settings_record())):
        raise ValueError(f"{folder}/settings.json was made with other settings than these; re-make it: {COMMAND}")
    return pd.read_csv(folder / "runs.csv")


def _in_condition_order(column: pd.Series) -> pd.Series:
    return column.map(CONDITIONS.index) if column.name == "condition" else column


def finals(runs: pd.DataFrame) -> pd.DataFrame:
    """Per condition (in ``CONDITIONS``' order), N and rate: the final correct mass over seeds (mean, sd, min, max)
    and 1 - that mean."""
    keys = ["condition", "N", "lr"]
    last = runs[runs["step"] == runs.groupby(keys)["step"].transform("max")]
    last = last.sort_values(keys, key=_in_condition_order, kind="stable")
    out = last.groupby(keys, sort=False)["correct_mass"].agg(["mean", "std", "min", "max", "count"])
    out = out.rename(columns=lambda c: f"correct_mass_{c}" if c != "count" else "seeds").reset_index()
    out["incorrect_mass_mean"] = 1.0 - out["correct_mass_mean"]
    steps = last.groupby(keys, sort=False)[["step", "samples"]].first().reset_index(drop=True)
    return pd.concat([out, steps.rename(columns={"step": "steps"})], axis=1)


def picks(final: pd.DataFrame) -> pd.DataFrame:
    """Per condition and N, the rate with the highest mean final correct mass (the rule, fixed before the runs), the
    mass there and at the paper's rate, and whether it lies inside the grid (not at either end; a diverged run, NaN,
    is never the best)."""
    rows = []
    for (condition, n), g in final.groupby(["condition", "N"], sort=False):
        best = g.loc[g["correct_mass_mean"].idxmax()]
        rates = sorted(g["lr"])
        at_paper = g[np.isclose(g["lr"], paper_setup.SIM_LEARNING_RATE)]["correct_mass_mean"]
        rows.append(
            {
                "condition": condition,
                "N": int(n),
                "steps": int(best["steps"]),
                "samples": int(best["samples"]),
                "best_lr": float(best["lr"]),
                "interior": bool(rates[0] < best["lr"] < rates[-1]),
                "correct_mass_at_best": float(best["correct_mass_mean"]),
                "incorrect_mass_at_best": float(best["incorrect_mass_mean"]),
                "correct_mass_at_paper_lr": float(at_paper.iloc[0]) if len(at_paper) else math.nan,
                "seeds": int(best["seeds"]),
            }
        )
    return pd.DataFrame(rows)


def difference(runs: pd.DataFrame, chosen: pd.DataFrame, condition: str, n: int, base: int) -> dict[str, float]:
    """Final correct mass of N=n minus N=base, each at its own pick, paired by seed, with a 95% t-interval."""
    at = chosen.set_index(["condition", "N"])["best_lr"]

    def last(m: int) -> pd.Series:
        g = runs[(runs["condition"] == condition) & (runs["N"] == m) & np.isclose(runs["lr"], at[(condition, m)])]
        return g[g["step"] == g["step"].max()].set_index("seed")["correct_mass"]

    return mean_interval((last(n) - last(base)).dropna())


def _interval(d: dict[str, float]) -> str:
    return f"[{d['ci_low']:+.2g}, {d['ci_high']:+.2g}]"


# what these artifacts change from Figure 3's experiment (their variant stamp)
BEYOND = {"lr": "each N's best of 1e-3 to 316", "budget": "equal steps or equal samples"}


def picks_table(runs: pd.DataFrame, chosen: pd.DataFrame, base: int = 16) -> pd.DataFrame:
    """The picks with each N's final correct mass minus N=``base``'s (each at its pick, paired by seed, 95%
    t-interval over seeds)."""
    rows = []
    for row in chosen.itertuples():
        d = difference(runs, chosen, row.condition, row.N, base) if row.N != base else None
        rows.append(
            {
                "budget": row.condition,
                "N": row.N,
                "steps": row.steps,
                "samples": row.samples,
                "best lr": row.best_lr,
                "inside grid": "yes" if row.interior else "no (at an end)",
                "Q at best": row.correct_mass_at_best,
                "1 - Q at best": row.incorrect_mass_at_best,
                "Q at lr 1e-3": row.correct_mass_at_paper_lr,
                f"Q - Q(N={base})": d["mean"] if d else math.nan,
                "95% CI": _interval(d) if d else "",
                "seeds": row.seeds,
            }
        )
    return pd.DataFrame(rows)


def budget_text(condition: str) -> str:
    if condition == EQUAL_STEPS:
        return f"equal steps ({paper_setup.SIM_STEPS:,} each)"
    return f"equal samples ({SAMPLE_BUDGET_N * paper_setup.SIM_STEPS:,} each)"


def conclusion(runs: pd.DataFrame, chosen: pd.DataFrame, base: int = 16, broad: int = SAMPLE_BUDGET_N) -> list[str]:
    """One line per budget: each N's final incorrect mass 1 - Q at its pick (tuned runs end near Q = 1), whether the
    correct mass rises with N, and N=``broad`` minus N=``base`` with its 95% interval over seeds."""
    lines = []
    for condition, g in chosen.groupby("condition", sort=False):
        g = g.sort_values("N")
        masses = ", ".join(f"N={n:,}: {q:.2g}" for n, q in zip(g["N"], g["incorrect_mass_at_best"]))
        rises = bool((np.diff(g["correct_mass_at_best"].to_numpy()) > 0).all())
        d = difference(runs, chosen, condition, broad, base)
        edge = [f"N={n:,}" for n, inside in zip(g["N"], g["interior"]) if not inside]
        lines.append(
            f"{budget_text(condition)}: final 1 - Q at each N's best rate {masses}; the correct mass "
            f"{'rises' if rises else 'does not rise'} with N; N={broad} - N={base}: {d['mean']:+.3g} "
            f"{_interval(d)} over {d['n']} seeds"
            + (f"; best rate at the grid's end for {', '.join(edge)}" if edge else "")
        )
    return lines


def claim_text(runs: pd.DataFrame, chosen: pd.DataFrame, base: int = 16, broad: int = SAMPLE_BUDGET_N) -> str:
    """Figure 3's caveat from the variant, short enough for a table cell: the largest final 1 - Q at the picks and
    N=``broad`` minus N=``base`` under each budget, with 95% intervals over seeds."""
    parts = []
    for condition in CONDITIONS:
        d = difference(runs, chosen, condition, broad, base)
        parts.append(f"{d['mean']:+.2g} {_interval(d)} at {condition}")
    worst = float(chosen["incorrect_mass_at_best"].max())
    return (
        f"each N at its own rate (variant): all within {worst:.1g} of Q = 1; N={broad} - N={base} "
        f"{', '.join(parts)} ({int(chosen['seeds'].min())} seeds)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], prog=COMMAND)
    parser.add_argument("--work", type=Path, default=WORK_DIR, help="folder of the finished runs (resumed from)")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="data folder written at the end")
    args = parser.parse_args(argv)
    with held(args.work / ".lock", f"the rate bracket's folder {args.work}", wait=False):
        write_data(run_missing(args.work), args.out)
    print(f"wrote {args.out}/runs.csv and settings.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
