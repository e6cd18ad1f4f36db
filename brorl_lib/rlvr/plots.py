"""Figures of notebooks/04_laptop_rlvr.ipynb. Every panel draws rows of a report table; arms are named by
their labels, coloured by key."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from brorl_lib.core.plotting import PALETTE, new_figure
from brorl_lib.core.precision import rounded_inputs

ROLE_STYLE = {"paper": "-", "dose": "-.", "ablation": "--", "control": ":", "pilot": (0, (1, 2))}


def arm_colours(arms: list[str]) -> dict[str, str]:
    return {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(arms)}


def _arm_line(ax: plt.Axes, x, y, arm, colour: str) -> None:
    """One arm's line: its colour, the line style of its role, its label."""
    ax.plot(x, y, color=colour, ls=ROLE_STYLE[arm.role], lw=1.1, marker="o", ms=2, label=arm.label)


def _legend(fig: plt.Figure, ax: plt.Axes, title: str = "arm") -> None:
    """One legend for the figure, outside the panels on the right."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, title=title, fontsize=6, loc="outside right center")


@rounded_inputs
def phase1(curve: pd.DataFrame) -> plt.Figure:
    """Phase 1: held-out pass@1 from the warm start to the plateau, with a 95% band (1.96 standard errors)."""
    fig, ax = new_figure("column")
    ax.plot(curve["step"], curve["pass1"], color=PALETTE[1], marker="o", ms=2, lw=1.1, label="ProRL N=16")
    ax.fill_between(
        curve["step"],
        curve["pass1"] - 1.96 * curve["se"],
        curve["pass1"] + 1.96 * curve["se"],
        color=PALETTE[1],
        alpha=0.15,
        lw=0,
    )
    end = curve[curve.plateau == 1]
    ax.axvline(end["step"].iloc[0], color="0.5", lw=0.7, ls="--")
    ax.annotate(
        "plateau",
        (end["step"].iloc[0], end["pass1"].iloc[0]),
        xytext=(-30, -18),
        textcoords="offset points",
        fontsize=6,
    )
    ax.set_xlabel("Phase-1 step (step 0: warm start)")
    ax.set_ylabel("Held-out pass@1")
    return fig


@rounded_inputs
def figure1(curves: pd.DataFrame, arms: pd.DataFrame) -> plt.Figure:
    """Held-out pass@1 against generated samples and against wall time, mean over seeds with a 95% band."""
    fig, axes = new_figure("full", aspect=0.32, ncols=2)
    colours = arm_colours(arms["arm"].tolist())
    for arm in arms.itertuples(index=False):
        g = curves[curves.arm == arm.arm]
        band = 1.96 * g["se"].fillna(0)
        for ax, x in ((axes[0], g["samples"]), (axes[1], g["elapsed_s"] / 60)):
            _arm_line(ax, x, g["pass1"], arm, colours[arm.arm])
            ax.fill_between(x, g["pass1"] - band, g["pass1"] + band, color=colours[arm.arm], alpha=0.1, lw=0)
    axes[0].set_xlabel("Generated samples in phase 2")
    axes[1].set_xlabel("Training time in phase 2 (min)")
    for ax in axes:
        ax.set_ylabel("Held-out pass@1")
    axes[0].set_title("pass@1 vs samples", loc="left")
    axes[1].set_title("pass@1 vs time", loc="left")
    _legend(fig, axes[0])
    return fig


@rounded_inputs
def dose_response(verdict: pd.DataFrame) -> plt.Figure:
    """Difference in held-out pass@1 to ProRL against N at equal samples, with 95% intervals across seeds; the
    ablation and the batch-size control beside their N."""
    fig, ax = new_figure("column")
    ax.axhline(0, color="0.5", lw=0.7)
    rule = verdict[verdict.role.isin(["paper", "dose"])].sort_values("n_rollouts")
    err = [
        rule["delta_vs_prorl"] - rule["ci_low"].fillna(rule["delta_vs_prorl"]),
        rule["ci_high"].fillna(rule["delta_vs_prorl"]) - rule["delta_vs_prorl"],
    ]
    ax.errorbar(
        rule["n_rollouts"],
        rule["delta_vs_prorl"],
        yerr=err,
        color=PALETTE[0],
        marker="o",
        ms=3,
        lw=1.1,
        capsize=2,
        label="square-root lr rule, P/4 prompts",
    )
    for (role, marker), colour in zip((("ablation", "s"), ("control", "D")), (PALETTE[2], PALETTE[3])):
        g = verdict[verdict.role == role]
        for row in g.itertuples(index=False):
            shift = 1.12 if role == "ablation" else 0.89
            ax.errorbar(
                row.n_rollouts * shift,
                row.delta_vs_prorl,
                yerr=[[row.delta_vs_prorl - row.ci_low], [row.ci_high - row.delta_vs_prorl]],
                color=colour,
                marker=marker,
                ms=3,
                capsize=2,
                ls="none",
                label=row.label,
            )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("N (rollouts per prompt), equal generated samples")
    ax.set_ylabel(r"$\Delta$ held-out pass@1 vs ProRL N=16")
    ax.legend(fontsize=5.5, loc="best")
    return fig


@rounded_inputs
def passk(curves: pd.DataFrame, arms: pd.DataFrame) -> plt.Figure:
    """pass@k against k on the instances the plateau model mostly fails, mean over seeds; the plateau model dashed."""
    fig, ax = new_figure("column")
    colours = arm_colours(arms["arm"].tolist())
    mean = curves.groupby(["arm", "k"], as_index=False)["pass_at_k"].mean()
    start = mean[mean.arm == "phase1"]
    ax.plot(start["k"], start["pass_at_k"], color="0.3", ls="--", lw=1.0, label="plateau checkpoint")
    for arm in arms.itertuples(index=False):
        g = mean[mean.arm == arm.arm]
        _arm_line(ax, g["k"], g["pass_at_k"], arm, colours[arm.arm])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k on hard held-out instances")
    ax.legend(fontsize=5.5, loc="lower right")
    return fig


@rounded_inputs
def lr_pilot(table: pd.DataFrame) -> plt.Figure:
    """Final held-out pass@1 against the learning-rate factor of each rule (one seed)."""
    fig, ax = new_figure("column")
    for colour, (family, g) in zip(PALETTE, table.groupby("family", sort=False)):
        ax.plot(g["lr_factor"], g["pass1"], color=colour, marker="o", ms=3, lw=1.1, label=family)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("learning rate / the rule's learning rate")
    ax.set_ylabel("Final held-out pass@1 (one seed)")
    ax.legend(fontsize=6)
    return fig


@rounded_inputs
def figure4(curves: pd.DataFrame, arms: pd.DataFrame) -> plt.Figure:
    """Held-out pass@1 per word-length stratum against generated samples, one panel per stratum."""
    strata = list(dict.fromkeys(curves["stratum"]))
    fig, axes = new_figure("full", aspect=0.3, ncols=len(strata), squeeze=False)
    colours = arm_colours(arms["arm"].tolist())
    for ax, stratum in zip(axes[0], strata):
        for arm in arms.itertuples(index=False):
            g = curves[(curves.stratum == stratum) & (curves.arm == arm.arm)]
            _arm_line(ax, g["samples"], g["pass1"], arm, colours[arm.arm])
        ax.set_title(stratum, loc="left")
        ax.set_xlabel("Generated samples in phase 2")
    axes[0][0].set_ylabel("Held-out pass@1")
    _legend(fig, axes[0][0])
    return fig


@rounded_inputs
def shrinkage(table: pd.DataFrame) -> plt.Figure:
    """Share of held-out instances below / above their plateau pass@1 at the end of each arm."""
    fig, axes = new_figure("full", aspect=0.3, ncols=2, sharey=False)
    colours = arm_colours(table["arm"].tolist())
    x = np.arange(len(table))
    for ax, col, title in zip(axes, ("dropped_pct", "improved_pct"), ("Fell below the plateau", "Rose above it")):
        ax.bar(x, table[col], color=[colours[a] for a in table["arm"]])
        ax.set_xticks(x, table["label"], rotation=30, ha="right", fontsize=5.5)
        ax.set_title(title, loc="left")
    axes[0].set_ylabel("% of held-out instances")
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
