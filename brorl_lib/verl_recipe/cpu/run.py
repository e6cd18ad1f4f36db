"""``python -m brorl_lib.verl_recipe.cpu.run``: the recipe's two arms through verl's own trainer on this CPU.

What it does, each step resumable (a finished step is skipped when run again):

1. data: the recipe's parquet rows (``data.reasoning_gym_frames``) for ``TASKS``, math rows, and one row per
   scorer of the reward function (``reward_rows``), under ``<work>/data``;
2. model: the tiny warm-started model (``tiny_model``), committed at ``START_MODEL`` so that a re-run
   trains from the same start (``--retrain-model`` makes a new one);
3. training: ``recipes/brorl/cpu/<arm>/launch.sh`` for each arm (the committed cpu profile), logging to
   ``<runs>/<arm>/logs/segment_NNN.jsonl`` as on a cluster; checkpoints under ``<work>/checkpoints``;
4. merge: the ProRL and BroRL arms' last checkpoints to Hugging Face folders with verl's model merger;
5. evaluation: ``python -m brorl_lib.evaluation`` on each merged checkpoint (Reasoning Gym, the CPU tasks,
   the paper's protocol at the CPU's response length) into ``<eval>/<label>/``.

Every child (launches, the merger, the evaluation) runs in a session of its own; SIGTERM, SIGINT or SIGHUP end
all of them, the local Ray cluster included (``processes``), and the terminal shows each stage and its log.

The committed run (``data/runs/verl/verl-cpu``, ``data/runs/eval/verl-cpu-*``) is what notebook 05 shows as
"verl on CPU"; ``make verl-cpu-run`` makes it again. ``make verl-test`` uses the functions here at the
smallest size (tests/test_verl_cpu.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from brorl_lib.core import atomic
from brorl_lib.core.paths import BUILD_DIR, REPO_ROOT
from brorl_lib.core.signals import Stopped
from brorl_lib.core.validation import check_int
from brorl_lib.tasks.generation import EntryRequest, generate
from brorl_lib.verl_recipe import data, processes
from brorl_lib.verl_recipe import launch as launch_mod
from brorl_lib.verl_recipe.cpu import reward_rows, tiny_model
from brorl_lib.verl_recipe.cpu.profile import MAX_RESPONSE_LENGTH, RUN_NAME, CpuSettings
from brorl_lib.verl_recipe.processes import say
from brorl_lib.verl_recipe.report import RUNS_DIR

TASKS = ("family_relationships", "aiw")  # Figure 4 tasks with short answers a tiny model can guess
TRAIN_PER_TASK = 256  # our choice: more prompts than the run draws, so no prompt repeats within a run
VAL_PER_TASK = 4  # our choice: 12 validation prompts (two tasks and math) x 16 samples each validation
# Math rows, scored by the recipe's math reward (verl's MATH scorer, then Math-Verify's process pool inside
# verl's reward worker): Reasoning Gym's basic_arithmetic questions as a local math dataset of
# {problem, answer} records, loaded as a user's DeepScaleR file would be (data.records_frames).
MATH_TASK = "basic_arithmetic"
MATH_NAME = "arithmetic"  # the rows' data_source: math.arithmetic
SEED = 0
START_MODEL = RUNS_DIR / RUN_NAME / "start_model"  # committed (about 0.4 MB)
RECIPE_DIR = REPO_ROOT / "recipes" / "brorl" / "cpu"
EVAL_DIR = REPO_ROOT / "data" / "runs" / "eval"
EVAL_LABEL = "verl-cpu-{arm}-step{step}"
START_LABEL = "verl-cpu-start"  # the starting checkpoint, evaluated like the arms
EVAL_SAMPLES = 16  # the paper's samples per instance (Appendix D)
EVAL_PER_TASK = 16  # our choice: Reasoning Gym instances per task


@dataclass(frozen=True)
class Paths:
    """Where one CPU run keeps its inputs, checkpoints and logs."""

    work: Path  # data/, checkpoints/, merged/ (not committed)
    runs: Path  # <runs>/<arm>/ logs and config (the committed run: data/runs/verl/verl-cpu)
    model: Path  # the starting checkpoint

    @property
    def data_dir(self) -> Path:
        return self.work / "data"

    @property
    def checkpoints(self) -> Path:
        return self.work / "checkpoints"

    def env(self) -> dict[str, str]:
        """The launch scripts' variables (recipes/brorl/cpu/<arm>/launch.sh)."""
        return {
            **os.environ,
            "MODEL_PATH": str(self.model),
            "DATA_DIR": str(self.data_dir),
            "CKPT_DIR": str(self.checkpoints),
            "RUN_DIR": str(self.runs),
            "PYTHON": os.environ.get("PYTHON", sys.executable),  # the interpreter that runs verl
            "PYTHONHASHSEED": "0",
            # Ray starts its workers at nice 15, so beside other work verl's actors got a few percent of a CPU; at
            # the caller's priority they keep their share (our choice; RAY_worker_niceness set outside wins)
            "RAY_worker_niceness": os.environ.get("RAY_worker_niceness", "0"),
        }


