"""The countdown study's pieces: the canonical correct set (every member accepted by Reasoning Gym's verifier,
none missed), exact q against the sampler's own probabilities, the warm start on random correct answers, the
refill that draws only the shortfall, the deduplicated update, and the update-quality measurement."""

import os
import shutil
from dataclasses import replace
from itertools import permutations, product
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from brorl_lib.core import stats
from brorl_lib.facts.protocol import SamplingParams
from brorl_lib.models import tiny
from brorl_lib.models.char_tokenizer import build_tokenizer
from brorl_lib.rlvr import algorithm as alg
from brorl_lib.rlvr import candidates, exact_q, regime, study, tasks, warm_start
from brorl_lib.rlvr import plateau as plateau_module
from brorl_lib.rlvr import study_phase2 as p2
from brorl_lib.rlvr import study_report as sr
from brorl_lib.rlvr import update_quality as uq
from brorl_lib.rlvr.correct_set import canonical_answers, countdown_solutions
from brorl_lib.rlvr.run import KEPT_COUNTS, TRAINER_STATE, ArmSettings, run_arm
from brorl_lib.rlvr.sampling import concat, generate, nucleus
from brorl_lib.rlvr.step import StepSettings, backward, generation_round, rl_step, rows_of
from brorl_lib.rlvr.study_config import CountdownStudyConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture(scope="module")
def split():
    return tasks.make_split("countdown", 3, 300, 20, seed=0)


@pytest.fixture(scope="module")
def warm(tok, split):
    """A model warm-started briefly on countdown with 3 numbers: its q is far from 0 and 1."""
    model = tiny.build_model(candidates.shape(64, 2), tok, seed=0)
    tiny.train_sft(model, len(split[0]), warm_start.batches(tok, split[0]), steps=120, batch_size=32, lr=3e-3, seed=0)
    return model.eval()


def test_the_canonical_set_is_exactly_the_verifiers_accepted_sign_strings(split):
    """Every "a±b±c" over every ordering: the verifier accepts exactly the enumerated ones."""
    for inst in split[0][:15]:
        numbers = inst.entry["metadata"]["numbers"]
        found = set(canonical_answers(inst))
        assert found, inst.prompt
        for order in set(permutations(numbers)):
            for signs in product("+-", repeat=len(order) - 1):
                text = str(order[0]) + "".join(s + str(v) for s, v in zip(signs, order[1:]))
                assert (tasks.reward(inst, text) == 1.0) == (text in found), (inst.prompt, text)
    assert countdown_solutions((1, 1, 2), 4) == ("1+1+2", "1+2+1", "2+1+1")  # a repeated number: distinct strings
    assert countdown_solutions((1, 2), 9) == ()


def test_countdown_prompts_are_compact_and_one_answer_tasks_keep_their_answer():
    train, _ = tasks.make_split("countdown", 4, 5, 2, seed=0)
    assert train[0].prompt == "9,6,4,8:19=" and train[0].answer == "8+6-4+9"
    arith, _ = tasks.make_split("arithmetic", 1, 3, 1, seed=0)
    assert canonical_answers(arith[0]) == (arith[0].answer,)


def test_exact_q_is_the_samplers_probability_of_a_correct_answer(tok, split, warm):
    """Each canonical answer's teacher-forced probability equals exp(sum of the sampler's own log-probs) for a
    sampled copy of it; and q lies strictly inside (0, 1) and matches a large sample's frequency."""
    inst = split[0][:4]
    q = exact_q.correct_mass(warm, tok, inst, 1.0, 6)
    r = generate(warm, tok, [i.prompt for i in inst], 4000, 6, 1.0, torch.Generator().manual_seed(0))
    hits = np.array([t in canonical_answers(inst[g]) for g, t in zip(r.group.tolist(), r.texts)]).reshape(4, -1)
    assert ((q > 0.001) & (q < 0.99)).all()
    se = np.sqrt(q.numpy() * (1 - q.numpy()) / 4000)
    assert np.all(np.abs(hits.mean(1) - q.numpy()) < 4 * se + 1e-3)
    row = int(np.flatnonzero(hits[0])[0])
    answer = r.texts[row]
    single = exact_q._sequence_log_probs(
        warm, tok, [inst[0].prompt], [tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]], 1.0, 1.0
    )
    torch.testing.assert_close(single, r.log_probs[row].sum()[None], atol=1e-5, rtol=0)


