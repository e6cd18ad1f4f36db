import numpy as np
import pandas as pd
import pytest
import torch

from brorl_lib.facts import theorem as theory
from brorl_lib.simulator import engine as sim
from brorl_lib.simulator import runner

TINY = dict(vocab_size=6, n_correct=2, steps=1)


def random_batch(rows=2, v=30, n=(5, 40), seed=0):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(rows, v, dtype=torch.float64, generator=g), 1)
    correct = torch.rand(rows, v, generator=g) < 0.3
    rewards = torch.where(correct, 1.0, -1.0).to(torch.float64)
    gens = [torch.Generator().manual_seed(seed + b) for b in range(rows)]
    draws = sim.draw_tokens(torch.cumsum(p, 1), list(n), gens)
    row_of_draw = torch.repeat_interleave(torch.arange(rows), torch.tensor(n))
    counts = sim.token_counts(draws, (rows, v), torch.float64)
    return p, correct, rewards, draws, row_of_draw, counts, torch.tensor(n, dtype=torch.float64).unsqueeze(1)


def test_paper_gradient_matches_counts_and_autograd():
    p, correct, rewards, draws, row_of_draw, counts, n = random_batch()
    v = p.shape[1]
    groups = [sim.RowGroup(5, 0, 1, ()), sim.RowGroup(40, 1, 2, ())]
    idx = [draws[row_of_draw == b].view(1, -1) - b * v for b in range(2)]
    fast = sim.paper_gradient(p, rewards, groups, idx, out=torch.empty_like(p))
    dense = sim.surrogate_gradient(p, counts, rewards, n, centred=True, distinct=False)
    torch.testing.assert_close(fast, dense, rtol=1e-12, atol=1e-15)
    # autograd of L = -(1/N) sum_j (R_j - mean R) p_{t_j} over the draws of each row
    z = torch.log(p).clone().requires_grad_(True)
    q = torch.softmax(z, 1).view(-1)[draws]
    r = rewards.view(-1)[draws]
    loss = 0.0
    for b in range(p.shape[0]):
        sel = row_of_draw == b
        loss = loss - ((r[sel] - r[sel].mean()) * q[sel]).sum() / sel.sum()
    loss.backward()
    torch.testing.assert_close(fast, z.grad, rtol=1e-10, atol=1e-15)
    assert counts.sum(1).tolist() == [5, 40]


def test_merge_search_is_searchsorted_ties_included():
    g = torch.Generator().manual_seed(3)
    p = torch.rand(2, 50, generator=g, dtype=torch.float64)
    p[:, 10:20] = 0.0  # flat stretches of the CDF: equal entries
    cdf = torch.cumsum(p, 1)
    u = torch.sort(torch.rand(2, 300, generator=g, dtype=torch.float64) * cdf[:, -1:], 1).values
    u[:, 100:110] = cdf[:, 15:16]  # draws exactly on a CDF value, and repeated
    u = torch.sort(u, 1).values
    assert torch.equal(sim.merge_search(cdf, u), torch.searchsorted(cdf, u))
    assert sim.merge_is_cheaper(51200, 128000, torch.device("cpu"))
    assert not sim.merge_is_cheaper(512, 128000, torch.device("cpu"))


def test_threads_share_rows_without_changing_a_bit(monkeypatch):
    settings = sim.SimSettings(vocab_size=3000, n_correct=300, steps=15, track_theory=True)
    rollouts, seeds = [4, 20000, 4, 64, 512], [0, 1, 1, 2, 0]
    assert runner.cpu_shards(sim.SimSettings(vocab_size=1280, n_correct=10), 9) == 1  # too small to share
    monkeypatch.setattr(runner, "cpu_shards", lambda s, rows: 1)
    one = runner.simulate_batch(settings, rollouts, seeds, progress=False)
    threads = torch.get_num_threads()
    monkeypatch.setattr(runner, "cpu_shards", lambda s, rows: 3)
    three = runner.simulate_batch(settings, rollouts, seeds, progress=False)
    assert torch.get_num_threads() == threads
    assert one.keys() == three.keys()
    for k in one:
        np.testing.assert_array_equal(one[k], three[k])
    parts = runner.shard_rows(settings, rollouts, 3)
    assert sorted(b for part in parts for b in part) == list(range(5)) and len(parts) == 3


