"""The computations behind notebooks/05_verl_training.ipynb: parameters, build, plan, runs to tables.

``execute=False`` (the default, and all a CPU machine can do) builds the data, checks the reward
function, composes and validates both arms against verl's own config, and writes configs and launch
scripts under ``build/verl/<run_name>/``. ``execute=True`` writes them under
``data/runs/verl/<run_name>/<arm>/`` and launches the arms one after the other on the Ray cluster.
Table 1 reads every run found under ``data/runs/verl/`` and sets it beside the paper; Figures 1 and 4 draw
only runs at the paper's scale (``at_paper_scale``), on the paper's axes; runs of verl's trainer on a CPU
(``cpu_runs``) get a figure of their own, against steps.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from brorl_lib.core import atomic
from brorl_lib.core.claims import Claim
from brorl_lib.core.params import NotebookConfig, declared_as, param
from brorl_lib.core.paths import BUILD_DIR, REPO_ROOT
from brorl_lib.facts import reported as paper
from brorl_lib.facts.arms import Arm
from brorl_lib.verl_recipe import configs, data, launch, logs, rewards, smoke
from brorl_lib.verl_recipe.codec import decode_entry
from brorl_lib.verl_recipe.tasks import DEFAULT_TASKS, FIGURE4_TASKS

RUNS_DIR = REPO_ROOT / "data" / "runs" / "verl"  # where executed runs log (the notebook's declared inputs)
PLAN_DIR = BUILD_DIR / "verl"  # where execute=False writes (ignored by git, never an input)
# Paper §4.2.1: the ProRLv2 checkpoint, revision main (docs/prorl-background.md#released-checkpoints).
PRORLV2_CHECKPOINT = "nvidia/Nemotron-Research-Reasoning-Qwen-1.5B"
PAPER_GPUS: int = paper.setting("gpus")  # paper §4.2.1: H100s
ARM_LABELS = {"prorl": "ProRL", "brorl": "BroRL"}  # arm -> Table 1's method name
# Reward sanity cases for verl's MATH scorer + Math-Verify: (ground truth, response, expected score).
MATH_CASES = (
    (r"\frac{1}{2}", r"So the answer is \boxed{\frac{1}{2}}.", 1.0),
    (r"\frac{1}{2}", r"So the answer is \boxed{0.5}.", 1.0),
    ("12", r"So the answer is \boxed{13}.", 0.0),
)


MAX_ROLLOUTS = 16_384  # our bound on N per arm: 32x the paper's 512
MAX_PROMPTS_PER_STEP = 65_536  # our bound: 128x the paper's 512
PLAIN_PATH = {"pattern": r"[^'\\]*", "pattern_doc": "a path without quotes or backslashes (verl's overrides)"}
# A Hugging Face dataset id: "name" or "owner/name" (letters, digits, '_', '.', '-'), optionally pinned to a commit
# as "owner/name@<40 hex digits>" (data.hub_revision), as the start model is.
HF_DATASET_ID = r"(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)?[A-Za-z0-9_][A-Za-z0-9_.-]*(?:@[0-9a-f]{40})?"
_SUFFIXES = f"{', '.join(data.LOCAL_SUFFIXES[:-1])} or {data.LOCAL_SUFFIXES[-1]}"
DATASET = {
    "item_doc": f"empty for none, a Hugging Face dataset id (owner/name) or a local {_SUFFIXES} file that exists"
}


def check_dataset(name: str, value: str) -> None:
    """``value`` of the dataset parameter ``name``: empty, a Hugging Face dataset id, or a local file that
    exists with a suffix ``data.load_records`` reads (told apart as ``data.is_local`` does: a suffix, a
    leading '/', '.' or '~', or a path that exists). ValueError naming ``name`` otherwise, before any work."""
    if not value:
        return
    path = Path(value).expanduser()
    expected = f"expected {DATASET['item_doc']}"
    try:
        local, is_file, is_dir = data.is_local(value), path.is_file(), path.is_dir()
    except OSError as err:  # e.g. a name too long for the filesystem
        raise ValueError(f"{name}={value!r} is not allowed: not a usable path ({err.strerror}); {expected}") from None
    if local or not re.fullmatch(HF_DATASET_ID, value):
        if not is_file:
            what = "a folder, not a file" if is_dir else "no such file"
            looks = "" if local else " and not a Hugging Face dataset id (owner/name)"
            raise ValueError(f"{name}={value!r} is not allowed: {what} ({path.absolute()}){looks}; {expected}")
        if path.suffix not in data.LOCAL_SUFFIXES:
            raise ValueError(
                f"{name}={value!r} is not allowed: the file must end in one of {list(data.LOCAL_SUFFIXES)}; {expected}"
            )


DATASET_FAMILIES = ("math", "stem", "code", "instruction")  # each read from <family>_dataset


@dataclass(frozen=True)
class VerlTrainingConfig(NotebookConfig):
    """Notebook 05's parameters. Upper bounds are our choice: far beyond the paper's runs and cluster."""

    arms: list[str] = param(
        ["prorl", "brorl"],
        "arms to build and (with execute) launch, in order",
        choices=tuple(configs.PAPER_ARMS),
        distinct=True,
        max_items=len(configs.PAPER_ARMS),
    )
    prorl_rollouts: int = param(16, "ProRL arm: rollouts per prompt N (paper 16)", low=2, high=MAX_ROLLOUTS)
    prorl_prompts_per_step: int = param(512, "ProRL arm: prompts per RL step (paper 512), a multiple of "
                                        "ppo_mini_batches", low=1, high=MAX_PROMPTS_PER_STEP)  # fmt: skip
    prorl_steps: int = param(535, "ProRL arm: RL steps to train (Table 1's longest ProRL row, +535)", low=1,
                             high=100_000)  # fmt: skip
    brorl_rollouts: int = param(512, "BroRL arm: rollouts per prompt N (paper 512)", low=2, high=MAX_ROLLOUTS)
    brorl_prompts_per_step: int = param(128, "BroRL arm: prompts per RL step (paper 128), a multiple of "
                                        "ppo_mini_batches", low=1, high=MAX_PROMPTS_PER_STEP)  # fmt: skip
    brorl_steps: int = param(191, "BroRL arm: RL steps to train (Table 1's longest BroRL row, +191)", low=1,
                             high=100_000)  # fmt: skip
    ppo_mini_batches: int = param(
        4, "PPO mini-batches per step, the same in both arms (ProRL v1: 256 prompts / 64)", low=1, high=1024
    )
    base_lr: float = declared_as(configs.Cluster, "base_lr")
    temperature: float = declared_as(configs.Cluster, "temperature")
    rg_tasks: list[str] = param(
        list(DEFAULT_TASKS),
        "Reasoning Gym tasks: Figure 4's eight, then one per other Table 5 category",
        nonempty=True,
        distinct=True,
        max_items=500,
        item_doc="Reasoning Gym task names this recipe accepts (data.available_tasks)",
    )
    rg_train_per_task: int = param(
        8, "training prompts generated per task (CPU check; a GPU run wants thousands)", low=0, high=100_000
    )
    rg_val_per_task: int = param(4, "held-out validation prompts per task (ProRL: 100)", low=0, high=10_000)
    math_dataset: str = param(
        "", "math records (problem, answer), e.g. agentica-org/DeepScaleR-Preview-Dataset", **DATASET
    )
    stem_dataset: str = param("", "STEM records (problem, answer)", **DATASET)
    code_dataset: str = param("", "code records (problem, tests with inputs/outputs)", **DATASET)
    instruction_dataset: str = param(
        "", "instruction-following records (IFEval: prompt, instruction_id_list, kwargs)", **DATASET
    )
    dataset_train_count: int = param(
        0,
        "training rows taken from each of math/stem/code/instruction (0 takes all but the held-out ones)",
        low=0,
        high=10_000_000,
    )
    dataset_val_count: int = param(
        64, "held-out validation rows from each of math/stem/code/instruction", low=0, high=1_000_000
    )
    seed: int = declared_as(configs.Cluster, "seed")
    nnodes: int = declared_as(configs.Cluster, "nnodes")
    n_gpus_per_node: int = declared_as(configs.Cluster, "n_gpus_per_node")
    model_path: str = param(
        "",
        "local directory of the ProRLv2 checkpoint "
        "(nvidia/Nemotron-Research-Reasoning-Qwen-1.5B, revision main); required with execute",
        operational=True,  # where the given checkpoint lies, not what is trained
        **PLAIN_PATH,
    )
    work_dir: str = param(
        "",
        "shared folder every node sees, for training data and checkpoints; required with execute (empty: build/verl)",
        operational=True,
        **PLAIN_PATH,
    )
    run_name: str = declared_as(configs.Cluster, "run_name")
    test_freq: int = declared_as(configs.Cluster, "test_freq")
    save_freq: int = declared_as(configs.Cluster, "save_freq")
    execute: bool = param(
        False, "False: build, validate and plan only; True: also launch the arms on this Ray cluster", operational=True
    )

    def check_together(self) -> None:
        self._all_arms()  # each arm's prompts a multiple of ppo_mini_batches
        data.check_tasks(self.rg_tasks)  # every task known to this recipe
        for family in DATASET_FAMILIES:  # a local file that exists, or a dataset id
            check_dataset(f"{family}_dataset", getattr(self, f"{family}_dataset"))
        self.cluster(("train.parquet",), ("val.parquet",))  # paths verl can take
        if self.execute:
            self._check_execute()

    def _check_execute(self) -> None:
        """What a launch needs, checked before anything is built (ValueError naming the parameter)."""
        if not self.model_path or not (Path(self.model_path).expanduser() / "config.json").is_file():
            raise ValueError(
                f"model_path={self.model_path!r} is not allowed when execute=True: give a local directory "
                f"holding the starting checkpoint (config.json), e.g. `huggingface-cli download "
                f"{PRORLV2_CHECKPOINT} --revision main --local-dir <dir>`"
            )
        if not self.work_dir:
            raise ValueError(
                "work_dir='' is not allowed when execute=True: give a folder every node sees "
                "(training data and checkpoints, ~20 GB per checkpoint)"
            )
        if self.rg_train_per_task * len(self.rg_tasks) + self.dataset_train_count == 0:
            raise ValueError("rg_train_per_task=0 and dataset_train_count=0: execute=True needs training prompts")
        from brorl_lib.verl_recipe import preflight  # what `python -m brorl_lib.verl_recipe.preflight` checks

        data_dir = self.work_path() / "data"  # prepare writes it after these checks: its check is skipped
        cluster = self.cluster((str(data_dir / "train.parquet"),), (str(data_dir / "val.parquet"),))
        plans = [
            preflight.ArmPlan(
                arm.name,
                preflight.parse_overrides(configs.overrides(arm, self.base_arm, cluster)),
                launch.CLUSTER_ENV["VERL_USE_EXTERNAL_MODULES"],
                f"notebook 05's {arm.name}/launch.sh",
            )
            for arm in self.arm_specs()
        ]
        inputs = preflight.Inputs(cluster.model_path, str(data_dir), cluster.checkpoint_dir)
        failed = [r for r in preflight.run_checks(inputs, plans, skip=("data",)) if not r.ok]
        if failed:
            raise ValueError(
                "execute=True is not allowed here: "
                + "; ".join(f"{r.name}: {r.detail} (fix: {r.fix})" for r in failed).replace("\n", " ")
            )

    # --- derived settings ---
    def _all_arms(self) -> dict[str, Arm]:
        return {
            name: configs.arm(
                name,
                getattr(self, f"{name}_rollouts"),
                getattr(self, f"{name}_prompts_per_step"),
                getattr(self, f"{name}_steps"),
                self.ppo_mini_batches,
            )
            for name in configs.PAPER_ARMS
        }

    def arm_specs(self) -> list[Arm]:
        """The selected arms, in the order given."""
        arms = self._all_arms()
        return [arms[a] for a in self.arms]

    @property
    def base_arm(self) -> Arm:
        """The arm whose learning rate is ``base_lr`` (ProRL), whether selected or not."""
        return self._all_arms()[configs.BASE_ARM]

    def run_dir(self) -> Path:
        """data/runs/verl/<run_name> when executing, build/verl/<run_name> when only planning."""
        return (RUNS_DIR if self.execute else PLAN_DIR) / self.run_name

    def work_path(self) -> Path:
        """Training data and checkpoints: ``work_dir`` (execute) or build/verl/<run_name>/work."""
        if not self.work_dir:
            return PLAN_DIR / self.run_name / "work"
        return Path(self.work_dir).expanduser().resolve() / self.run_name

    def cluster(self, train_files: tuple[str, ...], val_files: tuple[str, ...]) -> configs.Cluster:
        local = Path(self.model_path).expanduser()
        # a local checkpoint as an absolute path; otherwise a Hugging Face id, which verl also loads
        model = str(local.resolve()) if self.model_path and local.exists() else self.model_path or PRORLV2_CHECKPOINT
        return self.build(
            configs.Cluster,
            model_path=model,
            train_files=train_files,
            val_files=val_files,
            checkpoint_dir=str(self.work_path() / "checkpoints"),
        )


# --- data and rewards ---
def build_data(cfg: VerlTrainingConfig) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Train and validation rows: Reasoning Gym tasks, then math, STEM, code and instruction following where given."""
    rg_train, rg_val = data.reasoning_gym_frames(cfg.rg_tasks, cfg.rg_train_per_task, cfg.rg_val_per_task, cfg.seed)
    train, val = [rg_train], [rg_val]
    for family in DATASET_FAMILIES:
        t, v = data.records_frames(
            getattr(cfg, f"{family}_dataset"),
            family,
            cfg.dataset_train_count,
            cfg.dataset_val_count,
            cfg.seed,
            f"{family}_dataset",
        )
        train.append(t)
        val.append(v)
    frames = [pd.concat([f for f in fs if len(f)] or fs[:1], ignore_index=True) for fs in (train, val)]
    for df in frames:
        data.check_schema(df)
    return frames[0], frames[1]


