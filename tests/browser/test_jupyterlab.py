"""Every notebook in JupyterLab, in headless Chromium: run all cells, move one control, no error anywhere; an
edited parameter is what runs, and no committed notebook changes.

The test starts JupyterLab as `make lab` does (``pipeline.lab``: its command line, its working copies of
notebooks/ with the committed profile's values in their parameters cells, its settings; on localhost, a free port,
a random token, the copies in a folder of the test's own), drives Debian's Chromium through Playwright, and for
each notebook runs every cell with its committed profile. It then moves one control of the
explore section, checks that the figure (or the table under it) changed and that no cell shows an error,
and writes a screenshot of the explore section to build/screenshots/, with a sidecar recording the notebook's input
hash (pipeline.screenshots). It runs a notebook's cells only once its kernel is idle and connected by the kernel's
own state (the server's sessions, not the page's indicator), issues Run All again when no cell started, and
issues the rest again from the first un-run cell when a run stopped (the kernel idle, nothing queued, cells
un-run, no error: what a loaded machine did); a notebook that raises fails the test with its own error (the cell,
its first line, the exception and its message, read from the saved notebook). With BRORL_UPDATE_SCREENSHOTS=1
(`make screenshots`) both also go to docs/screenshots/, which the README and the book show, for every notebook
that ran without a problem. The server and the browser are ended by process id.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from hang_limits import HANG_S

from brorl_lib.core.paths import BUILD_DIR, INTERACTIVE_ENV, NOTEBOOKS_DIR, OUTPUT_DIR_ENV, REPO_ROOT
from brorl_lib.core.registry import NOTEBOOKS
from brorl_lib.pipeline import lab as make_lab
from brorl_lib.pipeline import screenshots

playwright = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]' installs playwright")

SHOTS = BUILD_DIR / "screenshots"
RUN_TIMEOUT_S = {"02_simulator": 3 * HANG_S, "04_laptop_rlvr": 2 * HANG_S}  # hang guards; others: the default
DEFAULT_RUN_TIMEOUT_S = HANG_S
KERNEL_READY_S = HANG_S  # a kernel's start on a loaded machine
STALL_S = 15  # the kernel idle this long, no cell queued, cells un-run and no error: the run stopped; re-issued
REISSUES = 2  # how often a stopped or unstarted run is issued again before the test fails
LAB_SETTINGS = {  # every cell in the page (no windowing); news and updates are off by `make lab`'s own settings
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none",
        "autoStartDefaultKernel": True,
    },
}


def _move(page, explore) -> None:
    """Move one control of the notebook's first explorer (per notebook: the simplest control to drive)."""
    name = page.url.split("?")[0].split("/")[-1].removesuffix(".ipynb")
    live = explore.locator(".brorl-explore").first
    if name == "02_simulator":  # seeds: a text control, read like -p seeds=...; Enter draws (ipywidgets' own)
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
    """What the explorer shows: its figure and the text under it."""
    return (live.locator(".widget-output img").first.get_attribute("src") or "") + live.locator(
        ".widget-output"
    ).first.inner_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copy_notebooks(root: Path) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """`make lab`'s working copies of notebooks/ in ``root`` (``pipeline.lab.prepare``: the parameters of the
    committed profile, which the screenshot records, in each parameters cell), outputs cleared; notebook name -> its
    input hashes with those parameters and the hashes of the files they cover, as they are now (what its
    screenshot's sidecar records)."""
    names = {}
    only = os.environ.get("BRORL_BROWSER_NOTEBOOKS", "").split()  # e.g. "03_paper_tables": those only
    unknown = sorted(set(only) - {p.stem for p in NOTEBOOKS_DIR.glob("*.ipynb")})
    if unknown:
        pytest.fail(f"no such notebook in notebooks/: {' '.join(unknown)} (BRORL_BROWSER_NOTEBOOKS, NOTEBOOKS=)")
    specs = tuple(spec for spec in NOTEBOOKS if not only or spec.name in only)
    make_lab.prepare(root, specs)
    for spec in specs:
        path = root / spec.path.name
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs, cell.execution_count = [], None
        nbformat.write(nb, path)
        names[spec.name] = (screenshots.current_inputs(spec.name), screenshots.current_files(spec.name))
    return names


