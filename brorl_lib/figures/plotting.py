"""Figures in the style in force (``figures.styles``: the paper's unless a run asks for another), re-flowed to
fit its width, and ``save_figure`` (PDF + PNG [+ SVG] + CSV, byte-stable).

``new_figure`` sizes a grid of panels for one column or the full text width of the style in force. At the
paper's own size a figure is laid out exactly as its function asks; in another style a row of panels that
would be narrower than ``MIN_PANEL_EM`` of the style's type re-flows onto more rows (three panels become 2 + 1
or a stack), each panel keeping a readable height. Sizes a figure function writes itself go through ``pt``,
so they grow with the style's type. The canvas is the style's width, never wider: ``fit_texts`` breaks text
that would not fit onto more lines, and ``figures.layout`` moves legends and notes off the data. The check of the
result is the tests' (``BRORL_LAYOUT_CHECK`` names it: ``make nbval`` runs tests/layout_check.py on every figure).

Figure functions are wrapped in ``core.precision.rounded_inputs`` and ``save_figure`` writes the CSV from
``core.precision.rounded``: the figure and its CSV hold the same numbers, rounded far above last-bit noise.
"""

from __future__ import annotations

import importlib
import math
import os
import weakref
from collections.abc import Callable

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.layout_engine import ConstrainedLayoutEngine

from brorl_lib.core import atomic
from brorl_lib.core.artifacts import Saved, check_artifact, record_artifact, stamp_text
from brorl_lib.core.paths import output_dir
from brorl_lib.core.precision import rounded
from brorl_lib.figures import layout, styles
from brorl_lib.figures.styles import FigureStyle

GOLDEN = 0.618

# Re-flow (our choices): a panel at least 16 ems of the style's type wide (room for tick labels, a label and
# a short title), at least 10 ems tall, and once re-flowed no taller than 3/4 of its width.
MIN_PANEL_EM = 16.0
MIN_PANEL_HEIGHT_EM = 10.0
REFLOWED_RATIO = 0.75
MIN_AXES_EM = layout.MIN_AXES_EM
STAMP_PT = 6.0  # the stamp's type size in the paper style
LAYOUT_CHECK_ENV = "BRORL_LAYOUT_CHECK"  # a module whose check(...) every saved figure goes through (make nbval)

_STAMP_GID = "brorl-provenance"
_REFLOWED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # figure -> (axes as designed, columns now)


def _inline_at_print_resolution() -> None:
    """In a Jupyter kernel, inline figures as PNG at twice ``figure.dpi`` (220 dpi), shown at their size."""
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


def style_of(fig: mpl.figure.Figure) -> FigureStyle:
    """The style ``fig`` was drawn in (the style in force for a figure made elsewhere)."""
    return styles.drawn_in(fig)


def panel_columns(width: str, ncols: int, panel_em: float = MIN_PANEL_EM, style: FigureStyle | None = None) -> int:
    """How many of ``ncols`` panels side by side fit ``width`` of the style, each at least ``panel_em`` ems."""
    style = style or styles.active()
    if style.at_design_size(width):
        return ncols
    em_in = style.font_pt / 72
    return max(1, min(ncols, int(style.width(width) / (panel_em * em_in) + 1e-9)))


def reflow_grid(n: int, fit: int) -> tuple[int, int]:
    """(rows, columns) for ``n`` panels at most ``fit`` a row, as even as possible (4 in 3 columns: 2 + 2)."""
    rows = math.ceil(n / fit)
    return rows, math.ceil(n / rows)


