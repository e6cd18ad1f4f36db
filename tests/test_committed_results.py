"""The committed figures/ is safe: a run with other parameters than its profile's goes to a folder of its own
(named in the output) unless --out says otherwise, and `status` names every file whose bytes differ from the
manifest, or that was made with other parameters, and exits non-zero."""

import json
import re
import shlex
import shutil

import nbformat
import pytest

from brorl_lib.core.artifacts import RECORD_FILE
from brorl_lib.core.paths import FIGURES_DIR, REPO_ROOT
from brorl_lib.pipeline import cli, destination, manifest, runner
from brorl_lib.pipeline.cli import main


def _docs_first_example() -> list[str]:
    """The first `python -m brorl_lib run` command of docs/pipeline.md, as arguments after `brorl_lib`, less any
    --out DIR."""
    text = (REPO_ROOT / "docs" / "pipeline.md").read_text()
    line = next(ln for ln in text.splitlines() if re.match(r"^\S*python -m brorl_lib run ", ln))
    argv = shlex.split(line.split("#")[0])[3:]
    if "--out" in argv:
        i = argv.index("--out")
        del argv[i : i + 2]
    return argv


def _bytes(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def figures(tmp_path, monkeypatch):
    """A copy of the committed figures/ standing in for it, and a build folder of the test's own."""
    copy = tmp_path / "figures"
    shutil.copytree(FIGURES_DIR, copy)
    build = tmp_path / "build"
    for module in (cli, destination, manifest, runner):
        monkeypatch.setattr(module, "FIGURES_DIR", copy, raising=False)
    for module in (cli, destination, runner):
        monkeypatch.setattr(module, "BUILD_DIR", build, raising=False)
    monkeypatch.setattr(runner, "STATE_FILE", build / "state.json")
    return copy


def _fake_execute(plan, staging, executed, log_output, look=runner.DEFAULT_LOOK) -> int:
    """Stand-in for papermill: the notebook's first committed artifact, made again with other bytes."""
    name = manifest.files_of(manifest.load(FIGURES_DIR), plan.spec.name)[0]
    (staging / name).write_text("made with other parameters\n")
    record = {"name": name.rsplit(".", 1)[0], "files": [name], "provenance": "variant", "caption": "a variant"}
    (staging / RECORD_FILE).write_text(json.dumps(record) + "\n")
    nbformat.write(nbformat.v4.new_notebook(), executed)
    return 0


def test_the_docs_first_example_without_out_leaves_figures_unchanged(figures, monkeypatch, capsys):
    argv = _docs_first_example()
    assert argv[:2] == ["run", "01_theory"] and "-p" in argv
    monkeypatch.setattr(runner, "_execute", _fake_execute)
    before = _bytes(figures)
    assert main(argv) == 0
    assert _bytes(figures) == before
    out = capsys.readouterr().out
    folder = re.search(r"artifacts go to (\S+)/: not the paper profile's parameters", out)
    assert folder, out
    written = manifest.load(REPO_ROOT / folder.group(1))["artifacts"]
    assert [e["notebook"] for e in written.values()] == ["01_theory"]
    assert main(["status"]) == 0  # figures/ (the copy) still what its manifest records


def test_status_names_an_edited_artifact_and_exits_non_zero(figures, capsys):
    assert main(["status"]) == 0
    edited = manifest.files_of(manifest.load(figures), "03_paper_tables")[0]
    (figures / edited).write_bytes((figures / edited).read_bytes() + b"\n")
    capsys.readouterr()
    assert main(["status"]) == 1
    out = capsys.readouterr().out
    assert f"CHANGED  {edited}: its bytes differ from the SHA-256" in out
    assert "git checkout --" in out


def test_status_names_files_made_with_another_profile_in_figures(figures, capsys):
    man = manifest.load(figures)
    name = manifest.files_of(man, "01_theory")[0]
    man["artifacts"][name]["profile"] = "quick"
    manifest.save(figures, man)
    assert main(["status"]) == 1
    assert f"NOT COMMITTED PROFILE  {name}: made with the quick profile" in capsys.readouterr().out


def test_out_figures_asked_explicitly_replaces_the_committed_files(figures, monkeypatch, capsys):
    monkeypatch.setattr(runner, "_execute", _fake_execute)
    name = manifest.files_of(manifest.load(figures), "03_paper_tables")[0]
    assert main(["run", "03_paper_tables", "--out", str(figures)]) == 0
    assert (figures / name).read_text() == "made with other parameters\n"
    assert "warning: --out figures: replacing committed files" in capsys.readouterr().err
    assert main(["status"]) == 1  # made with the quick profile: named until restored


def test_a_run_with_the_committed_parameters_goes_to_figures(figures):
    from brorl_lib.core.profiles import plan_run
    from brorl_lib.core.registry import get_notebook

    spec = get_notebook("03_paper_tables")
    assert destination.choose([plan_run(spec, "paper")], "paper", {}) == figures
    assert destination.choose([plan_run(spec, "quick")], "quick", {}) == figures.parent / "build" / "runs" / "quick"
    changed = plan_run(spec, "paper", {"max_rollouts": 256})
    assert destination.choose([changed], "paper", {"max_rollouts": 256}).parent.name == "runs"
