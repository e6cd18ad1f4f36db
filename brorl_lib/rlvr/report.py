"""Tables of notebook 04, computed from a run folder (``experiment.run`` / ``experiment.collect``).

Statistics follow the issue of fairness the paper leaves open: every phase-2 arm starts from the same
plateau checkpoint and is evaluated on the same held-out instances, so each seed gives one paired
difference to the ProRL arm (the mean over instances of arm minus ProRL); the seed is the unit of the test
(a Student-t interval and test over seeds, ``core.stats.mean_interval``), never instances x seeds pooled.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from brorl_lib.core import stats
from brorl_lib.rlvr import arms as arm_design
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr import mass_balance
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr.tokenizer import build_tokenizer

BASELINE = f"N{arm_design.BASE_N}"  # the ProRL arm's key
ALPHA = 0.05  # two-sided level of every test and 95% interval here (our choice, the usual one)
GAIN_SE = 3.0  # phase 1 must beat the warm start by this many standard errors (the bar)
WARM_START_RANGE = (0.2, 0.5)  # the warm start's held-out pass@1 should land here (our design target)
MIN_EVAL_INSTANCES, MIN_SEEDS = 1000, 5  # the design's floor for the paper profile
PASSK = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # k of the pass@k curve (up to passk_samples)
LENGTH_BINS = ((3, 4), (5, 6), (7, 8))  # word-length strata of the per-length curves (spell_backward)


def arm_order(metrics: pd.DataFrame) -> pd.DataFrame:
    """One row per phase-2 arm in run order: arm, label, role, N, prompts, lr, lr_factor."""
    cols = ["arm", "label", "role", "N", "prompts", "lr", "lr_factor"]
    return metrics.loc[metrics.phase == 2, cols].drop_duplicates("arm").reset_index(drop=True)


def main_arms(metrics: pd.DataFrame) -> list[str]:
    """Keys of the arms run under every seed (all but the learning-rate pilot), in run order."""
    arms = arm_order(metrics)
    return arms.loc[arms.role != "pilot", "arm"].tolist()


def phase1_curve(metrics: pd.DataFrame, runs_dir: Path) -> pd.DataFrame:
    """Phase 1's held-out evaluations: step, samples, pass1, se; ``plateau`` is 1 on the row where it ended."""
    p1 = metrics[metrics.phase == 1].dropna(subset=["pass1"])
    out = p1[["step", "samples", "pass1", "pass1_se"]].rename(columns={"pass1_se": "se"}).reset_index(drop=True)
    end = pd.read_json(Path(runs_dir) / ex.PHASE1 / ex.PLATEAU, typ="series")
    out["plateau"] = (out["step"] == int(end["step"])).astype(int)
    return out


def phase1_summary(runs_dir: Path) -> dict:
    """Warm start vs plateau on the same instances: pass@1 of each, the paired gain and its standard error,
    whether it exceeds GAIN_SE standard errors, and how phase 1 ended (the plateau test or the step cap)."""
    folder = Path(runs_dir) / ex.PHASE1
    files = ex.pass1_files(folder)
    start, end = np.load(files[0][1]), np.load(files[-1][1])
    gain = end - start
    se = float(gain.std(ddof=1) / np.sqrt(gain.size))
    record = pd.read_json(folder / ex.PLATEAU, typ="series")
    return {
        "warm_start_pass1": float(start.mean()),
        "plateau_pass1": float(end.mean()),
        "gain": float(gain.mean()),
        "gain_se": se,
        "gain_in_se": float(gain.mean() / se) if se > 0 else float("inf"),
        "gained": bool(gain.mean() > GAIN_SE * se),
        "plateau_step": int(record["step"]),
        "plateau_reached": bool(record["plateau"]),
        "plateau_slope_p": float(record.get("p_positive", np.nan)),
    }


