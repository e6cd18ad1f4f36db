"""Figures of notebooks/02_simulator.ipynb."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FixedLocator, FuncFormatter

from brorl_lib.core.precision import rounded_inputs
from brorl_lib.facts import setup
from brorl_lib.figures import palette
from brorl_lib.figures.plotting import new_figure, panels_across, pt
from brorl_lib.simulator.rate_bracket import CONDITIONS

PANELS = (  # Figure 3's panels: column, title (the paper's, shortened), y label
    ("correct_mass", "Correct prob. mass", "Probability mass"),
    ("pct_improved", "Improvements (%)", "% of correct tokens improved"),
    ("worst_drop", "Worst drop", r"Worst $\Delta$(prob.)"),
)


def _colours(ns) -> dict[int, str]:
    return {n: palette.n_colour(n) for n in sorted(ns)}


def scaled_axis(ax: plt.Axes, values: pd.Series, label: str) -> None:
    """The y axis in units of the power of ten of ``values``' largest magnitude, said in ``label`` (no offset
    text a reader could miss): a worst drop of -5e-6 reads "-5" on an axis labelled "(x 10^-6)"."""
    top = float(np.abs(values).max()) if len(values) else 0.0
    power = int(np.floor(np.log10(top))) if top > 0 else 0
    if power in (-1, 0):
        ax.set_ylabel(label)
        return
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 10.0**power:g}".replace("-", "\u2212")))
    ax.set_ylabel(f"{label} ($\\times 10^{{{power}}}$)".strip())


def paper_scale(ax: plt.Axes, lowest: float) -> None:
    """A thin scale beside the worst-drop panel ``ax``: the range of the paper's own axis (Figure 3, right panel),
    the range of ours (0 down to ``lowest``) filled in it, so that this panel is not read on the paper's scale."""
    low = setup.PAPER_FIG3_WORST_DROP_LOW
    scale = ax.inset_axes([1.06, 0.0, 0.07, 1.0])
    scale.bar(0.5, low, width=1.0, color=palette.RULE, alpha=0.35, lw=0)
    scale.bar(0.5, max(lowest, low), width=1.0, color=palette.INK, lw=0)
    scale.set(xlim=(0, 1), ylim=(low, 0), xticks=[], yticks=[low, 0])
    scale.yaxis.tick_right()
    scale.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.5f}".replace("-", "\u2212")))
    scale.tick_params(labelsize=pt(5))
    scale.grid(False)
    scale.set_title("grey: the paper's\naxis; black: ours", fontsize=pt(5), loc="left")
    scale.spines[["top", "bottom", "left", "right"]].set_visible(False)


def _log_or_symlog(set_scale, values: pd.Series) -> None:
    """Log scale when every value is positive, else symlog with its linear band at the small values."""
    if (values > 0).all():
        set_scale("log")
        return
    nonzero = np.abs(values[values != 0])
    set_scale("symlog", linthresh=float(np.percentile(nonzero, 5)) if len(nonzero) else 1.0, linscale=1.0)
    axis = set_scale.__self__.yaxis if set_scale.__name__ == "set_yscale" else set_scale.__self__.xaxis
    top = 10.0 ** np.floor(np.log10(nonzero.max())) if len(nonzero) else 1.0
    axis.set_major_locator(FixedLocator([-top, 0.0, top]))  # the top decade either side and zero: labels apart


@rounded_inputs
def figure3(runs: pd.DataFrame) -> plt.Figure:
    """Figure 3: three panels, one line per N (mean over seeds) with a min-max band."""
    beside = panels_across() >= 3  # room for y labels and the legend beside the panels; else titles say it all
    fig, axes = new_figure("full", aspect=0.3 if beside else 0.42, ncols=3)
    colours = _colours(runs["N"].unique())
    seeds = runs["seed"].nunique()
    for ax, (col, title, ylabel) in zip(axes, PANELS):
        stats = runs.groupby(["N", "step"])[col].agg(["mean", "min", "max"]).reset_index()
        for n, g in stats.groupby("N"):
            ax.plot(g["step"], g["mean"], color=colours[n], lw=1.0, label=f"{n}")
            if seeds > 1:
                ax.fill_between(g["step"], g["min"], g["max"], color=colours[n], alpha=0.2, lw=0)
        ax.set_title(title, loc="left")
        ax.set_ylabel(ylabel if beside else "")
    scaled_axis(axes[2], runs["worst_drop"], PANELS[2][2] if beside else "")
    paper_scale(axes[2], float(runs["worst_drop"].min()))
    handles, labels = axes[0].get_legend_handles_labels()
    if beside:
        fig.legend(handles, labels, title="N", fontsize=pt(6), loc="outside right center")
    else:
        fig.legend(handles, [f"N={n}" for n in labels], fontsize=pt(6), loc="outside upper center", ncols=len(labels))
    spread = f"mean over n={seeds} seeds, band: min to max" if seeds > 1 else "n=1 seed"
    fig.supxlabel(f"Steps ({spread})", fontsize=mpl.rcParams["axes.labelsize"])
    return fig


