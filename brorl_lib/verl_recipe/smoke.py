"""The smoke profile: what a user runs first on real hardware, before the 64-GPU run.

``recipes/brorl/smoke/<arm>/`` is each committed arm's overrides plus a short, listed delta (``delta``):
two nodes of ``n_gpus_per_node`` GPUs (NCCL across nodes, Ray placing workers and the TaskRunner on either
node), the paper's N, prompts per step and full response length unchanged (so vLLM, TransferQueue, the
driver's padded batch, the full-length micro-batches and dynamic sampling meet the paper's step), ``steps``
steps with a checkpoint after each, BroRL first (``ORDER``: its 65,536-sample step is the least tried).
Everything else is the recipe's, including the start model's tokenizer, flash-attn and Math-Verify's pool in
the reward worker: every failure a week-long run could meet in its first step, met before the week starts.
Each arm's report adds what ``smoke_metrics`` reads from its logs (peak GPU memory, the TaskRunner's memory,
TransferQueue's resident samples, step-0 validation per source, dynamic-sampling rounds, step times).

``python -m brorl_lib.verl_recipe.smoke`` runs preflight's checks on the smoke profile first and stops on a
failure, and refuses an arm whose checkpoint or run folder holds an earlier run (``--move-aside`` renames them);
then, per arm: a launch killed after checkpoint 1, a relaunch that must resume at step 2 into a new log segment,
then the seconds per step read back from verl's own logs, the hours they imply for the paper's steps (an estimate
from this machine, not from Table 1) and the report's gates (``smoke_gates``). Each launch has a time limit of
``LIMIT_FACTOR`` x the plan's estimate of it plus ``STARTUP_S`` (``launch_limits_s``); an arm past it, or failing,
is reported and the next arm still runs. SIGTERM, SIGINT or SIGHUP end every process it started, Ray's included
(``processes``); the terminal shows each stage and where its log is.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.signals import Stopped
from brorl_lib.core.validation import check_int
from brorl_lib.facts import reported as paper
from brorl_lib.facts.arms import Arm
from brorl_lib.verl_recipe import configs, launch, logs, preflight, processes, smoke_gates, smoke_metrics
from brorl_lib.verl_recipe.processes import say
from brorl_lib.verl_recipe.tasks import DEFAULT_TASKS

RECIPE_DIR = REPO_ROOT / "recipes" / "brorl" / "smoke"
RUN_NAME = "smoke"  # logs under data/runs/verl/smoke/<arm>/ unless RUN_DIR is set
DELTA_GROUPS = ("nodes", "length", "schedule")
ORDER = ("brorl", "prorl")  # BroRL first: a failure of its larger step surfaces before ProRL's week
PAPER_GPUS: int = paper.setting("gpus")  # §4.2.1
# The validation set of the documented data command (docs/gpu-and-clusters.md): dataset_val_count's 64 math rows
# and rg_val_per_task=100 prompts of each default Reasoning Gym task; the smoke reads DATA_DIR's own count.
DOCUMENTED_VAL_PROMPTS = 64 + 100 * len(DEFAULT_TASKS)
# Each launch's time limit: its estimate (launch_hours) x LIMIT_FACTOR + STARTUP_S. Our choices: the factor is the
# top of the seconds-per-step gate (a step the report passes never times out); STARTUP_S covers Ray, loading the
# model, starting vLLM and saving a checkpoint (about 21 GB).
LIMIT_FACTOR = smoke_gates.STEP_TIME_BAND[1]
STARTUP_S = 1800.0


@dataclass(frozen=True)
class SmokeSettings:
    """The smoke profile's shape (our choices: two 8-GPU nodes, the fewest that cross a node boundary; the
    paper's full response length, as the paper profile; two steps, so a kill after step 1 leaves one to resume)."""

    nnodes: int = 2
    n_gpus_per_node: int = 8
    response_length: int = configs.MAX_RESPONSE_LENGTH  # tokens: the paper's (BroRL §4.2.1)
    steps: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.nnodes, int) or self.nnodes < 2:
            raise ValueError(
                f"trainer.nnodes={self.nnodes!r} is not allowed in the smoke profile: it covers at least 2 nodes "
                "(NCCL across nodes, Ray's placement over nodes); one node is what preflight checks"
            )
        check_int("trainer.n_gpus_per_node", self.n_gpus_per_node, low=1)
        check_int("data.max_response_length", self.response_length, low=1)
        check_int("trainer.total_training_steps", self.steps, low=2)  # a kill after step 1, a resume to step 2


