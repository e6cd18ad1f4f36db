"""The laptop-scale RLVR experiment (notebook 04): tokenizer, model, tasks and their binary reward, top-p
sampling, warm start, the verl pieces, one RL step with dynamic sampling's refill, an arm that resumes bit for
bit, the arm design of paper §4.2.1 / Table 1 and its sample budgets, the screen's candidates, the plateau test,
the statistics, the notebook's parameters, and one tiny end-to-end run (a screen of two candidates, two
plateaus, phase-2 arms at two budgets under two seeds, the learning-rate grid) read back by the report."""

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
from brorl_lib.rlvr import candidates, plateau, report, sampling, tasks, warm_start
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr import run as run_module
from brorl_lib.rlvr import step as step_module
from brorl_lib.rlvr.config import LaptopRLVRConfig
from brorl_lib.rlvr.plateau import PlateauRule
from brorl_lib.rlvr.run import TRAINER_STATE, ArmSettings, EvalProtocol, correct_counts, run_arm, standard_error
from brorl_lib.rlvr.sampling import encode_prompts, generate, nucleus
from brorl_lib.rlvr.step import StepSettings, rl_step
from brorl_lib.rlvr.tokenizer import build_tokenizer

TIMING = ["elapsed_s", "generation_s"]  # wall-clock columns: the only ones a re-run may change


pytestmark = pytest.mark.usefixtures("one_torch_thread")


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


def test_a_candidates_split_is_disjoint_per_task_and_repeatable():
    mixed = candidates.parse("spell_backward:2+arithmetic:2@32x1")
    settings = tiny_settings(n_train=50, n_test=7, n_val=5)
    train, test, val = ex.split(settings, mixed)
    for part, per_task in ((test, 7), (val, 5)):
        assert [i.task for i in part] == ["spell_backward"] * per_task + ["arithmetic"] * per_task
    assert {i.task for i in train} == {"spell_backward", "arithmetic"}
    prompts = [{i.prompt for i in part} for part in (train, test, val)]
    assert not (prompts[0] & prompts[1] or prompts[0] & prompts[2] or prompts[1] & prompts[2])
    again = ex.split(settings, mixed)
    assert [[i.prompt for i in part] for part in again] == [[i.prompt for i in part] for part in (train, test, val)]


def test_model_saves_in_hf_format_and_missing_warm_start_is_clear(tok, model, tmp_path):
    tiny.save(model, tok, tmp_path / "m")
    loaded, tok2 = tiny.load(tmp_path / "m")
    x = encode_prompts(tok, ["7+5="])[0]
    torch.testing.assert_close(loaded(x).logits, model(x).logits)
    assert len(tok2) == len(tok)
    with pytest.raises(ValueError, match="no model at"):
        tiny.load(tmp_path / "missing")
    state = torch.get_rng_state()
    assert tiny.parameter_count(tiny.TinyModelShape()) == sum(p.numel() for p in model.parameters())
    assert torch.equal(torch.get_rng_state(), state)  # counting leaves the global random state alone


# --- sampling: KV cache, top-p, greedy, several rounds as one batch ---
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


def test_concat_pads_each_round_to_the_longest_and_keeps_groups_apart(tok, model):
    """Refilled rounds become one training batch: prompts left-padded, responses right-padded (masks and
    log-probs 0 there), each round's groups after the previous round's, and the PPO log-probs unchanged."""
    model.eval()
    pad = tok.pad_token_id
    a = generate(model, tok, ["1+2=", "rev bird="], 2, 3, 1.0, torch.Generator().manual_seed(0))
    b = generate(model, tok, ["wsr free may="], 3, 6, 1.0, torch.Generator().manual_seed(1))
    a = step_module.rows_of(a, torch.tensor([2, 3]))  # round 1 kept its group 1 only
    both = sampling.concat([a, b], pad)
    lp, lr = b.prompt_ids.shape[1], b.response_ids.shape[1]
    assert both.prompt_ids.shape == (5, lp) and both.response_ids.shape == (5, lr) and lr > a.response_ids.shape[1]
    assert both.group.tolist() == [1, 1, 2, 2, 2]  # round 1's groups end at 1: round 2's start at 2
    assert both.texts == a.texts + b.texts
    wa, wr = a.prompt_ids.shape[1], a.response_ids.shape[1]
    assert torch.equal(both.prompt_ids[:2, lp - wa :], a.prompt_ids) and (both.prompt_ids[:2, : lp - wa] == pad).all()
    assert (both.prompt_mask[:2, : lp - wa] == 0).all() and torch.equal(both.prompt_mask[:2, lp - wa :], a.prompt_mask)
    assert torch.equal(both.response_ids[:2, :wr], a.response_ids) and (both.response_ids[:2, wr:] == pad).all()
    assert (both.response_mask[:2, wr:] == 0).all() and (both.log_probs[:2, wr:] == 0).all()
    assert torch.equal(both.response_ids[2:], b.response_ids) and torch.equal(both.log_probs[2:], b.log_probs)
    assert both.n_tokens == a.n_tokens + b.n_tokens
    with torch.no_grad():  # the padded batch scores each response as its own round did
        torch.testing.assert_close(alg.response_log_probs(model, both, 1.0), both.log_probs, atol=1e-5, rtol=0)


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
    for estimator in alg.ADVANTAGE_ESTIMATORS:  # group ids are labels: a refilled batch's gaps change nothing
        torch.testing.assert_close(
            alg.advantages(estimator, rewards, mask, torch.tensor([3, 3, 3, 3, 7, 7])),
            alg.advantages(estimator, rewards, mask, group),
        )
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
    with pytest.raises(ValueError, match="^max_rounds=0"):
        StepSettings(n_rollouts=4, max_rounds=0)


def cycling(instances):
    """A ``draw`` that hands out ``instances`` in order, round after round, and records how many each call took."""
    state = {"next": 0, "calls": []}

    def draw(k: int):
        state["calls"].append(k)
        out = [instances[(state["next"] + j) % len(instances)] for j in range(k)]
        state["next"] += k
        return out

    return draw, state["calls"]


def test_short_rl_run_raises_the_binary_reward(tok, model):
    train, _ = tasks.make_split("spell_backward", 1, 300, 40, seed=0)
    warm_start.train_sft(model, tok, train, steps=100, batch_size=32, lr=3e-3, seed=0)  # well short of perfect
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    settings = StepSettings(n_rollouts=16, max_new_tokens=8)  # max_rounds=1: no refill
    draw, calls = cycling(train)
    rewards = []
    for _ in range(80):
        metrics = rl_step(model, tok, opt, draw, 8, settings, gen)
        rewards.append(metrics["reward_mean"])
    assert calls == [8] * 80 and metrics["samples"] == 128 and metrics["rounds"] == 1
    assert 0 < metrics["pass_rate"] <= 1 and metrics["updates"] == 2
    assert metrics["kept_samples"] == round(metrics["pass_rate"] * 128)  # one round: the kept rows are the mixed
    assert set(rewards) <= {r / 128 for r in range(129)}  # binary rewards: a share of the 128 samples
    assert np.mean(rewards[-20:]) > np.mean(rewards[:20]) + 0.05  # measured: 0.132 -> 0.229