def reference_response(row) -> str | None:
    """A response that should earn full reward for a validation row (None for code: no reference)."""
    family = row["ability"]
    if family == "reasoning_gym":
        return f"Reasoning... <answer>{decode_entry(row['extra_info']['entry'])['answer']}</answer>"
    if family in ("math", "stem"):
        return f"So the answer is \\boxed{{{row['reward_model']['ground_truth']}}}."
    return None


def reward_checks(val: pd.DataFrame, math_verify: str = "inline") -> pd.DataFrame:
    """Per data_source: mean reward of the reference answers, of a wrong answer, and (Reasoning Gym) of
    the reference answer without its <answer> tags; then the MATH_CASES through verl's scorer + Math-Verify."""
    rows = []
    for source, g in val.groupby("data_source", sort=False):
        right, wrong, untagged = [], [], []
        for _, r in g.iterrows():
            gt, extra = r["reward_model"]["ground_truth"], r["extra_info"]
            ref = reference_response(r)
            if ref is None:
                continue

            def score(text: str, source=source, gt=gt, extra=extra) -> dict:
                return rewards.compute_score(source, text, gt, extra, math_verify=math_verify)

            right.append(score(ref)["score"])
            wrong.append(score("<answer>no idea</answer> \\boxed{no idea}")["score"])
            if r["ability"] == "reasoning_gym":  # the <answer> tags are Reasoning Gym's format (ProRL)
                untagged.append(score(ref.replace("<answer>", "").replace("</answer>", ""))["score"])
        rows.append(
            {
                "data_source": source,
                "rows": len(g),
                "right": np.mean(right) if right else np.nan,
                "wrong": np.mean(wrong) if wrong else np.nan,
                "untagged": np.mean(untagged) if untagged else np.nan,
            }
        )
    for gt, response, expected in MATH_CASES:
        got = rewards.compute_score("math.sanity", response, gt, {}, math_verify=math_verify)["score"]
        rows.append(
            {
                "data_source": f"math.sanity {gt} vs {response.split('boxed')[-1][:-1]}",
                "rows": 1,
                "right": got if expected == 1 else np.nan,
                "wrong": got if expected == 0 else np.nan,
                "untagged": np.nan,
            }
        )
    return pd.DataFrame(rows)


