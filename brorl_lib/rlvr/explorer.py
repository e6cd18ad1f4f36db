"""Notebook 04's explore section: the committed runs overlaid by arm, seed and task, and a short live run.

The task choice and the live run's settings (N, learning rate, temperature, sample budget, PPO updates) are
``LaptopRLVRConfig``'s declared parameters (``core.controls``), checked by the same config checks. The live
run trains one phase-2 arm from this notebook's phase-1 checkpoint, one step at a time, into a fresh folder
under ``build/interactive/live_rlvr/``, with a progress bar (samples) and a Stop button.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from functools import cache
from pathlib import Path

import ipywidgets as w
import matplotlib.pyplot as plt
import pandas as pd

from brorl_lib.core.controls import ConfigControls, control, powers_of_two, value_of
from brorl_lib.core.live import LiveFigure, Progress, Stopped
from brorl_lib.core.paths import BUILD_DIR, REPO_ROOT
from brorl_lib.core.plotting import new_figure
from brorl_lib.paper import reported as paper
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr import plots, report
from brorl_lib.rlvr.run import CHECKPOINT, run_arm

COMMITTED_RUNS = REPO_ROOT / "data" / "runs" / "laptop_rlvr"  # the paper profile's runs (figures/ is made from them)
LIVE_DIR = BUILD_DIR / "interactive" / "live_rlvr"
_ARM_FOLDER = re.compile(r"^arm_N(?P<n>\d+)(?P<base>_base_lr)?$")
PROVENANCE = "scaled-down"


def read_metrics(runs_dir: Path) -> pd.DataFrame:
    """Every seed's phase-1 and phase-2 metrics from a finished runs folder, as ``experiment.run`` returns them
    (columns seed, phase, arm, N, folder besides each metrics.csv's), without training anything."""
    frames = []
    for root in sorted(Path(runs_dir).glob("seed*"), key=lambda p: int(p.name.removeprefix("seed"))):
        seed = int(root.name.removeprefix("seed"))
        p1 = pd.read_csv(root / "phase1" / "metrics.csv")
        frames.append(p1.assign(seed=seed, phase=1, arm="phase 1", N=ex.BASE_N, folder="phase1"))
        for folder in sorted(p.name for p in root.iterdir() if _ARM_FOLDER.match(p.name)):
            m = _ARM_FOLDER.match(folder)
            n = int(m["n"])
            name = f"N={n} base lr" if m["base"] else f"N={n}"
            arm = pd.read_csv(root / folder / "metrics.csv")
            frames.append(arm.assign(seed=seed, phase=2, arm=name, N=n, folder=folder))
    if not frames:
        raise ValueError(f"runs_dir={str(runs_dir)!r} holds no seed folders with metrics")
    return pd.concat(frames, ignore_index=True)


@cache
def committed_instances(runs_dir: Path = COMMITTED_RUNS) -> tuple[pd.DataFrame, list[str]]:
    """Per-instance held-out scores of every arm of the committed runs, and the arms in order."""
    metrics = read_metrics(runs_dir)
    return report.instance_scores(runs_dir, metrics), report.arm_order(metrics)


def overlay(instances: pd.DataFrame, arms: list[str], seeds: list[int], tasks: list[str]) -> plt.Figure:
    """Held-out score (mean over the chosen tasks' instances) against samples and time, per chosen arm."""
    for name, chosen in (("arms", arms), ("seeds", seeds), ("tasks", tasks)):
        if not chosen:
            raise ValueError(f"{name}=[] is not allowed: choose at least one")
    sel = instances[instances.arm.isin(arms) & instances.seed.isin(seeds) & instances.task.isin(tasks)]
    evals = sel.groupby(["seed", "arm", "N", "step"], as_index=False).agg(
        samples=("samples", "first"), elapsed_s=("elapsed_s", "first"), test_score=("score", "mean")
    )
    fig = plots.figure1(evals, arms)
    fig.suptitle(f"tasks: {', '.join(tasks)}; seeds: {', '.join(map(str, seeds))}", fontsize=7, x=0.01, ha="left")
    return fig


def runs_explorer(cfg: report.LaptopRLVRConfig, runs_dir: Path = COMMITTED_RUNS) -> LiveFigure:
    """Overlay the committed runs: which arms, seeds and tasks."""
    instances, arms = committed_instances(runs_dir)
    seeds = sorted(int(s) for s in instances.seed.unique())
    task_param = cfg.parameter("tasks")
    found = sorted(instances.task.unique())
    tasks = control(task_param, found, options=found)
    paper_arms = {f"N={n}" for n, _ in paper.arm_shapes().values()}  # ProRL's and BroRL's N to start with
    paper_ends = tuple(a for a in arms if a in paper_arms)
    arms_w = w.SelectMultiple(options=arms, value=paper_ends or tuple(arms[:1]), rows=7)
    arms_w.description = "arms"
    seeds_w = w.SelectMultiple(options=seeds, value=tuple(seeds), rows=len(seeds), description="seeds")

    def read(values: dict) -> dict:
        chosen = value_of(task_param, tasks)
        task_param.check(chosen)  # the same message as a -p tasks=... override
        return {"arms": list(values["arms"]), "seeds": list(values["seeds"]), "tasks": chosen}

    return LiveFigure(
        {"arms": arms_w, "seeds": seeds_w, "tasks": tasks},
        read,
        lambda params, progress: overlay(instances, params["arms"], params["seeds"], params["tasks"]),
        name="laptop_rlvr_runs_view",
        provenance=PROVENANCE,
        caption="Committed laptop-scale runs: held-out score per arm over the chosen seeds and tasks",
        title=f"The committed runs ({runs_dir.relative_to(REPO_ROOT)})",
    ).show_first()


def live_config(cfg: report.LaptopRLVRConfig, rollouts: int) -> report.LaptopRLVRConfig:
    """``cfg`` with phase 2 reduced to the N=16 arm and ``rollouts`` (checked like any config)."""
    return dataclasses.replace(cfg, arm_rollouts=sorted({ex.BASE_N, rollouts}), base_lr_rollouts=[])


_RUN_COUNTER = itertools.count()


def train_live(
    cfg: report.LaptopRLVRConfig, rollouts: int, progress: Progress, seed: int | None = None
) -> pd.DataFrame:
    """Train the ``rollouts`` arm from ``cfg``'s phase-1 checkpoint one step at a time; returns its metrics so far.

    A Stop ends the run after the current step; the metrics up to there are returned."""
    seed = cfg.seeds[0] if seed is None else seed
    settings = live_config(cfg, rollouts).settings()
    start = cfg.runs_path() / f"seed{seed}" / "phase1" / CHECKPOINT
    if not (start / "state.json").exists():
        raise ValueError(
            f"no phase-1 checkpoint under {start} (runs_dir={cfg.runs_dir!r}): the live run starts from one; run "
            "section 1 with a runs_dir it trains in (the quick profile's does; committed runs keep no weights)"
        )
    train, test = ex.data(settings, seed)
    name, n, folder, arm = next(a for a in ex.phase2_arms(settings, seed) if a[1] == rollouts)
    arm = dataclasses.replace(arm, checkpoint_every=1)  # every step resumable: Stop can end after any step
    out = LIVE_DIR / f"run{next(_RUN_COUNTER):03d}_N{rollouts}"
    kwargs = {"eval_samples": cfg.eval_samples, "eval_temperature": cfg.eval_temperature, "device": cfg.device}
    progress.start(arm.sample_budget, "samples")
    metrics = None
    while metrics is None or metrics["samples"].iloc[-1] < arm.sample_budget:
        metrics = run_arm(start, train, test, arm, out, max_steps=1, progress=False, **kwargs)
        try:
            progress.advance(int(metrics["samples"].iloc[-1]) - progress.done)
        except Stopped:
            break
    return metrics.assign(arm=name, N=n)


def live_figure(metrics: pd.DataFrame, budget: int) -> plt.Figure:
    """Reward and held-out score of the live run against samples."""
    fig, (ax_r, ax_t) = new_figure("full", aspect=0.3, ncols=2)
    ax_r.plot(metrics["samples"], metrics["reward_mean"], "o-", ms=2)
    scored = metrics.dropna(subset=["test_score"])
    ax_t.plot(scored["samples"], scored["test_score"], "o-", ms=3)
    for ax in (ax_r, ax_t):
        ax.set_xlabel("generated samples")
        ax.set_xlim(0, budget)
    ax_r.set_ylabel("mean reward of the step's samples")
    ax_t.set_ylabel("held-out score")
    arm = metrics["arm"].iloc[0]
    done = int(metrics["samples"].iloc[-1])
    ax_r.set_title(f"live run {arm}: {done} of {budget} samples", loc="left")
    return fig


LIVE_START = {"rollouts": 64, "sample_budget": 1024}  # a short run: 16 steps of 64 samples (about 20 s on 2 cores)


def live_explorer(cfg: report.LaptopRLVRConfig) -> LiveFigure:
    """A short phase-2 run from the phase-1 checkpoint: Run trains it, Stop ends it after the current step."""
    start = dataclasses.replace(
        live_config(cfg, LIVE_START["rollouts"]), sample_budget=LIVE_START["sample_budget"]
    )  # checked like any config
    controls = ConfigControls(
        start,
        {
            "sample_budget": {"options": (512, 1024, 2048)},
            "base_lr": {"low": 1e-5, "high": 1e-2, "log": True},
            "temperature": {"low": 0.1, "high": 2.0, "step": 0.05},
            "mini_batches": {"low": 1, "high": 8},
        },
        extra={
            "rollouts": w.SelectionSlider(
                options=powers_of_two(cfg.parameter("arm_rollouts"), high=512),
                value=LIVE_START["rollouts"],
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
        caption="A short live phase-2 run from the phase-1 checkpoint",
        live=lambda params: False,
        title="A short live run (Run trains; Stop ends it after the current step)",
    )


def explore(cfg: report.LaptopRLVRConfig) -> w.Widget:
    tabs = w.Tab([runs_explorer(cfg).widget, live_explorer(cfg).widget])
    for i, title in enumerate(("committed runs", "live run")):
        tabs.set_title(i, title)
    return tabs
