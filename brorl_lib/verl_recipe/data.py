"""Training and validation data in verl's parquet schema (docs/verl.md#training-data), deterministic for a seed.

One row per prompt: ``data_source`` ("<family>.<name>", the reward function dispatches on the
family), ``prompt`` (chat messages), ``ability`` (the family), ``reward_model`` ({"style": "rule",
"ground_truth": str}) and ``extra_info`` (index, split, family, task, and for Reasoning Gym the
whole entry as JSON, which ``score_answer`` needs). Reasoning Gym tasks are generated locally;
math, STEM, code and instruction following (the other ProRL domains, ProRL paper Table 4) come from a
Hugging Face dataset id or a local JSON/JSONL/parquet file, loaded only when asked for: records with this
recipe's fields (``RECORD_FIELDS``) or, for math, STEM and code, rows in verl's own parquet schema as
public verl-format releases ship them (``verl_records``). ``domains`` reads one local file per domain.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from brorl_lib.core import atomic
from brorl_lib.core.validation import check_int
from brorl_lib.tasks.generation import EntryRequest, generate
from brorl_lib.tasks.instruction_scoring import check_instructions, encode_truth
from brorl_lib.verl_recipe.codec import encode_entry
from brorl_lib.verl_recipe.tasks import available_tasks

FAMILIES = ("reasoning_gym", "math", "stem", "code", "instruction")
COLUMNS = ("data_source", "prompt", "ability", "reward_model", "extra_info")
EXTRA_KEYS = ("index", "split", "family", "task", "entry")
# Fields a local or Hugging Face record must have, per family (DeepScaleR-style for math and STEM;
# code tests as in PRIME's Eurus-2-RL data: {"inputs": [...], "outputs": [...]}, a dict or JSON text;
# instruction following as Google's IFEval data: a prompt, instruction ids and one dict of arguments each).
RECORD_FIELDS = {
    "math": ("problem", "answer"),
    "stem": ("problem", "answer"),
    "code": ("problem", "tests"),
    "instruction": ("prompt", "instruction_id_list", "kwargs"),
}
# Fields of a row in verl's parquet schema that a math/STEM/code record is read from (``verl_records``).
VERL_FIELDS = ("data_source", "prompt", "reward_model")
LOCAL_SUFFIXES = (".json", ".jsonl", ".parquet")

# Prompt suffixes (docs/prorl-background.md#prorl-training-data-and-rewards). Math: the DeepScaleR/ProRL v1 instruction;
# Reasoning Gym: ProRL puts answers in <answer> tags, the wording is ours; STEM like math and code: our choice;
# instruction following: nothing, an IFEval prompt states its own instructions (our choice).
MATH_INSTRUCTION = "Let's think step by step and output the final answer within \\boxed{}."
RG_INSTRUCTION = "Think step by step, then give only the final answer inside <answer></answer> tags."
CODE_INSTRUCTION = (
    "Write a Python 3 program that reads standard input and writes standard output. "
    "Put the program in one ```python code block."
)
INSTRUCTIONS = {
    "reasoning_gym": RG_INSTRUCTION,
    "math": MATH_INSTRUCTION,
    "stem": MATH_INSTRUCTION,
    "code": CODE_INSTRUCTION,
    "instruction": "",
}


def data_source(family: str, name: str) -> str:
    """verl's ``data_source`` of a row: "<family>.<name>" (no "/", so metric names stay parseable)."""
    return f"{family}.{name}"


def split_source(source: str) -> tuple[str, str]:
    """("reasoning_gym", "countdown") from "reasoning_gym.countdown"; ValueError for an unknown family."""
    family, _, name = source.partition(".")
    if family not in FAMILIES or not name:
        raise ValueError(
            f"data_source={source!r} is not allowed: expected '<family>.<name>' with family in {list(FAMILIES)}"
        )
    return family, name


def _row(family: str, name: str, question: str, ground_truth: str, split: str, index: int, entry: str = "") -> dict:
    suffix = INSTRUCTIONS[family]
    return {
        "data_source": data_source(family, name),
        "prompt": [{"role": "user", "content": f"{question.rstrip()}\n\n{suffix}" if suffix else question.rstrip()}],
        "ability": family,
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {"index": index, "split": split, "family": family, "task": name, "entry": entry},
    }


def task_seed(seed: int, task: str, split: str) -> int:
    """A reasoning_gym seed per (seed, task, split): stable across runs and machines (crc32, not hash())."""
    return (seed * 1_000_003 + zlib.crc32(f"{task}/{split}".encode())) % 2**31