def final_pass1(runs_dir: Path, metrics: pd.DataFrame) -> pd.DataFrame:
    """Each arm's per-instance held-out pass@1 at its last evaluation: arm, seed, item, pass1."""
    frames = []
    for arm, seed in metrics.loc[metrics.phase == 2, ["arm", "seed"]].drop_duplicates().itertuples(index=False):
        values = ex.last_pass1(Path(runs_dir) / ex.ARMS / arm / f"seed{seed}")
        frames.append(pd.DataFrame({"arm": arm, "seed": seed, "item": np.arange(values.size), "pass1": values}))
    return pd.concat(frames, ignore_index=True)


def seed_means(per_instance: pd.DataFrame, value: str = "pass1") -> pd.DataFrame:
    """Mean over held-out instances per arm and seed."""
    return per_instance.groupby(["arm", "seed"], as_index=False)[value].mean()


def compare_to_baseline(per_seed: pd.DataFrame, arms: pd.DataFrame, value: str = "pass1") -> pd.DataFrame:
    """Per arm: the mean of ``value`` over seeds and its paired difference to the ProRL arm, seed by seed, with a
    95% t interval, the two-sided p-value and the smallest difference the test could detect with 80% power."""
    base = per_seed[per_seed.arm == BASELINE].set_index("seed")[value]
    rows = []
    for arm in arms.itertuples(index=False):
        mine = per_seed[per_seed.arm == arm.arm].set_index("seed")[value]
        seeds = mine.index.intersection(base.index)
        row = {
            "arm": arm.arm,
            "label": arm.label,
            "role": arm.role,
            "n_rollouts": int(arm.N),
            "prompts_per_step": int(arm.prompts),
            "lr": float(arm.lr),
            "seeds": int(len(mine)),
            f"{value}_mean": float(mine.mean()),
            f"{value}_se": float(mine.std(ddof=1) / np.sqrt(len(mine))) if len(mine) > 1 else np.nan,
        }
        if arm.arm == BASELINE or len(seeds) < 2:
            row.update(delta_vs_prorl=0.0 if arm.arm == BASELINE else np.nan)
        else:
            test = stats.mean_interval(mine[seeds] - base[seeds], confidence=1 - ALPHA)
            row.update(
                delta_vs_prorl=test["mean"],
                ci_low=test["ci_low"],
                ci_high=test["ci_high"],
                p_value=test["p_value"],
                detectable=test["detectable"],
            )
        rows.append(row)
    return pd.DataFrame(rows)


def direction(row: pd.Series) -> str:
    """The verdict a row's numbers support: better / worse than ProRL at level ALPHA, or no detectable difference."""
    if row["arm"] == BASELINE:
        return "baseline"
    if not np.isfinite(row.get("p_value", np.nan)):
        return "not tested (fewer than 2 seeds)"
    if row["p_value"] < ALPHA:
        return "better than ProRL" if row["delta_vs_prorl"] > 0 else "worse than ProRL"
    return f"no difference detected (80% power at |delta| >= {row['detectable']:.3f})"


def verdict(runs_dir: Path, metrics: pd.DataFrame) -> pd.DataFrame:
    """The verdict table: one row per arm run under every seed, held-out pass@1 at equal samples against ProRL."""
    arms = arm_order(metrics)
    arms = arms[arms.arm.isin(main_arms(metrics))]
    table = compare_to_baseline(seed_means(final_pass1(runs_dir, metrics)), arms)
    table["verdict"] = table.apply(direction, axis=1)
    return table


