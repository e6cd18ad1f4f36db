"""The laptop-scale RLVR experiment (notebook 04): tokenizer, model, tasks and their binary reward, top-p
sampling, warm start, the verl pieces, one RL step, an arm that resumes bit for bit, the arm design of
paper §4.2.1 / Table 1, the statistics, and one tiny end-to-end run (warm start, phase 1 to its plateau,
Theorem 1, every phase-2 arm under two seeds at equal samples)."""

import dataclasses
import json
import math
import os
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as sps

from brorl_lib.core import stats
from brorl_lib.paper import setup as paper_setup
from brorl_lib.rlvr import algorithm as alg
from brorl_lib.rlvr import arms as arm_design
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr import sampling, tasks, warm_start
from brorl_lib.rlvr.run import TRAINER_STATE, ArmSettings, EvalProtocol, run_arm, standard_error
from brorl_lib.rlvr.sampling import encode_prompts, generate, nucleus
from brorl_lib.rlvr.step import StepSettings, rl_step
from brorl_lib.rlvr.tokenizer import build_tokenizer

TIMING = ["elapsed_s", "generation_s"]  # wall-clock columns: the only ones a re-run may change


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """The tiny model's operations are too small to share between threads: on busy cores a second thread only
    waits (measured on 2 busy cores: this file 121 s with 2 threads, 40 s with 1)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture
def model(tok):
    return tiny.build_model(tiny.TinyModelShape(), tok, seed=0)


# --- tokenizer, tasks, model ---
def test_tokenizer_round_trip_and_unknown_characters(tok):
    ids = tok("wsr Free may=", add_special_tokens=False)["input_ids"]
    assert len(ids) == len("wsr Free may=") and tok.decode(ids) == "wsr Free may="
    with pytest.raises(ValueError, match="characters the tokenizer does not know"):
        encode_prompts(tok, ["café="])


@pytest.mark.parametrize("task, level", [("arithmetic", 2), ("spell_backward", 2), ("word_sequence_reversal", 2)])
def test_tasks_verify_split_encode_and_reward_in_binary(tok, task, level):
    train, test = tasks.make_split(task, level, 200, 40, seed=3)
    assert not {i.prompt for i in train} & {i.prompt for i in test}
    assert [i.prompt for i in test] == [i.prompt for i in tasks.make_split(task, level, 200, 40, seed=3)[1]]
    for inst in test[:5]:
        assert tasks.score(inst, inst.answer) == 1.0 and tasks.score(inst, "x") == 0.0
        assert 0.0 < tasks.score(inst, inst.answer + "x") < 1.0  # the verifier gives a near miss partial credit ...
        assert tasks.reward(inst, inst.answer + "x") == 0.0  # ... the RL reward does not
        assert tasks.reward(inst, f" {inst.answer} ") == 1.0 and tasks.reward(inst, "x") == 0.0
    encode_prompts(tok, [i.prompt + i.answer for i in train + test])  # every character is in the alphabet


def test_spell_backward_reward_and_its_six_levels():
    inst = tasks.make_split("spell_backward", 1, 5, 5, seed=0)[1][0]
    word = inst.prompt.removeprefix("rev ").removesuffix("=")
    assert tasks.reward(inst, word[::-1]) == 1.0  # a correct reversal
    assert 0.0 < tasks.score(inst, word[::-1][:-1]) < 1.0 and tasks.reward(inst, word[::-1][:-1]) == 0.0
    assert tasks.FAMILIES["spell_backward"].levels == (1, 2, 3, 4, 5, 6)
    lengths = [len(i.answer) for i in tasks.make_split("spell_backward", 6, 100, 40, seed=0)[1]]
    assert min(lengths) >= 3 and max(lengths) <= 8 and max(lengths) > 5  # level 6: words of 3 to 8 letters


def test_bad_task_parameters():
    with pytest.raises(ValueError, match="task='sudoku'"):
        tasks.make_split("sudoku", 1, 10, 10, 0)
    with pytest.raises(ValueError, match="difficulty=7"):
        tasks.make_split("spell_backward", 7, 10, 10, 0)
    with pytest.raises(ValueError, match="difficulty=4"):
        tasks.make_split("arithmetic", 4, 10, 10, 0)
    with pytest.raises(ValueError, match="too few distinct instances for n_test=100"):
        tasks.make_split("arithmetic", 1, 400, 100, 0)  # single digits: only 200 distinct prompts
    one = tasks.make_split("arithmetic", 1, 10, 3, 0)[1][:1]
    with pytest.raises(ValueError, match="1 held-out prompts also occur in training"):
        ex.check_disjoint(one, one)


def test_model_saves_in_hf_format_and_missing_warm_start_is_clear(tok, model, tmp_path):
    tiny.save(model, tok, tmp_path / "m")
    loaded, tok2 = tiny.load(tmp_path / "m")
    x = encode_prompts(tok, ["7+5="])[0]
    torch.testing.assert_close(loaded(x).logits, model(x).logits)
    assert len(tok2) == len(tok)
    with pytest.raises(ValueError, match="no model at"):
        tiny.load(tmp_path / "missing")


# --- sampling: KV cache, top-p, greedy ---
@pytest.mark.parametrize("top_p", [1.0, 0.8])
def test_kv_cache_sampling_matches_full_recomputation_and_the_ppo_log_probs(tok, model, top_p):
    model.eval()
    prompts = ["12+7=", "rev bird=", "wsr free may="]
    cached = generate(model, tok, prompts, 5, 10, 0.9, torch.Generator().manual_seed(4), top_p=top_p)
    full = generate(model, tok, prompts, 5, 10, 0.9, torch.Generator().manual_seed(4), use_cache=False, top_p=top_p)
    assert torch.equal(cached.response_ids, full.response_ids)
    torch.testing.assert_close(cached.log_probs, full.log_probs, atol=1e-5, rtol=0)
    assert cached.group.tolist() == [0] * 5 + [1] * 5 + [2] * 5
    eos = tok.eos_token_id
    for row, m in zip(cached.response_ids, cached.response_mask):  # mask covers tokens up to the first <eos>
        first = (row == eos).nonzero()
        n_valid = int(first[0]) + 1 if len(first) else len(row)
        assert m.tolist() == [1] * n_valid + [0] * (len(row) - n_valid)
    again = generate(model, tok, prompts, 5, 10, 0.9, torch.Generator().manual_seed(4), top_p=top_p)
    assert again.texts == cached.texts
    # the PPO step's old log-probs are the sampling pass's: one forward pass over the whole sequence agrees
    with torch.no_grad():
        recomputed = alg.response_log_probs(model, cached, 0.9)
    torch.testing.assert_close(cached.log_probs, recomputed, atol=1e-5, rtol=0)


def test_nucleus_keeps_the_smallest_set_reaching_top_p():
    probs = torch.tensor([[0.1, 0.5, 0.15, 0.25]], dtype=torch.float64)  # by rank: 0.5, 0.25, 0.15, 0.1

    def kept(top_p: float) -> list[int]:
        return torch.nonzero(nucleus(probs.log(), top_p)[0]).flatten().tolist()

    assert kept(0.3) == [1]  # the most likely token alone reaches 0.3
    assert kept(0.7) == [1, 3]  # 0.5 + 0.25
    assert kept(0.8) == [1, 2, 3]  # 0.5 + 0.25 + 0.15
    assert kept(0.95) == [0, 1, 2, 3] and kept(1.0) == [0, 1, 2, 3]
    assert kept(1e-9) == [1]  # the most likely token always stays
    out = nucleus(probs.log(), 0.7)
    torch.testing.assert_close(out[0, [1, 3]], probs[0, [1, 3]])  # kept mass is the original, not renormalised
    # draws come from the renormalised nucleus only
    draws = sampling._draw(probs.log().expand(20_000, 4), torch.Generator().manual_seed(0), 0.7)
    freq = torch.bincount(draws, minlength=4).double() / len(draws)
    assert freq[0] == 0 and freq[2] == 0
    assert float(freq[1]) == pytest.approx(0.5 / 0.75, abs=0.015)


def test_top_p_one_is_plain_sampling_and_greedy_is_the_argmax(tok, model):
    logp = torch.log_softmax(torch.randn(64, 20, generator=torch.Generator().manual_seed(1)), -1)
    # the inverse-CDF draw of plain sampling (before top-p existed), from the same generator
    u = torch.rand(64, 1, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    cdf = logp.exp().double().cumsum(-1)
    plain = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp(max=19).squeeze(1)
    assert torch.equal(sampling._draw(logp, torch.Generator().manual_seed(3), 1.0), plain)
    model.eval()
    prompts = ["rev bird=", "3+4="]
    default = generate(model, tok, prompts, 4, 6, 1.0, torch.Generator().manual_seed(2))
    explicit = generate(model, tok, prompts, 4, 6, 1.0, torch.Generator().manual_seed(2), top_p=1.0)
    assert torch.equal(default.response_ids, explicit.response_ids)
    greedy = generate(model, tok, prompts, 1, 6, 0.6, torch.Generator().manual_seed(2), greedy=True)
    ids, mask = encode_prompts(tok, prompts)
    with torch.no_grad():
        first = model(input_ids=ids, attention_mask=mask, position_ids=sampling.positions(mask)).logits[:, -1]
    assert torch.equal(greedy.response_ids[:, 0], first.argmax(-1))
    tiny_nucleus = generate(model, tok, prompts, 1, 6, 0.6, torch.Generator().manual_seed(9), top_p=1e-9)
    assert torch.equal(greedy.response_ids, tiny_nucleus.response_ids)  # only the argmax is in the nucleus
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=f"^top_p={bad}"):
            generate(model, tok, prompts, 1, 6, 1.0, torch.Generator(), top_p=bad)
    with pytest.raises(ValueError, match="^eval_top_p=0"):
        EvalProtocol(4, 0.6, 0.0, 6)


# --- warm start, verl pieces, one RL step ---
def test_warm_start_loss_falls(tok, model):
    train, _ = tasks.make_split("spell_backward", 1, 200, 20, seed=0)
    losses = warm_start.train_sft(model, tok, train, steps=60, batch_size=16, lr=3e-3, seed=0)
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:5])
    batch = warm_start.sft_batch(tok, train[:1])
    labelled = batch["labels"][0][batch["labels"][0] != warm_start.IGNORE]
    assert labelled.tolist() == tok(train[0].answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]


def test_verl_pieces_by_hand():
    rewards = torch.tensor([1.0, 0, 0, 1, 1, 1])
    group = torch.tensor([0, 0, 0, 0, 1, 1])
    mask = torch.ones(6, 3, dtype=torch.long)
    keep = alg.dynamic_sampling(rewards, group)
    assert keep.tolist() == [True] * 4 + [False] * 2 and alg.pass_rate(keep) == pytest.approx(4 / 6)
    adv = alg.advantages("grpo", rewards, mask, group)
    assert adv[:4, 0].tolist() == pytest.approx([0.8660, -0.8660, -0.8660, 0.8660], abs=1e-4)  # unbiased std
    assert (adv[4:] == 0).all()
    lp = torch.randn(6, 3)
    loss, metrics = alg.policy_loss(lp, lp, adv, mask, 0.2, 0.28, rollout_n=4)
    assert float(loss) == pytest.approx(-float(adv.mean()), abs=1e-6)  # ratio 1: token-mean of -A
    assert metrics["actor/pg_clipfrac"] == 0
    assert paper_setup.scaled_learning_rate(1e-6, 512 * 16, 128 * 512) == pytest.approx(1e-6 * 8**0.5)
    with pytest.raises(ValueError, match="advantage_estimator"):
        alg.advantages("ppo", rewards, mask, group)


def test_step_settings_reject_bad_values():
    with pytest.raises(ValueError, match="n_rollouts=1"):
        StepSettings(n_rollouts=1)
    with pytest.raises(ValueError, match="temperature"):
        StepSettings(n_rollouts=4, temperature=0.0)


def test_short_rl_run_raises_the_binary_reward(tok, model):
    train, _ = tasks.make_split("spell_backward", 1, 300, 40, seed=0)
    warm_start.train_sft(model, tok, train, steps=100, batch_size=32, lr=3e-3, seed=0)  # well short of perfect
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    settings = StepSettings(n_rollouts=16, max_new_tokens=8)
    rewards = []
    for k in range(80):
        metrics = rl_step(model, tok, opt, [train[(8 * k + j) % len(train)] for j in range(8)], settings, gen)
        rewards.append(metrics["reward_mean"])
    assert metrics["samples"] == 128 and 0 < metrics["pass_rate"] <= 1 and metrics["updates"] == 2
    assert set(rewards) <= {r / 128 for r in range(129)}  # binary rewards: a share of the 128 samples
    assert np.mean(rewards[-20:]) > np.mean(rewards[:20]) + 0.05  # measured: 0.132 -> 0.229


def test_an_untrained_model_earns_no_reward_and_takes_no_update(tok, model):
    """Binary reward with dynamic sampling: groups that are all wrong carry no signal and are dropped."""
    train, _ = tasks.make_split("spell_backward", 1, 20, 4, seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    m = rl_step(model, tok, opt, train[:2], StepSettings(n_rollouts=4, max_new_tokens=5), torch.Generator())
    assert m["samples"] == 8 and m["reward_mean"] == 0 and m["pass_rate"] == 0 and m["updates"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


# --- arm design (paper §4.2.1, Table 1) ---
ETA0 = 1e-6


def shapes(arms: list[arm_design.Arm]) -> dict[str, tuple[int, int, float]]:
    return {a.key: (a.n, a.prompts, a.lr) for a in arms}


def test_the_paper_arms_for_64_prompts():
    design = arm_design.ArmDesign(64, ETA0, (16, 128, 512), (512,), True, (0.5, 2.0))
    got = shapes(arm_design.main_arms(design))
    want = {
        "N16": (16, 64, ETA0),  # ProRL 16 x 64 at eta0
        "N128": (128, 16, ETA0 * math.sqrt(2)),
        "N512": (512, 16, ETA0 * math.sqrt(8)),  # BroRL 512 x 16 at eta0 * sqrt(8)
        "N512_base_lr": (512, 16, ETA0),  # no lr rule
        "N16_batch512": (16, 512, ETA0 * math.sqrt(8)),  # batch control: BroRL's samples per step with N=16
    }
    assert list(got) == list(want)
    for key, (n, prompts, lr) in want.items():
        assert got[key][:2] == (n, prompts) and got[key][2] == pytest.approx(lr, rel=1e-12), key
    labels = {a.key: a.label for a in arm_design.main_arms(design)}
    assert labels["N16"] == "ProRL N=16" and labels["N512"] == "BroRL N=512" and arm_design.label(128) == "N=128"
    assert {a.key: a.role for a in arm_design.main_arms(design)} == {
        "N16": "paper",
        "N128": "dose",
        "N512": "paper",
        "N512_base_lr": "ablation",
        "N16_batch512": "control",
    }
    pilot = shapes(arm_design.pilot_arms(design))
    assert list(pilot) == ["N16_lr0.5x", "N16_lr2x", "N512_lr0.5x", "N512_lr2x"]
    assert pilot["N512_lr2x"] == (512, 16, pytest.approx(2 * ETA0 * math.sqrt(8)))
    assert pilot["N16_lr0.5x"] == (16, 64, pytest.approx(0.5 * ETA0))
    arm_design.check_equal_samples(arm_design.main_arms(design) + arm_design.pilot_arms(design), 65536)


def test_the_paper_profile_builds_the_paper_arms():
    from brorl_lib.core.profiles import plan_run
    from brorl_lib.core.registry import get_notebook
    from brorl_lib.rlvr.config import LaptopRLVRConfig

    plan = plan_run(get_notebook("04_laptop_rlvr"), "paper")
    cfg = LaptopRLVRConfig(**{**LaptopRLVRConfig.defaults(), **plan.parameters})
    got = shapes(arm_design.main_arms(cfg.design()))
    assert got["N16"] == (16, cfg.prompts, cfg.base_lr) and got["N512"][:2] == (512, cfg.prompts // 4)
    assert got["N512"][2] == pytest.approx(cfg.base_lr * math.sqrt(8))


@pytest.mark.parametrize(
    "design, message",
    [
        (dict(prompts=6), r"^prompts=6 is not allowed: it must be divisible by 4"),
        (dict(rollouts=(32, 128)), r"^arm_rollouts=\[32, 128\] must include the ProRL arm's N=16"),
        (dict(rollouts=(16, 16)), r"^arm_rollouts=\[16, 16\] names an N twice"),
        (dict(base_lr_rollouts=(16,)), r"^base_lr_rollouts=\[16\]"),
        (dict(lr_pilot_factors=(1.0, 2.0)), r"^lr_pilot_factors must not contain 1"),
        (dict(rollouts=(16, 24)), r"^batch_control needs"),
    ],
)
def test_bad_designs_are_refused_naming_the_parameter(design, message):
    with pytest.raises(ValueError, match=message):
        arm_design.main_arms(dataclasses.replace(TINY_DESIGN, **design))


def test_a_budget_that_breaks_equal_samples_is_refused():
    arms = arm_design.main_arms(TINY_DESIGN)  # 64 and 128 samples per step
    arm_design.check_equal_samples(arms, 256)
    with pytest.raises(ValueError, match=r"^sample_budget=192 breaks equal samples.*N=128 takes 128"):
        arm_design.check_equal_samples(arms, 192)


# --- statistics ---
def test_mean_interval_is_the_one_sample_t_test():
    x = np.array([0.03, -0.01, 0.05, 0.02, 0.04, 0.00])
    got = stats.mean_interval(x)
    ref = sps.ttest_1samp(x, 0.0)
    low, high = sps.t.interval(0.95, df=x.size - 1, loc=x.mean(), scale=sps.sem(x))
    assert got["p_value"] == pytest.approx(ref.pvalue, rel=1e-9)
    assert (got["ci_low"], got["ci_high"]) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
    assert got["mean"] == pytest.approx(x.mean()) and got["se"] == pytest.approx(sps.sem(x)) and got["n"] == 6
    ci90 = stats.mean_interval(x, confidence=0.9)
    assert ci90["ci_high"] - ci90["ci_low"] < got["ci_high"] - got["ci_low"]
    # detectable: the true mean the two-sided test finds with probability 0.8 (noncentral t), shrinking with n
    spread = [stats.mean_interval(np.tile([-1.0, 1.0], n // 2))["detectable"] for n in (4, 8, 16, 32)]
    assert all(a > b for a, b in zip(spread, spread[1:]))
    big = stats.mean_interval(np.tile([-1.0, 1.0], 15) + 0.3)
    t_crit, nc = sps.t.ppf(0.975, 29), big["detectable"] / big["se"]
    assert sps.nct.sf(t_crit, 29, nc) + sps.nct.cdf(-t_crit, 29, nc) == pytest.approx(0.8, abs=0.01)
    with pytest.raises(ValueError, match="number of values=1"):
        stats.mean_interval([0.1])


def test_slope_test_finds_a_clear_rise_and_not_noise():
    x = np.arange(8, dtype=float)
    noise = np.random.default_rng(0).normal(0, 0.05, size=8)
    rise = stats.slope_test(x, 0.1 * x + noise)
    assert rise["p_positive"] < 0.001 and rise["slope"] == pytest.approx(np.polyfit(x, 0.1 * x + noise, 1)[0])
    assert stats.slope_test(x, 0.5 + noise)["p_positive"] > 0.05
    assert stats.slope_test(x, -0.1 * x + noise)["p_positive"] > 0.999  # one-sided: a fall is no rise
    assert stats.slope_test(x, np.full(8, 0.3))["p_positive"] == 1.0  # exactly flat
    with pytest.raises(ValueError, match="number of points=2"):
        stats.slope_test([0, 1], [0, 1])


def evaluations(pass1: list[float], every: int = 2) -> pd.DataFrame:
    """A metrics table with held-out pass@1 every ``every`` steps and NaN between."""
    rows = []
    for k, v in enumerate(pass1):
        rows += [{"step": k * every, "pass1": v}] + [{"step": k * every + j, "pass1": np.nan} for j in range(1, every)]
    return pd.DataFrame(rows[: (len(pass1) - 1) * every + 1])


def test_plateau_test_needs_a_window_and_separates_flat_from_rising():
    settings = tiny_settings(plateau_window=4, plateau_alpha=0.05)
    assert ex.plateau_test(evaluations([0.1, 0.2, 0.2]), settings) is None  # 3 evaluations of 4
    flat = ex.plateau_test(evaluations([0.1, 0.3, 0.31, 0.29, 0.3, 0.3]), settings)
    assert flat["plateau"] and flat["window_start"] == 4  # the last 4 evaluations, steps 4..10
    rising = ex.plateau_test(evaluations([0.1, 0.2, 0.3, 0.41, 0.5]), settings)
    assert not rising["plateau"] and rising["p_positive"] < 0.05 and rising["window_start"] == 2


# --- one arm ---
def test_an_arm_from_a_phase1_checkpoint_continues_its_optimizer_at_its_own_lr(tok, model, tmp_path):
    train, test = tasks.make_split("spell_backward", 1, 40, 4, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
    for k in range(3):  # three updates: AdamW's step count 3 and moments of its own
        loss = warm_start.sft_loss(model, warm_start.sft_batch(tok, train[4 * k : 4 * k + 4]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    tiny.save(model, tok, tmp_path / "start")
    torch.save(
        {"optimizer": opt.state_dict(), "generator": torch.Generator().get_state()}, tmp_path / "start" / TRAINER_STATE
    )
    shutil.copytree(tmp_path / "start", tmp_path / "warm")
    (tmp_path / "warm" / TRAINER_STATE).unlink()
    settings = ArmSettings("arm", StepSettings(n_rollouts=4, max_new_tokens=5), 2, 2e-3, 8, 1, 1, seed=0)
    protocol = EvalProtocol(2, 0.6, 0.95, 5)
    for start, steps_before in (("start", 3), ("warm", 0)):
        m = run_arm(tmp_path / start, train, test, settings, tmp_path / f"arm_{start}", protocol, progress=False)
        saved = torch.load(tmp_path / f"arm_{start}" / "checkpoint" / TRAINER_STATE, weights_only=False)["optimizer"]
        assert [g["lr"] for g in saved["param_groups"]] == [2e-3]  # the arm's lr, not the start's 5e-4
        steps = steps_before + int(m["updates"].sum())  # AdamW's step count: the start's updates and the arm's
        assert {int(s["step"]) for s in saved["state"].values()} == ({steps} if steps else set()), start
        assert len(saved["state"]) == (len(list(model.parameters())) if steps else 0)


def test_a_step_starts_on_policy_with_the_sampling_log_probs(tiny_run, monkeypatch):
    """PPO's old log-probs are the sampling pass's: the first mini-batch's ratio is 1, and the later ones compare
    with the policy that sampled, not with the one after the first update."""
    settings, root, _ = tiny_run
    policy, tok = tiny.load(root / "warm_start")  # some rewards, some not
    train, _ = ex.data(settings)
    seen, real = [], alg.policy_loss

    def spy(old_log_prob, log_prob, *args):
        seen.append((old_log_prob.detach().clone(), log_prob.detach().clone()))
        return real(old_log_prob, log_prob, *args)

    monkeypatch.setattr(alg, "policy_loss", spy)
    opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)
    step = StepSettings(n_rollouts=8, max_new_tokens=5, mini_batches=2)
    assert rl_step(policy, tok, opt, train[:8], step, torch.Generator().manual_seed(0))["updates"] == 2
    torch.testing.assert_close(seen[0][0], seen[0][1], atol=1e-5, rtol=0)
    assert (seen[1][0] - seen[1][1]).abs().max() > 1e-4  # the second mini-batch sees the updated policy


def test_arm_resumes_bit_for_bit_even_when_cut_during_a_checkpoint_swap(tiny_run, tmp_path):
    run_settings, root, _ = tiny_run
    train, test = ex.data(run_settings)
    settings = ArmSettings("arm", StepSettings(n_rollouts=4, max_new_tokens=5), 4, 1e-3, 96, 2, 2, seed=5)
    kwargs = dict(protocol=EvalProtocol(2, 0.6, 0.95, 5), progress=False)
    start = root / "warm_start"  # no optimizer state: a fresh AdamW
    whole = run_arm(start, train, test, settings, tmp_path / "whole", **kwargs)
    assert whole["updates"].sum() > 0  # the arm trained, so resuming has something to reproduce
    first = run_arm(start, train, test, settings, tmp_path / "cut", max_steps=5, **kwargs)
    assert first["step"].max() == 5 and not (tmp_path / "cut" / "done.json").exists()
    os.replace(tmp_path / "cut" / "checkpoint", tmp_path / "cut" / "checkpoint.old")  # cut during a swap
    resumed = run_arm(start, train, test, settings, tmp_path / "cut", **kwargs)
    assert len(whole) == 7 and whole["samples"].iloc[-1] == 96
    pd.testing.assert_frame_equal(whole.drop(columns=TIMING), resumed.drop(columns=TIMING))
    for k in (0, 2, 4, 6):
        np.testing.assert_array_equal(
            np.load(tmp_path / "whole" / f"pass1_step{k}.npy"), np.load(tmp_path / "cut" / f"pass1_step{k}.npy")
        )
    assert_same_weights(tmp_path / "whole" / "checkpoint", tmp_path / "cut" / "checkpoint")
    with pytest.raises(ValueError, match="no model at"):
        run_arm(tmp_path / "nowhere", train, test, settings, tmp_path / "other", **kwargs)


def assert_same_weights(a_dir, b_dir) -> None:
    a, _ = tiny.load(a_dir)
    b, _ = tiny.load(b_dir)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name


# --- the experiment ---
SEEDS = [0, 1]
TINY_DESIGN = arm_design.ArmDesign(
    prompts=4, base_lr=1e-3, rollouts=(16, 128), base_lr_rollouts=(128,), batch_control=True, lr_pilot_factors=(2.0,)
)
TINY = dict(
    task_names=("spell_backward",),
    difficulties=(1,),
    n_train=60,
    n_test=12,
    warm_start_steps=100,  # enough for rewards of 0 and 1 within groups (30 steps give none)
    warm_start_lr=3e-3,
    phase1_prompts=4,
    phase1_max_steps=6,
    eval_every=2,
    plateau_window=3,
    plateau_alpha=0.05,
    design=TINY_DESIGN,
    sample_budget=256,
    mini_batches=2,
    temperature=1.0,
    max_new_tokens=5,
    protocol=EvalProtocol(4, 0.6, 0.95, 5),
    eval_points=2,
    screen_samples=8,
    screen_min_solved=0.0,
    passk_samples=8,
    passk_instances=4,
    hard_below=1.0,
    theory_prompts=2,
    theory_samples=64,
    theory_batches=2,
)
# the tiny design's arms: key -> (N, prompts per step, lr); 64 or 128 samples per step
TINY_ARMS = {
    "N16": (16, 4, 1e-3),
    "N128": (128, 1, 1e-3 * math.sqrt(2)),
    "N128_base_lr": (128, 1, 1e-3),
    "N16_batch8": (16, 8, 1e-3 * math.sqrt(2)),
    "N16_lr2x": (16, 4, 2e-3),
    "N128_lr2x": (128, 1, 2e-3 * math.sqrt(2)),
}


def tiny_settings(**changes) -> ex.ExperimentSettings:
    return ex.ExperimentSettings(**{**TINY, **changes})


@pytest.mark.parametrize(
    "change, seeds, message",
    [
        (dict(design=dataclasses.replace(TINY_DESIGN, prompts=6)), SEEDS, r"^prompts=6 is not allowed"),
        (dict(design=dataclasses.replace(TINY_DESIGN, rollouts=(32, 128))), SEEDS, r"^arm_rollouts=\[32, 128\]"),
        (dict(sample_budget=192), SEEDS, r"^sample_budget=192 breaks equal samples"),
        (dict(design=dataclasses.replace(TINY_DESIGN, lr_pilot_factors=(1.0,))), SEEDS, r"^lr_pilot_factors"),
        ({}, [0], r"^seeds=\[0\] is not allowed: .* at least 2"),
        ({}, [1, 1], r"^seeds=\[1, 1\] names a seed twice"),
        (dict(task_names=("arithmetic",), n_test=200), SEEDS, r"too few distinct instances for n_test=200"),
        (dict(plateau_window=2), SEEDS, r"^plateau_window=2"),
        (dict(difficulties=(7,)), SEEDS, r"^difficulty of spell_backward=7"),
        (dict(device="tpu"), SEEDS, r"^device='tpu'"),
    ],
)
def test_bad_settings_are_refused_before_any_work(change, seeds, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        ex.run(tiny_settings(**change), seeds, tmp_path / "runs", progress=False)
    assert not (tmp_path / "runs").exists()


def test_the_task_screen_refuses_when_no_task_is_solved(tok, model, tmp_path):
    tiny.save(model, tok, tmp_path / "untrained")
    test = tasks.make_split("spell_backward", 1, 10, 6, seed=0)[1]
    with pytest.raises(ValueError, match="no task passes the screen"):
        ex.task_screen(tiny_settings(screen_min_solved=0.5), tmp_path / "untrained", test, tmp_path)
    assert not (tmp_path / ex.TASK_SCREEN).exists()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The whole experiment at the smallest settings: 2 seeds x 4 arms + 2 pilot arms, 256 samples each."""
    root = tmp_path_factory.mktemp("laptop_rlvr")
    settings = tiny_settings()
    return settings, root, ex.run(settings, SEEDS, root, progress=False)


