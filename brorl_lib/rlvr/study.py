"""The laptop experiment where the paper's argument can apply: one task family whose correct mass is spread over
many correct answers (countdown with + and -), every prompt's correct mass q computed exactly
(``exact_q``), a per-task plateau, and gates that the regime must pass at that plateau.

Steps, each resumable and written atomically under ``runs_dir``:

1. **screen**: every candidate (``countdown:<numbers>@<hidden>x<layers>``) gets a warm start on uniformly random
   correct answers and a phase 1 (ProRL, N=16) of at most ``screen_max_steps``; its regime is measured there
   (``screen.csv``) and the candidate that passes the gates, or else comes closest, is chosen;
2. **plateau**: the chosen candidate's phase 1 runs on to the smoothed plateau test (or ``phase1_max_steps``),
   keeping a snapshot every ``snapshot_every`` steps (the update-quality checkpoints); its regime is measured
   at the plateau (``plateau.json``, ``q_train.npy``) and the gates are judged there.

Held-out pass@1 is exact throughout: q at the evaluation temperature and top-p (the paper's protocol's
expectation, without sampling noise). Gates (the design's, our thresholds): held-out pass@1 in PASS1_GATE, at
least LOW_Q_GATE of training prompts with q (training temperature) in LOW_Q_BAND, and ProRL's kept fraction
(kept / generated samples over the last plateau window) at least KEPT_GATE.
"""

from __future__ import annotations

import functools
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from brorl_lib.core import atomic
from brorl_lib.core.params import LEARNING_RATE, TEMPERATURE, NotebookConfig, param
from brorl_lib.core.validation import check_int
from brorl_lib.facts import arms
from brorl_lib.facts.protocol import SamplingParams
from brorl_lib.facts.setup import scaled_learning_rate
from brorl_lib.models import tiny
from brorl_lib.rlvr import exact_q, plateau, tasks
from brorl_lib.rlvr.candidates import Candidate
from brorl_lib.rlvr.run import CHECKPOINT, ArmSettings, save_array
from brorl_lib.rlvr.step import StepSettings

SPLIT_SEED = 0
SCREEN, PLATEAU_RECORD, Q_TRAIN, INSTANCES = "screen.csv", "plateau.json", "q_train.npy", "instances.csv"
PHASE1 = "phase1"
BASE_N = arms.BASE_N  # phase 1 is ProRL's N (paper Table 1)
PASS1_GATE = (0.2, 0.85)  # held-out pass@1 at the plateau: room to improve, and learned at all (our thresholds)
LOW_Q_BAND = (0.01, 1 / 16)  # q a group of 16 rarely samples right (< 64%) and a group of 512 almost always does
LOW_Q_GATE = 0.15  # at least this share of training prompts in LOW_Q_BAND
KEPT_GATE = 0.25  # ProRL keeps at least this share of what it generates (dynamic sampling)
NO_SAMPLE_CAP = 10**15  # phase 1 is bounded by steps
MAX_N = 8192  # our bound on N: 16x the paper's 512
MAX_SAMPLES = 1 << 20  # our bound on generated samples per update or step (memory of one generation batch)
MAX_GRID = 16  # our bound on the values of one grid axis (N, S, budgets, learning-rate multiples)


