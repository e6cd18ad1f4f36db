"""The regime set: where the paper's argument applies. At the plateau checkpoint, every prompt of a fresh pool
(disjoint from the study's splits) gets its exact correct mass q at the training temperature; those in a low band
(``BAND``: a group of 16 rarely samples a right answer, a group of 512 usually does) are split into train,
validation and test parts. Both verdict arms then continue the plateau on the regime train part at equal generated
samples, each at rates bracketed on the regime validation part, scored by exact q at the training temperature
(the paper's correct mass), the primary endpoint on the regime test part.

Steps, each resumable, under ``<chosen config>/regime/``:

1. ``pool``: exact q of ``POOL_SIZE`` fresh prompts, in chunks (``pool_q/``), then ``pool.csv`` (prompt, answer,
   q, part; part empty outside the band);
2. ``screen``: the runs the plan calls for (``plan``): each arm's grid on ``SCREEN_SEEDS``, extended past an edge
   its best or pick sits on and refined halfway either side of the pick (``pick_rate``), then ``VERDICT_SEEDS`` at
   each arm's pick.

    python -m brorl_lib.rlvr.regime pool
    python -m brorl_lib.rlvr.regime screen [--limit K]   # two may run side by side: each run is locked
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from brorl_lib.core import atomic
from brorl_lib.facts.arms import Arm
from brorl_lib.models import tiny
from brorl_lib.rlvr import study, tasks
from brorl_lib.rlvr import study_phase2 as p2
from brorl_lib.rlvr.run import CHECKPOINT, DONE, run_arm, save_array
from brorl_lib.rlvr.step import StepSettings

REGIME, POOL, POOL_CHUNKS, SETTINGS = "regime", "pool.csv", "pool_q", "settings.json"
PARTS = ("train", "val", "test")
POOL_SEED = 1  # the pool's draw: seed 1 of tasks.make_split, apart from the study's seed 0 (our choice)
POOL_SIZE = 8000  # fresh prompts scored (our choice: about 9% fall in BAND, so about 700 regime prompts)
CHUNK = 250  # prompts scored and saved at a time (an interrupted pool loses at most one chunk)
BAND = (1 / 512, 1 / 16)  # q where N=16 keeps a group at most 64% of the time and N=512 at least 63% (our choice)
SHARES = (0.5, 0.25, 0.25)  # train, validation and test shares of the band's prompts (our choice)
PART_SEED = 0  # the shuffle that assigns parts (our choice)
BUDGET = 262_144  # generated samples of each regime run (our choice: a quarter of phase 2's 1,048,576)
EVAL_BUDGETS = (65_536, 131_072)  # also evaluated here, before the end (our choice)
SCREEN_SEEDS = (0, 1)  # every grid point (our choice)
VERDICT_SEEDS = (0, 1, 2, 3, 4, 5)  # at each arm's pick: 6, as the full-distribution verdict
# multiples of each arm's square-root-rule rate (study_phase2.verdict_arm), our choice: steps of 4 over 256x for
# both arms, ProRL's around its rule's rate and BroRL's from the low multiple its full-distribution tuning picked
# (1/128) up; extended past an edge the best or the pick sits on
GRIDS = {study.BASE_N: (1 / 32, 1 / 8, 1 / 2, 2.0, 8.0), p2.BROAD_N: (1 / 128, 1 / 32, 1 / 8, 1 / 2, 2.0)}
STEP = 4  # a grid's spacing: an extension multiplies or divides its end by this
MAX_EXTENSIONS = 3  # extensions at most past each grid end (our choice)
Q_END, PROTOCOL_TEST, PROTOCOL_HELD = "q_train_end.npy", "protocol_test.npy", "protocol_heldout.npy"


def folder(root: Path, s: study.StudySettings) -> Path:
    return study.folder(root, study.chosen(s, root)) / REGIME


def plateau_checkpoint(root: Path, s: study.StudySettings) -> Path:
    return study.folder(root, study.chosen(s, root)) / study.PHASE1 / CHECKPOINT


def settings_record(s: study.StudySettings) -> dict:
    return {"pool_seed": POOL_SEED, "pool_size": POOL_SIZE, "band": list(BAND), "shares": list(SHARES),
            "part_seed": PART_SEED, "temperature": s.temperature, "max_new_tokens": s.max_new_tokens}  # fmt: skip


def fresh_pool(s: study.StudySettings, root: Path) -> list[tasks.LaptopInstance]:
    """``POOL_SIZE`` draws of the chosen task at seed ``POOL_SEED``, minus every prompt of the study's splits."""
    c = study.chosen(s, root)
    seen = {i.prompt for part in study.split(s, c) for i in part}
    drawn = tasks.make_split(c.tasks[0], c.difficulties[0], POOL_SIZE, 1, POOL_SEED)[0]
    return [i for i in drawn if i.prompt not in seen]


