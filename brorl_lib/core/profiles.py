"""Parameter profiles (params/*.yaml) and their checks against each notebook's parameters cell.

A profile maps notebook names to parameter overrides and an optional timeout::

    extends: paper            # optional: start from another profile
    notebooks:
      01_theory:
        timeout_s: 900
        parameters: {n_instances: 3000}

Parameters a profile does not set keep the notebook's defaults (the quick profile).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import yaml

from brorl_lib.core.paths import PARAMS_DIR
from brorl_lib.core.registry import NotebookSpec, get_notebook

PROFILE_KEYS = {"extends", "description", "notebooks"}
NOTEBOOK_KEYS = {"parameters", "timeout_s"}


def available_profiles(params_dir: Path = PARAMS_DIR) -> list[str]:
    return sorted(p.stem for p in params_dir.glob("*.yaml"))


def load_profile(name: str, params_dir: Path = PARAMS_DIR, _seen: tuple[str, ...] = ()) -> dict[str, dict]:
    """Notebook name -> {"parameters": {...}, "timeout_s": int|None}, with ``extends`` resolved."""
    path = params_dir / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown profile {name!r}; available: {available_profiles(params_dir)}")
    if name in _seen:
        raise ValueError(f"profile {name!r} extends itself through {list(_seen)}")
    raw = yaml.safe_load(path.read_text()) or {}
    bad = set(raw) - PROFILE_KEYS
    if bad:
        raise ValueError(f"{path.name}: unknown keys {sorted(bad)}; allowed: {sorted(PROFILE_KEYS)}")
    merged = load_profile(raw["extends"], params_dir, _seen + (name,)) if raw.get("extends") else {}
    for nb_name, entry in (raw.get("notebooks") or {}).items():
        get_notebook(nb_name)  # unknown notebook -> ValueError
        entry = entry or {}
        bad = set(entry) - NOTEBOOK_KEYS
        if bad:
            raise ValueError(f"{path.name}: {nb_name}: unknown keys {sorted(bad)}; allowed: {sorted(NOTEBOOK_KEYS)}")
        base = merged.get(nb_name, {"parameters": {}, "timeout_s": None})
        merged[nb_name] = {
            "parameters": {**base["parameters"], **(entry.get("parameters") or {})},
            "timeout_s": entry.get("timeout_s", base["timeout_s"]),
        }
    return merged


def notebook_defaults(spec: NotebookSpec) -> dict[str, object]:
    """The notebook's parameters cell, as read by papermill, with defaults evaluated."""
    import papermill

    info = papermill.inspect_notebook(str(spec.path))
    if not info:
        raise ValueError(f"{spec.path.name} has no cell tagged 'parameters'")
    return {name: ast.literal_eval(p["default"]) for name, p in info.items()}


@dataclass(frozen=True)
class Plan:
    """One notebook run, fully resolved and validated."""

    spec: NotebookSpec
    profile: str
    parameters: dict[str, object]  # only the values that differ from the notebook's own defaults
    timeout_s: int


def plan_run(spec: NotebookSpec, profile: str, overrides: dict[str, object] | None = None) -> Plan:
    """Merge the profile and ``overrides``; reject unknown names and bad values before running."""
    entry = load_profile(profile).get(spec.name, {"parameters": {}, "timeout_s": None})
    params = {**entry["parameters"], **(overrides or {})}
    defaults = notebook_defaults(spec)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(
            f"notebook {spec.name} has no parameter {', '.join(map(repr, unknown))}; "
            f"its parameters are: {', '.join(defaults)}"
        )
    try:
        spec.config_class()(**{**defaults, **params})  # ValueError names the bad parameter
    except TypeError as err:  # a parameters-cell line papermill could not read, or a stale config class
        raise ValueError(f"notebook {spec.name}: parameters cell and {spec.config} disagree: {err}") from None
    return Plan(spec, profile, params, int(entry["timeout_s"] or spec.timeout_s))


def parse_override(name: str, text: str) -> tuple[str, object]:
    """``-p name value`` as on papermill's command line: the value is read as YAML."""
    return name, yaml.safe_load(text)