def test_exact_q_under_top_p_renormalises_each_step_as_the_sampler_does(tok, split, warm):
    inst = split[0][:1]
    answer = canonical_answers(inst[0])[0]
    ids = tok(answer, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    got = exact_q._sequence_log_probs(warm, tok, [inst[0].prompt], [ids], 0.6, 0.95)
    by_hand, prefix = 0.0, inst[0].prompt
    torch.set_grad_enabled(False)
    for t in ids:
        enc = tok(prefix, add_special_tokens=False, return_tensors="pt")
        logp = torch.log_softmax(warm(**enc).logits[0, -1].float() / 0.6, -1)
        kept = nucleus(logp[None], 0.95)[0]
        by_hand += float(torch.log(kept[t] / kept.sum()))
        prefix += tok.decode([t])
    torch.set_grad_enabled(True)
    assert float(got) == pytest.approx(by_hand, abs=1e-4)


def test_an_answer_longer_than_the_response_limit_has_no_mass(tok, split, warm):
    inst = split[0][:3]
    assert float(exact_q.correct_mass(warm, tok, inst, 1.0, 4).sum()) == 0.0  # 5 tokens needed
    full = exact_q.correct_mass(warm, tok, inst, 1.0, 6)
    cut = exact_q.correct_mass(warm, tok, inst, 1.0, 5)  # the answer fills the limit: no <eos> factor
    assert (cut >= full).all() and (cut > full).any()


def test_the_warm_start_draws_every_correct_answer_of_a_prompt(tok, split):
    inst = next(i for i in split[0] if len(canonical_answers(i)) >= 4)
    gen = torch.Generator().manual_seed(0)
    drawn = {warm_start._one_answer(inst, gen) for _ in range(200)}
    assert drawn == set(canonical_answers(inst))
    arith, _ = tasks.make_split("arithmetic", 1, 3, 1, seed=0)
    state = gen.get_state()
    assert warm_start._one_answer(arith[0], gen) == arith[0].answer
    assert torch.equal(gen.get_state(), state)  # one-answer tasks draw nothing: their old streams are kept


def test_a_shortfall_refill_draws_only_what_the_kept_batch_lacks():
    s = StepSettings(16, refill="shortfall")
    assert s.round_prompts(64, kept=0, drawn=0) == 64
    assert s.round_prompts(64, kept=16, drawn=64) == 64  # 48 lacking at a keep rate of 1/4: 192, capped at P
    assert s.round_prompts(64, kept=48, drawn=64) == 22  # 16 lacking at 3/4: ceil(21.3)
    assert s.round_prompts(64, kept=0, drawn=64) == 64
    assert StepSettings(16).round_prompts(64, kept=48, drawn=64) == 64  # "full": every round draws P
    with pytest.raises(ValueError, match="refill"):
        StepSettings(16, refill="some")


def test_a_shortfall_step_keeps_its_surplus_to_a_few_groups(tok, split, warm):
    draw_gen = torch.Generator().manual_seed(1)

    def draw(k):
        return [split[0][i] for i in torch.randint(len(split[0]), (k,), generator=draw_gen).tolist()]

    model = tiny.build_model(candidates.shape(64, 2), tok, seed=0)
    model.load_state_dict(warm.state_dict())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    s = StepSettings(16, max_new_tokens=6, max_rounds=20, refill="shortfall", dedupe=True)
    m = rl_step(model, tok, opt, draw, 32, s, torch.Generator().manual_seed(0))
    assert m["kept_samples"] == 32 * 16 and not m["capped"]
    assert 0 <= m["surplus_groups"] <= 8


def test_the_deduplicated_update_is_the_same_gradient(tok, split, warm):
    s = StepSettings(64, max_new_tokens=6)
    rollouts, rewards, keep = generation_round(warm, tok, split[0][:6], s, torch.Generator().manual_seed(0))
    kept = concat([rows_of(rollouts, torch.nonzero(keep).squeeze(1))], tok.pad_token_id)
    adv = alg.advantages(s.advantage_estimator, rewards[keep], kept.response_mask, kept.group)
    chunk = torch.arange(len(kept.texts))
    grads = []
    for dedupe in (False, True):
        warm.zero_grad()
        backward(warm, kept, adv, kept.log_probs, None, chunk, StepSettings(64, max_new_tokens=6, dedupe=dedupe))
        grads.append(torch.cat([p.grad.flatten() for p in warm.parameters()]))
    warm.zero_grad()
    torch.testing.assert_close(grads[0], grads[1], atol=1e-7, rtol=1e-4)


def test_bands_cells_and_bad_input_are_checked():
    assert uq.band_of(np.array([0.0, 0.005, 0.05, 0.5, 1.0]), [0, 0.01, 1 / 16, 0.5, 1.0]).tolist() == [0, 0, 1, 3, 3]
    # a float sum of probabilities just past an edge is on it; clearly outside is in no band
    q = np.array([1.0000001, -1e-9, 1.1, -0.1], dtype=np.float32)
    assert uq.band_of(q, [0, 0.5, 1.0]).tolist() == [1, 0, -1, -1]
    assert uq.band_labels([0, 0.5, 1]) == ["[0, 0.5)", "[0.5, 1]"]
    for edges, message in (([0.5], "at least two"), ([0, 1.5], r"\[0, 1\]"), ([0, 0.5, 0.5], "increasing")):
        with pytest.raises(ValueError, match=message):
            uq.check_bands(edges)
    with pytest.raises(ValueError, match="samples_per_update=100 .* multiple of N"):
        uq.Cell(16, 100, 1e-4)
    assert uq.Cell(16, 2048, 1e-4).prompts == 128


def test_one_update_measures_cosine_and_the_exact_change_of_q(tok, split, warm, tmp_path):
    """At a saved checkpoint: cosines lie in [-1, 1], each band's change of q is the exact difference after the
    real step, and the same seed repeats bit for bit."""
    opt = torch.optim.AdamW(warm.parameters(), lr=1e-4)
    tiny.save(warm, tok, tmp_path)
    torch.save({"optimizer": opt.state_dict()}, tmp_path / TRAINER_STATE)
    step = StepSettings(16, max_new_tokens=6, dedupe=True)
    measured = split[0][:40]
    edges = [0, 0.25, 0.75, 1.0]
    ref = uq.reference(tmp_path, measured, edges, step)
    refs = {"countdown": (measured, ref)}
    rows = uq.one_update(tmp_path, split[0], refs, uq.Cell(16, 256, 1e-3), step, seed=0)
    again = uq.one_update(tmp_path, split[0], refs, uq.Cell(16, 256, 1e-3), step, seed=0)
    assert rows == again
    table = pd.DataFrame(rows)
    assert table["cosine"].between(-1, 1).all()
    assert (table.loc[table["q_band"] == uq.ALL, "prompts_in_band"] == 40).all()
    assert table.loc[table["q_band"] == uq.ALL, "cosine"].iloc[0] > 0  # the update climbs mean correct mass
    summary = uq.summarise(table.assign(checkpoint="c", n_rollouts=16, samples_per_update=256))
    assert set(summary["q_band"]) <= {"[0, 0.25)", "[0.25, 0.75)", "[0.75, 1]", "all"}


def test_the_grid_saves_each_unit_and_resumes_without_recomputing(tok, split, warm, tmp_path, monkeypatch):
    opt = torch.optim.AdamW(warm.parameters(), lr=1e-4)
    tiny.save(warm, tok, tmp_path / "ckpt")
    torch.save({"optimizer": opt.state_dict()}, tmp_path / "ckpt" / TRAINER_STATE)
    args = dict(
        checkpoints={"early": (tmp_path / "ckpt", split[0], {"countdown": split[0][:20]}, lambda s: 1e-4)},
        edges=[0, 0.5, 1.0],
        rollouts=[4, 16],
        samples=[64],
        reps=2,
        step_of=lambda n: StepSettings(n, max_new_tokens=6, dedupe=True),
        folder=tmp_path / "uq",
        progress=False,
    )
    first = uq.run_grid(**args)
    assert len(first.groupby(["n_rollouts", "rep"])) == 4
    calls = []
    monkeypatch.setattr(uq, "one_update", lambda *a, **k: calls.append(a))
    again = uq.run_grid(**args)
    assert not calls
    pd.testing.assert_frame_equal(first, again)
    with pytest.raises(ValueError, match="multiple of N"):
        uq.run_grid(**(args | {"samples": [100]}))


# --- phase 2 design ---


def phase2(**change):
    base = dict(
        prompts=64,
        base_lr=1e-4,
        budgets=(65536, 131072),
        seeds=(0, 1, 2),
        iso_samples=4096,
        iso_rollouts=(8, 16, 32, 128, 512),
        iso_lr_factors=(0.5, 1.0, 2.0),
        iso_seeds=3,
        control_seeds=3,
        kl_coefs=(0.001, 0.01),
        broad_prompts=128,
    )
    return p2.Phase2Settings(**(base | change))


def test_the_verdict_and_control_arms_follow_the_paper_shapes():
    p = phase2()
    shapes = {a.name: (a.n_rollouts, a.prompts_per_step, a.lr) for a in p2.verdict_arms(p) + p2.control_arms(p)}
    assert shapes["N16"] == (16, 64, 1e-4)
    assert shapes["N512"][:2] == (512, 16) and shapes["N512"][2] == pytest.approx(1e-4 * 8**0.5)
    assert shapes["N16_batch512"][:2] == (16, 512) and shapes["N16_batch512"][2] == pytest.approx(1e-4 * 8**0.5)
    assert shapes["N512_prompts64"][2] == pytest.approx(1e-4)  # ProRL's rate: only N and the batch differ
    tuned = {a.name: a.lr for a in p2.control_arms(p, prorl=0.5, brorl=0.25)}
    assert tuned["N512_prompts64"] == pytest.approx(0.5e-4) and tuned["N512_kl0.001"] == pytest.approx(0.25e-4 * 8**0.5)
    assert p2.verdict_arm(p, 512, 0.25).name == "N512_lr0.25x" and p2.verdict_arm(p, 16, 0.25).lr == 0.25e-4
    broad = p2.prompts_arm(p, 0.5)
    assert (broad.n_rollouts, broad.prompts_per_step) == (512, 128) and broad.lr == pytest.approx(0.5e-4 * 64**0.5)
    weights = {a.name: a.kl_coef for a in p2.control_arms(p) if a.kl_coef}
    assert weights == {"N512_kl0.001": 0.001, "N512_kl0.01": 0.01}  # one KL-anchored control per weight
    assert tuned["N512_kl0.01"] == tuned["N512_kl0.001"]  # at BroRL's rate: only the weight differs
    pairs = {(arm, base) for rates, arm, base in sr.comparisons(p, {16: 0.5, 512: 0.25}) if rates == "tuned"}
    assert {("N512_kl0.001", "N512_lr0.25x"), ("N512_kl0.01", "N512_lr0.25x")} <= pairs  # the anchor alone
    assert ("N512_kl0.01", "N16_lr0.5x") in pairs and ("N16_batch512", "N512_lr0.25x") not in pairs
    iso = p2.iso_arms(p)
    assert len(iso) == 15 and all(a.one_round and a.samples_per_step == 4096 for a in iso)
    assert [a.lr for a in iso if a.lr_factor == 1.0] == pytest.approx([2e-4] * 5)  # sqrt(4096 / (16 x 64)) = 2


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(prompts=30), "prompts=30 .* multiple of 4"),
        (dict(budgets=(131072, 65536)), "strictly increasing"),
        (dict(budgets=(4096, 65536)), "at least 65536"),
        (dict(seeds=(0,)), r"seeds=\[0\] .* a list of 2 to"),
        (dict(iso_samples=4000), "iso_samples=4000 .* multiple"),
        (dict(iso_lr_factors=(0.5, 1.0)), "iso_lr_factors=.* at least three"),
        (dict(lr_factors=(1.0, 0.5, 2.0)), "lr_factors=.* increasing"),
        (dict(tune_seeds=4), "tune_seeds"),
        (dict(broad_prompts=512), "at least 262144"),
        (dict(iso_seeds=4), "iso_seeds"),
        (dict(control_seeds=4), "control_seeds"),
        (dict(kl_coefs=(0.1, 0.1)), "kl_coefs=.* listed twice"),
        (dict(kl_coefs=()), r"kl_coefs=\[\] .* a list of 1 to"),
        (dict(kl_coefs=(0.1, 0.0)), "kl_coefs item"),
    ],
)
def test_bad_phase2_settings_are_refused_naming_the_parameter(change, message):
    with pytest.raises(ValueError, match=message):
        phase2(**change)


