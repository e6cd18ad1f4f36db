"""The paper's reported numbers (data/paper/) as DataFrames, checked, and what follows from them.

One file there is not from the paper: ``blog_headline_scores.csv``, the authors' blog's scores of the released
model, read only through ``blog_headline_scores`` and never mixed into the paper's tables."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from brorl_lib.core.paths import REPO_ROOT

DATA_DIR = REPO_ROOT / "data" / "paper"
ID_COLUMNS = ["method", "n_rollouts", "prompts_per_step", "steps"]
MATH_COLUMNS = ["aime24", "aime25", "amc", "math", "minerva", "olympiad_bench"]
CODE_COLUMNS = ["apps", "codecontests", "codeforces", "taco"]
RG_COLUMNS = [
    "algebra",
    "algorithmic",
    "arc",
    "arithmetic",
    "code",
    "cognition",
    "games",
    "geometry",
    "graphs",
    "induction",
    "logic",
]

# Expected columns and their kinds: "str" as printed, "int", "float". Order matters.
SCHEMAS: dict[str, dict[str, str]] = {
    "table1_efficiency": {
        "method": "str",
        "n_rollouts": "int",
        "prompts_per_step": "int",
        "steps": "str",
        "samples_k": "str",
        "time_h": "float",
        "math_score": "float",
        "code_score": "float",
        "reasoning_gym_score": "float",
    },
    "table2_efficiency": {
        "method": "str",
        "n_rollouts": "int",
        "dynamic_sampling_pass_rate_pct": "float",
        "generation_throughput_samples_per_s": "float",
    },
    "table3_math": {
        "method": "str",
        "n_rollouts": "int",
        "prompts_per_step": "int",
        "steps": "str",
        **dict.fromkeys(MATH_COLUMNS, "float"),
        "math_avg": "float",
    },
    "table4_code": {
        "method": "str",
        "n_rollouts": "int",
        "prompts_per_step": "int",
        "steps": "str",
        **dict.fromkeys(CODE_COLUMNS, "float"),
        "code_avg": "float",
    },
    "table5_reasoning_gym": {
        "method": "str",
        "n_rollouts": "int",
        "prompts_per_step": "int",
        "steps": "str",
        **dict.fromkeys(RG_COLUMNS, "float"),
        "rg_avg": "float",
    },
    "ttest": {"statistic": "str", "value": "float", "note": "str"},
    "figure4_tasks": {"task": "str", "row": "int", "pattern": "str", "source": "str"},
    "settings": {"name": "str", "value": "str", "source": "str"},
    "blog_headline_scores": {
        "model": "str",
        "checkpoint": "str",
        "math_score": "float",
        "code_score": "float",
        "reasoning_gym_score": "float",
        "source": "str",
        "source_url": "str",
        "note": "str",
    },
}
# Settings the paper states in its text (settings.csv, one per row, ``source`` quoting the paper) and the
# type each is read as: "int", "float", or "ints" (whole numbers separated by spaces, read as a tuple).
SETTINGS: dict[str, str] = {
    "simulator_vocab_size": "int",
    "simulator_correct_tokens": "int",
    "simulator_reward_correct": "float",
    "simulator_reward_incorrect": "float",
    "simulator_correct_logit": "float",
    "simulator_anchor_logit": "float",
    "simulator_learning_rate": "float",
    "simulator_steps": "int",
    "simulator_rollout_sizes": "ints",
    "gpus": "int",
    "training_response_tokens": "int",
    "eval_samples_per_instance": "int",
    "eval_temperature": "float",
    "eval_top_p": "float",
    "eval_context_tokens": "int",
    "figure1_max_hours": "int",
    "figure3_worst_drop_low": "float",
}
_KIND_WORDS = {"int": "a whole number", "float": "a number", "ints": "whole numbers separated by spaces"}


def verify_checksums(data_dir=DATA_DIR) -> None:
    """Every file listed in SHA256SUMS has its recorded checksum; raise naming the files that do not."""
    bad = []
    for line in (data_dir / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        path = data_dir / name
        if not path.exists() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
            bad.append(name)
    if bad:
        raise ValueError(
            f"data/paper: {bad} differ from SHA256SUMS; these files must hold the paper's numbers as printed"
        )


def load(name: str, data_dir=DATA_DIR) -> pd.DataFrame:
    """One table, with its columns and types checked against SCHEMAS."""
    if name not in SCHEMAS:
        raise ValueError(f"unknown table {name!r}; available: {sorted(SCHEMAS)}")
    schema = SCHEMAS[name]
    df = pd.read_csv(data_dir / f"{name}.csv", dtype=str, keep_default_na=False)
    missing = [c for c in schema if c not in df.columns]
    extra = [c for c in df.columns if c not in schema]
    if missing or extra:
        raise ValueError(f"{name}.csv: missing columns {missing}, unexpected columns {extra}")
    for col, kind in schema.items():
        if kind == "str":
            continue
        values = pd.to_numeric(df[col].replace("", np.nan), errors="coerce")
        if values[df[col] != ""].isna().any():
            raise ValueError(f"{name}.csv: column {col} must hold numbers, found {df[col].tolist()}")
        df[col] = values.astype("Int64") if kind == "int" else values.astype(float)
    return df[list(schema)]


def _parse_setting(name: str, text: str) -> int | float | tuple[int, ...]:
    kind = SETTINGS[name]
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        values = tuple(int(v) for v in text.split())
    except ValueError:
        values = ()
    if not values:
        raise ValueError(f"settings.csv: {name}={text!r} is not allowed: it must be {_KIND_WORDS[kind]}")
    return values


def settings(data_dir: Path = DATA_DIR) -> dict[str, int | float | tuple[int, ...]]:
    """Every setting the paper states (settings.csv), each read as the type ``SETTINGS`` gives it."""
    df = load("settings", data_dir)
    names = df["name"].tolist()
    missing = [n for n in SETTINGS if n not in names]
    extra = [n for n in names if n not in SETTINGS]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if missing or extra or repeated:
        raise ValueError(f"settings.csv: missing settings {missing}, unknown settings {extra}, repeated {repeated}")
    return {name: _parse_setting(name, text) for name, text in zip(df["name"], df["value"], strict=True)}


@functools.cache
def _repository_settings() -> dict[str, int | float | tuple[int, ...]]:
    return settings()


def setting(name: str) -> int | float | tuple[int, ...]:
    """One setting the paper states, by its name in settings.csv (e.g. "simulator_vocab_size" -> 128000)."""
    if name not in SETTINGS:
        raise ValueError(f"unknown setting {name!r}; available: {sorted(SETTINGS)}")
    return _repository_settings()[name]


def blog_headline_scores(data_dir: Path = DATA_DIR) -> pd.DataFrame:
    """The authors' blog's headline scores of the released BroRL model (one row; Math, Code and Reasoning Gym
    scores in the units of Table 1's score columns), from ``blog_headline_scores.csv``.

    These are not the paper's numbers: the blog (NVIDIA technical blog, 19 Nov 2025) is quoted through a
    third-party summary, and the released checkpoint was trained beyond every row of Table 1. Compare them
    with the paper only side by side (``paper.report.blog_vs_paper``), never as a row of Table 1.
    """
    df = load("blog_headline_scores", data_dir)
    if len(df) != 1:
        raise ValueError(f"blog_headline_scores.csv: expected one row (the released model), found {len(df)}")
    return df


def arm_shapes() -> dict[str, tuple[int, int]]:
    """Table 1's arms in the paper's order: method -> (rollouts per prompt N, prompts per RL step)."""
    t1 = load("table1_efficiency")
    arms = t1[t1["method"] != "Baseline"].drop_duplicates(["method", "n_rollouts", "prompts_per_step"])
    if arms["method"].duplicated().any():
        raise ValueError("table1_efficiency.csv: an arm has rows with different N or prompts per step")
    shapes = zip(arms["method"], arms["n_rollouts"], arms["prompts_per_step"], strict=True)
    return {method: (int(n), int(prompts)) for method, n, prompts in shapes}


def baseline_steps() -> int:
    """RL steps of the checkpoint both arms continue from (Table 1's Baseline row; the ProRLv2 checkpoint)."""
    t1 = load("table1_efficiency")
    return int(t1.loc[t1["method"] == "Baseline", "steps"].iloc[0])


def steps_added(printed: pd.Series) -> pd.Series:
    """RL steps on top of the baseline: "+225" -> 225, the baseline's "3000" -> 0."""
    base = baseline_steps()
    return printed.map(lambda s: int(s[1:]) if s.startswith("+") else int(s) - base)


def samples_added(printed: pd.Series) -> pd.Series:
    """Samples on top of the baseline, as a number of samples ("+4390" thousand -> 4,390,000; "" -> 0)."""
    return printed.map(lambda s: int(s.lstrip("+")) * 1000 if s else 0)


def domain_average_checks() -> pd.DataFrame:
    """Math and Code averages recomputed from their columns, and the Reasoning Gym gap, per row."""
    math, code, rg = load("table3_math"), load("table4_code"), load("table5_reasoning_gym")
    out = math[ID_COLUMNS].copy()
    out["math_reported"] = math["math_avg"]
    out["math_recomputed"] = math[MATH_COLUMNS].mean(axis=1)
    out["code_reported"] = code["code_avg"]
    out["code_recomputed"] = code[CODE_COLUMNS].mean(axis=1)
    out["rg_reported"] = rg["rg_avg"]
    out["rg_category_mean"] = rg[RG_COLUMNS].mean(axis=1)
    out["rg_gap"] = out["rg_category_mean"] - out["rg_reported"]
    return out


def table1_arms() -> pd.DataFrame:
    """Table 1 without the baseline row, with its Steps and Samples columns as numbers."""
    t1 = load("table1_efficiency")
    t1 = t1[t1["method"] != "Baseline"].reset_index(drop=True)
    return t1.assign(steps_added=steps_added(t1["steps"]), samples_added=samples_added(t1["samples_k"]))


def sample_accounting() -> pd.DataFrame:
    """Table 1 per arm: samples per step before filtering, the kept fraction it implies, steps/h, samples/s."""
    t1 = table1_arms()
    t1["samples_per_step"] = t1["samples_added"] / t1["steps_added"]
    t1["kept_per_step"] = t1["n_rollouts"] * t1["prompts_per_step"]
    t1["implied_pass_rate"] = t1["kept_per_step"] / t1["samples_per_step"]
    t1["steps_per_hour"] = t1["steps_added"] / t1["time_h"]
    t1["samples_per_s"] = t1["samples_added"] / (t1["time_h"] * 3600)
    cols = [
        "method",
        "steps",
        "time_h",
        "samples_per_step",
        "kept_per_step",
        "implied_pass_rate",
        "steps_per_hour",
        "samples_per_s",
    ]
    return t1[cols]


def samples_model(pass_rates: dict[str, float]) -> pd.DataFrame:
    """Table 1's Samples column against steps x prompts x N / pass rate (Table 2's rate per arm)."""
    t1 = table1_arms()
    model = t1["steps_added"] * t1["prompts_per_step"] * t1["n_rollouts"] / t1["method"].map(pass_rates)
    return pd.DataFrame(
        {
            "method": t1["method"],
            "steps": t1["steps"],
            "samples_reported": t1["samples_added"],
            "samples_model": model.round(),
            "ratio": t1["samples_added"] / model,
        }
    )


def table2_pass_rates() -> dict[int, float]:
    """N -> dynamic-sampling pass rate (a fraction) from Table 2."""
    t2 = load("table2_efficiency")
    return dict(zip(t2["n_rollouts"].astype(int), t2["dynamic_sampling_pass_rate_pct"] / 100.0))


def table2_throughput() -> dict[int, float]:
    """N -> generation throughput in samples/s from Table 2."""
    t2 = load("table2_efficiency")
    return {int(n): float(r) for n, r in zip(t2["n_rollouts"], t2["generation_throughput_samples_per_s"], strict=True)}


def table2_throughput_ratio() -> float:
    """Table 2's throughput at the larger N over that at the smaller N (BroRL / ProRL, samples/s per samples/s)."""
    rates = table2_throughput()
    return rates[max(rates)] / rates[min(rates)]


def side_by_side(reported: pd.DataFrame, reproduced: pd.DataFrame | None, keys: list[str]) -> pd.DataFrame:
    """One row per key; each value column as ``col (reported)`` and, where given, ``col (reproduced)``.

    ``reproduced`` holds the same key columns and any subset of the value columns; its rows join the
    reported ones on ``keys`` (rows only in ``reproduced`` are kept too, with no reported value).
    """
    missing = [k for k in keys if k not in reported.columns or (reproduced is not None and k not in reproduced.columns)]
    if missing:
        raise ValueError(f"side_by_side: key columns {missing} missing")
    values = [c for c in reported.columns if c not in keys]
    left = reported.rename(columns={c: f"{c} (reported)" for c in values})
    if reproduced is None:
        return left
    unknown = [c for c in reproduced.columns if c not in keys and c not in values]
    if unknown:
        raise ValueError(f"side_by_side: reproduced columns {unknown} are not in the reported table")
    right = reproduced.rename(columns={c: f"{c} (reproduced)" for c in reproduced.columns if c not in keys})
    merged = left.merge(right, on=keys, how="outer", sort=False)
    order = keys + [
        f"{c} ({kind})" for c in values for kind in ("reported", "reproduced") if f"{c} ({kind})" in merged.columns
    ]
    return merged[order]


def figure1_data() -> pd.DataFrame:
    """Table 1 as (method, hours, domain, score) points, each arm starting from the baseline at 0 h."""
    t1 = load("table1_efficiency")
    base = t1[t1["method"] == "Baseline"].iloc[0]
    rows = []
    for method in ("ProRL", "BroRL"):
        arm = pd.concat([base.to_frame().T.assign(method=method, time_h=0.0), t1[t1["method"] == method]])
        for col, domain in (("math_score", "Math"), ("code_score", "Code"), ("reasoning_gym_score", "Reasoning Gym")):
            rows += [
                {"method": method, "hours": float(h), "domain": domain, "score": float(s), "steps": st}
                for h, s, st in zip(arm["time_h"], arm[col], arm["steps"])
            ]
    return pd.DataFrame(rows)
