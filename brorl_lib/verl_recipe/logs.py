"""verl's file-logger JSONL (docs/verl.md#file-logger) back into tidy DataFrames.

A run of one arm lives in ``<runs>/<run>/<arm>/``: ``config.yaml`` (the resolved verl config) and
``logs/segment_000.jsonl``, ``segment_001.jsonl``, ... (one per launch: verl's file logger truncates
its file when it opens it, so the launch script gives every resumed segment a fresh file). Each
line is ``{"step": N, "data": {metric: value}}``. Segments are read in order; a step logged again
after a resume (verl re-runs the steps after its last checkpoint) takes the later values.

A training step is logged by one ``logger.log`` call per step (``v1/trainer_base.py::fit``: its
training metrics, and its validation metrics when it validates, in one record with ``timing_s/step``),
and verl writes some metrics only when non-zero (the ``filter_groups`` counts below). So when a later
record is a training step (it has ``timing_s/step``) for a step already seen, the earlier training
metrics of that step are dropped first: a re-run that evicted nothing must not keep the crashed
attempt's count. Validation metrics (``val-*``) stay, as verl also logs them alone at the step it
resumes from (validation before training, ``val_before_train``, at the checkpoint's step, whose
training record is in the earlier segment) and a re-run step that validates overwrites them.

Metric names are those verl 0.9.1 writes (read from its source):

* ``timing_s/step``: wall seconds of one training step, validation excluded
  (``trainer/ppo/v1/trainer_base.py``: ``marked_timer("step")``, ``metric_utils.compute_timing_metrics``).
* ``training/filter_groups/evicted_samples``: groups dropped by dynamic sampling in the step, and
  ``training/filter_groups/discarded_surplus_samples``: groups that passed but were not needed.
  Despite the names both count prompt groups (uids), summed over the step
  (``v1/replay_buffer.py::_evict_terminal_groups``, ``v1/utils.py::MetricsAggregator``).
* ``val-core/<data_source>/<var>/mean@<n>`` and ``val-aux/...``: validation means over n samples
  per prompt; ``var`` is ``acc`` (pass@1) or ``score``/``reward`` (continuous reward)
  (``v1/trainer_base.py::_val_metrics_update``).
* ``critic/score/mean``: mean training reward of the step.
* ``perf/total_num_tokens``, ``prompt_length/mean``, ``response_length/mean``: tokens of the batch the step
  trained on and its mean prompt and response lengths, so the sequences trained are their ratio
  (``kept_samples``: N x prompts when the batch is full).
* ``actor/grad_norm``: the actor's gradient norm; ``actor/perf/cpu_memory_used_gb``: host memory in use.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from brorl_lib.verl_recipe.data import FAMILIES

STEP_TIME = "timing_s/step"
EVICTED = "training/filter_groups/evicted_samples"
SURPLUS = "training/filter_groups/discarded_surplus_samples"
TRAIN_SCORE = "critic/score/mean"
RESPONSE_LENGTH = "response_length/mean"
PROMPT_LENGTH = "prompt_length/mean"
BATCH_TOKENS = "perf/total_num_tokens"
GRAD_NORM = "actor/grad_norm"
MEMORY_GB = "actor/perf/cpu_memory_used_gb"
VAL_METRIC = re.compile(r"^val-(?:core|aux)/(?P<source>.+)/(?P<var>[^/]+)/mean@(?P<n>\d+)$")
SEGMENT_GLOB = "segment_*.jsonl"
STEP_COLUMNS = [
    "step",
    "step_s",
    "hours",
    "kept_groups",
    "evicted_groups",
    "surplus_groups",
    "samples_step",
    "samples",
    "pass_rate",
    "train_score",
    "response_length",
    "kept_samples",
    "grad_norm",
    "memory_gb",
    "samples_table1_step",
    "samples_table1",
]
VAL_COLUMNS = ["step", "hours", "data_source", "family", "task", "var", "n", "value"]


def read_jsonl(path: str | Path) -> list[tuple[int, dict]]:
    """(step, metrics) per line of one file-logger file; a half-written last line (a crash) is skipped."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path.name}: line {i + 1} is not JSON") from None
        if not isinstance(rec, dict) or "step" not in rec or not isinstance(rec.get("data"), dict):
            raise ValueError(
                f"{path.name}: line {i + 1} is not a verl file-logger record {{'step': N, 'data': {{...}}}}"
            )
        out.append((int(rec["step"]), rec["data"]))
    return out


def is_validation_key(key: str) -> bool:
    """A validation metric (``val-core/...``, ``val-aux/...``), logged alone before training or with a step."""
    return key.startswith("val-")


def trained_steps(log_dir: str | Path) -> set[int]:
    """The steps whose training metrics a run's segments hold (what a killed launch has already logged)."""
    return {step for path in Path(log_dir).glob(SEGMENT_GLOB) for step, data in read_jsonl(path) if STEP_TIME in data}


def merge_segments(paths: list[str | Path]) -> dict[int, dict]:
    """Step -> metrics over all segments in order; a key logged again at the same step takes the later
    value, and a training step logged again (re-run after a resume) replaces all earlier training metrics
    of that step (validation metrics are kept unless logged again)."""
    merged: dict[int, dict] = {}
    for path in paths:
        for step, data in read_jsonl(path):
            metrics = merged.setdefault(step, {})
            if STEP_TIME in data:
                for key in [k for k in metrics if not is_validation_key(k)]:
                    del metrics[key]
            metrics.update(data)
    return dict(sorted(merged.items()))


