"""Nothing left behind: SIGTERM to a long command mid-run ends every process it started.

Each command runs through its real entry point with a stand-in for verl (``PYTHON``, which launch_arm.sh runs
as ``$PYTHON -m verl.trainer.main_ppo``, or a stand-in launch script): the stand-in starts a child in the
launch's process group, one in a process group of its own (as Ray's processes are, ``os.setpgrp``) and one in
a session of its own. Leftovers are found by this test's own marker in their environment, never by name.
tests/verl_cpu/test_train_on_cpu.py does the same with verl's trainer and its Ray cluster.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from hang_limits import HANG_S

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.verl_recipe import preflight, processes

MARKER = "BRORL_TEST_MARKER"
STAND_IN = """#!/usr/bin/env bash
# stands in for verl: children in the launch's group, in a group of their own and in a session of their own
sleep 600 &
{python} -c 'import os, time; os.setpgrp(); time.sleep(600)' &
setsid sleep 600 &
touch {ready}
wait
"""


def stand_in(tmp_path: Path) -> tuple[Path, Callable[[str], bool]]:
    """An executable stand-in for verl, and when it is ready (its children exist)."""
    ready = tmp_path / "ready"
    script = tmp_path / "stand_in.sh"
    script.write_text(STAND_IN.format(python=sys.executable, ready=ready))
    script.chmod(0o755)
    return script, stand_in_ready(ready)


def stand_in_ready(ready: Path) -> Callable[[str], bool]:
    """True once the stand-in wrote ``ready`` and its children exist."""
    return lambda marker: ready.exists() and len(processes.marked(marker, MARKER)) >= 5


def stop_mid_run(
    cmd: list[str], env: dict[str, str], ready: Callable[[str], bool], timeout_s: float = HANG_S
) -> tuple[int, str]:
    """Start ``cmd`` with a fresh marker, SIGTERM it once ``ready(marker)`` holds, and return its status and
    stderr after checking that no process carrying the marker is left."""
    marker = uuid.uuid4().hex
    proc = subprocess.Popen(
        cmd, env={**env, MARKER: marker}, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + timeout_s
        while not ready(marker):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, f"not ready after {timeout_s:.0f} s"
            time.sleep(0.2)
        time.sleep(0.5)  # settled in wait
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG_S)
        time.sleep(0.5)
        left = processes.marked(marker, MARKER)
        assert not left, f"left running: {[command_line(p) for p in left]}\n{err}"
        return proc.returncode, err
    finally:
        for pid in processes.marked(marker, MARKER):  # a failed check leaves nothing behind either
            os.kill(pid, signal.SIGKILL)
        proc.kill()


def command_line(pid: int) -> str:
    """``pid``'s command line ('' once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.fixture
def recipe_env(tmp_path):
    """The smoke launch's inputs: MODEL_PATH, DATA_DIR, CKPT_DIR, RUN_DIR under ``tmp_path``."""
    env = {**os.environ, "RUN_DIR": str(tmp_path / "runs")}
    for var, name in (("MODEL_PATH", "model"), ("DATA_DIR", "data"), ("CKPT_DIR", "ckpt")):
        (tmp_path / name).mkdir()
        env[var] = str(tmp_path / name)
    return env


def test_sigterm_ends_the_smoke_run_and_all_it_started(tmp_path, recipe_env):
    script, ready = stand_in(tmp_path)
    cmd = [sys.executable, "-m", "brorl_lib.verl_recipe.smoke", "--arms", "brorl", "--skip", ",".join(preflight.CHECKS)]
    status, err = stop_mid_run(cmd, {**recipe_env, "PYTHON": str(script)}, ready)
    assert status == 128 + signal.SIGTERM
    assert f"log: {tmp_path / 'runs' / 'brorl.smoke.log'}" in err  # says where its log is
    assert "SIGTERM: stopping the smoke run" in err and "no process of it is left" in err


def test_sigterm_ends_the_cpu_verl_run_and_all_it_started(tmp_path):
    script, ready = stand_in(tmp_path)
    cmd = [sys.executable, "-m", "brorl_lib.verl_recipe.cpu.run", "--arms", "prorl", "--no-eval"]
    cmd += ["--work", str(tmp_path / "work"), "--runs", str(tmp_path / "runs")]
    status, err = stop_mid_run(cmd, {**os.environ, "PYTHON": str(script)}, ready)
    assert status == 128 + signal.SIGTERM
    assert f"log: {tmp_path / 'work' / 'prorl.console.log'}" in err
    assert "no process of it is left" in err


def test_sigterm_ends_notebook_05s_launch_and_all_it_started(tmp_path):
    script, ready = stand_in(tmp_path)
    launch_sh = tmp_path / "launch.sh"
    launch_sh.write_text(f"#!/usr/bin/env bash\n{script}\n")
    code = (
        "import sys, types; from pathlib import Path; from brorl_lib.verl_recipe import report; "
        "report.execute(types.SimpleNamespace(arms=['brorl']), "
        "types.SimpleNamespace(scripts={'brorl': Path(sys.argv[1])}))"
    )  # what notebook 05 runs with execute=True, in this process as in its kernel
    status, err = stop_mid_run([sys.executable, "-c", code, str(launch_sh)], dict(os.environ), ready)
    assert status != 0 and "SIGTERM: stopping the launch of" in err


def test_the_smoke_run_stops_on_a_failed_preflight_check_before_launching(tmp_path, recipe_env):
    skip = ",".join(c for c in preflight.CHECKS if c != "data")  # the data check fails: DATA_DIR is empty
    out = subprocess.run(
        [sys.executable, "-m", "brorl_lib.verl_recipe.smoke", "--arms", "brorl", "--skip", skip],
        env=recipe_env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert out.returncode == 1
    assert "FAIL  data" in out.stdout
    assert "1 check(s) failed (data): nothing was launched" in out.stderr
    assert not (tmp_path / "runs").exists()
