"""The paper's arm shapes (§4.2.1, Table 1) and the record of one phase-2 arm (``study_phase2`` builds them).

Prompts per step count the batch *kept* after dynamic sampling, refilled until full (as the paper's 512 and
128 and verl's ``data.train_batch_size``); generated samples, before the filter, are what the arms spend equally.
ProRL is N = 16 at P prompts per step; BroRL, N = 512 at P/4 (the paper's 512 : 128).
"""

from __future__ import annotations

from dataclasses import dataclass

from brorl_lib.facts import reported as paper

_PAPER_ARMS = paper.arm_shapes()  # Table 1: method -> (N, prompts per step)
BASE_N = _PAPER_ARMS["ProRL"][0]  # the ProRL arm's rollouts per prompt
# ProRL takes this many times the prompts per step of every other arm (Table 1: 512 vs 128, so 4)
PROMPT_RATIO = _PAPER_ARMS["ProRL"][1] // _PAPER_ARMS["BroRL"][1]
PAPER_BROAD_N = _PAPER_ARMS["BroRL"][0]
ROLES = ("paper", "isocompute", "control")  # study_phase2's three families of arms


@dataclass(frozen=True)
class Arm:
    key: str  # folder name under runs_dir/arms/
    label: str  # name in tables and legends
    role: str  # one of ROLES
    n: int  # rollouts per prompt
    prompts: int  # prompts per step
    lr: float
    lr_factor: float = 1.0  # multiple of its rule's learning rate (IsoCompute's grid)
    one_round: bool = False  # one generation round of exactly n x prompts samples a step, no refill (IsoCompute)
    kl_coef: float = 0.0  # weight of a KL term to the arm's starting policy (the KL-anchored control)
