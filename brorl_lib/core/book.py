"""The book: a static HTML site of the executed notebooks, the docs/ pages and a gallery of figures/.

``make book`` (``python -m brorl_lib.core.book``) stages the sources under ``build/book/src/`` in the
repository's own layout, so relative links between the README, ``docs/`` and ``notebooks/`` resolve as they do
in a clone: the README is the front page, every ``docs/*.md`` page and every notebook is a page, a Markdown file
they link to elsewhere in the repository becomes a page too, any other file they link to is copied so that the
link downloads it, and ``figures/MANIFEST.json`` becomes the gallery page. The notebooks are shown with their
committed outputs, never re-executed. Sphinx (configuration: ``book/conf.py``) then writes the site to
``build/book/html/`` with warnings as errors, so a broken link, a missing image or a missing anchor fails the
build.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat

from brorl_lib.core import manifest
from brorl_lib.core.paths import BUILD_DIR, FIGURES_DIR, NOTEBOOKS_DIR, REPO_ROOT
from brorl_lib.core.registry import NOTEBOOKS

CONF_DIR = REPO_ROOT / "book"
BOOK_DIR = BUILD_DIR / "book"
DOCS_DIR = REPO_ROOT / "docs"
INDEX = "index.md"  # the README, staged as the site's root page
GALLERY = "gallery.md"
FILE_KINDS = {"pdf": "PDF", "png": "PNG", "svg": "SVG", "csv": "CSV", "md": "Markdown", "tex": "LaTeX"}
CLASS_MEANING = {  # provenance classes a reader meets (the manifest may hold others; they are shown as they are)
    "reported": "numbers copied from the paper",
    "reproduced": "recomputed at the paper's scale",
    "scaled-down": "the paper's experiment at laptop scale",
}

# [text](target "title") and ![alt](target), reference definitions [id]: target, and HTML src=/href= attributes
_INLINE = re.compile(r"(\]\(\s*<?)([^)\s>]+)(>?(?:\s+\"[^\"]*\")?\s*\))")
_REFDEF = re.compile(r"^( {0,3}\[[^\]]+\]:\s*<?)(\S+?)(>?(?:\s.*)?)$", re.MULTILINE)
_HTML = re.compile(r"((?:src|href)=\")([^\"]+)(\")")
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)


def _escape(text: str) -> str:
    """``text`` with every ASCII punctuation character backslash-escaped: literal in Markdown."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", text)


