#!/usr/bin/env bash
# BroRL companion, arm brorl, smoke profile: N=512 rollouts x 128 prompts per step (the paper's), 2 RL steps with
# the paper's full response length (16,384 tokens), verl 0.9.1 on two nodes of 8 GPUs (a Ray cluster started on
# both, as for the full run). The overrides are the arm's committed ones (../../brorl/overrides.txt) plus the
# delta of brorl_lib/verl_recipe/smoke.py. Run it on real hardware first, before the ProRL arm's:
# `python -m brorl_lib.verl_recipe.smoke` kills it after step 1, resumes it and prints seconds per step, peak
# memory, TransferQueue's resident samples, step-0 validation and dynamic-sampling rounds.
#
# MODEL_PATH, DATA_DIR and CKPT_DIR come from the environment (launch_arm.sh says what each holds).
# Logs go to $RUN_DIR/brorl (default <repo>/data/runs/verl/smoke/brorl).
#   MODEL_PATH=... DATA_DIR=... CKPT_DIR=... bash recipes/brorl/smoke/brorl/launch.sh [more Hydra overrides]
ARM=brorl
STOPS="2"  # one launch to the profile's last step
source "$(dirname "${BASH_SOURCE[0]}")/../profile.sh"  # the profile's run folder and environment
source "$(dirname "${BASH_SOURCE[0]}")/../../launch_arm.sh"
