"""The README is a front page that answers in a minute (issue 61, DESIGN.md "Prose"): at most 1,200 words, at most
250 before its first command, no table cell a paragraph (over 40 words), no internal arm code (``N512_lr0.0078125x``)
in the results at a glance; the docs' reference tables are no paragraphs either and carry no run log (a commit)."""

import re

import pytest

from brorl_lib.book import readme
from brorl_lib.core.paths import REPO_ROOT

MAX_WORDS, MAX_BEFORE_COMMAND, MAX_CELL = 1200, 250, 40
ARM_CODE = re.compile(r"\bN\d+\\?_[a-z]+[\d.]")  # N512_lr0.0078125x, N16_batch512, N512_kl1; escaped: N512\_lr
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")  # 503e8aa, not 1,048,576 or "added"


def words(text: str) -> int:
    return len(text.split())


def cells(text: str) -> list[str]:
    """Every cell of every Markdown table in ``text`` (split at unescaped pipes)."""
    return [c.strip() for line in text.splitlines() if line.startswith("|")
            for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]  # fmt: skip


def test_cells_and_codes_are_found():
    table = "| a | b \\| c |\n|---|---|\n| " + "w " * 41 + "| N512_lr0.0078125x at 503e8aa |"
    assert [words(c) for c in cells(table)] == [1, 3, 1, 1, 41, 3]
    assert ARM_CODE.search(table) and ARM_CODE.search("N512\\_prompts128") and COMMIT.findall(table) == ["503e8aa"]
    assert not ARM_CODE.search("N=512, N = 16, N512 - N16") and not COMMIT.search("1,048,576 added 2e-4 deadbeef")


def readme_text() -> str:
    return readme.README.read_text(encoding="utf-8")


def test_the_readme_is_short_and_reaches_its_first_command_early():
    text = readme_text()
    assert words(text) <= MAX_WORDS, f"README.md has {words(text)} words, at most {MAX_WORDS}"
    before = words(text[: text.index("```")])
    assert before <= MAX_BEFORE_COMMAND, f"{before} words before the first command, at most {MAX_BEFORE_COMMAND}"
    assert "make reproduce" in text[text.index("```") :].split("```")[1]


@pytest.mark.parametrize("page", ["README.md", "docs/pipeline.md", "docs/notebooks.md"])
def test_no_table_cell_is_a_paragraph(page):
    long = [c[:60] for c in cells((REPO_ROOT / page).read_text(encoding="utf-8")) if words(c) > MAX_CELL]
    assert not long, f"{page}: table cells over {MAX_CELL} words: {long}"


def test_the_results_at_a_glance_carry_no_arm_code():
    text = readme_text()
    block = text[text.index(readme.START) : text.index(readme.END)]
    assert not ARM_CODE.findall(block), ARM_CODE.findall(block)


@pytest.mark.parametrize("page", sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "docs").glob("*.md")))
def test_no_docs_table_is_a_run_log(page):
    logged = [c[:60] for c in cells((REPO_ROOT / page).read_text(encoding="utf-8")) if COMMIT.search(c)]
    assert not logged, f"{page}: table cells citing a commit (history belongs in git log): {logged}"