def _tune_to_the_end(score_of, grid, seeds=(0, 1, 2), k=3):
    """Run what ``tuning`` asks for (a score per (factor, seed)) until it settles; the runs made, in order."""
    done: dict = {}
    while True:
        t = p2.tuning(lambda f, seed: done.get((f, seed)), grid, seeds, k)
        if not t.needs:
            return t, list(done)
        for need in t.needs:
            done[need] = score_of(*need)


def test_tuning_extends_the_grid_until_the_best_is_inside_and_seeds_its_neighbours():
    def score(f, seed):  # best at 1/8, a little seed noise
        return -((np.log2(f) + 3) ** 2) + 0.01 * seed

    t, runs = _tune_to_the_end(score, (0.5, 1.0, 2.0))
    assert t.best == 0.125 and t.grid == (0.0625, 0.125, 0.25, 0.5, 1.0, 2.0)
    assert {f for f, seed in runs if seed > 0} == {0.0625, 0.125, 0.25}  # three seeds at the best and its neighbours
    assert all(len(v) == 3 for v in t.scores.values())
    # the first seed's pick overturned by the mean over seeds: its neighbour wins and is seeded in turn
    noisy = {(0.5, 0): 1.0, (1.0, 0): 0.9, (0.25, 0): 0.0}

    def score2(f, seed):
        return noisy.get((f, seed), {0.25: 0.5, 0.5: 0.6, 1.0: 0.8, 2.0: 0.1}[f])

    t2, runs2 = _tune_to_the_end(score2, (0.25, 0.5, 1.0, 2.0))
    assert t2.best == 1.0 and {f for f, s in runs2 if s > 0} == {0.25, 0.5, 1.0, 2.0}
    # an edge that stays an edge after the allowed extensions is reported at the edge
    t3, _ = _tune_to_the_end(lambda f, seed: -f, (1.0, 2.0, 4.0), k=1)
    assert t3.best == t3.grid[0] == 1.0 / 2**p2.MAX_EXTENSIONS


# --- the study's report ---


def test_the_plan_runs_the_verdicts_two_n_isocompute_then_the_controls_then_the_other_n(monkeypatch):
    p = replace(tiny_phase2(), iso_rollouts=(8, 16, 32, 512), iso_samples=1024, control_seeds=1)
    settled = p2.Tuning(grid=(0.5, 1.0, 2.0), needs=(), best=1.0, scores={})
    monkeypatch.setattr(study, "chosen", lambda s, root: None)
    monkeypatch.setattr(p2, "verdict_tuning", lambda root, c, p, n: settled)
    monkeypatch.setattr(p2, "iso_tuning", lambda root, c, p, n: replace(settled, needs=((1.0, 0),), best=None))
    late = [a for a, _ in p2.plan(tiny_study(), p, Path("unused")) if a.role not in ("verdict", "paper")]
    order = [a.n_rollouts if a.role == "isocompute" else "control" for a in late]
    assert order == [16, 512] + ["control"] * len(p2.control_arms(p)) + [8, 32]


def test_the_sign_flip_test_enumerates_every_sign_pattern():
    assert sr.sign_flip_p([0.1, 0.2, 0.3]) == {"p_greater": 1 / 8, "p_two_sided": 2 / 8}
    r = sr.sign_flip_p([0.1, -0.1, 0.2, -0.2])
    assert r["p_two_sided"] == 1.0 and 0.5 < r["p_greater"] < 1.0
    five = sr.sign_flip_p([0.01, 0.02, 0.03, 0.04, 0.05])
    assert five["p_greater"] == 1 / 32 and five["p_two_sided"] == 2 / 32  # the floor with five seeds


def _frame():
    rows = []
    for arm, n, gain in (("N16", 16, 0.0), ("N512", 512, 0.05)):
        for seed in range(3):
            for step, samples, p in ((0, 0, 0.5), (5, 70000, 0.5 + gain + 0.01 * seed), (9, 140000, 0.5 + 2 * gain)):
                rows.append(dict(arm=arm, label=arm, role="paper", N=n, prompts=16, lr=1e-4, lr_factor=1.0, seed=seed,
                                 step=step, samples=samples, pass1=p, val_pass1=p))  # fmt: skip
    return pd.DataFrame(rows)


def test_the_verdict_prints_as_wrapped_paragraphs_and_its_summary_keeps_the_columns_it_is_decided_by():
    verdict = pd.DataFrame(
        [{"budget": 1048576, "rates": "tuned", "comparison": "N512_lr0.0078125x - N16_lr0.5x", "mean": -0.007,
          "ci_low_seeds_prompts": -0.025, "ci_high_seeds_prompts": 0.010, "seeds": 6, "direction": "no difference",
          "p_value": 0.2, "sign_flip_p_two_sided": 0.3}] * 2
    )  # fmt: skip
    tuned = {n: p2.Tuning(grid=(best,), needs=(), best=best, scores={}) for n, best in ((16, 0.5), (512, 0.0078125))}
    lines = sr.conclusion(verdict, tuned, {"finished": 148, "pending": 0})
    text = sr.conclusion_text(verdict, tuned, {"finished": 148, "pending": 0})
    shown = text.split("\n")
    assert max(map(len, shown)) <= sr.TEXT_WIDTH < max(map(len, lines))
    assert text.split() == " ".join(lines).split()  # the same words, only the line breaks differ
    assert sum(not line.startswith(" ") for line in shown) == len(lines)  # one paragraph a sentence, then indented
    assert "[-0.025, +0.010]" in text  # an interval is never broken
    assert list(sr.verdict_summary(verdict).columns) == sr.VERDICT_SHOWN
    assert sr.VERDICT_SHOWN[0] == "comparison" and "direction" in sr.VERDICT_SHOWN
    said = sr.outside_text({"samples": 64, "held_out": 0.0, "held_out_se": 0.0, "train": 1.25e-4, "train_se": 6.2e-5})
    assert "{" not in said and "64 samples" in said and "0.000125" in said and max(map(len, said.split("\n"))) <= 88