def snapshot(root) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes()) for p in root.rglob("*") if p.is_file()}


def test_every_arm_spends_the_sample_budget_in_its_designed_shape(tiny_run):
    settings, root, metrics = tiny_run
    planned = [(a.key, s) for a, s in ex.plan(settings, SEEDS)]
    assert planned == [(k, s) for s in SEEDS for k in list(TINY_ARMS)[:4]] + [("N16_lr2x", 0), ("N128_lr2x", 0)]
    phase2 = metrics[metrics["phase"] == 2]
    assert sorted(set(zip(phase2["arm"], phase2["seed"]))) == sorted(planned)
    for key, seed in planned:
        n, prompts, lr = TINY_ARMS[key]
        folder = root / ex.ARMS / key / f"seed{seed}"
        m = pd.read_csv(folder / "metrics.csv")
        assert json.loads((folder / "done.json").read_text())["samples"] == settings.sample_budget
        assert m["samples"].iloc[-1] == settings.sample_budget  # exactly, in whole steps
        assert set(np.diff(m["samples"])) == {n * prompts}, key  # every step drew N x prompts samples
        recorded = json.loads((folder / "arm.json").read_text())
        assert (recorded["step"]["n_rollouts"], recorded["prompts_per_step"]) == (n, prompts)
        assert recorded["lr"] == pytest.approx(lr, rel=1e-12)
        assert not (folder / "checkpoint").exists()  # finished and evaluated: no weights kept
        rows = phase2[(phase2["arm"] == key) & (phase2["seed"] == seed)]
        assert (rows["N"].iloc[0], rows["prompts"].iloc[0]) == (n, prompts) and rows["lr"].iloc[0] == pytest.approx(lr)
    assert phase2["updates"].sum() > 0  # rewards of 0 and 1 in the same group: the arms did learn from something
    p1 = metrics[metrics["phase"] == 1]
    assert set(np.diff(p1["samples"])) == {16 * settings.phase1_prompts} and p1["lr"].iloc[0] == TINY_DESIGN.base_lr


