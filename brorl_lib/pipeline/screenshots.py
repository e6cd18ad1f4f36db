"""Screenshots of the notebooks' explore sections (docs/screenshots/), each with a sidecar that says what it shows.

The browser test (tests/browser/test_jupyterlab.py) runs each notebook in JupyterLab and photographs its explore
section; ``make screenshots`` copies those pictures to ``docs/screenshots/NAME.png`` and writes beside each one
``NAME.json``: the notebook, the profile it ran with and the notebook's input hash at that moment (the same hash
``python -m brorl_lib status`` compares: notebook source, the brorl_lib modules it imports, parameters, data
files). A screenshot whose notebook's inputs changed since may show what the notebook no longer does;
:func:`stale` names it, and a unit test fails on it for every screenshot the README or the book shows.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from brorl_lib.core import atomic
from brorl_lib.core.paths import NOTEBOOKS_DIR, REPO_ROOT
from brorl_lib.core.profiles import plan_run
from brorl_lib.core.registry import get_notebook
from brorl_lib.pipeline.hashing import data_files, input_hashes, library_files, notebook_code, sha256_file

SHOTS_DIR = REPO_ROOT / "docs" / "screenshots"
REFRESH = "make screenshots"
PAGES = ("README.md", "docs/*.md", "notebooks/*.ipynb")  # what the README and the book show
_IMAGE = re.compile(r"(?:!\[[^\]]*\]\(\s*<?|src=[\"'])([^)\s>\"']*screenshots/([\w.-]+)\.png)")


def profile_of(notebook: str) -> str:
    """The profile a notebook is photographed with: the one its committed outputs carry."""
    return get_notebook(notebook).committed_profile


def parameters_of(notebook: str) -> dict[str, object]:
    """The parameters the screenshot's run uses: those of its profile that differ from the notebook's defaults."""
    return plan_run(get_notebook(notebook), profile_of(notebook)).parameters


def current_inputs(notebook: str) -> dict[str, str]:
    """The notebook's input hashes now, with the screenshot's parameters (``"input"``: their combination)."""
    return input_hashes(get_notebook(notebook), parameters_of(notebook))


def current_files(notebook: str) -> dict[str, str]:
    """SHA-256 of each brorl_lib module and data file the notebook's input hash covers, by repository path: what
    lets a stale screenshot's message name the files that changed."""
    spec = get_notebook(notebook)
    code = [src for kind, src in notebook_code(spec.path) if kind == "code"]
    files = library_files(code) + data_files(spec)
    return {p.relative_to(REPO_ROOT).as_posix(): sha256_file(p) for p in files}


def sidecar_of(png: Path) -> Path:
    return Path(png).with_suffix(".json")


def record(png: Path, notebook: str, inputs: dict[str, str], files: dict[str, str] | None = None) -> Path:
    """Write the sidecar of screenshot ``png`` of ``notebook``, taken when its input hashes were ``inputs`` and the
    files they cover had the hashes ``files`` (:func:`current_files`)."""
    entry = {
        "notebook": notebook,
        "profile": profile_of(notebook),
        "input_hash": inputs["input"],
        "inputs": {k: v for k, v in inputs.items() if k != "input"},
        "files": files or {},
        "refresh": f"{REFRESH} NOTEBOOKS={notebook}",
    }
    path = sidecar_of(png)
    atomic.write_text(path, json.dumps(entry, indent=2, sort_keys=True) + "\n")
    return path


def shown(patterns: tuple[str, ...] = PAGES, root: Path = REPO_ROOT) -> dict[str, list[str]]:
    """Screenshot name (file stem) -> the pages under ``root`` that show it."""
    found: dict[str, list[str]] = {}
    for pattern in patterns:
        for page in sorted(root.glob(pattern)):
            text = page.read_text(encoding="utf-8")
            for match in _IMAGE.finditer(text):
                pages = found.setdefault(match.group(2), [])
                rel = page.relative_to(root).as_posix()
                if rel not in pages:
                    pages.append(rel)
    return found


def problem(name: str, shots_dir: Path = SHOTS_DIR) -> str | None:
    """Why screenshot ``name`` (docs/screenshots/NAME.png) may no longer show its notebook, or None."""
    png = shots_dir / f"{name}.png"
    refresh = f"`{REFRESH} NOTEBOOKS={name}`"
    if not (NOTEBOOKS_DIR / f"{name}.ipynb").is_file():
        return f"{name}.png: no notebook {name}.ipynb to photograph (screenshots are named after their notebook)"
    if not png.is_file():
        return f"{name}.png is missing; {refresh} takes it"
    sidecar = sidecar_of(png)
    try:
        entry = json.loads(sidecar.read_text())
        taken = entry["input_hash"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"{name}.png has no readable record of what it shows ({sidecar.name}); {refresh} takes it again"
    try:
        now = current_inputs(name)
    except ValueError as err:  # e.g. its profile names a parameter the notebook no longer has
        return f"{name}.png: the inputs of {name} with the {profile_of(name)} profile cannot be hashed: {err}"
    if taken == now["input"]:
        return None
    parts = [p for p, h in now.items() if p != "input" and (entry.get("inputs") or {}).get(p) != h]
    what = f" ({', '.join(parts)} changed{_changed_files(name, entry.get('files'))})" if parts else ""
    return f"{name}.png shows {name} as it was before its inputs changed{what}; {refresh} takes it again"


def _changed_files(name: str, then: dict[str, str] | None, shown: int = 4) -> str:
    """': a.py, b.csv, ...': the files whose hash differs from the recorded ``then`` (empty if none recorded)."""
    if not then:
        return ""
    try:
        now = current_files(name)
    except (OSError, ValueError):
        return ""
    changed = sorted(p for p in set(now) | set(then) if now.get(p) != then.get(p))
    more = f" and {len(changed) - shown} more" if len(changed) > shown else ""
    return f": {', '.join(changed[:shown])}{more}" if changed else ""


def stale(names: list[str] | None = None, shots_dir: Path = SHOTS_DIR) -> list[str]:
    """A line for every screenshot among ``names`` (default: those the README or the book shows) that may no
    longer show its notebook, naming the command that takes it again."""
    names = sorted(shown()) if names is None else names
    return [p for p in (problem(n, shots_dir) for n in names) if p]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m brorl_lib.pipeline.screenshots",
        description="List the screenshots shown in the README or the book whose notebook changed since.",
    )
    parser.add_argument("--names", action="store_true", help="print only the notebooks to photograph again")
    args = parser.parse_args(argv)
    names = sorted(shown())
    lines = stale(names)
    if args.names:
        print(" ".join(n for n in names if problem(n)))
        return 0
    for line in lines:
        print(f"STALE  {line}")
    print(f"{len(names) - len(lines)} of {len(names)} screenshots are current")
    if lines:
        print(f"to take them again: {refresh_command(lines)}")
    return 1 if lines else 0


def refresh_command(problems: list[str]) -> str:
    """One command that takes again every screenshot named by ``problems`` (lines of :func:`stale`)."""
    names = [line.split(".png", 1)[0] for line in problems]
    return f'{REFRESH} NOTEBOOKS="{" ".join(names)}"' if names else REFRESH


if __name__ == "__main__":
    sys.exit(main())
