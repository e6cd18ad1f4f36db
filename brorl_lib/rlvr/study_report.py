"""The countdown study's tables, read back from its run folder: the screen, the plateau and its gates, held-out
pass@1 at each budget, the ProRL vs BroRL verdict (seed is the unit: paired t test and an exact sign-flip test),
the IsoCompute grid, the sample accounting, the per-prompt fate and the update quality."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd

from brorl_lib.core import stats
from brorl_lib.rlvr import plateau, study
from brorl_lib.rlvr import study_phase2 as p2
from brorl_lib.rlvr import update_quality as uq
from brorl_lib.rlvr.run import KEPT_COUNTS
from brorl_lib.rlvr.study import LOW_Q_BAND

FATE_EDGES = (0.0, LOW_Q_BAND[0], LOW_Q_BAND[1], 0.5, 0.95, 1.0)  # starting-q bands of the per-prompt fate


def sign_flip_p(differences) -> dict[str, float]:
    """Exact sign-flip (permutation) test of a mean difference of 0, over all 2^n sign patterns: one-sided
    (greater) and two-sided p. With n seeds the smallest possible p is 2^-n one-sided, 2^(1-n) two-sided."""
    d = np.asarray(differences, dtype=float)
    flips = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    means = (flips * d).mean(1)
    observed = d.mean()
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    return {
        "p_greater": float((means >= observed - tol).mean()),
        "p_two_sided": float((np.abs(means) >= abs(observed) - tol).mean()),
    }


def plateau_table(root: Path, s: study.StudySettings) -> pd.DataFrame:
    """The plateau of the chosen candidate: the smoothed plateau test, exact held-out pass@1, the regime and the
    gates (one row; one task)."""
    c = study.chosen(s, root)
    record = json.loads((study.folder(root, c) / study.PLATEAU_RECORD).read_text())
    keep = [
        "candidate", "step", "plateau_reached", "smoothed_pass1", "rise", "rise_se", "p_rising", "pass1", "pass1_se",
        "mean_q", "low_q_share_exact", "q_below_low_share", "q_solved_share", "kept_fraction",
        "gate_pass1", "gate_low_q", "gate_kept", "gates_passed",
    ]  # fmt: skip
    return pd.DataFrame([{k: record.get(k) for k in keep}]).assign(task="countdown")


def at_budgets(frame: pd.DataFrame, budgets: tuple[int, ...]) -> pd.DataFrame:
    """Held-out (test) and validation pass@1 of every run at each budget: its first evaluation at or past it."""
    evals = frame.dropna(subset=["pass1"])
    rows = []
    for _, g in evals.groupby(["arm", "seed"], sort=False):
        start = g[g["step"] == 0].iloc[0]
        for b in budgets:
            hit = g[g["samples"] >= b]
            if len(hit):
                r = hit.iloc[0]
                rows.append(r[["arm", "label", "role", "N", "prompts", "lr", "lr_factor", "seed", "step", "samples"]]
                            .to_dict() | {"budget": b, "pass1": r["pass1"], "val_pass1": r.get("val_pass1", np.nan),
                                          "start_pass1": start["pass1"]})  # fmt: skip
    return pd.DataFrame(rows)


def compare(table: pd.DataFrame, arm: str, base: str, budget: int) -> dict | None:
    """Paired by seed: arm minus base at ``budget`` (None with fewer than 2 shared seeds)."""
    a = table[(table["arm"] == arm) & (table["budget"] == budget)].set_index("seed")["pass1"]
    b = table[(table["arm"] == base) & (table["budget"] == budget)].set_index("seed")["pass1"]
    seeds = a.index.intersection(b.index)
    if len(seeds) < 2:
        return None
    d = (a[seeds] - b[seeds]).to_numpy()
    return stats.mean_interval(d) | {f"sign_flip_{k}": v for k, v in sign_flip_p(d).items()} | {"seeds": len(seeds)}


def verdict(table: pd.DataFrame, budgets: tuple[int, ...], arms: list[str], base: str = "N16") -> pd.DataFrame:
    """Each arm against ProRL at each budget, and ProRL's own gain since the plateau (its continuation)."""
    rows = []
    for b in budgets:
        for arm in arms:
            r = compare(table, arm, base, b)
            if r is not None:
                rows.append({"budget": b, "comparison": f"{arm} - {base}"} | r)
        prorl = table[(table["arm"] == base) & (table["budget"] == b)]
        if len(prorl) >= 2:
            gain = stats.mean_interval(prorl["pass1"] - prorl["start_pass1"])
            rows.append({"budget": b, "comparison": f"{base} - plateau"} | gain | {"seeds": len(prorl)})
    out = pd.DataFrame(rows)
    if len(out):
        out["direction"] = np.where(out["ci_low"] > 0, "higher", np.where(out["ci_high"] < 0, "lower", "no difference"))
    return out


