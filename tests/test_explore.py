"""The explore sections: controls from the declarations, live figures that keep the last good figure on a
refused value, Run/Stop with progress, ``save_view``, and each notebook's explorer on its own data."""

from __future__ import annotations

import dataclasses
import html
import json
import threading

import ipywidgets as w
import matplotlib.pyplot as plt
import pytest

from brorl_lib.core import controls
from brorl_lib.core.live import LiveFigure, Progress, Stopped, explore
from brorl_lib.core.params import NotebookConfig
from brorl_lib.core.paths import FIGURES_DIR, INTERACTIVE_ENV
from brorl_lib.core.plotting import new_figure
from brorl_lib.core.views import save_view, views_folder
from brorl_lib.paper import explorer as paper_explorer
from brorl_lib.paper import report as pr
from brorl_lib.rlvr import config as rc
from brorl_lib.rlvr import explorer as rlvr_explorer
from brorl_lib.simulator import explorer as sim_explorer
from brorl_lib.simulator import report as sr
from brorl_lib.theory import explorer as theory_explorer
from brorl_lib.theory import report as tr
from brorl_lib.verl_recipe import explorer as verl_explorer
from brorl_lib.verl_recipe import report as vr

CONFIGS = (tr.TheoryConfig, sr.SimulatorConfig, pr.PaperTablesConfig, rc.LaptopRLVRConfig, vr.VerlTrainingConfig)


def _error(fig: LiveFigure) -> str:
    return fig.message.value if "#b00020" in fig.message.value else ""


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
    with pytest.raises(ValueError, match="lr=20"):
        controls.control(lr, low=1e-4, high=20.0)
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
    assert explore(lambda: "built") is None
    assert capsys.readouterr().out == controls.STATIC_MESSAGE + "\n"
    monkeypatch.setenv(controls.SERVER_SESSION_ENV, "notebooks/01_theory.ipynb")
    assert controls.interactive_session() and explore(lambda: "built") == "built"
    monkeypatch.setenv(INTERACTIVE_ENV, "0")
    assert not controls.interactive_session()
    monkeypatch.setenv(INTERACTIVE_ENV, "yes")
    with pytest.raises(ValueError, match="BRORL_INTERACTIVE='yes' is not allowed"):
        controls.interactive_session()


def _line_figure(params: dict, progress: Progress) -> plt.Figure:
    fig, ax = new_figure("column")
    ax.plot([0, 1], [0, params["_config"].lr])
    return fig


def test_a_refused_value_shows_the_checks_message_and_keeps_the_previous_figure():
    base = sim_explorer.start_config(sr.SimulatorConfig())  # vocabulary 1280, 100 correct
    cc = controls.ConfigControls(base, {"n_correct": {"options": (100, 10000)}})
    live = LiveFigure(cc.all, cc.read, _line_figure, name="t", provenance="scaled-down").show_first()
    before = live.image.value
    assert before and not _error(live)
    cc.widgets["n_correct"].value = 10000  # vocabulary 1280: the config's own check refuses it
    with pytest.raises(ValueError) as expected:
        sr.SimulatorConfig(**{**base.as_dict(), "n_correct": 10000})
    assert html.escape(str(expected.value)) in _error(live)
    assert live.image.value == before and live.parameters["n_correct"] == 100


def test_run_reports_progress_and_stop_keeps_the_previous_figure():
    release = threading.Event()

    def slow(params: dict, progress: Progress) -> plt.Figure:
        progress.start(100, "steps")
        for _ in range(100):
            release.wait(5)
            progress.advance()
        return _line_figure(params, progress)

    cc = controls.ConfigControls(sr.SimulatorConfig(), {"lr": {"low": 1e-4, "high": 1e-2, "log": True}})
    live = LiveFigure(cc.all, cc.read, slow, name="t", provenance="scaled-down", live=lambda p: False)
    cc.widgets["lr"].value = 1e-3 * 2
    assert "press Run" in live.message.value and live.image.value == b""
    live.start()
    live.stop.set()
    release.set()
    live.thread.join(10)
    assert "stopped after" in live.message.value and live.image.value == b""
    live.start()
    live.thread.join(10)
    assert live.bar.value == live.bar.max == 100 and live.image.value
    assert not live.run_button.disabled and live.stop_button.disabled
    stopped = threading.Event()
    stopped.set()
    with pytest.raises(Stopped):
        Progress(stop=stopped).check()


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


def _moved(live: LiveFigure, name: str, value) -> None:
    before = live.image.value
    live.controls[name].value = value
    assert not _error(live), live.message.value
    assert live.image.value != before, f"moving {name} did not redraw"


