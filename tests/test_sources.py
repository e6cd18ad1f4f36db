"""Every source the repository cites can be followed, and the paper's numbers come only from data/paper/."""

import ast
import csv
import io
import json
import math
import os
import re
import shutil
import tokenize
from pathlib import Path

import pytest

from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.facts import reported as paper

SKIP_DIRS = {
    ".git",
    ".venv",
    ".venv-vllm",
    "build",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".hypothesis",
    ".ipynb_checkpoints",
}
BINARY_SUFFIXES = {".png", ".pdf", ".jpg", ".jpeg", ".parquet", ".pt", ".bin", ".safetensors", ".gz", ".zip"}
# Documents outside this repository that files must not cite (split so that this file does not name them).
OUTSIDE_NOTES = ("paper" + "-notes", "verl" + "-notes")
DOCS_PATH = re.compile(r"(?<![\w-])docs/([\w./-]+?\.md)(?:#([\w-]+))?")  # docs/<page>.md[#anchor], anywhere
MD_LINK = re.compile(r"\]\(((?!https?:)[\w./-]+?\.md)(?:#([\w-]+))?\)")  # [text](relative.md[#anchor])
SCANNED = ("brorl_lib", "benchmarks", "notebooks")
# Reported numbers that are also ordinary constants elsewhere: a top-p, a plot range.
COMMON = {0.95, 3000.0}


