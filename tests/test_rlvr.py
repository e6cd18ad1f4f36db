"""The laptop-scale RLVR pieces: tokenizer, model, tasks, sampling, warm start, verl algorithm, one RL step."""

import json
import os
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from brorl_lib.paper import setup as paper_setup
from brorl_lib.rlvr import algorithm as alg
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr import tasks, warm_start
from brorl_lib.rlvr.sampling import encode_prompts, generate
from brorl_lib.rlvr.step import StepSettings, rl_step
from brorl_lib.rlvr.tokenizer import build_tokenizer


@pytest.fixture(scope="module")
def tok():
    return build_tokenizer()


@pytest.fixture
def model(tok):
    return tiny.build_model(tiny.TinyModelShape(), tok, seed=0)


def test_tokenizer_round_trip_and_unknown_characters(tok):
    ids = tok("wsr Free may=", add_special_tokens=False)["input_ids"]
    assert len(ids) == len("wsr Free may=") and tok.decode(ids) == "wsr Free may="
    with pytest.raises(ValueError, match="characters the tokenizer does not know"):
        encode_prompts(tok, ["café="])


@pytest.mark.parametrize("task, level", [("arithmetic", 2), ("spell_backward", 2), ("word_sequence_reversal", 2)])
def test_tasks_verify_split_and_encode(tok, task, level):
    train, test = tasks.make_split(task, level, 200, 40, seed=3)
    assert not {i.prompt for i in train} & {i.prompt for i in test}
    assert [i.prompt for i in test] == [i.prompt for i in tasks.make_split(task, level, 200, 40, seed=3)[1]]
    for inst in test[:5]:
        assert tasks.score(inst, inst.answer) == 1.0 and tasks.score(inst, "x") == 0.0
        assert 0.0 < tasks.score(inst, inst.answer + "x") < 1.0  # near misses earn partial credit
    encode_prompts(tok, [i.prompt + i.answer for i in train + test])  # every character is in the alphabet


def test_bad_task_parameters():
    with pytest.raises(ValueError, match="task='sudoku'"):
        tasks.make_split("sudoku", 1, 10, 10, 0)
    with pytest.raises(ValueError, match="difficulty=7"):
        tasks.make_split("arithmetic", 7, 10, 10, 0)
    with pytest.raises(ValueError, match="too few distinct instances"):
        tasks.make_split("arithmetic", 1, 400, 100, 0)  # single digits: only 200 distinct prompts


def test_model_saves_in_hf_format_and_missing_warm_start_is_clear(tok, model, tmp_path):
    tiny.save(model, tok, tmp_path / "m")
    loaded, tok2 = tiny.load(tmp_path / "m")
    x = encode_prompts(tok, ["7+5="])[0]
    torch.testing.assert_close(loaded(x).logits, model(x).logits)
    assert len(tok2) == len(tok)
    with pytest.raises(ValueError, match="no model at"):
        tiny.load(tmp_path / "missing")


def test_kv_cache_sampling_matches_full_recomputation(tok, model):
    model.eval()
    prompts = ["12+7=", "rev bird=", "wsr free may="]
    cached = generate(model, tok, prompts, 5, 10, 0.9, torch.Generator().manual_seed(4))
    full = generate(model, tok, prompts, 5, 10, 0.9, torch.Generator().manual_seed(4), use_cache=False)
    assert torch.equal(cached.response_ids, full.response_ids)
    torch.testing.assert_close(cached.log_probs, full.log_probs, atol=1e-5, rtol=0)
    assert cached.group.tolist() == [0] * 5 + [1] * 5 + [2] * 5
    eos = tok.eos_token_id
    for row, m in zip(cached.response_ids, cached.response_mask):  # mask covers tokens up to the first <eos>
        first = (row == eos).nonzero()
        n_valid = int(first[0]) + 1 if len(first) else len(row)
        assert m.tolist() == [1] * n_valid + [0] * (len(row) - n_valid)
    again = generate(model, tok, prompts, 5, 10, 0.9, torch.Generator().manual_seed(4))
    assert again.texts == cached.texts


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