def test_pass1_at_each_budget_is_the_first_evaluation_past_it_and_the_verdict_pairs_seeds(monkeypatch):
    frame = _frame()
    table = sr.at_budgets(frame, (65536, 131072))
    assert set(table["step"]) == {5, 9} and (table["start_pass1"] == 0.5).all()
    noise = np.random.default_rng(0).normal(0, 0.01, size=40)  # each prompt's own offset, the same in every run
    by_run = frame.set_index(["arm", "seed", "step"])["pass1"]
    monkeypatch.setattr(sr, "per_prompt", lambda root, s, arm, seed, step: by_run[(arm, seed, step)] + noise)
    p = phase2(budgets=(65536, 131072))
    v = sr.verdict(table, p, {}, None, None)  # nothing tuned yet: the rule's rates only
    assert set(v["rates"]) == {"rule"}
    first = v[(v["budget"] == 65536) & (v["comparison"] == "N512 - N16")].iloc[0]
    assert first["mean"] == pytest.approx(0.05) and first["seeds"] == 3 and first["direction"] == "higher"
    assert first["sign_flip_p_greater"] == 1 / 8
    flat = v[(v["budget"] == 131072) & (v["comparison"] == "N16 - plateau")].iloc[0]
    assert flat["mean"] == pytest.approx(0.0) and flat["direction"] == "no difference"


# --- one tiny study end to end ---


def tiny_study() -> study.StudySettings:
    return study.StudySettings(
        candidates=(candidates.parse("countdown:3@32x1"), candidates.parse("countdown:3@64x2")),
        n_train=120,
        n_test=12,
        n_val=8,
        warm_start_steps=40,
        warm_start_lr=3e-3,
        phase1_prompts=8,
        screen_max_steps=4,
        phase1_max_steps=8,
        eval_every=1,
        snapshot_every=1,
        plateau_rule=plateau_module.PlateauRule(2, 0.05, 0.01, (0.0, 0.01, 0.0625, 0.5, 0.95, 1.0)),
        base_lr=1e-3,
        mini_batches=2,
        temperature=1.0,
        max_new_tokens=6,
        max_rounds=4,
        protocol=SamplingParams(16, 0.6, 0.95, 6),
    )


def test_the_study_settings_check_themselves_on_construction_naming_the_field():
    with pytest.raises(ValueError, match="n_train=0 is not allowed: expected"):
        replace(tiny_study(), n_train=0)
    with pytest.raises(ValueError, match="screen_max_steps=3 must be a multiple of eval_every=2"):
        replace(tiny_study(), screen_max_steps=3, eval_every=2, phase1_max_steps=8)
    with pytest.raises(ValueError, match="device='tpu' is not allowed"):
        replace(tiny_study(), device="tpu")
    with pytest.raises(ValueError, match="reps=1 is not allowed: expected"):
        study.UpdateQualitySettings(reps=1)
    with pytest.raises(ValueError, match="every S must be a multiple of every N"):
        study.UpdateQualitySettings(rollouts=[4, 16], samples=[24])


def tiny_phase2() -> p2.Phase2Settings:
    return p2.Phase2Settings(
        prompts=4,
        base_lr=1e-3,
        budgets=[2048, 4096],
        seeds=[0, 1],
        iso_samples=256,
        iso_rollouts=[8, 32],
        iso_lr_factors=[0.5, 1.0, 2.0],
        iso_seeds=2,
        control_seeds=1,
        kl_coefs=[0.01],
        broad_prompts=2,
    )


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("study")
    s, p = tiny_study(), tiny_phase2()
    study.screen(s, root, progress=False)
    study.plateau_stage(s, root, progress=False)
    study.update_quality_stage(s, CountdownStudyConfig().quality(), root, progress=False)  # the quick profile's
    study.gradient_stats_stage(s, CountdownStudyConfig().quality(), root, samples=4, progress=False)
    p2.run(s, p, root, progress=False)
    return root


@pytest.mark.slow
def test_the_screen_measures_each_candidate_exactly_and_chooses_one(tiny_root):
    table = pd.read_csv(tiny_root / study.SCREEN)
    assert len(table) == 2 and table["chosen"].sum() == 1
    for col in ("pass1", "low_q_share_exact", "kept_fraction", "gates_passed"):
        assert table[col].notna().all(), col
    assert table["kept_fraction"].between(0, 1).all()
    for key, chosen in zip(table["candidate"], table["chosen"]):  # only the chosen keeps its weights
        assert (tiny_root / "configs" / key / study.PHASE1 / "checkpoint").exists() == chosen


@pytest.mark.slow
def test_the_plateau_record_holds_the_gates_and_every_training_prompts_q(tiny_root):
    s = tiny_study()
    plateau = sr.plateau_table(tiny_root, s).iloc[0]
    assert plateau["step"] <= 8 and set(["gate_pass1", "gate_low_q", "gate_kept"]) <= set(plateau.index)
    base = study.folder(tiny_root, study.chosen(s, tiny_root)) / study.PHASE1
    q = np.load(base / f"q_train_step{plateau['step']}.npy")
    assert q.shape == (len(study.split(s, study.chosen(s, tiny_root))[0]),) and ((q >= 0) & (q <= 1)).all()


@pytest.mark.slow
def test_update_quality_covers_three_checkpoints_every_cell_and_rep(tiny_root):
    raw = pd.concat(pd.read_csv(f) for f in uq.grid_files(tiny_root / "update_quality"))
    assert raw["checkpoint"].nunique() == 3
    assert len(raw.groupby(["checkpoint", "n_rollouts", "samples_per_update", "rep"])) == 3 * 2 * 2


@pytest.mark.slow
def test_every_planned_phase2_run_finished_with_its_accounting_and_fate(tiny_root):
    s, p = tiny_study(), tiny_phase2()
    planned = p2.plan(s, p, tiny_root)
    c = study.chosen(s, tiny_root)
    assert all(p2.finished(tiny_root, c, a, seed) for a, seed in planned)
    assert sr.phase2_status(tiny_root, s, p) == {"finished": len(list(tiny_root.rglob(p2.DONE))), "pending": 0}
    verdict_t, iso_t = sr.tunings(tiny_root, s, p)
    assert all(t.best is not None for t in [*verdict_t.values(), *iso_t.values()])  # every tuning settled
    names = {(a.name, seed) for a, seed in planned}
    f16, f512 = verdict_t[16].best, verdict_t[512].best
    for seed in p.seeds:  # the verdict at the rule's rates and at the tuned ones, and BroRL at broad_prompts
        for arm in (p2.verdict_arm(p, 16), p2.verdict_arm(p, 512), p2.verdict_arm(p, 16, f16),
                    p2.verdict_arm(p, 512, f512), p2.prompts_arm(p, f512)):  # fmt: skip
            assert (arm.name, seed) in names
    assert {a.name for a, _ in planned if a.role == "control"} == {a.name for a in p2.control_arms(p, f16, f512)}
    frame = p2.collect(s, p, tiny_root)
    assert {"entropy", "entropy_kept", "kl_ref", "kl_ref_all"} <= set(frame.columns)
    assert frame.loc[frame["step"] > 0, ["entropy", "kl_ref_all"]].notna().all().all()  # every generated token
    assert frame.loc[frame["step"] > 0, "entropy"].gt(0).all()
    assert frame.loc[frame["kept_samples"] > 0, "kl_ref"].notna().all()  # measured on the kept batch, when there is one
    acct = sr.accounting(frame)
    assert (acct["generated"] >= 4096).all() and (acct["kept_fraction"] <= 1).all()
    verdict_runs = acct[acct["arm"].isin(["N16", "N512"])]
    assert (verdict_runs["surplus_groups"] <= 3 * verdict_runs["steps"]).all()  # a few surplus groups a step at most
    fate = sr.prompt_fate(tiny_root, s, p)
    assert {"N16", "N512", "N512_prompts2"} <= set(fate["arm"])
    table = sr.at_budgets(frame, p.budgets)
    v = sr.verdict(table, p, {16: f16, 512: f512}, tiny_root, s)
    assert {"rule", "tuned"} == set(v["rates"]) and {"N512 - N16", "N16 - plateau"} <= set(v["comparison"])
    prompts_effect = f"{p2.prompts_arm(p, f512).name} - {p2.verdict_arm(p, 512, f512).name}"  # N fixed at 512
    assert prompts_effect in set(v["comparison"])
    assert (v["seeds"] == 2).all() and (v["ci_low_seeds_prompts"] <= v["mean"] + 1e-12).all()
    iso = sr.isocompute(table, iso_t)
    assert set(iso["n_rollouts"]) == {8, 32} and iso.groupby("n_rollouts")["best_lr"].any().all()
    best = iso[iso["best_lr"]]
    assert (best.groupby("n_rollouts")["seeds"].min() == p.iso_seeds).all()
    assert {"grid", "best", "at_edge"} <= set(sr.tuning_table(verdict_t, iso_t).columns)
    assert len(list(tiny_root.rglob("tensorboard/events.out.tfevents.*"))) >= len(planned)  # one log per run at least


