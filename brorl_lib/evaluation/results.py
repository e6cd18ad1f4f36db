"""Per-instance results on disk: one JSON line per sample, appended as an evaluation goes.

Layout: ``<results_dir>/<checkpoint>/<benchmark>.jsonl`` and ``<results_dir>/<checkpoint>/run.json``
(the settings, and per benchmark its instances' fingerprint and whether it is complete: ``run.py``).
A row holds ``checkpoint, benchmark, domain, task, instance_id, sample, score, correct,
response_tokens, finish_reason`` and, unless switched off, ``response``. All samples of an instance
are appended together and flushed to disk, so an interrupted evaluation leaves whole instances plus
at most one cut line, which ``repair`` drops before a resumed run continues.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
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


def read_rows(path: Path) -> list[dict]:
    """Rows of one results file; a cut (unparseable) line is skipped."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def finished_instances(rows: Iterable[dict], samples: int) -> set[str]:
    """Instance ids with every sample index 0..samples-1 present."""
    seen: dict[str, set[int]] = {}
    for r in rows:
        seen.setdefault(r["instance_id"], set()).add(int(r["sample"]))
    want = set(range(samples))
    return {iid for iid, got in seen.items() if want <= got}


def repair(path: Path, samples: int) -> set[str]:
    """Keep only whole instances (and one row per sample) in ``path``; returns their ids."""
    rows = read_rows(path)
    done = finished_instances(rows, samples)
    kept, seen = [], set()
    for r in rows:
        key = (r["instance_id"], int(r["sample"]))
        if r["instance_id"] in done and int(r["sample"]) < samples and key not in seen:
            seen.add(key)
            kept.append(r)
    if path.exists() and len(kept) != len(path.read_text(encoding="utf-8").splitlines()):
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
    path = Path(results_dir) / check_label(checkpoint) / RUN_INFO
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


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
