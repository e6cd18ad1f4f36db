"""Math answers, binary: 1 if verl's MATH scorer (last ``\\boxed{}``, Hendrycks string normalisation) or,
failing that, math-verify (symbolic equivalence) accepts the response's final region, else 0.

ProRL, whose recipe the paper continues, checked math with DeepScaleR's checker plus math-verify
(docs/prorl-background.md#prorl-training-data-and-rewards). math-verify is called with the extraction
settings of verl's own wrapper (gold: LaTeX of ``\\boxed{ground_truth}``;
prediction: expressions and LaTeX). Before either scorer reads them, reference and response are read as
follows (``answer_text``; our choices, checked against math-verify's own test cases in
tests/data/math_verify_cases.json, see docs/evaluation.md#checked-against-data-written-by-others):

* **the last boxed answer**: when the final region holds a ``\\boxed{}``, only the content of the last one is
  the answer (the paper's prompt asks for the final answer in ``\\boxed{}``; verl's MATH scorer, as
  DeepScaleR's, reads the last one), together with the boxes right before it that only commas, "and" or
  spacing separate from it (one list answer, ``\\boxed{1}, \\boxed{2}``: ``tasks.answers.final_boxed``).
  math-verify alone would read every box of the response and compare their set, so a response correcting
  itself (``\\boxed{3}. Wait, ... \\boxed{5}``) would match neither 3 nor 5 but ``{3, 5}``. Without a box,
  math-verify reads the whole final region (its own extraction).
* **Euler's number**: ``\\mathrm{e}`` (also ``\\text{e}``, ``\\textrm{e}``, ``\\operatorname{e}``, ``\\mathrm e``)
  is written ``e``, which both scorers read as the constant (math-verify cuts ``1 - \\frac{1}{\\mathrm{e}}``
  off at ``\\mathrm``, reading it as ``1``).
* **percent**: a trailing ``%``, ``\\%``, ``percent``, ``percentage`` or ``pct`` of the reference or of the
  boxed answer is moved after the box, where math-verify reads it as a percentage (``28\\%`` equals ``28``
  and ``0.28``, as math-verify decides); inside a box it fails to parse.

``math_verify`` picks how it runs:

* ``"inline"``: in this process. math-verify guards its parser with ``signal.alarm``, which works only in
  a process's main thread: timeouts of 5 s there, none elsewhere. Fast; the evaluation uses it.
* ``"pool"``: verl's ``verl.utils.reward_score.math_verify`` (a spawn process pool, 30 s timeout,
  docs/verl.md#reward-scorers): safe in verl's reward threads, but starting it costs seconds; the verl
  configs use it. verl's wrapper boxes the reference itself, so a reference's percent sign is dropped there
  (``28\\%`` is read as ``28``).
* ``"off"``: verl's MATH scorer alone.
"""

from __future__ import annotations

import re
import threading

from brorl_lib.core.validation import check_choice
from brorl_lib.tasks.answers import final_boxed, final_region

MATH_VERIFY_BACKENDS = ("pool", "inline", "off")
INLINE_TIMEOUT_S = 5  # math-verify's own default parse/verify timeout, seconds

_EULER = re.compile(r"\\(?:mathrm|textrm|text|operatorname)\s*\{\s*e\s*\}|\\mathrm\s+e(?![A-Za-z])")
_PERCENT = re.compile(
    r"(?:\s|\\[,;: ])*(?:\\?%|\\text\{\s*(?:\\?%|percentage|percent|pct)\s*\}|percentage|percent|pct)\s*$"
)


def _euler(text: str) -> str:
    """``text`` with every upright Euler's number (``\\mathrm{e}`` and kin) written ``e``."""
    return _EULER.sub("e", text)


def _split_percent(answer: str) -> tuple[str, bool]:
    """(``answer`` without a trailing percent marker, whether it had one)."""
    bare = _PERCENT.sub("", answer)
    return (bare, True) if bare != answer and bare.strip() else (answer, False)


def _boxed(answer: str) -> str:
    """``answer`` in a box, a percent sign after it (where math-verify reads it as a percentage)."""
    bare, percent = _split_percent(answer)
    return f"$\\boxed{{{bare}}}$\\%" if percent else f"\\boxed{{{answer}}}"


def reference_text(ground_truth: str) -> str:
    """The reference as the scorers read it: Euler's number as ``e`` (see the module docstring)."""
    return _euler(str(ground_truth)).strip()


def answer_text(response: str) -> str:
    """What is checked of a response: its final region's last boxed answer (a list of boxes joined with
    ", "), boxed again, a percent sign after the box; without a box, the whole final region. Euler's
    number as ``e``."""
    region = _euler(final_region(response))
    parts = final_boxed(region)
    return _boxed(", ".join(p.strip() for p in parts)) if parts else region


def _math_verify_inline(text: str, ground_truth: str) -> float:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

    timeout = INLINE_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        gold = parse(_boxed(ground_truth), (LatexExtractionConfig(),), parsing_timeout=timeout)
        pred = parse(text, (ExprExtractionConfig(), LatexExtractionConfig()), parsing_timeout=timeout)
        return 1.0 if gold and pred and verify(gold, pred, timeout_seconds=timeout) else 0.0
    except Exception:  # noqa: BLE001 - timeouts and unparsable answers count as wrong
        return 0.0


def score_math(response: str, ground_truth: str, math_verify: str = "inline") -> float:
    """1.0 if the final region's answer equals ``ground_truth`` (verl's MATH scorer, then math-verify), else 0.0."""
    from verl.utils.reward_score import math_reward

    check_choice("math_verify", math_verify, MATH_VERIFY_BACKENDS)
    text, reference = answer_text(response), reference_text(ground_truth)
    if math_reward.compute_score(text, reference) == 1.0:
        return 1.0
    if math_verify == "off":
        return 0.0
    if math_verify == "inline":
        return _math_verify_inline(text, reference)
    from verl.utils.reward_score import math_verify as verl_math_verify

    return float(verl_math_verify.compute_score(text, _split_percent(reference)[0]))
