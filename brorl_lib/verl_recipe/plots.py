"""Figures of notebooks/05_verl_training.ipynb: Figures 1 and 4 from runs, beside the paper."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from brorl_lib.core.plotting import ARM_COLOURS, new_figure, pt
from brorl_lib.core.precision import rounded_inputs
from brorl_lib.paper import reported as paper
from brorl_lib.paper.setup import PAPER_FIG1_HOURS

NO_RUNS = "no runs under data/runs/verl: reported values only"


def _style(source: str) -> dict:
    """Reported series dashed with open markers; series from runs solid with filled markers."""
    if source == "reported":
        return {"ls": "--", "marker": "o", "mfc": "white", "ms": 3.5}
    return {"ls": "-", "marker": "s", "ms": 3.0}


@rounded_inputs
def figure1(points: pd.DataFrame, have_runs: bool) -> plt.Figure:
    """Score against training hours per domain (Figure 1 is the Math panel); each series labelled by source."""
    domains = list(dict.fromkeys(points["domain"]))
    fig, axes = new_figure("full", aspect=0.32, ncols=len(domains))
    for ax, domain in zip(axes, domains):
        for (source, method), g in points[points["domain"] == domain].groupby(["source", "method"], sort=False):
            ax.plot(
                g["hours"],
                g["score"],
                color=ARM_COLOURS.get(method, "0.3"),
                label=f"{method} ({source})",
                **_style(source),
            )
        ax.axvline(PAPER_FIG1_HOURS, color="0.6", lw=0.6, ls=":")
        ax.set_xlabel("Training Time (hours)")
        ax.set_ylabel(f"{domain} Score")
        ax.set_title(f"{domain} score over time", loc="left")
    axes[0].legend(loc="lower right", fontsize=pt(6))
    if not have_runs:
        fig.suptitle(NO_RUNS, fontsize=pt(7), color="0.35")
    return fig


@rounded_inputs
def figure4(points: pd.DataFrame) -> plt.Figure:
    """Figure 4's 3 x 3 grid: pass@1 against hours per task and arm, from runs; the paper's pattern per panel."""
    panels = paper.load("figure4_tasks")
    fig, axes = new_figure("full", aspect=0.75, nrows=3, ncols=3, panel_em=12)  # its type is 6 pt of the paper's 8
    for ax, (_, panel) in zip(axes.flat, panels.iterrows()):
        mine = points[points["task"] == panel["task"]]
        for (source, method), g in mine.groupby(["source", "method"], sort=False):
            ax.plot(
                g["hours"],
                g["pass_at_1"],
                color=ARM_COLOURS.get(method, "0.3"),
                label=f"{method} ({source})",
                **_style(source),
            )
        if mine.empty:
            ax.text(
                0.5,
                0.5,
                "no runs\n(the paper tabulates\nno values)",
                ha="center",
                va="center",
                transform=ax.transAxes,
                fontsize=pt(6),
                color="0.4",
            )
            ax.set_xlim(0, PAPER_FIG1_HOURS)  # the paper's Figure 4 spans 0-140 h
        ax.set_title(f"{panel['task']}\nreported: {panel['pattern']}", loc="left", fontsize=pt(6))
        ax.set_xlabel("Training Time (hours)", fontsize=pt(6))
        ax.set_ylabel("pass@1", fontsize=pt(6))
    series = {label: h for ax in axes.flat for h, label in zip(*ax.get_legend_handles_labels())}
    if series:  # one legend for the grid, below it: a panel's own would not fit a narrow panel
        fig.legend(series.values(), series.keys(), loc="outside lower center", ncols=2, fontsize=pt(6))
    return fig
