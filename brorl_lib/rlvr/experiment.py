"""The paper's experiment at laptop scale, in the paper's regime: a screen picks the configuration (tasks,
difficulty, model size) whose plateau leaves headroom and has low-q prompts; phase 1 trains it to a real
plateau; phase-2 arms continue from that checkpoint (weights and optimizer state) at equal generated samples,
evaluated at several sample budgets, under several seeds; a second, independently trained plateau repeats
ProRL against BroRL.

Layout of ``runs_dir`` (every piece written atomically; calling again resumes what is unfinished):

* ``settings.json``: the shared settings; ``screen.csv``: the candidates at their screen plateau, one chosen;
* ``configs/<candidate>/instances.csv``: its held-out test and validation instances (split by seed 0);
* ``configs/<candidate>/plateau<s>/``: warm start and phase 1 under phase-1 seed ``s`` (``warm_start/``,
  ``phase1/`` with arm.json, metrics.csv, plateau.json, checkpoint/, pass1_step<k>.npy, regime_step<k>.json,
  plateau_eval.npz, final_eval.npz), Theorem 1's tables, and ``arms/<arm key>/seed<k>/`` (arm.json,
  metrics.csv, pass1_step<k>.npy, val_step<k>.npy, final_eval.npz; a finished arm keeps no weights).

Seeds: the split always uses seed 0; a plateau's seed sets its warm start and phase 1; ``seeds`` are the
phase-2 seeds (prompts drawn, rollouts sampled, evaluation draws). The ProRL arm's first seed at the first
plateau is also the plateau's confirmation: ProRL continued for phase 2's samples.
"""

from __future__ import annotations

import functools
import io
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from brorl_lib.core import atomic
from brorl_lib.core.validation import check_choice, check_int, check_int_list, check_positive, check_range
from brorl_lib.rlvr import arms as arm_design
from brorl_lib.rlvr import mass_balance, plateau, tasks
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr.candidates import Candidate
from brorl_lib.rlvr.run import CHECKPOINT, ArmSettings, EvalProtocol, correct_counts, run_arm
from brorl_lib.rlvr.step import StepSettings

SPLIT_SEED = 0  # seed of the train / test / validation split
INSTANCES, SCREEN, SETTINGS = "instances.csv", "screen.csv", "settings.json"
THEORY_SUPPORTS, THEORY_BATCHES = "theory_supports.csv", "theory_batches.csv"
THEORY_ROLLOUTS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)  # N values of the Theorem 1 analysis
SCREEN_ROLLOUTS = (16,)  # the screen asks Theorem 1 about N=16 only
PHASE1, ARMS, FINAL_EVAL = "phase1", "arms", "final_eval.npz"
BASE_N = arm_design.BASE_N
# the screen's choice (issue of the design, our thresholds): headroom and low-q prompts at the plateau
PASS1_RANGE, MIN_LOW_Q_SHARE = (0.35, 0.85), 0.10
NO_SAMPLE_CAP = 10**15  # phase 1 is bounded by steps, not samples
# settings that shape neither the screen nor a plateau: changing them keeps a run folder's plateaus (each arm
# folder records its own settings)
PHASE2_ONLY = ("design", "budgets", "passk_instances", "hard_below", "plateau_seeds", "second_plateau_seeds")


