"""Figures in the style in force (``core.styles``: the paper's unless a run asks for another), re-flowed to
fit its width, and ``save_figure`` (PDF + PNG [+ SVG] + CSV, byte-stable).

``new_figure`` sizes a grid of panels for one column or the full text width of the style in force. At the
paper's own size a figure is laid out exactly as its function asks; in another style a row of panels that
would be narrower than ``MIN_PANEL_EM`` of the style's type re-flows onto more rows (three panels become 2 + 1
or a stack), each panel keeping a readable height. Sizes a figure function writes itself go through ``pt``,
so they grow with the style's type. ``layout_problems`` names what would make a drawn figure hard to read
(texts of two panels overlapping, a collapsed panel); ``save_figure`` warns about it in a styled run.

Figure functions are wrapped in ``core.precision.rounded_inputs`` and ``save_figure`` writes the CSV from
``core.precision.rounded``: the figure and its CSV hold the same numbers, rounded far above last-bit noise.
"""

from __future__ import annotations

import math
import sys
import warnings
import weakref
from collections.abc import Callable

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg

from brorl_lib.core import atomic, styles
from brorl_lib.core.artifacts import Saved, check_artifact, record_artifact, stamp_text
from brorl_lib.core.paths import output_dir
from brorl_lib.core.precision import rounded
from brorl_lib.core.styles import PALETTE, FigureStyle

ARM_COLOURS = {"ProRL": PALETTE[1], "BroRL": PALETTE[0]}  # the two arms, the same in every figure
# The paper preset's widths of a two-column paper (ICML/NeurIPS-style templates), inches.
COLUMN_WIDTH_IN = styles.PAPER.column_in
FULL_WIDTH_IN = styles.PAPER.full_in
GOLDEN = 0.618
STYLE = styles.PAPER_RC  # the paper preset's rcParams

# Re-flow (our choices): a panel at least 16 ems of the style's type wide (room for tick labels, a label and
# a short title), at least 10 ems tall, and once re-flowed no taller than 3/4 of its width.
MIN_PANEL_EM = 16.0
MIN_PANEL_HEIGHT_EM = 10.0
REFLOWED_RATIO = 0.75
MIN_AXES_EM = 4.0  # layout_problems: a plotting area under 4 ems in either direction has collapsed

_STAMP_GID = "brorl-provenance"
_DRAWN_IN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # figure -> the style it was drawn in
_REFLOWED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # figure -> (axes as designed, columns now)


def use_style(style: FigureStyle | None = None) -> None:
    """Apply ``style`` (default: the style in force) to matplotlib, and so to seaborn, which reads the same rcParams."""
    styles.apply(style or styles.active())


def pt(size: float) -> float:
    """A size in points written for the paper style (a legend at 6 pt), in the style in force."""
    scale = styles.active().scale
    return size if scale == 1.0 else round(size * scale, 2)


def style_of(fig: mpl.figure.Figure) -> FigureStyle:
    """The style ``fig`` was drawn in (the style in force for a figure made elsewhere)."""
    return _DRAWN_IN.get(fig) or styles.active()


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
    _DRAWN_IN[fig] = style
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
    _DRAWN_IN[fig] = style
    return fig


def stamp_provenance(fig: mpl.figure.Figure, provenance: str, changed: dict | None = None) -> None:
    """Write the provenance class (and a variant's changed parameters) in the top-right corner, replacing an
    earlier stamp."""
    for t in [t for t in fig.texts if t.get_gid() == _STAMP_GID]:
        t.remove()
    style = style_of(fig)
    size = 6 if style.scale == 1.0 else round(6 * style.scale, 2)
    # just above the top edge: the tight bounding box grows to hold it, so it never covers a title
    fig.text(
        0.995,
        1.0,
        f"[{stamp_text(provenance, changed)}]",
        ha="right",
        va="bottom",
        fontsize=size,
        color="0.35",
        gid=_STAMP_GID,
    )


# --- reading a drawn figure ---
def _drawn(fig: mpl.figure.Figure):
    """Draw ``fig`` (laid out) and return its renderer; a figure closed by pyplot gets an Agg canvas again."""
    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _titles(ax) -> list:
    return [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_visible() and t.get_text().strip()]


def _text_boxes(ax, renderer) -> list:
    """Window extents of what ``ax`` writes around its plotting area: titles, and each axis with its tick
    labels and label (as drawn: ticks outside the view are not counted)."""
    boxes = [t.get_window_extent(renderer) for t in _titles(ax)]
    boxes += [axis.get_tightbbox(renderer) for axis in (ax.xaxis, ax.yaxis) if axis.get_visible()]
    return [b for b in boxes if b is not None and b.width > 0 and b.height > 0]


def _overlap(a, b, tol: float) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol


