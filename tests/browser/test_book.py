"""The book (make book) in headless Chromium: its front page, the gallery and notebook pages, served by a local
file server, with every image loaded, every internal link leading to a page or file that exists (and to an
anchor on it), nothing fetched from outside the site, and the notebook's mathematics typeset; the gallery a grid
of cards, one per artifact, its caption once; each notebook page under a banner linking to the gallery, its
figures captioned, a one-column figure shown at 60% of the text column or more and none wider than it, no output
cut off at the right: text wraps, a wide table scrolls inside its box with its key column in view.

The book is built afresh into a temporary folder (a few seconds), from the committed notebooks, docs/ and
figures/; the server is Python's http.server on a free port of 127.0.0.1, ended when the test ends.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
import urllib.error
import urllib.request
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urldefrag

import pytest
from docutils.nodes import make_id
from hang_limits import HANG_S

from brorl_lib.book import build as book
from brorl_lib.book import gallery as book_gallery
from brorl_lib.book import pages as book_pages
from brorl_lib.core.paths import BUILD_DIR, NOTEBOOKS_DIR

playwright = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]' installs playwright")
pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # Sphinx 11's, in the theme's code

PAGES = ("index.html", "gallery.html", "notebooks/01_theory.html", "notebooks/04_laptop_rlvr.html")
MATH_PAGE = "notebooks/01_theory.html"  # Theorem 1 in sympy's LaTeX: MathJax must typeset it offline
SHOTS = BUILD_DIR / "screenshots"

# every <img>: loaded eagerly, then (src, naturalWidth) once it has loaded or failed
_IMAGES_JS = """async () => Promise.all([...document.images].map(async (img) => {
  img.loading = "eager";
  try { await img.decode(); } catch (e) {}
  return [img.currentSrc || img.src, img.naturalWidth];
}))"""
_LINKS_JS = """() => [...document.querySelectorAll("a[href], link[href], script[src]")]
  .map((el) => el.href || el.src)"""
# every output image of a notebook page: [caption, alt text]
_FIGURES_JS = """() => [...document.querySelectorAll("div.cell_output img")].map((img) => {
  const caption = img.closest("figure")?.querySelector("figcaption .caption-text");
  return [caption ? caption.textContent : null, img.alt];
})"""
# the page's width against the window's, and the overflow-x of each output table's box
_TABLES_JS = """() => [[document.documentElement.scrollWidth, window.innerWidth],
  [...document.querySelectorAll("div.cell_output .output.text_html")].filter((box) => box.querySelector("table"))
    .map((box) => getComputedStyle(box).overflowX)]"""
# every output image of a notebook page: [its src, its width as shown, the width of the page's text column]
_WIDTHS_JS = """() => { const article = document.querySelector("article.bd-article"), style = getComputedStyle(article);
  const column = article.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return [...document.querySelectorAll("div.cell_output img")]
    .map((img) => [img.currentSrc || img.src, img.getBoundingClientRect().width, column]); }"""
# every output box of a notebook page whose content is wider than the box: [its text's start, whether it holds a
# table, its overflow-x, and for a table: whether, scrolled to its right end, every row's first cell is still in view]
_CUT_JS = """() => [...document.querySelectorAll("div.cell_output .output")].flatMap((box) => {
  const wide = [box, ...box.querySelectorAll("*")].some((el) => el.scrollWidth > el.clientWidth + 1
    && (el === box || getComputedStyle(el).overflowX !== "visible"));  // spills out of the box, or hides a part
  if (!wide) return [];
  const table = box.querySelector("table"), text = box.innerText.trim().slice(0, 60).replace(/\\s+/g, " ");
  if (!table) return [[text, false, getComputedStyle(box).overflowX, false]];
  box.scrollLeft = box.scrollWidth;
  const left = box.getBoundingClientRect().left;
  const keyed = [...table.rows].every((row) => row.cells[0].getBoundingClientRect().left >= left - 1);
  box.scrollLeft = 0;
  return [[text, true, getComputedStyle(box).overflowX, keyed]];
})"""
_BANNER_JS = """() => { const first = document.querySelector("article section > h1 ~ *");
  return first ? [first.className, [...first.querySelectorAll("a")].map((a) => a.href)] : null; }"""
_CARDS_JS = """() => [...document.querySelectorAll(".gallery-grid .gallery-card")]
  .map((card) => [card.id, card.innerText, card.querySelectorAll("img").length])"""


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no line per request in the test's output
        pass


@contextlib.contextmanager
def _serve(directory: Path):
    """Python's file server on a free port of 127.0.0.1 serving ``directory``: yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(directory)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The book built into a temporary folder and served: yields its base URL."""
    out = tmp_path_factory.mktemp("book")
    assert book.build(out) == 0, "the book did not build without warnings: run `make book` to see them"
    with _serve(out / "html") as url:
        yield url


