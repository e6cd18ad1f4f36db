"""``python -m brorl_lib.evaluation``: evaluate a checkpoint with the paper's protocol, then print
its scores. Arguments are checked before anything loads; bad ones exit with status 2 and a message naming
the flag, as does a model that is neither a folder nor loadable from the hub or its local cache (asked once,
``hub.py``: without network the run goes offline at once instead of retrying); a data set that cannot be
loaded, or damaged earlier results, exit with status 1."""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

from brorl_lib.evaluation import hub
from brorl_lib.evaluation.datasets import BENCHMARKS, GROUPS, DatasetUnavailable
from brorl_lib.evaluation.results import check_label, default_label
from brorl_lib.facts import protocol

EPILOG = (
    """examples:
  python -m brorl_lib.evaluation --model nvidia/Nemotron-Research-Reasoning-Qwen-1.5B --revision brorl \\
      --benchmarks all --out results/eval
  python -m brorl_lib.evaluation --model build/tiny --backend transformers --benchmarks aime24 rg_arithmetic \\
      --data aime24=my_aime.jsonl --samples 2 --max-tokens 32 --limit 5 --out /tmp/eval
benchmarks: """
    + ", ".join(BENCHMARKS)
    + "; groups: "
    + ", ".join(GROUPS)
)


def _data_pair(text: str) -> tuple[str, str]:
    name, sep, path = text.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"--data {text!r}: expected BENCHMARK=PATH")
    return name, path


def _finite(text: str) -> float:
    """A float flag's value: a number in any Python spelling (1e-3), never NaN or infinite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed: expected a finite number")
    return value


# The command line's flag for each checked setting, so that a refusal names what the user typed.
_FLAGS = {
    "samples (n)": "--samples",
    "temperature": "--temperature",
    "top_p": "--top-p",
    "max_tokens": "--max-tokens",
    "seed": "--seed",
    "limit": "--limit",
    "rg_per_task": "--rg-per-task",
    "batch_size": "--batch-size",
    "time_s": "--code-time-limit",
    "memory_mb": "--code-memory-mb",
}
_SETTING = re.compile("|".join(rf"(?<![\w-]){re.escape(name)}(?![\w])(=?)" for name in _FLAGS))


def _as_flags(message: str) -> str:
    """``message`` with each setting's name written as its flag (``time_s=0`` -> ``--code-time-limit 0``)."""
    return _SETTING.sub(lambda m: _FLAGS[m.group(0).rstrip("=")] + (" " if m.group(0).endswith("=") else ""), message)


