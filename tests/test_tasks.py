"""brorl_lib.tasks: one source of instances and scores for the laptop reward, the verl reward and the evaluation.

The agreement tests feed the same answers through all three entry points, as each is called in use:
``rlvr.tasks.score`` (behind the laptop's binary reward), ``verl_recipe.rewards.compute_score`` (verl's keywords) and
``evaluation.scoring.score``. They agree on every score and on the pass decision, except where stated:

* format: the laptop reward reads the whole response as the answer (the tiny model answers right after its
  compact prompt); verl and the evaluation read ProRL's ``<answer>`` tags after ``</think>`` (no tags: 0);
* range: the laptop reward keeps the verifier's raw value, verl and the evaluation clip it to [0, 1]
  (spell_backward's float sum can give 1.0000000000000002); the pass decision is the same;
* partial credit is intended everywhere a verifier is continuous (Reasoning Gym: e.g. spell_backward's
  share of letters in place, countdown's 0.01 for a wrong answer in the right format; code: the share of
  tests passed) and never passes; math is binary.
"""

import json
import os
import subprocess
import sys

import pandas as pd
import pytest

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.evaluation import scoring
from brorl_lib.evaluation.datasets import RG_EVAL_SEED, BenchmarkInstance, load_instances, rg_category, rg_prompt
from brorl_lib.rlvr import tasks as laptop
from brorl_lib.tasks import answers, credit, generation, math_scoring, verifiers
from brorl_lib.verl_recipe import data as verl_data
from brorl_lib.verl_recipe.codec import encode_entry
from brorl_lib.verl_recipe.rewards import compute_score

THINK = "<think>Let me work it out. <answer>a draft</answer></think>\n"


def verl_reward(
    data_source: str, response: str, ground_truth: str, extra_info: dict, math_verify: str = "inline"
) -> dict:
    """compute_score as verl calls it (keywords), with the recipe's reward_kwargs."""
    return compute_score(
        data_source=data_source,
        solution_str=response,
        ground_truth=ground_truth,
        extra_info=extra_info,
        math_verify=math_verify,
    )


def rg_views(task: str, entry: dict) -> tuple[dict, BenchmarkInstance]:
    """The verl row fields and the evaluation instance of one Reasoning Gym entry (as data.py and datasets.py
    build them)."""
    row = {
        "data_source": f"reasoning_gym.{task}",
        "ground_truth": str(entry["answer"]),
        "extra_info": {
            "index": 0,
            "split": "val",
            "family": "reasoning_gym",
            "task": task,
            "entry": encode_entry(entry),
        },
    }
    return row, BenchmarkInstance(f"rg_{rg_category(task)}", f"{task}/0", task, rg_prompt(entry["question"]), entry)


def three_scores(inst: laptop.LaptopInstance, answer: str, response: str | None = None) -> tuple[float, dict, float]:
    """Laptop reward of ``answer``; verl reward and evaluation score of ``response`` (default: ``answer`` in
    ProRL's format, after some thinking)."""
    response = f"{THINK}<answer>{answer}</answer>" if response is None else response
    row, bench = rg_views(laptop.FAMILIES[inst.task].dataset, inst.entry)
    verl = verl_reward(row["data_source"], response, row["ground_truth"], row["extra_info"])
    return laptop.score(inst, answer), verl, scoring.score(bench, response)


@pytest.fixture(scope="module")
def laptop_instances() -> dict[str, laptop.LaptopInstance]:
    """One held-out instance of each laptop task family."""
    return {task: laptop.make_split(task, fam.levels[1], 20, 5, seed=0)[1][0] for task, fam in laptop.FAMILIES.items()}


# --- agreement ----------------------------------------------------------------------------------------


