"""Per-instance results on disk: one JSON line per sample, appended as an evaluation goes.

Layout: ``<results_dir>/<checkpoint>/<benchmark>.jsonl`` and ``<results_dir>/<checkpoint>/run.json``
(the settings, and per benchmark its instances' fingerprint and whether it is complete: ``run.py``).
A row holds ``checkpoint, benchmark, domain, task, instance_id, sample, score, correct,
response_tokens, finish_reason`` and, unless switched off, ``response``. All samples of an instance
are appended together and flushed to disk, so an interrupted evaluation leaves whole instances plus
at most one cut line, which ``repair`` drops before a resumed run continues.

Reading trusts nothing: a line that is not a row as ``evaluate`` writes it (``valid_row``: cut, not
JSON, not UTF-8, a JSON value that is no object, missing or mistyped columns, another checkpoint's or
benchmark's row) is skipped and counted in a ``ResultsWarning``; resuming drops it from the file and
evaluates its instance again, so a resumed run ends with the rows of an uninterrupted one. A ``run.json``
that cannot be read as a record of settings raises ``DamagedResults`` naming the file.
"""

from __future__ import annotations

import json
import math
import os
import re
import warnings
from collections.abc import Iterable, Sequence
from numbers import Real
from pathlib import Path

import pandas as pd

from brorl_lib.core import atomic

RUN_INFO = "run.json"
COLUMNS = [
    "checkpoint",
    "benchmark",
    "domain",
    "task",
    "instance_id",
    "sample",
    "score",
    "correct",
    "response_tokens",
    "finish_reason",
]
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+=-]*$")


def check_label(label: str) -> str:
    """A checkpoint label usable as a folder name."""
    if not isinstance(label, str) or not _LABEL.match(label):
        raise ValueError(
            f"label={label!r} is not allowed: use letters, digits and '_.@+=-', starting with a letter or digit"
        )
    return label


def default_label(model: str, revision: str | None = None) -> str:
    """A label from a model path or hub id: its last path part (hub ids: owner--name), '@revision'."""
    text = str(model).rstrip("/")
    base = text.replace("/", "--") if not Path(text).exists() and text.count("/") == 1 else Path(text).name
    label = re.sub(r"[^A-Za-z0-9_.@+=-]", "_", base + (f"@{revision}" if revision else ""))
    return check_label(label if label[0].isalnum() else f"m{label}")


def results_path(results_dir: Path, checkpoint: str, benchmark: str) -> Path:
    return Path(results_dir) / check_label(checkpoint) / f"{benchmark}.jsonl"


class ResultsWarning(UserWarning):
    """Lines of a results file were skipped: they are not result rows."""


class DamagedResults(RuntimeError):
    """A results folder's ``run.json`` cannot be read as the record of a run."""


_TEXT_COLUMNS = ("checkpoint", "benchmark", "domain", "task", "instance_id", "finish_reason")


def valid_row(row, checkpoint: str, benchmark: str) -> bool:
    """``row`` is a result row of ``checkpoint`` on ``benchmark`` as ``evaluate`` writes it: a JSON object with
    every column of ``COLUMNS``, text columns strings, ``sample`` and ``response_tokens`` integers >= 0,
    ``score`` a number in [0, 1], ``correct`` a bool, and ``response``, when present, a string."""
    if not isinstance(row, dict) or any(c not in row for c in COLUMNS):
        return False
    counts = (row["sample"], row["response_tokens"])
    return (
        all(isinstance(row[c], str) for c in _TEXT_COLUMNS)
        and (row["checkpoint"], row["benchmark"]) == (checkpoint, benchmark)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts)
        and isinstance(row["score"], Real)
        and not isinstance(row["score"], bool)
        and math.isfinite(row["score"])
        and 0 <= row["score"] <= 1
        and isinstance(row["correct"], bool)
        and isinstance(row.get("response", ""), str)
    )


def read_rows(path: Path) -> list[dict]:
    """The result rows of one file (``<checkpoint>/<benchmark>.jsonl``), in order; lines that are not rows
    (``valid_row``) are skipped, and counted in a ``ResultsWarning``."""
    path = Path(path)
    if not path.exists():
        return []
    rows, skipped = [], []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            row = None
        if valid_row(row, path.parent.name, path.stem):
            rows.append(row)
        else:
            skipped.append(number)
    if skipped:
        shown = ", ".join(map(str, skipped[:10])) + (", ..." if len(skipped) > 10 else "")
        warnings.warn(
            f"{path}: skipped {len(skipped)} line(s) that are not result rows (line {shown}): a cut last line of "
            f"an interrupted run, or a damaged file; resuming evaluates their instances again",
            ResultsWarning,
            stacklevel=2,
        )
    return rows


def finished_instances(rows: Iterable[dict], samples: int) -> set[str]:
    """Instance ids with every sample index 0..samples-1 present."""
    seen: dict[str, set[int]] = {}
    for r in rows:
        seen.setdefault(r["instance_id"], set()).add(int(r["sample"]))
    want = set(range(samples))
    return {iid for iid, got in seen.items() if want <= got}


