"""The paper's experiment at laptop scale: warm start, phase 1 (ProRL, N=16, until held-out pass@1 stops
rising), then phase-2 arms from that one checkpoint (weights and optimizer state) at equal generated
samples, each under several seeds.

Layout of ``runs_dir`` (every piece written atomically; calling again resumes what is unfinished):

* ``settings.json``: the shared settings (tasks, model, warm start, phase 1, evaluation protocol);
* ``test_instances.csv``, ``task_screen.csv``: the held-out set and the tasks kept by the screen;
* ``warm_start/``, ``phase1/`` (arm.json, metrics.csv, plateau.json, checkpoint/, pass1_step<k>.npy, final_eval.npz);
* ``theory_supports.csv``, ``theory_batches.csv``: Theorem 1 on the phase-1 checkpoint's responses;
* ``arms/<arm key>/seed<k>/``: one phase-2 arm under one seed (arm.json, metrics.csv, pass1_step<k>.npy,
  final_eval.npz; a finished arm keeps no weights, phase 1 keeps its checkpoint, the start of every arm).

The split, the warm start and phase 1 use seed 0 (``SHARED_SEED``); ``seeds`` are the phase-2 seeds, which
set the prompts drawn, the rollouts sampled and the evaluation's draws of each arm.
"""

from __future__ import annotations

import io
import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from brorl_lib.core import atomic, stats
from brorl_lib.core.validation import check_choice, check_int, check_int_list, check_positive, check_range
from brorl_lib.rlvr import arms as arm_design
from brorl_lib.rlvr import mass_balance, tasks, warm_start
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr.run import CHECKPOINT, ArmSettings, EvalProtocol, correct_counts, run_arm
from brorl_lib.rlvr.step import StepSettings
from brorl_lib.rlvr.tokenizer import build_tokenizer

SHARED_SEED = 0  # seed of the split, the warm start and phase 1
TEST_INSTANCES, TASK_SCREEN = "test_instances.csv", "task_screen.csv"
THEORY_SUPPORTS, THEORY_BATCHES = "theory_supports.csv", "theory_batches.csv"
THEORY_ROLLOUTS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # N values of the Theorem 1 analysis
PHASE1, ARMS, FINAL_EVAL, PLATEAU = "phase1", "arms", "final_eval.npz", "plateau.json"
BASE_N = arm_design.BASE_N
WARM_START_BATCH = 32  # supervised examples per warm-start step (our choice)
# settings that only phase 2 uses: changing them keeps the warm start and phase 1 of a run folder
PHASE2_ONLY = ("design", "sample_budget", "eval_points", "passk_samples", "passk_instances", "hard_below")


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
    eval_every: int  # phase-1 steps between held-out evaluations
    plateau_window: int  # phase 1 ends once the slope of pass@1 over this many evaluations ...
    plateau_alpha: float  # ... is not significantly positive at this level (one-sided)
    design: arm_design.ArmDesign
    sample_budget: int  # generated samples per phase-2 arm, counted before the dynamic-sampling filter
    mini_batches: int
    temperature: float  # rollout temperature in training
    max_new_tokens: int
    protocol: EvalProtocol
    eval_points: int = 4  # held-out evaluations per phase-2 arm, evenly spaced in samples
    screen_samples: int = 64  # samples per held-out instance in the task screen
    screen_min_solved: float = 0.05  # a task is kept when at least this share of its instances is ever solved
    passk_samples: int = 256  # samples per hard instance for pass@k
    passk_instances: int = 200  # at most this many hard instances (the first by index) get pass@k
    hard_below: float = 0.5  # an instance is hard when the plateau model's pass@1 on it is below this
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
            "eval_every",
            "mini_batches",
            "max_new_tokens",
            "eval_points",
            "screen_samples",
            "passk_samples",
            "passk_instances",
            "theory_prompts",
            "theory_samples",
            "theory_batches",
        ):
            check_int(name, getattr(self, name), low=1)
        check_int("plateau_window", self.plateau_window, low=3)
        for name in ("warm_start_lr", "temperature"):
            check_positive(name, getattr(self, name))
        for name in ("plateau_alpha", "screen_min_solved", "hard_below"):
            check_range(name, getattr(self, name), low=0.0, high=1.0)
        check_range("kl_coef", self.kl_coef, low=0.0)
        check_choice("device", self.device.split(":")[0], ("cpu", "cuda"))
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} is not allowed here: no CUDA device is visible; use device='cpu'")
        self.model.check()
        arm_design.check_equal_samples(all_arms(self), self.sample_budget)


