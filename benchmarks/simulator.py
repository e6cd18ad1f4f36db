"""Speed of the token-level simulator against a straightforward numpy implementation of the same update.

Prints steps/s per N for both, measured in the same run, the speed-up, and the wall time of the full
Figure 3 batch (5 values of N x 3 seeds x 1000 steps). Usage:

    .venv/bin/python benchmarks/simulator.py [--steps 100] [--dtype float64] [--device cpu]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from brorl_lib.paper import setup as paper_setup
from brorl_lib.simulator.engine import SimSettings, correct_indices, initial_logits, simulate


def numpy_run(settings: SimSettings, n: int, seed: int, steps: int) -> float:
    """One run of the paper's rule in plain numpy float64 (AdamW as in PyTorch); returns final Q_pos."""
    rng = np.random.default_rng([seed, n])
    correct = correct_indices(settings, seed)
    z = initial_logits(settings, correct)
    rewards = -np.ones(settings.vocab_size)
    rewards[correct] = 1.0
    m = np.zeros_like(z)
    v = np.zeros_like(z)
    b1, b2, lr = settings.beta1, settings.beta2, settings.lr
    for t in range(1, steps + 1):
        p = np.exp(z - z.max())
        p /= p.sum()
        counts = np.bincount(rng.choice(z.size, size=n, p=p), minlength=z.size)
        r = rewards - (counts * rewards).sum() / n
        w = counts * r / n
        grad = p * ((w * p).sum() - w)
        z *= 1.0 - lr * settings.weight_decay
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        z -= lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + settings.adam_eps)
    p = np.exp(z - z.max())
    return float(p[correct].sum() / p.sum())


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100, help="steps timed per N (default 100)")
    ap.add_argument("--dtype", default="float64", choices=["float32", "float64"])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    settings = SimSettings(steps=args.steps, dtype=args.dtype, device=args.device)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, V={settings.vocab_size}, "
        f"dtype={args.dtype}, device={args.device}, {args.steps} steps per measurement"
    )
    print(f"{'N':>7} {'torch steps/s':>14} {'numpy steps/s':>14} {'speed-up':>9}")
    numpy_total = 0.0
    for n in paper_setup.SIM_ROLLOUT_SIZES:
        simulate(settings, [n], [0], progress=False)  # warm-up
        t_torch = timed(lambda n=n: simulate(settings, [n], [0], progress=False))
        t_numpy = timed(lambda n=n: numpy_run(settings, n, 0, args.steps))
        numpy_total += t_numpy
        print(f"{n:>7} {args.steps / t_torch:>14.1f} {args.steps / t_numpy:>14.1f} {t_numpy / t_torch:>8.1f}x")
    full = SimSettings(dtype=args.dtype, device=args.device)
    t_full = timed(lambda: simulate(full, list(paper_setup.SIM_ROLLOUT_SIZES), [0, 1, 2], progress=False))
    numpy_full = numpy_total * 3 * full.steps / args.steps
    print(
        f"Figure 3 at paper scale (5 N x 3 seeds x {full.steps} steps): torch {t_full:.1f} s, "
        f"numpy (extrapolated from the rows above) {numpy_full:.1f} s, speed-up {numpy_full / t_full:.1f}x"
    )


if __name__ == "__main__":
    main()
