"""Keeping a drawn figure readable: tick labels thinned where they overlap, legends and annotations moved off the
data (a legend that fits nowhere inside its panel goes under its axis, which keeps its limits), the canvas's height
set. ``figures.plotting.fit_texts`` runs these on every figure before it is saved.

The check of the result (texts over texts or data, stretched axes, every figure in every preset) is the tests'
work: ``tests/layout_check.py``, which ``make nbval`` runs on every figure the notebooks save.
"""

from __future__ import annotations

import warnings

import matplotlib as mpl
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.patches import Rectangle
from matplotlib.transforms import Bbox, ScaledTranslation

MIN_AXES_EM = 4.0  # a plotting area under 4 ems in either direction has collapsed (our choice)
BASE_BELOW_ATTR = "_brorl_base_below_in"  # a figure's stamp strip (inches), under which nothing is laid out
_SEGMENT_SAMPLES = 24  # points a drawn line segment is checked at, besides its ends


def drawn(fig: mpl.figure.Figure, quiet: bool = True):
    """Draw ``fig`` (laid out) and return its renderer; a figure closed by pyplot gets an Agg canvas again.
    ``quiet``: no warning that constrained layout could not be made in this draw (a passing state while texts
    are fitted and the height set; the tests' layout check draws the finished figure with ``quiet=False``)."""
    if not hasattr(fig.canvas, "get_renderer"):
        FigureCanvasAgg(fig)
    with warnings.catch_warnings():
        if quiet:
            warnings.filterwarnings("ignore", message="constrained_layout not applied", category=UserWarning)
        fig.canvas.draw()
    return fig.canvas.get_renderer()


def titles(ax) -> list:
    return [t for t in (ax.title, ax._left_title, ax._right_title) if t.get_visible() and t.get_text().strip()]


def extents(artists, renderer) -> list:
    boxes = [a.get_window_extent(renderer) for a in artists]
    return [b for b in boxes if b is not None and b.width > 0 and b.height > 0]


def text_boxes(ax, renderer) -> list:
    """Window extents of what ``ax`` writes around its plotting area: titles, and each axis with its tick
    labels and label (as drawn: ticks outside the view are not counted)."""
    boxes = extents(titles(ax), renderer)
    boxes += [axis.get_tightbbox(renderer) for axis in (ax.xaxis, ax.yaxis) if axis.get_visible()]
    return [b for b in boxes if b is not None and b.width > 0 and b.height > 0]


def boxes_overlap(a, b, tol: float) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol


def shown_texts(artists) -> list:
    return [t for t in artists if t.get_visible() and t.get_text().strip()]


def _tick_labels(axis) -> list:
    view = sorted(axis.get_view_interval())
    ticks = [t for t in axis.get_major_ticks() if view[0] - 1e-12 <= t.get_loc() <= view[1] + 1e-12]
    return shown_texts([t.label1 for t in ticks] + [t.label2 for t in ticks])


def ticks_crowded(axis, renderer, tol: float) -> bool:
    """Whether tick labels of ``axis`` overlap: their boxes, or for slanted labels (rotated, not upright) the
    distance between neighbours across the slant against the type's height."""
    texts = _tick_labels(axis)
    angle = np.deg2rad(texts[0].get_rotation() % 180) if texts else 0.0
    if texts and 0.05 < angle < np.pi / 2 - 0.05:
        anchors = sorted(t.get_window_extent(renderer).x1 for t in texts)  # each label ends at its tick
        height = texts[0].get_fontsize() / 72 * axis.figure.dpi
        return any((b - a) * np.sin(angle) < 0.9 * height for a, b in zip(anchors, anchors[1:]))
    boxes = extents(texts, renderer)
    return any(boxes_overlap(p, q, tol) for k, p in enumerate(boxes) for q in boxes[k + 1 :])


