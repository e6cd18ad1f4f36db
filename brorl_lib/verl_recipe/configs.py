"""The two arms as verl 0.9.1 configs, composed with Hydra against verl's own ``ppo_trainer.yaml``.

Both arms share one ProRLv2-like base (paper §3.1): PPO-clip with clip-higher, token-mean loss,
the REINFORCE++-baseline advantage, a KL loss to the reference policy, dynamic sampling
(``algorithm.filter_groups``), truncated importance sampling, 16k responses. The BroRL paper gives
none of these numbers; each constant below says where it comes from
(docs/prorl-background.md#values-the-brorl-paper-omits) or that it is our choice. The arms differ only in N,
prompts per step, the PPO mini-batch size (the mini-batch *count* per step is the same) and the learning
rate, scaled by sqrt(samples-per-step ratio).

Composing against verl's config directory means a misspelt key fails here, as it would in
``python -m verl.trainer.main_ppo``; ``validate`` then runs verl's own ``validate_config``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import yaml

from brorl_lib.core.params import LEARNING_RATE, SEED_MAX, NotebookConfig, param
from brorl_lib.core.params import TEMPERATURE as TEMPERATURE_RANGE
from brorl_lib.core.validation import check_choice, check_int
from brorl_lib.facts import reported as paper
from brorl_lib.facts.arms import Arm
from brorl_lib.facts.setup import scaled_learning_rate

# The paper's arms (§4.2.1): rollouts per prompt N and prompts per RL step.
PAPER_ARMS: dict[str, tuple[int, int]] = {method.lower(): shape for method, shape in paper.arm_shapes().items()}
BASE_ARM = "prorl"  # the learning rate is given for this arm and scaled for the other

# --- values the BroRL paper omits (paper §3.1; docs/prorl-background.md#values-the-brorl-paper-omits) ---
BASE_LR = 1e-6  # ProRLv2 public recipe (OpenRLHF train_prorlv2_math: actor lr 1e-6); ProRL v1 used 2e-6
# ProRL v1: batch 256 prompts, mini-batch 64, so 4 updates per rollout step (OpenRLHF's ProRLv2 script: 8; NeMo-RL's
# prorlv2.yaml via grpo_math_1B.yaml: 1)
PPO_MINI_BATCHES = 4
CLIP_LOW = 0.20  # ProRLv2 (Notion): epsilon_low
CLIP_HIGH = 0.28  # ProRLv2 (Notion): epsilon_high; NeMo RL prorlv2.yaml and OpenRLHF use 0.27, ProRL v1 0.4
ADV_ESTIMATOR = "reinforce_plus_plus_baseline"  # ProRLv2: group-mean baseline, then global-batch normalisation
LOSS_AGG_MODE = "token-mean"  # ProRLv2 / NeMo RL: token-level loss
KL_LOSS_COEF = 1e-4  # NeMo RL prorlv2.yaml reference_policy_kl_penalty; OpenRLHF init_kl_coef
KL_LOSS_TYPE = "k2"  # ProRLv2: k2 estimator. verl's k2 = (log-ratio)^2 / 2 has no clamp (ProRLv2 clamps to [-10, 10])
ROLLOUT_IS = "token"  # truncated importance sampling (paper §3.1): token-level weights
ROLLOUT_IS_THRESHOLD = "0.5_5.0"  # ICE-POP bounds [0.5, 5.0] of NeMo RL prorlv2.yaml and OpenRLHF's ProRLv2 script
FILTER_METRIC = "acc"  # dynamic sampling drops groups whose acc is all 0 or all 1 (DAPO; reward returns acc)
# Generation rounds a step may take before dynamic sampling gives up (DAPO's recipe: max_num_gen_batches 10).
# verl 0.9.1's V1 trainer ignores the key; guard.py (loaded by the launch scripts) enforces it.
MAX_GEN_BATCHES = 10
TEMPERATURE = 1.2  # ProRL v1 rollout temperature; ProRLv2 states none, its public recipes sample at 1.0
VAL_TEMPERATURE: float = paper.setting("eval_temperature")  # BroRL App. D (as ProRL's evaluation)
VAL_TOP_P: float = paper.setting("eval_top_p")  # BroRL App. D
VAL_SAMPLES: int = paper.setting("eval_samples_per_instance")  # BroRL App. D (here at the training length, not 32k)
MAX_RESPONSE_LENGTH: int = paper.setting("training_response_tokens")  # BroRL §4.2.1: the extended context
MAX_PROMPT_LENGTH = 2048  # our choice: the longest default Reasoning Gym prompt is ~1.2k tokens
TOKENS_PER_GPU = 2 * (MAX_PROMPT_LENGTH + MAX_RESPONSE_LENGTH)  # our choice: dynamic batches of 2 full sequences
GPU_MEMORY_UTILIZATION = 0.8  # our choice: vLLM's share of GPU memory between training phases
ROLLOUT_TP = 1  # our choice: a 1.5B model fits one GPU per vLLM replica
PROJECT = "brorl"  # trainer.project_name
# verl's own loggers (trainer.logger): the console, the JSONL file the notebook reads, and TensorBoard event files
# (launch_arm.sh points TENSORBOARD_DIR at the arm's folder). Our choice; W&B ("wandb") is opt-in: it needs an
# account and the network, so it is never on by default (recipes/brorl/README.md says how to add it).
LOGGERS = ("console", "file", "tensorboard")
REWARD_PATH = "pkg://brorl_lib.verl_recipe.rewards"  # verl imports it by module name (repo on PYTHONPATH)
MATH_VERIFY_BACKEND = "pool"  # see rewards.py: verl's process pool, safe in verl's reward threads
# The start model's revision: nvidia/Nemotron-Research-Reasoning-Qwen-1.5B at the commit its "main" branch
# (ProRLv2, 3000 steps) pointed to, as a third-party registry records it; "main" itself moves.
MODEL_REVISION = "c62ac5e70bd578a9235aa9d8e11fff2f1f63d4a0"
# Dynamic sampling's round cap through verl's custom-sampler hook (guard.py), loaded in the trainer only.
# verl hands a custom sampler none of the settings it gives its own buffer (trainer_base.py::_build_replay_buffer),
# so the sampler gets each as an interpolation of the key verl reads: whether the filter is on, its metric and round
# cap, the batch size, algorithm.filter_groups.max_inflight_gen_batches and trainer.v1.sampler.sync_refill_failed_groups
# (without them algorithm.filter_groups.enable=false and those two keys would do nothing).
SAMPLER_PATH = "pkg://brorl_lib.verl_recipe.guard"
SAMPLER_NAME = "BoundedReplayBuffer"
_SAMPLER_KWARGS = "trainer.v1.sampler.sampler_kwargs"
SAMPLER_OVERRIDES = (
    f"trainer.v1.sampler.custom_sampler.path={SAMPLER_PATH}",
    f"trainer.v1.sampler.custom_sampler.name={SAMPLER_NAME}",
    f"+{_SAMPLER_KWARGS}.filter_groups_enable=${{algorithm.filter_groups.enable}}",
    f"+{_SAMPLER_KWARGS}.filter_groups_metric=${{algorithm.filter_groups.metric}}",
    f"+{_SAMPLER_KWARGS}.max_num_gen_batches=${{algorithm.filter_groups.max_num_gen_batches}}",
    f"+{_SAMPLER_KWARGS}.train_batch_size=${{data.train_batch_size}}",
    f"+{_SAMPLER_KWARGS}.max_inflight_gen_batches=${{algorithm.filter_groups.max_inflight_gen_batches}}",
    f"+{_SAMPLER_KWARGS}.sync_refill_failed_groups=${{trainer.v1.sampler.sync_refill_failed_groups}}",
)
# TransferQueue's capacity in samples. verl's default (100,000) is below what a BroRL step (N=512 x 128
# prompts = 65,536 kept samples) holds with the groups in flight while it drains, and a put beyond it fails
# the group. Our rule: no cap (null, TransferQueue >= 0.1.11); a set cap must be at least
# STORAGE_MULTIPLE x N x P (the kept batch, one batch of groups in flight, headroom for uneven units).
STORAGE_SIZE = None
STORAGE_MULTIPLE = 3
# Checkpoints: each launch keeps only its newest (verl deletes older ones of the same launch after a save
# succeeds), and the launch scripts train in stops at the steps of the arm's Table 1 rows, so the checkpoint
# each stop ends with survives: those rows can be evaluated. About 21 GB each for the 1.5B model.
MAX_CKPT_TO_KEEP = 1
# The most steps a crash can lose, per arm, whatever Cluster.save_freq asks (our choice): a BroRL step is about 55 min
# on 64 GPUs (Table 1: 173.8 h / 191), so 3 steps are about 2.7 h or 175 GPU-hours, as ProRL's default 10 (2.5 h).
MAX_SAVE_FREQ = {"brorl": 3}

# A run's name is one folder name under data/runs/verl and build/verl: never ".", ".." or a path.
RUN_NAME = {
    "pattern": r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}",
    "pattern_doc": "one folder name: 1 to 100 letters, digits, '_', '.' and '-', starting with a letter or digit",
}
_SAFE = re.compile(r"^[A-Za-z0-9_./:@+-]*$")


def arm(name: str, n_rollouts: int, prompts_per_step: int, steps: int, mini_batches: int = PPO_MINI_BATCHES) -> Arm:
    """One of the paper's arms (``prorl`` or ``brorl``) as the recipe trains it: ``steps`` RL steps,
    ``mini_batches`` PPO mini-batches a step."""
    check_choice("arm", name, PAPER_ARMS)
    check_int(f"{name}_rollouts", n_rollouts, low=2)  # a group baseline needs >= 2 samples
    return Arm(name, n_rollouts, prompts_per_step, steps, mini_batches)


def mini_batch_prompts(arm: Arm) -> int:
    """verl's ``ppo_mini_batch_size``, counted in prompts (verl multiplies it by N)."""
    return arm.prompts_per_step // arm.mini_batches


