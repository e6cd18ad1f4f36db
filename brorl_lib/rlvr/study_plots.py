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
from brorl_lib.figures import palette, styles
from brorl_lib.figures.plotting import new_figure, pt
from brorl_lib.rlvr import study
from brorl_lib.rlvr import update_quality as uq
from brorl_lib.rlvr.update_quality import ALL

MEASURES = {"cosine": "cos(update, ∇ mean q)", "delta_q": "Δ mean q after one step"}
SHORT = {"cosine": "cosine", "delta_q": "Δ mean q"}  # the y axis; the legend's title says it in full


def _band_colour(labels: list[str], label: str) -> str:
    """All prompts in ink; the q bands along a sequential map (cividis), apart from the arm and N colours."""
    bands = [b for b in labels if b != ALL]
    return (
        palette.INK
        if label == ALL
        else mpl.colors.to_hex(mpl.colormaps["cividis"](0.05 + 0.75 * bands.index(label) / max(1, len(bands) - 1)))
    )


def _checkpoint_words(name: str) -> str:
    """'plateau-step390' -> 'plateau (step 390)'; the earlier design's checkpoint by its role."""
    if name == study.PREVIOUS_NAME:
        return "earlier design's plateau"
    stage, _, step = name.partition("-step")
    if stage == "cap":
        return f"step cap (step {step}), not a plateau"
    return f"{stage} (step {step})" if step else name


def _candidate_words(key: str) -> str:
    """'countdown5-h64x2' -> '5 numbers, 64 wide x 2 layers'."""
    numbers, model = key.removeprefix("countdown").split("-h")
    return f"{numbers} numbers, {model.replace('x', ' wide x ')} layers"


@rounded_inputs
def screen(table: pd.DataFrame) -> plt.Figure:
    """Each candidate at its screen checkpoint: exact held-out pass@1 against the exact low-q share; the gates
    shaded, the chosen candidate ringed."""
    fig, ax = new_figure("column", aspect=0.95)
    lo, hi = study.PASS1_GATE
    ax.axvspan(lo, hi, color=palette.GOOD, alpha=0.08, lw=0, label=f"pass@1 gate [{lo:g}, {hi:g}]")
    ax.axhline(study.LOW_Q_GATE, color=palette.RULE, lw=0.7, ls="--", label=f"low-q gate ({study.LOW_Q_GATE:g})")
    for i, row in enumerate(table.itertuples(index=False)):
        colour = palette.series(i)
        size = f" ({row.model_params / 1e6:.2f}M)" if hasattr(row, "model_params") else ""
        words = _candidate_words(row.candidate) + size
        ax.scatter(row.pass1, row.low_q_share_exact, s=18, color=colour, label=words)
        if row.chosen:
            ax.scatter(row.pass1, row.low_q_share_exact, s=70, facecolor="none", edgecolor=palette.INK, lw=0.8)
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("Held-out pass@1 (exact)")
    ax.set_ylabel("Low-q share of prompts")
    title = "Candidates (ringed: chosen), gates;\nlow q: [0.01, 1/16)"
    fig.legend(fontsize=pt(6), loc="outside upper left", title=title, alignment="left",
               title_fontproperties={"size": pt(6)})  # fmt: skip
    return fig


