"""Provenance that says what was run: a changed parameter never leaves a ``reproduced`` or ``scaled-down``
stamp (it makes a ``variant`` naming the profile and the changes, in the stamp, caption, sidecar and record);
an ``estimate`` always names its basis; operational parameters (paths, names, a launch switch) change nothing."""

from __future__ import annotations

import dataclasses
import json

import matplotlib.pyplot as plt
import pandas as pd
import pytest

from brorl_lib.core import variants
from brorl_lib.core.artifacts import read_record
from brorl_lib.core.profiles import available_profiles
from brorl_lib.core.registry import NOTEBOOKS, get_notebook
from brorl_lib.core.table_files import save_table
from brorl_lib.explore.views import save_view
from brorl_lib.figures.plotting import new_figure, save_figure
from brorl_lib.simulator import report as sr
from brorl_lib.verl_recipe import report as vr

SHIPPED = [p for p in variants.SHIPPED_PROFILES if p in available_profiles()]
CHANGED = "<a value no profile holds>"


def _cases():
    """Per notebook, one parameter of each kind that says what is computed and one that says where or whether
    to run: the comparison is generic, what differs is the notebook's profiles and the operational flag."""
    for spec in NOTEBOOKS:
        first = {}
        for p in spec.config_class().declaration():
            first.setdefault((p.kind, p.operational), p.name)
        for name in first.values():
            yield pytest.param(spec, name, id=f"{spec.name}:{name}")


def _unchecked(cls, values: dict):
    """An instance of the frozen config ``cls`` holding ``values`` as they are (its checks not run)."""
    config = object.__new__(cls)
    for key, value in values.items():
        object.__setattr__(config, key, value)
    return config


@pytest.mark.parametrize("spec, name", list(_cases()))
def test_a_changed_parameter_never_gives_reproduced_or_scaled_down(spec, name, monkeypatch):
    cls = spec.config_class()
    operational = cls.parameter(name).operational
    for profile in SHIPPED:
        values = {**variants.profile_values(spec, profile), name: CHANGED}
        config = _unchecked(cls, values)
        for env in (profile, None):  # run by the pipeline with this profile, or in JupyterLab (nearest profile)
            if env:
                monkeypatch.setenv(variants.PROFILE_ENV, env)
            else:
                monkeypatch.delenv(variants.PROFILE_ENV, raising=False)
            for declared in variants.BECOMES_VARIANT:
                got, variant = variants.classify(declared, config)
                if operational:
                    assert (got, variant) == (declared, None), f"{name} says where or whether to run: no variant"
                    continue
                assert got == "variant"
                assert variant["changed"] == {name: CHANGED} and variant["profile"] in SHIPPED
                if env:
                    assert variant["profile"] == profile
            # what the pipeline says before the run, from the same comparison
            described = variants.describe(spec, profile, values)
            assert described is None if operational else described["changed"] == {name: CHANGED}


@pytest.mark.parametrize("profile", SHIPPED)
def test_every_shipped_profile_is_no_variant(profile):
    for spec in NOTEBOOKS:
        assert variants.describe(spec, profile, variants.profile_values(spec, profile)) is None


def _paper_simulator(**changes) -> sr.SimulatorConfig:
    values = variants.profile_values(get_notebook("02_simulator"), "paper")
    return sr.SimulatorConfig(**{**values, **changes})


def test_figure3_with_another_learning_rate_is_a_variant_at_any_scale(out_dir, monkeypatch):
    monkeypatch.setenv(variants.PROFILE_ENV, "paper")
    cfg = _paper_simulator(lr=3e-3)
    assert cfg.provenance() == "scaled-down"  # the notebook's own label for a non-paper step size
    variants.register_run(cfg)
    fig, ax = new_figure("full", aspect=0.3, ncols=3)
    data = pd.DataFrame({"x": [1]})
    saved = save_figure(fig, "fig3_simulator", provenance=cfg.provenance(), data=data, caption="Fig 3")
    stamp = [t.get_text() for t in fig.texts]
    assert stamp == ["[variant of paper: lr=0.003]"]
    assert repr(saved).endswith("[variant of paper: lr=0.003]") and saved.provenance == "variant"
    record = read_record(out_dir)[0]
    assert record["provenance"] == "variant"
    assert record["variant"] == {"profile": "paper", "changed": {"lr": 0.003}}
    assert record["caption"] == "Fig 3 [variant: the paper profile's parameters except lr=0.003]"
    plt.close(fig)
    for declared in ("reproduced", "scaled-down"):
        assert variants.classify(declared)[0] == "variant"
    assert variants.classify("reported") == ("reported", None)  # the paper's numbers, whatever the parameters


def test_the_paper_profile_itself_keeps_its_class(out_dir, monkeypatch):
    monkeypatch.setenv(variants.PROFILE_ENV, "paper")
    variants.register_run(_paper_simulator())
    assert variants.classify("reproduced") == ("reproduced", None)
    monkeypatch.delenv(variants.PROFILE_ENV)  # JupyterLab: the nearest profile is found by itself
    variants.register_run(_paper_simulator(seeds=[7]))
    assert variants.classify("reproduced") == ("variant", {"profile": "paper", "changed": {"seeds": [7]}})