# --- configs, scripts, plan ---
@dataclass(frozen=True)
class Prepared:
    """What ``prepare`` wrote: data files, and per arm its composed config, overrides and launch script."""

    train_file: Path
    val_file: Path
    configs: dict  # arm -> composed DictConfig
    overrides: dict  # arm -> list of Hydra overrides
    scripts: dict  # arm -> Path of launch.sh


def prepare(cfg: VerlTrainingConfig, train: pd.DataFrame, val: pd.DataFrame) -> Prepared:
    """Write the data, compose and validate every selected arm, write config.yaml, overrides and launch.sh."""
    work = cfg.work_path() / "data"
    train_file = data.write_parquet(train, work / "train.parquet")
    val_file = data.write_parquet(val, work / "val.parquet")
    cluster = cfg.cluster((str(train_file),), (str(val_file),))
    composed, overrides, scripts = {}, {}, {}
    plans = {p["arm"]: p for p in plan_table(cfg).to_dict(orient="records")}
    for arm in cfg.arm_specs():
        ov = configs.overrides(arm, cfg.base_arm, cluster)
        c = configs.compose(ov)
        configs.validate(c)
        arm_dir = cfg.run_dir() / arm.name
        atomic.write_text(arm_dir / "config.yaml", configs.to_yaml(c))
        atomic.write_text(arm_dir / "overrides.txt", "\n".join(ov) + "\n")
        atomic.write_text(arm_dir / "plan.json", json.dumps(plans[arm.name], indent=2) + "\n")
        script = arm_dir / "launch.sh"
        atomic.write_text(script, launch.script_text(arm, arm_dir, REPO_ROOT))
        script.chmod(0o755)
        composed[arm.name], overrides[arm.name], scripts[arm.name] = c, ov, script
    return Prepared(train_file, val_file, composed, overrides, scripts)


