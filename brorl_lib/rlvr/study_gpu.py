"""The countdown study's update-quality grid as an extra row set on a GPU, at a larger model than the CPU study.

The settings are notebook 04's under the gpu profile (``params/gpu/``: the paper profile with one larger
countdown model and device cuda), with ``phase1_max_steps`` lowered where the GPU's time is short. One call runs
screen -> plateau_stage -> update_quality_stage into its root and writes ``record.json`` there (card, versions,
candidate, the model's parameter count, wall seconds per stage), rewritten after each stage so a cut run still
says what finished. ``workers`` > 1 measures the grid's checkpoints in that many processes at once (one checkpoint
each, its own CSV; the rows do not depend on it: every update is seeded by its repetition)::

    python -m brorl_lib.rlvr.study_gpu --root data/runs/laptop_rlvr_countdown_gpu_rows [--phase1-max-steps K]
        [--workers W] [--device cuda] [--profile gpu]

Notebook 04 shows a finished row set beside the CPU rows (its ``gpu_rows_dir``). ``--profile quick --device cpu``
runs the same path in seconds (a dry run of the device command).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from brorl_lib.core import atomic
from brorl_lib.core.profiles import plan_run
from brorl_lib.core.registry import get_notebook
from brorl_lib.core.validation import check_int
from brorl_lib.rlvr import study
from brorl_lib.rlvr.study_config import CountdownStudyConfig

RECORD = "record.json"
NOTEBOOK, PROFILE = "04_laptop_rlvr", "gpu"


def settings(
    device: str = "cuda", profile: str = PROFILE, parameters: dict | None = None
) -> tuple[study.StudySettings, study.UpdateQualitySettings]:
    """Notebook 04's study and update-quality settings under ``profile`` on ``device``, with ``parameters`` (notebook
    04's, e.g. a lower ``phase1_max_steps``) replacing the profile's; checked: a bad argument is a ValueError naming
    it before any work."""
    plan = plan_run(get_notebook(NOTEBOOK), profile, {**(parameters or {}), "device": device})
    cfg = CountdownStudyConfig(**{**CountdownStudyConfig.defaults(), **plan.parameters})
    s, q = cfg.study(), cfg.quality()
    if len(s.candidates) != 1:
        raise ValueError(f"profile={profile!r} is not allowed: its candidates must be one model (the row set's)")
    if s.screen_max_steps > s.phase1_max_steps:
        raise ValueError(
            f"phase1_max_steps={s.phase1_max_steps} is not allowed: the screen alone runs "
            f"screen_max_steps={s.screen_max_steps} steps; give at least that"
        )
    if s.phase1_max_steps < 3 * s.snapshot_every:
        raise ValueError(
            f"phase1_max_steps={s.phase1_max_steps} is not allowed with snapshot_every={s.snapshot_every}: the "
            "grid needs an early and a mid snapshot before the last checkpoint (at least 3 x snapshot_every)"
        )
    return s, q


def card(device: str) -> str:
    return torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"


def _one_checkpoint(job) -> tuple[str, float]:
    """A worker process: the grid at one checkpoint (its own CSV under update_quality/)."""
    s, q, root, threads = job
    torch.set_num_threads(threads)
    t0 = time.perf_counter()
    study.update_quality_stage(s, q, root, progress=False)
    return q.stages[0], round(time.perf_counter() - t0, 3)


def _quality(s, q, root: Path, workers: int, progress: bool, record: dict):
    if workers > 1:  # one process per checkpoint (spawned: CUDA cannot be forked), then the rows read back
        jobs = [
            (s, replace(q, stages=(stage,)), root, max(1, torch.get_num_threads() // workers)) for stage in q.stages
        ]
        with multiprocessing.get_context("spawn").Pool(min(workers, len(jobs))) as pool:
            record["update_quality_checkpoint_seconds"] = dict(pool.map(_one_checkpoint, jobs, chunksize=1))
    return study.update_quality_stage(s, q, root, progress=progress and workers == 1)


def run(
    root: Path | str,
    device: str = "cuda",
    profile: str = PROFILE,
    parameters: dict | None = None,
    workers: int = 1,
    progress: bool = True,
) -> dict:
    """screen -> plateau_stage -> update_quality_stage into ``root``; returns (and saves) record.json."""
    s, q = settings(device, profile, parameters)
    check_int("workers", workers, low=1, high=len(q.stages))
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    c = s.candidates[0]
    record = {
        "card": card(device),
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": __import__("transformers").__version__,
        "profile": profile,
        "candidate": c.spec,
        "candidate_key": c.key,
        "model_params": c.model_params,
        "parameters": dict(parameters or {}),
        "phase1_max_steps": s.phase1_max_steps,
        "workers": workers,
        "settings": json.loads(json.dumps(asdict(s) | {"quality": asdict(q)})),
        "stage_seconds": {},
        "finished": [],
    }

    def stage(name: str, work):
        print(f"[study_gpu] {name} ...", flush=True)
        t0 = time.perf_counter()
        out = work()
        record["stage_seconds"][name] = round(time.perf_counter() - t0, 3)
        record["finished"].append(name)
        atomic.write_text(root / RECORD, json.dumps(record, indent=2))
        print(f"[study_gpu] {name} done in {record['stage_seconds'][name]:.1f} s", flush=True)
        return out

    atomic.write_text(root / RECORD, json.dumps(record, indent=2))
    stage("screen", lambda: study.screen(s, root, progress))
    ended = stage("plateau", lambda: study.plateau_stage(s, root, progress))
    record["plateau"] = {k: ended[k] for k in ("step", "plateau_reached", "pass1", "mean_q", "low_q_share_exact")}
    record["checkpoints"] = list(study.quality_checkpoints(s, root))
    raw = stage("update_quality", lambda: _quality(s, q, root, workers, progress, record))
    record["update_quality_rows"] = len(raw)
    record["update_quality_units"] = len(raw.groupby(["checkpoint", "n_rollouts", "samples_per_update", "rep"]))
    atomic.write_text(root / RECORD, json.dumps(record, indent=2))
    return record


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="results folder (checkpoints are written there too)")
    parser.add_argument("--device", default="cuda", help="'cuda' or 'cpu'")
    parser.add_argument("--profile", default=PROFILE, help=f"notebook 04's profile (default {PROFILE})")
    parser.add_argument("--phase1-max-steps", default=None, help="phase-1 step cap (default: the profile's)")
    parser.add_argument("--workers", default="1", help="processes measuring the grid's checkpoints at once (1-3)")
    parser.add_argument("--progress", action="store_true", help="progress bars")
    args = parser.parse_args(argv)
    numbers = {}
    for name, text in (("phase1_max_steps", args.phase1_max_steps), ("workers", args.workers)):
        if text is not None:
            try:
                numbers[name] = int(text)
            except ValueError:
                raise ValueError(f"{name}={text!r} is not allowed: expected an integer") from None
    workers = numbers.pop("workers", 1)
    record = run(args.root, args.device, args.profile, numbers, workers, args.progress)
    print(json.dumps({k: v for k, v in record.items() if k != "settings"}, indent=2), flush=True)
    return record


if __name__ == "__main__":
    main()
