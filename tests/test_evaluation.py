"""The evaluation harness on CPU: tiny model, real scorers, sandbox, per-instance results, resume, tables."""

import dataclasses
import itertools
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hang_limits import HANG_S
from scipy import stats as sps

from brorl_lib.core import stats
from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.evaluation import backends, metrics, results, scoring
from brorl_lib.evaluation import datasets as benchmarks
from brorl_lib.evaluation import run as run_module
from brorl_lib.evaluation import score_tables as tables
from brorl_lib.evaluation.cli import main as cli_main
from brorl_lib.evaluation.run import EvalConfig, evaluate, instance_seed, same_results
from brorl_lib.evaluation.sandbox import Limits, run_tests
from brorl_lib.facts import reported as paper
from brorl_lib.facts.protocol import SamplingParams
from brorl_lib.models.char_tokenizer import build_tokenizer
from brorl_lib.models.tiny import TinyModelShape, build_model, save
from brorl_lib.rlvr import tasks as rlvr_tasks
from brorl_lib.tasks.verifiers import verifier

SAMPLES, MAX_TOKENS = 4, 12
# One fast reasoning_gym task per Table 5 category, two instances each.
RG_TASKS = (
    "simple_equations",
    "spell_backward",
    "arc_1d",
    "basic_arithmetic",
    "bf",
    "number_sequence",
    "maze",
    "simple_geometry",
    "family_relationships",
    "list_functions",
    "syllogism",
)
MATH_ROWS = [{"id": f"p{i}", "problem": f"What is {i} + {i}?", "answer": str(2 * i)} for i in (3, 4, 6)]
CODE_ROWS = [
    {
        "id": "add",
        "problem": "Read two integers a and b; print a + b.",
        "tests": {"inputs": ["1 2\n", "5 5\n"], "outputs": ["3\n", "10\n"]},
    },
    {
        "id": "twice",
        "problem": "Return twice x.",
        "tests": json.dumps({"inputs": [[2], [5]], "outputs": [[4], [10]], "fn_name": "twice"}),
    },
]
# candidate programs that end in milliseconds: the wall-clock limit is a hang guard, loose enough for a busy machine
FAST = Limits(time_s=10.0, memory_mb=256)
LOOP = Limits(time_s=4.0, memory_mb=256)  # the infinite loop's; stopped at the first of 3 tests: 4 s, not 12


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("evaluation")
    tok = build_tokenizer()
    for name, seed in (("tiny_a", 0), ("tiny_b", 1)):
        save(build_model(TinyModelShape(), tok, seed), tok, root / name)
    (root / "math.jsonl").write_text("".join(json.dumps(r) + "\n" for r in MATH_ROWS))
    (root / "code.json").write_text(json.dumps(CODE_ROWS))
    return root


@pytest.fixture(scope="module")
def backend_a(files):
    return backends.TransformersBackend(files / "tiny_a", truncate_prompts=True)


class CountingBackend(backends.TransformersBackend):
    """The real transformers backend, counting the prompts it generates for."""

    prompts = 0

    def generate(self, prompts, params, seeds):
        self.prompts += len(prompts)
        return super().generate(prompts, params, seeds)


def full_config(files) -> EvalConfig:
    """Every column of Tables 3-5: the small local files stand in for each math and code benchmark."""
    data = {
        **{n: files / "math.jsonl" for n in benchmarks.GROUPS["math"]},
        **{n: files / "code.json" for n in benchmarks.GROUPS["code"]},
    }
    return EvalConfig(
        benchmarks=("all",),
        sampling=SamplingParams(SAMPLES, 0.6, 0.95, MAX_TOKENS),
        seed=7,
        rg_per_task=2,
        rg_tasks=RG_TASKS,
        data=data,
        batch_size=3,
        code_limits=FAST,
        code_workers=2,
    )


@pytest.fixture(scope="module")
def evaluated(files, backend_a):
    out = files / "results"
    a = evaluate(backend_a, "tiny-a", out, full_config(files), progress=False)
    cfg_b = EvalConfig(
        benchmarks=("math", "rg"),
        sampling=SamplingParams(SAMPLES, 0.6, 0.95, MAX_TOKENS),
        seed=7,
        rg_per_task=2,
        rg_tasks=RG_TASKS,
        data={n: files / "math.jsonl" for n in benchmarks.GROUPS["math"]},
    )
    b = evaluate(
        backends.TransformersBackend(files / "tiny_b", truncate_prompts=True), "tiny-b", out, cfg_b, progress=False
    )
    return out, a, b


# --- protocol, validation ----------------------------------------------------------------------------


def test_paper_protocol_defaults_and_validation():
    p = SamplingParams()
    assert (p.n, p.temperature, p.top_p, p.max_tokens) == (16, 0.6, 0.95, 32768) and p.matches_paper()
    for kwargs, name in [
        ({"n": 0}, "samples"),
        ({"temperature": -0.5}, "temperature=-0.5 is not allowed: must be > 0"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_p": 0.0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": float("inf")}, "temperature=inf is not allowed: expected a finite number"),
    ]:
        with pytest.raises(ValueError, match=name):
            SamplingParams(**kwargs)
    with pytest.raises(ValueError, match="benchmark='nope'.*choose one of"):
        EvalConfig(benchmarks=("nope",))
    with pytest.raises(ValueError, match="not among the benchmarks"):
        EvalConfig(benchmarks=("aime24",), data={"amc": "x.jsonl"})
    with pytest.raises(ValueError, match="no such file"):
        EvalConfig(benchmarks=("aime24",), data={"aime24": "/nonexistent/aime.jsonl"})
    with pytest.raises(ValueError, match="none is in rg_logic"):
        EvalConfig(benchmarks=("rg_logic",), rg_tasks=("basic_arithmetic",))
    with pytest.raises(ValueError, match="time_s"):
        Limits(time_s=0)
    for kwargs in ({"time_s": float("inf")}, {"time_s": 1e308}, {"memory_mb": 10**13}, {"output_mb": 10**13}):
        with pytest.raises(ValueError, match=next(iter(kwargs))):  # the kernel's limits would overflow
            Limits(**kwargs)
    assert EvalConfig(benchmarks=("math", "aime24", "rg")).benchmarks == (
        *benchmarks.GROUPS["math"],
        *benchmarks.GROUPS["rg"],
    )


