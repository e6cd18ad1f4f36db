"""The README's results at a glance come from the book's source (book.glance): the block between its markers is
what ``python -m brorl_lib.book.readme`` writes from figures/, each row carries its caveat, notebook 04's row
says what its plateau gates measured, and the book shows the same rows in the README's place, once."""

import csv

import pytest

from brorl_lib.book import glance, readme
from brorl_lib.core.paths import FIGURES_DIR
from brorl_lib.pipeline import manifest


def test_the_readme_block_is_what_the_source_generates():
    text = readme.README.read_text(encoding="utf-8")
    assert readme.generated(text) == text, "run: python -m brorl_lib.book.readme"
    assert readme.main(["--check"]) == 0


def test_the_block_is_near_the_top_with_every_claim_and_its_caveat():
    text = readme.README.read_text(encoding="utf-8")
    block = text[text.index(readme.START) : text.index(readme.END)]
    assert text.index(readme.START) < text.index("## Quick start")
    rows = [line for line in block.splitlines() if line.startswith("| ") and "ipynb)" in line]
    assert len(rows) == len(glance.CLAIMS)
    for claim, row in zip(glance.CLAIMS, rows):
        assert f"(notebooks/{claim.notebook}.ipynb)" in row
        assert glance.gfm_escape(claim.caveat) in row.split(" | ")[2]


def _plateau_with(tmp_path, **changes) -> dict:
    with open(FIGURES_DIR / "laptop_rlvr_plateau.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    rows[0].update(changes)
    with open(tmp_path / "laptop_rlvr_plateau.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows[0]


def test_notebook_04s_caveat_is_read_from_its_plateau_gates(tmp_path):
    claim = next(c for c in glance.CLAIMS if c.notebook == "04_laptop_rlvr")
    row = _plateau_with(tmp_path, gate_low_q="False", gate_kept="True", gate_pass1="True")
    caveat = glance.caveat_of(claim, tmp_path, glance.gfm_escape)
    share = float(row["low_q_share_exact"])
    assert f"failed the gate on low-q share {share:.3f}" in caveat and "was not reached" in caveat
    _plateau_with(tmp_path, gate_low_q="True", gate_kept="True", gate_pass1="True", plateau_reached="True")
    assert "passed every gate at its plateau" in glance.caveat_of(claim, tmp_path, glance.gfm_escape)
    _plateau_with(tmp_path, gate_low_q="True", gate_kept="True", gate_pass1="True", plateau_reached="False")
    assert "phase 1's cap, reached before the plateau was shown flat" in glance.caveat_of(
        claim, tmp_path, glance.gfm_escape
    )
    (tmp_path / "laptop_rlvr_plateau.csv").unlink()
    assert "`figures/laptop_rlvr_plateau.csv` is absent" in glance.caveat_of(claim, tmp_path)


def test_notebook_04s_verdict_at_the_rules_rates_alone_says_the_tuned_comparison_is_pending():
    row = {"rates": "rule", "comparison": "N512 - N16", "budget": "1048576", "seeds": "3", "mean": "-0.47",
           "ci_low_seeds_prompts": "-0.6", "ci_high_seeds_prompts": "-0.3", "sign_flip_p_two_sided": "0.25",
           "direction": "BroRL lower"}  # fmt: skip
    said = glance.laptop([row])
    assert said.startswith("rule rates, N512 - N16: BroRL lower, Δpass@1 -0.470") and glance.TUNED_PENDING in said
    tuned = glance.laptop([row, row | {"rates": "tuned"}])
    assert "tuned rates, N512 - N16" in tuned and glance.TUNED_PENDING not in tuned
    plateau_only = glance.laptop([row | {"rates": "tuned", "comparison": "N16 - plateau"}])
    assert plateau_only == glance.WHEN_EMPTY["laptop_rlvr_verdict"]


def test_a_changed_readme_block_is_refused_and_rewritten(tmp_path, monkeypatch, capsys):
    text = readme.README.read_text(encoding="utf-8")
    copy = tmp_path / "README.md"
    copy.write_text(text.replace("holds: worst relative error", "holds: best relative error"))
    monkeypatch.setattr(readme, "README", copy)
    assert readme.main(["--check"]) == 1
    assert readme.main([]) == 0 and copy.read_text() == text
    copy.write_text(text.replace(readme.END, ""))
    assert readme.main([]) == 2
    assert "needs the markers" in capsys.readouterr().err


@pytest.mark.parametrize("render", [glance.glance_markdown, lambda m, f: glance.readme_markdown(m, f)])
def test_both_renderings_have_the_same_rows(render):
    recorded = manifest.load(FIGURES_DIR)
    lines = [ln for ln in render(recorded, FIGURES_DIR).splitlines() if ln.startswith("| ") and "ipynb)" in ln]
    assert len(lines) == len(glance.CLAIMS) and all(ln.count(" | ") == 4 for ln in lines)
