"""The phase-2 arms of the laptop experiment, all at equal generated samples (paper §4.2.1, Table 1).

Prompts per step count the batch *kept* after dynamic sampling, refilled until full (as the paper's 512 and
128 and verl's ``data.train_batch_size``); generated samples, before the filter, are what the arms spend equally.

* ProRL: N = 16, P prompts per step, learning rate eta0.
* Every other N (BroRL is N = 512): P/4 prompts per step (the paper's 512 : 128) and the square-root rule
  on the kept batch, eta0 * sqrt(N * P/4 / (16 * P)); N = 512 gets eta0 * sqrt(8).
* Ablation ("no lr rule"): the same N and prompts at eta0.
* Batch-size control (ours; the paper has none): N = 16 with as many samples per step as the largest N,
  so 8P prompts for N = 512, at that arm's learning rate. It separates "more rollouts per prompt" from
  "a bigger batch".
* Learning-rate grid: ProRL and the largest-N arm at multiples of their rule's learning rate on the first seed;
  the best on the validation split is then run under every seed ("best against best").
"""

from __future__ import annotations

from dataclasses import dataclass

from brorl_lib.core.validation import check_int, check_int_list, check_positive
from brorl_lib.paper import reported as paper
from brorl_lib.paper import setup as paper_setup

_PAPER_ARMS = paper.arm_shapes()  # Table 1: method -> (N, prompts per step)
BASE_N = _PAPER_ARMS["ProRL"][0]  # the ProRL arm's rollouts per prompt
# ProRL takes this many times the prompts per step of every other arm (Table 1: 512 vs 128, so 4)
PROMPT_RATIO = _PAPER_ARMS["ProRL"][1] // _PAPER_ARMS["BroRL"][1]
PAPER_BROAD_N = _PAPER_ARMS["BroRL"][0]
ROLES = ("paper", "dose", "ablation", "control", "pilot", "isocompute")


@dataclass(frozen=True)
class Arm:
    key: str  # folder name under runs_dir/arms/
    label: str  # name in tables and legends
    role: str  # one of ROLES
    n: int  # rollouts per prompt
    prompts: int  # prompts per step
    lr: float
    lr_factor: float = 1.0  # multiple of its rule's learning rate (the pilot's 0.5x, 2x)
    one_round: bool = False  # one generation round of exactly n x prompts samples a step, no refill (IsoCompute)
    kl_coef: float = 0.0  # weight of a KL term to the arm's starting policy (the KL-anchored control)

    @property
    def samples_per_step(self) -> int:
        return self.n * self.prompts


@dataclass(frozen=True)
class ArmDesign:
    prompts: int  # P: the ProRL arm's prompts per step
    base_lr: float  # eta0: the ProRL arm's learning rate
    rollouts: tuple[int, ...]  # N of the square-root-rule arms; must include 16
    base_lr_rollouts: tuple[int, ...] = ()  # N of the "no lr rule" ablation arms
    batch_control: bool = True
    lr_pilot_factors: tuple[float, ...] = ()  # e.g. (0.5, 2.0): the pilot's multiples of each rule's lr

    def check(self) -> None:
        check_int("prompts", self.prompts, low=PROMPT_RATIO)
        if self.prompts % PROMPT_RATIO:
            raise ValueError(
                f"prompts={self.prompts} is not allowed: it must be divisible by {PROMPT_RATIO} "
                f"(the other arms take prompts/{PROMPT_RATIO}, as the paper's 512 : 128)"
            )
        check_positive("base_lr", self.base_lr)
        check_int_list("arm_rollouts", list(self.rollouts), low=2)
        if BASE_N not in self.rollouts:
            raise ValueError(f"arm_rollouts={list(self.rollouts)} must include the ProRL arm's N={BASE_N}")
        for name, values in (("arm_rollouts", self.rollouts), ("base_lr_rollouts", self.base_lr_rollouts)):
            if len(set(values)) != len(values):
                raise ValueError(f"{name}={list(values)} names an N twice")
        if BASE_N in self.base_lr_rollouts:
            raise ValueError(f"base_lr_rollouts={list(self.base_lr_rollouts)}: N={BASE_N} already runs at base_lr")
        if self.base_lr_rollouts:  # empty: no ablation arm
            check_int_list("base_lr_rollouts", list(self.base_lr_rollouts), low=2)
        for f in self.lr_pilot_factors:
            check_positive("lr_pilot_factors item", f)
        if 1.0 in self.lr_pilot_factors:
            raise ValueError("lr_pilot_factors must not contain 1: the main arms are the pilot's 1x")
        control = self.control_prompts()
        if self.batch_control and control is None:
            raise ValueError(
                f"batch_control needs N={BASE_N} x k prompts to match the largest N's samples per step "
                f"({max(self.rollouts)} x {self.prompts // PROMPT_RATIO}); choose prompts or arm_rollouts so it divides"
            )

    @property
    def broad_prompts(self) -> int:
        return self.prompts // PROMPT_RATIO

    def control_prompts(self) -> int | None:
        """Prompts per step of the batch-size control (N=16 at the largest N's samples per step), if whole."""
        samples = max(self.rollouts) * self.broad_prompts
        return samples // BASE_N if samples % BASE_N == 0 else None

    def rule_lr(self, samples_per_step: int) -> float:
        """Paper §4.2.1: eta0 * sqrt(samples per step / the ProRL arm's), mini-batch count fixed."""
        return paper_setup.scaled_learning_rate(self.base_lr, BASE_N * self.prompts, samples_per_step)


