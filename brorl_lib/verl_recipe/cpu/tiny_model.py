"""A tiny Qwen2 for the CPU run, warm-started on the recipe's own training prompts.

The paper's start model descends from DeepSeek-R1-Distill-Qwen-1.5B: ``model_type: qwen2`` with DeepSeek's
tokenizer and chat template, no ChatML tokens. The tiny model is built the same way (its tokenizer is
``models.deepseek_tokenizer``), so the CPU run meets what a cluster run meets: verl 0.9.1 picks its Qwen
continuous-token builder from ``model_type`` and that builder requires ``<|im_end|>`` (``tokenizer_fallback``
is the fix every launch loads). The warm start is supervised: "<answer>{answer}</answer>" and the
end-of-sentence token after each templated prompt (the recipe's prompt and the evaluation protocol's),
the prompt masked, so that the model answers in the recipe's format and gets some, not all, answers right:
the pass rate strictly between 0 and 1 that dynamic sampling needs, and a score above 0 under
``python -m brorl_lib.evaluation``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch
from transformers import PreTrainedTokenizerFast

from brorl_lib.core import atomic
from brorl_lib.models.deepseek_tokenizer import EOS, build_tokenizer, save_tokenizer
from brorl_lib.models.tiny import IGNORE, TinyModelShape, build_model, train_sft

# Our choice: a model that learns the answer format in a minute on 2 cores (about 0.09M parameters), positions for
# the CPU profile's prompt plus response length, with room.
CPU_RUN_SHAPE = TinyModelShape(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=128, max_positions=1536)


def prompt_text(tokenizer: PreTrainedTokenizerFast, messages: list[dict]) -> str:
    """The templated prompt verl generates from (generation prompt appended)."""
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)


def prompt_variants(messages: list[dict], extra_info: dict) -> list[str]:
    """The user text as the recipe's data writes it and, for Reasoning Gym, as the evaluation protocol does
    (``evaluation.datasets.rg_prompt``), so that the checkpoint answers in tags under both."""
    from brorl_lib.evaluation.datasets import rg_prompt
    from brorl_lib.verl_recipe.codec import decode_entry

    texts = [messages[-1]["content"]]
    if extra_info.get("entry"):
        texts.append(rg_prompt(decode_entry(extra_info["entry"])["question"]))
    return texts


def target_text(ground_truth: str, family: str = "reasoning_gym") -> str:
    """What the warm start teaches, then the end of the turn: the answer in ProRL's Reasoning Gym tags, or in
    ``\\boxed{}`` for math (the recipe's math instruction)."""
    answer = f"\\boxed{{{ground_truth}}}" if family == "math" else f"<answer>{ground_truth}</answer>"
    return answer + EOS


def sft_batch(tokenizer: PreTrainedTokenizerFast, prompts: list[str], targets: list[str]) -> dict[str, torch.Tensor]:
    """Left-padded ids and attention mask; labels only on the target tokens."""
    enc = [tokenizer(p + t, add_special_tokens=False)["input_ids"] for p, t in zip(prompts, targets)]
    lens = [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in targets]
    width = max(map(len, enc))
    ids = torch.full((len(enc), width), tokenizer.pad_token_id)
    mask = torch.zeros_like(ids)
    labels = torch.full_like(ids, IGNORE)
    for i, (e, n) in enumerate(zip(enc, lens)):
        ids[i, width - len(e) :] = torch.tensor(e)
        mask[i, width - len(e) :] = 1
        labels[i, width - n :] = ids[i, width - n :]
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def warm_start(
    train: pd.DataFrame,
    out_dir: Path,
    steps: int = 300,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
    shape: TinyModelShape = CPU_RUN_SHAPE,
    progress: bool = True,
    responses: dict[str, str] | None = None,
) -> Path:
    """Train a fresh tiny model on ``train`` (verl parquet rows) and save it, with its tokenizer, to ``out_dir``.
    A row whose data_source is in ``responses`` is taught that response instead of its ground truth
    (``reward_rows``).

    Our choices: AdamW at ``lr`` on random mini-batches, ``steps`` steps; same seed, same weights.
    """
    if train.empty:
        raise ValueError("train is empty: the warm start needs training rows")
    tokenizer = build_tokenizer()
    model = build_model(shape, tokenizer, seed)
    prompts, targets = [], []
    responses = responses or {}
    for source, messages, extra, reward in zip(
        train["data_source"], train["prompt"], train["extra_info"], train["reward_model"]
    ):
        taught = responses[source] + EOS if source in responses else None
        for text in prompt_variants(messages, extra):
            prompts.append(prompt_text(tokenizer, [{"role": "user", "content": text}]))
            targets.append(taught or target_text(reward["ground_truth"], extra.get("family", "reasoning_gym")))
    train_sft(
        model,
        len(prompts),
        lambda pick, _gen: sft_batch(tokenizer, [prompts[i] for i in pick], [targets[i] for i in pick]),
        steps,
        batch_size,
        lr,
        seed,
        progress,
    )
    model.eval()

    def save(tmp: Path) -> None:
        model.save_pretrained(tmp)
        save_tokenizer(tokenizer, tmp)

    atomic.write_folder(Path(out_dir), save)
    return Path(out_dir)
