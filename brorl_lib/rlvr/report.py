"""The computations behind notebooks/04_laptop_rlvr.ipynb: its parameters, and tables built from a run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from brorl_lib.core import stats
from brorl_lib.core.params import NotebookConfig
from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr import mass_balance
from brorl_lib.rlvr.model import TinyModelShape
from brorl_lib.core.validation import check_int_list, check_type

HEADS, KV_HEADS = 4, 2  # our choice for every model size: grouped-query attention as in Qwen2


@dataclass(frozen=True)
class LaptopRLVRConfig(NotebookConfig):
    tasks: list
    difficulties: list
    n_train: int
    n_test: int
    hidden_size: int
    num_layers: int
    warm_start_steps: int
    warm_start_lr: float
    phase1_prompts: int
    phase1_max_steps: int
    plateau_patience: int
    plateau_tol: float
    arm_rollouts: list
    arm_prompts: int
    sample_budget: int
    base_lr: float
    mini_batches: int
    temperature: float
    max_new_tokens: int
    kl_coef: float
    eval_samples: int
    eval_temperature: float
    eval_every: int
    eval_points: int
    theory_prompts: int
    theory_samples: int
    theory_batches: int
    base_lr_rollouts: list
    seeds: list
    runs_dir: str
    device: str

    def validate(self) -> None:
        for name in ("tasks", "difficulties", "arm_rollouts", "base_lr_rollouts", "seeds"):
            check_type(name, getattr(self, name), (list, tuple), "a list")
        check_type("runs_dir", self.runs_dir, str, "a folder path")
        check_type("device", self.device, str, "'cpu' or 'cuda'")
        check_int_list("seeds", list(self.seeds), low=0)
        if len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds={list(self.seeds)} repeats a seed")
        if ex.BASE_N not in self.arm_rollouts:
            raise ValueError(f"arm_rollouts={list(self.arm_rollouts)} must include the baseline N={ex.BASE_N}")
        if not self.runs_dir.strip():
            raise ValueError("runs_dir is empty: give a folder for the run's results")
        settings = self.settings()
        settings.validate()
        if self.base_lr_rollouts:
            ex.check_arm_rollouts(settings, "base_lr_rollouts", self.base_lr_rollouts)

    def settings(self) -> ex.ExperimentSettings:
        shape = TinyModelShape(hidden=self.hidden_size, layers=self.num_layers, heads=HEADS, kv_heads=KV_HEADS,
                               intermediate=2 * self.hidden_size)
        return ex.ExperimentSettings(
            task_names=tuple(self.tasks), difficulties=tuple(self.difficulties), n_train=self.n_train,
            n_test=self.n_test, warm_start_steps=self.warm_start_steps, warm_start_lr=self.warm_start_lr,
            phase1_prompts=self.phase1_prompts, phase1_max_steps=self.phase1_max_steps,
            plateau_patience=self.plateau_patience, plateau_tol=self.plateau_tol,
            arm_rollouts=tuple(self.arm_rollouts), arm_prompts=self.arm_prompts, sample_budget=self.sample_budget,
            base_lr=self.base_lr, mini_batches=self.mini_batches, temperature=self.temperature,
            max_new_tokens=self.max_new_tokens, eval_samples=self.eval_samples, eval_temperature=self.eval_temperature,
            eval_every=self.eval_every, eval_points=self.eval_points, kl_coef=self.kl_coef,
            theory_prompts=self.theory_prompts, theory_samples=self.theory_samples,
            theory_batches=self.theory_batches, model=shape, device=self.device)

    def runs_path(self) -> Path:
        path = Path(self.runs_dir)
        return path if path.is_absolute() else REPO_ROOT / path


def arm_order(metrics: pd.DataFrame) -> list[str]:
    """Phase-2 arms by N, each ablation arm after the arm of its N."""
    arms = metrics.loc[metrics.phase == 2, ["arm", "N"]].drop_duplicates()
    return arms.assign(ablation=arms["arm"] != "N=" + arms["N"].astype(str)).sort_values(["N", "ablation"])["arm"].tolist()


def evaluations(metrics: pd.DataFrame) -> pd.DataFrame:
    """Phase-2 held-out scores per arm, starting from the phase-1 checkpoint's score at 0 samples, 0 s."""
    start = metrics[metrics.phase == 1].dropna(subset=["test_score"]).groupby("seed").tail(1)
    rows = metrics[(metrics.phase == 2)].dropna(subset=["test_score"])
    starts = [start.assign(arm=a, N=n, step=0, samples=0, elapsed_s=0.0, phase=2)
              for a, n in rows[["arm", "N"]].drop_duplicates().itertuples(index=False)]
    cols = ["seed", "arm", "N", "step", "samples", "elapsed_s", "test_score"]
    out = pd.concat([*starts, rows.loc[rows.step > 0]], ignore_index=True)[cols]
    return out.sort_values(["N", "seed", "step"], ignore_index=True)