# --- benchmarks --------------------------------------------------------------------------------------


def test_registry_covers_the_papers_columns():
    cols = {d: [b.column for b in benchmarks.BENCHMARKS.values() if b.domain == d] for d in benchmarks.DOMAINS}
    assert cols == {"math": paper.MATH_COLUMNS, "code": paper.CODE_COLUMNS, "reasoning_gym": paper.RG_COLUMNS}
    for b in benchmarks.BENCHMARKS.values():
        assert (b.source is None) == (b.domain == "reasoning_gym")
    from reasoning_gym.factory import DATASETS

    by_cat = benchmarks.rg_tasks_by_category()
    assert list(by_cat) == paper.RG_COLUMNS and all(by_cat.values())
    for cat, names in by_cat.items():
        assert all(DATASETS[t][0].__module__.startswith(f"reasoning_gym.{cat}.") for t in names)
    outside = {t for t, (cls, _) in DATASETS.items() if cls.__module__.split(".")[1] not in by_cat}
    assert sum(map(len, by_cat.values())) + len(outside) == len(DATASETS)
    assert all(benchmarks.rg_category(t) for t in RG_TASKS)


def test_reasoning_gym_held_out_seeds_avoid_training_streams():
    # rlvr draws training items from seed*STRIDE + [0, STRIDE/4) and test items from + [STRIDE/2, ...)
    offset = benchmarks.RG_EVAL_SEED % rlvr_tasks.SEED_STRIDE
    assert (
        rlvr_tasks.SEED_STRIDE // 4 <= offset
        and offset + benchmarks.RG_MAX_INSTANCES_PER_TASK <= rlvr_tasks.SEED_STRIDE // 2
    )
    assert 2**31 <= benchmarks.RG_EVAL_SEED and benchmarks.RG_EVAL_SEED + benchmarks.RG_MAX_INSTANCES_PER_TASK < 2**32
    a = benchmarks.load_instances("rg_arithmetic", rg_per_task=5, rg_tasks=("basic_arithmetic",))
    b = benchmarks.load_instances("rg_arithmetic", rg_per_task=5, rg_tasks=("basic_arithmetic",))
    assert [i.prompt for i in a] == [i.prompt for i in b] and [i.instance_id for i in a][:2] == [
        "basic_arithmetic/0",
        "basic_arithmetic/1",
    ]
    assert all("<answer>" in i.prompt and i.reference["question"] in i.prompt for i in a)


def test_local_files_and_missing_dataset(files, monkeypatch):
    math_items = benchmarks.load_instances("aime24", files / "math.jsonl")
    assert [i.instance_id for i in math_items] == ["p3", "p4", "p6"] and math_items[0].reference == "6"
    assert "\\boxed{}" in math_items[0].prompt and "What is 3 + 3?" in math_items[0].prompt
    code_items = benchmarks.load_instances("taco", files / "code.json", limit=2)
    assert code_items[1].reference["fn_name"] == "twice" and "`twice`" in code_items[1].prompt
    parquet = files / "prime.parquet"  # PRIME layout, all four code benchmarks in one file
    pd.DataFrame(
        [
            {
                "data_source": "apps",
                "prompt": [{"role": "user", "content": "Print 1."}],
                "reward_model": {"ground_truth": json.dumps({"inputs": [""], "outputs": ["1"]})},
            },
            {
                "data_source": "taco",
                "prompt": [{"role": "user", "content": "Print 2."}],
                "reward_model": {"ground_truth": json.dumps({"inputs": [""], "outputs": ["2"]})},
            },
        ]
    ).to_parquet(parquet)
    apps = benchmarks.load_instances("apps", parquet)
    assert len(apps) == 1 and apps[0].prompt.startswith("Print 1.") and apps[0].reference["outputs"] == ["1"]
    import datasets.config
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # fail at once instead of retrying the network
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(benchmarks.DatasetUnavailable, match=r"'minerva'.*'math-ai/minervamath'.*--data minerva=PATH"):
        benchmarks.load_instances("minerva")


BENCHMARK_ROWS = REPO_ROOT / "tests" / "data" / "benchmark_rows.json"


def write_rows(path, rows: list[dict]) -> None:
    """``rows`` as a JSONL or parquet file (by ``path``'s suffix), as a hub copy or a local export holds them."""
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(rows), path)


def test_loaders_read_each_hub_data_sets_own_layout(tmp_path):
    """Rows in the published layout of each math and code data set (tests/data/benchmark_rows.json: the hub id of
    each), from JSONL and parquet alike: the loader finds ids, prompts and references (AMC's float answers,
    OlympiadBench's answer lists, PRIME's chat prompts and JSON tests split by data_source), and a right response
    scores 1, a wrong one 0."""
    spec = json.loads(BENCHMARK_ROWS.read_text(encoding="utf-8"))["benchmarks"]
    for name in benchmarks.GROUPS["math"]:
        s, source = spec[name], benchmarks.BENCHMARKS[name].source
        assert (source.dataset_id, source.split) == (s["dataset"], s["split"])
        for suffix in (".jsonl", ".parquet"):
            write_rows(tmp_path / f"{name}{suffix}", s["rows"])
            items = benchmarks.load_instances(name, tmp_path / f"{name}{suffix}")
            assert [i.instance_id for i in items] == s["expect"]["ids"], (name, suffix)
            assert [i.reference for i in items] == s["expect"]["references"], (name, suffix)
            for item, row in zip(items, s["rows"], strict=True):
                assert (row.get("problem") or row["question"]) in item.prompt and "\\boxed{}" in item.prompt
        assert scoring.score(items[0], s["solution"]) == 1.0 and scoring.score(items[0], s["wrong"]) == 0.0, name
    s = spec["code"]
    for suffix in (".jsonl", ".parquet"):
        write_rows(tmp_path / f"prime{suffix}", s["rows"])
        for name in benchmarks.GROUPS["code"]:
            assert benchmarks.BENCHMARKS[name].source.dataset_id == s["dataset"]
            items = benchmarks.load_instances(name, tmp_path / f"prime{suffix}")
            assert [i.instance_id for i in items] == s["expect"][name], (name, suffix)
            assert scoring.score(items[0], s["solutions"][name], FAST) == 1.0, (name, suffix)
            assert scoring.score(items[0], s["wrong"], FAST) == 0.0, (name, suffix)
    assert items[0].reference["fn_name"] == "add_one" and "`add_one`" in items[0].prompt  # taco: call-based


