"""Notebook 04's parameters, declared once, and the run's pre-flight memory estimate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from brorl_lib.core.params import LEARNING_RATE, MAX_SEEDS, SEED_MAX, TEMPERATURE, NotebookConfig, param
from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.core.validation import check_choice
from brorl_lib.rlvr import arms
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr.model import TinyModelShape
from brorl_lib.rlvr.run import EvalProtocol
from brorl_lib.rlvr.tokenizer import ALPHABET, SPECIAL_TOKENS

HEADS, KV_HEADS = 4, 2  # our choice for every model size: grouped-query attention as in Qwen2
MAX_LEVEL = max(max(f.levels) for f in ex.tasks.FAMILIES.values())
MAX_N = 8192  # our bound on N per arm: 16x the paper's 512 (one prompt's 8,192 samples are generated at once)
MEMORY_BOUND_GB = 32.0  # our bound on a run's estimated peak memory: a 32 GB workstation (the gpu profile's H100: 80)


@dataclass(frozen=True)
class LaptopRLVRConfig(NotebookConfig):
    """Notebook 04's parameters: the one place their ranges are declared (the experiment's own checks are looser,
    so a value allowed here never fails later). Upper bounds are our choice, far above the paper profile; on top
    of them the run's peak memory is estimated (``peak_memory_gb``) and refused above MEMORY_BOUND_GB."""

    tasks: list[str] = param(
        ["spell_backward"],
        "reasoning_gym task families",
        choices=tuple(ex.tasks.FAMILIES),
        distinct=True,
        max_items=len(ex.tasks.FAMILIES),
    )
    difficulties: list[int] = param([2], "one level per task", low=1, high=MAX_LEVEL, max_items=len(ex.tasks.FAMILIES))
    n_train: int = param(400, "training instances drawn per task (duplicate prompts dropped)", low=1, high=100_000)
    n_test: int = param(100, "held-out instances per task, disjoint from training", low=1, high=10_000)
    hidden_size: int = param(128, "model width (our choice)", low=HEADS, high=1024, multiple_of=HEADS)
    num_layers: int = param(3, "decoder layers (our choice)", low=1, high=32)
    warm_start_steps: int = param(150, "supervised steps of 32 examples", low=1, high=100_000)
    warm_start_lr: float = param(1e-3, "AdamW learning rate of the warm start", **LEARNING_RATE)
    screen_samples: int = param(64, "samples per held-out instance in the task screen", low=1, high=1024)
    screen_min_solved: float = param(
        0.05, "a task is kept if this share of its held-out instances is solved at least once", low=0.0, high=1.0
    )
    phase1_prompts: int = param(16, "prompts per step in phase 1 (N 16)", low=1, high=4096)
    phase1_max_steps: int = param(60, "phase 1 stops here if no plateau came first", low=1, high=100_000)
    eval_every: int = param(10, "phase-1 steps between held-out evaluations", low=1, high=100_000)
    plateau_window: int = param(3, "evaluations whose pass@1 slope decides the plateau", low=3, high=1000)
    plateau_alpha: float = param(
        0.05, "plateau once the slope is not significantly positive at this level", low=0.0, high=1.0
    )
    prompts: int = param(
        4, "P: the ProRL arm's prompts per step; the other N take P/4", low=4, high=4096, multiple_of=4
    )
    arm_rollouts: list[int] = param(
        [16, 512],
        "phase-2 arms at the square-root lr rule: rollouts per prompt N, must include 16",
        low=2,
        high=MAX_N,
        distinct=True,
        max_items=32,
    )
    base_lr_rollouts: list[int] = param(
        [512],
        "ablation arms: these N at the ProRL learning rate (no lr rule)",
        low=2,
        high=MAX_N,
        distinct=True,
        min_items=0,
        max_items=32,
    )
    batch_control: bool = param(True, "add N 16 with as many samples per step as the largest N")
    lr_pilot_factors: list[float] = param(
        [],
        "learning-rate pilot: multiples of each rule's lr for ProRL and the largest N, first seed",
        low=0.01,
        high=100.0,
        distinct=True,
        min_items=0,
        max_items=8,
    )
    sample_budget: int = param(
        1024,
        "generated samples per phase-2 arm (equal for all, before filtering), a multiple of every arm's per step",
        low=1,
        high=10_000_000,
    )
    base_lr: float = param(1e-4, "eta0: AdamW learning rate of phase 1 and of the ProRL arm", **LEARNING_RATE)
    mini_batches: int = param(2, "PPO updates per step, the same in every arm", low=1, high=64)
    temperature: float = param(1.0, "rollout sampling temperature in training (our choice)", **TEMPERATURE)
    max_new_tokens: int = param(
        8,
        "response length limit (prompt and response stay inside the model's 128 positions)",
        unit="tokens",
        low=1,
        high=64,
    )
    kl_coef: float = param(0.0, "weight of the KL to the arm's starting policy (0 is off)", low=0.0, high=100.0)
    eval_samples: int = param(16, "samples per held-out instance for pass@1 (paper 16)", low=1, high=1024)
    eval_temperature: float = param(0.6, "evaluation temperature (paper 0.6)", **TEMPERATURE)
    eval_top_p: float = param(0.95, "evaluation top-p (paper 0.95)", low=0.0, low_open=True, high=1.0)
    eval_points: int = param(4, "evaluations per phase-2 arm, evenly spaced in samples", low=1, high=1000)
    passk_samples: int = param(256, "samples per hard instance for pass@k", low=1, high=4096)
    passk_instances: int = param(20, "at most this many hard instances get pass@k", low=1, high=100_000)
    hard_below: float = param(
        0.5, "hard instance: the phase-1 model's pass@1 on it is below this", low=0.0, low_open=True, high=1.0
    )
    theory_prompts: int = param(
        4, "training prompts analysed with Theorem 1 at the phase-1 checkpoint", low=1, high=1000
    )
    theory_samples: int = param(1024, "draws per analysed prompt that find its distinct responses", low=2, high=65_536)
    theory_batches: int = param(32, "random batches per prompt and N for Theorem 1", low=1, high=10_000)
    seeds: list[int] = param(
        [0, 1],
        "phase-2 seeds, the unit of the test (at least 2)",
        low=0,
        high=SEED_MAX,
        distinct=True,
        min_items=2,
        max_items=MAX_SEEDS,
    )
    runs_dir: str = param(
        "build/runs/laptop_rlvr_quick", "results folder, relative to the repository root", nonempty=True
    )
    device: str = param("cpu", "where the model trains and samples (cuda needs a visible GPU)", choices=("cpu", "cuda"))

    def check_together(self) -> None:
        if len(self.difficulties) != len(self.tasks):
            raise ValueError(
                f"difficulties={list(self.difficulties)} is not allowed: give one level per task in "
                f"tasks={list(self.tasks)}"
            )
        for t, level in zip(self.tasks, self.difficulties, strict=True):
            check_choice(f"difficulties item for {t}", level, ex.tasks.FAMILIES[t].levels)
        need = peak_memory_gb(self)
        if need > MEMORY_BOUND_GB:
            raise ValueError(
                f"hidden_size={self.hidden_size}, num_layers={self.num_layers} with the largest "
                f"generation batch ({largest_batch(self)}) need about {need:.0f} GB at the run's peak "
                f"(estimate); allowed at most {MEMORY_BOUND_GB:.0f} GB (our bound): lower one of them"
            )
        # the experiment's own checks (all looser than the declaration): a bad value can only surface here, before work
        ex.check_run(self.settings(), list(self.seeds))

    def design(self) -> arms.ArmDesign:
        return arms.ArmDesign(
            prompts=self.prompts,
            base_lr=self.base_lr,
            rollouts=tuple(self.arm_rollouts),
            base_lr_rollouts=tuple(self.base_lr_rollouts),
            batch_control=self.batch_control,
            lr_pilot_factors=tuple(self.lr_pilot_factors),
        )

    def settings(self) -> ex.ExperimentSettings:
        shape = TinyModelShape(
            hidden=self.hidden_size,
            layers=self.num_layers,
            heads=HEADS,
            kv_heads=KV_HEADS,
            intermediate=2 * self.hidden_size,
        )
        return ex.ExperimentSettings(
            task_names=tuple(self.tasks),
            difficulties=tuple(self.difficulties),
            n_train=self.n_train,
            n_test=self.n_test,
            warm_start_steps=self.warm_start_steps,
            warm_start_lr=self.warm_start_lr,
            phase1_prompts=self.phase1_prompts,
            phase1_max_steps=self.phase1_max_steps,
            eval_every=self.eval_every,
            plateau_window=self.plateau_window,
            plateau_alpha=self.plateau_alpha,
            design=self.design(),
            sample_budget=self.sample_budget,
            mini_batches=self.mini_batches,
            temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            protocol=EvalProtocol(self.eval_samples, self.eval_temperature, self.eval_top_p, self.max_new_tokens),
            eval_points=self.eval_points,
            screen_samples=self.screen_samples,
            screen_min_solved=self.screen_min_solved,
            passk_samples=self.passk_samples,
            passk_instances=self.passk_instances,
            hard_below=self.hard_below,
            kl_coef=self.kl_coef,
            theory_prompts=self.theory_prompts,
            theory_samples=self.theory_samples,
            theory_batches=self.theory_batches,
            model=shape,
            device=self.device,
        )

    def runs_path(self) -> Path:
        path = Path(self.runs_dir)
        return path if path.is_absolute() else REPO_ROOT / path


