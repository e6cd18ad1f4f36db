"""Figures of notebooks/02_simulator.ipynb."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from brorl_lib.core.plotting import PALETTE, new_figure, pt
from brorl_lib.core.precision import rounded_inputs

PANELS = (
    ("correct_mass", "Correct prob. mass vs steps", "Probability mass"),
    ("pct_improved", "Improvements vs steps", "% improved"),
    ("worst_drop", "Worst drop vs steps", r"Worst $\Delta$(prob.)"),
)


def _colours(ns) -> dict[int, str]:
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(sorted(ns))}


def _log_or_symlog(set_scale, values: pd.Series) -> None:
    """Log scale when every value is positive, else symlog with its linear band at the small values."""
    if (values > 0).all():
        set_scale("log")
        return
    nonzero = np.abs(values[values != 0])
    set_scale("symlog", linthresh=float(np.percentile(nonzero, 5)) if len(nonzero) else 1.0, linscale=0.5)


@rounded_inputs
def figure3(runs: pd.DataFrame) -> plt.Figure:
    """Figure 3: three panels, one line per N (mean over seeds) with a min-max band."""
    fig, axes = new_figure("full", aspect=0.3, ncols=3)
    colours = _colours(runs["N"].unique())
    seeds = runs["seed"].nunique()
    for ax, (col, title, ylabel) in zip(axes, PANELS):
        stats = runs.groupby(["N", "step"])[col].agg(["mean", "min", "max"]).reset_index()
        for n, g in stats.groupby("N"):
            ax.plot(g["step"], g["mean"], color=colours[n], lw=1.0, label=f"{n}")
            if seeds > 1:
                ax.fill_between(g["step"], g["min"], g["max"], color=colours[n], alpha=0.2, lw=0)
        ax.set_title(title, loc="left")
        ax.set_xlabel("Steps")
        ax.set_ylabel(ylabel)
    axes[2].ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    axes[0].legend(title="n", ncols=1, fontsize=pt(6))
    if seeds > 1:
        fig.suptitle(f"mean over {seeds} seeds; band: min to max", fontsize=pt(7), x=0.99, ha="right")
    return fig


@rounded_inputs
def n_sweep(summary: pd.DataFrame, paper_ns) -> plt.Figure:
    """Final metrics against N (log scale), with the spread over seeds; dotted: the paper's N."""
    fig, axes = new_figure("full", aspect=0.3, ncols=3)
    specs = (
        ("correct_mass", "final correct mass"),
        ("pct_improved", "% correct tokens improved"),
        ("worst_drop_over_run", r"worst $\Delta$(prob.) over the run"),
    )
    for ax, (col, label) in zip(axes, specs):
        err = np.vstack(
            [summary[f"{col}_mean"] - summary[f"{col}_min"], summary[f"{col}_max"] - summary[f"{col}_mean"]]
        )
        ax.errorbar(summary["N"], summary[f"{col}_mean"], yerr=err, fmt="o-", ms=3, color=PALETTE[0], capsize=2)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("rollouts N")
        ax.set_ylabel(label)
        for n in paper_ns:
            ax.axvline(n, color="0.6", lw=0.5, ls=":")
    axes[2].axhline(0, color="0.2", lw=0.6)
    axes[2].ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    return fig


@rounded_inputs
def theorem1_per_step(runs: pd.DataFrame, agreement: pd.DataFrame) -> plt.Figure:
    """Measured dQ_pos against Theorem 1's prediction for the same batch, per update rule."""
    fig, axes = new_figure("full", aspect=0.34, ncols=3)
    colours = _colours(runs["N"].unique())
    for ax, rule in zip(axes[:2], ("theorem", "paper")):
        g = runs[runs["update_rule"] == rule]
        for n, h in g.groupby("N"):
            ax.scatter(
                h["delta_q_theorem"], h["delta_q_measured"], s=4, color=colours[n], label=f"N={n}", alpha=0.7, lw=0
            )
        _log_or_symlog(ax.set_xscale, g["delta_q_theorem"])
        _log_or_symlog(ax.set_yscale, g["delta_q_measured"])
        ax.set_xlabel(r"Theorem 1 prediction of $\Delta Q_{pos}$")
        ax.set_ylabel(r"measured $\Delta Q_{pos}$")
        ax.set_title(
            "plain gradient step (Theorem 1's rule)" if rule == "theorem" else "paper's rule (centred, AdamW)",
            loc="left",
        )
    axes[0].legend(fontsize=pt(6), markerscale=2)
    paper = agreement[agreement["update_rule"] == "paper"]
    no_wd = agreement[agreement["update_rule"] == "paper, no weight decay"]
    x = np.arange(len(paper))
    axes[2].bar(x - 0.27, paper["measured_negative_pct"], width=0.27, color=PALETTE[3], label="measured, paper's rule")
    axes[2].bar(x, no_wd["measured_negative_pct"], width=0.27, color=PALETTE[1], label="measured, no weight decay")
    axes[2].bar(x + 0.27, paper["predicted_negative_pct"], width=0.27, color=PALETTE[0], label="Theorem 1")
    axes[2].set_xticks(x, [str(n) for n in paper["N"]])
    axes[2].set_xlabel("rollouts N")
    axes[2].set_ylabel(r"% of steps with $\Delta Q_{pos} < 0$")
    axes[2].legend(fontsize=pt(6))
    return fig
