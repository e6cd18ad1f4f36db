"""Figures of notebooks/04_laptop_rlvr.ipynb. Every panel draws rows of a report table; arms are named by
their labels, coloured by key."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from brorl_lib.core import palette
from brorl_lib.core.plotting import new_figure, pt
from brorl_lib.core.precision import rounded_inputs
from brorl_lib.rlvr.report import BASELINE

ROLE_STYLE = {"paper": "-", "dose": "-.", "ablation": "--", "control": ":", "pilot": (0, (1, 2))}


def arm_colour(role: str, n: int, lr_factor: float = 1.0) -> str:
    """An arm's colour from the one palette: its N's colour (ProRL N=16 and BroRL N=512 as everywhere), the
    batch-size control its own, an arm off its learning-rate rule a tint of its N's colour."""
    if role == "control":
        return palette.arm("batch-size control")
    colour = palette.n_colour(n)
    if role == "ablation":
        return palette.tint(colour, 0.5)
    if role == "pilot" and lr_factor != 1.0:
        return palette.tint(colour, min(0.7, 0.25 * abs(np.log2(lr_factor))))
    return colour


def arm_colours(arms: pd.DataFrame) -> dict[str, str]:
    """arm key -> colour, for a frame with the arm table's columns (arm, role, N, lr_factor)."""
    factor = arms["lr_factor"] if "lr_factor" in arms else pd.Series(1.0, index=arms.index)
    return {
        a: arm_colour(role, int(n), float(f) if pd.notna(f) else 1.0)
        for a, role, n, f in zip(arms["arm"], arms["role"], arms["N"], factor)
    }


def _arm_line(ax: plt.Axes, x, y, arm, colour: str) -> None:
    """One arm's line: its colour, the line style of its role, its label."""
    ax.plot(x, y, color=colour, ls=ROLE_STYLE[arm.role], lw=1.1, marker="o", ms=2, label=arm.label)


def _seeds_text(frame: pd.DataFrame) -> str:
    """ "n=5 seeds" (the fewest any point has), or "" for a frame without a seeds column."""
    if "seeds" not in frame or frame.empty:
        return ""
    n = int(frame["seeds"].min())
    return f"n={n} seed" + ("s" if n != 1 else "")


