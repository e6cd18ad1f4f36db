"""Figures in another style: presets and style files, refusals naming the flag, metadata that records the
style, Figure 4 in every preset, and one styled run of notebook 03 into a folder of its own."""

from __future__ import annotations

import json

import layout_check
import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from brorl_lib.core.artifacts import read_record
from brorl_lib.core.paths import FIGURES_DIR
from brorl_lib.figures import palette, styles
from brorl_lib.figures.plotting import new_figure, pt, save_figure
from brorl_lib.pipeline import manifest
from brorl_lib.pipeline.cli import main
from brorl_lib.rlvr import study_plots as rlvr_plots
from brorl_lib.simulator import plots as simulator_plots


def _runs() -> pd.DataFrame:
    """A small Figure 3 frame: two seeds, three N, 40 steps."""
    rows = []
    for seed in (0, 1):
        for n in (4, 512, 51200):
            for step in range(40):
                rows.append(
                    {
                        "seed": seed,
                        "N": n,
                        "step": step,
                        "correct_mass": 0.6 + 1e-4 * step * np.log(n) + 1e-5 * seed,
                        "pct_improved": min(100.0, step * np.log(n)),
                        "worst_drop": -1e-7 * step / np.log(n),
                    }
                )
    return pd.DataFrame(rows)


# --- presets and style files ---
def test_presets_resolve_by_name_with_their_widths_and_type():
    assert styles.resolve("paper") is styles.PAPER and styles.PAPER.is_default
    assert (styles.PAPER.column_in, styles.PAPER.full_in, styles.PAPER.font_pt) == (3.25, 6.75, 8.0)
    journal, slides, times = (styles.resolve(n) for n in ("journal", "slides", "times"))
    assert journal.full_in < styles.PAPER.full_in and journal.font_pt > 8
    assert slides.full_in < styles.PAPER.full_in and slides.font_pt == 9  # a beamer slide, 16 cm wide
    assert times.rc["font.serif"] == ["STIXGeneral"] and (times.full_in, times.height_in) == (6.75, 9.0)
    assert slides.height_in == 3.54 and not journal.is_default  # a 16:9 frame's height


def test_a_style_file_sets_the_width_and_scales_the_sizes(tmp_path):
    path = tmp_path / "venue.mplstyle"
    path.write_text("figure.figsize: 3.4, 2.5  # the venue's column\nfont.size: 10\naxes.edgecolor: '#333333'\n")
    style = styles.resolve(str(path))
    assert (style.column_in, style.full_in) == (3.4, 3.4)
    assert style.rc["axes.titlesize"] == 10 and style.rc["xtick.labelsize"] == pytest.approx(8.75)
    assert style.rc["axes.edgecolor"] == "#333333"  # a '#' inside quotes is a colour, not a comment
    assert style.rc["axes.grid"] is True  # the rest of the paper style stays
    assert style.label.startswith("venue.mplstyle (sha256 ") and style.scale == 1.25
    relative = styles.resolve("venue.mplstyle", base=tmp_path)
    assert relative.label == style.label


BAD_STYLE_FILES = {  # what bad.mplstyle holds -> what the refusal says
    "lines.linewidth 2\n": "line 1 ('lines.linewidth 2'): expected 'key: value'",
    "font.sise: 9\n": "'font.sise' is not a matplotlib setting",
    "font.size: big\n": "Could not convert 'big' to float",
    "backend: agg\n": "'backend' is not part of a figure's look",
    "# nothing\n\n": "the style file sets nothing",
    "font.family: Nonexistent Sans\n": "font family 'Nonexistent Sans' is not installed",
    "figure.figsize: 0.3, 2\n": "figure.figsize width 0.3 in is not allowed",
    "font.size: 90\n": "font.size 90 is not allowed",
    b"\xff\xfe\x00": "cannot read the style file",
}