@rounded_inputs
def update_quality(summary: pd.DataFrame, measure: str) -> plt.Figure:
    """``measure`` (cosine or delta_q) against N, one row of panels per checkpoint and task (one y scale a row),
    one column per S, one line per q band (all prompts in black), with one standard error across repetitions. A
    row measured otherwise than most (fewer repetitions, or measured prompts the updates may draw) is shaded and
    says how."""
    rows = list(dict.fromkeys(zip(summary["checkpoint"], summary["task"])))
    sizes = sorted(summary["samples_per_update"].unique())
    labels = sorted(dict.fromkeys(summary["q_band"]), key=lambda b: b != ALL)  # all prompts first
    how = {}
    for key in rows:
        g = summary[(summary["checkpoint"] == key[0]) & (summary["task"] == key[1])]
        reps = int(g["reps"].max()) if "reps" in g and g["reps"].notna().any() else 0
        ref = str(g["reference"].dropna().iloc[0]) if "reference" in g and g["reference"].notna().any() else ""
        how[key] = (reps, ref)
    usual = (max((r for r, _ in how.values()), default=0), uq.REFERENCES[0])  # the design: most reps, disjoint
    # On a slide (a frame too low for a row per checkpoint) the grid is turned: a column per checkpoint, a row per S.
    turned = styles.active().height_in < 4.0 and len(rows) > len(sizes)
    shape = (len(sizes), len(rows)) if turned else (len(rows), len(sizes))
    fig, grid = _figure("full", 0.7 + 0.95 * len(rows), 3.45, nrows=shape[0], ncols=shape[1], sharex=True,
                        sharey="col" if turned else "row", squeeze=False)  # fmt: skip
    axes = grid.T if turned else grid  # axes[checkpoint row][S column] either way
    for r, (ckpt, task) in enumerate(rows):
        reps, ref = how[(ckpt, task)]
        other = (reps, ref) != usual
        for c, s in enumerate(sizes):
            ax = axes[r][c]
            if other:
                ax.set_facecolor("0.93")
            ax.axhline(0, color=palette.RULE, lw=0.6)
            g = summary[(summary.checkpoint == ckpt) & (summary.task == task) & (summary.samples_per_update == s)]
            if g.empty:
                ax.text(0.5, 0.5, "not measured", transform=ax.transAxes, ha="center", va="center", color=palette.INK)
            for label, h in g.groupby("q_band", sort=False):
                h = h.sort_values("n_rollouts")
                ax.errorbar(
                    h["n_rollouts"], h[measure], yerr=h[f"{measure}_se"], color=_band_colour(labels, label),
                    marker="o", ms=2, lw=0.9, capsize=1.5, label=label,
                )  # fmt: skip
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_locator(mpl.ticker.LogLocator(base=4))
            ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
            ax.yaxis.set_major_locator(mpl.ticker.MaxNLocator(3))
            if turned:
                ax.tick_params(labelsize=pt(5.5))
                if r == 0:
                    ax.set_ylabel(f"S = {s:,}", fontsize=pt(6.5))
            elif r == 0:
                ax.set_title(f"S = {s:,}", loc="left")
        words_of = _checkpoint_words(ckpt).replace("earlier design's plateau", "earlier design").replace(" (", "\n(")
        words_of += f"\n{task}" if summary["task"].nunique() > 1 else ""
        if turned:
            short = words_of.replace("\n(", ", ").replace(")", "").replace("earlier design", "earlier")
            axes[r][0].set_title(short, fontsize=pt(5.5), loc="left")
        else:
            axes[r][0].set_ylabel(words_of, fontsize=pt(6.5), rotation=0, ha="right", va="center")
    fig.supxlabel("N (rollouts per prompt), at S samples an update", fontsize=mpl.rcParams["axes.labelsize"])
    if not turned:  # turned, the legend's title names the measure: the panels keep the width
        fig.supylabel(MEASURES[measure], fontsize=mpl.rcParams["axes.labelsize"])
    handles = [Line2D([], [], color=_band_colour(labels, b), marker="o", ms=2, lw=0.9) for b in labels]
    others = list(dict.fromkeys(v for v in how.values() if v != usual))
    note = []
    if others:
        handles.append(mpl.patches.Patch(color="0.93"))
        said = "; ".join(f"{r} reps, {ref} prompts" for r, ref in others)
        note = [f"shaded: {said}"]
    columns = min(len(handles), 4 if styles.active().full_in > 5.5 else 3)
    title = f"q band; y: {MEASURES[measure]}" if turned else "q band"
    fig.legend(handles, labels + note, title=title, loc="outside upper center", ncols=columns)
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
    colours = {s: mpl.colors.to_hex(mpl.colormaps["cividis"](0.1 + 0.6 * i / max(1, len(sizes) - 1)))
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
        note = "\nno model:\n|G|² unresolved" if styles.active().full_in < 6.5 else "\nno model: |G|² unresolved"
        ax.set_title(_checkpoint_words(name) + (note if unresolved else ""), loc="left")
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
    where = _checkpoint_words(checkpoint) if pick is not None else _checkpoint_words(checkpoint).split(" (step")[0]
    lines = ["IsoCompute, best rates", f"{iso['budget'].max() / 1e6:.3g}M samples", f"from the {where}"]
    if pick is not None:
        ax.axvline(pick, color=palette.INK, ls=":", lw=0.8, label=f"model's pick: N = {pick}")
    else:
        lines[-1] += "; no model"
    wide = styles.active().full_in >= 6.5
    title = "\n".join(lines) if wide else "\n".join(lines).replace("; ", ";\n").replace(", ", ",\n")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=pt(5.5), loc="best")
    ax.set_xscale("log", base=2)
    ax.set_title(title, loc="left")
    ax.set_xlabel(f"N (S = {samples:,})")
    ax.set_ylabel("Held-out pass@1 (exact)" if wide else "pass@1")


