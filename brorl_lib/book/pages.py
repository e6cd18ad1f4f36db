"""A committed notebook as a book page, its outputs unchanged in value: a banner saying which profile's execution
the page shows and where the gallery holds the artifacts of ``figures/``; each figure output captioned with its
artifact's manifest caption, alt text and width, a share of the text column from the figure's size in inches
(Jupyter's pixel size left out, or it would win); the parameters cell folded;
``# NBVAL_*`` marker lines left out; pandas tables tidied, a printed one too wide for the column as an HTML table
(``book.tables``); the explore section's screenshot.
"""

from __future__ import annotations

import ast
import base64
import json
import re
import struct

import nbformat

from brorl_lib.book import tables
from brorl_lib.book.gallery import artifact_label, artifacts_by_notebook, escape, notebook_label, picture_of
from brorl_lib.core.paths import PARAMS_DIR
from brorl_lib.core.profiles import available_profiles, load_profile
from brorl_lib.core.registry import get_notebook, notebook_names

PAGE_IN = 4.75  # a figure this many inches wide or wider fills the page's text column, a narrower one its share
# (a 3.25 in column figure: 68%), so a one-column figure stays readable on screen (our choice)
METRES_PER_INCH = 0.0254  # a PNG's pHYs chunk records pixels per metre
PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"  # papermill's cell of parameters given to a run
EXPLORE_HEADING = re.compile(r"^(#{1,6})\s+.*\bExplore\b", re.MULTILINE)
CONTINUED = "# output of the cell above"  # the hidden source of a cell split off: myst-nb skips an empty one
SHOWN_PARAMETER_CHANGES = 4  # parameter differences the banner names; the rest are counted
_NBVAL = re.compile(r"^[ \t]*#[ \t]*NBVAL_[A-Z_]+[ \t]*(?:\n|$)", re.MULTILINE)
_SAVED = re.compile(r"^saved ([A-Za-z0-9][A-Za-z0-9_.-]*) \(([^)]*)\)", re.MULTILINE)
_QUOTED = re.compile(r"[\"']([A-Za-z0-9][A-Za-z0-9_.-]*)[\"']")


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _literals(source: str) -> dict[str, object]:
    """``name = value`` and ``name: type = value`` assignments of literal values in ``source``."""
    found = {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if isinstance(target, ast.Name) and getattr(node, "value", None) is not None:
            try:
                found[target.id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def _tagged(nb, tag: str):
    return next((c for c in nb.cells if tag in c.get("metadata", {}).get("tags", [])), None)


def parameter_defaults(nb) -> dict[str, object]:
    """The notebook's own defaults: the literal values of its cell tagged ``parameters``."""
    cell = _tagged(nb, PARAMETERS_TAG)
    return _literals(cell.source) if cell is not None else {}


def committed_parameters(nb) -> dict[str, object]:
    """The parameters the executed notebook was given: papermill's record or its injected cell; none: {}."""
    recorded = nb.metadata.get("papermill", {}).get("parameters")
    if recorded:
        return dict(recorded)
    cell = _tagged(nb, INJECTED_TAG)
    return _literals(cell.source) if cell is not None else {}


def _same(a: dict, b: dict) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def profile_of_run(notebook: str, parameters: dict) -> str | None:
    """The profile of ``params/`` that gives ``notebook`` exactly ``parameters``; where several do, the profile
    the notebook is committed with (``core.registry``) if it is one of them, else the one with the fewest
    settings in all (the notebook's own defaults: the quick profile); None if none does."""
    matching = []
    for name in available_profiles(PARAMS_DIR):
        profile = load_profile(name, PARAMS_DIR)
        if _same(profile.get(notebook, {}).get("parameters", {}), parameters):
            matching.append((sum(len(e["parameters"]) for e in profile.values()), name))
    committed = get_notebook(notebook).committed_profile if notebook in notebook_names() else None
    if committed in [name for _, name in matching]:
        return committed
    return min(matching)[1] if matching else None


def _value(value, limit: int = 28) -> str:
    """A parameter's value as a code span, cut to ``limit`` characters."""
    text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else str(value)
    return f"`{text if len(text) <= limit else text[: limit - 1] + '…'}`"


def parameter_changes(defaults: dict, ours: dict, theirs: dict) -> list[str]:
    """``name: ours → theirs`` for every parameter whose value differs between two runs given ``ours`` and
    ``theirs`` over the notebook's ``defaults``."""
    mine, other = {**defaults, **ours}, {**defaults, **theirs}
    names = sorted(n for n in set(mine) | set(other) if not _same({n: mine.get(n)}, {n: other.get(n)}))
    shown = [(_value(mine[n]) if n in mine else "unset", _value(other[n]) if n in other else "unset") for n in names]
    return [f"`{n}`: {a} → {b}" for n, (a, b) in zip(names, shown)]


def banner(notebook: str, nb, recorded: dict) -> str:
    """The MyST admonition at the top of the page: which profile's execution it shows, how the gallery's artifacts
    of the notebook were made (profile, parameters that differ), and a link to them."""
    ours = committed_parameters(nb)
    ran = profile_of_run(notebook, ours)
    run = f"the **{ran}** profile's execution" if ran else "an execution with its own parameters"
    entries = [e for e in recorded["artifacts"].values() if e["notebook"] == notebook]
    lines = [f"This page shows {run} of the notebook `{notebook}`, as committed: its outputs are not re-run here."]
    differs = False
    if not entries:
        lines.append("`figures/` holds no artifact of this notebook.")
    else:
        made = sorted({e.get("profile") or "unrecorded" for e in entries})
        by = " and ".join(f"**{p}**" for p in made)
        link = f"{{ref}}`the gallery's {notebook} section <{notebook_label(notebook)}>`"
        changes = parameter_changes(parameter_defaults(nb), ours, entries[0].get("parameters", {}))
        differs = len(made) > 1 or bool(changes)
        if differs:
            rest = len(changes) - SHOWN_PARAMETER_CHANGES
            listed = ", ".join(changes[:SHOWN_PARAMETER_CHANGES]) + (f" and {rest} more" if rest > 0 else "")
            lines.append(
                f"The figures and tables in `figures/` are the {by} profile's, which runs it with other parameters"
                f"{f' ({listed})' if listed else ''}, so numbers here can differ from them: they are in {link}."
            )
        else:
            lines.append(
                f"The figures and tables in `figures/` are the {by} profile's, which runs it with the same parameters: "
                f"they are in {link}."
            )
    kind = "important" if differs else "note"
    title = f"The {ran} profile's execution" if ran else "This execution"
    return "\n".join([f"```{{admonition}} {title}", f":class: {kind}", "", " ".join(lines), "```"])


def png_width_in(data: bytes) -> float | None:
    """The width in inches of the PNG ``data``: its pixels over the dpi its pHYs chunk records; None without one."""
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    width = struct.unpack(">I", data[16:20])[0]
    at = data.find(b"pHYs", 0, 4096)
    if at < 0:
        return None
    per_metre, _, unit = struct.unpack(">IIB", data[at + 4 : at + 13])
    if unit != 1 or not per_metre:
        return None
    return width / (per_metre * METRES_PER_INCH)


def display_width(png_base64: str) -> str | None:
    """CSS width of a PNG, a share of the page's text column from its size in inches (``png_width_in``;
    ``PAGE_IN``), or None."""
    inches = png_width_in(base64.b64decode(png_base64))
    return None if inches is None else f"{min(100, round(100 * inches / PAGE_IN))}%"


def _is_image(output) -> bool:
    return any(k.startswith("image/") for k in output.get("data", {}))


def figure_names(cell, pictures: set[str]) -> list[str]:
    """The figure artifacts among ``pictures`` that the code cell saves, in order: the ``saved NAME (...)`` lines
    its outputs print, or, where those name fewer than its images, the names its source quotes."""
    printed = []
    for out in cell.get("outputs", []):
        text = _text(out.get("text")) + "\n" + _text(out.get("data", {}).get("text/plain"))
        printed += [name for name, _ in _SAVED.findall(text) if name in pictures]
    images = sum(_is_image(o) for o in cell.get("outputs", []))
    if len(printed) >= images:
        return printed
    quoted = list(dict.fromkeys(n for n in _QUOTED.findall(cell.source) if n in pictures))
    return quoted if len(quoted) > len(printed) else printed


def figure_metadata(output, entry: dict | None, artifact: str | None, notebook: str, legend: str) -> dict:
    """The myst-nb cell metadata of one image output: the artifact's caption and label, alt text and width."""
    png = output.get("data", {}).get("image/png")
    width = display_width(_text(png)) if png else None
    image = {"width": width} if width else {}
    if entry is None:
        plain = _text(output.get("data", {}).get("text/plain")).strip("<> ")
        return {"image": {**image, "alt": f"A figure of {notebook} ({plain}), saved as no artifact"}}
    caption = entry.get("caption") or artifact
    image["alt"] = caption.replace("\n", " ")
    return {"figure": {"caption": f"{escape(caption)}\n\n{legend}", "name": f"{notebook}-{artifact}"}, "image": image}


def shown_by_width(output) -> None:
    """Drop the pixel size Jupyter records in an image output's metadata (half the PNG's pixels for a retina
    figure): myst-nb puts it before the cell's, so the share of the column that ``figure_metadata`` gives would
    never reach the page; the height follows the width."""
    for mime, size in output.get("metadata", {}).items():
        if mime.startswith("image/") and isinstance(size, dict):
            size.pop("width", None)
            size.pop("height", None)


def figure_legend(ran: str | None, same: bool, artifact: str) -> str:
    """What the page's figure is, beside the gallery's."""
    run = f"the {ran} profile" if ran else "this page's parameters"
    card = f"{{ref}}`the gallery <{artifact_label(artifact)}>`"
    if same:
        return f"Drawn by this page's execution ({run}), with the parameters of the figure in {card}."
    return f"Drawn by this page's execution ({run}); {card} holds the figure of `figures/`, made with other parameters."


def _split_figures(cell, metadata: list[dict]) -> list:
    """The code cell, then each image output in a cell of its own (source hidden, ``metadata`` its myst-nb
    options), the outputs after it in another: a caption belongs to one image only."""
    outputs, cell.outputs = list(cell.outputs), []
    pieces, current, k = [cell], cell, 0
    for out in outputs:
        if _is_image(out):
            piece = nbformat.v4.new_code_cell(CONTINUED, metadata={"tags": ["remove-input"], "mystnb": metadata[k]})
            piece.outputs, k, current = [out], k + 1, None
            pieces.append(piece)
            continue
        if current is None:
            current = nbformat.v4.new_code_cell(CONTINUED, metadata={"tags": ["remove-input"]})
            pieces.append(current)
        current.outputs.append(out)
    return pieces


def caption_figures(nb, notebook: str, recorded: dict) -> None:
    """Give every image output of ``nb`` its artifact's caption (matched by :func:`figure_names`), in place."""
    arts = artifacts_by_notebook(recorded).get(notebook, {})
    pictures = {a: files[0][1] for a, files in arts.items() if picture_of(files)}
    ours = committed_parameters(nb)
    ran = profile_of_run(notebook, ours)
    defaults = parameter_defaults(nb)
    cells, named = [], set()
    for cell in nb.cells:
        images = [o for o in cell.get("outputs", []) if _is_image(o)] if cell.cell_type == "code" else []
        if not images:
            cells.append(cell)
            continue
        names = figure_names(cell, set(pictures))
        metadata = []
        for i, out in enumerate(images):
            artifact = names[i] if i < len(names) and names[i] not in named else None
            entry = pictures.get(artifact)
            same = entry is not None and not parameter_changes(defaults, ours, entry.get("parameters", {}))
            legend = figure_legend(ran, same, artifact) if entry else ""
            metadata.append(figure_metadata(out, entry, artifact, notebook, legend))
            if metadata[-1]["image"].get("width"):
                shown_by_width(out)
            named.add(artifact)
        cells += _split_figures(cell, metadata)
    nb.cells = cells


def tidy_cells(nb) -> None:
    """Fold the parameters cell, leave out ``# NBVAL_*`` lines and tidy pandas tables (a printed one too wide for
    the column shown as an HTML table), in place."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.setdefault("tags", [])
        if PARAMETERS_TAG in tags and "hide-input" not in tags:
            tags.append("hide-input")
            count = len(parameter_defaults(nb))
            mystnb = cell.metadata.setdefault("mystnb", {})
            mystnb["code_prompt_show"] = f"Show the parameters cell ({count} parameters and their defaults)"
            mystnb["code_prompt_hide"] = "Hide the parameters cell"
        cell.source = _NBVAL.sub("", cell.source)
        for k, out in enumerate(cell.get("outputs", [])):
            html = out.get("data", {}).get("text/html")
            if html is not None:
                out["data"]["text/html"] = tables.tidy_html(_text(html))
            text = _text(out.get("text")) if out.get("output_type") == "stream" else ""
            if len(text.partition("\n")[0]) > tables.WIDE_TEXT and (table := tables.text_table_html(text)):
                cell.outputs[k] = nbformat.v4.new_output("display_data", data={"text/html": table, "text/plain": text})


def screenshot_cell(notebook: str, image: str, profile: str | None) -> nbformat.NotebookNode:
    """A Markdown cell showing the explore section's screenshot ``image`` (a path from the page) with a caption."""
    taken = f"with the {profile} profile" if profile else "with an unrecorded profile"
    caption = (
        f"The explore section of `{notebook}` running in JupyterLab (a screenshot taken {taken} by "
        "`make screenshots`): its controls work in a live kernel only, so this page shows them as a picture."
    )
    alt = f"Screenshot: the explore section of {notebook} in JupyterLab, its controls and the output they redraw"
    return nbformat.v4.new_markdown_cell(
        "\n".join([f"```{{figure}} {image}", f":alt: {alt}", f":name: {notebook}-explore", "", caption, "```"])
    )


def add_screenshot(nb, cell: nbformat.NotebookNode) -> bool:
    """Insert ``cell`` in the explore section: after its first code cell (else after its heading); False if the
    notebook has no explore section."""
    for i, md in enumerate(nb.cells):
        match = EXPLORE_HEADING.search(md.source) if md.cell_type == "markdown" else None
        if not match:
            continue
        level, at = len(match[1]), i + 1
        for j in range(i + 1, len(nb.cells)):
            nxt = nb.cells[j]
            if nxt.cell_type == "markdown" and re.search(rf"^#{{1,{level}}}\s", nxt.source, re.MULTILINE):
                break
            if nxt.cell_type == "code":
                at = j + 1
                break
        nb.cells.insert(at, cell)
        return True
    return False


def add_banner(nb, text: str) -> None:
    """Put ``text`` right under the page's title (the first Markdown cell's ``# `` heading), else on top."""
    first = next((c for c in nb.cells if c.cell_type == "markdown"), None)
    if first is not None and first.source.startswith("# "):
        title, _, rest = first.source.partition("\n")
        first.source = f"{title}\n\n{text}\n\n{rest.lstrip()}"
    else:
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(text))
