"""make check's notebook selection: the notebooks whose input files differ from a git revision."""

import subprocess

import pytest

from brorl_lib.core.registry import NOTEBOOKS, get_notebook
from brorl_lib.pipeline import touched as t


def names(changed: set[str]) -> list[str]:
    return [spec.name for spec in t.touched(changed)]


def test_a_module_touches_the_notebooks_that_import_it_and_a_profile_touches_all():
    assert names({"brorl_lib/rlvr/study_report.py"}) == ["04_laptop_rlvr"]
    assert names({"notebooks/01_theory.ipynb", "README.md"}) == ["01_theory"]
    assert names({"params/paper/01_theory.yaml"}) == [spec.name for spec in NOTEBOOKS]
    assert names({"README.md", "docs/pipeline.md"}) == []
    run_file = next(p for p in sorted(t.input_files(get_notebook("04_laptop_rlvr"))) if p.startswith("data/runs/"))
    assert names({run_file}) == ["04_laptop_rlvr"]


def test_changed_files_are_the_diff_and_the_untracked_files(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "kept.txt").write_text("a\n")
    (tmp_path / "edited.txt").write_text("a\n")
    (tmp_path / ".gitignore").write_text("ignored.txt\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
    (tmp_path / "edited.txt").write_text("b\n")
    (tmp_path / "new.txt").write_text("c\n")
    (tmp_path / "ignored.txt").write_text("d\n")
    assert t.changed_files("HEAD", tmp_path) == {"edited.txt", "new.txt"}
    with pytest.raises(ValueError, match="base='no-such-revision' cannot be compared"):
        t.changed_files("no-such-revision", tmp_path)