@rounded_inputs
def n_sweep(summary: pd.DataFrame, paper_ns) -> plt.Figure:
    """Final metrics against N (log scale), with the spread over seeds; dotted: the paper's N."""
    fig, axes = new_figure("full", aspect=0.3, ncols=3)
    specs = (  # column, title, y label
        ("correct_mass", "Final correct mass", "Probability mass"),
        ("pct_improved", "Tokens improved", "% of correct tokens"),
        ("worst_drop_over_run", "Worst drop", r"$\Delta$(prob.)"),
    )
    for ax, (col, title, label) in zip(axes, specs):
        err = np.vstack(
            [summary[f"{col}_mean"] - summary[f"{col}_min"], summary[f"{col}_max"] - summary[f"{col}_mean"]]
        )
        ax.plot(summary["N"], summary[f"{col}_mean"], color=palette.INK, lw=0.8)  # every N here was run
        for i, n in enumerate(summary["N"]):
            mean, bar = summary[f"{col}_mean"].iloc[i], err[:, i : i + 1]
            ax.errorbar(n, mean, yerr=bar, fmt="o", ms=3, color=palette.n_colour(n), capsize=2)
        ax.set_xscale("log", base=2)
        ax.set_title(title, loc="left")
        ax.set_ylabel(label)
        for n in paper_ns:
            ax.axvline(n, color=palette.RULE, lw=0.5, ls=":")
    axes[2].axhline(0, color=palette.INK, lw=0.6)
    scaled_axis(axes[2], summary["worst_drop_over_run_min"], specs[2][2])
    seeds = int(summary["seeds"].min()) if "seeds" in summary else None
    spread = (
        (";" + (" " if panels_across() >= 3 else "\n") + f"mean over n={seeds} seeds, bars: min to max")
        if seeds
        else ""
    )
    fig.supxlabel(f"Rollouts N (dotted: the paper's N){spread}", fontsize=mpl.rcParams["axes.labelsize"])
    return fig


@rounded_inputs
def theorem1_per_step(runs: pd.DataFrame, agreement: pd.DataFrame) -> plt.Figure:
    """Measured dQ_pos against Theorem 1's prediction for the same batch, per update rule; right: the share of
    steps with dQ_pos < 0, measured under the paper's rule (bars) and predicted by Theorem 1 (markers)."""
    fig, axes = new_figure("full", aspect=0.34, ncols=3)
    colours = _colours(runs["N"].unique())
    for ax, rule in zip(axes[:2], ("theorem", "paper")):
        g = runs[runs["update_rule"] == rule]
        for n, h in g.groupby("N"):
            ax.scatter(h["delta_q_theorem"], h["delta_q_measured"], s=4, color=colours[n], label=f"N={n}", alpha=0.7,
                       lw=0)  # fmt: skip
        _log_or_symlog(ax.set_xscale, g["delta_q_theorem"])
        _log_or_symlog(ax.set_yscale, g["delta_q_measured"])
        ax.set_title("Plain gradient step" if rule == "theorem" else "Paper's rule (AdamW)", loc="left")
    axes[0].set_ylabel(r"Measured $\Delta Q_{pos}$")
    for ax in axes[:2]:
        ax.set_xlabel(r"Theorem 1's $\Delta Q_{pos}$")
    paper = agreement[agreement["update_rule"] == "paper"]
    no_wd = agreement[agreement["update_rule"] == "paper, no weight decay"]
    x = np.arange(len(paper))
    axes[2].bar(x - 0.18, paper["measured_negative_pct"], width=0.36, color=palette.series(1), label="paper's rule")
    axes[2].bar(x + 0.18, no_wd["measured_negative_pct"], width=0.36, color=palette.tint(palette.series(1), 0.55),
                label="no weight decay")  # fmt: skip
    axes[2].plot(x, paper["predicted_negative_pct"], "D", ms=3, color=palette.INK, label="Theorem 1")
    axes[2].set_xticks(x, [str(n) for n in paper["N"]])
    axes[2].set_xlabel("Rollouts N")
    axes[2].set_title(r"$\Delta Q_{pos} < 0$", loc="left")
    axes[2].set_ylabel("% of steps")
    axes[2].set_ylim(-4, 104)  # a percentage axis; the markers at 0 drawn whole
    handles, labels = [sum(pair, []) for pair in zip(*(ax.get_legend_handles_labels() for ax in (axes[0], axes[2])))]
    fig.legend(
        handles,
        labels,
        fontsize=pt(6),
        markerscale=1.5,
        loc="outside upper left",
        ncols=7 if panels_across() >= 3 else 4,
    )
    return fig