def test_the_three_scorers_agree_on_the_same_answers(laptop_instances):
    for task, inst in laptop_instances.items():
        answer = inst.answer
        cases = {
            "correct": answer,
            "wrong": "zzz",
            "malformed": "",
            "near miss": answer[:-1],
            "extra text": answer + " x",
        }
        for case, text in cases.items():
            lap, verl, ev = three_scores(inst, text)
            assert credit.clip(lap) == verl["score"] == ev, (task, case, lap, verl, ev)
            assert credit.passed(lap) == bool(verl["acc"]) == credit.passed(ev), (task, case)
        lap, verl, ev = three_scores(inst, answer)
        assert lap == verl["score"] == ev == 1.0 and verl["acc"] == 1.0
        lap, verl, ev = three_scores(inst, "zzz")
        floor = 0.01 if task == "countdown" else 0.0  # Reasoning Gym's countdown scores any unparsable answer 0.01
        assert lap == verl["score"] == ev == floor and verl["acc"] == 0.0


def test_partial_credit_is_the_same_everywhere_and_never_passes(laptop_instances):
    inst = laptop_instances["spell_backward"]
    lap, verl, ev = three_scores(inst, inst.answer[:-1])  # all letters but the last in place
    assert 0.0 < lap < 1.0 and lap == verl["score"] == ev
    assert not credit.passed(lap) and verl["acc"] == 0.0 and not credit.passed(ev)


def test_the_laptop_reward_reads_the_bare_answer_verl_and_evaluation_need_tags(laptop_instances):
    for inst in laptop_instances.values():
        lap, verl, ev = three_scores(inst, inst.answer, response=inst.answer)  # no <answer> tags
        assert lap == 1.0 and verl == {"score": 0.0, "acc": 0.0} and ev == 0.0
        only_thinking = f"<think><answer>{inst.answer}</answer></think> I am not sure."  # no tag after </think>
        _, verl, ev = three_scores(inst, inst.answer, response=only_thinking)
        assert verl["score"] == ev == 0.0


def test_a_raw_score_above_one_is_clipped_by_verl_and_evaluation_and_passes_everywhere():
    entry = generation.entries("spell_backward", 1, 0)[0]  # a 9-letter word: 9 * (1/9) sums to 1.0000000000000002
    inst = laptop.LaptopInstance("spell_backward", "rev x=", entry["answer"], entry)
    lap, verl, ev = three_scores(inst, entry["answer"] + " x")
    assert lap == 1.0000000000000002 and verl == {"score": 1.0, "acc": 1.0} and ev == 1.0
    assert credit.passed(lap) and credit.passed(ev)


def test_verl_and_evaluation_agree_beyond_the_laptop_tasks():
    """Format credit, verifiers that raise, a missing answer, math (binary) and code (share of tests)."""
    countdown = generation.entries("countdown", 1, 3)[0]
    factors = generation.entries("prime_factorization", 1, 3)[0]
    cases = [
        (countdown, "countdown", "<answer>not an expression</answer>", 0.01),  # right format, wrong answer
        (countdown, "countdown", "not an expression", 0.0),  # no tags: no answer (the verifier alone gives 0.01)
        (countdown, "countdown", f"<answer>{countdown['answer']}</answer>", 1.0),
        (factors, "prime_factorization", "<answer>abc</answer>", 0.0),  # its verifier raises ValueError
        (factors, "prime_factorization", f"<answer>{factors['answer']}</answer>", 1.0),
    ]
    for entry, task, response, expected in cases:
        row, bench = rg_views(task, entry)
        verl = verl_reward(row["data_source"], response, row["ground_truth"], row["extra_info"])
        assert verl["score"] == scoring.score(bench, response) == expected, (task, response)
        assert verl["acc"] == float(credit.passed(expected))
    assert verifiers.verifier("countdown")(None, countdown) == 0.01  # why a missing answer is scored 0 by us

    math = BenchmarkInstance("math500", "0", "math500", "q", "\\frac{3}{4}")
    for response, expected in [
        (r"so \boxed{\dfrac34}", 1.0),
        (r"so \boxed{0.75}", 1.0),
        (r"so \boxed{0.7}", 0.0),
        (r"<think>\boxed{0.75}</think> so \boxed{1}", 0.0),
        ("no box", 0.0),
    ]:
        verl = verl_reward("math.dsr", response, math.reference, {})
        assert verl["score"] == scoring.score(math, response) == expected, response
        assert verl["acc"] == expected
    # verl's own backend for Math-Verify (a process pool) agrees with the in-process one
    assert verl_reward("math.dsr", r"so \boxed{0.75}", math.reference, {}, math_verify="pool")["score"] == 1.0

    tests = {"inputs": ["1 2\n", "3 4\n"], "outputs": ["3\n", "7\n"]}
    code = BenchmarkInstance("apps", "add", "apps", "q", tests)
    programs = {
        "```python\na, b = map(int, input().split())\nprint(a + b)\n```": 1.0,
        "```python\na, b = map(int, input().split())\nprint(3)\n```": 0.5,
        "```python\nprint(\n```": 0.0,
    }
    for program, expected in programs.items():
        verl = verl_reward("code.apps", program, json.dumps(tests), {})
        assert verl["score"] == scoring.score(code, program) == expected, program
        assert verl["acc"] == float(credit.passed(expected))