def test_an_untrained_model_earns_no_reward_refills_to_the_cap_and_takes_no_update(tok, model):
    """Binary reward with dynamic sampling: groups that are all wrong carry no signal and are dropped; the step
    refills until max_rounds and reports that the cap stopped it."""
    train, _ = tasks.make_split("spell_backward", 1, 20, 4, seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    draw, calls = cycling(train)
    settings = StepSettings(n_rollouts=4, max_new_tokens=5, max_rounds=3)
    m = rl_step(model, tok, opt, draw, 2, settings, torch.Generator())
    assert calls == [2, 2, 2] and (m["rounds"], m["samples"], m["kept_samples"], m["capped"]) == (3, 24, 0, 1)
    assert m["reward_mean"] == 0 and m["pass_rate"] == 0 and m["updates"] == 0 and math.isnan(m["grad_norm"])
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


MIXED, ALL_WRONG, ALL_RIGHT = [1.0, 0.0, 0.0, 0.0], [0.0] * 4, [1.0] * 4  # one group of N=4 rewards


def scripted(monkeypatch, rounds: list[list[list[float]]]) -> None:
    """Rewards by script, round by round and group by group (rows come group after group), whatever the text."""
    values = iter([r for groups in rounds for group in groups for r in group])
    monkeypatch.setattr(step_module, "reward", lambda instance, text: next(values))


@pytest.mark.parametrize(
    "max_rounds, rounds, kept, capped",
    [(3, 3, 8, 0), (2, 2, 4, 1), (1, 1, 4, 1)],
)
def test_a_step_refills_until_the_kept_batch_is_full_or_max_rounds(
    tok, model, monkeypatch, max_rounds, rounds, kept, capped
):
    """Two kept prompts wanted, N=4: round 1 keeps one group, round 2 none, round 3 two mixed groups of which
    the batch takes the first (verl trims to the batch size). Samples count every round; the update trains on the
    kept rows only."""
    script = [[MIXED, ALL_WRONG], [ALL_RIGHT, ALL_WRONG], [MIXED, MIXED]]
    scripted(monkeypatch, script)
    seen, real = {}, alg.advantages

    def spy(estimator, rewards, mask, group):
        seen.update(rewards=rewards.tolist(), groups=group.tolist())
        return real(estimator, rewards, mask, group)

    monkeypatch.setattr(alg, "advantages", spy)
    train, _ = tasks.make_split("spell_backward", 1, 20, 4, seed=0)
    draw, calls = cycling(train)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    settings = StepSettings(n_rollouts=4, max_new_tokens=5, max_rounds=max_rounds)
    m = rl_step(model, tok, opt, draw, 2, settings, torch.Generator().manual_seed(0))
    assert calls == [2] * rounds
    assert (m["rounds"], m["samples"], m["kept_samples"], m["capped"]) == (rounds, 8 * rounds, kept, capped)
    used = [r for groups in script[:rounds] for g in groups for r in g]
    mixed_rows = sum(4 for groups in script[:rounds] for g in groups if 0 < sum(g) < 4)
    assert m["reward_mean"] == pytest.approx(sum(used) / (8 * rounds))
    assert m["pass_rate"] == pytest.approx(mixed_rows / (8 * rounds))  # before the batch is trimmed
    assert seen["rewards"] == MIXED * (kept // 4) and len(set(seen["groups"])) == kept // 4
    assert m["updates"] == 2 and math.isfinite(m["grad_norm"]) and m["grad_norm"] > 0


def test_a_full_first_round_needs_no_refill(tok, model, monkeypatch):
    scripted(monkeypatch, [[MIXED, MIXED]])
    train, _ = tasks.make_split("spell_backward", 1, 20, 4, seed=0)
    draw, calls = cycling(train)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    m = rl_step(model, tok, opt, draw, 2, StepSettings(4, max_new_tokens=5, max_rounds=5), torch.Generator())
    assert calls == [2] and (m["rounds"], m["samples"], m["kept_samples"], m["capped"]) == (1, 8, 8, 0)
    with pytest.raises(ValueError, match="^prompts=0"):
        rl_step(model, tok, opt, draw, 0, StepSettings(4), torch.Generator())


def test_a_step_starts_on_policy_with_the_sampling_log_probs(tok, model, monkeypatch):
    """PPO's old log-probs are the sampling pass's: the first mini-batch's ratio is 1, and the later ones compare
    with the policy that sampled, not with the one after the first update."""
    scripted(monkeypatch, [[MIXED] * 8])
    seen, real = [], alg.policy_loss

    def spy(old_log_prob, log_prob, *args):
        seen.append((old_log_prob.detach().clone(), log_prob.detach().clone()))
        return real(old_log_prob, log_prob, *args)

    monkeypatch.setattr(alg, "policy_loss", spy)
    train, _ = tasks.make_split("spell_backward", 1, 20, 4, seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = StepSettings(n_rollouts=4, max_new_tokens=5, mini_batches=2)
    assert rl_step(model, tok, opt, cycling(train)[0], 8, step, torch.Generator().manual_seed(0))["updates"] == 2
    torch.testing.assert_close(seen[0][0], seen[0][1], atol=1e-5, rtol=0)
    assert (seen[1][0] - seen[1][1]).abs().max() > 1e-4  # the second mini-batch sees the updated policy


def test_micro_batches_accumulate_the_same_update(tok, monkeypatch):
    """Splitting a mini-batch into micro-batches (gradient accumulation weighted by tokens) changes speed and
    memory, not the update: the same weights and gradient norm as one pass, to float precision."""
    train, _ = tasks.make_split("spell_backward", 1, 20, 4, seed=0)
    results = []
    for micro in (1024, 3):
        scripted(monkeypatch, [[MIXED] * 8])
        policy = tiny.build_model(tiny.TinyModelShape(), tok, seed=0)
        opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)
        step = StepSettings(n_rollouts=4, max_new_tokens=5, mini_batches=2, micro_batch=micro)
        m = rl_step(policy, tok, opt, cycling(train)[0], 8, step, torch.Generator().manual_seed(0))
        results.append((m["grad_norm"], [t.detach().clone() for t in policy.parameters()]))
    (norm_one, one), (norm_micro, micro) = results
    assert norm_micro == pytest.approx(norm_one, rel=1e-5)
    for a, b in zip(one, micro, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)  # AdamW magnifies float noise in tiny gradients
    with pytest.raises(ValueError, match="micro_batch"):
        StepSettings(4, micro_batch=0)


# --- arm design (paper §4.2.1, Table 1) and sample budgets ---
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
    arm_design.check_budgets(arm_design.main_arms(design) + arm_design.pilot_arms(design), [8192, 65536])


def test_the_paper_profile_builds_the_paper_arms():
    from brorl_lib.core.profiles import plan_run
    from brorl_lib.core.registry import get_notebook

    plan = plan_run(get_notebook("04_laptop_rlvr"), "paper")
    cfg = LaptopRLVRConfig(**{**LaptopRLVRConfig.defaults(), **plan.parameters})
    got = shapes(arm_design.main_arms(cfg.design()))
    assert got["N16"] == (16, cfg.prompts, cfg.base_lr) and got["N512"][:2] == (512, cfg.prompts // 4)
    assert got["N512"][2] == pytest.approx(cfg.base_lr * math.sqrt(8))
    settings = cfg.settings()
    assert len(settings.budgets) >= 3 and settings.plateau_rule.window >= 8 and settings.max_rounds > 1


@pytest.mark.parametrize(
    "design, message",
    [
        (dict(prompts=6), r"^prompts=6 is not allowed: it must be divisible by 4"),
        (dict(rollouts=(32, 128)), r"^arm_rollouts=\[32, 128\] must include the ProRL arm's N=16"),
        (dict(rollouts=(16, 16)), r"^arm_rollouts=\[16, 16\] names an N twice"),
        (dict(base_lr_rollouts=(16,)), r"^base_lr_rollouts=\[16\]"),
        (dict(lr_pilot_factors=(1.0, 2.0)), r"^lr_pilot_factors must not contain 1"),
        (dict(rollouts=(16, 24), batch_control=True), r"^batch_control needs"),
    ],
)
def test_bad_designs_are_refused_naming_the_parameter(design, message):
    with pytest.raises(ValueError, match=message):
        arm_design.main_arms(dataclasses.replace(TINY_DESIGN, **design))


@pytest.mark.parametrize(
    "budgets, message",
    [
        ([], r"^budgets is empty"),
        ([128, 128], r"^budgets=\[128, 128\] is not allowed: give them in strictly increasing order"),
        ([256, 128], r"^budgets=\[256, 128\] is not allowed: give them in strictly increasing order"),
        ([0, 128], r"^budgets item=0"),
        ([32, 256], r"^budgets=\[32, 256\] is not allowed: the first must be at least 64, the kept batch of"),
    ],
)
def test_budgets_are_refused_unless_increasing_and_reachable_by_every_arm(budgets, message):
    arms = arm_design.main_arms(TINY_DESIGN) + arm_design.pilot_arms(TINY_DESIGN)  # every kept batch: 64 samples
    arm_design.check_budgets(arms, [64, 256])
    with pytest.raises(ValueError, match=message):
        arm_design.check_budgets(arms, budgets)


# --- the screen's candidates ---
def test_candidate_specs_give_tasks_levels_model_and_folder_name():
    one = candidates.parse(" arithmetic:3@128x3 ")
    assert (one.tasks, one.difficulties) == (("arithmetic",), (3,))
    assert one.model == tiny.TinyModelShape(hidden=128, layers=3, heads=4, kv_heads=2, intermediate=256)
    assert (one.key, one.spec) == ("arithmetic3-h128x3", "arithmetic:3@128x3")
    mixed = candidates.parse("spell_backward:6+word_sequence_reversal:3@64x2")
    assert mixed.tasks == ("spell_backward", "word_sequence_reversal") and mixed.difficulties == (6, 3)
    assert mixed.key == "spell_backward6+word_sequence_reversal3-h64x2"
    assert candidates.parse(mixed.spec) == mixed
    mixed.model.check()


@pytest.mark.parametrize(
    "spec, message",
    [
        ("arithmetic3@128x3", r"^candidates item='arithmetic3@128x3' is not allowed: write 'task:level"),
        ("arithmetic:3@128", r"^candidates item='arithmetic:3@128' is not allowed"),
        (42, r"^candidates item=42 is not allowed"),
        ("sudoku:1@64x2", r"^candidates item task='sudoku'"),
        ("arithmetic:4@64x2", r"^candidates item level of arithmetic=4"),
        ("spell_backward:1+spell_backward:2@64x2", r"names a task twice"),
        ("arithmetic:1@66x2", r"^candidates item='arithmetic:1@66x2': the hidden size must be a multiple of 4"),
        ("arithmetic:1@2048x2", r"^candidates item hidden size=2048"),
        ("arithmetic:1@64x0", r"^candidates item layers=0"),
    ],
)
def test_bad_candidate_specs_are_refused_by_name(spec, message):
    with pytest.raises(ValueError, match=message):
        candidates.parse(spec)


def screen_row(name: str, pass1: float, low_q: float, negative: float) -> dict:
    return {"candidate": name, "plateau_pass1": pass1, "low_q_share": low_q, "share_negative_n16": negative}


@pytest.mark.parametrize(
    "rows, chosen, qualifying",
    [
        # both qualify: the mechanism wins over a larger low-q share
        ([("a", 0.6, 0.30, 0.0), ("b", 0.5, 0.15, 0.1), ("c", 0.9, 0.5, 0.3)], "b", [True, True, False]),
        # both qualify with the mechanism: the larger low-q share
        ([("a", 0.6, 0.15, 0.1), ("b", 0.5, 0.25, 0.2)], "b", [True, True]),
        # a qualifier without the mechanism beats a non-qualifier with it
        ([("a", 0.95, 0.40, 0.5), ("b", 0.8, 0.10, 0.0)], "b", [False, True]),
        # none qualifies: the closest (shortfall 0.05 + 0.05 against 0.15)
        ([("a", 0.2, 0.30, 0.0), ("b", 0.9, 0.05, 0.0)], "b", [False, False]),
        # a tie: the first listed
        ([("a", 0.9, 0.05, 0.0), ("b", 0.9, 0.05, 0.0)], "a", [False, False]),
    ],
)
def test_the_screen_chooses_a_qualifying_candidate_with_the_mechanism_else_the_closest(rows, chosen, qualifying):
    table = pd.DataFrame([screen_row(*r) for r in rows])
    out = ex.choose(table)
    assert out.loc[out.chosen, "candidate"].tolist() == [chosen]
    assert out["qualifies"].tolist() == qualifying
    assert out["mechanism"].tolist() == [r[3] > 0 for r in rows]
    pd.testing.assert_frame_equal(out[table.columns], table)  # the measures themselves untouched


# --- statistics and the plateau test ---
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


def write_evaluations(folder, series: list[np.ndarray], every: int = 10, prefix: str = "pass1") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for k, values in enumerate(series):
        np.save(folder / f"{prefix}_step{k * every}.npy", values)


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # scipy, on the exactly flat series
def test_smoothed_rise_compares_two_windows_and_separates_flat_from_rising(tmp_path):
    """Per instance, the mean of the last window of evaluations against the window before it: a paired one-sided
    test over instances of a rise above min_rise."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, size=200)
    rule = PlateauRule(window=4, alpha=0.05, min_rise=0.01)

    def noisy(level: float, sd: float = 0.05) -> np.ndarray:
        return np.clip(base + level + rng.normal(0, sd, size=base.size), 0, 1)

    write_evaluations(tmp_path / "flat", [noisy(0.0) for _ in range(8)])
    write_evaluations(tmp_path / "flat", [noisy(0.3)], prefix="val")  # validation files are not the test's
    assert plateau.smoothed_rise(tmp_path / "flat", rule, upto=60) is None  # 7 evaluations: fewer than two windows
    flat = plateau.smoothed_rise(tmp_path / "flat", rule)
    assert flat["plateau"] and flat["step"] == 70 and abs(flat["rise"]) < 0.01 and flat["p_rising"] > rule.alpha
    files = [np.load(p) for _, p in plateau.pass1_files(tmp_path / "flat")]
    assert flat["smoothed_pass1"] == pytest.approx(np.mean(files[4:]))
    assert flat["rise"] == pytest.approx(np.mean(files[4:]) - np.mean(files[:4]))
    write_evaluations(tmp_path / "rising", [noisy(0.02 * k) for k in range(8)])
    rising = plateau.smoothed_rise(tmp_path / "rising", rule)
    assert not rising["plateau"] and rising["p_rising"] < 0.001 and rising["rise"] == pytest.approx(0.08, abs=0.01)
    # a rise of the smoothed series smaller than min_rise counts as flat
    write_evaluations(tmp_path / "creeping", [noisy(0.001 * k, sd=0.01) for k in range(8)])  # a rise of 0.004
    assert plateau.smoothed_rise(tmp_path / "creeping", rule)["plateau"]
    assert not plateau.smoothed_rise(tmp_path / "creeping", dataclasses.replace(rule, min_rise=0.0))["plateau"]
    # exactly flat on every instance (nothing to test: no variance) is a plateau, with or without min_rise
    write_evaluations(tmp_path / "solved", [np.ones(50)] * 8)
    for min_rise in (0.0, 0.01):
        assert plateau.smoothed_rise(tmp_path / "solved", dataclasses.replace(rule, min_rise=min_rise))["plateau"]
    # only the evaluations up to a step count: the one after it is ignored
    write_evaluations(tmp_path / "late", [noisy(0.0) for _ in range(8)] + [noisy(0.5)])
    upto = plateau.smoothed_rise(tmp_path / "late", rule, upto=70)
    assert upto["step"] == 70 and upto != plateau.smoothed_rise(tmp_path / "late", rule)
    (tmp_path / "late" / "pass1_step80.npy").unlink()
    assert plateau.smoothed_rise(tmp_path / "late", rule) == upto


# --- one arm ---
def test_arm_settings_evaluate_at_each_budget_and_at_the_end():
    step = StepSettings(n_rollouts=4)
    arm = ArmSettings("a", step, 2, 1e-3, 300, eval_every=0, checkpoint_every=1, seed=0, eval_budgets=(100, 200))
    ends = [(1, 0, 64), (2, 64, 128), (3, 128, 192), (4, 192, 256), (5, 256, 320)]
    assert [arm.evaluates(*e) for e in ends] == [False, True, False, True, True]
    every2 = dataclasses.replace(arm, eval_every=2, eval_budgets=())
    assert [every2.evaluates(*e) for e in ends] == [False, True, False, True, True]
    with pytest.raises(ValueError, match="^eval_budgets item=400"):
        dataclasses.replace(arm, eval_budgets=(100, 400))
    with pytest.raises(ValueError, match="^eval_every=-1"):
        dataclasses.replace(arm, eval_every=-1)


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


def assert_same_weights(a_dir, b_dir) -> None:
    a, _ = tiny.load(a_dir)
    b, _ = tiny.load(b_dir)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name


# --- the experiment ---
SEEDS = [0, 1]
TINY_DESIGN = arm_design.ArmDesign(
    prompts=4, base_lr=1e-3, rollouts=(16, 64), base_lr_rollouts=(), batch_control=False, lr_pilot_factors=(2.0,)
)
TINY_CANDIDATES = (candidates.parse("spell_backward:1@64x2"), candidates.parse("spell_backward:2@64x2"))
TINY = dict(
    candidates=TINY_CANDIDATES,
    n_train=60,
    n_test=12,
    n_val=6,
    warm_start_steps=100,  # enough for rewards of 0 and 1 within groups
    warm_start_lr=3e-3,
    phase1_prompts=4,
    phase1_max_steps=4,
    screen_max_steps=2,  # too short for the plateau test: the chosen candidate's phase 1 continues from here
    eval_every=1,
    plateau_rule=PlateauRule(window=2, alpha=0.05, min_rise=0.01),
    design=TINY_DESIGN,
    budgets=(128, 256),
    max_rounds=2,
    mini_batches=2,
    temperature=1.0,
    max_new_tokens=5,
    protocol=EvalProtocol(4, 0.6, 0.95, 5),
    q_prompts=8,
    q_samples=16,
    passk_samples=8,
    passk_instances=4,
    hard_below=1.0,
    theory_prompts=2,
    theory_samples=64,
    theory_batches=2,
    plateau_seeds=(0, 1),
    second_plateau_seeds=2,
)
# the tiny design's arms: key -> (N, kept prompts per step, lr); every kept batch is 64 samples
TINY_ARMS = {
    "N16": (16, 4, 1e-3),
    "N64": (64, 1, 1e-3),  # sqrt(64 x 1 / (16 x 4)) = 1
    "N16_lr2x": (16, 4, 2e-3),
    "N64_lr2x": (64, 1, 2e-3),
}


def tiny_settings(**changes) -> ex.ExperimentSettings:
    return ex.ExperimentSettings(**{**TINY, **changes})


@pytest.mark.parametrize(
    "change, seeds, message",
    [
        (dict(design=dataclasses.replace(TINY_DESIGN, prompts=6)), SEEDS, r"^prompts=6 is not allowed"),
        (dict(design=dataclasses.replace(TINY_DESIGN, rollouts=(32, 128))), SEEDS, r"^arm_rollouts=\[32, 128\]"),
        (dict(design=dataclasses.replace(TINY_DESIGN, lr_pilot_factors=(1.0,))), SEEDS, r"^lr_pilot_factors"),
        (dict(budgets=(256, 128)), SEEDS, r"^budgets=\[256, 128\] is not allowed: give them in strictly increasing"),
        (dict(budgets=(32, 256)), SEEDS, r"^budgets=\[32, 256\] is not allowed: the first must be at least 64"),
        (dict(max_rounds=0), SEEDS, r"^max_rounds=0"),
        (dict(plateau_rule=PlateauRule(3, 0.05, 0.01)), SEEDS, r"^plateau_window=3 is not allowed: .* at most 2"),
        (dict(plateau_rule=PlateauRule(2, 0.05, -0.1)), SEEDS, r"^plateau_min_rise=-0.1"),
        (dict(screen_max_steps=8), SEEDS, r"^screen_max_steps=8 must not exceed phase1_max_steps=4"),
        (dict(eval_every=3), SEEDS, r"^phase1_max_steps=4 must be a multiple of eval_every=3"),
        (dict(candidates=()), SEEDS, r"^candidates is empty"),
        (dict(candidates=TINY_CANDIDATES[:1] * 2), SEEDS, r"names a configuration twice"),
        (dict(plateau_seeds=()), SEEDS, r"^plateau_seeds=\[\]"),
        (dict(second_plateau_seeds=1), SEEDS, r"^second_plateau_seeds must be at least 2"),
        (
            dict(candidates=(candidates.parse("arithmetic:1@64x2"),), n_test=200),
            SEEDS,
            r"too few distinct instances for n_test=200 plus n_val=6",
        ),
        (dict(device="tpu"), SEEDS, r"^device='tpu'"),
        ({}, [0], r"^seeds=\[0\] is not allowed: .* at least 2"),
        ({}, [1, 1], r"^seeds=\[1, 1\] names a seed twice"),
    ],
)
def test_bad_settings_are_refused_before_any_work(change, seeds, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        ex.run(tiny_settings(**change), seeds, tmp_path / "runs", progress=False)
    assert not (tmp_path / "runs").exists()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The whole experiment at the smallest settings: a screen of 2 candidates, 2 plateaus; at the first, ProRL
    and N=64 under 2 seeds, the learning-rate grid (2x) on seed 0 and the grid's choice on seed 1; at the second,
    ProRL and N=64 under 2 seeds; every run evaluated at budgets of 128 and 256 generated samples."""
    root = tmp_path_factory.mktemp("laptop_rlvr")
    settings = tiny_settings()
    return settings, root, ex.run(settings, SEEDS, root, progress=False)


def chosen_folder(root, seed: int = 0):
    return ex.plateau_folder(root, tiny_settings().chosen(root), seed)


def snapshot(root) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(root)): (p.stat().st_mtime_ns, p.read_bytes()) for p in root.rglob("*") if p.is_file()}


def test_the_run_folder_holds_the_screen_the_plateaus_and_the_arms(tiny_run):
    settings, root, _ = tiny_run
    assert {p.name for p in root.iterdir()} == {ex.SETTINGS, ex.SCREEN, "configs"}
    chosen = settings.chosen(root)
    other = next(c for c in TINY_CANDIDATES if c != chosen)
    assert {p.name for p in (root / "configs").iterdir()} == {c.key for c in TINY_CANDIDATES}
    instances = pd.read_csv(ex.config_folder(root, chosen) / ex.INSTANCES)
    assert instances["split"].value_counts().to_dict() == {"test": settings.n_test, "val": settings.n_val}
    for p in settings.plateau_seeds:
        folder = ex.plateau_folder(root, chosen, p)
        for name in ("warm_start/config.json", ex.THEORY_SUPPORTS, ex.THEORY_BATCHES):
            assert (folder / name).is_file(), name
        phase1 = folder / ex.PHASE1
        record = json.loads((phase1 / plateau.PLATEAU).read_text())
        for name in ("arm.json", "metrics.csv", plateau.PLATEAU_EVAL, ex.FINAL_EVAL, "checkpoint/state.json"):
            assert (phase1 / name).is_file(), name
        assert (phase1 / f"regime_step{record['step']}.json").is_file()
        for arm, seed in [(a.key, s) for q, a, s in ex.plan(settings, SEEDS, root) if q == p]:
            run = folder / ex.ARMS / arm / f"seed{seed}"
            assert {"arm.json", "metrics.csv", "done.json", ex.FINAL_EVAL} <= {f.name for f in run.iterdir()}
            assert not (run / "checkpoint").exists()  # finished and evaluated: no weights kept
    # the candidate not chosen was screened only: one plateau, no arms
    assert [p.name for p in ex.config_folder(root, other).iterdir() if p.is_dir()] == ["plateau0"]
    assert not (ex.plateau_folder(root, other, 0) / ex.ARMS).exists()


def test_the_screen_measures_every_candidate_at_its_screen_plateau(tiny_run):
    settings, root, _ = tiny_run
    table = report.screen(root)
    issue_columns = ["task", "difficulty", "model_params", "plateau_pass1", "low_q_share", "share_negative_n16"]
    assert set(issue_columns + ["chosen", "qualifies", "mechanism"]) <= set(table.columns)
    assert table["candidate"].tolist() == [c.key for c in TINY_CANDIDATES] and table["chosen"].sum() == 1
    pd.testing.assert_frame_equal(ex.choose(table.drop(columns=["qualifies", "mechanism", "chosen"])), table)
    assert table.loc[table.chosen, "candidate"].item() == settings.chosen(root).key
    for c, row in zip(TINY_CANDIDATES, table.itertuples(index=False)):
        assert row.model_params == tiny.parameter_count(c.model) and row.task == "spell_backward"
        assert row.screen_steps <= settings.screen_max_steps
        phase1 = ex.plateau_folder(root, c, 0) / ex.PHASE1
        regime = json.loads((phase1 / f"regime_step{row.screen_steps}.json").read_text())
        held = np.load(phase1 / f"pass1_step{row.screen_steps}.npy")
        assert row.plateau_pass1 == pytest.approx(regime["pass1"]) == pytest.approx(held.mean())
        assert row.low_q_share == pytest.approx(regime["low_q_share"]) and 0 <= row.low_q_share <= 1
        assert row.share_negative_n16 == pytest.approx(regime["share_negative_n16"])
        assert regime["q_zero_share"] + regime["low_q_share"] + regime["q_one_share"] <= 1 + 1e-12


def test_phase1_continues_from_the_screen_to_its_plateau(tiny_run):
    settings, root, metrics = tiny_run
    screen_steps = int(report.screen(root).set_index("chosen").loc[True, "screen_steps"])
    for p in settings.plateau_seeds:
        phase1 = chosen_folder(root, p) / ex.PHASE1
        m = pd.read_csv(phase1 / "metrics.csv")
        record = json.loads((phase1 / plateau.PLATEAU).read_text())
        assert m["step"].tolist() == list(range(record["step"] + 1))  # one run, no restart at the screen's end
        assert record["step"] == json.loads((phase1 / "checkpoint" / "state.json").read_text())["step"]
        assert record["plateau"] or record["step"] == settings.phase1_max_steps
        if p == settings.plateau_seeds[0]:
            assert record["step"] >= screen_steps
        for k in range(2 * settings.plateau_rule.window - 1, record["step"]):  # no earlier step was a plateau
            earlier = plateau.smoothed_rise(phase1, settings.plateau_rule, upto=k)
            assert earlier is None or not earlier["plateau"]
        steps = m[m.step > 0]
        assert (np.diff(m["samples"]) == steps["rounds"] * 16 * settings.phase1_prompts).all()
        assert (steps["rounds"] <= settings.max_rounds).all()
    p1 = metrics[metrics.phase == 1]
    assert set(p1["plateau"]) == set(settings.plateau_seeds) and set(p1["lr"]) == {TINY_DESIGN.base_lr}


def test_a_phase1_cut_before_its_record_tests_first_and_recovers_a_cut_checkpoint_swap(tiny_run, tmp_path):
    """Interrupted after its last chunk but before plateau.json: the resumed phase 1 decides before training
    (it must not train past its plateau), also when the interruption fell inside a checkpoint swap."""
    settings, root, _ = tiny_run
    source = chosen_folder(root) / ex.PHASE1
    record = json.loads((source / plateau.PLATEAU).read_text())
    train, test, _ = ex.split(settings, settings.chosen(root))
    for swap in (False, True):
        folder = tmp_path / f"phase1_{swap}"
        shutil.copytree(source, folder)
        (folder / plateau.PLATEAU).unlink()
        if swap:
            os.replace(folder / "checkpoint", folder / "checkpoint.old")
        again = plateau.phase1(
            chosen_folder(root) / "warm_start",
            train,
            test,
            ex.phase1_arm(settings, 0),
            folder,
            settings.protocol,
            settings.plateau_rule,
            settings.phase1_max_steps,
        )
        assert again == record and json.loads((folder / plateau.PLATEAU).read_text()) == record
        assert json.loads((folder / "checkpoint" / "state.json").read_text())["step"] == record["step"]
        pd.testing.assert_frame_equal(pd.read_csv(folder / "metrics.csv"), pd.read_csv(source / "metrics.csv"))


def test_every_phase2_run_spends_its_budget_in_refilled_steps_of_its_designed_shape(tiny_run):
    settings, root, metrics = tiny_run
    planned = [(p, a.key, s) for p, a, s in ex.plan(settings, SEEDS, root)]
    main = [(0, k, s) for s in SEEDS for k in ("N16", "N64")]  # seeds before the grid's arms
    grid = [(0, k, 0) for k in ("N16_lr2x", "N64_lr2x")]
    tuned = []
    for arm in ex.paper_arms(settings):
        factor = ex.best_factor(root, settings.chosen(root), 0, arm, settings.design, SEEDS[0])
        assert factor in (1.0, 2.0)
        tuned += [(0, f"{arm.key}_lr2x", 1)] if factor == 2.0 else []
    further = [(1, k, s) for s in SEEDS for k in ("N16", "N64")]
    assert planned == main + further + grid + tuned  # seeds and plateaus before the grid's arms
    phase2 = metrics[metrics.phase == 2]
    assert sorted(set(zip(phase2.plateau, phase2.arm, phase2.seed))) == sorted(planned)
    last = settings.budgets[-1]
    for p, key, seed in planned:
        n, prompts, lr = TINY_ARMS[key]
        folder = chosen_folder(root, p) / ex.ARMS / key / f"seed{seed}"
        m = pd.read_csv(folder / "metrics.csv")
        steps = m[m.step > 0]
        done = json.loads((folder / "done.json").read_text())
        assert done["samples"] == m["samples"].iloc[-1] >= last > m["samples"].iloc[-2]  # stops at the first step
        # every round generates N x prompts samples; the kept batch is full unless the cap stopped the refill
        assert (np.diff(m["samples"]) == steps["rounds"] * n * prompts).all(), key
        assert steps["rounds"].between(1, settings.max_rounds).all()
        assert (steps.loc[steps.capped == 0, "kept_samples"] == n * prompts).all()
        assert (steps.loc[steps.capped == 1, "kept_samples"] < n * prompts).all()
        assert (steps.loc[steps.capped == 1, "rounds"] == settings.max_rounds).all()
        trained = steps[steps.updates > 0]
        assert trained["grad_norm"].gt(0).all() and steps.loc[steps.updates == 0, "grad_norm"].isna().all()
        recorded = json.loads((folder / "arm.json").read_text())
        assert (recorded["step"]["n_rollouts"], recorded["prompts_per_step"]) == (n, prompts)
        assert recorded["step"]["max_rounds"] == settings.max_rounds
        assert recorded["lr"] == pytest.approx(lr, rel=1e-12) and recorded["eval_budgets"] == list(settings.budgets)
        # evaluated at step 0 and at the first step reaching each budget, on the test and the validation split
        want = [0] + [int(m.loc[m.samples >= b, "step"].iloc[0]) for b in settings.budgets]
        assert m.dropna(subset=["pass1"])["step"].tolist() == want
        assert [k for k, _ in plateau.pass1_files(folder)] == want == [k for k, _ in plateau.pass1_files(folder, "val")]
        for k, path in plateau.pass1_files(folder):
            values, row = np.load(path), m.set_index("step").loc[k]
            assert values.shape == (settings.n_test,) and set(values * 4) <= set(range(5))  # k of 4 samples
            assert row["pass1"] == pytest.approx(values.mean()) and row["pass1_se"] == pytest.approx(
                standard_error(values)
            )
            assert np.load(folder / f"val_step{k}.npy").shape == (settings.n_val,)
            assert row["val_pass1"] == pytest.approx(np.load(folder / f"val_step{k}.npy").mean())
        rows = phase2[(phase2.plateau == p) & (phase2.arm == key) & (phase2.seed == seed)]
        assert (rows["N"].iloc[0], rows["prompts"].iloc[0]) == (n, prompts) and rows["lr"].iloc[0] == pytest.approx(lr)
    assert phase2["updates"].sum() > 0  # rewards of 0 and 1 in the same group: the arms did learn from something
    # equal generated samples: at each budget every run is within one step (max_rounds rounds) of the widest arm
    at = report.at_budgets(report.Run(settings, SEEDS, root, metrics))
    spread = at.groupby(["plateau", "budget"])["samples"].agg(lambda s: s.max() - s.min())
    assert (spread <= settings.max_rounds * 64).all()
    # seed 0 evaluates with phase 1's seed: every seed-0 arm's step 0 is the plateau checkpoint's last evaluation
    start = plateau.pass1_files(chosen_folder(root) / ex.PHASE1)[-1][1]
    for key in TINY_ARMS:
        np.testing.assert_array_equal(
            np.load(chosen_folder(root) / ex.ARMS / key / "seed0" / "pass1_step0.npy"), np.load(start)
        )


def test_final_evaluations_hold_greedy_and_pass_at_k_counts(tiny_run, monkeypatch):
    settings, root, _ = tiny_run
    for p in settings.plateau_seeds:
        folder = chosen_folder(root, p)
        counts = np.load(folder / ex.PHASE1 / plateau.PLATEAU_EVAL)["counts"]
        assert counts.shape == (settings.n_test,) and ((counts >= 0) & (counts <= settings.passk_samples)).all()
        items = ex.hard_items(counts, settings)
        np.testing.assert_array_equal(
            items, np.flatnonzero(counts < settings.passk_samples)[: settings.passk_instances]
        )
        finals = [folder / ex.PHASE1] + [
            folder / ex.ARMS / a.key / f"seed{s}" for q, a, s in ex.plan(settings, SEEDS, root) if q == p
        ]
        for final in finals:
            with np.load(final / ex.FINAL_EVAL) as f:
                assert set(f.files) == {"greedy", "items", "counts"}
                assert f["greedy"].shape == (settings.n_test,) and set(f["greedy"]) <= {0, 1}
                np.testing.assert_array_equal(f["items"], items)
                assert f["counts"].shape == items.shape and f["counts"].dtype == np.int64
                assert ((f["counts"] >= 0) & (f["counts"] <= settings.passk_samples)).all()
                k1 = [stats.unbiased_pass_at_k(settings.passk_samples, int(c), 1) for c in f["counts"]]
                np.testing.assert_allclose(k1, f["counts"] / settings.passk_samples)
    # evaluation in chunks of EVAL_ROWS responses: greedy answers do not depend on the chunking
    policy, tok = tiny.load(chosen_folder(root) / ex.PHASE1 / "checkpoint")
    _, test, _ = ex.split(settings, settings.chosen(root))
    monkeypatch.setattr(run_module, "EVAL_ROWS", 5)
    greedy = correct_counts(policy, tok, test, 1, settings.protocol, 0, greedy=True)
    np.testing.assert_array_equal(greedy, np.load(chosen_folder(root) / ex.PHASE1 / ex.FINAL_EVAL)["greedy"])
    sampled = correct_counts(policy, tok, test, 4, settings.protocol, 3)
    assert sampled.shape == (settings.n_test,) and sampled.max() <= 4
    np.testing.assert_array_equal(sampled, correct_counts(policy, tok, test, 4, settings.protocol, 3))


def test_theorem1_on_real_batches(tiny_run):
    from brorl_lib.rlvr import mass_balance
    from brorl_lib.theory import formulas as theory

    settings, root, _ = tiny_run
    supports = pd.read_csv(chosen_folder(root) / ex.THEORY_SUPPORTS)
    batches = pd.read_csv(chosen_folder(root) / ex.THEORY_BATCHES)
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
    chosen = ex.arm_settings(settings, arm, 0)  # evaluated at each budget, refilled steps
    train, test, val = ex.split(settings, settings.chosen(root))
    start = chosen_folder(root) / ex.PHASE1 / "checkpoint"
    kwargs = dict(protocol=settings.protocol, progress=False, validation=val)
    cut = run_arm(start, train, test, chosen, tmp_path / "cut", max_steps=1, **kwargs)
    assert cut["step"].max() == 1 and not (tmp_path / "cut" / "done.json").exists()
    run_arm(start, train, test, chosen, tmp_path / "cut", **kwargs)
    whole = run_arm(start, train, test, chosen, tmp_path / "whole", **kwargs)
    own = pd.read_csv(chosen_folder(root) / ex.ARMS / "N16" / "seed0" / "metrics.csv")
    pd.testing.assert_frame_equal(whole.drop(columns=TIMING), own.drop(columns=TIMING))  # the experiment's own run
    resumed = pd.read_csv(tmp_path / "cut" / "metrics.csv")
    assert whole["updates"].sum() > 0 and whole["step"].max() > 1
    pd.testing.assert_frame_equal(whole.drop(columns=TIMING), resumed.drop(columns=TIMING))
    assert_same_weights(tmp_path / "whole" / "checkpoint", tmp_path / "cut" / "checkpoint")


def test_arm_resumes_bit_for_bit_even_when_cut_during_a_checkpoint_swap(tiny_run, tmp_path):
    run_settings, root, _ = tiny_run
    train, test, val = ex.split(run_settings, run_settings.chosen(root))
    step = StepSettings(n_rollouts=4, max_new_tokens=5, max_rounds=2)
    settings = ArmSettings("arm", step, 4, 1e-3, 160, 2, 2, seed=5, eval_budgets=(40,))
    kwargs = dict(protocol=EvalProtocol(2, 0.6, 0.95, 5), progress=False, validation=val[:3])
    start = chosen_folder(root) / "warm_start"  # no optimizer state: a fresh AdamW
    whole = run_arm(start, train, test, settings, tmp_path / "whole", **kwargs)
    assert whole["updates"].sum() > 0  # the arm trained, so resuming has something to reproduce
    assert whole["samples"].iloc[-1] >= 160 > whole["samples"].iloc[-2] and whole["step"].max() > 4
    first = run_arm(start, train, test, settings, tmp_path / "cut", max_steps=3, **kwargs)
    assert first["step"].max() == 3 and not (tmp_path / "cut" / "done.json").exists()
    os.replace(tmp_path / "cut" / "checkpoint", tmp_path / "cut" / "checkpoint.old")  # cut during a swap
    resumed = run_arm(start, train, test, settings, tmp_path / "cut", **kwargs)
    pd.testing.assert_frame_equal(whole.drop(columns=TIMING), resumed.drop(columns=TIMING))
    evaluated = whole.dropna(subset=["pass1"])["step"].tolist()
    assert len(evaluated) >= 3 and evaluated[0] == 0
    for k in evaluated:
        for prefix in ("pass1", "val"):
            np.testing.assert_array_equal(
                np.load(tmp_path / "whole" / f"{prefix}_step{k}.npy"),
                np.load(tmp_path / "cut" / f"{prefix}_step{k}.npy"),
            )
    assert_same_weights(tmp_path / "whole" / "checkpoint", tmp_path / "cut" / "checkpoint")
    with pytest.raises(ValueError, match="no model at"):
        run_arm(tmp_path / "nowhere", train, test, settings, tmp_path / "other", **kwargs)


def test_a_rerun_changes_nothing(tiny_run):
    settings, root, metrics = tiny_run
    before = snapshot(root)
    again = ex.run(settings, SEEDS, root, progress=False)
    assert snapshot(root) == before  # no file rewritten, not even with the same bytes
    pd.testing.assert_frame_equal(metrics, again)
    pd.testing.assert_frame_equal(metrics, ex.collect(settings, SEEDS, root))


@pytest.mark.parametrize(
    "change, differs",
    [
        (dict(warm_start_steps=101), "warm_start_steps"),
        (dict(protocol=EvalProtocol(8, 0.6, 0.95, 5)), "protocol"),
        (dict(n_test=10), "n_test"),
        (dict(max_rounds=3), "max_rounds"),
    ],
)
def test_a_changed_shared_setting_is_refused_by_name(tiny_run, change, differs):
    settings, root, _ = tiny_run
    before = snapshot(root)
    with pytest.raises(ValueError, match=rf"holds a run with other settings \(differs in \['{differs}'\]\)"):
        ex.run(tiny_settings(**change), SEEDS, root, progress=False)
    assert snapshot(root) == before


def test_a_phase2_change_keeps_the_plateaus_but_not_an_arm_run_with_other_settings(tiny_run):
    settings, root, _ = tiny_run
    before = snapshot(root)
    first = chosen_folder(root) / ex.ARMS / "N16" / "seed0"
    differs = r"\(differs in \['eval_budgets', 'sample_budget'\]\)"
    with pytest.raises(ValueError, match=rf"^{re.escape(str(first))} holds an arm with other settings {differs}"):
        ex.run(tiny_settings(budgets=(128, 512)), SEEDS, root, progress=False)  # the plateaus are accepted
    # phase 1 also uses the design's base_lr: a phase-2-only change of it must not reuse phase 1
    with pytest.raises(ValueError, match=r"phase1 holds phase 1 with other settings \(differs in \['lr'\]\)"):
        ex.run(tiny_settings(design=dataclasses.replace(TINY_DESIGN, base_lr=2e-3)), SEEDS, root, progress=False)
    assert snapshot(root) == before


def test_the_micro_batch_is_not_part_of_a_folders_settings_but_the_update_is():
    arm = ArmSettings("a", StepSettings(4, micro_batch=64), 4, 1e-3, 100, 0, 10, 0)
    record = ex._as_record(arm)
    assert "micro_batch" not in record["step"] and record["step"]["n_rollouts"] == arm.step.n_rollouts
    other = dataclasses.replace(arm, step=dataclasses.replace(arm.step, micro_batch=8))
    assert ex._as_record(other) == record
    assert ex._as_record(dataclasses.replace(arm, step=dataclasses.replace(arm.step, n_rollouts=8))) != record


# --- notebook 04's parameters ---
def test_notebook_config_builds_the_experiment():
    defaults = LaptopRLVRConfig.defaults()
    cfg = LaptopRLVRConfig(**defaults)
    settings = cfg.settings()
    assert [c.spec for c in settings.candidates] == defaults["candidates"] and cfg.runs_path().is_absolute()
    assert settings.protocol == EvalProtocol(16, 0.6, 0.95, defaults["max_new_tokens"])  # paper Appendix D
    assert settings.plateau_rule == PlateauRule(
        defaults["plateau_window"], defaults["plateau_alpha"], defaults["plateau_min_rise"]
    )
    assert settings.budgets == tuple(defaults["budgets"]) and settings.max_rounds == defaults["max_rounds"]
    assert settings.plateau_seeds == tuple(defaults["plateau_seeds"])
    assert settings.design == arm_design.ArmDesign(
        defaults["prompts"],
        defaults["base_lr"],
        tuple(defaults["arm_rollouts"]),
        tuple(defaults["base_lr_rollouts"]),
        defaults["batch_control"],
        tuple(defaults["lr_pilot_factors"]),
    )


@pytest.mark.parametrize(
    "change, message",
    [
        # what issue 25 asks to refuse before any training, each naming its parameter
        ({"plateau_window": 9, "phase1_max_steps": 16}, r"^plateau_window=9 is not allowed: .* allowed at most 8"),
        ({"plateau_window": 7}, r"^plateau_window=7 is out of range"),
        ({"budgets": [8192, 4096]}, r"^budgets=\[8192, 4096\] is not allowed: give them in strictly increasing"),
        ({"budgets": [4096, 4096]}, r"^budgets=\[4096, 4096\] is not allowed: give them in strictly increasing"),
        ({"budgets": [256, 8192]}, r"^budgets=\[256, 8192\] is not allowed: the first must be at least 512"),
        ({"max_rounds": 0}, r"^max_rounds=0 is out of range"),
        ({"band_edges": [0.5, 1.0]}, r"^band_edges=\[0.5, 1.0\] is not allowed: every edge lies in \(0, 1\)"),
        ({"band_edges": [0.0, 0.5]}, r"^band_edges item=0.0 is not allowed"),
        ({"band_edges": [0.5, 1.5]}, r"^band_edges item=1.5 is out of range"),
        ({"band_edges": [0.5, 0.0625]}, r"^band_edges=\[0.5, 0.0625\] is not allowed: give them in increasing order"),
        # and the rest of the declaration
        ({"candidates": ["arithmetic:4@64x2"]}, r"^candidates item level of arithmetic=4"),
        ({"candidates": ["x@64x2"]}, r"^candidates item='x@64x2' is not allowed: write"),
        ({"candidates": "spell_backward:1@64x2"}, r"^candidates='spell_backward:1@64x2' is not allowed"),
        ({"second_plateau_seeds": 3}, r"^second_plateau_seeds=3 is not allowed: at most len\(seeds\)=2"),
        ({"screen_max_steps": 64, "phase1_max_steps": 32}, r"^screen_max_steps=64 must not exceed"),
        ({"plateau_seeds": []}, r"^plateau_seeds=\[\] is not allowed"),
        ({"arm_rollouts": [32, 512]}, r"^arm_rollouts=\[32, 512\] must include the ProRL arm's N=16"),
        ({"seeds": [0, 0]}, r"^seeds=\[0, 0\] is not allowed: 0 is listed twice"),
        ({"seeds": [0]}, r"^seeds=\[0\] is not allowed"),
        ({"prompts": 6}, r"^prompts=6 is not allowed: must be a multiple of 4"),
        ({"lr_pilot_factors": [1.0]}, r"^lr_pilot_factors must not contain 1"),
        ({"eval_top_p": 0.0}, r"^eval_top_p=0.0 is not allowed"),
        ({"runs_dir": " "}, r"^runs_dir=' ' is not allowed: expected a non-empty string"),
    ],
)
def test_notebook_config_rejects_bad_parameters_by_name(change, message):
    with pytest.raises(ValueError, match=message):
        LaptopRLVRConfig(**{**LaptopRLVRConfig.defaults(), **change})


# --- the report ---
def test_pass1_bands_cover_zero_low_q_the_middle_and_solved():
    edges = [1 / 16, 0.5]
    labels = report.band_labels(edges)
    assert labels == ["0", "(0, 0.0625)", "[0.0625, 0.5)", "[0.5, 1)", "1"]
    q = np.array([0.0, 0.01, 0.0625, 0.3, 0.5, 0.99, 1.0])
    assert report.assign_bands(q, edges).tolist() == [labels[i] for i in (0, 1, 2, 2, 3, 3, 4)]
    three = report.band_labels([0.1, 0.3, 0.7])
    assert len(three) == 6 and three[2] == "[0.1, 0.3)"
    assert report.assign_bands(np.array([0.05, 0.2, 0.5, 0.8]), [0.1, 0.3, 0.7]).tolist() == three[1:5]


def test_paper_pairs_put_table1_at_equal_samples_in_shares_of_remaining_error():
    pairs = report.paper_pairs()
    assert len(pairs) == 3 and set(pairs["class"]) == {"reported"}
    # the longest ProRL row (+535 steps, 10.4M samples) against the BroRL row closest in samples (+107, 11.2M)
    assert set(pairs["comparison"]) == {"BroRL +107 vs ProRL +535 steps"}
    math_row = pairs.set_index("source").loc["paper Table 1 (math)"]
    assert math_row["delta"] == pytest.approx((62.62 - 62.02) / 100)
    assert math_row["remaining_error"] == pytest.approx(1 - 0.6169)
    np.testing.assert_allclose(pairs["share_of_remaining"], pairs["delta"] / pairs["remaining_error"])
    assert pairs["share_of_remaining"].between(0.01, 0.035).all()  # the paper's gains: 1-3% of the remaining error


def test_report_tables_from_a_run(tiny_run):
    """The verdict compares seed by seed at every budget and plateau; the other tables line up with the files."""
    settings, root, metrics = tiny_run
    run = report.Run(settings, SEEDS, root, metrics)
    assert run.candidate == settings.chosen(root) and run.main == 0
    verdict = report.verdict(run)
    rule = verdict[verdict.comparison == "rule lr"]
    combos = {(p, b) for p in settings.plateau_seeds for b in settings.budgets}
    assert set(zip(rule.plateau, rule.budget)) == combos
    assert set(rule.arm) == {"N16", "N64"} and set(rule.seeds) == {len(SEEDS)}
    assert verdict["endpoint"].tolist() == (verdict["budget"] == settings.budgets[-1]).tolist()
    at = report.at_budgets(run).set_index(["plateau", "budget", "arm", "seed"])["pass1"]
    for row in rule[rule.arm != report.BASELINE].itertuples():
        diffs = [at[(row.plateau, row.budget, row.arm, s)] - at[(row.plateau, row.budget, "N16", s)] for s in SEEDS]
        assert row.delta_vs_prorl == pytest.approx(np.mean(diffs))  # paired per seed, the seed is the unit
        assert row.ci_low <= row.delta_vs_prorl <= row.ci_high
        assert row.verdict == report.direction(pd.Series(row._asdict()))
    best = verdict[verdict.comparison == "best lr"]
    assert len(best) == 2 and set(best.plateau) == {0} and set(best.budget) == {settings.budgets[-1]}
    assert set(report.best_factors(run)) == {"N16", "N64"}
    plateaus = report.plateau_table(run)
    assert plateaus["plateau"].tolist() == list(settings.plateau_seeds)
    for r in plateaus.itertuples(index=False):
        record = json.loads((chosen_folder(root, r.plateau) / ex.PHASE1 / plateau.PLATEAU).read_text())
        assert r.plateau_step == record["step"] and r.ended_by == ("plateau test" if record["plateau"] else "step cap")
        assert r.continuation_samples >= settings.budgets[-1] and r.ci_low <= r.continuation_gain <= r.ci_high
        assert r.confirmed == (r.continuation_gain < report.CONFIRM_SE * r.continuation_se)
    bands = report.bands(run, [1 / 16, 0.5])
    prorl = bands[bands.arm == report.BASELINE]
    assert prorl["instances"].sum() == settings.n_test and (prorl["delta_vs_prorl"] == 0).all()
    assert set(bands.band) <= set(report.band_labels([1 / 16, 0.5])) and set(bands.arm) == {"N16", "N64"}
    table1 = report.table1(run)
    assert table1["arm"].tolist() == ["N16", "N64"] and (table1["samples"] >= settings.budgets[-1]).all()
    assert table1["kept_fraction"].between(0, 1).all()
    throughput = report.throughput(run)
    assert throughput["generation_rounds"].between(1, settings.max_rounds).all()
    assert throughput["kept_fraction"].between(0, 1).all() and throughput["capped_steps"].between(0, 1).all()
    grid = report.lr_grid(run)
    assert len(grid) == 4 and grid.groupby("N")["chosen"].sum().tolist() == [1, 1] and grid["val_pass1"].notna().all()
    curve = report.phase1_curve(run, 0)
    assert curve["plateau"].sum() == 1 and curve["step"].iloc[0] == 0
    checks = report.design_checks(run, report.screen(root), plateaus, verdict).set_index("check")
    assert checks["met"].map(lambda v: isinstance(v, (bool, np.bool_))).all()
    assert not checks.loc[f"seeds per arm >= {report.MIN_SEEDS} at the main plateau", "met"]  # 2 seeds here
    assert checks.loc["equal generated samples at each budget (within one step of the widest arm)", "met"]
    beside = report.beside_paper(run, verdict, plateaus)
    laptop = beside[beside["class"] == "scaled-down"]
    assert len(laptop) == len(settings.plateau_seeds) and len(beside) == len(laptop) + 3
    np.testing.assert_allclose(laptop["share_of_remaining"], laptop["delta"] / laptop["remaining_error"])
    greedy, passk = report.final_evals(run)
    assert set(greedy["arm"]) == {ex.PHASE1, *metrics.loc[(metrics.phase == 2) & (metrics.plateau == 0), "arm"]}
    assert passk["k"].max() <= settings.passk_samples and passk["pass_at_k"].dropna().between(0, 1).all()
    assert report.greedy_table(run, greedy)["arm"].tolist() == ["N16", "N64"]
    assert report.knowledge_shrinkage(run)[["dropped_pct", "improved_pct"]].stack().between(0, 100).all()
    means = report.mean_curves(report.curves(run), settings.budgets)
    assert set(means.budget) == {0, *settings.budgets} and (means["seeds"] <= len(SEEDS)).all()
    assert set(report.stratum_curves(run)["budget"]) == set(settings.budgets)
    assert report.protocol(run)["test_instances"].item() == settings.n_test
    _, _, summary = report.theory_tables(run)
    assert summary["N"].tolist() == list(ex.THEORY_ROLLOUTS)