def table1_stops(arm_name: str) -> list[int]:
    """Steps of the arm's Table 1 rows (ProRL +225, +535; BroRL +107, +134, +191), ascending."""
    t1 = paper.table1_arms()
    rows = t1[t1["method"].str.lower() == arm_name]
    if rows.empty:
        raise ValueError(f"arm={arm_name!r} is not allowed: Table 1 has rows for {sorted(PAPER_ARMS)}")
    return sorted(int(s) for s in rows["steps_added"])


def reported_hours_per_step(arm_name: str) -> float:
    """Hours per step of the paper's arm on its 64 GPUs: Table 1's longest row of that arm (reported)."""
    t1 = paper.table1_arms()
    longest = t1[t1["method"].str.lower() == arm_name].sort_values("steps_added").iloc[-1]
    return float(longest["time_h"] / longest["steps_added"])


def segment_stops(arm_name: str, last_step: int) -> list[int]:
    """Where a launch script ends a segment: the arm's Table 1 steps below ``last_step``, then ``last_step``.
    verl saves a checkpoint at a run's last step, so each Table 1 row gets a checkpoint to evaluate."""
    return [s for s in table1_stops(arm_name) if s < last_step] + [last_step]


def learning_rate(arm: Arm, base: Arm, base_lr: float = BASE_LR) -> float:
    """Paper §4.2.1: lr of ``arm`` = base_lr x sqrt(its samples per step / the base arm's)."""
    return scaled_learning_rate(base_lr, base.samples_per_step, arm.samples_per_step)


