"""The README's results at a glance come from the book's source (book.glance), which reads the rows the notebooks
write (core.claims): the block between its markers is what ``python -m brorl_lib.book.readme`` writes from figures/,
each row carries its caveat, notebook 04's row says BroRL against ProRL in one sentence without arm codes and what
its plateau gates measured, and the book shows the same rows in the README's place, once."""

import re

import pandas as pd
import pytest

from brorl_lib.book import glance, readme
from brorl_lib.core.claims import save_claim
from brorl_lib.core.paths import FIGURES_DIR, OUTPUT_DIR_ENV
from brorl_lib.core.registry import NOTEBOOKS
from brorl_lib.pipeline import manifest
from brorl_lib.rlvr import study_report


def test_the_readme_block_is_what_the_source_generates():
    text = readme.README.read_text(encoding="utf-8")
    assert readme.generated(text) == text, "run: python -m brorl_lib.book.readme"
    assert readme.main(["--check"]) == 0


def test_the_block_follows_the_quick_start_with_every_claim_and_its_caveat():
    text = readme.README.read_text(encoding="utf-8")
    block = text[text.index(readme.START) : text.index(readme.END)]
    assert text.index("## Quick start") < text.index(readme.START) < text.index("## What each notebook regenerates")
    rows = [line for line in block.splitlines() if line.startswith("| ") and "ipynb)" in line]
    assert len(rows) == len(NOTEBOOKS)
    recorded = manifest.load(FIGURES_DIR)
    for nb, row in zip(NOTEBOOKS, rows):
        assert f"(notebooks/{nb.name}.ipynb)" in row
        claim, _ = glance.claim_of(nb.name, recorded, FIGURES_DIR)
        assert row.split(" | ")[2] == glance.gfm_escape(claim["caveat"])


def _plateau(**changes) -> pd.DataFrame:
    return pd.read_csv(FIGURES_DIR / "laptop_rlvr_plateau.csv").head(1).assign(**changes)


def test_notebook_04s_caveat_is_read_from_its_plateau_gates():
    verdict = pd.read_csv(FIGURES_DIR / "laptop_rlvr_verdict.csv")
    plateau = _plateau(gate_low_q=False, gate_kept=True, gate_pass1=True)
    caveat = study_report.claim(verdict, plateau)["caveat"]
    share = float(plateau["low_q_share_exact"].iloc[0])
    assert f"failed the gate on low-q share {share:.3f}" in caveat and "was not reached" in caveat
    plateau = _plateau(gate_low_q=True, gate_kept=True, gate_pass1=True, plateau_reached=True)
    assert "passed every gate at its plateau" in study_report.claim(verdict, plateau)["caveat"]
    plateau = _plateau(gate_low_q=True, gate_kept=True, gate_pass1=True, plateau_reached=False)
    assert "at phase 1's cap (step 1,200), not shown flat" in study_report.claim(verdict, plateau)["caveat"]
    noisy = _plateau(plateau_kind=study_report.RATE_NOISE)  # the plateau's kind is carried by the caveat
    assert "not shown flat and a learning-rate-noise plateau" in study_report.claim(verdict, noisy)["caveat"]
    quiet = _plateau(plateau_kind="plateau at every rate tried")
    assert "learning-rate-noise" not in study_report.claim(verdict, quiet)["caveat"]
    passed = _plateau(plateau_kind=study_report.RATE_NOISE, gate_low_q=True, plateau_reached=True)
    assert study_report.claim(verdict, passed)["caveat"].endswith("the paper's regime was not shown")
    assert (
        study_report.claim(verdict, plateau.head(0))["caveat"] == "a tiny model on one task (countdown) at laptop scale"
    )


def test_notebook_04s_verdict_at_the_rules_rates_alone_says_the_tuned_comparison_is_pending():
    row = {"rates": "rule", "comparison": "N512 - N16", "budget": 1048576, "seeds": 3, "mean": -0.47,
           "ci_low_seeds_prompts": -0.6, "ci_high_seeds_prompts": -0.3, "sign_flip_p_two_sided": 0.25,
           "direction": "lower"}  # fmt: skip
    plateau = _plateau()

    def said(*rows):
        return study_report.claim(pd.DataFrame(list(rows)), plateau)["verdict"]

    assert said(row).startswith(
        "With 3 seeds at 1,048,576 samples each, BroRL (N=512) ends below ProRL (N=16) at the square-root rule's "
        "learning rates (Δpass@1 -0.470, 95% CI [-0.600, -0.300])"
    )
    assert study_report.TUNED_PENDING in said(row)
    best = {"rates": "tuned", "comparison": "N512_lr0.125x - N16_lr0.5x", "direction": "no difference"}
    tuned = said(row, row | best)
    assert "shows no difference from it at rates tuned per arm (-0.470 [-0.600, -0.300])" in tuned
    assert study_report.TUNED_PENDING not in tuned
    assert said(row | {"rates": "tuned", "comparison": "N16 - plateau"}) == study_report.NO_COMPARISON
    assert study_report.claim(pd.DataFrame(), plateau)["verdict"] == study_report.NO_COMPARISON