def assign_parts(q: np.ndarray) -> np.ndarray:
    """Each prompt's part ("" outside ``BAND``): the band's prompts shuffled (``PART_SEED``) and cut by ``SHARES``."""
    inside = np.flatnonzero((q >= BAND[0]) & (q < BAND[1]))
    order = np.random.default_rng(PART_SEED).permutation(inside)
    cuts = np.round(np.cumsum(SHARES)[:-1] * len(order)).astype(int)
    parts = np.full(len(q), "", dtype=object)
    for name, rows in zip(PARTS, np.split(order, cuts)):
        parts[rows] = name
    return parts


def pool_stage(s: study.StudySettings, root: Path, progress: bool = True) -> pd.DataFrame:
    """Exact q at the training temperature of the fresh pool at the plateau checkpoint, chunk by chunk (resumable),
    then ``pool.csv`` with each prompt's part."""
    out = folder(root, s)
    record = settings_record(s)
    study._claim(out / SETTINGS, record)
    if (out / POOL).exists():
        return pd.read_csv(out / POOL, keep_default_na=False)
    pool = fresh_pool(s, root)
    model, tok = tiny.load(plateau_checkpoint(root, s), s.device)
    chunks = out / POOL_CHUNKS
    chunks.mkdir(parents=True, exist_ok=True)
    qs = []
    for k, lo in enumerate(range(0, len(pool), CHUNK)):
        path = chunks / f"chunk{k:03d}.npy"
        if not path.exists():
            q = study.train_q(s, model, tok, pool[lo : lo + CHUNK]).cpu().numpy()
            save_array(path, q)
            if progress:
                print(f"pool: {min(lo + CHUNK, len(pool))}/{len(pool)} prompts scored", flush=True)
        qs.append(np.load(path))
    q = np.concatenate(qs)
    table = pd.DataFrame({"prompt": [i.prompt for i in pool], "answer": [i.answer for i in pool], "q": q,
                          "part": assign_parts(q)})  # fmt: skip
    atomic.write_text(out / POOL, table.to_csv(index=False, lineterminator="\n"))
    shutil.rmtree(chunks, ignore_errors=True)
    return table


def parts(s: study.StudySettings, root: Path) -> dict[str, list[tasks.LaptopInstance]]:
    """The regime's train, validation and test instances, in pool order."""
    path = folder(root, s) / POOL
    if not path.exists():
        raise FileNotFoundError(f"no regime pool at {path}: run python -m brorl_lib.rlvr.regime pool first")
    table = pd.read_csv(path, keep_default_na=False)
    by_prompt = {i.prompt: i for i in fresh_pool(s, root)}
    return {name: [by_prompt[p] for p in table.loc[table["part"] == name, "prompt"]] for name in PARTS}


def arm(p: p2.Phase2Settings, n: int, factor: float) -> Arm:
    return p2.verdict_arm(p, n, factor)


def arm_folder(root: Path, s: study.StudySettings, a: Arm, seed: int) -> Path:
    return folder(root, s) / p2.ARMS / a.name / f"seed{seed}"


