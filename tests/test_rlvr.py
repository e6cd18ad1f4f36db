"""The laptop-scale RLVR pieces (notebook 04): tokenizer, model, tasks and their binary reward, top-p sampling,
warm start, the verl pieces, one RL step with dynamic sampling's refill, the screen's candidates, the plateau test,
the statistics, and one tiny phase 1 (continued past a step cap, resumed when cut) whose checkpoint starts arms that
resume bit for bit. The countdown study itself: tests/test_rlvr_countdown.py."""

import copy
import dataclasses
import json
import math
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from scipy import stats as sps

from brorl_lib.core import stats
from brorl_lib.facts import setup as paper_setup
from brorl_lib.facts.protocol import SamplingParams
from brorl_lib.models import tiny
from brorl_lib.models.char_tokenizer import build_tokenizer
from brorl_lib.rlvr import algorithm as alg
from brorl_lib.rlvr import candidates, plateau, sampling, tasks, warm_start
from brorl_lib.rlvr import run as run_module
from brorl_lib.rlvr import step as step_module
from brorl_lib.rlvr.plateau import PlateauRule
from brorl_lib.rlvr.run import TRAINER_STATE, ArmSettings, correct_counts, run_arm, standard_error
from brorl_lib.rlvr.sampling import encode_prompts, generate, nucleus
from brorl_lib.rlvr.step import StepSettings, rl_step

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


