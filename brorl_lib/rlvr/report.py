"""The computations behind notebooks/04_laptop_rlvr.ipynb: its parameters, and tables built from a run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from brorl_lib.core import stats
from brorl_lib.core.params import LEARNING_RATE, MAX_SEEDS, SEED_MAX, TEMPERATURE, NotebookConfig, param
from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.validation import check_choice
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr import mass_balance
from brorl_lib.rlvr.model import TinyModelShape
from brorl_lib.rlvr.tokenizer import ALPHABET, SPECIAL_TOKENS

HEADS, KV_HEADS = 4, 2  # our choice for every model size: grouped-query attention as in Qwen2
MAX_LEVEL = max(max(f.levels) for f in ex.tasks.FAMILIES.values())
MAX_N = 8192  # our bound on N per arm: 16x the paper's 512 (one prompt's 8,192 samples are generated at once)
MEMORY_BOUND_GB = 32.0  # our bound on a run's estimated peak memory: a 32 GB workstation (the gpu profile's H100: 80)


@dataclass(frozen=True)
class LaptopRLVRConfig(NotebookConfig):
    """Notebook 04's parameters: the one place their ranges are declared (the experiment's own checks are looser,
    so a value allowed here never fails later). Upper bounds are our choice, far above the paper profile; on top
    of them the run's peak memory is estimated (``peak_memory_gb``) and refused above MEMORY_BOUND_GB."""

    tasks: list[str] = param(
        ["spell_backward", "arithmetic", "word_sequence_reversal"],
        "reasoning_gym task families",
        choices=tuple(ex.tasks.FAMILIES),
        distinct=True,
        max_items=len(ex.tasks.FAMILIES),
    )
    difficulties: list[int] = param(
        [2, 1, 1], "one level per task", low=1, high=MAX_LEVEL, max_items=len(ex.tasks.FAMILIES)
    )
    n_train: int = param(150, "training instances drawn per task (duplicate prompts dropped)", low=1, high=100_000)
    n_test: int = param(40, "held-out instances per task, disjoint from training", low=1, high=10_000)
    hidden_size: int = param(128, "model width (our choice)", low=HEADS, high=1024, multiple_of=HEADS)
    num_layers: int = param(3, "decoder layers (our choice)", low=1, high=32)
    warm_start_steps: int = param(300, "supervised steps of 32 examples", low=1, high=100_000)
    warm_start_lr: float = param(1e-3, "AdamW learning rate of the warm start", **LEARNING_RATE)
    phase1_prompts: int = param(8, "prompts per step in phase 1 (N 16)", low=1, high=4096)
    phase1_max_steps: int = param(40, "phase 1 stops here if no plateau came first", low=1, high=100_000)
    plateau_patience: int = param(3, "evaluations without a gain that end phase 1", low=1, high=1000)
    plateau_tol: float = param(0.005, "smallest gain of the held-out score that counts", low=0.0, high=1.0)
    arm_rollouts: list[int] = param(
        [16, 512],
        "phase-2 arms: rollouts per prompt N, must include 16",
        low=2,
        high=MAX_N,
        distinct=True,
        max_items=32,
    )
    arm_prompts: int = param(1, "prompts per step of every arm but N 16, which takes 4x as many", low=1, high=1024)
    sample_budget: int = param(
        2048,
        "generated samples per phase-2 arm (equal for all), a multiple of every arm's samples per step",
        low=1,
        high=1_000_000,
    )
    base_lr: float = param(
        3e-4, "AdamW learning rate of the N 16 arm; others scale by sqrt of samples per step", **LEARNING_RATE
    )
    mini_batches: int = param(2, "PPO updates per step, the same in every arm", low=1, high=64)
    temperature: float = param(1.0, "rollout sampling temperature", **TEMPERATURE)
    max_new_tokens: int = param(
        16,
        "response length limit (prompt and response stay inside the model's 128 positions)",
        unit="tokens",
        low=1,
        high=64,
    )
    kl_coef: float = param(0.0, "weight of the KL to the arm's starting policy (0 is off)", low=0.0, high=100.0)
    eval_samples: int = param(4, "samples per held-out instance", low=1, high=64)
    eval_temperature: float = param(1.0, "sampling temperature of the held-out evaluation", **TEMPERATURE)
    eval_every: int = param(10, "phase-1 steps between evaluations", low=1, high=100_000)
    eval_points: int = param(4, "evaluations per phase-2 arm, evenly spaced in samples", low=1, high=1000)
    theory_prompts: int = param(
        4, "training prompts analysed with Theorem 1 at the phase-1 checkpoint", low=1, high=1000
    )
    theory_samples: int = param(1024, "draws per analysed prompt that find its distinct responses", low=2, high=65_536)
    theory_batches: int = param(32, "random batches per prompt and N for Theorem 1", low=1, high=10_000)
    base_lr_rollouts: list[int] = param(
        [],
        "ablation arms: these N at the N 16 arm's learning rate (no square-root rule)",
        low=2,
        high=MAX_N,
        distinct=True,
        min_items=0,
        max_items=32,
    )
    seeds: list[int] = param(
        [0], "one full experiment per seed", low=0, high=SEED_MAX, distinct=True, max_items=MAX_SEEDS
    )
    runs_dir: str = param(
        "build/runs/laptop_rlvr_quick", "results folder, relative to the repository root", nonempty=True
    )
    device: str = param("cpu", "where the model trains and samples (cuda needs a visible GPU)", choices=("cpu", "cuda"))

    def check_together(self) -> None:
        if len(self.difficulties) != len(self.tasks):
            raise ValueError(
                f"difficulties={list(self.difficulties)} is not allowed: give one level per task in "
                f"tasks={list(self.tasks)}"
            )
        for t, level in zip(self.tasks, self.difficulties, strict=True):
            check_choice(f"difficulties item for {t}", level, ex.tasks.FAMILIES[t].levels)
        if ex.BASE_N not in self.arm_rollouts:
            raise ValueError(f"arm_rollouts={list(self.arm_rollouts)} must include the baseline N={ex.BASE_N}")
        need = peak_memory_gb(self)
        if need > MEMORY_BOUND_GB:
            raise ValueError(
                f"hidden_size={self.hidden_size}, num_layers={self.num_layers} with the largest "
                f"generation batch ({largest_batch(self)}) need about {need:.0f} GB at the run's peak "
                f"(estimate); allowed at most {MEMORY_BOUND_GB:.0f} GB (our bound): lower one of them"
            )
        # the experiment's own checks (all looser than the declaration): a bad value can only surface here, before work
        ex.check_run(self.settings(), list(self.seeds), tuple(self.base_lr_rollouts))

    def settings(self) -> ex.ExperimentSettings:
        shape = TinyModelShape(
            hidden=self.hidden_size,
            layers=self.num_layers,
            heads=HEADS,
            kv_heads=KV_HEADS,
            intermediate=2 * self.hidden_size,
        )
        return ex.ExperimentSettings(
            task_names=tuple(self.tasks),
            difficulties=tuple(self.difficulties),
            n_train=self.n_train,
            n_test=self.n_test,
            warm_start_steps=self.warm_start_steps,
            warm_start_lr=self.warm_start_lr,
            phase1_prompts=self.phase1_prompts,
            phase1_max_steps=self.phase1_max_steps,
            plateau_patience=self.plateau_patience,
            plateau_tol=self.plateau_tol,
            arm_rollouts=tuple(self.arm_rollouts),
            arm_prompts=self.arm_prompts,
            sample_budget=self.sample_budget,
            base_lr=self.base_lr,
            mini_batches=self.mini_batches,
            temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            eval_samples=self.eval_samples,
            eval_temperature=self.eval_temperature,
            eval_every=self.eval_every,
            eval_points=self.eval_points,
            kl_coef=self.kl_coef,
            theory_prompts=self.theory_prompts,
            theory_samples=self.theory_samples,
            theory_batches=self.theory_batches,
            model=shape,
            device=self.device,
        )

    def runs_path(self) -> Path:
        path = Path(self.runs_dir)
        return path if path.is_absolute() else REPO_ROOT / path


