"""Figures of the countdown study (notebook 04). Every panel draws rows of a ``study_report`` table; N has its
colour from the one palette, q bands the palette's series."""

from __future__ import annotations

import re

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from brorl_lib.core.precision import rounded_inputs
from brorl_lib.figures import palette
from brorl_lib.figures.plotting import new_figure, pt
from brorl_lib.rlvr import study
from brorl_lib.rlvr.update_quality import ALL

MEASURES = {"cosine": "cos(update, ∇ mean q)", "delta_q": "Δ mean q after one step"}
SHORT = {"cosine": "cosine", "delta_q": "Δ mean q"}  # the y axis; the legend's title says it in full


def _band_colour(labels: list[str], label: str) -> str:
    """All prompts in ink; the q bands along a sequential map (cividis), apart from the arm and N colours."""
    bands = [b for b in labels if b != ALL]
    return (
        palette.INK
        if label == ALL
        else mpl.colors.to_hex(mpl.colormaps["cividis"](0.1 + 0.8 * bands.index(label) / max(1, len(bands) - 1)))
    )


def _checkpoint_words(name: str) -> str:
    """'plateau-step390' -> 'plateau (step 390)'; the earlier design's checkpoint by its role."""
    if name == study.PREVIOUS_NAME:
        return "earlier design's plateau"
    stage, _, step = name.partition("-step")
    if stage == "cap":
        return f"step cap (step {step}), not a plateau"
    return f"{stage} (step {step})" if step else name


