"""The paper's experiment at laptop scale: warm start, phase 1 (N=16 until the held-out score
plateaus), then phase 2 arms from that checkpoint at equal total generated samples.

Everything a run writes lands under ``runs_dir/<name>/seed<k>/``: the warm start and each arm's
checkpoint (Hugging Face format), metrics.csv per arm, and per-instance held-out scores. Calling
again resumes every unfinished piece and skips the finished ones.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from brorl_lib.core import atomic
from brorl_lib.core.validation import check_choice, check_int, check_int_list, check_positive, check_range
from brorl_lib.paper import reported as paper
from brorl_lib.paper import setup as paper_setup
from brorl_lib.rlvr import mass_balance, tasks, warm_start
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr.run import CHECKPOINT, ArmSettings, run_arm
from brorl_lib.rlvr.step import StepSettings
from brorl_lib.rlvr.tokenizer import build_tokenizer

TEST_INSTANCES = "test_instances.csv"  # held-out instances in the order of every score file
THEORY_SUPPORTS, THEORY_BATCHES = "theory_supports.csv", "theory_batches.csv"
THEORY_ROLLOUTS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # N values of the Theorem 1 analysis
_PAPER_ARMS = paper.arm_shapes()  # Table 1: method -> (N, prompts per step)
BASE_N = _PAPER_ARMS["ProRL"][0]  # the ProRL arm's rollouts per prompt
# ProRL takes this many times the prompts per step of every other arm (Table 1: 512 vs 128, so 4)
PROMPT_RATIO = _PAPER_ARMS["ProRL"][1] // _PAPER_ARMS["BroRL"][1]


@dataclass(frozen=True)
class ExperimentSettings:
    task_names: tuple[str, ...]
    difficulties: tuple[int, ...]  # one level per task
    n_train: int  # training instances drawn per task (duplicate prompts are dropped, so a few fewer may remain)
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
    eval_every: int  # phase-1 steps between held-out evaluations
    eval_points: int = 8  # held-out evaluations per phase-2 arm, evenly spaced in samples
    kl_coef: float = 0.0  # KL to the arm's starting policy (0: off)
    theory_prompts: int = 8  # training prompts whose response distribution is analysed at the phase-1 checkpoint
    theory_samples: int = 2048  # draws per analysed prompt that find its distinct responses
    theory_batches: int = 64  # random batches per prompt and N for Theorem 1
    model: tiny.TinyModelShape = field(default_factory=tiny.TinyModelShape)
    device: str = "cpu"

    def validate(self) -> None:
        if not self.task_names:
            raise ValueError("task_names is empty: name at least one of " + str(sorted(tasks.FAMILIES)))
        if len(self.difficulties) != len(self.task_names):
            raise ValueError(
                f"difficulties={list(self.difficulties)} must give one level per task in "
                f"task_names={list(self.task_names)}"
            )
        if len(set(self.task_names)) != len(self.task_names):
            raise ValueError(f"task_names={list(self.task_names)} names a task twice")
        for t, level in zip(self.task_names, self.difficulties):
            check_choice("task_names item", t, tasks.FAMILIES)
            check_choice(f"difficulty of {t}", level, tasks.FAMILIES[t].levels)
        for name in (
            "n_train",
            "n_test",
            "warm_start_steps",
            "phase1_prompts",
            "phase1_max_steps",
            "plateau_patience",
            "arm_prompts",
            "sample_budget",
            "mini_batches",
            "max_new_tokens",
            "eval_samples",
            "eval_every",
            "eval_points",
            "theory_prompts",
            "theory_samples",
            "theory_batches",
        ):
            check_int(name, getattr(self, name), low=1)
        for name in ("warm_start_lr", "base_lr", "temperature", "eval_temperature"):
            check_positive(name, getattr(self, name))
        check_range("plateau_tol", self.plateau_tol, low=0.0)
        check_range("kl_coef", self.kl_coef, low=0.0)
        check_choice("device", self.device.split(":")[0], ("cpu", "cuda"))
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} is not allowed here: no CUDA device is visible; use device='cpu'")
        self.model.check()
        check_arm_rollouts(self, "arm_rollouts", self.arm_rollouts)


def check_arm_rollouts(settings: ExperimentSettings, name: str, rollouts) -> None:
    """A list of distinct N >= 2, each arm spending exactly the sample budget in whole steps."""
    check_int_list(name, list(rollouts), low=2)
    if len(set(rollouts)) != len(rollouts):
        raise ValueError(f"{name}={list(rollouts)} names an N twice")
    for n in rollouts:
        if settings.sample_budget % (n * prompts_for(settings, n)):
            raise ValueError(
                f"sample_budget={settings.sample_budget} is not allowed: it must be a multiple of the "
                f"N={n} arm's samples per step ({n * prompts_for(settings, n)})"
            )


def prompts_for(settings: ExperimentSettings, n: int) -> int:
    """Prompts per step of the arm with N rollouts."""
    return settings.arm_prompts * (PROMPT_RATIO if n == BASE_N else 1)


def arm_lr(settings: ExperimentSettings, n: int) -> float:
    """Paper §4.2.1: sqrt of the samples-per-step ratio to the N=16 arm, mini-batch count fixed."""
    base = BASE_N * prompts_for(settings, BASE_N)
    return paper_setup.scaled_learning_rate(settings.base_lr, base, n * prompts_for(settings, n))


def data(settings: ExperimentSettings, seed: int) -> tuple[list[tasks.LaptopInstance], list[tasks.LaptopInstance]]:
    train, test = [], []
    for t, level in zip(settings.task_names, settings.difficulties):
        tr, te = tasks.make_split(t, level, settings.n_train, settings.n_test, seed)
        train += tr
        test += te
    return train, test


def _step(settings: ExperimentSettings, n: int) -> StepSettings:
    return StepSettings(
        n_rollouts=n,
        temperature=settings.temperature,
        max_new_tokens=settings.max_new_tokens,
        mini_batches=settings.mini_batches,
        kl_coef=settings.kl_coef,
    )


def warm_start_model(settings: ExperimentSettings, train, seed: int, folder: Path, progress: bool = False) -> Path:
    """Supervised warm start, saved once (skipped when already there) and atomically, so an interruption
    never leaves a half-saved model behind."""
    if not (folder / "config.json").exists():
        tok = build_tokenizer()
        model = tiny.build_model(settings.model, tok, seed).to(settings.device)
        losses = warm_start.train_sft(
            model, tok, train, settings.warm_start_steps, 32, settings.warm_start_lr, seed, progress
        )

        def fill(tmp: Path) -> None:
            tiny.save(model, tok, tmp)
            (tmp / "warm_start_losses.json").write_text(json.dumps(losses))

        atomic.write_folder(folder, fill)
    return folder


def _plateau(settings: ExperimentSettings, metrics: pd.DataFrame) -> bool:
    """No held-out gain of plateau_tol over the last plateau_patience evaluations."""
    scores = metrics["test_score"].dropna().to_numpy()
    k = settings.plateau_patience
    return len(scores) > k and scores[-k:].max() < scores[:-k].max() + settings.plateau_tol


def phase1_arm(settings: ExperimentSettings, seed: int) -> ArmSettings:
    """Phase 1 of one seed: the N=16 arm, at most phase1_max_steps steps."""
    return ArmSettings(
        f"seed {seed} phase 1",
        _step(settings, BASE_N),
        settings.phase1_prompts,
        settings.base_lr,
        sample_budget=settings.phase1_max_steps * BASE_N * settings.phase1_prompts,
        eval_every=settings.eval_every,
        checkpoint_every=settings.eval_every,
        seed=seed,
    )


def phase2_arms(
    settings: ExperimentSettings, seed: int, base_lr_rollouts: tuple[int, ...] = ()
) -> list[tuple[str, int, str, ArmSettings]]:
    """(arm name, N, folder, settings) of every phase-2 arm of one seed: the square-root rule's arms, then the
    ablation arms at the N=16 arm's learning rate."""
    arms = [(f"N={n}", n, arm_lr(settings, n), f"arm_N{n}") for n in settings.arm_rollouts]
    arms += [(f"N={n} base lr", n, settings.base_lr, f"arm_N{n}_base_lr") for n in base_lr_rollouts]
    out = []
    for name, n, lr, folder in arms:
        every = arm_eval_every(settings, n)
        out.append(
            (
                name,
                n,
                folder,
                ArmSettings(
                    f"seed {seed} {name}",
                    _step(settings, n),
                    prompts_for(settings, n),
                    lr,
                    settings.sample_budget,
                    every,
                    every,
                    seed,
                ),
            )
        )
    return out