def test_held_out_pass1_files_agree_with_the_metrics_and_arms_start_at_phase1(tiny_run):
    settings, root, _ = tiny_run
    folders = [root / ex.PHASE1] + [ex.arm_folder(root, a, s) for a, s in ex.plan(settings, SEEDS)]
    for folder in folders:
        m = pd.read_csv(folder / "metrics.csv")
        evals = m.dropna(subset=["pass1"])
        files = ex.pass1_files(folder)
        assert [k for k, _ in files] == evals["step"].tolist()
        assert evals["step"].iloc[-1] == m["step"].iloc[-1]  # the last step is always evaluated
        for (_, path), (_, row) in zip(files, evals.iterrows()):
            values = np.load(path)
            assert values.shape == (settings.n_test,) and set(values * 4) <= set(range(5))  # k of 4 samples
            assert row["pass1"] == pytest.approx(values.mean()) and row["pass1_se"] == pytest.approx(
                standard_error(values)
            )
    # seed 0 evaluates with phase 1's seed: every seed-0 arm's step 0 is the phase-1 checkpoint's last evaluation
    start = ex.last_pass1(root / ex.PHASE1)
    for key in TINY_ARMS:
        np.testing.assert_array_equal(np.load(root / ex.ARMS / key / "seed0" / "pass1_step0.npy"), start)


