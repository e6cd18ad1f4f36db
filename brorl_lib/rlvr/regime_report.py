"""Notebook 04's regime-set tables, read back from the finished regime runs (``rlvr.regime``): each arm's rate
screen on the regime validation part, the verdict at the picks on the regime test part (exact q at the training
temperature first, then pass@k from q and the protocol's pass@1), per-prompt coverage and where the gain lands,
and the drift on every generated token beside the kept batch. Intervals count seeds and prompts (the two-way
bootstrap of ``study_report.two_way_interval``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from brorl_lib.rlvr import regime, study
from brorl_lib.rlvr import study_phase2 as p2
from brorl_lib.rlvr.run import DONE, KEPT_COUNTS, METRICS
from brorl_lib.rlvr.study_report import DRIFT_FRACTION, direction, interval_text, two_way_interval

# what the regime set changes from the paper's protocol (``save_table(beyond=...)``: its artifacts are variants)
BEYOND = {"prompts": "low-q prompts only: q from 1/512 to 1/16 at the plateau", "endpoint": "exact q at T=1",
          "lr": "each arm's rate screened on the low-q validation part"}  # fmt: skip
PASS_K = (16, 512)  # pass@k from q at the two arms' N: a group of that many holds a right answer (our choice)
ARMS = {study.BASE_N: "ProRL N=16", p2.BROAD_N: "BroRL N=512"}


def available(root: Path, s: study.StudySettings) -> bool:
    return (regime.folder(root, s) / regime.POOL).exists()


def pool_summary(root: Path, s: study.StudySettings) -> pd.DataFrame:
    """The pool at the plateau: prompts below, in and above the band, and each part's size and mean q."""
    table = pd.read_csv(regime.folder(root, s) / regime.POOL, keep_default_na=False)
    low, high = regime.BAND
    where = np.where(table["q"] < low, "below the band", np.where(table["q"] < high, "in the band", "above the band"))
    rows = [{"group": g, "prompts": int((where == g).sum()), "mean_q": float(table["q"][where == g].mean())}
            for g in ("below the band", "in the band", "above the band")]  # fmt: skip
    rows += [{"group": f"regime {name} part", "prompts": int((table["part"] == name).sum()),
              "mean_q": float(table.loc[table["part"] == name, "q"].mean())} for name in regime.PARTS]  # fmt: skip
    return pd.DataFrame(rows)


def _end(folder: Path) -> int:
    return json.loads((folder / DONE).read_text())["step"]


