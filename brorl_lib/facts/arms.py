"""The arm: one way to spend an RL step's samples, N = ``n_rollouts`` per prompt at ``prompts_per_step``
prompts (paper §4.2.1, Table 1). The verl recipe, notebook 04's study and the throughput model all build
their arms from this one type; a field that a part does not use keeps its default.

Prompts per step count the batch *kept* after dynamic sampling, refilled until full (the paper's 512 and 128,
verl's ``data.train_batch_size``). ProRL is N = 16 at P prompts per step; BroRL, N = 512 at P/4.
"""

from __future__ import annotations

from dataclasses import dataclass

from brorl_lib.core.validation import check_choice, check_int, check_positive
from brorl_lib.facts.reported import arm_shapes

_PAPER_SHAPES = arm_shapes()  # Table 1: method -> (N, prompts per step)
BASE_N = _PAPER_SHAPES["ProRL"][0]  # the ProRL arm's rollouts per prompt
# ProRL takes this many times the prompts per step of BroRL (Table 1: 512 vs 128, so 4)
PROMPT_RATIO = _PAPER_SHAPES["ProRL"][1] // _PAPER_SHAPES["BroRL"][1]
PAPER_BROAD_N = _PAPER_SHAPES["BroRL"][0]
ROLES = ("paper", "isocompute", "control")  # notebook 04's three families of arms


@dataclass(frozen=True)
class Arm:
    name: str  # its folder and key: recipes/brorl/<name>, runs_dir/arms/<name>, a table's row
    n_rollouts: int  # N, samples per prompt
    prompts_per_step: int  # prompts kept per RL step
    steps: int | None = None  # RL steps to train (verl recipe); None: trained to a sample budget (notebook 04)
    mini_batches: int | None = None  # PPO mini-batches per step (verl recipe); None: the run's step settings
    label: str = ""  # its name in tables and legends
    role: str = "paper"  # one of ROLES
    lr: float | None = None  # its learning rate where set per arm (notebook 04); the verl recipe derives it
    lr_factor: float = 1.0  # multiple of its rule's learning rate (IsoCompute's grid)
    one_round: bool = False  # one generation round of exactly N x prompts samples a step, no refill (IsoCompute)
    kl_coef: float = 0.0  # weight of a KL term to the arm's starting policy (the KL-anchored control)

    def __post_init__(self) -> None:
        check_int(f"{self.name}_rollouts", self.n_rollouts, low=1)
        check_int(f"{self.name}_prompts_per_step", self.prompts_per_step, low=1)
        if self.steps is not None:
            check_int(f"{self.name}_steps", self.steps, low=1)
        if self.mini_batches is not None:
            check_int("ppo_mini_batches", self.mini_batches, low=1)
            if self.prompts_per_step % self.mini_batches:
                raise ValueError(
                    f"{self.name}_prompts_per_step={self.prompts_per_step} is not allowed: it must be divisible "
                    f"by ppo_mini_batches={self.mini_batches} (the same mini-batch count in both arms)"
                )
        check_choice("role", self.role, ROLES)
        if self.lr is not None:
            check_positive(f"{self.name}_lr", self.lr)

    @property
    def samples_per_step(self) -> int:
        """Samples kept per step: N x prompts."""
        return self.n_rollouts * self.prompts_per_step


def paper_arms() -> tuple[Arm, ...]:
    """The paper's two arms (§4.2.1): ProRL and BroRL, named as Table 1 names them."""
    return tuple(Arm(method, n, prompts) for method, (n, prompts) in _PAPER_SHAPES.items())
