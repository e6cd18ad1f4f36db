"""The book's sources (book.build and its parts): the gallery generated from the manifest, the notebook pages as
staged (banner, captioned figures, folded parameters, tidy tables, explore screenshots), the results at a glance
computed from figures/, and the staged tree whose links resolve. The build itself and its pages in a browser:
tests/browser/test_book.py (make book, make browser)."""

from __future__ import annotations

import base64
import csv
import json
import re
import struct
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from brorl_lib.book import build as book
from brorl_lib.book import gallery as book_gallery
from brorl_lib.book import glance as book_glance
from brorl_lib.book import pages as book_pages
from brorl_lib.book import tables as book_tables
from brorl_lib.core.artifacts import PROVENANCE
from brorl_lib.core.paths import FIGURES_DIR, NOTEBOOKS_DIR, REPO_ROOT
from brorl_lib.pipeline import manifest
from brorl_lib.pipeline.screenshots import SHOTS_DIR
from brorl_lib.rlvr import study_report


def _entry(notebook: str, artifact: str, provenance: str, caption: str) -> dict:
    return {
        "notebook": notebook,
        "artifact": artifact,
        "provenance": provenance,
        "caption": caption,
        "profile": "paper",
        "parameters": {},
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


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """The book's sources staged once from the committed notebooks, docs/ and figures/."""
    return book.stage(tmp_path_factory.mktemp("book") / "src").src


@pytest.fixture(scope="module")
def recorded():
    return manifest.load(FIGURES_DIR)


def _staged_notebook(src: Path, name: str):
    return nbformat.read(src / "notebooks" / f"{name}.ipynb", as_version=4)


def _committed(name: str):
    return nbformat.read(NOTEBOOKS_DIR / f"{name}.ipynb", as_version=4)


def _images(nb) -> list[tuple[dict, dict]]:
    """(cell metadata, output) of every image output."""
    return [
        (cell.metadata, out)
        for cell in nb.cells
        for out in cell.get("outputs", [])
        if any(k.startswith("image/") for k in out.get("data", {}))
    ]


def _notebooks() -> list[str]:
    return sorted(p.stem for p in NOTEBOOKS_DIR.glob("*.ipynb"))


# --- the gallery ---


def test_gallery_shows_each_artifact_in_a_card_with_class_caption_once_picture_and_files():
    text = book_gallery.gallery_markdown(RECORDED)
    fig = text[text.index(":name: gallery-fig3_simulator") : text.index("(gallery-03_paper_tables)=")]
    assert "**reproduced**" in fig and "[02\\_simulator](notebooks/02_simulator.ipynb)" in text
    caption = "Figure 3\\: N\\=512 \\| \\*mass\\*"  # literal: no table, no emphasis
    assert fig.count(caption) == 1
    assert "```{figure} figures/fig3_simulator.png" in fig and ":target: figures/fig3_simulator.png" in fig
    for kind, name in (("PDF", "pdf"), ("PNG", "png"), ("CSV", "csv")):
        assert f"{{download}}`{kind} <figures/fig3_simulator.{name}>`" in fig
    table = text[text.index(":name: gallery-table1_efficiency") :]
    assert "**reported**" in table and "{figure}" not in table
    assert all(f"<figures/table1_efficiency.{ext}>" in table for ext in ("md", "tex", "csv"))
    assert text.index("(gallery-02_simulator)=") < text.index("(gallery-03_paper_tables)=")  # pipeline order
    assert "{container} gallery-grid" in text


def test_gallery_defines_every_provenance_class_from_the_library():
    text = book_gallery.gallery_markdown(RECORDED)
    for name, meaning in PROVENANCE.items():
        said = book_gallery.escape(meaning.removeprefix(f"{name}: "))
        assert f"**{book_gallery.escape(name)}**" in text and said in text
    assert "as recorded" not in text and book_gallery.UNDEFINED not in text


def test_gallery_of_the_committed_manifest_links_every_file_and_shows_each_caption_once(recorded):
    text = book_gallery.gallery_markdown(recorded, FIGURES_DIR)
    for name, entry in recorded["artifacts"].items():
        assert f"<figures/{name}>`" in text, name
        assert f"**{book_gallery.escape(entry['provenance'])}**" in text
    captions = {}
    for name, entry in recorded["artifacts"].items():
        captions[entry.get("artifact") or name.rsplit(".", 1)[0]] = book_gallery.escape(entry["caption"])
    lines = text.splitlines()
    for artifact, caption in captions.items():
        same = sum(c == caption for c in captions.values())
        assert lines.count(caption) == same, artifact  # once per card; the tables' own caption line left out
    grouped = book_gallery.artifacts_by_notebook(recorded).values()
    tables = [files for arts in grouped for files in arts.values() if not book_gallery.picture_of(files)]
    assert text.count("<details>") == len(tables)  # each table folded in its card
    assert "| Method" in text  # a table artifact shown as a table


def test_a_table_files_bold_caption_line_is_left_out():
    assert book_gallery.table_body("**Table 1 [reported]**\n\n| a |\n|---|\n| 1 |\n") == "| a |\n|---|\n| 1 |"
    assert book_gallery.table_body("| a |\n|---|\n") == "| a |\n|---|"


# --- notebook pages ---


def test_each_page_opens_with_a_banner_naming_its_profile_and_linking_its_gallery_section(staged, recorded):
    gallery = (staged / "gallery.md").read_text()
    for name in _notebooks():
        first = next(c for c in _staged_notebook(staged, name).cells if c.cell_type == "markdown").source
        title, _, rest = first.partition("\n")
        assert title.startswith("# ") and rest.lstrip().startswith("```{admonition}"), name
        banner = rest[: rest.index("\n```", rest.index("{admonition}")) + 4]
        committed = _committed(name)
        ran = book_pages.profile_of_run(name, book_pages.committed_parameters(committed))
        assert ran and f"**{ran}**" in banner
        entries = [e for e in recorded["artifacts"].values() if e["notebook"] == name]
        if not entries:
            continue
        label = book_gallery.notebook_label(name)
        assert f"<{label}>`" in banner and f"({label})=" in gallery  # the link leads to an existing anchor
        assert f"**{entries[0]['profile']}**" in banner
        ours = book_pages.committed_parameters(committed)  # the committed profile's (notebook 04: paper)
        changes = book_pages.parameter_changes(book_pages.parameter_defaults(committed), ours, entries[0]["parameters"])
        assert ("other parameters" in banner) == bool(changes)
        assert ("same parameters" in banner) == (not changes)


def test_the_quick_profile_runs_the_notebooks_defaults_and_a_page_names_its_committed_profile_where_it_matches():
    assert book_pages.profile_of_run("01_theory", {}) == "quick"
    assert book_pages.profile_of_run("03_paper_tables", {}) == "paper"  # the same parameters: the committed one
    assert book_pages.profile_of_run("02_simulator", {}) == "quick"  # its paper profile sets seeds, sweeps, steps
    assert book_pages.profile_of_run("01_theory", {"n_instances": 3000, "mc_trials": 2000000}) == "paper"
    assert book_pages.profile_of_run("01_theory", {"n_instances": 7}) is None


def test_every_image_output_is_captioned_with_its_artifacts_manifest_caption(staged, recorded):
    for name in _notebooks():
        images = _images(_staged_notebook(staged, name))
        assert len(images) == len(_images(_committed(name))), name  # every image kept
        for meta, out in images:
            figure = meta.get("mystnb", {}).get("figure")
            assert figure, f"{name}: an image output without a caption"
            artifact = figure["name"].removeprefix(f"{name}-")
            entry = recorded["artifacts"][f"{artifact}.png"]
            assert entry["notebook"] == name
            caption, legend = figure["caption"].split("\n\n", 1)
            assert caption == book_gallery.escape(entry["caption"])
            assert f"<{book_gallery.artifact_label(artifact)}>`" in legend and "profile" in legend
            assert meta["mystnb"]["image"]["alt"] == entry["caption"]
            assert meta["mystnb"]["image"]["width"] == book_pages.display_width(out["data"]["image/png"])
            size = out.get("metadata", {}).get("image/png", {})  # Jupyter's pixel size would win over that width
            assert "width" not in size and "height" not in size, f"{name}: {artifact} keeps its pixel size {size}"
            assert "remove-input" in meta["tags"]  # its own cell: the caption belongs to this image only


def test_figure_names_come_from_the_saved_lines_else_from_the_source():
    cell = nbformat.v4.new_code_cell('save_figure(f, "b_fig")\nsave_figure(g, "a_fig")\nsave_table(t, "c_tab")')
    png = {"output_type": "display_data", "metadata": {}, "data": {"image/png": "", "text/plain": "<Figure>"}}
    cell.outputs = [nbformat.from_dict(png), nbformat.from_dict(png)]
    assert book_pages.figure_names(cell, {"a_fig", "b_fig"}) == ["b_fig", "a_fig"]
    saved = {"output_type": "execute_result", "metadata": {}, "execution_count": 1}
    cell.outputs.insert(0, nbformat.from_dict({**saved, "data": {"text/plain": "saved a_fig (pdf, png) [reported]"}}))
    cell.outputs.insert(2, nbformat.from_dict({**saved, "data": {"text/plain": "saved b_fig (pdf, png) [reported]"}}))
    assert book_pages.figure_names(cell, {"a_fig", "b_fig"}) == ["a_fig", "b_fig"]


def _png(width: int, dpi: float | None) -> str:
    header = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">IIBBBBB", width, 10, 8, 6, 0, 0, 0)
    header += b"\0\0\0\0"
    if dpi:
        per_metre = round(dpi / 0.0254)
        header += struct.pack(">I", 9) + b"pHYs" + struct.pack(">IIB", per_metre, per_metre, 1) + b"\0\0\0\0"
    return base64.b64encode(header).decode()


