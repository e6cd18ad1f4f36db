"""One palette with meaning (seaborn's colour-blind colours): ProRL and N=16 share one colour, BroRL and N=512
another, every other N a fixed colour or a blue-grey darker with log N; a control or variant takes its N's colour
with a dash, marker and hatch of its own; series with no arm meaning take Paul Tol's muted colours (``SERIES``),
guides grey (``INK``, ``RULE``)."""

from __future__ import annotations

import math
from typing import NamedTuple

import seaborn as sns
from matplotlib.colors import to_hex, to_rgb

BASE = tuple(sns.color_palette("colorblind").as_hex())  # 10 colours: blue, orange, green, vermillion, ...
BLUE, ORANGE, GREEN, VERMILLION, PINK, BROWN, ROSE, GREY, YELLOW, SKY = BASE

ARMS = {"ProRL": ORANGE, "BroRL": BLUE}  # N=16, the step-scaled arm; N=512, the rollout-scaled arm
# every N a shipped profile draws (our choice of which colour goes with which N)
N_COLOURS = {4: GREEN, 8: PINK, 16: ORANGE, 32: BROWN, 64: SKY, 128: VERMILLION, 256: YELLOW, 512: BLUE}
SHADE_TOP_N = 2**16  # N at which the blue-grey shades of other N reach their darkest (our choice)


class Style(NamedTuple):  # how one arm is drawn
    colour: str
    dash: object
    marker: str
    hatch: str | None = None


CONTROLS = {  # a control arm: its N, and its own dash, marker and hatch (our choice)
    "batch-size control": (16, "-.", "s", "//"),
    "prompt-matched BroRL": (512, (0, (3, 1, 1, 1)), "D", ".."),
    "KL-anchored BroRL": (512, (0, (5, 1, 1, 1, 1, 1)), "^", "xx"),
}
VARIANTS = {  # a verdict arm in another form: its N's colour, its own dash, marker and hatch (our choice)
    "rule rate": ("--", "v", "\\\\\\"),  # at the square-root rule's learning rate, not the tuned one
    "paper prompts": (":", "P", "++"),  # BroRL at the paper's prompts per step
}
SERIES = ("#332288", "#882255", "#999933", "#44aa99", "#aa4499", "#4d4d4d")  # no arm or N meaning: indigo, wine,
# olive, teal, purple (Paul Tol's muted scheme) and a dark grey, in order
INK = "0.2"  # zero lines, reference curves
RULE = "0.6"  # guides: the paper's N, a budget, a threshold
GOOD, BAD = "#117733", "#cc6677"  # a gain / a loss of correct mass: Paul Tol's muted green and rose, no N's colour


def arm(name: str) -> str:
    """The colour of arm ``name`` (ProRL or BroRL); ValueError naming the known arms otherwise (a control's
    style: ``control``)."""
    if name not in ARMS:
        raise ValueError(f"arm={name!r} has no colour: known arms are {', '.join(ARMS)}")
    return ARMS[name]


def control(name: str) -> Style:
    """The style of control arm ``name``: its N's colour, its own dash, marker and hatch; ValueError naming the
    known controls otherwise."""
    if name not in CONTROLS:
        raise ValueError(f"control={name!r} has no style: known controls are {', '.join(CONTROLS)}")
    n, dash, marker, hatch = CONTROLS[name]
    return Style(n_colour(n), dash, marker, hatch)


def variant(name: str, n: int) -> Style:
    """The style of N=``n``'s arm in form ``name`` (``VARIANTS``); ValueError naming the known forms otherwise."""
    if name not in VARIANTS:
        raise ValueError(f"variant={name!r} has no style: known forms are {', '.join(VARIANTS)}")
    dash, marker, hatch = VARIANTS[name]
    return Style(n_colour(n), dash, marker, hatch)


def n_colour(n: int) -> str:
    """The colour of N rollouts per prompt: fixed for the N in ``N_COLOURS``, else a blue-grey, darker with log N."""
    n = int(n)
    if n < 1:
        raise ValueError(f"n={n} has no colour: N (rollouts per prompt) is at least 1")
    if n in N_COLOURS:
        return N_COLOURS[n]
    shade = min(1.0, math.log2(n) / math.log2(SHADE_TOP_N))
    return to_hex(sns.light_palette("#3b4d61", n_colors=101)[40 + int(round(60 * shade))])


def tint(colour: str, amount: float) -> str:
    """``colour`` mixed with white: ``amount`` 0 keeps it, 1 gives white (a learning-rate variant's line)."""
    if not 0.0 <= amount < 1.0:
        raise ValueError(f"amount={amount} is not allowed: expected 0 <= amount < 1")
    r, g, b = to_rgb(colour)
    return to_hex((r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount))


def series(i: int) -> str:
    """The ``i``-th colour for series without a fixed meaning (tasks, seeds, models)."""
    return SERIES[i % len(SERIES)]