@pytest.mark.parametrize(
    "text, content, message",
    [
        ("jornal", None, "--style 'jornal' is not a preset (paper, journal, slides, times) or an existing"),
        ("missing/venue.mplstyle", None, "no such style file"),
    ]
    + [("bad.mplstyle", content, message) for content, message in BAD_STYLE_FILES.items()],
)
def test_bad_styles_are_refused_naming_the_flag(tmp_path, text, content, message):
    if content is not None:
        target = tmp_path / text
        target.write_bytes(content) if isinstance(content, bytes) else target.write_text(content)
    with pytest.raises(ValueError, match="^--style ") as err:
        styles.resolve(text, base=tmp_path)
    assert message in str(err.value)


def test_cli_refuses_bad_styles_and_figures_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", "03_paper_tables", "--style", "jornal", "--out", str(out)]) == 2
    assert "--style 'jornal' is not a preset" in capsys.readouterr().err
    before = (FIGURES_DIR / manifest.MANIFEST_FILE).read_bytes()
    for argv in (["--style", "journal"], ["--svg"], ["--style", "slides", "--out", str(FIGURES_DIR / "x")]):
        assert main(["run", "03_paper_tables", *argv]) == 2
        err = capsys.readouterr().err
        assert "never figures/" in err and argv[0] in err
    assert not out.exists() and not (FIGURES_DIR / "x").exists()
    assert (FIGURES_DIR / manifest.MANIFEST_FILE).read_bytes() == before


def test_formats_are_pdf_and_png_and_svg_on_request():
    assert styles.check_formats([]) == ("pdf", "png")
    assert styles.check_formats("svg,pdf") == ("pdf", "png", "svg")
    with pytest.raises(ValueError, match="--formats eps is not allowed"):
        styles.check_formats(["eps"])


def test_switching_styles_leaves_nothing_behind():
    new_figure("column")
    paper = {k: plt.rcParams[k] for k in ("font.family", "mathtext.fontset", "font.size")}
    with styles.using(styles.PRESETS["times"]):
        new_figure("column")
        assert plt.rcParams["mathtext.fontset"] == "stix"
    new_figure("column")
    assert {k: plt.rcParams[k] for k in paper} == paper
    assert pt(6) == 6
    with styles.using(styles.PRESETS["slides"]):
        assert pt(6) == pytest.approx(6 * 9 / 8)


# --- metadata ---
def _saved(out_dir, style=None, formats=None, monkeypatch=None):
    if formats:
        monkeypatch.setenv(styles.FORMATS_ENV, formats)
    with styles.using(style or styles.PAPER):
        fig, ax = new_figure("column")
        ax.plot([0, 1], [0, 1])
        saved = save_figure(fig, "line", provenance="reproduced", data=pd.DataFrame({"x": [0, 1]}), caption="c")
    plt.close(fig)
    return {p.suffix: p.read_bytes() for p in saved.files}


def test_a_styled_figure_records_its_style_in_every_file_and_the_record(out_dir, monkeypatch):
    files = _saved(out_dir, styles.PRESETS["journal"], "pdf,png,svg", monkeypatch)
    assert set(files) == {".pdf", ".png", ".svg", ".csv"}
    for suffix in (".pdf", ".png", ".svg"):
        assert b"brorl_lib; style journal" in files[suffix], suffix
    assert read_record(out_dir)[0]["style"] == "journal"
    again = _saved(out_dir, styles.PRESETS["journal"], "pdf,png,svg", monkeypatch)
    assert again == files  # byte-stable, SVG included


def test_the_paper_style_writes_what_it_always_wrote(out_dir):
    files = _saved(out_dir)
    assert set(files) == {".pdf", ".png", ".csv"}
    assert b"style" not in files[".pdf"] and b"style" not in files[".png"]
    assert "style" not in read_record(out_dir)[0]


# --- a figure no notebook run fills: notebook 05's Figure 4, in every preset ---
def _fig4_points() -> pd.DataFrame:
    """Notebook 05's Figure 4 points for all nine panels (no run at the paper's scale is committed)."""
    from brorl_lib.facts import reported

    tasks = reported.load("figure4_tasks")["task"]
    return pd.DataFrame(
        [
            {"task": t, "method": m, "hours": h, "step": h, "pass_at_1": 0.3 + 0.001 * h, "source": "run r"}
            for t in tasks
            for m in ("ProRL", "BroRL")
            for h in (0, 60, 120)
        ]
    )


