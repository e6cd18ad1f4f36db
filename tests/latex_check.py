"""The LaTeX check: every table ``save_table`` writes, typeset by pdflatex as a researcher would paste it into a paper.

``check_table(path)`` wraps one ``.tex`` in a minimal article (the packages ``latex_tables.LATEX_PACKAGES``
names, a text ``TEXT_WIDTH_IN`` by ``TEXT_HEIGHT_IN`` inches, nothing else), runs pdflatex on it and lists, in
words, what is wrong:

- it does not compile (the first error of pdflatex's log), or a glyph is missing from the font;
- for a table not marked as a data table (``latex_tables.DATA_TABLE_MARK`` on its first line): the table is
  wider than the text (an overfull box in the log; LaTeX's own tolerance, ``\\hfuzz``, 0.1 pt), or taller than
  a page (a float too large for it).

``python tests/latex_check.py FOLDER ...`` checks every ``.tex`` in the folders (e.g. ``figures/``, or the
output folder of a scratch run: ``python -m brorl_lib run 03_paper_tables --out /tmp/t``) and prints a line per
table with findings and a count; its exit status is 1 when any table has findings.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from brorl_lib.core.latex_tables import DATA_TABLE_MARK, LATEX_PACKAGES

TEXT_WIDTH_IN = 6.5  # a US-letter article with 1-in margins (our choice: the usual single-column text width)
TEXT_HEIGHT_IN = 9.0
PDFLATEX_TIMEOUT_S = 120  # a hang, not a slow run (one table compiles in about a second)

_DOCUMENT = r"""\documentclass{article}
%(packages)s
\setlength{\textwidth}{%(width)sin}
\setlength{\textheight}{%(height)sin}
\setlength{\hsize}{\textwidth}
\setlength{\linewidth}{\textwidth}
\begin{document}
\input{%(table)s}
\end{document}
"""


def pdflatex() -> str | None:
    """The pdflatex executable, or None."""
    return shutil.which("pdflatex")


def is_data_table(tex: str) -> bool:
    """Whether the table is marked as a data table (its first line)."""
    return tex.startswith(DATA_TABLE_MARK)


def check_table(path: Path) -> list[str]:
    """The findings for one ``.tex`` table file (empty: it compiles and, unless a data table, fits)."""
    tex = path.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        shutil.copyfile(path, work / "table.tex")
        packages = "\n".join(f"\\usepackage{{{p}}}" for p in LATEX_PACKAGES)
        (work / "doc.tex").write_text(
            _DOCUMENT % {"packages": packages, "width": TEXT_WIDTH_IN, "height": TEXT_HEIGHT_IN, "table": "table"},
            encoding="utf-8",
        )
        done = subprocess.run(
            [pdflatex() or "pdflatex", "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
            cwd=work,
            capture_output=True,
            timeout=PDFLATEX_TIMEOUT_S,
        )
        log_file = work / "doc.log"
        log = (log_file.read_bytes() if log_file.exists() else done.stdout).decode("utf-8", "replace")
    found = []
    if done.returncode != 0:
        error = next((line for line in log.splitlines() if line.startswith("!")), "no error line in the log")
        found.append(f"does not compile: {error}")
    found += sorted({f"missing glyph: {m}" for m in re.findall(r"Missing character: There is no (.+?)!", log)})
    if done.returncode == 0 and not is_data_table(tex):
        over = re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)
        if over:
            found.append(f"wider than a {TEXT_WIDTH_IN}-in text by {max(map(float, over)):.1f} pt")
        if "Float too large for page" in log:
            found.append(f"taller than a {TEXT_HEIGHT_IN}-in text: a float cannot break across pages")
    return found


def check_folder(folder: Path) -> dict[str, list[str]]:
    """{file name: findings} for every ``.tex`` in ``folder``."""
    return {p.name: check_table(p) for p in sorted(Path(folder).glob("*.tex"))}


def main(argv: list[str]) -> int:
    if pdflatex() is None:
        print("pdflatex not found: install the Debian package texlive-latex-recommended (`make tex-deps`)")
        return 2
    bad = total = 0
    for folder in argv:
        for name, found in check_folder(Path(folder)).items():
            total += 1
            if found:
                bad += 1
                print(f"{folder}/{name}: " + "; ".join(found))
    print(f"{total - bad} of {total} tables compile and fit (or are marked data tables)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
