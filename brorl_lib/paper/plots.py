"""Figures of notebooks/03_paper_tables.ipynb."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from brorl_lib.core.precision import rounded_inputs
from brorl_lib.facts.setup import PAPER_FIG1_HOURS
from brorl_lib.figures import palette
from brorl_lib.figures.plotting import new_figure, pt

STEP_NOTE = {"ProRL": ((3, -5), "left", "top"), "BroRL": ((-4, 3), "right", "bottom")}  # below / above its line
FALLING_NOTE = ((7, 0), "left", "center")  # a point whose next segment falls: its label to its right, between lines


@rounded_inputs
def figure1(points: pd.DataFrame) -> plt.Figure:
    """Score against training hours per arm, one panel per domain (Figure 1 is the Math panel), each point
    labelled with its RL steps (ProRL's below its line, BroRL's above)."""
    domains = list(dict.fromkeys(points["domain"]))
    fig, axes = new_figure("full", aspect=0.34, ncols=len(domains))
    for ax, domain in zip(axes, domains):
        for method, g in points[points["domain"] == domain].groupby("method", sort=False):
            ax.plot(g["hours"], g["score"], "o-", ms=3, color=palette.arm(method), label=method)
            scores = list(g["score"])
            for k, (h, s, st) in enumerate(zip(g["hours"], scores, g["steps"])):
                falls = k + 1 < len(scores) and scores[k + 1] < s - 0.2
                offset, ha, va = FALLING_NOTE if falls else STEP_NOTE.get(method, ((4, 3), "left", "bottom"))
                if h > 0:
                    ax.annotate(st, (h, s), xytext=offset, textcoords="offset points", ha=ha, va=va,
                                fontsize=pt(5.5), color="0.3")  # fmt: skip
        ax.axvline(PAPER_FIG1_HOURS, color=palette.RULE, lw=0.6, ls=":")
        ax.margins(x=0.12, y=0.15)  # room for the step labels inside the panel
        ax.set_title(domain, loc="left")
    axes[0].set_ylabel("Score")
    fig.supxlabel("Training time (hours)", fontsize=mpl.rcParams["axes.labelsize"])
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside upper right", ncols=2,
               title="RL steps at each point:", title_fontproperties={"size": pt(6)}, alignment="left")  # fmt: skip
    return fig


@rounded_inputs
def pass_rate(curves: pd.DataFrame, reported: dict[int, float]) -> plt.Figure:
    """Expected dynamic-sampling pass rate and wasted samples per kept sample against N; one legend for both."""
    fig, (ax_r, ax_w) = new_figure("full", aspect=0.32, ncols=2)
    for i, (model, g) in enumerate(curves.groupby("model", sort=False)):
        ax_r.plot(g["N"], 100 * g["pass_rate"], color=palette.series(i), label=f"model: {model}")
        ax_w.plot(g["N"], g["wasted_per_kept"], color=palette.series(i))
    ns = sorted(reported)
    ax_r.plot(ns, [100 * reported[n] for n in ns], "k*", ms=7, label="reported (Table 2)")
    ax_w.plot(ns, [1 / reported[n] - 1 for n in ns], "k*", ms=7)
    for ax in (ax_r, ax_w):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("Rollouts per prompt N")
    ax_w.set_yscale("log")
    ax_w.yaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax_w.yaxis.set_minor_formatter(mpl.ticker.NullFormatter())
    ax_r.set_title("Dynamic-sampling pass rate", loc="left")
    ax_r.set_ylabel("Pass rate (%)")
    ax_w.set_title("Discarded samples", loc="left")
    ax_w.set_ylabel("Discarded per kept sample")
    fig.legend(loc="outside upper center", ncols=3)
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
    ax_r.set_xlabel("Arithmetic intensity (FLOPs/byte)")
    ax_r.set_ylabel("Attainable TFLOP/s")
    ax_r.set_title(f"Decode step at {response_len:,} tokens", loc="left")
    ax_r.legend(fontsize=pt(6), loc="lower right")
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
    ax_t.set_xlabel("Response length (tokens)")
    ax_t.set_ylabel("BroRL / ProRL samples/s")
    ax_t.set_title("Predicted throughput ratio", loc="left")
    ax_t.legend(fontsize=pt(6), loc="upper right")
    return fig
