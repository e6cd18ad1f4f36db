#!/usr/bin/env bash
#SBATCH --job-name=brorl-arm
#SBATCH --nodes=8
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --mem=0
#SBATCH --time=48:00:00
#SBATCH --exclusive
#SBATCH --output=slurm-%x-%j.out
# BroRL companion: a Slurm batch job that starts a Ray cluster on its nodes, the head first and then one worker per
# other node (as verl's docs/start/multinode.rst, "Launch via Slurm", and its examples/slurm/ray_on_slurm.slurm do),
# then, on the head, with the profile
#   cluster  preflight (every node included), then the arm's launch script, recipes/brorl/<arm>/launch.sh (8 nodes)
#   smoke    the smoke command, python -m brorl_lib.verl_recipe.smoke --arms ARM (2 nodes: sbatch --nodes=2 ...):
#            preflight, a launch killed after checkpoint 1, the resume, the report; the same route as without Slurm
# Submit from the repository root, which must be at the same path on every node (a shared filesystem):
#   MODEL_PATH=... DATA_DIR=... CKPT_DIR=... sbatch recipes/brorl/slurm/run_arm.sh ARM [PROFILE] [Hydra overrides]
# ARM is prorl or brorl; Hydra overrides are for the cluster profile only. The job's node count and GPUs per node
# must equal the arm's trainer.nnodes and trainer.n_gpus_per_node, checked before Ray starts.
# The #SBATCH values above are our choices, each overridden on sbatch's command line: --cpus-per-task 64 (8 a GPU:
# vLLM, the reward workers' Math-Verify pools, data loading; give the node's cores), --mem=0 (all of each node's
# memory, Slurm's meaning of 0), --time 48 h (a common partition limit: a cluster arm resumes from its newest
# checkpoint when re-submitted; the smoke needs the hours docs/gpu-and-clusters.md gives).
# Optional variables: NET_IFACE (the network interface Ray, NCCL and Gloo use, e.g. ib0 or eth0: each node's Ray
# address is its IPv4 address there, and NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME default to it; unset: the
# first IPv4 address `hostname --all-ip-addresses` gives, never an IPv6 one), PYTHON (default python3), RAY
# (default ray), RAY_PORT (default 6379, Ray's own), RAY_NUM_CPUS (CPUs each node offers Ray; default
# SLURM_CPUS_PER_TASK), RAY_START_ARGS (more options for every node's `ray start`), RAY_HEAD_ARGS (more for the
# head's only, e.g. --include-dashboard=false), PREFLIGHT_SKIP (checks to skip,
# comma-separated), REPO_ROOT (default: the directory sbatch ran in), RAY_START_WAIT_S (seconds after the head's
# start before the job asks whether it answers, default 10 as in verl's Slurm example), RAY_JOIN_WAIT_S (how long
# the job waits for every node to join, default 300: our choice), RAY_AUTH_MODE and RAY_AUTH_TOKEN (Ray's; default:
# token authentication with a new token for the job).
set -euo pipefail
usage="usage: sbatch recipes/brorl/slurm/run_arm.sh ARM [PROFILE] [Hydra overrides]"
ARM="${1:?$usage}"
PROFILE="${2:-cluster}"
shift $(($# < 2 ? $# : 2))
REPO_ROOT="${REPO_ROOT:-${SLURM_SUBMIT_DIR:-$(pwd)}}"
fail() { echo "[brorl] $1" >&2; exit "${2:-2}"; }
case "$ARM" in prorl | brorl) ;; *) fail "ARM=$ARM is not allowed: prorl or brorl ($usage)" ;; esac
case "$PROFILE" in
  cluster) SCRIPT="$REPO_ROOT/recipes/brorl/$ARM/launch.sh" ;;
  smoke) SCRIPT="$REPO_ROOT/recipes/brorl/smoke/$ARM/launch.sh" ;;
  *) fail "PROFILE=$PROFILE is not allowed: cluster or smoke ($usage)" ;;