@functools.cache
def _fetch(url: str) -> tuple[int, str]:
    """HTTP status and, for a page, its text."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = response.read()
            kind = response.headers.get_content_type()
            return response.status, body.decode("utf-8", "replace") if kind == "text/html" else ""
    except urllib.error.HTTPError as err:
        return err.code, ""


def _link_problems(page_url: str, links: list[str], base: str) -> list[str]:
    """Every internal link of the page that does not answer 200, or names an anchor its page lacks."""
    problems = []
    for link in sorted(set(links)):
        if not link.startswith(base):
            continue  # external links are not the book's to check (none is loaded: see _outside)
        target, fragment = urldefrag(link)
        status, text = _fetch(target)
        if status != 200:
            problems.append(f"{page_url}: link to {link} answers {status}")
        elif fragment and text and not re.search(rf"\bid=[\"']{re.escape(fragment)}[\"']", text):
            problems.append(f"{page_url}: link to {link}: no element with id {fragment!r} on that page")
    return problems


def _check_page(context, url: str, base: str, shot: Path | None = None) -> list[str]:
    """What is wrong with the page at ``url`` (empty: nothing); a screenshot of it to ``shot``, if given."""
    page = context.new_page()
    outside, failed = [], []
    page.on("request", lambda r: None if r.url.startswith((base, "data:", "blob:")) else outside.append(r.url))
    page.on("requestfailed", lambda r: failed.append(f"{r.url} ({r.failure})"))
    page.on("response", lambda r: failed.append(f"{r.url} ({r.status})") if r.status >= 400 else None)
    try:
        page.goto(url, wait_until="load")
        images = page.evaluate(_IMAGES_JS)
        problems = [f"{url}: image {src} did not load" for src, width in images if not width]
        if url.endswith(MATH_PAGE):
            page.locator("mjx-container").first.wait_for(timeout=HANG_S * 1000)
            raw = page.locator(".math:not(:has(mjx-container))").count()
            problems += [f"{url}: {raw} formulas not typeset by MathJax"] if raw else []
        problems += _link_problems(url, page.evaluate(_LINKS_JS), base)
        problems += [f"{url}: fetched from outside the site: {u}" for u in outside]
        problems += [f"{url}: request failed: {f}" for f in failed]
        if shot:
            page.screenshot(path=str(shot))
        return problems
    finally:
        page.close()


def _manifest_pngs() -> int:
    """How many artifacts of figures/MANIFEST.json have a PNG: the gallery shows each one."""
    return sum(Path(name).suffix == ".png" for name in book.manifest.load(book.FIGURES_DIR)["artifacts"])


def _notebook_images(page: str) -> int:
    """How many image outputs the committed notebook behind a book page has."""
    notebook = json.loads((NOTEBOOKS_DIR / Path(page).with_suffix(".ipynb").name).read_text())
    outputs = (out for cell in notebook["cells"] for out in cell.get("outputs", []))
    return sum("image/png" in out.get("data", {}) for out in outputs)


def test_book_pages_show_every_image_and_every_internal_link_resolves(site, browser):
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        problems = []
        for name in PAGES:
            shot = SHOTS / f"book_{name.removesuffix('.html').replace('/', '_')}.png"
            problems += _check_page(context, site + name, site, shot)
        shown = {name: _fetch(site + name)[1].count("<img") for name in PAGES}
    finally:
        context.close()
    assert not problems, "\n".join(problems)
    expected = {"gallery.html": _manifest_pngs(), MATH_PAGE: _notebook_images(MATH_PAGE)}
    lost = {name: (shown[name], want) for name, want in expected.items() if shown[name] < want}
    assert not lost, f"pages showing fewer images than their sources have (shown, expected): {lost}"


def test_gallery_lists_every_artifact_with_its_class_notebook_and_files(site):
    status, html = _fetch(site + "gallery.html")
    assert status == 200
    recorded = book.manifest.load(book.FIGURES_DIR)
    missing = []
    for name, entry in recorded["artifacts"].items():
        if f'/{name}"' not in html and f"/{name}'" not in html:
            missing.append(f"{name}: no link")
        if entry["provenance"] not in html:
            missing.append(f"{name}: class {entry['provenance']} not shown")
    assert not missing, "\n".join(missing)


def test_the_check_fails_on_a_missing_image_a_dead_link_and_a_missing_anchor(browser, tmp_path):
    (tmp_path / "other.html").write_text('<p id="here">here</p>')
    (tmp_path / "index.html").write_text(
        '<img src="missing.png"><a href="nowhere.html">x</a>'
        '<a href="other.html#gone">y</a><a href="other.html#here">z</a>'
    )
    context = browser.new_context()
    try:
        with _serve(tmp_path) as url:
            problems = _check_page(context, url + "index.html", url)
    finally:
        context.close()
    text = "\n".join(problems)
    assert "image" in text and "missing.png" in text, text
    assert "nowhere.html answers 404" in text, text
    assert "no element with id 'gone'" in text and "'here'" not in text, text


def _plain(text: str) -> str:
    """Text as the page shows it, compared loosely: Sphinx's typographic quotes as typed, spaces collapsed."""
    return " ".join(
        text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"').split()
    )


