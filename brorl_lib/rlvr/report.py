"""Tables of notebook 04, computed from a run folder (``experiment.run`` / ``experiment.collect``).

Every phase-2 arm starts from the same plateau checkpoint and is evaluated on the same held-out instances at
the same budgets of generated samples, so each seed gives one paired difference to the ProRL arm (the mean over
instances of arm minus ProRL); the seed is the unit of the test (a Student-t interval and test over seeds,
``core.stats.mean_interval``), never instances x seeds pooled.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from brorl_lib.core import stats
from brorl_lib.paper import reported as paper
from brorl_lib.rlvr import arms as arm_design
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr import mass_balance, plateau
from brorl_lib.rlvr import model as tiny

BASELINE = f"N{arm_design.BASE_N}"  # the ProRL arm's key
BROAD = f"N{arm_design.PAPER_BROAD_N}"  # the BroRL arm's key
ALPHA = 0.05  # two-sided level of every test and 95% interval here (our choice, the usual one)
CONFIRM_SE = 3.0  # the plateau is confirmed when ProRL's continuation gains less than this many standard errors
MIN_EVAL_INSTANCES, MIN_SEEDS, MIN_SEEDS_FURTHER = 1000, 5, 3  # the design's floor for the paper profile
MAX_CAPPED_SHARE = 0.05  # at most this share of phase-2 steps may end with the batch not full (our choice)
PASSK = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # k of the pass@k curve (up to passk_samples)


class Run:
    """One run folder read back: its settings, seeds, chosen configuration and every step's metrics."""

    def __init__(self, settings: ex.ExperimentSettings, seeds: list[int], root: Path, metrics: pd.DataFrame):
        self.settings, self.seeds, self.root, self.metrics = settings, list(seeds), Path(root), metrics
        self.candidate = settings.chosen(root)
        self.main = settings.plateau_seeds[0]
        # the broad arm compared with ProRL at every plateau and in the lr grid (experiment.paper_arms): the largest
        # N, which is BROAD when the design includes the paper's N=512
        self.broad = f"N{max(settings.design.rollouts)}"

    def plateau(self, p: int) -> Path:
        return ex.plateau_folder(self.root, self.candidate, p)

    def arm(self, p: int, arm: str, seed: int) -> Path:
        return self.plateau(p) / ex.ARMS / arm / f"seed{seed}"

    def instances(self) -> pd.DataFrame:
        return pd.read_csv(ex.config_folder(self.root, self.candidate) / ex.INSTANCES, keep_default_na=False)

    def plateau_pass1(self, p: int) -> np.ndarray:
        """Per-instance held-out pass@1 at the plateau checkpoint (its last phase-1 evaluation)."""
        return np.load(plateau.pass1_files(self.plateau(p) / ex.PHASE1)[-1][1])

    def plateau_q(self, p: int) -> np.ndarray:
        """Per-instance held-out pass@1 at the plateau from passk_samples samples (the bands' finer estimate)."""
        data = np.load(self.plateau(p) / ex.PHASE1 / plateau.PLATEAU_EVAL)
        return data["counts"] / int(data["samples"])

    def regime(self, p: int) -> dict:
        step = json.loads((self.plateau(p) / ex.PHASE1 / plateau.PLATEAU).read_text())["step"]
        return json.loads((self.plateau(p) / ex.PHASE1 / f"regime_step{step}.json").read_text())


