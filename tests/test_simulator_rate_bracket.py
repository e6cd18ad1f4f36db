"""Each N at its own learning rate (notebook 02, a variant): the budgets, the runs it keeps, the pick rule, the
paired differences, and the committed runs read back only with the settings that made them."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from brorl_lib.facts import setup as paper_setup
from brorl_lib.simulator import rate_bracket as rb
from brorl_lib.simulator.engine import SimSettings
from brorl_lib.simulator.runner import simulate

SMALL = SimSettings(vocab_size=1280, n_correct=100, steps=40)


def test_equal_samples_spends_n512s_samples_and_each_run_is_planned_once():
    budget = rb.SAMPLE_BUDGET_N * paper_setup.SIM_STEPS
    for n in rb.rollouts(rb.EQUAL_SAMPLES):
        assert rb.steps_for(rb.EQUAL_SAMPLES, n) * n == budget
        assert rb.steps_for(rb.EQUAL_STEPS, n) == paper_setup.SIM_STEPS
    assert min(rb.rollouts(rb.EQUAL_SAMPLES)) == rb.EQUAL_SAMPLES_FROM_N
    plan = rb.plan()
    assert len(plan) == len(set(plan))
    assert (rb.EQUAL_SAMPLES, rb.SAMPLE_BUDGET_N, rb.RATES[0]) not in plan  # the same runs as at equal steps
    assert len({p[2] for p in plan}) == len(rb.RATES) and paper_setup.SIM_LEARNING_RATE in rb.RATES
    with pytest.raises(ValueError, match="condition='equal time' is not allowed"):
        rb.steps_for("equal time", 16)


def test_a_part_keeps_the_simulators_own_numbers_at_its_kept_steps():
    part = rb.run_part(rb.EQUAL_SAMPLES, 16, 0.1, seeds=(0, 1), base=SMALL)
    steps = rb.steps_for(rb.EQUAL_SAMPLES, 16, SMALL.steps)
    assert part["step"].max() == steps and part["step"].min() == 0
    assert len(part) == 2 * len(rb.kept_steps(steps)) and (part["samples"] == part["step"] * 16).all()
    full = simulate(SimSettings(vocab_size=1280, n_correct=100, steps=steps, lr=0.1), [16], [0, 1], progress=False)
    full = full[full["step"].isin(rb.kept_steps(steps))].reset_index(drop=True)
    pd.testing.assert_series_equal(part["correct_mass"], full["correct_mass"])


def _finals(means: dict[tuple[str, int], list[float]]) -> pd.DataFrame:
    rows = []
    for (condition, n), values in means.items():
        for lr, v in zip(rb.RATES, values):
            rows.append({"condition": condition, "N": n, "lr": lr, "correct_mass_mean": v, "correct_mass_std": 0.0,
                         "correct_mass_min": v, "correct_mass_max": v, "seeds": 2, "incorrect_mass_mean": 1 - v,
                         "steps": 10, "samples": 10 * n})  # fmt: skip
    return pd.DataFrame(rows)


def test_the_pick_is_the_best_mean_and_a_pick_at_an_end_is_flagged():
    k = len(rb.RATES)
    rising = list(np.linspace(0.6, 0.99, k))
    peaked = [0.6] * k
    peaked[k // 2] = 0.9
    picks = rb.picks(_finals({(rb.EQUAL_STEPS, 16): peaked, (rb.EQUAL_STEPS, 512): rising})).set_index("N")
    assert picks.loc[16, "best_lr"] == rb.RATES[k // 2] and bool(picks.loc[16, "interior"])
    assert picks.loc[512, "best_lr"] == rb.RATES[-1] and not bool(picks.loc[512, "interior"])
    assert picks.loc[16, "correct_mass_at_paper_lr"] == 0.6


def test_differences_pair_the_seeds_of_each_ns_own_pick():
    rows = []
    for n, lr, masses in ((16, 0.1, [0.90, 0.80]), (16, 1.0, [0.1, 0.1]), (512, 1.0, [0.95, 0.86])):
        for seed, q in enumerate(masses):
            rows += [{"condition": rb.EQUAL_STEPS, "N": n, "lr": lr, "seed": seed, "step": s, "samples": s * n,
                      "correct_mass": q if s else 0.5} for s in (0, 10)]  # fmt: skip
    runs = pd.DataFrame(rows)
    chosen = pd.DataFrame({"condition": [rb.EQUAL_STEPS] * 2, "N": [16, 512], "best_lr": [0.1, 1.0]})
    d = rb.difference(runs, chosen, rb.EQUAL_STEPS, 512, 16)
    assert d["n"] == 2 and d["mean"] == pytest.approx(0.055)  # (0.05 + 0.06) / 2, each seed against its own
    assert d["ci_low"] < d["mean"] < d["ci_high"]


def test_committed_runs_are_read_back_only_with_their_settings(tmp_path):
    folder = tmp_path / "bracket"
    shutil.copytree(rb.DATA_DIR, folder)
    runs = rb.read_runs(folder)
    assert set(runs["condition"]) == set(rb.CONDITIONS) and set(runs["seed"]) == set(rb.SEEDS)
    recorded = json.loads((folder / "settings.json").read_text())
    recorded["rates"] = recorded["rates"][:-1]
    (folder / "settings.json").write_text(json.dumps(recorded))
    with pytest.raises(ValueError, match="made with other settings than these; re-make it: python -m brorl_lib"):
        rb.read_runs(folder)


def test_every_committed_pick_lies_inside_its_grid_with_two_seeds_or_more():
    picks = rb.picks(rb.finals(rb.read_runs()))
    assert len(picks) == sum(len(rb.rollouts(c)) for c in rb.CONDITIONS)
    assert picks["interior"].all(), picks[~picks["interior"]]
    assert (picks["seeds"] >= 2).all()
    assert list(dict.fromkeys(picks["condition"])) == list(rb.CONDITIONS)  # the tables' order, not the alphabet's
