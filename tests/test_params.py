"""Every notebook's parameters, from their one declaration: the parameters cell agrees with it; each rule
(NaN and infinities, absurd sizes, wrong types, duplicates, number spellings, malformed YAML) is checked on
one parameter of each declared shape, through the config, ``-p`` and profiles; every declaration states its
bounds, and at each bound every notebook refuses a value naming its own parameter."""

import ast
import math
import re
from dataclasses import replace

import nbformat
import papermill
import pytest
from papermill.iorw import read_yaml_file

from brorl_lib.core.params import Param
from brorl_lib.core.profiles import available_profiles, load_profile, parse_override, plan_run, profile_files
from brorl_lib.core.registry import NOTEBOOKS, get_notebook
from brorl_lib.evaluation import cli as eval_cli
from brorl_lib.pipeline.cli import main

ALL_PARAMS = [(spec, p) for spec in NOTEBOOKS for p in spec.config_class().declaration()]


def shape(p: Param) -> tuple:
    """What decides which rules apply to a parameter: its kind and which kinds of limit it declares."""
    limits = (p.low is not None, p.high is not None, p.low_open, bool(p.multiple_of), bool(p.choices))
    return (p.kind, *limits, bool(p.pattern), p.nonempty, p.distinct)


# the rules are the declaration's, not the notebook's: one parameter of each shape carries them
PARAMS = list({shape(p): (spec, p) for spec, p in reversed(ALL_PARAMS)}.values())[::-1]


def ids(case) -> str:
    spec, p = case
    return f"{spec.name}:{p.name}"


def select(*kinds: str) -> list:
    return [pytest.param(spec, p, id=ids((spec, p))) for spec, p in PARAMS if p.kind in kinds]


def build(spec, **changes):
    cls = spec.config_class()
    return cls(**{**cls.defaults(), **changes})


def names_pattern(spec) -> str:
    """A message that starts with one of this notebook's parameter names, as the user writes them."""
    return r"^(" + "|".join(map(re.escape, spec.config_class().parameter_names())) + r")\b"


def refused(spec, p: Param, value, match: str | None = None) -> str:
    """``value`` for ``p`` is refused by the declaration and by the whole config, naming ``p``."""
    with pytest.raises(ValueError, match=rf"^{re.escape(p.name)}( item)?\b") as err:
        p.check(value)
    with pytest.raises(ValueError, match=rf"^{re.escape(p.name)}\b"):
        build(spec, **{p.name: value})
    if match:
        assert re.search(match, str(err.value)), str(err.value)
    return str(err.value)


def listed(p: Param, item) -> list:
    """``item`` first, padded with other items of the default up to the fewest items ``p`` allows."""
    rest = [v for v in p.default if v != item]
    return [item] + rest[: max(p.min_items - 1, 0)]


def valid_item(p: Param):
    if p.default:
        return p.default[0]
    return p.choices[0] if p.choices else p.low


# --- the declaration and the notebook ---
@pytest.mark.parametrize("spec", NOTEBOOKS, ids=lambda s: s.name)
def test_parameters_cell_is_the_declaration(spec):
    """Names, types, defaults and help of the parameters cell are the declaration's (regenerate the cells with
    ``python -m brorl_lib params --write``)."""
    cls = spec.config_class()
    declared = cls.declaration()
    assert [p.name for p in declared] == cls.parameter_names(), "every field of the config must be declared"
    cells = [c for c in nbformat.read(spec.path, as_version=4).cells if c.cell_type == "code"]
    assert cells[0].source == cls.parameters_cell(), "parameters cell and declaration differ: run params --write"
    read = papermill.inspect_notebook(str(spec.path))
    assert list(read) == [p.name for p in declared]
    for p in declared:
        default = ast.literal_eval(read[p.name]["default"])
        assert default == p.default and type(default) is type(p.default), p.name
        assert read[p.name]["inferred_type_name"] == p.kind
        assert read[p.name]["help"].endswith(p.allowed()) and p.doc in read[p.name]["help"]
    build(spec)  # the defaults are allowed


def test_every_size_and_count_has_an_upper_bound():
    for spec, p in ALL_PARAMS:
        if p.kind in ("int", "list[int]"):
            assert p.high is not None, f"{spec.name}: {p.name}: declare a documented upper bound"
            assert not p.is_list or p.max_items is not None, f"{spec.name}: {p.name}: declare the most items"


