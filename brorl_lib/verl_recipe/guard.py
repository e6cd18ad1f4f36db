"""A bound on dynamic sampling's refills, which verl 0.9.1's V1 trainer does not have, as verl's custom sampler.

With ``algorithm.filter_groups.enable=true`` the V1 trainer's replay buffer drops every group whose
rollouts are all right or all wrong and generates more prompts until the step's batch is full
(``verl/trainer/ppo/v1/replay_buffer.py::ReplayBuffer.sample``). It ignores
``algorithm.filter_groups.max_num_gen_batches`` (``trainer_base.py::_resolve_filter_groups_metric`` only
warns), so a model whose groups are all filtered, one that solves none or all of the prompts, refills
forever. ``BoundedReplayBuffer`` is verl's own replay buffer with that key honoured: a step that has
generated ``max_num_gen_batches`` rounds of ``data.train_batch_size`` prompts and still lacks a full batch
stops the run with ``DynamicSamplingExhausted``, which says why and what to change. Each training step it
also logs what verl does not: the dynamic-sampling rounds, the most samples it held in TransferQueue, and
the TaskRunner's resident memory (``smoke_metrics.step_metrics``).

verl loads it through its supported hook, ``trainer.v1.sampler.custom_sampler.{path,name}``
(``trainer_base.py::_build_replay_buffer``), in the trainer process only. A custom sampler receives neither
the filter's metric, the batch sizes, ``algorithm.filter_groups.max_inflight_gen_batches`` nor
``trainer.v1.sampler.sync_refill_failed_groups``, so the recipe passes them in ``trainer.v1.sampler.sampler_kwargs``
as interpolations of the keys verl itself reads (``configs.SAMPLER_OVERRIDES``); the values are then exactly what
verl's built-in buffer would have been given, and both keys act as verl documents them; so does
``algorithm.filter_groups.enable=false``, which turns the filter off here as in verl's own buffer.
"""

from __future__ import annotations

from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from brorl_lib.verl_recipe.smoke_metrics import step_metrics


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


class BoundedReplayBuffer(ReplayBuffer):
    """verl's sync ``ReplayBuffer`` whose refills per step are capped at ``max_num_gen_batches - 1`` rounds
    (the first round is the step's own prompts); ``max_num_gen_batches=0`` leaves it unbounded."""

    def __init__(self, *, sampler_kwargs, **kwargs):
        options = dict(sampler_kwargs or {})
        enabled = bool(options.pop("filter_groups_enable", True))  # algorithm.filter_groups.enable
        metric = options.pop("filter_groups_metric", None)
        metric = metric if enabled else None  # off: no filter, one round of the step's own prompts (verl's rule)
        self.max_rounds = int(options.pop("max_num_gen_batches", 0) or 0)
        train_batch_size = int(options.pop("train_batch_size"))
        inflight = int(options.pop("max_inflight_gen_batches", 1) or 1)
        refill_failed = bool(options.pop("sync_refill_failed_groups", False))
        super().__init__(  # as verl's _build_replay_buffer sets them for its own buffer
            sampler_kwargs=options,
            filter_groups_metric=str(metric) if metric else None,
            train_batch_size=train_batch_size,
            gen_batch_size=1 if metric or refill_failed else train_batch_size,
            max_inflight_gen_batches=inflight if metric else 1,
            sync_refill_failed_groups=refill_failed,
            **kwargs,
        )

    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        if partition_id == "val":
            return super().sample(global_steps, partition_id, batch_size)
        refill, sent, resident = self.refill_fn, [0], [self.resident_samples()]
        bounded = self.filter_groups_metric is not None and self.max_rounds > 0
        allowed = (self.max_rounds - 1) * self.train_batch_size

        def counted(count: int):
            if bounded and sent[0] + count > allowed:
                raise DynamicSamplingExhausted(
                    exhausted_message(self.max_rounds, self.train_batch_size, self.filter_groups_metric)
                )
            sent[0] += count
            resident[0] = max(resident[0], self.resident_samples())
            return refill(count)

        self.refill_fn = counted
        try:
            batch, metrics = super().sample(global_steps, partition_id, batch_size)
        finally:
            self.refill_fn = refill
        resident[0] = max(resident[0], self.resident_samples(), len(getattr(batch, "keys", ())))
        return batch, {**metrics, **step_metrics(batch_size + sent[0], self.train_batch_size, resident[0])}

    def resident_samples(self) -> int:
        """Samples the buffer tracks in TransferQueue now: one key per rollout (``<prompt uid>_<index>``), every
        partition, pending and finished."""
        return sum(len(keys) for keys in self.partitions.values())
