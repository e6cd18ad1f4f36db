#!/usr/bin/env bash
# BroRL companion, arm brorl, cpu profile: N=128 rollouts x 2 prompts per step, 6 RL steps, verl 0.9.1 on this
# machine's CPU (one node, one logical GPU). The overrides are the arm's committed ones (../../brorl/overrides.txt)
# plus the CPU delta of brorl_lib/verl_recipe/cpu/profile.py, at toy scale: a test harness that proves the
# recipe's data, reward, config, dynamic sampling, logs and resume, not a training backend.
#
# MODEL_PATH, DATA_DIR and CKPT_DIR come from the environment (launch_arm.sh says what each holds);
# MODEL_PATH here is a tiny model (python -m brorl_lib.verl_recipe.cpu.run prepares one).
# Logs go to $RUN_DIR/brorl (default <repo>/data/runs/verl/verl-cpu/brorl).
# After `make install`:
#   MODEL_PATH=... DATA_DIR=... CKPT_DIR=... bash recipes/brorl/cpu/brorl/launch.sh [more Hydra overrides]
# Re-running it resumes from the newest checkpoint until step 6 is checkpointed.
ARM=brorl
STOPS="6"  # one launch to the profile's last step
source "$(dirname "${BASH_SOURCE[0]}")/../profile.sh"  # the profile's run folder and environment
source "$(dirname "${BASH_SOURCE[0]}")/../../launch_arm.sh"
