"""Phase 2 of the countdown study: every arm continues the plateau checkpoint (weights and AdamW moments) under
several seeds and is evaluated, exactly, at each sample budget; generated samples (Table 1's column) are what
the arms spend equally. Three families of arms, run in this order (a run cut short lacks the later ones):

1. **verdict** (paper §4.2.1): ProRL, N=16 x P kept prompts at eta0; BroRL, N=512 x P/4 at eta0 * sqrt(8); the
   kept batch refilled to full, drawing only the shortfall (``StepSettings.refill``);
2. **IsoCompute**: a fixed G generated samples a step (one round of G/N prompts, no refill) for each N of
   ``iso_rollouts``, at three or more multiples of the square-root rule's learning rate on the first seed; the
   multiple best on the validation split at the last budget is then run under the other seeds;
3. **controls**: the batch-size control (N=16 x 8P prompts, BroRL's kept batch), a prompt-matched BroRL
   (N=512 x P) and a KL-anchored BroRL, each at its rule's learning rate.

Every run also counts how often each training prompt was kept; the verdict and control runs, when done, also
record every training prompt's exact q (``q_train_end.npy``): the per-prompt fate.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from brorl_lib.core.validation import check_int, check_int_list, check_positive
from brorl_lib.facts import arms
from brorl_lib.facts.arms import Arm
from brorl_lib.facts.setup import scaled_learning_rate
from brorl_lib.models import tiny
from brorl_lib.rlvr import study
from brorl_lib.rlvr.run import CHECKPOINT, DONE, ArmSettings, run_arm, save_array
from brorl_lib.rlvr.step import StepSettings

BROAD_N, PROMPT_RATIO = arms.PAPER_BROAD_N, arms.PROMPT_RATIO  # paper Table 1: N=512; 512 : 128 prompts a step
ARMS, Q_END, EVAL_BUDGETS_OF = "arms", "q_train_end.npy", "budgets"


@dataclass(frozen=True)
class Phase2Settings:
    prompts: int  # P: ProRL's kept prompts per step
    base_lr: float  # eta0: ProRL's learning rate (phase 1's)
    budgets: tuple[int, ...]  # generated samples at which every run is evaluated; the last ends it
    seeds: tuple[int, ...]
    iso_samples: int  # G: generated samples per IsoCompute step
    iso_rollouts: tuple[int, ...]
    iso_lr_factors: tuple[float, ...]  # multiples of the rule's learning rate, at least three
    iso_seeds: int  # seeds of each N's best learning rate (the first runs the whole grid)
    control_seeds: int  # the first this many seeds run the controls (0: none)
    kl_coef: float  # the KL-anchored control's weight

    def check(self) -> None:
        check_int("prompts", self.prompts, low=PROMPT_RATIO)
        if self.prompts % PROMPT_RATIO:
            raise ValueError(f"prompts={self.prompts} is not allowed: it must be a multiple of {PROMPT_RATIO}")
        check_positive("base_lr", self.base_lr)
        check_int_list("budgets", list(self.budgets), low=1)
        if not self.budgets or any(b <= a for a, b in zip(self.budgets, self.budgets[1:])):
            raise ValueError(f"budgets={list(self.budgets)} is not allowed: give them strictly increasing")
        check_int_list("seeds", list(self.seeds), low=0)
        if len(self.seeds) < 2 or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds={list(self.seeds)} is not allowed: give at least 2 distinct seeds")
        check_int_list("iso_rollouts", list(self.iso_rollouts), low=2)
        for n in self.iso_rollouts:
            if self.iso_samples % n:
                raise ValueError(
                    f"iso_samples={self.iso_samples} is not allowed: it must be a multiple of every N of "
                    f"iso_rollouts={list(self.iso_rollouts)} (G/N prompts a step)"
                )
        if len(self.iso_lr_factors) < 3 or sorted(set(self.iso_lr_factors)) != list(self.iso_lr_factors):
            raise ValueError(
                f"iso_lr_factors={list(self.iso_lr_factors)} is not allowed: give at least three, increasing, so "
                "that a best inside the grid is bracketed"
            )
        for f in self.iso_lr_factors:
            check_positive("iso_lr_factors item", f)
        check_int("iso_seeds", self.iso_seeds, low=1, high=len(self.seeds))
        check_int("control_seeds", self.control_seeds, low=0, high=len(self.seeds))
        check_positive("kl_coef", self.kl_coef)
        if self.budgets[0] < BROAD_N * self.prompts:
            raise ValueError(
                f"budgets={list(self.budgets)} is not allowed: the first must be at least {BROAD_N * self.prompts}, "
                "the largest kept batch (the prompt-matched control's)"
            )

    def rule_lr(self, samples_per_step: int) -> float:
        """Paper §4.2.1: eta0 * sqrt(samples per step / ProRL's), ProRL's being 16 x P."""
        return scaled_learning_rate(self.base_lr, study.BASE_N * self.prompts, samples_per_step)


def verdict_arms(p: Phase2Settings) -> list[Arm]:
    broad = p.prompts // PROMPT_RATIO
    return [
        Arm("N16", study.BASE_N, p.prompts, label="ProRL N=16", lr=p.base_lr),
        Arm("N512", BROAD_N, broad, label="BroRL N=512", lr=p.rule_lr(BROAD_N * broad)),
    ]


def iso_arms(p: Phase2Settings, factors: tuple[float, ...] | None = None) -> list[Arm]:
    out = []
    for n in p.iso_rollouts:
        for f in factors or p.iso_lr_factors:
            lr = p.rule_lr(p.iso_samples) * f
            out.append(
                Arm(
                    f"iso_N{n}_lr{f:g}x",
                    n,
                    p.iso_samples // n,
                    label=f"N={n}, {f:g}x lr",
                    role="isocompute",
                    lr=lr,
                    lr_factor=f,
                    one_round=True,
                )
            )
    return out


def control_arms(p: Phase2Settings) -> list[Arm]:
    broad = p.prompts // PROMPT_RATIO
    kept = BROAD_N * broad
    wide = kept // study.BASE_N  # BroRL's kept batch at N=16: 8P prompts

    def control(samples_per_step: int) -> dict:
        return {"role": "control", "lr": p.rule_lr(samples_per_step)}

    return [
        Arm(f"N16_batch{wide}", study.BASE_N, wide, label=f"N=16 x {wide} prompts (batch control)", **control(kept)),
        Arm(
            f"N512_prompts{p.prompts}",
            BROAD_N,
            p.prompts,
            label=f"N=512 x {p.prompts} prompts (prompt-matched)",
            **control(BROAD_N * p.prompts),
        ),
        Arm("N512_kl", BROAD_N, broad, label=f"BroRL N=512, KL {p.kl_coef:g}", **control(kept), kl_coef=p.kl_coef),
    ]


def arm_folder(root: Path, candidate, arm: Arm, seed: int) -> Path:
    return study.folder(root, candidate) / ARMS / arm.name / f"seed{seed}"


def arm_settings(s: study.StudySettings, p: Phase2Settings, arm: Arm, seed: int) -> ArmSettings:
    step = s.step(arm.n_rollouts)
    step = type(step)(
        **(asdict(step) | {"max_rounds": 1 if arm.one_round else step.max_rounds, "kl_coef": arm.kl_coef})
    )
    return ArmSettings(
        f"seed {seed} {arm.label}",
        step,
        arm.prompts_per_step,
        arm.lr,
        sample_budget=p.budgets[-1],
        eval_every=0,
        checkpoint_every=5,
        seed=seed,
        eval_budgets=tuple(p.budgets),
    )


def run_one(s: study.StudySettings, p: Phase2Settings, root: Path, arm: Arm, seed: int, progress: bool) -> None:
    """One arm under one seed from the plateau: trained to the last budget, then every training prompt's q."""
    candidate = study.chosen(s, root)
    train, test, val = study.split(s, candidate)
    folder = arm_folder(root, candidate, arm, seed)
    settings = arm_settings(s, p, arm, seed)
    record = json.loads(json.dumps(asdict(settings) | {"arm": asdict(arm)}))
    for name in StepSettings.EXECUTION_ONLY:
        record["step"].pop(name)
    study._claim(folder / "arm.json", record)
    run_arm(
        study.folder(root, candidate) / study.PHASE1 / CHECKPOINT,
        train,
        test,
        settings,
        folder,
        s.protocol,
        progress=progress,
        device=s.device,
        validation=val,
        scorer=study.exact_pass1(s),
        count_kept=True,
    )
    if arm.role != "isocompute" and not (folder / Q_END).exists():  # the per-prompt fate of the verdict and controls
        model, tok = tiny.load(folder / CHECKPOINT, s.device)
        with torch.no_grad():
            save_array(folder / Q_END, study.train_q(s, model, tok, train).cpu().numpy())
    shutil.rmtree(folder / CHECKPOINT, ignore_errors=True)  # finished and measured: its weights are not needed


def finished(root: Path, candidate, arm: Arm, seed: int) -> bool:
    folder = arm_folder(root, candidate, arm, seed)
    return (folder / DONE).exists() and (arm.role == "isocompute" or (folder / Q_END).exists())


def best_factor(root: Path, candidate, p: Phase2Settings, n: int) -> float | None:
    """The IsoCompute learning-rate multiple of N=n best on the validation split at the last budget (first seed);
    None until its whole grid has finished."""
    scores = {}
    for arm in (a for a in iso_arms(p) if a.n_rollouts == n):
        folder = arm_folder(root, candidate, arm, p.seeds[0])
        if not finished(root, candidate, arm, p.seeds[0]):
            return None
        last = json.loads((folder / DONE).read_text())["step"]
        scores[arm.lr_factor] = float(np.load(folder / f"val_step{last}.npy").mean())
    return max(sorted(scores), key=lambda f: scores[f])


def plan(s: study.StudySettings, p: Phase2Settings, root: Path) -> list[tuple[Arm, int]]:
    """(arm, seed) in the order they run: the verdict under every seed; the IsoCompute grid under the first seed,
    then each N's best (once its grid has finished) under the next iso_seeds - 1 seeds, seed by seed; the controls
    under the first control_seeds seeds."""
    candidate = study.chosen(s, root)
    out = [(a, seed) for seed in p.seeds for a in verdict_arms(p)]
    out += [(a, p.seeds[0]) for a in iso_arms(p)]
    best = {n: best_factor(root, candidate, p, n) for n in p.iso_rollouts}
    for seed in p.seeds[1 : p.iso_seeds]:  # seed by seed, so that a run cut short has whole seeds
        for n, f in best.items():
            if f is not None:
                out.append((next(a for a in iso_arms(p) if a.n_rollouts == n and a.lr_factor == f), seed))
    out += [(a, seed) for seed in p.seeds[: p.control_seeds] for a in control_arms(p)]
    return out


def run(s: study.StudySettings, p: Phase2Settings, root: Path, progress: bool = True, limit: int | None = None) -> int:
    """Every planned run not yet finished, in plan order (``limit``: at most that many); returns how many ran."""
    s.check()
    p.check()
    candidate = study.chosen(s, root)
    done = 0
    while limit is None or done < limit:
        todo = [(a, seed) for a, seed in plan(s, p, root) if not finished(root, candidate, a, seed)]
        if not todo:
            break
        run_one(s, p, root, *todo[0], progress)
        done += 1
    return done


def collect(s: study.StudySettings, p: Phase2Settings, root: Path) -> pd.DataFrame:
    """Every step's metrics of every started run: columns arm, label, role, N, prompts, lr, lr_factor, seed and
    run_arm's metrics."""
    candidate = study.chosen(s, root)
    frames = []
    for arm, seed in plan(s, p, root):
        path = arm_folder(root, candidate, arm, seed) / "metrics.csv"
        if path.exists():
            labels = dict(
                arm=arm.name, label=arm.label, role=arm.role, N=arm.n_rollouts, prompts=arm.prompts_per_step, lr=arm.lr
            )
            frames.append(pd.read_csv(path).assign(**labels, lr_factor=arm.lr_factor, seed=seed))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
