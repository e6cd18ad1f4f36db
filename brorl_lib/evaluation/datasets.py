"""The paper's benchmarks (Tables 3-5): where each comes from, its prompt, and its instances.

Math and code come from Hugging Face data sets, loaded only when asked for (nothing downloads at
import), or from a local file. The data set ids are **our choice** of well-known public copies; the
paper does not name them. Code follows ProRL (docs/prorl-background.md#prorl-evaluation): the PRIME validation set
(``PRIME-RL/Eurus-2-RL-Data``, split ``validation``), whose rows carry ``data_source`` = apps,
codecontests, codeforces or taco, exactly the four code columns.

Reasoning Gym instances are generated locally with ``reasoning_gym`` (docs/verl.md#reasoning-gym): a category is
the package folder a task lives in (``reasoning_gym/<category>/...``); Table 5's eleven categories hold
104 tasks in reasoning-gym 0.1.25 (ProRL evaluated 96 tasks of an earlier version; the folders
``probability`` and ``composite`` are not Table 5 categories and are left out). Each task gets
``RG_INSTANCES_PER_TASK`` held-out instances (ProRL: 100) with the task's default configuration (our
choice: ProRL's configurations are not published), drawn from seed ``RG_EVAL_SEED`` by
``brorl_lib.tasks.generation``, which always generates with Python hash seed 0 (some generators iterate
over sets of strings).

Local files (``.jsonl``, ``.json`` holding a list of records, or ``.parquet``), one record per instance:

* math: ``problem`` (or ``question``), ``answer`` (or ``final_answer``; a list is joined with ", "),
  optional ``id`` (or ``unique_id``; default: the row number).
* code: ``problem`` (or ``question``, or a PRIME-style ``prompt`` list of chat messages, of which the
  last user message is used), ``tests`` (or ``input_output``, or PRIME-style
  ``reward_model.ground_truth``): a dict or JSON string ``{"inputs": [...], "outputs": [...]}`` of
  stdin/stdout strings, with ``"fn_name"`` for call-based problems (inputs are argument lists);
  optional ``starter_code``, ``id``; when a ``data_source`` field is present only rows whose
  ``data_source`` equals the benchmark's name are kept (so the whole PRIME validation parquet serves
  all four code benchmarks).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from brorl_lib.core.validation import check_choice, check_int
from brorl_lib.facts.reported import CODE_COLUMNS, MATH_COLUMNS, RG_COLUMNS
from brorl_lib.tasks.generation import EntryRequest, generate

DOMAINS = ("math", "code", "reasoning_gym")
LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")

# Reasoning Gym draws item i of a data set seeded s from s + i. brorl_lib.rlvr.tasks draws training
# items from seed*10_000_000 + [0, 2.5M) and test items from seed*10_000_000 + [5M, 7.5M); this base
# (= 400 * 10_000_000 + 3_000_000) lies in the gap no rlvr seed uses. brorl_lib.verl_recipe.data
# seeds its Reasoning Gym rows below 2**31 (seed * 1_000_003 + crc32(...)) % 2**31, and this base is
# above 2**31. It stays below 2**32 (some tasks seed numpy) for up to 2M instances per task. Our choice.
RG_EVAL_SEED = 4_003_000_000
RG_MAX_INSTANCES_PER_TASK = 2_000_000

# ProRL's math prompt (DeepScaleR's; docs/prorl-background.md#prorl-training-data-and-rewards): the answer goes
# in \boxed{}.
MATH_PROMPT = "{problem}\nLet's think step by step and output the final answer within \\boxed{{}}."
# Our choice of wording: a complete stdin/stdout program (or the named function) in a python block.
CODE_PROMPT_STDIO = (
    "{problem}\n\nWrite a complete Python 3 program that reads the input from standard input "
    "and writes the answer to standard output. Put the program in a single ```python code "
    "block at the end of your response."
)
CODE_PROMPT_CALL = (
    "{problem}\n\nComplete the Python 3 function `{fn_name}`{starter}. Put the complete code in a "
    "single ```python code block at the end of your response."
)


@dataclass(frozen=True)
class HFSource:
    """A Hugging Face data set (our choice of public copy) and the rows of it that form the benchmark."""

    dataset_id: str
    split: str
    config: str | None = None
    data_source: str | None = None  # keep only rows whose ``data_source`` equals this


@dataclass(frozen=True)
class Benchmark:
    name: str  # what --benchmarks and the results files use ("math500" for the column "math": "math" is a group)
    domain: str  # "math", "code" or "reasoning_gym"
    column: str  # its column in the paper's Table 3, 4 or 5
    source: HFSource | None  # None: generated locally with reasoning_gym


@dataclass(frozen=True)
class BenchmarkInstance:
    """One problem of a benchmark: what the model is asked and what its answer is checked against."""

    benchmark: str
    instance_id: str  # unique within the benchmark; "task/index" for Reasoning Gym
    task: str  # the benchmark's name, or the reasoning_gym task for Reasoning Gym
    prompt: str  # the user message
    reference: Any  # math: answer string; code: tests dict; Reasoning Gym: the reasoning_gym entry


_MATH_SOURCES = {
    "aime24": HFSource("HuggingFaceH4/aime_2024", "train"),
    "aime25": HFSource("math-ai/aime25", "test"),
    "amc": HFSource("AI-MO/aimo-validation-amc", "train"),  # AMC 2022 + 2023, 83 problems, as ProRL's AMC
    "math500": HFSource("HuggingFaceH4/MATH-500", "test"),  # Table 3's "Math" column (MATH-500)
    "minerva": HFSource("math-ai/minervamath", "test"),
    "olympiad_bench": HFSource("math-ai/olympiadbench", "test"),
}
BENCHMARKS: dict[str, Benchmark] = {
    **{
        name: Benchmark(name, "math", col, src)
        for (name, src), col in zip(_MATH_SOURCES.items(), MATH_COLUMNS, strict=True)
    },
    **{
        name: Benchmark(name, "code", name, HFSource("PRIME-RL/Eurus-2-RL-Data", "validation", data_source=name))
        for name in CODE_COLUMNS
    },
    **{f"rg_{cat}": Benchmark(f"rg_{cat}", "reasoning_gym", cat, None) for cat in RG_COLUMNS},
}
GROUPS = {
    "all": tuple(BENCHMARKS),
    **{domain: tuple(n for n, b in BENCHMARKS.items() if b.domain == domain) for domain in DOMAINS},
}
GROUPS["rg"] = GROUPS["reasoning_gym"]


class DatasetUnavailable(RuntimeError):
    """A benchmark's data set could not be loaded (no network, no local file)."""