def prepare(paths: Paths, retrain_model: bool = False, train_per_task: int = TRAIN_PER_TASK) -> None:
    """Write the parquet files and, if missing (or asked), warm-start the model from the training rows."""
    check_int("train_per_task", train_per_task, low=1)
    train, val = data.reasoning_gym_frames(list(TASKS), train_per_task, VAL_PER_TASK, SEED)
    math_train, math_val = data.records_frames(
        str(math_records(paths.data_dir / "math.jsonl", train_per_task + VAL_PER_TASK)),
        "math", train_per_task, VAL_PER_TASK, SEED, "math_dataset",
    )  # fmt: skip
    reward_train, reward_val = reward_rows.frames(paths.data_dir)
    train = pd.concat([train, math_train, reward_train], ignore_index=True)
    val = pd.concat([val, math_val, reward_val], ignore_index=True)
    data.write_parquet(train, paths.data_dir / "train.parquet")
    data.write_parquet(val, paths.data_dir / "val.parquet")
    if retrain_model or not (paths.model / "config.json").is_file():
        tiny_model.warm_start(train, paths.model, seed=SEED, responses=reward_rows.responses())


def math_records(path: Path, count: int) -> Path:
    """``count`` {problem, answer, data_source} records of ``MATH_TASK`` as JSONL at ``path`` (same seed, same file)."""
    entries = generate([EntryRequest(MATH_TASK, count, data.task_seed(SEED, MATH_TASK, "math"))])[0]
    records = [{"problem": e["question"], "answer": str(e["answer"]), "data_source": MATH_NAME} for e in entries]
    atomic.write_text(path, "".join(json.dumps(r) + "\n" for r in records))
    return path


def script(arm: str) -> Path:
    """The arm's committed cpu-profile launch script."""
    path = RECIPE_DIR / arm / "launch.sh"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: write the record with python -m brorl_lib.verl_recipe.record")
    return path


# Ray 2.60 starts its local cluster under deadlines of its own, fixed in its code: 15 s for the dashboard agent to
# write its port file, 30 s for the raylet to register. On 2 busy cores the agent's imports can take longer, and the
# launch ends before any step with this message; such a launch is started again, at most RAY_START_TRIES in all
# (our choice). Nothing of it ran: no checkpoint, no log line, so the retry changes no result.
RAY_START_MISSED = b"The current node timed out during startup"
RAY_START_TRIES = 3


def _ray_start_missed(log, since: int) -> bool:
    """Whether the launch logged to ``log`` (a file, from byte ``since``) ended at Ray's own start-up deadline."""
    name = getattr(log, "name", None)
    if not isinstance(name, str) or not os.path.isfile(name):
        return False
    log.flush()
    with open(name, "rb") as f:
        f.seek(since)
        return RAY_START_MISSED in f.read()


def _log_size(log) -> int:
    return os.fstat(log.fileno()).st_size if hasattr(log, "fileno") else 0


def _retrying_ray_start(run_once, log):
    """``run_once()`` again while its launch ends at Ray's start-up deadline (``RAY_START_TRIES`` in all)."""
    for attempt in range(1, RAY_START_TRIES + 1):
        since = _log_size(log) if log is not None else 0
        try:
            result, failure = run_once(), None
        except RuntimeError as err:  # launch_and_kill: the launch ended before its checkpoint
            result, failure = None, err
        if (failure is None and result == 0) or attempt == RAY_START_TRIES or not _ray_start_missed(log, since):
            if failure is not None:
                raise failure
            return result
        note = f"[cpu] Ray's local start-up missed its own deadline (try {attempt} of {RAY_START_TRIES}): again\n"
        log.write(note.encode() if "b" in getattr(log, "mode", "") else note)
        log.flush()


def launch(arm: str, paths: Paths, extra: list[str] = (), timeout_s: float = 1800, log=None) -> int:
    """Run one arm's cpu launch script to its end (a new log segment; resumes from its newest checkpoint); a
    launch that ends at Ray's own start-up deadline is started again (``RAY_START_TRIES``)."""
    return _retrying_ray_start(lambda: launch_mod.launch(script(arm), paths.env(), extra, timeout_s, log), log)