def test_a_failing_on_step_or_thread_stops_every_thread(monkeypatch):
    monkeypatch.setattr(runner, "cpu_shards", lambda s, rows: 2)
    settings = sim.SimSettings(vocab_size=300, n_correct=30, steps=50)
    threads, calls = torch.get_num_threads(), []

    def stop_at_third():
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("stopped by the user")

    with pytest.raises(RuntimeError, match="stopped by the user"):
        runner.simulate_batch(settings, [4, 8], [0, 0], progress=False, on_step=stop_at_third)
    assert len(calls) == 3 and torch.get_num_threads() == threads
    step = sim.RowBatch.step

    def failing_step(batch, t):
        if t == 5 and batch.rows == 1 and int(batch.n[0, 0]) == 8:
            raise ValueError("row failed")
        step(batch, t)

    monkeypatch.setattr(sim.RowBatch, "step", failing_step)
    with pytest.raises(ValueError, match="row failed"):
        runner.simulate_batch(settings, [4, 8], [0, 0], progress=False)
    assert torch.get_num_threads() == threads


def test_theorem_rule_is_theory_logit_update():
    p, correct, rewards, draws, row_of_draw, counts, n = random_batch()
    step = -1e-3 * sim.surrogate_gradient(p, counts, rewards, n, centred=False, distinct=True)
    for b in range(2):
        dz = theory.logit_update(p[b].numpy(), correct[b].numpy(), counts[b].numpy() > 0, 1.0, -1.0, 1e-3, int(n[b]))
        np.testing.assert_allclose(step[b].numpy(), dz, rtol=1e-12, atol=1e-18)


def test_rules_coincide_without_repeats_and_with_balanced_rewards():
    p = torch.softmax(torch.randn(1, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1)), 1)
    rewards = torch.tensor([[1.0, 1, -1, -1, 1, -1, 1, -1]], dtype=torch.float64)
    counts = torch.tensor([[1.0, 1, 1, 1, 0, 0, 0, 0]], dtype=torch.float64)  # distinct draws, mean reward 0
    n = torch.tensor([[4.0]], dtype=torch.float64)
    paper = sim.surrogate_gradient(p, counts, rewards, n, centred=True, distinct=False)
    theorem = sim.surrogate_gradient(p, counts, rewards, n, centred=False, distinct=True)
    torch.testing.assert_close(paper, theorem, rtol=0, atol=0)
    counts[0, 0] = 2.0  # a repeated draw: the rules now differ
    assert not torch.allclose(
        sim.surrogate_gradient(p, counts, rewards, n + 1, True, False),
        sim.surrogate_gradient(p, counts, rewards, n + 1, False, True),
    )


def test_step0_metrics_by_hand():
    settings = sim.SimSettings(**TINY)
    res = runner.simulate_batch(settings, [4], [0], progress=False)
    e = np.exp([5.0, 3, 3, 0, 0, 0])  # anchor, two correct tokens, three incorrect
    assert res["correct_mass"][0, 0] == pytest.approx(2 * e[1] / e.sum(), rel=1e-14)
    assert res["pct_improved"][0, 0] == 0 and res["worst_drop"][0, 0] == 0


def test_one_theorem_step_by_hand():
    settings = sim.SimSettings(**TINY, update_rule="theorem", lr=0.5)
    res = runner.simulate_batch(settings, [3], [7], progress=False)
    z0 = np.array([5.0, 3, 3, 0, 0, 0])
    p0 = theory.softmax(z0)
    cdf = torch.cumsum(torch.tensor(p0).unsqueeze(0), 1)
    draws = sim.draw_tokens(cdf, [3], [sim.run_generator(7, 3, "cpu")])  # the run's own stream
    sampled = np.zeros(6, dtype=bool)
    sampled[draws.numpy()] = True
    correct = np.array([False, True, True, False, False, False])
    p1 = theory.softmax(z0 + theory.logit_update(p0, correct, sampled, 1.0, -1.0, 0.5, 3))
    delta = p1[correct] - p0[correct]
    assert res["correct_mass"][1, 0] == pytest.approx(p1[correct].sum(), rel=1e-13)
    assert res["pct_improved"][1, 0] == pytest.approx(100 * np.mean(delta > 0))
    assert res["worst_drop"][1, 0] == pytest.approx(min(delta.min(), 0.0), abs=1e-16)


def test_large_n_raises_correct_mass_on_a_small_problem():
    settings = sim.SimSettings(vocab_size=200, n_correct=20, steps=300, lr=1e-2)
    df = runner.simulate(settings, [5000], [0], progress=False)
    first, last = df.iloc[0], df.iloc[-1]
    assert last["correct_mass"] > first["correct_mass"] + 0.05
    assert last["pct_improved"] == 100.0


