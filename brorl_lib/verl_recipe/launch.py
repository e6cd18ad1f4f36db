"""Launch scripts for a Ray cluster, and running one: to its end, with progress, or killed after a checkpoint.

The script is the record of the experiment (as in verl's recipes): it passes the same Hydra
overrides that ``configs.compose`` resolved into ``config.yaml``, so what runs is what was validated.
Every launch is one *segment*: ``trainer.resume_mode=auto`` continues from the newest checkpoint,
and the file logger gets a fresh ``logs/segment_NNN.jsonl`` (verl's file logger truncates its
file on open). Environment variables reach verl's Ray actors only through the Ray runtime env,
so the log path and PYTHONPATH (for the reward function) are passed there as well.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Mapping
from pathlib import Path, PurePosixPath

from brorl_lib.verl_recipe import logs
from brorl_lib.verl_recipe.configs import Arm, Cluster, segment_stops

ENTRY_POINT = "verl.trainer.main_ppo"  # verl 0.9.1's PPO entry (the v1 trainer, which implements filter_groups)
# What every launch sets: verl imports the tokenizer fallback in each of its processes (agent-loop workers
# build their continuous-token builder from it). Not imported here: importing it patches verl's wiring.
FALLBACK_MODULE = "brorl_lib.verl_recipe.tokenizer_fallback"
CLUSTER_ENV = {"VERL_USE_EXTERNAL_MODULES": FALLBACK_MODULE}
STEPS_KEY = "trainer.total_training_steps"


def script_text(arm: Arm, cluster: Cluster, override_list: list[str], arm_dir: Path, repo_root: Path) -> str:
    """A bash launch script for one arm with this machine's paths; run it on the Ray head node (re-run it to resume)."""
    return _script(
        arm,
        cluster,
        [shlex.quote(o) for o in override_list],
        origin="brorl_lib.verl_recipe (notebook 05_verl_training)",
        notes="",
        command=f"bash {shlex.quote(str(arm_dir / 'launch.sh'))}",
        settings=f"REPO_ROOT={shlex.quote(str(repo_root))}\nARM_DIR={shlex.quote(str(arm_dir))}\n",
        env=CLUSTER_ENV,
        checkpoints=shlex.quote(str(Path(cluster.checkpoint_dir) / arm.name)),
    )


def record_script_text(
    arm: Arm,
    cluster: Cluster,
    override_list: list[str],
    variables: Mapping[str, str],
    script: str,
    run_dir: str,
    origin: str,
    notes: str = "",
    env: Mapping[str, str] = CLUSTER_ENV,
    setup: str = "",
) -> str:
    """The launch script of a committed record, ``script`` (its path in the repository): no machine's paths in it.

    Each ``<NAME>`` placeholder in ``override_list`` (``NAME`` a key of ``variables``, whose value says
    what it is) becomes ``${NAME}``, read from the environment when the script runs; the script stops
    with status 2 unless every one is set. It finds the repository from its own location, and copies
    the ``config.yaml`` and ``overrides.txt`` beside it into the arm's run folder, ``$RUN_DIR/<arm>``
    (default ``<repo>/<run_dir>/<arm>``), where the logs go and notebook 05 reads them.
    """
    up = "/".join([".."] * (len(PurePosixPath(script).parts) - 1))
    width = max(map(len, variables)) + 2
    doc = "".join(f"#   {name:<{width}}{what}\n" for name, what in variables.items())
    notes = (
        f"{notes}# Machine-specific paths come from the environment (no quotes or backslashes in them):\n{doc}"
        f"#   {'RUN_DIR':<{width}}optional: logs go to $RUN_DIR/{arm.name} "
        f"(default <repo>/{run_dir}/{arm.name})\n#\n"
    )
    names = " ".join(variables)
    settings = f"""for var in {names}; do
  [[ -n "${{!var:-}}" ]] || {{ echo "[brorl] set $var (see the header of $0)" >&2; exit 2; }}
  [[ "${{!var}}" != *[\\'\\\\]* ]] || {{ echo "[brorl] $var must hold no quotes or backslashes" >&2; exit 2; }}
done
RECIPE_DIR="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
REPO_ROOT="${{REPO_ROOT:-$(cd "$RECIPE_DIR/{up}" && pwd)}}"
ARM_DIR="${{RUN_DIR:-$REPO_ROOT/{run_dir}}}/{arm.name}"
mkdir -p "$ARM_DIR"
cp "$RECIPE_DIR/config.yaml" "$RECIPE_DIR/overrides.txt" "$ARM_DIR/"
"""
    names_env = " ".join(f"{name}=..." for name in variables)
    return _script(
        arm,
        cluster,
        [_shell_word(o, variables) for o in override_list],
        origin=origin,
        notes=notes,
        command=f"{names_env} bash {script}",
        settings=settings,
        env=env,
        setup=setup,
        checkpoints=_shell_word(f"{cluster.checkpoint_dir}/{arm.name}", variables),
    )


def _shell_word(text: str, variables: Collection[str]) -> str:
    """``text`` as one bash word: single-quoted, or double-quoted with ``<NAME>`` as ``${NAME}`` for ``variables``."""
    names = [v for v in variables if f"<{v}>" in text]
    if not names:
        return shlex.quote(text)
    escaped = re.sub(r'([\\"$`])', r"\\\1", text)
    for name in names:
        escaped = escaped.replace(f"<{name}>", "${" + name + "}")
    return f'"{escaped}"'