PLAN_BASIS = (
    "Table 1's hours per step (reported, each arm's longest row) scaled linearly by samples per step and from the "
    "paper's 64 GPUs to this cluster's; generated samples from Table 2's reported pass rates"
)


reported_hours_per_step = configs.reported_hours_per_step  # Table 1's hours per step of an arm (reported)


def smoke_hours(settings: smoke.SmokeSettings | None = None) -> dict[str, float]:
    """Estimated hours of the smoke profile per arm, in the order it runs them (``smoke.ORDER``, BroRL first): its
    steps and its validations (``smoke.arm_hours``: Table 1's hours per step and Table 2's generation throughput,
    scaled linearly from the paper's 64 GPUs to the smoke's, our assumption)."""
    settings = settings or smoke.SmokeSettings()
    return {a: smoke.arm_hours(a, settings) for a in smoke.ORDER}


def plan_table(cfg: VerlTrainingConfig) -> pd.DataFrame:
    """Per arm: batch shape, learning rate, and the expected samples, hours and GPU-hours.

    Expected samples generated per step = N x prompts / pass rate (Table 2, reported, by arm).
    Expected hours are an estimate: steps x the arm's hours per step in Table 1 (reported, its
    longest row), scaled by samples per step relative to the paper's arm and from the paper's 64
    GPUs to this cluster, both linearly (our assumption); ``hours_basis`` says so in every row.
    """
    rates = paper.table2_pass_rates()
    gpus = cfg.nnodes * cfg.n_gpus_per_node
    rows = []
    for arm in cfg.arm_specs():
        paper_n, paper_prompts = configs.PAPER_ARMS[arm.name]
        hours_per_step = reported_hours_per_step(arm.name)
        pass_rate = rates[paper_n]
        per_step = arm.samples_per_step / pass_rate
        hours = arm.steps * hours_per_step * arm.samples_per_step / (paper_n * paper_prompts) * PAPER_GPUS / gpus
        rows.append(
            {
                "arm": arm.name,
                "N": arm.n_rollouts,
                "prompts_per_step": arm.prompts_per_step,
                "kept_samples_per_step": arm.samples_per_step,
                "ppo_mini_batches": arm.mini_batches,
                "mini_batch_prompts": configs.mini_batch_prompts(arm),
                "lr": configs.learning_rate(arm, cfg.base_arm, cfg.base_lr),
                "lr_ratio": configs.learning_rate(arm, cfg.base_arm, 1.0),
                "steps": arm.steps,
                "pass_rate_reported": pass_rate,
                "expected_samples_per_step": per_step,
                "expected_samples_k": arm.steps * per_step / 1000,
                "hours_per_step_reported": hours_per_step,
                "gpus": gpus,
                "expected_hours": hours,
                "expected_gpu_hours": hours * gpus,
                "hours_basis": (
                    f"estimate: Table 1's hours per step scaled linearly by samples per step "
                    f"({paper_n * paper_prompts:,} → {arm.samples_per_step:,}) and by GPUs ({PAPER_GPUS} → {gpus})"
                ),
            }
        )
    return pd.DataFrame(rows)


