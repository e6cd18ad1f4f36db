"""Generation throughput of one checkpoint with vLLM (one CUDA GPU, or the CPU build): the ProRL arm's shape
(N=16) against the BroRL arm's (N=512), with vLLM's automatic prefix caching on and off.

Shapes (--shapes):
  equal-samples  (default) both arms generate --total-samples responses: total/16 prompts x 16 samples
                 against total/512 prompts x 512 samples.
  paper-step     the arms' per-step shapes from Table 1 (512 prompts x 16 and 128 prompts x 512: four
                 times the prompts at N=16), scaled by --prompt-scale to fit one GPU; the sample counts
                 then differ and throughput is per sample.
Every response is exactly --response-tokens tokens long (end-of-sequence ignored), standing in for a
realistic response length. Prompts (--prompts): Reasoning Gym questions generated locally, through the
model's chat template; or, for notebook 04's laptop model, its spell_backward prompts. Prints samples/s
and tokens/s per (prefix caching, N). On a GPU the N=512 / N=16 ratio stands beside the paper's Table 2
(read from data/paper with brorl_lib.facts.reported); on the CPU build it is printed alone: a CPU says
nothing about the paper's H100 ratio. Each prefix-caching setting runs in its own process (one vLLM
engine per process). --own-sampler also times, in the same run, the project's own sampler
(brorl_lib.rlvr.sampling, transformers on CPU, the prompt's KV cache shared by its N rollouts) on the same
shapes; it needs a laptop model (--model laptop: notebook 04's model, freshly initialised, seed 0).

Exit status: 0 measured; 2 bad arguments; 3 vLLM cannot run here (nothing measured).
Usage:
    python benchmarks/vllm_throughput.py --model nvidia/Nemotron-Research-Reasoning-Qwen-1.5B [--revision brorl]
        [--total-samples 2048] [--response-tokens 2048] [--prefix-caching both] [--shapes equal-samples]
    .venv-vllm/bin/python benchmarks/vllm_throughput.py --model laptop --prompts laptop --own-sampler \\
        --total-samples 1024 --response-tokens 16
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from brorl_lib.evaluation import vllm_compat
from brorl_lib.facts import reported as paper
from brorl_lib.facts.protocol import TEMPERATURE, TOP_P

EXIT_NO_VLLM = 3
ARMS = tuple(n for n, _ in paper.arm_shapes().values())  # samples per prompt of the ProRL and BroRL arms (Table 1)
RG_TASKS = ("basic_arithmetic", "countdown", "spell_backward", "word_sequence_reversal", "family_relationships")
PROMPT_SEED = 12345  # our choice: which Reasoning Gym questions serve as prompts
LAPTOP = "laptop"  # --model value: notebook 04's model, freshly initialised (seed 0), saved to a temporary folder


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="exit status: 0 measured, 2 bad arguments, 3 vLLM cannot run here",
    )
    ap.add_argument("--model", required=True, help=f"local Hugging Face folder, hub id, or {LAPTOP!r}")
    ap.add_argument("--prompts", choices=["reasoning_gym", "laptop"], default="reasoning_gym")
    ap.add_argument("--own-sampler", action="store_true", help="also time brorl_lib.rlvr.sampling (laptop models)")
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
    if args.own_sampler and args.prompts != "laptop":
        ap.error("--own-sampler needs --prompts laptop (the laptop tokenizer knows only the laptop tasks' characters)")
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
    """Why vLLM cannot run here (with the command that gives one that can), or None."""
    why = vllm_compat.unusable_reason()
    return None if why is None else f"{why}; {vllm_compat.how_to_get()}"


def format_results(rows: list[dict], paper_rates: dict[int, float], device: str = "cuda") -> str:
    """A line per (engine, prefix caching, N), then the N=512 / N=16 ratio per engine and caching setting: on
    CUDA beside the paper's, on CPU alone (a CPU says nothing about the paper's H100 ratio)."""
    lines = [
        f"{'engine':>14} {'prefix caching':>14} {'N':>4} {'prompts':>8} {'samples':>8} {'wall s':>9} "
        f"{'samples/s':>10} {'tokens/s':>11}"
    ]
    for r in rows:
        lines.append(
            f"{r.get('engine', 'vllm'):>14} {'on' if r['prefix_caching'] else 'off':>14} {r['n']:>4} {r['prompts']:>8} "
            f"{r['samples']:>8} {r['wall_s']:>9.2f} {r['samples_per_s']:>10.1f} {r['tokens_per_s']:>11.0f}"
        )
    lo, hi = ARMS
    paper_ratio = paper_rates[hi] / paper_rates[lo]
    engines = list(dict.fromkeys(r.get("engine", "vllm") for r in rows))
    for engine in engines:
        for caching in (True, False):
            rate = {
                r["n"]: r["samples_per_s"]
                for r in rows
                if r["prefix_caching"] == caching and r.get("engine", "vllm") == engine
            }
            if lo not in rate or hi not in rate:
                continue
            label = "prefix caching" if len(engines) == 1 else f"{engine}, prefix caching"
            measured = f"{label} {'on' if caching else 'off'}: N={hi} / N={lo} = {rate[hi] / rate[lo]:.2f}x"
            if device == "cuda":
                lines.append(
                    f"{measured} (paper, Table 2: {paper_rates[hi]} / {paper_rates[lo]} samples/s = "
                    f"{paper_ratio:.2f}x, 1.5B model, 64 H100s, training rollouts)"
                )
            else:
                lines.append(f"{measured} (on CPU: not comparable with the paper's Table 2, measured on H100s)")
    return "\n".join(lines)


def prompt_texts(source: str, count: int) -> list[str]:
    """``count`` user messages: Reasoning Gym questions in its instruction, or the laptop spell_backward prompts."""
    if source == "laptop":
        from brorl_lib.rlvr import tasks

        train, _ = tasks.make_split("spell_backward", 2, max(count, 1), 1, seed=0)
        return [train[i % len(train)].prompt for i in range(count)]
    import reasoning_gym

    from brorl_lib.evaluation.datasets import rg_prompt

    per_task = -(-count // len(RG_TASKS))
    questions = [
        e["question"] for t in RG_TASKS for e in reasoning_gym.create_dataset(t, size=per_task, seed=PROMPT_SEED)
    ]
    return [rg_prompt(q) for q in questions[:count]]


def prompt_ids(tokenizer, count: int, source: str = "reasoning_gym") -> list[list[int]]:
    from brorl_lib.evaluation.backends import encode_prompt

    return [encode_prompt(tokenizer, text) for text in prompt_texts(source, count)]


def measure(args: argparse.Namespace, caching: bool) -> list[dict]:
    """Both arms on one vLLM engine with prefix caching ``caching``."""
    from brorl_lib.evaluation.backends import load_tokenizer

    build = vllm_compat.require_usable()
    vllm = vllm_compat.import_vllm()
    arm_shapes = shapes(args)
    tokenizer = load_tokenizer(args.model, args.revision)
    prompts = prompt_ids(tokenizer, max(p for _, p in arm_shapes), args.prompts)
    llm_kwargs = vllm_compat.engine_kwargs(
        build,
        seed=args.seed,
        enable_prefix_caching=caching,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
    )
    if args.max_model_len is None and args.model != LAPTOP and args.prompts != "laptop":
        llm_kwargs["max_model_len"] = max(map(len, prompts)) + args.response_tokens
    llm = vllm.LLM(model=args.model, revision=args.revision, **llm_kwargs)
    rows = []
    for n, count in arm_shapes:
        params = vllm_compat.sampling_params(
            vllm,
            n=n,
            temperature=TEMPERATURE,
            top_p=TOP_P,
            max_tokens=args.response_tokens,
            min_tokens=args.response_tokens,
            ignore_eos=True,
            seed=args.seed,
        )
        warm_up = vllm_compat.sampling_params(vllm, n=2, temperature=1.0, top_p=1.0, max_tokens=8, seed=None)
        llm.generate([vllm_compat.token_prompt(prompts[0])], warm_up, use_tqdm=False)
        best = None  # (wall seconds, tokens generated)
        for _ in range(args.repeats):
            if caching:
                llm.reset_prefix_cache()  # each timed run starts cold; sharing happens within the run
            start = time.perf_counter()
            out = llm.generate([vllm_compat.token_prompt(p) for p in prompts[:count]], params, use_tqdm=False)
            wall = time.perf_counter() - start
            tokens = sum(len(o.token_ids) for req in out for o in req.outputs)
            best = (wall, tokens) if best is None or wall < best[0] else best
        rows.append(_row(f"{build.distribution} {build.version}", caching, n, count, best))
    return rows


def _row(engine: str, caching: bool, n: int, prompts: int, best: tuple[float, int]) -> dict:
    return {
        "engine": engine,
        "prefix_caching": caching,
        "n": n,
        "prompts": prompts,
        "samples": n * prompts,
        "wall_s": best[0],
        "samples_per_s": n * prompts / best[0],
        "tokens_per_s": best[1] / best[0],
    }


def measure_own_sampler(args: argparse.Namespace) -> list[dict]:
    """The same shapes with ``brorl_lib.rlvr.sampling.generate`` (transformers on CPU, one thread per core here),
    at most --response-tokens new tokens (it stops a response at end-of-sequence; tokens/s counts what it made)."""
    import torch

    from brorl_lib.models.tiny import load
    from brorl_lib.rlvr.sampling import generate

    model, tokenizer = load(args.model)
    model.eval()
    arm_shapes = shapes(args)
    texts = prompt_texts("laptop", max(p for _, p in arm_shapes))
    rows = []
    for n, count in arm_shapes:
        with torch.no_grad():
            generate(model, tokenizer, texts[:1], 2, 4, TEMPERATURE, torch.Generator().manual_seed(0))  # warm-up
        best = None
        for r in range(args.repeats):
            start = time.perf_counter()
            with torch.no_grad():
                out = generate(
                    model,
                    tokenizer,
                    texts[:count],
                    n,
                    args.response_tokens,
                    TEMPERATURE,
                    torch.Generator().manual_seed(r),
                )
            wall = time.perf_counter() - start
            best = (wall, out.n_tokens) if best is None or wall < best[0] else best
        rows.append(_row("own sampler", True, n, count, best))
    return rows


def laptop_model(folder: Path) -> Path:
    """Notebook 04's model (TinyModelShape, freshly initialised with seed 0) and tokenizer, saved in ``folder``."""
    from brorl_lib.models.char_tokenizer import build_tokenizer
    from brorl_lib.models.tiny import TinyModelShape, build_model, save

    tokenizer = build_tokenizer()
    save(build_model(TinyModelShape(), tokenizer, seed=0), tokenizer, folder)
    return folder


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    why = missing_requirement()
    if why is not None:
        print(f"vllm_throughput: vLLM cannot run here: {why}. Nothing was measured.", file=sys.stderr)
        return EXIT_NO_VLLM
    if args.child:  # one caching setting for a parent process: measure, write, print nothing
        args.json.write_text(json.dumps(measure(args, args.prefix_caching == "on")))
        return 0
    shown = f"{args.model}{'@' + args.revision if args.revision else ''}"
    if args.model == LAPTOP:
        shown = "laptop (notebook 04's model, freshly initialised, seed 0)"
    with tempfile.TemporaryDirectory() as tmp:
        if args.model == LAPTOP:
            args.model = str(laptop_model(Path(tmp) / "laptop"))
            argv = [*argv, "--model", args.model]  # the children load the same folder
        rows: list[dict] = []
        for setting in ["on", "off"] if args.prefix_caching == "both" else [args.prefix_caching]:
            # one vLLM engine per process: an engine does not reliably give the device back within a process
            out = Path(tmp) / f"rows_{setting}.json"
            subprocess.run(
                [sys.executable, __file__, *argv, "--prefix-caching", setting, "--json", str(out), "--child"],
                check=True,
            )
            rows += json.loads(out.read_text())
        if args.own_sampler:
            rows += measure_own_sampler(args)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    build = vllm_compat.installed_build()
    print(
        f"model {shown}, {args.response_tokens} tokens per "
        f"response, shapes {args.shapes}, {build.distribution} {build.version} on {build.device}"
    )
    print(format_results(rows, paper_throughput(), build.device))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