def thin_ticks(fig: mpl.figure.Figure) -> None:
    """An axis whose tick labels overlap gets fewer ticks: an automatic or log locator asked for fewer (down to
    3 bins), then every other tick kept; labels set one by one on the x axis (a fixed locator) are slanted."""
    from matplotlib.ticker import AutoLocator, FixedLocator, LogLocator, MaxNLocator

    tol = 0.5 / 72 * fig.dpi
    renderer = drawn(fig)
    for ax in [a for a in fig.axes if a.get_visible()]:
        for axis, name in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            if not ticks_crowded(axis, renderer, tol):
                continue
            locator = axis.get_major_locator()
            if isinstance(locator, FixedLocator):  # ticks set by hand, often with labels: slanted, never dropped
                if name == "x":
                    ax.tick_params(axis="x", labelrotation=30)
                    for label in axis.get_ticklabels():
                        label.set_horizontalalignment("right")
                    renderer = drawn(fig)
                continue
            for bins in (6, 5, 4, 3):
                if isinstance(locator, LogLocator):
                    locator.set_params(numticks=bins)
                elif isinstance(locator, (AutoLocator, MaxNLocator)):
                    axis.set_major_locator(MaxNLocator(nbins=bins, steps=[1, 2, 2.5, 5, 10]))
                else:
                    break
                renderer = drawn(fig)
                if not ticks_crowded(axis, renderer, tol):
                    break
            if ticks_crowded(axis, renderer, tol):
                low, high = sorted(axis.get_view_interval())
                shown = [t for t in axis.get_major_locator()() if low <= t <= high]
                axis.set_major_locator(FixedLocator(shown[::2] if 0 not in shown else _around_zero(shown)))
                renderer = drawn(fig)


def _around_zero(ticks: list) -> list:
    """Every other tick counted outwards from 0, so 0 stays (a symlog axis)."""
    k = ticks.index(0)
    return sorted(ticks[k::-2] + ticks[k + 2 :: 2])


def _densified(xy: np.ndarray) -> np.ndarray:
    """``xy`` (display points of a drawn polyline) with points along each segment."""
    if len(xy) < 2:
        return xy
    s = np.linspace(0.0, 1.0, _SEGMENT_SAMPLES + 2)[:, None, None]
    return (xy[:-1][None] * (1 - s) + xy[1:][None] * s).reshape(-1, 2)


def drawn_data(ax) -> tuple[np.ndarray, list]:
    """Display points of the data ``ax`` draws inside its plotting area (lines in data coordinates, markers, error
    bars; a line's part beyond the axis limits is clipped, not drawn) and the boxes of its bars; guides drawn in
    axes coordinates (axhline, axvline, axvspan) are left out."""
    points, bars = [np.empty((0, 2))], []
    for line in ax.lines:
        if not line.get_visible() or line.get_transform() != ax.transData:
            continue
        xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))
        xy = xy[np.isfinite(xy).all(axis=1)]
        drawn_line = line.get_linestyle() not in ("None", "none", "", " ") and line.get_linewidth() > 0
        points.append(_densified(xy) if drawn_line else xy)
    for coll in ax.collections:
        if not coll.get_visible():
            continue
        if isinstance(coll, LineCollection):
            for seg in coll.get_segments():
                if coll.get_transform() == ax.transData and len(seg):
                    points.append(_densified(ax.transData.transform(np.asarray(seg, dtype=float))))
        elif isinstance(coll, PathCollection) and len(coll.get_offsets()):
            points.append(coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), dtype=float)))
    for patch in ax.patches:
        if isinstance(patch, Rectangle) and patch.get_visible() and patch.get_transform() is not None:
            box = patch.get_window_extent()
            if box.width > 0 and box.height > 0:
                bars.append(box)
    pts = np.concatenate(points)
    area = ax.get_window_extent()
    shown = (
        (pts[:, 0] >= area.x0 - 1)
        & (pts[:, 0] <= area.x1 + 1)
        & (pts[:, 1] >= area.y0 - 1)
        & (pts[:, 1] <= area.y1 + 1)
    )
    return pts[np.isfinite(pts).all(axis=1) & shown], bars


