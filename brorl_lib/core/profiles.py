"""Parameter profiles (params/) and their checks against each notebook's declared parameters.

A profile is a folder of flat parameter files, one per notebook it changes, each what papermill's ``-f`` takes as
it is (``papermill notebooks/01_theory.ipynb out.ipynb -f params/paper/01_theory.yaml``)::

    params/profiles.yaml          the profiles: description, the profile each extends, timeouts
    params/paper/01_theory.yaml   n_instances: 3000
                                  mc_trials: 2000000

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

INDEX = "profiles.yaml"  # in params/: every profile, what it is for, what it extends, its timeouts
PROFILE_KEYS = {"extends", "description", "timeout_s"}


def _read_yaml(path: Path):
    """``path`` read as YAML; malformed YAML raises a ValueError naming the file, the line and the problem."""
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        lines = path.read_text().splitlines()
        mark = getattr(err, "context_mark", None) or getattr(err, "problem_mark", None)  # where the value began
        where = f" line {mark.line + 1}: {lines[mark.line].strip()!r}" if mark and mark.line < len(lines) else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"{_shown(path)}{where}: not valid YAML ({problem})") from None


def _shown(path: Path) -> str:
    """A profile's file as its messages name it: ``paper/01_theory.yaml``, ``profiles.yaml``."""
    return path.name if path.name == INDEX else f"{path.parent.name}/{path.name}"


def _index(params_dir: Path) -> dict[str, dict]:
    path = params_dir / INDEX
    raw = _read_yaml(path) if path.is_file() else None
    if not isinstance(raw, dict) or not all(isinstance(v, dict) or v is None for v in raw.values()):
        raise ValueError(f"{path}: expected a mapping of profile name to a mapping with keys {sorted(PROFILE_KEYS)}")
    return {name: entry or {} for name, entry in raw.items()}


def available_profiles(params_dir: Path = PARAMS_DIR) -> list[str]:
    return sorted(_index(params_dir))


def _chain(name: str, params_dir: Path) -> list[tuple[str, dict]]:
    """Profile ``name`` and the profiles it extends, each with its index entry, the base first; an unknown
    profile, an unknown key, a malformed timeout_s or a circle of ``extends`` raise a ValueError naming it."""
    index, chain = _index(params_dir), []
    while name is not None:
        if name not in index:
            raise ValueError(f"unknown profile {name!r}; available: {sorted(index)}")
        if name in (n for n, _ in chain):
            raise ValueError(f"profile {name!r} extends itself through {[n for n, _ in reversed(chain)]}")
        entry = index[name]
        bad = set(entry) - PROFILE_KEYS
        if bad:
            raise ValueError(f"{INDEX}: {name}: unknown keys {sorted(bad)}; allowed: {sorted(PROFILE_KEYS)}")
        if not isinstance(entry.get("timeout_s") or {}, dict):
            raise ValueError(
                f"{INDEX}: {name}: timeout_s is a mapping of notebook name to seconds, got {entry['timeout_s']!r}"
            )
        chain.insert(0, (name, entry))
        name = entry.get("extends")
    return chain


def profile_files(name: str, params_dir: Path = PARAMS_DIR) -> dict[str, list[Path]]:
    """Notebook name -> the flat files of profile ``name``, in the order papermill's ``-f`` takes them (those of
    the profile it extends first)."""
    files: dict[str, list[Path]] = {}
    for profile, _ in _chain(name, params_dir):
        folder = params_dir / profile
        for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
            files.setdefault(path.stem, []).append(path)
    return files


def load_profile(name: str, params_dir: Path = PARAMS_DIR) -> dict[str, dict]:
    """Notebook name -> {"parameters": {...}, "timeout_s": int|None}, with ``extends`` resolved."""
    merged: dict[str, dict] = {}
    for nb_name, paths in profile_files(name, params_dir).items():
        get_notebook(nb_name)  # a file named after no notebook -> ValueError
        parameters: dict[str, object] = {}
        for path in paths:
            values = _read_yaml(path) or {}
            if not isinstance(values, dict):
                raise ValueError(f"{_shown(path)}: expected a mapping of parameter name to value")
            parameters.update(values)
        merged[nb_name] = {"parameters": parameters, "timeout_s": None}
    for _, entry in _chain(name, params_dir):
        for nb_name, timeout in (entry.get("timeout_s") or {}).items():
            get_notebook(nb_name)
            merged.setdefault(nb_name, {"parameters": {}, "timeout_s": None})["timeout_s"] = timeout
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
