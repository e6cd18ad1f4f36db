"""Speed of the token-level simulator against a straightforward numpy implementation, and against a memory floor.

One run prints:

* steps/s per N for the simulator and for the numpy baseline below (same update, one run, ``--steps`` steps);
* the wall time of the full Figure 3 batch (5 values of N x 3 seeds x 1000 steps, V=128,000), the numpy time
  for that batch extrapolated from the per-N rows, and their ratio;
* a floor for that batch: the bytes the simulator's dense passes must move, divided by a memory bandwidth
  measured here.

How the floor is estimated. Each step of the paper's rule makes these passes over the (rows x V) tensors
(R = one read, W = one write of every element): softmax_and_cdf: row max (R z), z - max (R z, W p), exp
in place (R p, W p), cumulative sum (R p, W cdf, always float64), division by the total (R p, W p);
gradient: p times the row weight, into p's buffer (R p, W p); fused AdamW (R z, grad, m, v; W z, m, v).
That is 17 passes of elements of ``--dtype`` and one of float64, plus O(N) sparse work that the floor
leaves out.
Bytes per step = rows x V x (17 x element size + 8); over the batch, times the steps. The bandwidth is
the best of a few runs of an add of two 128 MiB float64 tensors on the same device and threads, in place
(``a += b``) and into a third tensor (``c = a + b``), counted as the passes are: three tensors' bytes per
add (read a, read b, write), whatever the cache traffic behind them. The floor is bytes / the best of
those bandwidths: no implementation that keeps those passes can be faster, whatever it computes per
element. Runs with few draws (N x steps up to half of V: N=4, 8, 16 in the Figure 3 batch) are simulated on compact rows
(``brorl_lib/simulator/compact.py``), which make two of those passes over the vocabulary (spreading
exp(z - max) to the tokens, the CDF) and the rest over the tokens drawn so far, so the simulator can go
below this floor: it is the floor of the dense computation, the one every row made before.

Usage:

    .venv/bin/python benchmarks/simulator.py [--steps 100] [--dtype float64] [--device cpu]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch

from brorl_lib.facts import setup as paper_setup
from brorl_lib.simulator.engine import DTYPES, SimSettings, correct_indices, initial_logits
from brorl_lib.simulator.runner import simulate

SEEDS = [0, 1, 2]  # Figure 3's three seeds
DENSE_PASSES = 17  # passes over rows x V elements of the run's dtype per step (see the docstring)
CDF_PASSES = 1  # passes over rows x V float64 elements per step (the CDF written by the cumulative sum)
BANDWIDTH_MIB = 128  # size of each of the three tensors of the bandwidth measurement
BANDWIDTH_RUNS = 5


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


def timed(fn: Callable[[], object], device: str = "cpu") -> float:
    """Wall seconds of ``fn()`` (waiting for the GPU on CUDA)."""
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def bytes_per_step(rows: int, vocab_size: int, dtype: str) -> int:
    """Bytes the simulator's dense passes move in one step of ``rows`` runs (see the module docstring)."""
    element = torch.empty(0, dtype=DTYPES[dtype]).element_size()
    return rows * vocab_size * (DENSE_PASSES * element + CDF_PASSES * 8)


def memory_bandwidth(device: str) -> dict[str, float]:
    """Bytes per second (three tensors' bytes per add) of the best of BANDWIDTH_RUNS adds of BANDWIDTH_MIB
    float64 tensors: in place (``a += b``) and into a third tensor (``c = a + b``)."""
    numel = BANDWIDTH_MIB * 2**20 // 8
    a, b, c = (torch.ones(numel, dtype=torch.float64, device=device) for _ in range(3))
    adds = {"a += b": lambda: a.add_(b), "c = a + b": lambda: torch.add(a, b, out=c)}
    return {name: 3 * numel * 8 / min(timed(add, device) for _ in range(BANDWIDTH_RUNS)) for name, add in adds.items()}


def per_n_rows(settings: SimSettings, steps: int) -> float:
    """Print steps/s per N for torch and numpy; return the numpy seconds summed over N (one seed)."""
    print(f"{'N':>7} {'torch steps/s':>14} {'numpy steps/s':>14} {'speed-up':>9}")
    numpy_total = 0.0
    for n in paper_setup.SIM_ROLLOUT_SIZES:
        simulate(settings, [n], [0], progress=False)  # warm-up
        t_torch = timed(lambda n=n: simulate(settings, [n], [0], progress=False), settings.device)
        t_numpy = timed(lambda n=n: numpy_run(settings, n, 0, steps))
        numpy_total += t_numpy
        print(f"{n:>7} {steps / t_torch:>14.1f} {steps / t_numpy:>14.1f} {t_numpy / t_torch:>8.1f}x")
    return numpy_total


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
    numpy_total = per_n_rows(settings, args.steps)
    full = SimSettings(dtype=args.dtype, device=args.device)
    rollouts = list(paper_setup.SIM_ROLLOUT_SIZES)
    t_full = timed(lambda: simulate(full, rollouts, SEEDS, progress=False), args.device)
    numpy_full = numpy_total * len(SEEDS) * full.steps / args.steps
    rows = len(rollouts) * len(SEEDS)
    moved = bytes_per_step(rows, full.vocab_size, args.dtype) * full.steps
    bandwidths = memory_bandwidth(args.device)
    bandwidth = max(bandwidths.values())
    floor = moved / bandwidth
    print(
        f"Figure 3 at paper scale ({len(rollouts)} N x {len(SEEDS)} seeds x {full.steps} steps): torch {t_full:.1f} s, "
        f"numpy (extrapolated from the rows above) {numpy_full:.1f} s, speed-up {numpy_full / t_full:.1f}x"
    )
    print(
        f"memory floor: {moved / 1e9:.0f} GB moved ({DENSE_PASSES} + {CDF_PASSES} dense passes x {rows} rows x "
        f"{full.vocab_size} x {full.steps} steps) / {bandwidth / 1e9:.1f} GB/s measured = {floor:.1f} s; "
        f"torch takes {t_full / floor:.2f}x the floor"
    )
    print("bandwidths measured: " + ", ".join(f"{k}: {v / 1e9:.1f} GB/s" for k, v in bandwidths.items()))


if __name__ == "__main__":
    main()
