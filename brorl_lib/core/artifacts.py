"""Provenance classes and the record of artifacts a notebook run writes.

``save_figure`` and ``save_table`` append one line per artifact to a record file in the output
folder; after a successful run the pipeline moves the files into ``figures/`` and enters them in
``MANIFEST.json``. A ``variant`` (parameters other than its profile's, ``core.variants``) carries the
changed parameters, an ``estimate`` its basis, a figure drawn in another style (``figures.styles``) its style.
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
    "variant": "variant: made with parameters other than its profile's",
    "estimate": "estimate: a plan or projection from reported numbers, on a stated basis",
}
STAMP_CHANGES_MAX = 60  # characters of changed parameters a figure's stamp shows; the caption lists them all
RECORD_FILE = ".artifacts.jsonl"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class Saved:
    """What save_figure/save_table wrote; shows as one short line in a notebook."""

    name: str
    files: tuple[Path, ...]
    provenance: str
    stamp: str = ""  # what the figure's corner shows, when it says more than the class (a variant)

    def __repr__(self) -> str:
        kinds = ", ".join(f.suffix.lstrip(".") for f in self.files)
        return f"saved {self.name} ({kinds}) [{self.stamp or self.provenance}]"


def check_artifact(name: str, provenance: str, basis: str = "") -> None:
    """A file name, a provenance class a notebook may declare, and a basis: always for an estimate, for a
    reported artifact whose numbers come from elsewhere than the paper (its source), else none."""
    if not _NAME.match(name):
        raise ValueError(f"artifact name={name!r} is not allowed: use letters, digits, '_', '-', '.'")
    check_choice("provenance", provenance, PROVENANCE)
    if provenance == "variant":
        raise ValueError(
            "provenance='variant' is not declared: it follows from the parameters (core.variants); declare the "
            "class the profile's parameters give"
        )
    if provenance == "estimate" and not basis.strip():
        raise ValueError("provenance='estimate' needs basis=...: what the estimate rests on, in words")
    if basis and provenance not in ("estimate", "reported"):
        raise ValueError(
            f"basis={basis!r} is for provenance='estimate' (what it rests on) or 'reported' (a source other than "
            f"the paper) only, not {provenance!r}"
        )


def _value_text(value) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    if isinstance(value, float):
        return f"{value:g}" if float(f"{value:g}") == value else repr(value)
    return str(value)


def changes_text(changed: dict) -> str:
    """``lr=0.003, steps=500``: the changed parameters and their values."""
    return ", ".join(f"{k}={_value_text(v)}" for k, v in changed.items())


def stamp_text(provenance: str, variant: dict | None = None, basis: str = "") -> str:
    """What a figure's corner shows: the class; a variant's profile and changed parameters, shortened."""
    if not variant or provenance not in ("variant", "estimate"):
        return "reported, not from the paper" if provenance == "reported" and basis else provenance
    shown, rest = [], list(variant["changed"].items())
    while rest and len(changes_text(dict(shown + rest[:1]))) <= STAMP_CHANGES_MAX:
        shown.append(rest.pop(0))
    more = f" +{len(rest)} more" if rest else ""
    listed = changes_text(dict(shown)) if shown else ""
    said = f"variant of {variant['profile']}: {listed}{more}".rstrip(": ")
    return said if provenance == "variant" else f"estimate; {said}"


def class_text(provenance: str, variant: dict | None = None, basis: str = "") -> str:
    """The class in a caption: its meaning; a variant's profile and every changed parameter; an estimate's basis."""
    if provenance == "variant" and variant:
        return f"variant: the {variant['profile']} profile's parameters except {changes_text(variant['changed'])}"
    if provenance == "estimate" and basis:
        if not variant:
            return f"estimate: {basis}"
        changes = changes_text(variant["changed"])
        return f"estimate: {basis}; the {variant['profile']} profile's parameters except {changes}"
    if provenance == "reported" and basis:
        return f"reported: numbers copied from {basis}, not from the paper"
    return PROVENANCE[provenance]


def record_artifact(
    name: str,
    files: list[Path],
    provenance: str,
    caption: str,
    *,
    changed: dict | None = None,
    basis: str = "",
    style=None,
) -> Saved:
    """Note in the output folder's record that ``files`` make up artifact ``name`` (with a variant's changed
    parameters, an estimate's basis and a non-default style's label, when there are)."""
    if changed or basis:  # the caption says what the class alone does not
        caption = f"{caption} [{class_text(provenance, changed, basis)}]"
    entry = {"name": name, "files": [Path(f).name for f in files], "provenance": provenance, "caption": caption}
    if changed:
        entry["variant"] = changed
    if basis:
        entry["basis"] = basis
    if style is not None:
        entry["style"] = style.label
    with open(output_dir() / RECORD_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(entry, default=str) + "\n")
    return Saved(name, tuple(files), provenance, stamp_text(provenance, changed, basis) if changed or basis else "")


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