def test_phase1_stops_at_its_first_plateau_and_a_resumed_phase1_checks_first(tiny_run, tmp_path):
    settings, root, _ = tiny_run
    m = pd.read_csv(root / ex.PHASE1 / "metrics.csv")
    record = json.loads((root / ex.PHASE1 / ex.PLATEAU).read_text())
    assert record["step"] == m["step"].iloc[-1] <= settings.phase1_max_steps
    ends = [int(s) for s in m["step"] if s > 0 and s % settings.eval_every == 0]
    verdicts = [ex.plateau_test(m[m["step"] <= s], settings) for s in ends]
    assert not any(v and v["plateau"] for v in verdicts[:-1])  # it did not run past an earlier plateau
    assert record["plateau"] == bool(verdicts[-1] and verdicts[-1]["plateau"])
    assert record["plateau"] or record["step"] == settings.phase1_max_steps
    # interrupted after the chunk was saved but before the verdict: the resumed phase 1 decides before training
    shutil.copytree(root / ex.PHASE1, tmp_path / "phase1")
    (tmp_path / "phase1" / ex.PLATEAU).unlink()
    train, test = ex.data(settings)
    again = ex.phase1(settings, root / "warm_start", train, test, tmp_path / "phase1", progress=False)
    assert again["step"].iloc[-1] == record["step"]
    assert json.loads((tmp_path / "phase1" / ex.PLATEAU).read_text()) == record