SCHEDULE_BASIS = (
    "the smoke profile first (BroRL's steps and validations, then ProRL's, on its nodes) and each arm's expected "
    "hours from the plan (Table 1's hours per step, reported, scaled linearly), and on half the GPUs twice those "
    "hours (linear scaling, our assumption)"
)
SEQUENTIAL, SIDE_BY_SIDE = "one after the other", "side by side"


def _schedule_row(schedule: str, gpus_per_arm: int, ends: dict[str, float], gpus: int, choose: str) -> dict:
    """One schedule after the smoke profile (``smoke_hours``): when BroRL's first full step and the smoke end, when
    each arm ends, the wall time, and the GPU-hours of holding the whole cluster."""
    hours = smoke_hours()
    first = list(hours)
    before = sum(hours[a] for a in first[: first.index("brorl")])
    smoke_end = sum(hours.values())
    ends = {arm: smoke_end + h for arm, h in ends.items()}
    wall = max(ends.values())
    return {
        "schedule": schedule,
        "gpus_per_arm": gpus_per_arm,
        "brorl_first_full_step_h": before + smoke.launch_hours("brorl", smoke.SmokeSettings())[0],
        "smoke_ends_h": smoke_end,
        **{f"{arm}_ends_h": h for arm, h in ends.items()},
        "wall_hours": wall,
        "cluster_gpu_hours": wall * gpus,
        "choose_when": choose,
    }


def schedule_table(plan: pd.DataFrame) -> pd.DataFrame:
    """Two ways to run the plan's arms on its cluster, in estimated hours (``SCHEDULE_BASIS``), each after the smoke
    profile (two nodes, full length, BroRL first), so that BroRL's first full step comes before ProRL's week.

    One after the other (what ``execute`` and recipes/brorl/README.md do): each arm on every GPU, so each
    ends sooner and the first arm's results come early. Side by side: each arm on half the GPUs (its own Ray
    cluster), so its hours double under linear scaling and the wall time is the longer arm's; both arms run
    at the same time under the same cluster conditions. One arm, or fewer than 2 GPUs: the first row only.
    """
    gpus = int(plan["gpus"].iloc[0])
    hours = dict(zip(plan["arm"], plan["expected_hours"]))
    first = ARM_LABELS[plan["arm"].iloc[0]]
    ends = dict(zip(hours, np.cumsum(list(hours.values()))))
    rows = [
        _schedule_row(
            SEQUENTIAL,
            gpus,
            ends,
            gpus,
            f"each arm on all {gpus} GPUs ends sooner and {first}'s results come first; the arms run at different "
            "times (execute=True and recipes/brorl/README.md run them so)",
        )
    ]
    if len(hours) > 1 and gpus >= 2:
        half = gpus // 2
        rows.append(
            _schedule_row(
                SIDE_BY_SIDE,
                half,
                {arm: h * gpus / half for arm, h in hours.items()},
                gpus,
                f"both arms run at the same time under the same cluster conditions, and the comparison is complete "
                f"when the longer arm ends; each on {half} GPUs (its own Ray cluster, built with half the nodes) "
                "takes about twice as long, and half the cluster idles once the shorter arm ends",
            )
        )
    return pd.DataFrame(rows)


def schedule_note(schedules: pd.DataFrame) -> str:
    """One line: the wall time of each schedule, labelled an estimate."""
    walls = ", ".join(f"{r.schedule} ≈ {r.wall_hours:,.1f} h" for r in schedules.itertuples())
    return f"estimated wall time on {int(schedules['gpus_per_arm'].iloc[0])} GPUs: {walls}"


def execute(cfg: VerlTrainingConfig, prepared: Prepared, on_line=print) -> None:
    """Launch the selected arms one after the other (each uses the whole cluster), streaming output."""
    for arm in cfg.arms:
        on_line(f"[brorl] launching {arm}: {prepared.scripts[arm]}")
        launch.run_script(prepared.scripts[arm], on_line)


# --- runs to the paper's tables and figures ---
def find_runs(root: Path = RUNS_DIR) -> list[logs.RunLog]:
    """Every arm of every run logged under ``root`` (data/runs/verl by default)."""
    return logs.find_runs(root)


def source_label(run: logs.RunLog) -> str:
    """How a run's rows are labelled: "verl on CPU: run <name>" for the CPU harness, else "run <name>"."""
    return f"verl on CPU: run {run.run}" if run.device == "cpu" else f"run {run.run}"


