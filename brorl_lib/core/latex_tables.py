"""A table as LaTeX a paper takes: every text escaped, Unicode math set in math mode, and a layout that fits a
6.5-in text width, or the table marked as a data table.

The rule (``layout``): the first of these that fits a 6.5-in text is written, as a ``table`` float with a booktabs
``tabular`` (numbers right-aligned):

1. at the document's type size, as it is;
2. with headers broken into lines at spaces and after ``_`` (``prompts_per_step`` over three lines), each about as
   wide as its column's widest cell;
3. 1 or 2 in ``\\small`` with ``\\tabcolsep`` at ``SMALL_TABCOLSEP_PT`` (9-pt type in a 10-pt article; our choice:
   the smallest a table is usually set in, and no further).

In each, a table with prose columns (text columns wider than ``PROSE_MIN_PT``: a claim, a verdict, a caveat) that
is too wide as it is gets them wrapped: a ``tabularx`` of ``\\linewidth`` whose prose columns share the width the
others leave (they adapt to the document's own text width).

Otherwise, for any table of more than ``FLOAT_MAX_ROWS`` rows, and for one whose wrapped prose would be taller
than a page (a float cannot break across pages), it is a **data table**: first line ``DATA_TABLE_MARK`` with its
size, a ``longtable`` (it breaks across pages and repeats its header) at the document's type size and its width
with broken headers (prose wrapped in columns as wide as a float would give them). It is the full record, for an
appendix or a supplement in one-column layout (longtable's own limit), and may be wider than the text: no
``\\resizebox`` or smaller type, which would set a 19-column table in 4-pt type. What to show of it is the
author's choice (a subset of columns, landscape); the CSV beside it holds the same numbers.

Widths are estimated from Computer Modern's character widths at 10 pt (the article class's default; ``cmr10`` and
``cmr9`` measured with pdflatex), 2% above. ``tests/latex_check.py`` typesets every table with pdflatex and checks
that it compiles and that a table not marked as a data table fits.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Sequence

TEXT_WIDTH_PT = 6.5 * 72.27  # a 6.5-in text (US letter, 1-in margins), in TeX points
TEXT_HEIGHT_PT = 9.0 * 72.27
LINE_PT = 12.0  # the article class's baseline skip at 10 pt
CAPTION_PT = 8 * LINE_PT  # room kept on a float's page for its caption, header and rules (our choice)
FLOAT_MAX_ROWS = 40  # at most this many body rows in a float: more need more than a page at 10 pt (our choice)
PROSE_MIN_PT = 100.0  # a text column whose widest cell is wider than this may wrap (our choice, about 1.4 in)
WRAP_MIN_PT = 72.0  # a wrapped column is at least 1 in wide (our choice)
HEADER_MIN_PT = 25.0  # a header broken into lines is given at least this width (our choice: a 5-digit number)
TABCOLSEP_PT = 6.0  # LaTeX's default space either side of a column
SMALL_TABCOLSEP_PT = 4.0
SMALL_SCALE = 0.925  # \small (cmr9) widths over cmr10 widths, measured
DATA_TABLE_MARK = "% data table"
LATEX_PACKAGES = ("booktabs", "tabularx", "longtable")  # every package a written table may need
_SLACK = 1.02  # estimates are raised by 2% (kerning and ligatures are not modelled)

# Widths in pt of the printable ASCII characters (32 to 126) in cmr10 as this module escapes them, measured with
# pdflatex (``\setbox0\hbox{...}\the\wd0``).
_ASCII_WIDTHS = (
    "3.33 2.78 5 8.33 5 8.33 7.78 2.78 3.89 3.89 5 7.78 2.78 3.33 2.78 5 5 5 5 5 5 5 5 5 5 5 2.78 2.78 7.78 7.78 "
    "7.78 4.72 7.78 7.5 7.08 7.22 7.64 6.81 6.53 7.85 7.5 3.61 5.14 7.78 6.25 9.17 7.5 7.78 6.81 7.78 7.36 5.56 "
    "7.22 7.5 7.5 10.28 7.5 7.5 6.11 2.78 5 2.78 5 3.6 2.78 5 5.56 4.44 5.56 4.44 3.06 5 5.56 2.78 3.06 5.28 2.78 "
    "8.33 5.56 5 5.56 5.28 3.92 3.94 3.89 5.56 5.28 7.22 5.28 5.28 4.44 5 2.78 5 5"
)
_WIDTH = {chr(32 + i): float(w) for i, w in enumerate(_ASCII_WIDTHS.split())}
_OTHER_WIDTH_PT = 10.0  # any other character: the widest math symbol (an arrow)

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"$<$",  # OT1, LaTeX's default font encoding, has no < > | in text
    ">": r"$>$",
    "|": r"\textbar{}",
    "\n": " ",
}
# Unicode that is math or typography, in forms pdflatex sets in any preamble (no package needed)
_MATH = {
    "Δ": r"\Delta", "Σ": r"\Sigma", "Ω": r"\Omega", "Φ": r"\Phi", "Γ": r"\Gamma", "Λ": r"\Lambda", "Π": r"\Pi",
    "Θ": r"\Theta", "Ψ": r"\Psi", "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta",
    "ε": r"\varepsilon", "η": r"\eta", "θ": r"\theta", "κ": r"\kappa", "λ": r"\lambda", "μ": r"\mu", "µ": r"\mu",
    "ν": r"\nu", "π": r"\pi", "ρ": r"\rho", "σ": r"\sigma", "τ": r"\tau", "φ": r"\phi", "χ": r"\chi",
    "ψ": r"\psi", "ω": r"\omega", "≤": r"\leq", "≥": r"\geq", "≈": r"\approx", "≠": r"\neq", "≡": r"\equiv",
    "∼": r"\sim", "×": r"\times", "±": r"\pm", "∓": r"\mp", "−": "-", "·": r"\cdot", "÷": r"\div",
    "→": r"\rightarrow", "←": r"\leftarrow", "↔": r"\leftrightarrow", "⇒": r"\Rightarrow", "∈": r"\in",
    "∉": r"\notin", "⊂": r"\subset", "∪": r"\cup", "∩": r"\cap", "∞": r"\infty", "∇": r"\nabla",
    "∂": r"\partial", "∑": r"\sum", "∏": r"\prod", "√": r"\surd", "∝": r"\propto", "°": r"^\circ",
    "²": "^{2}", "³": "^{3}", "¹": "^{1}", "½": r"\frac{1}{2}", "′": r"'", "⁻": "^{-}",
}  # fmt: skip
_TEXT = {
    "–": "--", "—": "---", "…": r"\ldots{}", "§": r"\S{}", "¶": r"\P{}", "‘": "`", "’": "'", "“": "``",
    "”": "''", "\u00a0": "~", "\u2009": r"\,", "\u202f": r"\,", "•": r"\textbullet{}", "†": r"\dag{}",
    "‡": r"\ddag{}", "©": r"\copyright{}",
}  # fmt: skip
_BREAK_AFTER = re.compile(r"(\\_|/|\.(?=[A-Za-z]))")  # where a wrapped identifier or path may break


def latex_text(text: str, *, breakable: bool = False) -> str:
    """``text`` as LaTeX source for pdflatex with no package: the special characters escaped, Unicode math in math
    mode (runs of it in one ``$...$``), accented Latin letters left to pdflatex's UTF-8 input; ``breakable``: a line
    may break after ``_``, ``/`` and a ``.`` before a letter (identifiers and paths in a wrapped column).
    ``ValueError`` names a character with no LaTeX form here."""
    out: list[str] = []
    math: list[str] = []
    for ch in str(text):
        if ch in _MATH:
            math.append(_MATH[ch] + (" " if _MATH[ch][-1].isalpha() else ""))
            continue
        if math:
            out.append("$" + "".join(math).rstrip() + "$")
            math = []
        if ch in _SPECIAL:
            out.append(_SPECIAL[ch])
        elif ch in _TEXT:
            out.append(_TEXT[ch])
        elif ch.isascii() or unicodedata.category(ch).startswith("L") and ord(ch) < 0x250:
            out.append(ch)  # ASCII, or a Latin letter (é, ë, ß): pdflatex's default UTF-8 input sets it
        else:
            raise ValueError(f"latex_text: {ch!r} ({unicodedata.name(ch, 'unnamed')}) has no LaTeX form; add it")
    if math:
        out.append("$" + "".join(math).rstrip() + "$")
    source = "".join(out)
    return _BREAK_AFTER.sub(r"\1\\allowbreak{}", source) if breakable else source


def text_width_pt(text: str) -> float:
    """The estimated width in pt of ``text`` set on one line in cmr10 (see the module's note)."""
    return sum(_WIDTH.get(ch, _OTHER_WIDTH_PT) for ch in str(text)) * _SLACK


def _longest_piece_pt(text: str) -> float:
    """The width of the widest piece of ``text`` a wrapped line cannot break (a word; identifiers break at _ / .)."""
    pieces = re.split(r"\s+|(?<=[_/])|(?<=\.)(?=[A-Za-z])", str(text))
    return max((text_width_pt(p) for p in pieces if p), default=0.0)


def _header_lines(header: str, width_pt: float) -> list[str]:
    """``header`` broken into lines no wider than ``width_pt`` where it can break (spaces, after ``_``), greedily;
    a piece wider than ``width_pt`` stands on its own line."""
    pieces = []  # (glue before it, piece)
    for i, word in enumerate(str(header).split()):
        for k, piece in enumerate(re.findall(r"[^_]*_|[^_]+", word)):
            pieces.append((" " if i and not k else "", piece))
    lines: list[str] = []
    for glue, piece in pieces:
        if lines and text_width_pt(lines[-1] + glue + piece) <= width_pt:
            lines[-1] += glue + piece
        else:
            lines.append(piece)
    return lines or [""]


def layout(cells: Sequence[Sequence[str]], header: Sequence[str], numeric: Sequence[bool]) -> dict:
    """How a table of ``cells`` (rows of shown strings) is written: ``{"kind": "float" | "data", "small": bool,
    "stack": bool (headers broken into lines as wide as their column's cells), "wrap": [column indices],
    "wrap_pt": their width, "width_pt": the width at 10 pt, as written for a data table}``, by the rule in the
    module's docstring."""
    n = len(header)
    cell_w = [max((text_width_pt(r[j]) for r in cells), default=0.0) for j in range(n)]
    head_w = [text_width_pt(h) for h in header]
    target = [max(w, HEADER_MIN_PT) for w in cell_w]
    stacked_w = [max(target[j], *map(text_width_pt, _header_lines(header[j], target[j]))) for j in range(n)]
    prose = [j for j in range(n) if not numeric[j] and max(cell_w[j], head_w[j]) > PROSE_MIN_PT]
    pieces = [max(_longest_piece_pt(v) for v in (header[j], *(r[j] for r in cells))) for j in range(n)]
    natural = sum(map(max, cell_w, head_w)) + 2 * TABCOLSEP_PT * n
    data = {"kind": "data", "small": False, "stack": True, "wrap": [], "wrap_pt": 0.0}
    for small, stack in ((False, False), (False, True), (True, False), (True, True)):
        scale, sep = (SMALL_SCALE, SMALL_TABCOLSEP_PT) if small else (1.0, TABCOLSEP_PT)
        widths = stacked_w if stack else list(map(max, cell_w, head_w))
        how = {"kind": "float", "small": small, "stack": stack, "wrap": [], "wrap_pt": 0.0, "width_pt": natural}
        if sum(widths) * scale + 2 * sep * n <= TEXT_WIDTH_PT:
            if len(cells) <= FLOAT_MAX_ROWS:
                return how
            break
        if prose:
            rest = sum(widths[j] for j in range(n) if j not in prose) * scale + 2 * sep * n
            share = (TEXT_WIDTH_PT - rest) / len(prose)  # tabularx gives its X columns equal widths
            if share >= max(WRAP_MIN_PT, *(pieces[j] * scale for j in prose)):
                lines = [max([1, *(math.ceil(text_width_pt(r[j]) * scale / share) for j in prose)]) for r in cells]
                if len(cells) <= FLOAT_MAX_ROWS and sum(lines) * LINE_PT * scale <= TEXT_HEIGHT_PT - CAPTION_PT:
                    return how | {"wrap": prose, "wrap_pt": share}
                if not data["wrap"]:  # too tall for a float: a data table with these columns wrapped
                    data |= {"stack": stack, "wrap": prose, "wrap_pt": share}
    kept = [w for j, w in enumerate(stacked_w if data["stack"] else map(max, cell_w, head_w)) if j not in data["wrap"]]
    return data | {"width_pt": sum(kept) + data["wrap_pt"] * len(data["wrap"]) + 2 * TABCOLSEP_PT * n}


def _cell(value: str, *, breakable: bool) -> str:
    """A body cell: a missing value's dash ("-", ``table_files.MISSING``) set as an en dash, as tables set it."""
    return "--" if value == "-" else latex_text(value, breakable=breakable)


def _row(values: Sequence[str]) -> str:
    # a cell opening with "[" after the previous row's \\ would be read as its optional argument
    return " & ".join("{}" + v if v.startswith("[") else v for v in values) + r" \\"


def _head(header: str, width_pt: float, align: str, *, stack: bool, breakable: bool) -> str:
    lines = _header_lines(header, width_pt) if stack and not breakable else [header]
    if len(lines) == 1:
        return latex_text(header, breakable=breakable)
    inner = r" \\ ".join(latex_text(line) for line in lines)
    return rf"\begin{{tabular}}[b]{{@{{}}{align}@{{}}}}{inner}\end{{tabular}}"


def to_latex(
    cells: Sequence[Sequence[str]], header: Sequence[str], numeric: Sequence[bool], *, caption: str, label: str
) -> str:
    """The LaTeX of one table: ``cells`` (rows of shown strings) under ``header``, numeric columns right-aligned,
    written as ``layout`` decides; the packages it needs named in a comment on its first lines."""
    how = layout(cells, header, numeric)
    wrap = set(how["wrap"])
    align = ["r" if numeric[j] else "l" for j in range(len(header))]
    target = [max(max((text_width_pt(r[j]) for r in cells), default=0.0), HEADER_MIN_PT) for j in range(len(header))]
    head = _row([_head(h, target[j], align[j], stack=how["stack"], breakable=j in wrap) for j, h in enumerate(header)])
    body = [_row([_cell(v, breakable=j in wrap) for j, v in enumerate(r)]) for r in cells]
    wrapped = r">{\raggedright\arraybackslash}" + ("X" if how["kind"] == "float" else f"p{{{how['wrap_pt']:.0f}pt}}")
    spec = "".join(wrapped if j in wrap else align[j] for j in range(len(header)))
    caption_tex, label_tex = latex_text(caption), f"\\label{{{label}}}"
    if how["kind"] == "data":
        rows = f"{len(cells)} row" + ("" if len(cells) == 1 else "s")
        size = f"{len(header)} columns, {rows}, about {how['width_pt'] / 72.27:.1f} in wide at 10 pt"
        lines = [
            f"{DATA_TABLE_MARK} ({size}): a longtable, which breaks across pages, for an appendix in one-column layout",
            r"% needs \usepackage{booktabs,longtable}",
            rf"\begin{{longtable}}{{{spec}}}",
            rf"\caption{{{caption_tex}}}{label_tex} \\",
            r"\toprule",
            head,
            r"\midrule",
            r"\endfirsthead",
            r"\toprule",
            head,
            r"\midrule",
            r"\endhead",
            *body,
            r"\bottomrule",
            r"\end{longtable}",
        ]
        return "\n".join(lines) + "\n"
    env = ("tabularx", r"{\linewidth}") if wrap else ("tabular", "")  # a float's wrapped columns take what is left
    lines = [
        r"% needs \usepackage{booktabs" + (",tabularx" if wrap else "") + "}",
        r"\begin{table}",
        r"\centering",
        *([rf"\small\setlength{{\tabcolsep}}{{{SMALL_TABCOLSEP_PT:g}pt}}"] if how["small"] else []),
        rf"\caption{{{caption_tex}}}",
        label_tex,
        rf"\begin{{{env[0]}}}{env[1]}{{{spec}}}",
        r"\toprule",
        head,
        r"\midrule",
        *body,
        r"\bottomrule",
        rf"\end{{{env[0]}}}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"