def cluster_setup(cluster: Cluster) -> str:
    """The header lines saying what a cluster needs before the first launch (ends with the launch line's lead)."""
    return f"""# Before the first launch: the repository and this run folder on a filesystem every node sees,
# `pip install -e ".[gpu]"` on every node, and a Ray cluster of {cluster.nnodes} node(s):
#   head node:   ray start --head --port=6379
#   other nodes: ray start --address=<head-ip>:6379
# (with one node nothing needs starting: verl starts a local Ray). Then, on the head node:
"""


def stops(arm: Arm) -> list[int]:
    """Where the arm's launch script ends a segment (``configs.segment_stops``)."""
    return segment_stops(arm.name, arm.steps)


def stops_note(arm: Arm) -> str:
    """The launch script's header lines on its stops, resuming and extra overrides."""
    steps = stops(arm)
    how = (
        f"# Training runs in stops at steps {', '.join(map(str, steps))}: one launch of verl each, ending with a\n"
        "# checkpoint that verl keeps (the Table 1 rows to evaluate). Re-running the same command skips the stops\n"
        "# already checkpointed."
        if len(steps) > 1
        else f"# One launch of verl trains to step {steps[0]}; re-running the same command resumes it until that step\n"
        "# is checkpointed."
    )
    return (
        f"{how}\n# Each launch resumes from the newest checkpoint (trainer.resume_mode=auto) and logs to the next\n"
        "# segment file. Extra Hydra overrides may follow the command.\n"
    )


def _script(
    arm: Arm,
    cluster: Cluster,
    words: list[str],
    origin: str,
    notes: str,
    command: str,
    settings: str,
    env: Mapping[str, str],
    checkpoints: str,
    setup: str = "",
) -> str:
    """The launch script around ``words`` (the overrides as bash words); ``settings`` sets REPO_ROOT and ARM_DIR;
    ``env`` is exported and handed to Ray's actors (verl reads it in every process); ``checkpoints`` is the
    arm's checkpoint folder as a bash word. One launch of verl per stop (``stops``) not yet checkpointed."""
    ov = " \\\n  ".join(words)
    stop_list = " ".join(map(str, stops(arm)))
    exports = "".join(f"export {name}={shlex.quote(value)}\n" for name, value in env.items())
    ray_env = "".join(f"  \"+ray_kwargs.ray_init.runtime_env.env_vars.{name}='${name}'\" \\\n" for name in env)
    return f"""#!/usr/bin/env bash
# BroRL companion, arm {arm.name}: N={arm.rollouts} rollouts x {arm.prompts_per_step} prompts per step,
# {arm.steps} RL steps, on {cluster.nnodes} node(s) x {cluster.n_gpus_per_node} GPU(s),
# verl 0.9.1 (python -m {ENTRY_POINT}).
# Generated by {origin}; re-generate rather than edit.
#
{notes}{setup or cluster_setup(cluster)}#   {command}
{stops_note(arm)}set -euo pipefail
{settings}PYTHON="${{PYTHON:-python3}}"
CKPT_ARM={checkpoints}
mkdir -p "$ARM_DIR/logs"
export PYTHONPATH="$REPO_ROOT${{PYTHONPATH:+:$PYTHONPATH}}"
{exports}cd "$REPO_ROOT"
for STOP in {stop_list}; do
  DONE=$(cat "$CKPT_ARM/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)
  (( DONE < STOP )) || continue
  SEGMENT=$(find "$ARM_DIR/logs" -maxdepth 1 -name 'segment_*.jsonl' | wc -l)
  LOG_FILE=$(printf '%s/logs/segment_%03d.jsonl' "$ARM_DIR" "$SEGMENT")
  export VERL_FILE_LOGGER_PATH="$LOG_FILE"
  echo "[brorl] arm {arm.name}, steps $DONE to $STOP, segment $SEGMENT, log $LOG_FILE"
  "$PYTHON" -m {ENTRY_POINT} \\
  {ov} \\
  {STEPS_KEY}="$STOP" \\
  "+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH='$LOG_FILE'" \\
  "+ray_kwargs.ray_init.runtime_env.env_vars.PYTHONPATH='$REPO_ROOT'" \\
{ray_env}  "$@" 2>&1 | tee -a "$ARM_DIR/console.log"
done
"""


def start(script: Path, env: Mapping[str, str], extra: Collection[str], log) -> subprocess.Popen:
    """Start a launch script in its own process group (so ``stop`` can take Ray down with it)."""
    return subprocess.Popen(
        ["bash", str(script), *extra], env=dict(env), start_new_session=True, stdout=log, stderr=log
    )


def stop(proc: subprocess.Popen) -> None:
    """Kill a launch's process group (the driver and the Ray processes it started) and wait for it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


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
    """Run a launch script, passing each output line to ``on_line``; RuntimeError on a non-zero exit."""
    env = {**os.environ, "PYTHON": sys.executable}  # the launch uses this interpreter's environment
    proc = subprocess.Popen(
        ["bash", str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1, env=env
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        on_line(line.rstrip("\n"))
    if proc.wait() != 0:
        raise RuntimeError(f"{script} exited with status {proc.returncode}; see {script.parent / 'console.log'}")
