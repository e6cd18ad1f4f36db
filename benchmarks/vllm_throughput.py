"""Generation throughput of one checkpoint on one GPU with vLLM: the ProRL arm's shape (N=16) against
the BroRL arm's (N=512), with vLLM's automatic prefix caching on and off.

Shapes (--shapes):
  equal-samples  (default) both arms generate --total-samples responses: total/16 prompts x 16 samples
                 against total/512 prompts x 512 samples.
  paper-step     the arms' per-step shapes from Table 1 (512 prompts x 16 and 128 prompts x 512: four
                 times the prompts at N=16), scaled by --prompt-scale to fit one GPU; the sample counts
                 then differ and throughput is per sample.
Every response is exactly --response-tokens tokens long (end-of-sequence ignored), standing in for a
realistic response length; the prompts are Reasoning Gym questions generated locally, through the
model's chat template. Prints samples/s and tokens/s per (prefix caching, N) and the N=512 / N=16
ratio beside the paper's Table 2 (read from data/paper with brorl_lib.paper.reported). Each prefix-caching
setting runs in its own process (one vLLM engine per process).

Exit status: 0 measured; 2 bad arguments; 3 vLLM or a CUDA GPU is missing here (nothing measured).
Usage:
    python benchmarks/vllm_throughput.py --model nvidia/Nemotron-Research-Reasoning-Qwen-1.5B [--revision brorl]
        [--total-samples 2048] [--response-tokens 2048] [--prefix-caching both] [--shapes equal-samples]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from brorl_lib.evaluation.protocol import TEMPERATURE, TOP_P
from brorl_lib.paper import reported as paper

EXIT_NO_VLLM = 3
ARMS = tuple(n for n, _ in paper.arm_shapes().values())  # samples per prompt of the ProRL and BroRL arms (Table 1)
RG_TASKS = ("basic_arithmetic", "countdown", "spell_backward", "word_sequence_reversal", "family_relationships")
PROMPT_SEED = 12345  # our choice: which Reasoning Gym questions serve as prompts


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status: 0 measured, 2 bad arguments, 3 no vLLM or no CUDA GPU",
    )
    ap.add_argument("--model", required=True, help="local Hugging Face folder or hub id")
    ap.add_argument("--revision", default=None)
    ap.add_argument("--shapes", choices=["equal-samples", "paper-step"], default="equal-samples")
    ap.add_argument(
        "--total-samples", type=int, default=2048, help="equal-samples: responses per arm (a multiple of 512)"
    )
    ap.add_argument(
        "--prompt-scale", type=float, default=0.125, help="paper-step: fraction of Table 1's prompts per step"
    )
    ap.add_argument(
        "--response-tokens", type=int, default=2048, help="tokens per response (our default; the paper gives none)"
    )
    ap.add_argument("--prefix-caching", choices=["on", "off", "both"], default="both")
    ap.add_argument("--repeats", type=int, default=1, help="timed runs per shape; the fastest is kept")
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    ap.add_argument("--max-model-len", type=int, default=None, help="default: longest prompt + --response-tokens")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, default=None, help="also write the measurements to this JSON file")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.shapes == "equal-samples" and (args.total_samples < 512 or args.total_samples % 512):
        ap.error(
            f"--total-samples {args.total_samples}: must be a positive multiple of 512 "
            "(both arms make the same samples)"
        )
    if args.child and args.json is None:
        ap.error("--child needs --json")
    if not 0 < args.prompt_scale <= 1:
        ap.error(f"--prompt-scale {args.prompt_scale}: must be in (0, 1]")
    for name in ("response_tokens", "repeats"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(args, name)}: must be >= 1")
    if not 0 < args.gpu_memory_utilization <= 1:
        ap.error(f"--gpu-memory-utilization {args.gpu_memory_utilization}: must be in (0, 1]")
    if args.shapes == "paper-step" and min(prompts for _, prompts in shapes(args)) < 1:
        ap.error(f"--prompt-scale {args.prompt_scale}: leaves an arm with no prompts")
    return args


def shapes(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(samples per prompt, prompts) for each arm."""
    if args.shapes == "equal-samples":
        return [(n, args.total_samples // n) for n in ARMS]
    t1 = paper.load("table1_efficiency")
    per_step = dict(zip(t1["n_rollouts"].astype(int), t1["prompts_per_step"].astype(int)))
    return [(n, int(per_step[n] * args.prompt_scale)) for n in ARMS]


def paper_throughput() -> dict[int, float]:
    """N -> the paper's generation throughput in samples/s (Table 2)."""
    return paper.table2_throughput()


def missing_requirement() -> str | None:
    """Why this cannot run here, or None."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vLLM is not installed (GPU machines: pip install -e '.[gpu]')"
    import torch

    if not torch.cuda.is_available():
        return "no CUDA GPU is visible"
    return None


def format_results(rows: list[dict], paper_rates: dict[int, float]) -> str:
    """A line per (prefix caching, N), then the N=512 / N=16 ratio per caching setting beside the paper's."""
    lines = [
        f"{'prefix caching':>14} {'N':>4} {'prompts':>8} {'samples':>8} {'wall s':>9} "
        f"{'samples/s':>10} {'tokens/s':>11}"
    ]
    for r in rows:
        lines.append(
            f"{'on' if r['prefix_caching'] else 'off':>14} {r['n']:>4} {r['prompts']:>8} {r['samples']:>8} "
            f"{r['wall_s']:>9.2f} {r['samples_per_s']:>10.1f} {r['tokens_per_s']:>11.0f}"
        )
    lo, hi = ARMS
    paper_ratio = paper_rates[hi] / paper_rates[lo]
    for caching in (True, False):
        rate = {r["n"]: r["samples_per_s"] for r in rows if r["prefix_caching"] == caching}
        if lo in rate and hi in rate:
            lines.append(
                f"prefix caching {'on' if caching else 'off'}: N={hi} / N={lo} = {rate[hi] / rate[lo]:.2f}x "
                f"(paper, Table 2: {paper_rates[hi]} / {paper_rates[lo]} samples/s = {paper_ratio:.2f}x, "
                f"1.5B model, 64 H100s, training rollouts)"
            )
    return "\n".join(lines)


def prompt_ids(tokenizer, count: int) -> list[list[int]]:
    import reasoning_gym

    from brorl_lib.evaluation.backends import encode_prompt
    from brorl_lib.evaluation.datasets import rg_prompt

    per_task = -(-count // len(RG_TASKS))
    questions = [
        e["question"] for t in RG_TASKS for e in reasoning_gym.create_dataset(t, size=per_task, seed=PROMPT_SEED)
    ]
    return [encode_prompt(tokenizer, rg_prompt(q)) for q in questions[:count]]


def measure(args: argparse.Namespace, caching: bool) -> list[dict]:
    """Both arms on one vLLM engine with prefix caching ``caching``."""
    import vllm

    from brorl_lib.evaluation.backends import load_tokenizer

    arm_shapes = shapes(args)
    llm_kwargs = dict(
        model=args.model,
        revision=args.revision,
        seed=args.seed,
        enable_prefix_caching=caching,
        gpu_memory_utilization=args.gpu_memory_utilization,
    )
    tokenizer = load_tokenizer(args.model, args.revision)
    prompts = prompt_ids(tokenizer, max(p for _, p in arm_shapes))
    llm_kwargs["max_model_len"] = args.max_model_len or max(map(len, prompts)) + args.response_tokens
    llm = vllm.LLM(**llm_kwargs)
    rows = []
    for n, count in arm_shapes:
        params = vllm.SamplingParams(
            n=n,
            temperature=TEMPERATURE,
            top_p=TOP_P,
            max_tokens=args.response_tokens,
            min_tokens=args.response_tokens,
            ignore_eos=True,
            seed=args.seed,
        )
        llm.generate(
            [{"prompt_token_ids": prompts[0]}], vllm.SamplingParams(n=2, max_tokens=8), use_tqdm=False
        )  # warm-up
        best = None  # (wall seconds, tokens generated)
        for _ in range(args.repeats):
            if caching:
                llm.reset_prefix_cache()  # each timed run starts cold; sharing happens within the run
            start = time.perf_counter()
            out = llm.generate([{"prompt_token_ids": p} for p in prompts[:count]], params, use_tqdm=False)
            wall = time.perf_counter() - start
            tokens = sum(len(o.token_ids) for req in out for o in req.outputs)
            best = (wall, tokens) if best is None or wall < best[0] else best
        samples = n * count
        rows.append(
            {
                "prefix_caching": caching,
                "n": n,
                "prompts": count,
                "samples": samples,
                "wall_s": best[0],
                "samples_per_s": samples / best[0],
                "tokens_per_s": best[1] / best[0],
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    why = missing_requirement()
    if why is not None:
        print(f"vllm_throughput: needs vLLM and a CUDA GPU; {why}. Nothing was measured.", file=sys.stderr)
        return EXIT_NO_VLLM
    if args.child:  # one caching setting for a parent process: measure, write, print nothing
        args.json.write_text(json.dumps(measure(args, args.prefix_caching == "on")))
        return 0
    rows: list[dict] = []
    for setting in ["on", "off"] if args.prefix_caching == "both" else [args.prefix_caching]:
        # one vLLM engine per process: an engine does not reliably give the GPU back within a process
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "rows.json"
            subprocess.run(
                [sys.executable, __file__, *argv, "--prefix-caching", setting, "--json", str(out), "--child"],
                check=True,
            )
            rows += json.loads(out.read_text())
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    print(
        f"model {args.model}{'@' + args.revision if args.revision else ''}, {args.response_tokens} tokens per "
        f"response, shapes {args.shapes}"
    )
    print(format_results(rows, paper_throughput()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