def all_arms(settings: ExperimentSettings) -> list[arm_design.Arm]:
    return arm_design.main_arms(settings.design) + arm_design.pilot_arms(settings.design)


def _step(settings: ExperimentSettings, n: int) -> StepSettings:
    return StepSettings(
        n_rollouts=n,
        temperature=settings.temperature,
        max_new_tokens=settings.max_new_tokens,
        mini_batches=settings.mini_batches,
        kl_coef=settings.kl_coef,
    )


def arm_settings(settings: ExperimentSettings, arm: arm_design.Arm, seed: int) -> ArmSettings:
    """One phase-2 arm under one seed: eval_points evaluations evenly spaced over its sample budget."""
    steps = settings.sample_budget // arm.samples_per_step
    every = max(1, steps // settings.eval_points)
    return ArmSettings(
        f"seed {seed} {arm.label}",
        _step(settings, arm.n),
        arm.prompts,
        arm.lr,
        settings.sample_budget,
        every,
        every,
        seed,
    )


def phase1_arm(settings: ExperimentSettings) -> ArmSettings:
    """Phase 1: the ProRL arm's N and learning rate at phase1_prompts, at most phase1_max_steps steps."""
    return ArmSettings(
        "phase 1",
        _step(settings, BASE_N),
        settings.phase1_prompts,
        settings.design.base_lr,
        sample_budget=settings.phase1_max_steps * BASE_N * settings.phase1_prompts,
        eval_every=settings.eval_every,
        checkpoint_every=settings.eval_every,
        seed=SHARED_SEED,
    )


def mass_balance_settings(settings: ExperimentSettings) -> mass_balance.MassBalanceSettings:
    """The Theorem 1 analysis at the end of phase 1."""
    return mass_balance.MassBalanceSettings(
        settings.theory_prompts,
        settings.theory_samples,
        settings.theory_batches,
        THEORY_ROLLOUTS,
        settings.temperature,
        settings.max_new_tokens,
        SHARED_SEED,
    )


def check_run(settings: ExperimentSettings, seeds: list[int]) -> None:
    """Every check a run makes, before any work: the settings, the seeds (at least 2: the seed is the unit of
    the test), and the settings of every arm and of the analysis (ValueError naming the setting)."""
    settings.validate()
    check_int_list("seeds", list(seeds), low=0)
    if len(seeds) < 2:
        raise ValueError(f"seeds={list(seeds)} is not allowed: the arms are compared across seeds, so give at least 2")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={list(seeds)} names a seed twice")
    phase1_arm(settings)
    for arm in all_arms(settings):
        for seed in seeds:
            arm_settings(settings, arm, seed)
    mass_balance_settings(settings)


def data(settings: ExperimentSettings) -> tuple[list[tasks.LaptopInstance], list[tasks.LaptopInstance]]:
    """Training and held-out instances of every task; a task with no held-out instance stops the run."""
    train, test = [], []
    for t, level in zip(settings.task_names, settings.difficulties):
        tr, te = tasks.make_split(t, level, settings.n_train, settings.n_test, SHARED_SEED)
        train += tr
        test += te
    check_disjoint(train, test)
    return train, test


def check_disjoint(train: list[tasks.LaptopInstance], test: list[tasks.LaptopInstance]) -> None:
    """Train and held-out sets share no prompt (a prompt fixes its answer)."""
    shared = {i.prompt for i in train} & {i.prompt for i in test}
    if shared:
        raise ValueError(f"{len(shared)} held-out prompts also occur in training, e.g. {sorted(shared)[:3]}")


def warm_start_model(settings: ExperimentSettings, train, folder: Path, progress: bool = False) -> Path:
    """Supervised warm start, saved once (skipped when already there) and atomically, so an interruption
    never leaves a half-saved model behind."""
    if not (folder / "config.json").exists():
        tok = build_tokenizer()
        model = tiny.build_model(settings.model, tok, SHARED_SEED).to(settings.device)
        losses = warm_start.train_sft(
            model,
            tok,
            train,
            settings.warm_start_steps,
            WARM_START_BATCH,
            settings.warm_start_lr,
            SHARED_SEED,
            progress,
        )

        def fill(tmp: Path) -> None:
            tiny.save(model, tok, tmp)
            (tmp / "warm_start_losses.json").write_text(json.dumps(losses))

        atomic.write_folder(folder, fill)
    return folder


def task_screen(settings: ExperimentSettings, start: Path, test, root: Path) -> pd.DataFrame:
    """Per task: the share of held-out instances the warm start solves at least once in screen_samples samples
    at the rollout temperature, and whether the task is kept (share >= screen_min_solved)."""
    path = root / TASK_SCREEN
    if path.exists():
        return pd.read_csv(path)
    model, tok = tiny.load(start, settings.device)
    protocol = EvalProtocol(settings.screen_samples, settings.temperature, 1.0, settings.max_new_tokens)
    solved = correct_counts(model, tok, test, settings.screen_samples, protocol, SHARED_SEED) > 0
    names = np.array([i.task for i in test])
    table = pd.DataFrame(
        [
            {"task": t, "instances": int((names == t).sum()), "solved_share": float(solved[names == t].mean())}
            for t in settings.task_names
        ]
    )
    table["kept"] = table["solved_share"] >= settings.screen_min_solved
    if not table["kept"].any():
        raise ValueError(
            f"no task passes the screen: every task's share of held-out instances solved in {settings.screen_samples} "
            f"samples is below screen_min_solved={settings.screen_min_solved} ({table.to_dict('records')}); "
            "lower the difficulties or train the warm start longer"
        )
    atomic.write_text(path, table.to_csv(index=False, lineterminator="\n"))
    return table


def plateau_test(metrics: pd.DataFrame, settings: ExperimentSettings) -> dict | None:
    """Slope of held-out pass@1 against step over the last plateau_window evaluations; None until there are
    that many. ``plateau`` is True when the slope is not significantly positive (one-sided p > plateau_alpha)."""
    evals = metrics.dropna(subset=["pass1"]).tail(settings.plateau_window)
    if len(evals) < settings.plateau_window:
        return None
    test = stats.slope_test(evals["step"], evals["pass1"])
    return {**test, "window_start": int(evals["step"].iloc[0]), "plateau": test["p_positive"] > settings.plateau_alpha}


def phase1(settings: ExperimentSettings, start: Path, train, test, folder: Path, progress: bool) -> pd.DataFrame:
    """N=16 in chunks of eval_every steps until the plateau test holds (or phase1_max_steps)."""
    done = folder / PLATEAU
    if done.exists():  # ended earlier: a re-run must not train it further
        return pd.read_csv(folder / "metrics.csv")
    arm = phase1_arm(settings)
    chunk = 0 if (folder / CHECKPOINT / "state.json").exists() else settings.eval_every
    while True:
        metrics = run_arm(
            start,
            train,
            test,
            arm,
            folder,
            settings.protocol,
            max_steps=chunk,
            progress=progress,
            device=settings.device,
        )
        chunk = settings.eval_every
        if len(metrics) == 1:  # nothing trained yet
            continue
        test_result = plateau_test(metrics, settings)
        last = int(metrics["step"].iloc[-1])
        if (test_result and test_result["plateau"]) or last >= settings.phase1_max_steps:
            record = {"step": last, "plateau": bool(test_result and test_result["plateau"]), **(test_result or {})}
            atomic.write_text(done, json.dumps(record, indent=2))
            return metrics


def hard_items(folder: Path, hard_below: float, limit: int) -> np.ndarray:
    """Indices of the held-out instances the phase-1 checkpoint mostly fails (pass@1 below ``hard_below``)."""
    return np.flatnonzero(last_pass1(folder) < hard_below)[:limit]


def final_eval(settings: ExperimentSettings, model_dir: Path, test, items: np.ndarray, folder: Path, seed: int) -> None:
    """Greedy correctness of every held-out instance and, on the hard ones, correct counts of passk_samples
    samples (for pass@k up to k = passk_samples), saved once as final_eval.npz."""
    path = folder / FINAL_EVAL
    if path.exists():
        return
    model, tok = tiny.load(model_dir, settings.device)
    greedy = correct_counts(model, tok, test, 1, settings.protocol, seed, greedy=True)
    hard = [test[i] for i in items]
    counts = correct_counts(model, tok, hard, settings.passk_samples, settings.protocol, seed) if hard else []
    buffer = io.BytesIO()
    np.savez(buffer, greedy=greedy, items=items, counts=np.asarray(counts, dtype=np.int64))
    atomic.write_bytes(path, buffer.getvalue())


def _shared_record(settings: ExperimentSettings) -> dict:
    record = json.loads(json.dumps(asdict(settings)))  # tuples as lists, as read back from disk
    return {k: v for k, v in record.items() if k not in PHASE2_ONLY}


def _claim(record_path: Path, record: dict, what: str) -> None:
    """A folder belongs to one set of settings: refuse to mix results of different settings."""
    if record_path.exists():
        old = json.loads(record_path.read_text())
        changed = sorted(k for k in set(old) | set(record) if old.get(k) != record.get(k))
        if changed:
            raise ValueError(
                f"{record_path.parent} holds {what} with other settings (differs in {changed}); "
                "choose another runs_dir or delete that folder"
            )
        return  # the same settings: leave the record (and its time stamp) as it is
    record_path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(record_path, json.dumps(record, indent=2))


def run(settings: ExperimentSettings, seeds: list[int], runs_dir: Path, progress: bool = True) -> pd.DataFrame:
    """Warm start, screen, phase 1, the Theorem 1 analysis, then every seed's phase-2 arms and the learning-rate
    pilot (first seed); returns all metrics (``collect``)."""
    check_run(settings, seeds)
    root = Path(runs_dir)
    train, test = data(settings)  # an infeasible split stops the run before any training
    _claim(root / "settings.json", _shared_record(settings), "a run")
    start = warm_start_model(settings, train, root / "warm_start", progress)
    screen = task_screen(settings, start, test, root)
    kept = set(screen.loc[screen["kept"], "task"])
    train, test = [i for i in train if i.task in kept], [i for i in test if i.task in kept]
    if not (root / TEST_INSTANCES).exists():
        table = pd.DataFrame(
            {"task": [i.task for i in test], "prompt": [i.prompt for i in test], "answer": [i.answer for i in test]}
        )
        atomic.write_text(root / TEST_INSTANCES, table.to_csv(index=False, lineterminator="\n"))
    # phase 1 also reads design.base_lr (a phase-2 setting above): its folder records its own settings
    _claim(root / PHASE1 / "arm.json", json.loads(json.dumps(asdict(phase1_arm(settings)))), "phase 1")
    phase1(settings, start, train, test, root / PHASE1, progress)
    checkpoint = root / PHASE1 / CHECKPOINT
    items = hard_items(root / PHASE1, settings.hard_below, settings.passk_instances)
    final_eval(settings, checkpoint, test, items, root / PHASE1, SHARED_SEED)
    theory_at_phase1_end(settings, train, root)
    for arm, seed in plan(settings, seeds):
        folder = arm_folder(root, arm, seed)
        chosen = arm_settings(settings, arm, seed)
        _claim(folder / "arm.json", json.loads(json.dumps(asdict(chosen))), "an arm")
        run_arm(checkpoint, train, test, chosen, folder, settings.protocol, progress=progress, device=settings.device)
        final_eval(settings, folder / CHECKPOINT, test, items, folder, seed)
        shutil.rmtree(folder / CHECKPOINT, ignore_errors=True)  # finished and evaluated: its weights are not needed
    return collect(settings, seeds, root)


def plan(settings: ExperimentSettings, seeds: list[int]) -> list[tuple[arm_design.Arm, int]]:
    """(arm, seed) in the order they run: seed by seed (so a cut-short run has whole seeds), then the pilot."""
    out = [(a, s) for s in seeds for a in arm_design.main_arms(settings.design)]
    return out + [(a, seeds[0]) for a in arm_design.pilot_arms(settings.design)]


def arm_folder(root: Path, arm: arm_design.Arm, seed: int) -> Path:
    return Path(root) / ARMS / arm.key / f"seed{seed}"


def collect(settings: ExperimentSettings, seeds: list[int], runs_dir: Path) -> pd.DataFrame:
    """Every step's metrics of phase 1 and of each finished or started phase-2 arm, as saved under ``runs_dir``:
    columns phase, seed, arm (its key), label, role, N, prompts, lr, lr_factor and run_arm's metrics."""
    root = Path(runs_dir)
    frames = [
        pd.read_csv(root / PHASE1 / "metrics.csv").assign(
            phase=1,
            seed=SHARED_SEED,
            arm=PHASE1,
            label="phase 1 (ProRL N=16)",
            role="phase 1",
            N=BASE_N,
            prompts=settings.phase1_prompts,
            lr=settings.design.base_lr,
            lr_factor=1.0,
        )
    ]
    for arm, seed in plan(settings, seeds):
        path = arm_folder(root, arm, seed) / "metrics.csv"
        if path.exists():
            frames.append(
                pd.read_csv(path).assign(
                    phase=2,
                    seed=seed,
                    arm=arm.key,
                    label=arm.label,
                    role=arm.role,
                    N=arm.n,
                    prompts=arm.prompts,
                    lr=arm.lr,
                    lr_factor=arm.lr_factor,
                )
            )
    return pd.concat(frames, ignore_index=True)


def theory_at_phase1_end(settings: ExperimentSettings, train, root: Path) -> None:
    """Theorem 1's quantities on the phase-1 checkpoint's own responses, computed once."""
    if (root / THEORY_BATCHES).exists():
        return
    model, tok = tiny.load(root / PHASE1 / CHECKPOINT, settings.device)
    supports, batches = mass_balance.analyse(model.eval(), tok, train, mass_balance_settings(settings))
    atomic.write_text(root / THEORY_SUPPORTS, supports.to_csv(index=False, lineterminator="\n"))
    atomic.write_text(root / THEORY_BATCHES, batches.to_csv(index=False, lineterminator="\n"))


def pass1_files(folder: Path) -> list[tuple[int, Path]]:
    """(step, file) of every held-out evaluation saved in an arm folder, by step."""
    files = Path(folder).glob("pass1_step*.npy")
    return sorted((int(p.stem.removeprefix("pass1_step")), p) for p in files)


def last_pass1(folder: Path) -> np.ndarray:
    """Per-instance held-out pass@1 at the last evaluation saved in ``folder``."""
    files = pass1_files(folder)
    if not files:
        raise ValueError(f"no held-out evaluations under {folder}")
    return np.load(files[-1][1])
