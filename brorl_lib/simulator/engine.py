"""Token-level simulator of the paper's §4.1 (Figure 3), batched over runs, in torch (CPU or CUDA).

One run is a rollout count N and a seed. Each step draws N i.i.d. tokens from p = softmax(z),
builds the surrogate from them, and updates the logits. Runs are rows of (runs x V) tensors; each
row has its own random stream and every operation is row by row, so a run's numbers, to the last
bit, do not depend on which runs share its tensors (``runner`` shares them between threads on CPU;
``compact`` holds runs with few draws in fewer numbers, with the same results). Memory per run is
O(V + N): draws are kept as indices, never as a V x N matrix.

Two update rules:
* ``paper``: the surrogate -(1/N) sum_j r~_j p_{t_j} over the N draws, rewards centred by the batch
  mean, AdamW (the kernel of torch.optim.AdamW(fused=True)).
* ``theorem``: Theorem 1's update, a plain gradient step on -(1/N) sum_{i in A u B} R_i p_i over the
  distinct sampled tokens with uncentred rewards: dz_j = (eta/N) p_j (R_j - S_R).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from brorl_lib.core.params import NotebookConfig, param
from brorl_lib.core.validation import check_int, check_int_list
from brorl_lib.facts import setup as paper_setup
from brorl_lib.facts import theorem as theory

# worst_drop is p_t - p_0 of a correct token: its last-bit noise is that of p (about 1e-21 here, and it differs
# between CPUs and thread counts), so artifacts show it to 14 decimal places (drops here are 1e-10 or larger)
WORST_DROP_DECIMALS = 14

UPDATE_RULES = ("paper", "theorem")
WORST_DROP_MODES = ("step", "running")
CORRECT_TOKEN_CHOICES = ("first", "random")
DTYPES = {"float64": torch.float64, "float32": torch.float32}
METRICS = ("correct_mass", "pct_improved", "worst_drop")
THEORY_METRICS = ("delta_q_measured", "delta_q_theorem")


@dataclass(frozen=True)
class SimSettings(NotebookConfig):
    """Everything a run depends on besides N and the seed, declared once: notebook 02's parameters of the same
    names are these declarations (``declared_as``). Defaults: the paper's setup, and our documented choices
    where the paper is silent (docs/simulator-choices.md#unstated-choices); upper bounds are our choice."""

    steps: int = param(paper_setup.SIM_STEPS, "update steps T (paper: 1000)", low=1, high=100_000)
    vocab_size: int = param(paper_setup.SIM_VOCAB_SIZE, "vocabulary size d (paper: 128,000)", low=2, high=1_000_000)
    n_correct: int = param(
        paper_setup.SIM_N_CORRECT, "correct tokens, below vocab_size (paper: 10,000)", low=1, high=999_999
    )
    lr: float = param(
        paper_setup.SIM_LEARNING_RATE, "AdamW learning rate η (paper: 1e-3)", low=0.0, low_open=True, high=1000.0
    )
    weight_decay: float = param(0.01, "AdamW decoupled weight decay (unstated; PyTorch default)", low=0.0, high=100.0)
    beta1: float = param(0.9, "AdamW beta1 (unstated; PyTorch default)", low=0.0, high=0.999999)
    beta2: float = param(0.999, "AdamW beta2 (unstated; PyTorch default)", low=0.0, high=0.999999)
    adam_eps: float = param(1e-8, "AdamW epsilon (unstated; PyTorch default)", low=0.0, low_open=True, high=1.0)
    seeded_init: bool = param(True, "start at logit 3 on correct tokens and 5 on the anchor (paper option)")
    anchor_correct: bool = param(False, "is the anchor token (index 0) correct? (unstated; our choice)")
    anchor_frozen: bool = param(False, "keep the anchor's logit at 5 throughout? (unstated; our choice)")
    correct_tokens: str = param(
        "first",
        "which tokens are correct: the first n_correct after the anchor, or random",
        choices=CORRECT_TOKEN_CHOICES,
    )
    worst_drop: str = param(
        "step", "worst drop of a correct token: at each step, or running (worst so far)", choices=WORST_DROP_MODES
    )
    dtype: str = param(
        "float64", "precision of the runs: float32 is faster, same results to about 1e-5", choices=tuple(DTYPES)
    )
    device: str = param("cpu", "where the runs happen (cuda needs a visible GPU)", choices=("cpu", "cuda"))
    update_rule: str = param("paper", "the paper's surrogate with AdamW, or Theorem 1's step", choices=UPDATE_RULES)
    track_theory: bool = param(False, "also record the measured change of Q_pos and Theorem 1's prediction")

    def check_together(self) -> None:
        check_int("n_correct", self.n_correct, low=1, high=self.vocab_size - 1)
        if self.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("device='cuda' is not allowed here: torch sees no CUDA GPU; use 'cpu'")


def check_runs(rollouts: list[int], seeds: list[int]) -> None:
    check_int_list("rollouts", rollouts, low=1)
    check_int_list("seeds", seeds, low=0)


def run_generator(seed: int, n: int, device: str) -> torch.Generator:
    """The random stream of run (N, seed), independent of every other run."""
    state = int(np.random.SeedSequence([seed, n]).generate_state(1, np.uint64)[0] >> 1)
    return torch.Generator(device=device).manual_seed(state)


def correct_indices(settings: SimSettings, seed: int) -> np.ndarray:
    """Sorted indices of the correct tokens. Index 0 is the anchor; it is correct only if asked."""
    v, k = settings.vocab_size, settings.n_correct
    if settings.correct_tokens == "first":
        idx = paper_setup.first_correct_indices(k, settings.anchor_correct)
    else:
        rng = np.random.default_rng([seed, 0xC0])
        rest = rng.choice(np.arange(1, v), size=k - settings.anchor_correct, replace=False)
        idx = np.concatenate([[0], rest]) if settings.anchor_correct else rest
    return np.sort(idx)


def initial_logits(settings: SimSettings, correct: np.ndarray) -> np.ndarray:
    """0 everywhere; with the paper's seeding, 3 on correct tokens and 5 on the anchor (index 0)."""
    if settings.seeded_init:
        return paper_setup.seeded_logits(settings.vocab_size, correct)
    return np.zeros(settings.vocab_size)


def surrogate_gradient(
    p: torch.Tensor, counts: torch.Tensor, rewards: torch.Tensor, n: torch.Tensor, centred: bool, distinct: bool
) -> torch.Tensor:
    """Gradient in z of L = -(1/N) sum_i c_i r~_i p_i, row-wise.

    ``counts`` c_i: how often token i was drawn (``distinct``: 1 if drawn at all); ``rewards`` R_i;
    r~_i = R_i - b with b the batch mean reward if ``centred``. With w_i = c_i r~_i / N the
    softmax Jacobian gives dL/dz_k = p_k (sum_i w_i p_i - w_k).
    """
    c = (counts > 0).to(p.dtype) if distinct else counts
    r = rewards - (counts * rewards).sum(1, keepdim=True) / n if centred else rewards
    wp = c * r * p / n
    return p * wp.sum(1, keepdim=True) - wp


@dataclass(frozen=True)
class RowGroup:
    """Rows ``start:stop`` of a batch (rows sorted by N) that draw ``n`` tokens per step, with their streams."""

    n: int
    start: int
    stop: int
    generators: tuple[torch.Generator, ...]


def row_groups(rollouts: list[int], generators: list[torch.Generator]) -> list[RowGroup]:
    """One group per distinct N, in increasing N, for rows already sorted by N."""
    groups, start = [], 0
    for n in sorted(set(rollouts)):
        stop = start + rollouts.count(n)
        groups.append(RowGroup(n, start, stop, tuple(generators[start:stop])))
        start = stop
    return groups


def merge_is_cheaper(n: int, v: int, device: torch.device) -> bool:
    """Whether to search N sorted draws in a CDF of V entries by merging (about N + V steps, on CPU) rather
    than by binary search (about N log2 V). Measured on CPU at V=128,000, one thread: 0.70 ms a row at N=512
    against 0.04 ms by binary search, 1.45 ms at N=51,200 against 2.05 ms: a merge step costs about two
    binary-search steps, so the crossover is near 2V / log2 V."""
    return device.type == "cpu" and n * math.log2(v) > 2 * (n + v)


def merge_search(cdf: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``torch.searchsorted(cdf, u)`` (left side) for sorted rows of ``u``, on CPU, by a merge (float64 rows).

    Each number becomes a 64-bit key: its bits shifted left by one (non-negative floats' bits order as the
    floats; the sign bit of -0.0 falls off), the lowest bit 0 for u and 1 for the CDF, so that an entry equal
    to u_j comes after it (left side). numpy's stable sort of the keys (timsort) finds the two sorted runs
    and merges them in O(N + V); u_j's place in the merge minus j is the number of CDF entries below it.
    """
    q, c = u.numpy(), cdf.numpy()
    n = q.shape[1]
    out = np.empty(q.shape, dtype=np.int64)
    keys = np.empty(n + c.shape[1], dtype=np.uint64)
    for i in range(q.shape[0]):
        np.left_shift(q[i].view(np.uint64), 1, out=keys[:n])
        np.left_shift(c[i].view(np.uint64), 1, out=keys[n:])
        keys[n:] |= 1
        keys.sort(kind="stable")
        np.subtract(np.flatnonzero((keys & 1) == 0), np.arange(n), out=out[i])
    return torch.from_numpy(out)


def draw_rows(cdf: torch.Tensor, n: int, generators: Sequence[torch.Generator]) -> torch.Tensor:
    """Token indices (rows x n) of each row's n i.i.d. draws from its unnormalised CDF, in increasing order.

    Inverse-CDF search with sorted uniforms: normalised cumulative sums of n + 1 exponentials are the
    order statistics of n uniforms, drawn from each row's own stream. The surrogate does not depend on
    the order of the draws.
    """
    rows, v = cdf.shape
    uniforms = torch.empty(rows, n + 1, dtype=cdf.dtype, device=cdf.device)
    for row, gen in zip(uniforms, generators):
        row.uniform_(generator=gen)  # the numbers torch.rand(n + 1, generator=gen) would give
    sums = torch.cumsum(uniforms.log_().neg_(), 1)  # -log U ~ Exp(1)
    u = sums[:, :-1] * (cdf[:, -1] / sums[:, -1]).unsqueeze(1)
    idx = merge_search(cdf, u) if merge_is_cheaper(n, v, cdf.device) else torch.searchsorted(cdf, u)
    return idx.clamp_(max=v - 1)


def flat_draws(idx: list[torch.Tensor], groups: list[RowGroup], v: int) -> torch.Tensor:
    """Indices into the flattened (rows x V) tensor of every draw, row by row."""
    return torch.cat(
        [(i + torch.arange(g.start, g.stop, device=i.device).unsqueeze(1) * v).view(-1) for i, g in zip(idx, groups)]
    )


def draw_tokens(cdf: torch.Tensor, rollouts: list[int], generators: list[torch.Generator]) -> torch.Tensor:
    """Indices into the flattened (rows x V) tensor of each row's N_b i.i.d. draws, row by row (any order of N)."""
    rows, v = cdf.shape
    draws: list[torch.Tensor | None] = [None] * rows
    for n in sorted(set(rollouts)):
        group = [b for b in range(rows) if rollouts[b] == n]
        idx = draw_rows(cdf[group], n, [generators[b] for b in group])
        for i, b in enumerate(group):
            draws[b] = idx[i] + b * v
    return torch.cat(draws)


def token_counts(draws: torch.Tensor, shape: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    """Dense (rows x V) counts of the flattened draws."""
    return torch.bincount(draws, minlength=shape[0] * shape[1]).view(shape).to(dtype)


def draw_weights(
    p: torch.Tensor, rewards: torch.Tensor, idx: torch.Tensor, n: int, slots: torch.Tensor
) -> torch.Tensor:
    """v_j = r~_j p_{t_j} / N for each draw j of each row (rows x n): rewards centred by the row's mean. Token
    t_j's reward is at ``idx``, its probability at ``slots`` (the same, but for a compact row's p)."""
    r_d = torch.gather(rewards, 1, idx)
    mean_r = r_d.sum(1, keepdim=True) / n  # a sum of +-1: exact in any order
    return (r_d - mean_r) * torch.gather(p, 1, slots) / n


def sums_in_order(v: torch.Tensor) -> torch.Tensor:
    """Row sums of ``v``, added left to right in v's dtype (the order, hence the bits, the artifacts were made
    with). In float64 the last column of a cumulative sum, whose CPU accumulator is float64 too; in float32
    (accumulated in float64 by cumsum) by index_add_."""
    if v.dtype == torch.float64:
        return torch.cumsum(v, 1)[:, -1]
    rows = torch.arange(v.shape[0], device=v.device).repeat_interleave(v.shape[1])
    return torch.zeros(v.shape[0], dtype=v.dtype, device=v.device).index_add_(0, rows, v.view(-1))


def paper_gradient(
    p: torch.Tensor,
    rewards: torch.Tensor,
    groups: list[RowGroup],
    idx: list[torch.Tensor],
    out: torch.Tensor,
    slots: list[torch.Tensor] | None = None,
) -> torch.Tensor:
    """``surrogate_gradient`` of the paper's rule (centred, over draws) without dense counts, into ``out``
    (which may be ``p`` itself). ``slots``: where each drawn token sits in ``p`` and ``out`` when they are a
    compact row's slots rather than the vocabulary (default: ``idx``).

    With v_j = r~_j p_{t_j} / N, the gradient is p * sum_j v_j (per row) minus the v_j added at the drawn
    tokens: one dense pass plus O(N) work. Sums over draws run in draw order, row by row, so a row's numbers
    are the same whichever rows share its batch.
    """
    slots = idx if slots is None else slots
    weights = [
        draw_weights(p[g.start : g.stop], rewards[g.start : g.stop], i, g.n, s) for g, i, s in zip(groups, idx, slots)
    ]
    w = torch.cat([sums_in_order(wt) for wt in weights])
    torch.mul(p, w.unsqueeze(1), out=out)
    for g, s, wt in zip(groups, slots, weights):
        out[g.start : g.stop].scatter_add_(1, s, wt.neg_())
    return out


def softmax_and_cdf(z: torch.Tensor, p: torch.Tensor, cdf: torch.Tensor) -> None:
    """p = softmax(z) row-wise and cdf = its unnormalised cumulative sum, into preallocated buffers.

    The CDF is float64 whatever p's dtype: in float32 the steps near 1 would be coarser than the
    smallest token probabilities (about 3e-6 here), biasing which tokens get drawn.
    """
    torch.sub(z, z.amax(1, keepdim=True), out=p)
    p.exp_()
    torch.cumsum(p, 1, dtype=torch.float64, out=cdf)
    p.div_(cdf[:, -1:].to(p.dtype))


def exact_delta_q(p: torch.Tensor, correct: torch.Tensor, dz: torch.Tensor) -> torch.Tensor:
    """Exact change of the correct mass after z -> z + dz, row-wise, without cancellation
    (as theory.delta_q_exact): sum_{i in P} p_i (expm1(dz_i) - E) / (1 + E), E = sum_j p_j expm1(dz_j)."""
    em1 = torch.expm1(dz)
    e = (p * em1).sum(1, keepdim=True)
    return (p * (em1 - e) * correct).sum(1) / (1.0 + e.squeeze(1))


def theorem1_prediction(
    p: torch.Tensor, correct: torch.Tensor, counts: torch.Tensor, lr: float, n: torch.Tensor
) -> torch.Tensor:
    """Theorem 1's dQ_pos for each row's batch (R_c = +1, R_w = -1), via theory.theorem1_terms on tensors."""
    sampled = counts > 0
    p2 = p * p
    a, b = correct & sampled, ~correct & sampled
    q_pos, p_pos, p_neg = (p * correct).sum(1), (p * a).sum(1), (p * b).sum(1)
    mb = theory.MassBalance(
        q_pos=q_pos,
        q_neg=(p * ~correct).sum(1),
        p_pos=p_pos,
        p_neg=p_neg,
        a2=(p2 * a).sum(1),
        b2=(p2 * b).sum(1),
        u_pos2=(p2 * (correct & ~sampled)).sum(1),
        u_neg2=(p2 * (~correct & ~sampled)).sum(1),
        s_r=p_pos - p_neg,
    )
    r_c, r_w = paper_setup.SIM_REWARD_CORRECT, paper_setup.SIM_REWARD_INCORRECT
    return sum(theory.theorem1_terms(mb, r_c, r_w, lr, n.squeeze(1)).values())


def step_metrics(
    pc: torch.Tensor, pc0: torch.Tensor, worst: torch.Tensor, running: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """(correct_mass, pct_improved, worst_drop) of each row as a (3, rows) tensor, and the worst drop so far,
    from the correct tokens' probabilities now (``pc``) and at step 0 (``pc0``), both rows x correct tokens."""
    delta = pc - pc0
    step_worst = delta.amin(1).clamp_(max=0.0)
    worst = torch.minimum(worst, step_worst) if running else step_worst
    improved = (delta > 0).sum(1).to(pc.dtype) / delta.shape[1] * 100.0  # the mean of 0/1 values, exactly
    return torch.stack([(delta + pc0).sum(1), improved, worst]), worst


class AdamW:
    """The kernel ``torch.optim.AdamW(fused=True)`` runs, on the logits ``z`` with the settings' hyperparameters,
    called directly: the same numbers, without the optimizer's Python on every step (a tenth of a
    millisecond, which threads sharing one interpreter would wait for in turn)."""

    def __init__(self, z: torch.Tensor, settings: SimSettings) -> None:
        self.z, self.s = z, settings
        self.exp_avg, self.exp_avg_sq = torch.zeros_like(z), torch.zeros_like(z)
        self.steps = torch.zeros((), dtype=torch.float32, device=z.device)  # as the optimizer keeps it

    def moments(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.exp_avg, self.exp_avg_sq

    def step(self, grad: torch.Tensor) -> None:
        s = self.s
        self.steps += 1
        # params, grads, first and second moments, max second moments (amsgrad only), step counts
        torch._fused_adamw_([self.z], [grad], [self.exp_avg], [self.exp_avg_sq], [], [self.steps], amsgrad=False,
                            lr=s.lr, beta1=s.beta1, beta2=s.beta2, weight_decay=s.weight_decay, eps=s.adam_eps,
                            maximize=False)  # fmt: skip


class Rows:
    """What every batch of runs holds besides its logits: the rows' correct tokens, rewards, random streams
    and the record of their metrics.

    Rows are kept sorted by N (each N's rows one block, so that a group's rows are views); ``results``
    gives them back in the order they were passed.
    """

    def __init__(self, settings: SimSettings, rollouts: list[int], seeds: list[int]) -> None:
        self.order = sorted(range(len(rollouts)), key=rollouts.__getitem__)
        rollouts, seeds = [rollouts[b] for b in self.order], [seeds[b] for b in self.order]
        dev, dt = settings.device, DTYPES[settings.dtype]
        self.settings, self.rows, self.v = settings, len(rollouts), settings.vocab_size
        cidx_np = np.stack([correct_indices(settings, s) for s in seeds])
        self.z0 = np.stack([initial_logits(settings, c) for c in cidx_np])
        self.cidx = torch.as_tensor(cidx_np, device=dev)
        self.correct = torch.zeros(self.rows, self.v, dtype=torch.bool, device=dev).scatter_(1, self.cidx, True)
        reward_c, reward_w = paper_setup.SIM_REWARD_CORRECT, paper_setup.SIM_REWARD_INCORRECT
        self.rewards = torch.where(self.correct, reward_c, reward_w).to(dt)
        self.n = torch.tensor(rollouts, dtype=dt, device=dev).unsqueeze(1)
        self.groups = row_groups(rollouts, [run_generator(s, r, dev) for r, s in zip(rollouts, seeds)])
        self.worst = torch.zeros(self.rows, dtype=dt, device=dev)
        self.record = torch.empty(settings.steps + 1, 3, self.rows, dtype=dt, device=dev)
        self.theory: torch.Tensor | None = None

    def record_start(self, pc0: torch.Tensor) -> None:
        """Step 0's record, from the correct tokens' initial probabilities (rows x correct tokens)."""
        self.pc0 = pc0
        self.record[0] = torch.stack([pc0.sum(1), torch.zeros_like(self.worst), self.worst])

    def record_step(self, t: int, pc: torch.Tensor) -> None:
        """Step t's record, from the correct tokens' probabilities after the update."""
        self.record[t], self.worst = step_metrics(pc, self.pc0, self.worst, self.settings.worst_drop == "running")

    def results(self) -> dict[str, np.ndarray]:
        """Metrics as (steps + 1, rows) arrays, rows in the order given to the constructor."""
        back = np.argsort(self.order)
        rec = self.record.cpu().numpy()[:, :, back]
        out = {k: rec[:, i, :] for i, k in enumerate(METRICS)}
        if self.theory is not None:
            th = self.theory.cpu().numpy()[:, :, back]
            for i, k in enumerate(THEORY_METRICS):
                out[k] = th[:, i, :]
                out[k][0] = np.nan
        return out


class RowBatch(Rows):
    """Runs simulated together in one set of (rows x V) tensors: their logits, one step, any update rule."""

    def __init__(self, settings: SimSettings, rollouts: list[int], seeds: list[int]) -> None:
        super().__init__(settings, rollouts, seeds)
        dev, dt = settings.device, DTYPES[settings.dtype]
        self.z = torch.tensor(self.z0, dtype=dt, device=dev)
        self.opt = AdamW(self.z, settings) if settings.update_rule == "paper" else None
        self.p = torch.empty_like(self.z)
        # the gradient overwrites p, which the next softmax rewrites anyway (one buffer and one write
        # fewer), unless Theorem 1's terms need p after the update
        self.grad = torch.empty_like(self.p) if settings.track_theory else self.p
        self.cdf = torch.empty(self.z.shape, dtype=torch.float64, device=dev)
        softmax_and_cdf(self.z, self.p, self.cdf)
        self.record_start(self.p.gather(1, self.cidx))
        if settings.track_theory:
            self.theory = torch.empty(settings.steps + 1, 2, self.rows, dtype=dt, device=dev)
            self.z_prev = self.z.clone()

    def step(self, t: int) -> None:
        """Step t: draw, update the logits, record the metrics (and Theorem 1's terms if tracked)."""
        s, z, p = self.settings, self.z, self.p
        idx = [draw_rows(self.cdf[g.start : g.stop], g.n, g.generators) for g in self.groups]
        counts = None
        if s.update_rule == "theorem" or self.theory is not None:
            counts = token_counts(flat_draws(idx, self.groups, self.v), (self.rows, self.v), p.dtype)
        if s.update_rule == "paper":
            self.opt.step(paper_gradient(p, self.rewards, self.groups, idx, out=self.grad))
        else:
            z -= s.lr * surrogate_gradient(p, counts, self.rewards, self.n, centred=False, distinct=True)
        if s.anchor_frozen:
            z[:, 0] = self.z0[0, 0]
        if self.theory is not None:  # from the logit change: Q_t+1 - Q_t would drown in rounding
            self.theory[t, 0] = exact_delta_q(p, self.correct, z - self.z_prev)
            self.theory[t, 1] = theorem1_prediction(p, self.correct, counts, s.lr, self.n)
            self.z_prev.copy_(z)
        softmax_and_cdf(z, p, self.cdf)
        self.record_step(t, p.gather(1, self.cidx))