# --- the pieces -----------------------------------------------------------------------------------------


def test_answer_extraction():
    assert answers.final_region("<think>a</think>b</think>c") == "c" and answers.final_region("abc") == "abc"
    assert answers.extract_answer("<answer>a</answer> then <answer> b </answer>") == "b"
    assert answers.extract_answer("<think><answer>a</answer></think> none") is None
    assert answers.extract_answer("<answer>a") is None
    assert answers.extract_code("a ```python\nprint(1)\n``` b ```py\nprint(2)\n```") == "print(2)\n"
    assert answers.extract_code("<think>```python\nx\n```</think>print(3)") == "print(3)"


def test_math_scoring_uses_verl_then_math_verify():
    score = math_scoring.score_math
    assert score("so \\boxed{\\dfrac{1}{2}}", "\\frac12") == 1.0  # verl's string normalisation
    assert score("the answer is \\boxed{0.5}", "\\frac{1}{2}") == 1.0  # math-verify's equivalence
    assert score("the answer is \\boxed{0.75}", "\\frac{3}{4}") == 1.0  # math-verify only
    assert score("the answer is \\boxed{0.75}", "\\frac{3}{4}", math_verify="off") == 0.0
    assert score("\\boxed{x^2+2x+1}", "(x+1)^2") == 1.0
    assert score("\\boxed{3}", "4") == 0.0
    assert score("<think>\\boxed{4}</think> final: \\boxed{5}", "4") == 0.0  # only after </think>
    with pytest.raises(ValueError, match="math_verify='fast' is not allowed"):
        score("\\boxed{1}", "1", math_verify="fast")


def test_the_last_boxed_answer_is_the_answer():
    assert answers.final_boxed("so \\boxed{3}. Wait, that is wrong: \\boxed{5}.") == ["5"]
    assert answers.final_boxed("$\\boxed{1}$, $\\boxed{2}$ and \\boxed{\\frac{1}{2}}") == ["1", "2", "\\frac{1}{2}"]
    assert answers.final_boxed("\\boxed{(3, 3)} for part (a) and \\boxed{(1, 1)}") == ["(1, 1)"]
    assert answers.final_boxed("\\boxed{\\boxed{4}}") == ["\\boxed{4}"] and answers.final_boxed("no box") == []
    assert answers.final_boxed("\\boxed{3} then, cut off: \\boxed{5") == ["3"]  # the last complete box
    score = math_scoring.score_math
    # a response correcting itself: math-verify alone compares the set {0.3, 0.5} and rejects both
    assert score("\\boxed{0.3}. Hmm, no: \\boxed{0.5}", "\\frac{1}{2}") == 1.0
    assert score("\\boxed{0.3}. Hmm, no: \\boxed{0.5}", "0.3") == 0.0
    assert score("\\boxed{1}, \\boxed{2} and \\boxed{3}", "1, 2, 3") == 1.0  # one answer written as a list of boxes


