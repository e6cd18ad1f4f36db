"""The book: a static HTML site of the executed notebooks, the docs/ pages and a gallery of figures/.

``make book`` (``python -m brorl_lib.book``) stages the sources under ``build/book/src/`` in the
repository's own layout, so relative links between the README, ``docs/`` and ``notebooks/`` resolve as they do
in a clone: the README is the front page, every ``docs/*.md`` page and every notebook is a page, a Markdown file
they link to elsewhere in the repository becomes a page too, any other file they link to is copied so that the
link downloads it, and ``figures/MANIFEST.json`` becomes the gallery page (``book.gallery``). The notebooks
are shown with their committed outputs, never re-executed, presented by ``book.pages``; the front page shows
the results at a glance (``book.glance``) where the README has them. Sphinx (configuration: ``book/conf.py``)
then writes the site to ``build/book/html/`` with warnings as errors, so a broken link, a missing image or a
missing anchor fails the build. A second build into the same folder while one runs is refused, naming the first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat

from brorl_lib.book import pages
from brorl_lib.book.gallery import artifacts_by_notebook, gallery_markdown, picture_of
from brorl_lib.book.glance import glance_markdown
from brorl_lib.book.readme import README, with_block
from brorl_lib.core import locks
from brorl_lib.core.paths import BUILD_DIR, FIGURES_DIR, NOTEBOOKS_DIR, REPO_ROOT
from brorl_lib.pipeline import manifest, screenshots

CONF_DIR = REPO_ROOT / "book"
BOOK_DIR = BUILD_DIR / "book"
LOCK_FILE = "building.lock"  # held by the build that uses the folder: a second one at once is refused
DOCS_DIR = REPO_ROOT / "docs"
INDEX = "index.md"  # the README, staged as the site's root page
GALLERY = "gallery.md"

# [text](target "title") and ![alt](target), reference definitions [id]: target, and HTML src=/href= attributes
_INLINE = re.compile(r"(\]\(\s*<?)([^)\s>]+)(>?(?:\s+\"[^\"]*\")?\s*\))")
_REFDEF = re.compile(r"^( {0,3}\[[^\]]+\]:\s*<?)(\S+?)(>?(?:\s.*)?)$", re.MULTILINE)
_HTML = re.compile(r"((?:src|href)=\")([^\"]+)(\")")
_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)


def _split(target: str) -> tuple[str, str]:
    path, _, fragment = target.partition("#")
    return path, ("#" + fragment if fragment else "")


def _is_local(target: str) -> bool:
    return not (target.startswith(("#", "/", "mailto:", "data:")) or re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target))


def _shot_profile(png: Path) -> str | None:
    """The profile a screenshot's sidecar records, or None."""
    try:
        return json.loads(screenshots.sidecar_of(png).read_text()).get("profile")
    except (OSError, ValueError, AttributeError):
        return None


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

    def stage_page(self, page: Path, text: str | None = None) -> None:
        """Stage ``page`` (its ``text`` instead of the file's, when given) with its links rewritten."""
        self.pages.append(page)
        dest = self.staged_path(page)
        dest.parent.mkdir(parents=True, exist_ok=True)
        text = page.read_text(encoding="utf-8") if text is None else text
        dest.write_text(self.rewrite(text, page), encoding="utf-8")

    def stage_notebook(self, path: Path, recorded: dict) -> None:
        """Stage the committed notebook ``path`` as a page (``book.pages``), the manifest ``recorded`` telling
        which artifacts its figures are and how the gallery's were made."""
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = self.rewrite(cell.source, path)
        pages.tidy_cells(nb)
        pages.caption_figures(nb, path.stem, recorded)
        pages.add_banner(nb, pages.banner(path.stem, nb, recorded))
        shot = screenshots.SHOTS_DIR / f"{path.stem}.png"
        if shot.is_file():
            image = self._rewrite_target(os.path.relpath(shot, path.parent), path)
            pages.add_screenshot(nb, pages.screenshot_cell(path.stem, image, _shot_profile(shot)))
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
    recorded = manifest.load(FIGURES_DIR)
    for files in (f for arts in artifacts_by_notebook(recorded).values() for f in arts.values()):
        if picture_of(files):  # a thumbnail links to its full-size picture, in the site as it is
            stager.raw_files.add(Path("figures") / picture_of(files))
    notebooks = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
    for path in notebooks:
        stager.stage_notebook(path, recorded)
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    docs = _docs_order(readme, sorted(DOCS_DIR.glob("*.md")))
    for page in docs:
        stager.stage_page(page)
    (src / GALLERY).write_text(gallery_markdown(recorded, FIGURES_DIR), encoding="utf-8")
    glance = glance_markdown(recorded, FIGURES_DIR, Path(GALLERY).stem)
    stager.stage_page(README, text=with_block(readme, glance))  # the book's rendering, where the README has it
    more = stager.drain()

    def names(paths: list[Path]) -> list[str]:
        return [stager.staged_path(p).relative_to(src).with_suffix("").as_posix() for p in paths]

    toc = _toctree("Notebooks", names(notebooks)) + _toctree("Figures", [Path(GALLERY).stem])
    toc += _toctree("Manual", names(docs)) + (_toctree("More in the repository", names(more)) if more else "")
    with open(src / INDEX, "a", encoding="utf-8") as index:
        index.write("\n" + toc)
    return stager


def build(out: Path = BOOK_DIR, strict: bool = True, quiet: bool = True) -> int:
    """Stage the sources and build the site into ``out/html``; Sphinx's exit status (0: built, no warning).
    ``locks.Busy`` (naming the other build's process) while another build uses ``out``."""
    with locks.held(Path(out) / LOCK_FILE, f"the book's build folder {out}", wait=False):
        return _build(out, strict, quiet)


def _build(out: Path, strict: bool, quiet: bool) -> int:
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
    parser = argparse.ArgumentParser(prog="python -m brorl_lib.book", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=BOOK_DIR, help="build folder (default: build/book)")
    parser.add_argument("--no-strict", action="store_true", help="keep going on warnings (default: they fail)")
    args = parser.parse_args(argv)
    try:
        status = build(args.out, strict=not args.no_strict)
    except locks.Busy as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if status == 0:
        print(f"the book: {manifest.shown(args.out / 'html' / 'index.html')}")
    return status
