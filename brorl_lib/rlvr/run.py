"""One training arm: RL steps until a budget of generated samples, with held-out evaluation, per-step
metrics, and checkpoints it resumes from bit for bit after an interruption."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from brorl_lib.core import atomic
from brorl_lib.core.validation import check_int, check_positive
from brorl_lib.facts.protocol import SamplingParams
from brorl_lib.models import tiny
from brorl_lib.rlvr.sampling import generate
from brorl_lib.rlvr.step import StepSettings, rl_step
from brorl_lib.rlvr.tasks import LaptopInstance, reward

CHECKPOINT = "checkpoint"
TRAINER_STATE = "trainer.pt"  # optimizer and sampling-generator state beside a checkpoint's weights
METRICS = "metrics.csv"
SNAPSHOTS = "snapshots"  # kept copies of a run's checkpoint at fixed steps (weights: not committed)
DONE = "done.json"  # written once the sample budget is spent; a finished arm needs no checkpoint to be read back
KEPT_COUNTS = "kept_counts.npy"  # how often each training prompt was kept, by index (``count_kept``)


@dataclass(frozen=True)
class ArmSettings:
    name: str
    step: StepSettings
    prompts_per_step: int
    lr: float
    sample_budget: int  # stop once this many samples have been generated
    eval_every: int  # steps between held-out evaluations (0: only at eval_budgets and the end)
    checkpoint_every: int  # steps between checkpoints
    seed: int
    eval_budgets: tuple[int, ...] = ()  # also evaluate at the first step whose generated samples reach each

    def __post_init__(self) -> None:
        check_int("prompts_per_step", self.prompts_per_step, low=1)
        check_positive("lr", self.lr)
        check_int("sample_budget", self.sample_budget, low=1)
        check_int("eval_every", self.eval_every, low=0)
        check_int("checkpoint_every", self.checkpoint_every, low=1)
        check_int("seed", self.seed, low=0)
        for b in self.eval_budgets:
            check_int("eval_budgets item", b, low=1, high=self.sample_budget)

    def evaluates(self, step: int, before: int, after: int) -> bool:
        """Whether the step that took the generated samples from ``before`` to ``after`` ends with an evaluation."""
        if after >= self.sample_budget or (self.eval_every and step % self.eval_every == 0):
            return True
        return any(before < b <= after for b in self.eval_budgets)


EVAL_ROWS = 65_536  # responses sampled at once in an evaluation (our bound on its memory)


@torch.no_grad()
def correct_counts(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    instances: list[LaptopInstance],
    samples: int,
    protocol: SamplingParams,
    seed: int,
    greedy: bool = False,
) -> np.ndarray:
    """Per instance, how many of ``samples`` responses earn the binary reward (``greedy``, or the protocol's
    temperature 0: one response each); instances are sampled in chunks of at most EVAL_ROWS responses, from one
    seeded generator."""
    model.eval()
    greedy = greedy or protocol.greedy
    per = 1 if greedy else samples
    chunk = max(1, EVAL_ROWS // per)
    generator = torch.Generator().manual_seed(seed)
    out = []
    for lo in range(0, len(instances), chunk):
        part = instances[lo : lo + chunk]
        r = generate(
            model,
            tokenizer,
            [i.prompt for i in part],
            per,
            protocol.max_tokens,
            protocol.temperature or 1.0,  # temperature 0 is greedy: the argmax, which no temperature changes
            generator,
            top_p=protocol.top_p,
            greedy=greedy,
        )
        hits = np.array([reward(part[g], t) for g, t in zip(r.group.tolist(), r.texts)])
        out.append(hits.reshape(len(part), -1).sum(1).astype(np.int64))
    return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)


def evaluate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    instances: list[LaptopInstance],
    protocol: SamplingParams,
    seed: int,
) -> np.ndarray:
    """Per-instance pass@1: the share of ``protocol.n`` responses that earn the binary reward."""
    return correct_counts(model, tokenizer, instances, protocol.n, protocol, seed) / protocol.n


def standard_error(per_instance: np.ndarray) -> float:
    """Standard error of the mean held-out pass@1 over instances."""
    return float(per_instance.std(ddof=1) / np.sqrt(per_instance.size)) if per_instance.size > 1 else float("nan")


Scorer = Callable[[PreTrainedModel, PreTrainedTokenizerFast, list[LaptopInstance], int], np.ndarray]


def _held_out(
    policy, tokenizer, test, validation, protocol: SamplingParams, seed: int, out_dir: Path, step: int, scorer=None
) -> dict:
    """Evaluate the held-out (and validation) instances, save the per-instance values, return the row's columns.
    ``scorer(model, tokenizer, instances, seed)`` replaces the sampled pass@1 (e.g. exact q at the protocol's
    temperature and top-p)."""
    scorer = scorer or (lambda m, t, items, s: evaluate(m, t, items, protocol, s))
    held = scorer(policy, tokenizer, test, seed)
    np.save(out_dir / f"pass1_step{step}.npy", held)
    out = {"pass1": float(held.mean()), "pass1_se": standard_error(held)}
    if validation:
        val = scorer(policy, tokenizer, validation, seed + 1)  # draws apart from the test set's
        np.save(out_dir / f"val_step{step}.npy", val)
        out["val_pass1"] = float(val.mean())
    return out


def save_array(path: Path, array: np.ndarray) -> None:
    """One array as a .npy file, written atomically."""
    buffer = io.BytesIO()
    np.save(buffer, array)
    atomic.write_bytes(path, buffer.getvalue())


def _save_checkpoint(folder: Path, model, tokenizer, optimizer, generator, state: dict, kept_counts=None) -> None:
    """Written as a whole and swapped in: an interruption never leaves a half checkpoint."""

    def fill(tmp: Path) -> None:
        tiny.save(model, tokenizer, tmp)
        trainer = {"optimizer": optimizer.state_dict(), "generator": generator.get_state()}
        if kept_counts is not None and kept_counts.any():
            trainer["kept_counts"] = kept_counts
        torch.save(trainer, tmp / TRAINER_STATE)
        atomic.write_text(tmp / "state.json", json.dumps(state, indent=2))  # last: marks the copy complete

    atomic.write_folder(folder, fill)


def recover_checkpoint(folder: Path) -> None:
    """Finish a checkpoint swap that an interruption cut short: the new copy (complete once its state.json
    exists, which is written last) or else the previous one takes the checkpoint's place."""
    if (folder / "state.json").exists():
        return
    for candidate in (
        folder.with_name(folder.name + atomic.TMP_SUFFIX),
        folder.with_name(folder.name + atomic.OLD_SUFFIX),
    ):
        if (candidate / "state.json").exists():
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(candidate, folder)
            return


