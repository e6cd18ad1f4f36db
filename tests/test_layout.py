"""One palette with meaning, the layout check (legends and annotations against data, texts against the
canvas, every preset in a strict run), the canvas fixed at the style's width, the stamp that can be left
out, and the classes a figure may carry."""

from __future__ import annotations

import json
import warnings

import layout_check
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from PIL import Image

from brorl_lib.core.artifacts import PROVENANCE, check_artifact, class_text, stamp_text
from brorl_lib.core.precision import rounded_inputs
from brorl_lib.figures import layout, palette, styles
from brorl_lib.figures.plotting import LAYOUT_CHECK_ENV, fit_texts, new_figure, save_figure


# --- the palette ---
def test_the_paper_arms_and_their_n_share_one_colour_everywhere():
    assert palette.n_colour(16) == palette.arm("ProRL") != palette.arm("BroRL") == palette.n_colour(512)
    fixed = [palette.n_colour(n) for n in palette.N_COLOURS]
    assert len(set(fixed)) == len(fixed)  # every N the profiles draw is told apart
    assert palette.n_colour(1000) == palette.n_colour(1000) not in fixed  # an N of one's own: a fixed shade too


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: palette.arm("GRPO"), "arm='GRPO' has no colour: known arms are ProRL, BroRL"),
        (lambda: palette.n_colour(0), "n=0 has no colour"),
        (lambda: palette.tint("#000000", 1.0), "amount=1.0 is not allowed"),
    ],
)
def test_the_palette_refuses_what_it_cannot_colour(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_tint_lightens_towards_white():
    assert palette.tint("#000000", 0.5) == "#808080" and palette.tint(palette.BLUE, 0.0) == palette.BLUE


# --- the check ---
def _line_through_the_middle(legend_loc: str | None = None):
    fig, ax = new_figure("column")
    x = np.linspace(0, 1, 50)
    for k in range(6):  # lines that fill the panel, so no corner is free
        ax.plot(x, 0.15 * k + 0.1 * np.sin(6 * x + k), label=f"a long series label {k}")
    if legend_loc:
        ax.legend(loc=legend_loc)
    return fig, ax


def test_a_legend_on_data_is_found_and_moved_off_it():
    fig, ax = _line_through_the_middle("center")
    assert any("legend covers data" in p for p in layout_check.problems(fig))
    fit_texts(fig)
    assert layout_check.problems(fig) == []
    assert fig.get_size_inches()[0] == styles.PAPER.column_in  # moved, not widened
    plt.close(fig)


def test_a_legend_that_fits_nowhere_inside_goes_under_the_axis_which_keeps_its_limits():
    fig, ax = new_figure("column")
    x = np.linspace(0, 1, 200)
    for k in range(6):  # lines over the whole panel: no corner or edge is free
        ax.plot(x, (x * (k + 1) + 0.37 * k) % 1, label=f"a long series name {k}")
    ax.set_ylim(0, 1)
    ax.legend(loc="center")
    fit_texts(fig)
    assert ax.get_ylim() == (0, 1)  # never stretched to make room
    renderer = layout.drawn(fig)
    assert ax.get_legend().get_window_extent(renderer).y1 < ax.get_window_extent(renderer).y0
    assert layout_check.problems(fig) == []
    plt.close(fig)


def test_a_lines_part_beyond_the_axis_limits_is_not_data_a_legend_covers():
    fig, ax = new_figure("column")
    ax.plot([0, 1, 1.5], [0, 1, -5], label="falls off the panel")
    ax.set_ylim(0, 1)
    ax.set_xlim(0, 2)
    ax.legend(loc="upper right", bbox_to_anchor=(1.0, -0.3))  # under the axis, where the clipped fall would run
    renderer = layout.drawn(fig)
    inside = ax.get_window_extent(renderer)
    assert all(inside.y0 - 1 <= y <= inside.y1 + 1 for _, y in layout.drawn_data(ax)[0])
    assert not any("legend covers data" in p for p in layout_check.problems(fig))
    plt.close(fig)


@pytest.mark.parametrize(
    "scale, data, limits, stretched",
    [
        ("linear", [0, 100], (0, 170), True),  # a percentage axis run to 170
        ("linear", [0, 100], (0, 105), False),
        ("linear", [-0.05, 0.25], (-0.1, 1.0), True),  # a change axis run to +1 for data up to 0.25
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
    assert not any("the x axis spans" in p for p in found)
    plt.close(fig)


def test_a_bar_of_height_zero_and_a_value_label_are_part_of_what_an_axis_shows():
    fig, (bars, labelled) = plt.subplots(1, 2, figsize=(6, 2))
    bars.bar(np.arange(4), [100, 100, 10, 0])  # the last category's value is zero
    labelled.barh(np.arange(2), [0.009, -0.0007])
    for y, v in enumerate([0.009, -0.0007]):
        labelled.annotate(f"{v:+.2e}", (max(v, 0), y), xytext=(3, 0), textcoords="offset points", va="center")
    labelled.set_xlim(-0.001, 0.0135)  # room for the labels
    assert [p for ax in (bars, labelled) for p in layout_check.axis_spans(ax, layout.drawn(fig))] == []
    bars.set_xlim(-0.5, 7)  # four categories on an axis of eight
    assert layout_check.axis_spans(bars, layout.drawn(fig)) == ["the x axis spans 2.0 times what it shows"]
    plt.close(fig)


def test_an_annotation_on_data_is_found_and_a_point_label_moves_beside_its_point():
    fig, ax = new_figure("column")
    ax.plot([0, 1, 2, 3], [0, 1, 2, 3], "o-")
    note = ax.annotate("+107", (1, 1), xytext=(0, 0), textcoords="offset points", ha="center", va="center")
    assert any("annotation '+107' covers data" in p for p in layout_check.problems(fig))
    fit_texts(fig)
    assert layout_check.problems(fig) == [] and note.xyann != (0, 0)
    plt.close(fig)


def test_texts_off_the_canvas_and_a_canvas_wider_than_the_style_are_found():
    fig, ax = new_figure("column")
    ax.plot([0, 1], [0, 1])
    fig.text(1.02, 0.5, "beyond the edge")
    fig.set_size_inches(7.5, 2.0)
    found = layout_check.problems(fig)
    assert "a text runs off the canvas" in found
    assert "canvas 7.50 in wide: wider than the style's 6.75 in" in found
    plt.close(fig)


@rounded_inputs
def _covered(frame: pd.DataFrame) -> plt.Figure:
    """A text fixed in the middle of a line: no placement can move it."""
    fig, ax = new_figure("column")
    ax.plot(frame["x"], frame["y"])
    ax.text(0.5, 0.5, "a fixed note", transform=ax.transAxes, ha="center", va="center")
    return fig


def test_a_layout_check_that_is_no_module_is_refused_naming_the_variable(out_dir, monkeypatch):
    monkeypatch.setenv(LAYOUT_CHECK_ENV, "1")  # the old spelling of make nbval's setting
    frame = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})
    fig, ax = new_figure("column")
    ax.plot(frame["x"], frame["y"])
    with pytest.raises(ValueError, match=f"{LAYOUT_CHECK_ENV}='1': expected the name of an importable module"):
        save_figure(fig, "refused", provenance="reported", data=frame, caption="a test")
    assert not list(out_dir.glob("refused*"))


def test_a_strict_run_checks_every_preset_reports_each_and_fails_on_a_finding(out_dir, monkeypatch, tmp_path):
    report = tmp_path / "layout.jsonl"
    monkeypatch.setenv(LAYOUT_CHECK_ENV, "layout_check")
    monkeypatch.setenv(layout_check.REPORT_ENV, str(report))
    frame = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})
    with pytest.raises(layout_check.LayoutError, match="covered: the layout check found: paper: .*a fixed note"):
        save_figure(_covered(frame), "covered", provenance="reported", data=frame, caption="a test")
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert sorted(r["style"] for r in rows) == sorted(styles.PRESETS)
    assert all(r["problems"] for r in rows)
    assert layout_check.main([str(report)]) == 1

    report.unlink()
    clean = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 0.2]})

    @rounded_inputs
    def fine(frame):
        fig, ax = new_figure("column")
        ax.plot(frame["x"], frame["y"], label="a line")
        ax.legend(loc="upper left")
        return fig

    save_figure(fine(clean), "fine", provenance="reported", data=clean, caption="a test")
    counts, findings = layout_check.summary(report)
    assert counts == {name: (1, 0) for name in styles.PRESETS} and findings == []
    assert layout_check.main([str(report)]) == 0