@dataclass(frozen=True, kw_only=True)
class StudySettings(NotebookConfig):
    """The study's settings, each single value declared once here: notebook 04's parameters of the same names are
    these declarations (``core.params.declared_as``); the checks of single values run on construction,
    ``check_together`` what involves several values or this machine. Defaults: the quick profile."""

    candidates: tuple[Candidate, ...]  # the screen's configurations (countdown only); the first wins ties
    n_train: int = param(120, "training prompts (duplicates dropped)", low=1, high=100_000)
    n_test: int = param(12, "held-out test prompts, disjoint from training", low=2, high=10_000)
    n_val: int = param(8, "validation prompts: choose learning rates, disjoint from both", low=2, high=10_000)
    warm_start_steps: int = param(40, "supervised steps of 32 examples on random correct answers", low=1, high=100_000)
    warm_start_lr: float = param(3e-3, "AdamW learning rate of the warm start", **LEARNING_RATE)
    phase1_prompts: int = param(8, "kept prompts per phase-1 step (N 16)", low=1, high=4096)
    screen_max_steps: int = param(4, "each candidate's phase 1 in the screen stops here", low=1, high=100_000)
    phase1_max_steps: int = param(8, "the chosen candidate's phase 1 stops here if no plateau came first", low=1,
                                 high=100_000)  # fmt: skip
    eval_every: int = param(1, "phase-1 steps between exact held-out evaluations", low=1, high=100_000)
    snapshot_every: int = param(1, "phase-1 steps between kept checkpoints (the update-quality stages)", low=1,
                               high=100_000)  # fmt: skip
    plateau_rule: plateau.PlateauRule
    base_lr: float = param(1e-3, "eta0: AdamW learning rate of phase 1 and of ProRL", **LEARNING_RATE)
    mini_batches: int = param(2, "PPO updates per step, the same in every arm", low=1, high=64)
    temperature: float = param(1.0, "rollout temperature in training (our choice)", **TEMPERATURE)
    max_new_tokens: int = param(6, "response length limit", unit="tokens", low=2, high=64)
    max_rounds: int = param(4, "dynamic sampling: generation rounds per step at most", low=1, high=1000)
    protocol: SamplingParams  # temperature and top-p of the exact held-out pass@1 (n unused)
    device: str = param("cpu", "where the model trains and samples (cuda needs a visible GPU)", choices=("cpu", "cuda"))

    def check_together(self) -> None:
        """What involves several values, or this machine."""
        for c in self.candidates:
            if c.tasks != ("countdown",):
                raise ValueError(f"candidates item {c.spec!r} is not allowed: the study screens countdown only")
            if self.max_new_tokens < 2 * c.difficulties[0]:
                raise ValueError(
                    f"max_new_tokens={self.max_new_tokens} is not allowed for {c.spec!r}: an answer with "
                    f"{c.difficulties[0]} numbers takes {2 * c.difficulties[0] - 1} tokens and <eos>"
                )
        for name in ("screen_max_steps", "phase1_max_steps"):
            check_int(name, getattr(self, name), low=self.eval_every)
            if getattr(self, name) % self.eval_every:
                raise ValueError(f"{name}={getattr(self, name)} must be a multiple of eval_every={self.eval_every}")
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} is not allowed here: no CUDA device is visible; use device='cpu'")

    def step(self, n: int) -> StepSettings:
        return StepSettings(
            n_rollouts=n,
            temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            mini_batches=self.mini_batches,
            max_rounds=self.max_rounds,
            refill="shortfall",
        )

    def phase1_arm(self, seed: int = 0) -> ArmSettings:
        return ArmSettings(
            "phase 1",
            self.step(BASE_N),
            self.phase1_prompts,
            self.base_lr,
            sample_budget=NO_SAMPLE_CAP,
            eval_every=self.eval_every,
            checkpoint_every=self.eval_every,
            seed=seed,
        )


@functools.cache
def _split(task: str, level: int, n_train: int, n_held: int):
    train, held = tasks.make_split(task, level, n_train, n_held, SPLIT_SEED)
    return tuple(train), tuple(held)


def split(settings: StudySettings, candidate: Candidate):
    """Training, held-out test and validation instances (seed 0), disjoint."""
    train, held = _split(
        candidate.tasks[0], candidate.difficulties[0], settings.n_train, settings.n_test + settings.n_val
    )
    return list(train), list(held[: settings.n_test]), list(held[settings.n_test :])