def expand(names: Sequence[str]) -> tuple[str, ...]:
    """Benchmark names with groups ("all", "math", "code", "reasoning_gym" or "rg") expanded, in order, once each."""
    if isinstance(names, str) or not names:
        raise ValueError(
            f"benchmarks={names!r} is not allowed: give a non-empty list of names from "
            f"{sorted(BENCHMARKS)} or groups {sorted(GROUPS)}"
        )
    out: list[str] = []
    for name in names:
        check_choice("benchmark", name, [*BENCHMARKS, *GROUPS])
        for n in GROUPS.get(name, (name,)):
            if n not in out:
                out.append(n)
    return tuple(out)


@cache
def rg_tasks_by_category() -> dict[str, tuple[str, ...]]:
    """Table 5 category -> the reasoning_gym tasks in it (from the package's module layout)."""
    from reasoning_gym.factory import DATASETS

    out: dict[str, list[str]] = {cat: [] for cat in RG_COLUMNS}
    for task, (cls, _config) in DATASETS.items():
        category = cls.__module__.split(".")[1]  # reasoning_gym.<category>.<module>
        if category in out:
            out[category].append(task)
    return {cat: tuple(sorted(tasks)) for cat, tasks in out.items()}


def rg_category(task: str) -> str:
    for cat, tasks in rg_tasks_by_category().items():
        if task in tasks:
            return cat
    raise ValueError(f"rg task={task!r} is not allowed: not a reasoning_gym task in a Table 5 category")


