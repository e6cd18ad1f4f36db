"""The layout check: what makes a drawn figure hard to read, found by drawing it and comparing boxes.

``problems(fig)`` lists, in words, every finding of one drawn figure:

- texts of one panel over another panel's texts or plotting area, or over a figure-level text (the title,
  the provenance stamp, a figure legend);
- tick labels of one axis over each other;
- a legend or an annotation over the data of a panel (lines, markers, error bars, bars; reference lines
  such as ``axhline`` are guides, not data);
- an axis more than ``MAX_AXIS_SPAN`` times as long as what it shows (its data, with zero, or the whole scale
  of a probability, a change of one or a percentage when the axis is set to it): no stretched linear axis, no
  empty decades of a log axis;
- a text outside the canvas, a canvas wider than its style's width, a plotting area under ``MIN_AXES_EM`` ems,
  or a layout matplotlib could not make.

``make nbval`` runs the notebooks with this module as ``figures.plotting``'s layout check
(``BRORL_LAYOUT_CHECK=layout_check``, tests/ on ``PYTHONPATH``): every figure a notebook saves is checked, redrawn
in every preset style, each finding fails its cell, and every result is appended to the file
``BRORL_LAYOUT_REPORT`` names, which ``python tests/layout_check.py REPORT`` sums per style.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.patches import Rectangle
from matplotlib.text import Annotation
from matplotlib.transforms import Bbox

from brorl_lib.core import precision
from brorl_lib.figures import styles
from brorl_lib.figures.layout import (
    MIN_AXES_EM,
    boxes_overlap,
    covers_data,
    drawn,
    drawn_data,
    extents,
    shown_texts,
    text_boxes,
    ticks_crowded,
)
from brorl_lib.figures.plotting import fit_texts, stamp_provenance, style_of

REPORT_ENV = "BRORL_LAYOUT_REPORT"  # a JSON-lines file the findings (and clean figures) are appended to
_CANVAS_TOL_IN = 0.005  # a canvas may exceed its style's width by this much (rounding of pixel sizes)
MAX_AXIS_SPAN = 1.5  # an axis may be at most this many times as long as what it shows (our choice)
WHOLE_SCALES = ((0.0, 1.0), (-1.0, 1.0), (0.0, 100.0))  # a linear axis may be set to these on purpose


class LayoutError(RuntimeError):
    """A figure with layout findings."""


def check(fig: mpl.figure.Figure, name: str, provenance: str, changed: dict | None, basis: str = "") -> None:
    """The check of a figure about to be saved (``figures.plotting.save_figure`` calls it): in the style in force
    and redrawn in every other preset, each result reported; ``LayoutError`` on any finding."""
    style = style_of(fig)
    findings = {style.label: problems(fig)}
    for other in styles.PRESETS.values():
        if other.label in findings:
            continue
        again = redraw(fig, other)
        if again is None:
            findings[other.label] = [f"cannot be redrawn in {other.label}: not drawn by a rounded_inputs function"]
            continue
        stamp_provenance(again, provenance, changed, basis)
        fit_texts(again)
        findings[other.label] = problems(again, other)
        plt.close(again)
    for label, found in findings.items():
        report(name, label, found)
    bad = {label: found for label, found in findings.items() if found}
    if bad:
        lines = "; ".join(f"{label}: {', '.join(found)}" for label, found in bad.items())
        raise LayoutError(f"{name}: the layout check found: {lines}")


def redraw(fig: mpl.figure.Figure, style: styles.FigureStyle) -> mpl.figure.Figure | None:
    """``fig`` drawn again by the figure function that made it, from the same inputs, in ``style`` (None when a
    function outside ``core.precision.rounded_inputs`` drew it)."""
    call = precision.call_of(fig)
    if call is None:
        return None
    plot, args, kwargs = call
    with styles.using(style):
        return plot(*args, **kwargs)


def _in_data(text) -> bool:
    """Whether ``text`` is placed at a point in data coordinates (a value label, an annotated point)."""
    if isinstance(text, Annotation):
        return text.xycoords == "data"
    return text.get_transform() == text.axes.transData


def _coords(boxes: list) -> np.ndarray:
    return np.array([c for b in boxes for c in ((b.x0, b.y0), (b.x1, b.y1))]).reshape(-1, 2)


def axis_spans(ax, renderer=None) -> list[str]:
    """Each axis of the drawn ``ax`` more than ``MAX_AXIS_SPAN`` times as long, on screen, as what it shows: its
    data (lines, markers, error bars, bars, a bar of height zero too, ``fill_between`` bands) and the texts placed
    at data points, inside its limits, with zero when the axis holds it, and its limits when they are one of
    ``WHOLE_SCALES``; an axis with no data, or one value, is not judged."""
    points, _ = drawn_data(ax)
    bars = [p.get_window_extent(renderer) for p in ax.patches if isinstance(p, Rectangle) and p.get_visible()]
    shown = [points, _coords(bars)]
    for coll in ax.collections:
        if isinstance(coll, PolyCollection) and coll.get_visible() and coll.get_transform() == ax.transData:
            shown += [ax.transData.transform(path.vertices) for path in coll.get_paths() if len(path.vertices)]
    data = np.concatenate(shown)
    labels = _coords([t.get_window_extent(renderer) for t in shown_texts(ax.texts) if _in_data(t)])
    area = ax.get_window_extent(renderer)
    found = []
    for k, which, axis in ((0, "x", ax.xaxis), (1, "y", ax.yaxis)):
        low, high = (area.x0, area.x1) if k == 0 else (area.y0, area.y1)
        values = np.r_[data[:, k], labels[:, k]]
        inside = np.clip(values[(values >= low - 1) & (values <= high + 1)], low, high)  # NaN drops out
        if not len(data) or inside.size == 0 or np.ptp(inside) < 1:
            continue
        if axis.get_scale() == "linear":
            limits = sorted(ax.get_xlim() if k == 0 else ax.get_ylim())
            refs = [0.0] if limits[0] <= 0 <= limits[1] else []
            refs += limits if any(np.allclose(limits, whole) for whole in WHOLE_SCALES) else []
            other = (ax.get_ylim() if k == 0 else ax.get_xlim())[0]  # any value on the other axis
            pairs = [(r, other) if k == 0 else (other, r) for r in refs]
            if pairs:
                base = ax.transData.transform(pairs)[:, k]
                inside = np.r_[inside, base[(base >= low - 1) & (base <= high + 1)]]
        span = (high - low) / max(np.ptp(inside), 1e-9)
        if span > MAX_AXIS_SPAN:
            found.append(f"the {which} axis spans {span:.1f} times what it shows")
    return found


def _figure_texts(fig) -> list:
    """The figure's own texts (its title is one of them)."""
    return shown_texts(fig.texts)


