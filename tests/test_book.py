"""The book's sources (core.book): the gallery generated from the manifest, and the staged tree whose links resolve.
The build itself and its pages in a browser: tests/browser/test_book.py (make book, make browser)."""

from __future__ import annotations

import re
from pathlib import Path

from brorl_lib.core import book, manifest
from brorl_lib.core.paths import FIGURES_DIR, NOTEBOOKS_DIR, REPO_ROOT


def _entry(notebook: str, artifact: str, provenance: str, caption: str) -> dict:
    return {
        "notebook": notebook,
        "artifact": artifact,
        "provenance": provenance,
        "caption": caption,
        "profile": "paper",
    }


RECORDED = {
    "schema": 1,
    "artifacts": {
        **{
            f"fig3_simulator.{ext}": _entry("02_simulator", "fig3_simulator", "reproduced", "Figure 3: N=512 | *mass*")
            for ext in ("pdf", "png", "csv")
        },
        **{
            f"table1_efficiency.{ext}": _entry("03_paper_tables", "table1_efficiency", "reported", "Table 1")
            for ext in ("md", "tex", "csv")
        },
    },
}


def test_gallery_shows_each_artifact_with_class_caption_notebook_picture_and_files():
    text = book.gallery_markdown(RECORDED)
    fig = text[text.index("### fig3\\_simulator") : text.index("## 03\\_paper\\_tables")]
    assert "**reproduced**" in fig and "[02\\_simulator](notebooks/02_simulator.ipynb)" in fig
    assert "Figure 3\\: N\\=512 \\| \\*mass\\*" in fig  # the caption, literal: no table, no emphasis
    assert "](figures/fig3_simulator.png)" in fig  # the picture
    for kind, name in (("PDF", "pdf"), ("PNG", "png"), ("CSV", "csv")):
        assert f"{{download}}`{kind} <figures/fig3_simulator.{name}>`" in fig
    table = text[text.index("### table1\\_efficiency") :]
    assert "**reported**" in table and "![" not in table
    assert all(f"<figures/table1_efficiency.{ext}>" in table for ext in ("md", "tex", "csv"))
    assert text.index("## 02\\_simulator") < text.index("## 03\\_paper\\_tables")  # pipeline order


def test_gallery_of_the_committed_manifest_names_every_artifact_file_and_embeds_tables():
    recorded = manifest.load(FIGURES_DIR)
    text = book.gallery_markdown(recorded, FIGURES_DIR)
    for name, entry in recorded["artifacts"].items():
        assert f"<figures/{name}>`" in text, name
        assert f"**{entry['provenance']}**" in text
    assert "| Method" in text  # a table artifact shown as a table


def test_staged_tree_has_every_notebook_docs_page_and_the_gallery_in_the_index(tmp_path):
    src = book.stage(tmp_path / "src").src
    index = (src / "index.md").read_text()
    toc = "\n".join(re.findall(r"```\{toctree\}(.*?)```", index, re.DOTALL))
    for nb in NOTEBOOKS_DIR.glob("*.ipynb"):
        assert (src / "notebooks" / nb.name).is_file() and f"notebooks/{nb.stem}\n" in toc
    for page in (REPO_ROOT / "docs").glob("*.md"):
        assert (src / "docs" / page.name).is_file() and f"docs/{page.stem}\n" in toc
    assert "\ngallery\n" in toc and (src / "gallery.md").is_file()
    assert (src / "figures" / "MANIFEST.json").is_file()


def test_links_are_rewritten_for_the_staged_tree_and_what_they_name_is_staged(tmp_path):
    stager = book._Stager(tmp_path)
    page = REPO_ROOT / "docs" / "a-page.md"
    text = stager.rewrite(
        "[front](../README.md#quick-start) [recipes](../recipes/brorl/) [licence](../LICENSE) "
        "[web](https://example.org/x) [here](#top) `[code](../nowhere)` [gone](../no-such-file.txt)\n"
        "```\n[fenced](../LICENSE-not-rewritten/)\n```\n"
        '<img src="../figures/fig3_simulator.png"> <a href="architecture.md#x">a</a>',
        page,
    )
    assert "[front](../index.md#quick-start)" in text  # the README is the book's front page
    assert "[recipes](../recipes/brorl/README.md)" in text  # a folder: its README
    assert "[licence](../LICENSE)" in text and (tmp_path / "LICENSE").is_file()  # a file: copied to download
    assert "[web](https://example.org/x)" in text and "[here](#top)" in text
    assert "`[code](../nowhere)`" in text and "[gone](../no-such-file.txt)" in text  # left for Sphinx to refuse
    assert "[fenced](../LICENSE-not-rewritten/)" in text
    # raw HTML, which Sphinx passes through: a page by its HTML file, a file copied into the site as well
    assert '<a href="architecture.html#x">' in text and '<img src="../figures/fig3_simulator.png">' in text
    assert stager.raw_files == {Path("figures/fig3_simulator.png")}
    assert stager.queue == [
        REPO_ROOT / "README.md",
        REPO_ROOT / "recipes/brorl/README.md",
        page.parent / "architecture.md",
    ]
