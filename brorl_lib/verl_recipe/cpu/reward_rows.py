"""One row per scorer of the recipe's reward function that the CPU run must see score above 0 inside verl.

The CPU run's tasks (two Reasoning Gym tasks and ``math.arithmetic``) leave three of the reward function's paths
unproven: a 0.09M-parameter model gets no arithmetic right, so a math score of 0 cannot tell wrong answers from
a Math-Verify pool broken inside verl's reward worker, and the run has no code, STEM or instruction-following
rows. Each row here is a record in its family's own format, written to a file and read by the recipe's
converters (``data.load_records``, ``data.record_rows``), with the response the warm start teaches for it:

* ``math.fractions``: the reference is ``\\frac{3}{4}``, the taught answer ``\\boxed{0.75}``: verl's MATH scorer
  (string match after normalisation) rejects it and only Math-Verify accepts it, so its reward is above 0 only
  if Math-Verify's process pool works inside verl's reward worker;
* ``stem.day_fraction``: the same shape on a STEM record (``\\frac{1}{4}`` against ``0.25``);
* ``code.print_seven``: a program checked by verl's PRIME scorer against the record's test case;
* ``instruction.say_yes``: an IFEval record (instruction ``keywords:existence``) checked by IFEval's checker.

The rows repeat one problem each (``TRAIN_REPEATS`` training rows and one validation row of the same problem):
the warm-started model answers them from memory, a plumbing check of the reward path, not learning.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from brorl_lib.core import atomic
from brorl_lib.verl_recipe import data

TRAIN_REPEATS = 32  # our choice: training rows per problem, about 9% of the warm start's examples in all


@dataclass(frozen=True)
class RewardRow:
    """A record of ``family`` and the response the warm start teaches for it (without the end-of-turn token)."""

    family: str
    record: dict
    response: str

    @property
    def data_source(self) -> str:
        return data.data_source(self.family, self.record["data_source"])


ROWS = (
    RewardRow(
        "math",
        {"problem": "Write 0.75 as a fraction in lowest terms.", "answer": "\\frac{3}{4}", "data_source": "fractions"},
        "\\boxed{0.75}",
    ),
    RewardRow(
        "stem",
        {"problem": "What fraction of a day is 6 hours?", "answer": "\\frac{1}{4}", "data_source": "day_fraction"},
        "\\boxed{0.25}",
    ),
    RewardRow(
        "code",
        {"problem": "Print the number 7.", "tests": {"inputs": [""], "outputs": ["7\n"]}, "data_source": "print_seven"},
        "```python\nprint(7)\n```",
    ),
    RewardRow(
        "instruction",
        {
            "prompt": "Answer with one word: yes.",
            "instruction_id_list": ["keywords:existence"],
            "kwargs": [{"keywords": ["yes"]}],
            "data_source": "say_yes",
        },
        "yes",
    ),
)


def frames(folder: Path, repeats: int = TRAIN_REPEATS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Training rows (``repeats`` of each problem) and validation rows (one each), through the converters."""
    train, val = [], []
    for row in ROWS:
        path = Path(folder) / f"reward_{row.family}.jsonl"
        atomic.write_text(path, json.dumps(row.record) + "\n")
        records = data.load_records(str(path), row.family, f"{row.family} reward row")
        val += data.record_rows(row.family, records, "val", row.record["data_source"])
        train += data.record_rows(row.family, pd.concat([records] * repeats, ignore_index=True), "train", "")
    return pd.DataFrame(train, columns=list(data.COLUMNS)), pd.DataFrame(val, columns=list(data.COLUMNS))


def responses() -> dict[str, str]:
    """data_source -> the response the warm start teaches (``tiny_model.warm_start``)."""
    return {row.data_source: row.response for row in ROWS}
