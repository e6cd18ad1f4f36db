"""Results at a glance: the table of the paper's claims, each with the verdict computed from the committed
artifacts' CSV files in ``figures/``, the caveat it is stated under, the artifact's provenance class and a link to
its figure.

One source, two renderings: ``glance_markdown`` (MyST, the book's front page, linking gallery cards) and
``readme_markdown`` (GitHub Markdown, the README's block, linking the files; ``book.readme`` writes and checks it).
A caveat is the claim's fixed conditions and, where the committed files hold more (notebook 04's plateau gates), what
they say. Every column a verdict or caveat reads is named in ``COLUMNS``; a missing file or column makes its row
say so.
"""

from __future__ import annotations

import csv
import re
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
        "rates": "rates",
        "comparison": "comparison",
        "budget": "budget",
        "seeds": "seeds",
        "delta": "mean",
        "low": "ci_low_seeds_prompts",
        "high": "ci_high_seeds_prompts",
        "sign_flip": "sign_flip_p_two_sided",
        "direction": "direction",
    },
    "laptop_rlvr_plateau": {
        "candidate": "candidate",
        "step": "step",
        "cap": "cap",
        "flat": "plateau_reached",
        "pass1": "pass1",
        "low_q": "low_q_share_exact",
        "kept": "kept_fraction",
        "gate_pass1": "gate_pass1",
        "gate_low_q": "gate_low_q",
        "gate_kept": "gate_kept",
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
WHEN_EMPTY = {  # what a table with no rows yet means, where that is a state of the study and not a fault
    "laptop_rlvr_verdict": "in progress: no comparison of BroRL with ProRL has two finished seeds yet (learning rates "
    "being bracketed)",
}
TUNED_PENDING = "in progress: no comparison at tuned rates yet (learning rates being bracketed)"
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
    """Notebook 04's comparisons to ProRL at the largest budget (ProRL's own gain since the plateau left out), at
    the rule's rates and at tuned ones; the interval counts seeds and held-out prompts."""
    records = _records(rows, "laptop_rlvr_verdict")
    last = max((_num(r["budget"]) for r in records), default=float("nan"))
    said = [
        f"{r['rates']} rates, {r['comparison']}: {r['direction']}, Δpass@1 {_num(r['delta']):+.3f} (95% CI over "
        f"seeds and prompts {_num(r['low']):+.3f} to {_num(r['high']):+.3f}, sign-flip p = "
        f"{_num(r['sign_flip']):.2g}, {r['seeds']} seeds) at {last:,.0f} samples"
        for r in records
        if _num(r["budget"]) == last and "plateau" not in r["comparison"]
    ]
    if said and not any(r["rates"] == "tuned" and "plateau" not in r["comparison"] for r in records):
        said.append(TUNED_PENDING)
    return "; ".join(said) or WHEN_EMPTY["laptop_rlvr_verdict"]


def gates(rows: Rows) -> str:
    """Notebook 04's plateau gates: whether its chosen candidate reached the regime the paper's argument needs."""
    r = _records(rows, "laptop_rlvr_plateau")[0]
    measured = {
        "pass1": f"pass@1 {_num(r['pass1']):.3f} in its band",
        "low_q": f"low-q share {_num(r['low_q']):.3f}",
        "kept": f"kept fraction {_num(r['kept']):.2f}",
    }
    failed = [text for key, text in measured.items() if r[f"gate_{key}"].strip().lower() != "true"]
    flat = r["flat"].strip().lower() == "true"
    where = f"at its plateau (step {r['step']}, shown flat)" if flat else (
        f"at step {r['step']}, phase 1's cap, reached before the plateau was shown flat")  # fmt: skip
    if not failed:
        return f"{r['candidate']} passed every gate {where} ({', '.join(measured.values())})"
    needs = "the regime the paper's argument needs was not reached"
    return f"{r['candidate']} failed the gate on {', '.join(failed)} {where}: {needs}"


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
    caveat: str  # the conditions the verdict holds under, in words
    conditions: tuple[str, Callable[[Rows], str]] | None = None  # an artifact whose CSV adds to the caveat


CLAIMS = (
    Claim(
        "01_theory",
        "Theorem 1 (§2): the correct-mass change of one update, in closed form",
        "theory_theorem1_errors",
        "theory_theorem1_check",
        theorem1,
        "one update in the paper's setting, checked on random batches; it says nothing about training",
    ),
    Claim(
        "02_simulator",
        "Figure 3 (§4.1): more rollouts N raise the correct mass",
        "fig3_final",
        "fig3_simulator",
        figure3,
        "the paper's token-level simulator (§4.1) at its scale, not a language model",
    ),
    Claim(
        "03_paper_tables",
        "Table 1's domain scores are the means of Tables 3–5",
        "paper_average_checks",
        "paper_average_checks",
        averages,
        "arithmetic on the numbers the paper reports; nothing is trained again",
    ),
    Claim(
        "04_laptop_rlvr",
        "Figure 1, Table 1: past ProRL's plateau, N=512 beats N=16 at equal samples",
        "laptop_rlvr_verdict",
        "fig1_laptop_rlvr",
        laptop,
        "a tiny model on one task (countdown) at laptop scale",
        ("laptop_rlvr_plateau", gates),
    ),
    Claim(
        "05_verl_training",
        "Table 1's two runs, re-made with verl's trainer (ProRL N=16, BroRL N=512)",
        "verl_plan",
        "verl_plan",
        plan,
        "a plan from the paper's Table 1 on 64 H100s, not a run; the recipe's CPU run is a test of the harness",
    ),
)


def _read(artifact: str, figures: Path, read: Callable[[Rows], str], quote: Callable[[str], str]) -> str:
    """What ``read`` says of ``figures``/<artifact>.csv (quoted for Markdown by ``quote``), or why it says nothing."""
    path = figures / f"{artifact}.csv"
    if not path.is_file():
        return f"`figures/{path.name}` is absent: `make reproduce` makes it"
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    if not rows:
        return quote(WHEN_EMPTY[artifact]) if artifact in WHEN_EMPTY else f"`figures/{path.name}` has no rows"
    try:
        return quote(read(rows))
    except Missing as err:
        return str(err)
    except (ValueError, IndexError) as err:
        return f"`figures/{path.name}` cannot be read as expected ({quote(str(err))})"


def verdict_of(claim: Claim, figures: Path, quote: Callable[[str], str] = escape) -> str:
    """The claim's verdict from ``figures``/<table>.csv, or why there is none."""
    return _read(claim.table, figures, claim.verdict, quote)


def caveat_of(claim: Claim, figures: Path, quote: Callable[[str], str] = escape) -> str:
    """The claim's caveat: its fixed conditions, then what its ``conditions`` artifact says."""
    if claim.conditions is None:
        return quote(claim.caveat)
    artifact, read = claim.conditions
    return f"{quote(claim.caveat)}; {_read(artifact, figures, read, quote)}"


def gfm_escape(text: str) -> str:
    """``text`` literal in a GitHub Markdown table cell: only the characters that would start markup escaped."""
    return re.sub(r"([\\|*_`<>\[\]~])", r"\\\1", text)


TITLE = "## Results at a glance"


def _table(recorded: dict, figures: Path, quote: Callable[[str], str], link: Callable[[str, str], str]) -> list[str]:
    """The table's lines, one row per claim of ``CLAIMS``; ``link(kind, name)`` renders a link to a notebook or
    an artifact's figure (kind "notebook" or "figure"), "–" where there is none."""
    artifacts = {e.get("artifact") or n.rsplit(".", 1)[0]: e for n, e in sorted(recorded["artifacts"].items())}
    lines = ["| Claim | Our verdict | Caveat | Class | Figure |", "|---|---|---|---|---|"]
    for claim in CLAIMS:
        entry = recorded["artifacts"].get(f"{claim.table}.csv") or artifacts.get(claim.table) or {}
        provenance = quote(entry["provenance"]) if entry.get("provenance") else "–"
        figure = link("figure", claim.figure) if claim.figure in artifacts else "–"
        row = [
            f"{quote(claim.claim)} ({link('notebook', claim.notebook)})",
            verdict_of(claim, figures, quote),
            caveat_of(claim, figures, quote),
            provenance,
            figure,
        ]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _made_with(recorded: dict) -> str:
    tables = [recorded["artifacts"].get(f"{c.table}.csv", {}) for c in CLAIMS]
    profiles = sorted({e["profile"] for e in tables if e.get("profile")})
    return f" (made with the {' and '.join(profiles)} profile)" if profiles else ""


def glance_markdown(recorded: dict, figures: Path, gallery: str = "gallery", notebooks: str = "notebooks") -> str:
    """The section "Results at a glance" for the book (MyST Markdown), linking each figure's gallery card."""

    def link(kind: str, name: str) -> str:
        if kind == "notebook":
            return f"[{escape(name)}]({notebooks}/{name}.ipynb)"
        return f"{{ref}}`{name} <{artifact_label(name)}>`"

    lines = [
        TITLE,
        "",
        f"Each verdict is computed from the committed artifacts in `figures/`{_made_with(recorded)} when the book is "
        f"built, and holds under its caveat; the class says what kind of number it rests on "
        f"({{doc}}`definitions <{gallery}>`).",
        "",
        *_table(recorded, figures, escape, link),
    ]
    return "\n".join(lines) + "\n"


def readme_markdown(recorded: dict, figures: Path) -> str:
    """The same section for the README (GitHub Markdown), linking the notebooks and figures in the repository."""

    def link(kind: str, name: str) -> str:
        if kind == "notebook":
            return f"[{name}](notebooks/{name}.ipynb)"
        picture = next((f"{name}{s}" for s in (".png", ".md", ".csv") if f"{name}{s}" in recorded["artifacts"]), "")
        return f"[{gfm_escape(name)}](figures/{picture})" if picture else gfm_escape(name)

    lines = [
        TITLE,
        "",
        f"Each verdict is computed from the committed artifacts in `figures/`{_made_with(recorded)} and holds under "
        "its caveat; the class says what kind of number it rests on "
        "([provenance classes](docs/figures.md#provenance-classes)).",
        "",
        *_table(recorded, figures, gfm_escape, link),
    ]
    return "\n".join(lines) + "\n"