def _sharing(share, i: int, ncols: int, axes: np.ndarray):
    """The axes panel ``i`` shares with under plt.subplots' ``sharex``/``sharey`` value (row-major order)."""
    if share in (True, "all"):
        return axes.flat[0] if i else None
    if share == "row":
        first = (i // ncols) * ncols
        return axes.flat[first] if i != first else None
    if share == "col":
        return axes.flat[i % ncols] if i >= ncols else None
    return None


def _reflowed(style, width, aspect, nrows, ncols, rows, cols, kwargs):
    """A figure with the ``nrows`` x ``ncols`` panels laid out ``rows`` x ``cols`` (a short last row centred);
    axes returned in the shape plt.subplots would give, labels never hidden by sharing."""
    w_in = style.width(width)
    em_in = style.font_pt / 72
    design_w = styles.PAPER.width(width)
    design_ratio = (design_w * aspect / nrows) / (design_w / ncols)  # a panel's height over its width, as designed
    panel_w = w_in / cols
    ratio = design_ratio if (rows, cols) == (nrows, ncols) else min(design_ratio, REFLOWED_RATIO)
    panel_h = max(panel_w * ratio, MIN_PANEL_HEIGHT_EM * em_in)
    sharex, sharey = kwargs.pop("sharex", False), kwargs.pop("sharey", False)
    squeeze = kwargs.pop("squeeze", True)
    subplot_kw = kwargs.pop("subplot_kw", None) or {}
    designed = dict(kwargs.pop("gridspec_kw", None) or {})  # its ratios hold only for the grid as designed
    same_grid = (rows, cols) == (nrows, ncols)
    fig = plt.figure(figsize=(w_in, rows * panel_h), **kwargs)
    outer = fig.add_gridspec(rows, 1, height_ratios=designed.get("height_ratios") if same_grid else None)
    n = nrows * ncols
    row_grids = []
    for r in range(rows):
        in_row = min(cols, n - r * cols)
        pad = (cols - in_row) / 2  # a short last row sits in the middle, its panels as wide as the others
        full_row = list(designed.get("width_ratios") or [1] * cols) if same_grid else [1] * cols
        ratios = full_row if not pad else [pad, *[1] * in_row, pad]
        row_grids.append((outer[r].subgridspec(1, len(ratios), width_ratios=ratios), 1 if pad else 0))
    axes = np.empty((nrows, ncols), dtype=object)
    for i in range(n):
        r, c = divmod(i, cols)
        grid, offset = row_grids[r]
        axes.flat[i] = fig.add_subplot(
            grid[0, c + offset],
            sharex=_sharing(sharex, i, ncols, axes),
            sharey=_sharing(sharey, i, ncols, axes),
            **subplot_kw,
        )
    if not same_grid:
        _REFLOWED[fig] = (axes.copy(), cols)
    if squeeze:
        axes = axes.squeeze()
        axes = axes.item() if axes.shape == () else axes
    return fig, axes


def new_figure(
    width: str = "column",
    aspect: float = GOLDEN,
    nrows: int = 1,
    ncols: int = 1,
    *,
    panel_em: float = MIN_PANEL_EM,
    **kwargs,
):
    """``plt.subplots`` sized for one column (``"column"``) or the full text width (``"full"``) of the style in
    force; ``aspect`` is the figure's height over its width as designed for the paper style.

    In another style, panels narrower than ``panel_em`` ems of its type re-flow onto more rows (the axes come
    back in the shape asked for, so ``axes[2]`` is still the third panel), and no panel is lower than
    ``MIN_PANEL_HEIGHT_EM`` ems."""
    style = styles.active()
    w_in = style.width(width)
    styles.apply(style)
    kwargs.setdefault("layout", "constrained")
    if style.at_design_size(width):
        fig, axes = plt.subplots(nrows, ncols, figsize=(w_in, w_in * aspect), **kwargs)
    else:
        fit = panel_columns(width, ncols, panel_em, style)
        rows, cols = reflow_grid(nrows * ncols, fit) if fit < ncols else (nrows, ncols)
        fig, axes = _reflowed(style, width, aspect, nrows, ncols, rows, cols, dict(kwargs))
    styles.DRAWN_IN[fig] = style
    return fig, axes


def new_canvas(width: str, height_in: float, **kwargs) -> mpl.figure.Figure:
    """An empty figure for a layout a function builds itself: ``width`` of the style in force, ``height_in`` as
    designed for the paper style, scaled with the width and never lower than ``MIN_PANEL_HEIGHT_EM`` ems."""
    style = styles.active()
    styles.apply(style)
    kwargs.setdefault("layout", "constrained")
    w_in = style.width(width)
    if style.at_design_size(width):
        fig = plt.figure(figsize=(w_in, height_in), **kwargs)
    else:
        h_in = max(height_in * w_in / styles.PAPER.width(width), MIN_PANEL_HEIGHT_EM * style.font_pt / 72)
        fig = plt.figure(figsize=(w_in, h_in), **kwargs)
    styles.DRAWN_IN[fig] = style
    return fig


def stamps_shown() -> bool:
    """Whether figures carry their provenance stamp in the image (``BRORL_FIGURE_STAMP``, default yes)."""
    return os.environ.get(styles.STAMP_ENV, "1").strip().lower() not in ("0", "no", "false", "off")


def stamp_provenance(fig: mpl.figure.Figure, provenance: str, changed: dict | None = None, basis: str = "") -> None:
    """Write the provenance class (and a variant's changed parameters) in the bottom-right corner, in a strip
    the constrained layout keeps free, replacing an earlier stamp; none when ``stamps_shown`` is off."""
    for t in [t for t in fig.texts if t.get_gid() == _STAMP_GID]:
        t.remove()
    engine = fig.get_layout_engine()
    if not stamps_shown():
        if isinstance(engine, ConstrainedLayoutEngine):
            engine.set(rect=(0, 0, 1, 1))
        setattr(fig, layout.BASE_BELOW_ATTR, 0.0)
        return
    size = STAMP_PT * style_of(fig).scale
    strip = 1.5 * size / (fig.get_size_inches()[1] * 72)  # the stamp's line, as a fraction of the height
    fig.text(
        0.995,
        0.2 * strip,
        f"[{stamp_text(provenance, changed, basis)}]",
        ha="right",
        va="bottom",
        fontsize=size,
        color="0.35",
        gid=_STAMP_GID,
    )
    if isinstance(engine, ConstrainedLayoutEngine):
        engine.set(rect=(0, strip, 1, 1 - strip))
        setattr(fig, layout.BASE_BELOW_ATTR, strip * fig.get_size_inches()[1])


def _wrapped(text: str, fits: Callable[[str], bool]) -> str:
    """One line of text broken at spaces (never inside ``$...$``) into as few lines as ``fits`` allows (greedy)."""
    words, current, in_math = [], "", False
    for part in text.split(" "):
        current = f"{current} {part}" if in_math else part
        in_math ^= part.count("$") % 2 == 1
        if not in_math:
            words.append(current)
    if in_math:
        words.append(current)
    if len(words) < 2:
        return text
    out, line = [], ""
    for word in words:
        if line and not fits(f"{line} {word}"):
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*out, line])