def finished(root: Path, s: study.StudySettings, a: Arm, seed: int) -> bool:
    return (arm_folder(root, s, a, seed) / PROTOCOL_HELD).exists()


def final_val(root: Path, s: study.StudySettings, a: Arm, seed: int) -> np.ndarray | None:
    """Per-prompt exact q on the regime validation part at a finished run's end (None before)."""
    if not finished(root, s, a, seed):
        return None
    f = arm_folder(root, s, a, seed)
    return np.load(f / f"val_step{json.loads((f / DONE).read_text())['step']}.npy")


@dataclass(frozen=True)
class Pick:
    """An arm's rate screen: the grid so far, the runs it still needs, the pick (None until the grid is complete and
    the pick is inside it), the best multiple, and each multiple's mean validation q and its standard error."""

    grid: tuple[float, ...]
    needs: tuple[tuple[float, int], ...]
    pick: float | None
    best: float | None
    means: dict
    ses: dict


def pick_rate(score, grid: tuple[float, ...], seeds: tuple[int, ...], refine: bool = True) -> Pick:
    """The pre-registered rule: every multiple of ``grid`` on every seed; each multiple's validation q averaged over
    seeds per prompt, its mean and standard error over prompts; the pick is the largest multiple whose mean is within
    one standard error of the best mean. While the best is at the lower edge or the pick at the upper one, the grid
    extends past it by a factor ``STEP`` (at most ``MAX_EXTENSIONS`` times each way); then, once (``refine``), the
    multiples half and twice the pick join the grid and the rule picks again. ``score(f, seed)``: per-prompt
    validation q of a finished run, else None."""
    grid = tuple(sorted(grid))
    low, high = grid[0] / STEP**MAX_EXTENSIONS, grid[-1] * STEP**MAX_EXTENSIONS
    while True:
        needs = tuple((f, seed) for f in grid for seed in seeds if score(f, seed) is None)
        if needs:
            return Pick(grid, needs, None, None, {}, {})
        per_prompt = {f: np.mean([score(f, seed) for seed in seeds], 0) for f in grid}
        means = {f: float(v.mean()) for f, v in per_prompt.items()}
        ses = {f: float(v.std(ddof=1) / np.sqrt(v.size)) for f, v in per_prompt.items()}
        best = max(grid, key=means.get)
        pick = max(f for f in grid if means[f] >= means[best] - ses[best])
        if best == grid[0] and grid[0] / STEP >= low:
            grid = (grid[0] / STEP, *grid)
        elif pick == grid[-1] and grid[-1] * STEP <= high:
            grid = (*grid, grid[-1] * STEP)
        elif refine and (near := [f for f in (pick / 2, pick * 2) if grid[0] < f < grid[-1] and f not in grid]):
            grid, refine = tuple(sorted((*grid, *near))), False  # once: halfway (factor 2) either side of the pick
        else:
            return Pick(grid, (), pick, best, means, ses)


def screen(root: Path, s: study.StudySettings, p: p2.Phase2Settings, n: int) -> Pick:
    return pick_rate(lambda f, seed: final_val(root, s, arm(p, n, f), seed), GRIDS[n], SCREEN_SEEDS)