def screen_table(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> pd.DataFrame:
    """Per arm and rate multiple: seeds finished, the learning rate, mean exact validation q at the end and its
    standard error over prompts (seed-averaged per prompt), which multiple is the best and the pick, and the same
    mean on the regime test part (the pick's sensitivity: whether the test part would pick alike)."""
    rows = []
    for n, label in ARMS.items():
        k = regime.screen(root, s, p, n)
        for f in k.grid:
            done = [seed for seed in regime.SCREEN_SEEDS if regime.finished(root, s, regime.arm(p, n, f), seed)]
            test = _per_prompt(root, s, p, n, f, done, "end").mean() if done else np.nan
            rows.append({"arm": label, "N": n, "lr_factor": f, "lr": regime.arm(p, n, f).lr, "seeds": len(done),
                         "val_q": k.means.get(f, np.nan), "val_q_se": k.ses.get(f, np.nan), "best": f == k.best,
                         "pick": f == k.pick, "test_q": test})  # fmt: skip
    return pd.DataFrame(rows)


def picks(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> dict[int, float | None]:
    return {n: regime.screen(root, s, p, n).pick for n in ARMS}


def _verdict_seeds(root, s, p, chosen: dict) -> list[int]:
    """The verdict's seeds every picked arm has finished."""
    return [seed for seed in regime.VERDICT_SEEDS
            if all(regime.finished(root, s, regime.arm(p, n, f), seed) for n, f in chosen.items())]  # fmt: skip


def _per_prompt(root, s, p, n: int, f: float, seeds: list[int], name: str) -> np.ndarray:
    """seeds x prompts of one saved per-prompt array (``name``: a file name, or "start"/"end" for the test part's
    exact q at step 0 and at the end)."""
    out = []
    for seed in seeds:
        folder = regime.arm_folder(root, s, regime.arm(p, n, f), seed)
        file = {"start": "pass1_step0.npy", "end": f"pass1_step{_end(folder)}.npy"}.get(name, name)
        out.append(np.load(folder / file))
    return np.array(out)


def _row(endpoint: str, comparison: str, d: np.ndarray) -> dict:
    low, high = two_way_interval(d)
    return {"endpoint": endpoint, "comparison": comparison, "seeds": d.shape[0], "prompts": d.shape[1],
            "mean": float(d.mean()), "ci_low": low, "ci_high": high,
            "direction": str(direction(low, high))}  # fmt: skip


VERDICT_COLUMNS = ["endpoint", "comparison", "seeds", "prompts", "mean", "ci_low", "ci_high", "direction"]


def verdict(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> pd.DataFrame:
    """At both picks, paired by seed, per test prompt: BroRL minus ProRL and each arm minus the plateau, in exact q
    at the training temperature on the regime test part (primary), in pass@k from q (``PASS_K``), and in the
    protocol's exact pass@1 on the regime test part and on the full held-out split; a 95% interval over seeds and
    prompts (empty until both picks have two shared seeds)."""
    chosen = picks(root, s, p)
    if None in chosen.values():
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    seeds = _verdict_seeds(root, s, p, chosen)
    if len(seeds) < 2:
        return pd.DataFrame(columns=VERDICT_COLUMNS)
    (n16, f16), (n512, f512) = chosen.items()

    def get(n, f, name):
        return _per_prompt(root, s, p, n, f, seeds, name)

    rows = []
    q = {n: (get(n, f, "start"), get(n, f, "end")) for n, f in chosen.items()}
    endpoints = [("exact q (T=1), regime test", lambda v: v)]
    endpoints += [(f"pass@{k} from q (T=1), regime test", lambda v, k=k: 1 - (1 - v) ** k) for k in PASS_K]
    for endpoint, transform in endpoints:
        rows.append(_row(endpoint, "BroRL - ProRL", transform(q[n512][1]) - transform(q[n16][1])))
        for n in chosen:
            rows.append(_row(endpoint, f"{ARMS[n].split()[0]} - plateau", transform(q[n][1]) - transform(q[n][0])))
    oracle, table = {}, screen_table(root, s, p)  # each arm at its rate best on the test part: what picking cost
    for n in chosen:
        mine = table[(table["N"] == n) & (table["seeds"] == len(regime.SCREEN_SEEDS))]
        oracle[n] = float(mine.loc[mine["test_q"].idxmax(), "lr_factor"])
    d = _per_prompt(root, s, p, n512, oracle[n512], list(regime.SCREEN_SEEDS), "end")
    d = d - _per_prompt(root, s, p, n16, oracle[n16], list(regime.SCREEN_SEEDS), "end")
    rows.append(_row("exact q (T=1), regime test, each arm at its rate best on test", "BroRL - ProRL", d))
    for endpoint, name in (("protocol pass@1, regime test", regime.PROTOCOL_TEST),
                           ("protocol pass@1, full held-out", regime.PROTOCOL_HELD)):  # fmt: skip
        rows.append(_row(endpoint, "BroRL - ProRL", get(n512, f512, name) - get(n16, f16, name)))
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def coverage(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> pd.DataFrame:
    """Per arm at its pick, mean over the verdict's seeds: the regime train prompts ever kept (trained on), kept
    groups and kept samples per train prompt, and the mean gain in exact q (T=1) on train prompts ever kept and
    never kept."""
    chosen = picks(root, s, p)
    if None in chosen.values():
        return pd.DataFrame()
    seeds = _verdict_seeds(root, s, p, chosen)
    pool = pd.read_csv(regime.folder(root, s) / regime.POOL, keep_default_na=False)
    start = pool.loc[pool["part"] == "train", "q"].to_numpy()
    rows = []
    for n, f in chosen.items():
        per = []
        for seed in seeds:
            folder = regime.arm_folder(root, s, regime.arm(p, n, f), seed)
            kept, gain = np.load(folder / KEPT_COUNTS), np.load(folder / regime.Q_END) - start
            per.append(((kept > 0).mean(), kept.mean(), kept.mean() * n, gain[kept > 0].mean(),
                        gain[kept == 0].mean() if (kept == 0).any() else np.nan))  # fmt: skip
        m = np.nanmean(np.array(per, dtype=float), 0)
        rows.append({"arm": ARMS[n], "lr_factor": f, "seeds": len(seeds), "train_prompts": len(start),
                     "share_ever_kept": m[0], "kept_groups_per_prompt": m[1], "kept_samples_per_prompt": m[2],
                     "gain_ever_kept": m[3], "gain_never_kept": m[4]})  # fmt: skip
    return pd.DataFrame(rows)


def curves(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> pd.DataFrame:
    """Per arm at its pick and evaluation: generated samples (mean over seeds), exact q (T=1) on the regime test
    part, mean and 95% interval over seeds and prompts."""
    chosen = picks(root, s, p)
    if None in chosen.values():
        return pd.DataFrame()
    seeds = _verdict_seeds(root, s, p, chosen)
    rows = []
    for n, f in chosen.items():
        frames = [pd.read_csv(regime.arm_folder(root, s, regime.arm(p, n, f), seed) / METRICS) for seed in seeds]
        evaluated = [fr.loc[fr["pass1"].notna(), ["step", "samples"]].reset_index(drop=True) for fr in frames]
        folders = [regime.arm_folder(root, s, regime.arm(p, n, f), seed) for seed in seeds]
        for k in range(min(map(len, evaluated))):
            d = np.array(
                [np.load(fo / f"pass1_step{int(ev.loc[k, 'step'])}.npy") for fo, ev in zip(folders, evaluated)]
            )
            low, high = two_way_interval(d)
            samples = float(np.mean([ev.loc[k, "samples"] for ev in evaluated]))
            rows.append({"arm": ARMS[n], "N": n, "samples": samples, "q": float(d.mean()), "ci_low": low,
                         "ci_high": high, "seeds": len(seeds)})  # fmt: skip
    return pd.DataFrame(rows)


def drift(root: Path, s: study.StudySettings, p: p2.Phase2Settings) -> pd.DataFrame:
    """Per arm at its pick, over the steps of each run's last ``DRIFT_FRACTION`` of samples, mean over seeds: KL to
    the plateau policy and entropy per response token, on every generated token and on the kept batch."""
    chosen = picks(root, s, p)
    if None in chosen.values():
        return pd.DataFrame()
    columns = ["kl_ref_all", "kl_ref", "entropy", "entropy_kept"]
    rows = []
    for n, f in chosen.items():
        per = []
        for seed in _verdict_seeds(root, s, p, chosen):
            run = pd.read_csv(regime.arm_folder(root, s, regime.arm(p, n, f), seed) / METRICS)
            run = run[run["step"] > 0]
            per.append(run.loc[run["samples"] > (1 - DRIFT_FRACTION) * run["samples"].max(), columns].mean())
        rows.append({"arm": ARMS[n], "lr_factor": f, "seeds": len(per)} | pd.DataFrame(per).mean().to_dict())
    return pd.DataFrame(rows)


def _interval(r: dict) -> str:
    return f"{r['mean']:+.3f} {interval_text(r['ci_low'], r['ci_high'])}"


def _said(direction: str) -> str:
    return {"higher": "BroRL higher", "lower": "BroRL lower"}.get(direction, "no difference shown")


def conclusion_text(root: Path, s: study.StudySettings, p: p2.Phase2Settings, v: pd.DataFrame) -> str:
    """The regime set's answer in words from its verdict table ``v`` (``verdict``): the screen's state or the
    verdict's sentences, one paragraph each."""
    from brorl_lib.rlvr.study_report import wrapped

    chosen = picks(root, s, p)
    if None in chosen.values():
        needed = sum(len(regime.screen(root, s, p, n).needs) for n in ARMS)
        return (
            f"The regime screen is not finished: {needed} runs still needed (python -m brorl_lib.rlvr.regime screen)."
        )
    if v.empty:
        return "The screen has picked both rates; the verdict's seeds are still running."
    rows = {(r["endpoint"], r["comparison"]): r for r in v.to_dict("records")}
    q = "exact q (T=1), regime test"
    gains = ", ".join(f"{c.split()[0]} {_interval(rows[(q, c)])}" for c in ("ProRL - plateau", "BroRL - plateau"))
    rates = ", ".join(f"{ARMS[n]} {f:g}x" for n, f in chosen.items())
    lines = [claim_verdict(v), f"Picks (multiples of each arm's rule rate): {rates}; {regime.BUDGET:,} "
             f"generated samples each.", f"Gain over the plateau in the same units: {gains}."]  # fmt: skip
    lines += [f"{e}: BroRL - ProRL {_interval(rows[(e, 'BroRL - ProRL')])}." for e, c in rows if c == "BroRL - ProRL"
              and e != q]  # fmt: skip
    cov = coverage(root, s, p)
    if len(cov):
        lines.append("Coverage of the regime train part (share of prompts ever trained on): " + ", ".join(
            f"{r['arm']} {r['share_ever_kept']:.2f}" for r in cov.to_dict("records")) + ".")  # fmt: skip
    return wrapped(lines)


def claim_verdict(v: pd.DataFrame) -> str:
    """The results-at-a-glance verdict from the verdict table ``v`` (``verdict``): the primary endpoint at the picks
    in one sentence (empty until settled)."""
    if v.empty:
        return ""
    r = v[(v["endpoint"] == "exact q (T=1), regime test") & (v["comparison"] == "BroRL - ProRL")].iloc[0]
    return (
        f"On {int(r['prompts'])} low-q test prompts (q from 1/512 to 1/16 at the plateau), each arm at its own "
        f"screened rate and equal samples, BroRL (N=512) minus ProRL (N=16) in exact q is {_interval(r)}, "
        f"{int(r['seeds'])} seeds: {_said(r['direction'])}."
    )