def arm_order(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per phase-2 arm in run order: arm, label, role, N, prompts, lr, lr_factor."""
    cols = ["arm", "label", "role", "N", "prompts", "lr", "lr_factor"]
    return metrics.loc[metrics.phase == 2, cols].drop_duplicates("arm").reset_index(drop=True)


def main_arms(metrics: pd.DataFrame) -> list[str]:
    """Keys of the arms run under every seed (all but the learning-rate grid), in run order."""
    arms = arm_order(metrics)
    return arms.loc[arms.role != "pilot", "arm"].tolist()


def screen(root: Path) -> pd.DataFrame:
    """The regime screen: one row per candidate at its screen plateau, the chosen one marked."""
    return pd.read_csv(Path(root) / ex.SCREEN)


def phase1_curve(run: Run, p: int) -> pd.DataFrame:
    """A plateau's phase 1: step, samples, pass1, se, smoothed (mean of the last plateau_window evaluations) and
    ``plateau`` = 1 on the row where it ended."""
    m = run.metrics
    p1 = m[(m.phase == 1) & (m.plateau == p)].dropna(subset=["pass1"])
    out = p1[["step", "samples", "pass1", "pass1_se"]].rename(columns={"pass1_se": "se"}).reset_index(drop=True)
    out["smoothed"] = out["pass1"].rolling(run.settings.plateau_rule.window).mean()
    end = json.loads((run.plateau(p) / ex.PHASE1 / plateau.PLATEAU).read_text())
    out["plateau"] = (out["step"] == int(end["step"])).astype(int)
    return out.assign(plateau_seed=p)


def phase1_curves(run: Run) -> pd.DataFrame:
    """``phase1_curve`` of every plateau that has ended."""
    done = [p for p in run.settings.plateau_seeds if (run.plateau(p) / ex.PHASE1 / plateau.PLATEAU).exists()]
    return pd.concat([phase1_curve(run, p) for p in done], ignore_index=True)


def at_budgets(run: Run) -> pd.DataFrame:
    """Every phase-2 run's evaluation at each budget (the first step whose generated samples reach it): plateau,
    arm, seed, budget, step, samples (generated by then), pass1, val_pass1."""
    m, rows = run.metrics, []
    evals = m[(m.phase == 2) & (m.step > 0)].dropna(subset=["pass1"])
    for (p, arm, seed), g in evals.groupby(["plateau", "arm", "seed"], sort=False):
        for b in run.settings.budgets:
            hit = g[g.samples >= b]
            if len(hit):
                r = hit.iloc[0]
                rows.append(
                    {
                        "plateau": p,
                        "arm": arm,
                        "seed": seed,
                        "budget": b,
                        "step": int(r.step),
                        "samples": int(r.samples),
                        "pass1": float(r.pass1),
                        "val_pass1": float(r.get("val_pass1", np.nan)),
                    }
                )
    return pd.DataFrame(rows)


def _per_instance(run: Run, p: int, arm: str, seed: int, step: int, prefix: str = "pass1") -> np.ndarray:
    return np.load(run.arm(p, arm, seed) / f"{prefix}_step{step}.npy")


def paired(per_seed: pd.Series, base: pd.Series) -> dict:
    """Mean over seeds, its standard error, and the paired difference to ``base`` seed by seed with a 95% t
    interval, the two-sided p-value and the smallest difference detected with 80% power."""
    seeds = per_seed.index.intersection(base.index)
    row = {
        "seeds": int(len(per_seed)),
        "pass1_mean": float(per_seed.mean()),
        "pass1_se": float(per_seed.std(ddof=1) / np.sqrt(len(per_seed))) if len(per_seed) > 1 else np.nan,
    }
    if len(seeds) >= 2:
        test = stats.mean_interval(per_seed[seeds] - base[seeds], confidence=1 - ALPHA)
        row |= {k: test[k] for k in ("ci_low", "ci_high", "p_value", "detectable")} | {"delta_vs_prorl": test["mean"]}
    return row


def direction(row: pd.Series) -> str:
    """The verdict a row's numbers support: better / worse than ProRL at level ALPHA, or no detectable difference."""
    if row["arm"] == BASELINE:
        return "baseline"
    if not np.isfinite(row.get("p_value", np.nan)):
        return "not tested (fewer than 2 paired seeds)"
    if row["p_value"] < ALPHA:
        return "better than ProRL" if row["delta_vs_prorl"] > 0 else "worse than ProRL"
    return f"no difference detected (80% power at |delta| >= {row['detectable']:.3f})"


def best_factors(run: Run) -> dict[str, float]:
    """ProRL's and BroRL's learning-rate factor chosen on the validation split (first seed, last budget)."""
    out = {}
    for arm in ex.paper_arms(run.settings):
        f = ex.best_factor(run.root, run.candidate, run.main, arm, run.settings.design, run.seeds[0])
        if f is not None:
            out[arm.key] = f
    return out


def verdict(run: Run) -> pd.DataFrame:
    """The verdict table: per plateau, budget and arm run under every seed (plus, at the main plateau's last
    budget, "best against best": each of ProRL and BroRL at its validation-chosen learning rate), held-out
    pass@1 and the paired difference to ProRL's (at the same learning-rate choice)."""
    table = at_budgets(run)
    arms = arm_order(run.metrics).set_index("arm")
    rows = []
    for (p, b), g in table.groupby(["plateau", "budget"], sort=True):
        scores = g.pivot(index="seed", columns="arm", values="pass1")
        samples = g.groupby("arm")["samples"].mean()
        if BASELINE not in scores:
            continue
        for arm in [a for a in arm_order(run.metrics)["arm"] if a in scores and arms.at[a, "role"] != "pilot"]:
            rows.append(
                _verdict_row(p, b, arm, arms.loc[arm], "rule lr", scores[arm].dropna(), scores[BASELINE], samples)
            )
        if p == run.main and b == run.settings.budgets[-1]:
            rows += _best_rows(run, p, b, scores, samples, arms)
    out = pd.DataFrame(rows)
    out["verdict"] = out.apply(direction, axis=1)
    out["endpoint"] = out["budget"] == run.settings.budgets[-1]
    return out


def _verdict_row(p, b, arm: str, info: pd.Series, comparison: str, mine: pd.Series, base: pd.Series, samples) -> dict:
    return {
        "plateau": int(p),
        "budget": int(b),
        "comparison": comparison,
        "arm": arm,
        "label": info["label"],
        "role": info["role"],
        "n_rollouts": int(info["N"]),
        "prompts_per_step": int(info["prompts"]),
        "lr": float(info["lr"]),
        "samples": float(samples.get(arm, np.nan)),
        **paired(mine, base.dropna()),
    }


def _best_rows(run: Run, p, b, scores: pd.DataFrame, samples, arms: pd.DataFrame) -> list[dict]:
    factors = best_factors(run)
    if set(factors) != {BASELINE, run.broad}:
        return []
    keys = {k: (k if f == 1.0 else f"{k}_lr{f:g}x") for k, f in factors.items()}
    if not all(k in scores for k in keys.values()):
        return []
    base = scores[keys[BASELINE]].dropna()
    return [
        _verdict_row(p, b, keys[k], arms.loc[keys[k]], "best lr", scores[keys[k]].dropna(), base, samples)
        | ({"arm": BASELINE} if k == BASELINE else {})
        for k in (BASELINE, run.broad)
    ]


def plateau_table(run: Run) -> pd.DataFrame:
    """Per plateau: where phase 1 ended and how, its pass@1, and the confirmation: ProRL continued from it (its
    first seed) for phase 2's samples gains ``continuation_gain`` (paired over instances, with its standard
    error); confirmed when the gain is below CONFIRM_SE standard errors."""
    rows = []
    for p in run.settings.plateau_seeds:
        folder = run.plateau(p) / ex.PHASE1
        if not (folder / plateau.PLATEAU).exists():
            continue
        end = json.loads((folder / plateau.PLATEAU).read_text())
        start = run.plateau_pass1(p)
        row = {
            "plateau": p,
            "plateau_step": int(end["step"]),
            "ended_by": "plateau test" if end["plateau"] else "step cap",
            "phase1_samples": int(
                run.metrics.loc[(run.metrics.phase == 1) & (run.metrics.plateau == p), "samples"].max()
            ),
            "plateau_pass1": float(start.mean()),
            "smoothed_rise": end.get("rise", np.nan),
            "p_rising": end.get("p_rising", np.nan),
        }
        cont = run.arm(p, BASELINE, run.seeds[0])
        files = plateau.pass1_files(cont)
        if (cont / "done.json").exists() and files:
            gain = np.load(files[-1][1]) - start
            se = float(gain.std(ddof=1) / np.sqrt(gain.size))
            row |= {
                "continuation_samples": int(json.loads((cont / "done.json").read_text())["samples"]),
                "continuation_gain": float(gain.mean()),
                "continuation_se": se,
                "ci_low": float(gain.mean() - 1.96 * se),
                "ci_high": float(gain.mean() + 1.96 * se),
                "confirmed": bool(gain.mean() < CONFIRM_SE * se),
            }
        rows.append(row)
    return pd.DataFrame(rows)


def band_labels(edges: list[float]) -> list[str]:
    inner = [f"({0:g}, {edges[0]:.4g})"] + [f"[{a:.4g}, {b:.4g})" for a, b in zip(edges, edges[1:])]
    return ["0"] + inner + [f"[{edges[-1]:.4g}, 1)", "1"]


def assign_bands(q: np.ndarray, edges: list[float]) -> np.ndarray:
    """Band label of each instance's plateau pass@1: 0; (0, e1); [e1, e2); ...; [ek, 1); 1."""
    labels = band_labels(edges)
    idx = np.searchsorted(np.asarray(edges), q, side="right") + 1
    idx[q == 0] = 0
    idx[q == 1] = len(labels) - 1
    return np.array(labels, dtype=object)[idx]


def bands(run: Run, edges: list[float]) -> pd.DataFrame:
    """Per arm and plateau pass@1 band at the main plateau and the last budget: instances, the change from the
    plateau (mean over seeds), and Δ to ProRL within the band with a 95% interval across seeds."""
    q = run.plateau_q(run.main)
    labels = assign_bands(q, edges)
    start = run.plateau_pass1(run.main)
    final = at_budgets(run)
    final = final[(final.plateau == run.main) & (final.budget == run.settings.budgets[-1])]
    per = []
    for r in final.itertuples(index=False):
        values = _per_instance(run, run.main, r.arm, r.seed, r.step)
        for band in band_labels(edges):
            inside = labels == band
            if inside.any():
                per.append(
                    {
                        "arm": r.arm,
                        "seed": r.seed,
                        "band": band,
                        "pass1": float(values[inside].mean()),
                        "change": float((values - start)[inside].mean()),
                    }
                )
    per = pd.DataFrame(per)
    info, rows = arm_order(run.metrics).set_index("arm"), []
    for band in band_labels(edges):
        b = per[per.band == band]
        if b.empty:
            continue
        base = b[b.arm == BASELINE].set_index("seed")["pass1"]
        for arm, g in b.groupby("arm", sort=False):
            if info.at[arm, "role"] == "pilot":
                continue
            test = paired(g.set_index("seed")["pass1"], base)
            rows.append(
                {
                    "arm": arm,
                    "label": info.at[arm, "label"],
                    "role": info.at[arm, "role"],
                    "N": int(info.at[arm, "N"]),
                    "band": band,
                    "instances": int((labels == band).sum()),
                    "change": float(g["change"].mean()),
                    "delta_vs_prorl": test.get("delta_vs_prorl", 0.0 if arm == BASELINE else np.nan),
                    "ci_low": test.get("ci_low", np.nan),
                    "ci_high": test.get("ci_high", np.nan),
                }
            )
    return pd.DataFrame(rows)


def paper_pairs() -> pd.DataFrame:
    """Table 1's comparison at about equal samples: the longest ProRL row and the BroRL row closest to it in
    samples; per domain, BroRL minus ProRL as a share of ProRL's remaining error at the plateau (the baseline)."""
    t = paper.load("table1_efficiency")
    base = t[t.method == "Baseline"].iloc[0]
    samples = paper.samples_added(t["samples_k"])
    prorl = t.loc[samples[t.method == "ProRL"].idxmax()]
    broad = t.loc[(samples[t.method == "BroRL"] - samples[prorl.name]).abs().idxmin()]
    rows = []
    for domain in ("math_score", "code_score", "reasoning_gym_score"):
        remaining = 100.0 - float(base[domain])
        delta = float(broad[domain]) - float(prorl[domain])
        rows.append(
            {
                "source": f"paper Table 1 ({domain.removesuffix('_score').replace('_', ' ')})",
                "class": "reported",
                "comparison": f"BroRL {broad.steps} vs ProRL {prorl.steps} steps",
                "plateau_score": float(base[domain]) / 100,
                "delta": delta / 100,
                "remaining_error": remaining / 100,
                "share_of_remaining": delta / remaining,
            }
        )
    return pd.DataFrame(rows)


def beside_paper(run: Run, verdict_table: pd.DataFrame, plateaus: pd.DataFrame) -> pd.DataFrame:
    """The laptop's BroRL − ProRL at the last budget, as a share of ProRL's remaining error at each plateau,
    beside Table 1's (``paper_pairs``)."""
    rows = []
    end = verdict_table[
        verdict_table.endpoint & (verdict_table.comparison == "rule lr") & (verdict_table.arm == run.broad)
    ]
    for r in end.itertuples(index=False):
        start = float(plateaus.set_index("plateau").at[r.plateau, "plateau_pass1"])
        rows.append(
            {
                "source": f"laptop, plateau {r.plateau}",
                "class": "scaled-down",
                "comparison": f"BroRL vs ProRL at {r.budget:,} samples, {r.seeds} seeds",
                "plateau_score": start,
                "delta": r.delta_vs_prorl,
                "remaining_error": 1.0 - start,
                "share_of_remaining": r.delta_vs_prorl / (1.0 - start),
                "share_ci_low": r.ci_low / (1.0 - start),
                "share_ci_high": r.ci_high / (1.0 - start),
            }
        )
    return pd.concat([pd.DataFrame(rows), paper_pairs()], ignore_index=True)


def table1(run: Run) -> pd.DataFrame:
    """Scaled-down Table 1 per arm at the main plateau and the last budget: N, kept prompts per step, steps,
    generated samples, kept fraction, time (mean over seeds) and held-out pass@1 (mean over seeds)."""
    m = run.metrics
    p2 = m[(m.phase == 2) & (m.plateau == run.main) & m.arm.isin(main_arms(m))]
    last = p2.sort_values("step").groupby(["arm", "seed"]).tail(1)
    kept = p2.groupby(["arm", "seed"])["kept_samples"].sum()
    last = last.assign(kept=kept.loc[list(zip(last.arm, last.seed))].to_numpy())
    out = last.groupby("arm", sort=False).agg(
        label=("label", "first"),
        N=("N", "first"),
        prompts_per_step=("prompts", "first"),
        lr=("lr", "first"),
        steps=("step", "mean"),
        samples=("samples", "mean"),
        kept_samples=("kept", "mean"),
        time_s=("elapsed_s", "mean"),
        pass1=("pass1", "mean"),
    )
    out["kept_fraction"] = out["kept_samples"] / out["samples"]
    out[["steps", "samples", "kept_samples"]] = out[["steps", "samples", "kept_samples"]].round().astype(int)
    return out.loc[[a for a in main_arms(m) if a in out.index]].reset_index()


def throughput(run: Run) -> pd.DataFrame:
    """Scaled-down Table 2 per arm at the main plateau, measured in the run: the dynamic-sampling pass rate, the
    kept fraction, generation rounds per step, steps whose refill hit the cap, generation throughput and the
    mean gradient norm before clipping."""
    m = run.metrics
    p2 = m[(m.phase == 2) & (m.plateau == run.main) & (m.step > 0)].sort_values(["arm", "seed", "step"])
    p2 = p2.assign(
        step_samples=p2.groupby(["arm", "seed"])["samples"].diff().fillna(p2["samples"]),
        step_tokens=p2.groupby(["arm", "seed"])["tokens"].diff().fillna(p2["tokens"]),
    )
    out = p2.groupby("arm", sort=False).agg(
        label=("label", "first"),
        N=("N", "first"),
        pass_rate=("pass_rate", "mean"),
        samples=("step_samples", "sum"),
        kept=("kept_samples", "sum"),
        generation_rounds=("rounds", "mean"),
        capped_steps=("capped", "mean"),
        tokens=("step_tokens", "sum"),
        generation_s=("generation_s", "sum"),
        updates_per_step=("updates", "mean"),
        grad_norm=("grad_norm", "mean"),
    )
    out["pass_rate_pct"] = 100 * out.pop("pass_rate")
    out["kept_fraction"] = out.pop("kept") / out["samples"]
    out["samples_per_s"] = out["samples"] / out["generation_s"]
    out["tokens_per_s"] = out["tokens"] / out["generation_s"]
    out[["samples", "tokens"]] = out[["samples", "tokens"]].astype(int)
    return out.loc[[a for a in arm_order(m)["arm"] if a in out.index]].reset_index()


def lr_grid(run: Run) -> pd.DataFrame:
    """ProRL and BroRL at each learning-rate factor on the first seed at the last budget: validation and
    held-out pass@1, and which factor the validation split chose."""
    table = at_budgets(run)
    table = table[
        (table.plateau == run.main) & (table.budget == run.settings.budgets[-1]) & (table.seed == run.seeds[0])
    ]
    factors, rows = best_factors(run), []
    for family in ex.paper_arms(run.settings):
        for arm in [family] + [a for a in arm_design.pilot_arms(run.settings.design) if a.n == family.n]:
            hit = table[table.arm == arm.key]
            rows.append(
                {
                    "family": arm_design.label(family.n),
                    "N": family.n,
                    "lr_factor": arm.lr_factor,
                    "lr": arm.lr,
                    "seed": run.seeds[0],
                    "val_pass1": float(hit["val_pass1"].iloc[0]) if len(hit) else np.nan,
                    "pass1": float(hit["pass1"].iloc[0]) if len(hit) else np.nan,
                    "chosen": factors.get(family.key) == arm.lr_factor,
                }
            )

    return pd.DataFrame(rows).sort_values(["N", "lr_factor"], ignore_index=True)


def curves(run: Run) -> pd.DataFrame:
    """Phase-2 evaluations per plateau, arm and seed (step 0 is the plateau checkpoint)."""
    m = run.metrics
    p2 = m[m.phase == 2].dropna(subset=["pass1"])
    cols = ["plateau", "arm", "label", "role", "N", "seed", "step", "samples", "elapsed_s", "pass1"]
    return p2[cols].reset_index(drop=True)


def mean_curves(evals: pd.DataFrame, budgets: tuple[int, ...]) -> pd.DataFrame:
    """``curves`` at each budget (step 0 as budget 0), averaged over seeds with the standard error across seeds."""
    evals = evals.sort_values("step")
    rows = []
    for _, g in evals.groupby(["plateau", "arm", "seed"], sort=False):
        picks = [g.iloc[[0]].assign(budget=0)]
        for b in budgets:
            hit = g[g.samples >= b]
            if len(hit):
                picks.append(hit.iloc[[0]].assign(budget=b))
        rows.append(pd.concat(picks))
    at = pd.concat(rows)
    g = at.groupby(["plateau", "arm", "label", "role", "N", "budget"], as_index=False, sort=False)
    out = g.agg(
        samples=("samples", "mean"),
        elapsed_s=("elapsed_s", "mean"),
        pass1=("pass1", "mean"),
        sd=("pass1", "std"),
        seeds=("seed", "nunique"),
    )
    out["se"] = out.pop("sd") / np.sqrt(out["seeds"])
    return out


def strata(run: Run) -> np.ndarray:
    """Figure 4's strata of the held-out instances: the task when several are mixed, else answer-length thirds."""
    test = run.instances()
    test = test[test.split == "test"]
    if test["task"].nunique() > 1:
        return test["task"].to_numpy(dtype=object)
    length = test["answer"].str.len()
    cuts = np.unique(np.quantile(length, [1 / 3, 2 / 3]))
    idx = np.searchsorted(cuts, length, side="right")
    edges = [length.min(), *cuts, length.max()]
    names = [f"answers of {int(lo)}-{int(hi)} characters" for lo, hi in zip(edges, edges[1:])]
    return np.array(names, dtype=object)[np.minimum(idx, len(names) - 1)]


def stratum_curves(run: Run) -> pd.DataFrame:
    """Scaled-down Figure 4: held-out pass@1 per stratum, arm and budget at the main plateau, mean over seeds."""
    groups = strata(run)
    table = at_budgets(run)
    table = table[table.plateau == run.main]
    info, frames = arm_order(run.metrics).set_index("arm"), []
    for r in table.itertuples(index=False):
        values = pd.Series(_per_instance(run, run.main, r.arm, r.seed, r.step)).groupby(groups).mean()
        frames.append(
            pd.DataFrame(
                {
                    "arm": r.arm,
                    "label": info.at[r.arm, "label"],
                    "N": info.at[r.arm, "N"],
                    "seed": r.seed,
                    "budget": r.budget,
                    "samples": r.samples,
                    "stratum": values.index,
                    "pass1": values.to_numpy(),
                }
            )
        )
    per_seed = pd.concat(frames, ignore_index=True)
    out = per_seed.groupby(["stratum", "arm", "label", "N", "budget"], as_index=False, sort=False).agg(
        samples=("samples", "mean"), pass1=("pass1", "mean"), sd=("pass1", "std"), seeds=("seed", "nunique")
    )
    out["se"] = out.pop("sd") / np.sqrt(out["seeds"])  # across seeds, the independent unit
    return out


def final_evals(run: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """At the main plateau: greedy correctness per arm, seed and instance; pass@k per arm, seed and k (mean over
    the hard instances). The plateau checkpoint appears as arm ``phase1``."""
    greedy, passk = [], []
    samples = run.settings.passk_samples
    keys = [(ex.PHASE1, run.main, run.plateau(run.main) / ex.PHASE1)]
    m = run.metrics
    keys += [
        (arm, seed, run.arm(run.main, arm, seed))
        for arm, seed in m.loc[(m.phase == 2) & (m.plateau == run.main), ["arm", "seed"]]
        .drop_duplicates()
        .itertuples(index=False)
        if (run.arm(run.main, arm, seed) / ex.FINAL_EVAL).exists()
    ]
    for arm, seed, folder in keys:
        data = np.load(folder / ex.FINAL_EVAL)
        greedy.append(
            pd.DataFrame({"arm": arm, "seed": seed, "item": np.arange(data["greedy"].size), "greedy": data["greedy"]})
        )
        for k in (k for k in PASSK if k <= samples):
            values = [stats.unbiased_pass_at_k(samples, int(c), k) for c in data["counts"]]
            passk.append(
                {
                    "arm": arm,
                    "seed": seed,
                    "k": k,
                    "pass_at_k": float(np.mean(values)) if values else np.nan,
                    "hard_instances": len(values),
                }
            )
    return pd.concat(greedy, ignore_index=True), pd.DataFrame(passk)


def greedy_table(run: Run, greedy: pd.DataFrame) -> pd.DataFrame:
    """Greedy accuracy per main arm with its paired difference to ProRL across seeds."""
    per_seed = greedy[greedy.arm != ex.PHASE1].groupby(["arm", "seed"])["greedy"].mean()
    base = per_seed.loc[BASELINE]
    info, rows = arm_order(run.metrics).set_index("arm"), []
    for arm in main_arms(run.metrics):
        if arm in per_seed.index.get_level_values(0):
            row = {"arm": arm, "label": info.at[arm, "label"], **paired(per_seed.loc[arm], base)}
            rows.append({k.replace("pass1", "greedy"): v for k, v in row.items()})
    return pd.DataFrame(rows)


def knowledge_shrinkage(run: Run) -> pd.DataFrame:
    """Per arm at the main plateau and the last budget, mean over seeds: the share of held-out instances whose
    pass@1 fell below (rose above) the plateau checkpoint's."""
    start = run.plateau_pass1(run.main)
    table = at_budgets(run)
    table = table[(table.plateau == run.main) & (table.budget == run.settings.budgets[-1])]
    rows = []
    for r in table.itertuples(index=False):
        values = _per_instance(run, run.main, r.arm, r.seed, r.step)
        rows.append(
            {"arm": r.arm, "seed": r.seed, "dropped": (values < start).mean(), "improved": (values > start).mean()}
        )
    out = pd.DataFrame(rows).groupby("arm", sort=False)[["dropped", "improved"]].mean() * 100
    out = out.rename(columns={"dropped": "dropped_pct", "improved": "improved_pct"})
    labels = arm_order(run.metrics).set_index("arm")
    return out.loc[[a for a in labels.index if a in out.index]].join(labels[["label", "role", "N"]]).reset_index()


def theory_tables(run: Run) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Theorem 1 on the main plateau checkpoint's responses: supports per prompt, every batch, the summary per N."""
    folder = run.plateau(run.main)
    supports = pd.read_csv(folder / ex.THEORY_SUPPORTS)
    batches = pd.read_csv(folder / ex.THEORY_BATCHES)
    summary = mass_balance.summary(batches)
    summary["share_groups_with_correct"] = mass_balance.groups_with_correct(supports["q_pos"].to_numpy(), summary["N"])
    return supports, batches, summary


def hardware(device: str = "cpu") -> str:
    """The machine the throughput was measured on, in words."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (torch {torch.__version__})"
    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} logical cores, {torch.get_num_threads()} torch threads (torch {torch.__version__})"


def protocol(run: Run) -> pd.DataFrame:
    """One row: how held-out pass@1 was measured and on what."""
    p = run.settings.protocol
    instances = run.instances()
    return pd.DataFrame(
        [
            {
                "configuration": run.candidate.spec,
                "test_instances": int((instances.split == "test").sum()),
                "validation_instances": int((instances.split == "val").sum()),
                "eval_samples": p.samples,
                "temperature": p.temperature,
                "top_p": p.top_p,
                "reward": "binary: 1 if the reasoning_gym verifier gives full credit, else 0",
                "model_params": tiny.parameter_count(run.candidate.model),
            }
        ]
    )


def design_checks(run: Run, screen_table: pd.DataFrame, plateaus: pd.DataFrame, verdict_table: pd.DataFrame):
    """Whether the run can answer its question, each check computed from the run."""
    lo, hi = ex.PASS1_RANGE
    regime = run.regime(run.main)
    chosen = screen_table[screen_table.chosen].iloc[0]
    m = run.metrics
    p2 = m[(m.phase == 2) & (m.step > 0)]
    capped = float(p2["capped"].mean()) if len(p2) else np.nan
    main_seeds = verdict_table[(verdict_table.plateau == run.main) & verdict_table.endpoint]["seeds"]
    further = verdict_table[(verdict_table.plateau != run.main) & verdict_table.endpoint]["seeds"]
    main_row = plateaus.set_index("plateau").loc[run.main]
    at = at_budgets(run)
    spread = at.groupby(["plateau", "budget"])["samples"].agg(lambda s: s.max() - s.min())
    spread_share = float((spread / spread.index.get_level_values("budget")).max()) if len(spread) else np.nan
    widest = max(a.samples_per_step for a in ex.all_arms(run.settings))
    instances = int((run.instances().split == "test").sum())
    rows = [
        ("the screen's choice qualifies (pass@1 and low-q share)", chosen["candidate"], bool(chosen["qualifies"])),
        (f"headroom: plateau pass@1 in [{lo}, {hi}]", f"{regime['pass1']:.3f}", lo <= regime["pass1"] <= hi),
        (
            f"low-q share of training prompts >= {ex.MIN_LOW_Q_SHARE:g}",
            f"{regime['low_q_share']:.3f}",
            regime["low_q_share"] >= ex.MIN_LOW_Q_SHARE,
        ),
        (
            "mechanism: Theorem 1's change at N=16 sometimes negative",
            f"{regime.get('share_negative_n16', np.nan):.3f}",
            regime.get("share_negative_n16", 0) > 0,
        ),
    ]
    for r in plateaus.itertuples(index=False):
        rows.append(
            (
                f"plateau {r.plateau}: phase 1 ended by the plateau test",
                f"step {r.plateau_step}",
                r.ended_by == "plateau test",
            )
        )
    if "confirmed" in plateaus and pd.notna(main_row.get("confirmed")):
        gain = main_row["continuation_gain"]
        rows.append(
            (
                f"plateau confirmed: ProRL's continuation gains < {CONFIRM_SE:g} SE",
                f"{gain:+.3f} ({gain / main_row['continuation_se']:.1f} SE)",
                bool(main_row["confirmed"]),
            )
        )
    rows += [
        (
            f"refills: steps ending with the batch not full <= {MAX_CAPPED_SHARE:.0%}",
            f"{capped:.1%}",
            capped <= MAX_CAPPED_SHARE,
        ),
        (
            "largest budget >= a third of phase 1's samples",
            f"{run.settings.budgets[-1]:,} vs {int(main_row['phase1_samples']):,}",
            3 * run.settings.budgets[-1] >= main_row["phase1_samples"],
        ),
        (
            "equal generated samples at each budget (within one step of the widest arm)",
            f"spread up to {spread_share:.1%} of the budget",
            bool((spread <= widest * run.settings.max_rounds).all()),
        ),
        (f"held-out instances >= {MIN_EVAL_INSTANCES}", str(instances), instances >= MIN_EVAL_INSTANCES),
        (
            f"seeds per arm >= {MIN_SEEDS} at the main plateau",
            str(int(main_seeds.min())) if len(main_seeds) else "0",
            len(main_seeds) > 0 and int(main_seeds.min()) >= MIN_SEEDS,
        ),
    ]
    if len(run.settings.plateau_seeds) > 1:
        rows.append(
            (
                f"seeds per arm >= {MIN_SEEDS_FURTHER} at every further plateau",
                str(int(further.min())) if len(further) else "0",
                len(further) > 0 and int(further.min()) >= MIN_SEEDS_FURTHER,
            )
        )
    return pd.DataFrame(rows, columns=["check", "value", "met"])