def delta(settings: SmokeSettings = SmokeSettings()) -> dict[str, tuple[str, str]]:
    """Hydra key -> (value, group) of every override the smoke profile changes in an arm's recorded overrides."""
    groups = {
        "nodes": {"trainer.nnodes": str(settings.nnodes), "trainer.n_gpus_per_node": str(settings.n_gpus_per_node)},
        "length": {
            "data.max_response_length": str(settings.response_length),
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": str(
                2 * (configs.MAX_PROMPT_LENGTH + settings.response_length)
            ),
        },
        "schedule": {
            "trainer.total_training_steps": str(settings.steps),
            "trainer.save_freq": "1",
            "trainer.test_freq": str(settings.steps),
        },
    }
    return {key: (value, group) for group, items in groups.items() for key, value in items.items()}


def overrides(committed: list[str], settings: SmokeSettings = SmokeSettings()) -> list[str]:
    """The smoke profile of one arm: ``committed`` (the arm's recorded overrides) plus ``delta``."""
    from brorl_lib.verl_recipe.cpu.profile import apply_delta

    return apply_delta(committed, {k: v for k, (v, _) in delta(settings).items()})


def arm(name: str, settings: SmokeSettings = SmokeSettings()) -> Arm:
    """The paper's arm ``name`` (its N and prompts per step) for ``settings.steps`` steps."""
    n, prompts = configs.PAPER_ARMS[name]
    return configs.arm(name, n, prompts, settings.steps)


def step_hours(name: str, settings: SmokeSettings = SmokeSettings()) -> float:
    """Estimated hours of one of the arm's steps on the smoke's GPUs: Table 1's (reported, 64 GPUs), scaled
    linearly to ``settings``' GPUs (our assumption)."""
    return configs.reported_hours_per_step(name) * PAPER_GPUS / (settings.nnodes * settings.n_gpus_per_node)


def validation_hours(settings: SmokeSettings = SmokeSettings(), val_prompts: int = DOCUMENTED_VAL_PROMPTS) -> float:
    """Estimated hours of one validation: ``val_prompts`` x verl's validation samples per prompt at Table 2's
    generation throughput for that N (reported, 64 GPUs), scaled linearly to ``settings``' GPUs (our assumption)."""
    check_int("validation prompts", val_prompts, low=0)
    per_s = paper.table2_throughput()[configs.VAL_SAMPLES] * settings.nnodes * settings.n_gpus_per_node / PAPER_GPUS
    return val_prompts * configs.VAL_SAMPLES / per_s / 3600


def launch_hours(
    name: str, settings: SmokeSettings = SmokeSettings(), val_prompts: int = DOCUMENTED_VAL_PROMPTS
) -> tuple[float, float]:
    """Estimated hours of the arm's two launches: validation before training and step 1 (then the kill), and the
    resumed steps with the last step's validation (``trainer.test_freq`` = the steps; no validation before training
    on a resumed launch: launch_arm.sh)."""
    step, val = step_hours(name, settings), validation_hours(settings, val_prompts)
    return val + step, (settings.steps - 1) * step + val


def arm_hours(name: str, settings: SmokeSettings = SmokeSettings(), val_prompts: int = DOCUMENTED_VAL_PROMPTS) -> float:
    """Estimated hours of the arm's smoke run: its steps and its two validations."""
    return sum(launch_hours(name, settings, val_prompts))


