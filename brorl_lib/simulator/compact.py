"""Runs with few draws, simulated on compact rows: the same numbers as ``engine.RowBatch``, to the last bit.

Under the paper's rule every token never drawn so far gets the gradient p_k * sum_j v_j; tokens that
start from the same logit therefore keep the same logit, probability and AdamW moments, bit for bit.
A compact row holds each such class once (one slot per distinct initial logit; the anchor, token 0,
always alone) and gives a token a slot of its own, a copy of its class, the first time it is drawn.
Only two passes run over the vocabulary each step: spreading exp(z - max) from the slots to the
tokens, and the cumulative sum the draws search (its order of additions is the dense row's). The rest
(softmax, gradient, AdamW) runs over C + (tokens drawn so far) slots.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from brorl_lib.simulator.engine import DTYPES, AdamW, Rows, SimSettings, draw_rows, flat_draws, paper_gradient

# fused AdamW rounds the last (size mod 16) numbers of a tensor in a scalar loop that differs in the last bit
# from its vector loop: rows of a multiple of 16 slots keep every slot on the vector loop, as in a dense row
SLOT_ALIGN = 16
# our choice, from CPU timings at V=128,000, one thread, 1000 steps: a compact row took 0.57x a dense row's time
# at N=16, 0.65x at N=32, 0.76x at N=64 (slots for half of V), 1.25x at N=512 (slots reaching 80% of V)
MAX_SLOT_SHARE = 0.5


def slot_capacity(settings: SimSettings, n: int, classes: int) -> int:
    """Slots a row needs at most: its classes, plus a slot for every draw (no more than V tokens)."""
    return classes + min(n * settings.steps, settings.vocab_size)


def is_compact(settings: SimSettings, n: int) -> bool:
    """Whether runs with N=n are simulated on compact rows: only the paper's rule on CPU without Theorem 1's
    terms (they need every token), and only where the slots stay well below V."""
    return (
        settings.update_rule == "paper"
        and not settings.track_theory
        and settings.device == "cpu"
        and n * settings.steps <= MAX_SLOT_SHARE * settings.vocab_size
    )


def logit_classes(z0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each token's class (rows x V) and the class sizes (rows x classes): tokens of equal initial logit share
    a class, numbered by first appearance, except token 0 (the anchor), which is always class 0 alone."""
    rows = []
    for z in z0:
        _, first, inverse = np.unique(z[1:], return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first))  # classes in order of first appearance
        rows.append(np.concatenate([[0], rank[inverse] + 1]))
    cls = np.stack(rows)
    sizes = np.zeros((len(rows), cls.max() + 1), dtype=np.int64)
    for r, c in enumerate(cls):
        sizes[r] = np.bincount(c, minlength=sizes.shape[1])
    return cls, sizes