@rounded_inputs
def screen(table: pd.DataFrame) -> plt.Figure:
    """Each candidate at its screen checkpoint: exact held-out pass@1 against the exact low-q share; the gates
    shaded, the chosen candidate ringed."""
    fig, ax = new_figure("column")
    lo, hi = study.PASS1_GATE
    ax.axvspan(lo, hi, color=palette.GOOD, alpha=0.08, lw=0, label=f"pass@1 gate [{lo:g}, {hi:g}]")
    ax.axhline(study.LOW_Q_GATE, color=palette.RULE, lw=0.7, ls="--", label=f"low-q gate ({study.LOW_Q_GATE:g})")
    for i, row in enumerate(table.itertuples(index=False)):
        colour = palette.series(i)
        numbers, model = row.candidate.removeprefix("countdown").split("-h")
        size = f" ({row.model_params / 1e6:.2f}M)" if hasattr(row, "model_params") else ""
        words = f"{numbers} numbers, {model.replace('x', ' wide x ')} layers{size}"
        ax.scatter(row.pass1, row.low_q_share_exact, s=18, color=colour, label=words)
        if row.chosen:
            ax.scatter(row.pass1, row.low_q_share_exact, s=70, facecolor="none", edgecolor=palette.INK, lw=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("Held-out pass@1 (exact)")
    ax.set_ylabel("Share of prompts with q in [0.01, 1/16)")
    ax.legend(fontsize=pt(5), loc="upper right")
    return fig


@rounded_inputs
def update_quality(summary: pd.DataFrame, measure: str) -> plt.Figure:
    """``measure`` (cosine or delta_q) against N, one row of panels per checkpoint and task, one column per S,
    one line per q band (all prompts in black), with one standard error across repetitions."""
    rows = list(dict.fromkeys(zip(summary["checkpoint"], summary["task"])))
    sizes = sorted(summary["samples_per_update"].unique())
    labels = list(dict.fromkeys(summary["q_band"]))
    fig, axes = new_figure("full", aspect=0.2 * len(rows), nrows=len(rows), ncols=len(sizes), squeeze=False)
    for r, (ckpt, task) in enumerate(rows):
        for c, s in enumerate(sizes):
            ax = axes[r][c]
            ax.axhline(0, color=palette.RULE, lw=0.6)
            g = summary[(summary.checkpoint == ckpt) & (summary.task == task) & (summary.samples_per_update == s)]
            if g.empty:
                ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center", va="center", color=palette.RULE)
            for label, h in g.groupby("q_band", sort=False):
                h = h.sort_values("n_rollouts")
                ax.errorbar(
                    h["n_rollouts"], h[measure], yerr=h[f"{measure}_se"], color=_band_colour(labels, label),
                    marker="o", ms=2, lw=0.9, capsize=1.5, label=label,
                )  # fmt: skip
            ax.set_xscale("log", base=2)
            if r == 0:
                ax.set_title(f"S = {s:,} samples", loc="left")
            if c == 0:
                where = _checkpoint_words(ckpt) + (f", {task}" if summary["task"].nunique() > 1 else "")
                ax.set_ylabel(f"{where}\n{SHORT[measure]}", fontsize=pt(6))
            if r == len(rows) - 1:
                ax.set_xlabel("N (rollouts per prompt)")
    handles = [Line2D([], [], color=_band_colour(labels, b), marker="o", ms=2, lw=0.9) for b in labels]
    columns = max(1, min(len(labels), int(fig.get_figwidth() / 1.4)))  # about 1.4 in per band label
    fig.legend(handles, labels, title=f"q band · {MEASURES[measure]}", fontsize=pt(6), loc="outside upper center",
               ncols=columns)  # fmt: skip
    return fig


@rounded_inputs
def best_n_model(table: pd.DataFrame, summaries: dict[str, dict], iso: pd.DataFrame | None = None,
                 iso_checkpoint: str = "", iso_samples: int = 0) -> plt.Figure:  # fmt: skip
    """Per checkpoint: the best-N model's cosine against N for each S (lines over the model's N grid) and the
    measured grid's cosine over all measured prompts (markers, one standard error, each S's nudged sideways so
    that they do not hide each other; ``best_n_report.comparison``). With ``iso`` (``study_report.isocompute``
    rows), a last panel: the IsoCompute grid's held-out pass@1 at its last budget against N at each N's best
    learning rate (one standard error; hollow where that rate is at its grid's edge or not settled), trained from
    ``iso_checkpoint`` at ``iso_samples`` samples a step, with the model's pick among its N there, if it makes one."""
    from brorl_lib.rlvr import best_n_report, gradient_stats

    names = list(summaries)
    sizes = sorted(table["S"].unique())
    colours = {s: mpl.colors.to_hex(mpl.colormaps["cividis"](0.1 + 0.8 * i / max(1, len(sizes) - 1)))
               for i, s in enumerate(sizes)}  # fmt: skip
    with_iso = iso is not None and len(iso) > 0
    fig, axes = new_figure("full", aspect=0.32, ncols=len(names) + with_iso, squeeze=False)
    for ax, name in zip(axes[0], names):
        m = best_n_report.moments_of(summaries[name])
        unresolved = m.g2 <= 0  # the model makes no prediction there; the title says so
        for i, s in enumerate(sizes):
            ns = np.array([n for n in gradient_stats.N_GRID if n <= s])
            dodge = 2 ** (0.12 * (i - (len(sizes) - 1) / 2))  # S's markers side by side at one N (log axis)
            if m.g2 > 0:
                ax.plot(ns, gradient_stats.predicted_cosine(m, ns, s, m.prompts), color=colours[s], lw=1.0)
            g = table[(table["checkpoint"] == name) & (table["S"] == s)].dropna(subset=["measured_cosine"])
            if len(g):
                ax.errorbar(g["N"] * dodge, g["measured_cosine"], yerr=g["measured_se"], color=colours[s], ls="none",
                            marker="o", ms=2.5, capsize=1.5)  # fmt: skip
        ax.set_xscale("log", base=2)
        ax.set_title(_checkpoint_words(name) + ("\nno model: |G|² not resolved" if unresolved else ""), loc="left")
        ax.set_xlabel("N (rollouts per prompt)")
    axes[0][0].set_ylabel("cos(update, ∇ mean q)")
    if with_iso:
        _isocompute_panel(axes[0][-1], iso, summaries.get(iso_checkpoint), iso_checkpoint, iso_samples)
    handles = [Line2D([], [], color=colours[s], lw=1.0) for s in sizes]
    handles += [Line2D([], [], color=palette.INK, lw=1.0)]
    handles += [Line2D([], [], color=palette.INK, ls="none", marker="o", ms=2.5)]
    labels = [f"S = {s:,}" for s in sizes] + ["model", "measured (±1 SE)"]
    fig.legend(handles, labels, fontsize=pt(6), loc="outside upper center", ncols=len(labels))
    return fig


def _isocompute_panel(ax, iso: pd.DataFrame, summary: dict | None, checkpoint: str, samples: int) -> None:
    """``best_n_model``'s last panel: IsoCompute pass@1 at the last budget against N, the model's pick marked."""
    from brorl_lib.rlvr import best_n_report

    last = best_n_report.iso_last_budget(iso).sort_values("n_rollouts")
    for r in last.itertuples():
        colour = palette.n_colour(int(r.n_rollouts))
        open_marker = r.lr_at_edge or not r.settled
        ax.errorbar([r.n_rollouts], [r.pass1_mean], yerr=[r.pass1_se], color=colour, marker="o", ms=3, capsize=1.5,
                    mfc="white" if open_marker else colour)  # fmt: skip
    if (last["lr_at_edge"] | ~last["settled"].astype(bool)).any():
        ax.plot([], [], color=palette.INK, ls="none", marker="o", ms=3, mfc="white", label="rate at its grid's edge")
    pick = best_n_report.model_pick(summary, iso["n_rollouts"].unique(), samples)
    title = f"IsoCompute, {int(iso['budget'].max()):,} samples\nfrom the {_checkpoint_words(checkpoint)}"
    if pick is not None:
        ax.axvline(pick, color=palette.INK, ls=":", lw=0.8, label=f"model's pick: N = {pick}")
    else:
        title = title.split(" (step")[0] + "; no model"
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=pt(5.5), loc="best")
    ax.set_xscale("log", base=2)
    ax.set_title(title, loc="left")
    ax.set_xlabel(f"N (S = {samples:,} a step, best rate)")
    ax.set_ylabel("Held-out pass@1 (exact)")


