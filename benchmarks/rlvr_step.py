"""Where a phase-2 step of notebook 04 spends its time: generation (with dynamic sampling's refill rounds),
the PPO update, and one held-out evaluation, for the ProRL shape (N=16, P kept prompts) and the BroRL shape
(N=512, P/4), on a warm-started model of the paper profile's size. Prints seconds and samples/s per part, each
shape with the update over every kept row and with one row per distinct (prompt, response) (``dedupe``); each
configuration starts with no remembered rewards, so its verifier calls are timed too.
Usage:

    .venv/bin/python benchmarks/rlvr_step.py [--candidate countdown:5@64x2] [--prompts 64] [--steps 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from brorl_lib.models import tiny
from brorl_lib.rlvr import candidates, plateau
from brorl_lib.rlvr.run import SamplingParams, evaluate
from brorl_lib.rlvr.step import StepSettings, rl_step
from brorl_lib.rlvr.tasks import forget_rewards, make_split


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--candidate", default="countdown:5@64x2", help="a screen candidate's spec (the study's choice)")
    ap.add_argument("--prompts", type=int, default=64, help="ProRL's kept prompts per step (BroRL: a quarter)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per shape")
    ap.add_argument("--warm-start-steps", type=int, default=200)
    ap.add_argument("--eval-instances", type=int, default=1000)
    ap.add_argument("--max-rounds", type=int, default=10)
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    args = ap.parse_args()
    cand = candidates.parse(args.candidate, "--candidate")
    if args.prompts < 4 or args.prompts % 4:
        ap.error("--prompts must be a multiple of 4")
    train, test = [], []
    for t, level in zip(cand.tasks, cand.difficulties):
        tr, te = make_split(t, level, 5000, args.eval_instances // len(cand.tasks), 0)
        train, test = train + tr, test + te
    folder = Path("build/bench_warm_start") / f"{cand.key}-ws{args.warm_start_steps}"
    plateau.warm_start_model(cand.model, train, args.warm_start_steps, 1e-3, 0, folder, args.device)
    where = torch.cuda.get_device_name(0) if args.device == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(f"torch {torch.__version__}, {where}; {cand.spec}, warm start {folder}")
    protocol = SamplingParams(16, 0.6, 0.95, 10)
    shapes = (("ProRL", 16, args.prompts), ("BroRL", 512, args.prompts // 4))
    for (name, n, prompts), dedupe in ((shape, d) for shape in shapes for d in (False, True)):
        forget_rewards()  # each configuration pays the verifier for its own responses (no warm reward cache)
        model, tok = tiny.load(folder, args.device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        gen = torch.Generator().manual_seed(0)

        def draw(k: int, gen: torch.Generator = gen) -> list:
            return [train[i] for i in torch.randint(len(train), (k,), generator=gen).tolist()]

        settings = StepSettings(
            n_rollouts=n, max_new_tokens=10, max_rounds=args.max_rounds, refill="shortfall", dedupe=dedupe
        )
        totals = {"samples": 0, "kept": 0, "generation_s": 0.0, "step_s": 0.0, "rounds": 0}
        for _ in range(args.steps):
            m = rl_step(model, tok, opt, draw, prompts, settings, gen)
            totals["samples"] += m["samples"]
            totals["kept"] += m["kept_samples"]
            totals["generation_s"] += m["generation_s"]
            totals["step_s"] += m["step_s"]
            totals["rounds"] += m["rounds"]
        train_s = totals["step_s"] - totals["generation_s"]
        print(
            f"{name} N={n} x {prompts} kept prompts, dedupe={dedupe}: {totals['step_s'] / args.steps:.2f} s/step "
            f"(generation {totals['generation_s'] / totals['step_s']:.0%}, update {train_s / totals['step_s']:.0%}); "
            f"{totals['rounds'] / args.steps:.1f} rounds/step; "
            f"generated {totals['samples'] / totals['generation_s']:.0f} samples/s; "
            f"update {totals['kept'] / train_s:.0f} kept samples/s; whole step "
            f"{totals['samples'] / totals['step_s']:.0f} generated samples/s"
        )
    start = time.perf_counter()
    evaluate(model, tok, test, protocol, 0)
    wall = time.perf_counter() - start
    print(f"evaluation: {len(test)} instances x 16 samples in {wall:.1f} s ({16 * len(test) / wall:.0f} samples/s)")


if __name__ == "__main__":
    main()
