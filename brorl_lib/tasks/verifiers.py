"""Reasoning Gym's own verifiers (``score_answer``): the reward of every Reasoning Gym task here.

Two readings of a response, one verifier:

* ``answer_score``: the response *is* the answer (the laptop-scale model answers right after its compact
  prompt, without tags). The verifier's raw value: continuous, so near misses earn partial credit (e.g.
  spell_backward scores the share of letters in place), and a float sum may land a hair above 1
  (spell_backward: 1.0000000000000002 for the right word followed by more text).
* ``tagged_score``: ProRL's format, used by the verl reward and the evaluation: the answer is the text of
  the last ``<answer>...</answer>`` after the last ``</think>`` (``answers.extract_answer``); no tags
  score 0; the value is clipped to [0, 1].

Both score 0 when the verifier raises on a malformed answer (e.g. prime_factorization on "abc"): a wrong
answer, not an error that stops training or evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from brorl_lib.tasks.answers import extract_answer
from brorl_lib.tasks.credit import clip


@cache
def verifier(task: str) -> Callable[[str | None, dict], float]:
    """``score_answer`` of reasoning_gym task ``task`` (a data set of its default configuration)."""
    import reasoning_gym

    return reasoning_gym.create_dataset(task, size=1, seed=0).score_answer


def answer_score(task: str, answer: str | None, entry: dict) -> float:
    """The verifier's score of ``answer`` for ``entry`` (its raw value, a fraction); 0.0 for no answer (None)
    or when the verifier raises."""
    if answer is None:
        return 0.0
    try:
        return float(verifier(task)(answer, entry))
    except Exception:  # noqa: BLE001 - e.g. prime_factorization raises ValueError on "abc", boxnet TypeError on "1.5"
        return 0.0


def tagged_score(task: str, response: str, entry: dict) -> float:
    """``answer_score`` of the response's tagged answer, clipped to [0, 1]; 0.0 without ``<answer>`` tags."""
    return clip(answer_score(task, extract_answer(response), entry))