@rounded_inputs
def rate_bracket(final: pd.DataFrame, chosen: pd.DataFrame) -> plt.Figure:
    """Each N's incorrect mass 1 - Q at the end against its learning rate, one panel per budget (equal steps, equal
    samples): the mean over seeds with a min-max band, each N's pick ringed, the paper's one rate dotted."""
    conditions = sorted(dict.fromkeys(final["condition"]), key=CONDITIONS.index)  # equal steps, Figure 3's, first
    beside = panels_across() >= 3
    fig, axes = new_figure("full", aspect=0.34 if beside else 0.5, ncols=len(conditions), sharey=True)
    colours = _colours(final["N"].unique())
    for ax, condition in zip(np.atleast_1d(axes), conditions):
        g = final[final["condition"] == condition]
        for n, h in g.groupby("N"):
            floor = 1e-16  # a mass of exactly 1 drawn at the axis' foot rather than dropped from a log scale
            ax.plot(h["lr"], (1 - h["correct_mass_mean"]).clip(floor), "-o", ms=2.5, lw=1.0, color=colours[n],
                    label=f"{n:,}")  # fmt: skip
            ax.fill_between(h["lr"], (1 - h["correct_mass_max"]).clip(floor), (1 - h["correct_mass_min"]).clip(floor),
                            color=colours[n], alpha=0.2, lw=0)  # fmt: skip
        best = chosen[chosen["condition"] == condition]
        ax.scatter(best["best_lr"], best["incorrect_mass_at_best"].clip(1e-16), s=40, facecolors="none",
                   edgecolors=[colours[n] for n in best["N"]], lw=1.0, zorder=3)  # fmt: skip
        ax.axvline(setup.SIM_LEARNING_RATE, color=palette.RULE, lw=0.8, ls=":")
        ax.set(xscale="log", yscale="log")
        samples = g.groupby("N")["samples"].first()
        budget = f"{int(g['steps'].iloc[0]):,}" if g["steps"].nunique() == 1 else f"{int(samples.iloc[0]):,}"
        ax.set_title(f"{condition.capitalize()}: {budget} each", loc="left")
        ax.set_xlabel("AdamW learning rate")
    np.atleast_1d(axes)[0].set_ylabel("Incorrect mass 1 − Q at the end")
    entries = {}  # every N once, in the order of N, from whichever panel drew it
    for ax in np.atleast_1d(axes):
        entries.update(zip(*reversed(ax.get_legend_handles_labels())))
    labels = sorted(entries, key=lambda label: int(label.replace(",", "")))
    handles = [entries[label] for label in labels]
    seeds = int(chosen["seeds"].min())
    title = (
        f"N (mean of {seeds} seeds,\nband: min to max;\nring: each N's pick;\nat the foot: Q = 1;\n"
        "dotted: the paper's rate)"
    )
    if beside:
        fig.legend(handles, labels, title=title, fontsize=pt(6), title_fontsize=pt(6), loc="outside right center")
    else:
        fig.legend(handles, [f"N={n}" for n in labels], title=title.replace("\n", " "), fontsize=pt(6),
                   title_fontsize=pt(6), loc="outside upper center", ncols=len(labels))  # fmt: skip
    return fig