def test_short_rl_run_raises_reward(tok, model):
    train, test = tasks.make_split("spell_backward", 1, 300, 40, seed=0)
    warm_start.train_sft(model, tok, train, steps=100, batch_size=32, lr=3e-3, seed=0)  # well short of perfect

    def held_out() -> float:
        model.eval()
        r = generate(model, tok, [i.prompt for i in test], 8, 8, 1.0, torch.Generator().manual_seed(0))
        return float(np.mean([tasks.score(test[g], t) for g, t in zip(r.group.tolist(), r.texts)]))

    before = held_out()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(1)
    settings = StepSettings(n_rollouts=16, max_new_tokens=8)
    for k in range(80):
        metrics = rl_step(model, tok, opt, [train[(8 * k + j) % len(train)] for j in range(8)], settings, gen)
    assert metrics["samples"] == 128 and 0 < metrics["pass_rate"] <= 1 and metrics["updates"] == 2
    assert held_out() > before + 0.05  # measured: 0.506 -> 0.634


def test_arm_resumes_bit_for_bit(tok, model, tmp_path):
    from brorl_lib.rlvr.run import ArmSettings, run_arm

    train, test = tasks.make_split("spell_backward", 1, 100, 8, seed=0)
    tiny.save(model, tok, tmp_path / "start")
    settings = ArmSettings(
        name="arm",
        step=StepSettings(n_rollouts=4, max_new_tokens=6),
        prompts_per_step=2,
        lr=1e-3,
        sample_budget=48,
        eval_every=2,
        checkpoint_every=2,
        seed=5,
    )
    kwargs = dict(eval_samples=2, eval_temperature=1.0, progress=False)
    whole = run_arm(tmp_path / "start", train, test, settings, tmp_path / "whole", **kwargs)
    first = run_arm(tmp_path / "start", train, test, settings, tmp_path / "cut", max_steps=4, **kwargs)
    assert first["step"].max() == 4
    os.replace(tmp_path / "cut" / "checkpoint", tmp_path / "cut" / "checkpoint.old")  # cut during a swap
    resumed = run_arm(tmp_path / "start", train, test, settings, tmp_path / "cut", **kwargs)
    timing = ["elapsed_s", "generation_s"]
    assert len(whole) == 7 and whole["samples"].iloc[-1] == 48
    pd.testing.assert_frame_equal(whole.drop(columns=timing), resumed.drop(columns=timing))
    a, _ = tiny.load(tmp_path / "whole" / "checkpoint")
    b, _ = tiny.load(tmp_path / "cut" / "checkpoint")
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
    with pytest.raises(ValueError, match="no model at"):
        run_arm(tmp_path / "nowhere", train, test, settings, tmp_path / "other", **kwargs)


QUICK_EXPERIMENT = dict(
    task_names=("spell_backward", "arithmetic"),
    difficulties=(1, 1),
    n_train=60,
    n_test=6,
    warm_start_steps=20,
    warm_start_lr=3e-3,
    phase1_prompts=2,
    phase1_max_steps=4,
    plateau_patience=5,
    plateau_tol=0.0,
    arm_rollouts=(16, 32),
    arm_prompts=1,
    sample_budget=128,
    base_lr=1e-3,
    mini_batches=2,
    temperature=1.0,
    max_new_tokens=6,
    eval_samples=2,
    eval_temperature=0.6,
    eval_every=2,
    eval_points=2,
    theory_prompts=2,
    theory_samples=64,
    theory_batches=4,
)


@pytest.fixture(scope="module")
def experiment_run(tmp_path_factory):
    from brorl_lib.rlvr import experiment as ex

    runs = tmp_path_factory.mktemp("runs")
    settings = ex.ExperimentSettings(**QUICK_EXPERIMENT)
    return settings, runs, ex.run(settings, [0], runs, progress=False, base_lr_rollouts=(32,))


