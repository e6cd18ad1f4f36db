"""figures/MANIFEST.json as a reader's state: an unreadable one is named, a missing one beside artifacts is
"not recorded", files no notebook made are listed, and `run` refuses a damaged one before any work."""

import json

import pytest

from brorl_lib.core.paths import FIGURES_DIR
from brorl_lib.core.registry import get_notebook
from brorl_lib.pipeline import hashing, manifest
from brorl_lib.pipeline.cli import main


def _entry(folder, name: str, text: str) -> dict:
    """Write artifact ``name`` and return a manifest entry that records it as current (notebook 01)."""
    (folder / name).write_text(text)
    hashes = hashing.input_hashes(get_notebook("01_theory"), {})
    return {
        "notebook": "01_theory",
        "parameters": {},
        "input_hash": hashes["input"],
        "inputs": {k: v for k, v in hashes.items() if k != "input"},
        "sha256": hashing.sha256_file(folder / name),
    }


@pytest.fixture
def recorded(tmp_path):
    """A folder with two current artifacts and their manifest."""
    man = {"schema": 1, "artifacts": {n: _entry(tmp_path, n, f"x\n{i}\n") for i, n in enumerate(("a.csv", "b.csv"))}}
    manifest.save(tmp_path, man)
    return tmp_path


def test_current_folder_is_reported_current(recorded, capsys):
    assert main(["status", "--out", str(recorded), "--check"]) == 0
    assert "2 of 2 artifacts" in capsys.readouterr().out


@pytest.mark.parametrize(
    "damage, problem",
    [
        (lambda text: text[: len(text) // 2], "is unreadable (JSONDecodeError"),  # truncated
        (lambda text: "\udcff\udcfe" + text, "is unreadable (UnicodeDecodeError"),  # garbled bytes
        (lambda text: "[1, 2]", "wrong shape (top level is a list"),
        (lambda text: '{"schema": 1, "artifacts": []}', "wrong shape ('artifacts' is a list"),
        (lambda text: text.replace('"sha256"', '"sha"'), "'sha256' is missing"),
        (lambda text: text.replace('"a.csv"', '"../a.csv"'), "not the name of a file in the folder"),
    ],
)
def test_status_names_an_unreadable_manifest_and_the_fix(recorded, capsys, damage, problem):
    path = recorded / manifest.MANIFEST_FILE
    path.write_bytes(damage(path.read_text()).encode("utf-8", "surrogateescape"))
    assert main(["status", "--out", str(recorded)]) == 2
    err = capsys.readouterr().err
    assert "MANIFEST.json" in err and problem in err
    assert "git checkout --" in err and "python -m brorl_lib reproduce" in err


def test_missing_manifest_beside_artifacts_is_not_recorded(recorded, capsys):
    (recorded / manifest.MANIFEST_FILE).unlink()
    assert main(["status", "--out", str(recorded)]) == 1  # not "0 of 0 current", and not exit 0
    out = capsys.readouterr().out
    assert "NOT RECORDED  a.csv" in out and "NOT RECORDED  b.csv" in out
    assert "MANIFEST.json is missing: 2 files" in out


def test_files_no_notebook_made_are_listed(recorded, capsys):
    (recorded / "stray.png").write_bytes(b"\x89PNG")
    (recorded / "notes").mkdir()
    assert main(["status", "--out", str(recorded)]) == 0
    out = capsys.readouterr().out
    assert "NOT RECORDED  stray.png" in out and "NOT RECORDED  notes/" in out
    assert "2 of 2 artifacts" in out and "2 other files are not recorded" in out
    assert main(["status", "--out", str(recorded), "--check"]) == 1


def test_run_refuses_a_damaged_manifest_before_running(recorded, capsys):
    path = recorded / manifest.MANIFEST_FILE
    path.write_text(path.read_text()[:40])
    before = {p.name: p.read_bytes() for p in recorded.iterdir()}
    assert main(["run", "03_paper_tables", "--out", str(recorded)]) == 2
    err = capsys.readouterr().err
    assert "MANIFEST.json is unreadable" in err and "`run` does not rebuild it" in err
    assert {p.name: p.read_bytes() for p in recorded.iterdir()} == before  # nothing ran, nothing moved


def test_manifest_records_no_facts_of_one_run():
    committed = json.loads((FIGURES_DIR / manifest.MANIFEST_FILE).read_text())
    keys = {k for entry in committed["artifacts"].values() for k in entry}
    assert not keys & {"git_commit", "wall_time_s", "host", "time_utc"}
