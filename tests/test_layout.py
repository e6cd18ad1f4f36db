"""The layout check finds what makes a figure hard to read (texts over data or each other, alike legend entries,
stretched axes, a canvas larger than its medium), checks every preset in a strict run, and nothing regrows a
figure: the canvas is the style's width, and the stamp can be left out."""

from __future__ import annotations

import json

import layout_check
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from brorl_lib.core.precision import rounded_inputs
from brorl_lib.figures import palette, styles
from brorl_lib.figures.plotting import LAYOUT_CHECK_ENV, new_figure, save_figure


def _lines(n: int = 3, **legend):
    fig, ax = new_figure("column")
    x = np.linspace(0, 1, 50)
    for k in range(n):  # lines across the panel's middle
        ax.plot(x, 0.4 + 0.1 * k + 0.05 * np.sin(6 * x + k), color=palette.series(k), label=f"series {k}")
    ax.set_ylim(0, 1)
    if legend:
        ax.legend(**legend)
    return fig, ax


def test_a_legend_on_data_is_found_and_one_beside_it_is_not():
    fig, _ = _lines(loc="center")
    assert any("the legend covers data" in p for p in layout_check.problems(fig))
    fig, _ = _lines(loc="lower left")
    assert layout_check.problems(fig) == []
    plt.close("all")


def test_two_legend_entries_drawn_alike_and_a_near_white_line_are_found():
    fig, ax = _lines(2)
    ax.plot([0, 1], [0.9, 0.95], color=palette.series(0), label="another series")  # series 0's colour and dash
    ax.plot([0, 1], [0.1, 0.15], color=palette.tint(palette.BLUE, 0.7), label="a pale tint")
    ax.legend(loc="upper left", ncols=2, bbox_to_anchor=(0, -0.2))
    found = layout_check.problems(fig)
    assert "'panel 1': legend entries 'series 0' and 'another series' look alike" in found
    assert "'panel 1': legend entry 'a pale tint' is too pale on white" in found
    ax.lines[2].set_linestyle("--")
    ax.lines[3].set_color(palette.BLUE)
    ax.legend(loc="upper left", ncols=2, bbox_to_anchor=(0, -0.2))
    assert not [p for p in layout_check.problems(fig) if "legend entr" in p]
    plt.close(fig)


@pytest.mark.parametrize(
    "scale, data, limits, stretched",
    [
        ("linear", [0, 100], (0, 170), True),  # a percentage axis run to 170
        ("linear", [0, 100], (0, 105), False),
        ("linear", [0.70, 0.75], (0, 1), False),  # a probability axis set to its bounds on purpose
        ("linear", [0.70, 0.75], (0.6, 0.9), True),
        ("log", [1e-3, 1e-2], (1e-16, 1e-1), True),  # empty decades
        ("log", [1e-3, 1e-2], (8e-4, 1.3e-2), False),
    ],
)
def test_an_axis_much_longer_than_what_it_shows_is_found(scale, data, limits, stretched):
    fig, ax = new_figure("column")
    ax.plot([0, 1], data, "o-")
    ax.set_yscale(scale)
    ax.set_ylim(*limits)
    found = layout_check.problems(fig)
    assert any("the y axis spans" in p for p in found) == stretched, found
    plt.close(fig)


def test_an_annotation_on_data_a_text_off_the_canvas_and_a_canvas_larger_than_its_medium_are_found():
    fig, ax = new_figure("column")
    ax.plot([0, 1, 2, 3], [0, 1, 2, 3], "o-")
    ax.annotate("+107", (1, 1), xytext=(0, 0), textcoords="offset points", ha="center", va="center")
    fig.text(1.02, 0.5, "beyond the edge")
    found = layout_check.problems(fig)
    assert "'panel 1': the annotation '+107' covers data" in found and "a text runs off the canvas" in found
    with styles.using(styles.PRESETS["slides"]):
        tall, _ = new_figure("full", aspect=0.9)  # 4.96 x 4.46 in: taller than a 16:9 frame
    assert "canvas 4.96 x 4.46 in: larger than the medium's 4.96 x 3.54 in" in layout_check.problems(tall)
    plt.close("all")


def test_a_collapsed_layout_is_found():
    fig, ax = plt.subplots(figsize=(1.0, 0.4), layout="constrained")
    ax.set_title("a title far too big for its figure", fontsize=40)
    assert any(p.startswith("layout: constrained_layout not applied") for p in layout_check.problems(fig))
    plt.close(fig)


@rounded_inputs
def _figure(frame: pd.DataFrame, note: bool) -> plt.Figure:
    fig, ax = new_figure("column")
    ax.plot(frame["x"], frame["y"], label="a line")
    ax.legend(loc="upper left")
    if note:  # a text fixed in the middle of the line
        ax.text(0.5, 0.5, "a fixed note", transform=ax.transAxes, ha="center", va="center")
    return fig


def test_a_strict_run_checks_every_preset_reports_each_and_fails_on_a_finding(out_dir, monkeypatch, tmp_path):
    report = tmp_path / "layout.jsonl"
    monkeypatch.setenv(LAYOUT_CHECK_ENV, "layout_check")
    monkeypatch.setenv(layout_check.REPORT_ENV, str(report))
    frame = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})
    with pytest.raises(layout_check.LayoutError, match="covered: the layout check found: paper: .*a fixed note"):
        save_figure(_figure(frame, True), "covered", provenance="reported", data=frame, caption="a test")
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert sorted(r["style"] for r in rows) == sorted(styles.PRESETS) and all(r["problems"] for r in rows)
    assert layout_check.main([str(report)]) == 1
    report.unlink()
    clean = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 0.2]})
    save_figure(_figure(clean, False), "fine", provenance="reported", data=clean, caption="a test")
    assert layout_check.summary(report) == ({name: (1, 0) for name in styles.PRESETS}, [])
    assert layout_check.main([str(report)]) == 0


def test_a_layout_check_that_is_no_module_is_refused_naming_the_variable(out_dir, monkeypatch):
    monkeypatch.setenv(LAYOUT_CHECK_ENV, "1")
    frame = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})
    with pytest.raises(ValueError, match=f"{LAYOUT_CHECK_ENV}='1': expected the name of an importable module"):
        save_figure(_figure(frame, False), "refused", provenance="reported", data=frame, caption="a test")
    assert not list(out_dir.glob("refused*"))


def test_the_canvas_is_the_style_width_as_designed_and_the_stamp_can_be_left_out(out_dir, monkeypatch):
    frame = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})
    saved = save_figure(_figure(frame, False), "plain", provenance="reported", data=frame, caption="a test")
    png = next(p for p in saved.files if p.suffix == ".png")
    with Image.open(png) as image:
        assert image.size == (975, int(3.25 * 0.618 * 300))  # as designed, never regrown
        assert image.info["Description"] == "reported"
    stamped = png.read_bytes()
    monkeypatch.setenv(styles.STAMP_ENV, "0")
    save_figure(_figure(frame, False), "plain", provenance="reported", data=frame, caption="a test")
    assert png.read_bytes() != stamped
    with Image.open(png) as image:
        assert image.info["Description"] == "reported"  # the class stays in the file