def _artifacts() -> dict[str, dict]:
    """artifact -> its manifest entry (one of its files'), with ``png``: whether it has a picture."""
    found: dict[str, dict] = {}
    for name, entry in sorted(book.manifest.load(book.FIGURES_DIR)["artifacts"].items()):
        artifact = entry.get("artifact") or name.rsplit(".", 1)[0]
        found.setdefault(artifact, {**entry, "png": False})["png"] |= name.endswith(".png")
    return found


def test_gallery_is_a_grid_of_one_card_per_artifact_each_caption_shown_once(site, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(site + "gallery.html", wait_until="load")
        cards = page.evaluate(_CARDS_JS)
        display = page.evaluate("() => getComputedStyle(document.querySelector('.gallery-grid')).display")
    finally:
        context.close()
    assert display == "grid"
    artifacts = _artifacts()
    assert len(cards) == len(artifacts)
    problems = []
    for card_id, text, images in cards:
        artifact = next((a for a in artifacts if card_id == make_id(book_gallery.artifact_label(a))), None)
        if artifact is None:
            problems.append(f"card {card_id}: no artifact of that name")
            continue
        shown = _plain(text).count(_plain(artifacts[artifact]["caption"]))
        if shown != 1:
            problems.append(f"{artifact}: caption shown {shown} times")
        if images != int(artifacts[artifact]["png"]):
            problems.append(f"{artifact}: {images} thumbnails")
    assert not problems, "\n".join(problems)


def test_notebook_pages_open_with_a_banner_and_caption_their_figures(site, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    captions = {_plain(e["caption"]) for e in _artifacts().values() if e["png"]}
    problems = []
    try:
        page = context.new_page()
        for name in sorted(p.stem for p in NOTEBOOKS_DIR.glob("*.ipynb")):
            url = f"{site}notebooks/{name}.html"
            page.goto(url, wait_until="load")
            page.evaluate(_IMAGES_JS)  # every image loaded, so that its width is its laid-out width
            banner = page.evaluate(_BANNER_JS)
            anchor = f"gallery.html#{make_id(book_gallery.notebook_label(name))}"
            if not banner or "admonition" not in banner[0] or not any(h.endswith(anchor) for h in banner[1]):
                problems.append(f"{name}: no banner under the title linking {anchor} ({banner})")
            for caption, alt in page.evaluate(_FIGURES_JS):
                if caption is None or _plain(caption) not in captions:
                    problems.append(f"{name}: an output figure captioned {caption!r}, not by its manifest caption")
                if not alt or alt.startswith("../_images"):
                    problems.append(f"{name}: an output figure without alt text")
            (page_width, window), boxes = page.evaluate(_TABLES_JS)
            if page_width > window:
                problems.append(f"{name}: the page scrolls sideways ({page_width} px in a {window} px window)")
            problems += [f"{name}: an output table's box with overflow-x {o}" for o in boxes if o != "auto"]
    finally:
        context.close()
    assert not problems, "\n".join(problems)


ONE_COLUMN_SHARE = 0.6  # a one-column figure is shown at 60% of the text column or more (issue 61; our choice)


def _png_inches(url: str) -> float | None:
    """The width in inches of the PNG at ``url`` (its pixels over the dpi its pHYs chunk records), or None."""
    with urllib.request.urlopen(url, timeout=10) as response:
        return book_pages.png_width_in(response.read())


def test_one_column_figures_are_shown_at_60_percent_of_the_column_or_more_and_none_wider_than_it(site, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    problems, one_column = [], 0
    try:
        page = context.new_page()
        for name in sorted(p.stem for p in NOTEBOOKS_DIR.glob("*.ipynb")):
            page.goto(f"{site}notebooks/{name}.html", wait_until="load")
            page.evaluate(_IMAGES_JS)
            for src, shown, column in page.evaluate(_WIDTHS_JS):
                inches = _png_inches(src)
                if shown > column + 0.5:
                    problems.append(f"{name}: a figure shown {shown:.0f} px wide in a {column:.0f} px column")
                if inches is not None and inches < book_pages.PAGE_IN:  # narrower than the text column's figures
                    one_column += 1
                    if shown < ONE_COLUMN_SHARE * column:
                        problems.append(
                            f"{name}: a {inches:.2f}-in figure shown {shown:.0f} px wide in a {column:.0f} px column "
                            f"({shown / column:.0%}, below {ONE_COLUMN_SHARE:.0%}): {src.rsplit('/', 1)[-1]}"
                        )
    finally:
        context.close()
    assert one_column, "no one-column figure found on the notebook pages: the check checks nothing"
    assert not problems, "\n".join(problems)


def test_no_output_is_cut_off_at_the_right_and_wide_tables_keep_their_key_column_in_view(site, browser):
    """An output box whose content is wider than the box is cut at the right: text must wrap instead; a table may
    scroll sideways inside its box (overflow-x auto) only if its first column, the key, stays in view."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    problems = []
    try:
        page = context.new_page()
        for name in sorted(p.stem for p in NOTEBOOKS_DIR.glob("*.ipynb")):
            page.goto(f"{site}notebooks/{name}.html", wait_until="load")
            for text, table, overflow, keyed in page.evaluate(_CUT_JS):
                if not table:
                    problems.append(f"{name}: text output cut at the right: {text!r}")
                elif overflow != "auto" or not keyed:
                    problems.append(f"{name}: a wide table whose key column scrolls out of view: {text!r}")
    finally:
        context.close()
    assert not problems, f"{len(problems)} output boxes cut at the right:\n" + "\n".join(problems)


def test_the_cut_check_fails_on_a_long_line_and_a_wide_table_without_a_sticky_key(browser, tmp_path):
    wide = "<table><tr>" + "".join(f"<td>column{i:02d}</td>" for i in range(60)) + "</tr></table>"
    (tmp_path / "index.html").write_text(
        '<div class="cell_output"><div class="output stream"><pre>' + "x" * 400 + "</pre></div>"
        f'<div class="output text_html" style="overflow-x: auto">{wide}</div>'
        '<div class="output stream"><pre>short</pre></div></div>'
    )
    context = browser.new_context(viewport={"width": 800, "height": 600})
    try:
        with _serve(tmp_path) as url:
            page = context.new_page()
            page.goto(url + "index.html", wait_until="load")
            found = page.evaluate(_CUT_JS)
    finally:
        context.close()
    assert [(table, keyed) for _, table, _, keyed in found] == [(False, False), (True, False)], found