def launch_limits_s(
    name: str, settings: SmokeSettings = SmokeSettings(), val_prompts: int = DOCUMENTED_VAL_PROMPTS
) -> tuple[float, float]:
    """Each launch's time limit in seconds: its estimate x ``LIMIT_FACTOR`` + ``STARTUP_S``."""
    return tuple(LIMIT_FACTOR * h * 3600 + STARTUP_S for h in launch_hours(name, settings, val_prompts))


def validation_prompts(data_dir: str | Path) -> int:
    """Rows of ``<data_dir>/val.parquet`` (from its footer, without reading the data)."""
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(Path(data_dir) / "val.parquet").metadata.num_rows)


def seconds_per_step(arm_dir: Path) -> float:
    """Median wall seconds of the trained steps verl logged for the arm (validation excluded)."""
    steps = logs.read_run(arm_dir).steps
    trained = steps.loc[steps["kept_groups"] > 0, "step_s"]
    if trained.empty:
        raise RuntimeError(f"{arm_dir}: no trained step was logged")
    return float(trained.median())


def report(name: str, arm_dir: Path, settings: SmokeSettings) -> str:
    """Seconds per step here and the hours they imply for the paper's steps (our linear estimate), then what
    ``smoke_metrics`` reads from the arm's logs, one line each."""
    s = seconds_per_step(arm_dir)
    steps = configs.table1_stops(name)[-1]
    gpus = settings.nnodes * settings.n_gpus_per_node
    paper_gpus = int(paper.setting("gpus"))
    return (
        f"{name}: {s:.1f} s per step at {settings.response_length}-token responses on {gpus} GPUs; "
        f"{steps} steps: {s * steps / 3600:.1f} h here, about {s * steps / 3600 * gpus / paper_gpus:.1f} h on "
        f"{paper_gpus} GPUs if it scales linearly (an estimate; responses up to "
        f"{configs.MAX_RESPONSE_LENGTH} tokens take longer)\n"
    ) + smoke_metrics.format_measures(smoke_metrics.measures(arm_dir))


def preflight_passes(arms: list[str], skip: set[str]) -> bool:
    """Preflight's checks (all but ``skip``) on the smoke profile of ``arms``, each printed; False on a failure."""
    say(f"preflight: checking the smoke profile of {', '.join(arms)} ({preflight.COMMAND} --profile smoke)")
    inputs = preflight.Inputs(os.environ["MODEL_PATH"], os.environ["DATA_DIR"], os.environ["CKPT_DIR"])
    failed = []
    for result in preflight.iter_checks(inputs, [preflight.read_plan(a, "smoke") for a in arms], skip):
        print(preflight.format_result(result), flush=True)
        if not result.ok:
            failed.append(result.name)
    if failed:
        say(
            f"preflight: {len(failed)} check(s) failed ({', '.join(failed)}): nothing was launched. Fix them (each "
            "FAIL line says how), or skip a check you know does not apply with --skip NAME, and run again"
        )
    return not failed


PASSED, FAILED, TIMED_OUT, REFUSED = "passed", "failed", "timed out", "refused"


def earlier_run(name: str, runs: Path, checkpoints: Path) -> list[Path]:
    """What an earlier run of the arm left: its checkpoint folder, its run folder and its smoke log, where not
    empty. A resume over them would pass on the old run's checkpoints and print the old run's metrics."""
    found = [p for p in (checkpoints, runs / name) if p.is_dir() and any(p.iterdir())]
    return found + [p for p in (runs / f"{name}.smoke.log",) if p.is_file()]


