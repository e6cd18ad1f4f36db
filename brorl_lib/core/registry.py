"""The ordered list of notebooks the pipeline runs, and what each one reads."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from brorl_lib.core.paths import NOTEBOOKS_DIR


@dataclass(frozen=True)
class NotebookSpec:
    name: str  # file stem in notebooks/ and of its files in params/<profile>/
    title: str  # what it regenerates, one line
    config: str  # "module:Class" of its NotebookConfig
    data_files: tuple[str, ...] = ()  # glob patterns, relative to the repository root: every file the
    # notebook's artifacts are computed from (tests/test_inputs.py checks each folder its code names is here)
    timeout_s: int = 1800  # default wall-clock limit for one run; profiles may override
    committed_profile: str = "paper"  # the profile whose outputs notebooks/ carries (and nbval re-checks): the
    # paper's, what figures/ holds and the book shows (notebook 02's takes about 3 min on 2 cores)
    directory: Path = NOTEBOOKS_DIR

    @property
    def path(self) -> Path:
        return self.directory / f"{self.name}.ipynb"

    def config_class(self):
        module, _, cls = self.config.partition(":")
        return getattr(importlib.import_module(module), cls)


PAPER_DATA = "data/paper/*"  # the paper's reported numbers, read by every notebook

# name, title, config, data files, time limit (s)
NOTEBOOKS: tuple[NotebookSpec, ...] = (
    NotebookSpec("01_theory", "Theorem 1 (symbolic + numeric), Lemma 2, Corollary 3, Figure 2, sign map, pass@k",
                 "brorl_lib.theory.report:TheoryConfig", (PAPER_DATA,), 900),
    NotebookSpec("02_simulator", "Figure 3 at paper scale, the N sweep, the unstated choices, Theorem 1 per step",
                 "brorl_lib.simulator.report:SimulatorConfig",
                 (PAPER_DATA, "data/runs/simulator_lr_bracket/*"), 1800),  # each N at its own rate, read back
    NotebookSpec("03_paper_tables", "Tables 1-5 and Figure 1 from reported numbers; models of Table 2; the t-test",
                 "brorl_lib.paper.report:PaperTablesConfig", (PAPER_DATA,), 600),
    NotebookSpec(
        "04_laptop_rlvr",
        "The LLM experiment at laptop scale: countdown, exact q, update quality, ProRL vs BroRL, IsoCompute",
        "brorl_lib.rlvr.study_config:CountdownStudyConfig",
        (
            "data/runs/laptop_rlvr_countdown_next/**/*",  # the paper profile's runs (runs_dir)
            "data/runs/laptop_rlvr_countdown_gpu_rows/**/*",
            "data/runs/laptop_rlvr/**/*",  # the earlier design's plateau checkpoint, one update-quality point
            PAPER_DATA,
        ),
        3600,  # the paper profile reads the committed runs back in about a minute; the quick profile trains
    ),
    NotebookSpec("05_verl_training", "The real recipe on verl: data, ProRL/BroRL configs, launch plan, logs and "
                 "evaluations to figures", "brorl_lib.verl_recipe.report:VerlTrainingConfig",
                 ("data/runs/verl/**/*", "data/runs/eval/**/*", PAPER_DATA), 600),
)  # fmt: skip


def notebook_names() -> list[str]:
    return [nb.name for nb in NOTEBOOKS]


def get_notebook(name: str) -> NotebookSpec:
    for nb in NOTEBOOKS:
        if nb.name == name:
            return nb
    raise ValueError(f"unknown notebook {name!r}; available: {notebook_names()}")
