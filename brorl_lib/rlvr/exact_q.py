"""A prompt's correct mass q, exactly: the probability that the policy's sampler produces one of its canonical
accepted answers (``correct_set``), summed over them, each teacher-forced through the model.

A response ends at the first <eos> or after ``max_new_tokens`` tokens (``sampling.generate``), so an answer
of L tokens is produced with probability prod p(token) * p(<eos>) when L < max_new_tokens, prod p(token)
when L == max_new_tokens, and never when longer. With ``top_p`` < 1 each step's probability is the
nucleus-renormalised one the sampler uses (``sampling.nucleus``). q is differentiable (``grad=True``).

Accepted forms outside the canonical set carry the rest of the accepted mass: ``outside_mass`` estimates it
without bias by sampling (share of sampled responses accepted by the verifier but not canonical).
"""

from __future__ import annotations

import numpy as np
import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from brorl_lib.core.validation import check_int, check_positive, check_range
from brorl_lib.rlvr.correct_set import canonical_answers
from brorl_lib.rlvr.sampling import encode_prompts, generate, nucleus, positions
from brorl_lib.rlvr.tasks import LaptopInstance, reward

ROWS = 4096  # answer sequences teacher-forced at once (memory only, our choice)


def _answer_rows(tokenizer, instances, max_new_tokens) -> tuple[list[str], list[list[int]], list[int]]:
    prompts, ids, owner = [], [], []
    for k, inst in enumerate(instances):
        for answer in canonical_answers(inst):
            tokens = tokenizer(answer, add_special_tokens=False)["input_ids"]
            if len(tokens) < max_new_tokens:
                tokens = tokens + [tokenizer.eos_token_id]
            elif len(tokens) > max_new_tokens:
                continue  # the sampler cannot produce it
            prompts.append(inst.prompt)
            ids.append(tokens)
            owner.append(k)
    return prompts, ids, owner


def _sequence_log_probs(model, tokenizer, prompts, ids, temperature: float, top_p: float) -> torch.Tensor:
    device = next(model.parameters()).device
    p_ids, p_mask = (t.to(device) for t in encode_prompts(tokenizer, prompts))
    width = max(len(r) for r in ids)
    r_ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in ids], device=device)
    r_mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in ids], device=device)
    seq, mask = torch.cat([p_ids, r_ids], 1), torch.cat([p_mask, r_mask], 1)
    logits = model(input_ids=seq, attention_mask=mask, position_ids=positions(mask)).logits
    start = p_ids.shape[1] - 1
    logp = torch.log_softmax(logits[:, start : start + width].float() / temperature, -1)
    if top_p < 1.0:  # nucleus-renormalised probabilities; a token outside the nucleus has probability 0
        kept = nucleus(logp.detach().flatten(0, 1), top_p).view_as(logp) > 0
        logp = torch.where(kept, logp, torch.full_like(logp, -torch.inf))
        logp = logp - torch.logsumexp(logp, -1, keepdim=True)
    token_lp = logp.gather(2, r_ids[:, :, None]).squeeze(2)
    return (token_lp * r_mask).sum(1)


def correct_mass(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    instances: list[LaptopInstance],
    temperature: float,
    max_new_tokens: int,
    top_p: float = 1.0,
    grad: bool = False,
) -> torch.Tensor:
    """q of each instance (float32, on the model's device): the sampler's probability of a canonical accepted
    answer at ``temperature`` and ``top_p``. With ``grad`` the graph is kept (for d q / d parameters)."""
    check_positive("temperature", temperature)
    check_int("max_new_tokens", max_new_tokens, low=1)
    check_range("top_p", top_p, low=0.0, high=1.0)
    device = next(model.parameters()).device
    prompts, ids, owner = _answer_rows(tokenizer, instances, max_new_tokens)
    q = torch.zeros(len(instances), device=device)
    with torch.set_grad_enabled(grad):
        for lo in range(0, len(ids), ROWS):
            lp = _sequence_log_probs(model, tokenizer, prompts[lo : lo + ROWS], ids[lo : lo + ROWS], temperature, top_p)
            q = q.index_add(0, torch.tensor(owner[lo : lo + ROWS], device=device), lp.exp())
    return q


@torch.no_grad()
def outside_mass(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    instances: list[LaptopInstance],
    samples: int,
    temperature: float,
    max_new_tokens: int,
    seed: int,
    top_p: float = 1.0,
) -> tuple[float, float]:
    """Mean over instances of the accepted mass outside the canonical set, estimated from ``samples`` draws per
    instance (unbiased), and its standard error over instances."""
    check_int("samples", samples, low=1)
    model.eval()
    r = generate(
        model,
        tokenizer,
        [i.prompt for i in instances],
        samples,
        max_new_tokens,
        temperature,
        torch.Generator().manual_seed(seed),
        top_p=top_p,
    )
    hits = (
        np.array(
            [
                reward(instances[g], t) > 0 and t not in canonical_answers(instances[g])  # the exact text q counts
                for g, t in zip(r.group.tolist(), r.texts)
            ],
            dtype=float,
        )
        .reshape(len(instances), samples)
        .mean(1)
    )
    se = float(hits.std(ddof=1) / np.sqrt(hits.size)) if hits.size > 1 else float("nan")
    return float(hits.mean()), se
