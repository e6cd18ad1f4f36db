"""The smoke report's gates: each metric it reads from an arm's logs against an expected range, PASS or FAIL.

A range comes from the paper where the paper gives the number (Table 1's hours per step, Table 2's dynamic-sampling
pass rate, both reported for 64 GPUs, scaled linearly to the smoke's GPUs by the caller: an *estimate*); where it
gives none, from a parameter below whose comment says it is our choice.
docs/gpu-and-clusters.md#the-smoke-runs-hours-limits-and-gates lists every range (``ranges_table`` writes it; a test
keeps the two equal). A metric that was not logged fails: a gate that cannot see its metric says nothing.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from brorl_lib.facts import reported as paper
from brorl_lib.verl_recipe import configs, logs

# --- the ranges' parameters ---
STEP_TIME_BAND = (0.25, 2.0)  # our choice: x the estimate; slower than 2x breaks the plan, faster than 1/4 is suspect
PASS_RATE_MARGIN = 0.2  # our choice: Table 2's pass rate +- this (the smoke's first steps, not the paper's average)
# our choice: at most this x 1/pass rate rounds; verl's sync refill also generates, then discards, the groups in
# flight when the batch fills, and the round cap is 10
ROUNDS_HEADROOM = 2.0
NONZERO = 1e-9  # "above 0": from the second PPO mini-batch on the policy is no longer the one that sampled
PPO_KL_HIGH = 0.01  # our choice: |mean log-ratio| between the sampling and the updated policy within one step
CLIPFRAC_HIGH = 0.1  # our choice: share of tokens clipped; more means the updates leave the trust region
RESPONSE_CLIP_HIGH = 0.25  # our choice: share of responses cut at data.max_response_length (16,384 tokens)
ENTROPY_RANGE = (0.05, 2.0)  # our choice: nats per token; below: collapse, above: sampling noise at temperature 1.2
# peak GPU memory, GiB: above the sharded weights, gradients and Adam state of a 1.5B model (about 21 GB / 16 GPUs),
# below 95% of an H100's 80 GiB (the paper's GPU, §4.2.1): our choice of headroom
PEAK_MEMORY_RANGE = (1.0, 0.95 * 80)
KEPT_FRACTION = "kept_fraction"  # logs.steps_frame's pass_rate: groups that passed the filter / groups generated


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.3g}"


@dataclass(frozen=True)
class Gate:
    """One metric, the steps' values it takes (``every`` step's, their ``median`` or ``max``), its range, and why."""

    name: str
    key: str  # a verl or sampler metric, or KEPT_FRACTION
    low: float
    high: float
    basis: str
    over: str = "every"
    absolute: bool = False


@dataclass(frozen=True)
class Verdict:
    gate: Gate
    values: tuple[float, ...]  # what the gate compared, one per step (or the one median or maximum)
    ok: bool


def gates(arm: str, step_s_estimate: float) -> list[Gate]:
    """The gates of one paper arm; ``step_s_estimate`` is the plan's seconds per step on the smoke's GPUs."""
    n, _ = configs.PAPER_ARMS[arm]
    rate = paper.table2_pass_rates()[n]
    lo, hi = STEP_TIME_BAND
    return [
        Gate(
            "seconds per step",
            logs.STEP_TIME,
            lo * step_s_estimate,
            hi * step_s_estimate,
            f"Table 1's hours per step, scaled to these GPUs (estimate), x {lo}-{hi} (our band)",
            "median",
        ),
        Gate(
            "peak GPU memory, GiB",
            "actor/perf/max_memory_reserved_gb",
            *PEAK_MEMORY_RANGE,
            "our choice: the actor's sharded state to 95% of an H100's 80 GiB",
            "max",
        ),
        Gate(
            "dynamic sampling kept fraction",
            KEPT_FRACTION,
            rate - PASS_RATE_MARGIN,
            rate + PASS_RATE_MARGIN,
            f"Table 2's pass rate of the arm's N +- {PASS_RATE_MARGIN} (our margin)",
        ),
        Gate(
            "dynamic sampling rounds",
            "brorl/sampler/gen_rounds",
            1.0,
            ROUNDS_HEADROOM / rate,
            f"1 to {ROUNDS_HEADROOM} / Table 2's pass rate (our headroom for verl's refill)",
        ),
        Gate(
            "actor/ppo_kl (absolute)",
            "actor/ppo_kl",
            NONZERO,
            PPO_KL_HIGH,
            "above 0 (off-policy later mini-batches) to our bound",
            absolute=True,
        ),
        Gate("actor/pg_clipfrac", "actor/pg_clipfrac", NONZERO, CLIPFRAC_HIGH, "above 0 (clipping acts) to our bound"),
        Gate(
            "response_length/clip_ratio",
            "response_length/clip_ratio",
            0.0,
            RESPONSE_CLIP_HIGH,
            "our bound on responses cut at the length limit",
        ),
        Gate("actor/entropy", "actor/entropy", *ENTROPY_RANGE, "our range, nats per token"),
    ]


def step_values(arm_dir: str | Path) -> list[dict[str, float]]:
    """Each trained step's metrics from an arm's logs, plus its kept fraction (``logs.read_run``'s pass rate)."""
    run = logs.read_run(arm_dir)
    merged = logs.merge_segments(sorted((Path(arm_dir) / "logs").glob(logs.SEGMENT_GLOB)))
    rates = dict(zip(run.steps["step"], run.steps["pass_rate"]))
    return [{**m, KEPT_FRACTION: float(rates[s])} for s, m in merged.items() if logs.STEP_TIME in m]


def judge(gate: Gate, steps: list[dict[str, float]]) -> Verdict:
    """The gate on the steps' values; a step without the metric (or a non-finite value) fails it."""
    raw = [float(s[gate.key]) if gate.key in s else math.nan for s in steps]
    values = [abs(v) for v in raw] if gate.absolute else raw
    if not values or any(not math.isfinite(v) for v in values):
        return Verdict(gate, tuple(values), False)
    if gate.over == "median":
        values = [statistics.median(values)]
    elif gate.over == "max":
        values = [max(values)]
    return Verdict(gate, tuple(values), all(gate.low <= v <= gate.high for v in values))


def check(arm: str, arm_dir: str | Path, step_s_estimate: float) -> list[Verdict]:
    steps = step_values(arm_dir)
    return [judge(g, steps) for g in gates(arm, step_s_estimate)]


def format_verdicts(verdicts: list[Verdict]) -> str:
    """One line a gate: PASS or FAIL, the value(s), the range and its basis."""

    def shown(values: tuple[float, ...]) -> str:
        return ", ".join("not logged" if math.isnan(v) else _num(v) for v in values) or "not logged"

    return "\n".join(
        f"  {'PASS' if v.ok else 'FAIL'}  {v.gate.name}: {shown(v.values)} "
        f"(expected {_num(v.gate.low)} to {_num(v.gate.high)}: {v.gate.basis})"
        for v in verdicts
    )


def ranges_table(estimates: dict[str, float]) -> str:
    """docs/gpu-and-clusters.md's table of the gates' ranges per arm (``estimates``: arm -> seconds per step)."""
    arms, label = list(estimates), {m.lower(): m for m in paper.arm_shapes()}
    rows = [
        "| gate | " + " | ".join(label[a] for a in arms) + " | basis |",
        "|---|" + "---|" * len(arms) + "---|",
    ]
    by_arm = {a: gates(a, s) for a, s in estimates.items()}
    for i, g in enumerate(by_arm[arms[0]]):
        cells = [f"{_num(by_arm[a][i].low)} to {_num(by_arm[a][i].high)}" for a in arms]
        rows.append(f"| {g.name} ({g.over}) | " + " | ".join(cells) + f" | {g.basis} |")
    return "\n".join(rows)