def clear_earlier_run(name: str, runs: Path, checkpoints: Path, move_aside: bool) -> None:
    """Refuse (``RuntimeError`` naming each folder and what to do) or rename an earlier run's folders aside."""
    found = earlier_run(name, runs, checkpoints)
    if found and not move_aside:
        raise RuntimeError(
            f"{name}: an earlier run is in {', '.join(map(str, found))}; the smoke proves a kill and a resume from "
            "step 0, which its checkpoint and logs would fake. Run again with --move-aside (renames each to "
            "<name>.before-<UTC time>), or move or delete them yourself"
        )
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for path in found:
        aside = path.with_name(f"{path.name}.before-{stamp}")
        path.rename(aside)
        say(f"{name}: moved the earlier run's {path} aside to {aside}")


def resumed_step(log_dir: Path, first_new_segment: int) -> int | None:
    """The first step trained in the segments from ``first_new_segment`` on (None: none trained)."""
    segments = sorted(log_dir.glob(logs.SEGMENT_GLOB))[first_new_segment:]
    trained = [step for path in segments for step, data in logs.read_jsonl(path) if logs.STEP_TIME in data]
    return min(trained) if trained else None


def gate_verdicts(name: str, arm_dir: Path, settings: SmokeSettings) -> list[smoke_gates.Verdict]:
    """The report's gates on the arm's logs, seconds per step against the plan's estimate on these GPUs."""
    return smoke_gates.check(name, arm_dir, step_hours(name, settings) * 3600)


def run_arm(
    name: str,
    runs: Path,
    env: dict[str, str],
    limits_s: tuple[float, float],
    settings: SmokeSettings,
    move_aside: bool = False,
) -> str:
    """One arm: a launch killed after checkpoint 1, a relaunch that must resume at step 2 into a new segment, then
    the report and its gates. Returns PASSED, FAILED, TIMED_OUT or REFUSED (an earlier run left in place)."""
    script = RECIPE_DIR / name / "launch.sh"
    checkpoints = Path(env["CKPT_DIR"]) / name
    log_dir = runs / name / "logs"
    try:
        clear_earlier_run(name, runs, checkpoints, move_aside)
    except RuntimeError as refused:
        say(str(refused))
        return REFUSED
    try:
        with open(runs / f"{name}.smoke.log", "ab") as log:
            say(f"{name}: launching {script} until checkpoint 1 is saved and logged (limit {limits_s[0]:.0f} s); "
                f"log: {log.name}")  # fmt: skip
            launch.launch_and_kill(script, env, checkpoints, 1, timeout_s=limits_s[0], log=log, log_dir=log_dir)
            killed, segments = launch.latest_checkpoint(checkpoints), len(list(log_dir.glob(logs.SEGMENT_GLOB)))
            say(f"{name}: killed after checkpoint {killed}; relaunching to resume to step {settings.steps} "
                f"(limit {limits_s[1]:.0f} s); log: {log.name}")  # fmt: skip
            status = launch.launch(script, env, timeout_s=limits_s[1], log=log)
    except (TimeoutError, subprocess.TimeoutExpired) as late:
        say(f"{name}: TIMED OUT: {late} (each launch's limit is the plan's estimate x {LIMIT_FACTOR:g} + "
            f"{STARTUP_S:.0f} s; --timeout sets another); see {runs / f'{name}.smoke.log'}")  # fmt: skip
        return TIMED_OUT
    except RuntimeError as failed:
        say(f"{name}: FAILED: {failed}; see {runs / f'{name}.smoke.log'}")
        return FAILED
    resumed = resumed_step(log_dir, segments)
    if status != 0 or launch.latest_checkpoint(checkpoints) < settings.steps or resumed != killed + 1:
        say(f"{name}: the resumed launch failed (status {status}, checkpoint "
            f"{launch.latest_checkpoint(checkpoints)} of {settings.steps}, its first trained step {resumed}, "
            f"expected {killed + 1}); see {runs / f'{name}.smoke.log'}")  # fmt: skip
        return FAILED
    verdicts = gate_verdicts(name, runs / name, settings)
    print(report(name, runs / name, settings), flush=True)
    print(f"{name}: gates (expected ranges: docs/gpu-and-clusters.md)\n" + smoke_gates.format_verdicts(verdicts))
    return PASSED if all(v.ok for v in verdicts) else FAILED


