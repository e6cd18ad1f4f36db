"""One training arm: RL steps until a budget of generated samples, with held-out evaluation, per-step
metrics, and checkpoints it resumes from bit for bit after an interruption."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from brorl_lib.core import atomic
from brorl_lib.core.validation import check_int, check_positive, check_range
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr.sampling import generate
from brorl_lib.rlvr.step import StepSettings, rl_step
from brorl_lib.rlvr.tasks import LaptopInstance, reward

CHECKPOINT = "checkpoint"
TRAINER_STATE = "trainer.pt"  # optimizer and sampling-generator state beside a checkpoint's weights
METRICS = "metrics.csv"
DONE = "done.json"  # written once the sample budget is spent; a finished arm needs no checkpoint to be read back


@dataclass(frozen=True)
class EvalProtocol:
    """How held-out pass@1 is measured: ``samples`` responses per instance at ``temperature`` and ``top_p``
    (the paper's Appendix D protocol: 16 samples, T = 0.6, top-p 0.95), binary reward."""

    samples: int
    temperature: float
    top_p: float
    max_new_tokens: int

    def __post_init__(self) -> None:
        check_int("eval_samples", self.samples, low=1)
        check_positive("eval_temperature", self.temperature)
        check_positive("eval_top_p", self.top_p)
        check_range("eval_top_p", self.top_p, high=1.0)
        check_int("max_new_tokens", self.max_new_tokens, low=1)


@dataclass(frozen=True)
class ArmSettings:
    name: str
    step: StepSettings
    prompts_per_step: int
    lr: float
    sample_budget: int  # stop once this many samples have been generated
    eval_every: int  # steps between held-out evaluations
    checkpoint_every: int  # steps between checkpoints
    seed: int

    def __post_init__(self) -> None:
        check_int("prompts_per_step", self.prompts_per_step, low=1)
        check_positive("lr", self.lr)
        check_int("sample_budget", self.sample_budget, low=1)
        check_int("eval_every", self.eval_every, low=1)
        check_int("checkpoint_every", self.checkpoint_every, low=1)
        check_int("seed", self.seed, low=0)


@torch.no_grad()
def correct_counts(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    instances: list[LaptopInstance],
    samples: int,
    protocol: EvalProtocol,
    seed: int,
    greedy: bool = False,
) -> np.ndarray:
    """Per instance, how many of ``samples`` responses earn the binary reward (``greedy``: one response each)."""
    model.eval()
    r = generate(
        model,
        tokenizer,
        [i.prompt for i in instances],
        1 if greedy else samples,
        protocol.max_new_tokens,
        protocol.temperature,
        torch.Generator().manual_seed(seed),
        top_p=protocol.top_p,
        greedy=greedy,
    )
    hits = np.array([reward(instances[g], t) for g, t in zip(r.group.tolist(), r.texts)])
    return hits.reshape(len(instances), -1).sum(1).astype(np.int64)


def evaluate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    instances: list[LaptopInstance],
    protocol: EvalProtocol,
    seed: int,
) -> np.ndarray:
    """Per-instance pass@1: the share of ``protocol.samples`` responses that earn the binary reward."""
    return correct_counts(model, tokenizer, instances, protocol.samples, protocol, seed) / protocol.samples


def standard_error(per_instance: np.ndarray) -> float:
    """Standard error of the mean held-out pass@1 over instances."""
    return float(per_instance.std(ddof=1) / np.sqrt(per_instance.size)) if per_instance.size > 1 else float("nan")


def _save_checkpoint(folder: Path, model, tokenizer, optimizer, generator: torch.Generator, state: dict) -> None:
    """Written as a whole and swapped in: an interruption never leaves a half checkpoint."""

    def fill(tmp: Path) -> None:
        tiny.save(model, tokenizer, tmp)
        torch.save({"optimizer": optimizer.state_dict(), "generator": generator.get_state()}, tmp / TRAINER_STATE)
        atomic.write_text(tmp / "state.json", json.dumps(state, indent=2))  # last: marks the copy complete

    atomic.write_folder(folder, fill)


def _recover_checkpoint(folder: Path) -> None:
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


