"""Batched sampling of N rollouts per prompt with a KV cache: each prompt is encoded once and its
cache is repeated N times, so all rollouts of a prompt share its prefix."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from brorl_lib.core.validation import check_int, check_positive, check_range


@dataclass(frozen=True)
class Rollouts:
    """N rollouts of each of P prompts, as rows b = p * N + j."""

    prompt_ids: torch.Tensor  # (P*N, Lp) left-padded
    prompt_mask: torch.Tensor  # (P*N, Lp)
    response_ids: torch.Tensor  # (P*N, T), pad after the first <eos>
    response_mask: torch.Tensor  # (P*N, T), 1 up to and including the first <eos>
    log_probs: torch.Tensor  # (P*N, T) log-prob of each sampled token under the sampling policy
    group: torch.Tensor  # (P*N,) prompt index
    texts: list[str]  # decoded responses, without special tokens

    @property
    def n_tokens(self) -> int:
        return int(self.response_mask.sum())


def encode_prompts(tokenizer: PreTrainedTokenizerFast, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids and attention mask; characters outside the tokenizer's alphabet are an error."""
    enc = tokenizer(prompts, add_special_tokens=False, padding=True, return_tensors="pt")
    if (enc["input_ids"] == tokenizer.unk_token_id).any():
        bad = [p for p in prompts if tokenizer.unk_token_id in tokenizer(p, add_special_tokens=False)["input_ids"]]
        raise ValueError(f"prompts contain characters the tokenizer does not know: {bad[:3]}")
    return enc["input_ids"], enc["attention_mask"]


def positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a left-padded batch: 0 at each row's first real token."""
    return (mask.cumsum(-1) - 1).clamp(min=0)


def nucleus(logp: torch.Tensor, top_p: float) -> torch.Tensor:
    """Probabilities of each row kept to its top-p nucleus (the most likely tokens whose mass reaches
    ``top_p``; the most likely token always stays), unnormalised, float64."""
    probs = logp.exp().double()
    if top_p >= 1.0:
        return probs
    sorted_p, order = probs.sort(-1, descending=True)
    before = sorted_p.cumsum(-1) - sorted_p  # mass of the more likely tokens
    return probs.scatter(-1, order, torch.where(before < top_p, sorted_p, torch.zeros_like(sorted_p)))


def _draw(logp: torch.Tensor, generator: torch.Generator, top_p: float = 1.0) -> torch.Tensor:
    """One token per row by inverse CDF over the top-p nucleus; the uniforms come from a CPU generator, so a
    seed gives the same draws on any device (for the same probabilities)."""
    u = torch.rand(logp.shape[0], 1, generator=generator, dtype=torch.float64).to(logp.device)
    cdf = nucleus(logp, top_p).cumsum(-1)
    return torch.searchsorted(cdf, u * cdf[:, -1:], right=True).clamp(max=logp.shape[1] - 1).squeeze(1)


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    prompts: list[str],
    n: int,
    max_new_tokens: int,
    temperature: float,
    generator: torch.Generator,
    use_cache: bool = True,
    top_p: float = 1.0,
    greedy: bool = False,
) -> Rollouts:
    """Sample ``n`` responses per prompt at ``temperature`` from the top-p nucleus (``greedy``: the most likely
    token every time; log-probs are still those at ``temperature``); ``use_cache=False`` recomputes every step
    from the full sequence (slow; the reference the cached path must match)."""
    check_int("n", n, low=1)
    check_int("max_new_tokens", max_new_tokens, low=1)
    check_positive("temperature", temperature)
    check_positive("top_p", top_p)
    check_range("top_p", top_p, high=1.0)
    device = next(model.parameters()).device
    ids, mask = (t.to(device) for t in encode_prompts(tokenizer, prompts))
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    rows = len(prompts) * n
    prompt_ids, prompt_mask = ids.repeat_interleave(n, 0), mask.repeat_interleave(n, 0)
    if use_cache:
        out = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask), use_cache=True)
        cache = out.past_key_values
        cache.batch_repeat_interleave(n)
        logits = out.logits[:, -1].repeat_interleave(n, 0)
    else:
        logits = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=positions(prompt_mask)).logits[
            :, -1
        ]
    full_mask, seq = prompt_mask, prompt_ids
    finished = torch.zeros(rows, dtype=torch.bool, device=device)
    tokens, logps = [], []
    for _ in range(max_new_tokens):
        logp = torch.log_softmax(logits.float() / temperature, dim=-1)
        tok = logp.argmax(-1) if greedy else _draw(logp, generator, top_p)
        tok = torch.where(finished, torch.full_like(tok, pad), tok)
        tokens.append(tok)
        logps.append(
            torch.where(finished, torch.zeros_like(tok, dtype=logp.dtype), logp.gather(1, tok[:, None]).squeeze(1))
        )
        finished = finished | (tok == eos)
        if finished.all():
            break
        full_mask = torch.cat([full_mask, full_mask.new_ones(rows, 1)], dim=1)  # finished rows only feed pads
        seq = torch.cat([seq, tok[:, None]], dim=1)
        if use_cache:
            pos = positions(full_mask)[:, -1:]
            logits = model(
                input_ids=tok[:, None],
                attention_mask=full_mask,
                position_ids=pos,
                past_key_values=cache,
                use_cache=True,
            ).logits[:, -1]
        else:
            logits = model(input_ids=seq, attention_mask=full_mask, position_ids=positions(full_mask)).logits[:, -1]
    response = torch.stack(tokens, 1)
    ended = (response == eos).cumsum(1)
    response_mask = ((ended == 0) | ((ended == 1) & (response == eos))).long()
    texts = tokenizer.batch_decode(torch.where(response_mask.bool(), response, pad), skip_special_tokens=True)
    group = torch.arange(len(prompts), device=device).repeat_interleave(n)
    return Rollouts(
        prompt_ids, prompt_mask, response, response_mask, torch.stack(logps, 1) * response_mask, group, texts
    )


def _pad_to(t: torch.Tensor, width: int, value: int, left: bool) -> torch.Tensor:
    pad = t.new_full((t.shape[0], width - t.shape[1]), value)
    return torch.cat([pad, t] if left else [t, pad], 1)


def concat(parts: list[Rollouts], pad_id: int) -> Rollouts:
    """Rollouts of several generation rounds as one batch: prompts left-padded and responses right-padded to the
    longest, group ids kept apart (each part's groups after the previous part's)."""
    lp = max(p.prompt_ids.shape[1] for p in parts)
    lr = max(p.response_ids.shape[1] for p in parts)
    offsets, groups = 0, []
    for p in parts:
        groups.append(p.group + offsets)
        offsets += int(p.group.max()) + 1 if len(p.group) else 0
    return Rollouts(
        torch.cat([_pad_to(p.prompt_ids, lp, pad_id, True) for p in parts]),
        torch.cat([_pad_to(p.prompt_mask, lp, 0, True) for p in parts]),
        torch.cat([_pad_to(p.response_ids, lr, pad_id, False) for p in parts]),
        torch.cat([_pad_to(p.response_mask, lr, 0, False) for p in parts]),
        torch.cat([_pad_to(p.log_probs, lr, 0, False) for p in parts]),
        torch.cat(groups),
        [t for p in parts for t in p.texts],
    )
