"""verl's custom reward function for the recipe (``reward.custom_reward_function``;
docs/verl.md#custom-reward-function).

``compute_score`` dispatches on the family in ``data_source`` ("<family>.<name>"). Math and Reasoning
Gym are scored by ``brorl_lib.tasks``, the same functions the evaluation uses:

* ``reasoning_gym``: ``tasks.verifiers.tagged_score``, the task's own ``score_answer`` on the text inside
  the last ``<answer>...</answer>`` (ProRL's convention, docs/prorl-background.md#prorl-training-data-and-rewards),
  against the entry rebuilt from ``extra_info["entry"]``. Continuous in [0, 1], as ProRL scores logic
  puzzles. No tags: 0.
* ``math`` and ``stem``: ``tasks.math_scoring.score_math``: verl's MATH scorer (last ``\\boxed{}``,
  Hendrycks normalisation), then, if that says wrong, Math-Verify (ProRL v1 verified math with
  DeepScaleR's checker plus math-verify).
* ``code``: verl's PRIME scorer, the fraction of test cases passed (ProRL v1: continuous).
* ``instruction``: ``tasks.instruction_scoring.instruction_score``, the fraction of the prompt's IFEval
  instructions that the final region follows, strictly (Google's IFEval checkers; ProRL: continuous).

Math, Reasoning Gym and instruction-following answers are read after the response's last ``</think>`` only
(``tasks.answers.final_region``). It returns ``{"score": float, "acc": 0.0 | 1.0}``; ``acc`` (full
credit, ``tasks.credit.passed``) is what dynamic sampling filters on (``algorithm.filter_groups.metric=acc``)
and what validation reports as pass@1.

Math-Verify and timeouts: math_verify guards its parser with ``signal.alarm``, which works only in
a process's main thread, and verl calls reward functions from an executor thread. ``math_verify``
selects the backend (``tasks.math_scoring``): ``"pool"`` (default, set in the configs) uses verl's own
``verl.utils.reward_score.math_verify`` (a spawn process pool with a 30 s timeout: safe in verl, but
starting it costs seconds); ``"inline"`` calls math_verify in this process (its alarm timeouts in
the main thread, none elsewhere: fast, for tests and notebooks); ``"off"`` skips it.
"""

from __future__ import annotations

from brorl_lib.core.validation import check_choice
from brorl_lib.tasks.credit import passed
from brorl_lib.tasks.instruction_scoring import instruction_score
from brorl_lib.tasks.math_scoring import MATH_VERIFY_BACKENDS, score_math
from brorl_lib.tasks.verifiers import tagged_score
from brorl_lib.verl_recipe.codec import decode_entry


def code_score(solution_str: str, ground_truth: str) -> float:
    """Share of test cases passed by the last ```python block (verl's PRIME scorer, continuous)."""
    from verl.utils.reward_score import prime_code

    return float(prime_code.compute_score(solution_str, ground_truth, continuous=True)[0])


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: str,
    extra_info: dict | None = None,
    math_verify: str = "pool",
    **kwargs,
) -> dict[str, float]:
    """verl's reward contract: a dict with ``score`` in [0, 1] and ``acc`` (1.0 only for full credit)."""
    check_choice("math_verify", math_verify, MATH_VERIFY_BACKENDS)
    family, _, name = data_source.partition(".")
    if family == "reasoning_gym":
        entry = (extra_info or {}).get("entry")
        if not entry:
            raise ValueError(
                f"data_source={data_source!r}: extra_info['entry'] is missing; rebuild the data with data.py"
            )
        score = tagged_score(name, solution_str, decode_entry(entry))
    elif family in ("math", "stem"):
        score = score_math(solution_str, ground_truth, math_verify)
    elif family == "code":
        score = code_score(solution_str, ground_truth)
    elif family == "instruction":
        score = instruction_score(solution_str, ground_truth)
    else:
        raise ValueError(
            f"data_source={data_source!r} is not allowed: expected 'reasoning_gym.<task>', "
            "'math.<name>', 'stem.<name>', 'code.<name>' or 'instruction.<name>'"
        )
    return {"score": score, "acc": float(passed(score))}