@contextlib.contextmanager
def _lab(root: Path, notebooks: Path):
    """JupyterLab on ``notebooks`` (its state under ``root``): yields (url, token); ended by process id."""
    settings = root / "settings"
    for rel, values in LAB_SETTINGS.items():
        target = settings / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))
    token, port = secrets.token_hex(16), _free_port()
    env = {k: v for k, v in os.environ.items() if k not in (INTERACTIVE_ENV, OUTPUT_DIR_ENV, "MPLBACKEND")}
    env |= {"PYTHONHASHSEED": "0", "JUPYTER_CONFIG_DIR": str(root / "config"), "JUPYTER_RUNTIME_DIR": str(root / "rt")}
    cmd = make_lab.command(port, token, browser=False, root=os.geteuid() == 0, notebooks=notebooks)  # as `make lab`
    cmd += [f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={root / 'workspaces'}"]
    with open(root / "lab.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            yield _serve(proc, f"http://localhost:{port}", token, root), token
        finally:
            _end(proc)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a copy of notebooks/: yields (url, token, {notebook name: its hashes})."""
    root = tmp_path_factory.mktemp("lab")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    names = _copy_notebooks(notebooks)
    with _lab(root, notebooks) as (url, token):
        yield url, token, names


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
    deadline = time.monotonic() + HANG_S
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2)
            return url
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"JupyterLab exited: {(root / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.5)
    pytest.fail(f"JupyterLab did not answer within {HANG_S:.0f} s")


def _kernel(url: str, token: str, name: str) -> dict:
    """The kernel of notebook ``name`` as the server sees it (``execution_state``, ``connections``); {} if none."""
    with urllib.request.urlopen(f"{url}/api/sessions?token={token}", timeout=10) as response:
        sessions = json.load(response)
    found = [s["kernel"] for s in sessions if s.get("path", "").endswith(f"{name}.ipynb") and s.get("kernel")]
    return found[0] if found else {}


def _wait_kernel_ready(url: str, token: str, name: str, timeout_s: float = KERNEL_READY_S) -> None:
    """Until the notebook's kernel is idle by its own state (the server's, not the page's indicator) and the page
    is connected to it: cells sent earlier can be dropped by a kernel still starting on a loaded machine."""
    deadline, kernel = time.monotonic() + timeout_s, {}
    while time.monotonic() < deadline:
        kernel = _kernel(url, token, name)
        if kernel.get("execution_state") == "idle" and kernel.get("connections", 0) >= 1:
            return
        time.sleep(0.5)
    raise AssertionError(f"the kernel of {name} was not idle and connected within {timeout_s} s: {kernel}")


def _prompts(page) -> list[str]:
    """Each code cell's prompt: '[ ]:' not run, '[*]:' queued or running, '[3]:' run."""
    return [t.strip() for t in page.locator(".jp-CodeCell .jp-InputPrompt").all_inner_texts()]


def _unrun(prompts: list[str]) -> list[int]:
    return [i for i, t in enumerate(prompts) if t in ("[ ]:", "")]


def _run_from(page, index: int) -> None:
    """Run the code cell ``index`` and all below it (Run > Run Selected Cell and All Below), as a reader would."""
    page.locator(".jp-CodeCell .jp-InputPrompt").nth(index).click()
    page.get_by_role("menuitem", name="Run", exact=True).click()
    page.get_by_text("Run Selected Cell and All Below", exact=True).click()


def _wait_idle(page, url: str, token: str, name: str, timeout_s: float) -> None:
    """Until every code cell has run, or a cell failed (the cells after it stay un-run: waiting would not change
    that). A run that stopped (the kernel idle by its own state for ``STALL_S``, nothing queued, cells un-run, no
    error) is issued again from its first un-run cell, at most ``REISSUES`` times. AssertionError with what the
    notebook and its kernel show otherwise."""
    deadline, reissued, idle_since = time.monotonic() + timeout_s, 0, None
    while time.monotonic() < deadline:
        prompts = _prompts(page)
        busy = any("*" in t for t in prompts)
        idle = not busy and _kernel(url, token, name).get("execution_state") == "idle"
        if idle and (not _unrun(prompts) or _errors(page)):
            return
        idle_since = (idle_since or time.monotonic()) if idle else None
        if idle_since is not None and time.monotonic() - idle_since >= STALL_S:
            if reissued == REISSUES:
                break
            reissued += 1
            _run_from(page, _unrun(prompts)[0])
            idle_since = None
        time.sleep(1)
    raise AssertionError(f"the run stopped ({reissued} times issued again): {_state(page, url, token, name)}")


def _run_all(page, url: str, token: str, name: str, started_within_s: float = 60) -> None:
    """Run > Run All Cells, once the kernel is ready; again if no cell has started within ``started_within_s``
    (every prompt still '[ ]:' and the kernel idle), at most ``REISSUES`` times."""
    _wait_kernel_ready(url, token, name)
    for _ in range(1 + REISSUES):
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_text("Run All Cells", exact=True).click()
        deadline = time.monotonic() + started_within_s
        while time.monotonic() < deadline:
            if any(t not in ("[ ]:", "") for t in _prompts(page)):
                return
            time.sleep(1)
    raise AssertionError(f"Run All Cells did not start in {1 + REISSUES} tries: {_state(page, url, token, name)}")


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:80]


def _saved_notebook(page, url: str, token: str, name: str) -> dict | None:
    """The notebook as the page holds it (saved first, its outputs with it), from the server; None if unreadable."""
    page.locator(".jp-NotebookPanel-toolbar [data-command='docmanager:save']").first.click()
    page.wait_for_timeout(1500)
    try:
        with urllib.request.urlopen(f"{url}/api/contents/{name}.ipynb?content=1&token={token}", timeout=10) as r:
            return json.load(r)["content"]
    except (OSError, KeyError, ValueError):
        return None


def _state(page, url: str, token: str, name: str) -> str:
    """What went wrong, in the notebook's own words: the first cell that raised (its number among the code cells,
    its first line, the exception's name and message), else the first cell that did not run; and the kernel."""
    kernel = _kernel(url, token, name)
    said = f"kernel {kernel.get('execution_state', 'not found')}"
    nb = _saved_notebook(page, url, token, name)
    if nb is None:
        return f"{said}; prompts {_prompts(page)}"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for i, cell in enumerate(code, 1):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                return (
                    f"code cell {i} ({_first_line(source)!r}) raised {out.get('ename')}: "
                    f"{_first_line(out.get('evalue', ''))}; {said}"
                )
    unrun = [i for i, c in enumerate(code, 1) if c.get("execution_count") is None]
    if unrun:
        source = "".join(code[unrun[0] - 1]["source"])
        return (
            f"{len(unrun)} of {len(code)} code cells not run, the first: {unrun[0]} ({_first_line(source)!r}); {said}"
        )
    return f"every code cell ran; {said}"


# a progress bar's timings and rate ("[00:00<00:00, 1360.44it/s]") hidden where they stand, the layout unchanged
_HIDE_RATES_JS = r"""(cell) => { for (const el of cell.querySelectorAll(".widget-html-content")) {
  el.innerHTML = el.innerHTML.replace(/\[[^\]]*(it\/s|s\/it)\]/g, (m) => `<span style="visibility:hidden">${m}</span>`);
} }"""


def _errors(page) -> list[str]:
    """Error outputs, widgets that failed to render, and messages in the explorers' error colour."""
    found = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
    found = [t for t in found if "Traceback" in t or "Error" in t]
    found += page.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']").all_inner_texts()
    found += [t for t in page.locator(".jp-OutputArea-output").all_inner_texts() if "Error displaying widget" in t]
    said = page.locator(".brorl-explore .widget-output .jp-OutputArea-output").all_inner_texts()
    found += [t for t in said if t.startswith(("ValueError", "stopped"))]
    return found


def _open(page, url: str, token: str, name: str) -> None:
    """Open notebook ``name`` alone in its own workspace, its kernel chosen."""
    page.goto(f"{url}/lab/workspaces/{name}/tree/{name}.ipynb?reset&token={token}")  # this notebook only
    page.locator(".jp-Notebook").wait_for(timeout=HANG_S * 1000)
    accept = page.locator(".jp-Dialog .jp-mod-accept")  # "Select Kernel", should the setting not apply
    page.wait_for_timeout(1000)
    if accept.count():
        accept.first.click()


def _check(page, url: str, token: str, name: str) -> list[str]:
    """Open ``name``, run all its cells, move one control; the problems found (empty: none)."""
    _open(page, url, token, name)
    _run_all(page, url, token, name)
    _wait_idle(page, url, token, name, RUN_TIMEOUT_S.get(name, DEFAULT_RUN_TIMEOUT_S))
    errors = _errors(page)
    if errors:
        return [f"{name}: after running all cells, {_state(page, url, token, name)} (page: {errors[0][-300:]!r})"]
    explore = page.locator(".jp-CodeCell", has=page.locator(".brorl-explore")).last
    live = explore.locator(".brorl-explore").first
    live.locator(".widget-output img[src^='blob:'], .widget-output img[src^='data:']").first.wait_for(
        timeout=HANG_S * 1000
    )
    before = _snapshot(live)
    _move(page, explore)
    deadline = time.monotonic() + HANG_S
    figure = live.locator(".widget-output img")  # gone while a draw shows only its progress bar
    while (_snapshot(live) == before or not figure.count()) and time.monotonic() < deadline:
        time.sleep(0.3)
    changed = _snapshot(live) != before and figure.count() > 0
    explore.scroll_into_view_if_needed()
    explore.evaluate(_HIDE_RATES_JS)  # the picture shows the bar, not this machine's speed: the same bytes each time
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


def _git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO_ROOT, capture_output=True, text=True
    ).stdout