def test_final_evaluations_hold_greedy_and_pass_at_k_counts(tiny_run):
    settings, root, _ = tiny_run
    items = ex.hard_items(root / ex.PHASE1, settings.hard_below, settings.passk_instances)
    assert 0 < len(items) <= settings.passk_instances
    np.testing.assert_array_equal(items, np.flatnonzero(ex.last_pass1(root / ex.PHASE1) < 1.0)[:4])
    folders = [root / ex.PHASE1] + [ex.arm_folder(root, a, s) for a, s in ex.plan(settings, SEEDS)]
    for folder in folders:
        with np.load(folder / ex.FINAL_EVAL) as f:
            assert set(f.files) == {"greedy", "items", "counts"}
            assert f["greedy"].shape == (settings.n_test,) and set(f["greedy"]) <= {0, 1}
            np.testing.assert_array_equal(f["items"], items)
            assert f["counts"].shape == items.shape and f["counts"].dtype == np.int64
            assert ((f["counts"] >= 0) & (f["counts"] <= settings.passk_samples)).all()
            k1 = [stats.unbiased_pass_at_k(settings.passk_samples, int(c), 1) for c in f["counts"]]
            np.testing.assert_allclose(k1, f["counts"] / settings.passk_samples)


def test_theorem1_on_real_batches(tiny_run):
    from brorl_lib.rlvr import mass_balance
    from brorl_lib.theory import formulas as theory

    settings, root, _ = tiny_run
    supports = pd.read_csv(root / ex.THEORY_SUPPORTS)
    batches = pd.read_csv(root / ex.THEORY_BATCHES)
    assert len(supports) == settings.theory_prompts
    assert (supports["coverage"] > 0).all() and (supports["coverage"] <= 1 + 1e-9).all()
    summary = mass_balance.summary(batches)
    assert summary["N"].tolist() == list(ex.THEORY_ROLLOUTS)
    assert (np.diff(summary["expected_u2"]) <= 1e-15).all()  # Corollary 3: falls with N
    assert len(batches) == settings.theory_prompts * len(ex.THEORY_ROLLOUTS) * settings.theory_batches
    # every batch's terms are Theorem 1's for that batch
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(30))
    correct = np.arange(30) < 10
    rows = mass_balance.batch_quantities(p, correct, (4, 64), 3, np.random.default_rng(1))
    again = mass_balance.batch_quantities(p, correct, (4, 64), 3, np.random.default_rng(1))
    pd.testing.assert_frame_equal(rows, again)
    sampled = np.zeros(30, dtype=bool)
    sampled[np.random.default_rng(1).choice(30, size=4, p=p)] = True
    mb = theory.mass_balance(p, correct, sampled, 1.0, -1.0)
    assert rows.iloc[0]["delta_q"] == pytest.approx(theory.delta_q_theorem1(mb, 1.0, -1.0, 1.0, 4))
    assert rows.iloc[0]["distinct"] == sampled.sum()