CONTROL_LABELS = {
    "(batch control)": "batch-size control",
    "(prompt-matched)": "prompt-matched BroRL",
    ", KL ": "KL-anchored BroRL",
}  # a control arm's label names it (study_phase2.control_arms)


def _arm_style(arm: str, n: int, label: str) -> palette.Style:
    """How a phase-2 arm is drawn: a verdict arm solid in its N's colour, another learning-rate multiple of one
    (``_lr<f>x`` in its name) a dashed tint of it, a control in its N's colour with its own dash, marker and hatch
    (``figures.palette.control``; a KL weight below 1, ``_kl<c>``, a tint of it), BroRL at other prompts per step
    dotted in its N's colour."""
    control = next((v for k, v in CONTROL_LABELS.items() if k in label), None)
    style = palette.control(control) if control else palette.Style(palette.n_colour(int(n)), None, "o")
    factor = re.search(r"_lr([0-9.e-]+)x", arm)
    if factor:
        return style._replace(colour=palette.tint(style.colour, min(0.7, 0.15 * abs(np.log2(float(factor[1]))))),
                              dash="--")  # fmt: skip
    weight = re.search(r"_kl([0-9.e-]+)$", arm)
    if weight:
        return style._replace(colour=palette.tint(style.colour, min(0.7, 0.3 * max(0.0, -np.log10(float(weight[1]))))))
    return style._replace(dash=style.dash or ("-" if arm in ("N16", "N512") else ":"))


@rounded_inputs
def curves(table: pd.DataFrame, arms: list[str] | None = None) -> plt.Figure:
    """Held-out pass@1 at each budget of generated samples for each verdict and control arm (rows of
    ``study_report.at_budgets``; ``arms``: only these): mean over seeds with a 95% band, from the plateau."""
    fig, ax = new_figure("column")
    table = table[table["role"] != "isocompute"]
    if arms is not None:
        table = table[table["arm"].isin(arms)]
    for (arm, label, n), g in table.groupby(["arm", "label", "N"], sort=False):
        start = g.groupby("seed")["start_pass1"].first()
        m = g.groupby("budget")["pass1"].agg(["mean", "std", "size"])
        x = np.r_[0, m.index.to_numpy()]
        y = np.r_[start.mean(), m["mean"].to_numpy()]
        band = np.r_[0, 1.96 * m["std"].fillna(0).to_numpy() / np.sqrt(m["size"].to_numpy())]
        colour, ls, marker, _ = _arm_style(arm, n, label)
        ax.plot(x, y, color=colour, ls=ls, marker=marker, ms=2, lw=1, label=f"{label} (n={len(start)})")
        ax.fill_between(x, y - band, y + band, color=colour, alpha=0.12, lw=0)
    ticks = [0, *sorted(table["budget"].unique())]
    ax.set_xticks(ticks, [f"{b / 1000:,.0f}k" if b else "0" for b in ticks])
    ax.set_xlabel("Generated samples in phase 2 (budgets)")
    ax.set_ylabel("Held-out pass@1 (exact)")
    ax.legend(fontsize=pt(5), loc="best")
    return fig


