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


def seeded_initial_logits(
    vocab_size: int = SIM_VOCAB_SIZE, n_correct: int = SIM_N_CORRECT, anchor_correct: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded start of Figure 3: logits and correct mask.

    The paper does not say which indices are correct or whether the anchor is; our choice: tokens
    1..n_correct are correct and the anchor (index 0) is incorrect unless ``anchor_correct``.
    """
    z = np.zeros(vocab_size)
    correct = np.zeros(vocab_size, dtype=bool)
    correct[1 : n_correct + 1] = True
    correct[0] = anchor_correct
    z[correct] = SIM_CORRECT_LOGIT
    z[0] = SIM_ANCHOR_LOGIT
    return z, correct
