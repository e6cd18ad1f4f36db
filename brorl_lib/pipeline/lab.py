"""``make lab``: JupyterLab on notebooks/, on a desktop or a remote machine, as a user or as root.

``python -m brorl_lib.pipeline.lab [--port PORT] [--no-browser]`` starts JupyterLab on localhost with a token
of its own and prints the URL with that token first, so that it is found among the server's log lines; then
how to reach it from another computer (an SSH tunnel: the server listens on localhost only). It opens no
browser where none can open (no display, or an SSH session), passes ``--allow-root`` when run as root (a
container, a cloud machine), and never moves to another port on its own, so the URL it printed stays right:
a port in use stops it, naming ``--port``. JupyterLab then runs in this process (``exec``): Ctrl-C ends it,
and nothing is left behind.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys
from collections.abc import Mapping
from pathlib import Path

from brorl_lib.core.paths import NOTEBOOKS_DIR

DEFAULT_PORT = 8888  # `make lab LAB_PORT=8890` for another


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


def command(port: int, token: str, *, browser: bool, root: bool, notebooks: Path = NOTEBOOKS_DIR) -> list[str]:
    """The ``jupyter lab`` command line: localhost, ``port`` exactly, ``token``, notebooks/ as its root."""
    return [
        str(Path(sys.executable).parent / "jupyter"),
        "lab",
        "--ip=localhost",
        f"--port={port}",
        "--ServerApp.port_retries=0",  # the printed URL stays right: a busy port is an error, not another port
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={notebooks}",
        *([] if browser else ["--no-browser"]),
        *(["--allow-root"] if root else []),
    ]


def banner(port: int, token: str) -> str:
    """The URL with its token, and how to open it from another computer."""
    url = f"http://localhost:{port}/lab?token={token}"
    return (
        f"JupyterLab on {NOTEBOOKS_DIR.name}/: {url}\n"
        f"On a remote machine it listens on localhost only; from your own computer, open a tunnel first:\n"
        f"  ssh -N -L {port}:localhost:{port} USER@HOST\n"
        f"then open the URL above in your browser. Ctrl-C here stops JupyterLab."
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m brorl_lib.pipeline.lab", description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", default=DEFAULT_PORT, help=f"TCP port on localhost (default {DEFAULT_PORT})")
    ap.add_argument("--no-browser", action="store_true", help="open no browser (the default where none can open)")
    args = ap.parse_args(argv)
    try:
        port = check_port(args.port)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    token = secrets.token_hex(24)
    browser = not (args.no_browser or is_headless(os.environ))
    cmd = command(port, token, browser=browser, root=os.geteuid() == 0)
    print(banner(port, token), flush=True)
    os.execv(cmd[0], cmd)
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
