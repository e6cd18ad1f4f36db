"""From a warm start to a plateau.

Phase 1 trains ProRL (N=16) in chunks of ``eval_every`` steps. It ends when held-out pass@1, smoothed over
``window`` evaluations, is shown flat: per instance, the mean over the last ``window`` evaluations minus the mean
over the ``window`` before them (the rise; the two windows share no evaluation); the plateau is declared when the
one-sided upper ``1 - alpha`` bound of the mean rise across instances (Student t) is below ``min_rise``, over
all held-out instances and within every band of pass@1 (each instance banded by its mean over both windows, so
that no band is chosen by one window's noise). The burden is on flatness: a rise that cannot be told from zero
is not a plateau until its upper bound is small (an equivalence, not a significance, test). What the plateau
looks like (the regime the paper's argument needs, and its gates) is measured by ``study.regime``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import stats
from tqdm.auto import tqdm

from brorl_lib.core import atomic
from brorl_lib.facts.protocol import SamplingParams
from brorl_lib.models import tiny
from brorl_lib.models.char_tokenizer import build_tokenizer
from brorl_lib.rlvr import warm_start
from brorl_lib.rlvr.run import CHECKPOINT, ArmSettings, recover_checkpoint, run_arm
from brorl_lib.rlvr.tasks import LaptopInstance

PLATEAU = "plateau.json"
WARM_START_BATCH = 32  # supervised examples per warm-start step (our choice)


@dataclass(frozen=True)
class PlateauRule:
    window: int  # evaluations per smoothing window (two windows are compared)
    alpha: float  # one-sided level of the upper bound on the rise (0.05: a 95% bound)
    min_rise: float  # flat: the upper bound of the rise per window is below this (our choice)
    bands: tuple[float, ...] = (0.0, 1.0)  # edges of the pass@1 bands each checked on its own, increasing


def warm_start_model(shape: tiny.TinyModelShape, train: list[LaptopInstance], steps: int, lr: float, seed: int,
                     folder: Path, device: str = "cpu", progress: bool = False) -> Path:  # fmt: skip
    """Supervised warm start, saved once (skipped when already there) and atomically."""
    if not (folder / "model.safetensors").exists():  # weights are not committed: a clone trains it again, same bytes
        tok = build_tokenizer()
        model = tiny.build_model(shape, tok, seed).to(device)
        losses = tiny.train_sft(
            model, len(train), warm_start.batches(tok, train), steps, WARM_START_BATCH, lr, seed, progress
        )

        def fill(tmp: Path) -> None:
            tiny.save(model, tok, tmp)
            (tmp / "warm_start_losses.json").write_text(json.dumps(losses))

        atomic.write_folder(folder, fill)
    return folder


def pass1_files(folder: Path, prefix: str = "pass1") -> list[tuple[int, Path]]:
    """(step, file) of every held-out (``prefix='val'``: validation) evaluation saved in an arm folder, by step."""
    files = Path(folder).glob(f"{prefix}_step*.npy")
    return sorted((int(p.stem.removeprefix(f"{prefix}_step")), p) for p in files)


def rule_record(rule: PlateauRule) -> dict:
    """The rule as its JSON record stores it (a record judged by another rule is judged again)."""
    return json.loads(json.dumps(asdict(rule)))


def rise_bound(rise: np.ndarray, alpha: float) -> dict:
    """Mean rise across instances, its standard error and one-sided upper ``1 - alpha`` Student-t bound (the
    mean itself when every rise is equal: nothing to test)."""
    n = rise.size
    se = float(rise.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    upper = float(rise.mean()) + (float(stats.t.ppf(1 - alpha, n - 1)) * se if se > 0 else 0.0)
    return {"prompts": int(n), "rise": float(rise.mean()), "rise_se": se, "rise_upper": upper}


def smoothed_rise(folder: Path, rule: PlateauRule, upto: int | None = None) -> dict | None:
    """The plateau test on the evaluations saved so far (``upto``: those of steps up to it); None until there are
    two windows of them. ``bands``: the test within each pass@1 band (a band of fewer than two instances has no
    bound and does not decide)."""
    files = [(k, p) for k, p in pass1_files(folder) if upto is None or k <= upto]
    if len(files) < 2 * rule.window:
        return None
    last = np.mean([np.load(p) for _, p in files[-rule.window :]], axis=0)
    before = np.mean([np.load(p) for _, p in files[-2 * rule.window : -rule.window]], axis=0)
    rise = last - before
    overall = rise_bound(rise, rule.alpha)
    from brorl_lib.rlvr import update_quality as uq

    band = uq.band_of((last + before) / 2, list(rule.bands))
    bands = []
    for k, label in enumerate(uq.band_labels(list(rule.bands))):
        b = rise_bound(rise[band == k], rule.alpha) if (band == k).any() else {"prompts": 0}
        b["flat"] = bool(b["prompts"] < 2 or b["rise_upper"] < rule.min_rise)
        bands.append({"band": label} | b)
    return {
        "step": files[-1][0],
        "smoothed_pass1": float(last.mean()),
        **{k: v for k, v in overall.items() if k != "prompts"},
        "plateau": bool(overall["rise_upper"] < rule.min_rise and all(b["flat"] for b in bands)),
        "bands": bands,
    }


def phase1(
    start: Path,
    train: list[LaptopInstance],
    test: list[LaptopInstance],
    arm: ArmSettings,
    folder: Path,
    protocol: SamplingParams,
    rule: PlateauRule,
    max_steps: int,
    device: str = "cpu",
    progress: bool = False,
    scorer=None,
    keep_every: int = 0,
) -> dict:
    """ProRL in chunks of ``arm.eval_every`` steps until the plateau test holds or ``max_steps``; returns (and
    saves) how it ended. A phase 1 that stopped at a lower step cap continues when called with a higher one."""
    record_path = folder / PLATEAU
    if record_path.exists():
        record = json.loads(record_path.read_text())
        if record.get("rule") == rule_record(rule) and (record["plateau"] or record["step"] >= max_steps):
            return record
        record_path.unlink()  # capped earlier (the screen's short phase 1) or judged by another rule: test again
    bar = tqdm(total=max_steps, desc=arm.name, disable=not progress, unit="steps")  # its sample budget is unbounded
    while True:
        # test before training: a phase 1 cut after its last chunk but before its record must not train past it
        recover_checkpoint(folder / CHECKPOINT)
        state = folder / CHECKPOINT / "state.json"
        done = json.loads(state.read_text())["step"] if state.exists() else 0
        bar.update(done - bar.n)
        test_result = smoothed_rise(folder, rule, upto=done)
        if test_result:
            bar.set_postfix(pass1=f"{test_result['smoothed_pass1']:.3f}", rise=f"{test_result['rise']:+.4f}")
        if (test_result and test_result["plateau"]) or done >= max_steps:
            bar.close()
            record = {"step": done, "cap": max_steps, **(test_result or {"plateau": False}), "rule": rule_record(rule)}
            atomic.write_text(record_path, json.dumps(record, indent=2))
            return record
        chunk = min(arm.eval_every, max_steps - done)
        run_arm(start, train, test, arm, folder, protocol, chunk, False, device, scorer=scorer, keep_every=keep_every,
                log_kl=False)  # fmt: skip