def _domain_scores(val: pd.DataFrame) -> pd.DataFrame:
    """Per validation step: Math and Code pass@1 (acc) and the Reasoning Gym mean reward, in points."""
    if val.empty:
        return pd.DataFrame(columns=["step", "hours", "math_score", "code_score", "reasoning_gym_score"])
    acc = val[val["var"] == "acc"]
    rg_var = "score" if (val["var"] == "score").any() else "acc"  # continuous reward when logged
    parts = {
        "math_score": acc[acc["family"] == "math"],
        "code_score": acc[acc["family"] == "code"],
        "reasoning_gym_score": val[(val["family"] == "reasoning_gym") & (val["var"] == rg_var)],
    }
    out = val[["step", "hours"]].drop_duplicates("step").set_index("step")
    for col, part in parts.items():
        out[col] = part.groupby("step")["value"].mean() * 100
    return out.reset_index()


def table1_rows(runs: list[logs.RunLog]) -> pd.DataFrame:
    """Table 1's columns for each run's first (step 0: its starting checkpoint) and last validation."""
    rows = []
    for run in runs:
        scores = _domain_scores(run.validation)
        if scores.empty:
            continue
        for _, s in scores.iloc[[0, -1]].drop_duplicates("step").iterrows():
            upto = run.steps[run.steps["step"] <= s["step"]]
            rows.append(
                {
                    "method": ARM_LABELS.get(run.arm, run.arm),
                    "n_rollouts": run.n_rollouts,
                    "prompts_per_step": run.prompts_per_step,
                    "steps": f"+{int(s['step'])}",
                    "samples_k": float(upto["samples"].max() / 1000 if len(upto) else 0.0),
                    "time_h": float(s["hours"]),
                    "math_score": s["math_score"],
                    "code_score": s["code_score"],
                    "reasoning_gym_score": s["reasoning_gym_score"],
                    "source": source_label(run),
                }
            )
    return pd.DataFrame(rows)


def table1_beside_paper(runs: list[logs.RunLog]) -> pd.DataFrame:
    """Table 1 as reported, then the rows of the runs found, each labelled in ``source``."""
    reported = paper.load("table1_efficiency").assign(source="reported")
    reported["samples_k"] = paper.samples_added(reported["samples_k"]) / 1000
    return pd.concat([reported, table1_rows(runs)], ignore_index=True)


def figure1_points(runs: list[logs.RunLog]) -> pd.DataFrame:
    """Score against hours per arm and domain: Table 1 (reported) and every run's validations."""

    rows = [paper.figure1_data().assign(source="reported")]
    for run in runs:
        s = _domain_scores(run.validation)
        for col, domain in (("math_score", "Math"), ("code_score", "Code"), ("reasoning_gym_score", "Reasoning Gym")):
            part = s[["hours", "step", col]].dropna()
            rows.append(
                pd.DataFrame(
                    {
                        "method": ARM_LABELS.get(run.arm, run.arm),
                        "hours": part["hours"],
                        "domain": domain,
                        "score": part[col],
                        "steps": part["step"].map(lambda x: f"+{x}"),
                        "source": source_label(run),
                    }
                )
            )
    return pd.concat(rows, ignore_index=True)


def figure4_points(runs: list[logs.RunLog]) -> pd.DataFrame:
    """pass@1 (acc) against hours for Figure 4's tasks, from the runs found (the paper tabulates none)."""
    rows = []
    for run in runs:
        v = run.validation
        part = v[(v["var"] == "acc") & v["task"].isin([*FIGURE4_TASKS, "apps"])]
        rows.append(
            pd.DataFrame(
                {
                    "task": part["task"],
                    "method": ARM_LABELS.get(run.arm, run.arm),
                    "hours": part["hours"],
                    "step": part["step"],
                    "pass_at_1": part["value"],
                    "source": source_label(run),
                }
            )
        )
    cols = ["task", "method", "hours", "step", "pass_at_1", "source"]
    return pd.concat(rows, ignore_index=True)[cols] if rows else pd.DataFrame(columns=cols)


def runs_summary(runs: list[logs.RunLog]) -> pd.DataFrame:
    """One line per arm run found: device, segments, last step, hours, samples, mean pass rate, and whether it
    is at the paper's scale (``at_paper_scale``: drawn in Figures 1 and 4)."""
    return pd.DataFrame(
        [
            {
                "run": r.run,
                "arm": r.arm,
                "N": r.n_rollouts,
                "prompts_per_step": r.prompts_per_step,
                "device": r.device,
                "segments": r.segments,
                "last_step": int(r.steps["step"].max()) if len(r.steps) else 0,
                "hours": float(r.steps["hours"].max()) if len(r.steps) else 0.0,
                "samples_k": float(r.steps["samples"].max() / 1000) if len(r.steps) else 0.0,
                "pass_rate": float(r.steps["pass_rate"].mean()),
                "paper_scale": at_paper_scale(r),
            }
            for r in runs
        ],
        columns=[
            "run",
            "arm",
            "N",
            "prompts_per_step",
            "device",
            "segments",
            "last_step",
            "hours",
            "samples_k",
            "pass_rate",
            "paper_scale",
        ],
    )


def paper_steps(arm: str) -> int:
    """RL steps a run of ``arm`` must reach to count as the paper's scale: the steps of the arm's last
    (longest) Table 1 row (ProRL +535, BroRL +191), the rows the paper compares the arms at (our choice;
    its earlier rows, +225 / +107, are intermediate points of the same runs)."""
    t1 = paper.table1_arms()
    return int(t1.loc[t1["method"] == ARM_LABELS[arm], "steps_added"].max())


