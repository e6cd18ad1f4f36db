"""build/run-log.jsonl: the facts of each notebook run that the inputs do not determine (not committed).

One JSON line per run: when, how long, on which host and Python, at which commit, and what came of it.
figures/MANIFEST.json holds none of these, so re-running unchanged inputs leaves it byte for byte the same.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
from pathlib import Path

from brorl_lib.core.paths import BUILD_DIR, REPO_ROOT

RUN_LOG = BUILD_DIR / "run-log.jsonl"


def git_commit() -> str:
    """``git describe --always --dirty`` of the repository, or "unknown" outside git."""
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty", "--abbrev=12"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def append(entry: dict, log: Path | None = None) -> None:
    """Add one run to the log, with the time (UTC), host, Python, platform and commit."""
    log = RUN_LOG if log is None else Path(log)
    record = {
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "git_commit": git_commit(),
        **entry,
    }
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, sort_keys=True, default=str) + "\n")
