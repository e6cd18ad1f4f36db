"""Figures of notebooks/05_verl_training.ipynb: Figures 1 and 4 from runs at the paper's scale, beside the
paper, and the run of verl's trainer on a CPU on axes of its own (steps, not the paper's hours)."""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from brorl_lib.core.precision import rounded_inputs
from brorl_lib.facts import reported as paper
from brorl_lib.facts.setup import PAPER_FIG1_HOURS
from brorl_lib.figures import palette, styles
from brorl_lib.figures.plotting import height, new_canvas, new_figure, pt

GRID_COLUMNS = 3  # panels a row at most in Figure 4 and the CPU run's figure (Figure 4's own grid is 3 x 3)
SHORT_MEDIUM_IN = 4.0  # a medium lower than this (a slide) takes one more panel a row, so fewer rows (our choice)
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


def _grid(n: int, row_aspect: float, min_aspect: float) -> tuple[plt.Figure, list[plt.Axes]]:
    """A full-width figure with ``n`` panels, ``GRID_COLUMNS`` a row (one more on a slide, whose frame holds fewer
    rows), rows as even as possible (4 panels: 2 + 2), x labels on the bottom row and y labels on the first column
    only; cells past ``n`` are hidden."""
    most = GRID_COLUMNS + (styles.active().height_in < SHORT_MEDIUM_IN)
    nrows = -(-n // most)
    ncols = -(-n // nrows)
    fig, axes = new_figure("full", aspect=max(min_aspect, row_aspect * nrows), nrows=nrows, ncols=ncols, squeeze=False)
    cells = list(np.ravel(axes))
    for ax in cells[n:]:
        ax.set_visible(False)
    return fig, cells[:n]


def _outer_labels(axes: list[plt.Axes], xlabel: str, ylabels: list[str], fontsize=None) -> None:
    """``xlabel`` under each column's last panel, ``ylabels[k]`` beside each row's first panel (k: the panel)."""
    ncols = axes[0].get_gridspec().ncols
    for k, ax in enumerate(axes):
        if k + ncols >= len(axes):
            ax.set_xlabel(xlabel, fontsize=fontsize)
        if k % ncols == 0 or ylabels[k] != ylabels[k - k % ncols]:  # a panel measuring another thing says so
            ax.set_ylabel(ylabels[k], fontsize=fontsize)


NARROW_IN = 4.0  # a canvas narrower than this (inches) lists the legend's entries one a line (our choice)


def _figure_legend(fig: plt.Figure, axes: list[plt.Axes], ncols: int = 2, loc: str = "outside lower center") -> None:
    """One legend for the figure, outside the panels (a panel's own would sit on its data)."""
    series = {label: h for ax in axes for h, label in zip(*ax.get_legend_handles_labels())}
    if series:
        ncols = ncols if fig.figure.get_size_inches()[0] >= NARROW_IN else 1  # a narrow canvas: one entry a line
        fig.legend(series.values(), series.keys(), loc=loc, ncols=ncols, fontsize=pt(6))


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
    """Figure 4's tasks that have points: pass@1 against hours per arm, from runs at the paper's scale, one row per
    pattern the paper reports (its words above the row; on a slide, beside it), at most 3 x 3, the legend above."""
    panels = paper.load("figure4_tasks")
    panels = panels[panels["task"].isin(set(points["task"]))]
    if panels.empty:
        raise ValueError("figure4: no points for any of Figure 4's tasks (draw it only when runs have them)")
    rows = list(panels.groupby("pattern", sort=False))
    ncols = max(len(g) for _, g in rows)
    fig = new_canvas("full", height("full", 0.25 * len(rows) + 0.07))
    top, *subs = fig.subfigures(len(rows) + 1, 1, height_ratios=[0.15, *[1] * len(rows)])  # the legend's, then rows
    axes = []
    slide = styles.active().height_in < SHORT_MEDIUM_IN  # too low for a heading a row: the pattern beside it
    for sub, (pattern, group) in zip(subs, rows):
        if not slide:
            sub.suptitle(f"reported: {pattern}", x=0.01, ha="left", fontsize=pt(6), color="0.25")
        cells = sub.subplots(1, ncols, squeeze=False)[0]
        for ax in cells[len(group) :]:
            ax.set_visible(False)
        for ax, task in zip(cells, group["task"]):
            for (source, method), g in points[points["task"] == task].groupby(["source", "method"], sort=False):
                ax.plot(g["hours"], g["pass_at_1"], color=palette.ARMS.get(method, palette.GREY),
                        label=f"{method} ({source})", **_style(source))  # fmt: skip
            ax.set_title(task, loc="left", fontsize=pt(6))
            ax.tick_params(labelsize=pt(5.5))
            axes.append(ax)
        cells[0].set_ylabel(
            textwrap.fill(f"reported: {pattern}", 22) if slide else "pass@1", fontsize=pt(5.5 if slide else 6)
        )
    fig.supxlabel("Training time (hours)" + ("; y: pass@1" if slide else ""), fontsize=pt(6))
    _figure_legend(top, axes, loc="center")
    return fig


@rounded_inputs
def cpu_run(points: pd.DataFrame) -> plt.Figure:
    """verl's trainer on a CPU (``report.cpu_run_points``): per panel (validation pass@1 of a task, or the
    training score) one line per arm against RL steps, coloured by arm, labelled with its N and prompts."""
    panels = list(dict.fromkeys(points["panel"]))
    fig, axes = _grid(len(panels), 0.3, 0.36)
    narrow = styles.active().height_in < SHORT_MEDIUM_IN  # a slide's 4 columns: titles and heading on two lines
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
        title = panel.removeprefix("pass@1: ").replace("_", " ")
        ax.set_title(title if not narrow or len(title) <= 12 else title.replace(" ", "\n", 1), loc="left")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(*steps)  # every panel on the same steps (training starts at step 1, validation at 0)
        top = max(ax.get_ylim()[1], 0.05)  # a panel where every value is 0 still shows a scale
        ax.set_ylim(-0.04 * top, top)  # points at 0 drawn whole, above the axis line
    _outer_labels(axes, "RL step", ["mean training reward" if p.startswith("training") else "validation pass@1"
                                    for p in panels])  # fmt: skip
    fig.suptitle(CPU_TITLE.replace(": ", ":\n") if narrow else CPU_TITLE, fontsize=pt(7), color="0.25")
    _figure_legend(fig, axes)
    return fig
