#!/usr/bin/env bash
# BroRL companion, arm brorl (paper §4.2.1): N=512 rollouts x 128 prompts per step, 191 RL steps, verl 0.9.1,
# on the paper's 64 GPUs as 8 nodes x 8 GPUs (the paper does not state the layout: 8 x 8 is our reading).
# Its Hydra overrides are overrides.txt beside this script, and config.yaml is verl's ppo_trainer.yaml composed
# with them; `python -m brorl_lib.verl_recipe.record` writes both, launch_arm.sh in the folder above runs them.
#
# MODEL_PATH, DATA_DIR and CKPT_DIR come from the environment (launch_arm.sh says what each holds).
# Logs go to $RUN_DIR/brorl (default <repo>/data/runs/verl/brorl-repro/brorl).
# On the Ray head node, after the cluster, preflight and smoke steps of recipes/brorl/README.md:
#   MODEL_PATH=... DATA_DIR=... CKPT_DIR=... bash recipes/brorl/brorl/launch.sh [more Hydra overrides]
# It trains in stops at the arm's Table 1 steps, one launch of verl each, so each stop's checkpoint is kept;
# re-running it skips the stops already checkpointed and resumes from the newest checkpoint.
ARM=brorl
STOPS="107 134 191"  # Table 1's rows of this arm, then its last step
source "$(dirname "${BASH_SOURCE[0]}")/../profile.sh"  # the profile's run folder and environment
source "$(dirname "${BASH_SOURCE[0]}")/../launch_arm.sh"