def test_seeds_repeat_bit_for_bit_and_differ_across_seeds():
    settings = sim.SimSettings(vocab_size=500, n_correct=50, steps=40)
    a = runner.simulate(settings, [4, 64], [0, 1], progress=False)
    b = runner.simulate(settings, [4, 64], [0, 1], progress=False)
    assert a.to_csv(index=False).encode() == b.to_csv(index=False).encode()
    assert list(a.columns[:6]) == ["N", "seed", "step", "correct_mass", "pct_improved", "worst_drop"]
    s0 = a[(a.N == 4) & (a.seed == 0)]["correct_mass"].to_numpy()
    s1 = a[(a.N == 4) & (a.seed == 1)]["correct_mass"].to_numpy()
    assert not np.array_equal(s0, s1)


def test_a_run_does_not_depend_on_its_batch():
    settings = sim.SimSettings(vocab_size=500, n_correct=50, steps=30)
    alone = runner.simulate(settings, [16], [3], progress=False)
    batched = runner.simulate(settings, [4, 16, 256], [2, 3], progress=False)
    mine = batched[(batched.N == 16) & (batched.seed == 3)].reset_index(drop=True)
    pd.testing.assert_frame_equal(alone, mine, rtol=1e-12)


def test_running_worst_drop_never_recovers_and_theory_is_tracked():
    settings = sim.SimSettings(vocab_size=300, n_correct=30, steps=50, worst_drop="running", track_theory=True)
    df = runner.simulate(settings, [8], [0], progress=False)
    assert (np.diff(df["worst_drop"]) <= 0).all()
    assert np.isnan(df["delta_q_theorem"].iloc[0]) and df["delta_q_theorem"].iloc[1:].notna().all()


def test_theorem_rule_follows_theorem1_step_by_step():
    settings = sim.SimSettings(vocab_size=300, n_correct=30, steps=20, update_rule="theorem", track_theory=True)
    df = runner.simulate(settings, [16], [0], progress=False).iloc[1:]
    np.testing.assert_allclose(df["delta_q_measured"], df["delta_q_theorem"], rtol=1e-3)


def test_random_correct_tokens_and_anchor_options():
    s = sim.SimSettings(vocab_size=100, n_correct=10, correct_tokens="random", anchor_correct=True)
    idx = sim.correct_indices(s, seed=4)
    assert len(idx) == 10 and idx[0] == 0 and len(set(idx)) == 10
    assert not np.array_equal(idx, sim.correct_indices(s, seed=5))
    small = dict(vocab_size=100, n_correct=10, steps=20)
    frozen = runner.simulate(sim.SimSettings(**small, anchor_frozen=True), [8], [0], progress=False)
    free = runner.simulate(sim.SimSettings(**small), [8], [0], progress=False)
    assert frozen["correct_mass"].iloc[0] == free["correct_mass"].iloc[0]
    assert frozen["correct_mass"].iloc[-1] != free["correct_mass"].iloc[-1]  # the anchor moved in one only


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(n_correct=128_000), "n_correct"),
        (dict(n_correct=0), "n_correct"),
        (dict(lr=0.0), "lr"),
        (dict(steps=0), "steps"),
        (dict(update_rule="sgd"), "update_rule"),
        (dict(dtype="float16"), "dtype"),
        (dict(worst_drop="min"), "worst_drop"),
        (dict(weight_decay=-0.1), "weight_decay"),
    ],
)
def test_bad_settings_name_the_parameter(kwargs, name):
    with pytest.raises(ValueError, match=name):
        sim.SimSettings(**kwargs)


def test_bad_runs_are_rejected_before_work():
    with pytest.raises(ValueError, match="rollouts item=0"):
        runner.simulate(sim.SimSettings(steps=1), [0, 4], [0], progress=False)
    with pytest.raises(ValueError, match="seeds"):
        runner.simulate(sim.SimSettings(steps=1), [4], [], progress=False)


def test_adamw_is_torchs_fused_adamw_bit_for_bit():
    settings = sim.SimSettings(lr=0.05, weight_decay=0.1)
    g = torch.Generator().manual_seed(0)
    z = torch.randn(3, 37, dtype=torch.float64, generator=g)
    ref = z.clone().requires_grad_(True)
    ours = sim.AdamW(z, settings)
    opt = torch.optim.AdamW([ref], lr=0.05, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1, fused=True)
    for _ in range(5):
        grad = torch.randn(3, 37, dtype=torch.float64, generator=g)
        ref.grad = grad.clone()
        opt.step()
        ours.step(grad)
        assert torch.equal(z, ref.detach())
    assert torch.equal(ours.exp_avg_sq, opt.state[ref]["exp_avg_sq"])
