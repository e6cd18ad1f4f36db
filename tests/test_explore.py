"""The explore sections: controls from the declarations, ipywidgets' ``interactive`` over each explorer's draw
function (the last good figure kept on a refused value or an interrupt; Draw for costly ones), ``save_view``,
and each notebook's explorer on its own data."""

from __future__ import annotations

import json

import ipywidgets as w
import matplotlib.pyplot as plt
import pytest

from brorl_lib.core.params import NotebookConfig
from brorl_lib.core.paths import FIGURES_DIR, INTERACTIVE_ENV
from brorl_lib.explore import controls
from brorl_lib.explore.interact import Explorer, Explorers, explore
from brorl_lib.explore.views import save_view, views_folder
from brorl_lib.figures.plotting import new_figure
from brorl_lib.paper import explorer as paper_explorer
from brorl_lib.paper import report as pr
from brorl_lib.rlvr.study_config import CountdownStudyConfig
from brorl_lib.simulator import explorer as sim_explorer
from brorl_lib.simulator import report as sr
from brorl_lib.theory import explorer as theory_explorer
from brorl_lib.theory import report as tr
from brorl_lib.verl_recipe import explorer as verl_explorer
from brorl_lib.verl_recipe import report as vr

CONFIGS = (tr.TheoryConfig, sr.SimulatorConfig, pr.PaperTablesConfig, CountdownStudyConfig, vr.VerlTrainingConfig)


@pytest.mark.parametrize("cls", CONFIGS, ids=lambda c: c.__name__)
def test_every_declared_parameter_gets_a_control_at_its_default_within_its_bounds(cls: type[NotebookConfig]):
    for p in cls.declaration():
        if p.kind in ("int", "float") and (p.low is None or p.high is None):
            continue  # a slider needs both bounds: an explorer gives them (control() refuses otherwise)
        c = controls.control(p)
        assert controls.value_of(p, c) == p.default
        if isinstance(c, (w.IntSlider, w.FloatSlider)):
            assert (c.min, c.max) == (p.low, p.high)
        if p.choices and not p.is_list:
            assert tuple(c.options) == p.choices


def test_control_refuses_a_range_or_option_the_declaration_refuses():
    lr = sr.SimulatorConfig.parameter("lr")
    with pytest.raises(ValueError, match="lr=2000"):
        controls.control(lr, low=1e-4, high=2000.0)
    n = sr.SimulatorConfig.parameter("rollouts")
    with pytest.raises(ValueError, match="rollouts item=0"):
        controls.control(n, options=(0, 4))
    assert controls.powers_of_two(n, high=64) == [1, 2, 4, 8, 16, 32, 64]
    steps = sr.SimulatorConfig.parameter("steps")
    assert list(controls.control(steps, 300, options=(100, 1000)).options) == [100, 300, 1000]  # a profile's value
    assert controls.control(steps, 5000, low=1, high=1000).max == 5000


def test_text_controls_are_read_like_command_line_overrides():
    seeds = sr.SimulatorConfig.parameter("seeds")
    c = controls.control(seeds)
    c.value = "0, 1, 2"
    assert controls.value_of(seeds, c) == [0, 1, 2]
    c.value = "0, -1"
    with pytest.raises(ValueError) as caught:
        seeds.check(controls.value_of(seeds, c))
    with pytest.raises(ValueError) as direct:
        seeds.check([0, -1])
    assert str(caught.value) == str(direct.value)


def test_interactive_session_is_explicit_or_follows_the_jupyter_server(monkeypatch, capsys):
    monkeypatch.delenv(controls.SERVER_SESSION_ENV, raising=False)
    monkeypatch.delenv(INTERACTIVE_ENV, raising=False)
    assert not controls.interactive_session()
    assert explore(lambda: Explorers()) is None
    assert capsys.readouterr().out == controls.STATIC_MESSAGE + "\n"
    monkeypatch.setenv(controls.SERVER_SESSION_ENV, "notebooks/01_theory.ipynb")
    built = Explorers()
    assert controls.interactive_session() and explore(lambda: built) is built
    monkeypatch.setenv(INTERACTIVE_ENV, "0")
    assert not controls.interactive_session()
    monkeypatch.setenv(INTERACTIVE_ENV, "yes")
    with pytest.raises(ValueError, match="BRORL_INTERACTIVE='yes' is not allowed"):
        controls.interactive_session()


def _line_figure(params: dict) -> plt.Figure:
    fig, ax = new_figure("column")
    ax.plot([0, 1], [0, params["_config"].lr])
    return fig


def test_a_refused_value_shows_the_checks_message_and_keeps_the_previous_figure(capsys):
    base = sim_explorer.start_config(sr.SimulatorConfig())  # vocabulary 1280, 100 correct
    cc = controls.ConfigControls(base, {"n_correct": {"options": (100, 10000)}})
    view = Explorer(_line_figure, cc.all, read=cc.read, name="t", provenance="scaled-down")
    before = view.figure
    assert before is not None and not view.said and isinstance(view.widget, w.interactive)
    cc.widgets["n_correct"].value = 10000  # vocabulary 1280: the config's own check refuses it
    with pytest.raises(ValueError) as expected:
        sr.SimulatorConfig(**{**base.as_dict(), "n_correct": 10000})
    assert view.said == f"ValueError: {expected.value}" and view.said in capsys.readouterr().out
    assert view.figure is before and view.parameters["n_correct"] == 100