def aligned(k: int) -> int:
    return -(-k // SLOT_ALIGN) * SLOT_ALIGN


class CompactRowBatch(Rows):
    """Runs of the paper's rule held as compact rows (see the module's docstring); numbers as ``RowBatch``'s.

    Slots in use come first in a row; the rest hold -inf (probability 0, gradient 0, and AdamW leaves them
    -inf) and only the optimizer passes over them: exp of -inf takes a slow path, so the softmax runs over
    the first ``width`` slots. The last token of a class keeps the class's slot; a class whose last tokens
    all take slots of their own at one step is set to -inf too, so that the row's largest logit, which the
    softmax subtracts, is always a token's.
    """

    def __init__(self, settings: SimSettings, rollouts: list[int], seeds: list[int]) -> None:
        super().__init__(settings, rollouts, seeds)
        dev, dt = settings.device, DTYPES[settings.dtype]
        cls, sizes = logit_classes(self.z0)
        classes = sizes.shape[1]
        self.k = k = aligned(slot_capacity(settings, max(rollouts), classes))
        z = np.full((self.rows, k), -np.inf)
        z[np.arange(self.rows)[:, None], cls] = self.z0  # a class's logit, written by each of its tokens
        self.z = torch.tensor(z, dtype=dt, device=dev)
        self.opt = AdamW(self.z, settings)
        self.row_start = torch.arange(self.rows, device=dev).unsqueeze(1) * k
        # each token's slot as an index into the flattened slots (int32: the fastest index_select over V)
        self.slot_at = (torch.as_tensor(cls, device=dev) + self.row_start).to(torch.int32)
        # tokens that still share each slot: a token of a slot shared by several gets its own at its first draw
        self.members = torch.zeros(self.rows, k, dtype=torch.int64, device=dev)
        self.members[:, :classes] = torch.as_tensor(sizes, device=dev)
        self.used = torch.full((self.rows, 1), classes, dtype=torch.int64, device=dev)
        self.width = aligned(classes)
        self.p = torch.zeros_like(self.z)
        self.e = torch.empty(self.rows, self.v, dtype=dt, device=dev)
        self.cdf = torch.empty(self.rows, self.v, dtype=torch.float64, device=dev)
        self.softmax_and_cdf()
        self.record_start(self.correct_probs())

    def softmax_and_cdf(self) -> None:
        """``engine.softmax_and_cdf`` on the slots: p over the slots, the CDF over the vocabulary."""
        z, p = self.z[:, : self.width], self.p[:, : self.width]
        torch.sub(z, z.amax(1, keepdim=True), out=p)
        p.exp_()
        torch.index_select(self.p.view(-1), 0, self.slot_at.view(-1), out=self.e.view(-1))
        torch.cumsum(self.e, 1, dtype=torch.float64, out=self.cdf)
        p.div_(self.cdf[:, -1:].to(p.dtype))

    def correct_probs(self) -> torch.Tensor:
        return self.p.view(-1)[self.slot_at.gather(1, self.cidx).long()]

    def take_slots(self, idx: list[torch.Tensor]) -> list[torch.Tensor]:
        """The slots of each group's drawn tokens ``idx`` (rows x n, sorted per row), as ``idx`` is shaped. A token
        drawn for the first time from a shared slot gets the next free slot of its row, with its class's
        logit, probability and AdamW moments; a class left without tokens becomes -inf."""
        pos = flat_draws(idx, self.groups, self.v)  # row * V + token, row by row, tokens in order
        slots = self.slot_at.view(-1)[pos].long()
        new = self.members.view(-1)[slots] > 1
        first = new.clone()
        first[1:] &= pos[1:] != pos[:-1]
        if bool(first.any()):
            row = pos.div(self.v, rounding_mode="floor")
            taken = torch.zeros(self.rows, dtype=torch.int64, device=pos.device).index_add_(0, row, first.long())
            # a first draw's slot: its row's next free slot plus the first draws before it in its row
            base = self.row_start.view(-1) + self.used.view(-1) - (taken.cumsum(0) - taken) - 1
            src = slots[first]
            slots = torch.where(new, base[row] + first.cumsum(0), slots)
            dst = slots[first]
            for t in (self.z, self.p, *self.opt.moments()):
                flat = t.view(-1)
                flat[dst] = flat[src]
            members = self.members.view(-1)
            members.index_add_(0, src, torch.full_like(src, -1))
            members[dst] = 1
            emptied = src[members[src] == 0]
            self.z.view(-1)[emptied] = -math.inf
            self.p.view(-1)[emptied] = 0.0
            self.slot_at.view(-1)[pos] = slots.to(torch.int32)
            self.used += taken.unsqueeze(1)
            self.width = max(self.width, aligned(int(self.used.max())))
        local = (slots % self.k).split([i.numel() for i in idx])
        return [s.view(i.shape) for s, i in zip(local, idx)]

    def step(self, t: int) -> None:
        """Step t: draw, update the slots' logits, record the metrics."""
        idx = [draw_rows(self.cdf[g.start : g.stop], g.n, g.generators) for g in self.groups]
        slots = self.take_slots(idx)
        self.opt.step(paper_gradient(self.p, self.rewards, self.groups, idx, out=self.p, slots=slots))
        if self.settings.anchor_frozen:
            self.z[:, 0] = self.z0[0, 0]  # token 0 is slot 0, alone
        self.softmax_and_cdf()
        self.record_step(t, self.correct_probs())