def test_drift_averages_each_runs_last_steps_then_the_seeds():
    """Two seeds of one arm, 8 steps of 100 samples: the end averages the steps past 7/8 of each run's samples,
    the start is the first step; the curves bin the steps by samples up to the budget, overshoot in the last."""
    arm = dict(arm="A", label="arm A", N=16, prompts=4, lr_factor=1.0)
    rows = [arm | dict(seed=seed, step=k, samples=100 * k, entropy=0.1 * k + seed, kl_ref=0.01 * k * (seed + 1))
            for seed in (0, 1) for k in range(9)]  # fmt: skip
    frame = pd.DataFrame(rows + [dict(rows[0], arm="B", label="arm B")])
    d = sr.drift(frame, ["A", "missing"]).set_index("arm")
    assert list(d.index) == ["A"] and d.loc["A", "seeds"] == 2
    assert d.loc["A", "entropy_start"] == pytest.approx(0.1 + 0.5)  # step 1 of both seeds
    assert d.loc["A", "entropy_end"] == pytest.approx(0.8 + 0.5)  # step 8 only: 800 > 7/8 * 800 = 700
    assert d.loc["A", "kl_end"] == pytest.approx((0.08 + 0.16) / 2)
    assert d.loc["A", "kl_end_ci"] == pytest.approx(stats.mean_interval([0.08, 0.16])["ci_high"] - 0.12)
    curves = sr.drift_curves(frame, ["A"], budget=700, bins=7)
    assert list(curves["samples"]) == [100, 200, 300, 400, 500, 600, 700]  # step 8 (800) counted in the last bin
    assert curves["kl_ref"].iloc[-1] == pytest.approx((0.07 + 0.08 + 0.14 + 0.16) / 4)
    assert (curves["seeds"] == 2).all()


def test_two_way_interval_widens_with_prompt_noise_and_repeats_bit_for_bit():
    rng = np.random.default_rng(1)
    seeds_only = rng.normal(0.1, 0.05, size=(6, 1)) + np.zeros((6, 200))
    with_prompts = seeds_only + rng.normal(0, 0.3, size=(6, 200))
    lo1, hi1 = sr.two_way_interval(seeds_only)
    lo2, hi2 = sr.two_way_interval(with_prompts)
    assert lo1 < 0.1 < hi1 and hi2 - lo2 > hi1 - lo1
    assert sr.two_way_interval(with_prompts) == (lo2, hi2)


def test_an_interval_names_its_direction_only_when_it_excludes_zero():
    assert sr.direction([0.01, -0.2, -0.1], [0.2, -0.01, 0.1]).tolist() == ["higher", "lower", "no difference"]
    assert str(sr.direction(-0.171, -0.071)) == "lower" and str(sr.direction(0.0, 0.1)) == "no difference"
    assert sr.interval_text(-0.1714, np.float64(0.0706)) == "[-0.171, +0.071]"


def test_a_run_held_by_a_live_process_is_skipped_and_a_dead_ones_lock_is_taken_over(tmp_path):
    folder = tmp_path / "run"
    assert p2._claim_lock(folder) and not p2._claim_lock(folder)  # this process holds it
    (folder / p2.LOCK).write_text("999999999")  # no such process
    assert p2._claim_lock(folder) and (folder / p2.LOCK).read_text() == str(os.getpid())


@pytest.mark.slow
def test_bands_pair_each_arm_with_prorl_per_plateau_band(tiny_root):
    s, p = tiny_study(), tiny_phase2()
    table = sr.at_budgets(p2.collect(s, p, tiny_root), p.budgets)
    edges = [0.0, 0.01, 1.0]
    bands = sr.bands(table, tiny_root, s, edges)
    assert {"N16", "N512", "N512_prompts2", "N16_batch32", "N512_kl0.01"} <= set(bands["arm"])
    assert bands.groupby("arm")["prompts"].sum().eq(s.n_test).all()  # every held-out prompt in one band
    base = study.folder(tiny_root, study.chosen(s, tiny_root)) / p2.ARMS
    last = table[table["budget"] == p.budgets[-1]].set_index(["arm", "seed"])["step"]
    pick = uq.band_of(sr.banding_values(tiny_root, s), edges) == 0  # banded before the plateau, not at it
    d = [
        np.load(base / a / f"seed{k}" / f"pass1_step{last[(a, k)]}.npy")[pick].mean()
        for a in ("N512", "N16")
        for k in (0, 1)
    ]
    row = bands[(bands["arm"] == "N512") & (bands["q_band"] == uq.band_labels(edges)[0])].iloc[0]
    assert row["delta_vs_prorl"] == pytest.approx(np.mean(d[:2]) - np.mean(d[2:]))
    assert bands.loc[bands["arm"] == "N16", "delta_vs_prorl"].isna().all()


def test_the_best_update_and_the_best_n_are_read_off_their_tables():
    summary = pd.DataFrame(
        [dict(checkpoint="c", task="t", samples_per_update=64, q_band=band, n_rollouts=n, cosine=cos, delta_q=dq)
         for band, n, cos, dq in (("all", 4, 0.2, 0.01), ("all", 16, 0.5, -0.01), ("[0, 0.5)", 4, 0.9, 0.9))]
    )  # fmt: skip
    best = sr.best_update(summary).iloc[0]
    assert (best["best_N_cosine"], best["best_N_delta_q"]) == (16, 4)  # another band's larger values ignored
    iso = pd.DataFrame(
        [dict(budget=b, n_rollouts=n, lr_factor=1.0, seeds=3, pass1_mean=m, pass1_se=0.01, best_lr=best_lr)
         for b, n, m, best_lr in ((1, 8, 0.3, True), (1, 32, 0.4, True), (1, 128, 0.9, False), (2, 8, 0.6, True),
                                  (2, 32, 0.5, True))]
    )  # fmt: skip
    assert sr.best_n(iso)["n_rollouts"].tolist() == [32, 8]  # a multiple off the best lr never wins


