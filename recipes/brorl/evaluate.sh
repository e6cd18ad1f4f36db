#!/usr/bin/env bash
# BroRL companion: the paper's evaluation (Appendix D) of the starting checkpoint and of both arms'
# checkpoints: pass@1 from 16 samples per instance, temperature 0.6, top-p 0.95, responses up to
# 32768 tokens, on the six math, four code and eleven Reasoning Gym benchmarks.
# Written by hand; tests/test_verl_record.py checks its protocol and steps against brorl_lib/verl_recipe.
#
#   bash recipes/brorl/evaluate.sh [baseline] [prorl] [brorl] [more arguments for python -m brorl_lib.evaluation]
#
# Without a name, all three in this order. The checkpoints and their labels in the results:
#   baseline  nvidia/Nemotron-Research-Reasoning-Qwen-1.5B at commit c62ac5e70bd5, label baseline-prorlv2-3k
#             (Table 1's Baseline: ProRLv2 after 3000 steps, the checkpoint both arms continue)
#   prorl     $CKPT_DIR/prorl/global_step_$PRORL_STEP/actor, label prorl-step<step> (default step 535)
#   brorl     $CKPT_DIR/brorl/global_step_$BRORL_STEP/actor, label brorl-step<step> (default step 191)
# Environment: CKPT_DIR (as for the launch scripts; needed for the arms), EVAL_DIR (results; default
# <repo>/data/runs/eval, where notebook 05 reads them for Tables 3-5 and the paired t-test of paper
# §4.2.2), MERGED_DIR (Hugging Face folders merged from verl's checkpoints; default $CKPT_DIR/merged),
# PRORL_STEP, BRORL_STEP (the step evaluated; default: the arm's last Table 1 row).
# An interrupted evaluation continues where it stopped when re-run.
set -euo pipefail
REPO_ROOT="${REPO_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
EVAL_DIR="${EVAL_DIR:-$REPO_ROOT/data/runs/eval}"
PRORL_STEP="${PRORL_STEP:-535}"
BRORL_STEP="${BRORL_STEP:-191}"
PYTHON="${PYTHON:-python3}"
targets=()
extra=()
for a in "$@"; do
  case "$a" in
    baseline|prorl|brorl) targets+=("$a") ;;
    *) extra+=("$a") ;;
  esac
done
[[ ${#targets[@]} -gt 0 ]] || targets=(baseline prorl brorl)
cd "$REPO_ROOT"

evaluate() {  # evaluate MODEL LABEL [arguments]: the paper's protocol, every benchmark
  local model="$1" label="$2"
  shift 2
  echo "[brorl] evaluating $label ($model) into $EVAL_DIR" >&2
  "$PYTHON" -m brorl_lib.evaluation --model "$model" --label "$label" --benchmarks all --samples 16 \
    --temperature 0.6 --top-p 0.95 --max-tokens 32768 --out "$EVAL_DIR" --no-responses \
    "$@" ${extra[@]+"${extra[@]}"}
}

merged() {  # merged ARM STEP: prints the Hugging Face folder of ARM's checkpoint at STEP (merged once)
  local src="${CKPT_DIR:?set CKPT_DIR (see the header of $0)}/$1/global_step_$2/actor"
  local dst="${MERGED_DIR:-$CKPT_DIR/merged}/$1-step$2"
  if [[ ! -f "$dst/config.json" ]]; then
    "$PYTHON" -m verl.model_merger merge --backend fsdp --local_dir "$src" --target_dir "$dst" >&2
  fi
  echo "$dst"
}

for target in "${targets[@]}"; do
  case "$target" in
    baseline) evaluate nvidia/Nemotron-Research-Reasoning-Qwen-1.5B baseline-prorlv2-3k --revision c62ac5e70bd578a9235aa9d8e11fff2f1f63d4a0 ;;
    prorl) model=$(merged prorl "$PRORL_STEP"); evaluate "$model" "prorl-step$PRORL_STEP" ;;
    brorl) model=$(merged brorl "$BRORL_STEP"); evaluate "$model" "brorl-step$BRORL_STEP" ;;
  esac
done
