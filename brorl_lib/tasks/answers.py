"""Which part of a response is its answer.

Reasoning models write their reasoning before ``</think>``; when a response has one, only the text after
its last ``</think>`` is read (our choice, as DeepScaleR's checker does, which ProRL used for math).
Within that part, a Reasoning Gym answer is the text of the last ``<answer>...</answer>`` block (ProRL's
convention), a math answer is the content of the last ``\\boxed{}`` (``final_boxed``; the paper's prompt
asks for the final answer in ``\\boxed{}``, and verl's MATH scorer, as DeepScaleR's, reads the last one;
boxes joined to it only by commas or "and" are one list answer), and a program is the last fenced code block.
"""

from __future__ import annotations

import re

THINK_END = "</think>"
_BOX_START = re.compile(r"\\(?:boxed|fbox)\s*\{")
# What may stand between the boxes of one list answer: commas, "and"/"or" (plain or in \text{}), spacing, $ and \( \[.
_LIST_SEPARATOR = re.compile(
    r"(?:\s|[,;$~]|\\[()\[\],;: ]|\\q?quad|\\text\{\s*(?:and|or|,)?\s*\}|\band\b|\bor\b)*", re.IGNORECASE
)
_CODE_BLOCK = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)


def final_region(response: str) -> str:
    """The part of a response after its last ``</think>``, or all of it."""
    return response.rsplit(THINK_END, 1)[1] if THINK_END in response else response


def extract_answer(response: str) -> str | None:
    """Text of the last ``<answer>...</answer>`` block of the final region, stripped; None without one
    (reasoning_gym's own ``extract_answer``)."""
    from reasoning_gym.utils import extract_answer as last_tagged

    return last_tagged(final_region(response))


def _boxes(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of each complete outermost ``\\boxed{...}``/``\\fbox{...}`` of ``text``, in order
    (one pass over the braces: linear in the text's length)."""
    closing, open_at = {}, []
    for i, ch in enumerate(text):
        if ch == "{":
            open_at.append(i)
        elif ch == "}" and open_at:
            closing[open_at.pop()] = i
    found: list[tuple[int, int, str]] = []
    for m in _BOX_START.finditer(text):
        end = closing.get(m.end() - 1)
        if end is not None and not (found and m.start() < found[-1][1]):  # closed, and not inside the previous box
            found.append((m.start(), end + 1, text[m.end() : end]))
    return found


def final_boxed(text: str) -> list[str]:
    """Contents of the last complete ``\\boxed{...}`` of ``text`` and of the boxes right before it that only
    commas, "and", "or", spacing or math delimiters separate from it (one answer written as a list of boxes,
    e.g. ``\\boxed{1}, \\boxed{2}``), in order; empty without a box. An earlier box followed by anything else
    (``\\boxed{3}. Wait, it is \\boxed{5}``) is not part of the final answer."""
    boxes = _boxes(text)
    if not boxes:
        return []
    first = len(boxes) - 1
    while first > 0 and _LIST_SEPARATOR.fullmatch(text[boxes[first - 1][1] : boxes[first][0]]):
        first -= 1
    return [content for _, _, content in boxes[first:]]


def extract_code(response: str) -> str:
    """The last fenced code block of the response's final region; without one, that whole region (PRIME's
    convention: a response that is pure code is run as it is)."""
    text = final_region(response)
    blocks = _CODE_BLOCK.findall(text)
    return blocks[-1] if blocks else text
