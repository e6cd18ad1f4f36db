"""Settings the paper states for its token-level simulator (paper §4.1; paper-notes §2.1, §2.3)."""

from __future__ import annotations

import numpy as np

SIM_VOCAB_SIZE = 128_000  # d
SIM_N_CORRECT = 10_000  # |P|, reward +1; all other tokens -1
SIM_CORRECT_LOGIT = 3.0  # optional seeding: z_i = 3 for i in P
SIM_ANCHOR_LOGIT = 5.0  # anchor token z_0 = 5
SIM_ROLLOUT_SIZES = (4, 8, 16, 512, 51_200)
SIM_LEARNING_RATE = 1e-3
SIM_STEPS = 1000


def first_correct_indices(n_correct: int, anchor_correct: bool) -> np.ndarray:
    """Our choice where the paper is silent: the anchor is token 0, the correct tokens come right
    after it (1..n_correct), and the anchor is one of them only if ``anchor_correct``."""
    return np.arange(0, n_correct) if anchor_correct else np.arange(1, n_correct + 1)


def seeded_logits(vocab_size: int, correct: np.ndarray) -> np.ndarray:
    """The paper's optional seeding: z = 3 on correct tokens, the anchor (index 0) at 5, 0 elsewhere."""
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
