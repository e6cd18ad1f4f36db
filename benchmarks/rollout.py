"""Generation throughput of the tiny model at N=16 and N=512 rollouts per prompt, equal total samples.

Both shapes run on the same model in the same process; the KV cache of each prompt is shared by its
N rollouts. Prints samples/s, tokens/s and the N=512 / N=16 ratio beside the paper's (Table 2, on H100s
with a 1.5B model, read from data/paper). Usage:

    .venv/bin/python benchmarks/rollout.py [--total-samples 8192] [--max-new-tokens 16] [--device cpu]
"""

from __future__ import annotations

import argparse
import time

import torch

from brorl_lib.facts import reported as paper
from brorl_lib.models.char_tokenizer import build_tokenizer
from brorl_lib.models.tiny import TinyModelShape, build_model
from brorl_lib.rlvr import tasks
from brorl_lib.rlvr.sampling import generate

PAPER_RATIO = paper.table2_throughput_ratio()  # Table 2: BroRL / ProRL samples/s


def measure(model, tokenizer, prompts: list[str], n: int, max_new_tokens: int, repeats: int) -> dict[str, float]:
    best = None
    for r in range(repeats):
        start = time.perf_counter()
        out = generate(model, tokenizer, prompts, n, max_new_tokens, 1.0, torch.Generator().manual_seed(r))
        wall = time.perf_counter() - start
        row = {"samples_per_s": len(out.texts) / wall, "tokens_per_s": out.n_tokens / wall, "wall_s": wall}
        best = row if best is None or wall < best["wall_s"] else best
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--total-samples", type=int, default=8192, help="samples per shape (a multiple of 512)")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3, help="timed repeats per shape; the fastest is kept")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = ap.parse_args()
    if args.total_samples % 512:
        ap.error("--total-samples must be a multiple of 512")
    tokenizer = build_tokenizer()
    model = build_model(TinyModelShape(), tokenizer, seed=0).to(args.device).eval()
    train, _ = tasks.make_split("spell_backward", 2, args.total_samples // 16, 1, seed=0)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, device={args.device}, "
        f"{args.total_samples} samples per shape, up to {args.max_new_tokens} new tokens"
    )
    results = {}
    for n in (16, 512):
        count = args.total_samples // n  # cycle through the prompts so both shapes make exactly the same total
        prompts = [train[i % len(train)].prompt for i in range(count)]
        measure(model, tokenizer, prompts[:2], n, args.max_new_tokens, 1)  # warm-up
        results[n] = measure(model, tokenizer, prompts, n, args.max_new_tokens, args.repeats)
        r = results[n]
        print(
            f"N={n:>4} x {len(prompts):>4} prompts: {r['samples_per_s']:9.1f} samples/s  "
            f"{r['tokens_per_s']:10.1f} tokens/s"
        )
    ratio = results[512]["samples_per_s"] / results[16]["samples_per_s"]
    print(f"ratio N=512 / N=16: {ratio:.2f}x (paper, 1.5B model on H100s: {PAPER_RATIO:.2f}x)")


if __name__ == "__main__":
    main()