def _fit(text: mpl.text.Text, room: float, renderer) -> bool:
    """Break ``text`` onto more lines when it is wider than ``room`` (pixels); True when it changed."""
    prop = text.get_fontproperties()

    def width(line: str) -> float:
        return renderer.get_text_width_height_descent(line, prop, ismath="$" in line)[0]  # pixels

    old = text.get_text()
    if not old.strip():
        return False
    if getattr(text, "_brorl_written", None) != old:  # first look, or the figure's code set a new text since
        text._brorl_written = text._brorl_designed = old
    lines = text._brorl_designed.split("\n")  # always broken afresh from the text as written
    new = "\n".join(_wrapped(line, lambda part: width(part) <= room) for line in lines)
    text.set_text(new)
    text._brorl_written = new
    return new != old


def _title_room(text: mpl.text.Text, ax, shown: list, renderer, fig: mpl.figure.Figure) -> float:
    """Pixels a title may span: a centred one its panel's width; a left one up to the next panel to its right
    (its own colorbar sits below it) or the figure's edge."""
    box = text.get_window_extent(renderer)
    if text is not ax._left_title:
        return ax.get_window_extent(renderer).width
    right = fig.bbox.x1
    for other in shown:
        if other is ax or getattr(other, "_colorbar", None) is not None and other in ax.child_axes:
            continue
        tight = other.get_tightbbox(renderer)
        if tight is not None and tight.x0 > box.x0 + 1 and tight.y0 < box.y1 and tight.y1 > box.y0:
            right = min(right, tight.x0)
    return right - box.x0 - 2


