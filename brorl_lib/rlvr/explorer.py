"""Notebook 04's explore section: the committed runs overlaid by arm and seed, and a short live run.

The committed runs (data/runs/laptop_rlvr/) are read with the paper profile's parameters (params/paper.yaml),
the settings they were made with; until that run has a finished plateau and phase-2 arms, the tab says so. The
live run's settings (N, eta0, temperature, PPO mini-batches, refill rounds, sample budget) are
``LaptopRLVRConfig``'s declared parameters (``core.controls``), checked by the same config checks. It trains one
phase-2 arm, built as ``arms.main_arms`` builds it, from the chosen configuration's main plateau checkpoint (this
notebook's runs_dir if it holds one, else the committed runs'), one step at a time, into a fresh folder under
``build/interactive/live_rlvr/``, with a progress bar (generated samples) and a Stop button. A live run trains no
learning-rate grid and no second plateau.
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import shutil
from collections.abc import Callable
from functools import cache
from pathlib import Path

import ipywidgets as w
import matplotlib.pyplot as plt
import pandas as pd

from brorl_lib.core.controls import ConfigControls, powers_of_two
from brorl_lib.core.live import LiveFigure, Progress, Stopped
from brorl_lib.core.paths import BUILD_DIR, REPO_ROOT
from brorl_lib.core.plotting import new_figure, pt
from brorl_lib.core.profiles import plan_run
from brorl_lib.core.registry import get_notebook
from brorl_lib.rlvr import arms as arm_design
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr import plateau, plots, report
from brorl_lib.rlvr.config import LaptopRLVRConfig
from brorl_lib.rlvr.run import CHECKPOINT, run_arm
from brorl_lib.rlvr.tasks import LaptopInstance

NOTEBOOK = "04_laptop_rlvr"
COMMITTED_PROFILE = "paper"  # the profile the committed runs were made with (its runs_dir is data/runs/laptop_rlvr)
LIVE_DIR = BUILD_DIR / "interactive" / "live_rlvr"
PROVENANCE = "scaled-down"
# Our choice: the live run scores the first 200 held-out instances (16 samples each, the protocol's), about 6 s
# per evaluation on 2 loaded CPU cores instead of 30 s for the paper profile's 1,000; the standard error of the
# mean pass@1 over 200 instances is at most 0.035, enough to see a run move, not to compare arms.
LIVE_TEST_INSTANCES = 200
LIVE_N = 64  # the N the live tab starts at (between the paper's 16 and 512)
# sample budgets offered, in kept batches of the ProRL arm (16 x P samples): 8 is one kept batch of BroRL N=512
LIVE_PRORL_STEPS = (8, 16, 32, 64)
LIVE_START_STEPS = 8  # the budget the live tab starts at, in ProRL kept batches
LIVE_EVALS = 8  # the live run is evaluated at every eighth of its budget (those a step of its widest arm reaches)


def shown_path(path: Path) -> str:
    """``path`` relative to the repository root when inside it."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


@cache
def committed_config() -> LaptopRLVRConfig:
    """The paper profile's notebook-04 parameters, read and checked as ``plan_run`` reads a profile."""
    plan = plan_run(get_notebook(NOTEBOOK), COMMITTED_PROFILE)
    return LaptopRLVRConfig(**{**LaptopRLVRConfig.defaults(), **plan.parameters})


def unfinished(cfg: LaptopRLVRConfig) -> str | None:
    """Why ``cfg``'s run folder has no finished plateau to read yet (None once the chosen configuration's main
    plateau is finished: phase 1 ended and recorded)."""
    settings, root = cfg.settings(), cfg.runs_path()
    where = f"{shown_path(root)} has no finished plateau yet"
    if len(settings.candidates) > 1 and not (root / ex.SCREEN).exists():
        return (
            f"{where}: the regime screen of its {len(settings.candidates)} candidates has not finished (the run is "
            "still training, or was never run: notebook 04 with these parameters runs it)"
        )
    candidate = settings.chosen(root)
    if not (plateau_checkpoint(cfg).parent / plateau.PLATEAU).exists():
        return f"{where}: phase 1 of the chosen configuration {candidate.spec} has not reached its plateau"
    return None


def plateau_checkpoint(cfg: LaptopRLVRConfig) -> Path:
    """The chosen configuration's main plateau checkpoint: every phase-2 arm of ``cfg``'s run starts there."""
    settings, root = cfg.settings(), cfg.runs_path()
    return ex.plateau_folder(root, settings.chosen(root), settings.plateau_seeds[0]) / ex.PHASE1 / CHECKPOINT


