import dataclasses

import numpy as np
import pytest

from brorl_lib.theory import report as tr
from brorl_lib.theory import symbolic as theory_symbolic

SMALL = dict(
    seed=0,
    n_instances=40,
    vocab_sizes=[10, 1000, 128000],
    rollout_sizes=[1, 16, 512],
    eta=1e-3,
    r_correct=1.0,
    r_wrong=-1.0,
    mc_trials=20000,
    example_vocab_size=30,
    example_n_correct=9,
    example_n_rollouts=8,
)


def test_symbolic_derivation_holds():
    d = theory_symbolic.derive(a=2, b=1, u_pos=2, u_neg=1)
    assert d.residuals == {"identity_all": 0, "identity_correct": 0, "theorem1": 0}
    assert d.all_hold
    assert theory_symbolic.softmax_jacobian_residual(3) == 0
    assert r"\Delta Q_{pos}" in d.latex["theorem"]


def test_numeric_checks_agree_and_repeat():
    cfg = tr.TheoryConfig(**SMALL)
    a = tr.theorem1_checks(cfg, progress=False)
    b = tr.theorem1_checks(cfg, progress=False)
    assert a.equals(b)  # same seed, same numbers
    assert len(a) == 40 and set(a["vocab_size"]) <= {10, 1000, 128000}
    worst = tr.worst_errors(a)
    assert worst.iloc[-1]["vocab_size"] == "all" and worst.iloc[-1]["instances"] == 40
    assert worst["rel_err_first_order"].max() < 1e-12
    assert worst["rel_err_exact"].max() < 1e-2  # second-order gap at eta = 1e-3


def test_step_size_study_finds_order_two():
    orders = tr.fitted_orders(tr.step_size_study(tr.TheoryConfig(**SMALL)))
    assert set(orders) == {"zipf", "uniform"}
    for v in orders.values():
        assert v == pytest.approx(2.0, abs=0.05)


def test_example_batch_and_sign_map():
    cfg = tr.TheoryConfig(**SMALL)
    inst, tokens = tr.example_batch(cfg)
    assert tokens["correct"].sum() == 9 and len(tokens) == 30
    terms = tr.example_terms(inst, cfg.eta).set_index("term")["value"]
    assert terms["sampled_correct"] >= 0 and terms["sampled_incorrect"] >= 0
    assert terms["delta_q_pos"] == pytest.approx(terms.drop("delta_q_pos").sum())
    grid, points = tr.sign_map(cfg, inst)
    negative = grid.assign(neg=grid["scaled_delta_q"] < 0).groupby("n_rollouts")["neg"].mean()
    assert negative.is_monotonic_decreasing  # more rollouts, fewer ways to lose correct mass
    assert len(points) == len(tr.SIGN_MAP_ROLLOUTS)


def test_expected_batch_stats_partition_the_second_moment():
    p = np.array([0.5, 0.3, 0.2])
    correct = np.array([True, False, True])
    e = tr.expected_batch_stats(p, correct, n=5)
    assert e["a2"] + e["u_pos2"] == pytest.approx(0.25 + 0.04)
    assert e["b2"] + e["u_neg2"] == pytest.approx(0.09)
    assert e["u_neg2"] == pytest.approx(0.09 * 0.7**5)


def test_lemma2_and_corollary3_studies():
    cfg = tr.TheoryConfig(**SMALL)
    lemma = tr.lemma2_study(cfg)
    assert lemma["covered"].mean() > 0.8  # 95% intervals
    curves = tr.corollary3_curves()
    for _, g in curves.groupby(["distribution", "tokens"]):
        assert (np.diff(g["expected_u2"]) <= 0).all()
    mc = tr.corollary3_monte_carlo(cfg, n_rollouts=64, trials=100)
    assert abs(mc["u_pos2_mc"] - mc["u_pos2_theory"]) < 4 * mc["u_pos2_sem"]


@pytest.mark.parametrize(
    "field, value",
    [
        ("n_instances", 0),
        ("vocab_sizes", [1, 10]),
        ("vocab_sizes", []),
        ("rollout_sizes", [0]),
        ("eta", 0.0),
        ("eta", -1e-3),
        ("r_correct", -1.0),
        ("r_wrong", 0.5),
        ("mc_trials", 10),
        ("example_n_correct", 0),
        ("example_n_correct", 30),
        ("example_n_rollouts", 0),
        ("seed", -1),
        ("n_instances", 2.5),
        ("seed", True),
    ],
)
def test_config_rejects_bad_values_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        tr.TheoryConfig(**{**SMALL, field: value})


def test_config_from_namespace_requires_every_field():
    cfg = tr.TheoryConfig.from_namespace({**SMALL, "unrelated": 1})
    assert dataclasses.asdict(cfg) == SMALL
    with pytest.raises(ValueError, match="missing parameters"):
        tr.TheoryConfig.from_namespace({k: v for k, v in SMALL.items() if k != "eta"})


def test_a_name_papermill_injected_must_be_a_parameter():
    # what a kernel holds after `papermill ... -p etaa 0.01`: the injected cell in its input history
    history = ["", "seed: int = 0", "# Parameters\netaa = 0.01\n"]
    with pytest.raises(ValueError, match="unknown parameter 'etaa': did you mean 'eta'"):
        tr.TheoryConfig.from_namespace({**SMALL, "etaa": 0.01, "In": history})
    with pytest.raises(ValueError, match="unknown parameter 'colour': the parameters are: seed"):
        tr.TheoryConfig.from_namespace({**SMALL, "colour": 1, "In": ["# Parameters\ncolour = 1\n"]})
    ok = tr.TheoryConfig.from_namespace({**SMALL, "In": ["# Parameters\neta = 0.001\nseed = 0\n"]})
    assert ok.eta == SMALL["eta"]