# Reasoning Gym tasks whose entries carry no gold answer (answer None): their verifiers check a proposed solution.
RG_NO_GOLD = {"boxnet", "graph_color", "propositional_logic", "rubiks_cube", "rush_hour"}


def test_reasoning_gym_gold_answers_score_full_credit():
    """Two held-out instances of every Table 5 task (drawn as the loader draws them, in one generation call): the
    entry's own gold answer, in ProRL's tags, scores 1 through the evaluation's scorer; the tasks without a gold
    answer are named."""
    from brorl_lib.tasks.generation import EntryRequest, generate

    tasks = [(cat, task) for cat, names in benchmarks.rg_tasks_by_category().items() for task in names]
    drawn = generate([EntryRequest(task, 2, benchmarks.RG_EVAL_SEED) for _, task in tasks])
    no_gold, not_full = set(), []
    for (cat, task), entries in zip(tasks, drawn, strict=True):
        for i, entry in enumerate(entries):
            item = benchmarks.BenchmarkInstance(f"rg_{cat}", f"{task}/{i}", task, "", entry)
            if entry["answer"] is None:
                no_gold.add(task)
            elif scoring.score(item, f"<think>done</think><answer>{entry['answer']}</answer>") != 1.0:
                not_full.append(item.instance_id)
    assert len(tasks) == 104 and not_full == [] and no_gold == RG_NO_GOLD


# --- scoring -----------------------------------------------------------------------------------------


def test_reasoning_gym_verifier_that_raises_scores_zero():
    """prime_factorization's own verifier raises on a non-integer answer: a wrong answer (0), as in the verl
    reward, not an error that stops the evaluation (and would stop its resume at the same instance)."""
    import reasoning_gym

    entry = reasoning_gym.create_dataset("prime_factorization", size=1, seed=3)[0]
    inst = benchmarks.BenchmarkInstance("rg_arithmetic", "prime_factorization/0", "prime_factorization", "q", entry)
    for bad in ("abc", "1.5"):
        with pytest.raises(ValueError):
            verifier("prime_factorization")(bad, entry)
        assert scoring.score(inst, f"<answer>{bad}</answer>") == 0.0
    assert scoring.score(inst, f"<think>x</think><answer>{entry['answer']}</answer>") == 1.0


# --- sandbox -----------------------------------------------------------------------------------------

ADD = {"inputs": ["1 2\n", "3 4\n", "10 -5\n"], "outputs": ["3\n", "7\n", "5"]}


def test_sandbox_scores_fraction_of_tests():
    assert run_tests("a, b = map(int, input().split())\nprint(a + b)\n", ADD, FAST).score == 1.0
    assert run_tests("print(0)\n", ADD, FAST).score == 0.0
    assert run_tests(
        "a, b = map(int, input().split())\nprint(a + b if a < 5 else 0)\n", ADD, FAST
    ).score == pytest.approx(2 / 3)
    bad = run_tests("def f(:\n", ADD, FAST)
    assert (bad.status, bad.score) == ("compile_error", 0.0)
    call = {"inputs": [[1, 2], [3, 4]], "outputs": [[3], [8]], "fn_name": "add"}
    assert run_tests("class Solution:\n    def add(self, a, b):\n        return a + b\n", call, FAST).score == 0.5


def test_sandbox_kills_infinite_loop_quickly():
    start = time.perf_counter()
    res = run_tests("while True:\n    pass\n", ADD, LOOP)
    assert (res.status, res.score) == ("timeout", 0.0)
    assert time.perf_counter() - start < LOOP.time_s * len(ADD["inputs"])  # stopped at the first test's limit


@pytest.mark.parametrize("layers", ["all", "socket shim only"])
def test_sandbox_blocks_network(layers):
    limits = FAST if layers == "all" else dataclasses.replace(FAST, unsafe_no_sandbox=True)  # no OS sandbox
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    code = (
        f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\ns.sendall(b'hi')\n"
        "a, b = map(int, input().split())\nprint(a + b)\n"
    )
    try:
        assert run_tests(code, ADD, limits).score == 0.0
        raw = "import _socket\n_socket.socket()\na, b = map(int, input().split())\nprint(a + b)\n"
        assert run_tests(raw, ADD, limits).score == 0.0
        server.settimeout(0.2)
        with pytest.raises(TimeoutError):
            server.accept()  # no connection ever reached the listener
    finally:
        server.close()


def test_sandbox_stops_memory_hog():
    limits = Limits(time_s=10.0, memory_mb=256)
    start = time.perf_counter()
    res = run_tests("a = []\nwhile True:\n    a.append(' ' * 10**8)\n", ADD, limits)
    assert (res.status, res.score) == ("ok", 0.0)  # a MemoryError, long before the time limit
    assert time.perf_counter() - start < limits.time_s


# --- backends ----------------------------------------------------------------------------------------


def test_transformers_backend_is_seeded_per_prompt(backend_a):
    params = SamplingParams(3, 0.6, 0.95, 8)
    one = backend_a.generate(["What is 1+1?", "Spell cat"], params, [11, 12])
    two = backend_a.generate(["Spell cat"], params, [12])
    other = backend_a.generate(["Spell cat"], params, [13])
    assert len(one) == 2 and all(len(g) == 3 for g in one)
    assert one[1] == two[0] and one[1] != other[0]  # same seed, same samples, whatever the batch
    for g in itertools.chain(*one):
        assert 1 <= g.n_tokens <= 8 and g.finish_reason in ("stop", "length")
        assert g.finish_reason == "stop" or g.n_tokens == 8
    with pytest.raises(ValueError, match="one per prompt"):
        backend_a.generate(["a"], params, [1, 2])


def test_transformers_backend_greedy(backend_a):
    greedy = SamplingParams(3, 0.0, 0.95, 8)
    assert greedy.greedy and not SamplingParams(3, 0.6, 0.95, 8).greedy
    one = backend_a.generate(["What is 1+1?", "Spell cat"], greedy, [11, 12])
    two = backend_a.generate(["Spell cat"], greedy, [99])  # the seed does not matter
    assert all(len(g) == 3 and g[0] == g[1] == g[2] for g in one) and one[1] == two[0]