def test_a_figure_is_shown_by_its_size_in_inches_whatever_its_dpi():
    assert book_pages.display_width(_png(1350, 200)) == "100%"  # 6.75 in: the page's whole text column
    assert book_pages.display_width(_png(743, 110)) == "100%"
    assert book_pages.display_width(_png(650, 200)) == book_pages.display_width(_png(357, 110)) == "68%"  # 3.25 in
    assert book_pages.display_width(_png(743, None)) is None  # no dpi recorded: left to the browser


def test_parameters_are_folded_markers_left_out_and_outputs_kept(staged):
    for name in _notebooks():
        nb = _staged_notebook(staged, name)
        params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(params) == 1 and "hide-input" in params[0].metadata["tags"]
        committed = next(c for c in _committed(name).cells if "parameters" in c.metadata.get("tags", []))
        assert params[0].source == committed.source
        code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
        assert "NBVAL" not in code
        outputs = sum(len(c.get("outputs", [])) for c in _committed(name).cells)
        assert sum(len(c.get("outputs", [])) for c in nb.cells) == outputs


def test_pandas_tables_lose_a_plain_index_and_padded_zeros_but_no_value():
    frame = pd.DataFrame({"score": [56.3, 49.58, 100.0], "name": ["a", "b", "c"], "tiny": [1e-16, 2e-15, 3e-3]})
    html = book_tables.tidy_html(frame._repr_html_())
    cells = re.findall(r"<t([hd])>(.*?)</t[hd]>", html)
    assert ("h", "") not in cells and ("h", "0") not in cells  # the index column is gone
    assert [v for k, v in cells if k == "d"] == ["56.30", "a", "1e-16", "49.58", "b", "2e-15", "100.00", "c", "3e-03"]
    named = book_tables.tidy_html(frame.set_index("name")._repr_html_())
    assert "<th>a</th>" in named  # an index that says something stays
    for text in re.findall(r"<td>([-\d.e+]+)</td>", html):
        assert float(text) in {56.3, 49.58, 100.0, 1e-16, 2e-15, 3e-3}


