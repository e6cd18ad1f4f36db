"""One RL step: sample N rollouts per prompt, reward them with the verifiers (binary), drop all-equal
groups, and take PPO-clip updates over a fixed number of mini-batches (paper §3.1, §4.2.1). The PPO ratio's
old log-probs are the ones recorded while sampling (the same weights; no second forward pass)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from brorl_lib.core.validation import check_int, check_positive
from brorl_lib.rlvr import algorithm as alg
from brorl_lib.rlvr.sampling import Rollouts, generate
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

    def __post_init__(self) -> None:
        check_int("n_rollouts", self.n_rollouts, low=2)
        check_positive("temperature", self.temperature)
        check_int("max_new_tokens", self.max_new_tokens, low=1)
        check_int("mini_batches", self.mini_batches, low=1)
        check_positive("grad_clip", self.grad_clip)


def _rows(r: Rollouts, idx: torch.Tensor) -> Rollouts:
    return Rollouts(
        r.prompt_ids[idx],
        r.prompt_mask[idx],
        r.response_ids[idx],
        r.response_mask[idx],
        r.log_probs[idx],
        r.group[idx],
        [r.texts[i] for i in idx.tolist()],
    )


def rl_step(
    policy: PreTrainedModel,
    tokenizer: PreTrainedTokenizerFast,
    optimizer: torch.optim.Optimizer,
    prompts: list[LaptopInstance],
    settings: StepSettings,
    generator: torch.Generator,
    reference: PreTrainedModel | None = None,
) -> dict[str, float]:
    """Generate, score, filter and update; returns the step's metrics (rewards, pass rate, time, tokens)."""
    if not prompts:
        raise ValueError("rl_step needs at least one prompt")
    t0 = time.perf_counter()
    policy.eval()
    rollouts = generate(
        policy,
        tokenizer,
        [p.prompt for p in prompts],
        settings.n_rollouts,
        settings.max_new_tokens,
        settings.temperature,
        generator,
    )
    t_gen = time.perf_counter() - t0
    rewards = torch.tensor(
        [reward(prompts[g], text) for g, text in zip(rollouts.group.tolist(), rollouts.texts)],
        device=rollouts.group.device,
    )
    keep = alg.dynamic_sampling(rewards, rollouts.group)
    metrics = {
        "reward_mean": float(rewards.mean()),
        "pass_rate": alg.pass_rate(keep),
        "samples": len(rewards),
        "tokens": rollouts.n_tokens,
        "generation_s": t_gen,
        "updates": 0,
    }
    idx = torch.nonzero(keep).squeeze(1)
    if len(idx) == 0:
        metrics["step_s"] = time.perf_counter() - t0
        return metrics
    kept = _rows(rollouts, idx)
    adv = alg.advantages(settings.advantage_estimator, rewards[idx], kept.response_mask, kept.group)
    old_lp = kept.log_probs  # the sampling policy's own log-probs: the step starts on-policy
    with torch.no_grad():
        ref_lp = alg.response_log_probs(reference, kept, settings.temperature) if reference is not None else None
    policy.train()
    order = torch.randperm(len(idx), generator=generator).to(idx.device)
    for chunk in torch.tensor_split(order, settings.mini_batches):
        if len(chunk) == 0:
            continue
        part = _rows(kept, chunk)
        lp = alg.response_log_probs(policy, part, settings.temperature)
        loss, _ = alg.policy_loss(
            old_lp[chunk],
            lp,
            adv[chunk],
            part.response_mask,
            settings.clip_low,
            settings.clip_high,
            settings.n_rollouts,
        )
        if ref_lp is not None and settings.kl_coef > 0:
            loss = loss + settings.kl_coef * alg.kl_loss(lp, ref_lp[chunk], part.response_mask)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.grad_clip)
        optimizer.step()
        metrics["updates"] += 1
    metrics["step_s"] = time.perf_counter() - t0
    return metrics