# --- the rules, on one parameter of each shape ---
@pytest.mark.parametrize("spec, p", select("float", "list[float]"))
@pytest.mark.parametrize("text", ["nan", ".nan", "inf", ".inf", "-inf", "1e400"])
def test_nan_and_infinities_are_refused(spec, p, text):
    value = p.parse(text if not p.is_list else f"[{text}]")
    assert math.isnan(value if not p.is_list else value[0]) or math.isinf(value if not p.is_list else value[0])
    refused(spec, p, value, "finite")


@pytest.mark.parametrize("spec, p", select("int", "list[int]"))
def test_absurdly_large_values_are_refused(spec, p):
    value = p.parse("1e20") if not p.is_list else listed(p, p.parse("[1e20]")[0])
    assert (value if not p.is_list else value[0]) == 10**20
    refused(spec, p, value, "is not allowed: expected .*(to|≤) ")


WRONG = {
    "int": [2.5, "3", True, None, [1]],
    "float": ["fast", True, None, [1.0]],
    "bool": [1, "yes", None],
    "str": [5, None, ["a"], True],
    "list[int]": [7, "1, 2", None, [2.5], [True], ["a"]],
    "list[float]": [0.5, None, ["a"], [True]],
    "list[str]": ["abc", None, [1], [None]],
}


@pytest.mark.parametrize("spec, p", select(*WRONG))
def test_values_of_the_wrong_type_are_refused(spec, p):
    for value in WRONG[p.kind]:
        refused(spec, p, value)


@pytest.mark.parametrize(
    "spec, p", [c for c in select("list[int]", "list[float]", "list[str]") if c.values[1].distinct]
)
def test_duplicates_are_refused_where_values_must_be_distinct(spec, p):
    item = valid_item(p)
    refused(spec, p, [item, item], "listed twice")


@pytest.mark.parametrize("spec, p", select("int", "float"))
def test_numbers_in_any_spelling_are_read(spec, p):
    v = p.default
    spellings = [repr(v), f"{v:e}".replace("e+0", "e").replace("e-0", "e-"), f"{float(v)!r}"]
    if p.kind == "int":
        spellings += [f"{v}e0", f"{v:_}", f"'{v}'"]
    for text in spellings:
        got = p.parse(text)
        assert got == pytest.approx(v, rel=1e-6) and type(got) is type(v), (text, got)
        p.check(got)
    if p.kind == "float":
        assert p.parse("1e-3") == 0.001  # YAML alone reads 1e-3 as a string


@pytest.mark.parametrize("spec, p", [pytest.param(s, p, id=ids((s, p))) for s, p in PARAMS])
@pytest.mark.parametrize("text", ["[1, 2", "{a: [", "'unclosed", "a: b: c"])
def test_a_malformed_value_names_the_parameter(spec, p, text):
    if p.kind == "str":
        assert p.parse(text) == text  # any text is a string; the declaration's checks still apply
        return
    with pytest.raises(ValueError, match=rf"^{re.escape(p.name)}: cannot read .* expected "):
        p.parse(text)


@pytest.mark.parametrize("spec, p", select("str"))
@pytest.mark.parametrize("text", ["[x]", "[1, 2]", "{a: 1}"])
def test_a_list_or_mapping_given_for_a_string_is_refused(spec, p, text):
    """``-p NAME [x]`` is a list where one string is expected, never the text "[x]"."""
    with pytest.raises(
        ValueError, match=rf"^{re.escape(p.name)}={re.escape(repr(text))} is not allowed: it reads as a"
    ):
        p.parse(text)


def bound_values(p: Param) -> list:
    """Each declared bound, and one step beyond it."""
    out = []
    for bound, beyond in ((p.low, -1), (p.high, 1)):
        if bound is None:
            continue
        step = 1 if p.item_kind == "int" else max(abs(bound), 1.0) * 1e-6
        out += [bound, bound + beyond * step]
    out += list(p.choices)
    return [listed(p, v) if p.is_list else v for v in out]


