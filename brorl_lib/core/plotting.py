"""One publication style for every figure, and ``save_figure`` (PDF + PNG + CSV, byte-stable).

Figure functions are wrapped in ``core.precision.rounded_inputs`` and ``save_figure`` writes the CSV from
``core.precision.rounded``: the figure and its CSV hold the same numbers, rounded far above last-bit noise.
"""

from __future__ import annotations

import matplotlib as mpl
import matplotlib.pyplot as plt
import pandas as pd

from brorl_lib.core import atomic
from brorl_lib.core.artifacts import Saved, check_artifact, record_artifact
from brorl_lib.core.paths import output_dir
from brorl_lib.core.precision import rounded

# Okabe & Ito (2008) colour-blind safe palette, black last.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
ARM_COLOURS = {"ProRL": PALETTE[1], "BroRL": PALETTE[0]}  # the two arms, the same in every figure
# Our choice: widths of a two-column paper (ICML/NeurIPS-style templates), inches.
COLUMN_WIDTH_IN = 3.25
FULL_WIDTH_IN = 6.75
GOLDEN = 0.618

STYLE = {
    "font.family": "DejaVu Sans",  # ships with matplotlib, so every machine renders the same glyphs
    "font.size": 8,
    "axes.titlesize": 8,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "lines.linewidth": 1.3,
    "legend.frameon": False,
    "axes.prop_cycle": mpl.cycler(color=PALETTE),
    "figure.dpi": 110,
    "savefig.dpi": 300,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.02,
    "pdf.fonttype": 42,  # TrueType: text stays editable in the PDF
    "image.cmap": "cividis",
}

_STAMP_GID = "brorl-provenance"
_PDF_METADATA = {"CreationDate": None, "ModDate": None, "Creator": "brorl_lib"}
_PNG_METADATA = {"Software": None}


def use_style() -> None:
    """Apply the companion's style to matplotlib (and seaborn, which reads the same rcParams)."""
    mpl.rcParams.update(STYLE)


def new_figure(width: str = "column", aspect: float = GOLDEN, nrows: int = 1, ncols: int = 1, **kwargs):
    """``plt.subplots`` sized for one column (``"column"``) or the full page width (``"full"``)."""
    if width not in ("column", "full"):
        raise ValueError(f"width={width!r} is not allowed: choose 'column' or 'full'")
    use_style()
    w = COLUMN_WIDTH_IN if width == "column" else FULL_WIDTH_IN
    kwargs.setdefault("layout", "constrained")
    return plt.subplots(nrows, ncols, figsize=(w, w * aspect), **kwargs)


def stamp_provenance(fig: mpl.figure.Figure, provenance: str) -> None:
    """Write the provenance class in the top-right corner (replacing an earlier stamp)."""
    for t in [t for t in fig.texts if t.get_gid() == _STAMP_GID]:
        t.remove()
    # just above the top edge: the tight bounding box grows to hold it, so it never covers a title
    fig.text(0.995, 1.0, f"[{provenance}]", ha="right", va="bottom", fontsize=6, color="0.35", gid=_STAMP_GID)


def save_figure(fig: mpl.figure.Figure, name: str, *, provenance: str, data: pd.DataFrame, caption: str) -> Saved:
    """Write ``name``.pdf/.png (fixed metadata: same data, same bytes) and the data as ``name``.csv, its floats
    rounded by ``core.precision.rounded`` (10 significant digits unless the frame declares otherwise).

    The provenance class is stamped on the figure and recorded with the caption for the manifest.
    """
    check_artifact(name, provenance)
    stamp_provenance(fig, provenance)
    out = output_dir()
    files = [out / f"{name}.pdf", out / f"{name}.png", out / f"{name}.csv"]
    atomic.write_with(files[0], lambda t: fig.savefig(t, format="pdf", metadata=_PDF_METADATA))
    atomic.write_with(files[1], lambda t: fig.savefig(t, format="png", metadata=_PNG_METADATA))
    atomic.write_text(files[2], rounded(data).to_csv(index=False, lineterminator="\n"))
    return record_artifact(name, files, provenance, caption)
