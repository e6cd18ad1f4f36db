"""Notebook 01's explore section: Theorem 1's three terms, and the sign map of ΔQ_pos over S_R and N.

The rewards, the Figure 2 batch and N come from ``TheoryConfig``'s declarations (``explore.controls``); the
batch statistics of the terms explorer are free variables of the theorem, bounded by their definitions.
"""

from __future__ import annotations

import ipywidgets as w
import matplotlib.pyplot as plt

from brorl_lib.explore.controls import ConfigControls, powers_of_two
from brorl_lib.explore.interact import Explorer, Explorers
from brorl_lib.facts import theorem as theory
from brorl_lib.figures import palette
from brorl_lib.figures.plotting import new_figure
from brorl_lib.theory import plots as theory_plots
from brorl_lib.theory import report as tr

PROVENANCE = "reproduced"  # recomputed from the theory, as every artifact of notebook 01


def plot_terms(terms: dict[str, float], title: str = "") -> plt.Figure:
    """Horizontal bars of the three terms and their sum."""
    names = [*terms, "delta_q_pos"]
    values = [*terms.values(), sum(terms.values())]
    fig, ax = new_figure("column")
    ax.barh(names[::-1], values[::-1], color=[palette.GOOD if v >= 0 else palette.BAD for v in values[::-1]])
    ax.axvline(0, color=palette.INK, lw=0.6)
    ax.set_xlabel(r"contribution to $\Delta Q_{pos}$ ($\eta = 1$)")
    ax.set_title(title, loc="left")
    return fig


def _moment(description: str) -> w.FloatLogSlider:
    """A second moment of a probability vector: in (0, 1]; sliders from 1e-8."""
    return w.FloatLogSlider(value=1e-3, base=10, min=-8, max=0, step=0.1, readout_format=".1e", description=description)


def terms_explorer(cfg: tr.TheoryConfig) -> Explorer:
    """Theorem 1's terms from free statistics: N, S_R, Q_pos and the four second moments; rewards as declared."""
    controls = ConfigControls(
        cfg,
        {"r_correct": {"low": 0.0, "high": 5.0}, "r_wrong": {"low": -5.0, "high": 0.0}},
        extra={
            "n": w.SelectionSlider(
                options=powers_of_two(cfg.parameter("example_n_rollouts")), value=16, description="N"
            ),
            "s_r": w.FloatSlider(value=0.2, min=-1.0, max=1.0, step=0.01, description="S_R"),
            "q_pos": w.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.01, description="Q_pos"),
            "a2": _moment("A_2"),
            "b2": _moment("B_2"),
            "u_pos2": _moment("U_pos,2"),
            "u_neg2": _moment("U_neg,2"),
        },
    )

    def read(values: dict) -> dict:
        params = controls.read(values)
        cfg_now = params["_config"]
        if not cfg_now.r_wrong <= params["s_r"] <= cfg_now.r_correct:
            raise ValueError(
                f"s_r={params['s_r']!r} is not allowed: S_R = R_c P_pos + R_w P_neg lies in "
                f"[r_wrong, r_correct] = [{cfg_now.r_wrong}, {cfg_now.r_correct}]"
            )
        return params

    def draw(params: dict) -> plt.Figure:
        c = params["_config"]
        terms = theory.terms_from_stats(
            params["q_pos"],
            params["a2"],
            params["b2"],
            params["u_pos2"],
            params["u_neg2"],
            params["s_r"],
            c.r_correct,
            c.r_wrong,
            eta=1.0,
            n=params["n"],
        )
        return plot_terms({k: float(v) for k, v in terms.items()}, f"N = {params['n']}")

    return Explorer(
        draw,
        controls.all,
        read=read,
        name="theory_terms_view",
        provenance=PROVENANCE,
        caption="Theorem 1's three terms from free batch statistics",
    )


def sign_map_explorer(cfg: tr.TheoryConfig) -> Explorer:
    """The sign map of ΔQ_pos over S_R and the unsampled split, for the Figure 2 batch at a chosen N."""
    n_param = cfg.parameter("example_n_rollouts")
    controls = ConfigControls(
        cfg,
        {
            "example_n_rollouts": {"options": powers_of_two(n_param, high=4096), "description": "N"},
            "example_vocab_size": {},
            "example_n_correct": {},
            "r_correct": {"low": 0.0, "high": 5.0},
            "r_wrong": {"low": -5.0, "high": 0.0},
            "seed": {"low": 0, "high": 100},
        },
    )

    def draw(params: dict) -> plt.Figure:
        c = params["_config"]
        batch, _ = tr.example_batch(c)
        grid, points = tr.sign_map(c, batch, rollouts=(c.example_n_rollouts,))
        return theory_plots.sign_map(grid, points)

    return Explorer(
        draw,
        controls.all,
        read=controls.read,
        name="theory_sign_map_view",
        provenance=PROVENANCE,
        caption="Sign map of Delta Q_pos over the batch mood at N",
    )


def explore(cfg: tr.TheoryConfig) -> Explorers:
    """Both explorers, one tab each."""
    return Explorers({"three terms": terms_explorer(cfg), "sign map": sign_map_explorer(cfg)})