esac
[[ "$PROFILE" != smoke || $# -eq 0 ]] || fail "Hydra overrides ($*) are not allowed with PROFILE=smoke: the smoke runs its recorded overrides"
[[ -f "$SCRIPT" ]] || fail "no $SCRIPT: submit from the repository root or set REPO_ROOT"
OVERRIDES="$(dirname "$SCRIPT")/overrides.txt"
want_nodes=$(sed -n 's/^trainer\.nnodes=//p' "$OVERRIDES")
want_gpus=$(sed -n 's/^trainer\.n_gpus_per_node=//p' "$OVERRIDES")
if [[ "${SLURM_JOB_NUM_NODES:-}" != "$want_nodes" || "${SLURM_GPUS_ON_NODE:-}" != "$want_gpus" ]]; then
  fail "the job has ${SLURM_JOB_NUM_NODES:-?} node(s) x ${SLURM_GPUS_ON_NODE:-?} GPU(s); $OVERRIDES wants\
 trainer.nnodes=$want_nodes x trainer.n_gpus_per_node=$want_gpus: sbatch --nodes=$want_nodes --gpus-per-node=$want_gpus"
fi
NUM_CPUS="${RAY_NUM_CPUS:-${SLURM_CPUS_PER_TASK:-}}"
[[ "$NUM_CPUS" =~ ^[1-9][0-9]*$ ]] || fail "RAY_NUM_CPUS=${NUM_CPUS:-} is not allowed: a positive integer (or sbatch --cpus-per-task)"
PYTHON="${PYTHON:-python3}"
RAY="${RAY:-ray}"
PORT="${RAY_PORT:-6379}"
read -r -a ray_args <<< "${RAY_START_ARGS:-}"
read -r -a head_args <<< "${RAY_HEAD_ARGS:-}"
# Ray 2.60 turns token authentication on for `ray start --head` when ~/.ray/auth_token exists, and a driver that
# joins by address (RAY_ADDRESS: preflight, the smoke, verl) then finds no token and cannot connect. The job says
# which: token authentication with a token of its own, passed to every `ray start` and driver through the
# environment (RAY_AUTH_MODE, RAY_AUTH_TOKEN, Ray's variables), unless they are set already.
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-token}"
if [[ "$RAY_AUTH_MODE" == token && -z "${RAY_AUTH_TOKEN:-}${RAY_AUTH_TOKEN_PATH:-}" ]]; then
  RAY_AUTH_TOKEN=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')  # 64 hex digits, as Ray's own generator
  export RAY_AUTH_TOKEN
fi
if [[ -n "${NET_IFACE:-}" ]]; then  # NCCL's and Gloo's sockets on the interface Ray uses, unless set already
  export NCCL_SOCKET_IFNAME="${NCCL_SOCKET_IFNAME:-$NET_IFACE}" GLOO_SOCKET_IFNAME="${GLOO_SOCKET_IFNAME:-$NET_IFACE}"
fi
ipv4_of() {  # node $1's IPv4 address: on NET_IFACE when set, else the first that `hostname --all-ip-addresses` gives
  local found
  if [[ -n "${NET_IFACE:-}" ]]; then
    found=$(srun --nodes=1 --ntasks=1 -w "$1" ip -4 -o addr show dev "$NET_IFACE" | awk '{print $4}' | cut -d/ -f1) || true
  else
    found=$(srun --nodes=1 --ntasks=1 -w "$1" hostname --all-ip-addresses) || true
  fi
  for address in $found; do
    [[ "$address" =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]] && echo "$address" && return 0
  done
  fail "node $1 has no IPv4 address${NET_IFACE:+ on NET_IFACE=$NET_IFACE} (found: ${found:-none}): set NET_IFACE to\
 the interface its nodes reach each other on (ip -4 addr lists them)" 1
}
mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
HEAD="${NODES[0]}"
HEAD_IP=$(ipv4_of "$HEAD")
export RAY_ADDRESS="$HEAD_IP:$PORT"  # preflight, the smoke and verl's ray.init in launch_arm.sh join this cluster
echo "[brorl] arm $ARM, profile $PROFILE: Ray head $HEAD ($RAY_ADDRESS), ${#NODES[@]} node(s), $NUM_CPUS CPUs each"
steps=()  # the srun steps running `ray start --block`; Slurm ends a step's processes when the step ends
trap '[[ ${#steps[@]} -eq 0 ]] || kill "${steps[@]}" 2>/dev/null || true' EXIT
nodes_alive() {  # how many nodes the Ray cluster at $RAY_ADDRESS counts alive (0 while it does not answer)
  local n
  n=$("$PYTHON" -c "import ray; ray.init(address='$RAY_ADDRESS', logging_level='ERROR');
print(sum(n['Alive'] for n in ray.nodes()))" 2>/dev/null | tail -n 1) || true
  [[ "$n" =~ ^[0-9]+$ ]] && echo "$n" || echo 0
}
wait_for_nodes() {  # until $1 node(s) are alive; fails at once when a `ray start` step has ended
  local deadline=$((SECONDS + ${RAY_JOIN_WAIT_S:-300})) alive
  while true; do
    for step in "${steps[@]}"; do
      kill -0 "$step" 2>/dev/null || fail "a \`ray start\` step ended, and its node's Ray processes with it: see\
 its output above (a \`ray start\` that returns, as one without --block does, ends its node's Ray)" 1
    done
    alive=$(nodes_alive)
    [[ "$alive" -ge "$1" ]] && return 0
    ((SECONDS < deadline)) || fail "$alive of $1 node(s) joined the Ray cluster at $RAY_ADDRESS in ${RAY_JOIN_WAIT_S:-300} s" 1
    sleep 5
  done
}
srun --nodes=1 --ntasks=1 -w "$HEAD" "$RAY" start --head --node-ip-address="$HEAD_IP" --port="$PORT" \
  --num-gpus="$want_gpus" --num-cpus="$NUM_CPUS" "${ray_args[@]}" "${head_args[@]}" --block &
steps+=($!)
sleep "${RAY_START_WAIT_S:-10}"
wait_for_nodes 1  # the head answers before any worker tries to join it
for node in "${NODES[@]:1}"; do
  node_ip=$(ipv4_of "$node")
  srun --nodes=1 --ntasks=1 -w "$node" "$RAY" start --address="$RAY_ADDRESS" --node-ip-address="$node_ip" \
    --num-gpus="$want_gpus" --num-cpus="$NUM_CPUS" "${ray_args[@]}" --block &
  steps+=($!)
done
wait_for_nodes "${#NODES[@]}"
cd "$REPO_ROOT"
if [[ "$PROFILE" == smoke ]]; then
  "$PYTHON" -m brorl_lib.verl_recipe.smoke --arms "$ARM" --skip "${PREFLIGHT_SKIP:-}"
else
  "$PYTHON" -m brorl_lib.verl_recipe.preflight --arms "$ARM" --profile "$PROFILE" --skip "${PREFLIGHT_SKIP:-}"
  bash "$SCRIPT" "$@"
fi