def exact_pass1(settings: StudySettings):
    """Held-out pass@1 per instance, exact: q at the evaluation temperature and top-p (a ``run.Scorer``)."""
    p = settings.protocol

    @torch.no_grad()
    def score(model, tokenizer, instances, seed):  # seed unused: nothing is sampled
        q = exact_q.correct_mass(model.eval(), tokenizer, instances, p.temperature, settings.max_new_tokens, p.top_p)
        return q.cpu().numpy()

    return score


def train_q(settings: StudySettings, model, tokenizer, train) -> np.ndarray:
    """Exact q of every training prompt at the training temperature."""
    return exact_q.correct_mass(model.eval(), tokenizer, train, settings.temperature, settings.max_new_tokens)


def folder(root: Path, candidate: Candidate) -> Path:
    return Path(root) / "configs" / candidate.key


def _phase1(settings: StudySettings, candidate: Candidate, root: Path, max_steps: int, progress: bool) -> dict:
    train, test, _ = split(settings, candidate)
    base = folder(root, candidate)
    if not (base / INSTANCES).exists():
        rows = [(i.prompt, i.answer) for i in test]
        atomic.write_text(
            base / INSTANCES, pd.DataFrame(rows, columns=["prompt", "answer"]).to_csv(index=False, lineterminator="\n")
        )
    started = (base / PHASE1 / CHECKPOINT / "state.json").exists() or (base / PHASE1 / plateau.PLATEAU).exists()
    start = base / "warm_start"
    if not started:
        plateau.warm_start_model(
            candidate.model,
            train,
            settings.warm_start_steps,
            settings.warm_start_lr,
            0,
            start,
            settings.device,
            progress,
        )
    arm = settings.phase1_arm()
    _claim(base / PHASE1 / "arm.json", json.loads(json.dumps(asdict(arm))))
    return plateau.phase1(
        start,
        train,
        test,
        arm,
        base / PHASE1,
        settings.protocol,
        settings.plateau_rule,
        max_steps,
        settings.device,
        progress,
        scorer=exact_pass1(settings),
        keep_every=settings.snapshot_every,
    )


def _claim(path: Path, record: dict) -> None:
    if path.exists():
        old = json.loads(path.read_text())
        if old != record:
            changed = sorted(k for k in set(old) | set(record) if old.get(k) != record.get(k))
            raise ValueError(f"{path.parent} holds a run with other settings (differs in {changed}); delete it")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(record, indent=2))


def regime(settings: StudySettings, candidate: Candidate, root: Path) -> dict:
    """At the phase-1 checkpoint: exact held-out pass@1, the training prompts' exact q (saved as q_train.npy at
    the checkpoint's step), the low-q share, ProRL's kept fraction over the last plateau window, and the gates."""
    base = folder(root, candidate) / PHASE1
    step = json.loads((base / CHECKPOINT / "state.json").read_text())["step"]
    path = base / f"regime_step{step}.json"
    if path.exists():
        return json.loads(path.read_text())
    train, _, _ = split(settings, candidate)
    model, tok = tiny.load(base / CHECKPOINT, settings.device)
    with torch.no_grad():
        q = train_q(settings, model, tok, train).cpu().numpy()
    save_array(base / f"q_train_step{step}.npy", q)
    held = np.load(plateau.pass1_files(base)[-1][1])
    metrics = pd.read_csv(base / "metrics.csv")
    since = step - settings.plateau_rule.window * settings.eval_every  # the last plateau window's steps
    window = metrics[(metrics["step"] > since) & (metrics["step"] <= step)]
    generated = window["samples"].iloc[-1] - metrics.loc[metrics["step"] == max(since, 0), "samples"].iloc[0]
    lo, hi = LOW_Q_BAND
    record = {
        "step": step,
        "pass1": float(held.mean()),
        "pass1_se": float(held.std(ddof=1) / np.sqrt(held.size)),
        "mean_q": float(q.mean()),
        "low_q_share_exact": float(((q >= lo) & (q < hi)).mean()),
        "q_below_low_share": float((q < lo).mean()),
        "q_solved_share": float((q >= 0.95).mean()),
        "kept_fraction": float(window["kept_samples"].sum() / max(1, generated)),  # "samples" is cumulative
    }
    record |= gates(record)
    atomic.write_text(path, json.dumps(record, indent=2))
    return record