def run_arm(
    start: Path,
    train: list[LaptopInstance],
    test: list[LaptopInstance],
    settings: ArmSettings,
    out_dir: Path,
    protocol: EvalProtocol,
    max_steps: int | None = None,
    progress: bool = True,
    device: str = "cpu",
) -> pd.DataFrame:
    """Train from the checkpoint at ``start`` (or resume from ``out_dir``); returns every step's metrics.

    A ``start`` that carries optimizer state (a phase-1 checkpoint) continues it, at this arm's learning rate;
    a warm start begins with a fresh AdamW. ``max_steps`` stops early (as an interruption would); calling again
    resumes where it stopped. Held-out pass@1 (and its standard error over instances) is measured at step 0,
    every ``eval_every`` steps and at the end; the per-instance values are saved as ``pass1_step<k>.npy``.
    """
    out_dir = Path(out_dir)
    if (out_dir / DONE).exists():
        return pd.read_csv(out_dir / METRICS)
    ckpt = out_dir / CHECKPOINT
    _recover_checkpoint(ckpt)
    resume = (ckpt / "state.json").exists()
    policy, tokenizer = tiny.load(ckpt if resume else start, device)
    reference = tiny.load(start, device)[0].eval() if settings.step.kl_coef > 0 else None
    optimizer = torch.optim.AdamW(policy.parameters(), lr=settings.lr)
    generator = torch.Generator().manual_seed(settings.seed)
    rows: list[dict] = []
    state = {"step": 0, "samples": 0, "settings": asdict(settings) | {"step": asdict(settings.step)}}
    if resume:
        saved = torch.load(ckpt / TRAINER_STATE, weights_only=False)
        optimizer.load_state_dict(saved["optimizer"])
        generator.set_state(saved["generator"])
        state = json.loads((ckpt / "state.json").read_text())
        rows = pd.read_csv(out_dir / METRICS).to_dict("records")[: state["step"] + 1]
    else:
        if (Path(start) / TRAINER_STATE).exists():  # continue the starting checkpoint's AdamW moments
            optimizer.load_state_dict(torch.load(Path(start) / TRAINER_STATE, weights_only=False)["optimizer"])
            for group in optimizer.param_groups:
                group["lr"] = settings.lr
        out_dir.mkdir(parents=True, exist_ok=True)
        held = evaluate(policy, tokenizer, test, protocol, settings.seed)
        np.save(out_dir / "pass1_step0.npy", held)
        rows.append(
            {
                "step": 0,
                "samples": 0,
                "tokens": 0,
                "elapsed_s": 0.0,
                "generation_s": 0.0,
                "reward_mean": np.nan,
                "pass_rate": np.nan,
                "updates": 0,
                "pass1": float(held.mean()),
                "pass1_se": standard_error(held),
            }
        )
    bar = tqdm(
        total=settings.sample_budget, initial=state["samples"], desc=settings.name, disable=not progress, unit="samples"
    )
    stop_at = None if max_steps is None else state["step"] + max_steps
    while state["samples"] < settings.sample_budget and (stop_at is None or state["step"] < stop_at):
        picks = torch.randint(len(train), (settings.prompts_per_step,), generator=generator).tolist()
        m = rl_step(policy, tokenizer, optimizer, [train[i] for i in picks], settings.step, generator, reference)
        state["step"] += 1
        state["samples"] += m["samples"]
        row = {
            "step": state["step"],
            "samples": state["samples"],
            "tokens": rows[-1]["tokens"] + m["tokens"],
            "elapsed_s": rows[-1]["elapsed_s"] + m["step_s"],
            "generation_s": m["generation_s"],
            "reward_mean": m["reward_mean"],
            "pass_rate": m["pass_rate"],
            "updates": m["updates"],
            "pass1": np.nan,
            "pass1_se": np.nan,
        }
        done = state["samples"] >= settings.sample_budget
        if state["step"] % settings.eval_every == 0 or done:
            held = evaluate(policy, tokenizer, test, protocol, settings.seed)
            row["pass1"], row["pass1_se"] = float(held.mean()), standard_error(held)
            np.save(out_dir / f"pass1_step{state['step']}.npy", held)
        rows.append(row)
        bar.update(m["samples"])
        if state["step"] % settings.checkpoint_every == 0 or done:
            atomic.write_text(out_dir / METRICS, pd.DataFrame(rows).to_csv(index=False, lineterminator="\n"))
            _save_checkpoint(ckpt, policy, tokenizer, optimizer, generator, state)
    bar.close()
    if state["samples"] >= settings.sample_budget:
        atomic.write_text(out_dir / DONE, json.dumps({"step": state["step"], "samples": state["samples"]}))
    return pd.DataFrame(rows)
