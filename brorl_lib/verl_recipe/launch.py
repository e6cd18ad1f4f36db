"""Launch scripts for a Ray cluster, and running one: to its end, with progress, or killed after a checkpoint.

Every launch script sets an arm's variables and sources ``recipes/brorl/launch_arm.sh``, which passes the
lines of the ``overrides.txt`` beside it, the same Hydra overrides that ``configs.compose`` resolved into
``config.yaml``, so what runs is what was validated. Every launch is one *segment*:
``trainer.resume_mode=auto`` continues from the newest checkpoint, and the file logger gets a fresh
``logs/segment_NNN.jsonl``. Environment variables reach verl's Ray actors only through the Ray runtime env,
so ``launch_arm.sh`` passes the log path, PYTHONPATH (for the reward function) and ``RAY_ENV`` there as well.
Each launch runs in a session of its own (``processes.start``) and is ended whole: the script, verl and the
local Ray cluster it started.
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path, PurePosixPath

from brorl_lib.facts.arms import Arm
from brorl_lib.verl_recipe import logs, processes
from brorl_lib.verl_recipe.configs import segment_stops

# What every launch sets: verl imports the tokenizer fallback in each of its processes (agent-loop workers
# build their continuous-token builder from it). Not imported here: importing it patches verl's wiring.
FALLBACK_MODULE = "brorl_lib.verl_recipe.tokenizer_fallback"
CLUSTER_ENV = {"VERL_USE_EXTERNAL_MODULES": FALLBACK_MODULE}
LAUNCH_BODY = PurePosixPath("recipes/brorl/launch_arm.sh")  # sourced by every launch script


def script_text(arm: Arm, arm_dir: Path, repo_root: Path, env: Mapping[str, str] = CLUSTER_ENV) -> str:
    """Notebook 05's launch script for one arm of a run, in ``arm_dir`` beside its ``overrides.txt`` (this
    machine's paths already in them): the arm's variables, then the record's ``launch_arm.sh``, the launch body
    every committed arm's script sources too. Run it on the Ray head node; re-run it to resume."""
    exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
    return (
        "#!/usr/bin/env bash\n"
        f"# BroRL companion, arm {arm.name}: N={arm.n_rollouts} rollouts x {arm.prompts_per_step} prompts per step, "
        f"{arm.steps} RL steps, verl 0.9.1.\n"
        f"# Written by notebook 05_verl_training with this machine's paths; extra Hydra overrides may follow.\n"
        f'ARM={arm.name}\nSTOPS="{" ".join(map(str, stops(arm)))}"\nARM_DIR={shlex.quote(str(arm_dir))}\n'
        f'{exports}RAY_ENV="{" ".join(env)}"\n'
        f"source {shlex.quote(str(repo_root / LAUNCH_BODY))}\n"
    )


def stops(arm: Arm) -> list[int]:
    """Where the arm's launch script ends a segment (``configs.segment_stops``)."""
    return segment_stops(arm.name, arm.steps)


def start(script: Path, env: Mapping[str, str], extra: Collection[str], log) -> subprocess.Popen:
    """Start a launch script in a session of its own (so ``stop`` can take Ray down with it)."""
    return processes.start(["bash", str(script), *extra], env, stdout=log, stderr=log)


def stop(proc: subprocess.Popen) -> None:
    """Kill a launch: the script, the driver and the Ray processes it started (``processes.end``)."""
    processes.end(proc)


def launch(script: Path, env: Mapping[str, str], extra: Collection[str] = (), timeout_s: float = 1800, log=None) -> int:
    """Run a launch script to its end (new log segments; it resumes from the arm's newest checkpoint)."""
    proc = start(script, env, extra, log)
    try:
        return proc.wait(timeout=timeout_s)
    finally:
        stop(proc)


def latest_checkpoint(arm_checkpoints: Path) -> int:
    """The step of the newest checkpoint in an arm's checkpoint folder (0: none), as verl records it."""
    marker = Path(arm_checkpoints) / "latest_checkpointed_iteration.txt"
    return int(marker.read_text().strip()) if marker.is_file() else 0


def launch_and_kill(
    script: Path,
    env: Mapping[str, str],
    arm_checkpoints: Path,
    after_step: int,
    extra: Collection[str] = (),
    timeout_s: float = 900,
    log=None,
    log_dir: Path | None = None,
) -> None:
    """Start a launch and kill all of it (driver, Ray and its workers) once checkpoint ``after_step`` exists
    and, given the arm's ``log_dir``, once that step's metrics are logged: verl saves a step's checkpoint
    before it logs the step, so a kill between the two loses that step's log line (its training is kept)."""
    proc = start(script, env, extra, log)
    deadline = time.monotonic() + timeout_s

    def reached() -> bool:
        if latest_checkpoint(arm_checkpoints) < after_step:
            return False
        return log_dir is None or after_step in logs.trained_steps(log_dir)

    try:
        while not reached():
            if proc.poll() is not None:
                raise RuntimeError(f"{script} ended (status {proc.returncode}) before checkpoint {after_step}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{script}: no checkpoint {after_step} within {timeout_s:.0f} s")
            time.sleep(1.0)
    finally:
        stop(proc)


def run_script(script: Path, on_line: Callable[[str], None] = lambda s: print(s, flush=True)) -> None:
    """Run a launch script, passing each output line to ``on_line``; RuntimeError on a non-zero exit. SIGTERM,
    SIGINT, SIGHUP or a kernel interrupt end the whole launch (``processes.stop_on_signals``)."""
    env = {**os.environ, "PYTHON": sys.executable}  # the launch uses this interpreter's environment
    with processes.stop_on_signals(f"the launch of {script}"):
        proc = processes.start(["bash", str(script)], env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            for line in io.TextIOWrapper(proc.stdout, errors="replace"):
                on_line(line.rstrip("\n"))
            proc.wait()
        finally:
            stop(proc)
    if proc.returncode != 0:
        raise RuntimeError(f"{script} exited with status {proc.returncode}; see {script.parent / 'console.log'}")
