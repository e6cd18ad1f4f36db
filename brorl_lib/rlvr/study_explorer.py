"""Notebook 04's explore section: the countdown study's finished results, sliced interactively.

Two views of the notebook's own run folder (``runs_dir``; the committed notebook's is the paper profile's): the
update quality at one checkpoint, for chosen q bands and either measure; and held-out pass@1 against generated
samples for chosen phase-2 arms and seeds. Both only read what the notebook's cells finished; nothing trains.
"""

from __future__ import annotations

import ipywidgets as w
import pandas as pd

from brorl_lib.explore.interact import Explorer, Explorers
from brorl_lib.rlvr import study_phase2, study_plots, study_report
from brorl_lib.rlvr import update_quality as uq
from brorl_lib.rlvr.study_config import CountdownStudyConfig

PROVENANCE = "scaled-down"


def quality_summary(cfg: CountdownStudyConfig) -> pd.DataFrame:
    """Every finished update-quality row of ``cfg``'s run folder, summarised (``update_quality.summarise``)."""
    files = uq.grid_files(cfg.runs_path() / "update_quality")
    if not files:
        raise ValueError(f"{cfg.runs_dir} has no update-quality results yet: run section 3 of the notebook first")
    return uq.summarise(pd.concat([uq.read_raw(f) for f in files], ignore_index=True))


def phase2_table(cfg: CountdownStudyConfig) -> pd.DataFrame:
    """Held-out pass@1 of every finished verdict and control run at each budget (``study_report.at_budgets``)."""
    s, p = cfg.study(), cfg.phase2()
    frame = study_phase2.collect(s, p, cfg.runs_path())
    table = study_report.at_budgets(frame, p.budgets) if len(frame) else pd.DataFrame()
    if table.empty or (table["role"] == "isocompute").all():
        raise ValueError(f"{cfg.runs_dir} has no finished phase-2 run yet: run section 4 of the notebook first")
    return table[table["role"] != "isocompute"]


def _chosen(name: str, values) -> list:
    if not values:
        raise ValueError(f"{name}=[] is not allowed: choose at least one")
    return list(values)


def quality_view(cfg: CountdownStudyConfig):
    summary = quality_summary(cfg)
    checkpoints = list(dict.fromkeys(summary["checkpoint"]))
    bands = list(dict.fromkeys(summary["q_band"]))
    controls = {
        "checkpoint": w.Dropdown(options=checkpoints, value=checkpoints[-1], description="checkpoint"),
        "measure": w.ToggleButtons(options=[("cosine", "cosine"), ("Δ q", "delta_q")], description="measure"),
        "bands": w.SelectMultiple(options=bands, value=tuple(bands), rows=len(bands), description="q bands"),
    }

    def read(values: dict) -> dict:
        return {
            "checkpoint": values["checkpoint"],
            "measure": values["measure"],
            "bands": _chosen("bands", values["bands"]),
        }

    def draw(params: dict) -> object:
        pick = summary[(summary["checkpoint"] == params["checkpoint"]) & summary["q_band"].isin(params["bands"])]
        return study_plots.update_quality(pick, params["measure"])

    return Explorer(
        draw, controls, read=read, name="laptop_rlvr_update_quality_view", provenance=PROVENANCE,
        caption="Update quality at one checkpoint against N per S, chosen q bands, one standard error",
        title=f"Update quality in {cfg.runs_dir}",
    )  # fmt: skip


def arms_view(cfg: CountdownStudyConfig):
    table = phase2_table(cfg)
    labels = list(dict.fromkeys(table["label"]))
    seeds = sorted(table["seed"].unique().tolist())
    controls = {
        "arms": w.SelectMultiple(options=labels, value=tuple(labels[:2]), rows=len(labels), description="arms"),
        "seeds": w.SelectMultiple(options=seeds, value=tuple(seeds), rows=min(len(seeds), 6), description="seeds"),
    }

    def read(values: dict) -> dict:
        return {"arms": _chosen("arms", values["arms"]), "seeds": _chosen("seeds", values["seeds"])}

    def draw(params: dict) -> object:
        return study_plots.curves(table[table["label"].isin(params["arms"]) & table["seed"].isin(params["seeds"])])

    return Explorer(
        draw, controls, read=read, name="laptop_rlvr_arms_view", provenance=PROVENANCE,
        caption="Held-out pass@1 against generated samples for the chosen arms, mean over the chosen seeds",
        title=f"Phase-2 runs in {cfg.runs_dir}",
    )  # fmt: skip


def explore(cfg: CountdownStudyConfig) -> Explorers:
    return Explorers({"update quality": quality_view(cfg), "phase-2 arms": arms_view(cfg)})