def mass_balance_settings(settings: ExperimentSettings, seed: int) -> mass_balance.MassBalanceSettings:
    """The Theorem 1 analysis at the end of one seed's phase 1."""
    return mass_balance.MassBalanceSettings(
        settings.theory_prompts,
        settings.theory_samples,
        settings.theory_batches,
        THEORY_ROLLOUTS,
        settings.temperature,
        settings.max_new_tokens,
        seed,
    )


def check_run(settings: ExperimentSettings, seeds: list[int], base_lr_rollouts: tuple[int, ...] = ()) -> None:
    """Every check a run makes, before any work: the settings, the seeds, and the settings of every arm and
    of the analysis (ValueError naming the setting)."""
    settings.validate()
    check_int_list("seeds", list(seeds), low=0)
    if base_lr_rollouts:
        check_arm_rollouts(settings, "base_lr_rollouts", base_lr_rollouts)
    for seed in seeds:
        phase1_arm(settings, seed)
        phase2_arms(settings, seed, base_lr_rollouts)
        mass_balance_settings(settings, seed)


def phase1(
    settings: ExperimentSettings, start: Path, train, test, seed: int, folder: Path, progress: bool
) -> pd.DataFrame:
    """N=16 in chunks of eval_every steps until the held-out score stops improving (or max steps)."""
    done = folder / "phase1_done.json"
    if done.exists():  # ended earlier: a re-run must not train it further
        return pd.read_csv(folder / "metrics.csv")
    arm = phase1_arm(settings, seed)
    kwargs = dict(
        eval_samples=settings.eval_samples,
        eval_temperature=settings.eval_temperature,
        progress=progress,
        device=settings.device,
    )
    # resuming: the saved chunks may already have reached the plateau
    chunk = 0 if (folder / CHECKPOINT / "state.json").exists() else settings.eval_every
    while True:
        metrics = run_arm(start, train, test, arm, folder, max_steps=chunk, **kwargs)
        chunk = settings.eval_every
        if len(metrics) == 1:  # nothing trained yet
            continue
        plateau = _plateau(settings, metrics)
        if plateau or metrics["step"].iloc[-1] >= settings.phase1_max_steps:
            atomic.write_text(done, json.dumps({"step": int(metrics["step"].iloc[-1]), "plateau": bool(plateau)}))
            return metrics


