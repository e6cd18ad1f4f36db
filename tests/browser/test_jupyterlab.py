"""Every notebook in JupyterLab, in headless Chromium: run all cells, move one control, no error anywhere.

The test starts JupyterLab itself (localhost, a free port, a random token) on a copy of notebooks/, drives
Debian's Chromium through Playwright, and for each notebook runs every cell with its committed profile (the
notebook's own defaults; notebook 04's: paper, read back from the committed runs). It then moves one control of the
explore section, checks that the figure (or the table under it) changed and that no cell shows an error,
and writes a screenshot of the explore section to build/screenshots/, with a sidecar recording the notebook's input
hash (pipeline.screenshots). With BRORL_UPDATE_SCREENSHOTS=1 (`make screenshots`) both also go to docs/screenshots/,
which the README and the book show, for every notebook that ran without a problem. The server and the browser are
ended by process id.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from papermill.parameterize import parameterize_notebook

from brorl_lib.core.paths import BUILD_DIR, INTERACTIVE_ENV, NOTEBOOKS_DIR, OUTPUT_DIR_ENV
from brorl_lib.pipeline import screenshots

playwright = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]' installs playwright")

SHOTS = BUILD_DIR / "screenshots"
RUN_TIMEOUT_S = {"02_simulator": 900, "04_laptop_rlvr": 600}  # guards on a loaded machine; others: the default
DEFAULT_RUN_TIMEOUT_S = 300
LAB_SETTINGS = {  # every cell in the page (no windowing), and no news or update checks on a closed network
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
        "autoStartDefaultKernel": True,
    },
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def _move(page, explore) -> None:
    """Move one control of the notebook's first explorer (per notebook: the simplest control to drive)."""
    name = page.url.split("?")[0].split("/")[-1].removesuffix(".ipynb")
    live = explore.locator(".brorl-live").first
    if name == "02_simulator":  # seeds: a text control, read like -p seeds=...
        box = live.locator(".widget-text", has_text="seeds").locator("input")
        box.fill("0, 1")
        box.press("Enter")
    elif name == "03_paper_tables":  # which reported column
        live.locator("select").first.select_option(index=3)
    elif name == "04_laptop_rlvr":  # which checkpoint's update quality (the view starts at the last)
        live.locator("select").first.select_option(index=0)
    else:  # 01: N of the three-terms explorer; 05: nodes of the cluster plan (a slider moved by keyboard)
        handle = live.locator(".noUi-handle").first
        handle.focus()
        handle.press("ArrowRight")


def _snapshot(live) -> str:
    """What the explorer shows: its figure and the table under it (not the status line)."""
    return live.locator("img").first.get_attribute("src") + live.locator(".brorl-live-note").inner_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copy_notebooks(root: Path) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """notebooks/ into ``root`` (outputs cleared), each with the parameters of its screenshot's profile (its
    committed profile, pipeline.screenshots.profile_of) injected after its parameters cell, as papermill does; notebook
    name -> its input hashes with those parameters and the hashes of the files they cover, as they are now (what its
    screenshot's sidecar records)."""
    names = {}
    only = os.environ.get("BRORL_BROWSER_NOTEBOOKS", "").split()  # e.g. "03_paper_tables": those only
    unknown = sorted(set(only) - {p.stem for p in NOTEBOOKS_DIR.glob("*.ipynb")})
    if unknown:
        pytest.fail(f"no such notebook in notebooks/: {' '.join(unknown)} (BRORL_BROWSER_NOTEBOOKS, NOTEBOOKS=)")
    for path in sorted(NOTEBOOKS_DIR.glob("*.ipynb")):
        if only and path.stem not in only:
            continue
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            cell.metadata.setdefault("tags", [])  # papermill's parameterize expects them (its reader adds them too)
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        parameters = screenshots.parameters_of(path.stem)
        if parameters:
            nb.metadata.setdefault("papermill", {})  # where papermill records the parameters it injects
            nb = parameterize_notebook(nb, parameters, report_mode=False)
        nbformat.write(nb, root / path.name)
        names[path.stem] = (screenshots.current_inputs(path.stem), screenshots.current_files(path.stem))
    return names


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a copy of notebooks/: yields (url, token, {notebook name: its hashes}); ended by process id."""
    root = tmp_path_factory.mktemp("lab")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    names = _copy_notebooks(notebooks)
    settings = root / "settings"
    for rel, values in LAB_SETTINGS.items():
        target = settings / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    token, port = secrets.token_hex(16), _free_port()
    env = {k: v for k, v in os.environ.items() if k not in (INTERACTIVE_ENV, OUTPUT_DIR_ENV, "MPLBACKEND")}
    env |= {"PYTHONHASHSEED": "0", "JUPYTER_CONFIG_DIR": str(root / "config"), "JUPYTER_RUNTIME_DIR": str(root / "rt")}
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        f"--port={port}",
        "--ip=127.0.0.1",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={notebooks}",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={root / 'workspaces'}",
        *(["--allow-root"] if os.geteuid() == 0 else []),  # CI runs as root
    ]
    with open(root / "lab.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield _serve(proc, f"http://127.0.0.1:{port}", token, root), token, names
        finally:
            _end(proc)


def _end(proc: subprocess.Popen) -> None:
    """End the server and the kernels it started: its process group, by the server's process id."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


