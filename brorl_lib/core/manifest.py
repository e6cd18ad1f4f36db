"""figures/MANIFEST.json: for every artifact file, where it came from, and whether it is stale."""

from __future__ import annotations

import json
from pathlib import Path

from brorl_lib.core import atomic
from brorl_lib.core.hashing import input_hashes, sha256_file
from brorl_lib.core.registry import get_notebook

MANIFEST_FILE = "MANIFEST.json"
SCHEMA = 1


def load(out_dir: Path) -> dict:
    path = Path(out_dir) / MANIFEST_FILE
    if not path.exists():
        return {"schema": SCHEMA, "artifacts": {}}
    return json.loads(path.read_text())


def save(out_dir: Path, manifest: dict) -> None:
    atomic.write_text(Path(out_dir) / MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def files_of(manifest: dict, notebook: str) -> list[str]:
    return sorted(f for f, e in manifest["artifacts"].items() if e["notebook"] == notebook)


def replace_notebook(manifest: dict, notebook: str, entries: dict[str, dict]) -> list[str]:
    """Swap a notebook's entries for ``entries``; return files it no longer makes."""
    old = files_of(manifest, notebook)
    for f in old:
        del manifest["artifacts"][f]
    manifest["artifacts"].update(entries)
    return [f for f in old if f not in entries]


def file_problem(out_dir: Path, name: str, entry: dict) -> str | None:
    """Why artifact file ``name`` no longer is what the manifest recorded, or None if it is."""
    path = Path(out_dir) / name
    if not path.exists():
        return "file is missing"
    if sha256_file(path) != entry["sha256"]:
        return "file was changed after it was made"
    return None


def stale(out_dir: Path) -> list[tuple[str, str]]:
    """(file, reason) for every artifact that is missing, edited, or whose inputs changed."""
    out_dir = Path(out_dir)
    manifest = load(out_dir)
    current: dict[tuple[str, str], dict] = {}
    problems = []
    for name, entry in sorted(manifest["artifacts"].items()):
        problem = file_problem(out_dir, name, entry)
        if problem:
            problems.append((name, problem))
            continue
        key = (entry["notebook"], json.dumps(entry["parameters"], sort_keys=True))
        if key not in current:
            try:
                current[key] = input_hashes(get_notebook(entry["notebook"]), entry["parameters"])
            except (ValueError, FileNotFoundError) as err:
                current[key] = {"error": str(err)}
        now = current[key]
        if "error" in now:
            problems.append((name, f"cannot check inputs: {now['error']}"))
            continue
        changed = [k for k in ("notebook", "library", "parameters", "data") if now[k] != entry["inputs"][k]]
        if changed:
            problems.append((name, "inputs changed: " + ", ".join(changed)))
    return problems
