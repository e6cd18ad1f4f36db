"""Which profile a run's parameters are, and what they change: a run with other parameters is a ``variant``.

The companion's own profiles (``SHIPPED_PROFILES``: quick, paper and gpu in params/profiles.yaml) are what its
provenance classes speak of: ``reproduced`` is the paper's scale as the paper profile sets it, ``scaled-down``
the quick profile's. A notebook declares the class its profile's parameters give; ``classify`` turns a
``reproduced`` or ``scaled-down`` artifact into a ``variant`` as soon as one parameter differs from its
profile's, whatever the scale, and names the profile and the changed parameters (for the stamp, the caption,
the sidecar and the manifest). ``reported`` numbers are the paper's whatever the parameters, so they stay
``reported``; an ``estimate`` stays one and carries the changed parameters beside its basis.

The profile a run is compared with: the pipeline's ``--profile`` (``BRORL_PROFILE``) when it is a shipped
one; otherwise (a kernel in JupyterLab, an explorer, a profile of the user's own) the shipped profile whose
values differ from the run's in the fewest parameters. Parameters declared ``operational`` (where or whether
to run: paths, names, a launch switch) never make a variant. A ``reproduced`` artifact made with exactly the
parameters of a shipped profile other than paper (or gpu), such as quick's, is ``scaled-down``. The run's
parameters are those of the config the notebook builds from its parameters cell
(``NotebookConfig.from_namespace`` registers it).
"""

from __future__ import annotations

import os

from brorl_lib.core.paths import PARAMS_DIR

PROFILE_ENV = "BRORL_PROFILE"  # set by the pipeline for the notebook's kernel
SHIPPED_PROFILES = ("quick", "paper", "gpu")  # order breaks ties when a run is equally near two profiles
PAPER_SCALE_PROFILES = ("paper", "gpu")  # the profiles whose runs are at the paper's scale
BECOMES_VARIANT = ("reproduced", "scaled-down")  # the classes a changed parameter takes away
KEEPS_CHANGES = ("estimate",)  # classes that stay, but list the changed parameters

_run: list = []  # the config of the notebook run in this process (the last one registered)


def register_run(config) -> None:
    """Remember ``config`` as the parameters of the notebook running in this process."""
    _run[:] = [config]


def clear_run() -> None:
    _run.clear()


def run_config():
    return _run[0] if _run else None


def _spec_of(config_class):
    from brorl_lib.core.registry import NOTEBOOKS

    path = f"{config_class.__module__}:{config_class.__qualname__}"
    return next((nb for nb in NOTEBOOKS if nb.config == path), None)


def _plain(value):
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def profile_values(spec, profile: str, params_dir=PARAMS_DIR) -> dict[str, object]:
    """Every parameter of ``spec``'s notebook under ``profile``: its defaults, then the profile's values read by
    their declarations (no checks of this machine: the gpu profile's ``device: cuda`` is read on a CPU too)."""
    from brorl_lib.core.profiles import declared, load_profile

    cls = spec.config_class()
    entry = load_profile(profile, params_dir).get(spec.name, {"parameters": {}})
    given = {k: declared(spec, k).coerce(v) for k, v in entry["parameters"].items()}
    return {k: _plain(v) for k, v in {**cls.defaults(), **given}.items()}


def changes(values: dict, reference: dict, config_class) -> dict[str, object]:
    """Parameters (not operational) whose value in ``values`` differs from ``reference``, in declaration order."""
    operational = {p.name for p in config_class.declaration() if p.operational}
    return {
        k: _plain(v) for k, v in values.items() if k not in operational and k in reference and _plain(v) != reference[k]
    }


