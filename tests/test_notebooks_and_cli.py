"""House rules for committed notebooks, and the command line's early errors."""

import json
import re

import nbformat
import papermill
import pytest
import torch

from brorl_lib.book.pages import committed_parameters
from brorl_lib.core.profiles import available_profiles, plan_run
from brorl_lib.core.registry import NOTEBOOKS
from brorl_lib.pipeline.cli import main

ASSIGNMENT = re.compile(r"^\w+\s*(:[^=]+)?=")


@pytest.mark.parametrize("spec", NOTEBOOKS, ids=lambda s: s.name)
def test_notebook_house_rules(spec):
    nb = nbformat.read(spec.path, as_version=4)
    assert nb.metadata.kernelspec.name == "python3"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert "parameters" in code[0].metadata.get("tags", []), "first code cell must be tagged 'parameters'"
    assert any(c.get("outputs") for c in code), "commit the notebook with the outputs of its committed profile"
    given = json.loads(json.dumps(plan_run(spec, spec.committed_profile).parameters))
    assert committed_parameters(nb) == (given if spec.committed_profile != "quick" else {}), "run `make notebooks`"
    assert any("# NBVAL_CHECK_OUTPUT" in c.source for c in code), "nbval needs at least one checked cell"
    lines = [ln for ln in code[0].source.splitlines() if ASSIGNMENT.match(ln)]
    params = papermill.inspect_notebook(str(spec.path))
    assert len(params) == len(lines), "papermill could not parse every parameter line"
    assert all(p["help"] for p in params.values()), "every parameter needs a '# what it means' comment"
    assert list(params) == spec.config_class().parameter_names()


@pytest.mark.parametrize("profile", available_profiles())
def test_every_profile_plans_every_notebook(profile):
    for spec in NOTEBOOKS:
        if profile == "gpu" and spec.name in ("02_simulator", "04_laptop_rlvr") and not torch.cuda.is_available():
            with pytest.raises(ValueError, match="device='cuda' is not allowed here"):
                plan_run(spec, profile)
            continue
        plan = plan_run(spec, profile)
        assert plan.timeout_s > 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "01_theory", "-p", "n_rollout", "4"], "notebook 01_theory has no parameter 'n_rollout'"),
        (["run", "01_theory", "-p", "eta", "-1"], "eta=-1 is not allowed: expected a finite number in (0, 10]"),
        (["run", "01_theory", "-p", "vocab_sizes", "[1, 5]"], "vocab_sizes item=1 is not allowed: expected"),
        (["run", "99_nothing"], "unknown notebook '99_nothing'"),
        (["reproduce", "--profile", "fast"], "unknown profile 'fast'"),
    ],
)
def test_cli_rejects_bad_input_before_running(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_cli_lists_notebooks_and_reports_status(capsys, tmp_path):
    assert main(["list"]) == 0
    assert "01_theory" in capsys.readouterr().out
    assert main(["status", "--out", str(tmp_path), "--check"]) == 0
    assert "0 of 0 artifacts" in capsys.readouterr().out