def isocompute(table: pd.DataFrame, budgets: tuple[int, ...]) -> pd.DataFrame:
    """Per N, budget and learning-rate multiple: seeds, mean and standard error of held-out pass@1; the best
    multiple (validation, last budget, first seed's grid) and whether it is at the grid's edge."""
    iso = table[table["role"] == "isocompute"]
    if iso.empty:
        return pd.DataFrame()
    rows = []
    last = budgets[-1]
    for n, g in iso.groupby("N"):
        grid = g[(g["budget"] == last) & (g["seed"] == g["seed"].min())]
        best = float(grid.loc[grid["val_pass1"].idxmax(), "lr_factor"]) if len(grid) else np.nan
        factors = sorted(g["lr_factor"].unique())
        for (b, f), h in g.groupby(["budget", "lr_factor"]):
            rows.append(
                {
                    "task": "countdown",
                    "n_rollouts": int(n),
                    "budget": int(b),
                    "lr_factor": f,
                    "seeds": len(h),
                    "pass1_mean": h["pass1"].mean(),
                    "pass1_se": h["pass1"].std(ddof=1) / np.sqrt(len(h)) if len(h) > 1 else np.nan,
                    "best_lr": f == best,
                    "lr_at_edge": best in (factors[0], factors[-1]) if len(factors) >= 3 else True,
                }
            )
    return pd.DataFrame(rows)


def bands(table: pd.DataFrame, root: Path, s: study.StudySettings, edges: list[float], base: str = "N16"):
    """Held-out prompts grouped by exact pass@1 at the plateau (``edges``): per verdict or control arm, the band's
    mean change from the plateau at the last budget, and its difference to ProRL paired by seed with a 95% t
    interval (where two or more seeds are shared)."""
    c = study.chosen(s, root)
    last = table[(table["budget"] == table["budget"].max()) & (table["role"] != "isocompute")]
    per = {}  # (arm, seed) -> per-prompt pass@1 at the last budget
    start = None
    for r in last.itertuples():
        folder = study.folder(root, c) / p2.ARMS / r.arm / f"seed{r.seed}"
        per[(r.arm, r.seed)] = np.load(folder / f"pass1_step{r.step}.npy")
        start = np.load(folder / "pass1_step0.npy") if start is None else start
    if start is None:
        return pd.DataFrame()
    band = uq.band_of(start, edges)
    rows = []
    for b, label in enumerate(uq.band_labels(edges)):
        pick = band == b
        if not pick.any():
            continue
        for arm, g in last.groupby("arm", sort=False):
            seeds = sorted(g["seed"])
            change = [per[(arm, k)][pick].mean() - start[pick].mean() for k in seeds]
            row = {"q_band": label, "prompts": int(pick.sum()), "arm": arm, "label": g["label"].iloc[0],
                   "N": int(g["N"].iloc[0]), "seeds": len(seeds), "change": float(np.mean(change))}  # fmt: skip
            shared = [k for k in seeds if (base, k) in per]
            if arm != base and len(shared) >= 2:
                d = [per[(arm, k)][pick].mean() - per[(base, k)][pick].mean() for k in shared]
                ci = stats.mean_interval(d)
                row |= {"delta_vs_prorl": ci["mean"], "ci_low": ci["ci_low"], "ci_high": ci["ci_high"]}
            rows.append(row)
    return pd.DataFrame(rows)


def quality_rows(summary: pd.DataFrame, device: str, model: str, models: dict[str, str] | None = None):
    """``update_quality.summarise`` rows labelled with where they ran and the model they measured (``model``, or
    ``models[checkpoint]`` for the checkpoints it names)."""
    return summary.assign(device=device, model=summary["checkpoint"].map(models or {}).fillna(model))


def gpu_quality(folder: Path) -> pd.DataFrame:
    """A GPU row set of the update-quality grid (``rlvr.study_gpu``) read back and summarised, labelled with its
    card and model; a ValueError naming the folder when it holds no finished row set."""
    record_path = Path(folder) / "record.json"
    files = sorted((Path(folder) / "update_quality").glob("*.csv"))
    if not record_path.is_file() or not files:
        raise ValueError(f"gpu_rows_dir={str(folder)!r} holds no GPU row set (record.json and update_quality/*.csv)")
    record = json.loads(record_path.read_text())
    raw = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    return quality_rows(uq.summarise(raw), record["card"], record["candidate_key"])


