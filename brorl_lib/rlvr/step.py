"""One RL step: sample N rollouts per prompt, reward them with the verifiers (binary), drop all-equal
groups and refill (dynamic sampling: more rounds of prompts until the kept batch is full, at most
``max_rounds``, as verl's ``algorithm.filter_groups``), then take PPO-clip updates over a fixed number of
mini-batches (paper §3.1, §4.2.1). The PPO ratio's old log-probs are the ones recorded while sampling (the
same weights; no second forward pass)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from brorl_lib.core.validation import check_choice, check_int, check_positive
from brorl_lib.rlvr import algorithm as alg
from brorl_lib.rlvr.sampling import Rollouts, concat, generate
from brorl_lib.rlvr.tasks import LaptopInstance, reward


@dataclass(frozen=True)
class StepSettings:
    n_rollouts: int  # N, at least 2 for a group baseline
    temperature: float = 1.0
    max_new_tokens: int = 16
    mini_batches: int = 2  # PPO updates per step, fixed across arms as in the paper
    clip_low: float = 0.2  # ProRLv2's clip-higher (docs/prorl-background.md#prorlv2)
    clip_high: float = 0.28
    kl_coef: float = 0.0  # optional KL to a reference policy
    advantage_estimator: str = "reinforce_plus_plus_baseline"
    grad_clip: float = 1.0  # verl's default actor.grad_clip
    max_rounds: int = 1  # generation rounds per step (verl's max_num_gen_batches); 1: no refill
    micro_batch: int = 1024  # rows per forward/backward pass within a mini-batch (memory and speed only, our choice)
    # which prompts a refill round draws: "shortfall" only as many as the kept batch still lacks, at the step's
    # observed keep rate (Table 1's accounting: generated = kept / pass rate; a few surplus groups at most);
    # "full" all P again each round (verl's filter_groups), the surplus groups generated and dropped
    refill: str = "full"

    # one forward/backward per distinct (prompt, response) of a chunk, weighted by its count: the same loss and
    # gradient up to float rounding (duplicates share advantage and old log-probs), far fewer rows at large N
    dedupe: bool = False

    EXECUTION_ONLY = (
        "micro_batch",
        "dedupe",
    )  # how the update is computed, not which update: not part of a run's identity
    REFILLS = ("full", "shortfall")

    def __post_init__(self) -> None:
        check_int("n_rollouts", self.n_rollouts, low=2)
        check_positive("temperature", self.temperature)
        check_int("max_new_tokens", self.max_new_tokens, low=1)
        check_int("mini_batches", self.mini_batches, low=1)
        check_positive("grad_clip", self.grad_clip)
        check_int("max_rounds", self.max_rounds, low=1)
        check_int("micro_batch", self.micro_batch, low=1)
        check_choice("refill", self.refill, self.REFILLS)

    def round_prompts(self, prompts: int, kept: int, drawn: int) -> int:
        """Prompts the next generation round draws, with ``kept`` mixed groups found among ``drawn`` so far."""
        if self.refill == "full" or drawn == 0:
            return prompts
        shortfall = prompts - kept
        return shortfall if kept == 0 else min(prompts, math.ceil(shortfall * drawn / kept))


def rows_of(r: Rollouts, idx: torch.Tensor) -> Rollouts:
    return Rollouts(
        r.prompt_ids[idx],
        r.prompt_mask[idx],
        r.response_ids[idx],
        r.response_mask[idx],
        r.log_probs[idx],
        r.group[idx],
        [r.texts[i] for i in idx.tolist()],
    )


def generation_round(
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    prompts: list[LaptopInstance],
    settings: StepSettings,
    generator: torch.Generator,
) -> tuple[Rollouts, torch.Tensor, torch.Tensor]:
    """One generation round: the rollouts, their binary rewards, and which rows dynamic sampling keeps."""
    rollouts = generate(
        policy,
        tokenizer,
        [p.prompt for p in prompts],
        settings.n_rollouts,
        settings.max_new_tokens,
        settings.temperature,
        generator,
    )
    rewards = torch.tensor(
        [reward(prompts[g], text) for g, text in zip(rollouts.group.tolist(), rollouts.texts)],
        device=rollouts.group.device,
    )
    return rollouts, rewards, alg.dynamic_sampling(rewards, rollouts.group)


def backward(
    policy: PreTrainedModel,
    kept: Rollouts,
    adv: torch.Tensor,
    old_lp: torch.Tensor,
    ref_lp: torch.Tensor | None,
    chunk: torch.Tensor,
    settings: StepSettings,
) -> None:
    """Accumulate the gradient of the PPO loss (plus the KL term) of the rows ``chunk`` of ``kept``, token-mean over
    the chunk, in micro-batches of ``settings.micro_batch`` rows (as verl's gradient accumulation)."""
    weight = kept.response_mask.float()  # a row's tokens, times how many rows it stands for
    if settings.dedupe:
        chunk, counts = _distinct(kept, chunk)
        weight = weight.clone()
        weight[chunk] = weight[chunk] * counts[:, None]
    tokens = float(weight[chunk].sum())
    for micro in torch.split(chunk, settings.micro_batch):
        part = rows_of(kept, micro)
        lp = alg.response_log_probs(policy, part, settings.temperature)
        loss, _ = alg.policy_loss(
            old_lp[micro],
            lp,
            adv[micro],
            weight[micro],
            settings.clip_low,
            settings.clip_high,
            settings.n_rollouts,
        )
        if ref_lp is not None and settings.kl_coef > 0:
            loss = loss + settings.kl_coef * alg.kl_loss(lp, ref_lp[micro], weight[micro])
        # token-mean over the whole chunk: each micro-batch's token mean weighted by its share of tokens
        (loss * (float(weight[micro].sum()) / tokens)).backward()


def _distinct(kept: Rollouts, chunk: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The first row of each distinct (group, response) among ``chunk``, in order, and how many rows each stands for."""
    keys = torch.cat([kept.group[chunk, None], kept.response_ids[chunk]], 1)
    _, inverse, counts = torch.unique(keys, dim=0, return_inverse=True, return_counts=True)
    first = torch.full((len(counts),), len(chunk), dtype=torch.long, device=chunk.device)
    first = first.scatter_reduce(0, inverse, torch.arange(len(chunk), device=chunk.device), "amin")
    order = first.argsort()
    return chunk[first[order]], counts[order]


@torch.no_grad()
def reference_log_probs(reference: PreTrainedModel, r: Rollouts, settings: StepSettings) -> torch.Tensor:
    """The reference policy's log-probs of the sampled response tokens, in micro-batches as the update's passes."""
    rows = torch.split(torch.arange(len(r.texts), device=r.group.device), settings.micro_batch)
    return torch.cat([alg.response_log_probs(reference, rows_of(r, k), settings.temperature) for k in rows])


def rl_step(
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    optimizer: torch.optim.Optimizer,
    draw: Callable[[int], list[LaptopInstance]],
    prompts: int,
    settings: StepSettings,
    generator: torch.Generator,
    reference: PreTrainedModel | None = None,
) -> dict[str, float]:
    """Generate rounds of ``prompts`` prompts (``draw(k)`` gives k training prompts) until ``prompts`` groups with
    mixed rewards are kept or ``max_rounds`` is reached, keep the first ``prompts`` such groups, and update.

    Returns the step's metrics: generated ``samples`` (every round, before the filter), ``kept_samples`` (the
    trained batch), ``rounds``, ``capped`` (the cap stopped the refill with the batch not full), the reward mean
    and pass rate (share of generated samples in mixed groups) over every round, the mean gradient norm before
    clipping, time, response tokens generated and the prompts of the kept groups (``kept_prompts``); ``entropy``:
    the policy's mean entropy per response token at the training temperature, estimated on every generated
    token (minus its sampled log-prob, nats), and ``entropy_kept`` the same on the kept batch; with a
    ``reference``, ``kl_ref_all``: KL(policy || reference) per token before the update on every generated token
    (the k1 estimator on tokens the policy sampled, nats), and ``kl_ref`` the same on the kept batch. The all-row
    values compare arms on the same footing; the kept-row values describe the rows the update trains on, whose
    make-up differs by N."""
    check_int("prompts", prompts, low=1)
    t0 = time.perf_counter()
    policy.eval()
    parts, part_rewards, rounds, generated, tokens, reward_sum, mixed = [], [], 0, 0, 0, 0.0, 0
    ref_parts = []  # the kept rows with the reference's log-probs in place of the sampler's (with a reference)
    surprisal = 0.0  # minus the sampled log-probs, summed over every generated token
    drift = 0.0  # sampled minus reference log-probs, summed over every generated token (with a reference)
    kept_groups = drawn = mixed_groups = 0
    kept_prompts: list[str] = []
    while kept_groups < prompts and rounds < settings.max_rounds:
        asked = settings.round_prompts(prompts, mixed_groups, drawn)
        drawn_prompts = draw(asked)
        rollouts, rewards, keep = generation_round(policy, tokenizer, drawn_prompts, settings, generator)
        rounds += 1
        drawn += asked
        mixed_here = torch.unique(rollouts.group[keep])
        mixed_groups += len(mixed_here)
        generated += len(rewards)
        tokens += rollouts.n_tokens
        surprisal -= float((rollouts.log_probs * rollouts.response_mask).sum())
        if reference is not None:
            ref_all = reference_log_probs(reference, rollouts, settings)
            drift += float(((rollouts.log_probs - ref_all) * rollouts.response_mask).sum())
            scored = replace(rollouts, log_probs=ref_all)
        reward_sum += float(rewards.sum())
        mixed += int(keep.sum())
        groups = mixed_here[: prompts - kept_groups]  # verl trims the batch to its size
        rows = torch.nonzero(torch.isin(rollouts.group, groups)).squeeze(1)
        if len(rows):
            parts.append(rows_of(rollouts, rows))
            if reference is not None:
                ref_parts.append(rows_of(scored, rows))
            part_rewards.append(rewards[rows])
            kept_groups += len(groups)
            kept_prompts += [drawn_prompts[g].prompt for g in groups.tolist()]
    t_gen = time.perf_counter() - t0
    metrics = {
        "reward_mean": reward_sum / generated,
        "pass_rate": mixed / generated,
        "samples": generated,
        "kept_samples": sum(len(p.texts) for p in parts),
        "surplus_groups": mixed_groups - kept_groups,  # mixed groups generated beyond the kept batch
        "rounds": rounds,
        "capped": int(kept_groups < prompts),
        "tokens": tokens,
        "generation_s": t_gen,
        "updates": 0,
        "grad_norm": float("nan"),
        "entropy": surprisal / max(1, tokens),
        "entropy_kept": float("nan"),
        "kl_ref_all": drift / max(1, tokens) if reference is not None else float("nan"),
        "kl_ref": float("nan"),
        "kept_prompts": kept_prompts,  # the prompt of each kept group (not a CSV column)
    }
    if not parts:
        metrics["step_s"] = time.perf_counter() - t0
        return metrics
    kept = concat(parts, tokenizer.pad_token_id)
    kept_rewards = torch.cat(part_rewards)
    adv = alg.advantages(settings.advantage_estimator, kept_rewards, kept.response_mask, kept.group)
    old_lp = kept.log_probs  # the sampling policy's own log-probs: the step starts on-policy
    metrics["entropy_kept"] = float(-(old_lp * kept.response_mask).sum() / kept.response_mask.sum())
    ref_lp = concat(ref_parts, tokenizer.pad_token_id).log_probs if ref_parts else None  # padded as ``kept``
    if ref_lp is not None:
        metrics["kl_ref"] = float(((old_lp - ref_lp) * kept.response_mask).sum() / kept.response_mask.sum())
    policy.train()
    norms = []
    order = torch.randperm(len(kept.texts), generator=generator).to(kept.group.device)
    for chunk in torch.tensor_split(order, settings.mini_batches):
        if len(chunk) == 0:
            continue
        optimizer.zero_grad()
        backward(policy, kept, adv, old_lp, ref_lp, chunk, settings)
        norms.append(float(torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.grad_clip)))
        optimizer.step()
        metrics["updates"] += 1
    metrics["grad_norm"] = sum(norms) / len(norms)
    metrics["step_s"] = time.perf_counter() - t0
    return metrics