@pytest.mark.parametrize("spec, p", [pytest.param(s, p, id=ids((s, p))) for s, p in ALL_PARAMS])
def test_bounds_are_exact_and_every_refusal_names_a_parameter_as_written(spec, p):
    """At each bound and one step past it, the declaration says what the range says; the whole config then
    accepts the value or refuses it naming one of the notebook's own parameters (never an inner name)."""
    for value in bound_values(p):
        item = value[0] if p.is_list else value
        inside = (
            (p.low is None or item > p.low or (item == p.low and not p.low_open))
            and (p.high is None or item <= p.high)
            and (not p.multiple_of or item % p.multiple_of == 0)
        )
        if inside or p.choices:
            p.check(value)
        else:
            with pytest.raises(ValueError, match=rf"^{re.escape(p.name)}\b"):
                p.check(value)
        try:
            build(spec, **{p.name: value})
        except ValueError as err:
            assert re.match(names_pattern(spec), str(err)), str(err)


# --- the command line and profiles ---
@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "01_theory", "-p", "eta", "nan"], "eta=nan is not allowed: expected a finite number"),
        (["run", "02_simulator", "-p", "steps", "1e20"], "steps=100000000000000000000 is not allowed: expected"),
        (["run", "02_simulator", "-p", "rollouts", "[4, 4]"], "rollouts=[4, 4] is not allowed: 4 is listed twice"),
        (["run", "02_simulator", "-p", "seeds", "[1, 2"], "seeds: cannot read '[1, 2'"),
        (
            ["run", "04_laptop_rlvr", "-p", "candidates", "[spell_backward:1@130x2]"],
            "candidates item='spell_backward:1@130x2': the hidden size must be a multiple of 4",
        ),
        (["run", "04_laptop_rlvr", "-p", "plateau_window", "1"], "plateau_window=1 is not allowed: expected"),
        (
            ["run", "04_laptop_rlvr", "-p", "candidates", "[chess:1@64x2]"],
            "candidates item task='chess' is not allowed",
        ),
        (["run", "04_laptop_rlvr", "-p", "update_reps", "1"], "update_reps=1 is not allowed: expected"),
        (
            ["run", "04_laptop_rlvr", "-p", "update_samples", "[100]"],
            "update_samples=[100] is not allowed with update_rollouts=[4, 16]",
        ),
        (
            ["run", "05_verl_training", "-p", "temperature", "-inf"],
            "temperature=-inf is not allowed: expected a finite",
        ),
    ],
)
def test_cli_refuses_bad_values_by_the_name_typed(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_cli_reads_numbers_in_any_spelling_and_lists_the_declaration(capsys):
    spec = get_notebook("01_theory")
    assert parse_override(spec, "eta", "1e-3") == ("eta", 0.001)
    assert parse_override(spec, "n_instances", "3e2") == ("n_instances", 300)
    assert plan_run(spec, "quick", {"eta": 0.001}).parameters == {"eta": 0.001}
    assert main(["params", "03_paper_tables"]) == 0
    out = capsys.readouterr().out
    assert "memory_utilization: float = 0.9  # share of memory" in out and "in [0.01, 1]" in out
    assert main(["params", "02_simulator"]) == 0  # and each profile's files, as papermill's -f takes them
    out = capsys.readouterr().out
    assert "profile gpu: -f params/paper/02_simulator.yaml -f params/gpu/02_simulator.yaml\n" in out


def test_profiles_are_read_and_checked_through_the_declarations(tmp_path):
    spec = get_notebook("01_theory")
    (tmp_path / "profiles.yaml").write_text("sci:\ndup:\nbad:\n")
    for profile, notebook, text in [
        ("sci", "01_theory", "eta: 1e-3\nn_instances: 1e3\n"),
        ("dup", "02_simulator", "seeds: [0, 0]\n"),
        ("bad", "02_simulator", "seeds: [1, 2\n"),
    ]:
        (tmp_path / profile).mkdir()
        (tmp_path / profile / f"{notebook}.yaml").write_text(text)
    plan = plan_run(spec, "sci", params_dir=tmp_path)
    assert plan.parameters == {"eta": 0.001, "n_instances": 1000} and type(plan.parameters["n_instances"]) is int
    with pytest.raises(ValueError, match=r"seeds=\[0, 0\] is not allowed: 0 is listed twice"):
        plan_run(get_notebook("02_simulator"), "dup", params_dir=tmp_path)
    with pytest.raises(ValueError, match=r"02_simulator.yaml line \d+: .*not valid YAML"):
        load_profile("bad", tmp_path)


@pytest.mark.parametrize("profile", available_profiles())
def test_each_profiles_files_are_what_papermill_takes_as_they_are(profile):
    """papermill's -f, file after file as its command line reads them, gives every notebook the profile's values,
    each one its declaration takes as it is (no number left as text for the pipeline's reading to fix)."""
    files, values = profile_files(profile), load_profile(profile)
    for spec in NOTEBOOKS:
        injected = {}
        for path in files.get(spec.name, []):
            injected.update(read_yaml_file(str(path)) or {})
        assert injected == values.get(spec.name, {}).get("parameters", {}), f"{profile}: {spec.name}"
        for name, value in injected.items():
            spec.config_class().parameter(name).check(value)


def test_laptop_rlvr_lowest_values_pass_every_check_of_the_experiment():
    """Notebook 04's declaration is the one source of its ranges: the lowest values it allows (built into the
    study's three settings objects by the config's own checks) never fail inside the study."""
    spec = get_notebook("04_laptop_rlvr")
    declared = [p for p in spec.config_class().declaration() if p.kind in ("int", "float")]
    # an open lower bound (value > low) is approached from above
    low = {p.name: p.low + 1e-6 * max(abs(p.low), 1.0) if p.low_open else p.low for p in declared}
    cfg = build(
        spec,
        **{
            **low,
            "candidates": ["countdown:3@4x1"],
            # the cross-parameter bounds: an answer of 3 numbers and <eos>, S and G multiples of every N, the
            # first budget at least the prompt-matched control's kept batch (512 x prompts)
            "max_new_tokens": 6,
            "update_rollouts": [2],
            "update_samples": [2],
            "iso_rollouts": [2],
            "budgets": [2048],
        },
    )
    assert cfg.study().candidates[0].model.hidden == 4 and cfg.phase2().iso_samples == 2


# --- the evaluation command line ---
FLOAT_FLAGS = [a.option_strings[0] for a in eval_cli.parser()._actions if a.type is eval_cli._finite]


def test_every_float_flag_of_the_evaluation_cli_is_checked():
    assert not [a.dest for a in eval_cli.parser()._actions if a.type is float]
    assert {"--temperature", "--top-p", "--gpu-memory-utilization", "--code-time-limit"} <= set(FLOAT_FLAGS)


@pytest.mark.parametrize("flag", FLOAT_FLAGS)
@pytest.mark.parametrize("text", ["nan", "inf", "-inf"])
def test_evaluation_cli_refuses_non_finite_floats_naming_the_flag(flag, text, capsys):
    with pytest.raises(SystemExit) as err:
        eval_cli.main(["--model", "owner/name", "--out", "unused", f"{flag}={text}"])
    assert err.value.code == 2
    assert f"argument {flag}: '{text}' is not allowed: expected a finite number" in capsys.readouterr().err


def test_a_parameter_declared_as_a_settings_field_is_that_declaration_and_an_unknown_field_is_refused():
    from brorl_lib.core.params import declared_as
    from brorl_lib.rlvr.study import StudySettings, UpdateQualitySettings
    from brorl_lib.rlvr.study_config import CountdownStudyConfig
    from brorl_lib.rlvr.study_phase2 import Phase2Settings
    from brorl_lib.verl_recipe.configs import Cluster
    from brorl_lib.verl_recipe.report import VerlTrainingConfig

    pairs = (
        (StudySettings, CountdownStudyConfig),
        (Phase2Settings, CountdownStudyConfig),
        (Cluster, VerlTrainingConfig),
    )
    for settings, config in pairs:
        for p in settings.declaration():
            assert config.parameter(p.name) == p, p.name  # one declaration: bounds, doc and default alike
    assert CountdownStudyConfig().study().base_lr == CountdownStudyConfig().phase2().base_lr
    notebook_name = {"rollouts": "update_rollouts", "samples": "update_samples", "reps": "update_reps"}
    for p in UpdateQualitySettings.declaration():  # the notebook's names of three of them say which grid they set
        assert replace(CountdownStudyConfig.parameter(notebook_name.get(p.name, p.name)), name=p.name) == p, p.name
    cluster = Cluster(model_path="/m", train_files=("/t",), val_files=("/v",), checkpoint_dir="/c", nnodes=2)
    assert cluster.nnodes == 2
    with pytest.raises(ValueError, match="nnodes=0 is not allowed: expected"):
        Cluster(model_path="/m", train_files=("/t",), val_files=("/v",), checkpoint_dir="/c", nnodes=0)
    with pytest.raises(TypeError, match="Cluster declares no parameter 'model_path'"):
        declared_as(Cluster, "model_path")  # a field, but not a declared parameter