def test_percent_answers_read_as_math_verify_reads_them():
    score = math_scoring.score_math
    for response in ("28 percent", "\\boxed{28 percent}", "$\\boxed{28}$ pct", "\\boxed{28\\%}", "\\boxed{28}"):
        assert score(response, "28\\%") == 1.0, response
    assert score("\\boxed{0.28}", "28\\%") == 1.0  # 28% is 0.28 against a decimal, as math-verify decides
    assert score("\\boxed{28\\%}", "28") == 1.0 and score("\\boxed{28\\,\\%}", "28") == 1.0
    assert score("\\boxed{29\\%}", "28\\%") == 0.0 and score("\\boxed{0.29}", "28\\%") == 0.0
    assert score("\\boxed{28 percent}", "28\\%", math_verify="off") == 1.0  # verl's MATH scorer alone


def test_euler_number_in_upright_type_is_e():
    score = math_scoring.score_math
    assert score("\\boxed{\\frac{1}{\\mathrm{e}}}", "\\frac{1}{e}") == 1.0
    assert score("\\boxed{1 - \\frac{1}{e}}", "1 - \\frac{1}{\\mathrm{e}}") == 1.0
    assert score("\\boxed{\\text{e}^{2}}", "e^2") == 1.0
    # math-verify alone cuts "1 - \frac{1}{\mathrm{e}}" off at \mathrm and would accept these two
    assert score("\\boxed{1 + \\frac{1}{\\mathrm{e}}}", "1 - \\frac{1}{\\mathrm{e}}") == 0.0
    assert score("\\boxed{1}", "1 - \\frac{1}{\\mathrm{e}}") == 0.0
    assert math_scoring.reference_text("\\mathrm e^{x}") == "e^{x}"
    assert math_scoring.reference_text("\\mathrm{exp}(x)") == "\\mathrm{exp}(x)"  # only a lone e is Euler's number


def test_math_scoring_agrees_with_math_verify_on_its_own_cases():
    """Math-Verify 0.9.0's own test cases (tests/data/math_verify_cases.json, source named there): the scorer
    gives math-verify's verdict on each, except the cases of a named decision, where it gives the other one.
    The reference is the case's gold as a data set row holds it: without its ``$`` delimiters, as
    ``evaluation.datasets`` reads answers."""
    data = json.loads((REPO_ROOT / "tests" / "data" / "math_verify_cases.json").read_text(encoding="utf-8"))
    cases = data["cases"]
    verdicts = [int(math_scoring.score_math(c["pred"], c["gold"].strip().strip("$").strip())) for c in cases]
    unexplained = [
        (i, c["test"], c["gold"][:60], c["expected"], v)
        for i, (c, v) in enumerate(zip(cases, verdicts, strict=True))
        if (v != c["expected"]) != ("decision" in c)
    ]
    assert unexplained == []  # every disagreement is a named decision, and every named decision still disagrees
    agree = sum(v == c["expected"] for c, v in zip(cases, verdicts, strict=True))
    assert (agree, len(cases)) == (264, 275)  # 96.0%; before the percent, e and last-box rules: 259 of 275
    assert {c["decision"] for c in cases if "decision" in c} == set(data["decisions"])


def test_verifier_scores_and_the_pass_rule():
    entry = generation.entries("spell_backward", 1, 3)[0]
    word = entry["answer"]
    assert verifiers.tagged_score("spell_backward", f"<think>hm</think><answer>{word}</answer>", entry) == 1.0
    assert 0.0 < verifiers.tagged_score("spell_backward", f"<answer>{word[:-1]}</answer>", entry) < 1.0
    assert verifiers.tagged_score("spell_backward", word, entry) == 0.0  # no <answer> tag
    assert (
        verifiers.answer_score("spell_backward", word, entry) == 1.0
        and verifiers.answer_score("spell_backward", None, entry) == 0.0
    )
    assert credit.passed(1.0) and credit.passed(1.0000000000000002) and not credit.passed(0.9999999999999999)
    assert credit.passed(pd.Series([0.5, 1.0])).tolist() == [False, True]
    assert credit.clip(1.0000000000000002) == 1.0 and credit.clip(-0.5) == 0.0 and credit.clip(0.25) == 0.25