CONTROL_LABELS = {
    "(batch control)": "batch-size control",
    "(prompt-matched)": "prompt-matched BroRL",
    ", KL ": "KL-anchored BroRL",
}  # a control arm's label names it (study_phase2.control_arms)
GROUP_TITLES = {"rule": "At the rule's rates", "tuned": "BroRL at tuned rates", "control": "Controls at tuned rates"}
KL_FLOOR = 1e-3  # nats a token: a KL estimate from one run's steps below this is not told apart from 0 (our choice)


def fraction(factor: float) -> str:
    """A learning-rate multiple for a reader: 0.0078125 -> '1/128×', 0.5 -> '1/2×', 2 -> '2×', 0.3 -> '0.3×'."""
    f = float(factor)
    if 0 < f < 1 and abs(1 / f - round(1 / f)) < 1e-6 / f:
        return f"1/{round(1 / f)}×"
    return f"{f:g}×"


def words(label: str) -> str:
    """An arm's label for a reader: its multiple of the rule's rate as a fraction, 'x' as '×' ('BroRL N=512, 1/128×
    lr', 'N=16 × 512 prompts (batch control)')."""
    label = re.sub(r"(\d[0-9.e-]*)x lr", lambda m: f"{fraction(float(m[1]))} lr", str(label))
    return label.replace(" x ", " × ")


def _name(arm: str, label: str, group: str | None) -> str:
    """An arm's short name in a panel of its group (``study_report.figure_arms``): 'ProRL, tuned', 'BroRL, rule's
    rate', 'BroRL, 128 prompts', 'batch control (16 × 512)', 'BroRL + KL 0.1'; else ``words(label)``."""
    method = "ProRL" if label.startswith("ProRL") else "BroRL"
    control = next((v for k, v in CONTROL_LABELS.items() if k in label), None)
    sizes = re.match(r"N=(\d+) x (\d+) prompts", label)
    if control == "KL-anchored BroRL":
        return f"BroRL + KL {label.rsplit('KL ', 1)[-1]}"
    if control and sizes:
        return f"{control.removesuffix(' BroRL').replace('-size', '')} ({sizes[1]} × {sizes[2]})"
    if "_prompts" in arm and sizes is None:
        return f"BroRL, {label.rsplit(' x ', 1)[-1]}"
    if group == "rule":
        return f"{method}, rule's rate"
    if group == "tuned":
        return f"{method}, tuned"
    return words(label)


def _arm_style(arm: str, n: int, label: str, group: str | None = None) -> palette.Style:
    """How a phase-2 arm is drawn: in its N's colour, solid with round markers; a control with its own dash, marker
    and hatch (``figures.palette.control``; a KL weight below 1, ``_kl<c>``, a tint of it); in ``group`` ``rule``
    (the rule's rate) or as BroRL at the paper's prompts per step, its form's (``figures.palette.variant``); another
    learning-rate multiple (``_lr<f>x``, the tuning's grid) dashed, a tint for a multiple below 1, a marker of its
    own per power of two."""
    control = next((v for k, v in CONTROL_LABELS.items() if k in label), None)
    if control:
        style = palette.control(control)
        weight = re.search(r"_kl([0-9.e-]+)$", arm)
        if weight:
            amount = min(0.6, 0.3 * max(0.0, -np.log10(float(weight[1]))))
            style = style._replace(colour=palette.tint(style.colour, amount))
        return style
    if group == "rule":
        return palette.variant("rule rate", int(n))
    if "_prompts" in arm:
        return palette.variant("paper prompts", int(n))
    factor = re.search(r"_lr([0-9.e-]+)x", arm)
    if factor and group is None:
        power = int(round(np.log2(float(factor[1]))))
        colour = palette.tint(palette.n_colour(int(n)), min(0.6, 0.1 * -power)) if power < 0 else palette.n_colour(n)
        return palette.Style(colour, "--", "osD^<>ph*X"[power % 10])
    return palette.Style(palette.n_colour(int(n)), "-", "o")