def covers_data(box: Bbox, points: np.ndarray, bars: list, pad: float) -> bool:
    inner = Bbox.from_extents(box.x0 + pad, box.y0 + pad, box.x1 - pad, box.y1 - pad)
    if inner.width <= 0 or inner.height <= 0:
        return False
    inside = (
        (points[:, 0] > inner.x0) & (points[:, 0] < inner.x1) & (points[:, 1] > inner.y0) & (points[:, 1] < inner.y1)
    )
    return bool(inside.any()) or any(boxes_overlap(inner, b, 0.0) for b in bars)


# --- mending what the check would find ---
LEGEND_SPOTS = (
    "upper right", "upper left", "lower right", "lower left", "center right", "center left", "upper center",
    "lower center", "center",
)  # fmt: skip
# Offsets (points) and alignments an annotation of a point may take, nearest first (our choice).
ANNOTATION_SPOTS = (
    ((3, 3), "left", "bottom"),
    ((3, -3), "left", "top"),
    ((-3, 3), "right", "bottom"),
    ((-3, -3), "right", "top"),
    ((0, 5), "center", "bottom"),
    ((0, -5), "center", "top"),
)


def _clear(box, ax, data, others, renderer, tol, within=None) -> bool:
    """``box`` covers none of ``ax``'s data, stays inside ``within`` (default: its plotting area) and clear of
    ``others``."""
    area = within if within is not None else ax.get_window_extent(renderer)
    inside = area.x0 - tol <= box.x0 and box.x1 <= area.x1 + tol and area.y0 - tol <= box.y0 and box.y1 <= area.y1 + tol
    return inside and not covers_data(box, *data, tol) and not any(boxes_overlap(box, o, tol) for o in others)


def place_legends(fig: mpl.figure.Figure) -> list:
    """A panel's legend that covers its data moves to the first corner or edge where it covers none; returns the
    panels whose legend fits nowhere inside (for ``legends_below``: an axis is never stretched to make room)."""
    if not any(a.get_legend() is not None for a in fig.axes):
        return []
    renderer = drawn(fig)
    tol = 0.5 / 72 * fig.dpi
    outside = []
    for ax in [a for a in fig.axes if a.get_visible() and a.get_legend() is not None]:
        legend = ax.get_legend()
        texts = extents(shown_texts(ax.texts), renderer)
        if not covers_data(legend.get_window_extent(renderer), *drawn_data(ax), tol):
            continue
        if not _first_clear_spot(fig, ax, LEGEND_SPOTS, texts, tol, renderer):
            outside.append(ax)  # never by stretching an axis: the legend goes outside the data
    return outside


def _first_clear_spot(fig, ax, spots, texts, tol, renderer=None) -> bool:
    """Move ``ax``'s legend to the first of ``spots`` where it is clear of data and ``texts``; False if none.
    ``renderer``: of the figure as it is now (default: draw it)."""
    legend = ax.get_legend()
    renderer = renderer or drawn(fig)  # an inside legend moves without changing the layout: one drawing serves
    data = drawn_data(ax)
    for spot in spots:
        legend.set_loc(spot)
        if _clear(legend.get_window_extent(renderer), ax, data, texts, renderer, tol):
            return True
    return False