@dataclass(frozen=True)
class Cluster(NotebookConfig):
    """Where and on what the run happens; every path absolute (Ray workers do not share a cwd). The fields after the
    paths are declared here once: notebook 05's parameters of the same names are these declarations
    (``core.params.declared_as``)."""

    model_path: str
    train_files: tuple[str, ...]
    val_files: tuple[str, ...]
    checkpoint_dir: str  # the arm's checkpoints go to <checkpoint_dir>/<arm>
    nnodes: int = param(8, "nodes in the Ray cluster (paper: 64 H100, 8 x 8 is our reading)", low=1, high=4096)
    n_gpus_per_node: int = param(8, "GPUs per node", low=1, high=64)
    run_name: str = param(
        "brorl-repro",
        "name of the run: folder build/verl/<run_name> (plan) or data/runs/verl/<run_name> (execute) "
        "and verl experiment names",
        operational=True,
        **RUN_NAME,
    )
    base_lr: float = param(
        BASE_LR,
        "ProRL arm learning rate (ProRLv2 public recipe); BroRL's is scaled by √(samples ratio)",
        **LEARNING_RATE,
    )
    temperature: float = param(
        TEMPERATURE, "rollout sampling temperature (ProRL v1; ProRLv2 does not state it)", **TEMPERATURE_RANGE
    )
    test_freq: int = param(10, "validate every this many steps (the points of Figures 1 and 4)", low=1, high=100_000)
    save_freq: int = param(
        10, "save a checkpoint every this many steps (resume point)", low=1, high=100_000, operational=True
    )
    seed: int = param(0, "seed of data generation, shuffling and verl's data loader", low=0, high=SEED_MAX)

    def check_together(self) -> None:
        for name, value in (
            ("model_path", self.model_path),
            ("checkpoint_dir", self.checkpoint_dir),
            *(("train_files", f) for f in self.train_files),
            *(("val_files", f) for f in self.val_files),
        ):
            if "'" in value or "\\" in value:
                raise ValueError(f"{name}={value!r} is not allowed: no quotes or backslashes in paths")


