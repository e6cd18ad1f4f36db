"""Per-prompt gradient statistics at a checkpoint, and a model of one update's alignment built from them.

For each measured prompt i, at the training temperature:

* ``q`` and ``g_i = d q_i / d parameters``, exactly (``exact_q``, teacher-forced);
* ``w_i``, the variance (trace) of the one-sample policy-gradient estimate ``(r - q_i) d log pi(y) / d parameters``:
  two independent halves of ``samples`` rollouts give two estimates a, b of g_i, and ``w_i = samples |a - b|^2 / 4``
  is unbiased (each half's variance is 2 w_i / samples);
* the kept fraction of N rollouts under dynamic sampling, ``1 - q^N - (1 - q)^N``, exactly.

Over the prompts: the mean gradient G (what the update should follow), the between-prompt spread
``B = E|g_i - G|^2`` (unbiased), the mean within-prompt noise ``W = E w_i`` and the mean pairwise cosine of the g_i.

**The model** (ours; the paper's Theorem 1 is per prompt). An update of S generated samples has P = S/N prompts of
N rollouts each; its gradient is the mean over prompts of the group estimates, each with expectation (1 - 1/N) g_i
under the group-mean baseline and variance w_i / N (a group whose rewards are all equal contributes 0, which is
dynamic sampling's filter: the estimate is 0 there with or without it; the batch's normalisation is a scalar and
does not turn the direction). Against a reference gradient averaged over R other prompts (the update-quality grid's
measured prompts), the expected cosine is about

    cos(N, S) = G2 / sqrt((G2 + B / R) (G2 + (N B + W / a) / S)),   a = (1 - 1/N)^2,   G2 = |G|^2

(the update's expectation (1 - 1/N) G against its noise (N/S) a B + W/S, divided through by a): more prompts
(small N) average the between-prompt spread B away; more rollouts (large N) only shrink the baseline's 1/N loss of
signal, which weighs on the within-prompt noise W. The best N minimises N B + W / a whatever S is, about
sqrt(2 W / B) when that is well above 1. Its spread is a bootstrap over the measured prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from brorl_lib.core.validation import check_int
from brorl_lib.rlvr import exact_q
from brorl_lib.rlvr.sampling import generate
from brorl_lib.rlvr.tasks import LaptopInstance, reward

N_GRID = tuple(2**k for k in range(1, 14))  # N of the model's curves: 2 to 8192 (our choice)


def _flat(grads, params) -> torch.Tensor:
    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, params)])


def _half_estimate(model, tokenizer, inst, q: float, n: int, temperature, max_new_tokens, generator) -> torch.Tensor:
    """(1/n) sum_j (r_j - q) d log pi(y_j) / d parameters over n fresh rollouts of one prompt."""
    from brorl_lib.rlvr.algorithm import response_log_probs

    params = list(model.parameters())
    r = generate(model, tokenizer, [inst.prompt], n, max_new_tokens, temperature, generator)
    rewards = torch.tensor([reward(inst, t) for t in r.texts], dtype=torch.float32, device=r.group.device)
    lp = response_log_probs(model, r, temperature).sum(1)
    return _flat(torch.autograd.grad(((rewards - q) * lp).mean(), params, allow_unused=True), params)


def per_prompt(
    model,
    tokenizer,
    measured: list[LaptopInstance],
    temperature: float,
    max_new_tokens: int,
    samples: int = 64,
    seed: int = 0,
    progress: bool = True,
) -> tuple[pd.DataFrame, torch.Tensor]:
    """Per prompt: q, |g_i|^2 and w_i (table), and the g_i as rows of a matrix (prompts x parameters)."""
    from tqdm.auto import tqdm

    check_int("samples", samples, low=2)
    if samples % 2:
        raise ValueError(f"samples={samples} is not allowed: give an even number (two halves)")
    model.eval()
    params = list(model.parameters())
    generator = torch.Generator().manual_seed(seed)
    rows, grads = [], []
    for inst in tqdm(measured, desc="per-prompt gradients", disable=not progress, unit="prompt"):
        q = exact_q.correct_mass(model, tokenizer, [inst], temperature, max_new_tokens, grad=True)[0]
        g = _flat(torch.autograd.grad(q, params, allow_unused=True), params)
        qv = float(q.detach())
        halves = [
            _half_estimate(model, tokenizer, inst, qv, samples // 2, temperature, max_new_tokens, generator)
            for _ in range(2)
        ]
        w = samples * float((halves[0] - halves[1]).pow(2).sum()) / 4
        rows.append({"q": qv, "grad_sq": float(g.pow(2).sum()), "within": w})
        grads.append(g.detach())
    return pd.DataFrame(rows), torch.stack(grads)


@dataclass(frozen=True)
class Moments:
    """What the model needs: |G|^2, the between-prompt spread B and the mean within-prompt noise W."""

    g2: float
    between: float
    within: float
    prompts: int


def moments(grads: torch.Tensor, within: np.ndarray) -> Moments:
    """Unbiased |G|^2 and B from the per-prompt gradients (rows), W the mean of the w_i."""
    n = grads.shape[0]
    mean = grads.mean(0)
    between = float((grads - mean).pow(2).sum(1).sum()) / (n - 1)
    return Moments(float(mean.pow(2).sum()) - between / n, between, float(np.mean(within)), n)


def mean_pairwise_cosine(grads: torch.Tensor) -> float:
    """Mean cosine of g_i and g_j over pairs i != j (zero-gradient prompts left out)."""
    norms = grads.norm(dim=1)
    unit = grads[norms > 0] / norms[norms > 0, None]
    k = unit.shape[0]
    total = float((unit.sum(0)).pow(2).sum()) - k  # sum over i != j of cos(i, j)
    return total / (k * (k - 1))


def predicted_cosine(m: Moments, n: np.ndarray, samples: int, reference_prompts: int) -> np.ndarray:
    """The model's expected cosine of an update of ``samples`` samples at N rollouts with a reference gradient
    averaged over ``reference_prompts`` other prompts (0 where N > samples: not one whole prompt)."""
    n = np.asarray(n, dtype=float)
    a = (1 - 1 / n) ** 2
    g2 = max(m.g2, 0.0)
    update_sq = g2 + (n * m.between + m.within / a) / samples  # |update|^2 / a, in expectation
    denom = np.sqrt((g2 + m.between / reference_prompts) * update_sq)
    out = np.where(denom > 0, g2 / np.where(denom > 0, denom, 1), 0.0)
    return np.where(n <= samples, out, 0.0)


def best_n(
    m: Moments, samples: int, reference_prompts: int, grid: tuple[int, ...] = N_GRID
) -> tuple[int | None, np.ndarray]:
    """The N of ``grid`` (up to ``samples``) with the highest predicted cosine, and the curve; None when the
    estimate of |G|^2 is not above 0 (the mean gradient is not resolved from these prompts: no prediction)."""
    ns = np.array([k for k in grid if k <= samples])
    curve = predicted_cosine(m, ns, samples, reference_prompts)
    return (int(ns[np.argmax(curve)]) if m.g2 > 0 else None), curve


def bootstrap_best_n(
    grads: torch.Tensor,
    within: np.ndarray,
    samples: int,
    reference_prompts: int,
    draws: int = 200,
    seed: int = 0,
) -> np.ndarray:
    """The best N under ``draws`` resamplings of the measured prompts, 0 where a resampling leaves |G|^2 not above
    0 (fixed seed: the same numbers each time)."""
    rng = np.random.default_rng(seed)
    n = grads.shape[0]
    out = []
    for _ in range(draws):
        pick = rng.integers(0, n, n)
        out.append(best_n(moments(grads[torch.as_tensor(pick)], within[pick]), samples, reference_prompts)[0] or 0)
    return np.array(out)


def kept_fraction(q: np.ndarray, n: int) -> float:
    """Dynamic sampling's expected kept fraction of groups of N rollouts: mean of 1 - q^N - (1 - q)^N."""
    q = np.clip(np.asarray(q, dtype=float), 0.0, 1.0)
    return float(np.mean(1 - q**n - (1 - q) ** n))
