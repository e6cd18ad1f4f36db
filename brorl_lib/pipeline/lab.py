"""``make lab``: JupyterLab on working copies of notebooks/, on a desktop or a remote machine, as a user or as root.

``python -m brorl_lib.pipeline.lab [--port PORT] [--no-browser] [--dir DIR]`` starts JupyterLab on localhost with a
token of its own and prints the URL with that token first, so that it is found among the server's log lines; then
how to reach it from another computer (an SSH tunnel: the server listens on localhost only). It opens no
browser where none can open (no display, or an SSH session), passes ``--allow-root`` when run as root (a
container, a cloud machine), and never moves to another port on its own, so the URL it printed stays right:
a port in use stops it, naming ``--port``. JupyterLab then runs in this process (``exec``): Ctrl-C ends it,
and nothing is left behind.

It serves working copies, never the committed notebooks: ``lab/`` (git-ignored) holds a copy of each notebook of
notebooks/, made at the first start, so autosave never changes a committed notebook. In a copy the parameters
cell holds the values the committed outputs were made with (the committed profile's, which papermill had injected
in a second cell below it; that cell is gone), so the values a reader edits are the values that run. A copy the
reader has changed is kept at later starts; an untouched one follows its notebook when the notebook changes.
JupyterLab's news and update checks are off (their pop-up would cover the notebook; the network may be closed).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path

import nbformat

from brorl_lib.core import atomic
from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.profiles import plan_run
from brorl_lib.core.registry import NOTEBOOKS, NotebookSpec

DEFAULT_PORT = 8888  # `make lab LAB_PORT=8890` for another
WORK_DIR = REPO_ROOT / "lab"  # the working copies JupyterLab serves (git-ignored)
COPIED = ".copied.json"  # in WORK_DIR: the SHA-256 of each copy as it was written
SETTINGS = ".settings"  # in WORK_DIR: JupyterLab's application settings (overrides.json)
OVERRIDES = {  # JupyterLab's defaults for this server: no news pop-up, no update check (a reader's own settings win)
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false", "checkForUpdates": False}
}
NOTE_ID = "lab-working-copy"  # the note's cell id (a fixed one: the same copy from the same notebook)
NOTE = (
    "**Your working copy** of `notebooks/{name}.ipynb`, made by `make lab`: edits and autosave stay in `lab/`. "
    "The parameters below are the {profile} profile's, the values the committed outputs were made with: edit one "
    "and run the notebook (*Run › Run All Cells*). What each parameter allows and the notebook's own defaults: "
    "`python -m brorl_lib params {name}`. Delete this file to get a fresh copy at the next `make lab`."
)


def working_copy(spec: NotebookSpec) -> str:
    """Notebook ``spec`` as JupyterLab serves it: the committed profile's values in its parameters cell (checked
    against the declaration), papermill's injected cell removed, a note above; outputs as committed."""
    nb = nbformat.read(spec.path, as_version=4)
    values = plan_run(spec, spec.committed_profile).parameters
    cells = []
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if "injected-parameters" in tags:
            continue
        if "parameters" in tags:
            note = nbformat.v4.new_markdown_cell(NOTE.format(name=spec.name, profile=spec.committed_profile))
            note.id = NOTE_ID
            cells.append(note)
            cell.source = spec.config_class().parameters_cell(values)
        cells.append(cell)
    nb.cells = cells
    return nbformat.writes(nb) + "\n"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def prepare(dest: Path = WORK_DIR, specs: tuple[NotebookSpec, ...] = NOTEBOOKS) -> list[str]:
    """Write the working copies of ``specs`` into ``dest`` (kept where the reader changed them) and JupyterLab's
    settings; what a reader should know, one line each."""
    dest.mkdir(parents=True, exist_ok=True)
    try:
        copied = json.loads((dest / COPIED).read_text())
    except (OSError, ValueError):
        copied = {}
    said = []
    for spec in specs:
        target, fresh = dest / spec.path.name, working_copy(spec)
        if not target.exists() or _sha256(target.read_text()) == copied.get(spec.name):  # new, or untouched
            atomic.write_text(target, fresh)
            copied[spec.name] = _sha256(fresh)
        elif _sha256(fresh) != copied.get(spec.name):
            said.append(
                f"{target} keeps your changes, but notebooks/{target.name} has changed since it was copied: "
                "delete or rename it for a fresh copy"
            )
    atomic.write_text(dest / COPIED, json.dumps(copied, indent=1, sort_keys=True) + "\n")
    atomic.write_text(dest / SETTINGS / "overrides.json", json.dumps(OVERRIDES, indent=1) + "\n")
    return said


def check_port(value: object) -> int:
    """``value`` as a TCP port (1024..65535); ValueError naming --port otherwise."""
    try:
        port = int(str(value))
    except ValueError:
        raise ValueError(f"--port={value!r} is not allowed: give a whole number from 1024 to 65535") from None
    if not 1024 <= port <= 65535:
        raise ValueError(f"--port={port} is not allowed: give a whole number from 1024 to 65535")
    return port


def is_headless(env: Mapping[str, str], platform: str = sys.platform) -> bool:
    """Whether no browser can open here: an SSH session, or Linux without a display."""
    if env.get("SSH_CONNECTION") or env.get("SSH_TTY"):
        return True
    return platform.startswith("linux") and not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"))


def command(port: int, token: str, *, browser: bool, root: bool, notebooks: Path = WORK_DIR) -> list[str]:
    """The ``jupyter lab`` command line: localhost, ``port`` exactly, ``token``, the working copies as its root
    and their settings."""
    return [
        str(Path(sys.executable).parent / "jupyter"),
        "lab",
        "--ip=localhost",
        f"--port={port}",
        "--ServerApp.port_retries=0",  # the printed URL stays right: a busy port is an error, not another port
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={notebooks}",
        f"--LabApp.app_settings_dir={notebooks / SETTINGS}",
        *([] if browser else ["--no-browser"]),
        *(["--allow-root"] if root else []),
    ]


def banner(port: int, token: str, folder: Path = WORK_DIR) -> str:
    """The URL with its token, and how to open it from another computer."""
    url = f"http://localhost:{port}/lab?token={token}"
    return (
        f"JupyterLab on your working copies in {folder} (notebooks/ stays as committed): {url}\n"
        f"On a remote machine it listens on localhost only; from your own computer, open a tunnel first:\n"
        f"  ssh -N -L {port}:localhost:{port} USER@HOST\n"
        f"then open the URL above in your browser. Ctrl-C here stops JupyterLab."
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m brorl_lib.pipeline.lab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", default=DEFAULT_PORT, help=f"TCP port on localhost (default {DEFAULT_PORT})")
    ap.add_argument("--no-browser", action="store_true", help="open no browser (the default where none can open)")
    ap.add_argument(
        "--dir", type=Path, default=WORK_DIR, help=f"the working copies' folder (default {WORK_DIR.name}/ here)"
    )
    args = ap.parse_args(argv)
    try:
        port = check_port(args.port)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    token = secrets.token_hex(24)
    browser = not (args.no_browser or is_headless(os.environ))
    cmd = command(port, token, browser=browser, root=os.geteuid() == 0, notebooks=args.dir.resolve())
    print(banner(port, token, args.dir), flush=True)
    for line in prepare(args.dir):
        print(line, flush=True)
    os.execv(cmd[0], cmd)
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
