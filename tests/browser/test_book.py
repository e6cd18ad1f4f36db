"""The book (make book) in headless Chromium: its front page, the gallery and a notebook page, served by a local
file server, with every image loaded, every internal link leading to a page or file that exists (and to an
anchor on it), nothing fetched from outside the site, and the notebook's mathematics typeset.

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

from brorl_lib.core import book
from brorl_lib.core.paths import BUILD_DIR, NOTEBOOKS_DIR

playwright = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[dev]' installs playwright")
pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # Sphinx 11's, in the theme's code

PAGES = ("index.html", "gallery.html", "notebooks/01_theory.html")
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
            page.locator("mjx-container").first.wait_for(timeout=30_000)
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