# --- pre-flight memory estimate (rough, float32 throughout; our model of where the memory goes) ---
PROMPT_TOKENS = 48  # our bound on a prompt's length in tokens (the longest task prompt has 41 characters)
ACTIVATIONS_PER_LAYER = 34  # numbers kept per hidden unit, token and layer for the backward pass (rough count)


def generation_batches(cfg: LaptopRLVRConfig) -> dict[str, int]:
    """Responses sampled at once by each part of the run, keyed by the parameters that set them."""
    out = {
        "16 x phase1_prompts": 16 * cfg.phase1_prompts,
        "theory_samples": cfg.theory_samples,
        "n_test x tasks x eval_samples": cfg.n_test * len(cfg.tasks) * cfg.eval_samples,
    }
    for n in dict.fromkeys([*cfg.arm_rollouts, *cfg.base_lr_rollouts]):
        prompts = cfg.arm_prompts * (ex.PROMPT_RATIO if n == ex.BASE_N else 1)
        out[f"N {n} x {prompts} prompts (arm_rollouts, arm_prompts)"] = n * prompts
    return out


def largest_batch(cfg: LaptopRLVRConfig) -> str:
    name, rows = max(generation_batches(cfg).items(), key=lambda kv: kv[1])
    return f"{name}: {rows:,} responses"