def test_transformers_backend_long_prompt(files):
    strict = backends.TransformersBackend(files / "tiny_a")
    with pytest.raises(ValueError, match="truncate_prompts"):
        strict.generate(["x" * 200], SamplingParams(1, 0.6, 0.95, 8), [0])


def test_vllm_backend_says_what_is_missing(files):
    if backends.vllm_usable():
        pytest.skip("a usable vLLM is present")
    with pytest.raises(RuntimeError, match="vllm backend cannot run here: .*`make vllm`"):
        backends.VLLMBackend(files / "tiny_a")
    assert isinstance(backends.default_backend(files / "tiny_a"), backends.TransformersBackend)


# --- metrics -----------------------------------------------------------------------------------------


def test_pass_at_k_is_the_unbiased_estimator():
    for n, c, k in [(5, 2, 1), (5, 2, 3), (6, 0, 2), (6, 6, 4), (7, 3, 7)]:
        subsets = list(itertools.combinations([1] * c + [0] * (n - c), k))
        assert stats.unbiased_pass_at_k(n, c, k) == pytest.approx(np.mean([any(s) for s in subsets]))
    assert stats.unbiased_pass_at_k(16, 5, 1) == pytest.approx(5 / 16)
    with pytest.raises(ValueError, match="k=17"):
        stats.unbiased_pass_at_k(16, 5, 17)


def synthetic(checkpoint, rng, shift=0.0):
    """Per-sample rows, 4 samples and 5 instances per task; Reasoning Gym categories hold 1 or 3 tasks."""
    rows = []
    for k, (name, b) in enumerate(benchmarks.BENCHMARKS.items()):
        task_names = [f"{b.column}_t{j}" for j in range(1 + 2 * (k % 2))] if b.domain == "reasoning_gym" else [name]
        for task in task_names:
            for i in range(5):
                p = min(1.0, rng.uniform(0, 0.8) + shift)
                for s in range(4):
                    hit = rng.random() < p
                    score = float(hit) if b.domain == "math" else float(hit) * float(rng.choice([0.5, 1.0]))
                    rows.append(
                        {
                            "checkpoint": checkpoint,
                            "benchmark": name,
                            "domain": b.domain,
                            "task": task,
                            "instance_id": f"{task}/{i}",
                            "sample": s,
                            "score": score,
                            "correct": score == 1.0,
                            "response_tokens": 10,
                            "finish_reason": "stop",
                        }
                    )
    return pd.DataFrame(rows)


def test_domain_aggregation_and_paired_test():
    rng = np.random.default_rng(0)
    df = pd.concat([synthetic("a", rng), synthetic("b", rng, shift=0.15)], ignore_index=True)
    cols = metrics.column_scores(df).set_index("checkpoint")
    inst = df.assign(m=np.where(df["domain"] == "code", df["correct"].astype(float), df["score"]))
    per_inst = inst.groupby(["checkpoint", "benchmark", "task", "instance_id"])["m"].mean().reset_index()
    a = per_inst[per_inst["checkpoint"] == "a"]
    bench = a.groupby("benchmark")["m"].mean()
    assert cols.loc["a", "math_avg"] == pytest.approx(bench[list(benchmarks.GROUPS["math"])].mean())
    assert cols.loc["a", "code_avg"] == pytest.approx(bench[list(benchmarks.GROUPS["code"])].mean())
    rg = a[a["benchmark"].str.startswith("rg_")]
    assert cols.loc["a", "rg_avg"] == pytest.approx(rg.groupby("task")["m"].mean().mean())  # mean over tasks
    cat_mean = rg.groupby("benchmark")["m"].mean().mean()
    assert (
        cols.loc["a", "rg_category_mean"] == pytest.approx(cat_mean) and abs(cat_mean - cols.loc["a", "rg_avg"]) > 1e-6
    )
    test = metrics.paired_comparison(df, "b", "a")
    b = per_inst[per_inst["checkpoint"] == "b"]
    ref = sps.ttest_rel(b["m"].to_numpy(), a["m"].to_numpy(), alternative="greater")
    assert test["n"] == len(a) and test["n_unpaired"] == 0
    assert test["t"] == pytest.approx(ref.statistic) and test["p"] == pytest.approx(ref.pvalue) and test["t"] > 0
    with pytest.raises(ValueError, match="treatment='zz'"):
        metrics.paired_comparison(df, "zz", "a")
    partial = metrics.column_scores(df[df["benchmark"] != "aime24"]).set_index("checkpoint")
    assert np.isnan(partial.loc["a", "math_avg"])  # an average needs every column, as the paper's


def test_a_missing_domain_average_says_why():
    df = synthetic("a", np.random.default_rng(1))
    whole = metrics.domain_averages(df).set_index("average")
    assert (whole["note"] == "").all() and whole["value"].notna().all()
    partial = df[(df["benchmark"] != "aime24") & (df["domain"] != "code")]
    table = metrics.domain_averages(partial).set_index("average")
    assert np.isnan(table.loc["math_avg", "value"]) and table.loc["math_avg", "note"] == "not run: needs aime24"
    assert table.loc["code_avg", "note"] == "not run: needs apps, codecontests, codeforces, taco"
    assert table.loc["rg_avg", "note"] == "" and table.loc["rg_avg", "value"] > 0
    done = {"a": set(benchmarks.BENCHMARKS) - {"taco"}}  # taco stopped before its last instance
    cut = metrics.domain_averages(df, done).set_index("average")
    assert cut.loc["code_avg", "note"].startswith("incomplete: taco not evaluated to the last instance")
    assert np.isnan(cut.loc["code_avg", "value"]) and cut.loc["math_avg", "note"] == ""
    text = metrics.format_domain_averages(partial)
    assert "nan" not in text.lower() and "  math_avg: not run: needs aime24" in text.splitlines()
    only_rg = metrics.format_domain_averages(df[df["benchmark"] == "rg_graphs"])
    assert "  rg_avg, rg_category_mean: not run: needs rg_algebra," in only_rg  # one line for one reason
    assert metrics.average_gap("math", benchmarks.GROUPS["math"]) is None
    with pytest.raises(ValueError, match="domain='maths'"):
        metrics.average_gap("maths", [])


# --- the whole path ----------------------------------------------------------------------------------


