"""Every file a notebook's artifacts are computed from is in its input hash: a changed byte makes it stale."""

import re
import shutil

import pytest

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.registry import NOTEBOOKS
from brorl_lib.pipeline import hashing

# A path under data/ as the code names it: "data/runs/verl" or REPO_ROOT / "data" / "runs" / "verl".
SLASHED = re.compile(r"""["'](data(?:/[\w.-]+)+)""")
JOINED = re.compile(r"""["']data["']((?:\s*/\s*["'][\w.-]+["'])+)""")
PART = re.compile(r"""["']([\w.-]+)["']""")


def named_data_paths(source: str) -> set[str]:
    found = {m.group(1).rstrip("/.") for m in SLASHED.finditer(source)}
    found |= {"/".join(["data", *PART.findall(m.group(1))]) for m in JOINED.finditer(source)}
    return found


def test_the_scanner_reads_both_spellings():
    src = 'A = REPO_ROOT / "data" / "runs" / "eval"\nB = Path("data/runs/laptop_rlvr")  # data/runs/x.\n'
    assert named_data_paths(src) == {"data/runs/eval", "data/runs/laptop_rlvr"}


@pytest.mark.parametrize("spec", NOTEBOOKS, ids=lambda s: s.name)
def test_every_data_path_the_code_names_is_a_declared_input(spec):
    code = [src for kind, src in hashing.notebook_code(spec.path) if kind == "code"]
    sources = code + [p.read_text() for p in hashing.library_files(code) if p.name != "registry.py"]
    declared = set(hashing.data_files(spec))
    for named in set().union(*map(named_data_paths, sources)):
        target = REPO_ROOT / named
        files = [target] if target.is_file() else [p for p in target.rglob("*") if p.is_file()]
        undeclared = sorted(set(files) - declared - hashing.git_ignored(files))
        assert not undeclared, f"{spec.name} reads {named}, but its input hash leaves out {undeclared[:3]}"


@pytest.mark.parametrize("spec", NOTEBOOKS, ids=lambda s: s.name)
def test_one_changed_byte_in_each_declared_input_makes_the_notebook_stale(spec, tmp_path):
    """On a copy of the notebook's declared files (the committed ones are never touched): the copy hashes as the
    repository does, and one changed byte in any declared folder changes the hash."""
    for path in hashing.data_files(spec):
        (tmp_path / path.relative_to(REPO_ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, tmp_path / path.relative_to(REPO_ROOT))
    before = hashing.data_hash(spec, tmp_path)
    assert before == hashing.data_hash(spec) == hashing.input_hashes(spec, {})["data"]
    for pattern in spec.data_files:
        matched = sorted(p for p in tmp_path.glob(pattern) if p.is_file())
        assert matched, f"{spec.name}: {pattern} matches no committed file"
        victim = min(matched, key=lambda p: (p.stat().st_size, p))
        original = victim.read_bytes()
        victim.write_bytes(original[:-1] + bytes([original[-1] ^ 1]) if original else b"x")
        assert hashing.data_hash(spec, tmp_path) != before, (spec.name, pattern, victim)
        victim.write_bytes(original)
    assert hashing.data_hash(spec, tmp_path) == before
