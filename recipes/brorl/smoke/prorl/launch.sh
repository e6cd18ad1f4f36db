#!/usr/bin/env bash
# BroRL companion, arm prorl, smoke profile: N=16 rollouts x 512 prompts per step (the paper's), 2 RL steps with
# the paper's full response length (16,384 tokens), verl 0.9.1 on two nodes of 8 GPUs (a Ray cluster started on
# both, as for the full run). The overrides are the arm's committed ones (../../prorl/overrides.txt) plus the
# delta of brorl_lib/verl_recipe/smoke.py. Run it on real hardware after the BroRL arm's:
# `python -m brorl_lib.verl_recipe.smoke` kills it after step 1, resumes it and prints seconds per step, peak
# memory, TransferQueue's resident samples, step-0 validation and dynamic-sampling rounds.
#
# MODEL_PATH, DATA_DIR and CKPT_DIR come from the environment (launch_arm.sh says what each holds).
# Logs go to $RUN_DIR/prorl (default <repo>/data/runs/verl/smoke/prorl).
#   MODEL_PATH=... DATA_DIR=... CKPT_DIR=... bash recipes/brorl/smoke/prorl/launch.sh [more Hydra overrides]
ARM=prorl
STOPS="2"  # one launch to the profile's last step
source "$(dirname "${BASH_SOURCE[0]}")/../profile.sh"  # the profile's run folder and environment
source "$(dirname "${BASH_SOURCE[0]}")/../../launch_arm.sh"