EDITED = ("n_instances: int = 3000", "3000", "700")  # 01_theory's parameters cell line, its value, the reader's


def test_an_edited_parameter_is_what_runs_and_no_committed_notebook_changes(lab, browser):
    """A reader edits the parameters cell of `make lab`'s copy of 01_theory, runs the notebook and saves it: the
    printed result follows the new value, the copy holds it, and the checkout's git status is as it was. No pop-up
    (JupyterLab's news question) covers the notebook."""
    url, token, names = lab
    if "01_theory" not in names:
        pytest.skip("01_theory is not among BRORL_BROWSER_NOTEBOOKS")
    before = _git_status()
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    try:
        _open(page, url, token, "01_theory")
        line, old, new = EDITED
        page.wait_for_timeout(3000)  # a pop-up would be up by now
        toasts = page.locator(".Toastify__toast")
        assert toasts.count() == 0, f"a pop-up covers the notebook: {toasts.all_inner_texts()}"
        cell = page.locator(".jp-CodeCell", has_text="n_instances: int = ").first  # before and after the edit
        cell.locator(".cm-line", has_text=line).get_by_text(old, exact=True).dblclick()  # the number, as a word
        page.keyboard.type(new)
        assert cell.locator(".cm-line", has_text=f"n_instances: int = {new}").count() == 1
        _run_all(page, url, token, "01_theory")
        _wait_idle(page, url, token, "01_theory", RUN_TIMEOUT_S.get("01_theory", DEFAULT_RUN_TIMEOUT_S))
        assert not _errors(page), _state(page, url, token, "01_theory")
        printed = "\n".join(page.locator(".jp-OutputArea-output").all_inner_texts())
        assert f"instances: {new}\n" in printed and f"instances: {old}\n" not in printed
        saved = _saved_notebook(page, url, token, "01_theory")
        assert saved is not None and f"n_instances: int = {new}  #" in "".join(
            "".join(c["source"]) for c in saved["cells"] if "parameters" in c["metadata"].get("tags", [])
        )
    finally:
        page.context.close()
    assert _git_status() == before  # autosave and the run changed nothing in the checkout


