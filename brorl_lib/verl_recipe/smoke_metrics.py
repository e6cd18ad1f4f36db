"""What the smoke run records per arm, and where each value comes from: verl's own metric where verl 0.9.1 logs
one, else the recipe's sampler (``guard.BoundedReplayBuffer``, loaded in the trainer's process, the TaskRunner),
which adds ``step_metrics`` to each training step's log.

``measures`` reads them back from an arm's JSONL segments. What neither logs is listed in ``NOT_COLLECTED``
with the reason, so that the smoke report says it instead of printing nothing.
"""

from __future__ import annotations

from pathlib import Path

from brorl_lib.verl_recipe import logs

# Added by the recipe's sampler to each training step (verl 0.9.1 logs none of them).
ROUNDS_KEY = "brorl/sampler/gen_rounds"  # prompts generated for the step / data.train_batch_size
RESIDENT_KEY = "brorl/sampler/peak_resident_samples"  # most samples tracked in TransferQueue while sampling
RSS_KEY = "brorl/task_runner/rss_gb"  # resident memory of the trainer's process, the TaskRunner (1e9 bytes)
NODE_AVAILABLE_KEY = "brorl/task_runner/node_available_gb"  # its node's available memory (1e9 bytes)

# measure -> (logged key, who logs it, what it is); the largest value over the arm's training steps is reported
MEASURES: dict[str, tuple[str, str, str]] = {
    "peak_gpu_memory_gb": (
        "actor/perf/max_memory_reserved_gb",
        "verl (verl/workers/engine_workers.py)",
        "the actor's torch.cuda.max_memory_reserved on its rank 0, GiB",
    ),
    "task_runner_rss_gb": (RSS_KEY, "the recipe's sampler", "the TaskRunner process's resident memory, GB"),
    "task_runner_node_available_gb": (NODE_AVAILABLE_KEY, "the recipe's sampler", "its node's available memory"),
    "peak_resident_samples": (RESIDENT_KEY, "the recipe's sampler", "samples held in TransferQueue while sampling"),
    "gen_rounds": (ROUNDS_KEY, "the recipe's sampler", "dynamic sampling: prompts generated / prompts kept"),
    "filtered_samples": (
        "training/filter_groups/evicted_samples",
        "verl (verl/trainer/ppo/v1/replay_buffer.py)",
        "samples dropped by dynamic sampling's filter",
    ),
    "gen_s": ("timing_s/gen", "verl (trainer_base.py)", "rollout and reward scoring of the step, seconds"),
    "step_s": (logs.STEP_TIME, "verl (trainer_base.py)", "the whole step, seconds"),
}
NOT_COLLECTED = {
    "reward time alone": (
        "verl 0.9.1 scores each sample inside its agent loop's reward workers and logs no separate time there "
        "(timing_s/reward is absent from every step of the CPU runs); it is part of gen_s"
    ),
    "vLLM's GPU memory": (
        "vLLM takes actor_rollout_ref.rollout.gpu_memory_utilization of each GPU up front and verl logs no peak; "
        "peak_gpu_memory_gb is the trainer side's"
    ),
}
VALIDATION_PREFIX = "val-core/"  # verl: val-core/<data source>/<metric>/mean@<n>, at step 0 with val_before_train


def step_metrics(prompts_generated: int, train_batch_size: int, peak_resident: int) -> dict[str, float]:
    """The sampler's per-step metrics, measured in the process it runs in (verl loads a custom sampler in the
    trainer only, the TaskRunner actor: verl/trainer/ppo/v1/trainer_base.py)."""
    import psutil

    return {
        ROUNDS_KEY: prompts_generated / train_batch_size,
        RESIDENT_KEY: float(peak_resident),
        RSS_KEY: psutil.Process().memory_info().rss / 1e9,
        NODE_AVAILABLE_KEY: psutil.virtual_memory().available / 1e9,
    }


def measures(arm_dir: str | Path) -> dict[str, float | None]:
    """Each ``MEASURES`` value, the largest over the arm's logged training steps (None: never logged), and the
    step-0 validation per source (``val-core/...`` keys logged at step 0) under their own keys."""
    merged = logs.merge_segments(sorted((Path(arm_dir) / "logs").glob(logs.SEGMENT_GLOB)))
    if not merged:
        raise RuntimeError(f"{arm_dir}/logs: no log segment to read")
    trained = [m for m in merged.values() if logs.STEP_TIME in m]
    out: dict[str, float | None] = {}
    for name, (key, _, _) in MEASURES.items():
        values = [float(m[key]) for m in trained if key in m]
        out[name] = max(values) if values else None
    out |= {k: float(v) for k, v in merged.get(0, {}).items() if k.startswith(VALIDATION_PREFIX) and "/mean@" in k}
    return out


def format_measures(values: dict[str, float | None]) -> str:
    """Indented lines: each measure (or 'not logged'), the step-0 validation, and what is not collected."""
    lines = [
        f"  {name}: {'not logged' if values.get(name) is None else f'{values[name]:.4g}'}  ({key}, {who})"
        for name, (key, who, _) in MEASURES.items()
    ]
    val = {k: v for k, v in values.items() if k.startswith(VALIDATION_PREFIX)}
    lines += [f"  step 0 {k}: {v:.4g}" for k, v in sorted(val.items())] or ["  step 0 validation: not logged"]
    lines += [f"  not collected, {what}: {why}" for what, why in NOT_COLLECTED.items()]
    return "\n".join(lines)
