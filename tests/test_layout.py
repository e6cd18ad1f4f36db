"""The layout check finds what makes a figure hard to read, in every preset of a strict run, and nothing regrows a
figure: the canvas is as designed, and the stamp can be left out."""

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


@rounded_inputs
def _figure(frame: pd.DataFrame, note: bool = False, loc: str = "upper left") -> plt.Figure:
    fig, ax = new_figure("column")
    for k in range(3):  # lines across the panel's middle
        ax.plot(frame["x"], frame["y"] + 0.1 * k, color=palette.series(k), label=f"series {k}")
    ax.set_ylim(0, 1)  # a probability axis: room below and above the lines
    ax.legend(loc=loc)
    if note:  # a text fixed on the lines
        ax.text(0.5, 0.5, "a fixed note", transform=ax.transAxes, ha="center", va="center")
    return fig


FRAME = pd.DataFrame({"x": np.linspace(0, 1, 20), "y": 0.5 + 0.02 * np.sin(np.linspace(0, 6, 20))})


def test_texts_over_data_alike_or_pale_entries_off_canvas_and_a_canvas_beyond_its_medium_are_found():
    assert layout_check.problems(_figure(FRAME, loc="lower left")) == []
    assert "'panel 1': the legend covers data" in layout_check.problems(_figure(FRAME, loc="center"))
    fig = _figure(FRAME, note=True)
    ax = fig.axes[0]
    ax.plot([0, 1], [0.9, 0.95], color=palette.series(0), label="another series")  # series 0's colour and dash
    ax.plot([0, 1], [0.1, 0.15], color=palette.tint(palette.BLUE, 0.7), label="a pale tint")
    ax.legend(loc="upper left", ncols=2, bbox_to_anchor=(0, -0.2))
    fig.text(1.02, 0.5, "beyond the edge")
    found = layout_check.problems(fig)
    assert "'panel 1': legend entries 'series 0' and 'another series' look alike" in found
    assert "'panel 1': legend entry 'a pale tint' is too pale on white" in found
    assert "'panel 1': the annotation 'a fixed note' covers data" in found and "a text runs off the canvas" in found
    with styles.using(styles.PRESETS["slides"]):
        tall, _ = new_figure("full", height_in=4.46)  # taller than a 16:9 frame
    assert "canvas 4.96 x 4.46 in: larger than the medium's 4.96 x 3.54 in" in layout_check.problems(tall)
    collapsed, small = plt.subplots(figsize=(1.0, 0.4), layout="constrained")
    small.set_title("a title far too big for its figure", fontsize=40)
    assert any(p.startswith("layout: constrained_layout not applied") for p in layout_check.problems(collapsed))
    plt.close("all")


SPANS = [  # a percentage axis run to 170; a probability axis set to its bounds on purpose; empty decades
    ("linear", [0, 100], (0, 170), True), ("linear", [0.70, 0.75], (0, 1), False),
    ("linear", [0.70, 0.75], (0.6, 0.9), True), ("log", [1e-3, 1e-2], (1e-16, 1e-1), True),
    ("log", [1e-3, 1e-2], (8e-4, 1.3e-2), False),
]  # fmt: skip


@pytest.mark.parametrize("scale, data, limits, stretched", SPANS)
def test_an_axis_much_longer_than_what_it_shows_is_found_unless_a_panel_sharing_it_shows_more(
    scale, data, limits, stretched
):
    fig, (ax, beside) = new_figure("full", ncols=2, sharey=True)
    ax.plot([0, 1], data, "o-")
    ax.set_yscale(scale)
    ax.set_ylim(*limits)
    assert any("'panel 1': the y axis spans" in p for p in layout_check.problems(fig)) == stretched
    beside.plot([0, 1], limits, "o-")  # the shared scale is set by both
    assert not any("'panel 1': the y axis spans" in p for p in layout_check.problems(fig))
    plt.close(fig)


def test_a_strict_run_checks_every_preset_reports_each_and_fails_on_a_finding(out_dir, monkeypatch, tmp_path):
    report = tmp_path / "layout.jsonl"
    monkeypatch.setenv(LAYOUT_CHECK_ENV, "layout_check")
    monkeypatch.setenv(layout_check.REPORT_ENV, str(report))
    with pytest.raises(layout_check.LayoutError, match="covered: the layout check found: paper: .*a fixed note"):
        save_figure(_figure(FRAME, note=True), "covered", provenance="reported", data=FRAME, caption="a test")
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert sorted(r["style"] for r in rows) == sorted(styles.PRESETS) and all(r["problems"] for r in rows)
    assert layout_check.main([str(report)]) == 1
    report.unlink()
    save_figure(_figure(FRAME, loc="lower left"), "fine", provenance="reported", data=FRAME, caption="a test")
    assert layout_check.summary(report) == ({name: (1, 0) for name in styles.PRESETS}, [])
    assert layout_check.main([str(report)]) == 0
    monkeypatch.setenv(LAYOUT_CHECK_ENV, "1")
    with pytest.raises(ValueError, match=f"{LAYOUT_CHECK_ENV}='1': expected the name of an importable module"):
        save_figure(_figure(FRAME), "refused", provenance="reported", data=FRAME, caption="a test")
    assert not list(out_dir.glob("refused*"))


def test_the_canvas_is_as_designed_and_the_stamp_can_be_left_out(out_dir, monkeypatch):
    saved = save_figure(_figure(FRAME), "plain", provenance="reported", data=FRAME, caption="a test")
    png = next(p for p in saved.files if p.suffix == ".png")
    with Image.open(png) as image:
        assert image.size == (975, int(3.25 * 0.618 * 300)) and image.info["Description"] == "reported"
    stamped = png.read_bytes()
    monkeypatch.setenv(styles.STAMP_ENV, "0")
    save_figure(_figure(FRAME), "plain", provenance="reported", data=FRAME, caption="a test")
    with Image.open(png) as image:
        assert png.read_bytes() != stamped and image.info["Description"] == "reported"  # the class stays in the file