def final_evals(runs_dir: Path, metrics: pd.DataFrame, passk_samples: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Greedy correctness per arm, seed and instance; pass@k per arm, seed and k (mean over the hard instances,
    each sampled ``passk_samples`` times).
    The phase-1 checkpoint appears as arm ``phase1`` (seed 0)."""
    greedy, passk = [], []
    keys = [(ex.PHASE1, ex.SHARED_SEED, Path(runs_dir) / ex.PHASE1)]
    keys += [
        (arm, seed, Path(runs_dir) / ex.ARMS / arm / f"seed{seed}")
        for arm, seed in metrics.loc[metrics.phase == 2, ["arm", "seed"]].drop_duplicates().itertuples(index=False)
    ]
    for arm, seed, folder in keys:
        data = np.load(folder / ex.FINAL_EVAL)
        greedy.append(
            pd.DataFrame({"arm": arm, "seed": seed, "item": np.arange(data["greedy"].size), "greedy": data["greedy"]})
        )
        for k in (k for k in PASSK if k <= passk_samples):
            values = [stats.unbiased_pass_at_k(passk_samples, int(c), k) for c in data["counts"]]
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


def curves(metrics: pd.DataFrame) -> pd.DataFrame:
    """Phase-2 held-out evaluations per arm and seed (step 0 is the plateau checkpoint): arm, label, N, seed, step,
    samples, elapsed_s, pass1."""
    p2 = metrics[metrics.phase == 2].dropna(subset=["pass1"])
    return p2[["arm", "label", "role", "N", "seed", "step", "samples", "elapsed_s", "pass1"]].reset_index(drop=True)


def mean_curves(evals: pd.DataFrame) -> pd.DataFrame:
    """``curves`` averaged over seeds at each evaluation, with the standard error across seeds."""
    g = evals.groupby(["arm", "label", "role", "N", "step"], as_index=False, sort=False)
    out = g.agg(
        samples=("samples", "mean"),
        elapsed_s=("elapsed_s", "mean"),
        pass1=("pass1", "mean"),
        sd=("pass1", "std"),
        seeds=("seed", "nunique"),
    )
    out["se"] = out.pop("sd") / np.sqrt(out["seeds"])
    return out


def length_curves(runs_dir: Path, metrics: pd.DataFrame) -> pd.DataFrame:
    """Scaled-down Figure 4: held-out pass@1 per word-length stratum (the task's difficulty inside the set), arm
    and evaluation, mean over seeds."""
    answers = pd.read_csv(Path(runs_dir) / ex.TEST_INSTANCES, keep_default_na=False)["answer"].str.len().to_numpy()
    strata = np.full(answers.size, "", dtype=object)
    for lo, hi in LENGTH_BINS:
        strata[(answers >= lo) & (answers <= hi)] = f"{lo}-{hi} letters"
    frames = []
    for arm, label, n, seed in (
        metrics.loc[metrics.phase == 2, ["arm", "label", "N", "seed"]].drop_duplicates().itertuples(index=False)
    ):
        m = metrics[(metrics.arm == arm) & (metrics.seed == seed)].set_index("step")
        for step, path in ex.pass1_files(Path(runs_dir) / ex.ARMS / arm / f"seed{seed}"):
            values = pd.Series(np.load(path)).groupby(strata).mean()
            frames.append(
                pd.DataFrame(
                    {
                        "arm": arm,
                        "label": label,
                        "N": n,
                        "seed": seed,
                        "step": step,
                        "samples": m.at[step, "samples"],
                        "stratum": values.index,
                        "pass1": values.to_numpy(),
                    }
                )
            )
    per_seed = pd.concat(frames, ignore_index=True)
    per_seed = per_seed[per_seed.stratum != ""]
    return per_seed.groupby(["stratum", "arm", "label", "N", "step"], as_index=False, sort=False).agg(
        samples=("samples", "mean"), pass1=("pass1", "mean")
    )


def lr_pilot(runs_dir: Path, metrics: pd.DataFrame) -> pd.DataFrame:
    """Final held-out pass@1 of ProRL and the largest-N arm at each learning-rate factor, on the pilot's seed
    (factor 1 is the main arm under that seed)."""
    arms = arm_order(metrics)
    pilots = arms[arms.role == "pilot"]
    if pilots.empty:
        return pd.DataFrame(columns=["family", "label", "N", "lr_factor", "lr", "seed", "pass1"])
    seed = int(metrics.loc[metrics.role == "pilot", "seed"].iloc[0])
    per_seed = seed_means(final_pass1(runs_dir, metrics))
    rows = []
    for n in sorted(pilots["N"].unique()):
        main = arms[(arms.N == n) & (arms.lr_factor == 1.0) & arms.role.isin(["paper", "dose"])]
        for arm in pd.concat([pilots[pilots.N == n], main]).itertuples(index=False):
            score = per_seed[(per_seed.arm == arm.arm) & (per_seed.seed == seed)]["pass1"]
            rows.append(
                {
                    "family": arm_design.label(int(n)),
                    "N": int(n),
                    "lr_factor": float(arm.lr_factor),
                    "lr": float(arm.lr),
                    "seed": seed,
                    "pass1": float(score.iloc[0]) if len(score) else np.nan,
                }
            )
    return pd.DataFrame(rows).sort_values(["N", "lr_factor"], ignore_index=True)


def table1(metrics: pd.DataFrame) -> pd.DataFrame:
    """Scaled-down Table 1 per arm: N, prompts and steps per arm, samples (before filtering), training time (mean
    over seeds) and final held-out pass@1 (mean over seeds)."""
    p2 = metrics[(metrics.phase == 2) & metrics.arm.isin(main_arms(metrics))]
    last = p2.sort_values("step").groupby(["arm", "seed"]).tail(1)
    final = p2.dropna(subset=["pass1"]).sort_values("step").groupby(["arm", "seed"]).tail(1)
    out = last.groupby("arm", sort=False).agg(
        label=("label", "first"),
        N=("N", "first"),
        prompts_per_step=("prompts", "first"),
        lr=("lr", "first"),
        steps=("step", "mean"),
        samples=("samples", "mean"),
        time_s=("elapsed_s", "mean"),
    )
    out["pass1"] = final.groupby("arm")["pass1"].mean()
    out[["steps", "samples"]] = out[["steps", "samples"]].round().astype(int)
    return out.loc[main_arms(metrics)].reset_index()


def throughput(metrics: pd.DataFrame) -> pd.DataFrame:
    """Scaled-down Table 2 per arm, measured in the run: the dynamic-sampling pass rate (share of generated samples
    kept), generation throughput in samples and response tokens per second of generation, PPO updates per step."""
    p2 = metrics[(metrics.phase == 2) & (metrics.step > 0)].sort_values(["arm", "seed", "step"])
    p2 = p2.assign(
        step_samples=p2.groupby(["arm", "seed"])["samples"].diff().fillna(p2["samples"]),
        step_tokens=p2.groupby(["arm", "seed"])["tokens"].diff().fillna(p2["tokens"]),
    )
    out = p2.groupby("arm", sort=False).agg(
        label=("label", "first"),
        N=("N", "first"),
        pass_rate=("pass_rate", "mean"),
        samples=("step_samples", "sum"),
        tokens=("step_tokens", "sum"),
        generation_s=("generation_s", "sum"),
        updates_per_step=("updates", "mean"),
    )
    out["pass_rate_pct"] = 100 * out.pop("pass_rate")
    out["samples_per_s"] = out["samples"] / out["generation_s"]
    out["tokens_per_s"] = out["tokens"] / out["generation_s"]
    out[["samples", "tokens"]] = out[["samples", "tokens"]].astype(int)
    return out.loc[[a for a in arm_order(metrics)["arm"] if a in out.index]].reset_index()


def hardware(device: str = "cpu") -> str:
    """The machine the throughput was measured on, in words."""
    if device.startswith("cuda") and torch.cuda.is_available():
        return f"{torch.cuda.get_device_name(0)} (torch {torch.__version__})"
    cpu = platform.processor() or platform.machine()
    return f"{cpu}, {os.cpu_count()} logical cores, {torch.get_num_threads()} torch threads (torch {torch.__version__})"


def protocol(runs_dir: Path) -> pd.DataFrame:
    """One row: how held-out pass@1 was measured and on what (instances, samples, temperature, top-p, reward,
    tasks kept by the screen, model parameters)."""
    settings = pd.read_json(Path(runs_dir) / "settings.json", typ="series")
    screen = pd.read_csv(Path(runs_dir) / ex.TASK_SCREEN)
    model = tiny.build_model(tiny.TinyModelShape(**settings["model"]), build_tokenizer(), 0)  # the shape, not weights
    test = pd.read_csv(Path(runs_dir) / ex.TEST_INSTANCES, keep_default_na=False)
    p = settings["protocol"]
    return pd.DataFrame(
        [
            {
                "eval_instances": len(test),
                "eval_samples": int(p["samples"]),
                "temperature": float(p["temperature"]),
                "top_p": float(p["top_p"]),
                "reward": "binary: 1 if the reasoning_gym verifier gives full credit, else 0",
                "tasks": " ".join(screen.loc[screen.kept, "task"]),
                "model_params": int(sum(t.numel() for t in model.parameters())),
            }
        ]
    )


def design_checks(runs_dir: Path, metrics: pd.DataFrame, summary: dict) -> pd.DataFrame:
    """Whether the run meets the design it needs to answer its question, each check computed from the run."""
    lo, hi = WARM_START_RANGE
    screen = pd.read_csv(Path(runs_dir) / ex.TASK_SCREEN)
    seeds = metrics.loc[(metrics.phase == 2) & metrics.arm.isin(main_arms(metrics))].groupby("arm")["seed"].nunique()
    instances = len(pd.read_csv(Path(runs_dir) / ex.TEST_INSTANCES, keep_default_na=False))
    samples = metrics[metrics.phase == 2].groupby(["arm", "seed"])["samples"].max()
    rows = [
        (
            "warm start pass@1 in [0.2, 0.5]",
            f"{summary['warm_start_pass1']:.3f}",
            lo <= summary["warm_start_pass1"] <= hi,
        ),
        (
            f"phase 1 gained > {GAIN_SE:g} SE over the warm start",
            f"{summary['gain']:+.3f} ({summary['gain_in_se']:.1f} SE)",
            summary["gained"],
        ),
        (
            "phase 1 ended by the plateau test (not the step cap)",
            f"step {summary['plateau_step']}",
            summary["plateau_reached"],
        ),
        (
            "tasks excluded by the screen (< 5% ever solved)",
            ", ".join(screen.loc[~screen.kept, "task"]) or "none",
            True,
        ),
        (f"held-out instances >= {MIN_EVAL_INSTANCES}", str(instances), instances >= MIN_EVAL_INSTANCES),
        (f"seeds per arm >= {MIN_SEEDS}", str(int(seeds.min())), int(seeds.min()) >= MIN_SEEDS),
        (
            "equal generated samples in every arm and seed",
            f"{int(samples.min())} to {int(samples.max())}",
            samples.min() == samples.max(),
        ),
    ]
    return pd.DataFrame(rows, columns=["check", "value", "met"])


def knowledge_shrinkage(runs_dir: Path, metrics: pd.DataFrame) -> pd.DataFrame:
    """Per arm, mean over seeds: the share of held-out instances whose final pass@1 is below (above) the plateau
    checkpoint's."""
    start = ex.last_pass1(Path(runs_dir) / ex.PHASE1)
    final = final_pass1(runs_dir, metrics)
    final = final.assign(dropped=final["pass1"] < start[final["item"]], improved=final["pass1"] > start[final["item"]])
    per_seed = final.groupby(["arm", "seed"], as_index=False)[["dropped", "improved"]].mean()
    out = per_seed.groupby("arm", sort=False)[["dropped", "improved"]].mean() * 100
    out = out.rename(columns={"dropped": "dropped_pct", "improved": "improved_pct"})
    labels = arm_order(metrics).set_index("arm")
    return out.loc[[a for a in labels.index if a in out.index]].join(labels[["label", "N"]]).reset_index()


def theory_tables(runs_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Theorem 1 on the phase-1 checkpoint's responses: supports per prompt, every batch, and the summary per N."""
    supports = pd.read_csv(Path(runs_dir) / ex.THEORY_SUPPORTS)
    batches = pd.read_csv(Path(runs_dir) / ex.THEORY_BATCHES)
    summary = mass_balance.summary(batches)
    summary["share_groups_with_correct"] = mass_balance.groups_with_correct(supports["q_pos"].to_numpy(), summary["N"])
    return supports, batches, summary
