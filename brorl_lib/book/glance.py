"""Results at a glance: one row per notebook, as the notebook wrote it (its ``*_claim`` table: the paper's claim, the
verdict, its caveat, the figure; ``core.claims``), with the class its manifest entry records and a link to the figure.

Two renderings: ``glance_markdown`` (MyST, the book's front page, linking gallery cards) and ``readme_markdown``
(GitHub Markdown, the README's block, linking the files; ``book.readme`` writes and checks it). A notebook whose
row is absent or unreadable says so in its row.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from pathlib import Path

from brorl_lib.book.gallery import artifact_label, escape
from brorl_lib.core.claims import COLUMNS, SUFFIX
from brorl_lib.core.registry import NOTEBOOKS

TITLE = "## Results at a glance"


def _claim_files(recorded: dict) -> list[tuple[str, dict]]:
    """The claim rows' CSV files in the manifest, with their entries, sorted by name."""
    return [(name, e) for name, e in sorted(recorded["artifacts"].items()) if name.endswith(f"{SUFFIX}.csv")]


def claim_of(notebook: str, recorded: dict, figures: Path) -> tuple[dict[str, str], dict] | str:
    """``notebook``'s claim row and its manifest entry, or why there is none (in words)."""
    found = [(name, e) for name, e in _claim_files(recorded) if e.get("notebook") == notebook]
    if not found:
        return f"no claim row in `{figures.name}/`: `make reproduce` writes it"
    name, entry = found[0]
    try:
        with open(figures / name, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    except OSError:
        return f"`{figures.name}/{name}` is absent: `make reproduce` makes it"
    if len(rows) != 1 or set(rows[0]) != set(COLUMNS):
        return f"`{figures.name}/{name}` is not one row of {', '.join(COLUMNS)}"
    return rows[0], entry


def gfm_escape(text: str) -> str:
    """``text`` literal in a GitHub Markdown table cell: only the characters that would start markup escaped."""
    return re.sub(r"([\\|*_`<>\[\]~])", r"\\\1", text)


def _table(recorded: dict, figures: Path, quote: Callable[[str], str], link: Callable[[str, str], str]) -> list[str]:
    """The table's lines, one row per notebook; ``link(kind, name)`` renders a link to a notebook or an artifact's
    figure (kind "notebook" or "figure"), "–" where there is none."""
    artifacts = {e.get("artifact") for e in recorded["artifacts"].values()}
    lines = ["| Claim | Our verdict | Caveat | Class | Figure |", "|---|---|---|---|---|"]
    for nb in NOTEBOOKS:
        found = claim_of(nb.name, recorded, figures)
        if isinstance(found, str):
            lines.append(f"| {quote(nb.title)} ({link('notebook', nb.name)}) | {found} | – | – | – |")
            continue
        row, entry = found
        figure = link("figure", row["figure"]) if row["figure"] in artifacts else "–"
        cells = [f"{quote(row['claim'])} ({link('notebook', nb.name)})", quote(row["verdict"]), quote(row["caveat"])]
        lines.append("| " + " | ".join([*cells, quote(entry.get("provenance", "–")), figure]) + " |")
    return lines


def _made_with(recorded: dict) -> str:
    profiles = sorted({e["profile"] for _, e in _claim_files(recorded)})
    return f" (made with the {' and '.join(profiles)} profile)" if profiles else ""


def glance_markdown(recorded: dict, figures: Path, gallery: str = "gallery", notebooks: str = "notebooks") -> str:
    """The section "Results at a glance" for the book (MyST Markdown), linking each figure's gallery card."""

    def link(kind: str, name: str) -> str:
        if kind == "notebook":
            return f"[{escape(name)}]({notebooks}/{name}.ipynb)"
        return f"{{ref}}`{name} <{artifact_label(name)}>`"

    lines = [
        TITLE,
        "",
        f"Each notebook writes its row from its own results in `figures/`{_made_with(recorded)}; a verdict holds "
        f"under its caveat, and the class says what kind of number it rests on ({{doc}}`definitions <{gallery}>`).",
        "",
        *_table(recorded, figures, escape, link),
    ]
    return "\n".join(lines) + "\n"


def readme_markdown(recorded: dict, figures: Path) -> str:
    """The same section for the README (GitHub Markdown), linking the notebooks and figures in the repository."""

    def link(kind: str, name: str) -> str:
        if kind == "notebook":
            return f"[{name}](notebooks/{name}.ipynb)"
        picture = next((f"{name}{s}" for s in (".png", ".md", ".csv") if f"{name}{s}" in recorded["artifacts"]), "")
        return f"[{gfm_escape(name)}](figures/{picture})" if picture else gfm_escape(name)

    lines = [
        TITLE,
        "",
        f"Each notebook writes its row from its own results in `figures/`{_made_with(recorded)}; a verdict holds under "
        "its caveat, and the class says what kind of number it rests on "
        "([provenance classes](docs/figures.md#provenance-classes)).",
        "",
        *_table(recorded, figures, gfm_escape, link),
    ]
    return "\n".join(lines) + "\n"
