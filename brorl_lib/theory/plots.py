"""Figures of notebooks/01_theory.ipynb, each drawn from a DataFrame made by theory_report."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.patches import Patch

from brorl_lib.core.precision import rounded_inputs
from brorl_lib.facts import setup as paper_setup
from brorl_lib.figures import palette, styles
from brorl_lib.figures.plotting import height, new_canvas, new_figure, panels_across, pt

CLASS_ORDER = ("sampled correct", "sampled incorrect", "unsampled correct", "unsampled incorrect")
CLASS_COLOURS = dict(zip(CLASS_ORDER, (palette.GOOD, palette.BAD, palette.GOOD, palette.BAD)))  # hatched: unsampled
TERM_LABELS = {
    "sampled_correct": "sampled correct\n$(R_c-S_R)\\,Q_{neg}A_2$",
    "sampled_incorrect": "sampled incorrect\n$(S_R-R_w)\\,Q_{pos}B_2$",
    "unsampled": "unsampled coupling\n$S_R(Q_{pos}U_{neg,2}-Q_{neg}U_{pos,2})$",
    "delta_q_pos": "$\\Delta Q_{pos}$ (sum)",
}
DIVERGING = "PuOr"  # colour-blind safe diverging map
RESOLVED_GAP = 1e-10  # step-size study: gaps drawn from 1e-10 of the change up (3+ digits at 1e-12 places)


@rounded_inputs
def figure2(tokens: pd.DataFrame, terms: pd.DataFrame, eta: float, n: int) -> plt.Figure:
    """Figure 2 from a concrete batch: tokens by class, their first-order change, and the three terms (beside
    them, or below them where the style's width has no room for two columns)."""
    if panels_across("full") >= 2:
        fig = new_canvas("full", height("full", 0.47))
        grid = fig.add_gridspec(2, 2, width_ratios=(2.3, 1.0), height_ratios=(1.4, 1.0))
        ax_p = fig.add_subplot(grid[0, 0])
        ax_dp = fig.add_subplot(grid[1, 0], sharex=ax_p)
        ax_t = fig.add_subplot(grid[:, 1])
    else:  # stacked: the terms below the batch
        fig = new_canvas("full", min(8.0, styles.active().height_in))
        grid = fig.add_gridspec(3, 1, height_ratios=(1.4, 1.0, 1.3))
        ax_p = fig.add_subplot(grid[0])
        ax_dp = fig.add_subplot(grid[1], sharex=ax_p)
        ax_t = fig.add_subplot(grid[2])
    order = tokens.assign(rank=tokens["token_class"].map(CLASS_ORDER.index)).sort_values(
        ["rank", "p"], ascending=[True, False]
    )
    x = np.arange(len(order))
    colours = order["token_class"].map(CLASS_COLOURS)
    hatches = ["" if s else "////" for s in order["sampled"]]
    scale = n / eta
    for ax, values in ((ax_p, order["p"]), (ax_dp, order["delta_p_first_order"] * scale)):
        bars = ax.bar(x, values, color=colours, edgecolor="white", linewidth=0.3)
        for bar, h in zip(bars, hatches):
            bar.set_hatch(h)
            if h:
                bar.set_alpha(0.55)
    ax_dp.axhline(0, color=palette.INK, lw=0.6)
    ax_p.set_ylabel("$p_i$")
    ax_dp.set_ylabel(r"$\Delta p_i \cdot N/\eta$")
    ax_dp.set_xlabel("token (grouped by class, most likely first)")
    ax_dp.set_xticks([])
    for cls in CLASS_ORDER:
        idx = np.flatnonzero(order["token_class"].to_numpy() == cls)
        if idx.size:
            ax_p.axvline(idx[-1] + 0.5, color="0.7", lw=0.5)
    handles = [
        Patch(
            facecolor=CLASS_COLOURS[c],
            hatch="" if c.startswith("sampled") else "////",
            alpha=1.0 if c.startswith("sampled") else 0.55,
            edgecolor="white",
            label=c,
        )
        for c in CLASS_ORDER
    ]
    fig.legend(handles=handles, loc="outside upper left", ncols=4 if panels_across() >= 3 else 2, fontsize=pt(6))
    vals = terms.set_index("term")["value"] * scale
    names = list(TERM_LABELS)
    y = np.arange(len(names))[::-1]
    ax_t.barh(
        y,
        [vals[k] for k in names],
        height=0.5,  # room between bars for the values written beside them
        color=[palette.GOOD if vals[k] >= 0 else palette.BAD for k in names],
        edgecolor=["none"] * 3 + ["0.1"],
    )
    ax_t.axvline(0, color=palette.INK, lw=0.6)
    ax_t.set_yticks(y, [TERM_LABELS[k] for k in names], fontsize=pt(6))
    ax_t.set_xlabel(r"Term $\times N/\eta$")
    for yi, k in zip(y, names):
        ax_t.annotate(
            f"{vals[k]:+.2e}",
            (max(vals[k], 0.0), yi),
            xytext=(2, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            fontsize=pt(6),
        )
    lo, hi = min(0.0, *(vals[k] for k in names)), max(0.0, *(vals[k] for k in names))
    ax_t.set_xlim(lo - 0.05 * (hi - lo), hi + 0.45 * (hi - lo))  # room on the right for the values beside the bars
    ax_t.grid(False)
    ax_p.set_title(f"A sampled batch (V={len(tokens)}, N={n})", loc="left")
    ax_t.set_title("Theorem 1's terms" if panels_across() >= 3 else "Terms", loc="left")
    return fig


@rounded_inputs
def theorem1_check(checks: pd.DataFrame, study: pd.DataFrame) -> plt.Figure:
    """Left: relative errors over random instances (written to 1e-10: below it they are round-off and read 0).
    Right: exact-vs-closed gap against eta, where the gap is at least RESOLVED_GAP of the change."""
    fig, (ax_h, ax_s) = new_figure("full", aspect=0.34, ncols=2)
    bins = np.linspace(-11, 0, 34)
    for col, label, colour in (
        ("rel_err_first_order", "vs first-order change", palette.series(0)),
        ("rel_err_exact", "vs exact softmax change", palette.series(1)),
    ):
        ax_h.hist(np.log10(checks[col].clip(lower=10**-10.8)), bins=bins, color=colour, alpha=0.75, label=label)
    ax_h.set_xlabel(r"$\log_{10}$ relative error ($<-10$: round-off)")
    ax_h.set_ylabel("Instances")
    ax_h.set_title("Random instances", loc="left")
    ax_h.legend(loc="upper right")
    ref = None
    for i, (family, g) in enumerate(study.groupby("family")):
        g = g[g["rel_gap"] >= RESOLVED_GAP]
        gap = g["rel_gap"] * g["delta_q_theorem"].abs()
        ax_s.loglog(g["eta"], gap, "o-", ms=3, color=palette.series(i), label=f"{family} logits")
        if ref is None and len(g):
            etas = np.unique(study["eta"])
            ref = (etas, 3 * gap.iloc[0] * (etas / g["eta"].iloc[0]) ** 2)
    if ref is not None:
        ax_s.loglog(*ref, ":", color="0.3", label=r"slope 2 ($\propto\eta^2$)")
    ax_s.set_xlabel(r"Step size $\eta$")
    ax_s.set_ylabel(r"|exact $-$ Theorem 1|")
    ax_s.set_title("Gap against the step size", loc="left")
    fig.legend(*ax_s.get_legend_handles_labels(), loc="outside upper right", ncols=3, fontsize=pt(6))
    return fig


@rounded_inputs
def lemma2_corollary3(lemma: pd.DataFrame, curves: pd.DataFrame) -> plt.Figure:
    """Left: Lemma 2 by Monte Carlo (95% CI) against p^2(1-p)^N. Right: Corollary 3 against N."""
    fig, (ax_l, ax_c) = new_figure("full", aspect=0.34, ncols=2)
    for i, (p, g) in enumerate(lemma.groupby("p")):
        err = np.vstack([g["estimate"] - g["ci_low"], g["ci_high"] - g["estimate"]])
        ax_l.errorbar(g["n"], g["estimate"], yerr=err, fmt="o", ms=3, color=palette.series(i))
        first = g.sort_values("n").iloc[0]  # each curve labelled below its flat start
        ax_l.annotate(f"p = {p:g}", (first["n"], first["estimate"]), xytext=(0, -5), textcoords="offset points",
                      ha="left", va="top", fontsize=pt(6), color=palette.series(i))  # fmt: skip
        n_fine = np.geomspace(1, g["n"].max(), 200)
        ax_l.plot(n_fine, p * p * (1 - p) ** n_fine, "-", color=palette.series(i), lw=0.9)
    ax_l.set_xscale("log")
    ax_l.set_yscale("log")
    ax_l.set_xlabel("Rollouts N")
    ax_l.set_ylabel(r"$E[U_2(p)]$")
    ax_l.set_title("Lemma 2 (lines: $p^2(1-p)^N$)", loc="left")
    styles = {"all tokens": "-", "correct (U_pos,2)": "-", "incorrect (U_neg,2)": "--"}
    for i, ((dist, tokens), g) in enumerate(curves.groupby(["distribution", "tokens"], sort=False)):
        ax_c.loglog(
            g["n_rollouts"],
            g["expected_u2"].clip(lower=1e-30),
            styles[tokens],
            color=palette.series(min(i, 2)),
            label=dist if tokens == "all tokens" else f"{dist}, {tokens.split(' (')[0]}",
        )
    for n in paper_setup.SIM_ROLLOUT_SIZES:
        ax_c.axvline(n, color=palette.RULE, lw=0.5, ls=":")
    ax_c.set_ylim(1e-16, None)
    ax_c.set_xlabel("Rollouts N (dotted: Figure 3)")
    ax_c.set_ylabel(r"$\sum_i p_i^2(1-p_i)^N$")
    ax_c.set_title("Corollary 3, V = 128,000", loc="left")
    ax_c.legend(fontsize=pt(6), loc="lower left")
    return fig


@rounded_inputs
def sign_map(grid: pd.DataFrame, points: pd.DataFrame) -> plt.Figure:
    """(N/eta) Delta Q_pos over (S_R, U_pos,2 - U_neg,2); black line: Delta Q_pos = 0."""
    ns = sorted(grid["n_rollouts"].unique())
    wide = panels_across() >= 3  # room for a colour bar beside each panel; else under it
    fig, axes = new_figure("full", aspect=0.32 if wide else 0.4, ncols=len(ns))
    for ax, n in zip(np.atleast_1d(axes), ns):
        g = grid[grid["n_rollouts"] == n]
        s = np.sort(g["s_r"].unique())
        d = np.sort(g["u_diff"].unique())
        z = g.pivot(index="u_diff", columns="s_r", values="scaled_delta_q").loc[d, s].to_numpy()
        lim = np.abs(z).max()
        mesh = ax.pcolormesh(
            s, d, z, cmap=DIVERGING, norm=TwoSlopeNorm(0.0, -lim, lim), shading="auto", rasterized=True
        )
        if (z < 0).any():
            ax.contour(s, d, z, levels=[0.0], colors="k", linewidths=0.8)
        star = points[points["n_rollouts"] == n].iloc[0]
        ax.plot(star["s_r"], star["u_diff"], "k*", ms=6)
        ax.set_title(f"N = {n}: {100 * (z < 0).mean():.1f}% < 0", loc="left")
        ax.set_xlabel("Batch mood $S_R$")
        ax.grid(False)
        bar = fig.colorbar(mesh, ax=ax, shrink=0.85, format="%.0e", location="right" if wide else "bottom")
        bar.set_ticks([-lim, 0, lim] if wide else [-lim, lim])
    np.atleast_1d(axes)[0].set_ylabel(r"$U_{pos,2} - U_{neg,2}$")
    fig.suptitle(r"$(N/\eta)\,\Delta Q_{pos}$; line: $\Delta Q_{pos}=0$; star: expected batch", fontsize=pt(8))
    return fig


@rounded_inputs
def pass_at_k_vs_mass(curves: pd.DataFrame) -> plt.Figure:
    """pass@k = 1 - (1 - Q_pos)^k for several k."""
    fig, ax = new_figure("column")
    for i, (k, g) in enumerate(curves.groupby("k")):
        ax.plot(g["q_pos"], g["pass_at_k"], color=palette.series(i), label=f"k={k}")
    ax.set_xlabel(r"correct mass $Q_{pos}$")
    ax.set_ylabel("pass@k")
    ax.legend(ncols=2)
    return fig