def phase1_end(metrics: pd.DataFrame) -> pd.DataFrame:
    """Per seed: phase-1 steps, samples, time and the held-out score it plateaued at."""
    p1 = metrics[metrics.phase == 1]
    last = p1.groupby("seed").tail(1)[["seed", "step", "samples", "elapsed_s"]]
    score = p1.dropna(subset=["test_score"]).groupby("seed")["test_score"].last().rename("test_score")
    return last.merge(score, on="seed")


def table1(metrics: pd.DataFrame, settings: ex.ExperimentSettings) -> pd.DataFrame:
    """Scaled-down Table 1: per arm, steps, samples, time and the held-out score (mean over seeds, with sd)."""
    p2 = metrics[metrics.phase == 2]
    per_seed = p2.groupby(["arm", "N", "seed"]).agg(steps=("step", "max"), samples=("samples", "max"),
                                                    time_s=("elapsed_s", "max"), lr=("lr", "first")).reset_index()
    final = p2.dropna(subset=["test_score"]).groupby(["arm", "seed"])["test_score"].last().rename("score")
    per_seed = per_seed.merge(final.reset_index(), on=["arm", "seed"])
    start = phase1_end(metrics).set_index("seed")["test_score"]
    per_seed["gain"] = per_seed["score"] - per_seed["seed"].map(start)
    out = per_seed.groupby(["arm", "N"]).agg(
        prompts_per_step=("N", lambda s: ex.prompts_for(settings, int(s.iloc[0]))), lr=("lr", "first"),
        steps=("steps", "mean"),
        samples=("samples", "mean"), time_s=("time_s", "mean"), score=("score", "mean"), score_sd=("score", "std"),
        gain=("gain", "mean"), seeds=("seed", "nunique")).reset_index()
    out[["steps", "samples"]] = out[["steps", "samples"]].round().astype(int)  # equal in every seed by design
    return out.set_index("arm").loc[arm_order(metrics)].reset_index()


def table2(metrics: pd.DataFrame) -> pd.DataFrame:
    """Scaled-down Table 2 per arm, measured in the same run: dynamic-sampling pass rate (share of generated
    samples kept), generation throughput (samples per second of generation) and PPO updates per step."""
    p2 = metrics[metrics.phase == 2].sort_values(["arm", "seed", "step"])
    p2 = p2.assign(step_samples=p2.groupby(["arm", "seed"])["samples"].diff())
    out = p2[p2.step > 0].groupby(["arm", "N"]).agg(
        pass_rate=("pass_rate", "mean"), samples=("step_samples", "sum"), generation_s=("generation_s", "sum"),
        updates_per_step=("updates", "mean")).reset_index()
    out["pass_rate_pct"] = 100 * out.pop("pass_rate")
    out["samples_per_s"] = out["samples"] / out["generation_s"]
    out["samples"] = out["samples"].astype(int)  # summed over seeds
    return out.set_index("arm").loc[arm_order(metrics)].reset_index()


def _score_files(folder: Path) -> list[tuple[int, Path]]:
    files = folder.glob("test_scores_step*.npy")
    return sorted((int(p.stem.removeprefix("test_scores_step")), p) for p in files)