def test_theory_explorers_redraw_and_refuse_like_the_config():
    terms = theory_explorer.terms_explorer(tr.TheoryConfig())
    _moved(terms, "n", 256)
    saved = terms.saved_parameters()
    assert saved["n"] == 256 and saved["r_correct"] == 1.0 and saved["n_instances"] == tr.TheoryConfig().n_instances
    terms.controls["r_correct"].value = 0.5
    terms.controls["s_r"].value = 0.9
    assert "s_r=0.9 is not allowed" in _error(terms)
    sign = theory_explorer.sign_map_explorer(tr.TheoryConfig())
    _moved(sign, "example_n_rollouts", 64)
    sign.controls["example_n_correct"].value = 60
    assert "example_n_correct=60" in _error(sign)


def test_simulator_explorer_is_live_at_its_start_and_asks_for_run_beyond():
    live = sim_explorer.figure3_explorer(sr.SimulatorConfig())
    assert sim_explorer.work(sim_explorer.start_config(sr.SimulatorConfig())) <= sim_explorer.LIVE_WORK
    _moved(live, "lr", 1e-2)
    assert live.parameters["_config"].provenance() == "scaled-down"
    live.controls["vocab_size"].value = 128000
    assert "press Run" in live.message.value


def test_paper_explorers_redraw():
    _moved(paper_explorer.tables_explorer(), "metric", ("table3_math", "aime25"))
    _moved(paper_explorer.pass_rate_explorer(pr.PaperTablesConfig()), "degenerate_share", 0.1)
    _moved(paper_explorer.roofline_explorer(pr.PaperTablesConfig()), "gpus", 128)


# a run folder made through notebook 04's own parameters, small enough for a test: one candidate (no screen to
# choose from), phase 1 to its plateau (two windows of 8 evaluations), ProRL and N=64 under 2 seeds, no grid
TINY_RLVR = dict(
    candidates=["spell_backward:1@64x2"],
    n_train=60,
    n_test=8,
    n_val=4,
    warm_start_steps=100,
    warm_start_lr=3e-3,
    phase1_prompts=4,
    screen_max_steps=16,
    phase1_max_steps=16,
    eval_every=1,
    plateau_window=8,
    prompts=4,
    arm_rollouts=[16, 64],
    base_lr_rollouts=[],
    batch_control=False,
    lr_pilot_factors=[],
    budgets=[128, 256],
    max_rounds=2,
    base_lr=1e-3,
    max_new_tokens=5,
    eval_samples=4,
    q_prompts=8,
    q_samples=16,
    passk_samples=8,
    passk_instances=4,
    theory_prompts=2,
    theory_samples=64,
    theory_batches=2,
    plateau_seeds=[0],
    seeds=[0, 1],
)


@pytest.fixture(scope="module")
def rlvr_run(tmp_path_factory):
    import torch

    from brorl_lib.rlvr import experiment as ex

    cfg = rc.LaptopRLVRConfig(**TINY_RLVR, runs_dir=str(tmp_path_factory.mktemp("laptop_rlvr")))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the tiny model's operations are too small to share between threads
    try:
        ex.run(cfg.settings(), list(cfg.seeds), cfg.runs_path(), progress=False)
    finally:
        torch.set_num_threads(threads)
    return cfg


def test_rlvr_runs_explorer_overlays_a_run_and_says_when_there_is_none_yet(rlvr_run, tmp_path, monkeypatch):
    runs = rlvr_explorer.runs_explorer(rlvr_run)
    assert not _error(runs) and runs.image.value
    _moved(runs, "seeds", (0,))
    runs.controls["arms"].value = ()
    assert "arms=[] is not allowed" in _error(runs)
    run = rlvr_explorer.read_run(rlvr_run)
    metrics = run.metrics
    assert set(metrics.arm) == {"phase1", "N16", "N64"} and sorted(metrics.seed.unique()) == [0, 1]
    assert set(metrics.plateau) == {0} and list(runs.controls["plateau"].options) == [0]
    with pytest.raises(ValueError, match="no run under seeds"):
        rlvr_explorer.overlay(run, ["N=64"], [7])
    # an empty run folder, a screen not finished, a plateau not reached: said in words, never a crash
    empty = rc.LaptopRLVRConfig(runs_dir=str(tmp_path / "empty"))  # two candidates: a screen chooses
    assert "the regime screen of its 2 candidates has not finished" in rlvr_explorer.unfinished(empty)
    with pytest.raises(ValueError, match="has no finished plateau yet"):
        rlvr_explorer.runs_explorer(empty)
    one = dataclasses.replace(rlvr_run, runs_dir=str(tmp_path / "one"))
    assert "phase 1 of the chosen configuration spell_backward:1@64x2 has not reached its plateau" in (
        rlvr_explorer.unfinished(one)
    )
    assert rlvr_explorer.unfinished(rlvr_run) is None and rlvr_explorer.has_checkpoint(rlvr_run)
    monkeypatch.setattr(rlvr_explorer, "committed_config", lambda: empty)
    tabs = rlvr_explorer.explore(empty)
    for tab in tabs.children:  # neither the committed runs nor a plateau to start from: both tabs say why
        assert isinstance(tab, w.HTML) and "has no finished plateau yet" in tab.value


