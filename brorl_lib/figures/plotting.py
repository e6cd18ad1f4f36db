"""``new_figure`` (``plt.subplots`` a column or the text wide in the style in force, constrained layout) and
``save_figure`` (PDF + PNG [+ SVG] + CSV, byte-stable). Nothing re-flows or regrows a figure after its function
returns: each writes its own line breaks, legends and arrangement for the presets (``panels_across``); the check
is the tests' (tests/layout_check.py, every figure in every preset under ``make nbval``)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

import matplotlib as mpl
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.layout_engine import ConstrainedLayoutEngine

from brorl_lib.core import atomic
from brorl_lib.core.artifacts import Saved, check_artifact, record_artifact, stamp_text
from brorl_lib.core.paths import output_dir
from brorl_lib.core.precision import rounded
from brorl_lib.figures import styles

GOLDEN = 0.618
PANEL_EM = 16.0  # a panel at least 16 ems of the style's type wide: room for tick labels, a label, a title (ours)
STAMP_PT = 6.0  # the stamp's type size in the paper style
LAYOUT_CHECK_ENV = "BRORL_LAYOUT_CHECK"  # a module whose check(...) every saved figure goes through (make nbval)
_STAMP_GID = "brorl-provenance"


def _inline_at_print_resolution() -> None:  # in a Jupyter kernel, inline PNGs at twice figure.dpi (220 dpi)
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is not None and "inline" in mpl.get_backend():
        set_matplotlib_formats("retina")


_inline_at_print_resolution()


def pt(size: float) -> float:
    """A size in points written for the paper style (a legend at 6 pt), in the style in force."""
    scale = styles.active().scale
    return size if scale == 1.0 else round(size * scale, 2)


style_of = styles.drawn_in  # the style a figure was drawn in


def panels_across(width: str = "full", panel_em: float = PANEL_EM) -> int:
    """How many panels of at least ``panel_em`` ems of its type side by side ``width`` of the style in force holds:
    what a figure function asks before it chooses its arrangement."""
    style = styles.active()
    return max(1, int(style.width(width) / (panel_em * style.font_pt / 72) + 1e-9))


def height(width: str, aspect: float) -> float:
    """Inches high for a figure designed ``aspect`` times as high as wide in the paper style: the same height in
    ems of the style's type, at most the medium's height."""
    style = styles.active()
    return min(styles.PAPER.width(width) * aspect * style.scale, style.height_in)


def new_figure(
    width: str = "column",
    aspect: float = GOLDEN,
    nrows: int = 1,
    ncols: int = 1,
    height_in: float | None = None,
    **kwargs,
):
    """``plt.subplots`` ``width`` (``"column"`` or ``"full"``) of the style in force wide and ``height(width,
    aspect)`` high (or ``height_in``, a height the function chose for the style), in constrained layout."""
    style = styles.active()
    styles.apply(style)
    kwargs.setdefault("layout", "constrained")
    size = (style.width(width), height_in or height(width, aspect))
    fig, axes = plt.subplots(nrows, ncols, figsize=size, **kwargs)
    styles.DRAWN_IN[fig] = style
    return fig, axes


def new_canvas(width: str, height_in: float, **kwargs) -> mpl.figure.Figure:
    """An empty figure ``width`` of the style in force wide and ``height_in`` high, for a layout a function
    builds itself (``fig.add_gridspec``)."""
    style = styles.active()
    styles.apply(style)
    kwargs.setdefault("layout", "constrained")
    fig = plt.figure(figsize=(style.width(width), height_in), **kwargs)
    styles.DRAWN_IN[fig] = style
    return fig


def stamps_shown() -> bool:  # the provenance stamp in the image (BRORL_FIGURE_STAMP, default yes)
    return os.environ.get(styles.STAMP_ENV, "1").strip().lower() not in ("0", "no", "false", "off")


def stamp_provenance(fig: mpl.figure.Figure, provenance: str, changed: dict | None = None, basis: str = "") -> None:
    """Write the provenance class (and a variant's changed parameters) in the bottom-right corner, in a strip
    the constrained layout keeps free, replacing an earlier stamp; none when ``stamps_shown`` is off."""
    for t in [t for t in fig.texts if t.get_gid() == _STAMP_GID]:
        t.remove()
    engine = fig.get_layout_engine()
    strip = 0.0
    if stamps_shown():
        size = STAMP_PT * style_of(fig).scale
        strip = 1.5 * size / (fig.get_size_inches()[1] * 72)  # the stamp's line, as a fraction of the height
        text = f"[{stamp_text(provenance, changed, basis)}]"
        fig.text(0.995, 0.2 * strip, text, ha="right", va="bottom", fontsize=size, color="0.35", gid=_STAMP_GID)
    if isinstance(engine, ConstrainedLayoutEngine):
        engine.set(rect=(0, strip, 1, 1 - strip))


def layout_check() -> Callable | None:
    """The layout check the run asks for (``BRORL_LAYOUT_CHECK``: a module with ``check(fig, name, provenance,
    changed, basis)``, e.g. ``layout_check`` of tests/ under ``make nbval``), or None."""
    module = os.environ.get(LAYOUT_CHECK_ENV, "").strip()
    if not module:
        return None
    try:
        return importlib.import_module(module).check
    except (ImportError, AttributeError) as err:
        raise ValueError(
            f"{LAYOUT_CHECK_ENV}={module!r}: expected the name of an importable module with a check function, "
            f"e.g. layout_check with tests/ on PYTHONPATH, as make nbval sets it, or unset ({err})"
        ) from None


# --- writing ---
def _metadata(fmt: str, style: styles.FigureStyle, extra: dict | None = None) -> dict:
    """Fixed metadata (no dates: the same figure gives the same bytes); a styled file records its style."""
    styled, extra = not style.is_default, dict(extra or {})
    tool = f"brorl_lib; style {style.label}" if styled else "brorl_lib"
    if fmt == "pdf":
        return {"CreationDate": None, "ModDate": None, "Creator": tool, **extra}
    if fmt == "png":
        return {"Software": tool if styled else None, **extra}
    return {"Date": None, "Creator": tool, **{k: v for k, v in extra.items() if k in ("Description", "Keywords")}}


def write_figure(fig: mpl.figure.Figure, stem, formats: tuple[str, ...], extra: dict | None = None) -> list:
    """Write ``stem``.FORMAT for each format (atomic, fixed metadata, in the figure's own style's rcParams)."""
    style = style_of(fig)
    files = []
    rc = {**style.rc, "svg.hashsalt": "brorl_lib"}  # a fixed salt: SVG ids are the same on every run
    for fmt in formats:
        path = stem.parent / f"{stem.name}.{fmt}"
        meta = _metadata(fmt, style, (extra or {}).get(fmt))
        with mpl.rc_context(rc):
            atomic.write_with(path, lambda t, fmt=fmt, meta=meta: fig.savefig(t, format=fmt, metadata=meta))
        files.append(path)
    return files


def save_figure(
    fig: mpl.figure.Figure,
    name: str,
    *,
    provenance: str,
    data: pd.DataFrame,
    caption: str,
    basis: str = "",
    depends_on: tuple[str, ...] | None = None,
    beyond: dict[str, str] | None = None,
) -> Saved:
    """Write ``name``.pdf/.png (.svg when asked) with fixed metadata and the data as ``name``.csv (rounded by
    ``core.precision.rounded``), the provenance class stamped (``variant`` with the changed parameters,
    ``core.variants``; ``depends_on``: the only parameters it depends on; ``beyond``: settings it changes from the
    paper's experiment by design) and recorded for the manifest."""
    from brorl_lib.core import variants

    check_artifact(name, provenance, basis)
    provenance, changed = variants.classify(provenance, depends_on=depends_on, beyond=beyond)
    stamp_provenance(fig, provenance, changed, basis)
    check = layout_check()
    if check is not None:
        check(fig, name, provenance, changed, basis)
    style = style_of(fig)
    out = output_dir()
    said = stamp_text(provenance, changed, basis)
    meta = {"pdf": {"Subject": said}, "png": {"Description": said}, "svg": {"Description": said}}
    files = write_figure(fig, out / name, styles.formats(), meta)
    csv = out / f"{name}.csv"
    atomic.write_text(csv, rounded(data).to_csv(index=False, lineterminator="\n"))
    drawn_in = None if style.is_default else style
    return record_artifact(name, [*files, csv], provenance, caption, changed=changed, basis=basis, style=drawn_in)
