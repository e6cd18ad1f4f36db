"""Figures of notebooks/05_verl_training.ipynb: Figures 1 and 4 from runs at the paper's scale, beside the
paper, and the run of verl's trainer on a CPU on axes of its own (steps, not the paper's hours)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from brorl_lib.core.precision import rounded_inputs
from brorl_lib.facts import reported as paper
from brorl_lib.facts.setup import PAPER_FIG1_HOURS
from brorl_lib.figures import palette
from brorl_lib.figures.plotting import new_figure, pt, reflow_grid

GRID_COLUMNS = 3  # panels a row in Figure 4 and the CPU run's figure (Figure 4's own grid is 3 x 3)
CPU_TITLE = "verl's own trainer on a CPU with a tiny model: it proves the pipeline, not the paper's result"
RUN_STYLES = ("-", "--", ":", "-.")  # line style of each run when a figure shows several
# marker and size per arm in the CPU run's figure: where the arms' points coincide (both at 0), the smaller
# square sits inside the circle and both stay visible
ARM_MARKERS = {"ProRL": ("o", 4.0), "BroRL": ("s", 2.4)}


def _style(source: str) -> dict:
    """Reported series dashed with open markers; series from runs solid with filled markers."""
    if source == "reported":
        return {"ls": "--", "marker": "o", "mfc": "white", "ms": 3.5}
    return {"ls": "-", "marker": "s", "ms": 3.0}


def _grid(n: int, row_aspect: float, min_aspect: float, **kwargs) -> tuple[plt.Figure, list[plt.Axes]]:
    """A full-width figure with ``n`` panels, ``GRID_COLUMNS`` a row at most and rows as even as possible
    (4 panels: 2 + 2); cells past ``n`` are hidden."""
    nrows, ncols = reflow_grid(n, GRID_COLUMNS)
    fig, axes = new_figure(
        "full", aspect=max(min_aspect, row_aspect * nrows), nrows=nrows, ncols=ncols, squeeze=False, **kwargs
    )
    cells = list(np.ravel(axes))
    for ax in cells[n:]:
        ax.set_visible(False)
    return fig, cells[:n]


NARROW_IN = 4.0  # a canvas narrower than this (inches) lists the legend's entries one a line (our choice)


def _figure_legend(fig: plt.Figure, axes: list[plt.Axes], ncols: int = 2) -> None:
    """One legend for the figure, below the panels (a panel's own would sit on its data)."""
    series = {label: h for ax in axes for h, label in zip(*ax.get_legend_handles_labels())}
    if series:
        ncols = ncols if fig.get_size_inches()[0] >= NARROW_IN else 1  # a narrow canvas: one entry a line
        fig.legend(series.values(), series.keys(), loc="outside lower center", ncols=ncols, fontsize=pt(6))


@rounded_inputs
def figure1(points: pd.DataFrame) -> plt.Figure:
    """Score against training hours per domain (Figure 1 is the Math panel), reported and from runs at the
    paper's scale; each series labelled by source."""
    domains = list(dict.fromkeys(points["domain"]))
    fig, axes = new_figure("full", aspect=0.32, ncols=len(domains), squeeze=False)
    axes = list(np.ravel(axes))
    for ax, domain in zip(axes, domains):
        for (source, method), g in points[points["domain"] == domain].groupby(["source", "method"], sort=False):
            ax.plot(
                g["hours"],
                g["score"],
                color=palette.ARMS.get(method, palette.GREY),
                label=f"{method} ({source})",
                **_style(source),
            )
        ax.axvline(PAPER_FIG1_HOURS, color=palette.RULE, lw=0.6, ls=":")
        ax.set_xlabel("Training Time (hours)")
        ax.set_ylabel(f"{domain} Score")
        ax.set_title(f"{domain} score over time", loc="left")
    _figure_legend(fig, axes)
    return fig


@rounded_inputs
def figure4(points: pd.DataFrame) -> plt.Figure:
    """Figure 4's tasks that have points: pass@1 against hours per arm, from runs at the paper's scale, with the
    paper's pattern per panel (reported); at most 3 x 3, never a panel without data."""
    panels = paper.load("figure4_tasks")
    panels = panels[panels["task"].isin(set(points["task"]))]
    if panels.empty:
        raise ValueError("figure4: no points for any of Figure 4's tasks (draw it only when runs have them)")
    fig, axes = _grid(len(panels), 0.25, 0.32, panel_em=12)  # its type is 6 pt of the paper's 8
    for ax, (_, panel) in zip(axes, panels.iterrows()):
        mine = points[points["task"] == panel["task"]]
        for (source, method), g in mine.groupby(["source", "method"], sort=False):
            ax.plot(
                g["hours"],
                g["pass_at_1"],
                color=palette.ARMS.get(method, palette.GREY),
                label=f"{method} ({source})",
                **_style(source),
            )
        ax.set_title(f"{panel['task']}\nreported: {panel['pattern']}", loc="left", fontsize=pt(6))
        ax.set_xlabel("Training Time (hours)", fontsize=pt(6))
        ax.set_ylabel("pass@1", fontsize=pt(6))
    _figure_legend(fig, axes)
    return fig


@rounded_inputs
def cpu_run(points: pd.DataFrame) -> plt.Figure:
    """verl's trainer on a CPU (``report.cpu_run_points``): per panel (validation pass@1 of a task, or the
    training score) one line per arm against RL steps, coloured by arm, labelled with its N and prompts."""
    panels = list(dict.fromkeys(points["panel"]))
    fig, axes = _grid(len(panels), 0.3, 0.36)
    runs = list(dict.fromkeys(points["run"]))
    pad = 0.04 * max(1, points["step"].max() - points["step"].min())
    steps = (points["step"].min() - pad, points["step"].max() + pad)
    for ax, panel in zip(axes, panels):
        for (run, method, label), g in points[points["panel"] == panel].groupby(["run", "method", "label"], sort=False):
            ax.plot(
                g["step"],
                g["value"],
                color=palette.ARMS.get(method, palette.GREY),
                ls=RUN_STYLES[runs.index(run) % len(RUN_STYLES)],
                marker=ARM_MARKERS.get(method, ("o", 3.0))[0],
                ms=ARM_MARKERS.get(method, ("o", 3.0))[1],
                label=label,
            )
        ax.set_title(panel, loc="left")
        ax.set_xlabel("RL step")
        ax.set_ylabel("mean training reward" if panel.startswith("training") else "validation pass@1")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(*steps)  # every panel on the same steps (training starts at step 1, validation at 0)
        top = max(ax.get_ylim()[1], 0.05)  # a panel where every value is 0 still shows a scale
        ax.set_ylim(-0.04 * top, top)  # points at 0 drawn whole, above the axis line
    fig.suptitle(CPU_TITLE, fontsize=pt(7), color="0.25")
    _figure_legend(fig, axes)
    return fig