@dataclass(frozen=True)
class ExperimentSettings:
    candidates: tuple[Candidate, ...]  # the screen's configurations; the first wins ties
    n_train: int  # training instances drawn per task (duplicate prompts are dropped)
    n_test: int  # held-out test instances per task
    n_val: int  # validation instances per task (choose learning rates; disjoint from test and training)
    warm_start_steps: int
    warm_start_lr: float
    phase1_prompts: int  # kept prompts per phase-1 step (N=16)
    phase1_max_steps: int  # cap of the chosen configuration's phase 1
    screen_max_steps: int  # cap of every candidate's phase 1 in the screen
    eval_every: int  # phase-1 steps between held-out evaluations
    plateau_rule: plateau.PlateauRule
    design: arm_design.ArmDesign
    budgets: tuple[int, ...]  # generated samples per phase-2 arm at which it is evaluated; the last is the endpoint
    max_rounds: int  # dynamic sampling's generation rounds per step (verl's max_num_gen_batches)
    mini_batches: int
    temperature: float  # rollout temperature in training
    max_new_tokens: int
    protocol: EvalProtocol
    q_prompts: int = 256  # training prompts whose correct mass q is estimated at a plateau
    q_samples: int = 256  # draws per such prompt
    passk_samples: int = 256  # samples per held-out instance at the plateau (bands) and per hard instance (pass@k)
    passk_instances: int = 200  # at most this many hard instances (the first by index) get pass@k
    hard_below: float = 0.5  # an instance is hard when the plateau model's pass@1 on it is below this
    kl_coef: float = 0.0
    theory_prompts: int = 8
    theory_samples: int = 2048
    theory_batches: int = 64
    plateau_seeds: tuple[int, ...] = (0, 1)  # phase-1 seeds; the first is the main plateau
    second_plateau_seeds: int = 3  # the first this many phase-2 seeds run at every further plateau
    device: str = "cpu"

    def validate(self) -> None:
        if not self.candidates:
            raise ValueError("candidates is empty: give at least one configuration")
        if len({c.key for c in self.candidates}) != len(self.candidates):
            raise ValueError(f"candidates={[c.spec for c in self.candidates]} names a configuration twice")
        for c in self.candidates:
            c.model.check()
        for name in (
            "n_train",
            "n_test",
            "n_val",
            "warm_start_steps",
            "phase1_prompts",
            "phase1_max_steps",
            "screen_max_steps",
            "eval_every",
            "max_rounds",
            "mini_batches",
            "max_new_tokens",
            "q_prompts",
            "q_samples",
            "passk_samples",
            "passk_instances",
            "theory_prompts",
            "theory_samples",
            "theory_batches",
            "second_plateau_seeds",
        ):
            check_int(name, getattr(self, name), low=1)
        for name in ("phase1_max_steps", "screen_max_steps"):
            if getattr(self, name) % self.eval_every:
                raise ValueError(f"{name}={getattr(self, name)} must be a multiple of eval_every={self.eval_every}")
        if self.screen_max_steps > self.phase1_max_steps:
            raise ValueError(
                f"screen_max_steps={self.screen_max_steps} must not exceed phase1_max_steps={self.phase1_max_steps}"
            )
        check_int("plateau_window", self.plateau_rule.window, low=2)
        evaluations = self.phase1_max_steps // self.eval_every
        if 2 * self.plateau_rule.window > evaluations:
            raise ValueError(
                f"plateau_window={self.plateau_rule.window} is not allowed: the test compares two windows of "
                f"evaluations and phase 1 makes at most {evaluations} (phase1_max_steps / eval_every); "
                f"allowed at most {evaluations // 2}"
            )
        for name in ("warm_start_lr", "temperature"):
            check_positive(name, getattr(self, name))
        check_range("plateau_alpha", self.plateau_rule.alpha, low=0.0, high=1.0)
        check_range("plateau_min_rise", self.plateau_rule.min_rise, low=0.0, high=1.0)
        check_range("hard_below", self.hard_below, low=0.0, high=1.0)
        check_range("kl_coef", self.kl_coef, low=0.0)
        check_int_list("plateau_seeds", list(self.plateau_seeds), low=0)
        if not self.plateau_seeds or len(set(self.plateau_seeds)) != len(self.plateau_seeds):
            raise ValueError(f"plateau_seeds={list(self.plateau_seeds)}: give at least one seed, each once")
        check_choice("device", self.device.split(":")[0], ("cpu", "cuda"))
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} is not allowed here: no CUDA device is visible; use device='cpu'")
        arm_design.check_budgets(all_arms(self), list(self.budgets))

    def chosen(self, runs_dir: Path) -> Candidate:
        """The candidate the screen chose (the only one when there is one)."""
        if len(self.candidates) == 1:
            return self.candidates[0]
        table = pd.read_csv(Path(runs_dir) / SCREEN)
        key = table.loc[table["chosen"], "candidate"].iloc[0]
        return next(c for c in self.candidates if c.key == key)


