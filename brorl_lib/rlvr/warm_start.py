"""Supervised warm start: next-token cross-entropy on "<prompt><answer><eos>", prompt tokens masked. A prompt
with several accepted answers (countdown) is trained on one drawn uniformly at random each time it is picked, so
the warm-started model's prior spreads over all of them."""

from __future__ import annotations

from collections.abc import Callable

import torch
from transformers import PreTrainedTokenizerFast

from brorl_lib.models.tiny import IGNORE
from brorl_lib.rlvr.correct_set import canonical_answers
from brorl_lib.rlvr.sampling import encode_prompts, positions
from brorl_lib.rlvr.tasks import LaptopInstance


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


def batches(
    tokenizer: PreTrainedTokenizerFast, instances: list[LaptopInstance]
) -> Callable[[list[int], torch.Generator], dict[str, torch.Tensor]]:
    """``tiny.train_sft``'s batches from ``instances``: each picked one trained on a random one of its answers."""

    def batch_of(picked: list[int], gen: torch.Generator) -> dict[str, torch.Tensor]:
        pick = [instances[i] for i in picked]
        return sft_batch(tokenizer, pick, [_one_answer(i, gen) for i in pick])

    return batch_of
