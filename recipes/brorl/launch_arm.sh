#!/usr/bin/env bash
# BroRL companion: the body every arm's launch.sh sources, after setting
#   ARM              the arm's name (its checkpoints go to trainer.default_local_dir, its logs to $ARM_DIR)
#   STOPS            the steps each launch of verl trains to, in order; each ends with a kept checkpoint
# and sourcing its profile's profile.sh, which sets
#   RUN_DIR_DEFAULT  where the arm's folder goes when RUN_DIR is not set (relative to the repository)
#   RAY_ENV          variables the launch exports that verl's Ray actors must see as well
#   TENSORBOARD_ROOT optional: TensorBoard's event files go to $TENSORBOARD_ROOT/$ARM instead of $ARM_DIR/tensorboard
# and, optionally, ARM_DIR (the arm's run folder itself). The Hydra overrides are the lines of overrides.txt
# beside the arm's launch.sh; each <NAME> in them is read from the environment (no quotes or backslashes in
# it), and the launch stops with status 2 unless each one used is set:
#   MODEL_PATH  local folder of the start model (the paper's: nvidia/Nemotron-Research-Reasoning-Qwen-1.5B at
#               commit c62ac5e70bd5)
#   DATA_DIR    folder holding train.parquet and val.parquet (notebook 05 writes them)
#   CKPT_DIR    folder for verl's checkpoints; each arm's go to $CKPT_DIR/<arm>
#   RUN_DIR     optional: the arm's folder (config, logs) is $RUN_DIR/<arm>
# Each launch of verl resumes from the newest checkpoint (trainer.resume_mode=auto in the overrides), validates
# before training only when it starts from step 0, and logs to the next segment file, logs/segment_NNN.jsonl
# (verl's file logger truncates its file on open).
# A stop already checkpointed is skipped. Extra Hydra overrides given to launch.sh follow the arm's.
set -euo pipefail
RECIPE_DIR="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
REPO_ROOT="${REPO_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
OVERRIDES="$RECIPE_DIR/overrides.txt"
overrides=()
while IFS= read -r line || [[ -n "$line" ]]; do
  for var in MODEL_PATH DATA_DIR CKPT_DIR; do
    [[ "$line" == *"<$var>"* ]] || continue
    [[ -n "${!var:-}" ]] || { echo "[brorl] set $var (see the header of $0)" >&2; exit 2; }
    [[ "${!var}" != *[\'\\]* ]] || { echo "[brorl] $var must hold no quotes or backslashes" >&2; exit 2; }
    line="${line//<$var>/${!var}}"
  done
  overrides+=("$line")
  [[ "$line" != trainer.default_local_dir=* ]] || CKPT_ARM="${line#*=}"
done < "$OVERRIDES"
CKPT_ARM="${CKPT_ARM//\'/}"
ARM_DIR="${ARM_DIR:-${RUN_DIR:-$REPO_ROOT/$RUN_DIR_DEFAULT}/$ARM}"
mkdir -p "$ARM_DIR/logs"
# verl's TensorBoard logger (trainer.logger has tensorboard) writes to TENSORBOARD_DIR, the arm's tensorboard/
# folder unless the profile sets TENSORBOARD_ROOT (relative to the repository); each launch adds an event file,
# so TensorBoard shows the segments as one run.
TENSORBOARD_DIR="${TENSORBOARD_ROOT:+$REPO_ROOT/$TENSORBOARD_ROOT/$ARM}"
export TENSORBOARD_DIR="${TENSORBOARD_DIR:-$ARM_DIR/tensorboard}"
[[ "$RECIPE_DIR" -ef "$ARM_DIR" ]] || cp "$RECIPE_DIR/config.yaml" "$OVERRIDES" "$ARM_DIR/"
PYTHON="${PYTHON:-python3}"
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"
cd "$REPO_ROOT"
for STOP in $STOPS; do
  DONE=$(cat "$CKPT_ARM/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)
  (( DONE < STOP )) || continue
  SEGMENT=$(find "$ARM_DIR/logs" -maxdepth 1 -name 'segment_*.jsonl' | wc -l)
  LOG_FILE=$(printf '%s/logs/segment_%03d.jsonl' "$ARM_DIR" "$SEGMENT")
  export VERL_FILE_LOGGER_PATH="$LOG_FILE"
  ray_env=("+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH='$LOG_FILE'"
    "+ray_kwargs.ray_init.runtime_env.env_vars.PYTHONPATH='$REPO_ROOT'"
    "+ray_kwargs.ray_init.runtime_env.env_vars.TENSORBOARD_DIR='$TENSORBOARD_DIR'")
  for var in $RAY_ENV; do
    ray_env+=("+ray_kwargs.ray_init.runtime_env.env_vars.$var='${!var}'")
  done
  # validation before training only from step 0: a resumed launch starts where the launch before it ended (it
  # validated its last step) or between two validation points (trainer.test_freq)
  resumed=()
  (( DONE == 0 )) || resumed=("trainer.val_before_train=false")
  echo "[brorl] arm $ARM, steps $DONE to $STOP, segment $SEGMENT, log $LOG_FILE"
  "$PYTHON" -m verl.trainer.main_ppo "${overrides[@]}" trainer.total_training_steps="$STOP" ${resumed[@]+"${resumed[@]}"} \
    "${ray_env[@]}" "$@" 2>&1 | tee -a "$ARM_DIR/console.log"
done