def test_a_figure_keeps_its_class_when_only_parameters_it_does_not_depend_on_change(out_dir, monkeypatch):
    monkeypatch.setenv(variants.PROFILE_ENV, "quick")
    quick = variants.profile_values(get_notebook("02_simulator"), "quick")
    variants.register_run(sr.SimulatorConfig(**quick))
    assert variants.classify("reproduced") == ("scaled-down", None)  # the quick profile's run, made smaller
    assert variants.classify("reproduced", depends_on=()) == ("reproduced", None)  # an analytic curve
    variants.register_run(sr.SimulatorConfig(**{**quick, "lr": 3e-3}))
    assert variants.classify("reproduced", depends_on=("seeds",)) == ("scaled-down", None)
    assert variants.classify("reproduced", depends_on=("lr",)) == (
        "variant",
        {"profile": "quick", "changed": {"lr": 0.003}},
    )
    fig, _ = new_figure("column")
    saved = save_figure(fig, "curve", provenance="reproduced", data=pd.DataFrame({"x": [1]}), caption="C",
                        depends_on=())  # fmt: skip
    assert saved.provenance == "reproduced" and [t.get_text() for t in fig.texts] == ["[reproduced]"]
    plt.close(fig)


def test_a_long_list_of_changes_is_shortened_in_the_stamp_only(out_dir):
    variants.register_run(
        _paper_simulator(lr=3e-3, steps=500, vocab_size=64_000, n_correct=5_000, seeds=[4, 5], weight_decay=0.0)
    )
    saved = save_table(pd.DataFrame({"x": [1.0]}), "t", provenance="reproduced", caption="T")
    assert "+" in saved.stamp and "more" in saved.stamp and len(saved.stamp) < 100
    text = (out_dir / "t.md").read_text()
    for part in ("lr=0.003", "steps=500", "vocab_size=64000", "n_correct=5000", "seeds=[4, 5]", "weight_decay=0"):
        assert part in text


def test_the_plan_is_an_estimate_with_its_basis_and_its_changes(out_dir, monkeypatch):
    monkeypatch.setenv(variants.PROFILE_ENV, "paper")
    cfg = vr.VerlTrainingConfig(**{**variants.profile_values(get_notebook("05_verl_training"), "paper"), "nnodes": 2})
    variants.register_run(cfg)
    saved = save_table(vr.plan_table(cfg), "verl_plan", provenance="estimate", basis=vr.PLAN_BASIS, caption="Plan")
    assert saved.provenance == "estimate"
    md = (out_dir / "verl_plan.md").read_text()
    assert f"[estimate: {vr.PLAN_BASIS}" in md and "nnodes=2" in md and "reproduced" not in md
    record = read_record(out_dir)[0]
    assert record["basis"] == vr.PLAN_BASIS and record["variant"]["changed"] == {"nnodes": 2}
    # a launch on a cluster: where and whether to run are no variant
    launch = dataclasses.replace(
        vr.VerlTrainingConfig(**variants.profile_values(get_notebook("05_verl_training"), "paper")),
        run_name="mine",
        save_freq=5,
    )
    assert variants.variant_of(launch, "paper") is None


def test_estimate_needs_a_basis_and_variant_is_never_declared(out_dir):
    frame = pd.DataFrame({"x": [1]})
    with pytest.raises(ValueError, match="provenance='estimate' needs basis"):
        save_table(frame, "t", provenance="estimate", caption="")
    with pytest.raises(ValueError, match="provenance='variant' is not declared"):
        save_table(frame, "t", provenance="variant", caption="")
    with pytest.raises(ValueError, match="is for provenance='estimate'"):
        save_table(frame, "t", provenance="reproduced", basis="a guess", caption="")


def test_an_explored_figure_away_from_its_profile_is_saved_as_a_variant(tmp_path):
    fig, ax = new_figure("column")
    ax.plot([0, 1], [0, 1])
    cfg = _paper_simulator(lr=3e-3)
    files = save_view(fig, tmp_path, provenance="reproduced", parameters=cfg.as_dict(), name="v", config=cfg)
    record = json.loads(files[-1].read_text())
    assert record["provenance"] == "variant" and record["variant"]["changed"] == {"lr": 0.003}
    assert "except lr=0.003" in record["caption"]
    assert [t.get_text() for t in fig.texts] == ["[variant of paper: lr=0.003]"]
    assert b"except lr=0.003" in files[1].read_bytes()  # the PNG's description
    plt.close(fig)


def test_an_artifact_beyond_the_paper_by_design_is_a_variant_naming_what_it_changes(out_dir, monkeypatch):
    monkeypatch.setenv(variants.PROFILE_ENV, "paper")
    variants.register_run(_paper_simulator())  # the paper profile's own parameters
    beyond = {"lr": "each N's own"}
    assert variants.classify("reproduced", depends_on=()) == ("reproduced", None)
    assert variants.classify("reproduced", depends_on=(), beyond=beyond) == (
        "variant",
        {"profile": "paper", "changed": beyond, "by_design": ["lr"]},
    )
    assert variants.classify("reported", beyond=beyond) == ("reported", None)  # the paper's numbers stay its own
    frame = pd.DataFrame({"x": [1]})
    saved = save_table(frame, "t", provenance="reproduced", caption="T", depends_on=(), beyond=beyond)
    assert saved.provenance == "variant"
    assert read_record(out_dir)[0]["caption"] == "T [variant: the paper profile's parameters except lr=each N's own]"
    from brorl_lib.pipeline.manifest import made_otherwise

    by_design = {"profile": "paper", "changed": beyond, "by_design": ["lr"]}
    chosen = {"profile": "paper", "changed": {"lr": 0.1}}
    entries = {"a": {"profile": "paper", "variant": by_design}, "b": {"profile": "paper", "variant": chosen}}
    assert [name for name, _ in made_otherwise({"artifacts": entries}, "paper")] == ["b"]
