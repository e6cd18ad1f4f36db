"""Evaluate one checkpoint on a list of benchmarks: generate, score, save per instance, resume.

The instances of every benchmark are loaded first (so a missing data set fails before any
generation). Then, benchmark by benchmark, prompts go to the backend ``batch_size`` at a time; each
instance's samples are scored and appended to its results file at once. Instances already in the file
with all their samples are skipped, so an interrupted evaluation continues where it stopped. Every
instance's sampling seed is derived from (seed, benchmark, instance id), so a resumed run writes what
an uninterrupted one would have. ``run.json`` records the settings the results depend on; resuming
with different ones is an error.

``run.json`` also records, per benchmark, which instances its results are of and how far they got:
``fingerprint`` (sha256 over the sorted (instance id, prompt, reference) of the instances evaluated),
``instances`` (their count), ``full`` (the whole benchmark, as the paper: no ``limit``, and for Reasoning
Gym 100 instances of every task) and ``complete`` (every instance has all its samples; set when the
benchmark's generation loop finishes). A run whose instances of a benchmark differ from those already
evaluated under the label (another data file or data set version, another limit or task selection) is
refused before anything is written, so results of different instance sets are never mixed.
For a local model folder, ``weights_sha256`` (over its weight files) is recorded too: resuming a label whose
folder now holds other weights (a model re-trained in place) is refused the same way.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from tqdm.auto import tqdm

from brorl_lib.core.validation import check_int, check_type
from brorl_lib.evaluation import results as res
from brorl_lib.evaluation.backends import Backend
from brorl_lib.evaluation.datasets import (
    BENCHMARKS,
    RG_MAX_INSTANCES_PER_TASK,
    BenchmarkInstance,
    check_local_file,
    expand,
    load_instances,
    rg_category,
    rg_tasks_by_category,
)
from brorl_lib.evaluation.sandbox import Limits, require_isolation
from brorl_lib.evaluation.scoring import score
from brorl_lib.facts.protocol import RG_INSTANCES_PER_TASK, SamplingParams
from brorl_lib.tasks.credit import passed

# Bumped whenever a prompt template or answer extraction changes, so old results are not mixed in.
# 2: math answers are the last boxed answer, with percent signs and upright e read as math-verify reads them.
PROMPT_VERSION = 2


@dataclass(frozen=True)
class EvalConfig:
    """What to evaluate and how; the defaults are the paper's protocol on every benchmark."""

    benchmarks: tuple[str, ...] = ("all",)  # names or groups: all, math, code, reasoning_gym (rg)
    sampling: SamplingParams = SamplingParams()
    seed: int = 0  # base of the per-instance sampling seeds
    limit: int | None = None  # first ``limit`` instances per benchmark (None: all, as the paper)
    rg_per_task: int = RG_INSTANCES_PER_TASK  # Reasoning Gym instances per task (ProRL: 100)
    rg_tasks: tuple[str, ...] | None = None  # only these Reasoning Gym tasks (None: all of each category)
    data: Mapping[str, str | Path] = field(default_factory=dict)  # benchmark -> local data file
    batch_size: int = 64  # prompts per backend call; results are saved after each call
    code_limits: Limits = Limits()
    code_workers: int | None = None  # parallel sandbox runs (None: the number of CPU cores)
    save_responses: bool = True  # keep response texts in the results (allows re-scoring)

    def __post_init__(self) -> None:
        object.__setattr__(self, "benchmarks", expand(list(self.benchmarks)))
        check_type("sampling", self.sampling, SamplingParams, "a SamplingParams")
        check_type("code_limits", self.code_limits, Limits, "a sandbox.Limits")
        check_int("seed", self.seed, low=0)
        if self.limit is not None:
            check_int("limit", self.limit, low=1)
        check_int("rg_per_task", self.rg_per_task, low=1, high=RG_MAX_INSTANCES_PER_TASK)
        check_int("batch_size", self.batch_size, low=1)
        if self.code_workers is not None:
            check_int("code_workers", self.code_workers, low=1)
        check_type("data", self.data, Mapping, "a mapping benchmark -> file")
        for name, path in self.data.items():
            if name not in self.benchmarks:
                raise ValueError(
                    f"data[{name!r}] is not allowed: {name!r} is not among the benchmarks {list(self.benchmarks)}"
                )
            check_local_file(name, path)
        if self.rg_tasks is not None:
            object.__setattr__(self, "rg_tasks", tuple(self.rg_tasks))
            cats = {rg_category(t) for t in self.rg_tasks}
            for name in self.benchmarks:
                if BENCHMARKS[name].domain == "reasoning_gym" and BENCHMARKS[name].column not in cats:
                    raise ValueError(
                        f"rg_tasks={list(self.rg_tasks)} is not allowed: none is in {name} "
                        f"(its tasks: {list(rg_tasks_by_category()[BENCHMARKS[name].column])})"
                    )

    def protocol(self) -> dict:
        """The settings a result depends on; a resumed run must have the same."""
        return {
            "sampling": self.sampling.as_dict(),
            "seed": self.seed,
            "prompt_version": PROMPT_VERSION,
            "code_limits": self.code_limits.scoring_settings(),
        }

    def is_full(self, benchmark: str | None = None) -> bool:
        """Every instance of ``benchmark`` (None: of every benchmark), as the paper: no limit, and for
        Reasoning Gym 100 instances of every task."""
        names = self.benchmarks if benchmark is None else (benchmark,)
        rg = any(BENCHMARKS[n].domain == "reasoning_gym" for n in names)
        return self.limit is None and (not rg or (self.rg_per_task == RG_INSTANCES_PER_TASK and self.rg_tasks is None))