def _height(paper_in: float, slides_in: float) -> float:
    """A figure's height in the style in force: ``slides_in`` in the slides preset (a 16:9 frame is 3.54 in high),
    else ``paper_in`` grown with the type."""
    style = styles.active()
    return slides_in if style.name == "slides" else paper_in * max(1.0, style.scale)


def _figure(width: str, paper_in: float, slides_in: float, **kwargs):
    """``new_figure`` ``width`` wide and ``_height`` high in the style in force."""
    return new_figure(width, height_in=_height(paper_in, slides_in), **kwargs)


def _millions(ax) -> None:
    ax.xaxis.set_major_formatter(mpl.ticker.FuncFormatter(lambda v, _: f"{v / 1e6:g}"))
    ax.xaxis.set_major_locator(mpl.ticker.MaxNLocator(4))


@rounded_inputs
def curves(table: pd.DataFrame, arms: list[str] | None = None) -> plt.Figure:
    """Held-out pass@1 at each budget of generated samples for each arm (rows of ``study_report.at_budgets``;
    ``arms``: only these): mean over seeds with a 95% band, from the plateau (the explorer's view of chosen arms)."""
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
        ax.plot(x, y, color=colour, ls=ls, marker=marker, ms=2.5, lw=1, label=f"{words(label)} (n={len(start)})")
        ax.fill_between(x, y - band, y + band, color=colour, alpha=0.12, lw=0)
    _millions(ax)
    ax.set_xlabel("Generated samples in phase 2 (millions)")
    ax.set_ylabel("Held-out pass@1 (exact)")
    ax.legend(loc="best")
    return fig