def _grow(fig: mpl.figure.Figure, renderer) -> bool:
    """Make ``fig`` taller when a plotting area is lower than half its width or ``MIN_AXES_EM`` + 2 ems (titles
    and labels on more lines take room from it); True when it grew."""
    em_px = style_of(fig).font_pt / 72 * fig.dpi
    main = [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]
    areas = [ax.get_window_extent(renderer) for ax in main]
    short = max((max(0.5 * a.width, (MIN_AXES_EM + 2) * em_px) - a.height for a in areas), default=0.0)
    if short <= 0.5:
        return False
    rows = len({round(a.y0) for a in areas})
    layout.set_height(fig, fig.get_size_inches()[1] + rows * short / fig.dpi)
    return True


def fit_texts(fig: mpl.figure.Figure) -> None:
    """Make a figure readable at its style's width, which never grows: a re-flowed panel that starts a row gets
    the y label its designed row had, and titles, axis labels and the figure's title longer than the room they
    have are broken onto more lines (the figure grows taller where a panel got too low)."""
    if fig in _REFLOWED:
        designed, cols = _REFLOWED[fig]
        ncols = designed.shape[1]
        for i in range(0, designed.size, cols):
            ax, first = designed.flat[i], designed.flat[(i // ncols) * ncols]
            if not ax.get_ylabel() and first.get_ylabel():
                ax.set_ylabel(first.get_ylabel())
    _fit_loop(fig)
    outside: list = []
    for _ in range(4):  # each move changes where data and labels lie: look again until nothing moves
        layout.thin_ticks(fig)
        moved = layout.place_legends(fig)
        outside += [ax for ax in moved if ax not in outside]
        layout.place_annotations(fig)
        layout.legends_below(fig, outside)  # legends that fit nowhere inside: under their axis, as it now is
        if not _fit_loop(fig) and not moved:
            break


def _fit_loop(fig: mpl.figure.Figure) -> bool:
    """Break long texts and grow the figure until the layout stops changing (at most 4 rounds); True if it
    changed anything."""
    any_change = False
    for _ in range(4):  # a broken label or a taller figure changes the layout: look again
        renderer = layout.drawn(fig)
        changed = False
        shown = [a for a in fig.axes if a.get_visible()]
        for ax in [a for a in shown if not hasattr(a, "_colorbar")]:
            area = ax.get_window_extent(renderer)
            for text in layout.titles(ax):
                changed |= _fit(text, _title_room(text, ax, shown, renderer, fig), renderer)
            canvas = fig.bbox  # a label is centred on its panel: it reaches no further than the nearer edge
            cx, cy = (area.x0 + area.x1) / 2, (area.y0 + area.y1) / 2
            across = min(area.width * 1.05, 2 * min(cx - canvas.x0, canvas.x1 - cx))
            up = min(area.height * 1.05, 2 * min(cy - canvas.y0, canvas.y1 - cy))
            changed |= _fit(ax.xaxis.label, across - 4, renderer)
            changed |= _fit(ax.yaxis.label, up - 4, renderer)
        if fig._suptitle is not None:
            changed |= _fit(fig._suptitle, fig.bbox.width * 0.95, renderer)
        changed |= _grow(fig, renderer)
        any_change |= changed
        if not changed:
            break
    return any_change


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
def _metadata(fmt: str, style: FigureStyle, extra: dict | None = None) -> dict:
    """Fixed metadata (no dates: the same figure gives the same bytes); a styled file records its style."""
    styled = not style.is_default
    tool = f"brorl_lib; style {style.label}" if styled else "brorl_lib"
    extra = dict(extra or {})
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
) -> Saved:
    """Write ``name``.pdf/.png (and .svg when the run asks: ``figures.styles.formats``) with fixed metadata (same
    data, same bytes) and the data as ``name``.csv, its floats rounded by ``core.precision.rounded`` (10
    significant digits unless the frame declares otherwise).

    The provenance class is stamped on the figure and recorded with the caption for the manifest; a run with
    parameters other than its profile's is stamped ``variant`` with the changed ones (``core.variants``);
    an ``estimate`` names its ``basis``. ``depends_on``: the only parameters the figure depends on (``()``: none,
    an analytic curve, whose class no parameter changes; ``core.variants.classify``)."""
    from brorl_lib.core import variants

    check_artifact(name, provenance, basis)
    provenance, changed = variants.classify(provenance, depends_on=depends_on)
    stamp_provenance(fig, provenance, changed, basis)
    fit_texts(fig)
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