def arm_eval_every(settings: ExperimentSettings, n: int) -> int:
    """Steps between evaluations of the N arm: eval_points evenly spaced over its sample budget."""
    steps = -(-settings.sample_budget // (n * prompts_for(settings, n)))
    return max(1, steps // settings.eval_points)


def _settings_record(settings: ExperimentSettings) -> dict:
    return json.loads(json.dumps(asdict(settings)))  # tuples as lists, as read back from disk


def _claim_folder(root: Path, settings: ExperimentSettings) -> None:
    """A run folder belongs to one set of settings: refuse to mix results of different settings."""
    record = root / "settings.json"
    if record.exists():
        old = json.loads(record.read_text())
        changed = sorted(
            k for k in set(old) | set(_settings_record(settings)) if old.get(k) != _settings_record(settings).get(k)
        )
        if changed:
            raise ValueError(
                f"{root} holds a run with other settings (differs in {changed}); "
                "choose another runs_dir or delete that folder"
            )
    root.mkdir(parents=True, exist_ok=True)
    atomic.write_text(record, json.dumps(_settings_record(settings), indent=2))


def run(
    settings: ExperimentSettings,
    seeds: list[int],
    runs_dir: Path,
    progress: bool = True,
    base_lr_rollouts: tuple[int, ...] = (),
) -> pd.DataFrame:
    """Every seed's phase 1 and phase-2 arms; returns all metrics with columns seed, phase, arm, N, lr, folder.

    ``base_lr_rollouts`` adds ablation arms: the same N, prompts and samples, but the N=16 arm's learning
    rate instead of the square-root rule (arm "N=<n> base lr", folder ``arm_N<n>_base_lr``)."""
    check_run(settings, seeds, base_lr_rollouts)
    splits = {seed: data(settings, seed) for seed in seeds}  # an infeasible split stops the run before any training
    frames = []
    for seed in seeds:
        root = Path(runs_dir) / f"seed{seed}"
        train, test = splits[seed]
        _claim_folder(root, settings)
        if not (root / TEST_INSTANCES).exists():
            atomic.write_text(
                root / TEST_INSTANCES,
                pd.DataFrame(
                    {
                        "task": [i.task for i in test],
                        "prompt": [i.prompt for i in test],
                        "answer": [i.answer for i in test],
                    }
                ).to_csv(index=False, lineterminator="\n"),
            )
        start = warm_start_model(settings, train, seed, root / "warm_start", progress)
        p1 = phase1(settings, start, train, test, seed, root / "phase1", progress)
        frames.append(p1.assign(seed=seed, phase=1, arm="phase 1", N=BASE_N, lr=settings.base_lr, folder="phase1"))
        theory_at_phase1_end(settings, train, seed, root)
        for name, n, folder, arm in phase2_arms(settings, seed, base_lr_rollouts):
            m = run_arm(
                root / "phase1" / "checkpoint",
                train,
                test,
                arm,
                root / folder,
                settings.eval_samples,
                settings.eval_temperature,
                progress=progress,
                device=settings.device,
            )
            frames.append(m.assign(seed=seed, phase=2, arm=name, N=n, lr=arm.lr, folder=folder))
    return pd.concat(frames, ignore_index=True)


def theory_at_phase1_end(settings: ExperimentSettings, train, seed: int, root: Path) -> None:
    """Theorem 1's quantities on the phase-1 checkpoint's own responses, computed once per seed."""
    if (root / THEORY_BATCHES).exists():
        return
    model, tok = tiny.load(root / "phase1" / "checkpoint", settings.device)
    supports, batches = mass_balance.analyse(model.eval(), tok, train, mass_balance_settings(settings, seed))
    atomic.write_text(root / THEORY_SUPPORTS, supports.to_csv(index=False, lineterminator="\n"))
    atomic.write_text(root / THEORY_BATCHES, batches.to_csv(index=False, lineterminator="\n"))


def final_instance_scores(runs_dir: Path, seed: int, folder: str) -> np.ndarray:
    """Per-instance held-out scores at the last evaluation of ``folder`` (phase1 or arm_N<n>)."""
    files = sorted(
        (Path(runs_dir) / f"seed{seed}" / folder).glob("test_scores_step*.npy"),
        key=lambda p: int(p.stem.removeprefix("test_scores_step")),
    )
    if not files:
        raise ValueError(f"no held-out scores under {Path(runs_dir) / f'seed{seed}' / folder}")
    return np.load(files[-1])