def test_an_interrupted_arm_resumes_to_the_uninterrupted_result(tiny_run, tmp_path):
    settings, root, _ = tiny_run
    arm = next(a for a in arm_design.main_arms(settings.design) if a.key == "N16")
    chosen = ex.arm_settings(settings, arm, 0)  # 4 steps, checkpoints every 2
    train, test = ex.data(settings)
    start = root / ex.PHASE1 / "checkpoint"
    cut = run_arm(start, train, test, chosen, tmp_path / "cut", settings.protocol, max_steps=3, progress=False)
    assert cut["step"].max() == 3 and not (tmp_path / "cut" / "done.json").exists()
    run_arm(start, train, test, chosen, tmp_path / "cut", settings.protocol, progress=False)
    run_arm(start, train, test, chosen, tmp_path / "whole", settings.protocol, progress=False)
    whole = pd.read_csv(tmp_path / "whole" / "metrics.csv")
    pd.testing.assert_frame_equal(  # and the same as the experiment's own run of that arm
        whole.drop(columns=TIMING), pd.read_csv(root / ex.ARMS / "N16" / "seed0" / "metrics.csv").drop(columns=TIMING)
    )
    resumed = pd.read_csv(tmp_path / "cut" / "metrics.csv")
    assert whole["updates"].sum() > 0
    pd.testing.assert_frame_equal(whole.drop(columns=TIMING), resumed.drop(columns=TIMING))
    assert_same_weights(tmp_path / "whole" / "checkpoint", tmp_path / "cut" / "checkpoint")