def layout_problems(fig: mpl.figure.Figure) -> list[str]:
    """What makes the drawn ``fig`` hard to read: texts of one panel over another panel's texts or plotting
    area, a plotting area under ``MIN_AXES_EM`` ems, or a layout matplotlib could not make. Empty when fine."""
    problems = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        renderer = _drawn(fig)
    problems += [f"layout: {w.message}" for w in caught if "layout" in str(w.message).lower()]
    em_px = style_of(fig).font_pt / 72 * fig.dpi
    tol = 0.5 / 72 * fig.dpi  # half a point
    axes = [ax for ax in fig.axes if ax.get_visible()]
    main = [ax for ax in axes if not hasattr(ax, "_colorbar")]
    names = {ax: (ax.get_title(loc="left") or ax.get_title() or f"panel {i + 1}") for i, ax in enumerate(main)}
    for ax in main:
        box = ax.get_window_extent(renderer)
        if box.width < MIN_AXES_EM * em_px or box.height < MIN_AXES_EM * em_px:
            problems.append(
                f"{names[ax]!r}: plotting area {box.width / fig.dpi:.2f} x {box.height / fig.dpi:.2f} in is too small"
            )
    boxes = {ax: _text_boxes(ax, renderer) for ax in main}
    for i, a in enumerate(main):
        for b in main[i + 1 :]:
            area_b, area_a = b.get_window_extent(renderer), a.get_window_extent(renderer)
            if _overlap(area_a, area_b, tol):
                continue  # twin or inset axes: one panel drawn over another on purpose
            clash = any(_overlap(t, u, tol) for t in boxes[a] for u in boxes[b])
            clash |= any(_overlap(t, area_b, tol) for t in boxes[a]) or any(_overlap(u, area_a, tol) for u in boxes[b])
            if clash:
                problems.append(f"texts of {names[a]!r} and {names[b]!r} overlap")
    return problems


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
    w, h = fig.get_size_inches()
    fig.set_size_inches(w, h + rows * short / fig.dpi)
    return True


def fit_texts(fig: mpl.figure.Figure) -> None:
    """Make a figure drawn away from the paper's size readable: a re-flowed panel that starts a row gets the
    y label its designed row had, and titles, axis labels and the figure's title longer than the room they
    have are broken onto more lines. Only a styled run passes a figure through it (figures/ stays as drawn)."""
    if fig in _REFLOWED:
        designed, cols = _REFLOWED[fig]
        ncols = designed.shape[1]
        for i in range(0, designed.size, cols):
            ax, first = designed.flat[i], designed.flat[(i // ncols) * ncols]
            if not ax.get_ylabel() and first.get_ylabel():
                ax.set_ylabel(first.get_ylabel())
    for _ in range(4):  # a broken label or a taller figure changes the layout: look again
        renderer = _drawn(fig)
        changed = False
        shown = [a for a in fig.axes if a.get_visible()]
        for ax in [a for a in shown if not hasattr(a, "_colorbar")]:
            area = ax.get_window_extent(renderer)
            for text in _titles(ax):
                changed |= _fit(text, _title_room(text, ax, shown, renderer, fig), renderer)
            changed |= _fit(ax.xaxis.label, area.width * 1.05, renderer)
            changed |= _fit(ax.yaxis.label, area.height * 1.05, renderer)
        if fig._suptitle is not None:
            changed |= _fit(fig._suptitle, fig.bbox.width * 0.95, renderer)
        changed |= _grow(fig, renderer)
        if not changed:
            break


def _warn_layout(fig: mpl.figure.Figure, name: str) -> None:
    style = style_of(fig)
    for problem in layout_problems(fig):
        print(f"warning: {name} in style {style.label}: {problem}", file=sys.stderr)


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
) -> Saved:
    """Write ``name``.pdf/.png (and .svg when the run asks: ``core.styles.formats``) with fixed metadata (same
    data, same bytes) and the data as ``name``.csv, its floats rounded by ``core.precision.rounded`` (10
    significant digits unless the frame declares otherwise).

    The provenance class is stamped on the figure and recorded with the caption for the manifest; a run with
    parameters other than its profile's is stamped ``variant`` with the changed ones (``core.variants``);
    an ``estimate`` names its ``basis``."""
    from brorl_lib.core import variants

    check_artifact(name, provenance, basis)
    provenance, changed = variants.classify(provenance)
    stamp_provenance(fig, provenance, changed)
    style = style_of(fig)
    if not style.is_default:
        fit_texts(fig)
        _warn_layout(fig, name)
    out = output_dir()
    files = write_figure(fig, out / name, styles.formats())
    csv = out / f"{name}.csv"
    atomic.write_text(csv, rounded(data).to_csv(index=False, lineterminator="\n"))
    drawn_in = None if style.is_default else style
    return record_artifact(name, [*files, csv], provenance, caption, changed=changed, basis=basis, style=drawn_in)