def repository_text_files() -> list[Path]:
    files = []
    for root, dirs, names in os.walk(REPO_ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        files += [Path(root) / n for n in names if Path(n).suffix.lower() not in BINARY_SUFFIXES]
    return sorted(files)


def read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


def markdown_anchors(page: Path) -> set[str]:
    """GitHub's anchors of a Markdown page's headings: lower case, punctuation dropped, spaces as '-'."""
    anchors, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        fenced ^= line.startswith("```")
        heading = re.match(r"#{1,6} (.+)", line)
        if heading and not fenced:
            anchors.add(re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-"))
    return anchors


def broken_reference(target: Path, anchor: str | None) -> str | None:
    if not target.is_file():
        return "no such file"
    if anchor and anchor not in markdown_anchors(target):
        return f"no heading with anchor #{anchor}"
    return None


def test_no_file_cites_notes_outside_the_repository():
    found = [
        f"{path.relative_to(REPO_ROOT)}: {name}"
        for path in repository_text_files()
        for name in OUTSIDE_NOTES
        if name in (read_text(path) or "")
    ]
    assert not found, found


def test_every_cited_docs_page_and_anchor_exists():
    cited, broken = 0, []
    for path in repository_text_files():
        text = read_text(path)
        if text is None:
            continue
        refs = [(REPO_ROOT / "docs" / m.group(1), m.group(2), m.group(0)) for m in DOCS_PATH.finditer(text)]
        if path.suffix in (".md", ".ipynb"):  # relative Markdown links, from the file's own folder
            refs += [(path.parent / m.group(1), m.group(2), m.group(0)) for m in MD_LINK.finditer(text)]
        for target, anchor, written in refs:
            cited += 1
            problem = broken_reference(target.resolve(), anchor)
            if problem:
                broken.append(f"{path.relative_to(REPO_ROOT)}: {written} ({problem})")
    assert not broken, broken
    assert cited > 20  # the code does cite its docs pages


def test_anchor_rule_matches_githubs():
    page = REPO_ROOT / "docs" / "simulator-choices.md"
    assert {"unstated-choices", "reading-figure-3s-axes"} <= markdown_anchors(page)
    assert broken_reference(page, "no-such-heading") == "no heading with anchor #no-such-heading"
    assert broken_reference(REPO_ROOT / "docs" / "missing.md", None) == "no such file"


def distinctive(text: str) -> bool:
    """A number as printed in data/paper that would not appear in code by chance: a fraction with two or
    more significant digits, or a whole number >= 1000 that is not a power of two or of ten."""
    value = abs(float(text))
    if value in COMMON:
        return False
    if value.is_integer():
        whole = int(value)
        return whole >= 1000 and whole & (whole - 1) != 0 and not math.log10(whole).is_integer()
    mantissa = re.sub(r"[eE].*$", "", text).lstrip("+-").replace(".", "").lstrip("0")
    return len(mantissa) >= 2


def paper_numbers() -> dict[float, str]:
    """Distinctive numbers of every data/paper CSV: value -> the file and text it comes from."""
    found = {}
    for path in sorted(paper.DATA_DIR.glob("*.csv")):
        for row in csv.reader(io.StringIO(path.read_text())):
            for cell in row:
                for text in cell.split():
                    try:
                        float(text.lstrip("+"))
                    except ValueError:
                        continue
                    if distinctive(text.lstrip("+")):
                        found.setdefault(abs(float(text)), f"{path.name}: {text}")
    return found


def python_sources() -> list[tuple[str, str]]:
    """(where, code) of every module in the scanned folders and every notebook code cell but the parameters
    cell (papermill needs its defaults as literals; each says where a paper value comes from)."""
    out = []
    for folder in SCANNED:
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            out.append((str(path.relative_to(REPO_ROOT)), path.read_text(encoding="utf-8")))
        for path in sorted((REPO_ROOT / folder).glob("*.ipynb")):
            for i, cell in enumerate(json.loads(path.read_text(encoding="utf-8"))["cells"]):
                tags = cell.get("metadata", {}).get("tags", [])
                if cell["cell_type"] == "code" and "parameters" not in tags and "injected-parameters" not in tags:
                    code = "".join(cell["source"])
                    code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in code.splitlines())
                    out.append((f"{path.relative_to(REPO_ROOT)} cell {i}", code))
    return out


def number_literals(code: str) -> list[tuple[int, str, float]]:
    """(line, text, value) of every real number literal in Python code (comments and strings are not literals)."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.NUMBER:
            value = ast.literal_eval(tok.string)
            if not isinstance(value, complex):
                found.append((tok.start[0], tok.string, abs(float(value))))
    return found


def test_distinctive_numbers_are_the_reported_ones():
    numbers = paper_numbers()
    for value in (72.4, 36.5, 61.69, 173.8, 4390.0, 0.0033, 6.5e-7, 4.84, 128000.0, 51200.0):
        assert value in numbers, value
    for value in (16.0, 512.0, 0.6, 0.95, 1e-3, 41.0, 140.0, 1000.0, 10000.0, 16384.0, 32768.0):
        assert value not in numbers, value
    assert number_literals("x = 72.4 / 36_5  # 173.8\ny = '61.69'") == [(1, "72.4", 72.4), (1, "36_5", 365.0)]


def test_paper_numbers_appear_only_in_data_paper():
    """Code and notebooks read the paper's numbers through brorl_lib.facts.reported, never as literals."""
    numbers = paper_numbers()
    hits = [
        f"{where} line {line}: {text} ({numbers[value]})"
        for where, code in python_sources()
        for line, text, value in number_literals(code)
        if value in numbers
    ]
    assert not hits, hits


def test_settings_are_read_with_their_types():
    settings = paper.settings()
    assert list(settings) == list(paper.SETTINGS)
    for name, value in settings.items():
        kind = paper.SETTINGS[name]
        assert (type(value), paper.setting(name)) == ({"int": int, "float": float, "ints": tuple}[kind], value)
    assert paper.setting("simulator_rollout_sizes") == tuple(sorted(paper.setting("simulator_rollout_sizes")))
    with pytest.raises(ValueError, match="unknown setting 'vocab'"):
        paper.setting("vocab")


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("simulator_steps,1000,", "simulator_steps,1e3,", r"simulator_steps='1e3' is not allowed: it must be a whole"),
        ("gpus,64,", "gpu_count,64,", r"missing settings \['gpus'\], unknown settings \['gpu_count'\]"),
        ("simulator_rollout_sizes,4 8 16 512 51200,", "simulator_rollout_sizes,,", "whole numbers separated by spaces"),
    ],
)
def test_a_broken_settings_file_is_refused(tmp_path, old, new, message):
    data = tmp_path / "paper"
    shutil.copytree(paper.DATA_DIR, data)
    settings = data / "settings.csv"
    assert old in settings.read_text()
    settings.write_text(settings.read_text().replace(old, new))
    with pytest.raises(ValueError, match=message):
        paper.settings(data)
    with pytest.raises(ValueError, match=r"\['settings.csv'\] differ from SHA256SUMS"):
        paper.verify_checksums(data)


def test_table_accessors():
    t1, t2 = paper.load("table1_efficiency"), paper.load("table2_efficiency")
    shapes = paper.arm_shapes()
    assert list(shapes) == ["ProRL", "BroRL"]
    for method, (n, prompts) in shapes.items():
        rows = t1[t1["method"] == method]
        assert (rows["n_rollouts"] == n).all() and (rows["prompts_per_step"] == prompts).all()
    assert str(paper.baseline_steps()) == t1.loc[t1["method"] == "Baseline", "steps"].item()
    rates = dict(zip(t2["n_rollouts"], t2["generation_throughput_samples_per_s"], strict=True))
    assert paper.table2_throughput() == rates
    assert paper.table2_throughput_ratio() == rates[max(rates)] / rates[min(rates)]
