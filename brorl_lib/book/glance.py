"""Results at a glance: the book's front-page table of the paper's claims, each with the verdict computed from the
committed artifacts' CSV files in ``figures/``, the artifact's provenance class and a link to its gallery card.

Every column a verdict reads is named in ``COLUMNS``; a missing file or column makes its row say so.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from brorl_lib.book.gallery import artifact_label, escape

COLUMNS = {  # artifact -> role -> the CSV column a verdict reads
    "theory_theorem1_errors": {
        "vocab": "vocab_size",
        "instances": "instances",
        "first_order": "rel_err_first_order",
        "identities": "rel_err_identities",
        "exact": "rel_err_exact",
    },
    "fig3_final": {"N": "N", "start": "initial_mass", "final": "correct_mass_mean"},
    "paper_average_checks": {
        "method": "method",
        "steps": "steps",
        "math": "math_reported",
        "math_mean": "math_recomputed",
        "code": "code_reported",
        "code_mean": "code_recomputed",
        "rg": "rg_reported",
        "rg_mean": "rg_category_mean",
    },
    "laptop_rlvr_verdict": {
        "comparison": "comparison",
        "budget": "budget",
        "seeds": "seeds",
        "delta": "mean",
        "low": "ci_low",
        "high": "ci_high",
        "p": "p_value",
        "sign_flip": "sign_flip_p_two_sided",
        "direction": "direction",
    },
    "verl_plan": {
        "arm": "arm",
        "N": "N",
        "prompts": "prompts_per_step",
        "steps": "steps",
        "gpus": "gpus",
        "hours": "expected_hours",
        "gpu_hours": "expected_gpu_hours",
    },
}
FIRST_ORDER_TOLERANCE = 1e-10  # relative error below which Theorem 1 equals the first-order change (round-off)
ROUNDING = 0.01  # points: the paper prints scores to two decimals, so a recomputed mean this close agrees


class Missing(Exception):
    """A verdict's CSV file or column is absent."""


Rows = list[dict[str, str]]


def _records(rows: Rows, artifact: str) -> list[dict[str, str]]:
    """The CSV rows of ``artifact`` keyed by role (``COLUMNS``); Missing names a column the file lacks."""
    columns = COLUMNS[artifact]
    absent = [c for c in columns.values() if rows and c not in rows[0]]
    if absent:
        raise Missing(f"`{artifact}.csv` has no column {', '.join(f'`{c}`' for c in absent)}")
    return [{role: row[column] for role, column in columns.items()} for row in rows]


def _num(text: str) -> float:
    return float(text) if text.strip() else float("nan")


def theorem1(rows: Rows) -> str:
    """Theorem 1 against the first-order and exact change, over the checked batches (the row ``all`` if any)."""
    records = _records(rows, "theory_theorem1_errors")
    picked = [r for r in records if r["vocab"] == "all"] or records
    first, identities, exact = (max(_num(r[k]) for r in picked) for k in ("first_order", "identities", "exact"))
    batches = sum(int(_num(r["instances"])) for r in picked)
    said = "holds" if first <= FIRST_ORDER_TOLERANCE else "does not hold"
    return (
        f"{said}: worst relative error {first:.2g} against the first-order change and {identities:.2g} in the "
        f"proof's identities over {batches:,} random batches; {exact:.2g} against the exact change of one step"
    )


def figure3(rows: Rows) -> str:
    """The simulator's final correct mass per N, against its start."""
    records = _records(rows, "fig3_final")
    pairs = sorted((int(_num(r["N"])), _num(r["final"])) for r in records)
    start = _num(records[0]["start"])
    rises = all(later > earlier for (_, earlier), (_, later) in zip(pairs, pairs[1:]))
    said = "rises with N" if rises else "does not rise with N at every step"
    listed = ", ".join(f"N={n:,}: {m:.4f}" for n, m in pairs)
    below = [n for n, m in pairs if m < start]
    under = f"; below the start for N ≤ {max(below):,}" if below else ""
    return f"final correct mass {said} ({listed}; start {start:.4f}{under})"


def averages(rows: Rows) -> str:
    """Table 1's domain scores against the means of the per-benchmark tables."""
    records = _records(rows, "paper_average_checks")
    gaps = {d: [_num(r[f"{d}_mean"]) - _num(r[d]) for r in records] for d in ("math", "code", "rg")}
    close = max(abs(g) for d in ("math", "code") for g in gaps[d])
    rg = gaps["rg"]
    math_code = f"{'yes' if close <= ROUNDING else 'no'}, within {close:.2g} points"
    if max(abs(g) for g in rg) <= ROUNDING:
        reasoning = f"yes, within {max(abs(g) for g in rg):.2g} points"
    else:
        spread = f"{min(rg):+.2f} to {max(rg):+.2f}"
        reasoning = f"no, Table 5's category mean differs from Table 1's score by {spread} points"
    return f"Math and Code: {math_code}; Reasoning Gym: {reasoning}"


