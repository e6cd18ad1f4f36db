"""Instruction following, continuous: the share of a prompt's verifiable instructions that the response's
final region follows.

ProRL trained on synthetic IFEval-like data with a continuous reward (ProRL paper, Table 4;
docs/prorl-background.md#prorl-training-data-and-rewards). The checkers are Google's IFEval instruction
checkers as packaged by if-verifiable (pinned in pyproject.toml), not our own; a prompt is an IFEval record
(``prompt``, ``instruction_id_list``, ``kwargs``: one dict of arguments per instruction). Our choices:

* **strict**: each instruction is checked on the response as it is (IFEval's instruction-level strict
  accuracy), not on IFEval's "loose" variants (first or last line removed, ``*`` removed).
* **the final region**: only the text after the last ``</think>`` is checked (``answers.final_region``),
  as for every other reward here; an unfinished ``<think>`` scores 0.
* **fixed language detection**: langdetect samples at random; it is seeded (0) once, so a response scores
  the same on every call.
* **complete arguments**: a checker given no value for one of its arguments draws a random one (IFEval's
  data generator), so an instruction missing an argument is refused (``check_instructions``), as is an
  instruction id the checkers do not know (if-verifiable would skip it, raising the score).

``length_constraints:number_sentences`` counts sentences with NLTK's Punkt model (``punkt_tab``), data that
no Python package ships: it must be installed once with NLTK's downloader; without it such a prompt is
refused with the command to run. Every other instruction works offline.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from functools import cache

from brorl_lib.tasks.answers import final_region

# Instructions whose checker needs NLTK's punkt_tab data (instructions_util.count_sentences).
PUNKT_INSTRUCTIONS = frozenset({"length_constraints:number_sentences"})
PUNKT_HOWTO = (
    "install NLTK's sentence model once: `python -m nltk.downloader punkt_tab` on a machine with network "
    "access (or copy its nltk_data/tokenizers/punkt_tab folder into a folder named by NLTK_DATA)"
)
LANGDETECT_SEED = 0  # our choice: any fixed seed makes language detection deterministic


def arguments(kwargs: list[dict]) -> list[dict]:
    """Each instruction's arguments as its checker takes them: absent ones (None, NaN) dropped, as IFEval's
    evaluation drops None; whole floats as ints (parquet readers turn an integer column with gaps into
    floats, and IFEval's numeric arguments are counts)."""

    def value(v):
        return int(v) if isinstance(v, float) and v.is_integer() else v

    def absent(v) -> bool:
        return v is None or (isinstance(v, float) and math.isnan(v))

    return [{k: value(v) for k, v in given.items() if not absent(v)} for given in kwargs]


@cache
def registry() -> Mapping[str, type]:
    """IFEval's checkers by instruction id (if-verifiable's copy of Google's registry); seeds langdetect."""
    from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT
    from langdetect import DetectorFactory

    DetectorFactory.seed = LANGDETECT_SEED
    return INSTRUCTION_DICT


def require_punkt(where: str) -> None:
    """ValueError naming ``where`` and the way out when NLTK's punkt_tab model is not installed."""
    import nltk

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        raise ValueError(
            f"{where}: {sorted(PUNKT_INSTRUCTIONS)} need NLTK's punkt_tab data, which is not installed: {PUNKT_HOWTO}"
        ) from None


def check_instructions(instruction_ids: object, kwargs: object, where: str) -> None:
    """Raise ValueError naming ``where`` unless every instruction is known to IFEval's checkers and given all
    of its arguments (one dict per instruction, read by ``arguments``)."""
    if (
        not isinstance(instruction_ids, list)
        or not instruction_ids
        or not all(isinstance(i, str) for i in instruction_ids)
    ):
        raise ValueError(f"{where}: instruction_id_list must be a non-empty list of instruction ids")
    if (
        not isinstance(kwargs, list)
        or len(kwargs) != len(instruction_ids)
        or not all(isinstance(k, dict) for k in kwargs)
    ):
        raise ValueError(f"{where}: kwargs must be a list of one dict per instruction ({len(instruction_ids)})")
    checkers = registry()
    for iid, args in zip(instruction_ids, arguments(kwargs)):
        if iid not in checkers:
            raise ValueError(f"{where}: unknown instruction {iid!r}: IFEval's checkers know {len(checkers)} ids")
        checker = checkers[iid](iid)
        absent = [k for k in checker.get_instruction_args_keys() if k not in args]
        if absent:
            raise ValueError(f"{where}: instruction {iid!r} lacks kwargs {absent} (its checker would draw them)")
        try:
            checker.build_description(**args)
        except Exception as err:  # noqa: BLE001 - each checker raises its own type on a bad argument
            raise ValueError(f"{where}: instruction {iid!r} refuses kwargs {args}: {err}") from None
        if iid in PUNKT_INSTRUCTIONS:
            require_punkt(where)


def encode_truth(prompt: str, instruction_ids: list[str], kwargs: list[dict]) -> str:
    """The ground truth of one prompt: JSON of its prompt, instruction ids and their ``arguments``."""
    return json.dumps({"prompt": prompt, "instruction_id_list": list(instruction_ids), "kwargs": arguments(kwargs)})


def instruction_score(response: str, ground_truth: str) -> float:
    """Share of the instructions in ``ground_truth`` (``encode_truth``'s JSON) that the response's final
    region follows, strictly; ValueError for a ground truth ``check_instructions`` refuses."""
    from if_verifiable.common import evaluate_instructions

    truth = json.loads(ground_truth)
    ids, kwargs = truth.get("instruction_id_list"), truth.get("kwargs")
    check_instructions(ids, kwargs, "ground_truth")
    args = arguments(kwargs)
    _, scores = evaluate_instructions(final_region(response), ids, args, truth.get("prompt", ""), registry())
    return float(scores.partial_strict)