@rounded_inputs
def figure1(diffs: pd.DataFrame) -> plt.Figure:
    """Scaled-down Figure 1 as the verdict (rows of ``study_report.differences``): held-out pass@1 of BroRL minus
    ProRL against generated samples from the plateau, with the 95% interval over seeds and prompts and zero marked;
    at tuned rates (and BroRL at the paper's prompts per step) in the first panel, at the rule's rates, where BroRL
    collapses, in the second, on its own axis."""
    panels = [k for k in ("tuned", "rule") if (diffs["figure1"] == k).any()]
    fig, axes = _figure("full", 2.0, 2.3, ncols=max(1, len(panels)), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        ax.axhline(0, color=palette.INK, lw=0.8)
        rows = diffs[diffs["figure1"] == panel]
        for (arm, n, label), g in rows.groupby(["arm", "N", "arm_label"], sort=False):
            g = g.sort_values("budget")
            x, y = np.r_[0, g["budget"]], np.r_[0, g["mean"]]  # both arms start from the plateau: 0 at 0 samples
            colour, dash, marker, _ = _arm_style(arm, n, label, panel)
            who = f"{_name(arm, label, panel)} − ProRL, tuned" if panel == "tuned" else "BroRL − ProRL, rule's rates"
            ax.plot(x, y, color=colour, ls=dash, marker=marker, ms=3, lw=1.2, label=who)
            ax.fill_between(x, np.r_[0, g["ci_low"]], np.r_[0, g["ci_high"]], color=colour, alpha=0.15, lw=0)
        base = rows["base_label"].iloc[0]
        brorl = rows.loc[rows["arm"].str.contains("_lr"), "arm_label"]
        if panel == "tuned":
            rates = [
                f"{who} {words(lab).split(', ')[-1].removesuffix(' lr')}"
                for who, lab in (("ProRL", base), ("BroRL", brorl.iloc[0] if len(brorl) else ""))
                if "lr" in lab
            ]
            ax.set_title(f"At tuned rates\n({', '.join(rates) or 'tuned'})", loc="left")
        else:
            ax.set_title("At the rule's rates\n(1× each)", loc="left")
        _millions(ax)
        ax.set_xlabel("Phase-2 samples (millions)")
    axes[0][0].set_ylabel("Δ held-out pass@1")
    handles, labels = [], []
    for ax in axes[0]:
        h, lab = ax.get_legend_handles_labels()
        handles, labels = handles + h, labels + lab
    handles.append(mpl.patches.Patch(color=palette.RULE, alpha=0.4, lw=0))
    labels.append("95% interval, seeds and prompts")
    fig.legend(handles, labels, loc="outside upper center", ncols=2)
    return fig


def _forest_rows(diffs: pd.DataFrame) -> list[tuple[str, pd.Series | None]]:
    """(text, row) from the top: a heading (row None) per base, then its comparisons."""
    out = []
    groups = list(diffs.groupby("base", sort=False))
    for base, g in sorted(groups, key=lambda bg: bg[0] == ""):  # ProRL's own gain since the plateau last
        method = "ProRL" if str(g["base_label"].iloc[0]).startswith("ProRL") else "BroRL"
        out.append((f"minus {method}, tuned" if base else "since the plateau", None))
        out += [(_name(r.arm, r.arm_label, "tuned"), r) for r in g.itertuples()]
    return out


@rounded_inputs
def controls(diffs: pd.DataFrame) -> plt.Figure:
    """The comparisons at tuned rates at the last budget as a forest (rows of ``study_report.differences``): one row
    per comparison, grouped by what it is compared with, the mean difference of held-out pass@1 with its 95%
    interval over seeds and prompts, zero marked, the numbers written beside."""
    last = diffs[(diffs["rates"] == "tuned") & (diffs["budget"] == diffs["budget"].max())]
    rows = _forest_rows(last)
    fig, ax = _figure("full", 0.5 + 0.17 * len(rows), 3.3)
    ax.axvline(0, color=palette.INK, lw=0.8)
    ticks, texts = [], []
    for y, (text, r) in enumerate(reversed(rows)):
        ticks.append(y)
        texts.append(text)
        if r is None:
            continue
        colour, _, marker, _ = _arm_style(r.arm, r.N, r.arm_label, "tuned")
        ax.errorbar([r.mean], [y], xerr=[[r.mean - r.ci_low], [r.ci_high - r.mean]], color=colour, marker=marker,
                    ms=4, lw=0, elinewidth=1.2, capsize=2)  # fmt: skip
        seeds = "" if styles.active().name == "slides" else f", {r.seeds} seeds"
        ax.annotate(f"{r.mean:+.3f} [{r.ci_low:+.3f}, {r.ci_high:+.3f}]{seeds}", (1, y),
                    xycoords=("axes fraction", "data"), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=pt(6.5), color=palette.INK)  # fmt: skip
    ax.set_yticks(ticks, texts)
    for tick, (_, r) in zip(ax.get_yticklabels(), reversed(rows)):
        if r is None:
            tick.set_fontweight("bold")
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.grid(axis="y", visible=False)
    budget = int(last["budget"].max()) if len(last) else 0
    ax.set_xlabel(f"Δ held-out pass@1 at {budget:,} samples, tuned rates\n(95% interval, seeds and prompts)")
    return fig


def _arm_groups(table: pd.DataFrame, arms: dict[str, str] | None) -> dict[str, str]:
    """``arms`` (name -> group, ``study_report.figure_arms``) among the table's arms; without it, every arm: a
    control in group ``control``, the others ``tuned``."""
    present = list(dict.fromkeys(table["arm"]))
    if arms is not None:
        return {a: g for a, g in arms.items() if a in present}
    labels = dict(zip(table["arm"], table["label"]))
    return {a: "control" if any(k in labels[a] for k in CONTROL_LABELS) else "tuned" for a in present}


def _panels(groups: dict[str, str], base: str | None, most: int = 5) -> list[tuple[str, list[str]]]:
    """(title, arms) per panel: each group's arms but ``base``, at most ``most`` a panel."""
    out = []
    for group, title in GROUP_TITLES.items():
        members = [a for a, g in groups.items() if g == group and a != base]
        for k in range(0, len(members), most):
            out.append((title, members[k : k + most]))
    return out


def _band_rows(width: str, panels: list, draw, table: pd.DataFrame, ylabel: str) -> plt.Figure:
    """One row of panels per group of arms (``_panels``), the q bands along x, each row's legend at its right;
    ``draw(ax, x, width, rows, arm, group)`` draws one arm's rows, indexed by band."""
    labels = list(dict.fromkeys(table["q_band"]))
    n = len(panels)
    fig, axes = _figure(width, 0.55 + 1.05 * n, 3.45, nrows=max(1, n), sharex=True, squeeze=False)
    for ax, (title, arms, group) in zip(axes[:, 0], panels):
        ax.axhline(0, color=palette.INK, lw=0.7)
        width_each = 0.8 / max(1, len(arms))
        for k, arm in enumerate(arms):
            rows = table[table["arm"] == arm].set_index("q_band").reindex(labels)
            draw(ax, np.arange(len(labels)) + (k - (len(arms) - 1) / 2) * width_each, width_each, rows, arm, group)
        ax.set_title(title, loc="left")
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    counts = table.drop_duplicates("q_band").set_index("q_band").reindex(labels)["prompts"]
    dash = "–" if styles.active().full_in > 6.5 else "–\n"  # a narrower text: each band's ends on lines of their own
    ticks = [f"{b.strip('[)]').replace(', ', dash)}\nn={int(c)}" for b, c in zip(labels, counts)]
    axes[-1, 0].set_xticks(np.arange(len(labels)), ticks)
    fig.supylabel(ylabel, fontsize=mpl.rcParams["axes.labelsize"])
    return fig


@rounded_inputs
def bands(table: pd.DataFrame, arms: dict[str, str] | None = None) -> plt.Figure:
    """Each arm minus the tuned ProRL per held-out q band at the last budget (rows of ``study_report.bands``, which
    compared them with it), 95% interval across seeds; one row of panels per group of ``arms`` (name -> group,
    ``study_report.figure_arms``; default every arm with a difference), at most five arms a panel."""
    table = table.dropna(subset=["delta_vs_prorl"])
    groups = _arm_groups(table, arms)
    group_of = {a: g for a, g in groups.items()}

    def draw(ax, x, width, g, arm, group):
        err = [g["delta_vs_prorl"] - g["ci_low"], g["ci_high"] - g["delta_vs_prorl"]]
        label = g["label"].dropna().iloc[0]
        colour, _, marker, _ = _arm_style(arm, g["N"].dropna().iloc[0], label, group_of[arm])
        ax.errorbar(x, g["delta_vs_prorl"], yerr=err, color=colour, marker=marker, ms=3.5, lw=0, elinewidth=1,
                    capsize=2, label=_name(arm, label, group_of[arm]))  # fmt: skip

    panels = [(t, a, groups[a[0]]) for t, a in _panels(groups, None)]
    fig = _band_rows("full", panels, draw, table, "Arm − tuned ProRL")
    fig.supxlabel("Held-out pass@1 before the plateau (band, prompts)", fontsize=mpl.rcParams["axes.labelsize"])
    return fig


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
            label=f"N={n}, {fraction(g['lr_factor'].iloc[0])} rate{', edge' if edge else ''}",
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
    axes[1].set_xlabel(
        "N (rollouts per prompt), at its best rate" if styles.active().full_in >= 6.5 else "N, at its best rate"
    )
    axes[0].set_ylabel("Held-out pass@1 (exact)" if styles.active().full_in >= 6.5 else "Held-out pass@1")
    wide = styles.active().full_in >= 6.5
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=pt(6), loc="outside upper left", ncols=3 if wide else 2)
    fig.legend(*axes[1].get_legend_handles_labels(), fontsize=pt(6), loc="outside upper right", ncols=2)
    return fig