def test_model_saves_in_hf_format_and_missing_warm_start_is_clear(tok, model, tmp_path):
    tiny.save(model, tok, tmp_path / "m")
    loaded, tok2 = tiny.load(tmp_path / "m")
    x = encode_prompts(tok, ["7+5="])[0]
    torch.testing.assert_close(loaded(x).logits, model(x).logits)
    assert len(tok2) == len(tok)
    with pytest.raises(ValueError, match="no model at"):
        tiny.load(tmp_path / "missing")
    assert candidates.parse("arithmetic:3@128x3").model_params == sum(p.numel() for p in model.parameters())


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
    with pytest.raises(ValueError, match="^top_p=0"):
        SamplingParams(4, 0.6, 0.0, 6)


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
    losses = tiny.train_sft(model, len(train), warm_start.batches(tok, train), steps=60, batch_size=16, lr=3e-3, seed=0)
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:5])
    batch = warm_start.sft_batch(tok, train[:1])
    labelled = batch["labels"][0][batch["labels"][0] != tiny.IGNORE]
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
    tiny.train_sft(
        model, len(train), warm_start.batches(tok, train), steps=100, batch_size=32, lr=3e-3, seed=0
    )  # well short of perfect
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    settings = StepSettings(n_rollouts=16, max_new_tokens=8)  # max_rounds=1: no refill
    draw, calls = cycling(train)
    steps = [rl_step(model, tok, opt, draw, 8, settings, gen) for _ in range(80)]
    assert calls == [8] * 80
    for m in steps:  # what every step does, whatever its samples drew
        assert (m["samples"], m["rounds"]) == (128, 1)
        assert m["kept_samples"] == round(m["pass_rate"] * 128)  # one round: the kept rows are the mixed groups'
        assert m["updates"] == (2 if m["kept_samples"] else 0)  # two mini-batches, or no update without signal
    rewards = [m["reward_mean"] for m in steps]
    assert set(rewards) <= {r / 128 for r in range(129)}  # binary rewards: a share of the 128 samples
    assert 0 < np.mean([m["pass_rate"] for m in steps]) <= 1  # one step may keep no group (seen: 3 of 80)
    # averages over 20 steps, not one step's value: measured rises 0.097 (AVX-512), 0.095 (AVX2), 0.150 (no SIMD)
    assert np.mean(rewards[-20:]) > np.mean(rewards[:20]) + 0.05


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
    memory, not the update: the same update and gradient norm as one pass, to float precision. SGD's step is
    linear in the gradient; AdamW's first steps are about the learning rate whatever a gradient's size, so float
    noise in a near-zero gradient moves its weight by up to that (5.6e-3 of the largest update once, on AVX2)."""
    train, _ = tasks.make_split("spell_backward", 1, 20, 4, seed=0)
    results = []
    for micro in (1024, 3):
        scripted(monkeypatch, [[MIXED] * 8])
        policy = tiny.build_model(tiny.TinyModelShape(), tok, seed=0)
        start = [t.detach().clone() for t in policy.parameters()]
        opt = torch.optim.SGD(policy.parameters(), lr=0.1)
        step = StepSettings(n_rollouts=4, max_new_tokens=5, mini_batches=2, micro_batch=micro)
        m = rl_step(policy, tok, opt, cycling(train)[0], 8, step, torch.Generator().manual_seed(0))
        results.append((m["grad_norm"], [t.detach() - s for t, s in zip(policy.parameters(), start, strict=True)]))
    (norm_one, one), (norm_micro, micro) = results
    assert norm_micro == pytest.approx(norm_one, rel=1e-5)
    largest = max(float(u.abs().max()) for u in one)
    for a, b in zip(one, micro, strict=True):
        # measured: 7e-6 of the largest update with AVX-512, AVX2 and plain kernels (the weights' own rounding)
        torch.testing.assert_close(b, a, atol=1e-4 * largest, rtol=0)
    with pytest.raises(ValueError, match="micro_batch"):
        StepSettings(4, micro_batch=0)


@pytest.mark.parametrize("kept_all", [True, False])
def test_kl_and_entropy_are_logged_on_every_generated_row_beside_the_kept_rows(tok, model, monkeypatch, kept_all):
    """KL to the reference and entropy over every generated token, and the same on the kept batch: equal when every
    group is kept, apart when solved groups are dropped; against the policy's own weights both KLs are zero."""
    train, _ = tasks.make_split("spell_backward", 1, 20, 4, seed=0)
    step = StepSettings(n_rollouts=4, max_new_tokens=5, max_rounds=1)
    reference = tiny.build_model(tiny.TinyModelShape(), tok, seed=1)
    results = {}
    for name, ref in (("other", reference), ("self", copy.deepcopy(model))):
        scripted(monkeypatch, [[MIXED] * 4] if kept_all else [[MIXED, ALL_RIGHT] * 2])
        policy = copy.deepcopy(model)
        opt = torch.optim.AdamW(policy.parameters(), lr=1e-3)
        results[name] = rl_step(policy, tok, opt, cycling(train)[0], 4, step, torch.Generator().manual_seed(0), ref)
    m = results["other"]
    assert m["kept_samples"] == (16 if kept_all else 8) and m["samples"] == 16
    for pair in (("kl_ref_all", "kl_ref"), ("entropy", "entropy_kept")):
        if kept_all:
            assert m[pair[0]] == pytest.approx(m[pair[1]], abs=1e-5)
        else:
            assert abs(m[pair[0]] - m[pair[1]]) > 1e-4
    assert m["kl_ref_all"] > 0.01 and m["entropy"] > 0
    assert results["self"]["kl_ref_all"] == pytest.approx(0, abs=1e-5)
    assert results["self"]["kl_ref"] == pytest.approx(0, abs=1e-5)


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


def write_evaluations(folder, series: list[np.ndarray], every: int = 10, prefix: str = "pass1") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for k, values in enumerate(series):
        np.save(folder / f"{prefix}_step{k * every}.npy", values)


