"""Notebook 02's explore section: the simulator at a small vocabulary to start, drawn on its Draw button.

The controls (N, learning rate, vocabulary and correct-set size, steps, seed) come from ``SimulatorConfig``'s
declarations. Every setting waits for the Draw button (about 1 s on 2 cores at the start; up to the paper's
128,000 tokens, with a progress bar; the kernel's interrupt stops a run).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from brorl_lib.explore.controls import ConfigControls
from brorl_lib.explore.interact import Explorer, Explorers
from brorl_lib.facts import setup as paper_setup
from brorl_lib.figures.plotting import pt
from brorl_lib.simulator import plots as simulator_plots
from brorl_lib.simulator import report as sr
from brorl_lib.simulator.runner import simulate

# The explorer's start: a 100x smaller vocabulary and correct set (the paper's share of correct tokens).
SCALES = (1000, 100, 10, 1)  # vocabulary and correct set offered: the paper's divided by these
VOCAB_OPTIONS = tuple(paper_setup.SIM_VOCAB_SIZE // s for s in SCALES)
CORRECT_OPTIONS = tuple(paper_setup.SIM_N_CORRECT // s for s in SCALES)
START = {
    "vocab_size": paper_setup.SIM_VOCAB_SIZE // 100,
    "n_correct": paper_setup.SIM_N_CORRECT // 100,
    "steps": 200,
    "rollouts": [4, 16, 512],
    "seeds": [0],
}
ROLLOUT_OPTIONS = tuple(sorted({2, 4, 8, 16, 64, 512, 4096, *paper_setup.SIM_ROLLOUT_SIZES}))
STEP_OPTIONS = (50, 100, 200, 500, 1000, 2000)


def start_config(cfg: sr.SimulatorConfig) -> sr.SimulatorConfig:
    """The notebook's configuration at the explorer's small start (checked like any other)."""
    return sr.SimulatorConfig(**{**cfg.as_dict(), **START})


def draw_figure3(cfg: sr.SimulatorConfig) -> plt.Figure:
    """Figure 3 for ``cfg``'s rollouts and seeds, with tqdm's progress bar over the steps."""
    runs = simulate(cfg.settings(), cfg.rollouts, cfg.seeds)
    fig = simulator_plots.figure3(runs)
    fig.suptitle(f"V = {cfg.vocab_size:,}, {cfg.n_correct:,} correct, lr {cfg.lr:g}, {cfg.steps} steps", fontsize=pt(8))
    return fig


def figure3_explorer(cfg: sr.SimulatorConfig) -> Explorer:
    """Figure 3 at a small vocabulary to start, drawn when Draw is pressed."""
    base = start_config(cfg)
    controls = ConfigControls(
        base,
        {
            "rollouts": {"options": ROLLOUT_OPTIONS, "description": "N"},
            "lr": {"low": 1e-5, "high": 1e-1, "log": True},
            "vocab_size": {"options": VOCAB_OPTIONS},
            "n_correct": {"options": CORRECT_OPTIONS},
            "steps": {"options": STEP_OPTIONS},
            "seeds": {},
        },
    )
    return Explorer(
        lambda params: draw_figure3(params["_config"]),
        controls.all,
        read=controls.read,
        name="fig3_simulator_view",
        provenance=lambda params: params["_config"].provenance(),
        caption="Figure 3 of the simulator at the settings shown",
        manual=True,
    )


def explore(cfg: sr.SimulatorConfig) -> Explorers:
    return Explorers({"Figure 3": figure3_explorer(cfg)})
