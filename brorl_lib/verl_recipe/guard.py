"""A bound on dynamic sampling's refills, which verl 0.9.1's V1 trainer does not have.

With ``algorithm.filter_groups.enable=true`` the V1 trainer's replay buffer drops every group whose
rollouts are all right or all wrong and generates more prompts until the step's batch is full
(``verl/trainer/ppo/v1/replay_buffer.py::ReplayBuffer.sample``). It ignores
``algorithm.filter_groups.max_num_gen_batches`` (``trainer_base.py::_resolve_filter_groups_metric`` only
warns), so a model whose groups are all filtered, one that solves none or all of the prompts, refills
forever. verl imports this module in every process (``VERL_USE_EXTERNAL_MODULES``; the launch scripts
set it), and it makes the trainer honour that key: a step that has generated ``max_num_gen_batches``
rounds of ``data.train_batch_size`` prompts and still lacks a full batch stops the run with
``DynamicSamplingExhausted``, which says why and what to change.
"""

from __future__ import annotations

import functools


class DynamicSamplingExhausted(RuntimeError):
    """Dynamic sampling generated its maximum number of rounds without filling the step's batch."""


def exhausted_message(rounds: int, train_batch_size: int, metric: str) -> str:
    return (
        f"dynamic sampling generated {rounds} rounds of {train_batch_size} prompts "
        f"(algorithm.filter_groups.max_num_gen_batches={rounds}) and still lacks a full batch of "
        f"{train_batch_size} groups: nearly every group's rollouts are all right or all wrong on "
        f"'{metric}', so the filter drops them. The model's pass rate on the training prompts is (close to) "
        "0 or 1. Start from a checkpoint that solves some but not all of them, change the training data's "
        "difficulty, or raise algorithm.filter_groups.max_num_gen_batches (0 = unbounded, verl's behaviour)"
    )


def bounded(sample, max_rounds: int, metric: str):
    """``ReplayBuffer.sample`` with its ``refill_fn`` counted per call: more than ``max_rounds - 1`` rounds
    of refills (the first round is the step's own prompts) raise ``DynamicSamplingExhausted``."""

    @functools.wraps(sample)
    def wrapper(self, global_steps, partition_id, batch_size):
        if partition_id == "val" or self.filter_groups_metric is None or self.refill_fn is None:
            return sample(self, global_steps, partition_id, batch_size)
        refill, sent = self.refill_fn, [0]
        allowed = (max_rounds - 1) * self.train_batch_size

        def counted(count: int):
            if sent[0] + count > allowed:
                raise DynamicSamplingExhausted(exhausted_message(max_rounds, self.train_batch_size, metric))
            sent[0] += count
            return refill(count)

        self.refill_fn = counted
        try:
            return sample(self, global_steps, partition_id, batch_size)
        finally:
            self.refill_fn = refill

    return wrapper


def install() -> None:
    """Wrap the V1 trainer's replay-buffer construction so that its buffer's ``sample`` is bounded."""
    from verl.trainer.ppo.v1 import trainer_base
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    build = trainer_base.PPOTrainer._build_replay_buffer
    if getattr(build, "brorl_guard", False):
        return

    @functools.wraps(build)
    def build_bounded(self):
        buffer = build(self)
        groups = self.config.algorithm.get("filter_groups", None)
        rounds = int(groups.get("max_num_gen_batches", 0) or 0) if groups is not None else 0
        if type(buffer) is ReplayBuffer and groups is not None and groups.get("enable", False) and rounds > 0:
            buffer.sample = bounded(ReplayBuffer.sample, rounds, str(groups.get("metric"))).__get__(buffer)
        return buffer

    build_bounded.brorl_guard = True
    trainer_base.PPOTrainer._build_replay_buffer = build_bounded


install()