def _base_of(table: pd.DataFrame, groups: dict[str, str], delta: str | None = None) -> str | None:
    """The arm the others are compared with: the first tuned (else rule) arm with no ``delta`` (with ``delta``
    None: the first tuned, else rule, arm)."""
    for group in ("tuned", "rule"):
        for arm, g in groups.items():
            if g == group and (delta is None or table.loc[table["arm"] == arm, delta].isna().all()):
                return arm
    return None


@rounded_inputs
def prompt_fate(table: pd.DataFrame, arms: dict[str, str] | None = None) -> plt.Figure:
    """Change of each training prompt's exact q over phase 2, by its q at the plateau (mean over seeds, one
    standard error): one row of panels per group of ``arms`` (name -> group, ``study_report.figure_arms``;
    default every arm), at most four arms a panel beside the tuned ProRL, the first bar of every panel."""
    groups = _arm_groups(table, arms)
    base = _base_of(table, groups)

    def draw(ax, x, width, g, arm, group):
        label = g["label"].dropna().iloc[0]
        n = 16 if arm.startswith("N16") else 512
        colour, _, _, hatch = _arm_style(arm, n, label, groups.get(arm))
        words_of = _name(arm, label, groups.get(arm))
        ax.bar(x, g["delta_q"], width, yerr=g["delta_q_se"], color=colour, hatch=hatch, edgecolor="white", lw=0,
               error_kw={"elinewidth": 0.8, "capsize": 1.5}, label=words_of)  # fmt: skip

    panels = [(t, ([base] if base else []) + a, groups[a[0]]) for t, a in _panels(groups, base, most=4)]
    fig = _band_rows("full", panels, draw, table, "Δ q over phase 2")
    fig.supxlabel("Exact q at the plateau (band, training prompts)", fontsize=mpl.rcParams["axes.labelsize"])
    return fig


