"""verl's custom reward function for the recipe (``reward.custom_reward_function``, verl-notes §6).

``compute_score`` dispatches on the family in ``data_source`` ("<family>.<name>"):

* ``reasoning_gym``: the task's own ``score_answer`` on the text inside the last
  ``<answer>...</answer>`` (ProRL's convention, paper-notes §7.1), against the entry rebuilt from
  ``extra_info["entry"]``. Continuous in [0, 1], as ProRL scores logic puzzles. No tags: 0.
* ``math`` and ``stem``: verl's MATH scorer (last ``\\boxed{}``, Hendrycks normalisation), then,
  if that says wrong, Math-Verify (ProRL v1 verified math with DeepScaleR's checker plus math-verify).
* ``code``: verl's PRIME scorer, the fraction of test cases passed (ProRL v1: continuous).

It returns ``{"score": float, "acc": 0.0 | 1.0}``; ``acc`` (full credit) is what dynamic sampling
filters on (``algorithm.filter_groups.metric=acc``) and what validation reports as pass@1.

Math-Verify and timeouts: math_verify guards its parser with ``signal.alarm``, which works only in
a process's main thread, and verl calls reward functions from an executor thread. ``math_verify``
selects the backend: ``"pool"`` (default, set in the configs) uses verl's own
``verl.utils.reward_score.math_verify`` (a spawn process pool with a 30 s timeout: safe in verl, but
starting it costs seconds); ``"inline"`` calls math_verify in this process (its alarm timeouts in
the main thread, none elsewhere: fast, for tests and notebooks); ``"off"`` skips it.
"""

from __future__ import annotations

import re
import threading
from functools import cache

from brorl_lib.verl_recipe.codec import decode_entry

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
MATH_VERIFY_BACKENDS = ("pool", "inline", "off")
INLINE_TIMEOUT_S = 5  # math_verify's own default parse/verify timeout, seconds


def extract_answer(text: str) -> str | None:
    """The text inside the last ``<answer>...</answer>``, stripped; None when there is none."""
    found = ANSWER_TAG.findall(text or "")
    return found[-1].strip() if found else None


@cache
def _scorer(task: str):
    import reasoning_gym

    return reasoning_gym.get_score_answer_fn(task)


def reasoning_gym_score(task: str, solution_str: str, entry_json: str) -> float:
    """``score_answer`` of ``task`` on the tagged answer; 0.0 without tags or if the verifier raises."""
    answer = extract_answer(solution_str)
    if answer is None:
        return 0.0
    try:
        return min(1.0, max(0.0, float(_scorer(task)(answer, decode_entry(entry_json)))))
    except Exception:  # noqa: BLE001 - some verifiers raise on malformed answers (e.g. prime_factorization)
        return 0.0


def _math_verify_inline(solution_str: str, ground_truth: str) -> float:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    timeout = INLINE_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:  # the same extraction settings as verl's math_verify scorer
        gold = parse("\\boxed{" + ground_truth + "}", (LatexExtractionConfig(),), parsing_timeout=timeout)
        pred = parse(solution_str, (ExprExtractionConfig(), LatexExtractionConfig()), parsing_timeout=timeout)
        return 1.0 if gold and pred and any(verify(g, p, timeout_seconds=timeout) for g in gold for p in pred) else 0.0
    except Exception:  # noqa: BLE001 - timeouts and unparsable answers count as wrong
        return 0.0


def math_score(solution_str: str, ground_truth: str, math_verify: str = "pool") -> float:
    """1.0 if the last boxed answer equals ``ground_truth`` (verl's MATH scorer or Math-Verify), else 0.0."""
    from verl.utils.reward_score import math_reward

    if math_reward.compute_score(solution_str, ground_truth) == 1.0:
        return 1.0
    if math_verify == "off":
        return 0.0
    if math_verify == "inline":
        return _math_verify_inline(solution_str, ground_truth)
    from verl.utils.reward_score import math_verify as verl_math_verify

    return float(verl_math_verify.compute_score(solution_str, ground_truth))


def code_score(solution_str: str, ground_truth: str) -> float:
    """Share of test cases passed by the last ```python block (verl's PRIME scorer, continuous)."""
    from verl.utils.reward_score import prime_code

    return float(prime_code.compute_score(solution_str, ground_truth, continuous=True)[0])


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None,
                  math_verify: str = "pool", **kwargs) -> dict[str, float]:
    """verl's reward contract: a dict with ``score`` in [0, 1] and ``acc`` (1.0 only for full credit)."""
    if math_verify not in MATH_VERIFY_BACKENDS:
        raise ValueError(f"math_verify={math_verify!r} is not allowed: choose one of {list(MATH_VERIFY_BACKENDS)}")
    family, _, name = data_source.partition(".")
    if family == "reasoning_gym":
        entry = (extra_info or {}).get("entry")
        if not entry:
            raise ValueError(f"data_source={data_source!r}: extra_info['entry'] is missing; rebuild the data with data.py")
        score = reasoning_gym_score(name, solution_str, entry)
    elif family in ("math", "stem"):
        score = math_score(solution_str, ground_truth, math_verify)
    elif family == "code":
        score = code_score(solution_str, ground_truth)
    else:
        raise ValueError(f"data_source={data_source!r} is not allowed: expected 'reasoning_gym.<task>', "
                         "'math.<name>', 'stem.<name>' or 'code.<name>'")
    return {"score": score, "acc": float(score >= 1.0)}
