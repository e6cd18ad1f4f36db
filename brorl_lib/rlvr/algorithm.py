"""The paper's RL pieces (§3.1), taken from verl's `core_algos`: group-baseline advantages, the
clip-higher PPO loss with token-mean aggregation, an optional KL term, dynamic sampling, and the
square-root learning-rate rule of §4.2.1."""

from __future__ import annotations

from functools import cache

import numpy as np
import torch
from transformers import PreTrainedModel
from verl.trainer.ppo import core_algos
from verl.workers.config.actor import ActorConfig

from brorl_lib.core.validation import check_choice, check_range
from brorl_lib.rlvr.sampling import Rollouts, positions

ADVANTAGE_ESTIMATORS = ("reinforce_plus_plus_baseline", "grpo")  # ProRLv2 uses the first (paper §3.1)


def response_log_probs(model: PreTrainedModel, rollouts: Rollouts, temperature: float) -> torch.Tensor:
    """Log-prob of every response token given its prompt and the tokens before it, at ``temperature``."""
    ids = torch.cat([rollouts.prompt_ids, rollouts.response_ids], 1)
    mask = torch.cat([rollouts.prompt_mask, rollouts.response_mask], 1)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions(mask)).logits
    start = rollouts.prompt_ids.shape[1] - 1
    logits = logits[:, start : start + rollouts.response_ids.shape[1]].float() / temperature
    logp = torch.log_softmax(logits, -1).gather(2, rollouts.response_ids[:, :, None]).squeeze(2)
    return logp * rollouts.response_mask


def token_level_rewards(rewards: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """An outcome reward placed on each response's last token (verl's convention)."""
    out = torch.zeros_like(response_mask, dtype=torch.float32)
    last = response_mask.sum(1).clamp(min=1) - 1
    out[torch.arange(len(rewards), device=out.device), last] = rewards.float()
    return out


def advantages(estimator: str, rewards: torch.Tensor, response_mask: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """Per-token advantages from verl: reward minus its group's mean (then normalised as verl does)."""
    check_choice("advantage_estimator", estimator, ADVANTAGE_ESTIMATORS)
    tlr = token_level_rewards(rewards, response_mask)
    index = group.cpu().numpy()  # verl groups by hashable ids, as the trainer's uid array
    if estimator == "grpo":
        adv, _ = core_algos.compute_grpo_outcome_advantage(tlr, response_mask, index=index)
    else:
        adv, _ = core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(tlr, response_mask, index=index)
    return adv


def dynamic_sampling(rewards: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """Rows to keep: those whose group's rewards are not all equal (DAPO's filter, paper §3.1)."""
    r, g = rewards.cpu().numpy(), group.cpu().numpy()
    varied = {k: np.ptp(r[g == k]) > 0 for k in np.unique(g)}
    return torch.tensor([varied[k] for k in g], dtype=torch.bool, device=rewards.device)


@cache
def _actor_config(clip_low: float, clip_high: float, rollout_n: int) -> ActorConfig:
    return ActorConfig(
        strategy="fsdp",
        rollout_n=rollout_n,
        ppo_micro_batch_size_per_gpu=1,
        clip_ratio_low=clip_low,
        clip_ratio_high=clip_high,
        loss_agg_mode="token-mean",
    )


def policy_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    adv: torch.Tensor,
    response_mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    rollout_n: int,
) -> tuple[torch.Tensor, dict]:
    """verl's vanilla PPO-clip loss with clip-higher (1 - clip_low, 1 + clip_high), token-mean."""
    check_range("clip_low", clip_low, low=0.0, high=1.0)
    check_range("clip_high", clip_high, low=0.0)
    return core_algos.compute_policy_loss_vanilla(
        old_log_prob, log_prob, adv, response_mask, "token-mean", config=_actor_config(clip_low, clip_high, rollout_n)
    )


def kl_loss(
    log_prob: torch.Tensor, ref_log_prob: torch.Tensor, response_mask: torch.Tensor, kind: str = "low_var_kl"
) -> torch.Tensor:
    """verl's KL estimator to a reference policy, token-mean."""
    return core_algos.agg_loss(core_algos.kl_penalty(log_prob, ref_log_prob, kind), response_mask, "token-mean")


def pass_rate(keep: torch.Tensor) -> float:
    """Share of generated samples that survive dynamic sampling."""
    return float(np.mean(keep.cpu().numpy())) if len(keep) else 0.0
