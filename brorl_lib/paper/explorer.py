"""Notebook 03's explore section: the reported tables by benchmark and metric, and Table 2's two models.

The roofline's inputs and the pass-rate curves' range are ``PaperTablesConfig``'s declared parameters
(``explore.controls``); the pass rates the Beta model is fitted to start at Table 2's and are fractions in (0, 1).
"""

from __future__ import annotations

import ipywidgets as w
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from brorl_lib.explore.controls import ConfigControls
from brorl_lib.explore.interact import Explorer, Explorers
from brorl_lib.facts import reported as paper
from brorl_lib.figures import palette
from brorl_lib.figures.plotting import new_figure, pt
from brorl_lib.paper import dynamic_sampling as ds
from brorl_lib.paper import plots as paper_plots
from brorl_lib.paper import report as pr

SCORE_TABLES = ("table1_efficiency", "table3_math", "table4_code", "table5_reasoning_gym")


def metric_options() -> list[tuple[str, tuple[str, str]]]:
    """(label, (table, column)) for every reported score column of Tables 1 and 3-5."""
    out = []
    for name in SCORE_TABLES:
        table = paper.load(name)
        for col in table.columns:
            if col in paper.ID_COLUMNS or col in ("samples_k", "time_h"):
                continue
            out.append((f"{name.split('_', 1)[0].title()}: {pr.HEADERS.get(col, col)}", (name, col)))
    return out


def reported_bars(table_name: str, column: str) -> plt.Figure:
    """One reported column of a table as bars per row (method and steps), coloured by arm."""
    table = paper.load(table_name)
    labels = [f"{m} {s}" for m, s in zip(table["method"], table["steps"].astype(str))]
    colours = [palette.ARMS.get(m, palette.GREY) for m in table["method"]]
    fig, ax = new_figure("column", aspect=0.8)
    y = np.arange(len(table))[::-1]
    ax.barh(y, table[column], color=colours)
    ax.set_yticks(y, labels)
    lo, hi = float(table[column].min()), float(table[column].max())
    pad = max(0.5, 0.15 * (hi - lo))
    ax.set_xlim(max(0.0, lo - pad), hi + pad)
    for yi, v in zip(y, table[column]):
        ax.text(v, yi, f" {v:.2f}", va="center", fontsize=pt(6))
    ax.set_xlabel(pr.HEADERS.get(column, column))
    ax.set_title(f"{table_name}: {pr.HEADERS.get(column, column)} (reported)", loc="left")
    return fig


def tables_explorer() -> Explorer:
    options = metric_options()
    pick = w.Dropdown(options=options, value=options[0][1], description="table and metric")
    return Explorer(
        lambda params: reported_bars(params["table"], params["column"]),
        {"metric": pick},
        read=lambda values: {"table": values["metric"][0], "column": values["metric"][1]},
        name="paper_table_view",
        provenance="reported",
        caption="A reported column of the paper's tables",
    )


def model_curves(rates: dict[int, float], degenerate: float, max_rollouts: int) -> tuple[pd.DataFrame, dict]:
    """The Beta model (with a share of prompts always solved or always failed) fitted to ``rates``, against N."""
    a, b, miss = ds.fit_beta(rates, degenerate)
    ns = pr.ROLLOUT_GRID[(pr.ROLLOUT_GRID <= max_rollouts) & (pr.ROLLOUT_GRID > 1)]
    rate = ds.expected_pass_rate(a, b, ns, degenerate)
    curves = pd.DataFrame(
        {"model": "Beta fit", "N": ns, "pass_rate": rate, "wasted_per_kept": ds.wasted_per_kept(rate)}
    )
    return curves, {"a": a, "b": b, "worst_miss": miss}


def pass_rate_explorer(cfg: pr.PaperTablesConfig) -> Explorer:
    """The pass-rate model's inputs: the pass rates it is fitted to, the degenerate share, the N range."""
    rates = paper.table2_pass_rates()
    sliders = {
        f"pass_rate_{n}": w.FloatSlider(
            value=rate, min=0.01, max=0.99, step=0.01, description=f"pass rate at N={n}", continuous_update=False
        )
        for n, rate in rates.items()
    }
    sliders["degenerate_share"] = w.FloatSlider(
        value=0.0, min=0.0, max=0.49, step=0.01, description="degenerate share", continuous_update=False
    )
    controls = ConfigControls(cfg, {"max_rollouts": {"options": (64, 256, 1024, 4096, 16384, 65536)}}, sliders)

    def draw(params: dict) -> plt.Figure:
        fitted = {n: params[f"pass_rate_{n}"] for n in rates}
        curves, fit = model_curves(fitted, params["degenerate_share"], params["max_rollouts"])
        fig = paper_plots.pass_rate(curves, fitted)
        fig.suptitle(
            f"Beta(a = {fit['a']:.3g}, b = {fit['b']:.3g}), degenerate share {params['degenerate_share']:.2f}; "
            f"worst miss {100 * fit['worst_miss']:.2f} points",
            fontsize=pt(8),
        )
        return fig

    return Explorer(draw, controls.all, read=controls.read, name="table2_pass_rate_view", provenance="estimate",
                    basis=pr.PASS_RATE_BASIS,
                    caption="Dynamic-sampling pass-rate model fitted to the pass rates shown")  # fmt: skip


def roofline_explorer(cfg: pr.PaperTablesConfig) -> Explorer:
    controls = ConfigControls(
        cfg,
        {
            "prompt_len": {"low": 0, "high": 32768, "step": 256},
            "response_len": {"options": tuple(int(r) for r in pr.RESPONSE_GRID)},
            "gpus": {"low": 8, "high": 512, "step": 8},
            "peak_tflops": {"low": 100.0, "high": 5000.0, "log": True},
            "bandwidth_tbs": {"low": 0.5, "high": 20.0, "log": True},
            "memory_gb": {"low": 16.0, "high": 288.0, "step": 8.0},
            "memory_utilization": {"low": 0.1, "high": 1.0, "step": 0.05},
        },
    )

    def draw(params: dict) -> plt.Figure:
        c = params["_config"]
        table, points = pr.throughput_table(c), pr.roofline_points(c)
        hw = c.hardware()
        return paper_plots.roofline_plot(
            points, table, hw.peak_flops, hw.bandwidth, paper.table2_throughput_ratio(), c.response_len
        )

    return Explorer(draw, controls.all, read=controls.read, name="table2_roofline_view", provenance="estimate",
                    basis=pr.THROUGHPUT_BASIS,
                    caption="Roofline of decoding for both arms at the hardware shown")  # fmt: skip


def explore(cfg: pr.PaperTablesConfig) -> Explorers:
    return Explorers(
        {
            "reported tables": tables_explorer(),
            "pass-rate model": pass_rate_explorer(cfg),
            "throughput roofline": roofline_explorer(cfg),
        }
    )