def _arms_by_band(table: pd.DataFrame, draw, xlabel: str, ylabel: str) -> plt.Figure:
    """The arms side by side within each q band (rows: arm, q_band, label, prompts); ``draw(ax, x, width, rows,
    arm)`` draws one arm's rows, indexed by band."""
    fig, ax = new_figure("column")
    ax.axhline(0, color=palette.RULE, lw=0.6)
    labels = list(dict.fromkeys(table["q_band"]))
    arms = list(dict.fromkeys(table["arm"]))
    width = 0.8 / max(1, len(arms))
    for k, arm in enumerate(arms):
        rows = table[table.arm == arm].set_index("q_band").reindex(labels)
        draw(ax, np.arange(len(labels)) + (k - (len(arms) - 1) / 2) * width, width, rows, arm)
    counts = table.drop_duplicates("q_band").set_index("q_band").reindex(labels)["prompts"]
    ax.set_xticks(np.arange(len(labels)), [f"{b}\n(n={int(c)})" for b, c in zip(labels, counts)], fontsize=pt(5))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=pt(5), loc="best")
    return fig


@rounded_inputs
def bands(table: pd.DataFrame) -> plt.Figure:
    """Each arm minus ProRL per held-out q band at the last budget (rows of ``study_report.bands``), 95% interval
    across seeds."""

    def draw(ax, x, width, g, arm):
        err = [g["delta_vs_prorl"] - g["ci_low"], g["ci_high"] - g["delta_vs_prorl"]]
        label = g["label"].dropna().iloc[0]
        style = _arm_style(arm, g["N"].dropna().iloc[0], label)
        ax.errorbar(x, g["delta_vs_prorl"], yerr=err, color=style.colour, marker=style.marker, ms=3, lw=0,
                    elinewidth=1, capsize=2, label=label)  # fmt: skip

    table = table.dropna(subset=["delta_vs_prorl"])
    return _arms_by_band(table, draw, "Held-out pass@1 at the plateau", "Arm − ProRL, pass@1")


@rounded_inputs
def isocompute(table: pd.DataFrame) -> plt.Figure:
    """Left: held-out pass@1 against the budget for each N at its best learning-rate multiple (mean ± one standard
    error across seeds; hollow markers and "edge" in the legend where the best is at the grid's edge or not yet
    settled). Right: pass@1 against N at each budget, one standard error: the best N is the highest point, and
    a point within one standard error of it is not told apart from it (no best-N line that would switch on noise)."""
    fig, axes = new_figure("full", aspect=0.32, ncols=2)
    best = table[table["best_lr"]]
    for n, g in best.groupby("n_rollouts"):
        g = g.sort_values("budget")
        colour = palette.n_colour(int(n))
        edge = bool(g["lr_at_edge"].any())
        axes[0].errorbar(
            g["budget"], g["pass1_mean"], yerr=g["pass1_se"], color=colour, marker="o", ms=3,
            mfc="white" if edge else colour, lw=1, capsize=2,
            label=f"N={n} ({g['lr_factor'].iloc[0]:g}x lr{', edge' if edge else ''})",
        )  # fmt: skip
    budgets = sorted(best["budget"].unique())
    for k, (b, g) in enumerate(best.groupby("budget")):
        g = g.sort_values("n_rollouts")
        colour = palette.tint(palette.INK, 0.65 * (1 - (k + 1) / len(budgets)))  # greys: no N or arm meaning
        axes[1].errorbar(g["n_rollouts"], g["pass1_mean"], yerr=g["pass1_se"], color=colour, marker="o", ms=3,
                         lw=1, capsize=2, label=f"{b / 1000:,.0f}k samples")  # fmt: skip
    for ax in axes:
        ax.set_xscale("log", base=2)
    axes[0].set_xlabel("Generated samples in phase 2")
    axes[1].set_xlabel("N (rollouts per prompt), at its best learning rate")
    axes[0].set_ylabel("Held-out pass@1 (exact)")
    axes[0].legend(fontsize=pt(5.5), loc="best")
    axes[1].legend(fontsize=pt(5.5), loc="best")
    return fig