def test_evaluate_writes_every_sample_with_real_scores(evaluated, files):
    out, a, _ = evaluated
    cfg = full_config(files)
    expected = 6 * len(MATH_ROWS) + 4 * len(CODE_ROWS) + 2 * len(RG_TASKS)
    assert len(a) == expected * SAMPLES and set(a["benchmark"]) == set(benchmarks.BENCHMARKS)
    assert (a.groupby(["benchmark", "instance_id"])["sample"].apply(sorted) == [list(range(SAMPLES))] * expected).all()
    assert a["score"].between(0, 1).all() and (a["correct"] == (a["score"] == 1.0)).all()
    assert a["response_tokens"].between(1, MAX_TOKENS).all()
    assert (a.loc[a["finish_reason"] == "length", "response_tokens"] == MAX_TOKENS).all()
    # re-scoring the saved responses with the real scorers gives the saved scores
    full = results.load_results(out, ["tiny-a"], responses=True)
    items = {
        (i.benchmark, i.instance_id): i
        for name in cfg.benchmarks
        for i in benchmarks.load_instances(name, cfg.data.get(name), None, cfg.rg_per_task, cfg.rg_tasks)
    }
    for row in full.itertuples():
        assert scoring.score(items[row.benchmark, row.instance_id], row.response, FAST) == row.score
    info = results.read_run_info(out, "tiny-a")
    assert info["protocol"]["sampling"] == {"n": SAMPLES, "temperature": 0.6, "top_p": 0.95, "max_tokens": MAX_TOKENS}
    assert info["protocol"]["seed"] == 7 and "full" not in info["runs"][-1]
    bench = info["benchmarks"]
    assert set(bench) == set(benchmarks.BENCHMARKS) and all(b["complete"] for b in bench.values())
    assert bench["aime24"]["full"] and not bench["rg_logic"]["full"]  # whole local file; 2 of 100 per task
    assert bench["aime24"]["instances"] == len(MATH_ROWS) and bench["rg_logic"]["instances"] == 2
    assert results.complete_benchmarks(out, "tiny-a") == set(benchmarks.BENCHMARKS)


def test_resume_generates_only_missing_instances(evaluated, files):
    out, a, _ = evaluated
    resumed = files / "resumed"
    shutil.copytree(out / "tiny-a", resumed / "tiny-a")
    math_file = resumed / "tiny-a" / "math500.jsonl"
    lines = math_file.read_text().splitlines(keepends=True)
    math_file.write_text("".join(lines[: -SAMPLES + 1]) + lines[-1][:25])  # last instance: one row, then a cut line
    (resumed / "tiny-a" / "rg_logic.jsonl").unlink()
    counting = CountingBackend(files / "tiny_a", truncate_prompts=True)
    with pytest.warns(results.ResultsWarning, match=r"skipped 1 line\(s\) that are not result rows \(line 10\)"):
        again = evaluate(counting, "tiny-a", resumed, full_config(files), progress=False)
    assert counting.prompts == 1 + 2  # one math instance, the two rg_logic instances
    assert same_results(again, a)  # the same samples as the uninterrupted run, to the response text
    assert same_results(*(results.load_results(d, ["tiny-a"], responses=True) for d in (resumed, out)))
    assert len(math_file.read_text().splitlines()) == len(MATH_ROWS) * SAMPLES
    counting.prompts = 0
    evaluate(counting, "tiny-a", resumed, full_config(files), progress=False)
    assert counting.prompts == 0
    with pytest.raises(ValueError, match="were made with"):
        other = dataclasses.replace(full_config(files), seed=8)
        evaluate(counting, "tiny-a", resumed, other, progress=False)


def test_resume_refuses_a_model_folder_whose_weights_changed(evaluated, files, tmp_path):
    out, _, _ = evaluated
    model = tmp_path / "retrained"
    shutil.copytree(files / "tiny_a", model)
    cfg = dataclasses.replace(full_config(files), benchmarks=("rg_logic",), data={})
    evaluate(backends.TransformersBackend(model, truncate_prompts=True), "moved", tmp_path / "out", cfg, progress=False)
    recorded = results.read_run_info(tmp_path / "out", "moved")["weights_sha256"]
    assert recorded == run_module.weights_sha256(str(model)) and len(recorded) == 64
    shutil.copy(files / "tiny_b" / "model.safetensors", model / "model.safetensors")  # re-trained in place
    with pytest.raises(ValueError, match="are of other weights than .* the model changed since"):
        evaluate(backends.TransformersBackend(model, truncate_prompts=True), "moved", tmp_path / "out", cfg)
    assert run_module.weights_sha256("owner/model") is None  # a hub id: its revision names its weights


def test_resume_skips_lines_that_are_not_rows(evaluated, files):
    """A results file holding lines that are not rows (an object without the columns, a bare number, a list, a
    row with a mistyped sample, bytes that are not UTF-8, a whole foreign instance, a cut last line): resuming skips
    them, says how many in a warning, evaluates again only the instance they left incomplete, and ends with the rows
    of the uninterrupted run."""
    out, a, _ = evaluated
    resumed = files / "resumed_junk"
    shutil.copytree(out / "tiny-a", resumed / "tiny-a")
    math_file = resumed / "tiny-a" / "math500.jsonl"
    lines = math_file.read_bytes().splitlines(keepends=True)
    foreign = [json.loads(lines[0]) | {"instance_id": "not-an-instance", "sample": k} for k in range(SAMPLES)]
    mistyped = json.loads(lines[1]) | {"sample": "1"}
    junk = [b'{"x": 1}\n', b"42\n", b"[1, 2]\n", json.dumps(mistyped).encode() + b"\n", b"\xff\xfe\n"]
    junk += [json.dumps(r).encode() + b"\n" for r in foreign]
    math_file.write_bytes(b"".join(lines[:2] + junk + lines[2:-1]) + lines[-1][:30])  # last row: cut
    counting = CountingBackend(files / "tiny_a", truncate_prompts=True)
    with pytest.warns(results.ResultsWarning, match=r"math500.jsonl: skipped 6 line\(s\) that are not result rows"):
        again = evaluate(counting, "tiny-a", resumed, full_config(files), progress=False)
    assert counting.prompts == 1  # the last instance lost its cut row
    assert same_results(again, a)
    assert same_results(*(results.load_results(d, ["tiny-a"], responses=True) for d in (resumed, out)))
    assert len(math_file.read_bytes().splitlines()) == len(MATH_ROWS) * SAMPLES  # foreign rows dropped too


