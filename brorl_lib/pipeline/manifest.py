"""figures/MANIFEST.json: for every artifact file, where it came from, and whether it is stale.

The manifest holds only what the inputs determine (notebook, parameters, input hashes, provenance, caption,
each file's SHA-256), so re-running unchanged inputs rewrites it byte for byte. Facts of one run (wall
time, host, commit) go to the uncommitted run log (``pipeline.run_log``).
"""

from __future__ import annotations

import json
from pathlib import Path

from brorl_lib.core import atomic
from brorl_lib.core.artifacts import changes_text
from brorl_lib.core.paths import FIGURES_DIR
from brorl_lib.core.registry import get_notebook
from brorl_lib.pipeline.destination import shown
from brorl_lib.pipeline.hashing import input_hashes, sha256_file

MANIFEST_FILE = "MANIFEST.json"
SCHEMA = 1
INPUT_PARTS = ("notebook", "library", "parameters", "data")
# what `status` and the pipeline read from an entry; other keys (artifact, provenance, caption, profile) are
# written for the reader
_ENTRY_FIELDS = {"notebook": str, "parameters": dict, "input_hash": str, "inputs": dict, "sha256": str}


class ManifestError(ValueError):
    """The manifest cannot be read or has the wrong shape; the message names the file and the fix."""


def path_of(out_dir: Path) -> Path:
    return Path(out_dir) / MANIFEST_FILE


def fix_hint(out_dir: Path) -> str:
    """How to get a good manifest back, in one sentence."""
    out = "" if Path(out_dir).resolve() == FIGURES_DIR.resolve() else f" --out {shown(out_dir)}"
    return (
        f"restore the committed copy (git checkout -- {shown(path_of(out_dir))}) or rebuild it by re-running "
        f"every notebook (python -m brorl_lib reproduce{out})"
    )


def _shape_problem(data) -> str | None:
    """What is wrong with the parsed JSON ``data`` as a manifest, or None."""
    if not isinstance(data, dict):
        return f"top level is a {type(data).__name__}, not an object"
    if data.get("schema") != SCHEMA:
        return f"schema is {data.get('schema')!r}, not {SCHEMA}"
    artifacts = data.get("artifacts")
    if not isinstance(artifacts, dict):
        return f"'artifacts' is a {type(artifacts).__name__}, not an object"
    for name, entry in artifacts.items():
        if name in ("", ".", "..", MANIFEST_FILE) or "/" in name or "\\" in name:
            return f"entry {name!r} is not the name of a file in the folder"
        if not isinstance(entry, dict):
            return f"entry {name!r} is a {type(entry).__name__}, not an object"
        for key, kind in _ENTRY_FIELDS.items():
            if not isinstance(entry.get(key), kind):
                return f"entry {name!r}: {key!r} is missing or not a {kind.__name__}"
        if not all(isinstance(entry["inputs"].get(k), str) for k in INPUT_PARTS):
            return f"entry {name!r}: 'inputs' needs the hashes {list(INPUT_PARTS)}"
    return None


def exists(out_dir: Path) -> bool:
    return path_of(out_dir).exists()


def load(out_dir: Path) -> dict:
    """The manifest in ``out_dir`` (an empty one if there is none); ``ManifestError`` if it is unreadable."""
    path = path_of(out_dir)
    if not path.exists():
        return {"schema": SCHEMA, "artifacts": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ManifestError(f"{shown(path)} is unreadable ({type(err).__name__}: {err}); {fix_hint(out_dir)}") from None
    problem = _shape_problem(data)
    if problem:
        raise ManifestError(f"{shown(path)} has the wrong shape ({problem}); {fix_hint(out_dir)}")
    return data


def save(out_dir: Path, manifest: dict) -> None:
    atomic.write_text(path_of(out_dir), json.dumps(manifest, indent=2, sort_keys=True) + "\n")


EXECUTED_DIR = "notebooks"  # a run into its own folder keeps the executed notebooks here


def unrecorded(out_dir: Path, manifest: dict) -> list[str]:
    """Files (and folders, with a trailing '/') in ``out_dir`` that no manifest entry names: no notebook made them."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    known = set(manifest["artifacts"]) | {MANIFEST_FILE, EXECUTED_DIR}
    return sorted(p.name + ("/" if p.is_dir() else "") for p in out_dir.iterdir() if p.name not in known)


def files_of(manifest: dict, notebook: str) -> list[str]:
    return sorted(f for f, e in manifest["artifacts"].items() if e["notebook"] == notebook)


def replace_notebook(manifest: dict, notebook: str, entries: dict[str, dict]) -> list[str]:
    """Swap a notebook's entries for ``entries``; return files it no longer makes."""
    old = files_of(manifest, notebook)
    for f in old:
        del manifest["artifacts"][f]
    manifest["artifacts"].update(entries)
    return [f for f in old if f not in entries]


MISSING = "file is missing"
EDITED = "file was changed after it was made"  # its bytes differ from the SHA-256 recorded for it


def file_problem(out_dir: Path, name: str, entry: dict) -> str | None:
    """Why artifact file ``name`` no longer is what the manifest recorded (``MISSING``, ``EDITED``), or None."""
    path = Path(out_dir) / name
    if not path.exists():
        return MISSING
    if sha256_file(path) != entry["sha256"]:
        return EDITED
    return None


def made_otherwise(manifest: dict, profile: str) -> list[tuple[str, str]]:
    """(file, how it was made) for every entry made with another profile than ``profile``, or as a variant of it
    (a changed parameter; an artifact whose numbers the parameters do not touch, a reported one, records none; a
    variant by design, whose changes are all its notebook's own, ``core.variants.classify``'s ``beyond``, is none)."""
    found = []
    for name, entry in sorted(manifest["artifacts"].items()):
        made_with = entry.get("profile")
        variant = entry.get("variant")
        if made_with != profile:
            found.append((name, f"made with the {made_with} profile"))
        elif isinstance(variant, dict) and set(variant.get("changed", {})) - set(variant.get("by_design", [])):
            changed = changes_text(variant.get("changed", {}))
            found.append((name, f"made with the {profile} profile changed ({changed})"))
    return found


def stale(out_dir: Path) -> list[tuple[str, str]]:
    """(file, reason) for every artifact that is missing, edited, or whose inputs changed (``ManifestError`` if the
    manifest is unreadable)."""
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
        changed = [k for k in INPUT_PARTS if now[k] != entry["inputs"][k]]
        if changed:
            problems.append((name, "inputs changed: " + ", ".join(changed)))
    return problems