def latest_checkpoint(paths: Paths, arm: str) -> int:
    """The step of the arm's newest checkpoint (0: none), as verl records it."""
    return launch_mod.latest_checkpoint(paths.checkpoints / arm)


def launch_and_kill(arm: str, paths: Paths, after_step: int, extra: list[str] = (), timeout_s: float = 900, log=None):
    """Start the arm and kill the whole launch (driver, Ray and its workers) once checkpoint ``after_step``
    exists and that step is logged; started again when it ends at Ray's own start-up deadline."""
    checkpoints, logs_dir = paths.checkpoints / arm, paths.runs / arm / "logs"
    _retrying_ray_start(
        lambda: (
            launch_mod.launch_and_kill(
                script(arm), paths.env(), checkpoints, after_step, extra, timeout_s, log, logs_dir
            )
            or 0
        ),  # it returns nothing once killed at its checkpoint
        log,
    )


def merge(paths: Paths, arm: str, step: int) -> Path:
    """verl's model merger: the arm's FSDP checkpoint at ``step`` as a Hugging Face folder (made once)."""
    source = paths.checkpoints / arm / f"global_step_{step}" / "actor"
    target = paths.work / "merged" / f"{arm}-step{step}"
    if not (target / "config.json").is_file():
        processes.run(
            [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp"]
            + ["--local_dir", str(source), "--target_dir", str(target)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    return target


def evaluate(model: Path, label: str, out: Path = EVAL_DIR, per_task: int = EVAL_PER_TASK) -> None:
    """The paper's protocol (16 samples, T 0.6, top-p 0.95) on the CPU tasks, responses capped at the run's length."""
    processes.run(
        [sys.executable, "-m", "brorl_lib.evaluation", "--model", str(model), "--label", label]
        + ["--benchmarks", "rg_graphs", "rg_logic", "--rg-tasks", *TASKS, "--rg-per-task", str(per_task)]
        + ["--samples", str(EVAL_SAMPLES), "--max-tokens", str(MAX_RESPONSE_LENGTH), "--backend", "transformers"]
        + ["--out", str(out), "--no-progress"],
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m brorl_lib.verl_recipe.cpu.run", description=__doc__.splitlines()[0])
    p.add_argument("--arms", nargs="+", default=["prorl", "brorl"], choices=["prorl", "brorl"])
    p.add_argument("--work", type=Path, default=BUILD_DIR / "verl_cpu", help="data, checkpoints, merged models")
    p.add_argument("--runs", type=Path, default=RUNS_DIR / RUN_NAME, help="logs: <runs>/<arm>/logs")
    p.add_argument("--retrain-model", action="store_true", help="warm-start a new starting model")
    p.add_argument("--no-eval", action="store_true", help="skip merge and evaluation")
    args = p.parse_args(argv)
    paths = Paths(args.work.resolve(), args.runs.resolve(), START_MODEL)
    try:
        with processes.stop_on_signals("the CPU verl run"):
            return run_all(paths, args.arms, args.retrain_model, not args.no_eval)
    except Stopped as stop:
        return stop.status


def run_all(paths: Paths, arms: list[str], retrain_model: bool, evaluation: bool) -> int:
    """``main``'s stages: data and model, then per arm training (skipped when done), merge and evaluation."""
    say(f"data and start model under {paths.work}")
    prepare(paths, retrain_model)
    if evaluation:
        say(f"evaluating the start model into {EVAL_DIR / START_LABEL}")
        evaluate(paths.model, START_LABEL)
    steps = CpuSettings().steps
    for arm in arms:
        if latest_checkpoint(paths, arm) < steps:
            console = paths.work / f"{arm}.console.log"
            say(f"arm {arm}: training to step {steps} with {script(arm)}; log: {console}")
            with open(console, "ab") as log:
                status = launch(arm, paths, log=log)
            if status != 0 or latest_checkpoint(paths, arm) < steps:
                say(f"arm {arm} failed (status {status}); see {console}")
                return 1
        say(f"arm {arm}: trained to step {steps}; logs in {paths.runs / arm / 'logs'}")
        if evaluation:
            label = EVAL_LABEL.format(arm=arm, step=steps)
            say(f"arm {arm}: merging step {steps} and evaluating it into {EVAL_DIR / label}")
            evaluate(merge(paths, arm, steps), label)
    return 0


if __name__ == "__main__":
    sys.exit(main())