def test_smoothed_rise_declares_a_plateau_only_when_the_rises_upper_bound_is_below_min_rise(tmp_path):
    """Per instance, the mean of the last window of evaluations minus the window before it; a plateau when the
    one-sided 95% upper bound of the mean rise is below min_rise, overall and in every band."""
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, size=200)
    rule = PlateauRule(window=4, alpha=0.05, min_rise=0.01, bands=(0.0, 0.5, 1.0))

    def noisy(level: float, sd: float = 0.05) -> np.ndarray:
        return np.clip(base + level + rng.normal(0, sd, size=base.size), 0, 1)

    write_evaluations(tmp_path / "flat", [noisy(0.0, sd=0.02) for _ in range(8)])
    write_evaluations(tmp_path / "flat", [noisy(0.3)], prefix="val")  # validation files are not the test's
    assert plateau.smoothed_rise(tmp_path / "flat", rule, upto=60) is None  # 7 evaluations: fewer than two windows
    flat = plateau.smoothed_rise(tmp_path / "flat", rule)
    assert flat["plateau"] and flat["step"] == 70 and flat["rise_upper"] < 0.01
    files = [np.load(p) for _, p in plateau.pass1_files(tmp_path / "flat")]
    assert flat["smoothed_pass1"] == pytest.approx(np.mean(files[4:]))
    rise = np.mean(files[4:], axis=0) - np.mean(files[:4], axis=0)
    assert flat["rise"] == pytest.approx(rise.mean())
    bound = rise.mean() + sps.t.ppf(0.95, rise.size - 1) * rise.std(ddof=1) / np.sqrt(rise.size)
    assert flat["rise_upper"] == pytest.approx(bound)
    assert sum(b["prompts"] for b in flat["bands"]) == 200 and all(b["flat"] for b in flat["bands"])
    write_evaluations(tmp_path / "rising", [noisy(0.02 * k) for k in range(8)])
    rising = plateau.smoothed_rise(tmp_path / "rising", rule)
    assert not rising["plateau"] and rising["rise"] == pytest.approx(0.08, abs=0.01)
    # a rise that cannot be told from zero is no plateau while its upper bound is above min_rise
    write_evaluations(tmp_path / "unclear", [noisy(0.002 * k, sd=0.4) for k in range(8)])
    unclear = plateau.smoothed_rise(tmp_path / "unclear", rule)
    assert not unclear["plateau"] and unclear["rise"] - 2 * unclear["rise_se"] < 0 < unclear["rise_upper"] - 0.01
    # a rise smaller than min_rise, measured precisely, is flat; with a smaller min_rise it is not
    write_evaluations(tmp_path / "creeping", [noisy(0.001 * k, sd=0.01) for k in range(8)])  # a rise of 0.004
    assert plateau.smoothed_rise(tmp_path / "creeping", rule)["plateau"]
    assert not plateau.smoothed_rise(tmp_path / "creeping", dataclasses.replace(rule, min_rise=0.001))["plateau"]
    # flat on average but rising in one band (falling in the other): no plateau, and the band says which
    low = base < 0.5
    write_evaluations(tmp_path / "mixed", [base + np.where(low, 0.02, -0.02) * k for k in range(8)])
    mixed = plateau.smoothed_rise(tmp_path / "mixed", rule)
    assert not mixed["plateau"] and [b["flat"] for b in mixed["bands"]] == [False, True]
    # exactly flat on every instance (no variance) is a plateau
    write_evaluations(tmp_path / "solved", [np.ones(50)] * 8)
    assert plateau.smoothed_rise(tmp_path / "solved", rule)["plateau"]
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
        loss = tiny.sft_loss(model, warm_start.sft_batch(tok, train[4 * k : 4 * k + 4]))
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
    protocol = SamplingParams(2, 0.6, 0.95, 5)
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


# --- a tiny phase 1, and arms from its checkpoint ---
PROTOCOL = SamplingParams(4, 0.6, 0.95, 5)
PHASE1_RULE = PlateauRule(window=2, alpha=0.05, min_rise=0.01)
PHASE1_STEPS = (2, 4)  # a short cap first (as a screen's), then the longer one it continues to


@pytest.fixture(scope="module")
def phase1_run(tmp_path_factory):
    """A warm start and a phase 1 (ProRL: N=16 x 4 prompts, refilled for up to 2 rounds) at the smallest settings,
    capped at 2 steps and then continued to its plateau or 4 steps: the start of the arms below."""
    root = tmp_path_factory.mktemp("phase1")
    train, held = tasks.make_split("spell_backward", 1, 60, 18, seed=0)
    data = (train, held[:12], held[12:])  # training, test and validation instances
    start = plateau.warm_start_model(candidates.shape(64, 2), train, 100, 3e-3, 0, root / "warm_start")
    step = StepSettings(n_rollouts=16, temperature=1.0, max_new_tokens=5, mini_batches=2, max_rounds=2)
    arm = ArmSettings("phase 1", step, 4, 1e-3, sample_budget=10**15, eval_every=1, checkpoint_every=1, seed=0)
    capped = [plateau.phase1(start, *data[:2], arm, root / "phase1", PROTOCOL, PHASE1_RULE, k) for k in PHASE1_STEPS]
    return root, arm, data, capped