def test_the_canvas_is_the_style_width_and_the_stamp_can_be_left_out(out_dir, monkeypatch):
    frame = pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0]})

    def draw():
        fig, axes = new_figure("full", ncols=2)
        for ax in axes:
            ax.plot(frame["x"], frame["y"])
            ax.set_title("a title far too long to sit on one line above a panel this narrow", loc="left")
        return fig

    saved = save_figure(draw(), "wide", provenance="reported", data=frame, caption="a test")
    png = next(p for p in saved.files if p.suffix == ".png")
    with Image.open(png) as image:
        assert image.size[0] == round(styles.PAPER.full_in * 300)  # wrapped, never widened
        assert image.info["Description"] == "reported"
    stamped = png.read_bytes()
    monkeypatch.setenv(styles.STAMP_ENV, "0")
    saved = save_figure(draw(), "wide", provenance="reported", data=frame, caption="a test")
    assert png.read_bytes() != stamped
    with Image.open(png) as image:
        assert image.info["Description"] == "reported"  # the class stays in the file


# --- classes ---
def test_a_reported_artifact_from_elsewhere_names_its_source_and_no_other_class_takes_one():
    check_artifact("blog", "reported", basis="the authors' blog")
    assert class_text("reported", None, "the authors' blog") == (
        "reported: numbers copied from the authors' blog, not from the paper"
    )
    assert stamp_text("reported", None, "the authors' blog") == "reported, not from the paper"
    assert class_text("reported") == PROVENANCE["reported"]
    with pytest.raises(ValueError, match="basis='x' is for provenance='estimate'"):
        check_artifact("a", "reproduced", basis="x")


def test_a_quick_profile_run_is_never_stamped_reproduced():
    from brorl_lib.core import variants
    from brorl_lib.core.profiles import load_profile
    from brorl_lib.simulator import report as sr

    quick = sr.SimulatorConfig()  # the defaults are the quick profile
    assert variants.classify("reproduced", quick) == ("scaled-down", None)
    paper = sr.SimulatorConfig(**load_profile("paper")["02_simulator"]["parameters"])
    assert variants.at_paper_scale(paper) and variants.classify("reproduced", paper) == ("reproduced", None)


def test_a_collapsed_layout_is_quiet_while_texts_are_fitted_and_found_by_the_check():
    fig, ax = plt.subplots(figsize=(1.0, 0.4), layout="constrained")
    ax.set_title("a title far too big for its figure", fontsize=40)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning would raise here
        layout.drawn(fig)
    assert any(p.startswith("layout: constrained_layout not applied") for p in layout_check.problems(fig))
    plt.close(fig)