def all_arms(settings: ExperimentSettings) -> list[arm_design.Arm]:
    return arm_design.main_arms(settings.design) + arm_design.pilot_arms(settings.design)


def paper_arms(settings: ExperimentSettings) -> list[arm_design.Arm]:
    """ProRL and the largest-N arm at their rule's learning rate: the arms repeated at every plateau."""
    ends = (BASE_N, max(settings.design.rollouts))
    return [a for a in arm_design.main_arms(settings.design) if a.role in ("paper", "dose") and a.n in ends]


def step_settings(settings: ExperimentSettings, n: int) -> StepSettings:
    return StepSettings(
        n_rollouts=n,
        temperature=settings.temperature,
        max_new_tokens=settings.max_new_tokens,
        mini_batches=settings.mini_batches,
        kl_coef=settings.kl_coef,
        max_rounds=settings.max_rounds,
    )


def arm_settings(settings: ExperimentSettings, arm: arm_design.Arm, seed: int) -> ArmSettings:
    """One phase-2 arm under one seed: evaluated at every budget, stopped at the last."""
    return ArmSettings(
        f"seed {seed} {arm.label}",
        step_settings(settings, arm.n),
        arm.prompts,
        arm.lr,
        sample_budget=settings.budgets[-1],
        eval_every=0,
        checkpoint_every=max(1, settings.eval_every),
        seed=seed,
        eval_budgets=tuple(settings.budgets),
    )


def phase1_arm(settings: ExperimentSettings, seed: int) -> ArmSettings:
    """Phase 1: the ProRL arm's N and learning rate at phase1_prompts, bounded by steps."""
    return ArmSettings(
        "phase 1",
        step_settings(settings, BASE_N),
        settings.phase1_prompts,
        settings.design.base_lr,
        sample_budget=NO_SAMPLE_CAP,
        eval_every=settings.eval_every,
        checkpoint_every=settings.eval_every,
        seed=seed,
    )


def theory_settings(settings: ExperimentSettings, rollouts: tuple[int, ...], seed: int):
    return mass_balance.MassBalanceSettings(
        settings.theory_prompts,
        settings.theory_samples,
        settings.theory_batches,
        rollouts,
        settings.temperature,
        settings.max_new_tokens,
        seed,
    )


def check_run(settings: ExperimentSettings, seeds: list[int]) -> None:
    """Every check a run makes, before any work (ValueError naming the setting)."""
    settings.validate()
    check_int_list("seeds", list(seeds), low=0)
    if len(seeds) < 2:
        raise ValueError(f"seeds={list(seeds)} is not allowed: the arms are compared across seeds, so give at least 2")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds={list(seeds)} names a seed twice")
    if len(settings.plateau_seeds) > 1 and settings.second_plateau_seeds < 2:
        raise ValueError("second_plateau_seeds must be at least 2: a further plateau is compared across seeds")
    for s in settings.plateau_seeds:
        phase1_arm(settings, s)
    for arm in all_arms(settings):
        for seed in seeds:
            arm_settings(settings, arm, seed)
    theory_settings(settings, THEORY_ROLLOUTS, 0)


# --- data ---


@functools.cache
def _task_split(task: str, level: int, n_train: int, n_held: int) -> tuple[tuple, tuple]:
    """``tasks.make_split`` (seconds per task) once per process: training and held-out instances, as tuples."""
    train, held = tasks.make_split(task, level, n_train, n_held, SPLIT_SEED)
    return tuple(train), tuple(held)


