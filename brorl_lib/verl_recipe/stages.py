"""The staged plan for the first booking of real hardware (docs/gpu-and-clusters.md, "A staged plan"): one 8-GPU node
for the install, one BroRL-shaped step (N=512 x 16 prompts) and one ProRL-shaped step (N=16 x 64), both at the
paper's full response length; then two nodes for one full BroRL step (N=512 x 128).

Each stage runs the smoke profile's launch script (``recipes/brorl/smoke/<arm>/launch.sh``: the paper's recipe,
full length, a checkpoint after each step) with a few Hydra overrides after it (``extra_overrides``: Hydra takes
the last value of a key): the stage's nodes, prompts and PPO mini-batch (the arm's mini-batch count kept), one step,
no validation. Its hours are the plan's own estimate (``report.plan_table``: Table 1's hours per step scaled
linearly by samples and GPUs), never a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

from brorl_lib.verl_recipe import configs, report


@dataclass(frozen=True)
class Stage:
    """One step of one arm's shape on ``nnodes`` nodes of 8 GPUs; ``name`` keeps its checkpoints and logs apart."""

    name: str
    arm: str
    prompts: int
    nnodes: int
    n_gpus_per_node: int = 8

    @property
    def n_rollouts(self) -> int:
        return configs.PAPER_ARMS[self.arm][0]


STAGES = (
    Stage("node-brorl", "brorl", 16, 1),
    Stage("node-prorl", "prorl", 64, 1),
    Stage("two-nodes-brorl", "brorl", configs.PAPER_ARMS["brorl"][1], 2),
)


def plan_row(stage: Stage):
    """The plan's row for the stage: one step of its shape on its GPUs (``report.plan_table``)."""
    cfg = report.VerlTrainingConfig(
        arms=[stage.arm],
        nnodes=stage.nnodes,
        n_gpus_per_node=stage.n_gpus_per_node,
        **{f"{stage.arm}_prompts_per_step": stage.prompts, f"{stage.arm}_steps": 1},
    )
    return report.plan_table(cfg).iloc[0]


def extra_overrides(stage: Stage) -> list[str]:
    """Hydra overrides after the smoke profile's: the stage's nodes, prompts and mini-batch, one step, no validation."""
    arm = configs.arm(stage.arm, stage.n_rollouts, stage.prompts, 1)
    return [
        f"trainer.nnodes={stage.nnodes}",
        f"trainer.n_gpus_per_node={stage.n_gpus_per_node}",
        f"data.train_batch_size={stage.prompts}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={configs.mini_batch_prompts(arm)}",
        "trainer.total_training_steps=1",
        "trainer.val_before_train=false",
        "trainer.test_freq=-1",
    ]


def command(stage: Stage) -> str:
    """The stage's launch, with checkpoints and logs of its own (verl's checkpoints are tied to the GPU count)."""
    where = f"CKPT_DIR=$WORK/{stage.name}/checkpoints RUN_DIR=$WORK/{stage.name}/runs"
    return f"{where} bash recipes/brorl/smoke/{stage.arm}/launch.sh {' '.join(extra_overrides(stage))}"