def read_run(cfg: LaptopRLVRConfig) -> report.Run:
    """``cfg``'s run folder read back (``experiment.collect``), without training anything; a ValueError that says
    what is missing when it has no finished plateau or no phase-2 run yet."""
    reason = unfinished(cfg)
    if reason:
        raise ValueError(reason)
    settings, root = cfg.settings(), cfg.runs_path()
    metrics = ex.collect(settings, list(cfg.seeds), root)
    if not (metrics.phase == 2).any():
        raise ValueError(f"{shown_path(root)} has a finished plateau but no phase-2 run yet: nothing to overlay")
    return report.Run(settings, list(cfg.seeds), root, metrics)


@cache
def committed_run() -> report.Run:
    """The committed runs read back (a ValueError while they are unfinished; not cached then)."""
    return read_run(committed_config())


def committed_metrics() -> pd.DataFrame:
    """Every step's metrics of the committed runs (``experiment.collect``; columns plateau, phase, seed, arm, ...)."""
    return committed_run().metrics


def overlay(run: report.Run, labels: list[str], seeds: list[int], plateau_seed: int | None = None) -> plt.Figure:
    """Held-out pass@1 against generated samples and time at one plateau (default: the main one), mean over the
    chosen seeds at each budget, per chosen arm (label)."""
    for name, chosen in (("arms", labels), ("seeds", seeds)):
        if not chosen:
            raise ValueError(f"{name}=[] is not allowed: choose at least one")
    p = run.main if plateau_seed is None else plateau_seed
    evals = report.curves(run)
    evals = evals[(evals.plateau == p) & evals.label.isin(labels) & evals.seed.isin(seeds)]
    order = report.arm_order(run.metrics)
    shown = order[order.label.isin(labels) & order.arm.isin(evals.arm)]
    if shown.empty:
        raise ValueError(
            f"arms={labels} have no run under seeds={seeds} at plateau {p} (the learning-rate grid runs on the "
            "first seed, and further plateaus run ProRL and the broad arm only)"
        )
    fig = plots.figure1(report.mean_curves(evals, run.settings.budgets), shown)
    missing = [label for label in labels if label not in set(shown.label)]
    note = f"; no run under these seeds: {', '.join(missing)}" if missing else ""
    fig.suptitle(f"plateau {p}, mean over seeds {', '.join(map(str, seeds))}{note}", fontsize=pt(7), x=0.01, ha="left")
    return fig


def runs_explorer(paper: LaptopRLVRConfig | None = None, note: str = "") -> LiveFigure:
    """Overlay the committed runs (or ``paper``'s): which plateau, arms and seeds; ``note`` ends its title. A
    ValueError saying what is missing while the run has no finished plateau or no phase-2 run."""
    run = committed_run() if paper is None else read_run(paper)
    metrics = run.metrics
    order = report.arm_order(metrics)
    labels = order["label"].tolist()
    phase2 = metrics[metrics.phase == 2]
    seeds = sorted(int(s) for s in phase2["seed"].unique())
    plateaus = sorted(int(p) for p in phase2["plateau"].unique())
    start = tuple(order.loc[order.role == "paper", "label"]) or tuple(labels[:1])  # ProRL's and BroRL's N
    arms_w = w.SelectMultiple(options=labels, value=start, rows=min(len(labels), 9), description="arms")
    seeds_w = w.SelectMultiple(options=seeds, value=tuple(seeds), rows=min(len(seeds), 9), description="seeds")
    plateau_w = w.Dropdown(options=plateaus, value=run.main if run.main in plateaus else plateaus[0])
    plateau_w.description = "plateau (phase-1 seed)"

    def read(values: dict) -> dict:
        return {"arms": list(values["arms"]), "seeds": list(values["seeds"]), "plateau": int(values["plateau"])}

    return LiveFigure(
        {"arms": arms_w, "seeds": seeds_w, "plateau": plateau_w},
        read,
        lambda params, progress: overlay(run, params["arms"], params["seeds"], params["plateau"]),
        name="laptop_rlvr_runs_view",
        provenance=PROVENANCE,
        caption="Laptop-scale runs: held-out pass@1 per arm at each sample budget, mean over the chosen seeds",
        title=f"The runs in {shown_path(run.root)} ({run.candidate.spec}){note}",
    ).show_first()


def has_checkpoint(cfg: LaptopRLVRConfig) -> bool:
    """Whether ``cfg``'s run folder holds a finished main plateau with its checkpoint."""
    return unfinished(cfg) is None and (plateau_checkpoint(cfg) / "state.json").exists()


