"""Save what you see: an explored figure in the publication style, with its provenance and parameters.

``save_view`` writes ``name``.pdf and ``name``.png (fixed metadata: the same figure gives the same bytes)
and ``name``.json beside them (caption with the provenance class, the parameters). It never writes into
``figures/``, which only the pipeline fills.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import matplotlib as mpl

from brorl_lib.core import atomic
from brorl_lib.core.artifacts import check_artifact
from brorl_lib.core.paths import BUILD_DIR, FIGURES_DIR, REPO_ROOT
from brorl_lib.core.plotting import stamp_provenance

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
) -> list[Path]:
    """Write ``name``.pdf, .png and .json into ``folder`` (relative: from the repository root); returns them.

    The provenance class is stamped on the figure and ends the caption; the parameters go into the
    JSON sidecar and the PDF's and PNG's metadata."""
    check_artifact(name, provenance)
    out = views_folder(folder)
    params = _json_value(dict(parameters))
    params_text = json.dumps(params, sort_keys=True, ensure_ascii=False)
    full_caption = f"{caption.strip()} [{provenance}]".strip()
    stamp_provenance(fig, provenance)
    pdf_meta = {"CreationDate": None, "ModDate": None, "Creator": "brorl_lib", "Subject": full_caption}
    pdf_meta["Keywords"] = params_text
    png_meta = {"Software": None, "Description": full_caption, "Comment": params_text}
    out.mkdir(parents=True, exist_ok=True)
    files = [out / f"{name}.pdf", out / f"{name}.png", out / f"{name}.json"]
    atomic.write_with(files[0], lambda t: fig.savefig(t, format="pdf", metadata=pdf_meta))
    atomic.write_with(files[1], lambda t: fig.savefig(t, format="png", metadata=png_meta))
    record = {"name": name, "provenance": provenance, "caption": full_caption, "parameters": params}
    atomic.write_text(files[2], json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
    return files