def repair(path: Path, samples: int, instance_ids: Iterable[str] | None = None) -> set[str]:
    """Keep only whole instances (and one row per sample) in ``path``, of ``instance_ids`` when given (the
    benchmark's instances: rows of others are foreign); returns their ids."""
    rows = read_rows(path)
    if instance_ids is not None:
        wanted = set(instance_ids)
        rows = [r for r in rows if r["instance_id"] in wanted]
    done = finished_instances(rows, samples)
    kept, seen = [], set()
    for r in rows:
        key = (r["instance_id"], int(r["sample"]))
        if r["instance_id"] in done and int(r["sample"]) < samples and key not in seen:
            seen.add(key)
            kept.append(r)
    if path.exists() and len(kept) != len(path.read_bytes().splitlines()):
        atomic.write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
    return done


def append_rows(path: Path, rows: Sequence[dict]) -> None:
    """Append rows and force them to disk."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in rows))
        fh.flush()
        os.fsync(fh.fileno())


def read_run_info(results_dir: Path, checkpoint: str) -> dict | None:
    """The record of ``checkpoint``'s evaluation runs (``run.json``), or None when there is none; raises
    ``DamagedResults`` naming the file when it is not such a record (cut, not JSON, another shape)."""
    path = Path(results_dir) / check_label(checkpoint) / RUN_INFO
    if not path.exists():
        return None
    try:
        info = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        problem = f"it is not UTF-8 JSON ({type(e).__name__}: {e})"
    else:
        problem = _run_info_problem(info)
    if problem is not None:
        raise DamagedResults(
            f"{path} is damaged: {problem}. It records the settings the results beside it were made with, so "
            f"they can be neither resumed nor tabled without it: restore it (e.g. from a backup or version "
            f"control), or move the folder {path.parent} away and evaluate again"
        )
    return info


def _run_info_problem(info) -> str | None:
    """What makes ``info`` no record of runs as ``evaluation.run`` writes it, or None."""
    if not isinstance(info, dict):
        return f"it holds a JSON {type(info).__name__}, not an object"
    kinds = {"checkpoint": str, "model": str, "protocol": dict, "runs": list, "benchmarks": dict}
    for key, kind in kinds.items():
        if key in info and not isinstance(info[key], kind):
            return f"its {key!r} is a {type(info[key]).__name__}, not a {kind.__name__}"
    missing = [k for k in ("model", "protocol", "runs") if k not in info]
    if missing:
        return f"it lacks {missing}"
    for name, entry in info.get("benchmarks", {}).items():
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("fingerprint"), str)
            and isinstance(entry.get("instances"), int)
        ):
            return f"its entry for benchmark {name!r} is not an object with a 'fingerprint' and an 'instances' count"
    return None


def write_run_info(results_dir: Path, checkpoint: str, info: dict) -> None:
    path = Path(results_dir) / check_label(checkpoint) / RUN_INFO
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, json.dumps(info, indent=2, sort_keys=True) + "\n")


def complete_benchmarks(results_dir: Path, checkpoint: str, full_only: bool = False) -> set[str]:
    """Benchmarks of ``checkpoint`` that run.json records as complete (every instance evaluated with all
    its samples) and whose results file indeed holds that many whole instances; with ``full_only``, only
    those that are also the whole benchmark (the paper's instance set)."""
    info = read_run_info(results_dir, checkpoint) or {}
    samples = int(((info.get("protocol") or {}).get("sampling") or {}).get("n", 0))
    out = set()
    for name, entry in (info.get("benchmarks") or {}).items():
        if not entry.get("complete") or (full_only and not entry.get("full")) or samples < 1:
            continue
        path = results_path(Path(results_dir), checkpoint, name)
        if len(finished_instances(read_rows(path), samples)) == entry.get("instances"):
            out.add(name)
    return out


def checkpoints(results_dir: Path) -> list[str]:
    """Labels of the checkpoints evaluated under ``results_dir`` (folders with a run.json), sorted."""
    root = Path(results_dir)
    return sorted(p.name for p in root.iterdir() if (p / RUN_INFO).is_file()) if root.is_dir() else []


def load_results(
    results_dir: Path,
    checkpoint_labels: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
    responses: bool = False,
) -> pd.DataFrame:
    """All per-sample rows under ``results_dir`` as one DataFrame (``COLUMNS``, plus ``response`` if asked)."""
    frames = []
    for label in checkpoint_labels or checkpoints(results_dir):
        folder = Path(results_dir) / check_label(label)
        for path in sorted(folder.glob("*.jsonl")):
            if benchmarks is not None and path.stem not in benchmarks:
                continue
            rows = read_rows(path)
            if rows:
                frames.append(pd.DataFrame(rows))
    cols = COLUMNS + (["response"] if responses else [])
    if not frames:
        return pd.DataFrame(columns=cols)
    df = pd.concat(frames, ignore_index=True)
    for c in cols:
        if c not in df.columns:
            df[c] = None
    return df[cols].astype({"sample": int, "score": float, "correct": bool, "response_tokens": int})