def peak_memory_gb(cfg: LaptopRLVRConfig) -> float:
    """Estimated peak memory of a run, GB: the model's training state, plus the larger of the biggest sampling
    batch (KV cache and logits) and one PPO mini-batch of the biggest training batch (activations)."""
    h, layers, vocab = cfg.hidden_size, cfg.num_layers, len(SPECIAL_TOKENS) + len(ALPHABET)
    seq = PROMPT_TOKENS + cfg.max_new_tokens
    weights = vocab * h + layers * 9 * h * h  # tied embeddings; q, o: h x h; k, v: h x h/2; MLP: 3 x h x 2h
    state = 4 * weights * (4 + (cfg.kl_coef > 0))  # weights, gradients, AdamW's two moments (+ the KL reference)
    batches = generation_batches(cfg)
    generation = 4 * max(batches.values()) * seq * (layers * h + 3 * vocab)
    trained = max(v for k, v in batches.items() if not k.startswith(("theory", "n_test")))
    training = 4 * trained / cfg.mini_batches * seq * (ACTIVATIONS_PER_LAYER * layers * h + 3 * vocab)
    return (state + max(generation, training)) / 1e9


def arm_order(metrics: pd.DataFrame) -> list[str]:
    """Phase-2 arms by N, each ablation arm after the arm of its N."""
    arms = metrics.loc[metrics.phase == 2, ["arm", "N"]].drop_duplicates()
    return (
        arms.assign(ablation=arms["arm"] != "N=" + arms["N"].astype(str)).sort_values(["N", "ablation"])["arm"].tolist()
    )


