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
from brorl_lib.core.validation import check_int, check_positive
from brorl_lib.rlvr import model as tiny
from brorl_lib.rlvr.sampling import generate
from brorl_lib.rlvr.step import StepSettings, rl_step
from brorl_lib.rlvr.tasks import LaptopInstance, score

CHECKPOINT = "checkpoint"
METRICS = "metrics.csv"
DONE = "done.json"  # written once the sample budget is spent; a finished arm needs no checkpoint to be read back


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
def evaluate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    instances: list[LaptopInstance],
    samples: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
) -> np.ndarray:
    """Per-instance mean verifier score over ``samples`` responses (pass@1 for binary rewards)."""
    model.eval()
    r = generate(
        model,
        tokenizer,
        [i.prompt for i in instances],
        samples,
        max_new_tokens,
        temperature,
        torch.Generator().manual_seed(seed),
    )
    scores = np.array([score(instances[g], t) for g, t in zip(r.group.tolist(), r.texts)])
    return scores.reshape(len(instances), samples).mean(1)


def _save_checkpoint(folder: Path, model, tokenizer, optimizer, generator: torch.Generator, state: dict) -> None:
    """Written as a whole and swapped in: an interruption never leaves a half checkpoint."""

    def fill(tmp: Path) -> None:
        tiny.save(model, tokenizer, tmp)
        torch.save({"optimizer": optimizer.state_dict(), "generator": generator.get_state()}, tmp / "trainer.pt")
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
    eval_samples: int,
    eval_temperature: float,
    max_steps: int | None = None,
    progress: bool = True,
    device: str = "cpu",
) -> pd.DataFrame:
    """Train from the checkpoint at ``start`` (or resume from ``out_dir``); returns every step's metrics.

    ``max_steps`` stops early (as an interruption would); calling again resumes where it stopped.
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
        saved = torch.load(ckpt / "trainer.pt", weights_only=False)
        optimizer.load_state_dict(saved["optimizer"])
        generator.set_state(saved["generator"])
        state = json.loads((ckpt / "state.json").read_text())
        rows = pd.read_csv(out_dir / METRICS).to_dict("records")[: state["step"] + 1]
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        held = evaluate(
            policy, tokenizer, test, eval_samples, eval_temperature, settings.step.max_new_tokens, settings.seed
        )
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
                "test_score": float(held.mean()),
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
            "test_score": np.nan,
        }
        done = state["samples"] >= settings.sample_budget
        if state["step"] % settings.eval_every == 0 or done:
            held = evaluate(
                policy, tokenizer, test, eval_samples, eval_temperature, settings.step.max_new_tokens, settings.seed
            )
            row["test_score"] = float(held.mean())
            np.save(out_dir / f"test_scores_step{state['step']}.npy", held)
        rows.append(row)
        bar.update(m["samples"])
        if state["step"] % settings.checkpoint_every == 0 or done:
            atomic.write_text(out_dir / METRICS, pd.DataFrame(rows).to_csv(index=False, lineterminator="\n"))
            _save_checkpoint(ckpt, policy, tokenizer, optimizer, generator, state)
    bar.close()
    if state["samples"] >= settings.sample_budget:
        atomic.write_text(out_dir / DONE, json.dumps({"step": state["step"], "samples": state["samples"]}))
    return pd.DataFrame(rows)
