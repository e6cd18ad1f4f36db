"""The countdown study's parameters (notebook 04), declared once: ranges, units and docs here, except those of the
settings objects the study's functions take, which are their own declarations (``study.StudySettings``,
``study.UpdateQualitySettings``, ``study_phase2.Phase2Settings``; ``study``, ``quality`` and ``phase2`` build them
from the same values by name). Each object checks on construction what involves several of its values."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from brorl_lib.core.params import TEMPERATURE, NotebookConfig, declared_as, param
from brorl_lib.facts.protocol import SamplingParams
from brorl_lib.rlvr import candidates, study
from brorl_lib.rlvr import study_phase2 as p2
from brorl_lib.rlvr.plateau import PlateauRule


@dataclass(frozen=True)
class CountdownStudyConfig(NotebookConfig):
    """Notebook 04's parameters. Defaults are the quick profile (the same code path in a few minutes)."""

    candidates: list[str] = param(
        ["countdown:3@32x1", "countdown:3@64x2"],
        f"the screen's configurations, each {candidates.SPEC_FORM} with task countdown",
        distinct=True,
        max_items=16,
    )
    n_train: int = declared_as(study.StudySettings, "n_train")
    n_test: int = declared_as(study.StudySettings, "n_test")
    n_val: int = declared_as(study.StudySettings, "n_val")
    warm_start_steps: int = declared_as(study.StudySettings, "warm_start_steps")
    warm_start_lr: float = declared_as(study.StudySettings, "warm_start_lr")
    phase1_prompts: int = declared_as(study.StudySettings, "phase1_prompts")
    screen_max_steps: int = declared_as(study.StudySettings, "screen_max_steps")
    phase1_max_steps: int = declared_as(study.StudySettings, "phase1_max_steps")
    eval_every: int = declared_as(study.StudySettings, "eval_every")
    snapshot_every: int = declared_as(study.StudySettings, "snapshot_every")
    plateau_window: int = param(2, "evaluations per window of the plateau test (two are compared)", low=2, high=1000)
    plateau_alpha: float = param(0.05, "one-sided level of the upper bound on the smoothed rise (0.05: 95%)", low=0.0,
                                 low_open=True, high=0.5)  # fmt: skip
    plateau_min_rise: float = param(0.01, "flat: the rise's upper bound per window is below this, overall and in every "
                                    "q band (our choice)", low=0.0, low_open=True, high=1.0)  # fmt: skip
    base_lr: float = declared_as(study.StudySettings, "base_lr")
    mini_batches: int = declared_as(study.StudySettings, "mini_batches")
    temperature: float = declared_as(study.StudySettings, "temperature")
    max_new_tokens: int = declared_as(study.StudySettings, "max_new_tokens")
    max_rounds: int = declared_as(study.StudySettings, "max_rounds")
    eval_temperature: float = param(0.6, "evaluation temperature (paper 0.6)", **TEMPERATURE)
    eval_top_p: float = param(0.95, "evaluation top-p (paper 0.95)", low=0.0, low_open=True, high=1.0)
    q_bands: list[float] = declared_as(study.UpdateQualitySettings, "q_bands")
    measured_prompts: int = declared_as(study.UpdateQualitySettings, "measured_prompts")
    update_rollouts: list[int] = declared_as(study.UpdateQualitySettings, "rollouts")
    update_samples: list[int] = declared_as(study.UpdateQualitySettings, "samples")
    update_reps: int = declared_as(study.UpdateQualitySettings, "reps")
    previous_plateau: bool = param(False, "also measure the earlier design's committed plateau (spell + arithmetic)")
    prompts: int = declared_as(p2.Phase2Settings, "prompts")  # phase 2's own declarations (study_phase2)
    budgets: list[int] = declared_as(p2.Phase2Settings, "budgets")
    seeds: list[int] = declared_as(p2.Phase2Settings, "seeds")
    iso_samples: int = declared_as(p2.Phase2Settings, "iso_samples")
    iso_rollouts: list[int] = declared_as(p2.Phase2Settings, "iso_rollouts")
    iso_lr_factors: list[float] = declared_as(p2.Phase2Settings, "iso_lr_factors")
    iso_seeds: int = declared_as(p2.Phase2Settings, "iso_seeds")
    lr_factors: list[float] = declared_as(p2.Phase2Settings, "lr_factors")
    tune_seeds: int = declared_as(p2.Phase2Settings, "tune_seeds")
    broad_prompts: int = declared_as(p2.Phase2Settings, "broad_prompts")
    control_seeds: int = declared_as(p2.Phase2Settings, "control_seeds")
    kl_coefs: list[float] = declared_as(p2.Phase2Settings, "kl_coefs")
    train: bool = param(True, "train what the study still needs; false: read back finished runs only (the phase-2 "
                        "runs then come from python -m brorl_lib.rlvr phase2)")  # fmt: skip
    runs_dir: str = param("build/runs/laptop_rlvr_countdown_quick", "results folder, relative to the repository root",
                          nonempty=True)  # fmt: skip
    gpu_rows_dir: str = param(
        "", "a finished GPU row set of the update-quality grid (rlvr.study_gpu), shown beside these rows; empty: none"
    )
    device: str = declared_as(study.StudySettings, "device")

    def check_together(self) -> None:
        self.study()  # each settings object checks what involves several values on construction
        self.quality()
        self.phase2()

    def study(self) -> study.StudySettings:
        return self.build(
            study.StudySettings,
            candidates=tuple(candidates.parse(c, "candidates item") for c in self.candidates),
            plateau_rule=PlateauRule(
                self.plateau_window, self.plateau_alpha, self.plateau_min_rise, tuple(self.q_bands)
            ),
            protocol=SamplingParams(16, self.eval_temperature, self.eval_top_p, self.max_new_tokens),
        )

    def quality(self) -> study.UpdateQualitySettings:
        return self.build(
            study.UpdateQualitySettings,
            rollouts=self.update_rollouts,
            samples=self.update_samples,
            reps=self.update_reps,
        )

    def phase2(self) -> p2.Phase2Settings:
        return self.build(p2.Phase2Settings)

    def runs_path(self) -> Path:
        return study.in_repository(self.runs_dir)

    def gpu_rows_path(self) -> Path | None:
        return study.in_repository(self.gpu_rows_dir) if self.gpu_rows_dir else None