def test_experiment_runs_both_phases_at_equal_budgets_and_resumes(experiment_run):
    from brorl_lib.rlvr import experiment as ex

    settings, runs, first = experiment_run
    assert ex.prompts_for(settings, 16) == 4 and ex.prompts_for(settings, 32) == 1
    assert first.groupby("arm")["samples"].max().to_dict() == {
        "phase 1": 128,
        "N=16": 128,
        "N=32": 128,
        "N=32 base lr": 128,
    }
    # square-root rule: 32 x 1 samples per step against 16 x 4; the ablation arm keeps the base rate
    assert first.groupby("arm")["lr"].first().to_dict() == pytest.approx(
        {"phase 1": 1e-3, "N=16": 1e-3, "N=32": 1e-3 * 0.5**0.5, "N=32 base lr": 1e-3}
    )
    assert first.groupby("arm")["step"].max().to_dict() == {"phase 1": 4, "N=16": 2, "N=32": 4, "N=32 base lr": 4}
    assert first[first.arm == "phase 1"]["step"].max() == 4  # max steps reached before any plateau
    assert json.loads((runs / "seed0" / "phase1" / "phase1_done.json").read_text()) == {"step": 4, "plateau": False}
    # eval_points=2: each arm is evaluated at its start, half-way and at its end
    assert first[first.arm == "N=32"].dropna(subset=["test_score"])["step"].tolist() == [0, 2, 4]
    for folder in (
        "phase1",
        "arm_N16",
        "arm_N32",
        "arm_N32_base_lr",
    ):  # finished arms need no checkpoint to be read back
        shutil.rmtree(runs / "seed0" / folder / "checkpoint")
    again = ex.run(settings, [0], runs, progress=False, base_lr_rollouts=(32,))  # all finished: nothing re-runs
    timing = ["elapsed_s", "generation_s"]
    pd.testing.assert_frame_equal(first.drop(columns=timing), again.drop(columns=timing))
    assert ex.final_instance_scores(runs, 0, "arm_N32").shape == (12,)
    with pytest.raises(ValueError, match=r"other settings \(differs in \['base_lr'\]\)"):
        ex.run(ex.ExperimentSettings(**{**QUICK_EXPERIMENT, "base_lr": 2e-3}), [0], runs, progress=False)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"arm_rollouts": (1,)}, "arm_rollouts item=1"),
        ({"task_names": ("chess", "arithmetic")}, "task_names item"),
        ({"difficulties": (1,)}, "one level per task"),
        ({"difficulties": (1, 7)}, "difficulty of arithmetic=7"),
        ({"arm_prompts": 0}, "arm_prompts=0"),
        ({"sample_budget": 96}, "must be a multiple of the N=16 arm's samples per step \\(64\\)"),
        ({"arm_rollouts": (16, 32, 32)}, "names an N twice"),
        ({"n_train": 300}, "too few distinct instances"),
        ({"device": "tpu"}, "device='tpu'"),
    ],
)
def test_experiment_rejects_bad_settings_before_work(change, message, tmp_path):
    from brorl_lib.rlvr import experiment as ex

    with pytest.raises(ValueError, match=message):
        ex.run(ex.ExperimentSettings(**{**QUICK_EXPERIMENT, **change}), [0], tmp_path)
    assert not any(tmp_path.iterdir())


