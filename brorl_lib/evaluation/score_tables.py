"""Tables 3, 4 and 5 with the paper's reported rows and a row per evaluated checkpoint.

Every row carries ``source``: "reported" (copied from the paper, ``brorl_lib.facts.reported.load``) or, for a
row recomputed here from per-instance results, its domain's provenance class (``provenance``: "reproduced" for
the paper's protocol on whole benchmarks, else "scaled-down"). Values are percentages as in the paper.
A reproduced row's ``method`` is the checkpoint label; its N / B / Steps come from ``row_ids`` when
given (e.g. ``{"brorl": {"method": "BroRL (released)", "n_rollouts": 512, "prompts_per_step": 128}}``),
else they are empty. A domain average is empty unless every column of its table was evaluated to its
last instance (run.json records each benchmark as complete; an interrupted evaluation leaves the
average empty until it is resumed to the end).
Table 5 gets one more column, ``rg_category_mean`` (the unweighted mean of the eleven categories),
filled for reproduced rows only; its ``rg_avg`` for reproduced rows is the mean over tasks (see
``metrics``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from brorl_lib.evaluation import results as res
from brorl_lib.evaluation.datasets import GROUPS
from brorl_lib.evaluation.metrics import column_scores
from brorl_lib.facts import reported as paper
from brorl_lib.facts.protocol import SamplingParams

TABLES = {  # paper table -> (domain, value columns, average column)
    "table3_math": ("math", paper.MATH_COLUMNS, "math_avg"),
    "table4_code": ("code", paper.CODE_COLUMNS, "code_avg"),
    "table5_reasoning_gym": ("reasoning_gym", paper.RG_COLUMNS, "rg_avg"),
}
CAPTIONS = {
    "table3_math": "Table 3: math pass@1 (%)",
    "table4_code": "Table 4: code pass@1 (%)",
    "table5_reasoning_gym": "Table 5: Reasoning Gym scores (%)",
}


def reproduced_rows(
    results: pd.DataFrame,
    row_ids: Mapping[str, Mapping] | None = None,
    complete: Mapping[str, Collection[str]] | None = None,
    sources: Mapping[str, str] | None = None,
) -> dict[str, pd.DataFrame]:
    """Per paper table, one row per checkpoint with any result in its domain, in the table's columns.
    ``complete`` (checkpoint -> benchmarks evaluated to the end): see ``metrics.column_scores``. ``sources``
    (domain -> provenance class, ``provenance``) labels the rows' ``source``; default "reproduced"."""
    row_ids = row_ids or {}
    scores = column_scores(results, complete) if not results.empty else pd.DataFrame(columns=["checkpoint"])
    out = {}
    for name, (domain, columns, avg) in TABLES.items():
        rows = []
        for _, s in scores.iterrows():
            label = s["checkpoint"]
            if not (results[(results["checkpoint"] == label)]["domain"] == domain).any():
                continue
            ids = dict(row_ids.get(label, {}))
            row = {
                "source": (sources or {}).get(domain, "reproduced"),
                "method": ids.pop("method", label),
                "n_rollouts": ids.pop("n_rollouts", pd.NA),
                "prompts_per_step": ids.pop("prompts_per_step", pd.NA),
                "steps": str(ids.pop("steps", "")),
            }
            if ids:
                raise ValueError(f"row_ids[{label!r}] has keys {sorted(ids)}; allowed: {paper.ID_COLUMNS}")
            keys = [f"rg:{c}" for c in columns] if domain == "reasoning_gym" else columns
            for col, key in zip(columns, keys):
                row[col] = 100 * s[key] if key in s and pd.notna(s[key]) else np.nan
            row[avg] = 100 * s[avg] if pd.notna(s[avg]) else np.nan
            if domain == "reasoning_gym":
                row["rg_category_mean"] = 100 * s["rg_category_mean"] if pd.notna(s["rg_category_mean"]) else np.nan
            rows.append(row)
        out[name] = pd.DataFrame(rows)
    return out


def paper_tables_with_reproduced(
    results_dir: str | Path,
    row_ids: Mapping[str, Mapping] | None = None,
) -> dict[str, pd.DataFrame]:
    """{"table3_math", "table4_code", "table5_reasoning_gym"} -> reported rows, then one row per checkpoint
    evaluated under ``results_dir``, its ``source`` the domain's provenance class (``provenance``: "reproduced"
    only for the paper's protocol on whole benchmarks; an empty or missing folder gives reported rows only)."""
    results = res.load_results(Path(results_dir))
    complete = {
        label: res.complete_benchmarks(Path(results_dir), label) for label in res.checkpoints(Path(results_dir))
    }
    sources = {domain: provenance(results_dir, domain) for domain, _columns, _avg in TABLES.values()}
    mine = reproduced_rows(results, row_ids, complete, sources)
    tables = {}
    for name, (domain, _columns, _avg) in TABLES.items():
        reported = paper.load(name)
        reported.insert(0, "source", "reported")
        if domain == "reasoning_gym":
            reported["rg_category_mean"] = np.nan
        table = pd.concat([reported, mine[name]], ignore_index=True) if len(mine[name]) else reported
        table["n_rollouts"] = table["n_rollouts"].astype("Int64")
        table["prompts_per_step"] = table["prompts_per_step"].astype("Int64")
        tables[name] = table[list(reported.columns)]
    return tables


def provenance(results_dir: str | Path, domain: str) -> str:
    """ "reproduced" when every checkpoint with results in ``domain`` used the paper's sampling and has
    every benchmark of the domain evaluated whole (the paper's instance set) and to its last instance
    (``results.complete_benchmarks``); "scaled-down" otherwise; "reported" when there are none."""
    results = res.load_results(Path(results_dir))
    labels = sorted(set(results.loc[results["domain"] == domain, "checkpoint"]))
    if not labels:
        return "reported"
    for label in labels:
        info = res.read_run_info(Path(results_dir), label) or {}
        sampling = (info.get("protocol") or {}).get("sampling")
        whole = res.complete_benchmarks(Path(results_dir), label, full_only=True)
        if sampling != SamplingParams().as_dict() or not set(GROUPS[domain]) <= whole:
            return "scaled-down"
    return "reproduced"


def save_paper_tables_with_reproduced(
    results_dir: str | Path, row_ids: Mapping[str, Mapping] | None = None, suffix: str = "_evaluated"
) -> list:
    """Write the three tables with ``brorl_lib.core.table_files.save_table`` as ``<table><suffix>`` (.md/.tex/.csv),
    each with the provenance of its reproduced rows; the ``source`` column labels every row."""
    from brorl_lib.core.table_files import save_table

    saved = []
    for name, table in paper_tables_with_reproduced(results_dir, row_ids).items():
        evaluated = set(table["source"]) - {"reported"}  # the domain's class, set by paper_tables_with_reproduced
        prov = evaluated.pop() if evaluated else "reported"
        caption = f"{CAPTIONS[name]}: rows with source=reported are copied from the paper"
        if prov != "reported":
            caption += f"; rows with source={prov} were evaluated from checkpoints here"
        saved.append(save_table(table, f"{name}{suffix}", provenance=prov, caption=caption, float_format="{:.2f}"))
    return saved
