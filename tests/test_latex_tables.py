"""Tables a paper takes: every .tex that save_table writes compiles with pdflatex and fits a 6.5-in text (or is
marked as a data table); no NaN in any rendering; numbers at their precision (tests/latex_check.py typesets)."""

from pathlib import Path

import latex_check
import numpy as np
import pandas as pd
import pytest

from brorl_lib.core.latex_tables import DATA_TABLE_MARK, latex_text, layout
from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.table_files import MISSING_NOTE, save_table, shown_table

HOSTILE_CAPTION = "5-95% of q_bar & #2: Δ ≤ 0.1, ≈ 3 × 10 ± 1 − 2 → x ∈ S, |G|^2 < 1 > 0 {§2} ~$5 \\ (…)"


@pytest.fixture(scope="module")
def pdflatex():
    if latex_check.pdflatex() is None:
        pytest.fail("pdflatex not found: run `make tex-deps` (Debian's package 'texlive-latex-recommended')")


def test_latex_text_escapes_specials_and_sets_unicode_math_in_math_mode():
    assert latex_text("5% of a_b & #1 {x} ~ ^ $") == r"5\% of a\_b \& \#1 \{x\} \textasciitilde{} \textasciicircum{} \$"
    assert (
        latex_text("Δ ≤ 0.1, ≈ 2×3 ± 1 → ∈") == r"$\Delta$ $\leq$ 0.1, $\approx$ 2$\times$3 $\pm$ 1 $\rightarrow$ $\in$"
    )
    assert latex_text("|G|^2 < 1 – §2 …") == r"\textbar{}G\textbar{}\textasciicircum{}2 $<$ 1 -- \S{}2 \ldots{}"
    assert latex_text("a_b.cd/e", breakable=True) == r"a\_\allowbreak{}b.\allowbreak{}cd/\allowbreak{}e"
    with pytest.raises(ValueError, match="U0001F600|no LaTeX form"):
        latex_text("\U0001f600")


def test_every_unicode_character_in_the_library_sources_has_a_latex_form():
    """Any text of brorl_lib may reach a caption or a cell: each character it uses has a form pdflatex sets."""
    used = {ch for p in (REPO_ROOT / "brorl_lib").rglob("*.py") for ch in p.read_text(encoding="utf-8")}
    # tokenizer pieces, shown only in a notebook's printout of a tokenizer (never in a table)
    tokenizer = set("｜▁ĠĊ■›")
    missing = []
    for ch in sorted(used - tokenizer):
        if not ch.isascii():
            try:
                latex_text(ch)
            except ValueError:
                missing.append(ch)
    assert not missing


def test_shown_table_writes_a_dash_for_missing_values_and_every_float_at_its_format():
    frame = pd.DataFrame({"a": [1.0, np.nan], "key": ["lr", None], "value": [2.8284271247461903e-06, "x"]})
    assert shown_table(frame).to_dict("list") == {"a": ["1", "-"], "key": ["lr", "-"], "value": ["2.828e-06", "x"]}
    assert shown_table(frame, "{:.2f}")["a"].tolist() == ["1.00", "-"]


def test_an_integer_shows_in_full_with_thousands_commas_and_a_flag_stays_a_flag():
    frame = pd.DataFrame({"N": [16, 51_200], "samples": [9_999, 51_200_000], "kept": [True, False], "x": [1.5e4, 2.0]})
    shown = shown_table(frame).to_dict("list")
    assert shown["N"] == ["16", "51,200"] and shown["samples"] == ["9999", "51,200,000"]
    assert shown["kept"] == [True, False] and shown["x"] == ["15,000", "2"]


def test_a_missing_value_shows_as_a_dash_the_caption_saying_what_it_means(out_dir):
    frame = pd.DataFrame({"method": ["a", None], "score": [1.5, np.nan]})
    md, tex, csv = (p.read_text() for p in save_table(frame, "t", provenance="reported", caption="C").files)
    for text in (md, tex):
        assert "nan" not in text.lower() and "None" not in text
    assert MISSING_NOTE in md and latex_text(MISSING_NOTE) in tex
    assert "| -  " in md and "a & 1.5" in tex and "-- & --" in tex  # in LaTeX, the dash is an en dash
    assert csv == "method,score\na,1.5\n,\n"  # the CSV keeps empty cells
    complete = save_table(frame.dropna(), "u", provenance="reported", caption="C").files[0].read_text()
    assert MISSING_NOTE not in complete


def test_a_float_among_other_values_is_shown_at_the_tables_precision(out_dir):
    """verl_config_diff showed BroRL's learning rate as 2.8284271247461903e-06 in Markdown, 0.000003 in LaTeX."""
    frame = pd.DataFrame({"key": ["lr", "name"], "brorl": [2.8284271247461903e-06, "brorl-repro-brorl"]})
    md, tex, csv = (p.read_text() for p in save_table(frame, "t", provenance="reproduced", caption="C").files)
    assert "2.828e-06" in md and "2.828e-06" in tex
    assert "0.000003" not in tex and "2.8284271247461903e-06" not in md
    assert "2.8284271247461903e-06" in csv  # the CSV keeps the value