def artifacts_by_notebook(recorded: dict) -> dict[str, dict[str, list[tuple[str, dict]]]]:
    """notebook -> artifact -> [(file name, manifest entry)], notebooks in pipeline order, artifacts sorted."""
    order = {spec.name: i for i, spec in enumerate(NOTEBOOKS)}
    grouped: dict[str, dict[str, list[tuple[str, dict]]]] = {}
    for name, entry in sorted(recorded["artifacts"].items()):
        artifact = entry.get("artifact") or name.rsplit(".", 1)[0]
        grouped.setdefault(entry["notebook"], {}).setdefault(artifact, []).append((name, entry))
    return dict(sorted(grouped.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def gallery_markdown(
    recorded: dict, tables_from: Path | None = None, figures: str = "figures", notebooks: str = "notebooks"
) -> str:
    """The gallery page (MyST Markdown): every artifact of the manifest ``recorded`` with its provenance class,
    caption, notebook, picture (its PNG) or table (its Markdown file, read from ``tables_from`` when given), and
    links to each of its files. ``figures`` and ``notebooks`` are the folders of the artifact files and of the
    notebook pages, relative to the page."""
    titles = {spec.name: spec.title for spec in NOTEBOOKS}
    grouped = artifacts_by_notebook(recorded)
    classes = sorted({e.get("provenance", "unlabelled") for e in recorded["artifacts"].values()})
    count = len({(nb, a) for nb, arts in grouped.items() for a in arts})
    lines = [
        "# Gallery: every figure and table",
        "",
        f"The {count} artifacts in `figures/`, as `figures/MANIFEST.json` records them: each with its provenance "
        "class, its caption, the notebook that makes it and its files. The classes:",
        "",
    ]
    lines += [f"- **{c}**: {_escape(CLASS_MEANING[c]) if c in CLASS_MEANING else 'as recorded'}" for c in classes]
    lines += [
        "",
        "`python -m brorl_lib status` lists the artifacts whose inputs changed since they were made; "
        "`make reproduce` makes them again.",
        "",
    ]
    for nb, arts in grouped.items():
        lines += [f"## {_escape(nb)}", ""]
        lines += [f"{_escape(titles.get(nb, ''))}: made by the notebook [{_escape(nb)}]({notebooks}/{nb}.ipynb).", ""]
        for artifact, files in arts.items():
            entry = files[0][1]
            kinds = {name.rsplit(".", 1)[-1]: name for name, _ in files}
            lines += [f"### {_escape(artifact)}", ""]
            stamp = f"**{_escape(entry.get('provenance', 'unlabelled'))}**"
            if entry.get("profile"):
                stamp += f" · profile `{entry['profile']}`"
            lines += [f"{stamp} · notebook [{_escape(nb)}]({notebooks}/{nb}.ipynb)", ""]
            lines += [f"{_escape(entry.get('caption') or artifact)}", ""]
            if "png" in kinds:
                lines += [f"![{_escape(entry.get('caption') or artifact)}]({figures}/{kinds['png']})", ""]
            elif "md" in kinds and tables_from is not None and (tables_from / kinds["md"]).is_file():
                lines += [(tables_from / kinds["md"]).read_text(encoding="utf-8").strip(), ""]
            links = [f"{{download}}`{FILE_KINDS.get(ext, ext)} <{figures}/{f}>`" for ext, f in sorted(kinds.items())]
            lines += ["Files: " + " · ".join(links), ""]
    return "\n".join(lines)


def _split(target: str) -> tuple[str, str]:
    path, _, fragment = target.partition("#")
    return path, ("#" + fragment if fragment else "")


def _is_local(target: str) -> bool:
    return not (target.startswith(("#", "/", "mailto:", "data:")) or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target))


class _Stager:
    """Copies the book's sources into ``src``, following the links of every page it stages."""

    def __init__(self, src: Path):
        self.src = src
        self.pages: list[Path] = []  # repository paths of the Markdown pages staged (README and docs first)
        self.queue: list[Path] = []
        self.raw_files: set[Path] = set()  # files named in raw HTML (<img src=...>): Sphinx does not copy those

    def staged_path(self, repo_path: Path) -> Path:
        rel = repo_path.relative_to(REPO_ROOT)
        return self.src / (INDEX if rel == Path("README.md") else rel)

    def _rewrite_target(self, target: str, page: Path, raw: bool = False) -> str:
        """The link ``target`` of the repository file ``page``, as it must read in the staged copy; stages what it
        leads to (a page, or a file to download). A target that leads nowhere is left as it is: Sphinx fails on it.
        ``raw``: the target is in raw HTML, which Sphinx passes through as it is: a page is named by its HTML file,
        and a file is also copied into the site (:meth:`copy_raw_files`)."""
        if not _is_local(target):
            return target
        path, fragment = _split(target)
        if not path:
            return target
        resolved = (page.parent / path).resolve()
        if not resolved.is_relative_to(REPO_ROOT) or not resolved.exists():
            return target
        if resolved.is_dir():
            if not (resolved / "README.md").is_file():
                return target
            resolved = resolved / "README.md"
        if resolved.suffix == ".md":
            if resolved not in self.pages and resolved not in self.queue:
                self.queue.append(resolved)
        is_page = resolved.suffix == ".md" or (resolved.suffix == ".ipynb" and resolved.parent == NOTEBOOKS_DIR)
        if not is_page:
            dest = self.staged_path(resolved)
            if not dest.exists():
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(resolved, dest)
            if raw:
                self.raw_files.add(dest.relative_to(self.src))
        new = Path(os.path.relpath(self.staged_path(resolved), self.staged_path(page).parent))
        return (new.with_suffix(".html") if raw and is_page else new).as_posix() + fragment

    def copy_raw_files(self, html: Path) -> None:
        """Copy the files raw HTML names into the built site ``html``, where its relative links expect them."""
        for rel in sorted(self.raw_files):
            (html / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(self.src / rel, html / rel)

    def rewrite(self, text: str, page: Path) -> str:
        """``text`` (Markdown of ``page``) with its local links rewritten for the staged tree; code is left alone."""

        def markdown(match: re.Match) -> str:
            return match.group(1) + self._rewrite_target(match.group(2), page) + match.group(3)

        def html(match: re.Match) -> str:
            return match.group(1) + self._rewrite_target(match.group(2), page, raw=True) + match.group(3)

        def prose(chunk: str) -> str:  # outside inline code spans
            pieces = re.split(r"(`+[^`]*`+)", chunk)
            for i in range(0, len(pieces), 2):
                pieces[i] = _HTML.sub(html, _REFDEF.sub(markdown, _INLINE.sub(markdown, pieces[i])))
            return "".join(pieces)

        parts, last = [], 0
        for fence in _FENCE.finditer(text):
            parts += [prose(text[last : fence.start()]), fence.group(0)]
            last = fence.end()
        parts.append(prose(text[last:]))
        return "".join(parts)

    def stage_page(self, page: Path, extra: str = "") -> None:
        self.pages.append(page)
        dest = self.staged_path(page)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(self.rewrite(page.read_text(encoding="utf-8"), page) + extra, encoding="utf-8")

    def stage_notebook(self, path: Path) -> None:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = self.rewrite(cell.source, path)
        dest = self.staged_path(path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, dest)

    def drain(self) -> list[Path]:
        """Stage every page queued by links (and the pages they link to); their repository paths."""
        found = []
        while self.queue:
            page = self.queue.pop(0)
            if page not in self.pages:
                self.stage_page(page)
                found.append(page)
        return found


def _docs_order(readme: str, pages: list[Path]) -> list[Path]:
    """docs/ pages in the order the README first links them, then the rest by name."""

    def first_link(page: Path) -> int:
        at = readme.find(f"docs/{page.name}")
        return at if at >= 0 else len(readme)

    return sorted(pages, key=lambda p: (first_link(p), p.name))


def _toctree(caption: str, docs: list[str]) -> str:
    return "\n".join(["", "```{toctree}", ":hidden:", f":caption: {caption}", "", *docs, "```", ""])


def stage(src: Path) -> _Stager:
    """Write the book's sources to ``src`` (emptied first); what staged them (its pages, the raw HTML's files)."""
    if src.exists():
        shutil.rmtree(src)
    src.mkdir(parents=True)
    stager = _Stager(src)
    shutil.copytree(FIGURES_DIR, src / "figures")  # the gallery shows and links every artifact file
    notebooks = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
    for path in notebooks:
        stager.stage_notebook(path)
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    docs = _docs_order(readme, sorted(DOCS_DIR.glob("*.md")))
    for page in docs:
        stager.stage_page(page)
    (src / GALLERY).write_text(gallery_markdown(manifest.load(FIGURES_DIR), FIGURES_DIR), encoding="utf-8")
    stager.stage_page(REPO_ROOT / "README.md")
    more = stager.drain()

    def names(paths: list[Path]) -> list[str]:
        return [stager.staged_path(p).relative_to(src).with_suffix("").as_posix() for p in paths]

    toc = _toctree("Notebooks", names(notebooks)) + _toctree("Figures", [Path(GALLERY).stem])
    toc += _toctree("Manual", names(docs)) + (_toctree("More in the repository", names(more)) if more else "")
    with open(src / INDEX, "a", encoding="utf-8") as index:
        index.write("\n" + toc)
    return stager


def build(out: Path = BOOK_DIR, strict: bool = True, quiet: bool = True) -> int:
    """Stage the sources and build the site into ``out/html``; Sphinx's exit status (0: built, no warning)."""
    from sphinx.cmd.build import build_main

    stager = stage(out / "src")
    args = ["-b", "html", "-c", str(CONF_DIR), "-d", str(out / "doctrees"), str(stager.src), str(out / "html")]
    args += ["-W", "--keep-going"] if strict else []
    args += ["-q"] if quiet else []
    status = build_main(args)
    if status == 0:
        stager.copy_raw_files(out / "html")
    return status


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m brorl_lib.core.book", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=BOOK_DIR, help="build folder (default: build/book)")
    parser.add_argument("--no-strict", action="store_true", help="keep going on warnings (default: they fail)")
    args = parser.parse_args(argv)
    status = build(args.out, strict=not args.no_strict)
    if status == 0:
        print(f"the book: {manifest.shown(args.out / 'html' / 'index.html')}")
    return status


if __name__ == "__main__":
    sys.exit(main())