@rounded_inputs
def phase1(curve: pd.DataFrame, window_steps: tuple[int, int, int] | None = None) -> plt.Figure:
    """Phase 1 of each candidate: exact held-out pass@1 with a 95% band over prompts and a centred moving mean;
    the chosen candidate in full colour, the others pale. ``window_steps`` (first, middle, last step of the two
    windows the plateau rule compared) shades the earlier and the later window."""
    fig, ax = new_figure("column", aspect=0.95)
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
            g["step"],
            g["smoothed"],
            color=colour,
            lw=1.4,
            label=_candidate_words(key) + (" (chosen)" if g["chosen"].iloc[0] else ""),
        )
    ax.set_xlabel("Phase-1 step (step 0: warm start)")
    ax.set_ylabel("Held-out pass@1 (exact)")
    fig.legend(fontsize=pt(6), loc="outside upper left")
    return fig


@rounded_inputs
def drift(curves: pd.DataFrame, arms: dict[str, str] | None = None) -> plt.Figure:
    """Left: the KL to the plateau policy (nats a token, log scale from ``KL_FLOOR``: a bin below it is marked at
    the floor, hollow); right: the entropy per response token; each against generated samples, per arm
    (``study_report.drift_curves``). One row per group of ``arms`` (name -> group, ``study_report.figure_arms``):
    the verdict's arms at the rule's and tuned rates, then the controls beside the tuned ProRL."""
    groups = _arm_groups(curves, arms)
    base = _base_of(curves, groups)
    rows = [[a for a, g in groups.items() if g in ("rule", "tuned")]]
    rows.append(([base] if base else []) + [a for a, g in groups.items() if g == "control"])
    rows = [r for r in rows if len(r) > (1 if base in r else 0)] or [list(groups)]
    fig, axes = _figure("full", 0.5 + 1.6 * len(rows), 3.45, nrows=len(rows), ncols=2, sharex=True, squeeze=False)
    for r in range(1, len(rows)):
        axes[r][0].sharey(axes[0][0])  # one KL scale for every row
    top = max(1.5 * curves["kl_ref"].max(), 10 * KL_FLOOR) if len(curves) else 1.0
    below = False
    for r, members in enumerate(rows):
        for arm in members:
            g = curves[curves["arm"] == arm]
            label, n = g["label"].iloc[0], int(g["N"].iloc[0])
            colour, ls, marker, _ = _arm_style(arm, n, label, groups.get(arm))
            words_of = _name(arm, label, groups.get(arm))
            kl = g["kl_ref"].clip(lower=KL_FLOOR)
            axes[r][0].plot(g["samples"], kl, color=colour, ls=ls, lw=1)
            low = g["kl_ref"] < KL_FLOOR
            axes[r][0].plot(g["samples"][~low], kl[~low], color=colour, ls="none", marker=marker, ms=2.5)
            axes[r][0].plot(g["samples"][low], kl[low], color=colour, ls="none", marker=marker, ms=3.5, mfc="white")
            below |= bool(low.any())
            axes[r][1].plot(g["samples"], g["entropy"], color=colour, ls=ls, marker=marker, ms=2.5, lw=1,
                            label=words_of)  # fmt: skip
        axes[r][0].set_yscale("log")
        axes[r][0].set_ylim(KL_FLOOR / 1.3, top)
        axes[r][0].set_ylabel("KL to plateau, kept\nbatch (nats/token)")
        axes[r][1].set_ylabel("Entropy\n(nats/token)")
        axes[r][1].legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    if below:
        axes[0][0].set_title(f"hollow: below {KL_FLOOR:g}, drawn at it", loc="left", fontsize=pt(6.5))
    for ax in axes[-1]:
        _millions(ax)
    fig.supxlabel("Generated samples in phase 2 (millions)", fontsize=mpl.rcParams["axes.labelsize"])
    return fig
