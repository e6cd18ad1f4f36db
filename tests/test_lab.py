"""`make lab` on a remote machine and as root: JupyterLab starts headless, its URL with the token is printed first
and answers, and ending it by its process group leaves nothing behind."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.pipeline import lab


def test_the_command_line_is_headless_and_root_safe_on_a_fixed_port():
    cmd = lab.command(8890, "abc", browser=False, root=True)
    assert "--no-browser" in cmd and "--allow-root" in cmd
    assert "--port=8890" in cmd and "--ServerApp.port_retries=0" in cmd and "--IdentityProvider.token=abc" in cmd
    assert not {"--no-browser", "--allow-root"} & set(lab.command(8890, "abc", browser=True, root=False))
    assert "ssh -N -L 8890:localhost:8890" in lab.banner(8890, "abc")
    assert "http://localhost:8890/lab?token=abc" in lab.banner(8890, "abc")


@pytest.mark.parametrize(
    "env, platform, headless",
    [
        ({}, "linux", True),
        ({"DISPLAY": ":0"}, "linux", False),
        ({"WAYLAND_DISPLAY": "wayland-0"}, "linux", False),
        ({"DISPLAY": ":0", "SSH_CONNECTION": "1.2.3.4 5 6.7.8.9 22"}, "linux", True),
        ({}, "darwin", False),
    ],
)
def test_no_browser_is_opened_where_none_can_open(env, platform, headless):
    assert lab.is_headless(env, platform) is headless


@pytest.mark.parametrize("value, message", [("80", "--port=80 is not allowed"), ("http", "--port='http' is not")])
def test_a_bad_port_is_refused_naming_the_option(value, message, capsys):
    assert lab.main(["--port", value]) == 2
    assert message in capsys.readouterr().err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _first_line(log, proc, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        text = log.read_text()
        if "\n" in text:
            return text.splitlines()[0]
        time.sleep(0.1)
    return log.read_text()


def test_lab_starts_headless_prints_its_url_first_and_answers_it(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env |= {"JUPYTER_CONFIG_DIR": str(tmp_path / "config"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
    log = tmp_path / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "brorl_lib.pipeline.lab", "--port", str(port)],
            cwd=REPO_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        first = _first_line(log, proc)
        assert f"http://localhost:{port}/lab?token=" in first, first
        token = first.strip().rsplit("token=", 1)[1]
        deadline, answered = time.monotonic() + 120, None
        while time.monotonic() < deadline and proc.poll() is None and answered is None:
            try:
                with urllib.request.urlopen(f"http://localhost:{port}/api/status?token={token}", timeout=5) as r:
                    answered = r.status
            except OSError:
                time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    assert answered == 200, f"JupyterLab did not answer (exit code {proc.returncode}):\n{log.read_text()}"
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nothing of its process group is left
