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
failure; then, per arm: a launch killed after checkpoint 1, a relaunch that must resume at step 2 into a new
log segment, then the seconds per step read back from verl's own logs and the hours they imply for the
paper's steps (an estimate from this machine, not from Table 1). SIGTERM, SIGINT or SIGHUP end every process
it started, Ray's included (``processes``); the terminal shows each stage and where its log is.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.signals import Stopped
from brorl_lib.core.validation import check_int
from brorl_lib.facts import reported as paper
from brorl_lib.facts.arms import Arm
from brorl_lib.verl_recipe import configs, launch, logs, preflight, processes, smoke_metrics
from brorl_lib.verl_recipe.processes import say

RECIPE_DIR = REPO_ROOT / "recipes" / "brorl" / "smoke"
RUN_NAME = "smoke"  # logs under data/runs/verl/smoke/<arm>/ unless RUN_DIR is set
DELTA_GROUPS = ("nodes", "length", "schedule")
ORDER = ("brorl", "prorl")  # BroRL first: a failure of its larger step surfaces before ProRL's week


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


def run_arm(name: str, runs: Path, env: dict[str, str], timeout_s: float, settings: SmokeSettings) -> bool:
    """One arm: a launch killed after checkpoint 1, then a relaunch that resumes to the last step."""
    script = RECIPE_DIR / name / "launch.sh"
    checkpoints = Path(os.environ["CKPT_DIR"]) / name
    with open(runs / f"{name}.smoke.log", "ab") as log:
        say(f"{name}: launching {script} until checkpoint 1 is saved and logged; log: {log.name}")
        launch.launch_and_kill(script, env, checkpoints, 1, timeout_s=timeout_s, log=log, log_dir=runs / name / "logs")
        say(f"{name}: killed after checkpoint 1; relaunching to resume to step {settings.steps}; log: {log.name}")
        status = launch.launch(script, env, timeout_s=timeout_s, log=log)
    if status != 0 or launch.latest_checkpoint(checkpoints) < settings.steps:
        say(f"{name}: the resumed launch failed (status {status}); see {log.name}")
        return False
    print(report(name, runs / name, settings), flush=True)
    return True


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m brorl_lib.verl_recipe.smoke", description=__doc__.splitlines()[0])
    p.add_argument("--arms", nargs="+", default=list(ORDER), choices=list(configs.PAPER_ARMS), help="in order")
    p.add_argument("--timeout", type=float, default=7200, help="seconds per launch (default 2 h)")
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
    runs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "RUN_DIR": str(runs), "PYTHON": os.environ.get("PYTHON", sys.executable)}
    say(f"smoke run of {', '.join(args.arms)}: run folder {runs} (Ctrl-C or SIGTERM stops every process it starts)")
    try:
        with processes.stop_on_signals("the smoke run"):
            return 0 if all(run_arm(name, runs, env, args.timeout, settings) for name in args.arms) else 1
    except Stopped as stop:
        return stop.status


if __name__ == "__main__":
    sys.exit(main())
