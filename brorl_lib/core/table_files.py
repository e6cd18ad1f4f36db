"""``save_table``: one table as Markdown, LaTeX and CSV, captioned with its provenance (a variant's changed
parameters, an estimate's basis); ``shown_table``: a frame as every rendering shows it (a notebook's display too)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from brorl_lib.core import atomic, variants
from brorl_lib.core.artifacts import Saved, check_artifact, class_text, record_artifact
from brorl_lib.core.latex_tables import to_latex
from brorl_lib.core.paths import output_dir
from brorl_lib.core.precision import rounded

MISSING = "-"  # what a missing value shows as, as the paper's tables show it
MISSING_NOTE = "a dash: no value (not reported, or not defined for its row)"  # the caption's note where one shows


def _is_missing(value) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # a list or array in a cell
        return False


def _readable(value: float) -> str:
    """4 significant digits; a large number written out with thousands' commas (15,971, not 1.597e+04)."""
    return f"{value:,.0f}" if 1e4 <= abs(value) < 1e15 else f"{value:.4g}"


def _whole(value: int) -> str:
    """An integer in full, from 10,000 up with thousands' commas (51,200)."""
    return f"{value:,}" if abs(value) >= 10_000 else str(value)


def shown_table(df: pd.DataFrame, float_format: str | None = None) -> pd.DataFrame:
    """``df`` as a table shows it: every float (in float columns and among other values) through ``float_format``
    (default ``_readable``), an integer in full with thousands' commas from 10,000 up, a missing value as
    ``MISSING``; other values as they are. For display only (``save_table`` shows its files' cells with it; a
    notebook shows ``display(shown_table(frame))``)."""
    fmt = float_format.format if float_format else _readable

    def one(value):
        if _is_missing(value):
            return MISSING
        if isinstance(value, float | np.floating):
            return fmt(value)
        return _whole(int(value)) if isinstance(value, int | np.integer) and not isinstance(value, bool) else value

    return df.apply(lambda col: col.map(one))


def save_table(
    df: pd.DataFrame,
    name: str,
    *,
    provenance: str,
    caption: str,
    float_format: str | None = None,
    basis: str = "",
    depends_on: tuple[str, ...] | None = None,
    beyond: dict[str, str] | None = None,
) -> Saved:
    """Write ``name``.md, ``name``.tex and ``name``.csv; the caption states the provenance class (``variant``
    with the changed parameters when the run's differ from its profile's: ``core.variants``; an ``estimate``
    with its ``basis``; ``depends_on`` and ``beyond`` as for ``figures.plotting.save_figure``).

    Floats are first rounded by ``core.precision.rounded`` (10 significant digits unless the frame declares
    otherwise; the paper's own numbers pass unchanged). Markdown and LaTeX show them with ``float_format``
    (default: 4 significant digits, thousands' commas from 10,000 up), integers in full and a missing value as "-"
    (as the paper does), the caption then saying what a dash means (``MISSING_NOTE``); the CSV holds the rounded
    values and empty cells. The LaTeX compiles with pdflatex and fits a 6.5-in text, or is marked as a data
    table (``core.latex_tables``).
    """
    check_artifact(name, provenance, basis)
    provenance, changed = variants.classify(provenance, depends_on=depends_on, beyond=beyond)
    df = rounded(df)
    cells = shown_table(df, float_format)
    note = f"; {MISSING_NOTE}" if df.map(_is_missing).to_numpy().any() else ""
    full_caption = f"{caption} [{class_text(provenance, changed, basis)}{note}]"
    out = output_dir()
    files = [out / f"{name}.md", out / f"{name}.tex", out / f"{name}.csv"]
    atomic.write_text(files[0], f"**{full_caption}**\n\n{cells.to_markdown(index=False, disable_numparse=True)}\n")
    numeric = [pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c]) for c in df.columns]
    rows = [[str(v) for v in row] for row in cells.itertuples(index=False, name=None)]
    latex = to_latex(rows, [str(c) for c in df.columns], numeric, caption=full_caption, label=f"tab:{name}")
    atomic.write_text(files[1], latex)
    atomic.write_text(files[2], df.to_csv(index=False, lineterminator="\n"))
    return record_artifact(name, files, provenance, caption, changed=changed, basis=basis)
