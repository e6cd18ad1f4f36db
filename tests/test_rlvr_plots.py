"""Notebook 04's phase-2 figures: which arms they draw, compared with what, and how each reads (few series a
panel, every legend entry distinct, words instead of arm codes, a slide's height)."""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from brorl_lib.figures import plotting, styles
from brorl_lib.rlvr import study_phase2 as p2
from brorl_lib.rlvr import study_plots as sp
from brorl_lib.rlvr import study_report as sr
from brorl_lib.rlvr import update_quality as uq

TUNED = {16: 0.5, 512: 0.0078125}
SLIDE_HEIGHT_IN = 3.54  # a 16:9 beamer frame


def _phase2() -> p2.Phase2Settings:
    return p2.Phase2Settings(prompts=64, base_lr=1e-4, budgets=(65536, 131072), seeds=(0, 1, 2), iso_samples=4096,
                             iso_rollouts=(8, 16), iso_lr_factors=(0.5, 1.0, 2.0), iso_seeds=3, control_seeds=3,
                             kl_coefs=(0.1, 1.0), broad_prompts=128)  # fmt: skip


def _arms(p: p2.Phase2Settings) -> list:
    """Every arm the figures may meet: the verdict's, the tuning grid's and the controls."""
    grid = [p2.verdict_arm(p, n, f) for n in (16, 512) for f in (0.25, 0.5, 1.0, 0.0078125, 0.015625)]
    return [*grid, p2.prompts_arm(p, TUNED[512]), *p2.control_arms(p, TUNED[16], TUNED[512])]


def _tables():
    """A verdict, band, fate and drift table at the paper profile's shapes, from the arms' own names and labels."""
    p = _phase2()
    arms = {a.name: a for a in _arms(p)}
    table = pd.DataFrame([{"arm": a.name, "label": a.label, "N": a.n_rollouts} for a in arms.values()])
    rng = np.random.default_rng(0)
    rows = []
    for b in p.budgets:
        for rates, arm, base in sr.comparisons(p, TUNED):
            m = -0.45 if rates == "rule" and base else rng.normal(0, 0.01)
            rows.append({"budget": b, "rates": rates, "comparison": f"{arm} - {base or 'plateau'}", "mean": m,
                         "ci_low": m - 0.01, "ci_high": m + 0.01, "seeds": 6, "ci_low_seeds_prompts": m - 0.02,
                         "ci_high_seeds_prompts": m + 0.02})  # fmt: skip
    verdict = pd.DataFrame(rows)
    labels = uq.band_labels([0.0, 0.01, 0.0625, 0.5, 0.95, 1.0])
    base = sr.prorl_base(sr.figure_arms(p, TUNED))
    band_rows, fate_rows, drift_rows = [], [], []
    for name, a in arms.items():
        for k, band in enumerate(labels):
            d = {} if name == base else {"delta_vs_prorl": 0.01 * k, "ci_low": 0.01 * k - 0.02, "ci_high": 0.01 * k}
            band_rows.append({"q_band": band, "prompts": 10 * (k + 1), "arm": name, "label": a.label,
                              "N": a.n_rollouts, "seeds": 3, "change": 0.01} | d)  # fmt: skip
            fate_rows.append({"arm": name, "label": a.label, "q_band": band, "prompts": 10, "delta_q": 0.1 * k - 0.2,
                              "delta_q_se": 0.01})  # fmt: skip
        for s in np.linspace(65536, 1048576, 16):
            drift_rows.append({"arm": name, "label": a.label, "N": a.n_rollouts, "samples": s, "entropy": 0.04,
                               "kl_ref": 1e-11 if s < 1e5 else s / 1e7, "seeds": 3})  # fmt: skip
    return p, table, verdict, pd.DataFrame(band_rows), pd.DataFrame(fate_rows), pd.DataFrame(drift_rows)


def test_multiples_read_as_fractions_and_labels_carry_no_arm_code():
    assert [sp.fraction(f) for f in (0.0078125, 0.5, 2, 1, 0.3)] == ["1/128×", "1/2×", "2×", "1×", "0.3×"]
    assert sp.words("BroRL N=512, 0.00390625x lr") == "BroRL N=512, 1/256× lr"
    assert sp.words("N=16 x 512 prompts (batch control)") == "N=16 × 512 prompts (batch control)"