def test_a_wide_printed_table_is_read_back_cell_for_cell_and_any_other_text_is_left_as_text():
    frame = pd.DataFrame(
        {"grid": ["update quality", "IsoCompute, 131,072 samples"], "S": [2048, 8192], "best": ["4 [4, 4]; 68%", ""]}
    )
    rows = book_tables.text_table_cells(frame.to_string(index=False))
    assert rows == [
        ["grid", "S", "best"],
        ["update quality", "2048", "4 [4, 4]; 68%"],
        ["IsoCompute, 131,072 samples", "8192", ""],
    ]
    html = book_tables.text_table_html(frame.to_string(index=False))
    assert "<th>grid</th>" in html and "<td>IsoCompute, 131,072 samples</td>" in html and 'class="dataframe"' in html
    assert book_tables.text_table_cells(frame.set_index("grid").to_string()) is None  # an index column: left as text
    assert book_tables.text_table_cells("phase 1 ended at step 1200\nbands not shown flat: none\n") is None
    assert book_tables.text_table_cells("one line only") is None


def test_a_column_name_breaks_after_its_underscores_only():
    assert book_tables.breakable("ci_low_seeds_prompts") == "ci_<wbr>low_<wbr>seeds_<wbr>prompts"
    assert book_tables.breakable("mean") == "mean"
    html = book_tables.tidy_html(pd.DataFrame({"pass1_se": [0.5]}).set_index(pd.Index(["a_b"]))._repr_html_())
    assert "<th>pass1_<wbr>se</th>" in html and "<th>a_b</th>" in html  # the header row only


