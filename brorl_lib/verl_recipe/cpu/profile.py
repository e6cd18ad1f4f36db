"""The ``cpu`` launch profile: the committed arm's overrides plus a short, listed CPU delta.

``overrides(arm)`` starts from exactly the overrides of ``recipes/brorl/<arm>/`` (``record.arm_overrides``)
and changes or adds only the keys of ``delta(arm)``, in six groups:

* **rollout**: ``actor_rollout_ref.rollout.name=hf`` (the transformers rollout of ``rollout.py``; vLLM has
  no CPU build that fits verl 0.9.1's pins);
* **device**: ``trainer.device=cpu``;
* **FSDP2**: ``strategy=fsdp2`` for actor and reference (FSDP1 syncs module states over a GPU);
* **attention**: sdpa instead of flash-attention 2, and no padding removal (correct on CPU but 10-20x
  slower there);
* **sizes**: N, prompts per step (the paper's P : P/4), PPO mini-batches (ProRL keeps the recipe's four;
  BroRL's two prompts a step allow two; in both, the later mini-batches are off-policy and clipping acts),
  the learning rate they imply under the recipe's square-root rule, prompt and response lengths, steps,
  validation and checkpoint frequency, and one worker each for data loading, agent loop and reward (each
  worker is a process);
* **nodes**: one node with one logical GPU (Ray must see a "GPU" for verl's worker groups), Ray CPUs
  declared beyond the two real ones and one TransferQueue storage unit (verl's defaults start more actors
  than two CPUs can schedule, and the run waits silently).

Everything else (advantage estimator, clipping, KL loss, dynamic sampling and its round cap through the
custom sampler, TransferQueue's capacity rule, checkpoint retention, truncated importance sampling,
temperature, validation sampling, reward function with Math-Verify's process pool, logger, resume) is the
committed recipe's, and the tiny model carries the paper's tokenizer family (``tiny_model``), so the CPU run
proves the cluster recipe, not a different one.
"""

from __future__ import annotations

from dataclasses import dataclass

from brorl_lib.facts.arms import Arm
from brorl_lib.verl_recipe import configs

PLUGIN_MODULE = "brorl_lib.verl_recipe.cpu.plugin"
RUN_NAME = "verl-cpu"  # the committed CPU run: data/runs/verl/verl-cpu/<arm>/
# Environment the CPU launch adds (the plugin is imported before the tokenizer fallback: it registers the
# platform that verl's modules ask for at import).
ENV = {"VERL_PLATFORM": "cpu", "VERL_ENGINE_DEVICE": "cuda"}  # cuda: verl's FSDP engine is registered for it
MAX_PROMPT_LENGTH = 1024  # tokens of the tiny model's byte-level tokenizer: the CPU tasks' prompts fit
MAX_RESPONSE_LENGTH = 32  # "<answer>...</answer>" and the end-of-turn token
# The CPU arms, our choice: ProRL keeps N=16; BroRL raises N 8x and takes a quarter of the prompts
# (the paper's 32x and P : P/4 would be 512 samples a prompt, too slow here): 2x the samples per step. Two
# BroRL prompts give it two PPO mini-batches, so its second is off-policy as ProRL's later ones are.
CPU_ARMS: dict[str, tuple[int, int]] = {"prorl": (16, 8), "brorl": (128, 2)}  # arm -> (N, prompts per step)
DELTA_GROUPS = ("rollout", "device", "FSDP2", "attention", "sizes", "nodes")


@dataclass(frozen=True)
class CpuSettings:
    """How long a CPU run is; the committed run's defaults (our choice: a few minutes per arm on 2 cores)."""

    steps: int = 6
    test_freq: int = 2
    save_freq: int = 2
    run_name: str = RUN_NAME


def mini_batches(prompts: int) -> int:
    """The recipe's PPO mini-batch count, or the largest count below it that divides ``prompts``."""
    return max(m for m in range(1, configs.PPO_MINI_BATCHES + 1) if prompts % m == 0)


def cpu_arms(steps: int) -> dict[str, Arm]:
    """The CPU arms: ProRL with the recipe's four PPO mini-batches, BroRL with two (its two prompts)."""
    return {name: configs.arm(name, n, p, steps, mini_batches=mini_batches(p)) for name, (n, p) in CPU_ARMS.items()}


def delta(arm_name: str, settings: CpuSettings) -> dict[str, tuple[str, str]]:
    """Hydra key -> (value, group) of every override the CPU profile changes or adds for ``arm_name``."""
    arms = cpu_arms(settings.steps)
    arm = arms[arm_name]
    lr = configs.learning_rate(arm, arms[configs.BASE_ARM])
    groups = {
        "rollout": {"actor_rollout_ref.rollout.name": "hf"},
        "device": {"trainer.device": "cpu"},
        "FSDP2": {"actor_rollout_ref.actor.strategy": "fsdp2", "actor_rollout_ref.ref.strategy": "fsdp2"},
        "attention": {
            "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
            "actor_rollout_ref.model.use_remove_padding": "false",
        },
        "sizes": {
            "actor_rollout_ref.rollout.n": str(arm.n_rollouts),
            "data.train_batch_size": str(arm.prompts_per_step),
            "actor_rollout_ref.actor.ppo_mini_batch_size": str(configs.mini_batch_prompts(arm)),
            "actor_rollout_ref.actor.optim.lr": repr(lr),
            "data.max_prompt_length": str(MAX_PROMPT_LENGTH),
            "data.max_response_length": str(MAX_RESPONSE_LENGTH),
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": str(2 * (MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH)),
            "trainer.total_training_steps": str(settings.steps),
            "trainer.test_freq": str(settings.test_freq),
            "trainer.save_freq": str(settings.save_freq),
            "data.dataloader_num_workers": "0",
            "actor_rollout_ref.rollout.agent.num_workers": "1",
            "reward.num_workers": "1",
        },
        "nodes": {
            "trainer.nnodes": "1",
            "trainer.n_gpus_per_node": "1",
            "+ray_kwargs.ray_init.num_gpus": "1",
            "+ray_kwargs.ray_init.num_cpus": "16",
            "transfer_queue.backend.SimpleStorage.num_data_storage_units": "1",
        },
    }
    return {key: (value, group) for group, items in groups.items() for key, value in items.items()}


def override_key(override: str) -> str:
    """The Hydra key of ``key=value`` (a leading ``+`` kept: it is part of how the key is given)."""
    return override.split("=", 1)[0]


def apply_delta(base: list[str], changes: dict[str, str]) -> list[str]:
    """``base`` with each key of ``changes`` set to its value: replaced in place, or appended if new."""
    out, seen = [], set()
    for line in base:
        key = override_key(line)
        if key in changes:
            out.append(f"{key}={changes[key]}")
            seen.add(key)
        else:
            out.append(line)
    return out + [f"{k}={v}" for k, v in changes.items() if k not in seen]


def overrides(arm_name: str, committed: list[str], settings: CpuSettings) -> list[str]:
    """The CPU profile of one arm: ``committed`` (the arm's recorded overrides) plus ``delta``."""
    return apply_delta(committed, {k: v for k, (v, _) in delta(arm_name, settings).items()})


def env(cluster_modules: str) -> dict[str, str]:
    """Environment of a CPU launch: the plugin, then the cluster launch's own modules, through verl's hook; ``ENV``."""
    return {"VERL_USE_EXTERNAL_MODULES": f"{PLUGIN_MODULE},{cluster_modules}", **ENV}
