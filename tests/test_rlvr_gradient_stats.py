"""Per-prompt gradient statistics and the best-N model (rlvr.gradient_stats)."""

import numpy as np
import pandas as pd
import pytest
import torch

from brorl_lib.rlvr import gradient_stats as gs


def test_moments_are_unbiased_on_known_gradients():
    gen = torch.Generator().manual_seed(0)
    mean = torch.zeros(400)
    mean[0] = 1.0
    grads = mean + 0.5 * torch.randn(2000, 400, generator=gen)  # between-prompt spread 400 * 0.25 = 100
    m = gs.moments(grads, np.full(2000, 3.0))
    assert m.between == pytest.approx(100.0, rel=0.02)
    assert m.g2 == pytest.approx(1.0, abs=0.1)  # |G|^2 = 1 although |mean of rows|^2 is about 1.05
    assert m.within == 3.0 and m.prompts == 2000


def test_mean_pairwise_cosine():
    assert gs.mean_pairwise_cosine(torch.eye(5)) == pytest.approx(0.0)
    assert gs.mean_pairwise_cosine(torch.ones(4, 3)) == pytest.approx(1.0)
    assert gs.mean_pairwise_cosine(torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]])) == pytest.approx(-1.0)


def test_model_without_noise_is_exact_at_every_n_and_noise_lowers_it():
    ns = np.array([2, 4, 16, 512])
    assert gs.predicted_cosine(gs.Moments(1.0, 0.0, 0.0, 100), ns, 1024, 256) == pytest.approx(np.ones(4))
    within_only = gs.predicted_cosine(gs.Moments(1.0, 0.0, 500.0, 100), ns, 1024, 256)
    assert (np.diff(within_only) > 0).all() and within_only.max() < 1  # only the 1/N shrinkage: largest N best
    # a known value: G2 = 1, B = 100, W = 50, R = 100, N = 4, S = 64: 1 / sqrt(2 * (1 + (400 + 50 / 0.5625) / 64))
    assert gs.predicted_cosine(gs.Moments(1.0, 100.0, 50.0, 100), np.array([4]), 64, 100)[0] == pytest.approx(
        1 / np.sqrt(2 * (1 + (400 + 50 / 0.5625) / 64))
    )


def test_model_best_n_balances_within_and_between_prompt_noise_whatever_s():
    m = gs.Moments(g2=1.0, between=5.0, within=500.0, prompts=256)
    best, curve = gs.best_n(m, 8192, 256)
    assert best == 16 and curve.max() == curve[list(gs.N_GRID).index(16)]  # N* about sqrt(2 W / B) = 14
    assert [gs.best_n(m, s, 256)[0] for s in (2048, 32768)] == [16, 16]  # S scales the noise, not its balance
    assert gs.best_n(gs.Moments(1.0, 200.0, 50.0, 256), 8192, 256)[0] == 2  # prompts disagree: most prompts
    assert gs.predicted_cosine(m, np.array([16]), 32768, 256) > gs.predicted_cosine(m, np.array([16]), 8192, 256)
    assert gs.predicted_cosine(m, np.array([16384]), 8192, 256)[0] == 0.0  # not one whole prompt


def test_kept_fraction():
    assert gs.kept_fraction(np.array([0.5]), 2) == pytest.approx(0.5)
    assert gs.kept_fraction(np.array([0.0, 1.0]), 512) == 0.0
    assert gs.kept_fraction(np.array([0.1]), 16) == pytest.approx(1 - 0.1**16 - 0.9**16)


def test_bootstrap_is_repeatable():
    gen = torch.Generator().manual_seed(1)
    grads = 0.1 + torch.randn(64, 50, generator=gen)
    within = np.full(64, 5.0)
    a = gs.bootstrap_best_n(grads, within, 2048, 64, draws=20)
    assert (a == gs.bootstrap_best_n(grads, within, 2048, 64, draws=20)).all() and len(a) == 20