def save_freq(arm: Arm, cluster: Cluster) -> int:
    """``cluster.save_freq``, at most the arm's ``MAX_SAVE_FREQ``."""
    return min(cluster.save_freq, MAX_SAVE_FREQ.get(arm.name, cluster.save_freq))


def hydra_value(text: str) -> str:
    """``text`` as a Hydra override value: as is when plain, else single-quoted."""
    return text if text and _SAFE.match(text) else f"'{text}'"


def _path_list(paths: tuple[str, ...]) -> str:
    return "[" + ",".join(hydra_value(p) for p in paths) + "]"


def overrides(arm: Arm, base: Arm, cluster: Cluster) -> list[str]:
    """Hydra overrides of ``ppo_trainer.yaml`` for one arm: what the launch script passes to main_ppo."""
    lr = learning_rate(arm, base, cluster.base_lr)
    return [
        # algorithm (paper §3.1; values: module constants)
        f"algorithm.adv_estimator={ADV_ESTIMATOR}",
        "algorithm.use_kl_in_reward=false",
        "critic.enable=false",  # no value model: the advantage's baseline is the group mean
        "algorithm.filter_groups.enable=true",
        f"algorithm.filter_groups.metric={FILTER_METRIC}",
        f"algorithm.filter_groups.max_num_gen_batches={MAX_GEN_BATCHES}",
        f"algorithm.rollout_correction.rollout_is={ROLLOUT_IS}",
        f"algorithm.rollout_correction.rollout_is_threshold={ROLLOUT_IS_THRESHOLD}",  # Hydra reads it as a string
        *SAMPLER_OVERRIDES,
        "transfer_queue.backend.SimpleStorage.total_storage_size="
        + ("null" if STORAGE_SIZE is None else str(STORAGE_SIZE)),
        # data
        f"data.train_files={_path_list(cluster.train_files)}",
        f"data.val_files={_path_list(cluster.val_files)}",
        f"data.train_batch_size={arm.prompts_per_step}",
        f"data.max_prompt_length={MAX_PROMPT_LENGTH}",
        f"data.max_response_length={MAX_RESPONSE_LENGTH}",
        "data.filter_overlong_prompts=true",
        f"data.seed={cluster.seed}",
        # model and actor
        f"actor_rollout_ref.model.path={hydra_value(cluster.model_path)}",
        "actor_rollout_ref.model.use_remove_padding=true",
        "actor_rollout_ref.model.enable_gradient_checkpointing=true",
        f"actor_rollout_ref.actor.optim.lr={lr!r}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={mini_batch_prompts(arm)}",
        "actor_rollout_ref.actor.use_dynamic_bsz=true",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={TOKENS_PER_GPU}",
        f"actor_rollout_ref.actor.clip_ratio_low={CLIP_LOW}",
        f"actor_rollout_ref.actor.clip_ratio_high={CLIP_HIGH}",
        f"actor_rollout_ref.actor.loss_agg_mode={LOSS_AGG_MODE}",
        "actor_rollout_ref.actor.use_kl_loss=true",
        f"actor_rollout_ref.actor.kl_loss_coef={KL_LOSS_COEF}",
        f"actor_rollout_ref.actor.kl_loss_type={KL_LOSS_TYPE}",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=true",
        # rollout
        "actor_rollout_ref.rollout.name=vllm",
        f"actor_rollout_ref.rollout.n={arm.n_rollouts}",
        f"actor_rollout_ref.rollout.temperature={cluster.temperature}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={ROLLOUT_TP}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={GPU_MEMORY_UTILIZATION}",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true",
        f"actor_rollout_ref.rollout.val_kwargs.temperature={VAL_TEMPERATURE}",
        f"actor_rollout_ref.rollout.val_kwargs.top_p={VAL_TOP_P}",
        f"actor_rollout_ref.rollout.val_kwargs.n={VAL_SAMPLES}",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
        # reward
        f"reward.custom_reward_function.path={REWARD_PATH}",
        "reward.custom_reward_function.name=compute_score",
        f"+reward.custom_reward_function.reward_kwargs.math_verify={MATH_VERIFY_BACKEND}",
        # trainer: logging, schedule, checkpoints, resume, cluster shape
        f"trainer.logger=[{','.join(LOGGERS)}]",
        f"trainer.project_name={PROJECT}",
        f"trainer.experiment_name={cluster.run_name}-{arm.name}",
        f"trainer.nnodes={cluster.nnodes}",
        f"trainer.n_gpus_per_node={cluster.n_gpus_per_node}",
        f"trainer.total_training_steps={arm.steps}",
        "trainer.total_epochs=100000",  # the step count ends the run, never the epochs
        f"trainer.test_freq={cluster.test_freq}",
        f"trainer.save_freq={save_freq(arm, cluster)}",
        f"trainer.max_actor_ckpt_to_keep={MAX_CKPT_TO_KEEP}",
        "trainer.val_before_train=true",
        "trainer.resume_mode=auto",
        f"trainer.default_local_dir={hydra_value(str(Path(cluster.checkpoint_dir) / arm.name))}",
    ]


