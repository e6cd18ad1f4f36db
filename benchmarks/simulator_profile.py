"""Wall time of each computation of notebook 02 under a profile, and its results, without the notebook around it.

Notebook 02 makes four computations (``brorl_lib.simulator.report``): Figure 3's runs, the axis variants, the N
sweep and Theorem 1's per-step check. This script builds the notebook's configuration from a profile
(a profile of ``params/profiles.yaml``, the gpu profile by default: the paper profile with ``device: cuda``), times each
computation (on a GPU, synchronised before the clock stops) and writes what the notebook's checked cells print
from: Figure 3's and the sweep's final summaries, the variants' fit to the published axes and Theorem 1's
agreement, as CSV files in ``--out``. Comparing those files between a GPU and the committed CPU run
(``figures/*/fig3_final.csv`` and the others) shows whether the device changes the notebook's answers; the
random draws differ between devices (torch's CUDA generator is not its CPU one), so they agree within seeds,
not bit for bit.

Usage:

    .venv/bin/python benchmarks/simulator_profile.py [--profile gpu] [--out DIR] [--only figure3 sweep ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from brorl_lib.core.registry import get_notebook
from brorl_lib.core.variants import profile_values
from brorl_lib.simulator import report as sr

STAGES = ("figure3", "variants", "sweep", "theory")


def computations(cfg: sr.SimulatorConfig) -> dict:
    """Stage -> a function returning the table its checked cell prints from."""
    return {
        "figure3": lambda: sr.final_summary(sr.figure3_runs(cfg)),
        "variants": lambda: sr.axis_variants(cfg),
        "sweep": lambda: sr.final_summary(sr.sweep_runs(cfg)),
        "theory": lambda: sr.theory_agreement(sr.theory_runs(cfg)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="gpu", help="a profile in params/ (default gpu)")
    ap.add_argument("--out", type=Path, default=Path("build/benchmarks/simulator_profile"))
    ap.add_argument("--only", nargs="+", choices=STAGES, default=list(STAGES), help="stages to run (default all)")
    args = ap.parse_args()

    values = profile_values(get_notebook("02_simulator"), args.profile)
    cfg = sr.SimulatorConfig(**values)  # checks every parameter (and a visible GPU for device='cuda')
    cuda = cfg.device == "cuda"
    print(f"profile {args.profile}: device {cfg.device}" + (f" ({torch.cuda.get_device_name()})" if cuda else ""))
    args.out.mkdir(parents=True, exist_ok=True)
    total = 0.0
    for stage, compute in computations(cfg).items():
        if stage not in args.only:
            continue
        start = time.perf_counter()
        table = compute()
        if cuda:
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        total += seconds
        table.to_csv(args.out / f"{stage}.csv", index=False)
        print(f"{stage:>9}: {seconds:8.1f} s", flush=True)
    print(f"{'total':>9}: {total:8.1f} s")
    if cuda:
        print(f"peak GPU memory: {torch.cuda.max_memory_allocated() / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