def test_per_prompt_statistics_on_a_tiny_countdown_model():
    from brorl_lib.models.char_tokenizer import build_tokenizer
    from brorl_lib.models.tiny import TinyModelShape, build_model
    from brorl_lib.rlvr import tasks

    tok = build_tokenizer()
    model = build_model(TinyModelShape(hidden=16, layers=1, heads=2, kv_heads=1, intermediate=32), tok, 0)
    train, _ = tasks.make_split("countdown", 4, 3, 1, 0)
    table, grads = gs.per_prompt(model, tok, train, 1.0, 10, samples=4, progress=False)
    assert list(table.columns) == ["q", "grad_sq", "within"] and len(table) == 3
    assert table["q"].between(0, 1).all() and (table["within"] >= 0).all()
    assert grads.shape == (3, sum(p.numel() for p in model.parameters()))
    assert torch.allclose(grads.pow(2).sum(1), torch.tensor(table["grad_sq"].to_numpy(), dtype=grads.dtype))
    with pytest.raises(ValueError, match="samples=3 is not allowed"):
        gs.per_prompt(model, tok, train, 1.0, 10, samples=3, progress=False)


def test_no_prediction_where_the_mean_gradient_is_not_resolved():
    best, curve = gs.best_n(gs.Moments(g2=-5.0, between=100.0, within=10.0, prompts=256), 8192, 256)
    assert best is None and (curve == 0).all()


def summary(g2: float) -> dict:
    return {"prompts": 256, "g2": g2, "between": 5.0, "within": 500.0, "mean_pairwise_cosine": 0.01,
            "kept_fraction": {"4": 0.3, "16": 0.5}, "best_n": {"8192": {"best_n": 16 if g2 > 0 else None,
            "identified_share": 0.9, "low": 8, "high": 16}}}  # fmt: skip


def test_report_compares_the_model_with_the_measured_grid():
    from brorl_lib.rlvr import best_n_report as br

    quality = pd.DataFrame({"checkpoint": ["mid-step600"] * 2, "reference": ["disjoint"] * 2, "q_band": ["all"] * 2,
                            "samples_per_update": [8192] * 2, "n_rollouts": [4, 16], "cosine": [0.5, 0.9],
                            "cosine_se": [0.01, 0.02], "reps": [10, 10]})  # fmt: skip
    summaries = {"mid-step600": summary(1.0), "plateau-step1200": summary(-1.0)}
    table = br.comparison(summaries, quality)
    assert len(table) == 4 and table["measured_cosine"].notna().sum() == 2
    assert table.loc[table["checkpoint"] == "plateau-step1200", "predicted_cosine"].isna().all()
    check = br.verdict(table, summaries).set_index("checkpoint")
    assert check.loc["mid-step600", "measured_best_N"] == 16 and check.loc["mid-step600", "holds"] == "yes"
    assert check.loc["mid-step600", "model_best_N"] == "16 [8, 16]; 90% of resamplings resolve it"
    assert check.loc["plateau-step1200", "model_best_N"] == "none: mean gradient not resolved"
    ratio = br.gradient_table(summaries)["between_over_g2"]
    assert ratio.iloc[0] == 5.0 and np.isnan(ratio.iloc[1])  # B / |G|^2 has no meaning where |G|^2 is not resolved


def test_the_isocompute_grid_is_checked_against_the_models_pick_among_its_n():
    from brorl_lib.rlvr import best_n_report as br

    summaries = {"mid-step600": summary(1.0), "plateau-step1200": summary(-1.0)}
    best = pd.DataFrame({"budget": [1000, 2000], "n_rollouts": [16, 32], "tied": ["8", "-"]})
    check = br.isocompute_check(best, summaries, "mid-step600", 8192, [8, 16, 32])
    assert list(check["grid"]) == ["IsoCompute, 1,000 samples", "IsoCompute, 2,000 samples"]
    assert list(check["model_best_on_grid"]) == [16, 16]  # N*B + W/(1 - 1/N)^2 is least at 16 of 8, 16, 32
    assert list(check["measured_tied"]) == ["8 16", "32"] and list(check["holds"]) == ["yes", "no"]
    assert check["model_best_N"].iloc[0] == "16 [8, 16]; 90% of resamplings resolve it"
    plateau = br.isocompute_check(best, summaries, "plateau-step1200", 8192, [8, 16, 32])
    assert set(plateau["holds"]) == {"no prediction"}
    assert set(plateau["model_best_N"]) == {"none: mean gradient not resolved"}
    missing = br.isocompute_check(best, summaries, "early-step50", 8192, [8, 16, 32])
    assert set(missing["model_best_N"]) == {"no gradient statistics at this checkpoint"}
    both = br.check_table(pd.DataFrame(), summaries, best, "mid-step600", 8192, [8, 16, 32])
    assert len(both) == 2 and set(both["grid"]) == {"IsoCompute, 1,000 samples", "IsoCompute, 2,000 samples"}
