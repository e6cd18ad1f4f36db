"""The notebooks a change touches: those whose input files (the notebook, the brorl_lib modules it imports, the
profiles, its data files: what its input hash covers) differ from a git revision, uncommitted and untracked files
included. ``make check`` re-runs nbval on these only; ``make test`` on all.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.registry import NOTEBOOKS, NotebookSpec
from brorl_lib.pipeline.hashing import data_files, library_files, notebook_code

PROFILES = "params"  # every profile's parameters feed every notebook's input hash


def changed_files(base: str = "HEAD", root: Path = REPO_ROOT) -> set[str]:
    """Repository paths that differ from revision ``base`` in the work tree, and untracked files git does not
    ignore; ValueError naming ``base`` when git cannot compare with it."""

    def git(*args: str) -> list[str]:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=60)
        if done.returncode:
            raise ValueError(f"base={base!r} cannot be compared with the work tree: {done.stderr.strip()}")
        return [line for line in done.stdout.splitlines() if line]

    return set(git("diff", "--name-only", base, "--")) | set(git("ls-files", "--others", "--exclude-standard"))


def input_files(spec: NotebookSpec, root: Path = REPO_ROOT) -> set[str]:
    """The repository paths a notebook's input hash covers, less the profiles (``PROFILES``, matched by folder)."""
    code = [src for kind, src in notebook_code(spec.path) if kind == "code"]
    files = [spec.path, *library_files(code), *data_files(spec, root)]
    return {Path(p).resolve().relative_to(root.resolve()).as_posix() for p in files}


def touched(changed: set[str], specs: tuple[NotebookSpec, ...] = NOTEBOOKS) -> list[NotebookSpec]:
    """The notebooks among ``specs`` one of whose input files is in ``changed`` (or any profile is)."""
    profiles = any(path.startswith(f"{PROFILES}/") for path in changed)
    return [spec for spec in specs if profiles or input_files(spec) & changed]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m brorl_lib.pipeline.touched",
        description="Print the paths of the notebooks whose inputs differ from a git revision (one line, spaces).",
    )
    parser.add_argument("--base", default="HEAD", help="the git revision to compare with (default: HEAD)")
    args = parser.parse_args(argv)
    try:
        specs = touched(changed_files(args.base))
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(" ".join(spec.path.relative_to(REPO_ROOT).as_posix() for spec in specs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