def check_tasks(tasks: list[str] | tuple[str, ...], name: str = "rg_tasks") -> None:
    """A non-empty list of distinct Reasoning Gym task names this recipe accepts."""
    if not isinstance(tasks, (list, tuple)) or not tasks:
        raise ValueError(f"{name}={tasks!r} is not allowed: expected a non-empty list of Reasoning Gym task names")
    unknown = [t for t in tasks if t not in available_tasks()]
    if unknown:
        raise ValueError(f"{name} holds unknown or excluded tasks {unknown}: choose from {list(available_tasks())}")
    if len(set(tasks)) != len(tasks):
        raise ValueError(f"{name}={list(tasks)} is not allowed: a task is listed twice")


def _rg_request(task: str, count: int, split: str, seed: int) -> EntryRequest:
    return EntryRequest(task, count, task_seed(seed, task, split))


def _rg_rows(task: str, entries: list[dict], split: str) -> list[dict]:
    return [
        _row(
            "reasoning_gym",
            task,
            e["question"],
            "" if e["answer"] is None else str(e["answer"]),
            split,
            i,
            encode_entry(e),
        )
        for i, e in enumerate(entries)
    ]


def reasoning_gym_rows(task: str, count: int, split: str, seed: int) -> list[dict]:
    """``count`` rows of one task, generated locally by ``brorl_lib.tasks.generation`` (hash seed 0)."""
    check_tasks([task], "task")
    check_int("count", count, low=0)
    if count == 0:
        return []
    return _rg_rows(task, generate([_rg_request(task, count, split, seed)])[0], split)