def evaluations(metrics: pd.DataFrame) -> pd.DataFrame:
    """Phase-2 held-out scores per arm, starting from the phase-1 checkpoint's score at 0 samples, 0 s."""
    start = metrics[metrics.phase == 1].dropna(subset=["test_score"]).groupby("seed").tail(1)
    rows = metrics[(metrics.phase == 2)].dropna(subset=["test_score"])
    starts = [
        start.assign(arm=a, N=n, step=0, samples=0, elapsed_s=0.0, phase=2)
        for a, n in rows[["arm", "N"]].drop_duplicates().itertuples(index=False)
    ]
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
    per_seed = (
        p2.groupby(["arm", "N", "seed"])
        .agg(steps=("step", "max"), samples=("samples", "max"), time_s=("elapsed_s", "max"), lr=("lr", "first"))
        .reset_index()
    )
    final = p2.dropna(subset=["test_score"]).groupby(["arm", "seed"])["test_score"].last().rename("score")
    per_seed = per_seed.merge(final.reset_index(), on=["arm", "seed"])
    start = phase1_end(metrics).set_index("seed")["test_score"]
    per_seed["gain"] = per_seed["score"] - per_seed["seed"].map(start)
    out = (
        per_seed.groupby(["arm", "N"])
        .agg(
            prompts_per_step=("N", lambda s: ex.prompts_for(settings, int(s.iloc[0]))),
            lr=("lr", "first"),
            steps=("steps", "mean"),
            samples=("samples", "mean"),
            time_s=("time_s", "mean"),
            score=("score", "mean"),
            score_sd=("score", "std"),
            gain=("gain", "mean"),
            seeds=("seed", "nunique"),
        )
        .reset_index()
    )
    out[["steps", "samples"]] = out[["steps", "samples"]].round().astype(int)  # equal in every seed by design
    return out.set_index("arm").loc[arm_order(metrics)].reset_index()


def table2(metrics: pd.DataFrame) -> pd.DataFrame:
    """Scaled-down Table 2 per arm, measured in the same run: dynamic-sampling pass rate (share of generated
    samples kept), generation throughput (samples per second of generation) and PPO updates per step."""
    p2 = metrics[metrics.phase == 2].sort_values(["arm", "seed", "step"])
    p2 = p2.assign(step_samples=p2.groupby(["arm", "seed"])["samples"].diff())
    out = (
        p2[p2.step > 0]
        .groupby(["arm", "N"])
        .agg(
            pass_rate=("pass_rate", "mean"),
            samples=("step_samples", "sum"),
            generation_s=("generation_s", "sum"),
            updates_per_step=("updates", "mean"),
        )
        .reset_index()
    )
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
        for (arm, n, folder), m in metrics[(metrics.seed == seed) & (metrics.phase == 2)].groupby(
            ["arm", "N", "folder"]
        ):
            m = m.set_index("step")
            for step, f in [(0, p1_file)] + _score_files(root / folder):
                samples, elapsed = (0, 0.0) if step == 0 else (m.at[step, "samples"], m.at[step, "elapsed_s"])
                frames.append(
                    pd.DataFrame(
                        {
                            "seed": seed,
                            "arm": arm,
                            "N": n,
                            "step": step,
                            "samples": samples,
                            "elapsed_s": elapsed,
                            "task": tasks,
                            "item": np.arange(len(tasks)),
                            "score": np.load(f),
                        }
                    )
                )
    return pd.concat(frames, ignore_index=True)


def task_curves(instances: pd.DataFrame) -> pd.DataFrame:
    """Scaled-down Figure 4: mean held-out score per task, arm and evaluation (mean over seeds)."""
    per_seed = instances.groupby(["task", "arm", "N", "seed", "step"], as_index=False).agg(
        samples=("samples", "first"), elapsed_s=("elapsed_s", "first"), score=("score", "mean")
    )
    return per_seed.groupby(["task", "arm", "N", "step"], as_index=False).agg(
        samples=("samples", "mean"), elapsed_s=("elapsed_s", "mean"), score=("score", "mean")
    )


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
    out = (
        pd.concat([pairs, overall])
        .groupby(["arm", "N", "task"], as_index=False)
        .agg(dropped_pct=("dropped", "mean"), improved_pct=("improved", "mean"), instances=("item", "size"))
    )
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
    supports = pd.concat(
        [pd.read_csv(Path(runs_dir) / f"seed{s}" / ex.THEORY_SUPPORTS).assign(seed=s) for s in seeds], ignore_index=True
    )
    batches = pd.concat(
        [pd.read_csv(Path(runs_dir) / f"seed{s}" / ex.THEORY_BATCHES).assign(seed=s) for s in seeds], ignore_index=True
    )
    summary = mass_balance.summary(batches)
    summary["share_groups_with_correct"] = mass_balance.groups_with_correct(supports["q_pos"].to_numpy(), summary["N"])
    return supports, batches, summary
