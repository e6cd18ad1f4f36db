"""The layout check: ``problems(fig)`` lists in words what makes a drawn figure hard to read: texts over other
texts, panels or data (a legend, an annotation; guides in axes coordinates are no data), tick labels over each
other, a text off the canvas; two legend entries drawn alike or one too pale on white; an axis over
``MAX_AXIS_SPAN`` times what it shows (with the panels sharing it); a canvas larger than its medium, a plotting area
under ``MIN_AXES_EM`` ems, a layout matplotlib could not make.

``make nbval`` sets ``BRORL_LAYOUT_CHECK=layout_check``: every figure a notebook saves is checked as drawn and
redrawn by its function in every other preset, a finding fails its cell, and each result goes to the file
``BRORL_LAYOUT_REPORT`` names, which ``python tests/layout_check.py REPORT`` sums per style."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import LineCollection, PathCollection, PolyCollection
from matplotlib.colors import to_rgba
from matplotlib.container import Container
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox

from brorl_lib.core import precision
from brorl_lib.figures import styles
from brorl_lib.figures.plotting import stamp_provenance, style_of

REPORT_ENV = "BRORL_LAYOUT_REPORT"  # a JSON-lines file the findings (and clean figures) are appended to
TOL_IN = 0.005  # a canvas may exceed its medium by this much (rounding of pixel sizes)
MAX_AXIS_SPAN = 1.5  # an axis may be at most this many times as long as what it shows (our choice)
MIN_AXES_EM = 4.0  # a plotting area under 4 ems in either direction has collapsed (our choice)
MIN_CONTRAST = 1.6  # a legend entry's colour against white, WCAG's ratio: below it, a near-white line (our choice)
WHOLE_SCALES = ((0.0, 1.0), (-1.0, 1.0), (0.0, 100.0))  # a linear axis may be set to these on purpose


class LayoutError(RuntimeError):  # a figure with layout findings
    pass


def check(fig: mpl.figure.Figure, name: str, provenance: str, changed: dict | None, basis: str = "") -> None:
    """The check of a figure about to be saved (``figures.plotting.save_figure`` calls it): in the style in force
    and redrawn in every other preset, each result reported; ``LayoutError`` on any finding."""
    findings, call = {style_of(fig).label: problems(fig)}, precision.call_of(fig)
    for other in [s for s in styles.PRESETS.values() if s.label not in findings]:
        if call is None:
            findings[other.label] = [f"cannot be redrawn in {other.label}: not drawn by a rounded_inputs function"]
            continue
        with styles.using(other):
            again = call[0](*call[1], **call[2])
        stamp_provenance(again, provenance, changed, basis)
        findings[other.label] = problems(again, other)
        plt.close(again)
    for label, found in findings.items():
        report(name, label, found)
    bad = "; ".join(f"{label}: {', '.join(found)}" for label, found in findings.items() if found)
    if bad:
        raise LayoutError(f"{name}: the layout check found: {bad}")


# --- what is drawn where ---
def drawn(fig: mpl.figure.Figure):
    """Draw ``fig`` (laid out) and return its renderer; a figure closed by pyplot gets an Agg canvas again."""
    if not hasattr(fig.canvas, "get_renderer"):
        mpl.backends.backend_agg.FigureCanvasAgg(fig)
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def shown(texts) -> list:
    return [t for t in texts if t.get_visible() and t.get_text().strip()]


def boxes(artists, renderer) -> list:
    found = [a.get_window_extent(renderer) if renderer else a for a in artists]
    return [b for b in found if b is not None and b.width > 0 and b.height > 0]


def overlap(a, b, tol: float) -> bool:
    return min(a.x1, b.x1) - max(a.x0, b.x0) > tol and min(a.y1, b.y1) - max(a.y0, b.y0) > tol


def text_boxes(ax, renderer) -> list:
    """Boxes of what ``ax`` writes around its plotting area: titles, each axis with its tick labels and label."""
    titles = shown([ax.title, ax._left_title, ax._right_title])
    axes = [axis.get_tightbbox(renderer) for axis in (ax.xaxis, ax.yaxis) if axis.get_visible()]
    return boxes(titles, renderer) + boxes(axes, None)


def ticks_crowded(axis, renderer, tol: float) -> bool:
    view = sorted(axis.get_view_interval())
    ticks = [t for t in axis.get_major_ticks() if view[0] - 1e-12 <= t.get_loc() <= view[1] + 1e-12]
    found = boxes(shown([t.label1 for t in ticks] + [t.label2 for t in ticks]), renderer)
    return any(overlap(p, q, tol) for k, p in enumerate(found) for q in found[k + 1 :])


def _along(xy: np.ndarray, samples: int = 24) -> np.ndarray:
    """Display points of a drawn polyline with ``samples`` points along each segment too."""
    if len(xy) < 2:
        return xy
    s = np.linspace(0.0, 1.0, samples + 2)[:, None, None]
    return (xy[:-1][None] * (1 - s) + xy[1:][None] * s).reshape(-1, 2)


def data_points(ax) -> tuple[np.ndarray, list]:
    """Display points of the data ``ax`` draws inside its plotting area (lines in data coordinates, markers,
    error bars, ``fill_between`` bands) and the boxes of its bars; guides in axes coordinates are left out."""
    points, bars = [np.empty((0, 2))], []
    for line in ax.lines:
        if line.get_visible() and line.get_transform() == ax.transData:
            xy = ax.transData.transform(np.asarray(line.get_xydata(), dtype=float))
            joined = line.get_linestyle() not in ("None", "none", "", " ") and line.get_linewidth() > 0
            points.append(_along(xy) if joined else xy)
    for coll in [c for c in ax.collections if c.get_visible()]:
        if isinstance(coll, LineCollection) and coll.get_transform() == ax.transData:
            points += [_along(ax.transData.transform(np.asarray(s, dtype=float))) for s in coll.get_segments()]
        elif isinstance(coll, PathCollection) and len(coll.get_offsets()):
            points.append(coll.get_offset_transform().transform(np.asarray(coll.get_offsets(), dtype=float)))
        elif isinstance(coll, PolyCollection) and coll.get_transform() == ax.transData:
            points += [ax.transData.transform(p.vertices) for p in coll.get_paths() if len(p.vertices)]
    bars = [p.get_window_extent() for p in ax.patches if isinstance(p, Rectangle) and p.get_visible()]
    bars = [b for b in bars if b.width > 0]  # a bar of height zero shows its category too
    pts = np.concatenate([p for p in points if len(p)] or [np.empty((0, 2))])
    area = ax.get_window_extent()
    inside = (pts[:, 0] >= area.x0 - 1) & (pts[:, 0] <= area.x1 + 1) & (pts[:, 1] >= area.y0 - 1)
    inside &= pts[:, 1] <= area.y1 + 1
    return pts[np.isfinite(pts).all(axis=1) & inside], bars


def covers(box: Bbox, data: tuple[np.ndarray, list], pad: float) -> bool:
    inner = Bbox.from_extents(box.x0 + pad, box.y0 + pad, box.x1 - pad, box.y1 - pad)
    if inner.width <= 0 or inner.height <= 0:
        return False
    p = data[0]
    hit = (p[:, 0] > inner.x0) & (p[:, 0] < inner.x1) & (p[:, 1] > inner.y0) & (p[:, 1] < inner.y1)
    return bool(hit.any()) or any(overlap(inner, b, 0.0) for b in data[1])


# --- the findings ---
def _data_coords(ax, renderer) -> np.ndarray:
    """What ``ax`` shows, in its data coordinates: its data and bar corners and the texts placed at data points."""
    points, bars = data_points(ax)
    at_data = [t for t in shown(ax.texts) if (t.xycoords if isinstance(t, Annotation) else None) == "data"]
    at_data += [t for t in shown(ax.texts) if not isinstance(t, Annotation) and t.get_transform() == ax.transData]
    corners = [c for b in bars + boxes(at_data, renderer) for c in ((b.x0, b.y0), (b.x1, b.y1))]
    shown_px = np.r_[points, np.reshape(corners, (-1, 2))]
    coords = ax.transData.inverted().transform(shown_px) if len(shown_px) else shown_px.reshape(-1, 2)
    for line in ax.lines:  # a reference line (a gate, a threshold) shows its value on its axis too
        if line.get_visible() and line.get_transform() in (ax.get_yaxis_transform(), ax.get_xaxis_transform()):
            k = 1 if line.get_transform() == ax.get_yaxis_transform() else 0
            value = np.asarray(line.get_ydata() if k else line.get_xdata(), dtype=float)[:1]
            coords = np.r_[coords, [[np.nan, value[0]] if k else [value[0], np.nan]]]
    return coords


def axis_spans(ax, renderer=None) -> list[str]:
    """Each axis of ``ax`` over ``MAX_AXIS_SPAN`` times as long as what it and the panels sharing it show (with zero
    when it holds it, its limits when they are one of ``WHOLE_SCALES``); no data, or one value: not judged."""
    area, found = ax.get_window_extent(renderer), []
    for k, which, axis in ((0, "x", ax.xaxis), (1, "y", ax.yaxis)):
        group = (ax.get_shared_x_axes() if k == 0 else ax.get_shared_y_axes()).get_siblings(ax)
        values = np.concatenate([_data_coords(a, renderer)[:, k] for a in group if a.get_visible()] or [[]])
        limits = sorted(ax.get_xlim() if k == 0 else ax.get_ylim())
        values = values[np.isfinite(values) & (values >= limits[0]) & (values <= limits[1])]
        if len(values) < 2 or np.ptp(values) <= 1e-12 * max(1.0, float(np.abs(values).max())):
            continue  # no data, or one value: not judged
        if axis.get_scale() == "linear":
            values = np.r_[values, [0.0] if limits[0] <= 0 <= limits[1] else []]
            if any(np.allclose(limits, whole) for whole in WHOLE_SCALES):
                values = np.r_[values, limits]
        other = (ax.get_ylim() if k == 0 else ax.get_xlim())[0]
        px = ax.transData.transform([(v, other) if k == 0 else (other, v) for v in values])[:, k]
        low, high = (area.x0, area.x1) if k == 0 else (area.y0, area.y1)
        span = (high - low) / max(np.ptp(np.clip(px, low, high)), 1e-9)
        if span > MAX_AXIS_SPAN:
            found.append(f"the {which} axis spans {span:.1f} times what it shows")
    return found


def _rgb(colour) -> tuple | None:
    """A colour as the eye tells it (a shade's transparency too)."""
    if colour is None or isinstance(colour, str) and colour.lower() == "none":
        return None
    return tuple(np.round(to_rgba(colour), 2))


def _look(handle) -> tuple:
    """How a legend entry is drawn: colour, dash, marker and its fill, hatch; rounded as the eye tells them."""
    if isinstance(handle, Container):
        handle = next((h for h in handle.get_children() if isinstance(h, (Line2D, Patch))), handle)
    if isinstance(handle, Line2D):
        joined = handle.get_linestyle() not in ("None", "none", "", " ") and handle.get_linewidth() > 0
        dash = str(getattr(handle, "_unscaled_dash_pattern", handle.get_linestyle())) if joined else ""
        marker = "" if handle.get_marker() in (None, "None", "none", "") else str(handle.get_marker())
        return ("line", _rgb(handle.get_color()), dash, marker, _rgb(handle.get_markerfacecolor()) if marker else None)
    if isinstance(handle, Patch):
        return ("patch", _rgb(handle.get_facecolor()), handle.get_hatch() or "", _rgb(handle.get_edgecolor()))
    if isinstance(handle, PathCollection) and len(handle.get_facecolor()):
        return ("points", _rgb(handle.get_facecolor()[0]), str(handle.get_paths()[0].vertices.shape))
    return (type(handle).__name__, id(handle))


def _contrast(rgb) -> float:  # WCAG's contrast ratio against white
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 1.05 / (np.dot([0.2126, 0.7152, 0.0722], lin) + 0.05)


def legend_problems(legend, where: str) -> list[str]:
    """Two entries of ``legend`` drawn alike; an entry too pale on white."""
    labels = [t.get_text() for t in legend.get_texts()]
    looks = [_look(h) for h in legend.legend_handles]
    found = [f"{where}: legend entries {labels[i]!r} and {labels[j]!r} look alike"
             for i in range(len(looks)) for j in range(i + 1, len(looks)) if looks[i] == looks[j]]  # fmt: skip
    found += [f"{where}: legend entry {label!r} is too pale on white" for label, look in zip(labels, looks)
              if look[0] in ("line", "points") and look[1] and _contrast(look[1][:3]) < MIN_CONTRAST]  # fmt: skip
    return found


def problems(fig: mpl.figure.Figure, style=None) -> list[str]:
    """Every finding of the drawn ``fig`` (see the module's doc), in words; empty when it reads well.
    ``style`` gives the em and the medium: default, the style it was drawn in."""
    style = style or styles.drawn_in(fig)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        renderer = drawn(fig)
    found = [f"layout: {w.message}" for w in caught if "layout" in str(w.message).lower()]
    em, tol = style.font_pt / 72 * fig.dpi, 0.5 / 72 * fig.dpi  # tol: half a point
    main = [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]
    name = {ax: ax.get_title(loc="left") or ax.get_title() or f"panel {i + 1}" for i, ax in enumerate(main)}
    area = {ax: ax.get_window_extent(renderer) for ax in main}
    texts = {ax: text_boxes(ax, renderer) for ax in main}
    data = {ax: data_points(ax) for ax in main}
    for ax in main:
        if min(area[ax].width, area[ax].height) < MIN_AXES_EM * em:
            found.append(f"{name[ax]!r}: plotting area {area[ax].width / fig.dpi:.2f} x "
                         f"{area[ax].height / fig.dpi:.2f} in is too small")  # fmt: skip
        found += [f"{name[ax]!r}: {p}" for p in axis_spans(ax, renderer)]
        notes = [(f"the annotation {t.get_text()[:40]!r}", t.get_window_extent(renderer)) for t in shown(ax.texts)]
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            notes.append(("the legend", legend.get_window_extent(renderer)))
            found += legend_problems(legend, repr(name[ax]))
        for what, box in notes:
            if covers(box, data[ax], tol):
                found.append(f"{name[ax]!r}: {what} covers data")
            if what == "the legend" and any(overlap(box, t, tol) for o in main for t in texts[o]):
                found.append(f"{name[ax]!r}: the legend covers a text")
    for ax in [a for a in fig.axes if a.get_visible()]:  # colour bars too
        where = name.get(ax, "a colour bar")
        found += [f"{where!r}: {w} tick labels overlap" for w, a in (("x", ax.xaxis), ("y", ax.yaxis))
                  if ticks_crowded(a, renderer, tol)]  # fmt: skip
    for i, a in enumerate(main):
        for b in main[i + 1 :]:
            if overlap(area[a], area[b], tol):
                continue  # twin or inset axes: one panel drawn over another on purpose
            if any(overlap(t, u, tol) for t in texts[a] + [area[a]] for u in texts[b] + [area[b]]):
                found.append(f"texts of {name[a]!r} and {name[b]!r} overlap")
    top = [(f"the figure text {t.get_text()[:40]!r}", t.get_window_extent(renderer)) for t in shown(fig.texts)]
    legends = fig.legends + [lg for sub in fig.subfigs for lg in sub.legends]  # a sub-figure's too
    top += [("the figure legend", lg.get_window_extent(renderer)) for lg in legends]
    for legend in legends:
        found += legend_problems(legend, "the figure legend")
    for k, (what, box) in enumerate(top):
        found += [f"{what} overlaps {name[ax]!r}" for ax in main
                  if overlap(box, area[ax], tol) or any(overlap(box, t, tol) for t in texts[ax])]  # fmt: skip
        found += [f"the figure legend covers data of {name[ax]!r}" for ax in main
                  if what == "the figure legend" and covers(box, data[ax], tol)]  # fmt: skip
        found += [f"{what} overlaps {other}" for other, box2 in top[k + 1 :] if overlap(box, box2, tol)]
    every = [b for ax in main for b in texts[ax]] + [box for _, box in top]
    every += [ax.get_legend().get_window_extent(renderer) for ax in main if ax.get_legend() is not None]
    c = fig.bbox
    if any(b.x0 < c.x0 - tol or b.y0 < c.y0 - tol or b.x1 > c.x1 + tol or b.y1 > c.y1 + tol for b in every):
        found.append("a text runs off the canvas")
    width, height = fig.get_size_inches()
    if width > style.full_in + TOL_IN or height > style.height_in + TOL_IN:
        found.append(f"canvas {width:.2f} x {height:.2f} in: larger than the medium's {style.full_in:.2f} x "
                     f"{style.height_in:.2f} in")  # fmt: skip
    return found


# --- the report ---
def report(name: str, style_label: str, found: list[str]) -> None:
    """Append one figure's findings in one style to the report file, when the run names one."""
    if path := os.environ.get(REPORT_ENV, "").strip():
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps({"figure": name, "style": style_label, "problems": found}) + "\n")


def summary(path: Path) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """From a report file: style -> (figures checked, findings), and each finding as a line."""
    counts: dict[str, tuple[int, int]] = {}
    lines = []
    for row in map(json.loads, Path(path).read_text(encoding="utf-8").splitlines()):
        checked, found = counts.get(row["style"], (0, 0))
        counts[row["style"]] = (checked + 1, found + len(row["problems"]))
        lines += [f"{row['figure']} ({row['style']}): {p}" for p in row["problems"]]
    return counts, lines


def main(argv: list[str]) -> int:
    """``python tests/layout_check.py REPORT``: figures checked and findings per style; 1 on a finding or none."""
    if not argv or not Path(argv[0]).is_file():
        print(
            f"error: no layout-check report at {argv[:1]} (runs write one where {REPORT_ENV} points)", file=sys.stderr
        )
        return 1
    counts, findings = summary(Path(argv[0]))
    print("\n".join([f"{s}: {c} figures checked, {f} findings" for s, (c, f) in sorted(counts.items())]
                    + [f"  {line}" for line in findings]))  # fmt: skip
    return 1 if findings or not counts else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