def test_report_tables_from_a_run(experiment_run):
    from brorl_lib.rlvr import report

    settings, runs, metrics = experiment_run
    t1 = report.table1(metrics, settings)
    assert t1["arm"].tolist() == ["N=16", "N=32", "N=32 base lr"] and t1["samples"].tolist() == [128] * 3
    assert t1["steps"].tolist() == [2, 4, 4] and t1["prompts_per_step"].tolist() == [4, 1, 1]
    t2 = report.table2(metrics)
    assert ((t2["pass_rate_pct"] >= 0) & (t2["pass_rate_pct"] <= 100)).all() and (t2["samples_per_s"] > 0).all()
    instances = report.instance_scores(runs, metrics)
    assert set(instances["task"]) == {"spell_backward", "arithmetic"} and len(instances) == 3 * 3 * 12
    evals = report.evaluations(metrics)
    last = evals.groupby("arm").tail(1).set_index("arm")["test_score"]
    final_step = instances.groupby("arm")["step"].transform("max")
    per_instance = instances[instances.step == final_step].groupby("arm")["score"].mean()
    np.testing.assert_allclose(last.sort_index(), per_instance.sort_index())  # the two records agree
    shrink = report.knowledge_shrinkage(instances)
    pairs = report.final_vs_start(instances)
    expected = 100 * (pairs[pairs.arm == "N=32"]["final"] < pairs[pairs.arm == "N=32"]["start"]).mean()
    assert set(pairs["arm"]) == {"N=16", "N=32", "N=32 base lr"}
    assert shrink.set_index(["arm", "task"]).at[("N=32", "all"), "dropped_pct"] == pytest.approx(expected)
    tests = report.paired_tests(instances)
    assert tests["arm"].tolist() == ["N=32", "N=32 base lr"] and tests["n"].tolist() == [12, 12]


def test_theorem1_on_real_batches(experiment_run):
    from brorl_lib.rlvr import mass_balance, report
    from brorl_lib.theory import formulas as theory

    _, runs, _ = experiment_run
    supports, _, summary = report.theory_tables(runs, [0])
    assert len(supports) == 2 and (supports["coverage"] > 0).all() and (supports["coverage"] <= 1 + 1e-9).all()
    assert summary["N"].tolist() == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert (np.diff(summary["expected_u2"]) <= 1e-15).all()  # Corollary 3: falls with N
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


def test_notebook_config_rejects_bad_parameters_by_name():
    import ast

    import papermill

    from brorl_lib.core.registry import get_notebook
    from brorl_lib.rlvr.report import LaptopRLVRConfig

    spec = get_notebook("04_laptop_rlvr")
    defaults = {k: ast.literal_eval(v["default"]) for k, v in papermill.inspect_notebook(str(spec.path)).items()}
    cfg = LaptopRLVRConfig(**defaults)
    assert cfg.settings().model.hidden == defaults["hidden_size"] and cfg.runs_path().is_absolute()
    for change, message in [
        ({"arm_rollouts": [32, 512]}, "must include the baseline N=16"),
        ({"seeds": [0, 0]}, "seeds=\\[0, 0\\] is not allowed: 0 is listed twice"),
        ({"tasks": "spell_backward"}, "tasks='spell_backward' is not allowed"),
        ({"hidden_size": 130}, "hidden_size=130 is not allowed: must be a multiple of 4"),
        ({"runs_dir": " "}, "runs_dir=' ' is not allowed: expected a non-empty string"),
    ]:
        with pytest.raises(ValueError, match=message):
            LaptopRLVRConfig(**{**defaults, **change})


def test_phase1_stops_at_the_plateau_and_a_resumed_phase1_checks_first(tmp_path):
    from brorl_lib.rlvr import experiment as ex

    settings = ex.ExperimentSettings(
        **{
            **QUICK_EXPERIMENT,
            "arm_rollouts": (16,),
            "plateau_patience": 1,
            "plateau_tol": 1.0,
            "theory_prompts": 1,
            "theory_samples": 8,
        }
    )
    ex.run(settings, [0], tmp_path, progress=False)
    done = tmp_path / "seed0" / "phase1" / "phase1_done.json"
    assert json.loads(done.read_text()) == {"step": 2, "plateau": True}  # no gain of 1.0 after one evaluation
    done.unlink()  # as if interrupted after the chunk was saved but before the plateau check
    train, test = ex.data(settings, 0)
    start = tmp_path / "seed0" / "warm_start"
    metrics = ex.phase1(settings, start, train, test, 0, tmp_path / "seed0" / "phase1", progress=False)
    assert metrics["step"].max() == 2 and json.loads(done.read_text()) == {"step": 2, "plateau": True}
