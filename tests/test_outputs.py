"""save_figure, save_table and atomic writes."""

import json

import numpy as np
import pandas as pd
import pytest

from brorl_lib.core import atomic
from brorl_lib.core.artifacts import RECORD_FILE, read_record
from brorl_lib.core.table_files import save_table
from brorl_lib.figures.plotting import new_figure, save_figure


def draw(seed=0):
    x = np.linspace(0, 1, 50)
    y = np.random.default_rng(seed).normal(size=50).cumsum()
    fig, ax = new_figure("column")
    ax.plot(x, y, label="walk")
    ax.legend()
    return fig, pd.DataFrame({"x": x, "y": y})


def test_same_data_gives_same_bytes(out_dir):
    fig, data = draw()
    first = {
        p.name: p.read_bytes() for p in save_figure(fig, "walk", provenance="reproduced", data=data, caption="c").files
    }
    fig2, data2 = draw()
    second = {
        p.name: p.read_bytes()
        for p in save_figure(fig2, "walk", provenance="reproduced", data=data2, caption="c").files
    }
    assert set(first) == {"walk.pdf", "walk.png", "walk.csv"}
    assert first == second
    assert b"CreationDate" not in first["walk.pdf"]
    fig3, data3 = draw(seed=1)
    third = {
        p.name: p.read_bytes()
        for p in save_figure(fig3, "walk", provenance="reproduced", data=data3, caption="c").files
    }
    assert third["walk.png"] != first["walk.png"]


def test_figure_is_stamped_and_recorded(out_dir):
    fig, data = draw()
    save_figure(fig, "walk", provenance="scaled-down", data=data, caption="a walk")
    save_figure(fig, "walk", provenance="scaled-down", data=data, caption="a walk")
    stamps = [t.get_text() for t in fig.texts]
    assert stamps == ["[scaled-down]"]  # stamped once, even when saved twice
    assert read_record(out_dir) == [
        {
            "name": "walk",
            "files": ["walk.pdf", "walk.png", "walk.csv"],
            "provenance": "scaled-down",
            "caption": "a walk",
        }
    ]


def test_bad_provenance_or_name_is_refused(out_dir):
    fig, data = draw()
    with pytest.raises(ValueError, match="provenance"):
        save_figure(fig, "walk", provenance="estimated", data=data, caption="")
    with pytest.raises(ValueError, match="name"):
        save_figure(fig, "../walk", provenance="reported", data=data, caption="")
    with pytest.raises(ValueError, match="width"):
        new_figure("half")


def test_save_table_writes_three_formats_with_provenance(out_dir):
    df = pd.DataFrame({"model": ["a", "b"], "score": [60.14123, 62.0]})
    saved = save_table(df, "table_x", provenance="reported", caption="Scores")
    assert repr(saved) == "saved table_x (md, tex, csv) [reported]"
    files = saved.files
    assert [f.name for f in files] == ["table_x.md", "table_x.tex", "table_x.csv"]
    md = files[0].read_text()
    assert "reported: numbers copied from the paper" in md and "60.14" in md
    assert "\\caption{Scores [reported: numbers copied from the paper]}" in files[1].read_text()
    assert pd.read_csv(files[2]).equals(df)
    assert json.loads((out_dir / RECORD_FILE).read_text().splitlines()[0])["provenance"] == "reported"


def test_atomic_write_keeps_old_file_on_failure(tmp_path):
    target = tmp_path / "a.txt"
    atomic.write_text(target, "old")

    def broken(tmp):
        tmp.write_text("half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic.write_with(target, broken)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]  # no temporary file left behind
