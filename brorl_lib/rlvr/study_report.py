"""The countdown study's tables, read back from its run folder: the screen, the plateau and its gates, held-out
pass@1 at each budget, the ProRL vs BroRL verdict (seed is the unit: paired t test and an exact sign-flip test),
the IsoCompute grid, the sample accounting, the per-prompt fate and the update quality."""

from __future__ import annotations

import itertools
import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from brorl_lib.core import stats
from brorl_lib.core.claims import Claim
from brorl_lib.rlvr import plateau, study
from brorl_lib.rlvr import study_phase2 as p2
from brorl_lib.rlvr import update_quality as uq
from brorl_lib.rlvr.run import KEPT_COUNTS
from brorl_lib.rlvr.study import LOW_Q_BAND

FATE_EDGES = (0.0, LOW_Q_BAND[0], LOW_Q_BAND[1], 0.5, 0.95, 1.0)  # starting-q bands of the per-prompt fate


def sign_flip_p(differences) -> dict[str, float]:
    """Exact sign-flip (permutation) test of a mean difference of 0, over all 2^n sign patterns: one-sided
    (greater) and two-sided p. With n seeds the smallest possible p is 2^-n one-sided, 2^(1-n) two-sided."""
    d = np.asarray(differences, dtype=float)
    flips = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
    means = (flips * d).mean(1)
    observed = d.mean()
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))
    return {
        "p_greater": float((means >= observed - tol).mean()),
        "p_two_sided": float((np.abs(means) >= abs(observed) - tol).mean()),
    }


def plateau_record(root: Path, s: study.StudySettings) -> dict:
    """The chosen candidate's plateau record (``study.plateau_stage``'s plateau.json)."""
    return json.loads((study.folder(root, study.chosen(s, root)) / study.PLATEAU_RECORD).read_text())


def plateau_table(root: Path, s: study.StudySettings, control: pd.DataFrame | None = None) -> pd.DataFrame:
    """The plateau of the chosen candidate: the smoothed plateau test, exact held-out pass@1, the regime and the
    gates, the training reward's rise over phase 1's last windows (``reward_rise``) and, given the lower-rate
    control (``lower_rate_control``), whether every lower rate stayed within the threshold and what the plateau
    is (``plateau_kind``) (one row; one task)."""
    record = plateau_record(root, s)
    keep = [
        "candidate", "step", "cap", "plateau_reached", "smoothed_pass1", "rise", "rise_se", "rise_upper", "pass1",
        "pass1_se",
        "mean_q", "low_q_share_exact", "q_below_low_share", "q_solved_share", "kept_fraction",
        "gate_pass1", "gate_low_q", "gate_kept", "gates_passed",
    ]  # fmt: skip
    row = {k: record.get(k) for k in keep} | reward_rise(root, s)
    if control is not None:
        row |= {"lower_rate_flat": lower_rate_flat(control),
                "plateau_kind": plateau_kind(row["reward_flat"], control)}  # fmt: skip
    return pd.DataFrame([row]).assign(task="countdown")


def window_rise(values: pd.Series, steps: pd.Series, end: int, span: int, alpha: float) -> dict[str, float]:
    """Mean of ``values`` over the steps in (end - span, end] minus their mean over the ``span`` steps before, with
    its standard error (the steps as independent units, Welch) and one-sided upper ``1 - alpha`` Student-t bound
    (Welch-Satterthwaite degrees of freedom); NaN where a window holds fewer than two steps."""
    last = values[(steps > end - span) & (steps <= end)].dropna().to_numpy(dtype=float)
    before = values[(steps > end - 2 * span) & (steps <= end - span)].dropna().to_numpy(dtype=float)
    if min(last.size, before.size) < 2:
        return {"before": np.nan, "last": np.nan, "rise": np.nan, "se": np.nan, "upper": np.nan}
    va, vb = last.var(ddof=1) / last.size, before.var(ddof=1) / before.size
    se = float(np.sqrt(va + vb))
    df = (va + vb) ** 2 / (va**2 / (last.size - 1) + vb**2 / (before.size - 1)) if se > 0 else 1.0
    rise = float(last.mean() - before.mean())
    upper = rise + (float(scipy_stats.t.ppf(1 - alpha, df)) * se if se > 0 else 0.0)
    return {"before": float(before.mean()), "last": float(last.mean()), "rise": rise, "se": se, "upper": upper}


def reward_rise(root: Path, s: study.StudySettings) -> dict:
    """The training reward (phase 1's ``reward_mean``: the share of generated samples scored correct at the
    training temperature) over the plateau rule's last window of evaluations (``plateau_window`` x ``eval_every``
    steps up to the plateau step) minus the window before (``window_rise``), its rise per 100 steps (the windows'
    centres are one window apart), and whether it is flat by the plateau rule's own test (its upper bound below
    ``plateau_min_rise``, our choice to apply the held-out threshold to the training reward)."""
    record = plateau_record(root, s)
    metrics = pd.read_csv(study.folder(root, study.chosen(s, root)) / study.PHASE1 / "metrics.csv")
    metrics = metrics[metrics["step"] > 0]
    span = s.plateau_rule.window * s.eval_every
    r = window_rise(metrics["reward_mean"], metrics["step"], int(record["step"]), span, s.plateau_rule.alpha)
    return {"reward_window_before": r["before"], "reward_window_last": r["last"], "reward_rise": r["rise"],
            "reward_rise_se": r["se"], "reward_rise_upper": r["upper"],
            "reward_rise_per_100_steps": r["rise"] * 100 / span,
            "reward_flat": bool(r["upper"] < s.plateau_rule.min_rise)}  # fmt: skip


LOWER_RATE_COLUMNS = ["label", "lr_factor", "budget", "seeds", "pass1", "gain", "gain_ci_low", "gain_ci_high",
                      "against", "difference", "ci_low", "ci_high", "interval", "below_threshold"]  # fmt: skip
PHASE1_RATE, PLATEAU_BASE = "ProRL at phase 1's rate", "the plateau"


def _interval_row(d: np.ndarray) -> dict:
    """Mean of ``d`` (seeds x prompts) and its 95% two-way interval over seeds and prompts (``two_way_interval``;
    with one seed, over the prompts alone)."""
    low, high = two_way_interval(d)
    return {"mean": float(d.mean()), "ci_low": low, "ci_high": high}


