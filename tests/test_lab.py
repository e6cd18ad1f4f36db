"""`make lab` on a remote machine and as root: JupyterLab starts headless, its URL with the token is printed first
and answers, and ending it by its process group leaves nothing behind; it serves working copies whose parameters
cell holds the values that run, kept where a reader changed them."""

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest
from hang_limits import HANG_S

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.profiles import plan_run
from brorl_lib.core.registry import NOTEBOOKS, get_notebook
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


def _first_line(log, proc, timeout_s: float = HANG_S) -> str:
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
            [sys.executable, "-m", "brorl_lib.pipeline.lab", "--port", str(port), "--dir", str(tmp_path / "lab")],
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
        deadline, answered = time.monotonic() + HANG_S, None
        while time.monotonic() < deadline and proc.poll() is None and answered is None:
            try:
                with urllib.request.urlopen(f"http://localhost:{port}/api/status?token={token}", timeout=5) as r:
                    answered = r.status
            except OSError:
                time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=HANG_S)
    assert answered == 200, f"JupyterLab did not answer (exit code {proc.returncode}):\n{log.read_text()}"
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)  # nothing of its process group is left


def _parameters_cell(nb) -> str:
    return next(c.source for c in nb.cells if "parameters" in c.metadata.get("tags", []))


def test_a_working_copy_runs_the_values_its_parameters_cell_shows(tmp_path):
    assert lab.prepare(tmp_path) == []
    for spec in NOTEBOOKS:
        nb = nbformat.read(tmp_path / spec.path.name, as_version=4)
        assert not [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]  # no second cell
        values = plan_run(spec, spec.committed_profile).parameters
        assert _parameters_cell(nb) == spec.config_class().parameters_cell(values)
        committed = nbformat.read(spec.path, as_version=4)
        assert [c.outputs for c in nb.cells if c.cell_type == "code"] == [
            c.outputs for c in committed.cells if c.cell_type == "code" and "injected-parameters" not in c.metadata.tags
        ]
    theory = _parameters_cell(nbformat.read(tmp_path / "01_theory.ipynb", as_version=4))
    assert "n_instances: int = 3000  #" in theory  # the paper profile's value, where the default is 300
    settings = json.loads((tmp_path / lab.SETTINGS / "overrides.json").read_text())
    assert settings["@jupyterlab/apputils-extension:notification"]["fetchNews"] == "false"
    assert f"--LabApp.app_settings_dir={tmp_path / lab.SETTINGS}" in lab.command(1, "t", browser=False, root=False,
                                                                                notebooks=tmp_path)  # fmt: skip


def test_a_changed_working_copy_is_kept_and_an_untouched_one_follows_its_notebook(tmp_path):
    source = tmp_path / "notebooks"
    source.mkdir()
    spec = dataclasses.replace(get_notebook("01_theory"), directory=source)
    shutil.copyfile(get_notebook("01_theory").path, spec.path)
    work = tmp_path / "lab"
    lab.prepare(work, (spec,))
    copy = work / spec.path.name
    edited = copy.read_text().replace("n_instances: int = 3000", "n_instances: int = 77")
    copy.write_text(edited)
    assert lab.prepare(work, (spec,)) == [] and copy.read_text() == edited  # the reader's edit stays
    nb = nbformat.read(spec.path, as_version=4)
    nb.cells[0].source += "\n\nA changed introduction."
    nbformat.write(nb, spec.path)
    said = lab.prepare(work, (spec,))
    assert copy.read_text() == edited and len(said) == 1 and "keeps your changes" in said[0]
    copy.unlink()
    lab.prepare(work, (spec,))
    assert "A changed introduction." in copy.read_text()
    nb.cells[0].source += " Again."
    nbformat.write(nb, spec.path)
    assert lab.prepare(work, (spec,)) == [] and "Again." in copy.read_text()  # untouched: it follows
