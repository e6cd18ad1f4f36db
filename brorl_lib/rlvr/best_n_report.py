"""The best-N model (``gradient_stats``) against the measured grids: tables and one figure.

Reads the per-checkpoint summaries of ``study.gradient_stats_stage`` and the update-quality grid's summary
(``update_quality.summarise``); compares the model's cosine with the measured one where the grid's reference
gradient is on prompts disjoint from the updates' (the model's assumption), over all measured prompts; and the
model's best N with the IsoCompute grid's (trained from the plateau, ``study_report.best_n``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from brorl_lib.rlvr import gradient_stats as gs
from brorl_lib.rlvr import update_quality as uq

GRADIENT_COLUMNS = ["checkpoint", "prompts", "g2", "between", "within", "between_over_g2", "mean_pairwise_cosine"]


def moments_of(record: dict) -> gs.Moments:
    return gs.Moments(record["g2"], record["between"], record["within"], record["prompts"])


def _best_text(b: dict) -> str:
    """'4 [2, 4]' (5-95% over the bootstrap's resamplings that resolve |G|^2), or why there is no prediction."""
    if b["best_n"] is None:
        return "none: mean gradient not resolved"
    share = f"; {b['identified_share']:.0%} of resamplings resolve it" if b["identified_share"] < 1 else ""
    return f"{b['best_n']} [{b['low']}, {b['high']}]{share}"


def gradient_table(summaries: dict[str, dict]) -> pd.DataFrame:
    """Per checkpoint: |G|^2, the between-prompt spread B, the within-prompt noise W, B / |G|^2, the mean pairwise
    cosine of per-prompt gradients, the kept fraction of each N and the model's best N per S (5-95% bootstrap)."""
    rows = []
    for name, r in summaries.items():
        row = {"checkpoint": name, "prompts": r["prompts"], "g2": r["g2"], "between": r["between"],
               "within": r["within"], "between_over_g2": r["between"] / r["g2"] if r["g2"] > 0 else np.nan,
               "mean_pairwise_cosine": r["mean_pairwise_cosine"]}  # fmt: skip
        row |= {f"kept_N{n}": v for n, v in r["kept_fraction"].items()}
        row |= {f"best_N_S{s}": _best_text(b) for s, b in r["best_n"].items()}
        rows.append(row)
    return pd.DataFrame(rows, columns=None if rows else GRADIENT_COLUMNS)


def comparison(summaries: dict[str, dict], quality: pd.DataFrame) -> pd.DataFrame:
    """Per checkpoint with statistics, S and N of the grid: the model's cosine and the measured one (mean, standard
    error, repetitions) over all measured prompts, from the grid's disjoint-reference rows (NaN where not measured)."""
    every = quality[(quality["q_band"] == uq.ALL) & (quality.get("reference", uq.REFERENCES[0]) == uq.REFERENCES[0])]
    rows = []
    for name, r in summaries.items():
        m = moments_of(r)
        for s in sorted({int(k) for k in r["best_n"]}):
            for n in sorted(int(k) for k in r["kept_fraction"]):
                hit = every[(every["checkpoint"] == name) & (every["samples_per_update"] == s)
                            & (every["n_rollouts"] == n)]  # fmt: skip
                predicted = gs.predicted_cosine(m, np.array([n]), s, r["prompts"])[0] if m.g2 > 0 else np.nan
                rows.append({"checkpoint": name, "S": s, "N": n, "predicted_cosine": float(predicted),
                             "measured_cosine": float(hit["cosine"].iloc[0]) if len(hit) else np.nan,
                             "measured_se": float(hit["cosine_se"].iloc[0]) if len(hit) else np.nan,
                             "reps": int(hit["reps"].iloc[0]) if len(hit) else 0})  # fmt: skip
    return pd.DataFrame(rows)


def verdict(table: pd.DataFrame, summaries: dict[str, dict]) -> pd.DataFrame:
    """Per checkpoint and S: the model's best N (over its N grid, 5-95% bootstrap; none where |G|^2 is not
    resolved) and the measured best N among
    the grid's N, with every N within one standard error of the difference to it (``measured_tied``), whether
    the model's best among the grid's N is one of them (``holds``; empty where the grid has no rows), and the
    measured and predicted cosine at the measured best N (the model's level, beside its ranking)."""
    rows = []
    for (name, s), g in table.groupby(["checkpoint", "S"], sort=False):
        b = summaries[name]["best_n"][str(s)]
        model_on_grid = int(g.loc[g["predicted_cosine"].idxmax(), "N"]) if g["predicted_cosine"].notna().any() else ""
        row = {"grid": "update quality", "checkpoint": name, "S": s, "model_best_N": _best_text(b),
               "model_best_on_grid": model_on_grid, "measured_best_N": "", "measured_tied": "",
               "holds": ""}  # fmt: skip
        seen = g.dropna(subset=["measured_cosine"])
        if len(seen):
            top = seen.loc[seen["measured_cosine"].idxmax()]
            gap_se = np.sqrt(seen["measured_se"].fillna(np.inf) ** 2 + top["measured_se"] ** 2)
            tied = sorted(int(n) for n, gap, se in zip(seen["N"], top["measured_cosine"] - seen["measured_cosine"],
                                                       gap_se) if gap <= se)  # fmt: skip
            row |= {"measured_best_N": int(top["N"]), "measured_tied": " ".join(map(str, tied)),
                    "holds": "yes" if model_on_grid in tied else ("no" if model_on_grid != "" else "no prediction"),
                    "measured_cosine": round(float(top["measured_cosine"]), 3),
                    "predicted_cosine": round(float(top["predicted_cosine"]), 3)}  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def model_pick(summary: dict | None, grid_n, samples: int) -> int | None:
    """The model's best N among ``grid_n`` at ``samples`` generated samples an update (None without statistics, or
    where |G|^2 is not resolved)."""
    m = moments_of(summary) if summary else None
    if m is None or m.g2 <= 0:
        return None
    ns = np.array(sorted(grid_n))
    return int(ns[np.argmax(gs.predicted_cosine(m, ns, samples, m.prompts))])


def iso_last_budget(iso: pd.DataFrame) -> pd.DataFrame:
    """The IsoCompute rows (``study_report.isocompute``) at each N's best learning rate and the last budget."""
    return iso[iso["best_lr"] & (iso["budget"] == iso["budget"].max())]


def isocompute_check(
    best: pd.DataFrame, summaries: dict[str, dict], checkpoint: str, samples: int, grid_n: list[int]
) -> pd.DataFrame:
    """Per budget of the IsoCompute grid (``study_report.best_n`` rows; its N ``grid_n``, trained from
    ``checkpoint`` at ``samples`` generated samples a step): the model's best N at that checkpoint and S, its pick
    among the grid's N, the measured best N with those tied with it, and whether the pick is among them
    (``verdict``'s columns; ``grid`` names the grid and budget)."""
    r = summaries.get(checkpoint)
    pick = model_pick(r, grid_n, samples)
    on_grid = "" if pick is None else pick
    model_best = "no gradient statistics at this checkpoint"
    if r is not None:
        model_best = _best_text(r["best_n"][str(samples)]) if str(samples) in r["best_n"] else ""
        if pick is None and not model_best:
            model_best = "none: mean gradient not resolved"
    rows = []
    for b in best.itertuples():
        tied = sorted({int(b.n_rollouts), *(int(n) for n in str(b.tied).split() if n != "-")})
        rows.append({"grid": f"IsoCompute, {int(b.budget):,} samples", "checkpoint": checkpoint, "S": samples,
                     "model_best_N": model_best, "model_best_on_grid": on_grid,
                     "measured_best_N": int(b.n_rollouts), "measured_tied": " ".join(map(str, tied)),
                     "holds": "yes" if on_grid in tied else ("no" if on_grid != "" else "no prediction")})  # fmt: skip
    return pd.DataFrame(rows)


def figure_data(comparison_rows: pd.DataFrame, iso: pd.DataFrame) -> pd.DataFrame:
    """What ``study_plots.best_n_model`` draws, in one table: the ``comparison`` rows (grid "update quality") and
    the IsoCompute rows at each N's best learning rate and the last budget (grid "IsoCompute")."""
    out = comparison_rows.assign(grid="update quality")
    if len(iso):
        last = iso_last_budget(iso)
        out = pd.concat([out, last.rename(columns={"n_rollouts": "N"}).assign(grid="IsoCompute")], ignore_index=True)
    return out


def check_table(
    comparison_rows: pd.DataFrame,
    summaries: dict[str, dict],
    iso_best: pd.DataFrame,
    checkpoint: str,
    samples: int,
    grid_n: list[int],
) -> pd.DataFrame:
    """``verdict`` on the update-quality grid and ``isocompute_check`` on the IsoCompute grid, one table."""
    quality = verdict(comparison_rows, summaries) if len(comparison_rows) else pd.DataFrame()
    return pd.concat([quality, isocompute_check(iso_best, summaries, checkpoint, samples, grid_n)], ignore_index=True)