def last_trained_step(run: logs.RunLog) -> int:
    """The last step the run trained (0 when it only validated)."""
    trained = run.steps.loc[run.steps["kept_groups"] > 0, "step"]
    return int(trained.max()) if len(trained) else 0


def at_paper_scale(run: logs.RunLog) -> bool:
    """The paper's N and prompts per step for the arm, its 16k response length, and at least ``paper_steps``."""
    return (
        run.arm in configs.PAPER_ARMS
        and (run.n_rollouts, run.prompts_per_step) == configs.PAPER_ARMS[run.arm]
        and run.max_response_length >= configs.MAX_RESPONSE_LENGTH
        and last_trained_step(run) >= paper_steps(run.arm)
    )


def runs_provenance(runs: list[logs.RunLog]) -> str:
    """ "reported" without runs; "reproduced" if every run is at the paper's scale (``at_paper_scale``:
    batch shape, 16k responses, Table 1's step count for its arm); else "scaled-down" (e.g. a short smoke
    run at the paper's batch shape)."""
    if not runs:
        return "reported"
    return "reproduced" if all(at_paper_scale(r) for r in runs) else "scaled-down"


def paper_scale_runs(runs: list[logs.RunLog]) -> list[logs.RunLog]:
    """The runs Figures 1 and 4 draw on the paper's axes: those ``at_paper_scale``."""
    return [r for r in runs if at_paper_scale(r)]


def cpu_runs(runs: list[logs.RunLog]) -> list[logs.RunLog]:
    """Runs of verl's trainer on a CPU (``trainer.device`` cpu: the harness in ``verl_recipe.cpu``)."""
    return [r for r in runs if r.device == "cpu"]


def arm_label(run: logs.RunLog, with_run: bool = False) -> str:
    """The arm and its batch shape as logged, e.g. "ProRL arm, N=16 × 4 prompts" (and the run's name if asked)."""
    prompts = f"{run.prompts_per_step:,} prompt{'s' if run.prompts_per_step != 1 else ''}"
    label = f"{ARM_LABELS.get(run.arm, run.arm)} arm, N={run.n_rollouts:,} × {prompts}"
    return f"{label} (run {run.run})" if with_run else label


CPU_RUN_COLUMNS = ["run", "method", "label", "panel", "step", "value"]
TRAIN_PANEL = "training score"


def cpu_run_points(runs: list[logs.RunLog]) -> pd.DataFrame:
    """Per CPU run and arm, against steps: validation pass@1 (``acc``) per task (panel "pass@1: <task>") and
    the mean training reward of each step (panel ``TRAIN_PANEL``); ``label`` from ``arm_label``. Arms in the
    paper's order (ProRL first) within each run."""
    order = list(configs.PAPER_ARMS)
    chosen = sorted(cpu_runs(runs), key=lambda r: (r.run, order.index(r.arm) if r.arm in order else len(order)))
    several = len({r.run for r in chosen}) > 1
    rows = []
    for run in chosen:
        label = arm_label(run, with_run=several)
        val = run.validation[run.validation["var"] == "acc"]
        trained = run.steps[run.steps["kept_groups"] > 0]
        parts = [
            pd.DataFrame({"panel": "pass@1: " + val["task"], "step": val["step"], "value": val["value"]}),
            pd.DataFrame({"panel": TRAIN_PANEL, "step": trained["step"], "value": trained["train_score"]}),
        ]
        for part in parts:
            rows.append(part.dropna().assign(run=run.run, method=ARM_LABELS.get(run.arm, run.arm), label=label))
    if not rows:
        return pd.DataFrame(columns=CPU_RUN_COLUMNS)
    return pd.concat(rows, ignore_index=True)[CPU_RUN_COLUMNS]


NO_CPU_RUN = "no run of verl's trainer on a CPU under data/runs/verl: `make verl-cpu-run` makes one"


def paper_scale_note() -> str:
    """One line when no run is at the paper's scale: what that takes, and where the commands are."""
    shape = "; ".join(
        f"{ARM_LABELS[a]} N={n} × {p} prompts for {paper_steps(a)} steps" for a, (n, p) in configs.PAPER_ARMS.items()
    )
    return (
        f"no run at the paper's scale under data/runs/verl ({shape}, {configs.MAX_RESPONSE_LENGTH:,}-token "
        "responses): Figures 1 and 4 from runs are not drawn; recipes/brorl/README.md gives the commands that make "
        "one on a 64-GPU Ray cluster (bash recipes/brorl/<arm>/launch.sh)"
    )


def config_diff_table(prepared: Prepared) -> pd.DataFrame:
    """Keys where the composed arms differ; paths shown relative to the repository (machine-independent)."""
    diff = configs.config_diff(prepared.configs)

    def show(v):
        if isinstance(v, str) and v.startswith("/"):
            p = Path(v)
            return str(p.relative_to(REPO_ROOT)) if p.is_relative_to(REPO_ROOT) else f".../{p.name}"
        return v

    return diff.apply(lambda col: col.map(show) if col.name != "key" else col)


