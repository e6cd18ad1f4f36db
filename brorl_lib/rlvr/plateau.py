"""From a warm start to a plateau, and what the plateau looks like.

Phase 1 trains ProRL (N=16) in chunks of ``eval_every`` steps. It ends when held-out pass@1, smoothed over
``window`` evaluations, stops rising: per instance, the mean over the last ``window`` evaluations against the
mean over the ``window`` before them, a one-sided paired t-test across instances of a rise above ``min_rise``
(the two windows share no evaluation, so the test is sound). At the plateau checkpoint ``regime`` measures
what the paper's argument needs: held-out pass@1, the share of training prompts whose correct mass q lies in
(0, 1/16) (prompts a group of 16 rarely samples right and a group of 512 usually does), and Theorem 1's share
of negative changes of the correct mass at N=16 on the model's own responses.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from brorl_lib.core import atomic, stats
from brorl_lib.rlvr import mass_balance, warm_start
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr.run import CHECKPOINT, ArmSettings, EvalProtocol, correct_counts, recover_checkpoint, run_arm
from brorl_lib.rlvr.tasks import LaptopInstance
from brorl_lib.rlvr.tokenizer import build_tokenizer

PLATEAU, PLATEAU_EVAL = "plateau.json", "plateau_eval.npz"
WARM_START_BATCH = 32  # supervised examples per warm-start step (our choice)
LOW_Q = 1 / 16  # the low-q band's upper edge: below it a group of 16 holds a correct response less than 64% of the time


@dataclass(frozen=True)
class PlateauRule:
    window: int  # evaluations per smoothing window (two windows are compared)
    alpha: float  # plateau once the rise is not significant at this one-sided level
    min_rise: float  # a rise of the smoothed pass@1 smaller than this counts as flat (our choice)


def warm_start_model(
    shape: tiny.TinyModelShape,
    train: list[LaptopInstance],
    steps: int,
    lr: float,
    seed: int,
    folder: Path,
    device: str = "cpu",
    progress: bool = False,
) -> Path:
    """Supervised warm start, saved once (skipped when already there) and atomically."""
    if not (folder / "model.safetensors").exists():  # weights are not committed: a clone trains it again, same bytes
        tok = build_tokenizer()
        model = tiny.build_model(shape, tok, seed).to(device)
        losses = warm_start.train_sft(model, tok, train, steps, WARM_START_BATCH, lr, seed, progress)

        def fill(tmp: Path) -> None:
            tiny.save(model, tok, tmp)
            (tmp / "warm_start_losses.json").write_text(json.dumps(losses))

        atomic.write_folder(folder, fill)
    return folder


def pass1_files(folder: Path, prefix: str = "pass1") -> list[tuple[int, Path]]:
    """(step, file) of every held-out (``prefix='val'``: validation) evaluation saved in an arm folder, by step."""
    files = Path(folder).glob(f"{prefix}_step*.npy")
    return sorted((int(p.stem.removeprefix(f"{prefix}_step")), p) for p in files)


def smoothed_rise(folder: Path, rule: PlateauRule, upto: int | None = None) -> dict | None:
    """The plateau test on the evaluations saved so far (``upto``: those of steps up to it); None until there are
    two windows of them. A series exactly flat on every instance (no variance to test) is a plateau."""
    files = [(k, p) for k, p in pass1_files(folder) if upto is None or k <= upto]
    if len(files) < 2 * rule.window:
        return None
    last = np.mean([np.load(p) for _, p in files[-rule.window :]], axis=0)
    before = np.mean([np.load(p) for _, p in files[-2 * rule.window : -rule.window]], axis=0)
    test = stats.paired_test(last - rule.min_rise, before, "greater")
    rise = last - before
    return {
        "step": files[-1][0],
        "smoothed_pass1": float(last.mean()),
        "rise": float(rise.mean()),
        "rise_se": float(rise.std(ddof=1) / np.sqrt(rise.size)),
        "p_rising": test["p"],
        "plateau": not test["p"] <= rule.alpha,  # p is NaN when every difference is exactly 0
    }


def phase1(
    start: Path,
    train: list[LaptopInstance],
    test: list[LaptopInstance],
    arm: ArmSettings,
    folder: Path,
    protocol: EvalProtocol,
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
        if record["plateau"] or record["step"] >= max_steps:
            return record
        record_path.unlink()  # capped earlier (the screen's short phase 1): train on
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
            record = {"step": done, "cap": max_steps, **(test_result or {"plateau": False})}
            atomic.write_text(record_path, json.dumps(record, indent=2))
            return record
        chunk = min(arm.eval_every, max_steps - done)
        run_arm(start, train, test, arm, folder, protocol, chunk, False, device, scorer=scorer, keep_every=keep_every)


def low_q_share(
    model,
    tok,
    train: list[LaptopInstance],
    prompts: int,
    samples: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
) -> dict:
    """Correct mass q of ``prompts`` training prompts (seeded choice), estimated from ``samples`` draws at the
    rollout temperature: the shares of prompts with q = 0, 0 < q < 1/16, and q = 1."""
    rng = np.random.default_rng(seed)
    picks = rng.choice(len(train), size=min(prompts, len(train)), replace=False)
    protocol = EvalProtocol(samples, temperature, 1.0, max_new_tokens)
    q = correct_counts(model, tok, [train[i] for i in sorted(picks)], samples, protocol, seed) / samples
    return {
        "q_zero_share": float((q == 0).mean()),
        "low_q_share": float(((q > 0) & (q < LOW_Q)).mean()),
        "q_one_share": float((q == 1).mean()),
        "mean_q": float(q.mean()),
    }


def regime(
    folder: Path,
    train: list[LaptopInstance],
    q_prompts: int,
    q_samples: int,
    theory: mass_balance.MassBalanceSettings,
    device: str = "cpu",
    batches=None,
) -> dict:
    """What the paper's argument needs, at the checkpoint in ``folder``: held-out pass@1 (its last evaluation),
    the low-q share of training prompts, and Theorem 1's share of negative changes at each of ``theory.rollouts``.
    Saved as regime_step<k>.json and read back when called again at the same checkpoint."""
    step = json.loads((folder / CHECKPOINT / "state.json").read_text())["step"]
    path = folder / f"regime_step{step}.json"
    if path.exists():
        return json.loads(path.read_text())
    model, tok = tiny.load(folder / CHECKPOINT, device)
    model.eval()
    held = np.load(pass1_files(folder)[-1][1])
    q = low_q_share(model, tok, train, q_prompts, q_samples, theory.temperature, theory.max_new_tokens, theory.seed)
    if batches is None:  # else Theorem 1's batches at this checkpoint, already computed with ``theory``
        _, batches = mass_balance.analyse(model, tok, train, theory)
    negative = mass_balance.summary(batches).set_index("N")["share_negative"]
    record = {
        "step": step,
        "pass1": float(held.mean()),
        "pass1_se": float(held.std(ddof=1) / np.sqrt(held.size)),
        **q,
        **{f"share_negative_n{n}": float(v) for n, v in negative.items()},
    }
    atomic.write_text(path, json.dumps(record, indent=2))
    return record


def plateau_counts(
    folder: Path, test: list[LaptopInstance], samples: int, protocol: EvalProtocol, seed: int, device: str = "cpu"
) -> np.ndarray:
    """Correct responses out of ``samples`` per held-out instance at the plateau checkpoint (the evaluation's
    temperature and top-p): the plateau's pass@1 bands and pass@k. Saved once as plateau_eval.npz."""
    path = folder / PLATEAU_EVAL
    if not path.exists():
        model, tok = tiny.load(folder / CHECKPOINT, device)
        counts = correct_counts(model, tok, test, samples, protocol, seed)
        buffer = io.BytesIO()
        np.savez(buffer, counts=counts, samples=np.int64(samples))
        atomic.write_bytes(path, buffer.getvalue())
    data = np.load(path)
    if int(data["samples"]) != samples:
        raise ValueError(f"{path} holds counts of {int(data['samples'])} samples, not passk_samples={samples}")
    return data["counts"]
