"""Where a run writes its artifacts: figures/ only for the run it is committed with.

figures/ is committed, made with the paper profile (``FIGURES_PROFILE``). A run of that profile whose
parameters are exactly its values goes there (it reproduces the committed files, byte for byte). Any other
run, another profile or one ``-p`` changed, goes to a folder of its own under build/runs/ unless the user
names ``--out`` explicitly, so that no command replaces the committed results by surprise. The folder's name
says the profile and, for a run with overrides, a short hash of them: two variants never share a folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

from brorl_lib.core.paths import BUILD_DIR, FIGURES_DIR
from brorl_lib.core.profiles import Plan, plan_run

FIGURES_PROFILE = "paper"  # the profile figures/ is made with (what `reproduce` and `make reproduce` use)
RUNS_DIR = "runs"  # under build/: one folder per profile or variant


def _values(plan: Plan) -> str:
    """Every parameter of ``plan``'s notebook as the run will see it, as canonical JSON."""
    values = {**plan.spec.config_class().defaults(), **plan.parameters}
    return json.dumps(values, sort_keys=True, default=str)


def is_committed_run(plan: Plan) -> bool:
    """Whether ``plan`` is the run figures/ was made with: its profile and exactly its parameters (the manifest
    records the profile's name, so another profile with the same values would still rewrite it)."""
    return plan.profile == FIGURES_PROFILE and _values(plan) == _values(plan_run(plan.spec, FIGURES_PROFILE))


def own_folder(profile: str, overrides: dict[str, object]) -> Path:
    """build/runs/<profile>, or build/runs/<profile>-<hash of the overrides> for a run with ``-p`` values."""
    if not overrides:
        return BUILD_DIR / RUNS_DIR / profile
    key = hashlib.sha256(json.dumps(overrides, sort_keys=True, default=str).encode()).hexdigest()[:8]
    return BUILD_DIR / RUNS_DIR / f"{profile}-{key}"


def choose(plans: Sequence[Plan], profile: str, overrides: dict[str, object]) -> Path:
    """The default output folder of a run of ``plans``: figures/ when every one is a committed run, else
    ``own_folder``."""
    if plans and all(is_committed_run(p) for p in plans):
        return FIGURES_DIR
    return own_folder(profile, overrides)


def is_figures(out_dir: Path) -> bool:
    """Whether ``out_dir`` is the committed figures/ folder."""
    return Path(out_dir).resolve() == FIGURES_DIR.resolve()


def shown(path: Path) -> str:
    """``path`` as a user would type it here: relative to the working folder when inside it."""
    rel = os.path.relpath(Path(path).resolve())
    return rel if not rel.startswith("..") else str(path)