def test_a_rerun_changes_nothing(tiny_run):
    settings, root, metrics = tiny_run
    before = snapshot(root)
    again = ex.run(settings, SEEDS, root, progress=False)
    assert snapshot(root) == before  # no file rewritten, not even with the same bytes
    pd.testing.assert_frame_equal(metrics, again)


@pytest.mark.parametrize(
    "change, differs",
    [
        (dict(warm_start_steps=101), "warm_start_steps"),
        (dict(protocol=EvalProtocol(8, 0.6, 0.95, 5)), "protocol"),
        (dict(n_test=10), "n_test"),
    ],
)
def test_a_changed_shared_setting_is_refused_by_name(tiny_run, change, differs):
    settings, root, _ = tiny_run
    before = snapshot(root)
    with pytest.raises(ValueError, match=rf"holds a run with other settings \(differs in \['{differs}'\]\)"):
        ex.run(tiny_settings(**change), SEEDS, root, progress=False)
    assert snapshot(root) == before


def test_a_phase2_change_keeps_the_shared_part_but_not_an_arm_run_with_other_settings(tiny_run):
    settings, root, _ = tiny_run
    before = snapshot(root)
    first = ex.arm_folder(root, arm_design.main_arms(settings.design)[0], SEEDS[0])
    with pytest.raises(
        ValueError,
        match=rf"^{re.escape(str(first))} holds an arm with other settings \(differs in \[.*'sample_budget'\]",
    ):
        ex.run(tiny_settings(sample_budget=512), SEEDS, root, progress=False)  # the shared part is accepted
    # phase 1 also uses the design's base_lr: a phase-2-only change of it must not reuse phase 1
    with pytest.raises(ValueError, match=r"phase1 holds phase 1 with other settings \(differs in \['lr'\]\)"):
        ex.run(tiny_settings(design=dataclasses.replace(TINY_DESIGN, base_lr=2e-3)), SEEDS, root, progress=False)
    assert snapshot(root) == before