@pytest.mark.slow
def test_the_notebook_reads_the_quick_study_back_and_writes_every_artifact(tiny_root, tmp_path, monkeypatch):
    """Notebook 04 with its defaults (the quick profile) pointed at the finished tiny study: every cell runs,
    every artifact is written, nothing is trained again."""
    from brorl_lib.core.paths import NOTEBOOKS_DIR, OUTPUT_DIR_ENV
    from brorl_lib.pipeline.execute import execute

    study.outside_check(tiny_study(), tiny_root)
    before = sorted((p, p.stat().st_mtime_ns) for p in tiny_root.rglob("*") if p.is_file())
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path / "figures"))
    execute(NOTEBOOKS_DIR / "04_laptop_rlvr.ipynb", tmp_path / "nb.ipynb", {"runs_dir": str(tiny_root)}, NOTEBOOKS_DIR)
    assert sorted((p, p.stat().st_mtime_ns) for p in tiny_root.rglob("*") if p.is_file()) == before
    out = tmp_path / "figures"
    for name in ("laptop_rlvr_screen", "laptop_rlvr_phase1", "laptop_rlvr_update_cosine", "fig1_laptop_rlvr",
                 "laptop_rlvr_bands", "laptop_rlvr_isocompute", "laptop_rlvr_prompt_fate",
                 "laptop_rlvr_best_n", "laptop_rlvr_drift_curves"):  # fmt: skip
        assert (out / f"{name}.png").is_file(), name
    quality = pd.read_csv(out / "laptop_rlvr_update_quality.csv", comment="#")
    assert {"checkpoint", "task", "n_rollouts", "samples_per_update", "q_band", "cosine", "cosine_se", "delta_q",
            "delta_q_se", "reps"} <= set(quality.columns)  # fmt: skip
    iso = pd.read_csv(out / "laptop_rlvr_isocompute.csv", comment="#")
    assert {"task", "n_rollouts", "budget", "lr_factor", "seeds", "pass1_mean", "pass1_se", "best_lr",
            "lr_at_edge"} <= set(iso.columns)  # fmt: skip
    for name in ("table1_laptop_rlvr", "table2_laptop_rlvr", "laptop_rlvr_verdict", "laptop_rlvr_prompt_fate",
                 "laptop_rlvr_drift"):  # fmt: skip
        assert len(pd.read_csv(out / f"{name}.csv", comment="#")), name
    check = pd.read_csv(out / "laptop_rlvr_best_n_check.csv", comment="#")  # the model against both grids
    assert {"update quality"} < set(check["grid"]) and check["grid"].str.startswith("IsoCompute").any()
    gradients = pd.read_csv(out / "laptop_rlvr_gradients.csv", comment="#")  # every checkpoint with its weights
    assert list(gradients["checkpoint"]) == list(study.quality_checkpoints(tiny_study(), tiny_root))
    assert (gradients["within"] >= 0).all() and (gradients["mean_pairwise_cosine"].abs() <= 1).all()


@pytest.mark.slow
def test_the_explore_views_slice_the_finished_study_and_refuse_an_empty_choice(tiny_root):
    from brorl_lib.rlvr import study_explorer

    cfg = CountdownStudyConfig(runs_dir=str(tiny_root))
    quality = study_explorer.quality_view(cfg)
    assert quality.controls["checkpoint"].options == tuple(study.quality_checkpoints(tiny_study(), tiny_root))
    drawn = quality.figure
    quality.controls["bands"].value = ()
    assert "bands=[] is not allowed" in quality.said and quality.figure is drawn  # the last figure stays
    arms = study_explorer.arms_view(cfg)
    arms.controls["arms"].value = ("BroRL N=512",)
    assert [t.get_text() for t in arms.figure.axes[0].get_legend().get_texts()] == ["BroRL N=512 (n=2)"]
    with pytest.raises(ValueError, match="no update-quality results"):
        study_explorer.quality_summary(CountdownStudyConfig(runs_dir=str(tiny_root / "nothing")))


@pytest.mark.slow
def test_a_finished_study_reruns_nothing(tiny_root, monkeypatch):
    calls = []
    monkeypatch.setattr(p2, "run_one", lambda *a, **k: calls.append(a))
    assert p2.run(tiny_study(), tiny_phase2(), tiny_root, progress=False) == 0 and not calls


@pytest.mark.slow
def test_the_mass_outside_the_canonical_answers_is_estimated_at_the_plateau(tiny_root):
    record = study.outside_check(tiny_study(), tiny_root, samples=8)
    assert 0.0 <= record["held_out"] <= 1.0 and 0.0 <= record["train"] <= 1.0
    assert record == study.outside_check(tiny_study(), tiny_root, samples=8)  # saved once, read back


def test_outside_mass_counts_accepted_answers_that_are_not_canonical(tok, split, monkeypatch):
    inst = split[0][0]
    answer = canonical_answers(inst)[0]
    texts = [answer, f"{answer} ", f"({answer})", "zzz"]  # canonical, two other accepted forms, wrong

    class Fake:
        group = torch.zeros(4, dtype=torch.long)

    Fake.texts = texts
    monkeypatch.setattr(exact_q, "generate", lambda *a, **k: Fake)
    mean, _ = exact_q.outside_mass(torch.nn.Identity(), tok, [inst], 4, 1.0, 8, seed=0)
    assert mean == 0.5


# --- the notebook's parameters ---


def test_the_notebook_defaults_build_the_tiny_study():
    cfg = CountdownStudyConfig()
    assert cfg.study() == tiny_study() and cfg.phase2() == tiny_phase2()


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(q_bands=[0.0, 0.5, 0.4, 1.0]), "q_bands=.* strictly increasing"),
        (dict(q_bands=[0.0, 1.5]), "q_bands"),
        (dict(update_samples=[100]), "update_samples=\\[100\\] .* multiple of 16"),
        (dict(budgets=[4096, 2048]), "budgets=.* strictly increasing"),
        (dict(iso_lr_factors=[0.5, 1.0]), "iso_lr_factors"),
        (dict(candidates=["arithmetic:2@32x1"]), "countdown only"),
        (dict(max_new_tokens=4), "max_new_tokens=4"),
        (dict(prompts=6), "prompts=6"),
        (dict(kl_coefs=[0.1, 0.1]), "kl_coefs"),
        (dict(kl_coefs=[0.0]), "kl_coefs"),
    ],
)
def test_bad_notebook_parameters_are_refused_before_any_work(change, message):
    with pytest.raises(ValueError, match=message):
        CountdownStudyConfig(**change)


def test_kept_counts_survive_an_interruption_bit_for_bit(tok, split, warm, tmp_path):
    """An arm cut after two steps and resumed counts the same kept prompts and ends with the same metrics as one
    run straight through."""
    opt = torch.optim.AdamW(warm.parameters(), lr=1e-4)
    tiny.save(warm, tok, tmp_path / "start")
    torch.save({"optimizer": opt.state_dict()}, tmp_path / "start" / TRAINER_STATE)
    arm = ArmSettings(
        "arm", StepSettings(16, max_new_tokens=6, refill="shortfall", dedupe=True), 4, 1e-4, 1000, 0, 1, 0
    )
    protocol = SamplingParams(16, 0.6, 0.95, 6)
    args = (tmp_path / "start", split[0], split[1], arm)
    straight = run_arm(*args, tmp_path / "a", protocol, progress=False, count_kept=True)
    run_arm(*args, tmp_path / "b", protocol, max_steps=2, progress=False, count_kept=True)
    resumed = run_arm(*args, tmp_path / "b", protocol, progress=False, count_kept=True)
    timing = ["elapsed_s", "generation_s"]
    pd.testing.assert_frame_equal(straight.drop(columns=timing), resumed.drop(columns=timing))
    a, b = np.load(tmp_path / "a" / KEPT_COUNTS), np.load(tmp_path / "b" / KEPT_COUNTS)
    assert np.array_equal(a, b) and a.sum() == straight["kept_samples"].sum() // 16