def reasoning_gym_frames(
    tasks: list[str], train_per_task: int, val_per_task: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train and validation rows of every task; a training question equal to a validation one is dropped."""
    check_tasks(tasks)
    check_int("rg_train_per_task", train_per_task, low=0)
    check_int("rg_val_per_task", val_per_task, low=0)
    counts = (("val", val_per_task), ("train", train_per_task))
    asked = [(task, split, count) for task in tasks for split, count in counts if count > 0]
    drawn = dict(
        zip(
            ((task, split) for task, split, _ in asked),
            generate([_rg_request(task, count, split, seed) for task, split, count in asked]),
            strict=True,
        )
    )
    train, val = [], []
    for task in tasks:
        v = _rg_rows(task, drawn.get((task, "val"), []), "val")
        held_out = {r["prompt"][0]["content"] for r in v}
        rows = _rg_rows(task, drawn.get((task, "train"), []), "train")
        train += [r for r in rows if r["prompt"][0]["content"] not in held_out]
        val += v
    return _frame(train), _frame(val)


def _frame(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(COLUMNS))


def hub_revision(source: str) -> tuple[str, str | None]:
    """A Hugging Face dataset id and its pinned revision: ("owner/name", "<commit>") from "owner/name@<commit>",
    (source, None) without '@' (the dataset's moving main)."""
    name, sep, revision = source.partition("@")
    return (name, revision) if sep else (source, None)


def is_local(source: str) -> bool:
    """A local file (by suffix, or because it exists) rather than a Hugging Face dataset id."""
    return source.endswith(LOCAL_SUFFIXES) or Path(source).expanduser().exists() or source.startswith(("/", ".", "~"))


def _plain(value):
    """``value`` with numpy arrays and scalars (how parquet reads lists and numbers) as lists and Python numbers."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    return value.item() if isinstance(value, np.generic) else value


def _absent(value) -> bool:
    """A field a record does not have: None, or NaN (pandas' filler where other records have the field)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _user_text(prompt, where: str) -> str:
    """The last user message of a verl ``prompt``; system messages are dropped (our choice: rows here hold one
    user message, to which the family's suffix is appended)."""
    messages = _plain(prompt)
    messages = messages if isinstance(messages, list) else []
    users = [m.get("content") for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    if not users or not isinstance(users[-1], str) or not users[-1].strip():
        raise ValueError(f"{where}: prompt must be a list of chat messages with a non-empty user message")
    return users[-1]


def verl_records(df: pd.DataFrame, family: str, label: str) -> pd.DataFrame:
    """Math, STEM or code records from rows in verl's parquet schema (``VERL_FIELDS``; e.g. PRIME's
    Eurus-2-RL-Data): ``problem`` is the last user message, the answer (math, STEM) or the tests (code: JSON
    of {"inputs", "outputs"}) is ``reward_model["ground_truth"]``, ``data_source`` names the rows. A row whose
    ``ability`` is another of our families is skipped (our choice: Eurus-2-RL-Data mixes math and code rows).
    Indexed by row number in the file; ValueError naming ``label``, the row and the first missing field."""
    field = RECORD_FIELDS[family][1]
    records, index = [], []
    for i, rec in enumerate(df.to_dict("records")):
        where = f"{label}: row {i}"
        absent = [f for f in VERL_FIELDS if _absent(rec.get(f))]
        if absent:
            raise ValueError(f"{where}: missing field {absent[0]!r}; verl's schema needs {list(VERL_FIELDS)}")
        if rec.get("ability") in FAMILIES and rec["ability"] != family:
            continue
        reward = _plain(rec["reward_model"])
        if not isinstance(reward, dict) or _absent(reward.get("ground_truth")):
            raise ValueError(f"{where}: missing field 'reward_model.ground_truth'")
        question, source = _user_text(rec["prompt"], where), rec["data_source"]
        records.append({"problem": question, field: reward["ground_truth"], "data_source": source})
        index.append(i)
    return pd.DataFrame(records, columns=["problem", field, "data_source"], index=index)


def _tests(tests, where: str = "tests") -> str:
    """Code tests as JSON text of {"inputs": [...], "outputs": [...]} (equal lengths), from a dict or JSON text."""
    try:
        parsed = json.loads(tests) if isinstance(tests, str) else _plain(tests)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or any(not isinstance(parsed.get(k), list) for k in ("inputs", "outputs")):
        raise ValueError(f"{where}: tests must be a dict (or JSON text) with lists 'inputs' and 'outputs'")
    if len(parsed["inputs"]) != len(parsed["outputs"]):
        raise ValueError(f"{where}: tests have {len(parsed['inputs'])} inputs but {len(parsed['outputs'])} outputs")
    return tests if isinstance(tests, str) else json.dumps(parsed)


def check_records(df: pd.DataFrame, family: str, label: str) -> None:
    """Every record has its family's fields (``RECORD_FIELDS``); code tests and IFEval instructions are
    usable. ValueError naming ``label``, the row (the frame's index: the row number in the file) and the
    field, before any row is built."""
    for i, rec in zip(df.index, df.to_dict("records")):
        where = f"{label}: row {i}"
        absent = [f for f in RECORD_FIELDS[family] if _absent(rec.get(f))]
        if absent:
            raise ValueError(
                f"{where}: missing field {absent[0]!r}; {family} records need {list(RECORD_FIELDS[family])}"
            )
        if family == "code":
            _tests(rec["tests"], where)
        elif family == "instruction":
            if not isinstance(rec["prompt"], str) or not rec["prompt"].strip():
                raise ValueError(f"{where}: prompt must be non-empty text")
            check_instructions(_plain(rec["instruction_id_list"]), _plain(rec["kwargs"]), where)


def load_records(source: str, family: str, param: str) -> pd.DataFrame:
    """Records of a math/STEM/code/instruction dataset: a local JSON/JSONL/parquet file or a Hugging Face
    dataset id, with this recipe's fields or (math, STEM, code) in verl's schema (``verl_records``), all
    checked (``check_records``) before it returns.

    A dataset id may be pinned to a commit, ``owner/name@<commit>`` (``hub_revision``). Nothing is fetched unless
    this is called with a dataset id; a missing file or an unreachable id
    raises FileNotFoundError naming ``param``, the dataset, and how to supply a local copy.
    """
    fields = RECORD_FIELDS[family]
    how = (
        f"supply a local JSON, JSONL or parquet file of records with fields {list(fields)} "
        f"(e.g. download it on a machine with network access and set {param} to its path)"
    )
    if is_local(source):
        path = Path(source).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{param}={source!r}: no such file; {how}")
        if path.suffix == ".parquet":
            df = pd.read_parquet(path)
        elif path.suffix in (".json", ".jsonl"):
            df = pd.read_json(path, lines=path.suffix == ".jsonl", dtype=False)
        else:
            raise ValueError(f"{param}={source!r} is not allowed: the file must end in one of {list(LOCAL_SUFFIXES)}")
    else:
        try:
            import datasets  # imported here only: nothing downloads at import

            repo, revision = hub_revision(source)  # pinned like the start model when given as owner/name@<commit>
            df = datasets.load_dataset(repo, split="train", revision=revision).to_pandas()
        except Exception as err:  # noqa: BLE001 - no network, unknown id, gated dataset: all mean "missing"
            raise FileNotFoundError(
                f"{param}={source!r}: the Hugging Face dataset {source} could not be loaded "
                f"({type(err).__name__}); {how}"
            ) from None
    label = f"{param}={source!r}"
    if family != "instruction" and "problem" not in df.columns and "prompt" in df.columns:
        df = verl_records(df, family, label)
    missing = [f for f in fields if f not in df.columns]
    if missing:
        raise ValueError(
            f"{label}: records lack fields {missing} in every row (found {list(df.columns)}); "
            f"{family} records need {list(fields)}, or verl's schema {list(VERL_FIELDS)}"
        )
    check_records(df, family, label)
    return df


def _name(given, default: str) -> str:
    """A record's own data_source (e.g. apps, taco) if it has one, else the dataset's name, made safe."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", str(given) if isinstance(given, str) and given else default)


def record_rows(family: str, records: pd.DataFrame, split: str, default_name: str) -> list[dict]:
    """Rows of checked records (``load_records``), in order, indexed from 0; named by each record's
    ``data_source`` where present, else ``default_name``."""

    def row(rec: dict, i: int) -> dict:
        if family == "instruction":
            question = rec["prompt"]
            truth = encode_truth(question, _plain(rec["instruction_id_list"]), _plain(rec["kwargs"]))
        else:
            question = str(rec["problem"])
            truth = _tests(rec["tests"]) if family == "code" else str(rec["answer"])
        return _row(family, _name(rec.get("data_source"), default_name), question, truth, split, i)

    return [row(rec, i) for i, rec in enumerate(records.to_dict("records"))]


def records_frames(
    source: str, family: str, train_count: int, val_count: int, seed: int, param: str
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows from a math/STEM/code/instruction dataset: shuffled with ``seed``, the first ``val_count`` held
    out, then ``train_count`` for training (0: all the rest). An empty ``source`` gives no rows. Rows are
    named by the records' ``data_source`` field where present (e.g. apps, taco), else by the dataset."""
    check_int(f"{family}_train_count", train_count, low=0)
    check_int(f"{family}_val_count", val_count, low=0)
    if not source:
        return _frame([]), _frame([])
    df = load_records(source, family, param)
    df = df.sample(frac=1.0, random_state=task_seed(seed, family, "shuffle")).reset_index(drop=True)
    default = Path(source).stem if is_local(source) else hub_revision(source)[0].split("/")[-1]
    val_part = df.iloc[:val_count]
    train_part = df.iloc[val_count:] if train_count == 0 else df.iloc[val_count : val_count + train_count]
    train, val = record_rows(family, train_part, "train", default), record_rows(family, val_part, "val", default)
    return _frame(train), _frame(val)


def check_schema(df: pd.DataFrame, name: str = "data") -> None:
    """Raise ValueError naming ``name`` and the first problem if ``df`` is not in verl's RL schema."""
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"{name}: missing columns {missing}; verl's RL data needs {list(COLUMNS)}")
    for i, row in enumerate(df[list(COLUMNS)].itertuples(index=False)):
        src, prompt, ability, rm, extra = row
        where = f"{name}: row {i}"
        if not isinstance(src, str):
            raise ValueError(f"{where}: data_source must be a string, found {src!r}")
        family, _ = split_source(src)
        msgs = list(prompt) if prompt is not None and not isinstance(prompt, (str, dict)) else None
        if not msgs or any(
            not isinstance(m, dict) or set(m) != {"role", "content"} or not isinstance(m["content"], str) for m in msgs
        ):
            raise ValueError(f"{where}: prompt must be a non-empty list of {{'role', 'content'}} chat messages")
        if ability != family:
            raise ValueError(f"{where}: ability={ability!r} must equal the data_source family {family!r}")
        if not isinstance(rm, dict) or rm.get("style") != "rule" or not isinstance(rm.get("ground_truth"), str):
            raise ValueError(
                f"{where}: reward_model must be {{'style': 'rule', 'ground_truth': <str>}}, found {rm!r:.80}"
            )
        if not isinstance(extra, dict) or any(k not in extra for k in EXTRA_KEYS):
            raise ValueError(f"{where}: extra_info must hold keys {list(EXTRA_KEYS)}")
        if family == "reasoning_gym" and not extra["entry"]:
            raise ValueError(f"{where}: a reasoning_gym row needs its entry in extra_info.entry")


def write_parquet(df: pd.DataFrame, path: str | Path) -> Path:
    """Check the schema, then write ``df`` atomically (same rows, same bytes)."""
    check_schema(df, str(Path(path).name))
    atomic.write_with(path, lambda tmp: df.to_parquet(tmp, index=False, engine="pyarrow"))
    return Path(path)


def read_parquet(path: str | Path) -> pd.DataFrame:
    """A data file, schema-checked (FileNotFoundError if absent, ValueError naming the file if wrong)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file {path} does not exist")
    df = pd.read_parquet(path)
    check_schema(df, path.name)
    return df


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Rows per data_source, in order of first appearance."""
    return df.groupby("data_source", sort=False).size().rename("rows").reset_index()
