"""Notebook 04's explore section: the committed runs overlaid by arm and seed, and a short live run.

The committed runs (data/runs/laptop_rlvr/) are read with the paper profile's parameters (params/paper.yaml),
the settings they were made with. The live run's settings (N, eta0, temperature, sample budget, PPO
mini-batches) are ``LaptopRLVRConfig``'s declared parameters (``core.controls``), checked by the same config
checks. It trains one phase-2 arm, built as ``arms.main_arms`` builds it, from a phase-1 checkpoint (this
notebook's runs_dir if it holds one, else the committed runs'), one step at a time, into a fresh folder under
``build/interactive/live_rlvr/``, with a progress bar (samples) and a Stop button.
"""

from __future__ import annotations

import dataclasses
import itertools
import shutil
from functools import cache
from pathlib import Path

import ipywidgets as w
import matplotlib.pyplot as plt
import pandas as pd

from brorl_lib.core.controls import ConfigControls, powers_of_two
from brorl_lib.core.live import LiveFigure, Progress, Stopped
from brorl_lib.core.paths import BUILD_DIR, REPO_ROOT
from brorl_lib.core.plotting import new_figure
from brorl_lib.core.profiles import plan_run
from brorl_lib.core.registry import get_notebook
from brorl_lib.rlvr import arms as arm_design
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr import plots, report
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
# sample budgets offered, in steps of the ProRL arm (16 x P samples): 8 is one step of BroRL N=512 (512 x P/4)
LIVE_PRORL_STEPS = (8, 16, 32, 64)
LIVE_START_STEPS = 8  # the budget the live tab starts at, in ProRL steps


def shown_path(path: Path) -> str:
    """``path`` relative to the repository root when inside it."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


@cache
def committed_config() -> LaptopRLVRConfig:
    """The paper profile's notebook-04 parameters, read and checked as ``plan_run`` reads a profile."""
    plan = plan_run(get_notebook(NOTEBOOK), COMMITTED_PROFILE)
    return LaptopRLVRConfig(**{**LaptopRLVRConfig.defaults(), **plan.parameters})


@cache
def committed_metrics() -> pd.DataFrame:
    """Every step's metrics of the committed runs (``experiment.collect``), without training anything."""
    cfg = committed_config()
    return ex.collect(cfg.settings(), list(cfg.seeds), cfg.runs_path())


def overlay(metrics: pd.DataFrame, labels: list[str], seeds: list[int]) -> plt.Figure:
    """Held-out pass@1 against generated samples and time, mean over the chosen seeds, per chosen arm (label)."""
    for name, chosen in (("arms", labels), ("seeds", seeds)):
        if not chosen:
            raise ValueError(f"{name}=[] is not allowed: choose at least one")
    evals = report.curves(metrics)
    evals = evals[evals.label.isin(labels) & evals.seed.isin(seeds)]
    order = report.arm_order(metrics)
    shown = order[order.label.isin(labels) & order.arm.isin(evals.arm)]
    if shown.empty:
        raise ValueError(f"arms={labels} have no run under seeds={seeds} (the learning-rate pilot ran seed 0 only)")
    fig = plots.figure1(report.mean_curves(evals), shown)
    missing = [label for label in labels if label not in set(shown.label)]
    note = f"; no run under these seeds: {', '.join(missing)}" if missing else ""
    fig.suptitle(f"mean over seeds {', '.join(map(str, seeds))}{note}", fontsize=7, x=0.01, ha="left")
    return fig


def runs_explorer(paper: LaptopRLVRConfig | None = None) -> LiveFigure:
    """Overlay the committed runs: which arms and seeds."""
    if paper is None:
        paper, metrics = committed_config(), committed_metrics()
    else:
        metrics = ex.collect(paper.settings(), list(paper.seeds), paper.runs_path())
    order = report.arm_order(metrics)
    labels = order["label"].tolist()
    seeds = sorted(int(s) for s in metrics.loc[metrics.phase == 2, "seed"].unique())
    start = tuple(order.loc[order.role == "paper", "label"]) or tuple(labels[:1])  # ProRL's and BroRL's N
    arms_w = w.SelectMultiple(options=labels, value=start, rows=min(len(labels), 9), description="arms")
    seeds_w = w.SelectMultiple(options=seeds, value=tuple(seeds), rows=len(seeds), description="seeds")

    def read(values: dict) -> dict:
        return {"arms": list(values["arms"]), "seeds": list(values["seeds"])}

    return LiveFigure(
        {"arms": arms_w, "seeds": seeds_w},
        read,
        lambda params, progress: overlay(metrics, params["arms"], params["seeds"]),
        name="laptop_rlvr_runs_view",
        provenance=PROVENANCE,
        caption="Committed laptop-scale runs: held-out pass@1 per arm, mean over the chosen seeds",
        title=f"The committed runs ({shown_path(paper.runs_path())})",
    ).show_first()


def has_checkpoint(cfg: LaptopRLVRConfig) -> bool:
    return (cfg.runs_path() / ex.PHASE1 / CHECKPOINT / "state.json").exists()