# --- generation -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_committed_laptop_runs_get_the_same_held_out_instances():
    """The held-out instances of every committed laptop-scale configuration (the countdown study's, and the earlier
    design's whose training split ``study.previous_plateau`` draws again) are generated again, in the same order."""
    from brorl_lib.models.tiny import TinyModelShape
    from brorl_lib.rlvr import study
    from brorl_lib.rlvr.candidates import Candidate

    checked, splits = 0, {}  # a task's split, made once for every configuration that trains on it
    for runs in (REPO_ROOT / "data" / "runs" / "laptop_rlvr_countdown", REPO_ROOT / study.PREVIOUS_RUNS):
        shared = json.loads((runs / "settings.json").read_text())
        for c in shared["candidates"]:
            key = Candidate(tuple(c["tasks"]), tuple(c["difficulties"]), TinyModelShape(**c["model"])).key
            path = runs / "configs" / key / study.INSTANCES
            if not path.exists():
                continue
            want = pd.read_csv(path, dtype=str, keep_default_na=False)
            test, val = [], []  # every task's test instances, then every task's validation instances
            for task, level in zip(c["tasks"], c["difficulties"]):
                args = (task, level, shared["n_train"], shared["n_test"] + shared["n_val"], study.SPLIT_SEED)
                if args not in splits:
                    splits[args] = laptop.make_split(*args)[1]
                held = splits[args]
                test += [(task, i.prompt, i.answer, "test") for i in held[: shared["n_test"]]]
                val += [(task, i.prompt, i.answer, "val") for i in held[shared["n_test"] :]]
            got = pd.DataFrame(test + val, columns=["task", "prompt", "answer", "split"])
            if "split" not in want:  # the countdown study writes its test instances only
                got = got[got["split"] == "test"]
            assert len(want) >= 500  # the committed runs are at the paper profile's scale, not a quick one
            pd.testing.assert_frame_equal(got[list(want.columns)].reset_index(drop=True), want, check_dtype=False)
            checked += 1
    assert checked >= 2


def test_every_part_draws_its_entries_from_the_one_generator():
    items = load_instances("rg_algorithmic", rg_per_task=2, rg_tasks=["spell_backward"])
    assert [i.reference for i in items] == generation.entries("spell_backward", 2, RG_EVAL_SEED)
    rows = verl_data.reasoning_gym_rows("word_ladder", 2, "val", 0)
    drawn = generation.entries("word_ladder", 2, verl_data.task_seed(0, "word_ladder", "val"))
    assert [r["extra_info"]["entry"] for r in rows] == [encode_entry(e) for e in drawn]


def test_entries_and_evaluation_instances_do_not_depend_on_the_hash_seed():
    """Some generators iterate over sets of strings (word_ladder, isomorphic_strings): entries, and the evaluation's
    instances made from them, are made with hash seed 0 whatever the caller's."""
    code = (
        "from brorl_lib.tasks.generation import entries; print([e['question'] for e in entries('word_ladder', 3, 11)]);"
        "from brorl_lib.evaluation import datasets as b; items = b.load_instances('rg_algorithmic', rg_per_task=2,"
        " rg_tasks=['isomorphic_strings', 'ransom_note']); print([(i.instance_id, i.prompt) for i in items])"
    )
    prints = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            check=True,
            capture_output=True,
            text=True,
            cwd=REPO_ROOT,
        ).stdout
        for seed in ("0", "1", "2")
    }
    assert len(prints) == 1 and prints.pop().count("'") >= 6  # three questions, the same under every hash seed