# --- the waits themselves, on two small notebooks ---
TINY = {
    "tiny_ok": ["import time\nx = 1", "time.sleep(1)\ny = x + 1", "print(y)"],
    "tiny_fails": ["x = 1", 'raise ValueError("requested failure")', "print(x)"],
}


@pytest.fixture(scope="module")
def tiny_lab(tmp_path_factory):
    """JupyterLab on the notebooks of ``TINY``: yields (url, token)."""
    root = tmp_path_factory.mktemp("tiny_lab")
    notebooks = root / "notebooks"
    notebooks.mkdir()
    for name, cells in TINY.items():
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, notebooks / f"{name}.ipynb")
    make_lab.prepare(notebooks, ())  # `make lab`'s settings only
    with _lab(root, notebooks) as served:
        yield served


def test_a_run_that_stopped_after_its_first_cell_is_issued_again(tiny_lab, browser):
    """What a loaded machine did: the first cell ran, the kernel went idle, every other prompt stayed '[ ]'."""
    url, token = tiny_lab
    page = browser.new_page()
    try:
        _open(page, url, token, "tiny_ok")
        _wait_kernel_ready(url, token, "tiny_ok")
        page.locator(".jp-CodeCell .jp-InputPrompt").first.click()
        page.keyboard.press("Control+Enter")  # the first cell only
        deadline = time.monotonic() + HANG_S
        while _prompts(page)[0] != "[1]:" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _prompts(page) == ["[1]:", "[ ]:", "[ ]:"]
        _wait_idle(page, url, token, "tiny_ok", timeout_s=HANG_S)
        assert not _unrun(_prompts(page)) and "2" in page.locator(".jp-OutputArea-output").last.inner_text()
    finally:
        page.close()


def test_a_failing_notebook_fails_with_its_own_error(tiny_lab, browser):
    url, token = tiny_lab
    page = browser.new_page()
    try:
        problems = _check(page, url, token, "tiny_fails")
    finally:
        page.close()
    assert len(problems) == 1
    said = "tiny_fails: after running all cells, code cell 2 ('raise ValueError(\"requested failure\")') raised "
    assert problems[0].startswith(said + "ValueError: requested failure; kernel idle"), problems
