import dataclasses

import pandas as pd
import pytest

from brorl_lib.simulator import report as sr

# a small run; every other parameter at its default
QUICK = dict(rollouts=[4, 64], steps=30, vocab_size=400, n_correct=40, sweep_rollouts=[2, 16], sweep_seeds=[0, 1],
             sweep_steps=20, theory_rollouts=[8], theory_steps=10, variant_rollouts=[4])  # fmt: skip


def test_config_builds_settings_and_labels_provenance():
    cfg = sr.SimulatorConfig(**QUICK)
    assert cfg.settings().vocab_size == 400 and cfg.settings(update_rule="theorem").update_rule == "theorem"
    assert cfg.provenance() == "scaled-down"
    paper = dataclasses.replace(cfg, vocab_size=128_000, n_correct=10_000, steps=1000)
    assert paper.provenance() == "reproduced"


@pytest.mark.parametrize(
    "field, value",
    [
        ("rollouts", [0]),
        ("seeds", []),
        ("steps", 0),
        ("n_correct", 400),
        ("lr", -1.0),
        ("sweep_steps", 0),
        ("theory_rollouts", []),
        ("device", "tpu"),
        ("dtype", "half"),
        ("correct_tokens", "last"),
    ],
)
def test_config_rejects_bad_values_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        sr.SimulatorConfig(**{**QUICK, field: value})


def test_studies_run_and_summaries_are_consistent():
    cfg = sr.SimulatorConfig(**QUICK)
    runs = sr.figure3_runs(cfg)
    summary = sr.final_summary(runs)
    assert summary["N"].tolist() == [4, 64] and (summary["seeds"] == 1).all()
    assert (summary["worst_drop_over_run_min"] <= summary["worst_drop_min"]).all()
    variants = sr.axis_variants(cfg)
    assert set(variants["variant"]) == set(sr.AXIS_VARIANTS)
    unseeded = variants[variants["variant"] == "unseeded start"].iloc[0]
    assert unseeded["initial_mass"] == pytest.approx(40 / 400) and not unseeded["fits_mass_axis"]
    tracked = sr.theory_runs(cfg)
    agreement = sr.theory_agreement(tracked).set_index("update_rule")
    assert agreement.loc["theorem", "sign_agreement_pct"] == 100.0
    assert set(agreement.index) == set(sr.THEORY_RULES)


def test_smallest_n_without_drop_and_shape():
    summary = pd.DataFrame(
        {
            "N": [2, 8, 32, 128],
            "worst_drop_over_run_min": [-1e-5, 0.0, -1e-9, 0.0],
            "correct_mass_mean": [0.60, 0.62, 0.63, 0.635],
        }
    )
    assert sr.smallest_n_without_drop(summary) == 128  # 8 has no drop, but 32 does again
    assert sr.smallest_n_without_drop(summary.assign(worst_drop_over_run_min=-1.0)) is None
    assert sr.smallest_n_without_drop(summary.assign(worst_drop_min=[-1.0, 0.0, 0.0, 0.0]), "worst_drop_min") == 8
    assert sr.shape_in_log_n(summary) == {"increasing_from": 2, "concave_from": 2}
    dip = summary.assign(correct_mass_mean=[0.61, 0.60, 0.62, 0.625])  # falls, rises fast, then slower
    assert sr.shape_in_log_n(dip) == {"increasing_from": 8, "concave_from": 8}