def split(settings: ExperimentSettings, candidate: Candidate):
    """Training, held-out test and validation instances of every task of a candidate (seed 0), disjoint."""
    train, test, val = [], [], []
    for t, level in zip(candidate.tasks, candidate.difficulties):
        try:
            tr, held = _task_split(t, level, settings.n_train, settings.n_test + settings.n_val)
        except ValueError as err:  # make_split sees test and validation as one held-out set: name both
            if "too few distinct" not in str(err):
                raise
            raise ValueError(
                f"task {t} at difficulty {level} has too few distinct instances for n_test={settings.n_test} "
                f"plus n_val={settings.n_val} held-out instances (candidate {candidate.spec})"
            ) from None
        train += tr
        test += held[: settings.n_test]
        val += held[settings.n_test :]
    prompts = [{i.prompt for i in part} for part in (train, test, val)]
    if prompts[0] & prompts[1] or prompts[0] & prompts[2] or prompts[1] & prompts[2]:
        raise ValueError("the training, test and validation prompts overlap")
    return train, test, val


def config_folder(root: Path, candidate: Candidate) -> Path:
    return Path(root) / "configs" / candidate.key


def plateau_folder(root: Path, candidate: Candidate, seed: int) -> Path:
    return config_folder(root, candidate) / f"plateau{seed}"


def arm_folder(root: Path, candidate: Candidate, plateau_seed: int, arm: arm_design.Arm, seed: int) -> Path:
    return plateau_folder(root, candidate, plateau_seed) / ARMS / arm.key / f"seed{seed}"


def _write_instances(folder: Path, test, val) -> None:
    path = folder / INSTANCES
    if not path.exists():
        rows = [(i.task, i.prompt, i.answer, "test") for i in test] + [(i.task, i.prompt, i.answer, "val") for i in val]
        table = pd.DataFrame(rows, columns=["task", "prompt", "answer", "split"])
        folder.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, table.to_csv(index=False, lineterminator="\n"))


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
        return
    record_path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(record_path, json.dumps(record, indent=2))


def _as_record(obj) -> dict:
    """The settings a folder's results depend on (``StepSettings.EXECUTION_ONLY`` left out, and the fields of
    ``StepSettings.LEGACY_DEFAULTS`` at that value, as records made before they existed), as JSON values."""
    record = json.loads(json.dumps(asdict(obj)))
    step = record.get("step") if isinstance(record.get("step"), dict) else {}
    for key in StepSettings.EXECUTION_ONLY:
        step.pop(key, None)
    for key, value in StepSettings.LEGACY_DEFAULTS.items():
        if step.get(key) == value:
            step.pop(key)
    return record


# --- plateaus ---


def train_plateau(
    settings: ExperimentSettings, candidate: Candidate, seed: int, root: Path, max_steps: int, progress: bool
) -> dict:
    """Warm start and phase 1 of one candidate under one phase-1 seed, up to ``max_steps``; how phase 1 ended."""
    train, test, val = split(settings, candidate)
    _write_instances(config_folder(root, candidate), test, val)
    folder = plateau_folder(root, candidate, seed)
    started = (folder / PHASE1 / CHECKPOINT / "state.json").exists() or (folder / PHASE1 / plateau.PLATEAU).exists()
    start = (
        folder / "warm_start"
        if started
        else plateau.warm_start_model(
            candidate.model,
            train,
            settings.warm_start_steps,
            settings.warm_start_lr,
            seed,
            folder / "warm_start",
            settings.device,
            progress,
        )
    )
    arm = phase1_arm(settings, seed)
    _claim(folder / PHASE1 / "arm.json", _as_record(arm), "phase 1")
    return plateau.phase1(
        start,
        train,
        test,
        arm,
        folder / PHASE1,
        settings.protocol,
        settings.plateau_rule,
        max_steps,
        settings.device,
        progress,
    )


def regime(settings: ExperimentSettings, candidate: Candidate, seed: int, root: Path, rollouts, batches=None) -> dict:
    train, _, _ = split(settings, candidate)
    return plateau.regime(
        plateau_folder(root, candidate, seed) / PHASE1,
        train,
        settings.q_prompts,
        settings.q_samples,
        theory_settings(settings, rollouts, seed),
        settings.device,
        batches,
    )