def test_printed_tables_too_wide_for_the_column_become_html_tables_of_the_same_text(staged):
    for name in _notebooks():
        committed = [o for c in _committed(name).cells for o in c.get("outputs", [])]
        staged_outputs = [o for c in _staged_notebook(staged, name).cells for o in c.get("outputs", [])]
        for before, after in zip(committed, staged_outputs):
            text = before.get("text", "") if before.get("output_type") == "stream" else ""
            wide = len(text.partition("\n")[0]) > book_tables.WIDE_TEXT and book_tables.text_table_cells(text)
            if wide:
                assert after["output_type"] == "display_data" and after["data"]["text/plain"] == text, name
                assert after["data"]["text/html"] == book_tables.text_table_html(text)
            else:
                assert after.get("output_type") == before.get("output_type"), name
    notebook_04 = [o for c in _staged_notebook(staged, "04_laptop_rlvr").cells for o in c.get("outputs", [])]
    assert sum("<th>best_<wbr>N_<wbr>cosine</th>" in o.get("data", {}).get("text/html", "") for o in notebook_04) == 1


def test_the_explore_section_shows_its_screenshot_after_the_explore_cell(staged):
    for name in _notebooks():
        shot = SHOTS_DIR / f"{name}.png"
        if not shot.is_file():
            continue
        cells = _staged_notebook(staged, name).cells
        at = next(i for i, c in enumerate(cells) if "{figure}" in c.source and f"screenshots/{name}.png" in c.source)
        heading = max(i for i in range(at) if book_pages.EXPLORE_HEADING.search(cells[i].source))
        assert cells[at - 1].cell_type == "code" and heading < at
        assert (staged / "docs" / "screenshots" / f"{name}.png").is_file()
        assert json.loads(shot.with_suffix(".json").read_text())["profile"] in cells[at].source


# --- the results at a glance ---


def _rows(artifact: str) -> pd.DataFrame:
    try:
        return pd.read_csv(FIGURES_DIR / f"{artifact}.csv", comment="#")
    except pd.errors.EmptyDataError:  # a table with no rows and no header yet
        return pd.DataFrame()


CLAIM_ROWS = {"01_theory": "theory_claim", "02_simulator": "fig3_claim", "03_paper_tables": "paper_claim",
              "04_laptop_rlvr": "laptop_rlvr_claim", "05_verl_training": "verl_claim"}  # fmt: skip


