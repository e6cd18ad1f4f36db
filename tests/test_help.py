"""Every command of the package answers ``--help`` with exit status 0: each module run with ``python -m``
(a package's ``__main__`` or a module's ``if __name__ == "__main__"`` block) and each subcommand its usage line
lists (``{run,reproduce,...}``). The commands are found in the source, so a new one is checked without a list to
keep up. Each runs in this process as ``-m`` would run it (``runpy``), so the imports they share load once."""

from __future__ import annotations

import re
import runpy
import sys
from unittest import mock

import pytest

from brorl_lib.core.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "brorl_lib"
MAIN_BLOCK = re.compile(r'^if __name__ == "__main__":', re.MULTILINE)


def _commands() -> list[str]:
    """The dotted names ``python -m`` runs: packages with a ``__main__.py`` and modules with a main block."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        if path.name == "__main__.py":
            out.append(".".join(parts[:-1]))
        elif MAIN_BLOCK.search(path.read_text()):
            out.append(".".join(parts))
    return out


COMMANDS = _commands()


def _help(capsys, module: str, *args: str) -> tuple[object, str]:
    """``python -m module *args --help`` run in this process (``runpy``, as ``-m`` does; the imports it shares
    with the other commands are loaded once): its exit code and what it printed."""
    with mock.patch.object(sys, "argv", [module, *args, "--help"]):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            code = stop.code or 0
    out = capsys.readouterr()
    return code, out.out + out.err


def test_the_commands_are_found():
    assert {"brorl_lib", "brorl_lib.rlvr", "brorl_lib.evaluation", "brorl_lib.verl_recipe.smoke"} <= set(COMMANDS)


@pytest.mark.parametrize("module", COMMANDS)
def test_every_command_and_subcommand_answers_help(module, capsys):
    code, text = _help(capsys, module)
    assert code == 0 and "usage:" in text, f"python -m {module} --help:\n{text[-3000:]}"
    usage = text.split("\n\n")[0]
    for group in re.findall(r"\{([\w,-]+)\}", usage):  # subcommands (or a positional's choices)
        for sub in group.split(","):
            code, text = _help(capsys, module, sub)
            assert code == 0 and "usage:" in text, f"python -m {module} {sub} --help:\n{text[-3000:]}"