def plan(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> list[tuple[Arm, int]]:
    """(arm, seed) of every run the results so far call for: both screens (ProRL and BroRL interleaved), then the
    verdict seeds at each settled pick."""
    picks = {n: screen(root, s, p, n) for n in GRIDS}
    needs = [[(arm(p, n, f), seed) for f, seed in k.needs] for n, k in picks.items()]
    out = [one for pair in zip(*needs) for one in pair] + [one for k in needs for one in k[min(map(len, needs)) :]]
    out += [(arm(p, n, k.pick), seed) for seed in VERDICT_SEEDS for n, k in picks.items() if k.pick is not None]
    return list(dict.fromkeys(out))


def run_settings(s: study.StudySettings, p: p2.Phase2Settings, a: Arm, seed: int):
    return replace(p2.arm_settings(s, p, a, seed), sample_budget=BUDGET, eval_budgets=EVAL_BUDGETS)


def exact_q_scorer(s: study.StudySettings):
    """Per-prompt exact q at the training temperature (a ``run.Scorer``)."""

    @torch.no_grad()
    def score(model, tokenizer, instances, seed):  # seed unused: nothing is sampled
        return study.train_q(s, model, tokenizer, instances).cpu().numpy()

    return score


def run_one(root: Path, s: study.StudySettings, p: p2.Phase2Settings, a: Arm, seed: int, progress: bool) -> bool:
    """One regime run from the plateau: trained on the regime train part to ``BUDGET`` samples, scored by exact q on
    the validation and test parts; then every train prompt's q and the protocol's exact pass@1 on the regime test
    part and the full held-out split. False when another process holds it."""
    part = parts(s, root)
    out = arm_folder(root, s, a, seed)
    settings = run_settings(s, p, a, seed)
    record = json.loads(json.dumps(asdict(settings) | {"arm": asdict(a)}))
    for name in StepSettings.EXECUTION_ONLY:
        record["step"].pop(name)
    if not p2._claim_lock(out):
        return False
    try:
        study._claim(out / "arm.json", record)
        run_arm(plateau_checkpoint(root, s), part["train"], part["test"], settings, out, s.protocol,
                progress=progress, device=s.device, validation=part["val"], scorer=exact_q_scorer(s),
                count_kept=True)  # fmt: skip
        model, tok = tiny.load(out / CHECKPOINT, s.device)
        held = study.split(s, study.chosen(s, root))[1]
        save_array(out / Q_END, exact_q_scorer(s)(model, tok, part["train"], seed))
        save_array(out / PROTOCOL_TEST, study.exact_pass1(s)(model, tok, part["test"], seed))
        save_array(out / PROTOCOL_HELD, study.exact_pass1(s)(model, tok, held, seed))  # last: marks it finished
        shutil.rmtree(out / CHECKPOINT, ignore_errors=True)
    finally:
        (out / p2.LOCK).unlink(missing_ok=True)
    return True


def run(
    root: Path, s: study.StudySettings, p: p2.Phase2Settings, progress: bool = True, limit: int | None = None
) -> int:
    """Every planned run not yet finished, in plan order (``limit``: at most that many); returns how many ran."""
    done = 0
    while limit is None or done < limit:
        todo = [(a, seed) for a, seed in plan(root, s, p) if not finished(root, s, a, seed)]
        if not todo:
            break
        free = [(a, seed) for a, seed in todo if not p2._held(arm_folder(root, s, a, seed) / p2.LOCK)]
        if not free:
            time.sleep(p2.WAIT_S)
            continue
        if run_one(root, s, p, *free[0], progress):
            done += 1
    return done


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m brorl_lib.rlvr.regime", description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("pool", "screen", "status"))
    parser.add_argument("--profile", default="paper", help="a profile of params/profiles.yaml (default: paper)")
    parser.add_argument("--limit", type=int, default=None, help="screen: run at most this many, then stop")
    args = parser.parse_args(argv)
    from brorl_lib.rlvr.__main__ import config_from

    cfg = config_from(args.profile, [])
    s, p, root = cfg.study(), cfg.phase2(), cfg.runs_path()
    if args.stage == "pool":
        table = pool_stage(s, root)
        print(table["part"].replace("", "outside").value_counts().to_string())
    elif args.stage == "screen":
        print(f"{run(root, s, p, limit=args.limit)} regime runs run")
    else:
        for n in GRIDS:
            k = screen(root, s, p, n)
            print(f"N={n}: grid {k.grid}, {len(k.needs)} runs needed, pick {k.pick}, best {k.best}")
        print(f"{len(plan(root, s, p))} runs planned")


if __name__ == "__main__":
    main()