def gates(r: dict) -> dict:
    lo, hi = PASS1_GATE
    out = {
        "gate_pass1": bool(lo <= r["pass1"] <= hi),
        "gate_low_q": bool(r["low_q_share_exact"] >= LOW_Q_GATE),
        "gate_kept": bool(r["kept_fraction"] >= KEPT_GATE),
    }
    out["gates_passed"] = all(out.values())
    out["shortfall"] = float(
        max(lo - r["pass1"], 0)
        + max(r["pass1"] - hi, 0)
        + max(LOW_Q_GATE - r["low_q_share_exact"], 0)
        + max(KEPT_GATE - r["kept_fraction"], 0)
    )
    return out


def screen(settings: StudySettings, root: Path, progress: bool = True) -> pd.DataFrame:
    """Every candidate to its screen cap (or plateau), measured; the chosen one marked (passes, else closest)."""
    _claim(Path(root) / "settings.json", json.loads(json.dumps(asdict(settings))))
    path = Path(root) / SCREEN
    if path.exists():
        return pd.read_csv(path)
    rows = []
    for c in settings.candidates:
        ended = _phase1(settings, c, root, settings.screen_max_steps, progress)
        rows.append(
            {"candidate": c.key, "numbers": c.difficulties[0], "model_params": c.model_params}
            | {"screen_steps": int(ended["step"]), "plateau_reached": bool(ended["plateau"])}
            | regime(settings, c, root)
        )
    table = pd.DataFrame(rows)
    order = table.sort_values(["gates_passed", "shortfall"], ascending=[False, True], kind="stable").index
    table["chosen"] = table.index == order[0]
    atomic.write_text(path, table.to_csv(index=False, lineterminator="\n"))
    for c in settings.candidates:  # the screen is done: only the chosen candidate trains on
        if c.key != table.loc[table["chosen"], "candidate"].iloc[0]:
            shutil.rmtree(folder(root, c) / PHASE1 / CHECKPOINT, ignore_errors=True)
    return table


def chosen(settings: StudySettings, root: Path) -> Candidate:
    path = Path(root) / SCREEN
    if not path.exists():
        raise ValueError(f"no screen at {path}: run study.screen first (it chooses the configuration)")
    table = pd.read_csv(path)
    key = table.loc[table["chosen"], "candidate"].iloc[0]
    return next(c for c in settings.candidates if c.key == key)


def plateau_stage(settings: StudySettings, root: Path, progress: bool = True) -> dict:
    """The chosen candidate's phase 1 to its plateau, then its regime and gates there (plateau.json)."""
    _claim(Path(root) / "settings.json", json.loads(json.dumps(asdict(settings))))
    c = chosen(settings, root)
    path = folder(root, c) / PLATEAU_RECORD
    if path.exists():
        record = json.loads(path.read_text())
        if record.get("rule") == plateau.rule_record(settings.plateau_rule):
            return record
    ended = _phase1(settings, c, root, settings.phase1_max_steps, progress)
    record = {"candidate": c.key, "plateau_reached": bool(ended["plateau"]), **ended, **regime(settings, c, root)}
    atomic.write_text(path, json.dumps(record, indent=2))
    return record


QUALITY_STAGES = ("early", "mid", "plateau")  # the phase-1 checkpoints of the update-quality grid