def test_the_committed_update_quality_grid_reads_back_from_a_clone(tmp_path):
    """The paper profile's measured checkpoints read back from the files git tracks alone (no phase-1 snapshot
    weights, which are not committed): the stage names its checkpoints as the committed rows do and returns them."""
    import shutil
    import subprocess

    from brorl_lib.core import variants
    from brorl_lib.core.paths import REPO_ROOT
    from brorl_lib.core.registry import get_notebook

    cfg = CountdownStudyConfig(**variants.profile_values(get_notebook("04_laptop_rlvr"), "paper"))
    runs = cfg.runs_path()
    tracked = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "-z", str(runs)], capture_output=True, text=True, check=True
    ).stdout.split("\0")
    if not any(tracked):
        pytest.skip("not a git checkout")
    for rel in filter(None, tracked):
        source = REPO_ROOT / rel
        if source.parent.name == "update_quality" or source.name in (study.SCREEN, "state.json", "instances.csv"):
            target = tmp_path / source.relative_to(runs)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    assert not list(tmp_path.rglob("snapshots"))
    names = study.quality_checkpoints(cfg.study(), tmp_path)
    committed = {p.stem for p in uq.grid_files(runs / "update_quality")} - {study.PREVIOUS_NAME}
    assert committed and committed <= set(names)  # the measured checkpoints are the stage's; the rest still to run
    rows = study.update_quality_stage(cfg.study(), cfg.quality(), tmp_path, progress=False, compute=False)
    assert set(rows["checkpoint"]) == committed and len(rows) > 0  # read back, nothing computed


# --- the plateau's checks and the IsoCompute differences, on small synthetic inputs ---


def _reward_study(tmp_path, monkeypatch, reward) -> study.StudySettings:
    """A phase-1 metrics.csv of 40 steps (step 0 without a reward) with ``reward(step)``, the plateau at step 40, and
    a study whose plateau windows are 2 evaluations of 10 steps (20 steps each)."""
    s = replace(tiny_study(), eval_every=10, snapshot_every=10, screen_max_steps=10, phase1_max_steps=40)
    (tmp_path / study.PHASE1).mkdir(parents=True, exist_ok=True)
    steps = np.arange(41)
    pd.DataFrame({"step": steps, "reward_mean": [np.nan] + [reward(k) for k in steps[1:]]}).to_csv(
        tmp_path / study.PHASE1 / "metrics.csv", index=False
    )
    monkeypatch.setattr(sr, "plateau_record", lambda root, s: {"step": 40})
    monkeypatch.setattr(study, "chosen", lambda s, root: None)
    monkeypatch.setattr(study, "folder", lambda root, c: tmp_path)
    return s


def test_the_training_rewards_rise_compares_the_plateau_rules_last_two_windows(tmp_path, monkeypatch):
    s = _reward_study(tmp_path, monkeypatch, lambda k: 0.5 + 0.001 * k)  # +0.1 per 100 steps
    r = sr.reward_rise(tmp_path, s)
    assert r["reward_window_before"] == pytest.approx(0.5 + 0.001 * 10.5)  # steps 1-20
    assert r["reward_window_last"] == pytest.approx(0.5 + 0.001 * 30.5)  # steps 21-40
    assert r["reward_rise"] == pytest.approx(0.02) and r["reward_rise_per_100_steps"] == pytest.approx(0.1)
    assert r["reward_rise_upper"] > r["reward_rise"] > 0 and not r["reward_flat"]
    s = _reward_study(tmp_path, monkeypatch, lambda k: 0.5 + 0.002 * (-1) ** k)  # noise about a flat level
    r = sr.reward_rise(tmp_path, s)
    assert abs(r["reward_rise"]) < 1e-12 and 0 < r["reward_rise_upper"] < 0.01 and r["reward_flat"]
    short = sr.window_rise(pd.Series([0.1, 0.2]), pd.Series([1, 2]), end=2, span=1, alpha=0.05)
    assert np.isnan(short["rise"])  # one step a window: no standard error, no bound


def _prorl_table(gains: dict[str, float], seeds: dict[str, int]) -> pd.DataFrame:
    """``at_budgets``-like rows: ProRL at multiples of phase 1's rate (and arms the control must ignore), two
    budgets; ``gains[arm]``: its held-out pass@1 above the plateau's 0.5."""
    factors = {"N16": 1.0, "N16_lr0.5x": 0.5, "N16_lr0.25x": 0.25, "N16_lr2x": 2.0, "N512_lr0.5x": 0.5}
    rows = [dict(arm=arm, label=arm, lr_factor=factors[arm], seed=k, budget=b, step=step, pass1=0.5 + gains[arm])
            for arm in gains for k in range(seeds.get(arm, 3)) for b, step in ((65536, 5), (131072, 9))]  # fmt: skip
    return pd.DataFrame(rows)


def test_the_lower_rate_control_decides_the_plateaus_kind_on_rates_with_two_seeds(monkeypatch):
    noise = np.random.default_rng(0).normal(0, 0.01, size=50)  # each prompt's offset, the same in every run
    table = _prorl_table({"N16": 0.0, "N16_lr0.5x": 0.03, "N16_lr0.25x": 0.0, "N16_lr2x": 0.2, "N512_lr0.5x": 0.2},
                         {"N16_lr0.25x": 1})  # fmt: skip
    by_run = table.set_index(["arm", "seed", "step"])["pass1"]
    monkeypatch.setattr(sr, "per_prompt", lambda root, s, arm, seed, step: noise + (
        0.5 if step == 0 else by_run[(arm, seed, step)]))  # fmt: skip
    p, s = phase2(), tiny_study()
    control = sr.lower_rate_control(table, p, None, s)
    assert list(control["lr_factor"]) == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]  # no higher rate, no other N
    assert list(control["budget"]) == [65536, 131072] * 3
    half = control[control["lr_factor"] == 0.5].iloc[0]
    assert half["difference"] == pytest.approx(0.03) and half["gain"] == pytest.approx(0.03)
    assert (half["ci_low"], half["ci_high"]) == pytest.approx((0.03, 0.03))  # the same gain on every seed and prompt
    assert half["seeds"] == 3 and not half["below_threshold"]
    own = control[control["lr_factor"] == 1.0].iloc[0]
    assert own["against"] == sr.PLATEAU_BASE and own["difference"] == pytest.approx(0.0)
    quarter = control[control["lr_factor"] == 0.25].iloc[0]
    assert quarter["seeds"] == 1 and quarter["interval"] == "prompts, one seed" and quarter["below_threshold"]
    assert quarter["label"] == "ProRL N=16, 0.25x lr"  # the arm's label, not its code
    assert sr.lower_rate_flat(control) is False
    assert sr.plateau_kind(True, control) == sr.RATE_NOISE  # a lower rate gains: the reward's flatness is not enough
    flat = _prorl_table({"N16": 0.0, "N16_lr0.5x": 0.0, "N16_lr0.25x": 0.05}, {"N16_lr0.25x": 1})
    by_run = flat.set_index(["arm", "seed", "step"])["pass1"]
    control = sr.lower_rate_control(flat, p, None, s)
    assert sr.lower_rate_flat(control) is True  # the one-seed 0.25x gain is shown, it does not decide
    assert sr.plateau_kind(True, control) == "plateau at every rate tried"
    assert sr.plateau_kind(False, control) == sr.RATE_NOISE  # the training reward still rises
    only_own = control[control["lr_factor"] == 1.0]
    assert sr.lower_rate_flat(only_own) is None and "pending" in sr.plateau_kind(True, only_own)
    assert sr.lower_rate_control(pd.DataFrame(), p, None, s).empty


def _iso_table(shift: dict[tuple[int, float], float]) -> pd.DataFrame:
    """IsoCompute rows, 3 seeds and two budgets per (N, multiple), at held-out pass@1 0.7 + ``shift``."""
    budgets = ((65536, 5), (131072, 9))
    rows = [dict(arm=f"iso_N{n}_lr{f:g}x", label="", role="isocompute", N=n, lr_factor=f, seed=k, budget=b, step=step,
                 pass1=0.7 + d) for (n, f), d in shift.items() for k in range(3) for b, step in budgets]  # fmt: skip
    return pd.DataFrame(rows)


