#!/usr/bin/env bash
#SBATCH --job-name=brorl-arm
#SBATCH --nodes=8
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --exclusive
#SBATCH --output=slurm-%x-%j.out
# BroRL companion: a Slurm batch job that starts a Ray cluster on its nodes, the head first and then one worker per
# other node (as verl's docs/start/multinode.rst, "Launch via Slurm", and its examples/slurm/ray_on_slurm.slurm do),
# runs preflight on the head (every node included), then one arm's launch script there. Submit from the repository
# root, which must be at the same path on every node (a shared filesystem), with the launch variables set:
#   MODEL_PATH=... DATA_DIR=... CKPT_DIR=... sbatch recipes/brorl/slurm/run_arm.sh ARM [PROFILE] [Hydra overrides]
#   ARM      prorl or brorl
#   PROFILE  cluster (default: recipes/brorl/<arm>/launch.sh, 8 nodes) or smoke (recipes/brorl/smoke/<arm>/launch.sh,
#            2 nodes: sbatch --nodes=2 ...)
# The job's node count and GPUs per node must equal the arm's trainer.nnodes and trainer.n_gpus_per_node, checked
# before Ray starts. Optional: PYTHON (default python3), RAY (default ray), RAY_PORT (default 6379, Ray's own),
# PREFLIGHT_SKIP (preflight checks to skip, comma-separated), REPO_ROOT (default: the directory sbatch ran in),
# RAY_START_WAIT_S (seconds after the head's start before the job asks whether it answers, default 10 as in verl's
# Slurm example; workers start once it does).
# Re-submitting resumes the arm from its newest checkpoint (launch_arm.sh).
set -euo pipefail
usage="usage: sbatch recipes/brorl/slurm/run_arm.sh ARM [PROFILE] [Hydra overrides]"
ARM="${1:?$usage}"
PROFILE="${2:-cluster}"
shift $(($# < 2 ? $# : 2))
REPO_ROOT="${REPO_ROOT:-${SLURM_SUBMIT_DIR:-$(pwd)}}"
case "$ARM" in prorl | brorl) ;; *) echo "[brorl] ARM=$ARM is not allowed: prorl or brorl ($usage)" >&2 && exit 2 ;; esac
case "$PROFILE" in
  cluster) SCRIPT="$REPO_ROOT/recipes/brorl/$ARM/launch.sh" ;;
  smoke) SCRIPT="$REPO_ROOT/recipes/brorl/smoke/$ARM/launch.sh" ;;
  *) echo "[brorl] PROFILE=$PROFILE is not allowed: cluster or smoke ($usage)" >&2 && exit 2 ;;
esac
[[ -f "$SCRIPT" ]] || { echo "[brorl] no $SCRIPT: submit from the repository root or set REPO_ROOT" >&2; exit 2; }
OVERRIDES="$(dirname "$SCRIPT")/overrides.txt"
want_nodes=$(sed -n 's/^trainer\.nnodes=//p' "$OVERRIDES")
want_gpus=$(sed -n 's/^trainer\.n_gpus_per_node=//p' "$OVERRIDES")
if [[ "${SLURM_JOB_NUM_NODES:-}" != "$want_nodes" || "${SLURM_GPUS_ON_NODE:-}" != "$want_gpus" ]]; then
  echo "[brorl] the job has ${SLURM_JOB_NUM_NODES:-?} node(s) x ${SLURM_GPUS_ON_NODE:-?} GPU(s); $OVERRIDES wants" \
    "trainer.nnodes=$want_nodes x trainer.n_gpus_per_node=$want_gpus: sbatch --nodes=$want_nodes" \
    "--gpus-per-node=$want_gpus" >&2
  exit 2
fi
PYTHON="${PYTHON:-python3}"
RAY="${RAY:-ray}"
PORT="${RAY_PORT:-6379}"
mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
HEAD="${NODES[0]}"
HEAD_IP=$(srun --nodes=1 --ntasks=1 -w "$HEAD" hostname --ip-address | awk '{print $1}')
export RAY_ADDRESS="$HEAD_IP:$PORT"  # preflight, and verl's ray.init in launch_arm.sh, join this cluster
echo "[brorl] arm $ARM, profile $PROFILE: Ray head $HEAD ($RAY_ADDRESS), ${#NODES[@]} node(s)"
nodes_alive() {  # how many nodes the Ray cluster at $RAY_ADDRESS counts alive (0 while it does not answer)
  local n
  n=$("$PYTHON" -c "import ray; ray.init(address='$RAY_ADDRESS', logging_level='ERROR');
print(sum(n['Alive'] for n in ray.nodes()))" 2>/dev/null | tail -n 1) || true
  [[ "$n" =~ ^[0-9]+$ ]] && echo "$n" || echo 0
}
wait_for_nodes() {  # our choice: up to 5 minutes for $1 node(s) to be alive
  for _ in $(seq 60); do
    alive=$(nodes_alive)
    [[ "$alive" -ge "$1" ]] && return 0
    sleep 5
  done
  return 0
}
alive=0
srun --nodes=1 --ntasks=1 -w "$HEAD" "$RAY" start --head --node-ip-address="$HEAD_IP" --port="$PORT" \
  --num-gpus="$want_gpus" --block &
sleep "${RAY_START_WAIT_S:-10}"
wait_for_nodes 1  # the head answers before any worker tries to join it
for node in "${NODES[@]:1}"; do
  srun --nodes=1 --ntasks=1 -w "$node" "$RAY" start --address="$RAY_ADDRESS" --num-gpus="$want_gpus" --block &
done
wait_for_nodes "${#NODES[@]}"
if [[ "$alive" -lt "${#NODES[@]}" ]]; then
  echo "[brorl] $alive of ${#NODES[@]} node(s) joined the Ray cluster at $RAY_ADDRESS" >&2
  exit 1
fi
cd "$REPO_ROOT"
"$PYTHON" -m brorl_lib.verl_recipe.preflight --arms "$ARM" --profile "$PROFILE" --skip "${PREFLIGHT_SKIP:-}"
bash "$SCRIPT" "$@"
