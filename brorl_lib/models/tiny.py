"""The tiny Qwen2-architecture causal LM (transformers), created from a seed and saved in HF format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from transformers.utils import logging as hf_logging

from brorl_lib.core.validation import check_int, check_positive

IGNORE = -100  # label of positions that carry no loss (transformers' convention)
hf_logging.disable_progress_bar()  # checkpoints are saved often; their progress bars would drown the run's own


@dataclass(frozen=True)
class TinyModelShape:
    """Our choice of defaults (notebook 04's model): small enough to train and sample on 2 CPU cores in minutes
    (about 0.45M parameters with its tokenizer)."""

    hidden: int = 128  # model width
    layers: int = 3
    heads: int = 4  # attention heads; kv_heads: grouped key-value heads
    kv_heads: int = 2
    intermediate: int = 256  # MLP width
    max_positions: int = 128  # longest prompt + completion, in tokens

    def check(self) -> None:
        for name in ("hidden", "layers", "heads", "kv_heads", "intermediate", "max_positions"):
            check_int(name, getattr(self, name), low=1)
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(
                f"hidden={self.hidden} must be a multiple of heads={self.heads}, "
                f"and heads a multiple of kv_heads={self.kv_heads}"
            )

    def config(self, tokenizer: PreTrainedTokenizerFast) -> Qwen2Config:
        self.check()
        return Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=self.hidden,
            intermediate_size=self.intermediate,
            num_hidden_layers=self.layers,
            num_attention_heads=self.heads,
            num_key_value_heads=self.kv_heads,
            max_position_embeddings=self.max_positions,
            tie_word_embeddings=True,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )


def build_model(shape: TinyModelShape, tokenizer: PreTrainedTokenizerFast, seed: int) -> Qwen2ForCausalLM:
    """A freshly initialised model; the same seed gives the same weights."""
    check_int("seed", seed, low=0)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(shape.config(tokenizer))
    return model.to(torch.float32)


def save(model: Qwen2ForCausalLM, tokenizer: PreTrainedTokenizerFast, path: Path) -> None:
    """Hugging Face layout (config.json, model.safetensors, tokenizer files): loads in verl or vLLM offline."""
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)


def load(path: Path, device: str = "cpu") -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast]:
    path = Path(path)
    if not (path / "config.json").is_file():
        raise ValueError(f"no model at {path}: expected a Hugging Face folder with config.json (a saved warm start)")
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(device)
    return model, PreTrainedTokenizerFast.from_pretrained(path)


def sft_loss(model: Qwen2ForCausalLM, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Next-token cross-entropy on the batch's labelled positions, on the model's device."""
    device = next(model.parameters()).device
    return model(**{k: v.to(device) for k, v in batch.items()}).loss


def train_sft(
    model: Qwen2ForCausalLM,
    rows: int,
    batch_of: Callable[[list[int], torch.Generator], dict[str, torch.Tensor]],
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    progress: bool = False,
) -> list[float]:
    """The supervised warm start: AdamW at ``lr`` for ``steps`` steps, each on ``batch_size`` rows drawn at
    random from ``rows`` and made into a batch by ``batch_of(picked rows, generator)``; the loss of every step."""
    check_int("steps", steps, low=1)
    check_int("batch_size", batch_size, low=1)
    check_positive("lr", lr)
    if rows < 1:
        raise ValueError("the warm start needs at least one training row")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in tqdm(range(steps), desc="warm start", unit="step", disable=not progress):
        loss = sft_loss(model, batch_of(torch.randint(rows, (batch_size,), generator=gen).tolist(), gen))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
