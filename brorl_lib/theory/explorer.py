"""Slider explorer of Theorem 1's three terms (ipywidgets; optional)."""

from __future__ import annotations

import matplotlib.pyplot as plt

from brorl_lib.core.plotting import PALETTE, new_figure
from brorl_lib.theory import formulas as theory


def plot_terms(terms: dict[str, float], title: str = "") -> plt.Figure:
    """Horizontal bars of the three terms and their sum."""
    names = [*terms, "delta_q_pos"]
    values = [*terms.values(), sum(terms.values())]
    fig, ax = new_figure("column")
    ax.barh(names[::-1], values[::-1], color=[PALETTE[2] if v >= 0 else PALETTE[3] for v in values[::-1]])
    ax.axvline(0, color="0.2", lw=0.6)
    ax.set_xlabel(r"contribution to $\Delta Q_{pos}$ ($\eta = 1$)")
    ax.set_title(title, loc="left")
    return fig


def three_terms_explorer(r_c: float = 1.0, r_w: float = -1.0):
    """Sliders for N, S_R, Q_pos and the second moments; returns the widget, or None without ipywidgets."""
    theory.check_rewards(r_c, r_w)
    try:
        import ipywidgets as w
    except ImportError:
        return None

    def show(log2_n: int, s_r: float, q_pos: float, a2: float, b2: float, u_pos2: float, u_neg2: float) -> None:
        n = 2**log2_n
        terms = theory.terms_from_stats(q_pos, a2, b2, u_pos2, u_neg2, s_r, r_c, r_w, eta=1.0, n=n)
        plot_terms({k: float(v) for k, v in terms.items()}, f"N = {n}")
        plt.show()

    moment = dict(value=1e-3, base=10, min=-8, max=0, step=0.1, readout_format=".1e")
    return w.interactive(
        show,
        log2_n=w.IntSlider(value=4, min=0, max=16, description="log2 N"),
        s_r=w.FloatSlider(value=0.2, min=r_w, max=r_c, step=0.01, description="S_R"),
        q_pos=w.FloatSlider(value=0.5, min=0.0, max=1.0, step=0.01, description="Q_pos"),
        a2=w.FloatLogSlider(description="A_2", **moment),
        b2=w.FloatLogSlider(description="B_2", **moment),
        u_pos2=w.FloatLogSlider(description="U_pos,2", **moment),
        u_neg2=w.FloatLogSlider(description="U_neg,2", **moment),
    )