def test_a_costly_explorer_draws_on_its_button_and_an_interrupt_keeps_the_previous_figure():
    calls = []

    def slow(params: dict) -> plt.Figure:
        calls.append(params["_config"].lr)
        if len(calls) == 3:
            raise KeyboardInterrupt  # what the kernel's interrupt raises in a running draw
        return _line_figure(params)

    cc = controls.ConfigControls(sr.SimulatorConfig(), {"lr": {"low": 1e-4, "high": 1e-2, "log": True}})
    view = Explorer(slow, cc.all, read=cc.read, name="t", provenance="scaled-down", manual=True)
    first = view.figure
    assert len(calls) == 1 and first is not None  # the starting settings, drawn once
    cc.widgets["lr"].value = 2e-3
    assert len(calls) == 1  # a costly explorer waits for Draw
    view.widget.manual_button.click()
    assert calls[-1] == 2e-3 and view.figure is not first
    second = view.figure
    cc.widgets["lr"].value = 4e-3
    view.widget.manual_button.click()
    assert view.said.startswith("stopped") and view.figure is second and view.parameters["lr"] == 2e-3


def test_save_view_writes_pdf_png_and_parameters_and_never_into_figures(tmp_path):
    fig, ax = new_figure("column")
    ax.plot([0, 1], [1, 0])
    params = {"lr": 1e-3, "rollouts": (4, 16)}
    files = save_view(fig, tmp_path / "a", provenance="scaled-down", parameters=params, name="v", caption="A line")
    assert [f.name for f in files] == ["v.pdf", "v.png", "v.json"]
    record = json.loads(files[2].read_text())
    assert record == {
        "name": "v",
        "provenance": "scaled-down",
        "caption": "A line [scaled-down]",
        "parameters": {"lr": 1e-3, "rollouts": [4, 16]},
        "style": "paper",
    }
    assert b"scaled-down" in files[0].read_bytes() and b'"rollouts": [4, 16]' in files[1].read_bytes()
    again = save_view(fig, tmp_path / "b", provenance="scaled-down", parameters=params, name="v", caption="A line")
    assert [f.read_bytes() for f in files] == [f.read_bytes() for f in again]  # byte-stable
    for bad in (FIGURES_DIR, FIGURES_DIR / "sub", "figures", ""):
        with pytest.raises(ValueError, match="is not allowed"):
            views_folder(bad)
    with pytest.raises(ValueError, match="provenance"):
        save_view(fig, tmp_path, provenance="guessed", parameters={})


def _moved(view: Explorer, name: str, value) -> None:
    before = view.figure
    view.controls[name].value = value
    if view.widget.manual:
        view.widget.manual_button.click()
    assert not view.said, view.said
    assert view.figure is not before, f"moving {name} did not redraw"


def test_theory_explorers_redraw_and_refuse_like_the_config():
    terms = theory_explorer.terms_explorer(tr.TheoryConfig())
    _moved(terms, "n", 256)
    saved = terms.saved_parameters()
    assert saved["n"] == 256 and saved["r_correct"] == 1.0 and saved["n_instances"] == tr.TheoryConfig().n_instances
    terms.controls["r_correct"].value = 0.5
    terms.controls["s_r"].value = 0.9
    assert "s_r=0.9 is not allowed" in terms.said
    sign = theory_explorer.sign_map_explorer(tr.TheoryConfig())
    _moved(sign, "example_n_rollouts", 64)
    sign.controls["example_n_correct"].value = 60
    assert "example_n_correct=60" in sign.said
    assert list(theory_explorer.explore(tr.TheoryConfig())) == ["three terms", "sign map"]


def test_simulator_explorer_draws_its_start_and_more_on_draw():
    view = sim_explorer.figure3_explorer(sr.SimulatorConfig())
    assert view.widget.manual and view.figure is not None
    _moved(view, "lr", 1e-2)
    assert view.parameters["_config"].provenance() == "scaled-down"


def test_paper_explorers_redraw():
    _moved(paper_explorer.tables_explorer(), "metric", ("table3_math", "aime25"))
    _moved(paper_explorer.pass_rate_explorer(pr.PaperTablesConfig()), "degenerate_share", 0.1)
    _moved(paper_explorer.roofline_explorer(pr.PaperTablesConfig()), "gpus", 128)


def test_verl_explorer_plans_and_diffs_against_verls_defaults():
    view = verl_explorer.plan_explorer(vr.VerlTrainingConfig())
    assert "actor_rollout_ref.rollout.n" in view.note and "verl default" in view.note
    _moved(view, "nnodes", 16)
    view.controls["brorl_prompts_per_step"].value = 16
    assert not view.said