def _names(values: list[str]) -> list[str]:
    return [n for v in values for n in v.split(",") if n]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m brorl_lib.evaluation",
        description=__doc__.splitlines()[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, help="local Hugging Face folder or hub id")
    p.add_argument("--revision", default=None, help="hub revision (branch, tag or commit), e.g. brorl")
    p.add_argument("--label", default=None, help="checkpoint name in the results (default: from --model/--revision)")
    p.add_argument("--benchmarks", nargs="+", default=["all"], help="names or groups, space or comma separated")
    p.add_argument("--out", required=True, type=Path, help="results folder (resumed when it holds earlier results)")
    p.add_argument(
        "--samples",
        type=int,
        default=protocol.SAMPLES_PER_INSTANCE,
        help=f"samples per instance (paper: {protocol.SAMPLES_PER_INSTANCE})",
    )
    p.add_argument(
        "--temperature", type=_finite, default=protocol.TEMPERATURE, help=f"paper: {protocol.TEMPERATURE}; 0: greedy"
    )
    p.add_argument("--top-p", type=_finite, default=protocol.TOP_P, help=f"paper: {protocol.TOP_P}")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=protocol.MAX_RESPONSE_TOKENS,
        help=f"response cap, tokens (paper: {protocol.MAX_RESPONSE_TOKENS})",
    )
    p.add_argument("--seed", type=int, default=0, help="base of the per-instance sampling seeds")
    p.add_argument("--limit", type=int, default=None, help="first N instances per benchmark (quick runs)")
    p.add_argument(
        "--rg-per-task",
        type=int,
        default=protocol.RG_INSTANCES_PER_TASK,
        help="Reasoning Gym instances per task (ProRL: 100)",
    )
    p.add_argument("--rg-tasks", nargs="+", default=None, help="only these Reasoning Gym tasks")
    p.add_argument(
        "--data",
        type=_data_pair,
        action="append",
        default=[],
        metavar="BENCHMARK=PATH",
        help="local data file for a benchmark (JSONL, JSON or parquet); repeatable",
    )
    p.add_argument(
        "--backend",
        choices=["auto", "vllm", "transformers"],
        default="auto",
        help="auto: vLLM when installed with a GPU, else transformers on CPU",
    )
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="transformers backend only")
    p.add_argument("--dtype", default="auto", help="auto, float32, bfloat16 or float16")
    p.add_argument("--truncate-prompts", action="store_true", help="transformers: keep a long prompt's last tokens")
    p.add_argument("--gpu-memory-utilization", type=_finite, default=0.9, help="vLLM only")
    p.add_argument("--no-prefix-caching", action="store_true", help="vLLM only: switch automatic prefix caching off")
    p.add_argument("--max-model-len", type=int, default=None, help="vLLM only: context length (default: the model's)")
    p.add_argument("--batch-size", type=int, default=64, help="prompts per generation call")
    p.add_argument("--code-time-limit", type=_finite, default=5.0, help="seconds per code test")
    p.add_argument("--code-memory-mb", type=int, default=1024, help="memory per code test, MiB")
    p.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run candidate programs without OS isolation (bubblewrap); only for programs you trust",
    )
    p.add_argument("--no-responses", action="store_true", help="do not store response texts")
    p.add_argument("--k", type=int, nargs="+", default=[1], help="pass@k values to print (k <= samples)")
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    from brorl_lib.evaluation.run import EvalConfig
    from brorl_lib.evaluation.sandbox import Limits, require_isolation
    from brorl_lib.facts.protocol import SamplingParams

    p = parser()
    args = p.parse_args(argv)
    model = str(args.model)
    try:
        hub.check_model_name(model)
    except ValueError as e:
        p.error(str(e))
    if args.dtype not in ("auto", "float32", "bfloat16", "float16"):
        p.error(f"--dtype {args.dtype!r}: choose auto, float32, bfloat16 or float16")
    try:
        label = check_label(args.label) if args.label else default_label(model, args.revision)
        config = EvalConfig(
            benchmarks=tuple(_names(args.benchmarks)),
            sampling=SamplingParams(args.samples, args.temperature, args.top_p, args.max_tokens),
            seed=args.seed,
            limit=args.limit,
            rg_per_task=args.rg_per_task,
            rg_tasks=tuple(_names(args.rg_tasks)) if args.rg_tasks else None,
            data=dict(args.data),
            batch_size=args.batch_size,
            code_limits=Limits(
                time_s=args.code_time_limit, memory_mb=args.code_memory_mb, unsafe_no_sandbox=args.unsafe_no_sandbox
            ),
            save_responses=not args.no_responses,
        )
        for k in args.k:
            if not 1 <= k <= args.samples:
                raise ValueError(f"--k {k} is not allowed: 1 <= k <= samples ({args.samples})")
        if not 0 < args.gpu_memory_utilization <= 1:
            raise ValueError(
                f"--gpu-memory-utilization {args.gpu_memory_utilization} is not allowed: must be in (0, 1]"
            )
    except ValueError as e:
        p.error(_as_flags(str(e)))
    needs_hub = not Path(model).exists() or any(
        BENCHMARKS[name].source is not None and name not in config.data for name in config.benchmarks
    )
    try:  # one question to the hub before anything loads: nothing retries an unreachable network for minutes
        hub.check_model(model, args.revision, hub.offline() if needs_hub else True)
    except ValueError as e:
        p.error(str(e))
    from brorl_lib.evaluation.backends import make_backend
    from brorl_lib.evaluation.metrics import AVERAGES, benchmark_scores, column_scores, format_domain_averages
    from brorl_lib.evaluation.run import evaluate

    kwargs = dict(
        device=args.device,
        dtype=args.dtype,
        truncate_prompts=args.truncate_prompts,
        gpu_memory_utilization=args.gpu_memory_utilization,
        enable_prefix_caching=not args.no_prefix_caching,
        max_model_len=args.max_model_len,
        seed=args.seed,
    )
    try:
        if any(BENCHMARKS[name].domain == "code" for name in config.benchmarks):
            require_isolation(config.code_limits)  # before the model loads
        backend = make_backend(args.backend, model, args.revision, **kwargs)
        results = evaluate(backend, label, args.out, config, progress=not args.no_progress)
    except (DatasetUnavailable, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        p.error(str(e))
    print(benchmark_scores(results, args.k).to_string(index=False, float_format="{:.4f}".format))
    columns = column_scores(results).drop(columns=list(AVERAGES))  # averages below, each with why it is missing
    print(columns.to_string(index=False, float_format="{:.4f}".format))
    print(format_domain_averages(results))
    print(f"per-instance results: {args.out / label}")
    return 0
