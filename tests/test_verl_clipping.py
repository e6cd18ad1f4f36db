"""Clipping that binds: verl's own PPO loss (core_algos) with each recipe arm's composed actor config.

A step whose probability ratio leaves the clip range must report ``pg_clipfrac > 0`` and a loss that changes
when clipping is disabled or ``clip_ratio_high`` moves, so a recipe whose clip settings never reached verl's loss
fails here. Test setting (ours): ratios of 0.7, 1.0, 1.275 and 1.5 on tokens of positive and negative advantage.
That verl's actor passes the same config to this function in a full launch is the CPU run's part."""

import math

import pytest
import torch

from brorl_lib.verl_recipe import configs, record

RATIOS = (0.7, 1.0, 1.275, 1.5)  # below 1 - 0.2, inside, between 1.27 and 1.28, above 1 + 0.28


def actor_config(arm: str, **override):
    from verl.utils.config import omega_conf_to_dataclass

    ov = record.profile_arms()[arm][1] + [f"actor_rollout_ref.actor.{k}={v}" for k, v in override.items()]
    return omega_conf_to_dataclass(configs.compose(ov).actor_rollout_ref.actor)


def policy_loss(actor):
    """verl's policy loss of the arm's loss mode on one step: every ratio in RATIOS, advantage +1 and -1."""
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    ratio = torch.tensor([RATIOS, RATIOS], dtype=torch.float64)
    old = torch.full_like(ratio, math.log(0.25))
    adv = torch.tensor([[1.0] * len(RATIOS), [-1.0] * len(RATIOS)], dtype=torch.float64)
    mask = torch.ones_like(ratio)
    fn = get_policy_loss_fn(actor.policy_loss.loss_mode)
    loss, metrics = fn(old, old + ratio.log(), adv, mask, actor.loss_agg_mode, actor)
    return loss.item(), metrics


@pytest.mark.parametrize("arm", ["prorl", "brorl"])
def test_the_recipes_clip_range_binds_in_verls_loss(arm):
    actor = actor_config(arm)
    assert (actor.clip_ratio_low, actor.clip_ratio_high) == (configs.CLIP_LOW, configs.CLIP_HIGH)
    loss, metrics = policy_loss(actor)
    # clipped: ratio 1.5 with A > 0 (above 1 + 0.28) and ratio 0.7 with A < 0 (below 1 - 0.2): 2 of 8 tokens
    assert metrics["actor/pg_clipfrac"] == pytest.approx(2 / 8)
    unclipped, off = policy_loss(actor_config(arm, clip_ratio_low=1.0, clip_ratio_high=1e6))
    assert off["actor/pg_clipfrac"] == 0 and unclipped != pytest.approx(loss)
    # the exact clip-high value reaches the loss: 0.27 clips the 1.275 token, 0.28 does not
    lower, m27 = policy_loss(actor_config(arm, clip_ratio_high=0.27))
    assert m27["actor/pg_clipfrac"] == pytest.approx(3 / 8) and lower != pytest.approx(loss)