def script_preview(script: Path, lines: int = 14) -> str:
    """The first ``lines`` of a launch script, the repository path shown as <repo>."""
    return "\n".join(script.read_text().splitlines()[:lines]).replace(str(REPO_ROOT), "<repo>")


# --- evaluations of the arms' checkpoints: the paper's paired t-test (§4.2.2) ---
BASELINE_EVAL_LABEL = "baseline-prorlv2-3k"  # evaluation label of the starting checkpoint (Table 1's Baseline)
ARM_EVAL_LABEL = "{arm}-step{step}"  # evaluation label of an arm's checkpoint after ``step`` RL steps
_ARM_EVAL = re.compile(r"^(?P<arm>prorl|brorl)-step(?P<step>\d+)$")
TTEST_COLUMNS = ["source", "treatment", "control", "mean_difference", "t", "p", "n", "n_unpaired", "cohen_dz", "note"]


def latest_arm_checkpoints(labels) -> dict[str, str]:
    """arm -> the label (``ARM_EVAL_LABEL``) of its checkpoint with the most RL steps among ``labels``."""
    best: dict[str, tuple[int, str]] = {}
    for label in labels:
        m = _ARM_EVAL.match(label)
        if m and int(m["step"]) > best.get(m["arm"], (-1, ""))[0]:
            best[m["arm"]] = (int(m["step"]), label)
    return {arm: best[arm][1] for arm in configs.PAPER_ARMS if arm in best}


def paired_test_table(results_dir: Path) -> pd.DataFrame:
    """The paper's §4.2.2 test, one-tailed, BroRL > ProRL, on per-instance pass@1 pooled over every
    instance: its reported statistics, then the same test (``evaluation.metrics.paired_comparison``) on
    the latest evaluated checkpoint of each arm under ``results_dir`` when both arms have one.
    Differences are in pass@1 (fractions)."""
    from brorl_lib.evaluation import metrics
    from brorl_lib.evaluation import results as res

    stat = paper.load("ttest").set_index("statistic")["value"]
    rows = [
        {
            "source": "reported",
            "treatment": ARM_LABELS["brorl"],
            "control": ARM_LABELS["prorl"],
            "mean_difference": stat["mean_difference"],
            "t": stat["t"],
            "p": stat["p_one_tailed"],
            "n": int(stat["n_instances_lower_bound"]),
            "n_unpaired": pd.NA,
            "cohen_dz": np.nan,
            "note": f"n is a lower bound ('over 10,000'); final checkpoints at about {stat['training_hours']:g} h",
        }
    ]
    arms = latest_arm_checkpoints(res.checkpoints(results_dir))
    if len(arms) == len(configs.PAPER_ARMS):
        results = res.load_results(results_dir, [arms["brorl"], arms["prorl"]])
        test = metrics.paired_comparison(results, arms["brorl"], arms["prorl"], alternative="greater")
        rows.append(
            {
                "source": "evaluated",
                "treatment": arms["brorl"],
                "control": arms["prorl"],
                **{k: test[k] for k in ("mean_difference", "t", "p", "n", "n_unpaired", "cohen_dz")},
                "note": "instances evaluated for both checkpoints",
            }
        )
    return pd.DataFrame(rows, columns=TTEST_COLUMNS)


def evaluated_arms_note(results_dir: Path) -> str:
    """One line: which arms' checkpoints ``paired_test_table`` found under ``results_dir`` (or that none are)."""
    from brorl_lib.evaluation import results as res

    where = Path(results_dir)
    shown = where.relative_to(REPO_ROOT) if where.is_relative_to(REPO_ROOT) else where
    labels = res.checkpoints(where)
    if not labels:
        return f"no evaluated checkpoints under {shown}: the paired test is the paper's reported one only"
    arms = latest_arm_checkpoints(labels)
    missing = [a for a in configs.PAPER_ARMS if a not in arms]
    if missing:
        return (
            f"{len(labels)} evaluated checkpoint(s) under {shown}, none of arm(s) {missing} (labels "
            f"{ARM_EVAL_LABEL}, as recipes/brorl/evaluate.sh writes them): the paired test is the reported "
            "one only"
        )
    return f"paired test of {arms['brorl']} against {arms['prorl']} (evaluated under {shown}) beside the reported one"


def plan_claim(plan: pd.DataFrame) -> Claim:
    """The results-at-a-glance row of notebook 05: each arm's estimated time on the cluster (``plan_table``)."""
    said = [
        f"{ARM_LABELS.get(r['arm'], r['arm'])}: N={r['N']} × {r['prompts_per_step']} prompts, {r['steps']} steps, "
        f"≈{r['expected_hours']:,.1f} h "
        f"({r['expected_gpu_hours']:,.0f} GPU-hours)"
        for r in plan.to_dict("records")
    ]
    gpus = " or ".join(str(g) for g in sorted(set(plan["gpus"])))
    return Claim(
        claim="Table 1's two runs, re-made with verl's trainer (ProRL N=16, BroRL N=512)",
        verdict=f"planned on {gpus} GPUs, not a measurement: " + "; ".join(said),
        caveat="a plan from the paper's Table 1 on 64 H100s, not a run; the recipe's CPU run is a test of the harness",
        figure="verl_plan",
    )