def live_base(cfg: LaptopRLVRConfig) -> LaptopRLVRConfig:
    """The run folder the live run starts from: ``cfg``'s if it holds a finished main plateau, else the committed
    runs' (the paper profile's settings); a ValueError saying why when neither does."""
    if has_checkpoint(cfg):
        return cfg
    committed = committed_config()
    if has_checkpoint(committed):
        return committed
    reasons = [unfinished(c) or f"{shown_path(plateau_checkpoint(c))} holds no checkpoint" for c in (cfg, committed)]
    raise ValueError(
        "the live run starts from a plateau checkpoint and none is there: "
        + "; ".join(dict.fromkeys(reasons))
        + ". Run section 1 of this notebook first (its runs_dir then holds one)"
    )


def prorl_batch(cfg: LaptopRLVRConfig) -> int:
    """Samples in one kept batch of the ProRL arm (16 x P): the unit of the live budgets."""
    return arm_design.BASE_N * cfg.prompts


def live_config(cfg: LaptopRLVRConfig, n: int, budget: int | None = None) -> LaptopRLVRConfig:
    """``cfg`` with the arms reduced to ProRL and N = ``n`` (no ablation, no batch control), no learning-rate grid,
    one plateau, and sample budgets at every LIVE_EVALS-th of ``budget`` (default LIVE_START_STEPS ProRL kept
    batches) that the widest arm's kept batch reaches, ``budget`` last; checked like any config (a budget below
    a kept batch is refused, naming budgets)."""
    budget = LIVE_START_STEPS * prorl_batch(cfg) if budget is None else budget
    rollouts = sorted({arm_design.BASE_N, n})
    widest = max(prorl_batch(cfg), n * (cfg.prompts // arm_design.PROMPT_RATIO))
    points = {budget * k // LIVE_EVALS for k in range(1, LIVE_EVALS + 1)}
    budgets = sorted({b for b in points if b >= widest} | {budget})
    return dataclasses.replace(
        cfg,
        arm_rollouts=rollouts,
        base_lr_rollouts=[],
        batch_control=False,
        lr_pilot_factors=[],
        plateau_seeds=list(cfg.plateau_seeds[:1]),
        budgets=budgets,
    )


def live_arm(cfg: LaptopRLVRConfig, n: int) -> arm_design.Arm:
    """The N = ``n`` arm as ``arms.main_arms`` builds it: P prompts for N = 16, else P/4, at ``rule_lr``."""
    return next(a for a in arm_design.main_arms(live_config(cfg, n).design()) if a.n == n)


def run_data(cfg: LaptopRLVRConfig) -> tuple[list[LaptopInstance], list[LaptopInstance]]:
    """Training and held-out instances of the configuration ``cfg``'s screen chose (``experiment.split``), the
    held-out set cut to its first LIVE_TEST_INSTANCES."""
    settings = cfg.settings()
    train, test, _ = ex.split(settings, settings.chosen(cfg.runs_path()))
    return train, test[:LIVE_TEST_INSTANCES]


_RUN_COUNTER = itertools.count()


def train_live(
    cfg: LaptopRLVRConfig, n: int, progress: Progress, seed: int | None = None, budget: int | None = None
) -> pd.DataFrame:
    """Train the N = ``n`` arm from ``cfg``'s plateau checkpoint one step at a time up to ``budget`` generated
    samples (``live_config``); returns its metrics so far (columns of ``run_arm`` plus arm, label, N, prompts, lr).
    A Stop ends the run after the current step."""
    if not has_checkpoint(cfg):
        raise ValueError(
            f"no plateau checkpoint in runs_dir={cfg.runs_dir!r}: {unfinished(cfg) or 'its checkpoint is missing'}; "
            "the live run starts from one: run section 1 first, or start from the committed runs (live_base)"
        )
    start = plateau_checkpoint(cfg)
    live = live_config(cfg, n, budget)
    seed = cfg.seeds[0] if seed is None else seed
    settings = live.settings()
    arm = live_arm(live, n)
    # every step resumable: Stop can end after any step
    chosen = dataclasses.replace(ex.arm_settings(settings, arm, seed), name=f"live {arm.label}", checkpoint_every=1)
    train, test = run_data(cfg)
    out = LIVE_DIR / f"run{next(_RUN_COUNTER):03d}_{arm.key}"
    shutil.rmtree(out, ignore_errors=True)  # a folder left by an earlier session: start afresh, never resume it
    progress.start(chosen.sample_budget, "samples")
    metrics = None
    while metrics is None or metrics["samples"].iloc[-1] < chosen.sample_budget:
        metrics = run_arm(
            start, train, test, chosen, out, settings.protocol, max_steps=1, progress=False, device=settings.device
        )
        try:
            progress.advance(int(metrics["samples"].iloc[-1]) - progress.done)
        except Stopped:
            break
    return metrics.assign(arm=arm.key, label=arm.label, N=arm.n, prompts=arm.prompts, lr=arm.lr)


def live_figure(metrics: pd.DataFrame, budget: int) -> plt.Figure:
    """The live run's mean step reward and held-out pass@1 (error bars: one standard error over instances)
    against generated samples."""
    fig, (ax_r, ax_t) = new_figure("full", aspect=0.3, ncols=2)
    steps = metrics[metrics.step > 0]
    ax_r.plot(steps["samples"], steps["reward_mean"], "o-", ms=2)
    scored = metrics.dropna(subset=["pass1"])
    ax_t.errorbar(scored["samples"], scored["pass1"], yerr=scored["pass1_se"], fmt="o-", ms=3, capsize=2)
    for ax in (ax_r, ax_t):
        ax.set_xlabel("generated samples")
        ax.set_xlim(0, budget)
    ax_r.set_ylabel("mean reward of the step's samples")
    ax_t.set_ylabel(f"held-out pass@1 ({LIVE_TEST_INSTANCES} instances)")
    row = metrics.iloc[-1]
    rounds = steps["rounds"].mean() if len(steps) else float("nan")
    ax_r.set_title(
        f"live {row['label']}: {int(row['samples'])} of {budget} samples "
        f"({int(row['prompts'])} kept prompts/step, {rounds:.1f} rounds/step, lr {row['lr']:.2g})",
        loc="left",
    )
    return fig


def live_explorer(cfg: LaptopRLVRConfig) -> LiveFigure:
    """A short phase-2 run from a plateau checkpoint (``live_base``): Run trains it, Stop ends it after the current
    step."""
    base = live_base(cfg)
    budgets = [k * prorl_batch(base) for k in LIVE_PRORL_STEPS]
    start = live_config(base, LIVE_N, budgets[LIVE_PRORL_STEPS.index(LIVE_START_STEPS)])
    controls = ConfigControls(
        start,
        {
            "base_lr": {"low": 1e-5, "high": 1e-2, "log": True},
            "temperature": {"low": 0.1, "high": 2.0, "step": 0.05},
            "mini_batches": {"low": 1, "high": 8},
            "max_rounds": {"low": 1, "high": 20},
        },
        extra={
            "rollouts": w.SelectionSlider(
                options=powers_of_two(base.parameter("arm_rollouts"), high=arm_design.PAPER_BROAD_N),
                value=LIVE_N,
                description="N",
            ),
            "budget": w.SelectionSlider(options=budgets, value=start.budgets[-1], description="generated samples"),
        },
    )

    def read(values: dict) -> dict:
        params = controls.read(values)
        # the arm list and budgets checked as a whole
        params["_config"] = live_config(params["_config"], params["rollouts"], params["budget"])
        return params

    def draw(params: dict, progress: Progress) -> plt.Figure:
        metrics = train_live(params["_config"], params["rollouts"], progress, budget=params["budget"])
        return live_figure(metrics, params["budget"])

    return LiveFigure(
        controls.all,
        read,
        draw,
        name="laptop_rlvr_live_view",
        provenance=PROVENANCE,
        caption="A short live phase-2 run from a plateau checkpoint",
        live=lambda params: False,
        title=f"A short live run from {shown_path(plateau_checkpoint(base))} "
        "(Run trains; Stop ends it after the current step)",
    )


def _tab(build: Callable[[], LiveFigure]) -> w.Widget:
    """An explorer's widget, or what keeps it from being built (e.g. a run still training) in its place."""
    try:
        return build().widget
    except ValueError as err:
        return w.HTML(f"<p>{html.escape(str(err))}</p>")


def explore(cfg: LaptopRLVRConfig) -> w.Widget:
    """Two tabs: the committed runs (this notebook's own runs while the committed ones are unfinished) and a
    live run."""
    if unfinished(committed_config()) is None:
        runs, first = runs_explorer, "committed runs"
    else:
        runs, first = (lambda: runs_explorer(cfg, ": the committed runs are unfinished")), "this notebook's runs"
    tabs = w.Tab([_tab(runs), _tab(lambda: live_explorer(cfg))])
    for i, title in enumerate((first, "live run")):
        tabs.set_title(i, title)
    return tabs
