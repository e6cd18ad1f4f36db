"""Every verifier-accepted answer of a laptop instance in its canonical form, enumerated, so that a prompt's
correct mass q can be computed exactly (``brorl_lib.rlvr.exact_q``).

* countdown: every ordering of the numbers with every sign pattern that reaches the target, written without
  spaces and with a positive first term ("7+5+3-1"); Reasoning Gym's verifier accepts each (a test checks).
* one-answer tasks (arithmetic, spell_backward, word_sequence_reversal): the reference answer.

Accepted forms outside the canonical set (a space, a leading "+", brackets, "12.0") are not enumerated; their
mass is estimated by sampling (``exact_q.outside_mass``) and reported beside q.
"""

from __future__ import annotations

from functools import cache
from itertools import permutations, product

from brorl_lib.rlvr.tasks import LaptopInstance


def canonical_answers(instance: LaptopInstance) -> tuple[str, ...]:
    """The instance's accepted answers in canonical form, sorted."""
    if instance.task == "countdown":
        md = instance.entry["metadata"]
        return countdown_solutions(tuple(md["numbers"]), int(md["target"]))
    return (instance.answer,)


@cache
def countdown_solutions(numbers: tuple[int, ...], target: int) -> tuple[str, ...]:
    """Every "a±b±c..." using each number once that evaluates to ``target`` (duplicates of a number give one
    string per distinct ordering)."""
    found = set()
    for order in set(permutations(numbers)):
        for signs in product((1, -1), repeat=len(order) - 1):
            if order[0] + sum(s * v for s, v in zip(signs, order[1:])) == target:
                found.add(str(order[0]) + "".join(("+" if s > 0 else "-") + str(v) for s, v in zip(signs, order[1:])))
    return tuple(sorted(found))