# --- notebook 04's parameters ---
def test_notebook_config_builds_the_experiment_and_rejects_bad_parameters_by_name():
    from brorl_lib.rlvr.config import LaptopRLVRConfig

    defaults = LaptopRLVRConfig.defaults()
    cfg = LaptopRLVRConfig(**defaults)
    settings = cfg.settings()
    assert settings.model.hidden == defaults["hidden_size"] and cfg.runs_path().is_absolute()
    assert settings.protocol == EvalProtocol(16, 0.6, 0.95, defaults["max_new_tokens"])  # paper Appendix D
    assert settings.design == arm_design.ArmDesign(
        defaults["prompts"],
        defaults["base_lr"],
        tuple(defaults["arm_rollouts"]),
        tuple(defaults["base_lr_rollouts"]),
        defaults["batch_control"],
        tuple(defaults["lr_pilot_factors"]),
    )
    for change, message in [
        ({"arm_rollouts": [32, 512]}, r"^arm_rollouts=\[32, 512\] must include the ProRL arm's N=16"),
        ({"seeds": [0, 0]}, r"^seeds=\[0, 0\] is not allowed: 0 is listed twice"),
        ({"seeds": [0]}, r"^seeds=\[0\] is not allowed"),
        ({"prompts": 6}, r"^prompts=6 is not allowed: must be a multiple of 4"),
        ({"sample_budget": 1000}, r"^sample_budget=1000 breaks equal samples"),
        ({"lr_pilot_factors": [1.0]}, r"^lr_pilot_factors must not contain 1"),
        ({"eval_top_p": 0.0}, r"^eval_top_p=0.0 is not allowed"),
        ({"tasks": ["arithmetic"], "difficulties": [4]}, r"^difficulties item for arithmetic=4"),
        ({"tasks": "spell_backward"}, r"^tasks='spell_backward' is not allowed"),
        ({"hidden_size": 130}, r"^hidden_size=130 is not allowed: must be a multiple of 4"),
        ({"runs_dir": " "}, r"^runs_dir=' ' is not allowed: expected a non-empty string"),
    ]:
        with pytest.raises(ValueError, match=message):
            LaptopRLVRConfig(**{**defaults, **change})


def test_report_tables_from_a_run(tiny_run):
    """The verdict compares seed by seed; phase 1's curve marks one plateau row; the final evaluations line up."""
    from brorl_lib.rlvr import report

    settings, root, metrics = tiny_run
    verdict = report.verdict(root, metrics)
    assert verdict["arm"].tolist() == report.main_arms(metrics) and set(verdict["seeds"]) == {len(SEEDS)}
    per_seed = report.seed_means(report.final_pass1(root, metrics)).set_index(["arm", "seed"])["pass1"]
    for row in verdict[verdict.arm != report.BASELINE].itertuples():
        diffs = [per_seed[(row.arm, s)] - per_seed[(report.BASELINE, s)] for s in SEEDS]
        assert row.delta_vs_prorl == pytest.approx(np.mean(diffs))  # paired per seed, the seed is the unit
        assert row.ci_low <= row.delta_vs_prorl <= row.ci_high
        assert row.verdict == report.direction(pd.Series(row._asdict()))
    curve = report.phase1_curve(metrics, root)
    assert curve["plateau"].sum() == 1 and curve["step"].iloc[0] == 0
    greedy, passk = report.final_evals(root, metrics, settings.passk_samples)
    assert set(greedy["arm"]) == {ex.PHASE1, *metrics.loc[metrics.phase == 2, "arm"]}
    assert passk["k"].max() <= settings.passk_samples and passk["pass_at_k"].dropna().between(0, 1).all()
    checks = report.design_checks(root, metrics, report.phase1_summary(root))
    assert checks.set_index("check").loc["equal generated samples in every arm and seed", "met"]
    assert not checks.set_index("check").loc[f"seeds per arm >= {report.MIN_SEEDS}", "met"]  # 2 seeds here
    assert len(report.lr_pilot(root, metrics)) == 4  # ProRL and the largest N, at 1x and 2x