def label(n: int) -> str:
    """ProRL and BroRL by the paper's N; any other N by its value."""
    if n == BASE_N:
        return f"ProRL N={n}"
    return f"BroRL N={n}" if n == PAPER_BROAD_N else f"N={n}"


def main_arms(design: ArmDesign) -> list[Arm]:
    """Every arm run for each seed, ProRL first, then the other N, then ablations and the control."""
    design.check()
    out = []
    for n in sorted(design.rollouts):
        prompts = design.prompts if n == BASE_N else design.broad_prompts
        role = "paper" if n in (BASE_N, PAPER_BROAD_N) else "dose"
        out.append(Arm(f"N{n}", label(n), role, n, prompts, design.rule_lr(n * prompts)))
    for n in sorted(design.base_lr_rollouts):
        out.append(Arm(f"N{n}_base_lr", f"{label(n)}, no lr rule", "ablation", n, design.broad_prompts, design.base_lr))
    if design.batch_control:
        prompts = design.control_prompts()
        out.append(
            Arm(
                f"N{BASE_N}_batch{prompts}",
                f"N={BASE_N} x {prompts} prompts (batch control)",
                "control",
                BASE_N,
                prompts,
                design.rule_lr(BASE_N * prompts),
            )
        )
    return out


def pilot_arms(design: ArmDesign) -> list[Arm]:
    """The learning-rate pilot: ProRL and the largest-N arm at each factor of their rule's learning rate."""
    ends = [a for a in main_arms(design) if a.role in ("paper", "dose") and a.n in (BASE_N, max(design.rollouts))]
    return [
        Arm(f"{a.key}_lr{f:g}x", f"{a.label}, {f:g}x lr", "pilot", a.n, a.prompts, a.lr * f, f)
        for a in ends
        for f in sorted(design.lr_pilot_factors)
    ]


def check_budgets(arms: list[Arm], budgets: list[int]) -> None:
    """Budgets of generated samples, strictly increasing, the first at least every arm's kept batch (so every
    arm has taken a step by the first)."""
    if not budgets:
        raise ValueError("budgets is empty: give at least one sample budget")
    for b in budgets:
        check_int("budgets item", b, low=1)
    if any(b2 <= b1 for b1, b2 in zip(budgets, budgets[1:])):
        raise ValueError(f"budgets={list(budgets)} is not allowed: give them in strictly increasing order")
    widest = max(arms, key=lambda a: a.samples_per_step)
    if budgets[0] < widest.samples_per_step:
        raise ValueError(
            f"budgets={list(budgets)} is not allowed: the first must be at least {widest.samples_per_step}, the kept "
            f"batch of {widest.label} ({widest.n} x {widest.prompts} prompts)"
        )
