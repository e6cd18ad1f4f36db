"""Scores recomputed from per-sample results: per instance, per benchmark, per domain; pass@k; the
paired t-test between two checkpoints.

What a table cell is (``TABLE_METRIC``): the paper reports pass@1 averaged over 16 samples. For math
that is the mean binary score; for code, ProRL's evaluation counts a sample as passing when it
passes all tests (binary; docs/prorl-background.md#prorl-evaluation), so the cell is the mean of
``correct`` while ``score`` keeps the fraction of tests passed; for Reasoning Gym it is the mean
continuous verifier score (ProRL).

pass@k uses ``correct`` (full credit, ``brorl_lib.tasks.credit.passed``) with the unbiased estimator
1 - C(n-c, k) / C(n, k) over an instance's n samples of which c are correct; for Reasoning Gym's
continuous scores it therefore means
"at least one of k samples fully solved the instance".

Domain scores as the paper aggregates them (docs/reading-the-paper.md#consistency-checks): Math and
Code are the unweighted means of their benchmark columns (NaN unless every column is present and, when
``complete`` is given, every benchmark of the domain was evaluated to its last instance). The paper's
Reasoning Gym average is not the mean of its eleven category columns; the ProRL-consistent reading is
the mean over tasks, which is ``rg_avg`` here (each task weighted equally, every task having the same
number of instances); ``rg_category_mean`` (the unweighted mean of the category columns) is reported beside it.
A missing average is never shown as a bare NaN: ``domain_averages`` and ``format_domain_averages`` say
why it is missing (``average_gap``: the benchmarks it still needs, or those not evaluated to the end).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import numpy as np
import pandas as pd

from brorl_lib.core import stats
from brorl_lib.evaluation.datasets import BENCHMARKS, DOMAINS, GROUPS
from brorl_lib.facts.reported import CODE_COLUMNS, MATH_COLUMNS, RG_COLUMNS

TABLE_METRIC = {"math": "score", "code": "correct", "reasoning_gym": "score"}
INSTANCE_KEYS = ["checkpoint", "benchmark", "domain", "task", "instance_id"]
AVERAGES = {"math_avg": "math", "code_avg": "code", "rg_avg": "reasoning_gym", "rg_category_mean": "reasoning_gym"}


def instance_scores(results: pd.DataFrame) -> pd.DataFrame:
    """One row per (checkpoint, benchmark, instance): samples, mean score, correct count and ``pass1``,
    the table metric of its domain averaged over its samples."""
    if results.empty:
        return pd.DataFrame(columns=[*INSTANCE_KEYS, "samples", "mean_score", "n_correct", "pass1"])
    binary = results["domain"].map(TABLE_METRIC) == "correct"
    df = results.assign(metric=results["score"].astype(float).where(~binary, results["correct"].astype(float)))
    g = df.groupby(INSTANCE_KEYS, sort=False)
    return g.agg(
        samples=("sample", "size"), mean_score=("score", "mean"), n_correct=("correct", "sum"), pass1=("metric", "mean")
    ).reset_index()


def benchmark_scores(results: pd.DataFrame, ks: Sequence[int] = (1,)) -> pd.DataFrame:
    """One row per (checkpoint, benchmark): instances, samples per instance (min), ``score`` (the table
    cell, a fraction), mean verifier score, pass@k for each k (binary ``correct``), mean response
    tokens and the fraction of responses cut at max_tokens."""
    inst = instance_scores(results)
    rows = []
    for (ckpt, bench), grp in inst.groupby(["checkpoint", "benchmark"], sort=False):
        n_min = int(grp["samples"].min())
        row = {
            "checkpoint": ckpt,
            "benchmark": bench,
            "domain": BENCHMARKS[bench].domain,
            "instances": len(grp),
            "samples": n_min,
            "score": grp["pass1"].mean(),
            "mean_verifier_score": grp["mean_score"].mean(),
        }
        for k in ks:
            if k > n_min:
                raise ValueError(
                    f"k={k} is not allowed: benchmark {bench} of {ckpt} has instances with only {n_min} samples"
                )
            row[f"pass@{k}"] = float(
                np.mean([stats.unbiased_pass_at_k(int(n), int(c), k) for n, c in zip(grp["samples"], grp["n_correct"])])
            )
        sub = results[(results["checkpoint"] == ckpt) & (results["benchmark"] == bench)]
        row["mean_response_tokens"] = float(sub["response_tokens"].mean())
        row["truncated_fraction"] = float((sub["finish_reason"] == "length").mean())
        rows.append(row)
    return pd.DataFrame(rows)


def rg_task_scores(results: pd.DataFrame) -> pd.DataFrame:
    """Reasoning Gym per (checkpoint, category, task): instances and mean score (a fraction)."""
    inst = instance_scores(results)
    inst = inst[inst["domain"] == "reasoning_gym"]
    out = (
        inst.groupby(["checkpoint", "benchmark", "task"], sort=False)
        .agg(instances=("pass1", "size"), score=("pass1", "mean"))
        .reset_index()
    )
    out.insert(2, "category", out["benchmark"].map(lambda b: BENCHMARKS[b].column))
    return out.drop(columns="benchmark")


def column_scores(results: pd.DataFrame, complete: Mapping[str, Collection[str]] | None = None) -> pd.DataFrame:
    """One row per checkpoint: each paper column present (fraction) and the domain averages
    ``math_avg``, ``code_avg``, ``rg_avg`` (mean over tasks), ``rg_category_mean``.

    ``complete``: checkpoint -> the benchmarks evaluated to their last instance
    (``results.complete_benchmarks``); when given, a domain average is NaN unless every benchmark of
    the domain is among them (a partly evaluated benchmark never enters an average)."""
    bench = benchmark_scores(results)
    tasks = rg_task_scores(results)
    rows = []
    for ckpt in pd.unique(results["checkpoint"]):
        b = bench[bench["checkpoint"] == ckpt].set_index("benchmark")["score"]
        row = {"checkpoint": ckpt}
        for name, value in b.items():
            row[
                BENCHMARKS[name].column
                if BENCHMARKS[name].domain != "reasoning_gym"
                else f"rg:{BENCHMARKS[name].column}"
            ] = value
        done = set(complete.get(ckpt, ())) if complete is not None else None
        whole = {d: done is None or set(GROUPS[d]) <= done for d in DOMAINS}  # every benchmark evaluated to the end
        for avg, cols, domain in (("math_avg", MATH_COLUMNS, "math"), ("code_avg", CODE_COLUMNS, "code")):
            row[avg] = (
                float(np.mean([row[c] for c in cols])) if all(c in row for c in cols) and whole[domain] else np.nan
            )
        t = tasks[tasks["checkpoint"] == ckpt]
        cats = [row.get(f"rg:{c}") for c in RG_COLUMNS]
        complete_rg = all(v is not None for v in cats) and whole["reasoning_gym"]
        row["rg_avg"] = float(t["score"].mean()) if complete_rg else np.nan
        row["rg_category_mean"] = float(np.mean(cats)) if complete_rg else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def average_gap(domain: str, evaluated: Collection[str], complete: Collection[str] | None = None) -> str | None:
    """Why ``domain``'s average cannot be computed from these benchmarks, or None when it can.

    ``evaluated``: the benchmarks with results; ``complete``: those evaluated to their last instance
    (None: all of ``evaluated``). "not run: needs ..." names the benchmarks of the domain without results;
    "incomplete: ..." those with results that stop before their last instance."""
    if domain not in DOMAINS:
        raise ValueError(f"domain={domain!r} is not allowed: choose from {list(DOMAINS)}")
    needed = GROUPS[domain]
    missing = [b for b in needed if b not in set(evaluated)]
    if missing:
        return f"not run: needs {', '.join(missing)}"
    if complete is not None:
        unfinished = [b for b in needed if b not in set(complete)]
        if unfinished:
            return f"incomplete: {', '.join(unfinished)} not evaluated to the last instance (resume the run)"
    return None


def domain_averages(results: pd.DataFrame, complete: Mapping[str, Collection[str]] | None = None) -> pd.DataFrame:
    """One row per (checkpoint, average of ``AVERAGES``): ``value`` (a fraction, NaN when it cannot be
    computed, as in ``column_scores``) and ``note``, empty beside a value, else why it is missing
    (``average_gap``)."""
    scores = column_scores(results, complete)
    rows = []
    for _, s in scores.iterrows():
        ckpt = s["checkpoint"]
        evaluated = set(results.loc[results["checkpoint"] == ckpt, "benchmark"])
        done = set(complete.get(ckpt, ())) if complete is not None else None
        for avg, domain in AVERAGES.items():
            value = float(s[avg])
            note = "" if not np.isnan(value) else average_gap(domain, evaluated, done) or "not computed"
            rows.append({"checkpoint": ckpt, "average": avg, "value": value, "note": note})
    return pd.DataFrame(rows, columns=["checkpoint", "average", "value", "note"])


def format_domain_averages(
    results: pd.DataFrame, complete: Mapping[str, Collection[str]] | None = None, digits: int = 4
) -> str:
    """The domain averages as text, a few lines per checkpoint: each value, or why it is missing
    (averages missing for the same reason share a line); never a bare NaN."""
    lines = []
    table = domain_averages(results, complete)
    for ckpt, grp in table.groupby("checkpoint", sort=False):
        lines.append(f"domain averages of {ckpt}:")
        notes: dict[str, list[str]] = {}
        for _, r in grp.iterrows():
            if r["note"]:
                notes.setdefault(r["note"], []).append(r["average"])
            else:
                lines.append(f"  {r['average']}: {r['value']:.{digits}f}")
        lines += [f"  {', '.join(names)}: {note}" for note, names in notes.items()]
    return "\n".join(lines)


def paired_comparison(
    results: pd.DataFrame, treatment: str, control: str, domains: Sequence[str] = DOMAINS, alternative: str = "greater"
) -> dict:
    """The paper's paired t-test (§4.2.2): per-instance pass@1 of two checkpoints, pooled over all
    instances both evaluated (in ``domains``), through ``brorl_lib.core.stats.paired_test``.

    Returns its statistics plus ``n_unpaired``, the instances only one checkpoint has.
    """
    for name, value in (("treatment", treatment), ("control", control)):
        if value not in set(results["checkpoint"]):
            raise ValueError(
                f"{name}={value!r} is not allowed: evaluated checkpoints are {sorted(set(results['checkpoint']))}"
            )
    for d in domains:
        if d not in DOMAINS:
            raise ValueError(f"domain={d!r} is not allowed: choose from {list(DOMAINS)}")
    inst = instance_scores(results[results["domain"].isin(domains)])
    key = ["benchmark", "instance_id"]
    a = inst[inst["checkpoint"] == treatment].set_index(key)["pass1"]
    b = inst[inst["checkpoint"] == control].set_index(key)["pass1"]
    both = a.index.intersection(b.index)
    out = stats.paired_test(a.loc[both].to_numpy(), b.loc[both].to_numpy(), alternative=alternative)
    out["n_unpaired"] = int(len(a.index.union(b.index)) - len(both))
    return out
