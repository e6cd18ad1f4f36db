"""Settings and rules the paper states: its token-level simulator (paper §4.1), figure axes (read from
data/paper/settings.csv) and the square-root learning-rate rule (§4.2.1).

What the paper leaves open, and our choices, are in docs/simulator-choices.md.
"""

from __future__ import annotations

import math

import numpy as np

from brorl_lib.core.validation import check_positive
from brorl_lib.facts.reported import setting

SIM_VOCAB_SIZE: int = setting("simulator_vocab_size")  # d
SIM_N_CORRECT: int = setting("simulator_correct_tokens")  # |P|, the correct tokens
SIM_REWARD_CORRECT: float = setting("simulator_reward_correct")  # R_i for i in P
SIM_REWARD_INCORRECT: float = setting("simulator_reward_incorrect")  # R_i for every other token
SIM_CORRECT_LOGIT: float = setting("simulator_correct_logit")  # optional seeding: z_i on the correct tokens
SIM_ANCHOR_LOGIT: float = setting("simulator_anchor_logit")  # the anchor token's z_0
SIM_ROLLOUT_SIZES: tuple[int, ...] = setting("simulator_rollout_sizes")  # the N of Figure 3
SIM_LEARNING_RATE: float = setting("simulator_learning_rate")  # AdamW step size eta
SIM_STEPS: int = setting("simulator_steps")  # update steps T
PAPER_FIG1_HOURS: int = setting("figure1_max_hours")  # hours where the time axis of Figures 1 and 4 ends
PAPER_FIG3_WORST_DROP_LOW: float = setting("figure3_worst_drop_low")  # lowest tick of Figure 3's worst-drop axis


def first_correct_indices(n_correct: int, anchor_correct: bool) -> np.ndarray:
    """Our choice where the paper is silent: the anchor is token 0, the correct tokens come right
    after it (1..n_correct), and the anchor is one of them only if ``anchor_correct``."""
    return np.arange(0, n_correct) if anchor_correct else np.arange(1, n_correct + 1)


def seeded_logits(vocab_size: int, correct: np.ndarray) -> np.ndarray:
    """The paper's optional seeding: SIM_CORRECT_LOGIT on correct tokens, the anchor (index 0) at
    SIM_ANCHOR_LOGIT, 0 elsewhere."""
    z = np.zeros(vocab_size)
    z[correct] = SIM_CORRECT_LOGIT
    z[0] = SIM_ANCHOR_LOGIT
    return z


def seeded_initial_logits(
    vocab_size: int = SIM_VOCAB_SIZE, n_correct: int = SIM_N_CORRECT, anchor_correct: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded start of Figure 3: logits and correct mask (correct tokens as in first_correct_indices)."""
    correct = np.zeros(vocab_size, dtype=bool)
    correct[first_correct_indices(n_correct, anchor_correct)] = True
    return seeded_logits(vocab_size, correct), correct


def scaled_learning_rate(base_lr: float, base_samples_per_step: int, samples_per_step: int) -> float:
    """Paper §4.2.1: the learning rate grows with the square root of the samples-per-step ratio."""
    check_positive("base_lr", base_lr)
    check_positive("base_samples_per_step", base_samples_per_step)
    check_positive("samples_per_step", samples_per_step)
    return base_lr * math.sqrt(samples_per_step / base_samples_per_step)