def _legend(fig: plt.Figure, ax: plt.Axes, title: str = "arm") -> None:
    """One legend for the figure, outside the panels on the right."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, title=title, fontsize=pt(6), loc="outside right center")


@rounded_inputs
def phase1(curve: pd.DataFrame) -> plt.Figure:
    """Phase 1 of each plateau: held-out pass@1 from the warm start to the plateau with a 95% band (1.96
    standard errors), the smoothed series the plateau test reads, and where it ended."""
    fig, ax = new_figure("column")
    for i, (seed, g) in enumerate(curve.groupby("plateau_seed", sort=True)):
        colour = palette.series(i)
        ax.plot(g["step"], g["pass1"], color=colour, marker="o", ms=1.5, lw=0.6, alpha=0.6)
        ax.fill_between(
            g["step"], g["pass1"] - 1.96 * g["se"], g["pass1"] + 1.96 * g["se"], color=colour, alpha=0.12, lw=0
        )
        ax.plot(g["step"], g["smoothed"], color=colour, lw=1.4, label=f"plateau {seed}: smoothed")
        end = g[g.plateau == 1]
        if len(end):
            ax.axvline(end["step"].iloc[0], color=colour, lw=0.7, ls="--")
    ax.set_xlabel("Phase-1 step (step 0: warm start)")
    ax.set_ylabel("Held-out pass@1")
    ax.legend(fontsize=pt(5.5), loc="lower right")
    return fig


@rounded_inputs
def screen(table: pd.DataFrame, pass1_range: tuple[float, float], min_low_q: float) -> plt.Figure:
    """The regime screen: each candidate's plateau pass@1 against its low-q share; the region that qualifies
    shaded, the chosen candidate ringed, filled markers where Theorem 1's change at N=16 is sometimes negative."""
    fig, ax = new_figure("column")
    ax.axvspan(*pass1_range, ymin=0, ymax=1, color=palette.GOOD, alpha=0.08, lw=0)
    ax.axhline(min_low_q, color="0.5", lw=0.7, ls="--")
    for i, row in enumerate(table.itertuples(index=False)):
        colour = palette.series(i)
        face = colour if row.share_negative_n16 > 0 else "white"
        ax.scatter(row.plateau_pass1, row.low_q_share, s=18, color=face, edgecolor=colour, lw=1, label=row.candidate)
        if row.chosen:
            ax.scatter(row.plateau_pass1, row.low_q_share, s=70, facecolor="none", edgecolor="0.2", lw=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("Plateau held-out pass@1")
    ax.set_ylabel("Share of prompts with 0 < q < 1/16")
    ax.legend(fontsize=pt(5), loc="upper right")
    return fig


@rounded_inputs
def delta_vs_budget(verdict: pd.DataFrame) -> plt.Figure:
    """Each arm's difference in held-out pass@1 to ProRL against the sample budget, one panel per plateau, with
    95% intervals across seeds (the last budget is the verdict's endpoint)."""
    rows = verdict[(verdict.arm != BASELINE) & verdict.delta_vs_prorl.notna()]
    plateaus = sorted(rows["plateau"].unique())
    fig, axes = new_figure("full", aspect=0.3, ncols=max(1, len(plateaus)), squeeze=False)
    for ax, p in zip(axes[0], plateaus):
        ax.axhline(0, color="0.5", lw=0.7)
        g = rows[rows.plateau == p]
        for (label, comparison), h in g.groupby(["label", "comparison"], sort=False):
            h = h.sort_values("budget")
            colour = arm_colour(h["role"].iloc[0], int(h["n_rollouts"].iloc[0]))
            err = [h["delta_vs_prorl"] - h["ci_low"], h["ci_high"] - h["delta_vs_prorl"]]
            name = label if comparison == "rule lr" else f"{label} (best lr vs best lr)"
            ax.errorbar(
                h["budget"],
                h["delta_vs_prorl"],
                yerr=err,
                color=colour,
                ls="-" if comparison == "rule lr" else "--",
                marker="o",
                ms=2.5,
                lw=1.0,
                capsize=2,
                label=name,
            )
        ax.set_xscale("log", base=2)
        ax.set_title(f"plateau {p}", loc="left")
        ax.set_xlabel("Generated samples in phase 2")
    axes[0][0].set_ylabel(r"$\Delta$ held-out pass@1 vs ProRL")
    _legend(fig, axes[0][0])
    return fig


@rounded_inputs
def bands(table: pd.DataFrame) -> plt.Figure:
    """Difference to ProRL within each plateau pass@1 band at the endpoint, 95% intervals across seeds."""
    fig, ax = new_figure("column")
    ax.axhline(0, color="0.5", lw=0.7)
    order = list(dict.fromkeys(table["band"]))
    arms = [a for a in dict.fromkeys(table["arm"]) if a != BASELINE]
    width = 0.8 / max(1, len(arms))
    for k, arm in enumerate(arms):
        g = table[table.arm == arm].set_index("band").reindex(order)
        first = table[table.arm == arm].iloc[0]
        colour = arm_colour(first["role"], int(first["N"]))
        x = np.arange(len(order)) + (k - (len(arms) - 1) / 2) * width
        err = [g["delta_vs_prorl"] - g["ci_low"], g["ci_high"] - g["delta_vs_prorl"]]
        ax.errorbar(
            x,
            g["delta_vs_prorl"],
            yerr=err,
            color=colour,
            marker="o",
            ms=3,
            ls="none",
            capsize=2,
            label=g["label"].dropna().iloc[0],
        )
    counts = table.drop_duplicates("band").set_index("band").reindex(order)["instances"]
    ax.set_xticks(np.arange(len(order)), [f"{b}\n(n={int(n)})" for b, n in zip(order, counts)], fontsize=pt(5.5))
    ax.set_xlabel("Plateau pass@1 band of the held-out instance")
    ax.set_ylabel(r"$\Delta$ pass@1 vs ProRL")
    ax.legend(fontsize=pt(5.5), loc="best")
    return fig


@rounded_inputs
def figure1(curves: pd.DataFrame, arms: pd.DataFrame) -> plt.Figure:
    """Held-out pass@1 against generated samples and against wall time, mean over seeds with a 95% band."""
    fig, axes = new_figure("full", aspect=0.32, ncols=2)
    colours = arm_colours(arms)
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
    seeds = _seeds_text(curves)
    axes[0].set_title(f"pass@1 vs samples ({seeds})" if seeds else "pass@1 vs samples", loc="left")
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
    for i, row in enumerate(rule.itertuples(index=False)):  # measured N only: no line between them
        ax.errorbar(
            row.n_rollouts,
            row.delta_vs_prorl,
            yerr=[[err[0].iloc[i]], [err[1].iloc[i]]],
            color=palette.n_colour(row.n_rollouts),
            marker="o",
            ms=3,
            capsize=2,
            ls="none",
            label=f"{row.label} (square-root lr rule)",
        )
    for role, marker in (("ablation", "s"), ("control", "D")):
        g = verdict[verdict.role == role]
        for row in g.itertuples(index=False):
            colour = arm_colour(role, row.n_rollouts)
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
    ax.legend(fontsize=pt(5.5), loc="best")
    return fig


@rounded_inputs
def passk(curves: pd.DataFrame, arms: pd.DataFrame) -> plt.Figure:
    """pass@k against k on the instances the plateau model mostly fails, mean over seeds; the plateau model dashed."""
    fig, ax = new_figure("column")
    colours = arm_colours(arms)
    mean = curves.groupby(["arm", "k"], as_index=False)["pass_at_k"].mean()
    start = mean[mean.arm == "phase1"]
    ax.plot(start["k"], start["pass_at_k"], color="0.3", ls="--", lw=1.0, label="plateau checkpoint")
    for arm in arms.itertuples(index=False):
        g = mean[mean.arm == arm.arm]
        _arm_line(ax, g["k"], g["pass_at_k"], arm, colours[arm.arm])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k on hard held-out instances")
    ax.legend(fontsize=pt(5.5), loc="lower right")
    return fig


@rounded_inputs
def lr_grid(table: pd.DataFrame) -> plt.Figure:
    """Validation (solid, where the choice is made) and held-out (dashed) pass@1 at the last budget against the
    learning-rate factor of each rule (first seed); the chosen factor ringed."""
    fig, ax = new_figure("column")
    for family, g in table.groupby("family", sort=False):
        colour = palette.n_colour(int(g["N"].iloc[0]))
        ax.plot(g["lr_factor"], g["val_pass1"], color=colour, marker="o", ms=3, lw=1.1, label=f"{family}, validation")
        ax.plot(g["lr_factor"], g["pass1"], color=colour, ls="--", lw=0.9, label=f"{family}, held-out test")
        pick = g[g.chosen]
        ax.scatter(pick["lr_factor"], pick["val_pass1"], s=50, facecolor="none", edgecolor="0.2", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("learning rate / the rule's learning rate")
    ax.set_ylabel("pass@1 at the last budget (one seed)")
    ax.legend(fontsize=pt(5.5))
    return fig


@rounded_inputs
def figure4(curves: pd.DataFrame, arms: pd.DataFrame) -> plt.Figure:
    """Held-out pass@1 per stratum (task, or answer length) against generated samples, one panel per stratum,
    mean over seeds with a 95% band (1.96 standard errors across seeds); n seeds in each panel's title."""
    strata = list(dict.fromkeys(curves["stratum"]))
    fig, axes = new_figure("full", aspect=0.3, ncols=len(strata), squeeze=False)
    colours = arm_colours(arms)
    for ax, stratum in zip(axes[0], strata):
        here = curves[curves.stratum == stratum]
        for arm in arms.itertuples(index=False):
            g = here[here.arm == arm.arm]
            _arm_line(ax, g["samples"], g["pass1"], arm, colours[arm.arm])
            band = 1.96 * g["se"].fillna(0)
            low, high = g["pass1"] - band, g["pass1"] + band
            ax.fill_between(g["samples"], low, high, color=colours[arm.arm], alpha=0.12, lw=0)
        ax.set_title(f"{stratum} ({_seeds_text(here)})", loc="left")
        ax.set_xlabel("Generated samples in phase 2")
    axes[0][0].set_ylabel("Held-out pass@1")
    _legend(fig, axes[0][0])
    return fig


@rounded_inputs
def shrinkage(table: pd.DataFrame) -> plt.Figure:
    """Share of held-out instances below / above their plateau pass@1 at the end of each arm."""
    fig, axes = new_figure("full", aspect=0.3, ncols=2, sharey=False)
    colours = arm_colours(table)
    x = np.arange(len(table))
    for ax, col, title in zip(axes, ("dropped_pct", "improved_pct"), ("Fell below the plateau", "Rose above it")):
        ax.bar(x, table[col], color=[colours[a] for a in table["arm"]])
        ax.set_xticks(x, table["label"], rotation=30, ha="right", fontsize=pt(5.5))
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
        ax.plot(summary["N"], summary[col], color=palette.INK, lw=0.8)
        ax.scatter(summary["N"], summary[col], s=10, c=[palette.n_colour(n) for n in summary["N"]], zorder=3)
        ax.set_xscale("log", base=2)
        ax.set_title(title, loc="left")
        for n in arms_n:
            ax.axvline(n, color=palette.RULE, lw=0.6, ls=":")
    for ax in axes[1]:
        ax.set_xlabel("N (rollouts per prompt)")
    axes[0][1].set_yscale("log")
    return fig