def laptop(rows: Rows) -> str:
    """Notebook 04's comparisons to ProRL at the largest budget (ProRL's own gain since the plateau left out)."""
    records = _records(rows, "laptop_rlvr_verdict")
    last = max((_num(r["budget"]) for r in records), default=float("nan"))
    said = [
        f"{r['comparison']}: {r['direction']}, Δpass@1 {_num(r['delta']):+.3f} (95% CI {_num(r['low']):+.3f} to "
        f"{_num(r['high']):+.3f}, t test p = {_num(r['p']):.2g}, sign-flip p = {_num(r['sign_flip']):.2g}, "
        f"{r['seeds']} seeds) at {last:,.0f} samples"
        for r in records
        if _num(r["budget"]) == last and "plateau" not in r["comparison"]
    ]
    return "; ".join(said) or "no comparison at the largest budget"


def plan(rows: Rows) -> str:
    """Notebook 05's estimated time of each arm on the cluster."""
    records = _records(rows, "verl_plan")
    said = [
        f"{r['arm']}: N={r['N']} × {r['prompts']} prompts, {r['steps']} steps, ≈{_num(r['hours']):,.1f} h "
        f"({_num(r['gpu_hours']):,.0f} GPU-hours)"
        for r in records
    ]
    gpus = sorted({r["gpus"] for r in records})
    return f"planned on {' or '.join(gpus)} GPUs, not a measurement: " + "; ".join(said)


@dataclass(frozen=True)
class Claim:
    notebook: str
    claim: str  # the paper's claim, in words
    table: str  # the artifact whose CSV the verdict reads
    figure: str  # the artifact the row links to
    verdict: Callable[[Rows], str]


CLAIMS = (
    Claim(
        "01_theory",
        "Theorem 1 (§2): the correct-mass change of one update, in closed form",
        "theory_theorem1_errors",
        "theory_theorem1_check",
        theorem1,
    ),
    Claim(
        "02_simulator",
        "Figure 3 (§4.1): more rollouts N raise the correct mass",
        "fig3_final",
        "fig3_simulator",
        figure3,
    ),
    Claim(
        "03_paper_tables",
        "Table 1's domain scores are the means of Tables 3–5",
        "paper_average_checks",
        "paper_average_checks",
        averages,
    ),
    Claim(
        "04_laptop_rlvr",
        "Figure 1, Table 1: past ProRL's plateau, N=512 beats N=16 at equal samples",
        "laptop_rlvr_verdict",
        "fig1_laptop_rlvr",
        laptop,
    ),
    Claim(
        "05_verl_training",
        "Table 1's two runs, re-made with verl's trainer (ProRL N=16, BroRL N=512)",
        "verl_plan",
        "verl_plan",
        plan,
    ),
)


def verdict_of(claim: Claim, figures: Path) -> str:
    """The claim's verdict from ``figures``/<table>.csv, or why there is none."""
    path = figures / f"{claim.table}.csv"
    if not path.is_file():
        return f"`figures/{path.name}` is absent: `make reproduce` makes it"
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return f"`figures/{path.name}` has no rows"
    try:
        return escape(claim.verdict(rows))
    except Missing as err:
        return str(err)
    except (ValueError, IndexError) as err:
        return f"`figures/{path.name}` cannot be read as expected ({escape(str(err))})"


def glance_markdown(recorded: dict, figures: Path, gallery: str = "gallery", notebooks: str = "notebooks") -> str:
    """The section "Results at a glance" (MyST Markdown): one row per claim of ``CLAIMS``."""
    artifacts = {e.get("artifact") or n.rsplit(".", 1)[0]: e for n, e in sorted(recorded["artifacts"].items())}
    tables = [recorded["artifacts"].get(f"{c.table}.csv", {}) for c in CLAIMS]
    profiles = sorted({e["profile"] for e in tables if e.get("profile")})
    made = f" (made with the {' and '.join(profiles)} profile)" if profiles else ""
    lines = [
        "## Results at a glance",
        "",
        f"Each verdict is computed from the committed artifacts in `figures/`{made} when the book is built; the "
        f"class says what kind of number it rests on ({{doc}}`definitions <{gallery}>`).",
        "",
        "| Claim | Our verdict | Class | Figure |",
        "|---|---|---|---|",
    ]
    for claim in CLAIMS:
        entry = recorded["artifacts"].get(f"{claim.table}.csv") or artifacts.get(claim.table) or {}
        provenance = escape(entry["provenance"]) if entry.get("provenance") else "–"
        figure = f"{{ref}}`{claim.figure} <{artifact_label(claim.figure)}>`" if claim.figure in artifacts else "–"
        source = f"[{escape(claim.notebook)}]({notebooks}/{claim.notebook}.ipynb)"
        row = [f"{escape(claim.claim)} ({source})", verdict_of(claim, figures), provenance, figure]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