def lower_rate_control(table: pd.DataFrame, p: p2.Phase2Settings, root: Path, s: study.StudySettings) -> pd.DataFrame:
    """ProRL's continuation of the plateau at phase 1's own rate (the rule's, multiple 1) and at every lower
    multiple of it that has finished runs, at the first and the last budget (``table``: ``at_budgets``). Per row:
    seeds, mean held-out pass@1, the gain since the plateau, and the difference that decides: for a lower rate,
    minus ProRL at phase 1's rate paired by seed; for phase 1's rate, its own gain. 95% intervals over seeds and
    prompts (one seed: over the prompts alone, ``interval`` says which); ``below_threshold``: the interval's upper
    end is below ``plateau_min_rise``."""
    if table.empty:
        return pd.DataFrame(columns=LOWER_RATE_COLUMNS)
    own = p2.verdict_arm(p, study.BASE_N).name
    factors = sorted({float(f) for f in table["lr_factor"] if f <= 1}, reverse=True)
    arms = [(f, p2.verdict_arm(p, study.BASE_N, f)) for f in factors]
    arms = [(f, a) for f, a in arms if (table["arm"] == a.name).any()]
    rows = []
    for f, arm in arms:
        for b in dict.fromkeys((p.budgets[0], p.budgets[-1])):
            gain = paired_differences(table, arm.name, None, b, root, s)
            if not gain.size:
                continue
            base = None if arm.name == own else own
            d = gain if base is None else paired_differences(table, arm.name, base, b, root, s)
            if not d.size:
                continue
            g, r = _interval_row(gain), _interval_row(d)
            pass1 = table.loc[(table["arm"] == arm.name) & (table["budget"] == b), "pass1"].mean()
            rows.append({"label": arm.label, "lr_factor": f, "budget": b, "seeds": d.shape[0], "pass1": pass1,
                         "gain": g["mean"], "gain_ci_low": g["ci_low"], "gain_ci_high": g["ci_high"],
                         "against": PLATEAU_BASE if base is None else PHASE1_RATE, "difference": r["mean"],
                         "ci_low": r["ci_low"], "ci_high": r["ci_high"],
                         "interval": "seeds and prompts" if d.shape[0] > 1 else "prompts, one seed",
                         "below_threshold": bool(r["ci_high"] < s.plateau_rule.min_rise)})  # fmt: skip
    return pd.DataFrame(rows, columns=LOWER_RATE_COLUMNS)


def lower_rate_flat(control: pd.DataFrame) -> bool | None:
    """Whether every lower rate with two or more seeds stays within the plateau threshold of ProRL at phase 1's
    rate (``lower_rate_control``'s ``below_threshold``); None when no such row exists yet (a one-seed row is shown,
    it does not decide)."""
    deciding = control[(control["against"] == PHASE1_RATE) & (control["seeds"] >= 2)] if len(control) else control
    return None if deciding.empty else bool(deciding["below_threshold"].all())


RATE_NOISE = "learning-rate-noise plateau (the paper's regime not shown)"


def plateau_kind(reward_flat: bool, control: pd.DataFrame) -> str:
    """What the plateau is: a learning-rate-noise plateau (``RATE_NOISE``) when the training reward is not shown
    flat or a lower rate is not shown to gain less than the threshold (``lower_rate_flat``), a plateau at every rate
    tried when both are flat, and pending while the lower-rate control has no deciding row."""
    lower = lower_rate_flat(control)
    if not reward_flat or lower is False:
        return RATE_NOISE
    return "plateau at every rate tried" if lower else "training reward flat; lower-rate control pending"


def plateau_text(plateau_table: pd.DataFrame, control: pd.DataFrame) -> str:
    """The plateau's two checks in sentences, rounded (``reward_rise``, ``lower_rate_control``), and its kind."""
    r = plateau_table.iloc[0]
    lines = [
        f"training reward over phase 1's last window {r['reward_window_last']:.3f} against "
        f"{r['reward_window_before']:.3f} the window before: rise {r['reward_rise']:+.4f} (standard error "
        f"{r['reward_rise_se']:.4f}, upper bound {r['reward_rise_upper']:+.4f}; {r['reward_rise_per_100_steps']:+.4f} "
        f"per 100 steps) -> {'flat' if r['reward_flat'] else 'not shown flat'}"
    ]
    for c in control.itertuples():
        lines.append(
            f"{c.label} at {int(c.budget):,} samples ({c.seeds} seed{'s' if c.seeds > 1 else ''}): gain since the "
            f"plateau {c.gain:+.3f} {interval_text(c.gain_ci_low, c.gain_ci_high)}"
            + ("" if c.against == PLATEAU_BASE else f"; minus {PHASE1_RATE} {c.difference:+.3f} "
               f"{interval_text(c.ci_low, c.ci_high)}") + f" (95% over {c.interval})"
        )  # fmt: skip
    lines.append(f"the plateau: {r['plateau_kind']}" if "plateau_kind" in r else "the plateau: control not computed")
    return wrapped(lines)


def plateau_bands(root: Path, s: study.StudySettings) -> pd.DataFrame:
    """The plateau test within each band of held-out pass@1 (the mean of its two windows): prompts, mean rise per
    window, its standard error and upper bound, and whether the band is flat (its bound below min_rise)."""
    record = plateau_record(root, s)
    rows = record.get("bands", [])
    overall = {"band": "all", "prompts": s.n_test} | {k: record.get(k) for k in ("rise", "rise_se", "rise_upper")}
    overall["flat"] = bool(record.get("rise_upper", np.inf) < s.plateau_rule.min_rise)
    return pd.DataFrame([overall, *rows]).assign(task="countdown", step=record["step"])


def plateau_windows(root: Path, s: study.StudySettings) -> tuple[int, int, int]:
    """First, middle and last step of the two windows of evaluations the plateau rule compared at the plateau."""
    step = plateau_record(root, s)["step"]
    span = s.plateau_rule.window * s.eval_every
    return step - 2 * span + s.eval_every, step - span + s.eval_every // 2, step


def at_budgets(frame: pd.DataFrame, budgets: tuple[int, ...]) -> pd.DataFrame:
    """Held-out (test) and validation pass@1 of every run at each budget: its first evaluation at or past it."""
    evals = frame.dropna(subset=["pass1"])
    rows = []
    for _, g in evals.groupby(["arm", "seed"], sort=False):
        start = g[g["step"] == 0].iloc[0]
        for b in budgets:
            hit = g[g["samples"] >= b]
            if len(hit):
                r = hit.iloc[0]
                rows.append(r[["arm", "label", "role", "N", "prompts", "lr", "lr_factor", "seed", "step", "samples"]]
                            .to_dict() | {"budget": b, "pass1": r["pass1"], "val_pass1": r.get("val_pass1", np.nan),
                                          "start_pass1": start["pass1"]})  # fmt: skip
    return pd.DataFrame(rows)