def kept_samples(metrics: dict) -> float:
    """Sequences the step trained on: its batch's tokens over the mean sequence length (NaN if not logged)."""
    try:
        return metrics[BATCH_TOKENS] / (metrics[PROMPT_LENGTH] + metrics[RESPONSE_LENGTH])
    except (KeyError, ZeroDivisionError):
        return float("nan")


def steps_frame(merged: dict[int, dict], n_rollouts: int, prompts_per_step: int) -> pd.DataFrame:
    """One row per logged step: time, samples generated (before the filter) and the filter's pass rate.

    A training step keeps ``prompts_per_step`` groups; it generated those plus the evicted and surplus
    groups, N samples each (``samples_step``: what verl actually generated). Pass rate = groups that passed
    the filter / groups generated (Table 2's). ``samples_table1_step`` counts as Table 1 does: the kept
    samples over the pass rate, without the surplus groups verl's sync dynamic sampling generates while a
    full step drains and then discards. Step 0 (validation before training) has no training; hours and
    samples are cumulative.
    """
    rows = []
    for step, m in merged.items():
        trained = STEP_TIME in m
        kept = prompts_per_step if trained else 0
        evicted, surplus = float(m.get(EVICTED, 0.0)), float(m.get(SURPLUS, 0.0))
        generated = kept + evicted + surplus
        rows.append(
            {
                "step": step,
                "step_s": float(m.get(STEP_TIME, 0.0)),
                "kept_groups": kept,
                "evicted_groups": evicted,
                "surplus_groups": surplus,
                "samples_step": generated * n_rollouts,
                "pass_rate": (kept + surplus) / generated if generated else float("nan"),
                "train_score": float(m.get(TRAIN_SCORE, float("nan"))),
                "response_length": float(m.get(RESPONSE_LENGTH, float("nan"))),
                "kept_samples": kept_samples(m),
                "grad_norm": float(m.get(GRAD_NORM, float("nan"))),
                "memory_gb": float(m.get(MEMORY_GB, float("nan"))),
                "samples_table1_step": kept * n_rollouts * generated / (kept + surplus) if kept else 0.0,
            }
        )
    df = pd.DataFrame(rows, columns=[c for c in STEP_COLUMNS if c not in ("hours", "samples", "samples_table1")])
    df.insert(2, "hours", df["step_s"].cumsum() / 3600.0)
    df.insert(7, "samples", df["samples_step"].cumsum())
    df["samples_table1"] = df["samples_table1_step"].cumsum()
    return df[STEP_COLUMNS]


def validation_frame(merged: dict[int, dict], steps: pd.DataFrame) -> pd.DataFrame:
    """Validation means in long form: one row per (step, data_source, var), with the step's hours."""
    hours = dict(zip(steps["step"], steps["hours"]))
    rows = []
    for step, m in merged.items():
        for key, value in m.items():
            match = VAL_METRIC.match(key)
            if match is None or not isinstance(value, (int, float)):
                continue
            source = match["source"]
            family, _, task = source.partition(".")
            rows.append(
                {
                    "step": step,
                    "hours": hours.get(step, 0.0),
                    "data_source": source,
                    "family": family if family in FAMILIES else "other",
                    "task": task or source,
                    "var": match["var"],
                    "n": int(match["n"]),
                    "value": float(value),
                }
            )
    return pd.DataFrame(rows, columns=VAL_COLUMNS).drop_duplicates(["step", "data_source", "var", "n"], keep="last")


@dataclass(frozen=True)
class RunLog:
    """What one arm of one run logged."""

    run: str
    arm: str
    n_rollouts: int  # N
    prompts_per_step: int
    max_response_length: int  # tokens (data.max_response_length)
    device: str  # trainer.device: "cuda" on a cluster, "cpu" for the CPU harness (brorl_lib.verl_recipe.cpu)
    segments: int
    steps: pd.DataFrame  # STEP_COLUMNS
    validation: pd.DataFrame  # VAL_COLUMNS


def read_run(arm_dir: str | Path) -> RunLog:
    """An arm's logs: its resolved config (N, prompts per step, response length) and all its segments, in order."""
    arm_dir = Path(arm_dir)
    config_file = arm_dir / "config.yaml"
    if not config_file.is_file():
        raise FileNotFoundError(f"{arm_dir}: no config.yaml (the resolved verl config the launch wrote)")
    cfg = yaml.safe_load(config_file.read_text())
    n_rollouts = int(cfg["actor_rollout_ref"]["rollout"]["n"])
    prompts = int(cfg["data"]["train_batch_size"])
    response_length = int(cfg["data"]["max_response_length"])
    segments = sorted((arm_dir / "logs").glob(SEGMENT_GLOB))
    merged = merge_segments(segments)
    steps = steps_frame(merged, n_rollouts, prompts)
    return RunLog(
        arm_dir.parent.name,
        arm_dir.name,
        n_rollouts,
        prompts,
        response_length,
        str(cfg["trainer"].get("device", "cuda")),
        len(segments),
        steps,
        validation_frame(merged, steps),
    )


def find_runs(root: str | Path) -> list[RunLog]:
    """Every ``<root>/<run>/<arm>/`` with a config.yaml and at least one log segment, sorted by path."""
    root = Path(root)
    if not root.is_dir():
        return []
    dirs = sorted(
        p.parent.parent for p in root.glob(f"*/*/logs/{SEGMENT_GLOB}") if (p.parent.parent / "config.yaml").is_file()
    )
    return [read_run(d) for d in dict.fromkeys(dirs)]
