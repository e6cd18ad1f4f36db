"""Which part of a response is its answer.

Reasoning models write their reasoning before ``</think>``; when a response has one, only the text after
its last ``</think>`` is read (our choice, as DeepScaleR's checker does, which ProRL used for math).
Within that part, a Reasoning Gym answer is the text of the last ``<answer>...</answer>`` block (ProRL's
convention), a math answer is found by the math scorers (last ``\\boxed{}``), and a program is the last
fenced code block.
"""

from __future__ import annotations

import re

THINK_END = "</think>"
_CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def final_region(response: str) -> str:
    """The part of a response after its last ``</think>``, or all of it."""
    return response.rsplit(THINK_END, 1)[1] if THINK_END in response else response


def extract_answer(response: str) -> str | None:
    """Text of the last ``<answer>...</answer>`` block of the final region, stripped; None without one
    (reasoning_gym's own ``extract_answer``)."""
    from reasoning_gym.utils import extract_answer as last_tagged

    return last_tagged(final_region(response))


def extract_code(response: str) -> str:
    """The last fenced code block of the response's final region; without one, that whole region (PRIME's
    convention: a response that is pure code is run as it is)."""
    text = final_region(response)
    blocks = _CODE_BLOCK.findall(text)
    return blocks[-1] if blocks else text