@dataclass(frozen=True, kw_only=True)
class UpdateQualitySettings(NotebookConfig):
    """The update-quality grid's settings, declared once (notebook 04's ``update_rollouts``, ``update_samples``,
    ``update_reps``, ``q_bands`` and ``measured_prompts`` are these declarations); checked on construction."""

    rollouts: list[int] = param([4, 16], "N of the update-quality grid", low=2, high=MAX_N, distinct=True,
                                max_items=MAX_GRID)  # fmt: skip
    samples: list[int] = param([64], "S: generated samples per update in the grid, each a multiple of every N", low=2,
                               high=MAX_SAMPLES, max_items=MAX_GRID)  # fmt: skip
    reps: int = param(2, "repetitions of each update-quality cell", low=2, high=1000)
    q_bands: list[float] = param(
        [0.0, 0.01, 0.0625, 0.5, 0.95, 1.0], "edges of the exact-q bands, increasing, in [0, 1]", low=0.0, high=1.0
    )
    measured_prompts: int = param(16, "training prompts whose exact q judges each update", low=2, high=100_000)
    stages: tuple[str, ...] = QUALITY_STAGES  # which checkpoints, in this order (the order is execution only)

    def check_together(self) -> None:
        """What involves several values: the bands' order, the stages, every S a multiple of every N."""
        from brorl_lib.rlvr import update_quality as uq

        uq.check_bands(list(self.q_bands))
        if not self.stages or len(set(self.stages)) != len(self.stages) or not set(self.stages) <= set(QUALITY_STAGES):
            raise ValueError(
                f"stages={list(self.stages)} is not allowed: give distinct names among {list(QUALITY_STAGES)}"
            )
        for s in self.samples:
            for n in self.rollouts:
                if s % n:
                    raise ValueError(
                        f"update_samples={list(self.samples)} is not allowed with update_rollouts="
                        f"{list(self.rollouts)}: every S must be a multiple of every N (P = S/N prompts); {s} is not "
                        f"a multiple of {n}"
                    )


def quality_prompts(settings: StudySettings, quality: UpdateQualitySettings, root: Path):
    """The measured prompts (a seeded choice of training prompts, whose exact q judges every update) and the pool
    the updates draw from: the other training prompts, so the reference gradient is never on an update's prompts."""
    train, _, _ = split(settings, chosen(settings, root))
    rng = np.random.default_rng(SPLIT_SEED)
    picked = set(rng.choice(len(train), quality.measured_prompts, replace=False).tolist())
    return [train[i] for i in sorted(picked)], [t for i, t in enumerate(train) if i not in picked]


def gradient_stats_stage(
    settings: StudySettings,
    quality: UpdateQualitySettings,
    root: Path,
    samples: int = 64,
    progress: bool = True,
    compute: bool = True,
) -> dict[str, dict]:
    """Per-prompt gradient statistics (``gradient_stats``) on the measured prompts at each update-quality
    checkpoint whose weights are here, each saved once (``update_quality/gradients-<name>.csv`` and ``.json``:
    the moments, the mean pairwise cosine, kept fractions by N, and the model's best N per S with its bootstrap
    range); returns every saved summary, computed or read back (``compute`` false: read back only)."""
    from brorl_lib.models import tiny
    from brorl_lib.rlvr import gradient_stats as gs
    from brorl_lib.rlvr import update_quality as uq

    measured, _ = quality_prompts(settings, quality, root)
    out_dir = Path(root) / "update_quality"
    summaries = {}
    for name, path in quality_checkpoints(settings, root).items():
        target = out_dir / f"{uq.STATS_PREFIX}{name}.json"
        if compute and not target.exists() and (path / "config.json").exists():
            model, tok = tiny.load(path, settings.device)
            table, grads = gs.per_prompt(model, tok, measured, settings.temperature, settings.max_new_tokens,
                                         samples, progress=progress)  # fmt: skip
            m = gs.moments(grads, table["within"].to_numpy())
            best = {}
            for s in quality.samples:  # the model's best N does not depend on S; each S is reported all the same
                boot = gs.bootstrap_best_n(grads, table["within"].to_numpy(), s, len(measured))
                hit = boot[boot > 0]
                best[str(s)] = {"best_n": gs.best_n(m, s, len(measured))[0],
                                "identified_share": float(np.mean(boot > 0)),
                                "low": int(np.percentile(hit, 5)) if len(hit) else None,
                                "high": int(np.percentile(hit, 95)) if len(hit) else None}  # fmt: skip
            record = {"checkpoint": name, "prompts": len(measured), "samples_per_prompt": samples,
                      "g2": m.g2, "between": m.between, "within": m.within,
                      "mean_pairwise_cosine": gs.mean_pairwise_cosine(grads),
                      "kept_fraction": {str(n): gs.kept_fraction(table["q"], n) for n in quality.rollouts},
                      "best_n": best}  # fmt: skip
            atomic.write_text(out_dir / f"{uq.STATS_PREFIX}{name}.csv", table.to_csv(index=False, lineterminator="\n"))
            atomic.write_text(target, json.dumps(record, indent=2))
        if target.exists():
            summaries[name] = json.loads(target.read_text())
    return summaries