def best_update(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (device, model,) checkpoint, task and S, over all measured prompts: the N whose update has the largest
    mean cosine with the exact gradient, and the N with the largest mean one-step change of q
    (``update_quality.summarise`` rows, ``quality_rows``' labels where present)."""
    every = summary[summary["q_band"] == uq.ALL]
    keys = [k for k in ("device", "model") if k in every] + ["checkpoint", "task", "samples_per_update"]
    rows = []
    for key, g in every.groupby(keys, sort=False):
        by_cos, by_dq = g.loc[g["cosine"].idxmax()], g.loc[g["delta_q"].idxmax()]
        rows.append(dict(zip(keys[:-1], key[:-1])) | {"S": int(key[-1]),
                     "best_N_cosine": int(by_cos["n_rollouts"]), "cosine": round(float(by_cos["cosine"]), 3),
                     "best_N_delta_q": int(by_dq["n_rollouts"]),
                     "delta_q": round(float(by_dq["delta_q"]), 4)})  # fmt: skip
    return pd.DataFrame(rows)


def best_n(iso: pd.DataFrame) -> pd.DataFrame:
    """Per budget: the N with the highest mean held-out pass@1 at its best learning-rate multiple
    (``isocompute`` rows), with its seeds and standard error."""
    best = iso[iso["best_lr"]]
    top = best.loc[best.groupby("budget")["pass1_mean"].idxmax()].sort_values("budget")
    return top[["budget", "n_rollouts", "lr_factor", "seeds", "pass1_mean", "pass1_se"]].round(4)


def accounting(frame: pd.DataFrame) -> pd.DataFrame:
    """Per arm (mean over seeds): steps, generated, kept and surplus samples, rounds a step, kept fraction."""
    steps = frame[frame["step"] > 0]
    per = steps.groupby(["arm", "label", "N", "prompts", "seed"], sort=False).agg(
        steps=("step", "max"),
        generated=("samples", "max"),
        kept=("kept_samples", "sum"),
        surplus_groups=("surplus_groups", "sum"),
        rounds=("rounds", "mean"),
    )
    out = per.groupby(["arm", "label", "N", "prompts"], sort=False).mean().reset_index()
    out["surplus_samples"] = out["surplus_groups"] * out["N"]
    out["kept_fraction"] = out["kept"] / out["generated"]
    return out


def prompt_fate(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> pd.DataFrame:
    """Per arm and starting-q band (exact q at the plateau): prompts, mean q before and after phase 2 (mean over
    seeds, with its standard error across seeds), the share of the band's prompts the arm ever kept, and the
    share rescued (starting below 1/16, ending at or above it) or lost (starting at or above 0.5, ending below)."""
    c = study.chosen(s, root)
    base = study.folder(root, c) / study.PHASE1
    step = json.loads((study.folder(root, c) / study.PLATEAU_RECORD).read_text())["step"]
    q0 = np.load(base / f"q_train_step{step}.npy")
    bands = uq.band_of(q0, list(FATE_EDGES))
    labels = uq.band_labels(list(FATE_EDGES))
    rows = []
    for arm, seed in p2.plan(s, p, root):
        folder = p2.arm_folder(root, c, arm, seed)
        if not (folder / p2.Q_END).exists():
            continue
        q1, kept = np.load(folder / p2.Q_END), np.load(folder / KEPT_COUNTS)
        for b, label in enumerate(labels):
            pick = bands == b
            if pick.any():
                rows.append(
                    {
                        "arm": arm.name, "label": arm.label, "seed": seed, "q_band": label, "prompts": int(pick.sum()),
                        "q_before": q0[pick].mean(), "q_after": q1[pick].mean(),
                        "ever_kept": (kept[pick] > 0).mean(),
                        "rescued": ((q0[pick] < LOW_Q_BAND[1]) & (q1[pick] >= LOW_Q_BAND[1])).mean(),
                        "lost": ((q0[pick] >= 0.5) & (q1[pick] < 0.5)).mean(),
                    }
                )  # fmt: skip
    raw = pd.DataFrame(rows)
    if raw.empty:
        return raw
    raw["delta_q"] = raw["q_after"] - raw["q_before"]
    g = raw.groupby(["arm", "label", "q_band"], sort=False)
    out = g.mean(numeric_only=True).drop(columns="seed").reset_index()
    out["delta_q_se"] = g["delta_q"].std(ddof=1).to_numpy() / np.sqrt(g.size().to_numpy())
    out["seeds"] = g.size().to_numpy()
    return out


def phase1_curve(root: Path, s: study.StudySettings) -> pd.DataFrame:
    """Every candidate's phase 1: exact held-out pass@1 at each evaluation with its standard error over prompts,
    the mean of the last plateau_window evaluations (what the plateau test compares), and whether the candidate
    was chosen."""
    chosen = study.chosen(s, root)
    rows = []
    for c in s.candidates:
        base = study.folder(root, c) / study.PHASE1
        for step, path in plateau.pass1_files(base):
            x = np.load(path)
            rows.append({"candidate": c.key, "chosen": c == chosen, "step": step, "pass1": float(x.mean()),
                         "se": float(x.std(ddof=1) / np.sqrt(x.size))})  # fmt: skip
    out = pd.DataFrame(rows)
    out["smoothed"] = out.groupby("candidate")["pass1"].transform(
        lambda x: x.rolling(s.plateau_rule.window, min_periods=s.plateau_rule.window).mean()
    )
    return out