def _serve(proc: subprocess.Popen, url: str, token: str, root: Path) -> str:
    """``url`` once the server answers (fails with its log if it exits first)."""
    for _ in range(120):
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            return url
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited: {(root / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.5)
    pytest.fail("JupyterLab did not answer within 60 s")


def _wait_idle(page, timeout_s: float) -> None:
    """Until every code cell has run (no '[*]' prompt left and the kernel idle), or the kernel is idle with an
    error shown: a failed cell leaves the cells after it un-run, which waiting would not change."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
        pending = [t for t in prompts if "*" in t or t.strip() in ("[ ]:", "")]
        idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").count()
        if idle and (not pending or not any("*" in t for t in prompts) and _errors(page)):
            return
        time.sleep(1)
    raise AssertionError(f"cells still running after {timeout_s} s: prompts {prompts}")


def _run_all(page, tries: int = 2, started_within_s: float = 60) -> None:
    """Run > Run All Cells; again if no cell has started within ``started_within_s`` (on a loaded machine a kernel
    that has just started can drop the first request: every prompt stays '[ ]:' and the kernel idle)."""
    for _ in range(tries):
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_text("Run All Cells", exact=True).click()
        deadline = time.monotonic() + started_within_s
        while time.monotonic() < deadline:
            prompts = page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()
            if any(t.strip() not in ("[ ]:", "") for t in prompts):
                return
            time.sleep(1)


def _errors(page) -> list[str]:
    """Error outputs, widgets that failed to render, and messages in the explorers' error colour."""
    found = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
    found = [t for t in found if "Traceback" in t or "Error" in t]
    found += page.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']").all_inner_texts()
    found += [t for t in page.locator(".jp-OutputArea-output").all_inner_texts() if "Error displaying widget" in t]
    found += page.locator(".brorl-live-message pre[style*='b00020']").all_inner_texts()
    return found


def _check(page, url: str, token: str, name: str) -> list[str]:
    """Open ``name``, run all its cells, move one control; the problems found (empty: none)."""
    page.goto(f"{url}/lab/workspaces/{name}/tree/{name}.ipynb?reset&token={token}")  # this notebook only
    page.locator(".jp-Notebook").wait_for(timeout=60_000)
    accept = page.locator(".jp-Dialog .jp-mod-accept")  # "Select Kernel", should the setting not apply
    page.wait_for_timeout(1000)
    if accept.count():
        accept.first.click()
    page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=60_000)
    _run_all(page)
    _wait_idle(page, RUN_TIMEOUT_S.get(name, DEFAULT_RUN_TIMEOUT_S))
    errors = _errors(page)
    if errors:
        return [f"{name}: error output after running all cells: {errors[:3]}"]
    explore = page.locator(".jp-CodeCell", has=page.locator(".brorl-live")).last
    live = explore.locator(".brorl-live").first
    live.locator("img[src^='blob:'], img[src^='data:']").first.wait_for(timeout=30_000)
    before = _snapshot(live)
    _move(page, explore)
    deadline = time.monotonic() + 30
    while _snapshot(live) == before and time.monotonic() < deadline:
        time.sleep(0.3)
    changed = _snapshot(live) != before
    message = live.locator(".brorl-live-message")
    while "…" in message.inner_text() and time.monotonic() < deadline:  # "drawing…" until it is shown
        time.sleep(0.3)
    explore.scroll_into_view_if_needed()
    explore.screenshot(path=str(SHOTS / f"{name}.png"))
    problems = [] if changed else [f"{name}: moving a control did not change the explore output"]
    errors = _errors(page)
    return problems + ([f"{name}: error output after moving a control: {errors[:3]}"] if errors else [])


def test_every_notebook_runs_in_jupyterlab_and_its_controls_redraw(lab, browser):
    url, token, names = lab
    SHOTS.mkdir(parents=True, exist_ok=True)
    update = os.environ.get("BRORL_UPDATE_SCREENSHOTS") == "1"
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    failures = []
    try:
        for name, (inputs, files) in names.items():
            page = context.new_page()
            try:
                problems = _check(page, url, token, name)
            except (AssertionError, playwright.Error) as err:
                problems = [f"{name}: {type(err).__name__}: {str(err).splitlines()[0]}"]
            if problems:
                page.screenshot(path=str(SHOTS / f"{name}_failed.png"), full_page=True)
                failures += problems
            else:  # the screenshot shows a notebook that ran cleanly: record what it shows
                screenshots.record(SHOTS / f"{name}.png", name, inputs, files)
                if update:
                    shown = screenshots.SHOTS_DIR / f"{name}.png"
                    shown.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(SHOTS / f"{name}.png", shown)
                    screenshots.record(shown, name, inputs, files)
            page.close()
    finally:
        context.close()
    assert not failures, "\n".join(failures) + f"\n(screenshots in {SHOTS})"