def quality_checkpoints(settings: StudySettings, root: Path) -> dict[str, Path]:
    """The chosen phase 1's checkpoints the update quality is measured at: its first snapshot (early), the
    snapshot nearest half the plateau's step (mid) and the plateau itself. The snapshots' steps come from
    ``snapshot_every`` (phase 1 keeps one at each multiple), not from the folders: their weights are not
    committed, and a finished grid reads its rows back without them."""
    base = folder(root, chosen(settings, root)) / PHASE1
    step = json.loads((base / CHECKPOINT / "state.json").read_text())["step"]
    snaps = list(range(settings.snapshot_every, step, settings.snapshot_every)) if settings.snapshot_every else []
    if len(snaps) < 2:
        raise ValueError(
            f"phase 1 at {base} kept {len(snaps)} snapshots before its plateau at step {step} (snapshot_every="
            f"{settings.snapshot_every}): need an early and a mid one"
        )
    mid = min(snaps[1:], key=lambda k: abs(k - step / 2))
    return {
        f"early-step{snaps[0]}": base / "snapshots" / f"step{snaps[0]}",
        f"mid-step{mid}": base / "snapshots" / f"step{mid}",
        f"plateau-step{step}": base / CHECKPOINT,
    }


def update_quality_stage(
    settings: StudySettings,
    quality: UpdateQualitySettings,
    root: Path,
    extra: dict | None = None,
    progress=True,
    compute: bool = True,
):
    """The update-quality grid at the chosen phase 1's checkpoints of ``quality.stages``, in that order (and
    ``extra``: name -> (checkpoint, training prompts, measured prompts per task, learning rate of S samples)),
    saved under ``update_quality/``; the learning rate of an update of S samples is phase 1's by the square-root
    rule; returns the raw rows (of those checkpoints and ``extra``). ``compute`` false: only the rows already
    saved (a checkpoint not yet measured has none)."""

    from brorl_lib.rlvr import update_quality as uq

    measured, pool = quality_prompts(settings, quality, root)

    def lr_of(s: int) -> float:
        return scaled_learning_rate(settings.base_lr, BASE_N * settings.phase1_prompts, s)

    found = quality_checkpoints(settings, root)
    name_of = {name.split("-")[0]: name for name in found}  # "plateau-step390" -> stage "plateau"
    points = {name_of[s]: (found[name_of[s]], pool, {"countdown": measured}, lr_of) for s in quality.stages}
    points |= extra or {}
    present = {name: point for name, point in points.items() if (point[0] / "config.json").exists()}
    if compute and present:
        if len(present) < len(points):  # no weights here: their saved rows are read back as they are
            print(f"update quality: no weights for {', '.join(sorted(set(points) - set(present)))}")
        uq.run_grid(
            present,
            list(quality.q_bands),
            list(quality.rollouts),
            list(quality.samples),
            quality.reps,
            lambda n: StepSettings(**(asdict(settings.step(n)) | {"dedupe": True})),
            Path(root) / "update_quality",
            settings.device,
            progress,
        )
    saved = [Path(root) / "update_quality" / f"{name}.csv" for name in points]
    frames = [uq.read_raw(path) for path in saved if path.exists()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=uq.RAW_COLUMNS)