def choose(table: pd.DataFrame) -> pd.DataFrame:
    """Mark the chosen candidate: plateau pass@1 in PASS1_RANGE and low-q share at least MIN_LOW_Q_SHARE
    (``qualifies``), preferring those where Theorem 1's change at N=16 is sometimes negative (the mechanism),
    then the largest low-q share. If none qualifies, the closest: the smallest shortfall from both bars."""
    lo, hi = PASS1_RANGE
    out = table.copy()
    out["qualifies"] = out["plateau_pass1"].between(lo, hi) & (out["low_q_share"] >= MIN_LOW_Q_SHARE)
    out["mechanism"] = out["share_negative_n16"] > 0
    shortfall = (
        np.maximum(lo - out["plateau_pass1"], 0)
        + np.maximum(out["plateau_pass1"] - hi, 0)
        + np.maximum(MIN_LOW_Q_SHARE - out["low_q_share"], 0)
    )
    order = pd.DataFrame(
        {"q": ~out["qualifies"], "m": ~out["mechanism"], "s": shortfall, "low": -out["low_q_share"]}
    ).sort_values(["q", "s", "m", "low"], kind="stable")
    out["chosen"] = False
    out.loc[order.index[0], "chosen"] = True
    return out


def screen(settings: ExperimentSettings, root: Path, progress: bool) -> pd.DataFrame:
    """Every candidate trained to its screen plateau (at most screen_max_steps) and measured there; the table
    (screen.csv) marks the chosen one. Computed once."""
    path = Path(root) / SCREEN
    if path.exists():
        return pd.read_csv(path)
    rows = []
    for c in settings.candidates:
        ended = train_plateau(settings, c, settings.plateau_seeds[0], root, settings.screen_max_steps, progress)
        r = regime(settings, c, settings.plateau_seeds[0], root, SCREEN_ROLLOUTS)
        rows.append(
            {
                "candidate": c.key,
                "task": "+".join(c.tasks),
                "difficulty": "+".join(str(d) for d in c.difficulties),
                "model_params": tiny.parameter_count(c.model),
                "screen_steps": int(ended["step"]),
                "plateau_reached": bool(ended["plateau"]),
                "plateau_pass1": r["pass1"],
                "low_q_share": r["low_q_share"],
                "share_negative_n16": r["share_negative_n16"],
            }
        )
    table = choose(pd.DataFrame(rows))
    atomic.write_text(path, table.to_csv(index=False, lineterminator="\n"))
    for c in settings.candidates:  # the screen is done: only the chosen configuration trains on
        if c.key != table.loc[table["chosen"], "candidate"].iloc[0]:
            shutil.rmtree(plateau_folder(root, c, settings.plateau_seeds[0]) / PHASE1 / CHECKPOINT, ignore_errors=True)
    return table


def plateau_measures(settings: ExperimentSettings, candidate: Candidate, seed: int, root: Path) -> None:
    """At a finished plateau: its regime (Theorem 1 at every N of THEORY_ROLLOUTS), Theorem 1's tables, the
    held-out counts of passk_samples samples (bands, pass@k) and the plateau's final evaluation."""
    folder = plateau_folder(root, candidate, seed)
    train, test, _ = split(settings, candidate)
    if not (folder / THEORY_BATCHES).exists():
        model, tok = tiny.load(folder / PHASE1 / CHECKPOINT, settings.device)
        analysis = theory_settings(settings, THEORY_ROLLOUTS, seed)
        supports, batches = mass_balance.analyse(model.eval(), tok, train, analysis)
        atomic.write_text(folder / THEORY_SUPPORTS, supports.to_csv(index=False, lineterminator="\n"))
        atomic.write_text(folder / THEORY_BATCHES, batches.to_csv(index=False, lineterminator="\n"))
    regime(settings, candidate, seed, root, THEORY_ROLLOUTS, pd.read_csv(folder / THEORY_BATCHES))
    counts = plateau.plateau_counts(
        folder / PHASE1, test, settings.passk_samples, settings.protocol, seed, settings.device
    )
    final_eval(settings, folder / PHASE1 / CHECKPOINT, test, hard_items(counts, settings), folder / PHASE1, seed)


