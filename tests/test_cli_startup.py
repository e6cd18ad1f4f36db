"""The command line checks its arguments before it loads the heavy modules: an error that needs no model (an
unknown notebook, profile or parameter, a malformed command) prints without importing torch, matplotlib or
nbformat, in a fraction of a second rather than the seconds those imports take."""

import subprocess
import sys

import pytest
from hang_limits import HANG_S

from brorl_lib.core.paths import REPO_ROOT

HEAVY = ("torch", "matplotlib", "nbformat")
PROBE = """
import sys
from brorl_lib.pipeline.cli import main
rc = main(sys.argv[1:])
print("loaded:", ",".join(m for m in {heavy!r} if m in sys.modules))
print("rc:", rc)
"""


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "99_nothing"], "unknown notebook '99_nothing'"),
        (["run", "01_theory", "--profile", "fast"], "unknown profile 'fast'"),
        (["reproduce", "--profile", "fast"], "unknown profile 'fast'"),
        (["run", "01_theory", "-p", "etaa", "1"], "has no parameter 'etaa'"),
        (["run", "03_paper_tables", "-p", "max_rollouts", "many"], "max_rollouts"),
        (["run", "01_theory", "02_simulator", "-p", "eta", "1"], "-p/--parameter applies to one notebook"),
    ],
)
def test_an_error_that_needs_no_model_prints_before_the_heavy_imports(argv, message):
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=HANG_S,
    )
    assert message in done.stderr
    assert "rc: 2" in done.stdout
    assert "loaded: \n" in done.stdout, done.stdout


def test_list_loads_no_heavy_module():
    code = PROBE.format(heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", code, "list"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert "01_theory" in done.stdout and "loaded: \n" in done.stdout and "rc: 0" in done.stdout