# --- pre-flight memory estimate (rough, float32 throughout; our model of where the memory goes) ---
PROMPT_TOKENS = 48  # our bound on a prompt's length in tokens (the longest task prompt has 41 characters)
ACTIVATIONS_PER_LAYER = 34  # numbers kept per hidden unit, token and layer for the backward pass (rough count)


def generation_batches(cfg: LaptopRLVRConfig) -> dict[str, int]:
    """Responses sampled at once by each part of the run, keyed by the parameters that set them."""
    out = {
        "16 x phase1_prompts": 16 * cfg.phase1_prompts,
        "theory_samples": cfg.theory_samples,
        "n_test x tasks x eval_samples": cfg.n_test * len(cfg.tasks) * cfg.eval_samples,
        "n_test x tasks x screen_samples": cfg.n_test * len(cfg.tasks) * cfg.screen_samples,
        "passk_instances x passk_samples": cfg.passk_instances * cfg.passk_samples,
    }
    for arm in arms.main_arms(cfg.design()):
        out[f"{arm.label}: N {arm.n} x {arm.prompts} prompts (arm_rollouts, prompts)"] = arm.samples_per_step
    return out


def largest_batch(cfg: LaptopRLVRConfig) -> str:
    name, rows = max(generation_batches(cfg).items(), key=lambda kv: kv[1])
    return f"{name}: {rows:,} responses"


def peak_memory_gb(cfg: LaptopRLVRConfig) -> float:
    """Estimated peak memory of a run, GB: the model's training state, plus the larger of the biggest sampling
    batch (KV cache and logits) and one PPO mini-batch of the biggest training batch (activations)."""
    h, layers, vocab = cfg.hidden_size, cfg.num_layers, len(SPECIAL_TOKENS) + len(ALPHABET)
    seq = PROMPT_TOKENS + cfg.max_new_tokens
    weights = vocab * h + layers * 9 * h * h  # tied embeddings; q, o: h x h; k, v: h x h/2; MLP: 3 x h x 2h
    state = 4 * weights * (4 + (cfg.kl_coef > 0))  # weights, gradients, AdamW's two moments (+ the KL reference)
    batches = generation_batches(cfg)
    generation = 4 * max(batches.values()) * seq * (layers * h + 3 * vocab)
    trained = max(v for k, v in batches.items() if not k.startswith(("theory", "n_test", "passk")))
    training = 4 * trained / cfg.mini_batches * seq * (ACTIVATIONS_PER_LAYER * layers * h + 3 * vocab)
    return (state + max(generation, training)) / 1e9