TENSORBOARD = "tensorboard"  # event files beside metrics.csv (not committed: they carry wall-clock times)


def log_scalars(writer, row: dict) -> None:
    """One step's numeric metrics as TensorBoard scalars (``tensorboard --logdir <run folder>/tensorboard``)."""
    for key, value in row.items():
        if key != "step" and isinstance(value, (int, float)) and np.isfinite(value):
            writer.add_scalar(key, value, row["step"])


def run_arm(
    start: Path,
    train: list[LaptopInstance],
    test: list[LaptopInstance],
    settings: ArmSettings,
    out_dir: Path,
    protocol: SamplingParams,
    max_steps: int | None = None,
    progress: bool = True,
    device: str = "cpu",
    validation: list[LaptopInstance] | None = None,
    scorer: Scorer | None = None,
    keep_every: int = 0,
    count_kept: bool = False,
    log_kl: bool = True,
) -> pd.DataFrame:
    """Train from the checkpoint at ``start`` (or resume from ``out_dir``); returns every step's metrics.

    A ``start`` that carries optimizer state (a phase-1 checkpoint) continues it, at this arm's learning rate;
    a warm start begins with a fresh AdamW. ``max_steps`` stops early (as an interruption would); calling again
    resumes where it stopped. Held-out pass@1 (and its standard error over instances) is measured at step 0,
    every ``eval_every`` steps, at each of ``eval_budgets`` and at the end; the per-instance values are saved as
    ``pass1_step<k>.npy``, and those of the ``validation`` instances (if any) as ``val_step<k>.npy``
    (``scorer``: how; default the protocol's sampled pass@1). ``keep_every`` > 0 also keeps a copy of the
    checkpoint every that many steps, as ``snapshots/step<k>/``. ``count_kept`` counts how often each training
    prompt's group was kept (trained on), saved as ``kept_counts.npy`` (by index into ``train``) when done.
    ``log_kl`` logs each step's KL to the start checkpoint (``kl_ref_all``, ``kl_ref``; it needs the start's
    weights).
    """
    out_dir = Path(out_dir)
    if (out_dir / DONE).exists():
        return pd.read_csv(out_dir / METRICS)
    ckpt = out_dir / CHECKPOINT
    recover_checkpoint(ckpt)
    resume = (ckpt / "state.json").exists()
    policy, tokenizer = tiny.load(ckpt if resume else start, device)
    # the KL term's anchor (kl_coef > 0) and the logged kl_ref: the start's weights (a warm start's are not kept)
    reference = tiny.load(start, device)[0].eval() if settings.step.kl_coef > 0 or log_kl else None
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.lr)
    generator = torch.Generator().manual_seed(settings.seed)
    rows: list[dict] = []
    kept_counts = np.zeros(len(train), dtype=np.int64)
    index_of = {inst.prompt: k for k, inst in enumerate(train)} if count_kept else {}
    state = {"step": 0, "samples": 0, "settings": asdict(settings) | {"step": asdict(settings.step)}}
    if resume:
        saved = torch.load(ckpt / TRAINER_STATE, weights_only=False)
        optimizer.load_state_dict(saved["optimizer"])
        generator.set_state(saved["generator"])
        if count_kept:
            kept_counts = saved.get("kept_counts", kept_counts)
        state = json.loads((ckpt / "state.json").read_text())
        rows = pd.read_csv(out_dir / METRICS).to_dict("records")[: state["step"] + 1]
    else:
        if (Path(start) / TRAINER_STATE).exists():  # continue the starting checkpoint's AdamW moments
            optimizer.load_state_dict(torch.load(Path(start) / TRAINER_STATE, weights_only=False)["optimizer"])
            for group in optimizer.param_groups:
                group["lr"] = settings.lr
        out_dir.mkdir(parents=True, exist_ok=True)
        rows.append(
            {
                "step": 0,
                "samples": 0,
                "kept_samples": 0,
                "surplus_groups": 0,
                "rounds": 0,
                "capped": 0,
                "tokens": 0,
                "elapsed_s": 0.0,
                "generation_s": 0.0,
                "reward_mean": np.nan,
                "pass_rate": np.nan,
                "grad_norm": np.nan,
                "updates": 0,
                **_held_out(policy, tokenizer, test, validation, protocol, settings.seed, out_dir, 0, scorer),
            }
        )
    bar = tqdm(
        total=settings.sample_budget, initial=state["samples"], desc=settings.name, disable=not progress, unit="samples"
    )
    stop_at = None if max_steps is None else state["step"] + max_steps

    def draw(k: int) -> list[LaptopInstance]:
        return [train[i] for i in torch.randint(len(train), (k,), generator=generator).tolist()]

    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(out_dir / TENSORBOARD))  # one event file per call (a resumed run adds one)
    while state["samples"] < settings.sample_budget and (stop_at is None or state["step"] < stop_at):
        m = rl_step(policy, tokenizer, optimizer, draw, settings.prompts_per_step, settings.step, generator, reference)
        before = state["samples"]
        for prompt in m["kept_prompts"] if count_kept else ():
            kept_counts[index_of[prompt]] += 1
        state["step"] += 1
        state["samples"] += m["samples"]
        row = {
            "step": state["step"],
            "samples": state["samples"],
            "kept_samples": m["kept_samples"],
            "surplus_groups": m["surplus_groups"],
            "rounds": m["rounds"],
            "capped": m["capped"],
            "tokens": rows[-1]["tokens"] + m["tokens"],
            "elapsed_s": rows[-1]["elapsed_s"] + m["step_s"],
            "generation_s": m["generation_s"],
            "reward_mean": m["reward_mean"],
            "pass_rate": m["pass_rate"],
            "grad_norm": m["grad_norm"],
            "updates": m["updates"],
            "entropy": m["entropy"],
            "entropy_kept": m["entropy_kept"],
            "kl_ref_all": m["kl_ref_all"],
            "kl_ref": m["kl_ref"],
            "pass1": np.nan,
            "pass1_se": np.nan,
        }
        if validation:
            row["val_pass1"] = np.nan
        done = state["samples"] >= settings.sample_budget
        if settings.evaluates(state["step"], before, state["samples"]):
            row |= _held_out(
                policy, tokenizer, test, validation, protocol, settings.seed, out_dir, state["step"], scorer
            )
        rows.append(row)
        log_scalars(writer, row)
        bar.update(m["samples"])
        if state["step"] % settings.checkpoint_every == 0 or done or not np.isnan(row["pass1"]):
            atomic.write_text(out_dir / METRICS, pd.DataFrame(rows).to_csv(index=False, lineterminator="\n"))
            _save_checkpoint(ckpt, policy, tokenizer, optimizer, generator, state, kept_counts)
        if keep_every and state["step"] % keep_every == 0:
            snapshot = out_dir / SNAPSHOTS / f"step{state['step']}"
            if not snapshot.exists():
                _save_checkpoint(snapshot, policy, tokenizer, optimizer, generator, state, kept_counts)
    bar.close()
    writer.close()
    if state["samples"] >= settings.sample_budget:
        if count_kept:
            save_array(out_dir / KEPT_COUNTS, kept_counts)
        atomic.write_text(out_dir / DONE, json.dumps({"step": state["step"], "samples": state["samples"]}))
    return pd.DataFrame(rows)