def test_isocompute_differences_pair_each_n_at_its_own_best_rate_with_n16(monkeypatch):
    table = _iso_table({(16, 0.5): 0.0, (8, 1.0): -0.05, (32, 0.25): 0.002, (32, 0.5): 0.3})
    by_run = table.set_index(["arm", "seed", "step"])["pass1"]
    rng = np.random.default_rng(1)
    noise = {key: rng.normal(0, 0.02, size=60) for key in by_run.index}  # prompt noise of every run on its own
    monkeypatch.setattr(sr, "per_prompt", lambda root, s, arm, seed, step: by_run[(arm, seed, step)] + noise[
        (arm, seed, step)])  # fmt: skip
    tunings = {n: p2.Tuning(grid=(best,), needs=(), best=best, scores={}) for n, best in ((8, 1.0), (16, 0.5),
                                                                                         (32, 0.25))}  # fmt: skip
    diffs = sr.isocompute_differences(table, tunings, None, None)
    assert list(zip(diffs["budget"], diffs["n_rollouts"])) == [(65536, 8), (65536, 32), (131072, 8), (131072, 32)]
    assert (diffs["lr_factor"].tolist(), set(diffs["base_lr_factor"])) == ([1.0, 0.25, 1.0, 0.25], {0.5})
    n8, n32 = diffs[diffs["n_rollouts"] == 8], diffs[diffs["n_rollouts"] == 32]
    assert (n8["direction"] == "lower").all() and n8["mean"].between(-0.06, -0.04).all()
    assert (n32["direction"] == "no difference").all() and (n32["ci_high"] < 0.3).all()  # 0.5x of N=32 not used
    assert (diffs["ci_high"] - diffs["ci_low"] > diffs["ci_high_seeds"] - diffs["ci_low_seeds"]).any()  # prompts count
    said = sr.isocompute_summary(diffs)
    top = diffs.loc[diffs["budget"] == 131072, "ci_high"].max()
    assert said[0].startswith(f"no N beats N=16 by more than {top:+.3f} at 131,072 samples")
    assert "N=8 ends below N=16 at 65,536 and 131,072 samples" in said and len(said) == 2
    assert sr.isocompute_differences(table, {8: tunings[8], 32: tunings[32]}, None, None).empty  # no N=16 in the grid
    assert sr.isocompute_summary(diffs.head(0)) == ["no IsoCompute N has a paired difference to N=16 yet"]


# --- the regime set ---
def test_the_regime_band_is_cut_into_train_validation_and_test_by_its_shares():
    q = np.array([0.0, 1 / 1024, 1 / 512, 0.01, 0.03, 1 / 16, 0.5] + [0.02] * 13)
    parts = regime.assign_parts(q)
    inside = (q >= regime.BAND[0]) & (q < regime.BAND[1])
    assert (parts[~inside] == "").all() and set(parts[inside]) == set(regime.PARTS)
    counts = {name: int((parts == name).sum()) for name in regime.PARTS}
    assert counts == {"train": 8, "val": 4, "test": 4}  # 16 in the band: half, a quarter, a quarter
    assert (regime.assign_parts(q) == parts).all()  # the same seed, the same parts


def test_the_regime_pick_is_the_largest_rate_within_one_standard_error_and_the_grid_extends_past_an_edge():
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.01, (2, 200))

    def score_of(curve):
        return lambda f, seed: curve(f) + noise[seed]

    grid = (0.25, 0.5, 1.0, 2.0)
    flat_top = {0.25: 0.10, 0.5: 0.2003, 1.0: 0.2000, 2.0: 0.12}  # 1.0 within one standard error of the best
    k = regime.pick_rate(score_of(lambda f: flat_top[f]), grid, (0, 1))
    assert (k.best, k.pick, k.needs, k.grid) == (0.5, 1.0, (), grid)
    assert k.means[0.5] - k.ses[0.5] < k.means[1.0] < k.means[0.5]
    peaked = {0.25: 0.10, 0.5: 0.2003, 1.0: 0.1990, 2.0: 0.12}  # 1.0 more than one standard error below
    assert regime.pick_rate(score_of(lambda f: peaked[f]), grid, (0, 1)).pick == 0.5
    rising = regime.pick_rate(score_of(lambda f: f / 10 if f <= 4 else 0.8 - f / 10), (0.25, 0.5, 1.0), (0, 1))
    assert rising.grid == (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0) and rising.pick == rising.best == 4.0  # steps of 4,
    coarse = regime.pick_rate(score_of(lambda f: f / 10 if f <= 4 else 0.8 - f / 10), (0.25, 0.5, 1.0), (0, 1), False)
    assert coarse.grid == (0.25, 0.5, 1.0, 4.0, 16.0)  # then 2 and 8 halfway either side of the pick
    falling = regime.pick_rate(score_of(lambda f: -f), (0.25, 0.5, 1.0), (0, 1))
    assert falling.grid[0] == 0.25 / regime.STEP**regime.MAX_EXTENSIONS and falling.best == falling.grid[0]
    missing = regime.pick_rate(lambda f, seed: None if (f, seed) == (0.5, 1) else np.zeros(3), (0.25, 0.5, 1), (0, 1))
    assert missing.needs == ((0.5, 1),) and missing.pick is None


@pytest.mark.slow
def test_a_regime_run_trains_on_the_band_and_scores_exact_q_per_prompt(tiny_root, tmp_path, monkeypatch):
    s, p = tiny_study(), tiny_phase2()
    tiny_root = Path(shutil.copytree(tiny_root, tmp_path / "study"))  # the other tests' study stays as it was
    for name, value in (("POOL_SIZE", 80), ("BAND", (0.0, 1.01)), ("BUDGET", 2048), ("EVAL_BUDGETS", (1024,)),
                        ("SCREEN_SEEDS", (0,)), ("GRIDS", {16: (0.5, 1.0, 2.0), 512: (0.5, 1.0, 2.0)})):  # fmt: skip
        monkeypatch.setattr(regime, name, value)
    table = regime.pool_stage(s, tiny_root, progress=False)
    seen = {i.prompt for part in study.split(s, study.chosen(s, tiny_root)) for i in part}
    assert not seen & set(table["prompt"]) and table["q"].between(0, 1).all()
    part = regime.parts(s, tiny_root)
    sizes = [len(part[n]) for n in regime.PARTS]
    assert sum(sizes) == len(table) and all(abs(k - f * len(table)) <= 1 for k, f in zip(sizes, regime.SHARES))
    planned = regime.plan(tiny_root, s, p)
    assert [(a.n_rollouts, seed) for a, seed in planned[:2]] == [(16, 0), (512, 0)]  # interleaved
    assert regime.run(tiny_root, s, p, progress=False, limit=2) == 2
    ran = [(a, seed) for a, seed in planned if regime.finished(tiny_root, s, a, seed)]
    assert len(ran) == 2 and ran[0] == planned[0]
    for a, seed in ran:
        out = regime.arm_folder(tiny_root, s, a, seed)
        metrics = pd.read_csv(out / "metrics.csv")
        assert metrics["samples"].iloc[-1] >= 2048 and metrics.loc[1:, "kl_ref_all"].notna().all()
        assert len(np.load(out / "val_step0.npy")) == len(part["val"]) and regime.finished(tiny_root, s, a, seed)
        assert np.load(out / KEPT_COUNTS).sum() > 0 and len(np.load(out / regime.Q_END)) == len(part["train"])
        assert len(np.load(out / regime.PROTOCOL_HELD)) == s.n_test and not (out / "checkpoint").exists()
        start = np.load(out / "val_step0.npy")  # the plateau's exact q, the pool's own numbers
        assert np.allclose(start, table.set_index("prompt").loc[[i.prompt for i in part["val"]], "q"], atol=1e-5)
    assert regime.final_val(tiny_root, s, *ran[0]) is not None and len(regime.plan(tiny_root, s, p)) == 4
    with pytest.raises(ValueError, match="settings"):  # another band on the same pool is refused
        monkeypatch.setattr(regime, "BAND", (0.0, 0.5))
        regime.pool_stage(s, tiny_root, progress=False)