def test_phase1_continues_from_a_lower_step_cap_to_its_plateau(phase1_run):
    root, arm, _, (first, record) = phase1_run
    phase1 = root / "phase1"
    assert first["step"] == first["cap"] == PHASE1_STEPS[0] and record["cap"] == PHASE1_STEPS[1]
    assert record == json.loads((phase1 / plateau.PLATEAU).read_text())
    m = pd.read_csv(phase1 / "metrics.csv")
    assert m["step"].tolist() == list(range(record["step"] + 1))  # one run, no restart at the first cap
    assert record["step"] == json.loads((phase1 / "checkpoint" / "state.json").read_text())["step"]
    assert record["plateau"] or record["step"] == PHASE1_STEPS[1]
    assert record["step"] >= first["step"]
    for k in range(2 * PHASE1_RULE.window - 1, record["step"]):  # no earlier step was a plateau
        earlier = plateau.smoothed_rise(phase1, PHASE1_RULE, upto=k)
        assert earlier is None or not earlier["plateau"]
    steps = m[m.step > 0]
    assert (np.diff(m["samples"]) == steps["rounds"] * 16 * arm.prompts_per_step).all()
    assert (steps["rounds"] <= arm.step.max_rounds).all()


def test_a_phase1_cut_before_its_record_tests_first_and_recovers_a_cut_checkpoint_swap(phase1_run, tmp_path):
    """Interrupted after its last chunk but before plateau.json: the resumed phase 1 decides before training
    (it must not train past its plateau), also when the interruption fell inside a checkpoint swap."""
    root, arm, (train, test, _), (_, record) = phase1_run
    source = root / "phase1"
    for swap in (False, True):
        folder = tmp_path / f"phase1_{swap}"
        shutil.copytree(source, folder)
        (folder / plateau.PLATEAU).unlink()
        if swap:
            os.replace(folder / "checkpoint", folder / "checkpoint.old")
        again = plateau.phase1(root / "warm_start", train, test, arm, folder, PROTOCOL, PHASE1_RULE, PHASE1_STEPS[1])
        assert again == record and json.loads((folder / plateau.PLATEAU).read_text()) == record
        assert json.loads((folder / "checkpoint" / "state.json").read_text())["step"] == record["step"]
        pd.testing.assert_frame_equal(pd.read_csv(folder / "metrics.csv"), pd.read_csv(source / "metrics.csv"))


def test_evaluation_counts_do_not_depend_on_its_chunks(phase1_run, monkeypatch):
    """Evaluation samples in chunks of at most EVAL_ROWS responses: greedy answers do not depend on the chunking,
    and sampled counts are repeatable."""
    root, _, (_, test, _), _ = phase1_run
    policy, tok = tiny.load(root / "phase1" / "checkpoint")
    whole = correct_counts(policy, tok, test, 1, PROTOCOL, 0, greedy=True)
    assert whole.shape == (len(test),) and set(whole) <= {0, 1}
    monkeypatch.setattr(run_module, "EVAL_ROWS", 5)
    np.testing.assert_array_equal(correct_counts(policy, tok, test, 1, PROTOCOL, 0, greedy=True), whole)
    at_zero = dataclasses.replace(PROTOCOL, temperature=0)  # the protocol's greedy decoding: the same answers
    np.testing.assert_array_equal(correct_counts(policy, tok, test, 1, at_zero, 0), whole)
    sampled = correct_counts(policy, tok, test, 4, PROTOCOL, 3)
    assert sampled.shape == (len(test),) and sampled.max() <= 4
    np.testing.assert_array_equal(sampled, correct_counts(policy, tok, test, 4, PROTOCOL, 3))