def test_the_figures_compare_with_the_tuned_prorl_once_the_rates_are_tuned():
    p = _phase2()
    assert sr.figure_arms(p, {}) == {"N16": "rule", "N512": "rule"} and sr.prorl_base(sr.figure_arms(p, {})) == "N16"
    arms = sr.figure_arms(p, TUNED)
    assert sr.prorl_base(arms) == "N16_lr0.5x"
    assert [a for a, g in arms.items() if g == "tuned"] == ["N16_lr0.5x", "N512_lr0.0078125x", "N512_prompts128"]
    assert {a for a, g in arms.items() if g == "control"} == {
        "N16_batch512",
        "N512_prompts64",
        "N512_kl0.1",
        "N512_kl1",
    }
    assert not any("_lr0.25x" in a for a in arms)  # the rest of the tuning grid is the tuning table's
    _, table, verdict, *_ = _tables()
    d = sr.differences(verdict, table, p, TUNED)
    fig1 = d[d["figure1"] != ""].drop_duplicates("comparison").set_index("comparison")["figure1"]
    assert fig1.to_dict() == {"N512 - N16": "rule", "N512_lr0.0078125x - N16_lr0.5x": "tuned",
                              "N512_prompts128 - N16_lr0.5x": "tuned"}  # fmt: skip
    plateau = d[d["comparison"] == "N16_lr0.5x - plateau"].iloc[0]
    assert plateau["base"] == "" and plateau["ci_low"] == pytest.approx(plateau["mean"] - 0.02)  # seeds and prompts


def _key(handle) -> tuple:
    """What tells a legend entry apart: colour, dash and marker of a line, colour and hatch of a patch."""
    if isinstance(handle, mpl.container.ErrorbarContainer):
        handle = handle.lines[0]
    if isinstance(handle, mpl.container.BarContainer):
        handle = handle.patches[0]
    if isinstance(handle, mpl.patches.Patch):
        return ("patch", mpl.colors.to_hex(handle.get_facecolor()), handle.get_hatch())
    return ("line", mpl.colors.to_hex(handle.get_color()), str(handle.get_linestyle()), handle.get_marker())


def _legends(fig) -> list[tuple[object, list]]:
    """(legend, the artists its entries stand for) of every legend of ``fig``."""
    out = [(ax.get_legend(), ax.get_legend_handles_labels()[0]) for ax in fig.axes if ax.get_legend()]
    return out + [(legend, legend.legend_handles) for legend in fig.legends]


@pytest.mark.parametrize("preset", ["paper", "slides"])
def test_each_phase2_figure_reads_at_a_glance(preset):
    p, table, verdict, bands, fate, drift = _tables()
    arms = sr.figure_arms(p, TUNED)
    diffs = sr.differences(verdict, table, p, TUNED)
    with styles.using(styles.PRESETS[preset]):
        figures = {
            "figure1": sp.figure1(diffs),
            "controls": sp.controls(diffs),
            "bands": sp.bands(bands, arms),
            "prompt_fate": sp.prompt_fate(fate, arms),
            "drift": sp.drift(drift, arms),
        }
    for name, fig in figures.items():
        legends = _legends(fig)
        for legend, handles in legends:
            keys = [_key(h) for h in handles]
            assert len(keys) == len(set(keys)), f"{name}: two legend entries alike"
            assert len(keys) <= 6, f"{name}: {len(keys)} series in one legend"
            assert min(t.get_fontsize() for t in legend.get_texts()) >= 6, name
        texts = [t.get_text() for ax in fig.axes for t in [*ax.get_yticklabels(), ax.title, ax.yaxis.label]]
        texts += [t.get_text() for legend, _ in legends for t in legend.get_texts()]
        assert not [t for t in texts if "_lr" in t or "0.0078125" in t or "0.5x" in t], name
        if preset == "slides" and not hasattr(plotting, "MIN_PANEL_HEIGHT_EM"):  # new_figure grew low rows before
            assert fig.get_size_inches()[1] <= SLIDE_HEIGHT_IN, name
        plt.close(fig)
    kl = figures["drift"].axes[0]
    assert kl.get_ylim()[0] >= sp.KL_FLOOR / 2  # not 11 decades for a near-zero estimate
