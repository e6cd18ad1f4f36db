"""Per-run noise out of executed notebooks: progress bars (with and without a total) go with their widget state;
papermill's injected cell keeps one id."""

import copy

import nbformat
import pytest

from brorl_lib.core.registry import NOTEBOOKS
from brorl_lib.pipeline import notebook_noise as noise


def _view(model: str, text: str) -> dict:
    return nbformat.v4.new_output(
        "display_data", data={noise.WIDGET_VIEW: {"model_id": model, "version_major": 2}, "text/plain": text}
    )


def test_progress_bars_go_and_the_explorers_widgets_stay_renumbered():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("run()")
    cell.outputs = [
        _view("aa", "train:  40%|####      | 4/10 [00:01<00:02, 3.4it/s]"),
        _view("bb", "update quality at plateau-step390: 0update [00:00, ?update/s]"),  # no total: an empty loop
        _view("cc", "IntSlider(value=3)"),
    ]
    nb.cells = [cell]
    state = {m: {"model_name": "X", "state": {}} for m in ("aa", "bb", "cc")}
    nb.metadata["widgets"] = {noise.WIDGET_STATE: {"state": state, "version_major": 2}}
    noise.strip_noise(nb)
    assert [o["data"]["text/plain"] for o in cell.outputs] == ["IntSlider(value=3)"]
    kept = nb.metadata["widgets"][noise.WIDGET_STATE]["state"]
    assert list(kept) == [f"{1:032x}"] and cell.outputs[0]["data"][noise.WIDGET_VIEW]["model_id"] == f"{1:032x}"


def test_the_injected_parameters_cell_gets_one_id_whatever_papermill_drew():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}) for _ in range(2)]
    nb.cells[1].metadata["tags"] = [noise.INJECTED]
    first = nb.cells[0].id
    noise.strip_noise(nb)
    assert nb.cells[1].id == noise.INJECTED and nb.cells[0].id == first
    nbformat.validate(nb)


@pytest.mark.parametrize("spec", NOTEBOOKS, ids=lambda s: s.name)
def test_committed_notebooks_carry_no_run_noise(spec):
    """The committed outputs are already stripped: no progress bar and no widget state (the book would fetch the
    widget manager from a CDN to show it)."""
    nb = nbformat.read(spec.path, as_version=4)
    assert noise.strip_noise(copy.deepcopy(nb)) == nb
    assert "widgets" not in nb.metadata