def verl_config_dir() -> Path:
    """verl's own Hydra config directory (found without importing verl)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("verl is not installed: pip install verl==0.9.1")
    return Path(spec.submodule_search_locations[0]) / "trainer" / "config"


def compose(override_list: list[str]):
    """``ppo_trainer.yaml`` with ``override_list`` applied, as ``main_ppo`` would see it (a DictConfig)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(config_dir=str(verl_config_dir()), version_base=None):
        return hydra_compose("ppo_trainer", overrides=list(override_list))


def validate(cfg) -> None:
    """verl's own ``validate_config`` (batch sizes, micro-batches, actor checks) and AlgoConfig."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    with contextlib.redirect_stdout(io.StringIO()):  # it prints a success line
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    omega_conf_to_dataclass(cfg.algorithm)


def to_yaml(cfg) -> str:
    """The resolved config as YAML (what the run used, every interpolation filled in)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(cfg, resolve=True)


def flatten(cfg) -> dict[str, object]:
    """Resolved config as {"a.b.c": value} over its leaves (lists kept whole)."""
    from omegaconf import OmegaConf

    out: dict[str, object] = {}

    def walk(node, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else str(k))
        else:
            out[prefix] = node

    walk(OmegaConf.to_container(cfg, resolve=True), "")
    return out


def config_diff(configs: dict[str, object]) -> pd.DataFrame:
    """Keys whose values differ between the composed arms, one column per arm."""
    flat = {name: flatten(cfg) for name, cfg in configs.items()}
    keys = sorted(set().union(*flat.values()))
    rows = [
        {"key": k, **{n: f.get(k) for n, f in flat.items()}}
        for k in keys
        if len({yaml.safe_dump(f.get(k)) for f in flat.values()}) > 1
    ]
    return pd.DataFrame(rows, columns=["key", *configs])