def hard_items(counts: np.ndarray, settings: ExperimentSettings) -> np.ndarray:
    """Held-out instances the plateau checkpoint mostly fails (pass@1 below hard_below), the first passk_instances."""
    return np.flatnonzero(counts / settings.passk_samples < settings.hard_below)[: settings.passk_instances]


def final_eval(settings: ExperimentSettings, model_dir: Path, test, items: np.ndarray, folder: Path, seed: int) -> None:
    """Greedy correctness of every held-out instance and, on the hard ones, correct counts of passk_samples
    samples (pass@k up to k = passk_samples), saved once as final_eval.npz."""
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


# --- phase 2 ---


def run_phase2_arm(
    settings: ExperimentSettings, candidate: Candidate, plateau_seed: int, arm, seed: int, root: Path, progress: bool
) -> None:
    """One arm under one seed from one plateau, evaluated at every budget, then its final evaluation."""
    train, test, val = split(settings, candidate)
    source = plateau_folder(root, candidate, plateau_seed)
    folder = arm_folder(root, candidate, plateau_seed, arm, seed)
    chosen = arm_settings(settings, arm, seed)
    _claim(folder / "arm.json", _as_record(chosen), "an arm")
    run_arm(
        source / PHASE1 / CHECKPOINT,
        train,
        test,
        chosen,
        folder,
        settings.protocol,
        progress=progress,
        device=settings.device,
        validation=val,
    )
    counts = plateau.plateau_counts(
        source / PHASE1, test, settings.passk_samples, settings.protocol, plateau_seed, settings.device
    )
    final_eval(settings, folder / CHECKPOINT, test, hard_items(counts, settings), folder, seed)
    shutil.rmtree(folder / CHECKPOINT, ignore_errors=True)  # finished and evaluated: its weights are not needed


def best_factor(root: Path, candidate: Candidate, plateau_seed: int, arm, design, seed: int) -> float | None:
    """The learning-rate factor (1 or a grid factor) whose run under ``seed`` scores highest on the validation
    split at the last budget; None until every run of the grid has finished."""
    scores = {}
    for a in [arm] + [p for p in arm_design.pilot_arms(design) if p.n == arm.n]:
        files = plateau.pass1_files(arm_folder(root, candidate, plateau_seed, a, seed), "val")
        done = (arm_folder(root, candidate, plateau_seed, a, seed) / "done.json").exists()
        if not files or not done:
            return None
        scores[a.lr_factor] = float(np.load(files[-1][1]).mean())
    return max(sorted(scores), key=lambda f: scores[f])  # the smallest factor wins an exact tie


def tuned_arm(settings: ExperimentSettings, arm, factor: float):
    if factor == 1.0:
        return arm
    return next(p for p in arm_design.pilot_arms(settings.design) if p.n == arm.n and p.lr_factor == factor)


def plan(settings: ExperimentSettings, seeds: list[int], root: Path) -> list[tuple[int, arm_design.Arm, int]]:
    """(plateau seed, arm, seed) in the order they run: at the main plateau every seed's arms; the further
    plateaus' ProRL and BroRL under the first second_plateau_seeds seeds; then the learning-rate grid under the
    first seed and the grid's best under the other seeds (once the grid has finished). Seeds and plateaus come
    before the grid's arms, so a run cut short for time lacks arms, not seeds."""
    main_plateau, design = settings.plateau_seeds[0], settings.design
    candidate = settings.chosen(root)
    out = [(main_plateau, a, seed) for seed in seeds for a in arm_design.main_arms(design)]
    for p in settings.plateau_seeds[1:]:
        out += [(p, a, s) for s in seeds[: settings.second_plateau_seeds] for a in paper_arms(settings)]
    out += [(main_plateau, a, seeds[0]) for a in arm_design.pilot_arms(design)]
    for seed in seeds[1:]:
        for arm in paper_arms(settings) if design.lr_pilot_factors else []:
            factor = best_factor(root, candidate, main_plateau, arm, design, seeds[0])
            if factor is not None and factor != 1.0:
                out.append((main_plateau, tuned_arm(settings, arm, factor), seed))
    return out


