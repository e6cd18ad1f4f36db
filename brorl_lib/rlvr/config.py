"""Notebook 04's parameters, declared once, and the run's pre-flight memory estimate."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from brorl_lib.core.params import LEARNING_RATE, MAX_SEEDS, SEED_MAX, TEMPERATURE, NotebookConfig, param
from brorl_lib.core.paths import REPO_ROOT
from brorl_lib.rlvr import arms, candidates
from brorl_lib.rlvr import experiment as ex
from brorl_lib.rlvr.plateau import PlateauRule
from brorl_lib.rlvr.run import EVAL_ROWS, EvalProtocol
from brorl_lib.rlvr.tokenizer import ALPHABET, SPECIAL_TOKENS

MAX_N = 8192  # our bound on N per arm: 16x the paper's 512 (one prompt's 8,192 samples are generated at once)
MEMORY_BOUND_GB = 32.0  # our bound on a run's estimated peak memory: a 32 GB workstation (the gpu profile's H100: 80)


@dataclass(frozen=True)
class LaptopRLVRConfig(NotebookConfig):
    """Notebook 04's parameters: the one place their ranges are declared (the experiment's own checks are looser,
    so a value allowed here never fails later). Upper bounds are our choice, far above the paper profile; on top
    of them the run's peak memory is estimated (``peak_memory_gb``) and refused above MEMORY_BOUND_GB."""

    candidates: list[str] = param(
        ["spell_backward:1@64x2", "spell_backward:2@64x2"],
        f"the screen's configurations, each {candidates.SPEC_FORM}",
        distinct=True,
        max_items=16,
    )
    n_train: int = param(400, "training instances drawn per task (duplicate prompts dropped)", low=1, high=100_000)
    n_test: int = param(40, "held-out test instances per task, disjoint from training", low=1, high=10_000)
    n_val: int = param(
        20, "validation instances per task: choose learning rates, disjoint from test and training", low=1, high=10_000
    )
    warm_start_steps: int = param(100, "supervised steps of 32 examples", low=1, high=100_000)
    warm_start_lr: float = param(1e-3, "AdamW learning rate of the warm start", **LEARNING_RATE)
    phase1_prompts: int = param(8, "kept prompts per phase-1 step (N 16)", low=1, high=4096)
    screen_max_steps: int = param(
        16, "each candidate's phase 1 in the screen stops here if no plateau came first", low=1, high=100_000
    )
    phase1_max_steps: int = param(16, "the chosen configuration's phase 1 stops here", low=1, high=100_000)
    eval_every: int = param(1, "phase-1 steps between held-out evaluations", low=1, high=100_000)
    plateau_window: int = param(
        8, "evaluations per smoothing window; the plateau test compares the last two windows", low=8, high=1000
    )
    plateau_alpha: float = param(
        0.05, "plateau once the smoothed rise is not significantly positive at this level", low=0.0, high=1.0
    )
    plateau_min_rise: float = param(
        0.01,
        "a rise of smoothed pass@1 between windows smaller than this counts as flat (our choice)",
        low=0.0,
        high=1.0,
    )
    prompts: int = param(
        4, "P: the ProRL arm's kept prompts per step; the other N take P/4", low=4, high=4096, multiple_of=4
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
        [],
        "ablation arms: these N at the ProRL learning rate (no lr rule)",
        low=2,
        high=MAX_N,
        distinct=True,
        min_items=0,
        max_items=32,
    )
    batch_control: bool = param(False, "add N 16 with as many kept samples per step as the largest N")
    lr_pilot_factors: list[float] = param(
        [0.5, 2.0],
        "learning-rate grid: multiples of each rule's lr for ProRL and the largest N (1 is the main arm)",
        low=0.01,
        high=100.0,
        distinct=True,
        min_items=0,
        max_items=8,
    )
    budgets: list[int] = param(
        [512, 1024, 2048],
        "generated samples (before the filter) at which every phase-2 arm is evaluated, increasing; the last is "
        "the verdict's endpoint",
        low=1,
        high=100_000_000,
        min_items=1,
        max_items=16,
    )
    max_rounds: int = param(
        10,
        "dynamic sampling: generation rounds per step to fill the kept batch (verl's max_num_gen_batches)",
        low=1,
        high=1000,
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
    q_prompts: int = param(32, "training prompts whose correct mass q is estimated at a plateau", low=1, high=100_000)
    q_samples: int = param(64, "draws per such prompt (q in (0, 1/16) needs more than 16)", low=2, high=4096)
    passk_samples: int = param(
        32, "samples per held-out instance at the plateau (bands) and per hard instance (pass@k)", low=1, high=4096
    )
    passk_instances: int = param(10, "at most this many hard instances get pass@k", low=1, high=100_000)
    hard_below: float = param(
        0.5, "hard instance: the plateau model's pass@1 on it is below this", low=0.0, low_open=True, high=1.0
    )
    band_edges: list[float] = param(
        [0.0625, 0.5],
        "inner edges of the plateau pass@1 bands: 0; (0, a); [a, b); [b, 1); 1",
        low=0.0,
        low_open=True,
        high=1.0,
        distinct=True,
        min_items=1,
        max_items=8,
    )
    theory_prompts: int = param(4, "training prompts analysed with Theorem 1 at a plateau", low=1, high=1000)
    theory_samples: int = param(256, "draws per analysed prompt that find its distinct responses", low=2, high=65_536)
    theory_batches: int = param(8, "random batches per prompt and N for Theorem 1", low=1, high=10_000)
    plateau_seeds: list[int] = param(
        [0, 1],
        "phase-1 seeds: the first is the main plateau, the others repeat ProRL against BroRL",
        low=0,
        high=SEED_MAX,
        distinct=True,
        min_items=1,
        max_items=8,
    )
    second_plateau_seeds: int = param(
        2, "phase-2 seeds (the first of seeds) run at every further plateau", low=2, high=MAX_SEEDS
    )
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
        parsed = self.parsed_candidates()
        if sorted(self.band_edges) != list(self.band_edges):
            raise ValueError(f"band_edges={list(self.band_edges)} is not allowed: give them in increasing order")
        if max(self.band_edges) >= 1.0:
            raise ValueError(f"band_edges={list(self.band_edges)} is not allowed: every edge lies in (0, 1)")
        if self.second_plateau_seeds > len(self.seeds):
            raise ValueError(
                f"second_plateau_seeds={self.second_plateau_seeds} is not allowed: at most len(seeds)={len(self.seeds)}"
            )
        need = peak_memory_gb(self, parsed)
        if need > MEMORY_BOUND_GB:
            raise ValueError(
                f"candidates={list(self.candidates)} with the largest generation batch ({largest_batch(self)}) need "
                f"about {need:.0f} GB at the run's peak (estimate); allowed at most {MEMORY_BOUND_GB:.0f} GB (our "
                "bound): choose smaller models or batches"
            )
        # the experiment's own checks (all looser than the declaration): a bad value can only surface here, before work
        ex.check_run(self.settings(), list(self.seeds))

    def parsed_candidates(self) -> list[candidates.Candidate]:
        return [candidates.parse(c, "candidates item") for c in self.candidates]

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
        return ex.ExperimentSettings(
            candidates=tuple(self.parsed_candidates()),
            n_train=self.n_train,
            n_test=self.n_test,
            n_val=self.n_val,
            warm_start_steps=self.warm_start_steps,
            warm_start_lr=self.warm_start_lr,
            phase1_prompts=self.phase1_prompts,
            phase1_max_steps=self.phase1_max_steps,
            screen_max_steps=self.screen_max_steps,
            eval_every=self.eval_every,
            plateau_rule=PlateauRule(self.plateau_window, self.plateau_alpha, self.plateau_min_rise),
            design=self.design(),
            budgets=tuple(self.budgets),
            max_rounds=self.max_rounds,
            mini_batches=self.mini_batches,
            temperature=self.temperature,
            max_new_tokens=self.max_new_tokens,
            protocol=EvalProtocol(self.eval_samples, self.eval_temperature, self.eval_top_p, self.max_new_tokens),
            q_prompts=self.q_prompts,
            q_samples=self.q_samples,
            passk_samples=self.passk_samples,
            passk_instances=self.passk_instances,
            hard_below=self.hard_below,
            kl_coef=self.kl_coef,
            theory_prompts=self.theory_prompts,
            theory_samples=self.theory_samples,
            theory_batches=self.theory_batches,
            plateau_seeds=tuple(self.plateau_seeds),
            second_plateau_seeds=self.second_plateau_seeds,
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
    tasks = max(len(c.tasks) for c in cfg.parsed_candidates())
    out = {
        "16 x phase1_prompts": 16 * cfg.phase1_prompts,
        "theory_samples": cfg.theory_samples,
        "q_samples": cfg.q_samples,
        "n_test x tasks x eval_samples": min(EVAL_ROWS, cfg.n_test * tasks * cfg.eval_samples),
        "n_test x tasks x passk_samples": min(EVAL_ROWS, cfg.n_test * tasks * cfg.passk_samples),
    }
    for arm in arms.main_arms(cfg.design()):
        out[f"{arm.label}: N {arm.n} x {arm.prompts} prompts (arm_rollouts, prompts)"] = arm.samples_per_step
    return out


def largest_batch(cfg: LaptopRLVRConfig) -> str:
    name, rows = max(generation_batches(cfg).items(), key=lambda kv: kv[1])
    return f"{name}: {rows:,} responses"


def peak_memory_gb(cfg: LaptopRLVRConfig, parsed: list[candidates.Candidate] | None = None) -> float:
    """Estimated peak memory of a run, GB, for its largest candidate model: the model's training state, plus the
    larger of the biggest sampling batch (KV cache and logits) and one PPO mini-batch of the biggest training batch
    (activations)."""
    vocab = len(SPECIAL_TOKENS) + len(ALPHABET)
    seq = PROMPT_TOKENS + cfg.max_new_tokens
    batches = generation_batches(cfg)
    trained = max(v for k, v in batches.items() if not k.startswith(("theory", "q_", "n_test")))
    peak = 0.0
    for c in parsed or cfg.parsed_candidates():
        h, layers = c.model.hidden, c.model.layers
        weights = vocab * h + layers * 9 * h * h  # tied embeddings; q, o: h x h; k, v: h x h/2; MLP: 3 x h x 2h
        state = 4 * weights * (4 + (cfg.kl_coef > 0))  # weights, gradients, AdamW's two moments (+ the KL reference)
        generation = 4 * max(batches.values()) * seq * (layers * h + 3 * vocab)
        training = 4 * trained / cfg.mini_batches * seq * (ACTIVATIONS_PER_LAYER * layers * h + 3 * vocab)
        peak = max(peak, (state + max(generation, training)) / 1e9)
    return peak
