"""Token-level simulator of the paper's §4.1 (Figure 3), batched over runs, in torch (CPU or CUDA).

One run is a rollout count N and a seed. Each step draws N i.i.d. tokens from p = softmax(z),
builds the surrogate from them, and updates the logits. Runs are rows of one (runs x V) tensor;
each row has its own random stream, so a run's draws do not depend on which runs share its batch.
Memory per run is O(V + N): draws become per-token counts, never a V x N matrix.

Two update rules:
* ``paper``: the surrogate -(1/N) sum_j r~_j p_{t_j} over the N draws, rewards centred by the batch
  mean, AdamW (torch.optim.AdamW).
* ``theorem``: Theorem 1's update, a plain gradient step on -(1/N) sum_{i in A u B} R_i p_i over the
  distinct sampled tokens with uncentred rewards: dz_j = (eta/N) p_j (R_j - S_R).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm

from brorl_lib.core.precision import declare
from brorl_lib.core.validation import check_choice, check_int, check_int_list, check_positive, check_range, check_type
from brorl_lib.paper import setup as paper_setup
from brorl_lib.theory import formulas as theory

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
class SimSettings:
    """Everything a run depends on besides N and the seed. Defaults: the paper's setup, and our
    documented choices where the paper is silent (docs/simulator-choices.md#unstated-choices)."""

    vocab_size: int = paper_setup.SIM_VOCAB_SIZE
    n_correct: int = paper_setup.SIM_N_CORRECT
    steps: int = paper_setup.SIM_STEPS
    lr: float = paper_setup.SIM_LEARNING_RATE
    seeded_init: bool = True  # z=3 on correct tokens, anchor z=5: implied by Figure 3's mass axis
    anchor_correct: bool = False  # our choice; the paper does not say (barely matters)
    anchor_frozen: bool = False  # our choice: "fixed" read as "initialised at 5", not frozen
    correct_tokens: str = "first"  # tokens 1..n_correct, or "random" (drawn per seed)
    beta1: float = 0.9  # AdamW defaults of PyTorch; the paper gives none
    beta2: float = 0.999
    adam_eps: float = 1e-8
    weight_decay: float = 0.01
    update_rule: str = "paper"
    worst_drop: str = "step"  # "step": worst change at this step; "running": worst so far
    track_theory: bool = False  # also record measured dQ_pos and Theorem 1's prediction per step
    dtype: str = "float64"
    device: str = "cpu"

    def validate(self) -> None:
        check_int("vocab_size", self.vocab_size, low=2)
        check_int("n_correct", self.n_correct, low=1, high=self.vocab_size - 1)
        check_int("steps", self.steps, low=1)
        check_positive("lr", self.lr)
        for name in ("seeded_init", "anchor_correct", "anchor_frozen", "track_theory"):
            check_type(name, getattr(self, name), bool, "true or false")
        check_choice("correct_tokens", self.correct_tokens, CORRECT_TOKEN_CHOICES)
        check_range("beta1", self.beta1, low=0.0, high=0.999999)
        check_range("beta2", self.beta2, low=0.0, high=0.999999)
        check_positive("adam_eps", self.adam_eps)
        check_range("weight_decay", self.weight_decay, low=0.0)
        check_choice("update_rule", self.update_rule, UPDATE_RULES)
        check_choice("worst_drop", self.worst_drop, WORST_DROP_MODES)
        check_choice("dtype", self.dtype, DTYPES)
        check_device(self.device)

    def __post_init__(self) -> None:
        self.validate()


def check_device(device: str) -> None:
    check_choice("device", device, ("cpu", "cuda"))
    if device == "cuda" and not torch.cuda.is_available():
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


def draw_tokens(cdf: torch.Tensor, rollouts: list[int], generators: list[torch.Generator]) -> torch.Tensor:
    """Indices into the flattened (rows x V) tensor of each row's N_b i.i.d. draws, row by row.

    Inverse-CDF search with sorted uniforms (normalised cumulative sums of exponentials are the
    order statistics of N uniforms), so each search walks the CDF in order; rows that share an N
    are searched in one batched call. The surrogate does not depend on the order of the draws.
    """
    rows, v = cdf.shape
    draws: list[torch.Tensor | None] = [None] * rows
    for n in sorted(set(rollouts)):
        group = [b for b in range(rows) if rollouts[b] == n]
        uniforms = torch.stack(
            [torch.rand(n + 1, generator=generators[b], dtype=cdf.dtype, device=cdf.device) for b in group]
        )
        sums = torch.cumsum(uniforms.log_().neg_(), 1)  # -log U ~ Exp(1)
        rows_g = torch.tensor(group, device=cdf.device)
        contiguous = group == list(range(group[0], group[-1] + 1))
        cdf_g = cdf[group[0] : group[-1] + 1] if contiguous else cdf[rows_g]  # a view, not a copy, when possible
        u = sums[:, :-1] * (cdf_g[:, -1] / sums[:, -1]).unsqueeze(1)
        idx = torch.searchsorted(cdf_g, u).clamp_(max=v - 1) + rows_g.unsqueeze(1) * v
        for i, b in enumerate(group):
            draws[b] = idx[i]
    return torch.cat(draws)


def token_counts(draws: torch.Tensor, shape: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    """Dense (rows x V) counts of the flattened draws."""
    return torch.bincount(draws, minlength=shape[0] * shape[1]).view(shape).to(dtype)


def draws_gradient(
    p: torch.Tensor,
    rewards: torch.Tensor,
    draws: torch.Tensor,
    row_of_draw: torch.Tensor,
    n: torch.Tensor,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """``surrogate_gradient`` of the paper's rule (centred, over draws) without dense counts.

    Each draw j contributes v_j = r~_j p_j / N; the gradient is p * sum_j v_j (per row) minus the
    v_j added at the drawn tokens: one dense pass plus O(N) work.
    """
    rows = p.shape[0]
    if out is None:
        out = torch.empty_like(p)
    p_d = p.view(-1)[draws]
    r_d = rewards.view(-1)[draws]
    n_d = n.view(-1)[row_of_draw]
    mean_r = torch.zeros(rows, dtype=p.dtype, device=p.device).index_add_(0, row_of_draw, r_d) / n.view(-1)
    v = (r_d - mean_r[row_of_draw]) * p_d / n_d
    w = torch.zeros(rows, dtype=p.dtype, device=p.device).index_add_(0, row_of_draw, v)
    torch.mul(p, w.unsqueeze(1), out=out)
    out.view(-1).index_add_(0, draws, -v)
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


def simulate_batch(
    settings: SimSettings,
    rollouts: list[int],
    seeds: list[int],
    progress: bool = True,
    on_step: Callable[[], None] | None = None,
) -> dict[str, np.ndarray]:
    """Run rows (rollouts[b], seeds[b]) together; metrics as (steps + 1, rows) arrays, step 0 first.

    ``on_step`` is called after every step (a live view's progress bar; it may raise to stop the run)."""
    dev, dt = settings.device, DTYPES[settings.dtype]
    rows, v = len(rollouts), settings.vocab_size
    cidx_np = np.stack([correct_indices(settings, s) for s in seeds])
    z0 = np.stack([initial_logits(settings, c) for c in cidx_np])
    cidx = torch.as_tensor(cidx_np, device=dev)
    correct = torch.zeros(rows, v, dtype=torch.bool, device=dev).scatter_(1, cidx, True)
    rewards = torch.where(correct, paper_setup.SIM_REWARD_CORRECT, paper_setup.SIM_REWARD_INCORRECT).to(dt)
    n = torch.tensor(rollouts, dtype=dt, device=dev).unsqueeze(1)
    generators = [run_generator(s, r, dev) for r, s in zip(rollouts, seeds)]
    row_of_draw = torch.repeat_interleave(torch.arange(rows, device=dev), torch.tensor(rollouts, device=dev))
    z = torch.tensor(z0, dtype=dt, device=dev, requires_grad=settings.update_rule == "paper")
    opt = None
    if settings.update_rule == "paper":
        opt = torch.optim.AdamW(
            [z],
            lr=settings.lr,
            betas=(settings.beta1, settings.beta2),
            eps=settings.adam_eps,
            weight_decay=settings.weight_decay,
            fused=True,
        )
    out = {k: np.empty((settings.steps + 1, rows)) for k in METRICS}
    if settings.track_theory:
        out.update({k: np.full((settings.steps + 1, rows), np.nan) for k in THEORY_METRICS})
    with torch.no_grad():
        p, grad = (torch.empty_like(z, requires_grad=False) for _ in range(2))
        cdf = torch.empty(z.shape, dtype=torch.float64, device=dev)
        softmax_and_cdf(z, p, cdf)
        pc0 = p.gather(1, cidx)
        worst = torch.zeros(rows, dtype=dt, device=dev)
        record = torch.empty(settings.steps + 1, 3, rows, dtype=dt, device=dev)
        record[0] = torch.stack([pc0.sum(1), torch.zeros_like(worst), worst])
        theory_rec = torch.empty(settings.steps + 1, 2, rows, dtype=dt, device=dev) if settings.track_theory else None
        z_prev = z.detach().clone() if settings.track_theory else None
        for t in tqdm(
            range(1, settings.steps + 1), desc=f"simulating {rows} runs", disable=not progress, mininterval=1
        ):
            draws = draw_tokens(cdf, rollouts, generators)
            counts = None
            if settings.update_rule == "theorem" or theory_rec is not None:
                counts = token_counts(draws, (rows, v), dt)
            if settings.update_rule == "paper":
                z.grad = draws_gradient(p, rewards, draws, row_of_draw, n, out=grad)
                opt.step()
            else:
                z -= settings.lr * surrogate_gradient(p, counts, rewards, n, centred=False, distinct=True)
            if settings.anchor_frozen:
                z[:, 0] = z0[0, 0]
            if theory_rec is not None:  # from the logit change: Q_t+1 - Q_t would drown in rounding
                theory_rec[t, 0] = exact_delta_q(p, correct, z.detach() - z_prev)
                theory_rec[t, 1] = theorem1_prediction(p, correct, counts, settings.lr, n)
                z_prev.copy_(z)
            softmax_and_cdf(z, p, cdf)
            delta = p.gather(1, cidx) - pc0
            step_worst = delta.min(1).values.clamp(max=0.0)
            worst = torch.minimum(worst, step_worst) if settings.worst_drop == "running" else step_worst
            record[t] = torch.stack([(delta + pc0).sum(1), (delta > 0).to(dt).mean(1) * 100.0, worst])
            if on_step is not None:
                on_step()
    rec = record.cpu().numpy()
    for i, k in enumerate(METRICS):
        out[k] = rec[:, i, :]
    if theory_rec is not None:
        th = theory_rec.cpu().numpy()
        out["delta_q_measured"][1:] = th[1:, 0]
        out["delta_q_theorem"][1:] = th[1:, 1]
    return out


def simulate(
    settings: SimSettings,
    rollouts: list[int],
    seeds: list[int],
    max_batch_rows: int = 16,
    progress: bool = True,
    on_step: Callable[[], None] | None = None,
) -> pd.DataFrame:
    """Every (N, seed) run, long format: columns N, seed, step, correct_mass, pct_improved, worst_drop.

    Runs are batched ``max_batch_rows`` at a time (memory ~ 10 x rows x V numbers).
    """
    check_runs(rollouts, seeds)
    check_int("max_batch_rows", max_batch_rows, low=1)
    runs = [(int(r), int(s)) for r in rollouts for s in seeds]
    frames = []
    for start in range(0, len(runs), max_batch_rows):
        chunk = runs[start : start + max_batch_rows]
        res = simulate_batch(settings, [r for r, _ in chunk], [s for _, s in chunk], progress, on_step)
        steps = np.arange(settings.steps + 1)
        for b, (r, s) in enumerate(chunk):
            frames.append(pd.DataFrame({"N": r, "seed": s, "step": steps, **{k: v[:, b] for k, v in res.items()}}))
    return declare(pd.concat(frames, ignore_index=True), decimals={"worst_drop": WORST_DROP_DECIMALS})
