"""Where things live in the repository, and where a notebook writes its artifacts."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PARAMS_DIR = REPO_ROOT / "params"
FIGURES_DIR = REPO_ROOT / "figures"
BUILD_DIR = REPO_ROOT / "build"
LIB_DIR = REPO_ROOT / "brorl_lib"

# The pipeline points this at a staging folder; an interactive session writes to build/interactive.
OUTPUT_DIR_ENV = "BRORL_OUTPUT_DIR"
# "1": explore cells show their controls, "0": one static line (the pipeline sets 0); unset: decided by the kernel.
INTERACTIVE_ENV = "BRORL_INTERACTIVE"


def output_dir() -> Path:
    """Folder for artifacts of the running notebook (created if missing)."""
    path = Path(os.environ.get(OUTPUT_DIR_ENV) or BUILD_DIR / "interactive")
    path.mkdir(parents=True, exist_ok=True)
    return path