def run(settings: ExperimentSettings, seeds: list[int], runs_dir: Path, progress: bool = True) -> pd.DataFrame:
    """The screen, then per plateau its phase 1, its measures and its arms (no grid); then the learning-rate grid
    and its best (``plan``); returns all metrics (``collect``)."""
    check_run(settings, seeds)
    root = Path(runs_dir)
    for c in settings.candidates:
        split(settings, c)  # an infeasible split stops the run before any training
    shared = {k: v for k, v in _as_record(settings).items() if k not in PHASE2_ONLY}
    _claim(root / SETTINGS, shared, "a run")
    screen(settings, root, progress)
    candidate = settings.chosen(root)
    for p in settings.plateau_seeds:
        train_plateau(settings, candidate, p, root, settings.phase1_max_steps, progress)
        plateau_measures(settings, candidate, p, root)
        _phase2(settings, seeds, root, candidate, progress, lambda q, arm, p=p: q == p and arm.role != "pilot")
    _phase2(settings, seeds, root, candidate, progress, lambda q, arm: True)
    return collect(settings, seeds, root)


def _phase2(settings, seeds, root, candidate, progress: bool, stage) -> None:
    """Every planned run that ``stage(plateau seed, arm)`` selects and that has not finished, in plan order."""
    # a finished run is skipped below, so check here that every started one was run with these settings
    for p, a, s in plan(settings, seeds, root):
        record = arm_folder(root, candidate, p, a, s) / "arm.json"
        if stage(p, a) and record.exists():
            _claim(record, _as_record(arm_settings(settings, a, s)), "an arm")
    # the plan grows as the grid finishes: re-read it after every run
    while True:
        todo = [
            (p, a, s)
            for p, a, s in plan(settings, seeds, root)
            if stage(p, a) and not (arm_folder(root, candidate, p, a, s) / FINAL_EVAL).exists()
        ]
        if not todo:
            return
        p, a, s = todo[0]
        run_phase2_arm(settings, candidate, p, a, s, root, progress)


def collect(settings: ExperimentSettings, seeds: list[int], runs_dir: Path) -> pd.DataFrame:
    """Every step's metrics of each plateau's phase 1 and of each started phase-2 arm: columns plateau, phase,
    seed, arm (its key), label, role, N, prompts, lr, lr_factor and run_arm's metrics."""
    root = Path(runs_dir)
    candidate = settings.chosen(root)
    runs = [
        (
            plateau_folder(root, candidate, p) / PHASE1,
            dict(plateau=p, phase=1, seed=p, arm=PHASE1, label="phase 1 (ProRL N=16)", role="phase 1", N=BASE_N)
            | dict(prompts=settings.phase1_prompts, lr=settings.design.base_lr, lr_factor=1.0),
        )
        for p in settings.plateau_seeds
    ]
    runs += [
        (
            arm_folder(root, candidate, p, arm, seed),
            dict(plateau=p, phase=2, seed=seed, arm=arm.key, label=arm.label, role=arm.role, N=arm.n)
            | dict(prompts=arm.prompts, lr=arm.lr, lr_factor=arm.lr_factor),
        )
        for p, arm, seed in plan(settings, seeds, root)
    ]
    frames = [pd.read_csv(f / "metrics.csv").assign(**labels) for f, labels in runs if (f / "metrics.csv").exists()]
    return pd.concat(frames, ignore_index=True)
