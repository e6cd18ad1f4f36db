"""Code, STEM and instruction-following rows from one local file each: three of the five domains that
ProRLv2's start model was trained on (ProRL paper, Table 4: math, code, STEM, logic puzzles, instruction
following; docs/verl.md#training-data-by-domain).

* ``code_rows``: rows in verl's parquet schema as public verl-format releases ship them (PRIME's
  Eurus-2-RL-Data: ``data_source`` such as "taco" or "codecontests", ``prompt`` chat messages, ``ability``
  "code", ``reward_model`` {"style": "rule", "ground_truth": JSON text of {"inputs": [...], "outputs": [...]}}).
  Reward: the fraction of tests passed (verl's PRIME scorer).
* ``stem_rows``: rows in verl's schema whose ground truth is the answer (SCP-116K-style problem and answer).
  Reward: binary, as math.
* ``instruction_rows``: Google's IFEval records ({"key", "prompt", "instruction_id_list", "kwargs"}).
  Reward: the fraction of instructions followed (``tasks.instruction_scoring``).

Each reads a .parquet, .jsonl or .json file, checks every row before building any (ValueError naming the
file, the row and the missing or unusable field), and returns rows in this recipe's schema through
``data.load_records`` and ``data.record_rows``, the functions notebook 05's data uses: the same prompt
suffixes and "<family>.<name>" data sources. Code and STEM files may also hold this recipe's own record
fields (``data.RECORD_FIELDS``); rows of another of our families (e.g. Eurus-2-RL-Data's math rows in a
code file) are skipped.
"""

from __future__ import annotations

from pathlib import Path

from brorl_lib.core.validation import check_int
from brorl_lib.verl_recipe import data


def _local_rows(path: str | Path, family: str, split: str, limit: int) -> list[dict]:
    """The first ``limit`` rows (0: all) of a local file of ``family`` records, in file order."""
    check_int("limit", limit, low=0)
    path = Path(path)
    if path.suffix not in data.LOCAL_SUFFIXES:
        raise ValueError(f"path={str(path)!r} is not allowed: the file must end in one of {list(data.LOCAL_SUFFIXES)}")
    records = data.load_records(str(path), family, "path")
    return data.record_rows(family, records if limit == 0 else records.iloc[:limit], split, path.stem)


def code_rows(path: str | Path, split: str = "train", limit: int = 0) -> list[dict]:
    """Code rows from a local file in verl's schema (or of problem/tests records), the first ``limit`` (0: all)
    in file order; the ground truth is the tests, JSON text of {"inputs": [...], "outputs": [...]}."""
    return _local_rows(path, "code", split, limit)


def stem_rows(path: str | Path, split: str = "train", limit: int = 0) -> list[dict]:
    """STEM rows from a local file in verl's schema (ground truth: the answer, checked as math)."""
    return _local_rows(path, "stem", split, limit)


def instruction_rows(path: str | Path, split: str = "train", limit: int = 0) -> list[dict]:
    """Instruction-following rows from a local file of IFEval records (prompt, instruction_id_list, kwargs).

    The prompt is kept as it is (it states its own instructions); the ground truth is JSON of the prompt,
    the instruction ids and their arguments (``tasks.instruction_scoring.encode_truth``)."""
    return _local_rows(path, "instruction", split, limit)
