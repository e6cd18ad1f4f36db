"""Notebook 04's regime-set figure: each arm's learning-rate screen on the regime validation part, and exact q on the
regime test part against generated samples at the picks (``rlvr.regime_report``)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from brorl_lib.core.precision import rounded_inputs
from brorl_lib.figures import palette
from brorl_lib.rlvr.study_plots import _figure, _millions


@rounded_inputs
def regime(screen: pd.DataFrame, curves: pd.DataFrame, plateau_val_q: float) -> plt.Figure:
    """Left: mean exact validation q (T=1) at the end of each screen run against its learning rate, per arm, with
    one standard error over prompts; the pick ringed, the plateau's value dotted. Right: exact test q (T=1) at
    the picks against generated samples, mean over seeds with the 95% interval over seeds and prompts; its legend
    names both panels' colours."""
    fig, (left, right) = _figure("full", 2.1, 2.4, ncols=2)
    left.axhline(plateau_val_q, color=palette.INK, lw=0.8, ls=":")
    for n, g in screen.dropna(subset=["val_q"]).groupby("N", sort=False):
        colour = palette.n_colour(int(n))
        left.errorbar(g["lr"], g["val_q"], yerr=g["val_q_se"], color=colour, marker="o", ms=3, lw=1, capsize=2)
        pick = g[g["pick"]]
        left.plot(pick["lr"], pick["val_q"], ls="none", marker="o", ms=8, mfc="none", mec=colour, mew=1.2)
    left.set_xscale("log")
    left.set_xlabel("AdamW learning rate")
    left.set_ylabel("Validation q, exact (T=1)")
    left.set_title("Rate screen\n(ringed: pick; dotted: plateau)", loc="left")
    for (arm, n), g in curves.groupby(["arm", "N"], sort=False):
        colour = palette.n_colour(int(n))
        right.plot(
            g["samples"], g["q"], color=colour, marker="o", ms=3, lw=1.2, label=f"{arm} (n={g['seeds'].iloc[0]})"
        )
        right.fill_between(g["samples"], g["ci_low"], g["ci_high"], color=colour, alpha=0.15, lw=0)
    right.set_ylim(bottom=0)
    _millions(right)
    right.set_xlabel("Generated samples (millions)")
    right.set_ylabel("Test q, exact (T=1)")
    right.set_title("At the picks\n(equal generated samples)", loc="left")
    right.legend(loc="lower right")
    return fig
