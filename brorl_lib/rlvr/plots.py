"""Figures of notebooks/04_laptop_rlvr.ipynb."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from brorl_lib.core.plotting import PALETTE, new_figure
from brorl_lib.core.precision import rounded_inputs


def arm_colours(arms: list[str]) -> dict[str, str]:
    return {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(arms)}


def _legend(fig: plt.Figure, ax: plt.Axes) -> None:
    """One legend for the figure, outside the panels on the right."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, title="arm", fontsize=6, loc="outside right center")


def _style(arm: str) -> str:
    """Solid for the main arms ("N=<n>"), dashed for ablation arms ("N=<n> base lr")."""
    return "-" if " " not in arm else "--"


def _mean_band(ax, data: pd.DataFrame, x: str, y: str, colour: str, label: str) -> None:
    """Mean over seeds at each evaluation (x averaged too), with a min-max band when there are several."""
    s = data.groupby("step").agg(x=(x, "mean"), mean=(y, "mean"), lo=(y, "min"), hi=(y, "max"), n=("seed", "nunique"))
    ax.plot(s["x"], s["mean"], color=colour, lw=1.1, ls=_style(label), marker="o", ms=2, label=label)
    if s["n"].max() > 1:
        ax.fill_between(s["x"], s["lo"], s["hi"], color=colour, alpha=0.1, lw=0)


@rounded_inputs
def figure1(evals: pd.DataFrame, arms: list[str]) -> plt.Figure:
    """Held-out score against generated samples and against wall time, one line per arm."""
    fig, axes = new_figure("full", aspect=0.32, ncols=2)
    colours = arm_colours(arms)
    for arm in arms:
        g = evals[evals.arm == arm]
        _mean_band(axes[0], g, "samples", "test_score", colours[arm], arm)
        _mean_band(axes[1], g.assign(minutes=g["elapsed_s"] / 60), "minutes", "test_score", colours[arm], arm)
    axes[0].set_xlabel("Generated samples in phase 2")
    axes[1].set_xlabel("Training time in phase 2 (min)")
    for ax in axes:
        ax.set_ylabel("Held-out score (mean verifier reward)")
    axes[0].set_title("Score vs samples", loc="left")
    axes[1].set_title("Score vs time", loc="left")
    _legend(fig, axes[0])
    seeds = evals["seed"].nunique()
    if seeds > 1:
        fig.suptitle(f"mean over {seeds} seeds; band: min to max", fontsize=7, x=0.99, ha="right")
    return fig


@rounded_inputs
def figure4(curves: pd.DataFrame, arms: list[str]) -> plt.Figure:
    """Per-task held-out score against generated samples, one panel per task."""
    tasks = sorted(curves["task"].unique())
    fig, axes = new_figure("full", aspect=0.3, ncols=len(tasks), squeeze=False)
    colours = arm_colours(arms)
    for ax, task in zip(axes[0], tasks):
        for arm in arms:
            g = curves[(curves.task == task) & (curves.arm == arm)]
            ax.plot(g["samples"], g["score"], color=colours[arm], lw=1.1, ls=_style(arm), marker="o", ms=2, label=arm)
        ax.set_title(task, loc="left")
        ax.set_xlabel("Generated samples in phase 2")
    axes[0][0].set_ylabel("Held-out score")
    _legend(fig, axes[0][0])
    return fig


@rounded_inputs
def shrinkage(table: pd.DataFrame, arms: list[str]) -> plt.Figure:
    """Share of held-out instances below / above their phase-1 score at the end of each arm, per task."""
    tasks = list(dict.fromkeys(table["task"]))
    fig, axes = new_figure("full", aspect=0.3, ncols=2, sharey=True)
    width = 0.8 / len(arms)
    colours = arm_colours(arms)
    for ax, col, title in zip(axes, ("dropped_pct", "improved_pct"), ("Dropped below phase-1 score", "Rose above it")):
        for k, arm in enumerate(arms):
            g = table[table.arm == arm].set_index("task").reindex(tasks)
            ax.bar(np.arange(len(tasks)) + k * width, g[col], width, color=colours[arm], label=arm)
        ax.set_xticks(np.arange(len(tasks)) + width * (len(arms) - 1) / 2, tasks, rotation=15)
        ax.set_title(title, loc="left")
    axes[0].set_ylabel("% of held-out instances")
    _legend(fig, axes[0])
    return fig


@rounded_inputs
def theory(summary: pd.DataFrame, arms_n: list[int]) -> plt.Figure:
    """Theorem 1 on the phase-1 checkpoint's responses against N: the share of batches it predicts lose
    correct mass, the expected unsampled second moment, the chance a group holds a correct response, and
    the distinct responses a group holds."""
    fig, axes = new_figure("full", aspect=0.5, nrows=2, ncols=2, sharex=True)
    specs = (
        ("share_negative", "Share of batches with predicted $\\Delta Q_{pos}<0$"),
        ("expected_u2", "$E[U_{pos,2}+U_{neg,2}]$ (Corollary 3)"),
        ("share_groups_with_correct", "Share of groups holding a correct response"),
        ("mean_distinct", "Distinct responses in a group"),
    )
    for ax, (col, title) in zip(axes.flat, specs):
        ax.plot(summary["N"], summary[col], color=PALETTE[0], marker="o", ms=2.5, lw=1.1)
        ax.set_xscale("log", base=2)
        ax.set_title(title, loc="left")
        for n in arms_n:
            ax.axvline(n, color="0.6", lw=0.6, ls=":")
    for ax in axes[1]:
        ax.set_xlabel("N (rollouts per prompt)")
    axes[0][1].set_yscale("log")
    return fig