def _style_width_problem(fig, style) -> list[str]:
    width = fig.get_size_inches()[0]
    widths = (style.column_in, style.full_in)
    if all(width > w + _CANVAS_TOL_IN for w in widths) or width > max(widths) + _CANVAS_TOL_IN:
        return [f"canvas {width:.2f} in wide: wider than the style's {max(widths):g} in"]
    return []


def problems(fig: mpl.figure.Figure, style=None) -> list[str]:
    """Every finding of the drawn ``fig`` (see the module's doc), in words; empty when it reads well.
    ``style`` (a ``figures.styles.FigureStyle``) gives the em and the widths: default, the style it was drawn in."""
    style = style or styles.drawn_in(fig)
    found = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        renderer = drawn(fig, quiet=False)
    found += [f"layout: {w.message}" for w in caught if "layout" in str(w.message).lower()]
    em_px = style.font_pt / 72 * fig.dpi
    tol = 0.5 / 72 * fig.dpi  # half a point
    main = [ax for ax in fig.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]
    names = {ax: (ax.get_title(loc="left") or ax.get_title() or f"panel {i + 1}") for i, ax in enumerate(main)}
    areas = {ax: ax.get_window_extent(renderer) for ax in main}
    boxes = {ax: text_boxes(ax, renderer) for ax in main}
    for ax in main:
        box = areas[ax]
        if box.width < MIN_AXES_EM * em_px or box.height < MIN_AXES_EM * em_px:
            found.append(
                f"{names[ax]!r}: plotting area {box.width / fig.dpi:.2f} x {box.height / fig.dpi:.2f} in is too small"
            )
    for i, a in enumerate(main):
        for b in main[i + 1 :]:
            if boxes_overlap(areas[a], areas[b], tol):
                continue  # twin or inset axes: one panel drawn over another on purpose
            clash = any(boxes_overlap(t, u, tol) for t in boxes[a] for u in boxes[b])
            clash |= any(boxes_overlap(t, areas[b], tol) for t in boxes[a])
            clash |= any(boxes_overlap(u, areas[a], tol) for u in boxes[b])
            if clash:
                found.append(f"texts of {names[a]!r} and {names[b]!r} overlap")
    for ax in main:
        for axis, which in ((ax.xaxis, "x"), (ax.yaxis, "y")):
            if ticks_crowded(axis, renderer, tol):
                found.append(f"{names[ax]!r}: {which} tick labels overlap each other")
    found += _over_data(fig, main, names, renderer, tol)
    found += [f"{names[ax]!r}: {p}" for ax in main for p in axis_spans(ax, renderer)]
    found += _figure_level(fig, main, names, boxes, areas, renderer, tol)
    found += _style_width_problem(fig, style)
    return found