def live_base(cfg: LaptopRLVRConfig) -> LaptopRLVRConfig:
    """The run folder the live run starts from: ``cfg``'s if it holds a phase-1 checkpoint, else the committed
    runs' (the paper profile's settings, whose phase-1 checkpoint is committed)."""
    return cfg if has_checkpoint(cfg) else committed_config()


def live_config(cfg: LaptopRLVRConfig, n: int) -> LaptopRLVRConfig:
    """``cfg`` with the rule arms reduced to the ProRL arm and N = ``n``, no batch control and no pilot (checked
    like any config: the sample budget must be a multiple of every arm's samples per step). The ablation arms
    stay declared (``ArmDesign.check`` refuses an empty base_lr_rollouts) though only the N = ``n`` arm trains."""
    return dataclasses.replace(
        cfg, arm_rollouts=sorted({arm_design.BASE_N, n}), batch_control=False, lr_pilot_factors=[]
    )


def live_arm(cfg: LaptopRLVRConfig, n: int) -> arm_design.Arm:
    """The N = ``n`` arm as ``arms.main_arms`` builds it: P prompts for N = 16, else P/4, at ``rule_lr``."""
    return next(a for a in arm_design.main_arms(live_config(cfg, n).design()) if a.n == n)


def run_data(cfg: LaptopRLVRConfig) -> tuple[list[LaptopInstance], list[LaptopInstance]]:
    """Training and held-out instances of ``cfg``'s run folder (``experiment.data``, the tasks its screen kept),
    the held-out set cut to its first LIVE_TEST_INSTANCES."""
    train, test = ex.data(cfg.settings())
    screen = cfg.runs_path() / ex.TASK_SCREEN
    if screen.exists():
        table = pd.read_csv(screen)
        kept = set(table.loc[table["kept"], "task"])
        train, test = [i for i in train if i.task in kept], [i for i in test if i.task in kept]
    return train, test[:LIVE_TEST_INSTANCES]


_RUN_COUNTER = itertools.count()


def train_live(cfg: LaptopRLVRConfig, n: int, progress: Progress, seed: int | None = None) -> pd.DataFrame:
    """Train the N = ``n`` arm from ``cfg``'s phase-1 checkpoint one step at a time; returns its metrics so far
    (columns of ``run_arm`` plus arm, label, N, prompts, lr). A Stop ends the run after the current step."""
    start = cfg.runs_path() / ex.PHASE1 / CHECKPOINT
    if not has_checkpoint(cfg):
        raise ValueError(
            f"no phase-1 checkpoint under {start} (runs_dir={cfg.runs_dir!r}): the live run starts from one; run "
            "section 1 first, or start from the committed runs (live_base)"
        )
    seed = cfg.seeds[0] if seed is None else seed
    settings = live_config(cfg, n).settings()
    arm = live_arm(cfg, n)
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
    ax_r.set_title(
        f"live {row['label']}: {int(row['samples'])} of {budget} samples "
        f"({int(row['prompts'])} prompts/step, lr {row['lr']:.2g})",
        loc="left",
    )
    return fig


def live_explorer(cfg: LaptopRLVRConfig) -> LiveFigure:
    """A short phase-2 run from a phase-1 checkpoint (``live_base``): Run trains it, Stop ends it after the
    current step."""
    base = live_base(cfg)
    prorl_step = arm_design.BASE_N * base.prompts  # samples per step of the ProRL arm
    budgets = tuple(k * prorl_step for k in LIVE_PRORL_STEPS)
    start = dataclasses.replace(live_config(base, LIVE_N), sample_budget=LIVE_START_STEPS * prorl_step)
    controls = ConfigControls(
        start,
        {
            "sample_budget": {"options": budgets},
            "base_lr": {"low": 1e-5, "high": 1e-2, "log": True},
            "temperature": {"low": 0.1, "high": 2.0, "step": 0.05},
            "mini_batches": {"low": 1, "high": 8},
        },
        extra={
            "rollouts": w.SelectionSlider(
                options=powers_of_two(base.parameter("arm_rollouts"), high=arm_design.PAPER_BROAD_N),
                value=LIVE_N,
                description="N",
            )
        },
    )

    def read(values: dict) -> dict:
        params = controls.read(values)
        params["_config"] = live_config(params["_config"], params["rollouts"])  # the arm list checked as a whole
        return params

    def draw(params: dict, progress: Progress) -> plt.Figure:
        metrics = train_live(params["_config"], params["rollouts"], progress)
        return live_figure(metrics, params["sample_budget"])

    return LiveFigure(
        controls.all,
        read,
        draw,
        name="laptop_rlvr_live_view",
        provenance=PROVENANCE,
        caption="A short live phase-2 run from a phase-1 checkpoint",
        live=lambda params: False,
        title=f"A short live run from {shown_path(base.runs_path() / ex.PHASE1 / CHECKPOINT)} "
        "(Run trains; Stop ends it after the current step)",
    )


def explore(cfg: LaptopRLVRConfig) -> w.Widget:
    tabs = w.Tab([runs_explorer().widget, live_explorer(cfg).widget])
    for i, title in enumerate(("committed runs", "live run")):
        tabs.set_title(i, title)
    return tabs
