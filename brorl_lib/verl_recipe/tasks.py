"""Which Reasoning Gym tasks the recipe trains and validates on (one per Table 5 category at least)."""

from __future__ import annotations

from functools import cache

# Figure 4's Reasoning Gym panels (paper §4.2.2); its ninth panel, apps, is a code benchmark.
FIGURE4_TASKS: tuple[str, ...] = (
    "quantum_lock",
    "word_sequence_reversal",
    "aiw",
    "family_relationships",
    "mini_sudoku",
    "string_synthesis",
    "word_ladder",
    "countdown",
)
# Our choice: one fast task for each Table 5 category that Figure 4 leaves out, so that every
# category of the paper's Reasoning Gym score has data (ProRL trained on 96 tasks; the list is not public).
CATEGORY_FILLERS: tuple[str, ...] = (
    "simple_equations",  # algebra
    "rearc",  # arc (its entries hold tuples: see codec.py)
    "basic_arithmetic",  # arithmetic
    "bf",  # code
    "number_sequence",  # cognition
    "simple_geometry",  # geometry
    "list_functions",  # induction
)
DEFAULT_TASKS: tuple[str, ...] = FIGURE4_TASKS + CATEGORY_FILLERS
# Registered tasks we refuse: no reference answer to check against, a verifier that scores
# nonsense as right (game_of_life_halting in 0.1.25), or a container of other tasks.
EXCLUDED_TASKS = frozenset(
    {"composite", "game_of_life_halting", "boxnet", "graph_color", "propositional_logic", "rubiks_cube", "rush_hour"}
)


@cache
def available_tasks() -> tuple[str, ...]:
    """Reasoning Gym tasks this recipe accepts (registered in the installed package, not excluded)."""
    from reasoning_gym.factory import DATASETS

    return tuple(sorted(set(DATASETS) - EXCLUDED_TASKS))
