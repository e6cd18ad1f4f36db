"""Math answers, binary: 1 if verl's MATH scorer (last ``\\boxed{}``, Hendrycks string normalisation) or,
failing that, math-verify (symbolic equivalence) accepts the response's final region, else 0.

ProRL, whose recipe the paper continues, checked math with DeepScaleR's checker plus math-verify
(docs/prorl-background.md#prorl-training-data-and-rewards). math-verify is called with the extraction
settings of verl's own wrapper (gold: LaTeX of ``\\boxed{ground_truth}``;
prediction: expressions and LaTeX). ``math_verify`` picks how it runs:

* ``"inline"``: in this process. math-verify guards its parser with ``signal.alarm``, which works only in
  a process's main thread: timeouts of 5 s there, none elsewhere. Fast; the evaluation uses it.
* ``"pool"``: verl's ``verl.utils.reward_score.math_verify`` (a spawn process pool, 30 s timeout,
  docs/verl.md#reward-scorers): safe in verl's reward threads, but starting it costs seconds; the verl
  configs use it.
* ``"off"``: verl's MATH scorer alone.
"""

from __future__ import annotations

import threading

from brorl_lib.core.validation import check_choice
from brorl_lib.tasks.answers import final_region

MATH_VERIFY_BACKENDS = ("pool", "inline", "off")
INLINE_TIMEOUT_S = 5  # math-verify's own default parse/verify timeout, seconds


def _math_verify_inline(text: str, ground_truth: str) -> float:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    timeout = INLINE_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        gold = parse("\\boxed{" + ground_truth + "}", (LatexExtractionConfig(),), parsing_timeout=timeout)
        pred = parse(text, (ExprExtractionConfig(), LatexExtractionConfig()), parsing_timeout=timeout)
        return 1.0 if gold and pred and verify(gold, pred, timeout_seconds=timeout) else 0.0
    except Exception:  # noqa: BLE001 - timeouts and unparsable answers count as wrong
        return 0.0


def score_math(response: str, ground_truth: str, math_verify: str = "inline") -> float:
    """1.0 if the final region's answer equals ``ground_truth`` (verl's MATH scorer, then math-verify), else 0.0."""
    from verl.utils.reward_score import math_reward

    check_choice("math_verify", math_verify, MATH_VERIFY_BACKENDS)
    text = final_region(response)
    if math_reward.compute_score(text, ground_truth) == 1.0:
        return 1.0
    if math_verify == "off":
        return 0.0
    if math_verify == "inline":
        return _math_verify_inline(text, ground_truth)
    from verl.utils.reward_score import math_verify as verl_math_verify

    return float(verl_math_verify.compute_score(text, ground_truth))