def tunings(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> tuple[dict, dict]:
    """Where the learning-rate tunings stand: the verdict arms' (by N) and the IsoCompute grid's (by N)."""
    c = study.chosen(s, root)
    verdict_t = {n: p2.verdict_tuning(root, c, p, n) for n in (study.BASE_N, p2.BROAD_N)}
    return verdict_t, {n: p2.iso_tuning(root, c, p, n) for n in p.iso_rollouts}


def tuning_table(verdict_t: dict, iso_t: dict) -> pd.DataFrame:
    """One row per tuning: the grid tried, the best multiple (empty while unsettled), whether it is at the grid's
    edge, the runs still needed, and the mean validation pass@1 (over its seeds) at the best and its neighbours."""
    rows = []
    for family, group in (("verdict", verdict_t), ("isocompute", iso_t)):
        for n, t in group.items():
            means = {f: float(np.mean(v)) for f, v in t.scores.items() if v and None not in v}
            near = " ".join(f"{f:g}x: {m:.3f}" for f, m in sorted(means.items())) or "-"
            rows.append({"family": family, "n_rollouts": n, "grid": " ".join(f"{f:g}" for f in t.grid),
                         "best": t.best if t.best is not None else np.nan,
                         "at_edge": t.at_edge,
                         "runs_needed": len(t.needs),
                         "val_near_best": near})  # fmt: skip
    return pd.DataFrame(rows)


def phase2_status(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> dict[str, int]:
    """Runs finished (on disk) and runs the plan still needs now (it grows as tunings settle)."""
    c = study.chosen(s, root)
    finished = len(list((study.folder(root, c) / p2.ARMS).glob(f"*/seed*/{p2.DONE}")))
    pending = sum(not p2.finished(root, c, a, seed) for a, seed in p2.plan(s, p, root))
    return {"finished": finished, "pending": pending}


def per_prompt(root: Path, s: study.StudySettings, arm: str, seed: int, step: int) -> np.ndarray:
    """Exact held-out pass@1 of every test prompt of one run at one step."""
    return np.load(study.folder(root, study.chosen(s, root)) / p2.ARMS / arm / f"seed{seed}" / f"pass1_step{step}.npy")


def two_way_interval(d: np.ndarray, confidence: float = 0.95, draws: int = 4000, seed: int = 0) -> tuple:
    """Interval of the mean of ``d`` (seeds x prompts) that counts both sources of noise: seeds and held-out prompts
    resampled together (a two-way bootstrap, percentile interval; fixed seed, so the same bytes each time)."""
    n_s, n_p = d.shape
    rng = np.random.default_rng(seed)
    ws = rng.multinomial(n_s, np.full(n_s, 1 / n_s), size=draws)
    wp = rng.multinomial(n_p, np.full(n_p, 1 / n_p), size=draws)
    est = np.einsum("bs,sp,bp->b", ws, d, wp) / (n_s * n_p)
    tail = (1 - confidence) / 2 * 100
    return float(np.percentile(est, tail)), float(np.percentile(est, 100 - tail))


def direction(low, high):
    """The direction a difference's interval shows: "higher" above 0, "lower" below it, else "no difference"; scalars or
    arrays alike."""
    return np.where(np.asarray(low) > 0, "higher", np.where(np.asarray(high) < 0, "lower", "no difference"))


def interval_text(low: float, high: float) -> str:
    """An interval as the tables and sentences print it: ``[-0.171, -0.071]``."""
    return f"[{float(low):+.3f}, {float(high):+.3f}]"


def paired_differences(table: pd.DataFrame, arm: str, base: str | None, budget: int, root: Path, s) -> np.ndarray:
    """Per shared seed and held-out prompt (seeds x prompts): exact pass@1 of ``arm`` at ``budget`` minus that of
    ``base`` at the same budget and seed (base None: minus the plateau, the arm's step 0); no rows without a shared
    seed."""
    a = table[(table["arm"] == arm) & (table["budget"] == budget)].set_index("seed")
    b = a if base is None else table[(table["arm"] == base) & (table["budget"] == budget)].set_index("seed")
    seeds = list(a.index.intersection(b.index))  # in the arm's order, as the bootstrap draws them
    if not seeds:
        return np.empty((0, 0))
    if base is None:
        d = [per_prompt(root, s, arm, k, a.loc[k, "step"]) - per_prompt(root, s, arm, k, 0) for k in seeds]
    else:
        d = [per_prompt(root, s, arm, k, a.loc[k, "step"]) - per_prompt(root, s, base, k, b.loc[k, "step"])
             for k in seeds]  # fmt: skip
    return np.array(d).reshape(len(seeds), -1)


def compare(table: pd.DataFrame, arm: str, base: str | None, budget: int, root: Path, s) -> dict | None:
    """Paired by seed: arm minus base at ``budget`` (base None: minus the plateau), with the seed-level t interval
    and sign-flip test and the two-way interval over seeds and prompts (None with fewer than 2 shared seeds)."""
    d = paired_differences(table, arm, base, budget, root, s)
    seeds = d.shape[0]
    if seeds < 2:
        return None
    low, high = two_way_interval(d)
    per_seed = d.mean(1)
    return (stats.mean_interval(per_seed) | {f"sign_flip_{k}": v for k, v in sign_flip_p(per_seed).items()}
            | {"seeds": seeds, "ci_low_seeds_prompts": low, "ci_high_seeds_prompts": high})  # fmt: skip


def comparisons(p: p2.Phase2Settings, tuned: dict[int, float | None]) -> list[tuple[str, str, str | None]]:
    """(rates, arm, base) of the verdict: both arms at the rule's rate, ProRL's gain since the plateau (base None),
    and, once both rates are tuned, the tuned arms, BroRL at the paper's prompts per step and the controls, each
    against the tuned ProRL, BroRL at the paper's prompts per step against BroRL at P/4 (prompts per step at
    fixed N), and each KL-anchored BroRL against the tuned BroRL (what the anchor alone changes)."""
    out = [("rule", "N512", "N16"), ("rule", "N16", None)]
    f16, f512 = tuned.get(study.BASE_N), tuned.get(p2.BROAD_N)
    if f16 is not None and f512 is not None:
        prorl = p2.verdict_arm(p, study.BASE_N, f16).name
        brorl, broad = p2.verdict_arm(p, p2.BROAD_N, f512).name, p2.prompts_arm(p, f512).name
        out += [("tuned", brorl, prorl), ("tuned", prorl, None), ("tuned", broad, prorl), ("tuned", broad, brorl)]
        controls = p2.control_arms(p, f16, f512)
        out += [("tuned", a.name, prorl) for a in controls]
        out += [("tuned", a.name, brorl) for a in controls if a.kl_coef]
    return out


def verdict_arm_names(p: p2.Phase2Settings, tuned: dict) -> list[str]:
    """The arms the verdict compares (``comparisons``), in order, each once."""
    return list(dict.fromkeys(name for _, arm, base in comparisons(p, tuned) for name in (arm, base) if name))


def figure1_arms(table: pd.DataFrame, p: p2.Phase2Settings, tuned: dict) -> tuple[list[str], str]:
    """The arms Figure 1's analogue draws, and what they are: the verdict's arms once one has two finished seeds,
    else every finished ProRL and BroRL run so far (the learning-rate tuning's)."""
    if table.empty:
        return [], "no finished run"
    seeds = table.groupby("arm")["seed"].nunique()
    verdict_arms = [a for a in verdict_arm_names(p, tuned) if seeds.get(a, 0) >= 2]
    if verdict_arms:
        return verdict_arms, "the verdict's arms"
    tuning = sorted(table.loc[table["role"] == "paper", "arm"].unique())
    return tuning, "the learning-rate tuning's finished runs (no verdict arm has two seeds yet)"


def figure_arms(p: p2.Phase2Settings, tuned: dict) -> dict[str, str]:
    """The arms notebook 04's figures draw, in the verdict's order, each with its group: ``rule`` (ProRL and BroRL
    at the square-root rule's rate), ``tuned`` (the tuned ProRL, the first, and BroRL, with BroRL at the paper's
    prompts per step) and ``control`` (the controls at tuned rates). The learning-rate grid's other points are the
    tuning table's."""
    out = {p2.verdict_arm(p, study.BASE_N).name: "rule", p2.verdict_arm(p, p2.BROAD_N).name: "rule"}
    f16, f512 = tuned.get(study.BASE_N), tuned.get(p2.BROAD_N)
    if f16 is not None and f512 is not None:
        tuned_arms = [
            p2.verdict_arm(p, study.BASE_N, f16),
            p2.verdict_arm(p, p2.BROAD_N, f512),
            p2.prompts_arm(p, f512),
        ]
        out |= {a.name: "tuned" for a in tuned_arms} | {a.name: "control" for a in p2.control_arms(p, f16, f512)}
    return out


def prorl_base(arms: dict[str, str]) -> str:
    """The ProRL every figure compares with (``figure_arms``): the tuned one once the rates are tuned, else the
    rule's."""
    return next((name for name, group in arms.items() if group == "tuned"), next(iter(arms)))


DIFFERENCE_COLUMNS = ["budget", "rates", "comparison", "arm", "N", "base", "arm_label", "base_label", "figure1",
                      "mean", "ci_low", "ci_high", "seeds"]  # fmt: skip


def differences(verdict_table: pd.DataFrame, table: pd.DataFrame, p: p2.Phase2Settings, tuned: dict) -> pd.DataFrame:
    """The verdict's comparisons (``verdict``) as the figures draw them: per budget, the arm and its base (empty:
    the plateau) by name and label, the mean difference of held-out pass@1 with its 95% interval over seeds and
    prompts, and ``figure1``: ``tuned`` for the tuned BroRL (and BroRL at the paper's prompts per step) against
    the tuned ProRL, ``rule`` for BroRL against ProRL at the rule's rates, empty for the others."""
    if verdict_table.empty:
        return pd.DataFrame(columns=DIFFERENCE_COLUMNS)
    pairs = {f"{arm} - {base or 'plateau'}": (arm, base or "") for _, arm, base in comparisons(p, tuned)}
    arms = figure_arms(p, tuned)
    base = prorl_base(arms)
    labels = dict(zip(table["arm"], table["label"]))
    out = verdict_table.copy()
    out["arm"], out["base"] = zip(*out["comparison"].map(pairs))
    out["arm_label"], out["base_label"] = out["arm"].map(labels), out["base"].map(labels).fillna("")
    out["N"] = out["arm"].map(dict(zip(table["arm"], table["N"]))).astype(int)
    in_rule = (out["rates"] == "rule") & (out["base"] != "")
    in_tuned = (out["rates"] == "tuned") & (out["base"] == base) & out["arm"].map(arms).eq("tuned")
    out["figure1"] = np.where(in_rule, "rule", np.where(in_tuned, "tuned", ""))
    out = out.rename(columns={"ci_low": "ci_low_seeds", "ci_high": "ci_high_seeds"})
    out = out.rename(columns={"ci_low_seeds_prompts": "ci_low", "ci_high_seeds_prompts": "ci_high"})
    return out[DIFFERENCE_COLUMNS].reset_index(drop=True)


VERDICT_COLUMNS = ["budget", "rates", "comparison", "mean", "ci_low", "ci_high", "seeds", "ci_low_seeds_prompts",
                   "ci_high_seeds_prompts", "direction"]  # fmt: skip


def verdict(table: pd.DataFrame, p: p2.Phase2Settings, tuned: dict, root: Path, s) -> pd.DataFrame:
    """Each comparison at each budget (``comparisons``): the mean difference of exact held-out pass@1, its 95% t
    interval across seeds (the seed is the unit), the exact sign-flip test, the smallest difference the t test would
    detect with 80% power, and the 95% interval over seeds and prompts; its direction from the last interval."""
    rows = []
    for b in p.budgets:
        for rates, arm, base in comparisons(p, tuned):
            r = compare(table, arm, base, b, root, s) if len(table) else None
            if r is not None:
                rows.append({"budget": b, "rates": rates, "comparison": f"{arm} - {base or 'plateau'}"} | r)
    out = pd.DataFrame(rows, columns=None if rows else VERDICT_COLUMNS)  # no comparison yet: the header alone
    if len(out):
        lo, hi = out["ci_low_seeds_prompts"], out["ci_high_seeds_prompts"]
        out["direction"] = direction(lo, hi)
    return out


VERDICT_SHOWN = ["comparison", "rates", "budget", "mean", "ci_low_seeds_prompts", "ci_high_seeds_prompts", "seeds",
                 "direction"]  # fmt: skip


def verdict_summary(verdict_table: pd.DataFrame) -> pd.DataFrame:
    """The verdict's columns a reader decides by (``VERDICT_SHOWN``): the comparison first, since it names the row,
    its rates and budget, the mean difference with its 95% interval over seeds and prompts, the seeds and the
    direction; the t test, the sign-flip test and the detectable difference stay in the full table."""
    return verdict_table.reindex(columns=VERDICT_SHOWN)


def isocompute(table: pd.DataFrame, tunings: dict) -> pd.DataFrame:
    """Per N, budget and learning-rate multiple: seeds, mean and standard error of held-out pass@1; the best
    multiple (``tunings[N]``: picked on validation over the seeds at the best and its neighbours), whether it is
    settled and whether it is at the edge of the (extended) grid."""
    iso = table[table["role"] == "isocompute"] if len(table) else table
    if iso.empty:
        return pd.DataFrame()
    rows = []
    for n, g in iso.groupby("N"):
        t = tunings[int(n)]
        for (b, f), h in g.groupby(["budget", "lr_factor"]):
            rows.append(
                {
                    "task": "countdown",
                    "n_rollouts": int(n),
                    "budget": int(b),
                    "lr_factor": f,
                    "seeds": len(h),
                    "pass1_mean": h["pass1"].mean(),
                    "pass1_se": h["pass1"].std(ddof=1) / np.sqrt(len(h)) if len(h) > 1 else np.nan,
                    "val_mean": h["val_pass1"].mean(),
                    "best_lr": f == t.best,
                    "settled": t.best is not None,
                    "lr_at_edge": t.at_edge,
                }
            )
    return pd.DataFrame(rows)


BAND_COLUMNS = ["q_band", "prompts", "arm", "label", "N", "seeds", "change"]


def banding_values(root: Path, s: study.StudySettings) -> np.ndarray:
    """Each held-out prompt's exact pass@1 averaged over the earlier of the plateau rule's two windows of phase-1
    evaluations: a measurement taken before, and apart from, the plateau checkpoint the arms start from, so that
    grouping prompts by it does not carry the plateau's own fluctuation into the bands (regression to the mean)."""
    base = study.folder(root, study.chosen(s, root)) / study.PHASE1
    first, middle, _ = plateau_windows(root, s)
    files = [path for step, path in plateau.pass1_files(base) if first <= step <= middle]
    return np.mean([np.load(path) for path in files], axis=0)


def bands(table: pd.DataFrame, root: Path, s: study.StudySettings, edges: list[float], base: str = "N16"):
    """Held-out prompts grouped by exact pass@1 before the plateau (``banding_values``, ``edges``): per verdict or
    control arm, the band's mean change from the plateau at the last budget, and its difference to ProRL paired by
    seed with a 95% t interval (where two or more seeds are shared)."""
    c = study.chosen(s, root)
    last = table[(table["budget"] == table["budget"].max()) & (table["role"] != "isocompute")] if len(table) else table
    per = {}  # (arm, seed) -> per-prompt pass@1 at the last budget
    start = None
    for r in last.itertuples():
        folder = study.folder(root, c) / p2.ARMS / r.arm / f"seed{r.seed}"
        per[(r.arm, r.seed)] = np.load(folder / f"pass1_step{r.step}.npy")
        start = np.load(folder / "pass1_step0.npy") if start is None else start
    if start is None:
        return pd.DataFrame()
    band = uq.band_of(banding_values(root, s), edges)
    rows = []
    for b, label in enumerate(uq.band_labels(edges)):
        pick = band == b
        if not pick.any():
            continue
        for arm, g in last.groupby("arm", sort=False):
            seeds = sorted(g["seed"])
            change = [per[(arm, k)][pick].mean() - start[pick].mean() for k in seeds]
            row = {"q_band": label, "prompts": int(pick.sum()), "arm": arm, "label": g["label"].iloc[0],
                   "N": int(g["N"].iloc[0]), "seeds": len(seeds), "change": float(np.mean(change))}  # fmt: skip
            shared = [k for k in seeds if (base, k) in per]
            if arm != base and len(shared) >= 2:
                d = [per[(arm, k)][pick].mean() - per[(base, k)][pick].mean() for k in shared]
                ci = stats.mean_interval(d)
                row |= {"delta_vs_prorl": ci["mean"], "ci_low": ci["ci_low"], "ci_high": ci["ci_high"]}
            rows.append(row)
    return pd.DataFrame(rows).reindex(columns=[*BAND_COLUMNS, "delta_vs_prorl", "ci_low", "ci_high"])


def quality_rows(summary: pd.DataFrame, device: str, model: str, models: dict[str, str] | None = None):
    """``update_quality.summarise`` rows labelled with where they ran and the model they measured (``model``, or
    ``models[checkpoint]`` for the checkpoints it names)."""
    return summary.assign(device=device, model=summary["checkpoint"].map(models or {}).fillna(model))


def gpu_quality(folder: Path) -> pd.DataFrame:
    """A GPU row set of the update-quality grid (``rlvr.study_gpu``) read back and summarised, labelled with its
    card and model (its last checkpoint named ``cap-step<k>`` where its phase 1 reached the cap, not a plateau);
    a ValueError naming the folder when it holds no finished row set."""
    record_path = Path(folder) / "record.json"
    files = uq.grid_files(Path(folder) / "update_quality")
    if not record_path.is_file() or not files:
        raise ValueError(f"gpu_rows_dir={str(folder)!r} holds no GPU row set (record.json and update_quality/*.csv)")
    record = json.loads(record_path.read_text())
    raw = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    mark = Path(folder) / "configs" / record["candidate_key"] / "plateau.json"
    if mark.is_file() and not json.loads(mark.read_text()).get("plateau_reached", True):  # phase 1 stopped at its cap
        raw["checkpoint"] = raw["checkpoint"].str.replace("plateau-step", "cap-step", regex=False)
    return quality_rows(uq.summarise(raw), record["card"], record["candidate_key"])


def best_update(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (device, model,) checkpoint, task and S, over all measured prompts: the N whose update has the largest
    mean cosine with the exact gradient, and the N with the largest mean one-step change of q
    (``update_quality.summarise`` rows, ``quality_rows``' labels where present)."""
    every = summary[summary["q_band"] == uq.ALL]
    keys = [k for k in ("device", "model") if k in every] + ["checkpoint"]
    keys += [k for k in ("reference",) if k in every] + ["task", "samples_per_update"]
    rows = []
    for key, g in every.groupby(keys, sort=False):
        by_cos, by_dq = g.loc[g["cosine"].idxmax()], g.loc[g["delta_q"].idxmax()]
        rows.append(dict(zip(keys[:-1], key[:-1])) | {"S": int(key[-1]),
                     "best_N_cosine": int(by_cos["n_rollouts"]), "cosine": round(float(by_cos["cosine"]), 3),
                     "best_N_delta_q": int(by_dq["n_rollouts"]),
                     "delta_q": round(float(by_dq["delta_q"]), 4)})  # fmt: skip
    return pd.DataFrame(rows)


def best_n(iso: pd.DataFrame) -> pd.DataFrame:
    """Per budget: the N with the highest mean held-out pass@1 at its best learning-rate multiple (``isocompute``
    rows), with its seeds and standard error, and every N whose mean is within one standard error of the
    difference to it (``tied``: the best N is not resolved among them)."""
    best = iso[iso["best_lr"]]
    rows = []
    for b, g in best.groupby("budget"):
        top = g.loc[g["pass1_mean"].idxmax()]
        gap_se = np.sqrt(g["pass1_se"].fillna(np.inf) ** 2 + top["pass1_se"] ** 2)
        tied = sorted(int(n) for n, gap, se in zip(g["n_rollouts"], top["pass1_mean"] - g["pass1_mean"], gap_se)
                      if n != top["n_rollouts"] and gap <= se)  # fmt: skip
        rows.append({"budget": int(b), "n_rollouts": int(top["n_rollouts"]), "lr_factor": top["lr_factor"],
                     "seeds": int(top["seeds"]), "pass1_mean": top["pass1_mean"], "pass1_se": top["pass1_se"],
                     "tied": " ".join(map(str, tied)) or "-"})  # fmt: skip
    return pd.DataFrame(rows).round(4)


ISO_DIFFERENCE_COLUMNS = ["task", "budget", "n_rollouts", "lr_factor", "base_n", "base_lr_factor", "seeds", "mean",
                          "ci_low", "ci_high", "ci_low_seeds", "ci_high_seeds", "direction"]  # fmt: skip


def isocompute_differences(table: pd.DataFrame, tunings: dict, root: Path, s, base_n: int = study.BASE_N):
    """Per budget, each IsoCompute N minus ``base_n`` (N=16), each at its own picked learning-rate multiple
    (``tunings[N].best``), paired by seed (``compare``): the mean difference of exact held-out pass@1, its 95%
    interval over seeds and held-out prompts (``ci_low``, ``ci_high``; its direction), and the t interval over
    seeds alone (``ci_low_seeds``, ``ci_high_seeds``). Empty when ``base_n`` is not in the grid or not settled."""
    iso = table[table["role"] == "isocompute"] if len(table) else table
    base_t = tunings.get(base_n)
    if iso.empty or base_t is None or base_t.best is None:
        return pd.DataFrame(columns=ISO_DIFFERENCE_COLUMNS)

    def arm_of(n: int, factor: float) -> str | None:
        hit = iso.loc[(iso["N"] == n) & (iso["lr_factor"] == factor), "arm"]
        return hit.iloc[0] if len(hit) else None

    base = arm_of(base_n, base_t.best)
    rows = []
    for b in sorted(iso["budget"].unique()):
        for n in sorted(n for n in tunings if n != base_n and tunings[n].best is not None):
            arm = arm_of(n, tunings[n].best)
            r = compare(iso, arm, base, b, root, s) if arm and base else None
            if r is None:
                continue
            lo, hi = r["ci_low_seeds_prompts"], r["ci_high_seeds_prompts"]
            rows.append({"task": "countdown", "budget": int(b), "n_rollouts": int(n), "lr_factor": tunings[n].best,
                         "base_n": base_n, "base_lr_factor": base_t.best, "seeds": r["seeds"], "mean": r["mean"],
                         "ci_low": lo, "ci_high": hi, "ci_low_seeds": r["ci_low"], "ci_high_seeds": r["ci_high"],
                         "direction": str(direction(lo, hi))})  # fmt: skip
    return pd.DataFrame(rows, columns=ISO_DIFFERENCE_COLUMNS)


def isocompute_summary(diffs: pd.DataFrame) -> list[str]:
    """What the IsoCompute differences (``isocompute_differences``) support, in sentences: the largest upper end of
    any N's interval against N=16 at the last budget and at any budget (no N beats N=16 by more than it), and the N
    whose interval lies below (above) 0, with the budgets where it does."""
    if diffs.empty:
        return ["no IsoCompute N has a paired difference to N=16 yet"]
    base, last = int(diffs["base_n"].iloc[0]), int(diffs["budget"].max())
    at_last = diffs[diffs["budget"] == last]
    top, top_any = at_last.loc[at_last["ci_high"].idxmax()], diffs.loc[diffs["ci_high"].idxmax()]
    lines = [
        f"no N beats N={base} by more than {top['ci_high']:+.3f} at {last:,} samples (the largest upper end, "
        f"N={int(top['n_rollouts'])}) or by more than {top_any['ci_high']:+.3f} at any budget "
        f"(N={int(top_any['n_rollouts'])} at {int(top_any['budget']):,}); 95% intervals over seeds and prompts"
    ]
    for direction, word in (("lower", "below"), ("higher", "above")):
        shown = diffs[diffs["direction"] == direction]
        for n, g in shown.groupby("n_rollouts"):
            budgets = " and ".join(f"{int(b):,}" for b in g["budget"])
            lines.append(f"N={int(n)} ends {word} N={base} at {budgets} samples")
    if not (diffs["direction"] != "no difference").any():
        lines.append(f"no N is told apart from N={base} at any budget")
    return lines


ACCOUNTING = ["arm", "label", "N", "prompts", "steps", "generated", "kept", "surplus_groups", "rounds",
              "surplus_samples", "kept_fraction"]  # fmt: skip


def accounting(frame: pd.DataFrame) -> pd.DataFrame:
    """Per arm (mean over seeds): steps, generated, kept and surplus samples, rounds a step, kept fraction."""
    steps = frame[frame["step"] > 0]
    per = steps.groupby(["arm", "label", "N", "prompts", "seed"], sort=False).agg(
        steps=("step", "max"),
        generated=("samples", "max"),
        kept=("kept_samples", "sum"),
        surplus_groups=("surplus_groups", "sum"),
        rounds=("rounds", "mean"),
    )
    out = per.groupby(["arm", "label", "N", "prompts"], sort=False).mean().reset_index()
    out["surplus_samples"] = out["surplus_groups"] * out["N"]
    out["kept_fraction"] = out["kept"] / out["generated"]
    return out


DRIFT_FRACTION = 0.125  # our choice: the end's entropy and KL average the steps of a run's last eighth of samples
DRIFT = ["arm", "label", "N", "prompts", "lr_factor", "seeds", "entropy_start", "entropy_end", "entropy_end_ci",
         "kl_end", "kl_end_ci"]  # fmt: skip


def drift(frame: pd.DataFrame, arms: list[str], fraction: float = DRIFT_FRACTION) -> pd.DataFrame:
    """Per arm of ``arms`` (finished runs): the entropy per response token at its first step, and the entropy and
    the KL to the plateau policy (nats a token) averaged over the steps of the last ``fraction`` of each run's
    generated samples (one step's estimate is noisy); mean over seeds, with a 95% t half-width across seeds
    (NaN with one seed)."""
    rows = []
    for arm in arms:
        g = frame[(frame["arm"] == arm) & (frame["step"] > 0)]
        if g.empty:
            continue
        per = []
        for _, run in g.groupby("seed"):
            end = run[run["samples"] > (1 - fraction) * run["samples"].max()]
            per.append((run.sort_values("step")["entropy"].iloc[0], end["entropy"].mean(), end["kl_ref"].mean()))
        start, entropy, kl = np.array(per).T
        half = {k: (v.mean() - stats.mean_interval(v)["ci_low"]) if v.size > 1 else np.nan
                for k, v in (("entropy", entropy), ("kl", kl))}  # fmt: skip
        first = g.iloc[0]
        rows.append({"arm": arm, "label": first["label"], "N": first["N"], "prompts": first["prompts"],
                     "lr_factor": first["lr_factor"], "seeds": len(per), "entropy_start": start.mean(),
                     "entropy_end": entropy.mean(), "entropy_end_ci": half["entropy"], "kl_end": kl.mean(),
                     "kl_end_ci": half["kl"]})  # fmt: skip
    return pd.DataFrame(rows, columns=DRIFT)


def drift_curves(frame: pd.DataFrame, arms: list[str], budget: int, bins: int = 16) -> pd.DataFrame:
    """Per arm of ``arms`` and bin of generated samples (``bins`` equal bins up to ``budget``, the last step's
    overshoot counted in the last bin): the entropy and the KL to the plateau policy, mean over each run's steps in
    the bin, then over seeds (columns arm, label, N, samples (the bin's end), entropy, kl_ref, seeds)."""
    g = frame[frame["arm"].isin(arms) & (frame["step"] > 0)].copy()
    if g.empty:
        return pd.DataFrame(columns=["arm", "label", "N", "samples", "entropy", "kl_ref", "seeds"])
    edges = np.linspace(0, budget, bins + 1)
    g["bin_end"] = edges[np.clip(np.searchsorted(edges, g["samples"], side="left"), 1, bins)]
    per_seed = g.groupby(["arm", "label", "N", "bin_end", "seed"], sort=False)[["entropy", "kl_ref"]].mean()
    out = per_seed.groupby(["arm", "label", "N", "bin_end"], sort=False).agg(
        entropy=("entropy", "mean"), kl_ref=("kl_ref", "mean"), seeds=("entropy", "size")
    )
    out = out.reset_index().rename(columns={"bin_end": "samples"})
    order = {a: k for k, a in enumerate(arms)}
    return out.sort_values(["arm", "samples"], key=lambda c: c.map(order) if c.name == "arm" else c, kind="stable")


def prompt_fate(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> pd.DataFrame:
    """Per arm and starting-q band (exact q at the plateau): prompts, mean q before and after phase 2 (mean over
    seeds, with its standard error across seeds), the share of the band's prompts the arm ever kept, and the
    share rescued (starting below 1/16, ending at or above it) or lost (starting at or above 0.5, ending below)."""
    c = study.chosen(s, root)
    base = study.folder(root, c) / study.PHASE1
    step = plateau_record(root, s)["step"]
    q0 = np.load(base / f"q_train_step{step}.npy")
    bands = uq.band_of(q0, list(FATE_EDGES))
    labels = uq.band_labels(list(FATE_EDGES))
    rows = []
    from brorl_lib.facts.arms import Arm

    for end in sorted((study.folder(root, c) / p2.ARMS).glob(f"*/seed*/{p2.Q_END}")):
        folder = end.parent
        arm, seed = Arm(**json.loads((folder / "arm.json").read_text())["arm"]), int(folder.name.removeprefix("seed"))
        q1, kept = np.load(folder / p2.Q_END), np.load(folder / KEPT_COUNTS)
        for b, label in enumerate(labels):
            pick = bands == b
            if pick.any():
                rows.append(
                    {
                        "arm": arm.name, "label": arm.label, "seed": seed, "q_band": label, "prompts": int(pick.sum()),
                        "q_before": q0[pick].mean(), "q_after": q1[pick].mean(),
                        "ever_kept": (kept[pick] > 0).mean(),
                        "rescued": ((q0[pick] < LOW_Q_BAND[1]) & (q1[pick] >= LOW_Q_BAND[1])).mean(),
                        "lost": ((q0[pick] >= 0.5) & (q1[pick] < 0.5)).mean(),
                    }
                )  # fmt: skip
    raw = pd.DataFrame(rows)
    if raw.empty:
        return raw
    raw["delta_q"] = raw["q_after"] - raw["q_before"]
    g = raw.groupby(["arm", "label", "q_band"], sort=False)
    out = g.mean(numeric_only=True).drop(columns="seed").reset_index()
    out["delta_q_se"] = g["delta_q"].std(ddof=1).to_numpy() / np.sqrt(g.size().to_numpy())
    out["seeds"] = g.size().to_numpy()
    return out


def phase1_curve(root: Path, s: study.StudySettings) -> pd.DataFrame:
    """Every candidate's phase 1: exact held-out pass@1 at each evaluation with its standard error over prompts,
    a centred moving mean over plateau_window evaluations, and whether the candidate was chosen."""
    chosen = study.chosen(s, root)
    rows = []
    for c in s.candidates:
        base = study.folder(root, c) / study.PHASE1
        for step, path in plateau.pass1_files(base):
            x = np.load(path)
            rows.append({"candidate": c.key, "chosen": c == chosen, "step": step, "pass1": float(x.mean()),
                         "se": float(x.std(ddof=1) / np.sqrt(x.size))})  # fmt: skip
    out = pd.DataFrame(rows)
    out["smoothed"] = out.groupby("candidate")["pass1"].transform(
        lambda x: x.rolling(s.plateau_rule.window, min_periods=s.plateau_rule.window, center=True).mean()
    )
    return out


def conclusion(verdict_table: pd.DataFrame, verdict_t: dict, status: dict[str, int], kind: str = "") -> list[str]:
    """The verdict in sentences, each computed from the table (at the largest budget every comparison reached):
    the rates used, each comparison's mean, its interval over seeds and prompts and its direction; what is still
    running; and, given the plateau's ``kind`` (``plateau_kind``), the condition every comparison starts from."""
    f16, f512 = (verdict_t[n].best for n in (study.BASE_N, p2.BROAD_N))
    tuned = (f"tuned multiples of the rule's rate: ProRL {f16:g}x, BroRL {f512:g}x" if None not in (f16, f512)
             else "the rates are still being tuned")  # fmt: skip
    lines = [f"phase 2: {status['finished']} runs finished, {status['pending']} more planned so far; {tuned}"]
    lines += [f"every comparison starts from a {kind}"] if kind == RATE_NOISE else []
    if verdict_table.empty:
        return lines + ["no comparison has two seeds yet: no verdict"]
    for (rates, comparison), g in verdict_table.groupby(["rates", "comparison"], sort=False):
        r = g.loc[g["budget"].idxmax()]
        lines.append(
            f"{rates} rates, {comparison} at {int(r['budget']):,} samples: {r['mean']:+.3f} "
            f"{_seeds_prompts(r)} over {int(r['seeds'])} seeds and "
            f"the held-out prompts -> {r['direction']}"
        )
    return lines


TEXT_WIDTH = 88  # characters a printed line holds: the book's text column and a JupyterLab output (our choice)


def wrapped(lines: list[str], width: int = TEXT_WIDTH) -> str:
    """``lines`` as text at most ``width`` characters wide, each line a paragraph whose continuation is indented;
    an interval in brackets is never broken."""

    def fill(line: str) -> str:
        kept = re.sub(r"\[[^\]]*\]", lambda m: m[0].replace(" ", "\0"), line)  # textwrap breaks at spaces only
        return textwrap.fill(kept, width, subsequent_indent="    ", break_on_hyphens=False).replace("\0", " ")

    return "\n".join(fill(line) for line in lines)


def conclusion_text(verdict_table: pd.DataFrame, verdict_t: dict, status: dict[str, int], kind: str = "") -> str:
    """The verdict's sentences (``conclusion``) as wrapped text, one paragraph each."""
    return wrapped(conclusion(verdict_table, verdict_t, status, kind))


def outside_text(record: dict) -> str:
    """The accepted mass outside the canonical answers at the plateau (``study.outside_check``) in a sentence."""
    return wrapped(
        [
            f"accepted mass outside the canonical answers at the plateau ({record['samples']} samples a prompt): "
            f"held-out prompts {record['held_out']:.3g} (standard error {record['held_out_se']:.2g}), training "
            f"prompts {record['train']:.3g} (standard error {record['train_se']:.2g})"
        ]
    )


NO_COMPARISON = (
    "in progress: no comparison of BroRL with ProRL has two finished seeds yet (learning rates being bracketed)"
)
TUNED_PENDING = "the comparison at tuned rates is in progress (learning rates being bracketed)"
HEADLINE = re.compile(r"N512(_lr\S+x)? - N16(_lr\S+x)?")  # BroRL against ProRL, at the rule's or at tuned rates
RATES = {"rule": "at the square-root rule's learning rates", "tuned": "at rates tuned per arm"}
SAID = {"lower": "ends below", "higher": "ends above", "no difference": "shows no difference from"}


def _seeds_prompts(r) -> str:
    """A verdict row's 95% interval over seeds and prompts."""
    return interval_text(r["ci_low_seeds_prompts"], r["ci_high_seeds_prompts"])


def _headline(verdict_table: pd.DataFrame) -> tuple[float, dict]:
    """The largest budget and, for each kind of rates at it, its first BroRL (N=512) against ProRL (N=16) row."""
    rows = verdict_table.to_dict("records")
    last = max((float(r["budget"]) for r in rows), default=float("nan"))
    kept = {}
    for r in rows:
        if float(r["budget"]) == last and HEADLINE.fullmatch(str(r["comparison"])):
            kept.setdefault(r["rates"], r)
    return last, kept


def _comparisons(verdict_table: pd.DataFrame) -> str:
    """One sentence: BroRL (N=512) against ProRL (N=16) at the largest budget, at the rule's rates and at tuned ones,
    each with its mean difference and its 95% interval over seeds and held-out prompts (the controls and the other
    budgets are in the verdict table)."""
    last, kept = _headline(verdict_table)
    if not kept:
        return NO_COMPARISON
    seeds = {int(r["seeds"]) for r in kept.values()}
    said = []
    for rates, r in kept.items():
        first = not said
        mean = f"{'Δpass@1 ' if first else ''}{float(r['mean']):+.3f}"
        interval = _seeds_prompts(r)
        numbers = f"{mean}, 95% CI {interval}" if first else f"{mean} {interval}"
        numbers += "" if len(seeds) == 1 else f", {int(r['seeds'])} seeds"
        whom = "ProRL (N=16)" if first else "it"
        said.append(f"{SAID.get(r['direction'], r['direction'])} {whom} {RATES.get(rates, rates)} ({numbers})")
    pending = "" if "tuned" in kept else f"; {TUNED_PENDING}"
    lead = f"With {seeds.pop()} seeds at" if len(seeds) == 1 else "At"
    return f"{lead} {last:,.0f} samples each, BroRL (N=512) {' and '.join(said)}{pending}."


def _gates(plateau_table: pd.DataFrame) -> str:
    """Whether the chosen candidate reached the regime the paper's argument needs (its plateau gates), and, where
    the plateau table says so (``plateau_kind``), that its plateau is a learning-rate-noise plateau."""
    r = plateau_table.iloc[0]
    measured = {
        "pass1": f"pass@1 {float(r['pass1']):.3f} in its band",
        "low_q": f"low-q share {float(r['low_q_share_exact']):.3f}",
        "kept": f"kept fraction {float(r['kept_fraction']):.2f}",
    }
    failed = [text for key, text in measured.items() if str(r[f"gate_{key}"]).strip().lower() != "true"]
    flat = str(r["plateau_reached"]).strip().lower() == "true"
    noise = str(r.get("plateau_kind", "")) == RATE_NOISE
    where = f"at its plateau (step {int(r['step']):,}, shown flat)" if flat else (
        f"at phase 1's cap (step {int(r['step']):,}), not shown flat")  # fmt: skip
    where += " and a learning-rate-noise plateau" if noise else ""
    if not failed:
        regime = ": the paper's regime was not shown" if noise else ""
        return f"the chosen model passed every gate {where} ({', '.join(measured.values())}){regime}"
    return f"the chosen model failed the gate on {', '.join(failed)} {where}: the paper's regime was not reached"


def _all_prompts(verdict_table: pd.DataFrame) -> str:
    """BroRL minus ProRL on the full held-out split at tuned rates and the last budget, in a few words."""
    r = _headline(verdict_table)[1].get("tuned")
    if r is None:
        return "all prompts: no tuned comparison yet"
    return f"on all held-out prompts at tuned rates, pass@1 {float(r['mean']):+.3f} {_seeds_prompts(r)}"


CLAIM = "Figure 1, Table 1: past ProRL's plateau, N=512 beats N=16 at equal samples"  # the paper's, as tested


def claim(verdict_table: pd.DataFrame, plateau_table: pd.DataFrame, regime_verdict: str = "") -> Claim:
    """The results-at-a-glance row of notebook 04: its comparisons (``verdict``), under its plateau gates; with a
    ``regime_verdict`` (a sentence of ``regime_report``), that one, with the full distribution's in the caveat."""
    caveat = "a tiny model on one task (countdown) at laptop scale"
    if regime_verdict:
        kind = " (a learning-rate-noise plateau)" if len(plateau_table) and str(
            plateau_table.iloc[0].get("plateau_kind", "")) == RATE_NOISE else ""  # fmt: skip
        return Claim(
            claim=CLAIM,
            verdict=regime_verdict,
            caveat=f"{_all_prompts(verdict_table)}; {caveat}{kind}",
            figure="laptop_rlvr_regime",
        )
    return Claim(
        claim=CLAIM,
        verdict=_comparisons(verdict_table) if len(verdict_table) else NO_COMPARISON,
        caveat=f"{caveat}; {_gates(plateau_table)}" if len(plateau_table) else caveat,
        figure="fig1_laptop_rlvr",
    )
