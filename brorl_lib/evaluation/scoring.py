"""Scores of one response to a benchmark instance, in [0, 1], with the field's own verifiers.

Math and Reasoning Gym are scored by ``brorl_lib.tasks``, the same functions the verl reward calls, so
the evaluation score and the training reward cannot drift apart:

* math (binary): ``tasks.math_scoring.score_math`` with math-verify called in-process (``"inline"``), not
  through verl's wrapper, whose spawn process pool needs a ``__main__`` guard (docs/verl.md#reward-scorers).
* Reasoning Gym (continuous, as ProRL): ``tasks.verifiers.tagged_score``, the task's own ``score_answer``
  on the text of the last ``<answer>...</answer>`` block (0 without one, 0 when the verifier raises on a
  malformed answer).
* code (continuous): the fraction of tests the program (``tasks.answers.extract_code``) passes in the
  sandbox (``sandbox.py``); 0 on a compile error or timeout.

Only the text after a response's last ``</think>`` is checked (``tasks.answers.final_region``). A sample
is ``correct`` when it earns full credit (``tasks.credit.passed``).
"""

from __future__ import annotations

from brorl_lib.evaluation.datasets import BENCHMARKS, BenchmarkInstance
from brorl_lib.evaluation.sandbox import Limits, run_tests
from brorl_lib.tasks.answers import extract_code
from brorl_lib.tasks.math_scoring import score_math
from brorl_lib.tasks.verifiers import tagged_score

DEFAULT_LIMITS = Limits()  # the sandbox's default time, memory and output limits


def score_code(response: str, tests: dict, limits: Limits = DEFAULT_LIMITS) -> float:
    """Fraction of ``tests`` the response's program passes; 0 on a compile error or timeout."""
    return run_tests(extract_code(response), tests, limits).score


def score(instance: BenchmarkInstance, response: str, code_limits: Limits = DEFAULT_LIMITS) -> float:
    """The score of ``response`` to ``instance``, in [0, 1], by its benchmark's domain."""
    domain = BENCHMARKS[instance.benchmark].domain
    if domain == "math":
        return score_math(response, instance.reference, math_verify="inline")
    if domain == "code":
        return score_code(response, instance.reference, code_limits)
    return tagged_score(instance.task, response, instance.reference)
