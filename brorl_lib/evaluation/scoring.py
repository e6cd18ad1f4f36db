"""Scores of one response, with the field's own verifiers.

* math (binary): 1 if verl's ``math_reward`` (string-normalised ``\\boxed{}`` match) or math-verify
  (symbolic equivalence, the same extraction as verl's math_verify wrapper) accepts the answer, else
  0. ProRL verified math with DeepScaleR's checker plus math-verify (paper-notes §7.1). math-verify is
  called in-process, not through verl's wrapper, whose spawn process pool needs a ``__main__`` guard
  (verl-notes §3); its own timeouts use ``signal.alarm`` and are switched off outside the main thread.
* code (continuous): the fraction of tests the program passes in the sandbox (``sandbox.py``); 0 on a
  compile error or timeout.
* Reasoning Gym (continuous, as ProRL): the task's own ``score_answer`` on the text of the last
  ``<answer>...</answer>`` block (ProRL's convention). Without such a block the answer is ``None``,
  which the verifier scores as it scores a missing answer (0 for most tasks, 0.01 for a few). A verifier
  that raises on a malformed answer (some do, e.g. ``prime_factorization`` on "abc") scores 0, a wrong
  answer, as the verl reward does; the evaluation goes on.

Reasoning models write their reasoning before ``</think>``; when the response has one, only the text
after the last ``</think>`` is checked (our choice, as DeepScaleR's checker does).
"""

from __future__ import annotations

import re
import threading

from brorl_lib.evaluation.datasets import BENCHMARKS, Instance, rg_verifier
from brorl_lib.evaluation.sandbox import Limits, run_tests

THINK_END = "</think>"
MATH_VERIFY_TIMEOUT_S = 5  # math-verify's per-call parse/verify timeout, seconds (its default)
_CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def final_region(response: str) -> str:
    """The part of a response after its last ``</think>``, or all of it."""
    return response.rsplit(THINK_END, 1)[1] if THINK_END in response else response


def score_math(response: str, answer: str) -> float:
    """1.0 if the response's final answer equals ``answer`` (verl math_reward or math-verify), else 0.0."""
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify
    from verl.utils.reward_score import math_reward

    text = final_region(response)
    if math_reward.compute_score(text, answer) == 1.0:
        return 1.0
    timeout = MATH_VERIFY_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    gold = parse("\\boxed{" + answer + "}", [LatexExtractionConfig()], parsing_timeout=timeout)
    pred = parse(text, [ExprExtractionConfig(), LatexExtractionConfig()], parsing_timeout=timeout)
    if gold and pred and verify(gold, pred, timeout_seconds=timeout):
        return 1.0
    return 0.0


def extract_code(response: str) -> str:
    """The last fenced code block of the response's final part; without one, that whole part (PRIME's
    convention: a response that is pure code is run as it is)."""
    text = final_region(response)
    blocks = _CODE_BLOCK.findall(text)
    return blocks[-1] if blocks else text


def score_code(response: str, tests: dict, limits: Limits = Limits()) -> float:
    """Fraction of ``tests`` the response's program passes; 0 on a compile error or timeout."""
    return run_tests(extract_code(response), tests, limits).score


def extract_rg_answer(response: str) -> str | None:
    """Text of the last <answer>...</answer> block (stripped), or None."""
    from reasoning_gym.utils import extract_answer

    return extract_answer(final_region(response))


def score_reasoning_gym(response: str, task: str, entry: dict) -> float:
    """The task's own continuous verifier on the extracted answer, in [0, 1]; 0.0 when the verifier
    raises on a malformed answer (as the verl reward, ``verl_recipe.rewards``)."""
    try:
        return float(rg_verifier(task).score_answer(extract_rg_answer(response), entry))
    except Exception:  # noqa: BLE001 - e.g. prime_factorization raises ValueError on "abc", boxnet TypeError on "1.5"
        return 0.0


def score(instance: Instance, response: str, code_limits: Limits = Limits()) -> float:
    """The score of ``response`` to ``instance``, in [0, 1], by its benchmark's domain."""
    domain = BENCHMARKS[instance.benchmark].domain
    if domain == "math":
        return score_math(response, instance.reference)
    if domain == "code":
        return score_code(response, instance.reference, code_limits)
    return score_reasoning_gym(response, instance.task, instance.reference)
