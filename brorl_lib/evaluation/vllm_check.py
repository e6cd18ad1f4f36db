"""``python -m brorl_lib.evaluation.vllm_check MODEL``: the vLLM backend's version adapter checked on the
installed engine (CPU build or CUDA), one JSON object on stdout (and in ``--json``; vLLM logs to stdout too),
exit status 0 when every check holds.

Checks, each a key of ``checks``:

* ``engine_starts``: ``vllm.LLM`` accepts the arguments ``vllm_compat.engine_kwargs`` gives for this build;
* ``greedy_repeats``: at temperature 0 a request of ``n`` responses gives ``n`` equal ones (vLLM itself
  refuses ``n > 1`` when greedy);
* ``seeded_per_prompt``: a prompt's samples depend on its seed, not on the other prompts of the batch;
* ``lengths_and_reasons``: every response has 1..max_tokens tokens, "stop" exactly when it ends with an
  end-of-sequence token, "length" exactly when it has max_tokens tokens without one;
* ``prefix_cache_resets``: ``LLM.reset_prefix_cache()`` answers True;
* ``own_tokenizer_agrees``: vLLM's own tokenizer gives the ids the backend's tokenizer gives on ``--text``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from brorl_lib.facts.protocol import SamplingParams

TEXTS = ("12+1=", "rev neon=", "wsr free may=")  # prompts of the laptop tasks (their alphabet only)


def run_checks(model: str, texts: list[str], max_tokens: int) -> dict:
    """Every check's outcome (True/False) and what was seen, on one engine."""
    from brorl_lib.evaluation import vllm_compat
    from brorl_lib.evaluation.backends import VLLMBackend

    build = vllm_compat.require_usable()
    backend = VLLMBackend(model, seed=0)
    checks: dict[str, bool] = {"engine_starts": True}
    greedy = backend.generate(texts, SamplingParams(3, 0.0, 1.0, max_tokens), list(range(len(texts))))
    checks["greedy_repeats"] = all(len(g) == 3 and g[0] == g[1] == g[2] for g in greedy)
    params = SamplingParams(4, 1.0, 1.0, max_tokens)
    seeds = list(range(11, 11 + len(texts)))
    together = backend.generate(texts, params, seeds)
    alone = backend.generate(texts[-1:], params, seeds[-1:])
    other = backend.generate(texts[-1:], params, [seeds[-1] + 100])
    checks["seeded_per_prompt"] = together[-1] == alone[0] and other[0] != alone[0]
    gens = [g for batch in (greedy, together, other) for gs in batch for g in gs]
    checks["lengths_and_reasons"] = all(
        1 <= g.n_tokens <= max_tokens and (g.finish_reason == "stop" or g.n_tokens == max_tokens) for g in gens
    )
    checks["prefix_cache_resets"] = bool(backend.llm.reset_prefix_cache())
    own = backend.llm.get_tokenizer()
    checks["own_tokenizer_agrees"] = all(
        list(own(t, add_special_tokens=False)["input_ids"])
        == list(backend.tokenizer(t, add_special_tokens=False)["input_ids"])
        for t in texts
    )
    return {
        "build": {"distribution": build.distribution, "version": build.version, "device": build.device},
        "model": backend.model,
        "checks": checks,
        "greedy": [g[0].text for g in greedy],
        "finish_reasons": sorted({g.finish_reason for g in gens}),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m brorl_lib.evaluation.vllm_check", description=__doc__.splitlines()[0])
    ap.add_argument("model", help="local Hugging Face folder or hub id")
    ap.add_argument("--text", nargs="+", default=list(TEXTS), help="prompts (user messages) to generate from")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--json", type=Path, default=None, help="also write the report to this file")
    args = ap.parse_args(argv)
    if args.max_tokens < 1:
        ap.error(f"--max-tokens {args.max_tokens}: must be >= 1")
    try:
        report = run_checks(args.model, args.text, args.max_tokens)
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(report))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=1))
    return 0 if all(report["checks"].values()) else 1


if __name__ == "__main__":  # vLLM starts its engine in a spawned process, which imports this module again
    raise SystemExit(main())