def test_a_damaged_run_record_is_named(evaluated, files, capsys):
    """A run.json that is cut, not JSON, or of another shape stops a resume (and the tables) with an error naming
    the file, also from the command line (exit status 1)."""
    out, _, _ = evaluated
    damaged = files / "damaged"
    shutil.copytree(out / "tiny-a", damaged / "tiny-a")
    run_json = damaged / "tiny-a" / "run.json"
    text = run_json.read_text()
    cfg = math_config(files, benchmarks=("aime24",), data={"aime24": files / "math.jsonl"})
    for bad in (text[: len(text) // 2], "42", "[]", '{"model": 1}', json.dumps(json.loads(text) | {"benchmarks": []})):
        run_json.write_text(bad)
        with pytest.raises(results.DamagedResults, match=rf"{run_json} is damaged: .* restore it"):
            evaluate(ConstantBackend(), "tiny-a", damaged, cfg, progress=False)
        with pytest.raises(results.DamagedResults, match="run.json is damaged"):
            tables.paper_tables_with_reproduced(damaged)
    args = ["--model", str(files / "tiny_a"), "--label", "tiny-a", "--out", str(damaged), "--benchmarks", "aime24"]
    assert cli_main([*args, "--data", f"aime24={files / 'math.jsonl'}", "--no-progress"]) == 1
    assert f"error: {run_json} is damaged" in capsys.readouterr().err


def closed_local_port() -> int:
    """A loopback port nothing listens on (connections to it are refused at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def hub_unreachable(monkeypatch, tmp_path):
    """The hub's endpoint on a closed loopback port, an empty hub cache; offline mode as it was afterwards."""
    import datasets.config
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "ENDPOINT", f"http://127.0.0.1:{closed_local_port()}")
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return tmp_path


def test_cli_fails_at_once_on_an_unreachable_model(hub_unreachable, capsys):
    """A hub id that is no folder, with the hub unreachable and the model not in the cache: exit status 2 without
    trying the network, naming --model (transformers would retry the network for minutes)."""
    with pytest.raises(SystemExit) as exc:
        cli_main(["--model", "nobody/no-model", "--out", str(hub_unreachable / "o"), "--benchmarks", "rg_arithmetic"])
    err = capsys.readouterr().err
    message = err.strip().splitlines()[-1]
    assert exc.value.code == 2 and "Retrying" not in err and "Max retries" not in err
    assert "--model 'nobody/no-model': no such folder, and not in the local Hugging Face cache" in message
    import huggingface_hub.constants as hub_constants

    assert hub_constants.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1"  # nothing else will try the network


def test_a_cached_model_runs_offline_when_the_hub_is_unreachable(files, tmp_path):
    """A hub id found in the local cache evaluates with the hub unreachable: offline at once, no retries."""
    snapshot = tmp_path / "cache" / "models--nobody--tiny" / "snapshots" / ("0" * 40)
    shutil.copytree(files / "tiny_a", snapshot)
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("0" * 40)
    env = {
        **os.environ,
        "HF_ENDPOINT": f"http://127.0.0.1:{closed_local_port()}",
        "HF_HUB_CACHE": str(tmp_path / "cache"),
    }
    env.pop("HF_HUB_OFFLINE", None)
    args = ["--model", "nobody/tiny", "--out", str(tmp_path / "o"), "--backend", "transformers", "--benchmarks"]
    args += ["rg_arithmetic", "--rg-tasks", "basic_arithmetic", "--rg-per-task", "1", "--samples", "1"]
    args += ["--max-tokens", "4", "--truncate-prompts", "--no-progress"]
    done = subprocess.run(
        [sys.executable, "-m", "brorl_lib.evaluation", *args], env=env, capture_output=True, text=True, timeout=HANG_S
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Retrying" not in done.stderr and "Max retries" not in done.stderr  # offline at once, never the network
    assert len((tmp_path / "o" / "nobody--tiny" / "rg_arithmetic.jsonl").read_text().splitlines()) == 1


class StopAt:
    """A backend stopping the evaluation, as Ctrl-C would, at its ``call``-th generate call (0-based)."""

    def __init__(self, inner, call):
        self.inner, self.left, self.name, self.model = inner, call, inner.name, inner.model

    def generate(self, prompts, params, seeds):
        if self.left == 0:
            raise KeyboardInterrupt
        self.left -= 1
        return self.inner.generate(prompts, params, seeds)


class ConstantBackend:
    """Answers every prompt with ``\\boxed{6}``: the paper's 16 samples of up to 32k tokens are out of reach of the
    tiny CPU model, and these tests are about what run.json and the tables make of the (real) scored results."""

    name, model = "constant", "constant-answer"

    def generate(self, prompts, params, seeds):
        return [[backends.Generation("so \\boxed{6}", 5, "stop")] * params.n for _ in prompts]


def math_config(files, **changes) -> EvalConfig:
    data = {n: files / "math.jsonl" for n in benchmarks.GROUPS["math"]}
    return dataclasses.replace(
        EvalConfig(
            benchmarks=("math",),
            sampling=SamplingParams(SAMPLES, 0.6, 0.95, MAX_TOKENS),
            seed=7,
            data=data,
            batch_size=2,
        ),
        **changes,
    )


def test_interrupted_run_is_complete_only_when_resumed_to_the_end(evaluated, files, tmp_path):
    out, a, _ = evaluated
    cfg = math_config(files)  # 6 benchmarks x 3 instances, 2 prompts a call: aime24 takes calls 0-1, aime25 2-3
    with pytest.raises(KeyboardInterrupt):
        evaluate(
            StopAt(backends.TransformersBackend(files / "tiny_a", truncate_prompts=True), 3),
            "tiny-a",
            tmp_path,
            cfg,
            progress=False,
        )
    bench = results.read_run_info(tmp_path, "tiny-a")["benchmarks"]
    assert [bench[n]["complete"] for n in benchmarks.GROUPS["math"]] == [True] + [False] * 5
    assert all(bench[n]["full"] and bench[n]["instances"] == len(MATH_ROWS) for n in benchmarks.GROUPS["math"])
    assert results.complete_benchmarks(tmp_path, "tiny-a") == {"aime24"}
    t3 = tables.paper_tables_with_reproduced(tmp_path)["table3_math"].set_index("method")
    assert not np.isnan(t3.loc["tiny-a", "aime25"]) and np.isnan(t3.loc["tiny-a", "math_avg"])  # 2 of 3: no average
    counting = CountingBackend(files / "tiny_a", truncate_prompts=True)
    again = evaluate(counting, "tiny-a", tmp_path, cfg, progress=False)
    assert counting.prompts == 1 + 4 * len(MATH_ROWS)
    assert same_results(again, a[a["domain"] == "math"])  # what the uninterrupted run wrote
    assert results.complete_benchmarks(tmp_path, "tiny-a") == set(benchmarks.GROUPS["math"])
    t3 = tables.paper_tables_with_reproduced(tmp_path)["table3_math"].set_index("method")
    assert t3.loc["tiny-a", "math_avg"] == pytest.approx(t3.loc["tiny-a", paper.MATH_COLUMNS].mean())
    (tmp_path / "tiny-a" / "amc.jsonl").unlink()  # results lost after the fact: run.json alone does not count
    assert results.complete_benchmarks(tmp_path, "tiny-a") == set(benchmarks.GROUPS["math"]) - {"amc"}


def test_provenance_is_reproduced_only_for_whole_benchmarks_evaluated_to_the_end(files, tmp_path):
    cfg = math_config(files, sampling=SamplingParams())  # the paper's protocol; local files stand in for the data
    with pytest.raises(KeyboardInterrupt):
        evaluate(StopAt(ConstantBackend(), 3), "c", tmp_path / "paper", cfg, progress=False)
    assert tables.provenance(tmp_path / "paper", "math") == "scaled-down"  # interrupted at aime25
    assert np.isnan(tables.paper_tables_with_reproduced(tmp_path / "paper")["table3_math"].iloc[-1]["math_avg"])
    evaluate(ConstantBackend(), "c", tmp_path / "paper", cfg, progress=False)
    assert tables.provenance(tmp_path / "paper", "math") == "reproduced"
    assert tables.paper_tables_with_reproduced(tmp_path / "paper")["table3_math"].iloc[-1]["math_avg"] == pytest.approx(
        100 / 3
    )
    assert tables.provenance(tmp_path / "paper", "code") == "reported"
    evaluate(ConstantBackend(), "c", tmp_path / "limited", dataclasses.replace(cfg, limit=2), progress=False)
    assert tables.provenance(tmp_path / "limited", "math") == "scaled-down"  # complete, but not whole benchmarks


def test_other_instances_under_the_same_label_are_refused(files, backend_a, tmp_path):
    """A local file and another copy of a benchmark (own ids, or changed answers) never share a label's results."""
    cfg = math_config(files, benchmarks=("aime24",), data={"aime24": files / "math.jsonl"})
    evaluate(backend_a, "tiny-a", tmp_path, cfg, progress=False)
    before = {p.name: p.read_text() for p in (tmp_path / "tiny-a").iterdir()}
    own_ids = tmp_path / "aime24_own_ids.jsonl"
    own_ids.write_text("".join(json.dumps({**r, "id": str(k)}) + "\n" for k, r in enumerate(MATH_ROWS)))
    changed = tmp_path / "aime24_changed.jsonl"
    changed.write_text(
        "".join(json.dumps({**r, "answer": "7" if k == 0 else r["answer"]}) + "\n" for k, r in enumerate(MATH_ROWS))
    )
    for other in (
        dataclasses.replace(cfg, data={"aime24": own_ids}),
        dataclasses.replace(cfg, data={"aime24": changed}),
        dataclasses.replace(cfg, limit=2),
    ):
        with pytest.raises(
            ValueError,
            match=r"benchmark 'aime24': the results for label='tiny-a' .* are of other "
            r"instances .* use another --out or --label",
        ):
            evaluate(backend_a, "tiny-a", tmp_path, other, progress=False)
    assert {p.name: p.read_text() for p in (tmp_path / "tiny-a").iterdir()} == before  # nothing written
    counting = CountingBackend(files / "tiny_a", truncate_prompts=True)
    evaluate(counting, "tiny-a", tmp_path, cfg, progress=False)  # the same file resumes: nothing left to do
    assert counting.prompts == 0
    evaluate(counting, "tiny-a-own-ids", tmp_path, dataclasses.replace(cfg, data={"aime24": own_ids}), progress=False)
    assert counting.prompts == len(MATH_ROWS)


def test_instance_seeds_are_stable_and_distinct():
    seeds = {instance_seed(0, "aime24", str(i)) for i in range(1000)}
    assert len(seeds) == 1000 and all(0 <= s < 2**31 for s in seeds)
    assert instance_seed(0, "aime24", "1") == instance_seed(0, "aime24", "1") != instance_seed(1, "aime24", "1")


def test_tables_have_reported_and_reproduced_rows(evaluated, out_dir):
    out, a, b = evaluated
    t = tables.paper_tables_with_reproduced(out, {"tiny-b": {"method": "tiny B", "n_rollouts": 4}})
    assert set(t) == {"table3_math", "table4_code", "table5_reasoning_gym"}
    for name, table in t.items():
        reported = table[table["source"] == "reported"]
        pd.testing.assert_frame_equal(
            reported[paper.load(name).columns].reset_index(drop=True), paper.load(name), check_dtype=False
        )
    t3, t4, t5 = (t[n].set_index("method") for n in ("table3_math", "table4_code", "table5_reasoning_gym"))
    assert tables.provenance(out, "math") == "scaled-down"  # tiny models, not the paper's sampling: never reproduced
    assert list(t3.loc[["tiny-a", "tiny B"], "source"]) == ["scaled-down"] * 2 and t3.loc["tiny B", "n_rollouts"] == 4
    assert "tiny B" not in t4.index  # tiny-b was not evaluated on code
    # reproduced cells recomputed straight from the JSONL rows
    rows = [json.loads(x) for x in (out / "tiny-a" / "apps.jsonl").read_text().splitlines()]
    per = pd.DataFrame(rows).groupby("instance_id")["correct"].mean()
    assert t4.loc["tiny-a", "apps"] == pytest.approx(100 * per.mean())
    assert t3.loc["tiny-a", "math_avg"] == pytest.approx(t3.loc["tiny-a", paper.MATH_COLUMNS].mean())
    assert t4.loc["tiny-a", "code_avg"] == pytest.approx(t4.loc["tiny-a", paper.CODE_COLUMNS].mean())
    rg = a[a["domain"] == "reasoning_gym"]
    assert t5.loc["tiny-a", "rg_avg"] == pytest.approx(100 * rg.groupby("task")["score"].mean().mean())
    assert t5.loc["tiny-a", "rg_category_mean"] == pytest.approx(t5.loc["tiny-a", paper.RG_COLUMNS].mean())
    assert np.isnan(t5.loc["Baseline", "rg_category_mean"])
    test = metrics.paired_comparison(pd.concat([a, b]), "tiny-b", "tiny-a", domains=("math", "reasoning_gym"))
    assert test["n"] == 6 * len(MATH_ROWS) + 2 * len(RG_TASKS) and test["n_unpaired"] == 0
    saved = tables.save_paper_tables_with_reproduced(out)
    assert [s.provenance for s in saved] == ["scaled-down"] * 3  # 4 samples, not the paper's 16
    text = (out_dir / "table4_code_evaluated.md").read_text()
    assert "rows with source=scaled-down were evaluated" in text and "| reproduced " not in text


def test_cli_validates_then_evaluates(files, capsys):
    base = ["--model", str(files / "tiny_a"), "--out", str(files / "cli"), "--backend", "transformers"]
    for extra, message in [
        (["--samples", "0"], "samples"),
        (["--benchmarks", "nope"], "choose one of"),
        (["--benchmarks", "aime24", "--data", "aime24=/no/file.jsonl"], "no such file"),
        (["--samples", "2", "--k", "3"], "--k 3"),
        (["--top-p", "2"], "--top-p 2.0 is out of range"),
        (["--data", "aime24"], "BENCHMARK=PATH"),
        (["--temperature", "inf"], "argument --temperature: 'inf' is not allowed: expected a finite number"),
        (["--top-p", "nan"], "argument --top-p: 'nan' is not allowed"),
        (["--code-time-limit", "inf"], "argument --code-time-limit: 'inf' is not allowed"),
        (["--code-time-limit", "1e308"], "--code-time-limit 1e+308 is out of range"),
        (["--code-time-limit", "0"], "--code-time-limit 0.0 is not allowed: must be > 0"),
        (["--code-memory-mb", "10"], "--code-memory-mb 10 is out of range"),
        (["--gpu-memory-utilization", "nan"], "argument --gpu-memory-utilization: 'nan' is not allowed"),
        (["--max-tokens", "0"], "--max-tokens 0 is out of range"),
    ]:
        with pytest.raises(SystemExit) as exc:
            cli_main(base + extra)
        assert exc.value.code == 2 and message in capsys.readouterr().err.strip().splitlines()[-1], extra
    with pytest.raises(SystemExit):
        cli_main(["--model", "not/a/hub/id/or/folder", "--out", "x"])
    assert "owner/name" in capsys.readouterr().err
    code = cli_main(
        base
        + [
            "--benchmarks",
            "math500",
            "--data",
            f"math500={files / 'math.jsonl'}",
            "--samples",
            "2",
            "--max-tokens",
            "8",
            "--limit",
            "2",
            "--truncate-prompts",
            "--k",
            "1",
            "2",
            "--no-progress",
        ]
    )
    printed = capsys.readouterr().out
    assert code == 0 and "math500" in printed and "pass@2" in printed
    assert "NaN" not in printed and "math_avg: not run: needs aime24, aime25, amc, minerva, olympiad_bench" in printed
    assert len((files / "cli" / "tiny_a" / "math500.jsonl").read_text().splitlines()) == 2 * 2


# --- the front page's evaluation recipe ----------------------------------------------------------------


def documented_command(page: str) -> list[str]:
    """The arguments of the evaluation command in ``page``'s bash block that evaluates the shipped start model."""
    text = (REPO_ROOT / page).read_text(encoding="utf-8")
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        line = block.replace("\\\n", " ")
        for command in line.splitlines():
            if "brorl_lib.evaluation" in command and "verl-cpu/start_model" in command:
                words = shlex.split(command)
                return words[words.index("brorl_lib.evaluation") + 1 :]
    raise AssertionError(f"{page} shows no evaluation command on data/runs/verl/verl-cpu/start_model")


COMMITTED_START_EVAL = REPO_ROOT / "data" / "runs" / "eval" / "verl-cpu-start"  # same checkpoint and protocol


def responses(folder: Path) -> dict[str, list[tuple[str, int, str, bool]]]:
    """benchmark -> (instance, sample, response, correct) of every row of an evaluation's folder."""
    rows = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        rows[path.stem] = sorted((r["instance_id"], r["sample"], r["response"], r["correct"]) for r in records)
    return rows


def test_the_documented_evaluation_recipe_runs_offline_and_reproduces_the_committed_evaluation(
    tmp_path, capsys, monkeypatch
):
    """docs/evaluation.md's recipe (the README links it), as written, on shipped files only: no hub, no data
    file; every response is the committed evaluation's of the same checkpoint (data/runs/eval/verl-cpu-start),
    byte for byte, so the scores are exactly its scores (22 and 38 correct of 256 samples: 0.0859 and 0.1484).
    The same bytes came with 1, 2, 4 and 8 threads and with torch's default, AVX2 and AVX-512 kernels."""
    args = documented_command("docs/evaluation.md")
    assert "--data" not in args and not any(a.startswith("http") for a in args)
    monkeypatch.chdir(REPO_ROOT)  # the command's paths are relative to the repository
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args[args.index("--out") + 1] = str(tmp_path / "eval")
    assert cli_main([*args, "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert responses(tmp_path / "eval" / "start_model") == responses(COMMITTED_START_EVAL)
    per_benchmark = metrics.benchmark_scores(results.load_results(tmp_path / "eval")).set_index("benchmark")["score"]
    committed = metrics.benchmark_scores(results.load_results(COMMITTED_START_EVAL.parent, [COMMITTED_START_EVAL.name]))
    assert per_benchmark.to_dict() == committed.set_index("benchmark")["score"].to_dict()
    assert (per_benchmark > 0).all(), per_benchmark
    assert "NaN" not in printed and "math_avg: not run: needs aime24" in printed