def run_arms(
    arms: list[str],
    runs: Path,
    env: dict[str, str],
    limits: dict[str, tuple[float, float]],
    settings: SmokeSettings,
    move_aside: bool = False,
) -> dict[str, str]:
    """Each arm in turn (one that fails or times out does not stop the next); arm -> its outcome, each said."""
    outcomes = {name: run_arm(name, runs, env, limits[name], settings, move_aside) for name in arms}
    say("smoke run: " + ", ".join(f"{name} {outcome}" for name, outcome in outcomes.items()))
    return outcomes


def limits_for(arms: list[str], timeout: float | None, data_dir: str, settings: SmokeSettings):
    """Arm -> its two launches' limits in seconds: ``timeout`` for each when given, else ``launch_limits_s`` with
    the validation prompts of ``data_dir``'s val.parquet (the documented set's when it cannot be read)."""
    if timeout is not None:
        return {name: (timeout, timeout) for name in arms}
    try:
        prompts = validation_prompts(data_dir)
    except (OSError, ValueError) as unread:  # preflight's data check, when skipped, did not find it either
        prompts = DOCUMENTED_VAL_PROMPTS
        say(f"{data_dir}/val.parquet: not read ({unread}); the time limits assume the documented {prompts} prompts")
    return {name: launch_limits_s(name, settings, prompts) for name in arms}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m brorl_lib.verl_recipe.smoke", description=__doc__.splitlines()[0])
    p.add_argument("--arms", nargs="+", default=list(ORDER), choices=list(configs.PAPER_ARMS), help="in order")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"seconds per launch (default: the plan's estimate of each launch x {LIMIT_FACTOR:g} + {STARTUP_S:.0f})",
    )
    p.add_argument(
        "--move-aside",
        action="store_true",
        help="rename an earlier run's checkpoint and run folders to <name>.before-<UTC time> (default: refuse)",
    )
    p.add_argument(
        "--skip", default="", help=f"comma-separated preflight checks to skip, of {','.join(preflight.CHECKS)}"
    )
    args = p.parse_args(argv)
    missing = [v for v in ("MODEL_PATH", "DATA_DIR", "CKPT_DIR") if not os.environ.get(v)]
    if missing:
        p.error(f"set {', '.join(missing)} (see recipes/brorl/README.md)")
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(preflight.CHECKS):
        p.error(
            f"--skip {','.join(sorted(skip - set(preflight.CHECKS)))}: unknown; checks are {','.join(preflight.CHECKS)}"
        )
    settings = SmokeSettings()
    if not preflight_passes(args.arms, skip):
        return 1
    runs = Path(os.environ.get("RUN_DIR") or REPO_ROOT / "data" / "runs" / "verl" / RUN_NAME)
    if not args.move_aside:  # refuse before any arm runs, not after BroRL's hours
        for name in args.arms:
            try:
                clear_earlier_run(name, runs, Path(os.environ["CKPT_DIR"]) / name, move_aside=False)
            except RuntimeError as refused:
                say(str(refused))
                return 1
    runs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "RUN_DIR": str(runs), "PYTHON": os.environ.get("PYTHON", sys.executable)}
    limits = limits_for(args.arms, args.timeout, os.environ["DATA_DIR"], settings)
    say(f"smoke run of {', '.join(args.arms)}: run folder {runs} (Ctrl-C or SIGTERM stops every process it starts)")
    try:
        with processes.stop_on_signals("the smoke run"):
            outcomes = run_arms(args.arms, runs, env, limits, settings, args.move_aside)
    except Stopped as stop:
        return stop.status
    return 0 if all(o == PASSED for o in outcomes.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