def test_rlvr_committed_runs_are_shown_or_said_to_be_unfinished():
    committed = rlvr_explorer.committed_config()
    assert rlvr_explorer.shown_path(committed.runs_path()) == "data/runs/laptop_rlvr"
    reason = rlvr_explorer.unfinished(committed)
    tab = rlvr_explorer.explore(committed).children[0]
    if reason is None:  # the committed paper run has its plateau: the tab overlays it
        assert not isinstance(tab, w.HTML)
    else:
        assert "has no finished plateau yet" in reason and html.escape(reason) in tab.value


def test_rlvr_live_run_starts_from_the_plateau_and_its_settings_are_checked(rlvr_run, tmp_path, monkeypatch):
    empty = rc.LaptopRLVRConfig(runs_dir=str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="no plateau checkpoint in runs_dir="):
        rlvr_explorer.train_live(empty, 64, Progress())
    monkeypatch.setattr(rlvr_explorer, "committed_config", lambda: rlvr_run)  # as the committed paper run will be
    base = rlvr_explorer.live_base(empty)  # no checkpoint there: the committed runs'
    assert base == rlvr_run and rlvr_explorer.live_base(rlvr_run) == rlvr_run
    arm = rlvr_explorer.live_arm(base, 64)
    assert (arm.prompts, arm.lr) == (base.prompts // 4, base.design().rule_lr(64 * base.prompts // 4))
    live = rlvr_explorer.live_config(base, 64, 512)
    assert live.budgets == [64 * k for k in range(1, 9)] and live.lr_pilot_factors == [] and live.plateau_seeds == [0]
    assert live.arm_rollouts == [16, 64] and not live.batch_control and live.base_lr_rollouts == []
    assert rlvr_explorer.live_config(base, 512, 512).budgets == [512]  # only where a step of N=512 can end
    with pytest.raises(ValueError, match=r"^budgets=\[256\] is not allowed: the first must be at least 512"):
        rlvr_explorer.live_config(base, 512, 256)  # half a kept batch of N=512
    panel = rlvr_explorer.live_explorer(empty)
    panel.controls["rollouts"].value = 512
    assert not _error(panel) and "press Run" in panel.message.value
    panel.controls["max_rounds"].value = 3
    assert panel.read(panel.values())["_config"].max_rounds == 3


def test_rlvr_live_run_trains_one_step_from_the_plateau_checkpoint_and_stops(rlvr_run, tmp_path, monkeypatch):
    monkeypatch.setattr(rlvr_explorer, "LIVE_DIR", tmp_path)

    class StopAfterFirst(Progress):
        def advance(self, k: int = 1) -> None:
            self.stop.set()  # as a Stop pressed during the first step
            super().advance(k)

    metrics = rlvr_explorer.train_live(rlvr_run, 64, StopAfterFirst(), budget=512)
    assert metrics["step"].tolist() == [0, 1] and set(metrics.label) == {"N=64"}
    first = metrics.iloc[-1]
    assert first["samples"] == first["rounds"] * 64 * rlvr_run.prompts // 4  # every round: N x P/4 prompts
    assert metrics["pass1"].notna().iloc[0] and 1 <= first["rounds"] <= rlvr_run.max_rounds
    assert [p.name.split("_")[1] for p in tmp_path.iterdir()] == ["N64"]  # the run wrote under LIVE_DIR only
    plt.close(rlvr_explorer.live_figure(metrics, 512))


def test_verl_explorer_plans_and_diffs_against_verls_defaults():
    live = verl_explorer.plan_explorer(vr.VerlTrainingConfig())
    assert "actor_rollout_ref.rollout.n" in live.note.value and "verl default" in live.note.value
    _moved(live, "nnodes", 16)
    live.controls["brorl_prompts_per_step"].value = 16
    assert not _error(live)