def test_the_glance_rows_are_the_notebooks_claim_rows_and_state_their_tables_numbers(recorded):
    text = book_glance.glance_markdown(recorded, FIGURES_DIR)
    rows = {nb: line for nb in CLAIM_ROWS for line in text.splitlines() if f"/{nb}.ipynb)" in line}
    claims = {nb: _rows(name).iloc[0] for nb, name in CLAIM_ROWS.items()}
    for nb, claim in claims.items():
        for column in ("claim", "verdict", "caveat"):
            assert book_gallery.escape(claim[column]) in rows[nb]
        provenance = recorded["artifacts"][f"{CLAIM_ROWS[nb]}.csv"]["provenance"]
        assert f"| {book_gallery.escape(provenance)} |" in rows[nb]
        assert f"<{book_gallery.artifact_label(claim['figure'])}>`" in rows[nb]  # a card of the gallery
    said = {nb: c["verdict"] for nb, c in claims.items()}
    errors = _rows("theory_theorem1_errors")
    worst = errors[errors.vocab_size.astype(str) == "all"]
    for column in ("rel_err_first_order", "rel_err_exact"):
        assert f"{worst[column].max():.2g}" in said["01_theory"]
    final = _rows("fig3_final")
    for n, mass in zip(final.N, final.correct_mass_mean):
        assert f"N={n:,}: {mass:.4f}" in said["02_simulator"]
    checks = _rows("paper_average_checks")
    gap = max(
        (checks.math_recomputed - checks.math_reported).abs().max(),
        (checks.code_recomputed - checks.code_reported).abs().max(),
    )
    assert f"{gap:.2g}" in said["03_paper_tables"]
    verdict = _rows("laptop_rlvr_verdict")
    if verdict.empty:  # no comparison yet: no rows
        verdict = pd.DataFrame(columns=["budget", "comparison", "rates", "direction", "mean"])
    headline = verdict.comparison.str.fullmatch(study_report.HEADLINE.pattern)  # BroRL against ProRL, no control
    regime = _rows("laptop_rlvr_regime_verdict")  # the low-q set's primary endpoint is the verdict
    first = regime[(regime.endpoint == "exact q (T=1), regime test") & (regime.comparison == "BroRL - ProRL")]
    for row in first.itertuples():
        assert f"{row.mean:+.3f} [{row.ci_low:+.3f}, {row.ci_high:+.3f}]" in said["04_laptop_rlvr"]
    for row in verdict[(verdict.budget == verdict.budget.max()) & headline & (verdict.rates == "tuned")].itertuples():
        interval = f"[{row.ci_low_seeds_prompts:+.3f}, {row.ci_high_seeds_prompts:+.3f}]"  # all prompts: the caveat
        assert f"{row.mean:+.3f} {interval}" in claims["04_laptop_rlvr"]["caveat"]
    assert len(first) == 1
    assert not re.search(r"N\d+_", said["04_laptop_rlvr"])  # in words: no arm code
    plan = _rows("verl_plan")
    for row in plan.itertuples():
        assert f"{row.expected_hours:,.1f} h" in said["05_verl_training"]


def test_a_missing_or_malformed_claim_row_makes_its_row_say_so(tmp_path, recorded):
    text = book_glance.glance_markdown(recorded, tmp_path)
    assert text.count("is absent") == len(CLAIM_ROWS)
    with open(tmp_path / "fig3_claim.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["claim", "verdict"], ["more N", "rises"]])
    row = next(ln for ln in book_glance.glance_markdown(recorded, tmp_path).splitlines() if "02_simulator.ipynb" in ln)
    assert "fig3_claim.csv` is not one row of claim, verdict, caveat, figure" in row
    unrecorded = {"artifacts": {k: v for k, v in recorded["artifacts"].items() if not k.startswith("fig3_claim")}}
    row = next(ln for ln in book_glance.glance_markdown(unrecorded, FIGURES_DIR).splitlines() if "02_simulator" in ln)
    assert "no claim row in `figures/`" in row


# --- the staged tree ---


def test_staged_tree_has_every_notebook_docs_page_and_the_gallery_in_the_index(staged):
    index = (staged / "index.md").read_text()
    toc = "\n".join(re.findall(r"```\{toctree\}(.*?)```", index, re.DOTALL))
    for nb in NOTEBOOKS_DIR.glob("*.ipynb"):
        assert (staged / "notebooks" / nb.name).is_file() and f"notebooks/{nb.stem}\n" in toc
    for page in (REPO_ROOT / "docs").glob("*.md"):
        assert (staged / "docs" / page.name).is_file() and f"docs/{page.stem}\n" in toc
    assert "\ngallery\n" in toc and (staged / "gallery.md").is_file()
    assert (staged / "figures" / "MANIFEST.json").is_file()
    assert "## Results at a glance" in index


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
