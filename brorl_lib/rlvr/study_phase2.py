"""Phase 2 of the countdown study: every arm continues the plateau checkpoint (weights and AdamW moments) under
several seeds and is evaluated, exactly, at each sample budget; generated samples (Table 1's column) are what
the arms spend equally. The families of arms, in the order they run (a run cut short lacks the later ones):

1. **tuning** of the verdict's two arms (ProRL, N=16 x P kept prompts; BroRL, N=512 x P/4), each at multiples
   ``lr_factors`` of its square-root rule rate (eta0 * sqrt(kept samples per step / 16P), paper §4.2.1) on the
   first seed, the grid extended by halving (doubling) while the best is at its lower (upper) edge; then
   ``tune_seeds`` seeds at the best multiple and its two neighbours, the best picked on the validation split's
   mean over those seeds at the last budget (``tuning``);
2. **verdict** (paper §4.2.1) under every seed, twice: both arms at the rule's rate (multiple 1, the paper's
   protocol) and each at its own tuned multiple (best against best); the kept batch refilled to full, drawing
   only the shortfall (``StepSettings.refill``);
3. **prompts per step** (role "paper"): BroRL at the paper's own ``broad_prompts`` prompts a step (N=512), at its
   tuned multiple of its rule rate, under every seed;
4. **IsoCompute**: a fixed G generated samples a step (one round of G/N prompts, no refill) for each N of
   ``iso_rollouts``, its learning-rate multiple tuned the same way (``iso_seeds`` seeds); the verdict's two N
   first, the other N after the controls;
5. **controls**, at tuned rates: the batch-size control (N=16 x 8P prompts, BroRL's kept batch, BroRL's rate), the
   prompt-matched BroRL (N=512 x P, ProRL's rate: only N and the batch differ) and a KL-anchored BroRL.

Every run also counts how often each training prompt was kept; the verdict, prompts and control runs, when done,
also record every training prompt's exact q (``q_train_end.npy``): the per-prompt fate. Two processes may run
the plan side by side: each run is claimed by a lock file while it trains.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from brorl_lib.core.params import MAX_SEEDS, SEED_MAX, NotebookConfig, declared_as, param
from brorl_lib.facts import arms
from brorl_lib.facts.arms import Arm
from brorl_lib.facts.setup import scaled_learning_rate
from brorl_lib.models import tiny
from brorl_lib.rlvr import plateau, study
from brorl_lib.rlvr.run import CHECKPOINT, DONE, ArmSettings, run_arm, save_array
from brorl_lib.rlvr.step import StepSettings

BROAD_N, PROMPT_RATIO = arms.PAPER_BROAD_N, arms.PROMPT_RATIO  # paper Table 1: N=512; 512 : 128 prompts a step
ARMS, Q_END, LOCK = "arms", "q_train_end.npy", "running.lock"
# a tuning grid is extended by at most this many halvings (doublings) past its ends: our choice, 6 since BroRL's
# validation still rose at 1/128 of its rule rate on the paper profile (its floor: 1/16 / 2**6 = 1/1024)
MAX_EXTENSIONS = 6
WAIT_S = 30  # a second process waits this long for a run another one holds before planning again


@dataclass(frozen=True)
class Phase2Settings(NotebookConfig):
    """Phase 2's settings, declared once: notebook 04's parameters of the same names are these declarations
    (``core.params.declared_as``); the checks of single values run on construction, ``check_together`` the rest.
    Defaults: the quick profile."""

    prompts: int = param(4, "P: ProRL's kept prompts per step; BroRL takes P/4", low=4, high=4096,
                         multiple_of=PROMPT_RATIO)  # fmt: skip
    base_lr: float = declared_as(study.StudySettings, "base_lr")
    budgets: list[int] = param(
        [2048, 4096],
        "generated samples at which every phase-2 run is evaluated, increasing",
        low=1,
        high=10**9,
        max_items=study.MAX_GRID,
    )
    seeds: list[int] = param([0, 1], "phase-2 seeds, the unit of the test", low=0, high=SEED_MAX, distinct=True,
                             min_items=2, max_items=MAX_SEEDS)  # fmt: skip
    iso_samples: int = param(256, "G: generated samples per IsoCompute step", low=2, high=study.MAX_SAMPLES)
    iso_rollouts: list[int] = param([8, 32], "N of the IsoCompute grid", low=2, high=study.MAX_N, distinct=True,
                                 max_items=study.MAX_GRID)  # fmt: skip
    iso_lr_factors: list[float] = param(
        [0.5, 1.0, 2.0], "multiples of the rule's learning rate in the IsoCompute grid, increasing", low=0.01,
        high=100.0, distinct=True, max_items=study.MAX_GRID,
    )  # fmt: skip
    iso_seeds: int = param(2, "seeds at each N's best IsoCompute learning rate and its two neighbours", low=1,
                           high=MAX_SEEDS)  # fmt: skip
    lr_factors: list[float] = param(
        [0.5, 1.0, 2.0], "the verdict arms' tuning grid: multiples of each arm's square-root-rule rate, increasing "
        "(extended while the best is at an edge)", low=0.001, high=64.0, distinct=True, max_items=study.MAX_GRID,
    )  # fmt: skip
    tune_seeds: int = param(2, "seeds at each verdict arm's best multiple and its two neighbours", low=1,
                            high=MAX_SEEDS)  # fmt: skip
    broad_prompts: int = param(2, "BroRL's prompts per step in the prompts-per-step arm (paper: 128)", low=1,
                               high=4096)  # fmt: skip
    control_seeds: int = param(1, "seeds of the controls (0: none)", low=0, high=MAX_SEEDS)
    kl_coefs: list[float] = param(
        [0.01], "KL weights of the KL-anchored BroRL controls, one control each", low=0.0, low_open=True, high=100.0,
        distinct=True, min_items=1, max_items=study.MAX_GRID,
    )  # fmt: skip

    def check_together(self) -> None:
        if any(b <= a for a, b in zip(self.budgets, self.budgets[1:])):
            raise ValueError(f"budgets={list(self.budgets)} is not allowed: give them strictly increasing")
        for n in self.iso_rollouts:
            if self.iso_samples % n:
                raise ValueError(
                    f"iso_samples={self.iso_samples} is not allowed: it must be a multiple of every N of "
                    f"iso_rollouts={list(self.iso_rollouts)} (G/N prompts a step)"
                )
        for name in ("iso_lr_factors", "lr_factors"):
            grid = list(getattr(self, name))
            if len(grid) < 3 or sorted(grid) != grid:
                raise ValueError(
                    f"{name}={grid} is not allowed: give at least three, increasing, so that a best inside the "
                    "grid is bracketed"
                )
        for name in ("iso_seeds", "tune_seeds", "control_seeds"):
            if getattr(self, name) > len(self.seeds):
                raise ValueError(
                    f"{name}={getattr(self, name)} is not allowed: at most the {len(self.seeds)} seeds of seeds"
                )
        largest = BROAD_N * max(self.prompts, self.broad_prompts)
        if self.budgets[0] < largest:
            raise ValueError(
                f"budgets={list(self.budgets)} is not allowed: the first must be at least {largest}, the largest "
                "kept batch (N=512 x max(prompts, broad_prompts))"
            )

    def rule_lr(self, samples_per_step: int) -> float:
        """Paper §4.2.1: eta0 * sqrt(samples per step / ProRL's), ProRL's being 16 x P."""
        return scaled_learning_rate(self.base_lr, study.BASE_N * self.prompts, samples_per_step)


def verdict_arm(p: Phase2Settings, n: int, factor: float = 1.0) -> Arm:
    """ProRL (n=16, P prompts) or BroRL (n=512, P/4) at ``factor`` times its rule rate (1: the paper's protocol)."""
    prompts = p.prompts if n == study.BASE_N else p.prompts // PROMPT_RATIO
    label = "ProRL N=16" if n == study.BASE_N else "BroRL N=512"
    name, tag = (f"N{n}", "") if factor == 1 else (f"N{n}_lr{factor:g}x", f", {factor:g}x lr")
    lr = p.rule_lr(n * prompts) * factor
    return Arm(name, n, prompts, label=label + tag, lr=lr, lr_factor=factor)


def verdict_arms(p: Phase2Settings) -> list[Arm]:
    """The verdict's two arms at the rule's rate."""
    return [verdict_arm(p, study.BASE_N), verdict_arm(p, BROAD_N)]


def iso_arm(p: Phase2Settings, n: int, factor: float) -> Arm:
    lr = p.rule_lr(p.iso_samples) * factor
    return Arm(f"iso_N{n}_lr{factor:g}x", n, p.iso_samples // n, label=f"N={n}, {factor:g}x lr", role="isocompute",
               lr=lr, lr_factor=factor, one_round=True)  # fmt: skip


def iso_arms(p: Phase2Settings, factors: tuple[float, ...] | None = None) -> list[Arm]:
    return [iso_arm(p, n, f) for n in p.iso_rollouts for f in factors or p.iso_lr_factors]


def prompts_arm(p: Phase2Settings, factor: float) -> Arm:
    """BroRL at the paper's own prompts per step, at ``factor`` times its rule rate."""
    n, k = BROAD_N, p.broad_prompts
    return Arm(f"N512_prompts{k}", n, k, label=f"BroRL N=512 x {k} prompts", role="paper",
               lr=p.rule_lr(n * k) * factor, lr_factor=factor)  # fmt: skip


def control_arms(p: Phase2Settings, prorl: float = 1.0, brorl: float = 1.0) -> list[Arm]:
    """The controls, ``prorl`` and ``brorl`` being the two verdict arms' multiples of their rule rate."""
    broad = p.prompts // PROMPT_RATIO
    kept = BROAD_N * broad
    wide = kept // study.BASE_N  # BroRL's kept batch at N=16: 8P prompts
    brorl_lr, prorl_lr = p.rule_lr(kept) * brorl, p.base_lr * prorl
    return [
        Arm(f"N16_batch{wide}", study.BASE_N, wide, label=f"N=16 x {wide} prompts (batch control)", role="control",
            lr=brorl_lr, lr_factor=brorl),
        Arm(f"N512_prompts{p.prompts}", BROAD_N, p.prompts, label=f"N=512 x {p.prompts} prompts (prompt-matched)",
            role="control", lr=prorl_lr, lr_factor=prorl),
    ] + [
        Arm(f"N512_kl{c:g}", BROAD_N, broad, label=f"BroRL N=512, KL {c:g}", role="control", lr=brorl_lr,
            lr_factor=brorl, kl_coef=c)
        for c in p.kl_coefs
    ]  # fmt: skip


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


def _held(path: Path) -> bool:
    """Whether the lock file at ``path`` names a process that is still alive."""
    try:
        os.kill(int(path.read_text() or 0), 0)
        return True
    except (ProcessLookupError, ValueError, FileNotFoundError):
        return False
    except PermissionError:  # alive, another user's
        return True


def _claim_lock(folder: Path) -> bool:
    """Take the run's lock (False when a live process holds it; a dead one's is taken over)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            if _held(path):
                return False
            path.unlink(missing_ok=True)  # its process is gone
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def locked(root: Path, candidate, arm: Arm, seed: int) -> bool:
    return _held(arm_folder(root, candidate, arm, seed) / LOCK)


def run_one(s: study.StudySettings, p: Phase2Settings, root: Path, arm: Arm, seed: int, progress: bool) -> bool:
    """One arm under one seed from the plateau: trained to the last budget, then every training prompt's q;
    False when another process holds it."""
    candidate = study.chosen(s, root)
    train, test, val = study.split(s, candidate)
    folder = arm_folder(root, candidate, arm, seed)
    settings = arm_settings(s, p, arm, seed)
    record = json.loads(json.dumps(asdict(settings) | {"arm": asdict(arm)}))
    for name in StepSettings.EXECUTION_ONLY:
        record["step"].pop(name)
    if not _claim_lock(folder):
        return False
    try:
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
        if arm.role != "isocompute" and not (folder / Q_END).exists():  # the per-prompt fate
            model, tok = tiny.load(folder / CHECKPOINT, s.device)
            with torch.no_grad():
                save_array(folder / Q_END, study.train_q(s, model, tok, train).cpu().numpy())
        shutil.rmtree(folder / CHECKPOINT, ignore_errors=True)  # finished and measured: its weights are not needed
    finally:
        (folder / LOCK).unlink(missing_ok=True)
    return True


def finished(root: Path, candidate, arm: Arm, seed: int) -> bool:
    folder = arm_folder(root, candidate, arm, seed)
    return (folder / DONE).exists() and (arm.role == "isocompute" or (folder / Q_END).exists())


def final_validation(root: Path, candidate, arm: Arm, seed: int) -> float | None:
    """Mean validation pass@1 of a finished run at its last step (None until it has finished)."""
    if not finished(root, candidate, arm, seed):
        return None
    folder = arm_folder(root, candidate, arm, seed)
    last = json.loads((folder / DONE).read_text())["step"]
    return float(np.load(folder / f"val_step{last}.npy").mean())


@dataclass(frozen=True)
class Tuning:
    """Where a learning-rate tuning stands: the grid so far, the runs it still needs ((factor, seed), in order),
    the best multiple once settled (None before), and each multiple's validation scores by seed."""

    grid: tuple[float, ...]
    needs: tuple[tuple[float, int], ...]
    best: float | None
    scores: dict

    @property
    def at_edge(self) -> bool:
        """Not settled yet, or settled on the grid's lowest or highest multiple."""
        return self.best is None or self.best in (self.grid[0], self.grid[-1])


def tuning(score, grid: tuple[float, ...], seeds: tuple[int, ...], k: int) -> Tuning:
    """Bracket the best multiple: every multiple of ``grid`` on ``seeds[0]``, the grid extended by halving (doubling)
    while the first seed's best is its lowest (highest) multiple; then the first ``k`` seeds at the best and its two
    neighbours, the best re-picked on their mean and its neighbours seeded in turn until it stays. ``score(f, seed)``:
    the validation score of a finished run, None if it has not finished."""
    grid = tuple(sorted(grid))
    low, high = grid[0] / 2**MAX_EXTENSIONS, grid[-1] * 2**MAX_EXTENSIONS
    first = seeds[0]
    while True:
        s0 = {f: score(f, first) for f in grid}
        missing = tuple((f, first) for f in grid if s0[f] is None)
        if missing:
            return Tuning(grid, missing, None, {})
        best = max(grid, key=lambda f: s0[f])
        if best == grid[0] and grid[0] / 2 >= low:
            grid = (grid[0] / 2, *grid)
        elif best == grid[-1] and grid[-1] * 2 <= high:
            grid = (*grid, grid[-1] * 2)
        else:
            break
    tried = set()
    while True:
        i = grid.index(best)
        near = grid[max(0, i - 1) : i + 2]
        needs = tuple((f, seed) for f in near for seed in seeds[:k] if score(f, seed) is None)
        scores = {f: [score(f, seed) for seed in seeds[:k]] for f in near}
        if needs:
            return Tuning(grid, needs, None, scores)
        pick = max(near, key=lambda f: float(np.mean(scores[f])))
        if pick == best or pick in tried:
            return Tuning(grid, (), best, scores)
        tried.add(best)
        best = pick
        if best in (grid[0], grid[-1]):  # a neighbour won at the grid's edge: extend past it
            new = best / 2 if best == grid[0] else best * 2
            if low <= new <= high:
                grid = tuple(sorted((*grid, new)))


def verdict_tuning(root: Path, candidate, p: Phase2Settings, n: int) -> Tuning:
    return tuning(
        lambda f, seed: final_validation(root, candidate, verdict_arm(p, n, f), seed), p.lr_factors, p.seeds,
        p.tune_seeds,
    )  # fmt: skip


def iso_tuning(root: Path, candidate, p: Phase2Settings, n: int) -> Tuning:
    return tuning(
        lambda f, seed: final_validation(root, candidate, iso_arm(p, n, f), seed), p.iso_lr_factors, p.seeds,
        p.iso_seeds,
    )  # fmt: skip


def plan(s: study.StudySettings, p: Phase2Settings, root: Path) -> list[tuple[Arm, int]]:
    """(arm, seed) of every run the results so far call for, in the order they run: the verdict arms' tuning
    (ProRL and BroRL interleaved), the rule-rate verdict, the tuned verdict, BroRL at the paper's prompts per
    step, the IsoCompute tuning of the verdict's two N, the controls, then the IsoCompute tuning of the other N
    (the order of priority when compute runs short); an arm whose rate is still being tuned is not yet planned."""
    candidate = study.chosen(s, root)
    out: list[tuple[Arm, int]] = []
    tuned = {n: verdict_tuning(root, candidate, p, n) for n in (study.BASE_N, BROAD_N)}
    needs = [[(verdict_arm(p, n, f), seed) for f, seed in t.needs] for n, t in tuned.items()]
    out += [one for pair in itertools.zip_longest(*needs) for one in pair if one]  # ProRL and BroRL interleaved
    out += [(a, seed) for seed in p.seeds for a in verdict_arms(p)]
    best = {n: t.best for n, t in tuned.items()}
    if None not in best.values():
        out += [(verdict_arm(p, n, f), seed) for seed in p.seeds for n, f in best.items()]
        out += [(prompts_arm(p, best[BROAD_N]), seed) for seed in p.seeds]
    iso = {n: [(iso_arm(p, n, f), seed) for f, seed in iso_tuning(root, candidate, p, n).needs] for n in p.iso_rollouts}
    out += [one for n in p.iso_rollouts if n in (study.BASE_N, BROAD_N) for one in iso[n]]
    if None not in best.values():
        controls = control_arms(p, best[study.BASE_N], best[BROAD_N])
        out += [(a, seed) for seed in p.seeds[: p.control_seeds] for a in controls]
    out += [one for n in p.iso_rollouts if n not in (study.BASE_N, BROAD_N) for one in iso[n]]
    return list(dict.fromkeys(out))  # a run planned twice (the tuned verdict at multiple 1) once


def run(s: study.StudySettings, p: Phase2Settings, root: Path, progress: bool = True, limit: int | None = None) -> int:
    """Every planned run not yet finished, in plan order (``limit``: at most that many); returns how many ran. A
    run another process holds is skipped; when only such runs are left, this one waits for them and plans again."""
    candidate = study.chosen(s, root)
    record = study.folder(root, candidate) / study.PLATEAU_RECORD
    if not record.exists() or json.loads(record.read_text()).get("rule") != plateau.rule_record(s.plateau_rule):
        raise ValueError(
            f"no plateau judged by this rule at {record}: run the plateau stage first (study.plateau_stage)"
        )
    done = 0
    while limit is None or done < limit:
        todo = [(a, seed) for a, seed in plan(s, p, root) if not finished(root, candidate, a, seed)]
        if not todo:
            break
        free = [(a, seed) for a, seed in todo if not locked(root, candidate, a, seed)]
        if not free:
            time.sleep(WAIT_S)
            continue
        if run_one(s, p, root, *free[0], progress):
            done += 1
    return done


def collect(s: study.StudySettings, p: Phase2Settings, root: Path, finished_only: bool = True) -> pd.DataFrame:
    """Every step's metrics of every finished run on disk (``finished_only`` false: of every started one): columns
    arm, label, role, N, prompts, lr, lr_factor, seed and run_arm's metrics."""
    arms_dir = study.folder(root, study.chosen(s, root)) / ARMS
    frames = []
    for path in sorted(arms_dir.glob("*/seed*/metrics.csv")):
        if finished_only and not (path.parent / DONE).exists():
            continue
        arm = Arm(**json.loads((path.parent / "arm.json").read_text())["arm"])
        labels = dict(arm=arm.name, label=arm.label, role=arm.role, N=arm.n_rollouts, prompts=arm.prompts_per_step,
                      lr=arm.lr, lr_factor=arm.lr_factor, seed=int(path.parent.name.removeprefix("seed")))  # fmt: skip
        frames.append(pd.read_csv(path).assign(**labels))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