def rg_prompt(question: str) -> str:
    """reasoning_gym's own "default" instruction (answer inside <answer></answer>) before the question,
    in the user message (R1-style models take no system prompt)."""
    from reasoning_gym.utils import SYSTEM_PROMPTS

    return f"{SYSTEM_PROMPTS['default']}\n{question}"


def _rg_instances(bench: Benchmark, per_task: int, tasks: Sequence[str] | None) -> list[BenchmarkInstance]:
    """``per_task`` instances of each chosen task of the category, task by task (hash seed 0)."""
    chosen = [t for t in rg_tasks_by_category()[bench.column] if tasks is None or t in tasks]
    if not chosen:
        raise ValueError(f"rg_tasks={list(tasks)} is not allowed for {bench.name}: none is in its category")
    drawn = generate([EntryRequest(task, per_task, RG_EVAL_SEED) for task in chosen])
    return [
        BenchmarkInstance(bench.name, f"{task}/{i}", task, rg_prompt(entry["question"]), entry)
        for task, entries in zip(chosen, drawn, strict=True)
        for i, entry in enumerate(entries)
    ]


def _first(row: Mapping, *keys: str, default: Any = None) -> Any:
    for key in keys:
        if key in row and row[key] is not None:
            return row[key]
    return default


def _answer_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(_answer_text(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # e.g. AMC answers stored as 142.0
    return str(value).strip().strip("$").strip()


def _math_instance(bench: Benchmark, row: Mapping, index: int) -> BenchmarkInstance:
    problem, answer = _first(row, "problem", "question", "Problem"), _first(row, "answer", "final_answer", "Answer")
    if problem is None or answer is None:
        raise ValueError(f"benchmark {bench.name}: row {index} needs fields 'problem' and 'answer'; has {sorted(row)}")
    return BenchmarkInstance(
        bench.name,
        str(_first(row, "id", "unique_id", "ID", default=index)),
        bench.name,
        MATH_PROMPT.format(problem=str(problem).strip()),
        _answer_text(answer),
    )


def _code_tests(raw: Any) -> dict:
    tests = json.loads(raw) if isinstance(raw, str) else dict(raw)
    if tests.get("inputs") is None and isinstance(tests.get("outputs"), list):  # no stdin given: empty input
        tests["inputs"] = [None] * len(tests["outputs"])
    if (
        not isinstance(tests.get("inputs"), list)
        or not isinstance(tests.get("outputs"), list)
        or len(tests["inputs"]) != len(tests["outputs"])
    ):
        raise ValueError("tests must hold equally long lists 'inputs' and 'outputs'")
    return tests


def _code_instance(bench: Benchmark, row: Mapping, index: int) -> BenchmarkInstance:
    problem = _first(row, "problem", "question")
    if problem is None and "prompt" in row:  # PRIME layout: a list of chat messages
        users = [m["content"] for m in list(row["prompt"]) if m.get("role") == "user"]
        problem = users[-1] if users else None
    reward_model = row.get("reward_model") or {}
    raw_tests = _first(row, "tests", "input_output", default=reward_model.get("ground_truth"))
    if problem is None or raw_tests is None:
        raise ValueError(f"benchmark {bench.name}: row {index} needs fields 'problem' and 'tests'; has {sorted(row)}")
    try:
        tests = _code_tests(raw_tests)
    except (ValueError, TypeError) as e:
        raise ValueError(f"benchmark {bench.name}: row {index}: {e}") from e
    extra = row.get("extra_info") or {}
    iid = str(_first(row, "id", default=extra.get("index", index) if isinstance(extra, Mapping) else index))
    problem = str(problem).strip()
    if tests.get("fn_name"):
        starter = row.get("starter_code") or ""
        prompt = CODE_PROMPT_CALL.format(
            problem=problem,
            fn_name=tests["fn_name"],
            starter=f", starting from:\n```python\n{starter}\n```\n" if starter else "",
        )
    else:
        prompt = CODE_PROMPT_STDIO.format(problem=problem)
    return BenchmarkInstance(bench.name, iid, bench.name, prompt, tests)


def _read_local(path: Path) -> list[dict]:
    if path.suffix == ".parquet":  # as plain Python values: lists stay lists (pandas would give numpy arrays)
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError(f"{path}: a .json benchmark file must hold a list of records")
    return data


def check_local_file(benchmark: str, path: str | Path) -> Path:
    """A local data file for ``benchmark``: it exists and has an allowed suffix."""
    check_choice("benchmark", benchmark, BENCHMARKS)
    if BENCHMARKS[benchmark].domain == "reasoning_gym":
        raise ValueError(f"data[{benchmark}] is not allowed: Reasoning Gym instances are generated locally")
    path = Path(path)
    if path.suffix not in LOCAL_SUFFIXES:
        raise ValueError(f"data[{benchmark}]={str(path)!r} is not allowed: use a file ending in {list(LOCAL_SUFFIXES)}")
    if not path.is_file():
        raise ValueError(f"data[{benchmark}]={str(path)!r} is not allowed: no such file")
    return path


def _load_hf(bench: Benchmark) -> list[dict]:
    src = bench.source
    try:
        import datasets

        ds = datasets.load_dataset(src.dataset_id, src.config, split=src.split)
    except Exception as e:  # no network, gated, renamed: all mean "supply it yourself"
        raise DatasetUnavailable(
            f"benchmark {bench.name!r}: could not load the Hugging Face data set {src.dataset_id!r} "
            f"(split {src.split!r}): {type(e).__name__}: {e}. Supply a local copy instead: "
            f"--data {bench.name}=PATH on the command line, or data={{'{bench.name}': PATH}} in Python "
            f"(JSONL, JSON or parquet; fields in brorl_lib/evaluation/datasets.py)"
        ) from e
    return [dict(r) for r in ds]


def load_instances(
    benchmark: str,
    path: str | Path | None = None,
    limit: int | None = None,
    rg_per_task: int = 100,
    rg_tasks: Sequence[str] | None = None,
) -> list[BenchmarkInstance]:
    """The instances of one benchmark, in data set order (Reasoning Gym: task by task).

    ``path``: a local file instead of the Hugging Face data set. ``limit``: keep the first ``limit``
    (quick runs; the paper uses all). ``rg_per_task``: instances per Reasoning Gym task (ProRL: 100).
    ``rg_tasks``: only these Reasoning Gym tasks (those outside the category are ignored).
    """
    check_choice("benchmark", benchmark, BENCHMARKS)
    if limit is not None:
        check_int("limit", limit, low=1)
    bench = BENCHMARKS[benchmark]
    if bench.domain == "reasoning_gym":
        check_int("rg_per_task", rg_per_task, low=1, high=RG_MAX_INSTANCES_PER_TASK)
        items = _rg_instances(bench, rg_per_task, rg_tasks)
        return items[:limit] if limit else items
    rows = _read_local(check_local_file(benchmark, path)) if path is not None else _load_hf(bench)
    if rows and "data_source" in rows[0] and bench.source.data_source is not None:
        rows = [r for r in rows if r.get("data_source") == bench.source.data_source]
    make = _math_instance if bench.domain == "math" else _code_instance
    items = [make(bench, row, i) for i, row in enumerate(rows)]
    if len({i.instance_id for i in items}) < len(items):  # ids must be unique: fall back to row numbers
        items = [BenchmarkInstance(i.benchmark, str(k), i.task, i.prompt, i.reference) for k, i in enumerate(items)]
    if not items:
        raise DatasetUnavailable(f"benchmark {benchmark!r}: the data set has no rows for it")
    return items[:limit] if limit else items
