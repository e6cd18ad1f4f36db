"""Screenshots that cannot go stale: each one the README or the book shows records its notebook's input hash, and
fails here once the notebook's inputs changed, naming the command that takes it again (pipeline.screenshots)."""

from __future__ import annotations

import json

import pytest

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.registry import get_notebook
from brorl_lib.pipeline import hashing, screenshots

INPUTS = {"notebook": "n1", "library": "l1", "parameters": "p1", "data": "d1", "input": "i1"}


def test_every_screenshot_the_readme_or_the_book_shows_is_current():
    problems = screenshots.stale()
    assert not problems, "\n".join(problems) + f"\nto take them again: {screenshots.refresh_command(problems)}"


def test_every_screenshot_in_docs_is_named_after_a_notebook_and_has_its_record():
    pngs = sorted(screenshots.SHOTS_DIR.glob("*.png"))
    assert pngs, "docs/screenshots/ holds no screenshot"
    for png in pngs:
        entry = json.loads(screenshots.sidecar_of(png).read_text())
        assert entry["notebook"] == png.stem
        assert entry["profile"] == screenshots.profile_of(png.stem)
        assert set(entry["inputs"]) == {"notebook", "library", "parameters", "data"}
        assert entry["files"], f"{png.name}: its record names no file its notebook's inputs cover"


@pytest.fixture
def shots(tmp_path, monkeypatch):
    """A screenshots folder with one picture of 01_theory, whose inputs are INPUTS until a test changes them."""
    now = dict(INPUTS)
    monkeypatch.setattr(screenshots, "current_inputs", lambda name: now)
    (tmp_path / "01_theory.png").write_bytes(b"\x89PNG")
    return tmp_path, now


def test_a_screenshot_taken_with_the_current_inputs_is_current(shots):
    folder, _ = shots
    screenshots.record(folder / "01_theory.png", "01_theory", INPUTS)
    assert screenshots.problem("01_theory", folder) is None
    entry = json.loads((folder / "01_theory.json").read_text())
    assert entry == {
        "notebook": "01_theory",
        "profile": "paper",
        "input_hash": "i1",
        "inputs": {"notebook": "n1", "library": "l1", "parameters": "p1", "data": "d1"},
        "files": {},
        "refresh": "make screenshots NOTEBOOKS=01_theory",
    }


def test_a_changed_input_makes_it_stale_naming_what_changed_and_the_command(shots, monkeypatch):
    folder, now = shots
    files = {"brorl_lib/figures/plotting.py": "a", "brorl_lib/theory/plots.py": "b"}
    screenshots.record(folder / "01_theory.png", "01_theory", INPUTS, files)
    monkeypatch.setattr(screenshots, "current_files", lambda name: {**files, "brorl_lib/figures/plotting.py": "c"})
    now.update(library="l2", input="i2")
    message = screenshots.problem("01_theory", folder)
    assert "(library changed: brorl_lib/figures/plotting.py)" in message and "notebook changed" not in message
    assert "`make screenshots NOTEBOOKS=01_theory`" in message
    assert screenshots.stale(["01_theory"], folder) == [message]
    assert screenshots.refresh_command([message, message.replace("01_theory", "05_x")]) == (
        'make screenshots NOTEBOOKS="01_theory 05_x"'
    )


def test_a_screenshot_without_its_record_or_missing_is_named(shots):
    folder, _ = shots
    assert "no readable record" in screenshots.problem("01_theory", folder)
    (folder / "01_theory.json").write_text("{not json")
    assert "no readable record" in screenshots.problem("01_theory", folder)
    assert "is missing" in screenshots.problem("02_simulator", folder)
    assert "no notebook" in screenshots.problem("99_nothing", folder)


def test_shown_finds_the_screenshots_in_markdown_html_and_notebooks(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("![a](docs/screenshots/01_theory.png)\n<img src='docs/screenshots/02_x.png'>")
    (tmp_path / "docs" / "notebooks.md").write_text('text ![b]( screenshots/01_theory.png "t") and figures/fig.png')
    found = screenshots.shown(("README.md", "docs/*.md"), tmp_path)
    assert found == {"01_theory": ["README.md", "docs/notebooks.md"], "02_x": ["README.md"]}


def test_the_photographed_run_uses_each_notebooks_screenshot_profile():
    assert screenshots.profile_of("04_laptop_rlvr") == "paper"  # its committed outputs: the runs read back
    assert screenshots.parameters_of("04_laptop_rlvr")["runs_dir"] == "data/runs/laptop_rlvr_countdown_next"
    assert screenshots.profile_of("01_theory") == "paper"  # about a minute on 2 cores
    assert screenshots.parameters_of("01_theory")["n_instances"] == 3000
    assert screenshots.profile_of("02_simulator") == "paper"  # its paper run takes 3 min there
    assert screenshots.parameters_of("02_simulator")["sweep_steps"] == 1000


@pytest.mark.skipif(not (REPO_ROOT / ".git").exists(), reason="not a git work tree")
def test_input_hashes_leave_out_the_files_git_ignores():
    """A run's console.log matches notebook 05's data patterns but is not committed: were it hashed, the input hash
    (of the manifest and of a screenshot) would differ between the machine that ran it and a clone."""
    log, table = REPO_ROOT / "data/runs/verl/any/arm/console.log", REPO_ROOT / "data/paper/settings.csv"
    assert hashing.git_ignored([log, table]) == {log}
    assert not any(p.name == "console.log" for p in hashing.data_files(get_notebook("05_verl_training")))