def _diffs(spec, values: dict, params_dir, depends_on=None) -> dict[str, dict]:
    """Shipped profile -> the parameters ``values`` changes from it (of ``depends_on`` only, when given)."""
    from brorl_lib.core.profiles import available_profiles

    cls = spec.config_class()
    values = {k: _plain(v) for k, v in values.items() if depends_on is None or k in depends_on}
    diffs = {}
    present = available_profiles(params_dir)
    for p in SHIPPED_PROFILES:
        if p in present:
            try:
                diffs[p] = changes(values, profile_values(spec, p, params_dir), cls)
            except ValueError:  # a profile that no longer fits the declaration (its plan is refused): no reference
                continue
    return diffs


def _variant(spec, values: dict, profile: str | None, params_dir, depends_on=None) -> dict | None:
    diffs = _diffs(spec, values, params_dir, depends_on)
    shipped = list(diffs)
    if not diffs or any(not d for d in diffs.values()):
        return None
    reference = profile if profile in diffs else min(shipped, key=lambda p: len(diffs[p]))
    return {"profile": reference, "changed": diffs[reference]}


def variant_of(config, profile: str | None = None, params_dir=PARAMS_DIR, depends_on=None) -> dict | None:
    """``{"profile": name, "changed": {parameter: value}}`` when ``config`` differs from every shipped profile
    (compared with ``profile`` when it is shipped, else with the nearest; only in the parameters ``depends_on``
    names, when given); None when it is one of them or belongs to no notebook."""
    spec = _spec_of(type(config))
    return None if spec is None else _variant(spec, config.as_dict(), profile, params_dir, depends_on)


def classify(
    declared: str, config=None, depends_on: tuple[str, ...] | None = None, beyond: dict[str, str] | None = None
) -> tuple[str, dict | None]:
    """(class, variant) for an artifact a notebook declares ``declared``, made with ``config`` (default: the
    registered run's). A changed parameter never leaves ``reproduced`` or ``scaled-down``. ``depends_on``: the
    only parameters the artifact depends on (default: all of its notebook's; ``()``, an analytic curve, none):
    a parameter outside it neither makes a variant nor a scaled-down artifact. ``beyond``: settings the artifact
    itself changes from the paper's experiment (setting -> what it is here), which make it a variant by design."""
    config = config if config is not None else run_config()
    if beyond and declared in BECOMES_VARIANT:
        found = variant_of(config, os.environ.get(PROFILE_ENV) or None, depends_on=depends_on) if config else None
        profile = found["profile"] if found else os.environ.get(PROFILE_ENV) or "paper"
        changed = {**dict(beyond), **(found or {}).get("changed", {})}
        return "variant", {"profile": profile, "changed": changed, "by_design": sorted(beyond)}
    if config is None or declared not in (*BECOMES_VARIANT, *KEEPS_CHANGES):
        return declared, None
    variant = variant_of(config, os.environ.get(PROFILE_ENV) or None, depends_on=depends_on)
    if variant is None:
        if declared == "reproduced" and not at_paper_scale(config, depends_on=depends_on):
            return "scaled-down", None  # the quick profile's parameters: the paper's experiment, made smaller
        return declared, None
    return ("variant" if declared in BECOMES_VARIANT else declared), variant


def at_paper_scale(config, params_dir=PARAMS_DIR, depends_on=None) -> bool:
    """Whether ``config`` has the paper profile's parameters (or the gpu profile's, which extends it), of
    ``depends_on`` only when given: only such a run's artifacts may be ``reproduced``. True for a config of no
    notebook."""
    spec = _spec_of(type(config))
    if spec is None:
        return True
    diffs = _diffs(spec, config.as_dict(), params_dir, depends_on)
    return any(p in diffs and not diffs[p] for p in PAPER_SCALE_PROFILES)


def describe(spec, profile: str, parameters: dict, params_dir=PARAMS_DIR) -> dict | None:
    """What ``classify`` will say of a pipeline run of ``spec`` with ``profile`` and its resolved
    ``parameters`` (the values that differ from the notebook's defaults), before it runs."""
    return _variant(spec, {**spec.config_class().defaults(), **parameters}, profile, params_dir)