def instance_seed(seed: int, benchmark: str, instance_id: str) -> int:
    """A sampling seed in [0, 2**31) from the run's seed and the instance (stable across runs and batching)."""
    digest = hashlib.sha256(f"{seed}|{benchmark}|{instance_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _canonical(value):
    """``value`` as plain JSON data with a fixed order (dict items and sets sorted), for hashing."""
    if isinstance(value, dict):
        return {"dict": sorted([json.dumps(_canonical(k), sort_keys=True), _canonical(v)] for k, v in value.items())}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return {"set": sorted(json.dumps(_canonical(v), sort_keys=True) for v in value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _canonical(value.item())
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays
        return _canonical(value.tolist())
    return repr(value)


def instances_fingerprint(items: Sequence[BenchmarkInstance]) -> str:
    """sha256 (hex) over the sorted (instance id, prompt, reference) of ``items``: which instances, with
    which references, a benchmark's results are of (order and batching do not matter)."""
    digest = hashlib.sha256()
    for entry in sorted(json.dumps([i.instance_id, i.prompt, _canonical(i.reference)], sort_keys=True) for i in items):
        digest.update(entry.encode("utf-8") + b"\n")
    return digest.hexdigest()


WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def weights_sha256(model: str) -> str | None:
    """sha256 (hex) over the weight files of a local model folder (names and bytes, in name order), or None for
    a hub id (its revision names its weights)."""
    folder = Path(model)
    if not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file()):
        digest.update(path.name.encode("utf-8") + b"\n")
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                digest.update(block)
    return digest.hexdigest()


def _checked_run_info(
    results_dir: Path,
    label: str,
    backend: Backend,
    config: EvalConfig,
    instances: Mapping[str, Sequence[BenchmarkInstance]],
) -> dict:
    """run.json's content for this run, checked against what is already there; writes nothing."""
    info = res.read_run_info(results_dir, label)
    protocol = config.protocol()
    weights = weights_sha256(backend.model)
    if info is None:
        info = {"checkpoint": label, "model": backend.model, "protocol": protocol, "runs": []}
    else:
        if info["model"] != backend.model:
            raise ValueError(
                f"results for label={label!r} in {results_dir} are of model {info['model']!r}, not "
                f"{backend.model!r}: use another label or output folder"
            )
        if info.get("weights_sha256", weights) != weights:
            raise ValueError(
                f"results for label={label!r} in {results_dir} are of other weights than {backend.model!r} holds "
                f"now (sha256 {info['weights_sha256'][:12]}, now {str(weights)[:12]}): the model changed since; "
                f"use another label or output folder, or remove {results_dir / label} to evaluate it again"
            )
        if info["protocol"] != protocol:
            raise ValueError(
                f"results for label={label!r} in {results_dir} were made with {info['protocol']}; "
                f"this run asks for {protocol}: use the same settings, another label or another folder"
            )
    if weights is not None:
        info["weights_sha256"] = weights  # recorded on the first run (and on the first resume of an older record)
    recorded = info.setdefault("benchmarks", {})
    for name, items in instances.items():
        fingerprint, before = instances_fingerprint(items), recorded.get(name)
        if before is not None and before["fingerprint"] != fingerprint:
            raise ValueError(
                f"benchmark {name!r}: the results for label={label!r} in {results_dir} are of other instances "
                f"({before['instances']} instances, fingerprint {before['fingerprint'][:12]}) than this run's "
                f"({len(items)} instances, fingerprint {fingerprint[:12]}): another data file or data set version "
                f"(--data), or another --limit, --rg-per-task or --rg-tasks. Results of different instance sets are "
                f"not mixed: use another --out or --label (in Python: another results_dir or label)"
            )
        recorded[name] = {
            "fingerprint": fingerprint,
            "instances": len(items),
            "complete": False,
            "full": bool((before or {}).get("full")) or config.is_full(name),
        }
    info["runs"].append(
        {
            "backend": backend.name,
            "benchmarks": list(config.benchmarks),
            "limit": config.limit,
            "rg_per_task": config.rg_per_task,
            "rg_tasks": config.rg_tasks,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
    )
    return info


def _score_all(items: list[tuple[BenchmarkInstance, str]], config: EvalConfig) -> list[float]:
    """Scores in order; code runs in parallel threads (subprocesses), math and Reasoning Gym in this
    thread (math-verify's timeouts need the main thread)."""
    scores: list[float | None] = [None] * len(items)
    code = [i for i, (inst, _) in enumerate(items) if BENCHMARKS[inst.benchmark].domain == "code"]
    if code:
        workers = config.code_workers or os.cpu_count() or 1
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for i, s in zip(code, pool.map(lambda i: score(items[i][0], items[i][1], config.code_limits), code)):
                scores[i] = s
    for i, (inst, text) in enumerate(items):
        if scores[i] is None:
            scores[i] = score(inst, text, config.code_limits)
    return scores


def evaluate(
    backend: Backend, label: str, results_dir: str | Path, config: EvalConfig = EvalConfig(), progress: bool = True
) -> pd.DataFrame:
    """Evaluate ``backend``'s model as checkpoint ``label``; returns its per-sample results (all of
    them in ``results_dir``, including those of earlier, resumed runs) for ``config.benchmarks``."""
    res.check_label(label)
    if any(BENCHMARKS[name].domain == "code" for name in config.benchmarks):
        require_isolation(config.code_limits)  # refuse before any generation, saying what to install
    results_dir = Path(results_dir)
    instances = {
        name: load_instances(name, config.data.get(name), config.limit, config.rg_per_task, config.rg_tasks)
        for name in tqdm(config.benchmarks, desc="loading benchmarks", disable=not progress)
    }
    info = _checked_run_info(results_dir, label, backend, config, instances)
    n = config.sampling.n
    todos = {}
    for name, items in instances.items():
        done = res.repair(res.results_path(results_dir, label, name), n, (i.instance_id for i in items))
        todos[name] = [i for i in items if i.instance_id not in done]
        info["benchmarks"][name]["complete"] = not todos[name]
    res.write_run_info(results_dir, label, info)
    for name, items in instances.items():
        path, todo = res.results_path(results_dir, label, name), todos[name]
        bar = tqdm(
            total=len(items), initial=len(items) - len(todo), desc=f"{label} {name}", unit="inst", disable=not progress
        )
        for start in range(0, len(todo), config.batch_size):
            batch = todo[start : start + config.batch_size]
            seeds = [instance_seed(config.seed, name, i.instance_id) for i in batch]
            gens = backend.generate([i.prompt for i in batch], config.sampling, seeds)
            if len(gens) != len(batch) or any(len(g) != n for g in gens):
                raise RuntimeError(
                    f"backend {backend.name} returned {[len(g) for g in gens]} samples for "
                    f"{len(batch)} prompts; expected {n} each"
                )
            flat = [(inst, j, g) for inst, samples in zip(batch, gens) for j, g in enumerate(samples)]
            scores = _score_all([(inst, g.text) for inst, _, g in flat], config)
            rows = []
            for (inst, j, g), s in zip(flat, scores):
                row = {
                    "checkpoint": label,
                    "benchmark": name,
                    "domain": BENCHMARKS[name].domain,
                    "task": inst.task,
                    "instance_id": inst.instance_id,
                    "sample": j,
                    "score": s,
                    "correct": passed(s),
                    "response_tokens": g.n_tokens,
                    "finish_reason": g.finish_reason,
                }
                if config.save_responses:
                    row["response"] = g.text
                rows.append(row)
            res.append_rows(path, rows)
            bar.update(len(batch))
        bar.close()
        if not info["benchmarks"][name]["complete"]:  # every instance now has all its samples
            info["benchmarks"][name]["complete"] = True
            res.write_run_info(results_dir, label, info)
    return res.load_results(results_dir, [label], list(config.benchmarks))


def same_results(
    a: pd.DataFrame, b: pd.DataFrame, keys: Sequence[str] = ("benchmark", "instance_id", "sample")
) -> bool:
    """True when two result sets hold the same rows (any order)."""
    cols = [c for c in a.columns if c in b.columns]
    sa = a[cols].sort_values(list(keys)).reset_index(drop=True)
    sb = b[cols].sort_values(list(keys)).reset_index(drop=True)
    return sa.equals(sb)
