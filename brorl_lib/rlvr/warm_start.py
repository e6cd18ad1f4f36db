"""Supervised warm start: next-token cross-entropy on "<prompt><answer><eos>", prompt tokens masked. A prompt
with several accepted answers (countdown) is trained on one drawn uniformly at random each time it is picked, so
the warm-started model's prior spreads over all of them."""

from __future__ import annotations

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from brorl_lib.core.validation import check_int, check_positive
from brorl_lib.rlvr.correct_set import canonical_answers
from brorl_lib.rlvr.sampling import encode_prompts, positions
from brorl_lib.rlvr.tasks import LaptopInstance

IGNORE = -100  # label of positions that carry no loss (transformers' convention)


def sft_batch(
    tokenizer: PreTrainedTokenizerFast, instances: list[LaptopInstance], answers: list[str] | None = None
) -> dict[str, torch.Tensor]:
    """Left-padded ids, attention mask, positions and labels (answer and <eos> only); ``answers`` (default: each
    instance's reference answer) are the targets."""
    answers = [i.answer for i in instances] if answers is None else answers
    texts = [i.prompt + a for i, a in zip(instances, answers)]
    ids, mask = encode_prompts(tokenizer, texts)
    eos = torch.full((len(texts), 1), tokenizer.eos_token_id)
    ids, mask = torch.cat([ids, eos], 1), torch.cat([mask, torch.ones_like(eos)], 1)
    answer_len = torch.tensor([len(tokenizer(a, add_special_tokens=False)["input_ids"]) + 1 for a in answers])
    from_end = torch.arange(ids.shape[1] - 1, -1, -1).unsqueeze(0)
    labels = torch.where(from_end < answer_len.unsqueeze(1), ids, torch.full_like(ids, IGNORE))
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions(mask), "labels": labels}


def _one_answer(instance: LaptopInstance, gen: torch.Generator) -> str:
    """A uniformly random canonical answer (no draw when there is one, so one-answer tasks keep their stream)."""
    options = canonical_answers(instance)
    return options[int(torch.randint(len(options), (1,), generator=gen))] if len(options) > 1 else options[0]


def sft_loss(model: PreTrainedModel, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    device = next(model.parameters()).device
    return model(**{k: v.to(device) for k, v in batch.items()}).loss


def train_sft(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    instances: list[LaptopInstance],
    steps: int,
    batch_size: int,
    lr: float,
    seed: int,
    progress: bool = False,
) -> list[float]:
    """AdamW on random mini-batches of ``instances``; returns the loss of every step."""
    check_int("steps", steps, low=1)
    check_int("batch_size", batch_size, low=1)
    check_positive("lr", lr)
    if not instances:
        raise ValueError("train_sft needs at least one instance")
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    losses = []
    for _ in tqdm(range(steps), desc="warm start", unit="step", disable=not progress):
        pick = [instances[i] for i in torch.randint(len(instances), (batch_size,), generator=gen).tolist()]
        loss = sft_loss(model, sft_batch(tokenizer, pick, [_one_answer(i, gen) for i in pick]))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
