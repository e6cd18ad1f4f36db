"""Save what you see: an explored figure in the style it was drawn in, with its provenance and parameters.

``save_view`` writes ``name``.pdf and ``name``.png (and ``name``.svg on request; fixed metadata: the same
figure gives the same bytes) and ``name``.json beside them (caption with the provenance class, a variant's
changed parameters, the parameters, the style). It never writes into ``figures/``, which only the pipeline
fills. An explorer's ``save`` re-draws the figure in the style it is given (``explore.interact``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import matplotlib as mpl

from brorl_lib.core import atomic, variants
from brorl_lib.core.artifacts import check_artifact, class_text
from brorl_lib.core.paths import BUILD_DIR, FIGURES_DIR, REPO_ROOT
from brorl_lib.figures import styles
from brorl_lib.figures.plotting import stamp_provenance, style_of, write_figure

DEFAULT_VIEWS_DIR = BUILD_DIR / "views"


def views_folder(folder: str | Path) -> Path:
    """``folder`` as an absolute path (relative ones from the repository root); refuses figures/ and inside it."""
    text = str(folder).strip()
    if not text:
        raise ValueError("folder='' is not allowed: name a folder, e.g. build/views")
    path = Path(text).expanduser()
    path = (path if path.is_absolute() else REPO_ROOT / path).resolve()
    figures = FIGURES_DIR.resolve()
    if path == figures or path.is_relative_to(figures):
        raise ValueError(
            f"folder={str(folder)!r} is not allowed: figures/ holds the pipeline's artifacts only; "
            "choose another folder, e.g. build/views"
        )
    return path


def _json_value(value):
    """Parameters as JSON: tuples as lists, numpy scalars as numbers, anything else as its text."""
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def save_view(
    fig: mpl.figure.Figure,
    folder: str | Path = DEFAULT_VIEWS_DIR,
    *,
    provenance: str,
    parameters: Mapping[str, object],
    name: str = "view",
    caption: str = "",
    basis: str = "",
    config=None,
    formats: tuple[str, ...] = styles.FORMATS,
) -> list[Path]:
    """Write ``name``.pdf, .png (.svg when ``formats`` has it) and .json into ``folder`` (relative: from the
    repository root); returns them.

    The provenance class is stamped on the figure and ends the caption; made with a ``config`` (default: the
    notebook run's) other than its profile's, a ``reproduced`` or ``scaled-down`` figure is a ``variant``
    (``core.variants``). The parameters go into the JSON sidecar and the files' metadata, with the style the
    figure was drawn in."""
    check_artifact(name, provenance, basis)
    formats = styles.check_formats(formats, "formats")
    out = views_folder(folder)
    provenance, changed = variants.classify(provenance, config)
    params = _json_value(dict(parameters))
    params_text = json.dumps(params, sort_keys=True, ensure_ascii=False)
    said = class_text(provenance, changed, basis) if (changed or basis) else provenance
    full_caption = f"{caption.strip()} [{said}]".strip()
    stamp_provenance(fig, provenance, changed, basis)
    style = style_of(fig)
    extra = {
        "pdf": {"Subject": full_caption, "Keywords": params_text},
        "png": {"Description": full_caption, "Comment": params_text},
        "svg": {"Description": full_caption, "Keywords": params_text},
    }
    out.mkdir(parents=True, exist_ok=True)
    files = write_figure(fig, out / name, formats, extra)
    record = {"name": name, "provenance": provenance, "caption": full_caption, "parameters": params}
    record["style"] = style.label
    if changed:
        record["variant"] = _json_value(changed)
    if basis:
        record["basis"] = basis
    sidecar = out / f"{name}.json"
    atomic.write_text(sidecar, json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return [*files, sidecar]