def test_figure4s_nine_panels_read_well_in_every_preset():
    """The notebooks' own figures are drawn in every preset by ``make nbval`` (``BRORL_LAYOUT_CHECK=layout_check``),
    which fails on a finding; their committed Figure 4 has no run at the paper's scale to fill its panels."""
    from brorl_lib.verl_recipe import plots as verl_plots

    for style in styles.PRESETS.values():
        with styles.using(style):
            fig = verl_plots.figure4(_fig4_points())
        assert layout_check.problems(fig, style) == [], style.label
        plt.close(fig)


# --- one styled run, end to end ---
def test_notebook_03_in_the_journal_style_with_svg_goes_to_its_own_folder(tmp_path, capfd):
    out = tmp_path / "journal"
    before = (FIGURES_DIR / manifest.MANIFEST_FILE).read_bytes()
    argv = ["run", "03_paper_tables", "--style", "journal", "--svg", "--out", str(out)]
    assert main([*argv, "-p", "max_rollouts", "256"]) == 0
    printed = capfd.readouterr()
    assert "a variant of the quick profile (max_rollouts=256)" in printed.out
    assert "warning:" not in printed.out + printed.err  # no layout problem in any figure
    entries = manifest.load(out)["artifacts"]
    figures = sorted(f for f in entries if f.endswith(".svg"))
    assert figures == ["fig1_score_vs_time.svg", "table2_pass_rate_model.svg", "table2_throughput_roofline.svg"]
    for name in figures:
        stem = name[:-4]
        for suffix in (".pdf", ".png", ".svg"):
            assert b"style journal" in (out / f"{stem}{suffix}").read_bytes()
            assert entries[f"{stem}{suffix}"]["style"] == "journal"
    # the changed parameter is listed beside the model's basis (an estimate stays one); the paper's numbers stay
    model = entries["table2_pass_rate_model.png"]
    assert model["provenance"] == "estimate"
    assert model["variant"] == {"profile": "quick", "changed": {"max_rollouts": 256}}
    assert "at N=16 and 512; the quick profile's parameters except max_rollouts=256" in model["caption"]
    assert entries["fig1_score_vs_time.png"]["provenance"] == "reported" and "variant" not in entries["table3_math.md"]
    assert (out / "notebooks" / "03_paper_tables.ipynb").is_file()  # the executed notebook stays with its files
    assert (FIGURES_DIR / manifest.MANIFEST_FILE).read_bytes() == before
    assert json.loads((out / manifest.MANIFEST_FILE).read_text())["schema"] == manifest.SCHEMA


# --- an explorer's save ---
def test_save_figure_in_an_explorer_re_draws_in_the_chosen_style(tmp_path):
    from brorl_lib.explore import controls
    from brorl_lib.explore.interact import Explorer
    from brorl_lib.simulator import explorer as sim_explorer
    from brorl_lib.simulator import report as sr

    def draw(params):
        fig, axes = new_figure("full", aspect=0.3, ncols=3)
        for ax in axes:
            ax.set_title("Correct prob. mass vs steps", loc="left")
            ax.plot([0, 1], [0, params["_config"].lr])
        return fig

    base = sim_explorer.start_config(sr.SimulatorConfig())
    cc = controls.ConfigControls(base, {"lr": {"low": 1e-4, "high": 1e-2, "log": True}})
    view = Explorer(draw, cc.all, read=cc.read, name="v", provenance="scaled-down")
    with pytest.raises(ValueError, match="style 'jornal' is not a preset"):
        view.save(tmp_path, style="jornal")
    assert not any(tmp_path.iterdir())  # refused before anything is written
    files = view.save(tmp_path, style="journal", svg=True)
    assert [f.name for f in files] == ["v.pdf", "v.png", "v.svg", "v.json"]
    sidecar = json.loads(files[-1].read_text())
    assert sidecar["style"] == "journal" and b"style journal" in files[0].read_bytes()
    assert sidecar["provenance"] == "variant"  # the explorer's start is not a profile's parameters
    assert view.figure.get_size_inches()[0] == styles.PAPER.full_in  # the figure on screen is untouched