@rounded_inputs
def prompt_fate(table: pd.DataFrame) -> plt.Figure:
    """Change of each training prompt's exact q over phase 2, by its q at the plateau, per arm (mean over seeds,
    one standard error)."""

    def draw(ax, x, width, g, arm):
        label = g["label"].dropna().iloc[0]
        style = _arm_style(arm, 16 if arm.startswith("N16") else 512, label)
        ax.bar(x, g["delta_q"], width, yerr=g["delta_q_se"], color=style.colour, hatch=style.hatch, edgecolor="white",
               lw=0, label=label)  # fmt: skip

    return _arms_by_band(table, draw, "Exact q at the plateau", "Δ q over phase 2")


@rounded_inputs
def phase1(curve: pd.DataFrame, window_steps: tuple[int, int, int] | None = None) -> plt.Figure:
    """Phase 1 of each candidate: exact held-out pass@1 with a 95% band over prompts and a centred moving mean;
    the chosen candidate in full colour, the others pale. ``window_steps`` (first, middle, last step of the two
    windows the plateau rule compared) shades the earlier and the later window."""
    fig, ax = new_figure("column")
    if window_steps:
        first, middle, last = window_steps
        ax.axvspan(first, middle, color=palette.RULE, alpha=0.12, lw=0, label="plateau rule: earlier window")
        ax.axvspan(middle, last, color=palette.RULE, alpha=0.28, lw=0, label="plateau rule: later window")
    for i, (key, g) in enumerate(curve.groupby("candidate", sort=False)):
        colour = palette.series(i) if g["chosen"].iloc[0] else palette.tint(palette.series(i), 0.6)
        ax.plot(g["step"], g["pass1"], color=colour, lw=0.6, marker="o", ms=1.2, alpha=0.7)
        ax.fill_between(g["step"], g["pass1"] - 1.96 * g["se"], g["pass1"] + 1.96 * g["se"], color=colour,
                        alpha=0.12, lw=0)  # fmt: skip
        ax.plot(
            g["step"], g["smoothed"], color=colour, lw=1.4, label=key + (" (chosen)" if g["chosen"].iloc[0] else "")
        )
    ax.set_xlabel("Phase-1 step (step 0: warm start)")
    ax.set_ylabel("Held-out pass@1 (exact)")
    ax.legend(fontsize=pt(5.5), loc="lower right")
    return fig


@rounded_inputs
def drift(curves: pd.DataFrame) -> plt.Figure:
    """Left: the KL to the plateau policy (nats a token, log scale; bins whose mean is not positive left out);
    right: the entropy per response token; each against generated samples, per arm (``study_report.drift_curves``)."""
    fig, axes = new_figure("full", aspect=0.32, ncols=2)
    for (arm, label, n), g in curves.groupby(["arm", "label", "N"], sort=False):
        colour, ls, marker, _ = _arm_style(arm, n, label)
        kl = g[g["kl_ref"] > 0]
        axes[0].plot(kl["samples"], kl["kl_ref"], color=colour, ls=ls, marker=marker, ms=2, lw=1)
        axes[1].plot(g["samples"], g["entropy"], color=colour, ls=ls, marker=marker, ms=2, lw=1, label=label)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("KL to plateau (nats/token)")
    axes[1].set_ylabel("Entropy (nats/token)")
    for ax in axes:
        ax.set_xlabel("Generated samples in phase 2")
        ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v / 1000:,.0f}k" if v else "0"))
    fig.legend(fontsize=pt(5.5), loc="outside right upper")
    return fig