OUTSIDE = "outside_mass.json"


def outside_check(settings: StudySettings, root: Path, samples: int = 64, seed: int = 0) -> dict:
    """At the plateau: the accepted mass outside the canonical answers (``exact_q.outside_mass``), estimated from
    ``samples`` draws per held-out prompt at the evaluation temperature and top-p and per training prompt (the
    first n_test) at the training temperature, with standard errors. Saved once as outside_mass.json."""
    base = folder(root, chosen(settings, root)) / PHASE1
    path = base / OUTSIDE
    if path.exists():
        return json.loads(path.read_text())
    train, test, _ = split(settings, chosen(settings, root))
    model, tok = tiny.load(base / CHECKPOINT, settings.device)
    p = settings.protocol
    held = exact_q.outside_mass(model, tok, test, samples, p.temperature, settings.max_new_tokens, seed, p.top_p)
    trained = exact_q.outside_mass(
        model, tok, train[: settings.n_test], samples, settings.temperature, settings.max_new_tokens, seed
    )
    record = {
        "samples": samples,
        "held_out": held[0],
        "held_out_se": held[1],
        "train": trained[0],
        "train_se": trained[1],
    }
    atomic.write_text(path, json.dumps(record, indent=2))
    return record


PREVIOUS_RUNS = Path("data/runs/laptop_rlvr")  # the earlier design's committed runs (spell_backward + arithmetic)
PREVIOUS_NAME = "spell_arith_plateau"  # its checkpoint's name in the update-quality tables


def in_repository(folder: str | Path) -> Path:
    """``folder`` as given when absolute, else relative to the repository root (where notebook 04's folders are)."""
    from brorl_lib.core.paths import REPO_ROOT

    return Path(folder) if Path(folder).is_absolute() else REPO_ROOT / folder


def previous_key(runs: Path = PREVIOUS_RUNS) -> str:
    """The earlier design's chosen candidate (its key): the model its plateau checkpoint is."""
    return str(pd.read_csv(in_repository(runs) / SCREEN).query("chosen")["candidate"].iloc[0])


def previous_plateau(measured_prompts: int, runs: Path = PREVIOUS_RUNS) -> dict:
    """The earlier design's committed plateau checkpoint as one more update-quality point, read from its own
    records: its chosen candidate's tasks, its training split, and its phase 1's learning rate and prompts for
    the square-root rule; ``measured_prompts`` seeded training prompts per task."""

    runs = in_repository(runs)
    shared = json.loads((runs / "settings.json").read_text())
    key = previous_key(runs)
    cand = next(
        c
        for c in shared["candidates"]
        if Candidate(tuple(c["tasks"]), tuple(c["difficulties"]), tiny.TinyModelShape(**c["model"])).key == key
    )
    phase1 = runs / "configs" / key / "plateau0" / PHASE1
    arm = json.loads((phase1 / "arm.json").read_text())
    train, measured = [], {}
    for task, level in zip(cand["tasks"], cand["difficulties"]):
        part, _ = tasks.make_split(task, level, shared["n_train"], shared["n_test"] + shared["n_val"], SPLIT_SEED)
        train += part
        rng = np.random.default_rng(SPLIT_SEED)
        measured[task] = [part[i] for i in sorted(rng.choice(len(part), measured_prompts, replace=False))]

    def lr_of(s: int) -> float:
        return scaled_learning_rate(arm["lr"], BASE_N * arm["prompts_per_step"], s)

    return {PREVIOUS_NAME: (phase1 / CHECKPOINT, train, measured, lr_of)}
