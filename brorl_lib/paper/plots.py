"""Figures of notebooks/03_paper_tables.ipynb."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from brorl_lib.core.precision import rounded_inputs
from brorl_lib.facts.setup import PAPER_FIG1_HOURS
from brorl_lib.figures import palette
from brorl_lib.figures.plotting import new_figure, pt


@rounded_inputs
def figure1(points: pd.DataFrame) -> plt.Figure:
    """Score against training hours per arm, one panel per domain (Figure 1 is the Math panel)."""
    domains = list(dict.fromkeys(points["domain"]))
    fig, axes = new_figure("full", aspect=0.3, ncols=len(domains))
    for ax, domain in zip(axes, domains):
        for method, g in points[points["domain"] == domain].groupby("method", sort=False):
            ax.plot(g["hours"], g["score"], "o-", ms=3.5, color=palette.arm(method), label=f"{method}")
            for h, s, st in zip(g["hours"], g["score"], g["steps"]):
                if h > 0:
                    ax.annotate(st, (h, s), xytext=(3, 3), textcoords="offset points", fontsize=pt(5.5), color="0.3")
        ax.axvline(PAPER_FIG1_HOURS, color=palette.RULE, lw=0.6, ls=":")
        ax.set_xlabel("Training Time (hours)")
        ax.set_ylabel(f"{domain} Score")
        ax.set_title(f"{domain} score improvement over time", loc="left")
    axes[0].legend(loc="lower right")
    return fig


@rounded_inputs
def pass_rate(curves: pd.DataFrame, reported: dict[int, float]) -> plt.Figure:
    """Expected dynamic-sampling pass rate and wasted samples per kept sample against N."""
    fig, (ax_r, ax_w) = new_figure("full", aspect=0.32, ncols=2)
    for i, (model, g) in enumerate(curves.groupby("model", sort=False)):
        ax_r.plot(g["N"], 100 * g["pass_rate"], color=palette.series(i), label=model)
        ax_w.plot(g["N"], g["wasted_per_kept"], color=palette.series(i), label=model)
    ns = sorted(reported)
    ax_r.plot(ns, [100 * reported[n] for n in ns], "k*", ms=8, label="reported (Table 2)")
    ax_w.plot(ns, [1 / reported[n] - 1 for n in ns], "k*", ms=8, label="reported (Table 2)")
    for ax in (ax_r, ax_w):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("rollouts per prompt N")
        ax.legend(fontsize=pt(6))
    ax_w.set_yscale("log")
    ax_r.set_title("dynamic-sampling pass rate", loc="left")
    ax_r.set_ylabel("pass rate (%)")
    ax_w.set_title("samples discarded per kept sample", loc="left")
    ax_w.set_ylabel("discarded per kept")
    return fig


@rounded_inputs
def roofline_plot(
    points: pd.DataFrame, table: pd.DataFrame, peak: float, bandwidth: float, reported_ratio: float, response_len: int
) -> plt.Figure:
    """Left: the H100 roofline with both arms' decode steps. Right: predicted BroRL/ProRL ratio vs response length."""
    fig, (ax_r, ax_t) = new_figure("full", aspect=0.34, ncols=2)
    x = np.geomspace(1, 3000, 200)
    ax_r.loglog(x, np.minimum(peak, bandwidth * x) / 1e12, color=palette.INK, lw=1)
    ax_r.axvline(peak / bandwidth, color=palette.RULE, lw=0.5, ls=":")
    for _, r in points.iterrows():
        marker = "s" if r["shared_prefix"] else "o"
        ax_r.plot(
            r["intensity"],
            r["achieved_flops"] / 1e12,
            marker,
            color=palette.arm(r["arm"]),
            ms=6,
            label=f"{r['arm']}, {'shared prefix' if r['shared_prefix'] else 'no sharing'}",
        )
    ax_r.set_xlabel("arithmetic intensity (FLOPs / byte)")
    ax_r.set_ylabel("attainable TFLOP/s")
    ax_r.set_title(f"decode step at mid-response ({response_len} tokens)", loc="left")
    ax_r.legend(fontsize=pt(6))
    for i, (shared, g) in enumerate(table.groupby("shared_prefix")):
        ax_t.plot(
            g["response_len"],
            g["ratio"],
            "o-",
            ms=3,
            color=palette.series(i),
            label="shared prefix" if shared else "no prefix sharing",
        )
    ax_t.axhline(reported_ratio, color="k", ls="--", lw=0.8, label=f"reported {reported_ratio:.2f}x")
    ax_t.set_xscale("log", base=2)
    ax_t.set_xlabel("response length (tokens)")
    ax_t.set_ylabel("predicted BroRL / ProRL samples/s")
    ax_t.legend(fontsize=pt(6))
    return fig