def _over_data(fig, main, names, renderer, tol) -> list[str]:
    """Legends and annotations over a panel's data."""
    found = []
    data = {ax: drawn_data(ax) for ax in main}
    texts = {ax: text_boxes(ax, renderer) + extents(shown_texts(ax.texts), renderer) for ax in main}
    for ax in main:
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            box = legend.get_window_extent(renderer)
            if covers_data(box, *data[ax], tol):
                found.append(f"{names[ax]!r}: the legend covers data")
            if any(boxes_overlap(box, t, tol) for other in main for t in texts[other]):
                found.append(f"{names[ax]!r}: the legend covers a text")
            if any(boxes_overlap(box, other.get_window_extent(renderer), tol) for other in main if other is not ax):
                found.append(f"{names[ax]!r}: the legend runs onto another panel")
        for text in shown_texts(ax.texts):
            box = text.get_window_extent(renderer)
            if covers_data(box, *data[ax], tol):
                found.append(f"{names[ax]!r}: the annotation {text.get_text()[:40]!r} covers data")
    for legend in fig.legends:
        box = legend.get_window_extent(renderer)
        for ax in main:
            if covers_data(box, *data[ax], tol):
                found.append(f"the figure legend covers data of {names[ax]!r}")
    return found


def _figure_level(fig, main, names, boxes, areas, renderer, tol) -> list[str]:
    """Figure-level texts (title, stamp) and legends against the panels; every text inside the canvas."""
    found = []
    canvas = fig.bbox
    top = [(f"the figure text {t.get_text()[:40]!r}", t.get_window_extent(renderer)) for t in _figure_texts(fig)]
    top += [("the figure legend", lg.get_window_extent(renderer)) for lg in fig.legends]
    for what, box in top:
        for ax in main:
            if any(boxes_overlap(box, t, tol) for t in boxes[ax]) or boxes_overlap(box, areas[ax], tol):
                found.append(f"{what} overlaps {names[ax]!r}")
    for k, (what, box) in enumerate(top):
        for other, box2 in top[k + 1 :]:
            if boxes_overlap(box, box2, tol):
                found.append(f"{what} overlaps {other}")
    every = [b for ax in main for b in boxes[ax]] + [box for _, box in top]
    every += [ax.get_legend().get_window_extent(renderer) for ax in main if ax.get_legend() is not None]
    inside = Bbox.from_extents(canvas.x0 - tol, canvas.y0 - tol, canvas.x1 + tol, canvas.y1 + tol)
    if any(not (inside.contains(b.x0, b.y0) and inside.contains(b.x1, b.y1)) for b in every):
        found.append("a text runs off the canvas")
    return found


def report(name: str, style_label: str, found: list[str]) -> None:
    """Append one figure's findings in one style to the report file, when the run names one."""
    path = os.environ.get(REPORT_ENV, "").strip()
    if not path:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"figure": name, "style": style_label, "problems": found}) + "\n")


def summary(path: Path) -> tuple[dict[str, tuple[int, int]], list[str]]:
    """From a report file: style -> (figures checked, findings), and each finding as a line."""
    counts: dict[str, list[int]] = {}
    lines = []
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        row = json.loads(raw)
        c = counts.setdefault(row["style"], [0, 0])
        c[0] += 1
        c[1] += len(row["problems"])
        lines += [f"{row['figure']} ({row['style']}): {p}" for p in row["problems"]]
    return {k: (v[0], v[1]) for k, v in counts.items()}, lines


def main(argv: list[str]) -> int:
    """``python tests/layout_check.py REPORT``: figures checked and findings per style; 1 on a finding or none."""
    path = Path(argv[0]) if argv else None
    if path is None or not path.is_file():
        print(f"error: no layout-check report at {path} (runs write one where {REPORT_ENV} points)", file=sys.stderr)
        return 1
    counts, findings = summary(path)
    for style, (checked, found) in sorted(counts.items()):
        print(f"{style}: {checked} figures checked, {found} findings")
    for line in findings:
        print(f"  {line}")
    return 1 if findings or not counts else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
