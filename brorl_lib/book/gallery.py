"""The book's gallery page, generated from ``figures/MANIFEST.json``: per notebook a grid of thumbnail cards (one per
figure: its picture, linked to the full-size PNG, its caption once, its class and files) and a card per table
(its caption, class, files and the table itself, folded)."""

from __future__ import annotations

import re
from pathlib import Path

from brorl_lib.core.artifacts import PROVENANCE
from brorl_lib.core.registry import NOTEBOOKS

FILE_KINDS = {"pdf": "PDF", "png": "PNG", "svg": "SVG", "csv": "CSV", "md": "Markdown", "tex": "LaTeX"}
PICTURES = ("png",)  # the file kinds a card shows as its thumbnail
UNDEFINED = "a class this version of brorl_lib does not define"


def escape(text: str) -> str:
    """``text`` with every ASCII punctuation character backslash-escaped: literal in Markdown."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def notebook_label(notebook: str) -> str:
    """The gallery section of ``notebook``: a Sphinx label, for ``{ref}``."""
    return f"gallery-{notebook}"


def artifact_label(artifact: str) -> str:
    """The gallery card of ``artifact``: a Sphinx label, for ``{ref}``."""
    return f"gallery-{artifact}"


def class_meaning(provenance: str) -> str:
    """What the provenance class means, without its name (``PROVENANCE`` reads ``"name: meaning"``)."""
    if provenance not in PROVENANCE:
        return UNDEFINED
    return PROVENANCE[provenance].removeprefix(f"{provenance}: ")


def artifacts_by_notebook(recorded: dict) -> dict[str, dict[str, list[tuple[str, dict]]]]:
    """notebook -> artifact -> [(file name, manifest entry)], notebooks in pipeline order, artifacts sorted."""
    order = {spec.name: i for i, spec in enumerate(NOTEBOOKS)}
    grouped: dict[str, dict[str, list[tuple[str, dict]]]] = {}
    for name, entry in sorted(recorded["artifacts"].items()):
        artifact = entry.get("artifact") or name.rsplit(".", 1)[0]
        grouped.setdefault(entry["notebook"], {}).setdefault(artifact, []).append((name, entry))
    return dict(sorted(grouped.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def picture_of(files: list[tuple[str, dict]]) -> str | None:
    """The file a card shows as its thumbnail (a PNG), or None for a table."""
    return next((name for name, _ in files if name.rsplit(".", 1)[-1] in PICTURES), None)


def table_body(markdown: str) -> str:
    """A table artifact's Markdown file without its first line when that is the bold caption (the card shows it)."""
    text = markdown.strip()
    first, _, rest = text.partition("\n")
    return rest.strip() if first.startswith("**") and first.rstrip().endswith("**") else text


def _fence(depth: int) -> str:
    return "`" * (3 + depth)


def _card(artifact: str, files: list[tuple[str, dict]], figures: str, tables_from: Path | None) -> list[str]:
    """One card (MyST): a figure's thumbnail and caption, or a table's caption and folded table; class and files."""
    entry = files[0][1]
    caption = escape(entry.get("caption") or artifact)
    picture = picture_of(files)
    kinds = {name.rsplit(".", 1)[-1]: name for name, _ in files}
    links = " · ".join(f"{{download}}`{FILE_KINDS.get(k, k)} <{figures}/{f}>`" for k, f in sorted(kinds.items()))
    stamp = f"**{escape(entry.get('provenance', 'unlabelled'))}**"
    if entry.get("profile"):
        stamp += f" · profile `{entry['profile']}`"
    about = [f"{stamp} · `{artifact}`", "", f"Files: {links}", ""]
    outer = _fence(1)
    lines = [f"{outer}{{container}} gallery-card {'gallery-figure' if picture else 'gallery-table'}"]
    lines += [f":name: {artifact_label(artifact)}", ""]
    if picture:
        alt = (entry.get("caption") or artifact).replace("\n", " ")
        lines += [f"{_fence(0)}{{figure}} {figures}/{picture}", f":alt: {alt}", f":target: {figures}/{picture}", ""]
        lines += [caption, _fence(0), ""] + about
    else:
        lines += [caption, ""] + about
        md = kinds.get("md")
        if md and tables_from is not None and (tables_from / md).is_file():
            body = table_body((tables_from / md).read_text(encoding="utf-8"))
            lines += ["<details><summary>Show the table</summary>", "", body, "", "</details>", ""]
    return lines + [outer, ""]


def gallery_markdown(
    recorded: dict, tables_from: Path | None = None, figures: str = "figures", notebooks: str = "notebooks"
) -> str:
    """The gallery page (MyST Markdown) of the manifest ``recorded``: the provenance classes defined, then per
    notebook a grid of cards, figures first. ``tables_from``: the folder of the tables' Markdown files (tables are
    shown when given); ``figures`` and ``notebooks``: the folders of the artifact files and notebook pages,
    relative to the page. A thumbnail links to its full-size PNG, which the site must hold at ``figures``/."""
    titles = {spec.name: spec.title for spec in NOTEBOOKS}
    grouped = artifacts_by_notebook(recorded)
    counts: dict[str, int] = {}
    for arts in grouped.values():
        for files in arts.values():
            provenance = files[0][1].get("provenance", "unlabelled")
            counts[provenance] = counts.get(provenance, 0) + 1
    profiles = sorted({e.get("profile") for e in recorded["artifacts"].values() if e.get("profile")})
    made = f", made with the {' and '.join(f'`{p}`' for p in profiles)} profile" if profiles else ""
    lines = [
        "# Gallery: every figure and table",
        "",
        f"The {sum(counts.values())} artifacts in `figures/`, as `figures/MANIFEST.json` records them{made}. "
        "A thumbnail opens the full-size figure; a table unfolds; every file is linked. The notebook pages show "
        "the notebooks' committed executions, whose parameters may differ (each page says how).",
        "",
        "Each artifact carries one provenance class:",
        "",
    ]
    for provenance in [*PROVENANCE, *sorted(set(counts) - set(PROVENANCE))]:
        n = counts.get(provenance, 0)
        lines.append(f"- **{escape(provenance)}** ({n} here): {escape(class_meaning(provenance))}")
    lines += [
        "",
        "`python -m brorl_lib status` lists the artifacts whose inputs changed since they were made; "
        "`make reproduce` makes them again.",
        "",
    ]
    for nb, arts in grouped.items():
        title = f"{escape(titles[nb])}: made" if nb in titles else "Made"
        lines += [f"({notebook_label(nb)})=", f"## {escape(nb)}", ""]
        lines += [f"{title} by the notebook [{escape(nb)}]({notebooks}/{nb}.ipynb).", ""]
        ordered = sorted(arts.items(), key=lambda kv: (picture_of(kv[1]) is None, kv[0]))
        lines += [f"{_fence(2)}{{container}} gallery-grid", ""]
        for artifact, files in ordered:
            lines += _card(artifact, files, figures, tables_from)
        lines += [_fence(2), ""]
    return "\n".join(lines)
