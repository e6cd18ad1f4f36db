"""Provenance classes and the record of artifacts a notebook run writes.

``save_figure`` and ``save_table`` append one line per artifact to a record file in the output
folder; after a successful run the pipeline moves the files into ``figures/`` and enters them in
``MANIFEST.json``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from brorl_lib.core.paths import output_dir
from brorl_lib.core.validation import check_choice

PROVENANCE = {
    "reported": "reported: numbers copied from the paper",
    "reproduced": "reproduced: recomputed at the paper's scale",
    "scaled-down": "scaled-down: the paper's experiment at laptop scale",
}
RECORD_FILE = ".artifacts.jsonl"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Saved:
    """What save_figure/save_table wrote; shows as one short line in a notebook."""

    name: str
    files: tuple[Path, ...]
    provenance: str

    def __repr__(self) -> str:
        kinds = ", ".join(f.suffix.lstrip(".") for f in self.files)
        return f"saved {self.name} ({kinds}) [{self.provenance}]"


def check_artifact(name: str, provenance: str) -> None:
    if not _NAME.match(name):
        raise ValueError(f"artifact name={name!r} is not allowed: use letters, digits, '_', '-', '.'")
    check_choice("provenance", provenance, PROVENANCE)


def record_artifact(name: str, files: list[Path], provenance: str, caption: str) -> Saved:
    """Note in the output folder's record that ``files`` make up artifact ``name``."""
    entry = {"name": name, "files": [Path(f).name for f in files], "provenance": provenance, "caption": caption}
    with open(output_dir() / RECORD_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry) + "\n")
    return Saved(name, tuple(files), provenance)


def read_record(folder: Path) -> list[dict]:
    """Entries of a run's record; a later entry for the same name replaces an earlier one."""
    path = Path(folder) / RECORD_FILE
    if not path.exists():
        return []
    entries = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            e = json.loads(line)
            entries[e["name"]] = e
    return list(entries.values())