def test_notebook_04s_verdict_is_one_sentence_in_words_with_its_numbers():
    """BroRL against ProRL at the rule's and at tuned rates, at the largest budget, with the numbers of the verdict
    table; no arm code (``N512_lr0.0078125x``), no control, no other budget (those are in the table)."""
    verdict = pd.read_csv(FIGURES_DIR / "laptop_rlvr_verdict.csv")
    row = study_report.claim(verdict, _plateau())
    assert re.search(r"N\d+_", row["verdict"]) is None and re.search(r"N\d+_|countdown\d", row["caveat"]) is None
    assert row["verdict"].count(". ") == 0 and row["verdict"].endswith(".") and ";" not in row["verdict"]
    assert len(row["verdict"].split()) <= 40 and len(row["caveat"].split()) <= 40
    last = verdict[verdict["budget"] == verdict["budget"].max()].set_index(["rates", "comparison"])
    for key in (("rule", "N512 - N16"), ("tuned", "N512_lr0.0078125x - N16_lr0.5x")):
        r = last.loc[key]
        numbers = f"{r['mean']:+.3f}", f"[{r['ci_low_seeds_prompts']:+.3f}, {r['ci_high_seeds_prompts']:+.3f}]"
        assert all(n in row["verdict"] for n in numbers), (key, numbers)
    assert f"With {last.loc[('rule', 'N512 - N16'), 'seeds']} seeds at 1,048,576 samples each" in row["verdict"]


def test_a_claim_row_is_saved_as_a_table_and_refused_misnamed(tmp_path, monkeypatch):
    monkeypatch.setenv(OUTPUT_DIR_ENV, str(tmp_path))
    row = {"claim": "more N", "verdict": "rises", "caveat": "a simulator", "figure": "fig3_simulator"}
    save_claim("x_claim", row, provenance="reproduced")
    assert pd.read_csv(tmp_path / "x_claim.csv").iloc[0].to_dict() == row
    with pytest.raises(ValueError, match="a claim row is a table named '.._claim'"):
        save_claim("x_verdict", row, provenance="reproduced")
    with pytest.raises(ValueError, match="with the keys claim, verdict, caveat, figure"):
        save_claim("x_claim", {**row, "class": "reproduced"}, provenance="reproduced")


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
    assert len(lines) == len(NOTEBOOKS) and all(ln.count(" | ") == 4 for ln in lines)


def test_notebook_04s_row_is_the_regime_sets_verdict_with_the_full_distributions_beside_it():
    """With the regime set's sentence, the row says it (one sentence, its numbers, no arm code) and moves the full
    held-out distribution's tuned comparison into the caveat, both within the front page's 40 words a cell."""
    verdict = pd.read_csv(FIGURES_DIR / "laptop_rlvr_verdict.csv")
    regime = pd.read_csv(FIGURES_DIR / "laptop_rlvr_regime_verdict.csv", comment="#")
    r = regime[(regime["endpoint"] == "exact q (T=1), regime test") & (regime["comparison"] == "BroRL - ProRL")].iloc[0]
    sentence = study_report.claim(verdict, _plateau(), "")["verdict"]  # without it: the full distribution's
    from brorl_lib.core.profiles import load_profile
    from brorl_lib.rlvr import regime_report
    from brorl_lib.rlvr.study_config import CountdownStudyConfig

    cfg = CountdownStudyConfig(
        **CountdownStudyConfig.defaults() | load_profile("paper")["04_laptop_rlvr"]["parameters"]
    )
    said = regime_report.claim_verdict(regime_report.verdict(cfg.runs_path(), cfg.study(), cfg.phase2()))
    row = study_report.claim(verdict, _plateau(plateau_kind=study_report.RATE_NOISE), said)
    assert row["verdict"] == said != sentence and row["figure"] == "laptop_rlvr_regime"
    assert f"{r['mean']:+.3f} [{r['ci_low']:+.3f}, {r['ci_high']:+.3f}]" in said and said.count(". ") == 0
    headline = verdict["comparison"].map(lambda c: bool(study_report.HEADLINE.fullmatch(c)))
    tuned = verdict[(verdict["rates"] == "tuned") & headline & (verdict["budget"] == verdict["budget"].max())].iloc[0]
    assert f"{tuned['mean']:+.3f}" in row["caveat"] and "learning-rate-noise plateau" in row["caveat"]
    assert len(row["verdict"].split()) <= 40 and len(row["caveat"].split()) <= 40
    assert re.search(r"N\d+_", row["verdict"] + row["caveat"]) is None