def instance_scores(runs_dir: Path, metrics: pd.DataFrame) -> pd.DataFrame:
    """Every held-out instance's score at every evaluation: seed, arm, N, step, samples, elapsed_s, task, item, score.

    Phase 1's last evaluation is step 0 of every phase-2 arm."""
    frames = []
    for seed in sorted(metrics["seed"].unique()):
        root = Path(runs_dir) / f"seed{seed}"
        tasks = pd.read_csv(root / ex.TEST_INSTANCES)["task"].to_numpy()
        p1_file = _score_files(root / "phase1")[-1][1]
        for (arm, n, folder), m in metrics[(metrics.seed == seed) & (metrics.phase == 2)].groupby(["arm", "N", "folder"]):
            m = m.set_index("step")
            for step, f in [(0, p1_file)] + _score_files(root / folder):
                samples, elapsed = (0, 0.0) if step == 0 else (m.at[step, "samples"], m.at[step, "elapsed_s"])
                frames.append(pd.DataFrame({"seed": seed, "arm": arm, "N": n, "step": step, "samples": samples,
                                            "elapsed_s": elapsed, "task": tasks, "item": np.arange(len(tasks)),
                                            "score": np.load(f)}))
    return pd.concat(frames, ignore_index=True)


def task_curves(instances: pd.DataFrame) -> pd.DataFrame:
    """Scaled-down Figure 4: mean held-out score per task, arm and evaluation (mean over seeds)."""
    per_seed = instances.groupby(["task", "arm", "N", "seed", "step"], as_index=False).agg(
        samples=("samples", "first"), elapsed_s=("elapsed_s", "first"), score=("score", "mean"))
    return per_seed.groupby(["task", "arm", "N", "step"], as_index=False).agg(
        samples=("samples", "mean"), elapsed_s=("elapsed_s", "mean"), score=("score", "mean"))


def final_vs_start(instances: pd.DataFrame) -> pd.DataFrame:
    """Per arm, seed and held-out instance: score at the phase-1 end and at the arm's last evaluation."""
    last = instances.groupby(["arm", "seed"])["step"].transform("max")
    start = instances[instances.step == 0].set_index(["arm", "seed", "item"])["score"].rename("start")
    final = instances[instances.step == last].set_index(["arm", "seed", "item"])
    return final[["N", "task", "score"]].rename(columns={"score": "final"}).join(start).reset_index()


def knowledge_shrinkage(instances: pd.DataFrame) -> pd.DataFrame:
    """Share of held-out instances whose score fell below (rose above) their phase-1 value, per arm and task."""
    pairs = final_vs_start(instances)
    pairs["dropped"] = pairs["final"] < pairs["start"]
    pairs["improved"] = pairs["final"] > pairs["start"]
    overall = pairs.assign(task="all")
    out = pd.concat([pairs, overall]).groupby(["arm", "N", "task"], as_index=False).agg(
        dropped_pct=("dropped", "mean"), improved_pct=("improved", "mean"), instances=("item", "size"))
    out[["dropped_pct", "improved_pct"]] *= 100
    return out.sort_values(["task", "N"], ignore_index=True)


def paired_tests(instances: pd.DataFrame, baseline: str = f"N={ex.BASE_N}") -> pd.DataFrame:
    """The paper's paired t-test (one-sided, arm > baseline) over held-out instances pooled across seeds,
    on each arm's final per-instance scores, with the mean difference as the effect size."""
    pairs = final_vs_start(instances).set_index(["seed", "item"])
    base = pairs[pairs.arm == baseline]["final"]
    rows = []
    for arm, g in pairs[pairs.arm != baseline].groupby("arm"):
        both = g["final"].to_frame("arm").join(base.rename("base"), how="inner")
        test = stats.paired_test(both["arm"].to_numpy(), both["base"].to_numpy(), alternative="greater")
        rows.append({"arm": arm, "N": int(g["N"].iloc[0]), "baseline": baseline, **test})
    return pd.DataFrame(rows).sort_values("N", ignore_index=True)


def theory_tables(runs_dir: Path, seeds: list[int]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Theorem 1 on the phase-1 checkpoints' responses: supports per prompt, every batch, and the summary per N."""
    supports = pd.concat([pd.read_csv(Path(runs_dir) / f"seed{s}" / ex.THEORY_SUPPORTS).assign(seed=s) for s in seeds],
                         ignore_index=True)
    batches = pd.concat([pd.read_csv(Path(runs_dir) / f"seed{s}" / ex.THEORY_BATCHES).assign(seed=s) for s in seeds],
                        ignore_index=True)
    summary = mass_balance.summary(batches)
    summary["share_groups_with_correct"] = mass_balance.groups_with_correct(supports["q_pos"].to_numpy(), summary["N"])
    return supports, batches, summary