def _hostile_tables() -> dict[str, pd.DataFrame]:
    wide = pd.DataFrame({f"metric_number_{i}_of_many": np.linspace(0.1, 0.9, 3) * (i + 1) for i in range(16)})
    words = "the first-order change of one update in the paper's setting, checked on random batches; " * 3
    return {
        "hostile": pd.DataFrame(
            {
                "q_band [Δ≤]": ["[0, 0.01)", "[0.01, 0.1)", "≈ 5% & more"],
                "N × B": [16, 512, 4096],
                "Δ pass@1 (±)": [0.0123, np.nan, -2.83e-6],
                "note_#": ["a_b", None, "x → y ∈ S"],
            }
        ),
        "paper_like": pd.DataFrame(
            {
                "Method": ["Baseline", "ProRL", "BroRL"],
                "prompts_per_step": [512, 512, 128],
                **{f"score_{k}": [61.69, 62.08, 63.03] for k in ("math", "code", "reasoning_gym", "aime24")},
                "samples_k": [np.nan, 4390.0, 20039.0],
                "time_h": [np.nan, 56.3, 173.8],
            }
        ),
        "claim_like": pd.DataFrame(
            {"claim": [words], "verdict": [words], "caveat": [words], "figure": ["theory_theorem1_check"]}
        ),
        "keys_like": pd.DataFrame(
            {
                "key": ["actor_rollout_ref.rollout.trace.experiment_name", "trainer.default_local_dir"],
                "prorl": ["brorl-repro-prorl", "build/verl/brorl-repro/work/checkpoints/prorl"],
                "brorl": [2.8284271247461903e-06, "build/verl/brorl-repro/work/checkpoints/brorl"],
            }
        ),
        "tall_claim": pd.DataFrame({"claim": [words * 12], "verdict": [words * 12], "caveat": [words * 4]}),
        "wide": wide,
        "long": pd.DataFrame({"step": range(60), "pass1": np.linspace(0, 1, 60)}),
    }


def test_tables_with_hostile_text_compile_and_fit_or_are_marked_data_tables(out_dir, pdflatex):
    """Captions and cells with %, _, &, #, $, [, Unicode math and NaN; a paper-like table a little too wide, prose
    columns, identifiers, a table too wide for any layout and one too long for a float."""
    kinds = {}
    for name, frame in _hostile_tables().items():
        saved = save_table(frame, name, provenance="reported", caption=HOSTILE_CAPTION)
        tex = saved.files[1]
        kinds[name] = "data" if latex_check.is_data_table(tex.read_text()) else "float"
        assert latex_check.check_table(tex) == [], name
    assert kinds == {
        "hostile": "float",
        "paper_like": "float",
        "claim_like": "float",
        "keys_like": "float",
        "tall_claim": "data",
        "wide": "data",
        "long": "data",
    }


def test_the_width_estimate_agrees_with_pdflatex_at_the_edge(tmp_path, pdflatex):
    """The widest one-line table the estimate calls a float fits; one a few characters wider does not fit as a float."""
    for extra, fits in ((0, True), (12, False)):
        n = 0
        while (
            layout([["x" * (n + 1)]], ["h"], [False])["kind"] == "float"
            and not layout([["x" * (n + 1)]], ["h"], [False])["small"]
        ):
            n += 1
        row = "x" * (n + extra)
        tex = tmp_path / f"edge{extra}.tex"
        tex.write_text(
            "\\begin{table}\n\\begin{tabular}{l}\n\\toprule\nh \\\\\n\\midrule\n"
            f"{row} \\\\\n\\bottomrule\n\\end{{tabular}}\n\\end{{table}}\n"
        )
        assert (latex_check.check_table(tex) == []) is fits, (extra, latex_check.check_table(tex))


def test_the_check_finds_a_table_that_does_not_compile_or_is_too_wide(tmp_path, pdflatex):
    broken = tmp_path / "broken.tex"
    broken.write_text("\\begin{table}\\caption{5% of q_bar, Δ}\\begin{tabular}{l}a\\end{tabular}\\end{table}\n")
    assert latex_check.check_table(broken)[0].startswith("does not compile")
    wide = tmp_path / "wide.tex"
    wide.write_text("\\begin{tabular}{" + "l" * 30 + "}" + " & ".join(["0.12345"] * 30) + "\\end{tabular}\n")
    assert latex_check.check_table(wide)[0].startswith("wider than a 6.5-in text")
    tall = tmp_path / "tall.tex"
    tall.write_text("\\begin{table}\\begin{tabular}{l}" + "a \\\\\n" * 80 + "\\end{tabular}\\end{table}\n")
    assert latex_check.check_table(tall) == ["taller than a 9.0-in text: a float cannot break across pages"]
    marked = tmp_path / "marked.tex"
    marked.write_text(DATA_TABLE_MARK + "\n" + wide.read_text())
    assert latex_check.check_table(marked) == []


COMMITTED = sorted((REPO_ROOT / "figures").glob("*.tex"))


@pytest.mark.parametrize("tex", COMMITTED, ids=[p.name for p in COMMITTED])
def test_every_committed_table_compiles_and_fits_a_text_or_is_a_data_table(tex: Path, pdflatex):
    assert latex_check.check_table(tex) == []
