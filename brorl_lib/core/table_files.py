"""``save_table``: one table as Markdown, LaTeX and CSV, captioned with its provenance (a variant's changed
parameters, an estimate's basis)."""

from __future__ import annotations

import pandas as pd

from brorl_lib.core import atomic, variants
from brorl_lib.core.artifacts import Saved, check_artifact, class_text, record_artifact
from brorl_lib.core.paths import output_dir
from brorl_lib.core.precision import rounded


def save_table(
    df: pd.DataFrame, name: str, *, provenance: str, caption: str, float_format: str = "{:.4g}", basis: str = ""
) -> Saved:
    """Write ``name``.md, ``name``.tex and ``name``.csv; the caption states the provenance class (``variant``
    with the changed parameters when the run's differ from its profile's: ``core.variants``; an ``estimate``
    with its ``basis``).

    Floats are first rounded by ``core.precision.rounded`` (10 significant digits unless the frame declares
    otherwise; the paper's own numbers pass unchanged). Markdown and LaTeX show them with ``float_format``
    and a missing value as "-" (as the paper does); the CSV holds the rounded values and empty cells.
    """
    check_artifact(name, provenance, basis)
    provenance, changed = variants.classify(provenance)
    df = rounded(df)
    full_caption = f"{caption} [{class_text(provenance, changed, basis)}]"
    fmt = float_format.format
    shown = df.apply(
        lambda col: (
            col.map(lambda v: "-" if pd.isna(v) else fmt(v))
            if pd.api.types.is_float_dtype(col)
            else col.map(lambda v: "-" if pd.isna(v) else v)
        )
    )
    out = output_dir()
    files = [out / f"{name}.md", out / f"{name}.tex", out / f"{name}.csv"]
    atomic.write_text(files[0], f"**{full_caption}**\n\n{shown.to_markdown(index=False, disable_numparse=True)}\n")
    latex = shown.to_latex(index=False, caption=full_caption, label=f"tab:{name}", escape=True)
    atomic.write_text(files[1], latex)
    atomic.write_text(files[2], df.to_csv(index=False, lineterminator="\n"))
    return record_artifact(name, files, provenance, caption, changed=changed, basis=basis)
