"""Per-run noise out of an executed notebook, so that re-executing it changes only what its outputs say.

Four kinds: papermill's timestamps and durations (cell and notebook metadata); the id of papermill's injected
parameters cell, new on every run; progress bars (a tqdm bar is a widget whose saved state holds elapsed times
and rates); and widget model ids, which are random on every run. Progress bars are dropped with their widget
state; the ids of the widgets that stay (sliders of an explorer) are renumbered in order of appearance.
"""

from __future__ import annotations

import json
import re

import nbformat

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
# tqdm's "[00:01<00:02, 3.4it/s]", or "[00:00, ?it/s]" for a bar without a total (an empty loop among them)
_PROGRESS_BAR = re.compile(r"\[\d+:\d+(:\d+)?(<[^\]]*|, [^\]]*)\]\s*$")
_MODEL_REF = "IPY_MODEL_"
INJECTED = "injected-parameters"  # papermill's tag of the cell it injects; here also that cell's fixed id


def _is_progress_bar(output: dict) -> bool:
    data = output.get("data", {})
    text = data.get("text/plain", "")
    text = "".join(text) if isinstance(text, list) else text
    return WIDGET_VIEW in data and bool(_PROGRESS_BAR.search(text))


def _referenced(state: dict, roots: list[str]) -> list[str]:
    """Model ids reachable from ``roots`` through IPY_MODEL_ references, in order of first reach."""
    order, todo = [], list(roots)
    while todo:
        model = todo.pop(0)
        if model in order or model not in state:
            continue
        order.append(model)
        todo += re.findall(_MODEL_REF + r"([0-9a-f]+)", json.dumps(state[model], sort_keys=True))
    return order


def strip_noise(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Remove run metadata and progress bars, fix the injected cell's id and renumber widget ids (in place; ``nb``
    is returned)."""
    nb.metadata.pop("papermill", None)
    roots = []
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if INJECTED in cell.metadata.get("tags", []):
            cell.id = INJECTED
        if cell.cell_type != "code":
            continue
        cell.outputs = [o for o in cell.outputs if not _is_progress_bar(o)]
        roots += [o["data"][WIDGET_VIEW]["model_id"] for o in cell.outputs if WIDGET_VIEW in o.get("data", {})]
    widgets = nb.metadata.get("widgets", {}).get(WIDGET_STATE)
    state = widgets.get("state", {}) if widgets else {}
    kept = _referenced(state, roots)
    if not kept:
        nb.metadata.pop("widgets", None)
    shown = kept + [r for r in dict.fromkeys(roots) if r not in kept]  # views whose state was not saved, too
    new_id = {old: f"{i:032x}" for i, old in enumerate(shown, 1)}

    def renumber(text: str) -> str:
        return re.sub(_MODEL_REF + r"([0-9a-f]+)", lambda m: _MODEL_REF + new_id.get(m[1], m[1]), text)

    if kept:
        widgets["state"] = {new_id[m]: json.loads(renumber(json.dumps(state[m]))) for m in kept}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view and view.get("model_id") in new_id:
                view["model_id"] = new_id[view["model_id"]]
    return nb
