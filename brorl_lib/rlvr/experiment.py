"""The paper's experiment at laptop scale: warm start, phase 1 (N=16 until the held-out score
plateaus), then phase 2 arms from that checkpoint at equal total generated samples.

Everything a run writes lands under ``runs_dir/<name>/seed<k>/``: the warm start and each arm's
checkpoint (Hugging Face format), metrics.csv per arm, and per-instance held-out scores. Calling
again resumes every unfinished piece and skips the finished ones.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from brorl_lib.rlvr import algorithm as alg
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr import tasks, warm_start
from brorl_lib.rlvr.run import ArmSettings, run_arm
from brorl_lib.rlvr.step import StepSettings
from brorl_lib.rlvr.tokenizer import build_tokenizer
from brorl_lib.validation import check_choice, check_int, check_int_list, check_positive, check_range

BASE_N = 16  # the ProRL arm's rollouts per prompt
PROMPT_RATIO = 4  # ProRL takes 4x the prompts per step of every other arm (512 vs 128 in the paper)


@dataclass(frozen=True)
class ExperimentSettings:
    task_names: tuple[str, ...]
    difficulty: int
    n_train: int  # training instances per task
    n_test: int  # held-out instances per task
    warm_start_steps: int
    warm_start_lr: float
    phase1_prompts: int  # prompts per step in phase 1 (N=16)
    phase1_max_steps: int
    plateau_patience: int  # evaluations without a gain of plateau_tol end phase 1
    plateau_tol: float
    arm_rollouts: tuple[int, ...]  # phase-2 N values; 16 gets PROMPT_RATIO x the prompts of the others
    arm_prompts: int  # prompts per step of the N != 16 arms
    sample_budget: int  # generated samples per phase-2 arm
    base_lr: float  # learning rate at N=16 x (PROMPT_RATIO * arm_prompts) samples per step
    mini_batches: int
    temperature: float
    max_new_tokens: int
    eval_samples: int
    eval_temperature: float
    eval_every: int
    device: str = "cpu"

    def validate(self) -> None:
        if not self.task_names:
            raise ValueError("task_names is empty: name at least one of " + str(sorted(tasks.FAMILIES)))
        for t in self.task_names:
            check_choice("task_names item", t, tasks.FAMILIES)
            check_choice("difficulty", self.difficulty, tasks.FAMILIES[t].levels)
        for name in ("n_train", "n_test", "warm_start_steps", "phase1_prompts", "phase1_max_steps", "plateau_patience",
                     "arm_prompts", "sample_budget", "mini_batches", "max_new_tokens", "eval_samples", "eval_every"):
            check_int(name, getattr(self, name), low=1)
        check_int_list("arm_rollouts", list(self.arm_rollouts), low=2)
        for name in ("warm_start_lr", "base_lr", "temperature", "eval_temperature"):
            check_positive(name, getattr(self, name))
        check_range("plateau_tol", self.plateau_tol, low=0.0)


def prompts_for(settings: ExperimentSettings, n: int) -> int:
    """Prompts per step of the arm with N rollouts."""
    return settings.arm_prompts * (PROMPT_RATIO if n == BASE_N else 1)


def arm_lr(settings: ExperimentSettings, n: int) -> float:
    """Paper §4.2.1: sqrt of the samples-per-step ratio to the N=16 arm, mini-batch count fixed."""
    base = BASE_N * prompts_for(settings, BASE_N)
    return alg.scaled_learning_rate(settings.base_lr, base, n * prompts_for(settings, n))


def data(settings: ExperimentSettings, seed: int) -> tuple[list[tasks.Instance], list[tasks.Instance]]:
    train, test = [], []
    for t in settings.task_names:
        tr, te = tasks.make_split(t, settings.difficulty, settings.n_train, settings.n_test, seed)
        train += tr
        test += te
    return train, test


def _step(settings: ExperimentSettings, n: int) -> StepSettings:
    return StepSettings(n_rollouts=n, temperature=settings.temperature, max_new_tokens=settings.max_new_tokens,
                        mini_batches=settings.mini_batches)


def warm_start_model(settings: ExperimentSettings, train, seed: int, folder: Path) -> Path:
    """Supervised warm start, saved once (skipped when already there)."""
    if not (folder / "config.json").exists():
        tok = build_tokenizer()
        model = tiny.build_model(tiny.TinyModelShape(), tok, seed)
        losses = warm_start.train_sft(model, tok, train, settings.warm_start_steps, 32, settings.warm_start_lr, seed)
        tiny.save(model, tok, folder)
        (folder / "warm_start_losses.json").write_text(json.dumps(losses))
    return folder


def phase1(settings: ExperimentSettings, start: Path, train, test, seed: int, folder: Path, progress: bool) -> pd.DataFrame:
    """N=16 in chunks of eval_every steps until the held-out score stops improving (or max steps)."""
    done = folder / "phase1_done.json"
    if done.exists():  # ended earlier: a re-run must not train it further
        return pd.read_csv(folder / "metrics.csv")
    arm = ArmSettings("phase1 N=16", _step(settings, BASE_N), settings.phase1_prompts, settings.base_lr,
                      sample_budget=settings.phase1_max_steps * BASE_N * settings.phase1_prompts,
                      eval_every=settings.eval_every, checkpoint_every=settings.eval_every, seed=seed)
    while True:
        metrics = run_arm(start, train, test, arm, folder, settings.eval_samples, settings.eval_temperature,
                          max_steps=settings.eval_every, progress=progress, device=settings.device)
        scores = metrics["test_score"].dropna().to_numpy()
        plateau = len(scores) > settings.plateau_patience and \
            scores[-settings.plateau_patience:].max() < scores[: -settings.plateau_patience].max() + settings.plateau_tol
        if plateau or metrics["step"].iloc[-1] >= settings.phase1_max_steps:
            done.write_text(json.dumps({"step": int(metrics["step"].iloc[-1]), "plateau": bool(plateau)}))
            return metrics


def run(settings: ExperimentSettings, seeds: list[int], runs_dir: Path, progress: bool = True) -> pd.DataFrame:
    """Every seed's phase 1 and phase-2 arms; returns all metrics with columns seed, phase, arm, N."""
    settings.validate()
    check_int_list("seeds", seeds, low=0)
    frames = []
    for seed in seeds:
        root = Path(runs_dir) / f"seed{seed}"
        root.mkdir(parents=True, exist_ok=True)
        (root / "settings.json").write_text(json.dumps(asdict(settings), indent=2))
        train, test = data(settings, seed)
        start = warm_start_model(settings, train, seed, root / "warm_start")
        p1 = phase1(settings, start, train, test, seed, root / "phase1", progress)
        frames.append(p1.assign(seed=seed, phase=1, arm="phase 1", N=BASE_N))
        for n in settings.arm_rollouts:
            arm = ArmSettings(f"N={n}", _step(settings, n), prompts_for(settings, n), arm_lr(settings, n),
                              settings.sample_budget, settings.eval_every, settings.eval_every, seed)
            m = run_arm(root / "phase1" / "checkpoint", train, test, arm, root / f"arm_N{n}", settings.eval_samples,
                        settings.eval_temperature, progress=progress, device=settings.device)
            frames.append(m.assign(seed=seed, phase=2, arm=f"N={n}", N=n))
    return pd.concat(frames, ignore_index=True)


def final_instance_scores(runs_dir: Path, seed: int, folder: str) -> np.ndarray:
    """Per-instance held-out scores at the last evaluation of ``folder`` (phase1 or arm_N<n>)."""
    files = sorted((Path(runs_dir) / f"seed{seed}" / folder).glob("test_scores_step*.npy"),
                   key=lambda p: int(p.stem.removeprefix("test_scores_step")))
    if not files:
        raise ValueError(f"no held-out scores under {Path(runs_dir) / f'seed{seed}' / folder}")
    return np.load(files[-1])
