"""A list given with plain papermill's -p arrives as a string: the refusal names the parameter, says a string came,
and shows papermill's -y option with the parameter's own example (and the pipeline's -p, which reads YAML)."""

import os
import subprocess
import sys

from hang_limits import HANG_S

from brorl_lib.core.paths import NOTEBOOKS_DIR, OUTPUT_DIR_ENV
from brorl_lib.theory.report import TheoryConfig


def test_a_list_as_text_is_refused_naming_papermills_y_option():
    values = {**TheoryConfig.defaults(), "vocab_sizes": "[1000, 128000]"}
    try:
        TheoryConfig.from_namespace(values)
    except ValueError as err:
        message = str(err)
    else:
        raise AssertionError("a string for a list parameter was accepted")
    assert message.startswith("vocab_sizes='[1000, 128000]' is not allowed")
    assert "got a string" in message and "papermill's -y option" in message
    assert "-y 'vocab_sizes: [" in message and "python -m brorl_lib run NOTEBOOK -p vocab_sizes '[" in message


def test_plain_papermill_shows_the_hint_before_any_work(tmp_path):
    out = tmp_path / "out.ipynb"
    cmd = [sys.executable, "-m", "papermill", str(NOTEBOOKS_DIR / "01_theory.ipynb"), str(out), "-k", "python3"]
    done = subprocess.run(
        [*cmd, "-p", "vocab_sizes", "[1000, 128000]", "--cwd", str(NOTEBOOKS_DIR)],
        capture_output=True,
        text=True,
        timeout=HANG_S,
        env={**os.environ, OUTPUT_DIR_ENV: str(tmp_path / "artifacts")},
    )
    assert done.returncode != 0
    assert "papermill's -y option" in done.stdout + done.stderr
    assert not any((tmp_path / "artifacts").glob("*.png"))  # refused before any figure was drawn