def test_an_interrupted_arm_resumes_to_the_uninterrupted_result(phase1_run, tmp_path):
    """ProRL from the phase-1 checkpoint (its AdamW moments and generator), evaluated at budgets of 128 and 256
    generated samples: every step spends refilled rounds of its shape, and a cut run resumes to the same result."""
    root, phase1_arm, (train, test, val), _ = phase1_run
    arm = ArmSettings("seed 0 ProRL N=16", phase1_arm.step, 4, 1e-3, 256, 0, 1, seed=0, eval_budgets=(128, 256))
    start = root / "phase1" / "checkpoint"
    kwargs = dict(protocol=PROTOCOL, progress=False, validation=val)
    cut = run_arm(start, train, test, arm, tmp_path / "cut", max_steps=1, **kwargs)
    assert cut["step"].max() == 1 and not (tmp_path / "cut" / "done.json").exists()
    run_arm(start, train, test, arm, tmp_path / "cut", **kwargs)
    whole = run_arm(start, train, test, arm, tmp_path / "whole", **kwargs)
    resumed = pd.read_csv(tmp_path / "cut" / "metrics.csv")
    assert whole["updates"].sum() > 0 and whole["step"].max() > 1
    pd.testing.assert_frame_equal(whole.drop(columns=TIMING), resumed.drop(columns=TIMING))
    assert_same_weights(tmp_path / "whole" / "checkpoint", tmp_path / "cut" / "checkpoint")
    # every round generates N x prompts samples; the kept batch is full unless the cap stopped the refill
    steps, full, rounds = whole[whole.step > 0], 16 * 4, arm.step.max_rounds
    done = json.loads((tmp_path / "whole" / "done.json").read_text())
    assert done["samples"] == whole["samples"].iloc[-1] >= 256 > whole["samples"].iloc[-2]  # stops at the first step
    assert (np.diff(whole["samples"]) == steps["rounds"] * full).all() and steps["rounds"].between(1, rounds).all()
    assert (steps.loc[steps.capped == 0, "kept_samples"] == full).all()
    assert (steps.loc[steps.capped == 1, "kept_samples"] < full).all()
    assert (steps.loc[steps.capped == 1, "rounds"] == rounds).all()
    assert (
        steps.loc[steps.updates > 0, "grad_norm"].gt(0).all()
        and steps.loc[steps.updates == 0, "grad_norm"].isna().all()
    )
    # evaluated at step 0 and at the first step reaching each budget, on the test and the validation split
    want = [0] + [int(whole.loc[whole.samples >= b, "step"].iloc[0]) for b in arm.eval_budgets]
    assert whole.dropna(subset=["pass1"])["step"].tolist() == want
    folder = tmp_path / "whole"
    assert [k for k, _ in plateau.pass1_files(folder)] == want == [k for k, _ in plateau.pass1_files(folder, "val")]
    for k, path in plateau.pass1_files(folder):
        values, row = np.load(path), whole.set_index("step").loc[k]
        assert values.shape == (len(test),) and set(values * 4) <= set(range(5))  # k of 4 samples
        assert row["pass1"] == pytest.approx(values.mean()) and row["pass1_se"] == pytest.approx(standard_error(values))
        assert row["val_pass1"] == pytest.approx(np.load(folder / f"val_step{k}.npy").mean())
    # seed 0 evaluates with phase 1's seed: step 0 is the checkpoint's last evaluation
    np.testing.assert_array_equal(
        np.load(folder / "pass1_step0.npy"), np.load(plateau.pass1_files(root / "phase1")[-1][1])
    )


def test_arm_resumes_bit_for_bit_even_when_cut_during_a_checkpoint_swap(phase1_run, tmp_path):
    root, _, (train, test, val), _ = phase1_run
    step = StepSettings(n_rollouts=4, max_new_tokens=5, max_rounds=2)
    settings = ArmSettings("arm", step, 4, 1e-3, 160, 2, 2, seed=5, eval_budgets=(40,))
    kwargs = dict(protocol=SamplingParams(2, 0.6, 0.95, 5), progress=False, validation=val[:3])
    start = root / "warm_start"  # no optimizer state: a fresh AdamW
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
