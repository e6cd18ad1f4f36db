"""Parameter profiles (params/*.yaml) and their checks against each notebook's declared parameters.

A profile maps notebook names to parameter overrides and an optional timeout::

    extends: paper            # optional: start from another profile
    notebooks:
      01_theory:
        timeout_s: 900
        parameters: {n_instances: 3000}

Parameters a profile does not set keep the notebook's defaults (the quick profile). Every value, from a
profile or from ``-p NAME VALUE``, is read by its parameter's declaration (``core.params.Param``) and checked
with all the others before anything runs.
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
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        lines = path.read_text().splitlines()
        mark = getattr(err, "context_mark", None) or getattr(err, "problem_mark", None)  # where the value began
        where = f" line {mark.line + 1}: {lines[mark.line].strip()!r}" if mark and mark.line < len(lines) else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"{path.name}{where}: not valid YAML ({problem})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path.name}: expected a mapping with keys {sorted(PROFILE_KEYS)}")
    bad = set(raw) - PROFILE_KEYS
    if bad:
        raise ValueError(f"{path.name}: unknown keys {sorted(bad)}; allowed: {sorted(PROFILE_KEYS)}")
    merged = load_profile(raw["extends"], params_dir, _seen + (name,)) if raw.get("extends") else {}
    for nb_name, entry in (raw.get("notebooks") or {}).items():
        get_notebook(nb_name)  # unknown notebook -> ValueError
        entry = entry or {}
        if not isinstance(entry, dict) or not isinstance(entry.get("parameters") or {}, dict):
            raise ValueError(
                f"{path.name}: {nb_name}: expected a mapping with keys {sorted(NOTEBOOK_KEYS)}, "
                "its parameters a mapping of name to value"
            )
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
    """The notebook's parameters cell, as read by papermill, with defaults evaluated (a test keeps it equal to
    the declaration's defaults)."""
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


def declared(spec: NotebookSpec, name: str):
    """The declaration (``core.params.Param``) of the notebook's parameter ``name``."""
    cls = spec.config_class()
    names = cls.parameter_names()
    if name not in names:
        raise ValueError(f"notebook {spec.name} has no parameter {name!r}; its parameters are: {', '.join(names)}")
    return cls.parameter(name)


def plan_run(
    spec: NotebookSpec, profile: str, overrides: dict[str, object] | None = None, params_dir: Path = PARAMS_DIR
) -> Plan:
    """Merge the profile and ``overrides``; read each value by its declaration (``1e-3`` is a number) and
    reject unknown names and bad values before running (ValueError naming the parameter)."""
    entry = load_profile(profile, params_dir).get(spec.name, {"parameters": {}, "timeout_s": None})
    merged = {**entry["parameters"], **(overrides or {})}
    params = {name: declared(spec, name).coerce(value) for name, value in merged.items()}
    cls = spec.config_class()
    cls(**{**cls.defaults(), **params})  # every declared check, then the cross-parameter ones
    return Plan(spec, profile, params, int(entry["timeout_s"] or spec.timeout_s))


def parse_override(spec: NotebookSpec, name: str, text: str) -> tuple[str, object]:
    """``-p name value`` as on papermill's command line: the value read as YAML, then by the parameter's
    declaration (a number in any YAML or Python spelling; a malformed value names the parameter)."""
    return name, declared(spec, name).parse(text)