def test_the_kl_controls_share_their_colour_the_weaker_weight_a_tint_of_it():
    label = "BroRL N=512, KL {}"
    strong = rlvr_plots._arm_style("N512_kl1", 512, label.format(1))
    weak = rlvr_plots._arm_style("N512_kl0.1", 512, label.format(0.1))
    assert strong == palette.control("KL-anchored BroRL") and weak.colour == palette.tint(strong.colour, 0.3)
    assert strong.dash == weak.dash == palette.CONTROLS["KL-anchored BroRL"][1]


def test_the_paper_style_is_its_mplstyle_file_which_matplotlib_reads_as_it_is():
    with mpl.rc_context():
        mpl.style.use(str(styles.PAPER_STYLE_FILE))
        for key, value in styles.PAPER_RC.items():
            assert mpl.rcParams[key] == value, key
    assert styles.PAPER_RC["axes.prop_cycle"].by_key()["color"] == list(palette.SERIES)


def test_the_journal_and_slides_presets_take_their_sizes_from_tueplots():
    from tueplots import figsizes, fontsizes

    journal = styles.PRESETS["journal"]
    assert (
        (journal.full_in, journal.column_in)
        == (6.0, 3.0)
        == (
            figsizes.jmlr2001()["figure.figsize"][0],
            figsizes.jmlr2001(rel_width=0.5)["figure.figsize"][0],
        )
    )
    assert all(journal.rc[k] == v for k, v in fontsizes.jmlr2001().items())
    slides = styles.PRESETS["slides"]
    assert (slides.full_in, slides.column_in) == (
        figsizes.beamer_169()["figure.figsize"][0],
        figsizes.beamer_169(rel_width=0.5)["figure.figsize"][0],
    )
    assert all(slides.rc[k] == v for k, v in fontsizes.beamer().items())


def test_series_without_arm_meaning_take_no_arm_or_n_colour_and_a_control_takes_its_own_n_colour():
    meaning = {*palette.ARMS.values(), *palette.N_COLOURS.values()}
    assert not meaning & set(palette.SERIES) and not meaning & {palette.GOOD, palette.BAD}
    assert not {palette.GOOD, palette.BAD} & set(palette.SERIES)
    assert not meaning & set(styles.PAPER_RC["axes.prop_cycle"].by_key()["color"])  # matplotlib's own cycle too
    for name, (n, dash, marker, _) in palette.CONTROLS.items():
        style = palette.control(name)
        assert style.colour == palette.n_colour(n) and (dash, marker) != (None, "o")
    dashes = [c[1] for c in palette.CONTROLS.values()] + ["-", ":", "--"]  # verdict, other prompts, lr variants
    assert len({str(d) for d in dashes}) == len(dashes)
    batch = rlvr_plots._arm_style("N16_batch512", 16, "N=16 x 512 prompts (batch control)")
    assert batch.colour == palette.arm("ProRL") and batch.dash == "-."
    with pytest.raises(ValueError, match="known controls are batch-size control"):
        palette.control("ProRL")


def test_figure3_sets_the_papers_worst_drop_axis_beside_ours():
    from brorl_lib.facts import setup

    runs = _runs()
    fig = simulator_plots.figure3(runs)
    worst = fig.axes[2]
    (scale,) = worst.child_axes
    assert scale.get_ylim() == (setup.PAPER_FIG3_WORST_DROP_LOW, 0.0) and "paper" in scale.get_title(loc="left")
    paper_bar, ours = scale.patches
    assert paper_bar.get_height() == setup.PAPER_FIG3_WORST_DROP_LOW
    assert ours.get_height() == pytest.approx(runs["worst_drop"].min())
    assert worst.get_ylim()[0] > setup.PAPER_FIG3_WORST_DROP_LOW / 10  # our panel keeps its own range
    assert not layout_check.problems(fig)
    plt.close(fig)