def legends_below(fig, axes: list) -> None:
    """Put each of ``axes``' legends under its x axis (tick labels and label), left-aligned with its panel but
    kept on the canvas, outside the constrained layout (so it never squeezes the panels); the figure grows
    taller where the legends need room at the bottom."""
    if not axes:
        return
    for ax in axes:
        ax.get_legend().set_in_layout(False)
    for _ in range(2):
        renderer = drawn(fig)
        lowest = fig.bbox.y1
        for ax in axes:  # legend positions are worked out when asked for: no drawing between the moves
            legend = ax.get_legend()
            area = ax.get_window_extent(renderer)
            axis = ax.xaxis.get_tightbbox(renderer)
            below_in = (area.y0 - (axis.y0 if axis is not None else area.y0)) / fig.dpi + 2 / 72
            legend.set_loc("upper left")
            legend.set_bbox_to_anchor(
                (0.0, 0.0), transform=ax.transAxes + ScaledTranslation(0, -below_in, fig.dpi_scale_trans)
            )
            box = legend.get_window_extent(renderer)
            left_in = min(max(0.0, box.x1 - fig.bbox.x1 + 2), max(0.0, box.x0 - fig.bbox.x0)) / fig.dpi
            shift = ScaledTranslation(-left_in, -below_in, fig.dpi_scale_trans)
            legend.set_bbox_to_anchor((0.0, 0.0), transform=ax.transAxes + shift)
            lowest = min(lowest, legend.get_window_extent(renderer).y0)
        if not _room_below(fig, lowest):
            break


def _room_below(fig, lowest_px: float) -> bool:
    """Size the strip the constrained layout leaves free at the bottom so that ``lowest_px`` (a legend's
    bottom, pixels from the figure's) sits just above the stamp's strip; the figure's height changes by as
    much, the panels keep theirs. True if it changed."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    engine = fig.get_layout_engine()
    if not isinstance(engine, ConstrainedLayoutEngine):
        return False
    below = engine.get()["rect"][1] * fig.bbox.height
    base = getattr(fig, BASE_BELOW_ATTR, 0.0) * fig.dpi  # the stamp's strip
    target = max(base, below - (lowest_px - base) + 2)
    if abs(target - below) <= 0.5:
        return False
    set_height(fig, fig.get_size_inches()[1] + (target - below) / fig.dpi, extra_below=target - below)
    return True


def set_height(fig, height_in: float, extra_below: float = 0.0) -> None:
    """Resize ``fig`` to ``height_in`` keeping the strips its constrained layout leaves free above and below
    (the stamp's, a legend's) at their heights in pixels, the bottom one ``extra_below`` pixels higher."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    engine = fig.get_layout_engine()
    old_px = fig.bbox.height
    fig.set_size_inches(fig.get_size_inches()[0], height_in)
    if isinstance(engine, ConstrainedLayoutEngine):
        left, bottom, width, height = engine.get()["rect"]
        below, above = bottom * old_px + extra_below, (1 - bottom - height) * old_px
        new_px = fig.bbox.height
        engine.set(rect=(left, below / new_px, width, (new_px - below - above) / new_px))


def place_annotations(fig: mpl.figure.Figure) -> None:
    """An annotation of a point (an offset in points from it) that covers data or another annotation moves to
    the first of ``ANNOTATION_SPOTS`` around its point where it covers neither."""
    if not any(getattr(t, "anncoords", None) == "offset points" for a in fig.axes for t in a.texts):
        return
    renderer = drawn(fig)
    tol = 0.5 / 72 * fig.dpi
    for ax in [a for a in fig.axes if a.get_visible()]:
        notes = [t for t in shown_texts(ax.texts) if getattr(t, "anncoords", None) == "offset points"]
        data = drawn_data(ax)
        for note in notes:
            others = [t.get_window_extent(renderer) for t in shown_texts(ax.texts) if t is not note]
            if ax.get_legend() is not None:
                others.append(ax.get_legend().get_window_extent(renderer))
            others += [b for a in fig.axes if a is not ax and a.get_visible() for b in text_boxes(a, renderer)]
            if _clear(note.get_window_extent(renderer), ax, data, others, renderer, tol, fig.bbox):
                continue
            for offset, ha, va in ANNOTATION_SPOTS:
                note.xyann = offset
                note.set_ha(ha)
                note.set_va(va)
                if _clear(note.get_window_extent(renderer), ax, data, others, renderer, tol, fig.bbox):
                    break
